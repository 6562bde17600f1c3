#include "server/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "server/limits_file.h"
#include "server/store/event_log.h"
#include "server/store/keys.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/status_matchers.h"

ABSL_DECLARE_FLAG(int, max_holds);
ABSL_DECLARE_FLAG(absl::Duration, default_ttl);
ABSL_DECLARE_FLAG(std::string, store);
ABSL_DECLARE_FLAG(std::vector<std::string>, operators);
ABSL_DECLARE_FLAG(std::string, redis_url);
ABSL_DECLARE_FLAG(std::string, redis_password_file);
ABSL_DECLARE_FLAG(std::string, scope_limits);
ABSL_DECLARE_FLAG(absl::Duration, reap_interval);
ABSL_DECLARE_FLAG(std::optional<absl::Duration>, reaper_lease);
ABSL_DECLARE_FLAG(std::string, redis_mode);
ABSL_DECLARE_FLAG(std::string, redis_sentinel_master);
ABSL_DECLARE_FLAG(std::string, authz_policy);
ABSL_DECLARE_FLAG(std::optional<bool>, reflection);
ABSL_DECLARE_FLAG(std::string, tenants);
ABSL_DECLARE_FLAG(std::string, tls_cert_file);
ABSL_DECLARE_FLAG(std::string, tls_key_file);
ABSL_DECLARE_FLAG(std::string, tls_client_ca_file);

namespace orderhold {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(KeySchemaTest, UserAndIndexShareTheHashTag) {
  store::KeySchema keys("orderhold");
  const int partition = store::KeySchema::PartitionOf("alice");
  EXPECT_EQ(keys.OutcomesKey("alice"), absl::StrCat("orderhold:{", partition, "}:x:alice"));
  EXPECT_EQ(keys.BucketIndexKey(partition), absl::StrCat("orderhold:{", partition, "}:bdue"));
  EXPECT_EQ(keys.OutcomesKey("{x}"),
            keys.PartitionPrefix(store::KeySchema::PartitionOf("{x}")) + "x:{x}");
  // FNV-1a is fixed: these values are part of the data model and must never change.
  EXPECT_EQ(store::KeySchema::PartitionOf(""), 2166136261u % 64);
  EXPECT_EQ(store::KeySchema::PartitionOf("a"), 0xe40c292cu % 64);
  // The due-index bucket: the hash bits above the partition's (FNV-1a-32("alice") = 2267157479,
  // "bob" = 2261164244; the migration of the due index before buckets computes the same in Lua:
  // store/lua/migrations/v1_layout.lua).
  EXPECT_EQ(store::KeySchema::DueBucketOf("a"), 0xe40c292cu / 64 % 256);
  EXPECT_EQ(keys.DueBucketKey("alice"), "orderhold:{39}:hd:79");
  EXPECT_EQ(keys.DueBucketKey("bob"), "orderhold:{20}:hd:131");
  EXPECT_EQ(keys.BucketIndexKey(20), "orderhold:{20}:bdue");
  // The prefixes are built once, for every partition; a copy has its own.
  const store::KeySchema copy = keys;
  EXPECT_EQ(copy.PartitionPrefix(0), "orderhold:{0}:");
  EXPECT_EQ(copy.PartitionPrefix(store::KeySchema::kPartitionCount - 1), "orderhold:{63}:");
  EXPECT_EQ(copy.EventsKey(7), "orderhold:{7}:events");
}

TEST(KeySchemaTest, PiecesJoinToTheKeys) {
  const store::KeySchema keys("oh");
  // Pieces view the id: the key of a long id (past std::string's inline room) is whole.
  const std::string id(40, 'z');
  const int partition = store::KeySchema::PartitionOf(id);
  const store::KeySchema::UserKeys user = keys.ForUser(id);
  EXPECT_EQ(user.partition, partition);
  EXPECT_EQ(user.bucket, store::KeySchema::DueBucketOf(id));
  EXPECT_EQ(user.outcomes.partition_prefix, absl::StrCat("oh:{", partition, "}:"));
  EXPECT_EQ(user.outcomes.kind, "x:");
  EXPECT_EQ(user.outcomes.id, id);
  EXPECT_EQ(user.outcomes.Join(), absl::StrCat("oh:{", partition, "}:x:", id));
  EXPECT_EQ(user.ended.Join(), absl::StrCat("oh:{", partition, "}:xt:", id));
  EXPECT_EQ(user.events.Join(), absl::StrCat("oh:{", partition, "}:events"));
  EXPECT_EQ(user.bucket_index.Join(), absl::StrCat("oh:{", partition, "}:bdue"));
  EXPECT_EQ(keys.OutcomesKey("alice"), "oh:{39}:x:alice");
  EXPECT_EQ(keys.EndedKey("alice"), "oh:{39}:xt:alice");
  EXPECT_EQ(keys.DueBucketKey("alice"), "oh:{39}:hd:79");
  EXPECT_EQ(keys.HoldsBucketKey("alice"), "oh:{39}:h:79");
  EXPECT_EQ(keys.BucketIndexKey(39), "oh:{39}:bdue");
  EXPECT_EQ(keys.EventsKey(39), "oh:{39}:events");
  EXPECT_EQ(keys.ForUser("alice").holds_bucket.id, "79");
  EXPECT_EQ(keys.ForUser("alice").due_bucket.kind, "hd:");
  EXPECT_EQ(keys.BucketIndexKeyPieces(0).id, "");
  // The bucket table: every bucket, the first and the last too, written in decimal. 20,000 ids
  // reach all 256 buckets (a miss would fail the count).
  std::set<int> buckets;
  for (int i = 0; i < 20000; ++i) {
    const std::string user_id = absl::StrCat("user-", i);
    const int bucket = store::KeySchema::DueBucketOf(user_id);
    const std::string prefix = absl::StrCat("oh:{", store::KeySchema::PartitionOf(user_id), "}:");
    ASSERT_EQ(keys.DueBucketKey(user_id), absl::StrCat(prefix, "hd:", bucket)) << user_id;
    ASSERT_EQ(keys.HoldsBucketKey(user_id), absl::StrCat(prefix, "h:", bucket)) << user_id;
    buckets.insert(bucket);
  }
  EXPECT_EQ(buckets.size(), static_cast<size_t>(store::KeySchema::kDueBucketCount));
  for (int p : {0, store::KeySchema::kPartitionCount - 1}) {
    EXPECT_EQ(keys.EventsKeyPieces(p).Join(), absl::StrCat("oh:{", p, "}:events"));
    EXPECT_EQ(keys.BucketIndexKeyPieces(p).Join(), absl::StrCat("oh:{", p, "}:bdue"));
  }
}

TEST(ConfigTest, DefaultsAreValidAndBadValuesNameTheSetting) {
  Config config;
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.key_prefix = "a{b}";
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("key_prefix")));
  config = Config{};
  config.policy.max_holds = 0;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("max_holds")));
  config = Config{};
  config.policy.max_units = -1;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("max_units")));
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
  config.max_watches = 0;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("max_watches")));
  config = Config{};
  config.grpc_limits.max_concurrent_streams = 0;
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("grpc_max_concurrent_streams: must be 1-1000000")));
  config = Config{};
  config.grpc_limits.max_receive_message_bytes = 1000;
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("grpc_max_receive_message_size: must be 65536-")));
  config = Config{};
  config.grpc_limits.keepalive_time = absl::Milliseconds(500);
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("grpc_keepalive_time: must be at least 1s")));
  config = Config{};
  config.grpc_limits.max_connection_age = absl::Milliseconds(10);
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("grpc_max_connection_age: must be at least 1s (or 0")));
  config = Config{};
  config.grpc_limits.max_connection_age_grace = absl::Milliseconds(10);
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("grpc_max_connection_age_grace: must be at least 1s")));
  config = Config{};
  config.reaper_lease = config.reap_interval;
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("reaper_lease")));
}

