#include "server/config.h"

#include <cstdlib>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/keys.h"
#include "server/store/redis_url.h"
#include "tests/testing/status_matchers.h"

ABSL_DECLARE_FLAG(int, max_holds);
ABSL_DECLARE_FLAG(absl::Duration, default_ttl);
ABSL_DECLARE_FLAG(std::string, store);

namespace orderhold {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(RedisUrlTest, ParsesHostPortCredentialsAndDb) {
  auto endpoint = store::ParseRedisUrl("redis://app:p%40ss@redis.local:6380/2");
  ASSERT_THAT(endpoint, IsOk());
  EXPECT_EQ(endpoint->host, "redis.local");
  EXPECT_EQ(endpoint->port, 6380);
  EXPECT_EQ(endpoint->user, "app");
  EXPECT_EQ(endpoint->password, "p@ss");
  EXPECT_EQ(endpoint->db, 2);
  EXPECT_EQ(endpoint->MaskedUrl(), "redis://app:****@redis.local:6380/2");
  EXPECT_THAT(endpoint->MaskedUrl(), Not(HasSubstr("p@ss")));

  auto defaults = store::ParseRedisUrl("redis://127.0.0.1");
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(defaults->port, 6379);
  EXPECT_EQ(defaults->db, 0);
  auto password_only = store::ParseRedisUrl("redis://:secret@h:1");
  ASSERT_THAT(password_only, IsOk());
  EXPECT_EQ(password_only->user, "");
  EXPECT_EQ(password_only->password, "secret");
}

TEST(RedisUrlTest, RejectsMalformedUrls) {
  EXPECT_THAT(store::ParseRedisUrl("http://h:1"), StatusIs(kInvalid, HasSubstr("redis://")));
  EXPECT_THAT(store::ParseRedisUrl("redis://h:0"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(store::ParseRedisUrl("redis://h:99999"), StatusIs(kInvalid, HasSubstr("port")));
  EXPECT_THAT(store::ParseRedisUrl("redis://h:1/x"), StatusIs(kInvalid, HasSubstr("database")));
  EXPECT_THAT(store::ParseRedisUrl("redis://:1"), StatusIs(kInvalid, HasSubstr("host")));
  EXPECT_THAT(store::ParseRedisUrl("redis://u:%zz@h"), StatusIs(kInvalid, HasSubstr("escape")));
}

TEST(KeySchemaTest, UserAndIndexShareTheHashTag) {
  store::KeySchema keys("orderhold");
  const int shard = store::KeySchema::ShardOf("alice");
  EXPECT_EQ(keys.UserKey("alice"), absl::StrCat("orderhold:{", shard, "}:u:alice"));
  EXPECT_EQ(keys.DueKey(shard), absl::StrCat("orderhold:{", shard, "}:due"));
  EXPECT_EQ(keys.UserKey("{x}"), keys.ShardPrefix(store::KeySchema::ShardOf("{x}")) + "u:{x}");
  // FNV-1a is fixed: these values are part of the data model and must never change.
  EXPECT_EQ(store::KeySchema::ShardOf(""), 2166136261u % 64);
  EXPECT_EQ(store::KeySchema::ShardOf("a"), 0xe40c292cu % 64);
}

TEST(ConfigTest, DefaultsAreValidAndBadValuesNameTheSetting) {
  Config config;
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.redis_url = "nope";
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("redis_url")));
  config = Config{};
  config.key_prefix = "a{b}";
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("key_prefix")));
  config = Config{};
  config.policy.max_holds = 0;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("max_holds")));
  config = Config{};
  config.reap_interval = absl::ZeroDuration();
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("reap_interval")));
}

TEST(ConfigTest, EnvironmentFallbacksSetFlags) {
  setenv("ORDERHOLD_MAX_HOLDS", "5", 1);
  setenv("ORDERHOLD_DEFAULT_TTL", "45s", 1);
  ASSERT_THAT(ApplyEnvironmentFallbacks(), IsOk());
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->policy.max_holds, 5);
  EXPECT_EQ(config->policy.default_ttl, absl::Seconds(45));
  setenv("ORDERHOLD_MAX_HOLDS", "many", 1);
  EXPECT_THAT(ApplyEnvironmentFallbacks(), StatusIs(kInvalid, HasSubstr("ORDERHOLD_MAX_HOLDS")));
  unsetenv("ORDERHOLD_MAX_HOLDS");
  unsetenv("ORDERHOLD_DEFAULT_TTL");
  absl::SetFlag(&FLAGS_max_holds, 3);
  absl::SetFlag(&FLAGS_default_ttl, absl::Minutes(30));
}

TEST(ConfigTest, StoreFlagSelectsTheNoopStoreAndRejectsUnknownValues) {
  absl::SetFlag(&FLAGS_store, "noop");
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->store, StoreKind::kNoop);
  EXPECT_THAT(DescribeConfig(*config), HasSubstr("store=noop"));
  absl::SetFlag(&FLAGS_store, "memcached");
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("store: must be redis or noop")));
  absl::SetFlag(&FLAGS_store, "redis");
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->store, StoreKind::kRedis);
}

}  // namespace
}  // namespace orderhold
