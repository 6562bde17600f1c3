// ParseRedisUrl and MaskedUrl: what parses, what is refused, and that no error or masked URL ever
// carries the password.
#include "server/redis/redis_url.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(RedisUrlTest, ParsesHostPortCredentialsAndDb) {
  auto endpoint = ParseRedisUrl("redis://app:p%40ss@redis.local:6380/2");
  ASSERT_THAT(endpoint, IsOk());
  EXPECT_EQ(endpoint->hosts.front().host, "redis.local");
  EXPECT_EQ(endpoint->hosts.front().port, 6380);
  EXPECT_EQ(endpoint->user, "app");
  EXPECT_EQ(endpoint->password, "p@ss");
  EXPECT_EQ(endpoint->db, 2);
  EXPECT_EQ(endpoint->MaskedUrl(), "redis://app:****@redis.local:6380/2");
  EXPECT_THAT(endpoint->MaskedUrl(), Not(HasSubstr("p@ss")));

  auto defaults = ParseRedisUrl("redis://127.0.0.1");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->hosts.front().port, 6379);
  EXPECT_EQ(defaults->db, 0);
  auto password_only = ParseRedisUrl("redis://:secret@h:1");
  ASSERT_THAT(password_only, IsOk());
  EXPECT_EQ(password_only->user, "");
  EXPECT_EQ(password_only->password, "secret");
  EXPECT_FALSE(password_only->lone_credential);
  auto lone = ParseRedisUrl("redis://secret@h:1");
  ASSERT_THAT(lone, IsOk());
  EXPECT_EQ(lone->user, "");
  EXPECT_EQ(lone->password, "secret");
  EXPECT_TRUE(lone->lone_credential);
}

TEST(RedisUrlTest, ParsesTlsSchemeHostListsAndIpv6) {
  auto tls = ParseRedisUrl("rediss://app:pw@redis.example.com:6380/1");
  ASSERT_THAT(tls, IsOk());
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->hosts, (std::vector<HostPort>{{"redis.example.com", 6380}}));
  EXPECT_EQ(tls->MaskedUrl(), "rediss://app:****@redis.example.com:6380/1");
  auto plain = ParseRedisUrl("redis://h");
  ASSERT_THAT(plain, IsOk());
  EXPECT_FALSE(plain->tls);

  // The sentinels (or seed nodes), in order, each with its own port or 6379.
  auto list = ParseRedisUrl("rediss://app:pw@s1:26379,s2,[::1]:26380,[fe80::2]/0");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->hosts, (std::vector<HostPort>{
                             {"s1", 26379}, {"s2", 6379}, {"::1", 26380}, {"fe80::2", 6379}}));
  EXPECT_EQ(list->user, "app");
  EXPECT_EQ(list->password, "pw");
  EXPECT_EQ(list->MaskedUrl(), "rediss://app:****@s1:26379,s2:6379,[::1]:26380,[fe80::2]:6379/0");

  auto v6 = ParseRedisUrl("redis://[::1]:6380");
  ASSERT_THAT(v6, IsOk());
  EXPECT_EQ(v6->hosts, (std::vector<HostPort>{{"::1", 6380}}));
  EXPECT_EQ(v6->MaskedUrl(), "redis://[::1]:6380/0");
  auto v4_mapped = ParseRedisUrl("redis://[::ffff:127.0.0.1]");
  ASSERT_THAT(v4_mapped, IsOk());
  EXPECT_EQ(v4_mapped->hosts.front().host, "::ffff:127.0.0.1");
}

TEST(RedisUrlTest, MaskedUrlParsesBackToTheSameEndpoint) {
  for (const char* url : {"redis://h", "rediss://a%3Ab%40c%2Cd:pw@h1:1,[::1]:2/3",
                          "redis://:pw@h:7", "rediss://user@h"}) {
    auto endpoint = ParseRedisUrl(url);
    ASSERT_THAT(endpoint, IsOk()) << url;
    auto again = ParseRedisUrl(endpoint->MaskedUrl());
    ASSERT_THAT(again, IsOk()) << url;
    EXPECT_EQ(again->hosts, endpoint->hosts) << url;
    EXPECT_EQ(again->tls, endpoint->tls) << url;
    EXPECT_EQ(again->user, endpoint->user) << url;
    EXPECT_EQ(again->db, endpoint->db) << url;
    EXPECT_EQ(again->password, endpoint->password.empty() ? "" : "****") << url;
  }
}