// ConfigFromFlags parses --redis_url and reads the --scope_limits file, once, into the typed values
// App wires; their errors are its own. ValidateConfig parses and reads nothing.
TEST(ConfigTest, RedisUrlIsParsedAndTheScopeLimitsFileReadOnceByConfigFromFlags) {
  const std::string limits = ORDERHOLD_DEPLOY_DIR "/limits.example.yaml";
  absl::FlagSaver restore_flags;
  absl::SetFlag(&FLAGS_redis_url, "rediss://app:hunter2@redis.local:6380/2");
  absl::SetFlag(&FLAGS_scope_limits, limits);
  ASSERT_OK_AND_ASSIGN(const Config config, ConfigFromFlags());
  EXPECT_EQ(config.redis_url.hosts, (std::vector<redis::HostPort>{{"redis.local", 6380}}));
  EXPECT_TRUE(config.redis_url.tls);
  EXPECT_EQ(config.redis_url.user, "app");
  EXPECT_EQ(config.redis_url.password, "hunter2");
  EXPECT_EQ(config.redis_url.db, 2);
  EXPECT_EQ(config.scope_limits_file, limits);
  ASSERT_OK_AND_ASSIGN(const domain::ScopeRules rules, LoadLimitsFile(limits));
  ASSERT_FALSE(rules.rules().empty());
  ASSERT_EQ(config.scope_rules.rules().size(), rules.rules().size());
  for (size_t i = 0; i < rules.rules().size(); ++i) {
    EXPECT_EQ(config.scope_rules.rules()[i].prefix, rules.rules()[i].prefix) << i;
  }

  absl::SetFlag(&FLAGS_redis_url, "nope");
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("redis_url")));
  absl::SetFlag(&FLAGS_redis_url, "redis://127.0.0.1:6379");
  absl::SetFlag(&FLAGS_scope_limits, "/nonexistent/limits.yaml");
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, HasSubstr("scope_limits: /nonexistent/limits.yaml")));
  absl::SetFlag(&FLAGS_scope_limits, "");
  ASSERT_OK_AND_ASSIGN(const Config without_file, ConfigFromFlags());
  EXPECT_TRUE(without_file.scope_rules.rules().empty());

  // A lone credential is the ACL user beside a password file (the kits' "redis://orderhold@redis"),
  // else the legacy password.
  absl::SetFlag(&FLAGS_redis_url, "redis://orderhold@127.0.0.1:6379");
  ASSERT_OK_AND_ASSIGN(const Config legacy, ConfigFromFlags());
  EXPECT_EQ(legacy.redis_url.user, "");
  EXPECT_EQ(legacy.redis_url.password, "orderhold");
  absl::SetFlag(&FLAGS_redis_password_file, ORDERHOLD_DEPLOY_DIR "/limits.example.yaml");
  ASSERT_OK_AND_ASSIGN(const Config with_file, ConfigFromFlags());
  EXPECT_EQ(with_file.redis_url.user, "orderhold");
  EXPECT_EQ(with_file.redis_url.password, "");
  absl::SetFlag(&FLAGS_redis_url, "redis://orderhold:pw@127.0.0.1:6379");
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, HasSubstr("redis_password_file: the redis_url carries")));

  // The file is App's to read again (on SIGHUP), not ValidateConfig's.
  Config named;
  named.scope_limits_file = "/nonexistent/limits.yaml";
  EXPECT_THAT(ValidateConfig(named), IsOk());
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

// --operators holds typed identities only: a bare SPIFFE ID (which would match a DNS SAN of the
// same text as well), a kind with nothing after it, an entry over 1 KiB and a list over 100 are
// refused at start, naming the flag.
TEST(ConfigTest, OperatorsMustBeTypedIdentitiesWithinBounds) {
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"spiffe://x/op"}, std::vector<std::string>{"uri:"},
        std::vector<std::string>{"email:a@b"},
        std::vector<std::string>{"uri:" + std::string(1021, 'a')},
        std::vector<std::string>(101, "dns:a.example")}) {
    absl::SetFlag(&FLAGS_operators, bad);
    EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("operators:")));
  }
  absl::SetFlag(&FLAGS_operators, std::vector<std::string>{"subject:CN=ops"});
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_TRUE(config->events.operators.contains("subject:CN=ops"));
  absl::SetFlag(&FLAGS_operators, std::vector<std::string>{});
}

// --hold_layout was removed: given with any value (the old default, an empty one), on the command
// line or through its variable, it stops the start saying where to read on; it is no setting.
TEST(ConfigTest, RemovedHoldLayoutFlagIsRefusedWhateverItsValue) {
  const std::string removed =
      "--hold_layout was removed: this release keeps one hold layout and moves older data by "
      "itself; see server/README.md \"Upgrading\"";
  absl::FlagSaver restore_flags;
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_THAT(DescribeConfig(*config), Not(HasSubstr("hold_layout")));
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag("hold_layout");
  ASSERT_NE(flag, nullptr);
  for (const char* value : {"v1", "read_v2", "v2", "v3", ""}) {
    {
      absl::FlagSaver restore_flag;
      std::string error;
      ASSERT_TRUE(flag->ParseFrom(value, &error)) << value << ": " << error;
      EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, removed)) << value;
    }
    absl::FlagSaver restore_flag;
    setenv("ORDERHOLD_HOLD_LAYOUT", value, 1);
    const absl::Status applied = ApplyEnvironmentFallbacks();
    unsetenv("ORDERHOLD_HOLD_LAYOUT");
    ASSERT_THAT(applied, IsOk()) << value;
    EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, removed)) << value;
  }
  EXPECT_THAT(ConfigFromFlags(), IsOk());
}

TEST(ConfigTest, DescribesEveryDefaultAndTheStructMatchesTheFlags) {
  absl::FlagSaver restore_flags;
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(DescribeConfig(*config),
            "grpc_address=0.0.0.0:50051 metrics_address=0.0.0.0:9464 health_address= "
            "authz_policy= authz_policy_refresh_interval=10s tenants= tenants_refresh_interval=10s "
            "reflection=true tls_cert_file= "
            "tls_key_file= tls_client_ca_file= tls_refresh_interval=1m "
            "grpc_max_concurrent_streams=1000 grpc_max_receive_message_size=1048576 "
            "grpc_memory_quota=268435456 "
            "grpc_keepalive_time=1m grpc_keepalive_timeout=20s grpc_max_connection_idle=15m "
            "grpc_max_connection_age=30m grpc_max_connection_age_grace=5m "
            "redis_url=redis://127.0.0.1:6379/0 redis_password_file= redis_mode=standalone "
            "redis_sentinel_master= redis_sentinel_username= redis_sentinel_password= "
            "redis_sentinel_password_file= redis_tls_ca_file= "
            "redis_tls_cert_file= redis_tls_key_file= redis_tls_server_name= max_holds=3 "
            "max_units=0 scope_limits= request_scope_limits=ceiling default_ttl=30m max_ttl=24h "
            "max_hold_lifetime=2h max_extensions=0 "
            "reap_interval=1s scope_clock_margin=2s scope_pending_age=3s key_prefix=orderhold "
            "redis_connections=4 redis_timeout=1s redis_inline_wait=1ms redis_functions=true "
            "redis_wait_replicas=0 "
            "redis_wait_timeout=500ms "
            "health_check_interval=1s outcome_retention=72h max_outcomes_per_user=1000 "
            "layout_migration_done=false "
            "event_ack_timeout=30s event_retention=24h event_stream_max_len=100000 "
            "event_stream_max_bytes=33554432 max_watches=1000 "
            "max_watches_per_caller=100 trusted_proxies= "
            "consumer_idle_timeout=1h max_consumer_groups=100 operators= reaper_lease=3s "
            "store=redis "
            "log_format=text shutdown_grace=10s");
  EXPECT_EQ(DescribeConfig(Config{}), DescribeConfig(*config));
}

