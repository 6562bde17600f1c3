// Config: every setting of orderhold-server in one struct with its defaults, filled from flags
// (with ORDERHOLD_<FLAG_UPPERCASE> environment fallbacks) and validated before anything starts.
#ifndef ORDERHOLD_SERVER_CONFIG_H_
#define ORDERHOLD_SERVER_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/log.h"
#include "server/domain/event_service.h"
#include "server/domain/hold.h"
#include "server/domain/scope_limits.h"
#include "server/grpc/authorizer.h"
#include "server/grpc/server_limits.h"
#include "server/grpc/tenants.h"
#include "server/grpc/tls_credentials.h"
#include "server/grpc/trusted_proxies.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_url.h"
#include "server/store/hold_store.h"
#include "server/store/redis_hold_store.h"

namespace orderhold {

// --reaper_lease when neither the flag nor ORDERHOLD_REAPER_LEASE gives one, in --reap_interval:
// a replica that misses this many ticks loses its partitions. Scaling with the interval lets an
// operator turn the reaper nearly off (--reap_interval=1h) with one flag.
inline constexpr int kReaperLeaseIntervals = 3;

// Where holds live. kNoop is for benchmarking only (see store/noop_hold_store.h).
enum class StoreKind { kRedis, kNoop };

// How the Redis deployment is found (--redis_mode). Here rather than in store/: it selects which
// topology App builds (store::StandaloneTopology, store::SentinelTopology or, for a cluster,
// store::ClusterTopology behind a store::RedisClusterClient); the store's own types take the
// resolved options, not the mode.
enum class RedisMode {
  kStandalone,  // "standalone": one node at the URL's one host (DNS re-resolved on reconnect)
  kSentinel,    // "sentinel": the URL lists the sentinels; the primary is asked of them
  kCluster,     // "cluster": the URL lists seed nodes of a Redis Cluster; routed by hash slot
};

// Tests only: whether ORDERHOLD_TESTING_TOTALS_WITHOUT_WAIT=1 lets a server on a Redis Cluster
// enforce scope totals without WAIT, which it refuses otherwise: the negative control of
// tests/e2e/scope_faults_e2e_test.cc shows what WAIT prevents. Unset in every deployment.
bool TestingTotalsWithoutWait();

// Upper bound of --redis_wait_replicas: far more replicas than a deployment of this service has
// (two is the recommendation), so a larger number is a typo; WAIT for more replicas than exist
// runs out its timeout on every write.
inline constexpr int kMaxRedisWaitReplicas = 16;
// --redis_wait_replicas=all: every replica the primary reports (redis::RedisClientOptions).
inline constexpr int kWaitAllReplicas = redis::RedisClientOptions::kWaitAllReplicas;

// Default of --max_watches. An idle watch costs Redis nothing (it is woken by nudges; the safety
// sweep costs one call per partition per server, whatever the number of watches), but each open
// watch holds up to EventPolicy::max_events_per_read events in memory and its group's first read
// covers all 64 partitions: the bound keeps one client that opens watches in a loop from taking
// the server's memory and Redis' attention from everyone else.
inline constexpr int kDefaultMaxWatches = 1000;
// Default of --event_stream_max_len, per partition: 6.4M events over the 64 partitions, whatever
// --event_retention allows: ~0.6 GB of Redis at ~100 B per plain hold's event, up to ~24 GB at
// 3,742 B per event with the largest ids, scope and labels (tests/e2e/bounds_e2e_test.cc).
inline constexpr int64_t kDefaultEventStreamMaxLen = 100000;
// Upper bound of --event_stream_max_len (per partition).
inline constexpr int64_t kMaxEventStreamMaxLen = 1000000000;
// Default of --event_stream_max_bytes, per partition: 32 MiB, 2 GiB over the 64 partitions for
// events alike (twice that for the worst mix: store/lua/prelude/48_events.lua), whatever their
// size.
inline constexpr int64_t kDefaultEventStreamMaxBytes = int64_t{32} << 20;
// Upper bound of --event_stream_max_bytes (per partition): 1 TiB.
inline constexpr int64_t kMaxEventStreamMaxBytes = int64_t{1} << 40;
// Upper bound of --max_watches.
inline constexpr int kMaxMaxWatches = 1000000;

// Every setting of orderhold-server with its default (the flags' defaults), as typed values:
// ConfigFromFlags parses --redis_url and reads the --scope_limits file once, into redis_url and
// scope_rules, and App only wires them. Tests build one directly; main gets one from
// ConfigFromFlags.
struct Config {
  std::string grpc_address = "0.0.0.0:50051";    // host:port; port 0 picks a free one (tests)
  std::string metrics_address = "0.0.0.0:9464";  // host:port of /metrics (plain HTTP, always)
  // --health_address: a plaintext listener serving only grpc.health.v1; empty: none.
  std::string health_address;
  // --reflection: server reflection on grpc_address; unset, on only without --authz_policy.
  bool reflection = true;
  // --authz_policy (the file, read by ConfigFromFlags into authz.loaded) and
  // --authz_policy_refresh_interval; policy_file empty: no policy, every call allowed.
  grpc_api::AuthorizerOptions authz;
  // --tenants (the file, read by ConfigFromFlags into tenants.loaded) and
  // --tenants_refresh_interval; file empty: no tenants (grpc/tenants.h).
  grpc_api::TenantsOptions tenants;
  grpc_api::ServerTlsOptions grpc_tls;  // --tls_*: TLS / mutual TLS on grpc_address
  grpc_api::ServerLimits grpc_limits;   // --grpc_*: streams, message size, keepalive,
                                        // connection idle and age
  // --redis_url, parsed (redis_url.h): the hosts, the data nodes' credentials, the database and
  // rediss://. The default is the flag's, redis://127.0.0.1:6379.
  redis::RedisEndpoint redis_url;
  // --redis_password_file: the data nodes' password, read at every new connection (the URL then
  // carries none); empty: the URL's password, if any.
  std::string redis_password_file;
  RedisMode redis_mode = RedisMode::kStandalone;
  // Sentinel mode only: the monitored master's name, and the sentinels' own ACL credentials
  // (empty: no AUTH to the sentinels; the URL's credentials are the data nodes').
  std::string redis_sentinel_master;
  std::string redis_sentinel_username;
  std::string redis_sentinel_password;       // shown as **** by DescribeConfig
  std::string redis_sentinel_password_file;  // instead of the above: read at every connection
  redis::RedisTlsOptions redis_tls;          // --redis_tls_*; only with a rediss:// URL
  domain::HoldPolicy policy;                 // --max_holds, --max_units, --default_ttl, --max_ttl,
                                             // --max_hold_lifetime, --max_extensions
  // --scope_limits: the file of per-scope limits (limits_file.h); empty: none. App re-reads it on
  // SIGHUP (App::ReloadScopeLimits).
  std::string scope_limits_file;
  // The rules ConfigFromFlags read from scope_limits_file (none without a file): App starts with
  // them, without reading the file again.
  domain::ScopeRules scope_rules;
  absl::Duration reap_interval = absl::Seconds(1);
  // Redis Cluster's scope protocol (server/README.md "Scope totals"): --scope_clock_margin (the
  // most two nodes' clocks may differ: entries outlive their holds by it) in `scope_protocol`, and
  // --scope_pending_age (how old a take without its settle is before the sweep settles it).
  store::ScopeProtocolOptions scope_protocol;
  absl::Duration scope_pending_age = absl::Seconds(3);
  std::string key_prefix = "orderhold";
  int redis_connections = 4;                        // pool size, one I/O thread each
  absl::Duration redis_timeout = absl::Seconds(1);  // bound on one Redis round trip
  // How long a gRPC thread runs a lone call's Redis round trip itself before leaving it to the
  // I/O thread (RedisClientOptions::inline_wait); 0: never. 0-100ms.
  absl::Duration redis_inline_wait = absl::Milliseconds(1);
  // Call the scripts as Redis Functions (FCALL) where Redis takes their library, else EVALSHA
  // (RedisStoreOptions::functions).
  bool redis_functions = true;
  // When > 0, every batch that ran a writing script is followed by WAIT redis_wait_replicas
  // redis_wait_timeout, and a write counts as done only if that many replicas acknowledged it;
  // kWaitAllReplicas: as many as the primary reports (ROLE). In Sentinel and Cluster modes, a
  // number below the replica count is logged and counted (orderhold_redis_replicas_not_waited_for).
  int redis_wait_replicas = 0;
  // WAIT's timeout, sent in whole milliseconds (ignored when redis_wait_replicas is 0); a round
  // trip with WAIT is bounded by redis_timeout plus this. 500ms: a healthy replica acknowledges
  // within about one network round trip (WAIT makes the primary send REPLCONF GETACK at once,
  // redis src/replication.c), so this only runs out when a replica is down or far behind; then a
  // write fails UNAVAILABLE ("not yet replicated") after half a second, early enough for a caller
  // to retry within a deadline of a few seconds, while a replica's short stall (a fork, an fsync)
  // does not fail writes.
  absl::Duration redis_wait_timeout = absl::Milliseconds(500);
  absl::Duration health_check_interval = absl::Seconds(1);
  StoreKind store = StoreKind::kRedis;  // --store=redis|noop
  // --outcome_retention, --max_outcomes_per_user, --event_stream_max_len
  store::OutcomePolicy outcomes{.event_stream_max_len = kDefaultEventStreamMaxLen,
                                .event_stream_max_bytes = kDefaultEventStreamMaxBytes};
  domain::EventPolicy events;  // --event_ack_timeout, --max_consumer_groups
  absl::Duration event_retention = absl::Hours(24);
  // WatchHoldEvents streams open at once on this server; one more is RESOURCE_EXHAUSTED.
  int max_watches = kDefaultMaxWatches;
  // --consumer_idle_timeout: consumers idle longer leave their groups (reaper/event_trimmer.h);
  // ZeroDuration: never.
  absl::Duration consumer_idle_timeout = absl::Hours(1);
  // --max_watches_per_caller: of them, one caller's (principal, else IP address).
  int max_watches_per_caller = 100;
  // --trusted_proxies: whose x-forwarded-for names the client of a call without a certificate.
  grpc_api::TrustedProxies trusted_proxies;
  // Lease and registry ttl of a reaper replica; ConfigFromFlags derives it from reap_interval
  // when --reaper_lease is not given.
  absl::Duration reaper_lease = kReaperLeaseIntervals * reap_interval;
  bool run_reaper = true;  // tests stop the background reaper and drive RunOnce() themselves
  LogFormat log_format = LogFormat::kText;  // --log_format=text|json; main applies it
  // --shutdown_grace: on SIGTERM/SIGINT, how long in-flight calls may finish (main passes it to
  // App::Shutdown).
  absl::Duration shutdown_grace = absl::Seconds(10);
};

// INVALID_ARGUMENT naming the setting when a value is out of range (addresses non-empty,
// policy valid, durations > 0, key_prefix valid, 1 <= redis_connections <=
// 64, 1 <= max_outcomes_per_user <= 100000, 1 <= max_watches <= kMaxMaxWatches,
// reaper_lease > reap_interval) or the Redis settings
// do not fit together:
// - redis_mode cluster with a database other than 0 in redis_url (Redis Cluster has only 0), or
//   with any redis_sentinel_* setting;
// - standalone with more than one host in redis_url (a host list is sentinel mode's);
// - sentinel without redis_sentinel_master; redis_sentinel_master, _username or _password given
//   in standalone mode (refused rather than ignored: it means --redis_mode=sentinel was
//   forgotten); redis_sentinel_username without redis_sentinel_password (AUTH needs both);
// - any redis_tls_* given while redis_url is not rediss://; a client certificate without its key
//   or a key without its certificate (the files themselves are read by store::TlsContext);
// - redis_wait_replicas outside 0..kMaxRedisWaitReplicas; with redis_wait_replicas > 0,
//   redis_wait_timeout below 1ms (WAIT takes whole milliseconds, and WAIT N 0 blocks forever);
// - the gRPC port's TLS settings (grpc_tls): grpc_api::ValidateServerTlsOptions (certificate and
//   key together, a client CA only with them, a refresh interval of whole seconds >= 1s). The
//   files themselves are read by App::Start.
// It parses and reads nothing (ConfigFromFlags parsed redis_url and read scope_rules). The message
// never contains a password (the URL's or the sentinels').
absl::Status ValidateConfig(const Config& config);

// Sets every flag of the server whose environment variable ORDERHOLD_<NAME> is set (e.g.
// ORDERHOLD_MAX_HOLDS=5). Call before absl::ParseCommandLine so the command line wins.
// INVALID_ARGUMENT naming the variable when its value does not parse (absl's message, which
// quotes the value: string flags such as redis_url and redis_sentinel_password always parse, so
// it never quotes a password).
absl::Status ApplyEnvironmentFallbacks();

// True when the command line asks for absl's usage output (--help, --helpfull, --helpon=..., with
// one dash or two). That output prints every flag's current value, so main does not apply the
// environment fallbacks then: a password in ORDERHOLD_REDIS_URL would be printed. Arguments after
// "--" are not flags.
bool AsksForUsage(int argc, const char* const* argv);

// The Config from the (parsed) flags, validated: --redis_url parsed (INVALID_ARGUMENT
// "redis_url: ..." when it does not parse, never quoting the URL), the --scope_limits file read
// (INVALID_ARGUMENT "scope_limits: <LoadLimitsFile's error>"), then ValidateConfig's errors;
// INVALID_ARGUMENT naming --store or --redis_mode when it is not one of its words, or "--<flag>
// was removed: <why>" when a removed flag (--hold_layout) is given, whatever its value (on the
// command line or through its variable). --reaper_lease unset (or empty) is
// kReaperLeaseIntervals x --reap_interval. No message contains a password.
absl::StatusOr<Config> ConfigFromFlags();

// One line "grpc_address=... redis_url=redis://:****@host... store=redis": every server flag as
// name=value (removed flags aside), in the order config.cc defines them, with the passwords masked:
// the URL's (RedisEndpoint::MaskedUrl) and redis_sentinel_password ("****" when set, empty when
// not).
std::string DescribeConfig(const Config& config);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_CONFIG_H_
