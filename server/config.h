// Config: every setting of orderhold-server in one struct with its defaults, filled from flags
// (with ORDERHOLD_<FLAG_UPPERCASE> environment fallbacks) and validated before anything starts.
#ifndef ORDERHOLD_SERVER_CONFIG_H_
#define ORDERHOLD_SERVER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/domain/event_service.h"
#include "server/domain/hold.h"
#include "server/store/hold_store.h"

namespace orderhold {

// --reaper_lease when neither the flag nor ORDERHOLD_REAPER_LEASE gives one, in --reap_interval:
// a replica that misses this many ticks loses its partitions. Scaling with the interval lets an
// operator turn the reaper nearly off (--reap_interval=1h) with one flag.
inline constexpr int kReaperLeaseIntervals = 3;

// Where holds live. kNoop is for benchmarking only (see store/noop_hold_store.h).
enum class StoreKind { kRedis, kNoop };

// Every setting of orderhold-server with its default (the flags' defaults). Tests build one
// directly; main gets one from ConfigFromFlags.
struct Config {
  std::string grpc_address = "0.0.0.0:50051";    // host:port; port 0 picks a free one (tests)
  std::string metrics_address = "0.0.0.0:9464";  // host:port of /metrics
  std::string redis_url = "redis://127.0.0.1:6379";
  domain::HoldPolicy policy;  // --max_holds, --default_ttl, --max_ttl
  absl::Duration reap_interval = absl::Seconds(1);
  std::string key_prefix = "orderhold";
  int redis_connections = 4;                        // pool size, one I/O thread each
  absl::Duration redis_timeout = absl::Seconds(1);  // bound on one Redis round trip
  absl::Duration health_check_interval = absl::Seconds(1);
  StoreKind store = StoreKind::kRedis;  // --store=redis|noop
  store::OutcomePolicy outcomes;        // --outcome_retention, --max_outcomes_per_user
  domain::EventPolicy events;           // --event_ack_timeout
  absl::Duration event_retention = absl::Hours(24);
  // Lease and registry ttl of a reaper replica; ConfigFromFlags derives it from reap_interval
  // when --reaper_lease is not given.
  absl::Duration reaper_lease = kReaperLeaseIntervals * reap_interval;
  bool run_reaper = true;  // tests stop the background reaper and drive RunOnce() themselves
};

// INVALID_ARGUMENT naming the setting when a value is out of range (addresses non-empty,
// redis_url parseable, policy valid, durations > 0, key_prefix valid, 1 <= redis_connections <=
// 64, 1 <= max_outcomes_per_user <= 100000, reaper_lease > reap_interval). The message never
// contains the Redis password.
absl::Status ValidateConfig(const Config& config);

// Sets every flag of the server whose environment variable ORDERHOLD_<NAME> is set (e.g.
// ORDERHOLD_MAX_HOLDS=5). Call before absl::ParseCommandLine so the command line wins.
// INVALID_ARGUMENT naming the variable when its value does not parse (absl's message, which
// quotes the value: string flags such as redis_url always parse, so it never quotes a password).
absl::Status ApplyEnvironmentFallbacks();

// True when the command line asks for absl's usage output (--help, --helpfull, --helpon=..., with
// one dash or two). That output prints every flag's current value, so main does not apply the
// environment fallbacks then: a password in ORDERHOLD_REDIS_URL would be printed. Arguments after
// "--" are not flags.
bool AsksForUsage(int argc, const char* const* argv);

// The Config from the (parsed) flags, validated: ValidateConfig's errors, or INVALID_ARGUMENT
// naming --store when it is neither redis nor noop. --reaper_lease unset (or empty) is
// kReaperLeaseIntervals x --reap_interval. No message contains the Redis password.
absl::StatusOr<Config> ConfigFromFlags();

// One line "grpc_address=... redis_url=redis://:****@host... store=redis": every server flag as
// name=value, in the order config.cc defines them, with the Redis password masked (an unparseable
// redis_url shows as "(invalid)").
std::string DescribeConfig(const Config& config);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_CONFIG_H_