// Flags config.cc still defines only to refuse them (its Removed rows): not settings.
const std::set<std::string> kRemovedFlags = {"hold_layout"};

// The flags config.cc defines (removed ones aside), found through absl rather than through
// config.cc's own table, so that a flag added without its row fails the tests below.
std::vector<absl::CommandLineFlag*> ServerFlags() {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), "server/config.cc") &&
        !kRemovedFlags.contains(std::string(name))) {
      flags.push_back(flag);
    }
  }
  return flags;
}

std::string EnvironmentVariable(absl::string_view flag) {
  return absl::StrCat("ORDERHOLD_", absl::AsciiStrToUpper(flag));
}

TEST(ConfigTest, DescribeConfigListsEveryFlag) {
  const std::vector<absl::CommandLineFlag*> flags = ServerFlags();
  ASSERT_GE(flags.size(), 27u);
  const std::string described = absl::StrCat(" ", DescribeConfig(Config{}));
  for (const absl::CommandLineFlag* flag : flags) {
    EXPECT_THAT(described, HasSubstr(absl::StrCat(" ", flag->Name(), "="))) << flag->Name();
  }
}

// For each flag: a value other than its default, set through ORDERHOLD_<NAME>; where it must land
// in Config; and how DescribeConfig must then show it.
struct Sample {
  std::string flag;
  std::string value;
  std::string described;                      // "name=..." in DescribeConfig
  std::function<bool(const Config&)> landed;  // the value is in its Config field
  // Other tokens that change: through the value (reap_interval moves reaper_lease) or through
  // `with`.
  std::vector<std::string> also_described = {};
  // Other flags (name, value) the value needs to be valid, set through their variables too
  // (--redis_sentinel_master needs --redis_mode=sentinel).
  std::vector<std::pair<std::string, std::string>> with = {};
};

// The flags sentinel mode needs.
const std::vector<std::pair<std::string, std::string>> kSentinelMode = {
    {"redis_mode", "sentinel"}, {"redis_sentinel_master", "mymaster"}};
const std::vector<std::string> kSentinelModeDescribed = {"redis_mode=sentinel",
                                                         "redis_sentinel_master=mymaster"};

// Samples of the gRPC port, its TLS, policy and tenants.
std::vector<Sample> ServerSamples() {
  return {
      {"grpc_address", "127.0.0.1:1", "grpc_address=127.0.0.1:1",
       [](const Config& c) { return c.grpc_address == "127.0.0.1:1"; }},
      {"metrics_address", "127.0.0.1:2", "metrics_address=127.0.0.1:2",
       [](const Config& c) { return c.metrics_address == "127.0.0.1:2"; }},
      {"health_address", "127.0.0.1:3", "health_address=127.0.0.1:3",
       [](const Config& c) { return c.health_address == "127.0.0.1:3"; }},
      {"reflection", "false", "reflection=false", [](const Config& c) { return !c.reflection; }},
      {"authz_policy",
       ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json",
       "authz_policy=" ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json",
       [](const Config& c) {
         return c.authz.policy_file == ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json" &&
                c.authz.loaded.has_value() && c.authz.loaded->policy->rule_count() == 5;
       },
       {"reflection=false"}},  // reflection is never on under a policy
      {"authz_policy_refresh_interval", "3s", "authz_policy_refresh_interval=3s",
       [](const Config& c) { return c.authz.refresh_interval == absl::Seconds(3); }},
      {"tenants",
       ORDERHOLD_DEPLOY_DIR "/tenants.example.json",
       "tenants=" ORDERHOLD_DEPLOY_DIR "/tenants.example.json",
       [](const Config& c) {
         return c.tenants.file == ORDERHOLD_DEPLOY_DIR "/tenants.example.json" &&
                c.tenants.loaded.has_value() && c.tenants.loaded->tenants.size() == 2;
       },
       {"tls_cert_file=/tls/c.pem", "tls_key_file=/tls/k.pem", "tls_client_ca_file=/tls/ca.pem"},
       {{"tls_cert_file", "/tls/c.pem"},
        {"tls_key_file", "/tls/k.pem"},
        {"tls_client_ca_file", "/tls/ca.pem"}}},
      {"tenants_refresh_interval", "4s", "tenants_refresh_interval=4s",
       [](const Config& c) { return c.tenants.refresh_interval == absl::Seconds(4); }},
      {"tls_cert_file",
       "/tls/c.pem",
       "tls_cert_file=/tls/c.pem",
       [](const Config& c) { return c.grpc_tls.cert_file == "/tls/c.pem"; },
       {"tls_key_file=/tls/k.pem"},
       {{"tls_key_file", "/tls/k.pem"}}},
      {"tls_key_file",
       "/tls/k.pem",
       "tls_key_file=/tls/k.pem",
       [](const Config& c) { return c.grpc_tls.key_file == "/tls/k.pem"; },
       {"tls_cert_file=/tls/c.pem"},
       {{"tls_cert_file", "/tls/c.pem"}}},
      {"tls_client_ca_file",
       "/tls/ca.pem",
       "tls_client_ca_file=/tls/ca.pem",
       [](const Config& c) { return c.grpc_tls.client_ca_file == "/tls/ca.pem"; },
       {"tls_cert_file=/tls/c.pem", "tls_key_file=/tls/k.pem"},
       {{"tls_cert_file", "/tls/c.pem"}, {"tls_key_file", "/tls/k.pem"}}},
      {"tls_refresh_interval", "5s", "tls_refresh_interval=5s",
       [](const Config& c) { return c.grpc_tls.refresh_interval == absl::Seconds(5); }},
      {"grpc_max_concurrent_streams", "50", "grpc_max_concurrent_streams=50",
       [](const Config& c) { return c.grpc_limits.max_concurrent_streams == 50; }},
      {"grpc_max_receive_message_size", "70000", "grpc_max_receive_message_size=70000",
       [](const Config& c) { return c.grpc_limits.max_receive_message_bytes == 70000; }},
      {"grpc_memory_quota", "33554432", "grpc_memory_quota=33554432",
       [](const Config& c) { return c.grpc_limits.memory_quota_bytes == 33554432; }},
      {"grpc_keepalive_time", "2m", "grpc_keepalive_time=2m",
       [](const Config& c) { return c.grpc_limits.keepalive_time == absl::Minutes(2); }},
      {"grpc_keepalive_timeout", "5s", "grpc_keepalive_timeout=5s",
       [](const Config& c) { return c.grpc_limits.keepalive_timeout == absl::Seconds(5); }},
      {"grpc_max_connection_idle", "0", "grpc_max_connection_idle=0",
       [](const Config& c) { return c.grpc_limits.max_connection_idle == absl::ZeroDuration(); }},
      {"grpc_max_connection_age_grace", "30s", "grpc_max_connection_age_grace=30s",
       [](const Config& c) { return c.grpc_limits.max_connection_age_grace == absl::Seconds(30); }},
      {"grpc_max_connection_age", "1h", "grpc_max_connection_age=1h",
       [](const Config& c) { return c.grpc_limits.max_connection_age == absl::Hours(1); }},
  };
}

