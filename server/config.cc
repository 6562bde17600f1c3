#include "server/config.h"

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/store/redis_hold_store.h"
#include "server/store/redis_url.h"

ABSL_FLAG(std::string, grpc_address, "0.0.0.0:50051", "gRPC listen address (host:port).");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Prometheus /metrics listen address (host:port).");
ABSL_FLAG(std::string, redis_url, "redis://127.0.0.1:6379",
          "Redis: redis://[[user]:password@]host[:port][/db].");
ABSL_FLAG(int, max_holds, 3, "Max live (unpaid, unexpired) holds per user.");
ABSL_FLAG(absl::Duration, default_ttl, absl::Minutes(30),
          "Hold lifetime when a request gives none.");
ABSL_FLAG(absl::Duration, max_ttl, absl::Hours(24), "Longest ttl a request may ask for.");
ABSL_FLAG(absl::Duration, reap_interval, absl::Seconds(1),
          "Time between reaper ticks (with +-10% jitter).");
ABSL_FLAG(std::string, key_prefix, "orderhold", "Prefix of every Redis key.");
ABSL_FLAG(int, redis_connections, 4, "Redis connections (one I/O thread each).");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Seconds(1),
          "Bound on one Redis round trip; a call fails UNAVAILABLE after it.");
ABSL_FLAG(absl::Duration, health_check_interval, absl::Seconds(1),
          "How often Redis is pinged to report gRPC health.");
ABSL_FLAG(absl::Duration, outcome_retention, absl::Hours(24),
          "How long a hold's outcome (PAID/CANCELLED/EXPIRED) is remembered for idempotent "
          "Pay/CancelHold and to refuse placing an ended order again.");
ABSL_FLAG(int, max_outcomes_per_user, 1000,
          "Max outcome records kept per user (oldest dropped first): bounds memory per user.");
ABSL_FLAG(absl::Duration, event_ack_timeout, absl::Seconds(30),
          "A hold event not acked this long after delivery is redelivered.");
ABSL_FLAG(absl::Duration, event_retention, absl::Hours(24),
          "Hold events older than this are trimmed, acked or not (unacked ones are counted).");
ABSL_FLAG(absl::Duration, reaper_lease, absl::Seconds(3),
          "How long a dead replica keeps its reaping partitions before others take them over.");
ABSL_FLAG(std::string, store, "redis",
          "redis, or noop: BENCHMARKING ONLY, stores nothing and enforces no limit "
          "(tests/bench/run.sh uses it to measure the gRPC ceiling).");

