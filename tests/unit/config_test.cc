#include "server/config.h"

#include <cstdlib>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/event_log.h"
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
  const int partition = store::KeySchema::PartitionOf("alice");
  EXPECT_EQ(keys.UserKey("alice"), absl::StrCat("orderhold:{", partition, "}:u:alice"));
  EXPECT_EQ(keys.DueKey(partition), absl::StrCat("orderhold:{", partition, "}:due"));
  EXPECT_EQ(keys.UserKey("{x}"),
            keys.PartitionPrefix(store::KeySchema::PartitionOf("{x}")) + "u:{x}");
  // FNV-1a is fixed: these values are part of the data model and must never change.
  EXPECT_EQ(store::KeySchema::PartitionOf(""), 2166136261u % 64);
  EXPECT_EQ(store::KeySchema::PartitionOf("a"), 0xe40c292cu % 64);
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
  config = Config{};
  config.outcomes.max_per_user = 0;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("max_outcomes_per_user")));
  config = Config{};
  config.outcomes.retention = absl::ZeroDuration();
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("outcome_retention")));
  config = Config{};
  config.events.ack_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("event_ack_timeout")));
  config = Config{};
  config.event_retention = absl::Milliseconds(10);
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("event_retention")));
  config = Config{};
  config.reaper_lease = config.reap_interval;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("reaper_lease")));
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

namespace orderhold {
namespace {

TEST(EventIdTest, RoundTripsAndRejectsMalformedIdsNamingTheField) {
  EXPECT_EQ(store::FormatEventId(17, "1795260789912-3"), "17/1795260789912-3");
  auto parsed = store::ParseEventId("17/1795260789912-3", 64);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first, 17);
  EXPECT_EQ(parsed->second, "1795260789912-3");
  for (const char* bad : {"", "17", "17/", "/1-0", "64/1-0", "-1/1-0", "a/1-0", "17/1", "17/1-",
                          "17/-1", "17/1-0-0", "17/1-x", "17/1-0/2", "17/ 1-0"}) {
    auto result = store::ParseEventId(bad, 64);
    EXPECT_TRUE(absl::IsInvalidArgument(result.status())) << bad;
    EXPECT_THAT(std::string(result.status().message()), ::testing::HasSubstr("event_ids")) << bad;
  }
}

}  // namespace
}  // namespace orderhold