// Samples of the Redis connection: URL, mode, Sentinel, TLS.
std::vector<Sample> RedisSamples() {
  return {
      {"redis_url", "redis://u:hunter2@h:7/3", "redis_url=redis://u:****@h:7/3",
       [](const Config& c) {
         return c.redis_url.hosts == std::vector<redis::HostPort>{{"h", 7}} &&
                c.redis_url.user == "u" && c.redis_url.password == "hunter2" &&
                c.redis_url.db == 3 && !c.redis_url.tls;
       }},
      // Any readable, non-empty file passes for a password file.
      {"redis_password_file", ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       "redis_password_file=" ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       [](const Config& c) {
         return c.redis_password_file == ORDERHOLD_DEPLOY_DIR "/limits.example.yaml";
       }},
      {"redis_mode",
       "sentinel",
       "redis_mode=sentinel",
       [](const Config& c) { return c.redis_mode == RedisMode::kSentinel; },
       {"redis_sentinel_master=m"},
       {{"redis_sentinel_master", "m"}}},
      {"redis_sentinel_master",
       "mymaster",
       "redis_sentinel_master=mymaster",
       [](const Config& c) { return c.redis_sentinel_master == "mymaster"; },
       {"redis_mode=sentinel"},
       {{"redis_mode", "sentinel"}}},
      {"redis_sentinel_username",
       "watcher",
       "redis_sentinel_username=watcher",
       [](const Config& c) { return c.redis_sentinel_username == "watcher"; },
       {"redis_mode=sentinel", "redis_sentinel_master=mymaster", "redis_sentinel_password=****"},
       {{"redis_mode", "sentinel"},
        {"redis_sentinel_master", "mymaster"},
        {"redis_sentinel_password", "hunter2"}}},
      {"redis_sentinel_password", "hunter2", "redis_sentinel_password=****",
       [](const Config& c) { return c.redis_sentinel_password == "hunter2"; },
       kSentinelModeDescribed, kSentinelMode},
      {"redis_sentinel_password_file", ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       "redis_sentinel_password_file=" ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       [](const Config& c) {
         return c.redis_sentinel_password_file == ORDERHOLD_DEPLOY_DIR "/limits.example.yaml";
       },
       kSentinelModeDescribed, kSentinelMode},
      {"redis_tls_ca_file",
       "/etc/redis/ca.pem",
       "redis_tls_ca_file=/etc/redis/ca.pem",
       [](const Config& c) { return c.redis_tls.ca_file == "/etc/redis/ca.pem"; },
       {"redis_url=rediss://h:6379/0"},
       {{"redis_url", "rediss://h"}}},
      {"redis_tls_cert_file",
       "/c.pem",
       "redis_tls_cert_file=/c.pem",
       [](const Config& c) { return c.redis_tls.cert_file == "/c.pem"; },
       {"redis_url=rediss://h:6379/0", "redis_tls_key_file=/k.pem"},
       {{"redis_url", "rediss://h"}, {"redis_tls_key_file", "/k.pem"}}},
      {"redis_tls_key_file",
       "/k.pem",
       "redis_tls_key_file=/k.pem",
       [](const Config& c) { return c.redis_tls.key_file == "/k.pem"; },
       {"redis_url=rediss://h:6379/0", "redis_tls_cert_file=/c.pem"},
       {{"redis_url", "rediss://h"}, {"redis_tls_cert_file", "/c.pem"}}},
      {"redis_tls_server_name",
       "redis.example",
       "redis_tls_server_name=redis.example",
       [](const Config& c) { return c.redis_tls.server_name == "redis.example"; },
       {"redis_url=rediss://10.0.0.1:6379/0"},
       {{"redis_url", "rediss://10.0.0.1"}}},
  };
}

// Samples of holds, limits, scopes and the Redis client's tuning.
std::vector<Sample> HoldSamples() {
  return {
      {"max_holds", "5", "max_holds=5", [](const Config& c) { return c.policy.max_holds == 5; }},
      {"max_units", "8", "max_units=8", [](const Config& c) { return c.policy.max_units == 8; }},
      {"scope_limits", ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       "scope_limits=" ORDERHOLD_DEPLOY_DIR "/limits.example.yaml",
       [](const Config& c) {
         return c.scope_limits_file == ORDERHOLD_DEPLOY_DIR "/limits.example.yaml" &&
                !c.scope_rules.rules().empty();
       }},
      {"request_scope_limits", "replace", "request_scope_limits=replace",
       [](const Config& c) {
         return c.policy.request_scope_limits == domain::RequestScopeLimits::kReplace;
       }},
      {"default_ttl", "45s", "default_ttl=45s",
       [](const Config& c) { return c.policy.default_ttl == absl::Seconds(45); }},
      {"max_ttl", "2h", "max_ttl=2h",
       [](const Config& c) { return c.policy.max_ttl == absl::Hours(2); }},
      {"max_hold_lifetime", "1h30m", "max_hold_lifetime=1h30m",
       [](const Config& c) { return c.policy.max_hold_lifetime == absl::Minutes(90); }},
      {"max_extensions", "5", "max_extensions=5",
       [](const Config& c) { return c.policy.max_extensions == 5; }},
      {"reap_interval",
       "2s",
       "reap_interval=2s",
       [](const Config& c) { return c.reap_interval == absl::Seconds(2); },
       {"reaper_lease=6s"}},
      {"key_prefix", "oh", "key_prefix=oh", [](const Config& c) { return c.key_prefix == "oh"; }},
      {"redis_connections", "8", "redis_connections=8",
       [](const Config& c) { return c.redis_connections == 8; }},
      {"redis_timeout", "250ms", "redis_timeout=250ms",
       [](const Config& c) { return c.redis_timeout == absl::Milliseconds(250); }},
      {"redis_inline_wait", "2ms", "redis_inline_wait=2ms",
       [](const Config& c) { return c.redis_inline_wait == absl::Milliseconds(2); }},
      {"redis_functions", "false", "redis_functions=false",
       [](const Config& c) { return !c.redis_functions; }},
      {"redis_wait_replicas", "2", "redis_wait_replicas=2",
       [](const Config& c) { return c.redis_wait_replicas == 2; }},
      {"redis_wait_timeout", "200ms", "redis_wait_timeout=200ms",
       [](const Config& c) { return c.redis_wait_timeout == absl::Milliseconds(200); }},
      {"scope_clock_margin", "500ms", "scope_clock_margin=500ms",
       [](const Config& c) { return c.scope_protocol.margin == absl::Milliseconds(500); }},
      {"scope_pending_age", "5s", "scope_pending_age=5s",
       [](const Config& c) { return c.scope_pending_age == absl::Seconds(5); }},
  };
}

