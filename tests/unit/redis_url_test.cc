// ParseRedisUrl and MaskedUrl: what parses, what is refused, and that no error or masked URL ever
// carries the password.
#include "server/store/redis_url.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store {
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
}

TEST(RedisUrlTest, RejectsMalformedUrls) {
  EXPECT_THAT(ParseRedisUrl("http://h:1"), StatusIs(kInvalid, HasSubstr("redis://")));
  EXPECT_THAT(ParseRedisUrl("redis://h:0"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(ParseRedisUrl("redis://h:99999"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(ParseRedisUrl("redis://h:1/x"), StatusIs(kInvalid, HasSubstr("database")));
  EXPECT_THAT(ParseRedisUrl("redis://:1"), StatusIs(kInvalid, HasSubstr("host")));
  EXPECT_THAT(ParseRedisUrl("redis://u:%zz@h"), StatusIs(kInvalid, HasSubstr("escape")));
}

TEST(RedisUrlTest, MaskedUrlShowsNoPasswordWhateverTheAuthForm) {
  for (const char* url : {"redis://hunter2@h", "redis://:hunter2@h:7/1", "redis://u:hunter2@h",
                          "redis://u:hunt%65r2@h", "redis://u:hunter2@with@h"}) {
    auto endpoint = ParseRedisUrl(url);
    ASSERT_THAT(endpoint, IsOk()) << url;
    EXPECT_THAT(endpoint->password, HasSubstr("hunter2")) << url;
    EXPECT_THAT(endpoint->MaskedUrl(), Not(HasSubstr("hunter2"))) << url;
    EXPECT_THAT(endpoint->MaskedUrl(), HasSubstr(":****@")) << url;
  }
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
      {"rediss://u:hunter2@h:1", "redis://"},
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
}  // namespace orderhold::store