TEST(RedisUrlTest, RejectsMalformedUrls) {
  EXPECT_THAT(ParseRedisUrl("http://h:1"), StatusIs(kInvalid, HasSubstr("redis://")));
  EXPECT_THAT(ParseRedisUrl("http://h:1"), StatusIs(kInvalid, HasSubstr("rediss://")));
  EXPECT_THAT(ParseRedisUrl("redis://h:0"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(ParseRedisUrl("redis://h:99999"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(ParseRedisUrl("redis://h:1/x"), StatusIs(kInvalid, HasSubstr("database")));
  EXPECT_THAT(ParseRedisUrl("redis://:1"), StatusIs(kInvalid, HasSubstr("host")));
  EXPECT_THAT(ParseRedisUrl("redis://u:%zz@h"), StatusIs(kInvalid, HasSubstr("escape")));
  // The host list and IPv6 forms: see NoErrorCarriesThePassword, which tries each with a password.
}

TEST(RedisUrlTest, MaskedUrlShowsNoPasswordWhateverTheAuthForm) {
  for (const char* url : {"redis://hunter2@h", "redis://:hunter2@h:7/1", "redis://u:hunter2@h",
                          "redis://u:hunt%65r2@h", "redis://u:hunter2@with@h",
                          "rediss://u:hunter2@a:1,b:2/0", "rediss://u:hunter2,x@[::1]"}) {
    auto endpoint = ParseRedisUrl(url);
    ASSERT_THAT(endpoint, IsOk()) << url;
    EXPECT_THAT(endpoint->password, HasSubstr("hunter2")) << url;
    EXPECT_THAT(endpoint->MaskedUrl(), Not(HasSubstr("hunter2"))) << url;
    EXPECT_THAT(endpoint->MaskedUrl(), HasSubstr(":****@")) << url;
  }
  auto several = ParseRedisUrl("rediss://app:hunter2@a:1,b:2/0");
  ASSERT_THAT(several, IsOk());
  EXPECT_EQ(several->MaskedUrl(), "rediss://app:****@a:1,b:2/0");
  auto user_only = ParseRedisUrl("redis://app:@h");
  ASSERT_THAT(user_only, IsOk());
  EXPECT_EQ(user_only->MaskedUrl(), "redis://app@h:6379/0");
  auto no_auth = ParseRedisUrl("redis://h");
  ASSERT_THAT(no_auth, IsOk());
  EXPECT_EQ(no_auth->MaskedUrl(), "redis://h:6379/0");
}

// Every error path, each with the password (plain and %-encoded) where an operator might have
// put it; the message names the part that is wrong and quotes none of the URL.
TEST(RedisUrlTest, NoErrorCarriesThePassword) {
  struct Case {
    std::string url;
    std::string names;  // what the message must mention
  };
  const std::vector<Case> cases = {
      {"http://u:hunter2@h:1", "redis://"},
      {"redis:/u:hunter2@h:1", "rediss://"},
      {"rediss:u:hunter2@h:1", "rediss://"},
      {"u:hunter2@h:1", "redis://"},
      {"hunter2", "redis://"},
      {"redis://u:hunter2%zz@h", "%-escape in the password"},
      {"redis://u:hunter2%4@h", "%-escape in the password"},
      {"redis://u:hunter2%@h", "%-escape in the password"},
      {"redis://u%zz:hunter2@h", "%-escape in the user"},
      {"redis://u:hunter2@h:0", "port"},
      {"redis://u:hunter2@h:99999", "port"},
      {"redis://u:hunter2@h:x", "port"},
      {"redis://default:hunter2", "port"},  // "@host" forgotten: the password is the "port"
      {"redis://default:hunt%65r2", "port"},
      {"redis://h:hunter2/0", "port"},
      {"redis://u:hunter2@h:1/x", "database"},
      {"redis://u:hunter2@h/-1", "database"},
      {"redis://h/hunter2", "database"},
      {"redis://u:hunter2@", "host"},
      {"redis://u:hunter2@:1", "host"},
      {"redis://u:hunter2@/0", "host"},
      // The host list, TLS scheme and IPv6 forms, with the password where it might end up.
      {"rediss://u:hunter2@h:0", "port"},
      {"rediss://default:hunter2", "port"},
      {"rediss://default:hunter2,h2", "port must be 1-65535 (host 1)"},
      {"redis://u:hunter2@h1,,h2", "empty element in the host list (host 2)"},
      {"redis://u:hunter2@h1,", "empty element in the host list (host 2)"},
      {"redis://u:hunter2@,h1", "empty element in the host list (host 1)"},
      {"redis://h1,hunter2:x", "port must be 1-65535 (host 2)"},
      {"redis://u:hunter2@h1,h1", "host 2 repeats host 1"},
      {"redis://default:hunter2:x", "IPv6 host must be in brackets"},
      {"redis://u:hunter2@::1", "IPv6 host must be in brackets"},
      {"redis://u:hunter2@[::1", "not closed"},
      {"redis://[hunter2]:1", "not an IPv6 address"},
      {"redis://u:hunter2@[::1]x", ":port after ']'"},
      {"redis://u:hunter2@[::1]:hunter2", "port"},
      {"redis://h,[hunter2", "not closed (host 2)"},
      {"redis://hunter2]", "brackets only go around an IPv6 host"},
      {"redis://u:hunter2@[]", "missing host"},
      {"rediss://u:hunter2@h1,h2/hunter2", "database"},
  };
  for (const Case& bad : cases) {
    auto endpoint = ParseRedisUrl(bad.url);
    ASSERT_THAT(endpoint, StatusIs(kInvalid, HasSubstr(bad.names))) << bad.url;
    const std::string text = endpoint.status().ToString();
    EXPECT_THAT(text, Not(HasSubstr("hunter2"))) << bad.url;
    EXPECT_THAT(text, Not(HasSubstr("hunt%65r2"))) << bad.url;
    EXPECT_THAT(std::string(endpoint.status().message()), StartsWith("redis_url: ")) << bad.url;
  }
}

}  // namespace
}  // namespace orderhold::redis