// Samples of outcomes, events, watches, groups, the reaper and the process.
std::vector<Sample> EventSamples() {
  return {
      {"health_check_interval", "5s", "health_check_interval=5s",
       [](const Config& c) { return c.health_check_interval == absl::Seconds(5); }},
      {"outcome_retention", "1h", "outcome_retention=1h",
       [](const Config& c) { return c.outcomes.retention == absl::Hours(1); }},
      {"layout_migration_done", "true", "layout_migration_done=true",
       [](const Config& c) { return c.outcomes.layout_migration_done; }},
      {"max_outcomes_per_user", "10", "max_outcomes_per_user=10",
       [](const Config& c) { return c.outcomes.max_per_user == 10; }},
      {"event_ack_timeout", "10s", "event_ack_timeout=10s",
       [](const Config& c) { return c.events.ack_timeout == absl::Seconds(10); }},
      {"event_retention", "2h", "event_retention=2h",
       [](const Config& c) { return c.event_retention == absl::Hours(2); }},
      {"event_stream_max_len", "500", "event_stream_max_len=500",
       [](const Config& c) { return c.outcomes.event_stream_max_len == 500; }},
      {"event_stream_max_bytes", "65536", "event_stream_max_bytes=65536",
       [](const Config& c) { return c.outcomes.event_stream_max_bytes == 65536; }},
      {"max_watches", "7", "max_watches=7", [](const Config& c) { return c.max_watches == 7; }},
      {"max_watches_per_caller", "5", "max_watches_per_caller=5",
       [](const Config& c) { return c.max_watches_per_caller == 5; }},
      {"trusted_proxies", "10.0.0.0/8,fd00::/8", "trusted_proxies=10.0.0.0/8,fd00::/8",
       [](const Config& c) {
         return c.trusted_proxies.Contains("10.1.2.3") && c.trusted_proxies.Contains("fd00::1") &&
                !c.trusted_proxies.Contains("192.168.0.1");
       }},
      {"consumer_idle_timeout", "2h", "consumer_idle_timeout=2h",
       [](const Config& c) { return c.consumer_idle_timeout == absl::Hours(2); }},
      {"max_consumer_groups", "6", "max_consumer_groups=6",
       [](const Config& c) { return c.events.max_groups_per_caller == 6; }},
      {"operators", "dns:ops.example,uri:spiffe://x/op",
       "operators=dns:ops.example,uri:spiffe://x/op",
       [](const Config& c) {
         return c.events.operators ==
                absl::flat_hash_set<std::string>{"uri:spiffe://x/op", "dns:ops.example"};
       }},
      {"reaper_lease", "9s", "reaper_lease=9s",
       [](const Config& c) { return c.reaper_lease == absl::Seconds(9); }},
      {"store", "noop", "store=noop", [](const Config& c) { return c.store == StoreKind::kNoop; }},
      {"log_format", "json", "log_format=json",
       [](const Config& c) { return c.log_format == LogFormat::kJson; }},
      {"shutdown_grace", "3s", "shutdown_grace=3s",
       [](const Config& c) { return c.shutdown_grace == absl::Seconds(3); }},
  };
}

// One sample per flag, in the order DescribeConfig lists them.
const std::vector<Sample>& Samples() {
  static const auto* const samples = [] {
    auto* all = new std::vector<Sample>;
    for (auto group : {ServerSamples, RedisSamples, HoldSamples, EventSamples}) {
      for (Sample& sample : group()) all->push_back(std::move(sample));
    }
    return all;
  }();
  return *samples;
}

const Sample* SampleOf(absl::string_view flag) {
  for (const Sample& sample : Samples()) {
    if (sample.flag == flag) return &sample;
  }
  return nullptr;
}

TEST(ConfigTest, EveryFlagHasAnEnvironmentFallback) {
  const std::vector<absl::CommandLineFlag*> flags = ServerFlags();
  ASSERT_GE(flags.size(), 27u);
  EXPECT_EQ(flags.size(), Samples().size());
  for (absl::CommandLineFlag* flag : flags) {
    const Sample* sample = SampleOf(flag->Name());
    ASSERT_NE(sample, nullptr) << "no Sample for --" << flag->Name();
    absl::FlagSaver restore_flags;
    const std::string variable = EnvironmentVariable(flag->Name());
    setenv(variable.c_str(), sample->value.c_str(), 1);
    EXPECT_THAT(ApplyEnvironmentFallbacks(), IsOk()) << variable;
    unsetenv(variable.c_str());
    EXPECT_EQ(flag->CurrentValue(), sample->value) << variable;
  }
}

// Per row of config.cc's table: the flag's value lands in its own Config field and changes its
// own DescribeConfig token, and no other.
TEST(ConfigTest, EachFlagLandsInItsFieldAndDescription) {
  const std::vector<std::string> defaults = absl::StrSplit(DescribeConfig(Config{}), ' ');
  for (const Sample& sample : Samples()) {
    absl::FlagSaver restore_flags;
    const std::string variable = EnvironmentVariable(sample.flag);
    std::vector<std::pair<std::string, std::string>> settings = sample.with;
    settings.emplace_back(sample.flag, sample.value);
    for (const auto& [flag, value] : settings) {
      setenv(EnvironmentVariable(flag).c_str(), value.c_str(), 1);
    }
    ASSERT_THAT(ApplyEnvironmentFallbacks(), IsOk()) << variable;
    for (const auto& [flag, value] : settings) unsetenv(EnvironmentVariable(flag).c_str());
    auto config = ConfigFromFlags();
    ASSERT_THAT(config, IsOk()) << variable;
    EXPECT_TRUE(sample.landed(*config)) << variable;
    std::vector<std::string> changes = sample.also_described;
    changes.push_back(sample.described);
    std::vector<std::string> expected = defaults;
    for (std::string& token : expected) {
      for (const std::string& changed : changes) {
        if (token.substr(0, token.find('=')) == changed.substr(0, changed.find('='))) {
          token = changed;
        }
      }
    }
    EXPECT_EQ(DescribeConfig(*config), absl::StrJoin(expected, " ")) << variable;
  }
}

// Reflection lists every method to any caller the handshake admits and no policy covers it: off
// with --authz_policy unless asked for, on without one, as given when given.
TEST(ConfigTest, ReflectionFollowsThePolicyUnlessGiven) {
  absl::FlagSaver restore_flags;
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_TRUE(config->reflection);
  absl::SetFlag(&FLAGS_authz_policy, ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json");
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_FALSE(config->reflection);
  // Asked for under a policy: refused (no way to check reflection against it: fail closed).
  absl::SetFlag(&FLAGS_reflection, true);
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("reflection: cannot be on with")));
  absl::SetFlag(&FLAGS_reflection, std::nullopt);
  absl::SetFlag(&FLAGS_authz_policy, "");
  absl::SetFlag(&FLAGS_reflection, false);
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_FALSE(config->reflection);
}

TEST(ConfigTest, TenantsNeedVerifiedClientCertificatesAndABadFileStopsTheStart) {
  absl::FlagSaver restore_flags;
  absl::SetFlag(&FLAGS_tenants, ORDERHOLD_DEPLOY_DIR "/tenants.example.json");
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, HasSubstr("tenants: needs --tls_client_ca_file")));
  absl::SetFlag(&FLAGS_tls_cert_file, "/tls/c.pem");
  absl::SetFlag(&FLAGS_tls_key_file, "/tls/k.pem");
  absl::SetFlag(&FLAGS_tls_client_ca_file, "/tls/ca.pem");
  EXPECT_THAT(ConfigFromFlags(), IsOk());
  absl::SetFlag(&FLAGS_tenants, ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json");
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("nested deeper than 4")));
  absl::SetFlag(&FLAGS_tenants, ORDERHOLD_DEPLOY_DIR "/limits.example.json");
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("unknown field")));
}