namespace orderhold {
namespace {

constexpr const char* kFlagNames[] = {"grpc_address",
                                      "metrics_address",
                                      "redis_url",
                                      "max_holds",
                                      "default_ttl",
                                      "max_ttl",
                                      "reap_interval",
                                      "key_prefix",
                                      "redis_connections",
                                      "redis_timeout",
                                      "health_check_interval",
                                      "outcome_retention",
                                      "max_outcomes_per_user",
                                      "event_ack_timeout",
                                      "event_retention",
                                      "reaper_lease",
                                      "store"};

}  // namespace

absl::Status ValidateConfig(const Config& config) {
  if (config.grpc_address.empty()) return absl::InvalidArgumentError("grpc_address: empty");
  if (config.metrics_address.empty()) return absl::InvalidArgumentError("metrics_address: empty");
  if (auto endpoint = store::ParseRedisUrl(config.redis_url); !endpoint.ok()) {
    return endpoint.status();
  }
  if (absl::Status status = domain::ValidatePolicy(config.policy); !status.ok()) return status;
  if (absl::Status status = store::ValidateKeyPrefix(config.key_prefix); !status.ok()) {
    return status;
  }
  if (config.reap_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reap_interval: must be > 0");
  }
  if (config.redis_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis_timeout: must be > 0");
  }
  if (config.health_check_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("health_check_interval: must be > 0");
  }
  if (config.redis_connections < 1 || config.redis_connections > 64) {
    return absl::InvalidArgumentError("redis_connections: must be 1-64");
  }
  if (config.outcomes.retention < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("outcome_retention: must be >= 1ms");
  }
  if (config.outcomes.max_per_user < 1 || config.outcomes.max_per_user > 100000) {
    return absl::InvalidArgumentError("max_outcomes_per_user: must be 1-100000");
  }
  if (config.events.ack_timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError("event_ack_timeout: must be >= 1ms");
  }
  if (config.event_retention < absl::Seconds(1)) {
    return absl::InvalidArgumentError("event_retention: must be >= 1s");
  }
  if (config.reaper_lease <= config.reap_interval) {
    return absl::InvalidArgumentError("reaper_lease: must be longer than reap_interval");
  }
  return absl::OkStatus();
}

absl::Status ApplyEnvironmentFallbacks() {
  for (const char* name : kFlagNames) {
    const std::string variable = absl::StrCat("ORDERHOLD_", absl::AsciiStrToUpper(name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(variable, ": ", error));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config config;
  config.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  config.redis_url = absl::GetFlag(FLAGS_redis_url);
  config.policy.max_holds = absl::GetFlag(FLAGS_max_holds);
  config.policy.default_ttl = absl::GetFlag(FLAGS_default_ttl);
  config.policy.max_ttl = absl::GetFlag(FLAGS_max_ttl);
  config.reap_interval = absl::GetFlag(FLAGS_reap_interval);
  config.key_prefix = absl::GetFlag(FLAGS_key_prefix);
  config.redis_connections = absl::GetFlag(FLAGS_redis_connections);
  config.redis_timeout = absl::GetFlag(FLAGS_redis_timeout);
  config.health_check_interval = absl::GetFlag(FLAGS_health_check_interval);
  config.outcomes.retention = absl::GetFlag(FLAGS_outcome_retention);
  config.outcomes.max_per_user = absl::GetFlag(FLAGS_max_outcomes_per_user);
  config.events.ack_timeout = absl::GetFlag(FLAGS_event_ack_timeout);
  config.event_retention = absl::GetFlag(FLAGS_event_retention);
  config.reaper_lease = absl::GetFlag(FLAGS_reaper_lease);
  const std::string store = absl::GetFlag(FLAGS_store);
  if (store == "redis") {
    config.store = StoreKind::kRedis;
  } else if (store == "noop") {
    config.store = StoreKind::kNoop;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("store: must be redis or noop, got \"", store, "\""));
  }
  if (absl::Status status = ValidateConfig(config); !status.ok()) return status;
  return config;
}

std::string DescribeConfig(const Config& config) {
  auto endpoint = store::ParseRedisUrl(config.redis_url);
  return absl::StrCat(
      "grpc_address=", config.grpc_address, " metrics_address=", config.metrics_address,
      " redis_url=", endpoint.ok() ? endpoint->MaskedUrl() : "(invalid)",
      " max_holds=", config.policy.max_holds,
      " default_ttl=", absl::FormatDuration(config.policy.default_ttl),
      " max_ttl=", absl::FormatDuration(config.policy.max_ttl),
      " reap_interval=", absl::FormatDuration(config.reap_interval),
      " key_prefix=", config.key_prefix, " redis_connections=", config.redis_connections,
      " redis_timeout=", absl::FormatDuration(config.redis_timeout),
      " health_check_interval=", absl::FormatDuration(config.health_check_interval),
      " outcome_retention=", absl::FormatDuration(config.outcomes.retention),
      " max_outcomes_per_user=", config.outcomes.max_per_user,
      " event_ack_timeout=", absl::FormatDuration(config.events.ack_timeout),
      " event_retention=", absl::FormatDuration(config.event_retention),
      " reaper_lease=", absl::FormatDuration(config.reaper_lease),
      " store=", config.store == StoreKind::kNoop ? "noop" : "redis");
}

}  // namespace orderhold