// A null in the policy is refused where it is, never read as an unset field ("principals": [null]
// read as [] would match every caller), and so is a list inside a list of names; the same policy
// without them starts.
TEST(ConfigTest, APolicyWithNullOrANestedListStopsTheStart) {
  absl::FlagSaver restore_flags;
  const std::string file = ::testing::TempDir() + "/config-test-policy-with-null.json";
  absl::SetFlag(&FLAGS_authz_policy, file);
  // A one-rule policy whose rule has `source` and `request`.
  auto policy = [](absl::string_view source, absl::string_view request) {
    return absl::StrCat(R"({"name": "p", "allow_rules": [{"name": "storefront", "source": )",
                        source, R"(, "request": )", request, "}]}");
  };
  constexpr char kSource[] = R"({"principals": ["spiffe://orderhold.example/storefront"]})";
  constexpr char kRequest[] = R"({"paths": ["/orderhold.v1.OrderHold/PlaceHold"]})";
  std::ofstream(file) << policy(kSource, kRequest);
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  ASSERT_TRUE(config->authz.loaded.has_value());
  EXPECT_EQ(config->authz.loaded->policy->rule_count(), 1);
  const struct {
    std::string text;
    std::string error;
  } bad[] = {
      {policy(R"({"principals": [null]})", kRequest),
       "allow_rules[0].source.principals[0]: null is not allowed"},
      {policy("null", kRequest), "allow_rules[0].source: null is not allowed"},
      {policy(kSource, R"({"paths": [null]})"),
       "allow_rules[0].request.paths[0]: null is not allowed"},
      {policy(kSource, "null"), "allow_rules[0].request: null is not allowed"},
      {policy(R"({"principals": [["spiffe://orderhold.example/storefront"]]})", kRequest),
       "allow_rules[0].source.principals[0]: is not a string (a list)."},
  };
  for (const auto& [text, error] : bad) {
    std::ofstream(file) << text;
    EXPECT_THAT(ConfigFromFlags(),
                StatusIs(kInvalid, AllOf(HasSubstr(absl::StrCat("authz_policy: ", file, ": ")),
                                         HasSubstr(error))))
        << text;
  }
  std::remove(file.c_str());
}

// What a deployment is warned about at start (App::TrustWarnings): each weak spot once, none for
// the closed kit's shape (mTLS, a policy, no reflection, the password in a 0600 file).
TEST(ConfigTest, TrustWarningsNameEachWeakSpotAndNoneForTheClosedShape) {
  Config config;
  config.grpc_address = "0.0.0.0:50051";
  config.reflection = false;
  EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("without TLS")));
  config.grpc_tls.cert_file = "/c.pem";
  config.grpc_tls.key_file = "/k.pem";
  EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("without --tls_client_ca_file")));
  config.grpc_tls.client_ca_file = "/ca.pem";
  EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("without --authz_policy")));
  config.authz.policy_file = "/policy.json";
  EXPECT_THAT(App::TrustWarnings(config), IsEmpty());
  // (Reflection under a policy is no warning: ValidateConfig refuses it.)
  config.redis_url.password = "hunter2";
  EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("--redis_url carries a password")));
  config.redis_url.password.clear();
  // A password file: 0600 and 0640 of the server's own group (a Kubernetes Secret with fsGroup)
  // are quiet; readable by others, or by another group, is warned about.
  const std::string file = ::testing::TempDir() + "/trust-warnings-password";
  std::ofstream(file) << "pw\n";
  config.redis_password_file = file;
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  EXPECT_THAT(App::TrustWarnings(config), IsEmpty());
  ASSERT_EQ(chown(file.c_str(), static_cast<uid_t>(-1), getegid()), 0);
  ASSERT_EQ(chmod(file.c_str(), 0640), 0);
  EXPECT_THAT(App::TrustWarnings(config), IsEmpty());
  ASSERT_EQ(chmod(file.c_str(), 0644), 0);
  EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("(mode 0644): chmod 0600")));
  if (geteuid() == 0) {  // only root may give the file to a group it is not in
    ASSERT_EQ(chmod(file.c_str(), 0640), 0);
    ASSERT_EQ(chown(file.c_str(), static_cast<uid_t>(-1), getegid() + 4242), 0);
    EXPECT_THAT(App::TrustWarnings(config), ElementsAre(HasSubstr("(mode 0640)")));
  }
  std::remove(file.c_str());
  // Loopback is a developer's machine: no port warning.
  config = Config{};
  config.grpc_address = "127.0.0.1:50051";
  EXPECT_THAT(App::TrustWarnings(config), IsEmpty());
}

TEST(ConfigTest, ReaperLeaseFollowsReapIntervalUnlessGiven) {
  absl::FlagSaver restore_flags;
  // An operator turning the reaper nearly off with one flag.
  absl::SetFlag(&FLAGS_reap_interval, absl::Hours(1));
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->reaper_lease, absl::Hours(3));
  EXPECT_THAT(DescribeConfig(*config), HasSubstr("reaper_lease=3h"));
  // The same through the environment, and with ORDERHOLD_REAPER_LEASE set but empty.
  absl::SetFlag(&FLAGS_reap_interval, absl::Seconds(1));
  setenv("ORDERHOLD_REAP_INTERVAL", "20m", 1);
  setenv("ORDERHOLD_REAPER_LEASE", "", 1);
  ASSERT_THAT(ApplyEnvironmentFallbacks(), IsOk());
  unsetenv("ORDERHOLD_REAP_INTERVAL");
  unsetenv("ORDERHOLD_REAPER_LEASE");
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->reaper_lease, absl::Hours(1));

  // A lease given is taken as is, and still checked against the interval.
  absl::SetFlag(&FLAGS_reap_interval, absl::Hours(1));
  absl::SetFlag(&FLAGS_reaper_lease, absl::Hours(2));
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->reaper_lease, absl::Hours(2));
  absl::SetFlag(&FLAGS_reaper_lease, absl::Seconds(3));
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, HasSubstr("reaper_lease: must be longer than reap_interval")));
  absl::SetFlag(&FLAGS_reaper_lease, absl::Hours(1));
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("reaper_lease")));
  absl::SetFlag(&FLAGS_reaper_lease, std::nullopt);
  setenv("ORDERHOLD_REAPER_LEASE", "3s", 1);
  ASSERT_THAT(ApplyEnvironmentFallbacks(), IsOk());
  unsetenv("ORDERHOLD_REAPER_LEASE");
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, HasSubstr("reaper_lease")));
}

TEST(ConfigTest, AsksForUsageSpotsEveryHelpFlag) {
  using Args = std::vector<const char*>;
  for (const Args& args : {Args{"s", "--help"}, Args{"s", "-helpfull"}, Args{"s", "--helpshort"},
                           Args{"s", "--max_holds=2", "--helpon=config"},
                           Args{"s", "--helpmatch", "x"}, Args{"s", "--helppackage"}}) {
    EXPECT_TRUE(AsksForUsage(static_cast<int>(args.size()), args.data())) << args.back();
  }
  for (const Args& args : {Args{"s"}, Args{"s", "--max_holds=2"}, Args{"s", "--", "--help"},
                           Args{"s", "help"}, Args{"s", "--key_prefix=help"}}) {
    EXPECT_FALSE(AsksForUsage(static_cast<int>(args.size()), args.data())) << args.back();
  }
}

TEST(ConfigTest, NoErrorOrDescriptionCarriesTheRedisPassword) {
  absl::FlagSaver restore_flags;
  for (const char* url : {"redis://default:hunter2", "redis://u:hunter2@h:0",
                          "redis://u:hunter2%zz@h", "http://u:hunter2@h", "redis://u:hunter2@",
                          "redis://app:hunter2@s1:26379,,s2", "redis://app:hunter2@[::1"}) {
    absl::SetFlag(&FLAGS_redis_url, url);
    auto from_flags = ConfigFromFlags();
    EXPECT_THAT(from_flags, StatusIs(kInvalid, HasSubstr("redis_url"))) << url;
    EXPECT_THAT(from_flags.status().ToString(), Not(HasSubstr("hunter2"))) << url;

    setenv("ORDERHOLD_REDIS_URL", url, 1);
    absl::SetFlag(&FLAGS_redis_url, "redis://127.0.0.1:6379");
    const absl::Status applied = ApplyEnvironmentFallbacks();
    unsetenv("ORDERHOLD_REDIS_URL");
    EXPECT_THAT(applied.ToString(), Not(HasSubstr("hunter2"))) << url;
    from_flags = ConfigFromFlags();
    EXPECT_THAT(from_flags, StatusIs(kInvalid, HasSubstr("redis_url"))) << url;
    EXPECT_THAT(from_flags.status().ToString(), Not(HasSubstr("hunter2"))) << url;
  }
  // A valid URL: the password reaches Config (the client needs it) but not the description, nor
  // an error about another setting.
  absl::SetFlag(&FLAGS_redis_url, "redis://app:hunter2@redis.local:6380/2");
  absl::SetFlag(&FLAGS_max_holds, 0);
  EXPECT_THAT(ConfigFromFlags(), StatusIs(kInvalid, Not(HasSubstr("hunter2"))));
  absl::SetFlag(&FLAGS_max_holds, 3);
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->redis_url.password, "hunter2");
  EXPECT_THAT(DescribeConfig(*config), HasSubstr("redis_url=redis://app:****@redis.local:6380/2"));
  EXPECT_THAT(DescribeConfig(*config), Not(HasSubstr("hunter2")));
}

// A valid sentinel-mode Config: three sentinels, a master name, credentials for both.
Config SentinelConfig() {
  Config config;
  config.redis_url = ParsedRedisUrl("redis://app:hunter2@s1:26379,s2:26379,s3:26379");
  config.redis_mode = RedisMode::kSentinel;
  config.redis_sentinel_master = "mymaster";
  config.redis_sentinel_username = "watcher";
  config.redis_sentinel_password = "hunter3";
  return config;
}

TEST(ConfigTest, RedisModeChoosesStandaloneSentinelOrCluster) {
  absl::FlagSaver restore_flags;
  auto config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->redis_mode, RedisMode::kStandalone);
  absl::SetFlag(&FLAGS_redis_mode, "sentinel");
  absl::SetFlag(&FLAGS_redis_sentinel_master, "mymaster");
  absl::SetFlag(&FLAGS_redis_url, "redis://s1:26379,s2:26379");
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->redis_mode, RedisMode::kSentinel);
  absl::SetFlag(&FLAGS_redis_mode, "replicated");
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, HasSubstr("redis_mode: must be standalone, sentinel or cluster")));
  absl::SetFlag(&FLAGS_redis_mode, "cluster");
  // Sentinel settings have no meaning for a cluster.
  EXPECT_THAT(ConfigFromFlags(),
              StatusIs(kInvalid, AllOf(HasSubstr("redis_sentinel_master"),
                                       HasSubstr("only used with --redis_mode=sentinel"))));
  absl::SetFlag(&FLAGS_redis_sentinel_master, "");
  config = ConfigFromFlags();
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->redis_mode, RedisMode::kCluster);
}

TEST(ConfigTest, ClusterModeTakesSeedListsAndRefusesADatabaseOtherThanZero) {
  Config cluster;
  cluster.redis_mode = RedisMode::kCluster;
  cluster.redis_url = ParsedRedisUrl("redis://orderhold:pw@n1:7000,n2:7000,[::1]:7001");
  EXPECT_THAT(ValidateConfig(cluster), IsOk());
  cluster.redis_url = ParsedRedisUrl("redis://n1:7000/0");
  EXPECT_THAT(ValidateConfig(cluster), IsOk());
  cluster.redis_url = ParsedRedisUrl("redis://n1:7000,n2:7000/2");
  EXPECT_THAT(ValidateConfig(cluster),
              StatusIs(kInvalid, AllOf(HasSubstr("redis_url"), HasSubstr("only database 0"))));
}

TEST(ConfigTest, ClusterModeRefusesScopeTotalsItCannotEnforce) {
  Config cluster;
  cluster.redis_mode = RedisMode::kCluster;
  cluster.redis_url = ParsedRedisUrl("redis://n1:7000");
  auto rules = domain::ScopeRules::Create(domain::ScopeLimits{},
                                          {domain::ScopeRule{"event:", domain::ScopeLimits{2, 0}}});
  ASSERT_THAT(rules, IsOk());
  cluster.scope_rules = *rules;  // per-user limits only: fine
  EXPECT_THAT(ValidateConfig(cluster), IsOk());
  rules = domain::ScopeRules::Create(domain::ScopeLimits{}, {}, domain::ScopeTotals{100, 0});
  ASSERT_THAT(rules, IsOk());
  cluster.scope_rules = *rules;
  EXPECT_THAT(ValidateConfig(cluster),
              StatusIs(kInvalid, AllOf(HasSubstr("scope_limits"), HasSubstr("total_max_holds"),
                                       HasSubstr("--redis_mode=cluster"))));
  Config standalone;
  standalone.redis_url = ParsedRedisUrl("redis://n1:6379");
  standalone.scope_rules = *rules;
  EXPECT_THAT(ValidateConfig(standalone), IsOk());
  // A capacity: refused on a Cluster even with WAIT (it counts no sales), fine elsewhere.
  rules = domain::ScopeRules::Create(domain::ScopeLimits{}, {}, domain::ScopeTotals{}, 100);
  ASSERT_THAT(rules, IsOk());
  cluster.scope_rules = standalone.scope_rules = *rules;
  cluster.redis_wait_replicas = 1;
  EXPECT_THAT(ValidateConfig(cluster),
              StatusIs(kInvalid, AllOf(HasSubstr("scope_limits"), HasSubstr("capacity_units"),
                                       HasSubstr("--redis_mode=cluster"))));
  EXPECT_THAT(ValidateConfig(standalone), IsOk());
}

TEST(ConfigTest, SentinelModeNeedsAMasterNameAndStandaloneTakesNoSentinelSettings) {
  EXPECT_THAT(ValidateConfig(SentinelConfig()), IsOk());
  Config config = SentinelConfig();
  config.redis_url = ParsedRedisUrl("redis://s1");  // one sentinel is allowed (if unwise)
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config = SentinelConfig();
  config.redis_sentinel_username.clear();  // AUTH with a password only
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.redis_sentinel_password.clear();  // no AUTH to the sentinels
  EXPECT_THAT(ValidateConfig(config), IsOk());

  config = SentinelConfig();
  config.redis_sentinel_master.clear();
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("redis_sentinel_master: required with "
                                           "--redis_mode=sentinel")));
  config = SentinelConfig();
  config.redis_sentinel_password.clear();
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("redis_sentinel_username: needs "
                                                                   "--redis_sentinel_password")));

  // Standalone: one host, and no sentinel setting (it means --redis_mode=sentinel was forgotten).
  config = Config{};
  config.redis_url = ParsedRedisUrl("redis://a:1,b:2");
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, AllOf(HasSubstr("redis_url: lists 2 hosts"),
                                       HasSubstr("--redis_mode=standalone takes one"),
                                       HasSubstr("--redis_mode=sentinel"))));
  for (std::string Config::*field :
       {&Config::redis_sentinel_master, &Config::redis_sentinel_username,
        &Config::redis_sentinel_password}) {
    config = Config{};
    config.*field = std::string("x");
    EXPECT_THAT(ValidateConfig(config),
                StatusIs(kInvalid, HasSubstr("only used with --redis_mode=sentinel")));
  }
  config = Config{};
  config.redis_sentinel_password = "hunter3";
  EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("redis_sentinel_password: ")));
}

TEST(ConfigTest, TlsSettingsNeedARedissUrlAndCertificateAndKeyComeTogether) {
  const std::vector<std::pair<std::string, std::string redis::RedisTlsOptions::*>> fields = {
      {"redis_tls_ca_file", &redis::RedisTlsOptions::ca_file},
      {"redis_tls_cert_file", &redis::RedisTlsOptions::cert_file},
      {"redis_tls_key_file", &redis::RedisTlsOptions::key_file},
      {"redis_tls_server_name", &redis::RedisTlsOptions::server_name}};
  for (const auto& [flag, field] : fields) {
    Config config;
    config.redis_tls.*field = std::string("x");  // not = "x": GCC 12 -Wrestrict false alarm
    EXPECT_THAT(ValidateConfig(config),
                StatusIs(kInvalid, HasSubstr(flag + ": TLS settings need a rediss:// redis_url")))
        << flag;
  }
  Config config;
  config.redis_url = ParsedRedisUrl("rediss://app:hunter2@redis.example.com:6380");
  EXPECT_THAT(ValidateConfig(config), IsOk());  // the system's CAs, the URL's host
  config.redis_tls.ca_file = "ca.pem";
  config.redis_tls.server_name = "redis.internal";
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.redis_tls.cert_file = "client.pem";
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("redis_tls_cert_file: needs --redis_tls_key_file")));
  config.redis_tls.key_file = "client.key";
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.redis_tls.cert_file.clear();
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("redis_tls_key_file: needs --redis_tls_cert_file")));
  // Sentinel mode over TLS: the sentinels are reached over TLS too.
  config = SentinelConfig();
  config.redis_url = ParsedRedisUrl("rediss://app:hunter2@s1:26379,s2:26379");
  config.redis_tls.ca_file = "ca.pem";
  EXPECT_THAT(ValidateConfig(config), IsOk());
}

// The gRPC port's TLS: certificate and key together, mutual TLS only on top of TLS, and a refresh
// interval gRPC can take (whole seconds). The files are App::Start's to read.
TEST(ConfigTest, GrpcTlsNeedsCertificateAndKeyTogetherAndTheClientCaOnlyWithThem) {
  Config config;
  config.grpc_tls.cert_file = "/tls/tls.crt";
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("tls_cert_file: needs --tls_key_file")));
  config.grpc_tls.key_file = "/tls/tls.key";
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.grpc_tls.client_ca_file = "/tls/ca.crt";
  EXPECT_THAT(ValidateConfig(config), IsOk());
  config.grpc_tls.cert_file.clear();
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("tls_key_file: needs --tls_cert_file")));
  config = Config{};
  config.grpc_tls.client_ca_file = "/tls/ca.crt";
  EXPECT_THAT(ValidateConfig(config),
              StatusIs(kInvalid, HasSubstr("tls_client_ca_file: needs --tls_cert_file")));
  for (const absl::Duration bad : {absl::ZeroDuration(), absl::Milliseconds(500),
                                   absl::Milliseconds(1500), -absl::Seconds(1)}) {
    config = Config{};
    config.grpc_tls.refresh_interval = bad;
    EXPECT_THAT(ValidateConfig(config), StatusIs(kInvalid, HasSubstr("tls_refresh_interval")))
        << bad;
  }
  config.grpc_tls.refresh_interval = absl::Seconds(1);
  EXPECT_THAT(ValidateConfig(config), IsOk());
}

TEST(ConfigTest, WaitReplicasIsBoundedAndItsTimeoutIsAtLeastOneMillisecond) {
  Config config;
  for (int replicas : {1, 2, kMaxRedisWaitReplicas, kWaitAllReplicas}) {
    config.redis_wait_replicas = replicas;
    EXPECT_THAT(ValidateConfig(config), IsOk()) << replicas;
  }
  for (int replicas : {-2, kMaxRedisWaitReplicas + 1}) {
    config.redis_wait_replicas = replicas;
    EXPECT_THAT(ValidateConfig(config),
                StatusIs(kInvalid, HasSubstr("redis_wait_replicas: must be all or 0-16")))
        << replicas;
  }
  config = Config{};
  config.redis_wait_replicas = 1;
  for (absl::Duration timeout :
       {absl::ZeroDuration(), absl::Microseconds(999), -absl::Seconds(1)}) {
    config.redis_wait_timeout = timeout;
    EXPECT_THAT(ValidateConfig(config),
                StatusIs(kInvalid, HasSubstr("redis_wait_timeout: must be >= 1ms")))
        << timeout;
  }
  config.redis_wait_timeout = absl::Milliseconds(1);
  EXPECT_THAT(ValidateConfig(config), IsOk());
  // Longer than --redis_timeout is fine: the client adds it to the round trip's bound.
  config.redis_wait_timeout = absl::Seconds(5);
  EXPECT_THAT(ValidateConfig(config), IsOk());
  // Without WAIT the timeout is not used.
  config = Config{};
  config.redis_wait_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateConfig(config), IsOk());
}

TEST(ConfigTest, InlineWaitIsZeroToAHundredMilliseconds) {
  Config config;
  for (absl::Duration wait :
       {absl::ZeroDuration(), absl::Microseconds(500), absl::Milliseconds(100)}) {
    config.redis_inline_wait = wait;
    EXPECT_THAT(ValidateConfig(config), IsOk()) << wait;
  }
  for (absl::Duration wait : {-absl::Milliseconds(1), absl::Milliseconds(101)}) {
    config.redis_inline_wait = wait;
    EXPECT_THAT(ValidateConfig(config),
                StatusIs(kInvalid, HasSubstr("redis_inline_wait: must be 0-100ms")))
        << wait;
  }
}

// Both passwords set ("hunter2" in the URL, "hunter3" for the sentinels) while each Redis rule is
// broken in turn: no message and no description carries either.
TEST(ConfigTest, NoRedisErrorOrDescriptionCarriesEitherPassword) {
  const std::vector<std::function<void(Config&)>> breakages = {
      [](Config& c) { c.redis_mode = RedisMode::kCluster; },
      [](Config& c) { c.redis_sentinel_master.clear(); },
      [](Config& c) { c.redis_sentinel_password.clear(); },
      [](Config& c) { c.redis_mode = RedisMode::kStandalone; },
      [](Config& c) { c.redis_tls.ca_file = "ca.pem"; },
      [](Config& c) { c.redis_tls.server_name = "hunter2"; },
      [](Config& c) {
        c.redis_url = ParsedRedisUrl("rediss://app:hunter2@s1:26379");
        c.redis_tls.cert_file = "c.pem";
      },
      [](Config& c) { c.redis_wait_replicas = 17; },
      [](Config& c) {
        c.redis_wait_replicas = 1;
        c.redis_wait_timeout = absl::ZeroDuration();
      },
  };
  for (size_t i = 0; i < breakages.size(); ++i) {
    Config config = SentinelConfig();
    breakages[i](config);
    const absl::Status status = ValidateConfig(config);
    EXPECT_THAT(status, StatusIs(kInvalid)) << i;
    EXPECT_THAT(status.ToString(), Not(HasSubstr("hunter"))) << i;
    EXPECT_THAT(DescribeConfig(config), Not(HasSubstr("hunter3"))) << i;
  }
  const std::string described = DescribeConfig(SentinelConfig());
  EXPECT_THAT(described, HasSubstr("redis_sentinel_password=**** "));
  EXPECT_THAT(described, HasSubstr("redis_url=redis://app:****@s1:26379,s2:26379,s3:26379/0 "));
  EXPECT_THAT(described, Not(HasSubstr("hunter")));

  // Through the environment, in the wrong mode: the error names the variable's flag, not its value.
  absl::FlagSaver restore_flags;
  setenv("ORDERHOLD_REDIS_SENTINEL_PASSWORD", "hunter3", 1);
  const absl::Status applied = ApplyEnvironmentFallbacks();
  unsetenv("ORDERHOLD_REDIS_SENTINEL_PASSWORD");
  ASSERT_THAT(applied, IsOk());
  auto from_flags = ConfigFromFlags();
  EXPECT_THAT(from_flags, StatusIs(kInvalid, HasSubstr("redis_sentinel_password: only used")));
  EXPECT_THAT(from_flags.status().ToString(), Not(HasSubstr("hunter3")));
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
