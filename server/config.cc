#include "server/config.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"
#include "server/limits_file.h"
#include "server/redis/redis_url.h"
#include "server/store/hold_store.h"
#include "server/store/keys.h"

namespace orderhold {

// The value of a removed flag: only whether it was given, with any value (even an empty one), on
// the command line or through its ORDERHOLD_* variable. Kept as a flag so that a deployment still
// passing it is told what changed (Removed() below) instead of having it ignored.
struct RemovedFlag {
  bool given = false;
};
bool AbslParseFlag(absl::string_view, RemovedFlag* flag, std::string*) {
  flag->given = true;
  return true;
}
std::string AbslUnparseFlag(RemovedFlag flag) { return flag.given ? "(given)" : ""; }

}  // namespace orderhold

// The flags, in the order DescribeConfig lists them. Each one is also a row of Settings() below
// (the tests fail for a flag of this file without one).
ABSL_FLAG(std::string, grpc_address, "0.0.0.0:50051", "gRPC listen address (host:port).");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Prometheus /metrics listen address (host:port).");
ABSL_FLAG(std::string, health_address, "",
          "A second, plaintext gRPC listener (host:port) serving only grpc.health.v1, with the "
          "statuses of the main port: for probes that cannot speak TLS (Kubernetes' grpc probes) "
          "when the main port has mutual TLS. Empty: none.");
ABSL_FLAG(std::string, authz_policy, "",
          "File of gRPC's authorization policy (gRFC A43 JSON: deny_rules, allow_rules; "
          "deploy/authz_policy.example.json): every OrderHold call it does not allow is refused "
          "PERMISSION_DENIED, and a consumer group is its creator's only. Re-read when it "
          "changes (--authz_policy_refresh_interval); a bad file keeps the old policy. Empty: "
          "every caller may call everything.");
ABSL_FLAG(absl::Duration, authz_policy_refresh_interval, absl::Seconds(10),
          "How often the --authz_policy file is read again (whole seconds, >= 1s).");
ABSL_FLAG(std::string, tenants, "",
          "File of tenants (JSON: tenants with their principals and own limits, and operators; "
          "deploy/tenants.example.json): each tenant's callers act only on their own ids, scopes "
          "and events; a caller in no tenant and not an operator is refused PERMISSION_DENIED; an "
          "operator acts in the tenant its orderhold-tenant header names. Needs "
          "--tls_client_ca_file. Re-read when it changes (--tenants_refresh_interval); a bad "
          "file keeps the old tenants. Empty: no tenants.");
ABSL_FLAG(absl::Duration, tenants_refresh_interval, absl::Seconds(10),
          "How often the --tenants file is read again (whole seconds, >= 1s).");
// Optional so that "not given" is visible: the default then follows --authz_policy.
ABSL_FLAG(std::optional<bool>, reflection, std::nullopt,
          "Serve gRPC server reflection (grpc.reflection.v1alpha) on the gRPC port, for grpcurl. "
          "Unset: on without --authz_policy, off with one. true with a policy is refused at "
          "start: this gRPC (1.51) gives no way to check reflection against the policy, so it "
          "would list every method to any caller the TLS handshake admits.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain (leaf first) for TLS on the gRPC port, with --tls_key_file; "
          "empty: plaintext. Health and reflection share the port and its TLS; the metrics port "
          "stays plain HTTP. Re-read every --tls_refresh_interval: a renewed certificate is served "
          "to new connections without a restart.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file (unencrypted).");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "Mutual TLS: PEM CAs that sign client certificates; every client must then present one "
          "(needs --tls_cert_file). Re-read like the certificate.");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(60),
          "How often the --tls_* files are read again for rotation (whole seconds, >= 1s).");
ABSL_FLAG(int, grpc_max_concurrent_streams, 1000,
          "Calls open at once on one client connection (HTTP/2 MAX_CONCURRENT_STREAMS; gRPC's "
          "default is unlimited). A client queues calls beyond it.");
ABSL_FLAG(int, grpc_max_receive_message_size, 1 << 20,
          "Largest request message, bytes (64 KiB-64 MiB); larger ones are refused "
          "RESOURCE_EXHAUSTED before being read. The largest valid request is ~300 KB.");
ABSL_FLAG(int64_t, grpc_memory_quota, int64_t{256} << 20,
          "gRPC's resource quota, bytes: the memory gRPC may use for connections and calls "
          "(buffers); past it gRPC refuses new work instead of growing. 0: none; else >= 16 MiB.");
ABSL_FLAG(absl::Duration, grpc_keepalive_time, absl::Seconds(60),
          "The server pings a connection silent this long, to find clients that vanished.");
ABSL_FLAG(absl::Duration, grpc_keepalive_timeout, absl::Seconds(20),
          "A connection whose keepalive ping gets no answer this long is closed.");
ABSL_FLAG(absl::Duration, grpc_max_connection_idle, absl::Minutes(15),
          "A connection with no call for this long is closed (0: never).");
ABSL_FLAG(absl::Duration, grpc_max_connection_age, absl::Minutes(30),
          "Connections older than this are asked to reconnect (GOAWAY; calls in flight finish), "
          "so clients rebalance over replicas behind an L4 load balancer (0: never).");
ABSL_FLAG(absl::Duration, grpc_max_connection_age_grace, absl::Minutes(5),
          "Calls still open this long after --grpc_max_connection_age's GOAWAY are cut and the "
          "connection closed (long WatchHoldEvents streams then reconnect through a new TLS "
          "handshake, so a revoked or expired client certificate stops being honoured). "
          "0: no limit (not advised).");
ABSL_FLAG(std::string, redis_url, "redis://127.0.0.1:6379",
          "Redis: redis[s]://[[user]:password@]host[:port][,host[:port]...][/db]. rediss is TLS; "
          "user and password are the data nodes' ACL credentials; several hosts are the sentinels "
          "(--redis_mode=sentinel) or seed nodes (--redis_mode=cluster: any nodes of the "
          "cluster, db 0 only). IPv6 in brackets: [::1]:6379.");
ABSL_FLAG(std::string, redis_password_file, "",
          "File holding the Redis data nodes' password (the URL then has none; a user may stay "
          "in it: redis://app@host): read at every new connection, so a rotated password is used "
          "without a restart. One trailing newline is ignored. Keeps the password off the command "
          "line and the environment.");
ABSL_FLAG(std::string, redis_mode, "standalone",
          "standalone (the URL's one host), sentinel (the URL lists the sentinels; see "
          "--redis_sentinel_master), or cluster (Redis Cluster; the URL lists seed nodes).");
ABSL_FLAG(std::string, redis_sentinel_master, "",
          "Sentinel mode: the name of the monitored master (required there).");
ABSL_FLAG(std::string, redis_sentinel_username, "",
          "Sentinel mode: ACL user for the sentinels themselves (needs "
          "--redis_sentinel_password).");
ABSL_FLAG(std::string, redis_sentinel_password, "",
          "Sentinel mode: password for the sentinels themselves; empty: no AUTH. Prefer "
          "ORDERHOLD_REDIS_SENTINEL_PASSWORD (a command line is visible to ps).");
ABSL_FLAG(std::string, redis_sentinel_password_file, "",
          "Sentinel mode: file holding the sentinels' own password, read at every new connection "
          "to a sentinel (instead of --redis_sentinel_password).");
ABSL_FLAG(std::string, redis_tls_ca_file, "",
          "rediss://: PEM file of the CAs that sign Redis' certificate; empty: the system's CAs.");
ABSL_FLAG(std::string, redis_tls_cert_file, "",
          "rediss://: PEM client certificate for Redis' tls-auth-clients (with "
          "--redis_tls_key_file).");
ABSL_FLAG(std::string, redis_tls_key_file, "",
          "rediss://: PEM private key of --redis_tls_cert_file.");
ABSL_FLAG(std::string, redis_tls_server_name, "",
          "rediss://: the name Redis' certificate must carry (and SNI); empty: the host "
          "connected to.");
ABSL_FLAG(int, max_holds, 3, "Max live (unpaid, unexpired) holds per user.");
ABSL_FLAG(int64_t, max_units, 0,
          "Max units (sum of PlaceHoldRequest.quantity, e.g. tickets) of a user's live holds; 0 = "
          "no limit.");
ABSL_FLAG(std::string, scope_limits, "",
          "File of per-scope limits (JSON or YAML: a default and prefix rules, see "
          "deploy/limits.example.yaml), applied when a PlaceHold carries no scope_limits; re-read "
          "on SIGHUP. Empty: scopes have no limits of their own.");
ABSL_FLAG(std::string, request_scope_limits, "ceiling",
          "What a PlaceHold's scope_limits may do: ceiling (only tighten the --scope_limits rule: "
          "per field the smaller; 0 or {} in the request change nothing) or replace (the "
          "request's limits replace the rule, 0 = no limit: lets a caller lift it).");
ABSL_FLAG(absl::Duration, default_ttl, absl::Minutes(30),
          "Hold lifetime when a request gives none.");
ABSL_FLAG(absl::Duration, max_ttl, absl::Hours(24), "Longest ttl a request may ask for.");
ABSL_FLAG(absl::Duration, max_hold_lifetime, absl::Hours(2),
          "ExtendHold never moves a hold's expiry past its place time + this (its "
          "max_expire_time, fixed when it is placed).");
ABSL_FLAG(int, max_extensions, 0,
          "ExtendHold calls that moved a hold's expiry, at most (a request_id counts once); 0 = "
          "only --max_hold_lifetime limits extensions. 0-1000.");
ABSL_FLAG(absl::Duration, reap_interval, absl::Seconds(1),
          "Time between reaper ticks (with +-10% jitter).");
ABSL_FLAG(absl::Duration, scope_clock_margin, absl::Seconds(2),
          "Redis Cluster: the most the clocks of two Redis nodes may differ (>= 0). A scoped "
          "hold's entry in its scope's index outlives the hold by this, so a scope total is never "
          "over while the clocks stay within it (server/README.md \"Scope totals\").");
ABSL_FLAG(absl::Duration, scope_pending_age, absl::Seconds(3),
          "Redis Cluster: how old a scope take without its settle gets before the sweep settles it "
          "from the user's slot (>= 100ms; above a take-place-settle's time, WAIT included).");
ABSL_FLAG(std::string, key_prefix, "orderhold", "Prefix of every Redis key.");
ABSL_FLAG(int, redis_connections, 4, "Redis connections (one I/O thread each).");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Seconds(1),
          "Bound on one Redis round trip; a call fails UNAVAILABLE after it.");
ABSL_FLAG(absl::Duration, redis_inline_wait, absl::Milliseconds(1),
          "A call that finds a Redis connection idle runs its round trip on the gRPC thread and "
          "waits this long for the reply before leaving it to the connection's I/O thread (fewer "
          "thread hops per call); 0: always through the I/O threads. 0-100ms.");
ABSL_FLAG(bool, redis_functions, true,
          "Load the Lua scripts as one Redis Functions library (FUNCTION LOAD on each new "
          "connection) and call them by FCALL: ~13-25 % less Redis CPU per PlaceHold than "
          "EVALSHA. Where Redis refuses FUNCTION LOAD (the ACL lacks +function|load, Redis < 7), "
          "the scripts are called by EVALSHA. false: EVALSHA only.");
ABSL_FLAG(std::string, redis_wait_replicas, "0",
          "all, or 0-16. Writes are followed by WAIT: a write is answered OK only once this many "
          "replicas acknowledged it, else UNAVAILABLE (not yet replicated). all: every replica "
          "any primary has reported since start (ROLE, checked every second): what keeps an "
          "acknowledged hold through failovers. Below the replica count, Sentinel and Cluster "
          "modes warn.");
ABSL_FLAG(absl::Duration, redis_wait_timeout, absl::Milliseconds(500),
          "How long WAIT waits for --redis_wait_replicas acknowledgements (>= 1ms; a round trip "
          "with WAIT is bounded by --redis_timeout plus this).");
ABSL_FLAG(absl::Duration, health_check_interval, absl::Seconds(1),
          "How often Redis is pinged to report gRPC health.");
ABSL_FLAG(absl::Duration, outcome_retention, absl::Hours(72),
          "How long a hold's outcome (PAID/CANCELLED/EXPIRED, with a payment reference) is "
          "remembered for idempotent Pay/CancelHold and to refuse placing an ended order again. "
          "72h covers the 3 days payment providers retry webhooks for; Redis keeps 0.3-0.85 KB "
          "per ended order this long (deploy/README.md, \"Redis settings for a deployment\").");
ABSL_FLAG(orderhold::RemovedFlag, hold_layout, orderhold::RemovedFlag{},
          "Removed: this release keeps one hold layout and moves older data by itself "
          "(server/README.md \"Upgrading\"). Given at all, the server refuses to start.");
ABSL_FLAG(bool, layout_migration_done, false,
          "Declares the layout migration over (server/README.md \"Upgrading\": no user left in "
          "an older shape, no replica of an earlier release running): calls stop looking for a "
          "user's holds in older shapes (one EXISTS less on a user's first hold). Set too early, "
          "holds still there go uncounted until the sweep moves them (logged).");
ABSL_FLAG(int, max_outcomes_per_user, 1000,
          "Max outcome records kept per user (oldest dropped first): bounds memory per user.");
ABSL_FLAG(absl::Duration, event_ack_timeout, absl::Seconds(30),
          "A hold event not acked this long after delivery is redelivered to another connected "
          "consumer of its group (to the same one when it reconnects under its name).");
ABSL_FLAG(absl::Duration, event_retention, absl::Hours(24),
          "Hold events older than this are trimmed, acked or not (unacked ones are counted).");
ABSL_FLAG(int64_t, event_stream_max_len, orderhold::kDefaultEventStreamMaxLen,
          "Length bound of each of the 64 partitions' event streams, beside --event_retention: "
          "each append trims to about this many events (XADD MAXLEN ~); events trimmed before "
          "every group acked them are counted. 0 = no length bound. An event costs Redis ~60-100 B "
          "for a plain hold and up to ~3.7 KB with the largest ids, scope and labels, so the "
          "default allows up to ~24 GB over the 64 partitions in the worst case: size it to your "
          "Redis.");
ABSL_FLAG(int64_t, event_stream_max_bytes, orderhold::kDefaultEventStreamMaxBytes,
          "Byte bound of each of the 64 partitions' event streams, beside --event_stream_max_len "
          "(the lower applies): each append trims to as many events as this holds at that "
          "event's size (an upper estimate of its Redis bytes), so the streams stay within 64 x "
          "this for events alike (2 GiB at the default), within twice that for the worst mix of "
          "large and small ones. Events trimmed before every group acked them are counted. 0 = "
          "no byte bound.");
ABSL_FLAG(int, max_watches, orderhold::kDefaultMaxWatches,
          "WatchHoldEvents streams open at once on this server; one more is refused "
          "RESOURCE_EXHAUSTED (an idle watch costs Redis nothing, but each holds up to 64 "
          "events in memory).");
ABSL_FLAG(int, max_watches_per_caller, 100,
          "Of --max_watches, how many one caller may have open on this server (its client "
          "certificate's principal, else its IP address); one more is RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::vector<std::string>, trusted_proxies, {},
          "Networks of the proxies in front of the gRPC port (CIDR, comma-separated: "
          "10.0.0.0/8,fd00::/8): a call from one of them without a client certificate counts "
          "against the client its x-forwarded-for header names (read from the right, past every "
          "trusted proxy), not the proxy. Empty: every call counts against its peer address.");
ABSL_FLAG(absl::Duration, consumer_idle_timeout, absl::Hours(1),
          "A consumer with no read this long is removed from its group; its pending events go back "
          "to the group (redelivered to its other consumers). 0: never. >= --event_ack_timeout.");
ABSL_FLAG(int, max_consumer_groups, 100,
          "Consumer groups one caller (principal; all callers without a certificate count as "
          "one) may own; its next new group is RESOURCE_EXHAUSTED. DeleteConsumerGroup frees one.");
ABSL_FLAG(std::vector<std::string>, operators, {},
          "Callers that may delete any consumer group under --authz_policy (others only their "
          "own), comma-separated typed identities: uri:<URI SAN>, dns:<DNS SAN> or "
          "subject:<subject>, e.g. uri:spiffe://example/operator (a subject holding a comma "
          "cannot be listed: name a SAN). At most 100, 1 KiB each.");
// Optional so that "not given" is visible: the default then follows --reap_interval.
ABSL_FLAG(std::optional<absl::Duration>, reaper_lease, std::nullopt,
          "How long a dead replica keeps its reaping partitions before others take them over. "
          "Unset or empty: 3 x --reap_interval (3s at the default 1s); a value given must be "
          "longer than --reap_interval.");
ABSL_FLAG(std::string, store, "redis",
          "redis, or noop: BENCHMARKING ONLY, stores nothing and enforces no limit "
          "(tests/bench/run.sh uses it to measure the gRPC ceiling).");
ABSL_FLAG(std::string, log_format, "text",
          "text (\"<time> I <message>\" lines) or json (one JSON object per line: time, level, "
          "component, message; gRPC's own lines too) for log pipelines. Logs go to stderr.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT: how long in-flight calls may take to finish after health turns "
          "NOT_SERVING; then the server cancels what is left and exits.");

namespace orderhold {
namespace {

// One setting: the name of its flag (and so of its variable ORDERHOLD_<NAME>), how the flag's value
// reaches Config, and how DescribeConfig shows it.
struct Setting {
  absl::string_view name;
  // Reads the flag into `config`, parsing what needs parsing and reading the file a flag names,
  // once. INVALID_ARGUMENT naming the setting when the flag parsed but is not a value the setting
  // knows (enum-like words, a URL that does not parse, a limits file that cannot be read or is
  // not valid); ranges and combinations are ValidateConfig's to check.
  std::function<absl::Status(Config& config)> load;
  // The value in `config` as DescribeConfig shows it, secrets masked; empty for a removed flag
  // (DescribeConfig leaves it out).
  std::function<std::string(const Config& config)> describe;
};

// The member of `object` at `path`: one member pointer, or a chain of them into a nested struct
// (&Config::policy, &domain::HoldPolicy::max_holds). Const when `object` is.
template <typename C>
C& MemberAt(C& object) {
  return object;
}
template <typename C, typename Member, typename... Rest>
auto& MemberAt(C& object, Member member, Rest... rest) {
  return MemberAt(object.*member, rest...);
}

// A flag stored as is at `path`; DescribeConfig shows `describe(value)`.
template <typename T, typename... Path>
Setting DescribedField(const absl::Flag<T>& flag, std::string (*describe)(const T&), Path... path) {
  return Setting{
      absl::GetFlagReflectionHandle(flag).Name(),
      [&flag, path...](Config& config) {
        MemberAt(config, path...) = absl::GetFlag(flag);
        return absl::OkStatus();
      },
      [describe, path...](const Config& config) { return describe(MemberAt(config, path...)); }};
}

// A flag stored as is at `path`; DescribeConfig shows it in flag syntax ("30m", "4", "orderhold").
template <typename T, typename... Path>
Setting Field(const absl::Flag<T>& flag, Path... path) {
  return DescribedField(flag, &absl::UnparseFlag<T>, path...);
}

// An optional flag: unset (or empty), `path` gets `fallback(config)`, computed from the rows above.
template <typename T, typename... Path>
Setting FieldOr(const absl::Flag<std::optional<T>>& flag, T (*fallback)(const Config& config),
                Path... path) {
  return Setting{
      absl::GetFlagReflectionHandle(flag).Name(),
      [&flag, fallback, path...](Config& config) {
        MemberAt(config, path...) = absl::GetFlag(flag).value_or(fallback(config));
        return absl::OkStatus();
      },
      [path...](const Config& config) { return absl::UnparseFlag<T>(MemberAt(config, path...)); }};
}

// A flag that is one of `words`, stored at `path` (a member of Config, or a chain into a nested
// struct, as Field's) as the value paired with the word.
template <typename E, typename... Path>
Setting OneOf(const absl::Flag<std::string>& flag, std::vector<std::pair<std::string, E>> words,
              Path... path) {
  const absl::string_view name = absl::GetFlagReflectionHandle(flag).Name();
  return Setting{
      name,
      [&flag, name, words, path...](Config& config) {
        const std::string word = absl::GetFlag(flag);
        for (const auto& [known, value] : words) {
          if (word == known) {
            MemberAt(config, path...) = value;
            return absl::OkStatus();
          }
        }
        std::vector<std::string> known;
        for (const auto& entry : words) known.push_back(entry.first);
        const std::string last = known.back();
        known.pop_back();
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": must be ", absl::StrJoin(known, ", "), " or ", last, ", got \"", word, "\""));
      },
      [words, path...](const Config& config) {
        for (const auto& [word, value] : words) {
          if (MemberAt(config, path...) == value) return word;
        }
        return std::string("(unknown)");
      }};
}

// A removed flag: given at all, ConfigFromFlags fails with INVALID_ARGUMENT "--<name> was
// removed: <why>". It has no Config member and DescribeConfig does not list it.
Setting Removed(const absl::Flag<RemovedFlag>& flag, absl::string_view why) {
  const absl::string_view name = absl::GetFlagReflectionHandle(flag).Name();
  return Setting{
      name,
      [&flag, name, why](Config&) {
        if (!absl::GetFlag(flag).given) return absl::OkStatus();
        return absl::InvalidArgumentError(absl::StrCat("--", name, " was removed: ", why));
      },
      nullptr};
}

// --redis_url, parsed once here into Config::redis_url: ParseRedisUrl's INVALID_ARGUMENT
// "redis_url: ..." (which never quotes the URL) when it does not parse. DescribeConfig shows it
// with the password masked (MaskedUrl): the password never leaves the process.
Setting RedisUrl(const absl::Flag<std::string>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) -> absl::Status {
                   ORDERHOLD_ASSIGN_OR_RETURN(config.redis_url,
                                              redis::ParseRedisUrl(absl::GetFlag(flag)));
                   return absl::OkStatus();
                 },
                 [](const Config& config) { return config.redis_url.MaskedUrl(); }};
}

// --scope_limits: the file's path into Config::scope_limits_file and its rules, read once here,
// into Config::scope_rules (App reads the file again only on SIGHUP). INVALID_ARGUMENT
// "scope_limits: <LoadLimitsFile's error>" when it cannot be read or is not valid. DescribeConfig
// shows the path.
Setting ScopeLimitsFile(const absl::Flag<std::string>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) {
                   config.scope_limits_file = absl::GetFlag(flag);
                   config.scope_rules = domain::ScopeRules();
                   if (config.scope_limits_file.empty()) return absl::OkStatus();
                   absl::StatusOr<domain::ScopeRules> rules =
                       LoadLimitsFile(config.scope_limits_file);
                   if (!rules.ok()) {
                     return absl::InvalidArgumentError(
                         absl::StrCat("scope_limits: ", rules.status().message()));
                   }
                   config.scope_rules = *std::move(rules);
                   return absl::OkStatus();
                 },
                 [](const Config& config) { return config.scope_limits_file; }};
}

// --authz_policy: the file's path into Config::authz.policy_file and the policy read once here
// (into Config::authz.loaded), so that a bad file stops the start (exit 2) naming the field.
Setting AuthzPolicyFile(const absl::Flag<std::string>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) -> absl::Status {
                   config.authz.policy_file = absl::GetFlag(flag);
                   config.authz.loaded.reset();
                   if (config.authz.policy_file.empty()) return absl::OkStatus();
                   ORDERHOLD_ASSIGN_OR_RETURN(config.authz.loaded,
                                              grpc_api::LoadAuthzPolicy(config.authz.policy_file));
                   return absl::OkStatus();
                 },
                 [](const Config& config) { return config.authz.policy_file; }};
}

// --tenants: the file's path into Config::tenants.file and the file read once here (into
// Config::tenants.loaded), so that a bad file stops the start (exit 2) naming the field.
Setting TenantsFileSetting(const absl::Flag<std::string>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) -> absl::Status {
                   config.tenants.file = absl::GetFlag(flag);
                   config.tenants.loaded.reset();
                   if (config.tenants.file.empty()) return absl::OkStatus();
                   ORDERHOLD_ASSIGN_OR_RETURN(config.tenants.loaded,
                                              grpc_api::LoadTenantsFile(config.tenants.file));
                   return absl::OkStatus();
                 },
                 [](const Config& config) { return config.tenants.file; }};
}

// A password file flag (--redis_password_file, --redis_sentinel_password_file): its path into
// `member`, after checking once that it can be read, so that a wrong path stops the start (exit 2)
// instead of failing every connection; the store reads it again at each new connection.
Setting PasswordFile(const absl::Flag<std::string>& flag, std::string Config::*member) {
  const absl::string_view name = absl::GetFlagReflectionHandle(flag).Name();
  return Setting{
      name,
      [&flag, name, member](Config& config) -> absl::Status {
        config.*member = absl::GetFlag(flag);
        if ((config.*member).empty()) return absl::OkStatus();
        redis::NodeOptions node;
        node.password_file = config.*member;
        if (absl::StatusOr<std::vector<std::string>> auth = redis::NodeAuthCommand(node, name);
            !auth.ok()) {
          return absl::InvalidArgumentError(auth.status().message());
        }
        return absl::OkStatus();
      },
      [member](const Config& config) { return config.*member; }};
}

// --redis_wait_replicas: "all" (kWaitAllReplicas) or a number, into Config::redis_wait_replicas;
// INVALID_ARGUMENT naming it otherwise (its range is ValidateRedis's).
Setting WaitReplicas(const absl::Flag<std::string>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) -> absl::Status {
                   const std::string value = absl::GetFlag(flag);
                   if (value == "all") {
                     config.redis_wait_replicas = kWaitAllReplicas;
                     return absl::OkStatus();
                   }
                   if (!absl::SimpleAtoi(value, &config.redis_wait_replicas)) {
                     return absl::InvalidArgumentError(
                         absl::StrCat("redis_wait_replicas: must be all or 0-",
                                      kMaxRedisWaitReplicas, ", got \"", value, "\""));
                   }
                   return absl::OkStatus();
                 },
                 [](const Config& config) {
                   return config.redis_wait_replicas == kWaitAllReplicas
                              ? std::string("all")
                              : absl::StrCat(config.redis_wait_replicas);
                 }};
}

// --trusted_proxies, parsed (TrustedProxies::Parse: INVALID_ARGUMENT naming the entry).
Setting TrustedProxiesSetting(const absl::Flag<std::vector<std::string>>& flag) {
  return Setting{absl::GetFlagReflectionHandle(flag).Name(),
                 [&flag](Config& config) -> absl::Status {
                   ORDERHOLD_ASSIGN_OR_RETURN(config.trusted_proxies,
                                              grpc_api::TrustedProxies::Parse(absl::GetFlag(flag)));
                   return absl::OkStatus();
                 },
                 [](const Config& config) { return config.trusted_proxies.ToString(); }};
}

// --operators: typed identities into config.events.operators. INVALID_ARGUMENT naming the entry
// that is not one (no "uri:", "dns:" or "subject:" kind, nothing after it, over kMaxOperatorBytes)
// and a list over kMaxOperators.
constexpr size_t kMaxOperators = 100;
constexpr size_t kMaxOperatorBytes = 1024;
Setting Operators(const absl::Flag<std::vector<std::string>>& flag) {
  return Setting{
      absl::GetFlagReflectionHandle(flag).Name(),
      [&flag](Config& config) -> absl::Status {
        const std::vector<std::string> operators = absl::GetFlag(flag);
        if (operators.size() > kMaxOperators) {
          return absl::InvalidArgumentError(absl::StrCat("operators: at most ", kMaxOperators,
                                                         " entries, got ", operators.size()));
        }
        config.events.operators.clear();
        for (const std::string& entry : operators) {
          absl::string_view value = entry;
          const bool typed = absl::ConsumePrefix(&value, "uri:") ||
                             absl::ConsumePrefix(&value, "dns:") ||
                             absl::ConsumePrefix(&value, "subject:");
          if (!typed || value.empty() || entry.size() > kMaxOperatorBytes) {
            return absl::InvalidArgumentError(absl::StrCat(
                "operators: \"", absl::CEscape(entry.substr(0, 64)),
                "\" is not uri:<URI SAN>, dns:<DNS SAN> or subject:<subject> of at most ",
                kMaxOperatorBytes, " bytes"));
          }
          config.events.operators.insert(entry);
        }
        return absl::OkStatus();
      },
      [](const Config& config) {
        std::vector<std::string> sorted(config.events.operators.begin(),
                                        config.events.operators.end());
        std::sort(sorted.begin(), sorted.end());
        return absl::StrJoin(sorted, ",");
      }};
}

// Set or not is all a log may say of a secret.
std::string MaskSecret(const std::string& secret) { return secret.empty() ? "" : "****"; }

bool DefaultReflection(const Config& config) { return config.authz.policy_file.empty(); }

absl::Duration DefaultReaperLease(const Config& config) {
  return kReaperLeaseIntervals * config.reap_interval;
}

// Every setting, in the order of the flags above. Adding one: its ABSL_FLAG, its Config member and
// its row here (a secret: DescribedField with a function that masks it), then its Sample in
// tests/unit/config_test.cc, which fails until both exist. Removing one: its ABSL_FLAG becomes a
// RemovedFlag with a Removed row saying why (and its name goes to config_test.cc's
// kRemovedFlags), so that a deployment still setting it fails at start instead of being ignored.
const std::vector<Setting>& Settings() {
  static const auto* const settings = new std::vector<Setting>{
      Field(FLAGS_grpc_address, &Config::grpc_address),
      Field(FLAGS_metrics_address, &Config::metrics_address),
      Field(FLAGS_health_address, &Config::health_address),
      AuthzPolicyFile(FLAGS_authz_policy),
      Field(FLAGS_authz_policy_refresh_interval, &Config::authz,
            &grpc_api::AuthorizerOptions::refresh_interval),
      TenantsFileSetting(FLAGS_tenants),
      Field(FLAGS_tenants_refresh_interval, &Config::tenants,
            &grpc_api::TenantsOptions::refresh_interval),
      // After authz_policy's row: DefaultReflection reads it.
      FieldOr(FLAGS_reflection, &DefaultReflection, &Config::reflection),
      Field(FLAGS_tls_cert_file, &Config::grpc_tls, &grpc_api::ServerTlsOptions::cert_file),
      Field(FLAGS_tls_key_file, &Config::grpc_tls, &grpc_api::ServerTlsOptions::key_file),
      Field(FLAGS_tls_client_ca_file, &Config::grpc_tls,
            &grpc_api::ServerTlsOptions::client_ca_file),
      Field(FLAGS_tls_refresh_interval, &Config::grpc_tls,
            &grpc_api::ServerTlsOptions::refresh_interval),
      Field(FLAGS_grpc_max_concurrent_streams, &Config::grpc_limits,
            &grpc_api::ServerLimits::max_concurrent_streams),
      Field(FLAGS_grpc_max_receive_message_size, &Config::grpc_limits,
            &grpc_api::ServerLimits::max_receive_message_bytes),
      Field(FLAGS_grpc_memory_quota, &Config::grpc_limits,
            &grpc_api::ServerLimits::memory_quota_bytes),
      Field(FLAGS_grpc_keepalive_time, &Config::grpc_limits,
            &grpc_api::ServerLimits::keepalive_time),
      Field(FLAGS_grpc_keepalive_timeout, &Config::grpc_limits,
            &grpc_api::ServerLimits::keepalive_timeout),
      Field(FLAGS_grpc_max_connection_idle, &Config::grpc_limits,
            &grpc_api::ServerLimits::max_connection_idle),
      Field(FLAGS_grpc_max_connection_age, &Config::grpc_limits,
            &grpc_api::ServerLimits::max_connection_age),
      Field(FLAGS_grpc_max_connection_age_grace, &Config::grpc_limits,
            &grpc_api::ServerLimits::max_connection_age_grace),
      RedisUrl(FLAGS_redis_url),
      PasswordFile(FLAGS_redis_password_file, &Config::redis_password_file),
      OneOf(FLAGS_redis_mode,
            std::vector<std::pair<std::string, RedisMode>>{{"standalone", RedisMode::kStandalone},
                                                           {"sentinel", RedisMode::kSentinel},
                                                           {"cluster", RedisMode::kCluster}},
            &Config::redis_mode),
      Field(FLAGS_redis_sentinel_master, &Config::redis_sentinel_master),
      Field(FLAGS_redis_sentinel_username, &Config::redis_sentinel_username),
      DescribedField(FLAGS_redis_sentinel_password, &MaskSecret, &Config::redis_sentinel_password),
      PasswordFile(FLAGS_redis_sentinel_password_file, &Config::redis_sentinel_password_file),
      Field(FLAGS_redis_tls_ca_file, &Config::redis_tls, &redis::RedisTlsOptions::ca_file),
      Field(FLAGS_redis_tls_cert_file, &Config::redis_tls, &redis::RedisTlsOptions::cert_file),
      Field(FLAGS_redis_tls_key_file, &Config::redis_tls, &redis::RedisTlsOptions::key_file),
      Field(FLAGS_redis_tls_server_name, &Config::redis_tls, &redis::RedisTlsOptions::server_name),
      Field(FLAGS_max_holds, &Config::policy, &domain::HoldPolicy::max_holds),
      Field(FLAGS_max_units, &Config::policy, &domain::HoldPolicy::max_units),
      ScopeLimitsFile(FLAGS_scope_limits),
      OneOf(FLAGS_request_scope_limits,
            std::vector<std::pair<std::string, domain::RequestScopeLimits>>{
                {"ceiling", domain::RequestScopeLimits::kCeiling},
                {"replace", domain::RequestScopeLimits::kReplace}},
            &Config::policy, &domain::HoldPolicy::request_scope_limits),
      Field(FLAGS_default_ttl, &Config::policy, &domain::HoldPolicy::default_ttl),
      Field(FLAGS_max_ttl, &Config::policy, &domain::HoldPolicy::max_ttl),
      Field(FLAGS_max_hold_lifetime, &Config::policy, &domain::HoldPolicy::max_hold_lifetime),
      Field(FLAGS_max_extensions, &Config::policy, &domain::HoldPolicy::max_extensions),
      Field(FLAGS_reap_interval, &Config::reap_interval),
      Field(FLAGS_scope_clock_margin, &Config::scope_protocol,
            &store::ScopeProtocolOptions::margin),
      Field(FLAGS_scope_pending_age, &Config::scope_pending_age),
      Field(FLAGS_key_prefix, &Config::key_prefix),
      Field(FLAGS_redis_connections, &Config::redis_connections),
      Field(FLAGS_redis_timeout, &Config::redis_timeout),
      Field(FLAGS_redis_inline_wait, &Config::redis_inline_wait),
      Field(FLAGS_redis_functions, &Config::redis_functions),
      WaitReplicas(FLAGS_redis_wait_replicas),
      Field(FLAGS_redis_wait_timeout, &Config::redis_wait_timeout),
      Field(FLAGS_health_check_interval, &Config::health_check_interval),
      Field(FLAGS_outcome_retention, &Config::outcomes, &store::OutcomePolicy::retention),
      Field(FLAGS_max_outcomes_per_user, &Config::outcomes, &store::OutcomePolicy::max_per_user),
      Field(FLAGS_layout_migration_done, &Config::outcomes,
            &store::OutcomePolicy::layout_migration_done),
      Removed(FLAGS_hold_layout,
              "this release keeps one hold layout and moves older data by itself; see "
              "server/README.md \"Upgrading\""),
      Field(FLAGS_event_ack_timeout, &Config::events, &domain::EventPolicy::ack_timeout),
      Field(FLAGS_event_retention, &Config::event_retention),
      Field(FLAGS_event_stream_max_len, &Config::outcomes,
            &store::OutcomePolicy::event_stream_max_len),
      Field(FLAGS_event_stream_max_bytes, &Config::outcomes,
            &store::OutcomePolicy::event_stream_max_bytes),
      Field(FLAGS_max_watches, &Config::max_watches),
      Field(FLAGS_max_watches_per_caller, &Config::max_watches_per_caller),
      TrustedProxiesSetting(FLAGS_trusted_proxies),
      Field(FLAGS_consumer_idle_timeout, &Config::consumer_idle_timeout),
      Field(FLAGS_max_consumer_groups, &Config::events,
            &domain::EventPolicy::max_groups_per_caller),
      Operators(FLAGS_operators),
      // After reap_interval's row: DefaultReaperLease reads it.
      FieldOr(FLAGS_reaper_lease, &DefaultReaperLease, &Config::reaper_lease),
      OneOf(FLAGS_store,
            std::vector<std::pair<std::string, StoreKind>>{{"redis", StoreKind::kRedis},
                                                           {"noop", StoreKind::kNoop}},
            &Config::store),
      OneOf(FLAGS_log_format,
            std::vector<std::pair<std::string, LogFormat>>{{"text", LogFormat::kText},
                                                           {"json", LogFormat::kJson}},
            &Config::log_format),
      Field(FLAGS_shutdown_grace, &Config::shutdown_grace),
  };
  return *settings;
}

// INVALID_ARGUMENT "<flag>: <why>" for the first of `flags` (name, value) whose value is not
// empty. The value is not quoted (it may be a password).
absl::Status RefuseIfGiven(
    std::initializer_list<std::pair<absl::string_view, const std::string*>> flags,
    absl::string_view why) {
  for (const auto& [flag, value] : flags) {
    if (!value->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT "<flag>: only used with --redis_mode=sentinel <hint>" for the first Sentinel
// setting given outside sentinel mode.
absl::Status RefuseSentinelSettings(const Config& config, absl::string_view hint) {
  return RefuseIfGiven({{"redis_sentinel_master", &config.redis_sentinel_master},
                        {"redis_sentinel_username", &config.redis_sentinel_username},
                        {"redis_sentinel_password", &config.redis_sentinel_password},
                        {"redis_sentinel_password_file", &config.redis_sentinel_password_file}},
                       absl::StrCat("only used with --redis_mode=sentinel ", hint));
}

// The settings --redis_mode needs or refuses (part of ValidateRedis).
absl::Status ValidateRedisMode(const Config& config) {
  const redis::RedisEndpoint& endpoint = config.redis_url;
  switch (config.redis_mode) {
    case RedisMode::kCluster:
      if (endpoint.db != 0) {
        return absl::InvalidArgumentError(
            "redis_url: Redis Cluster has only database 0 (cluster-spec.md); drop the /<db> "
            "from the URL for --redis_mode=cluster");
      }
      ORDERHOLD_RETURN_IF_ERROR(RefuseSentinelSettings(config, "(this is --redis_mode=cluster)"));
      if (config.scope_rules.has_capacity()) {
        return absl::InvalidArgumentError(
            "scope_limits: the file sets capacity_units, which --redis_mode=cluster does not "
            "enforce (sales are counted in the step that pays a hold, in the user's slot, not the "
            "scope's); use a standalone or Sentinel-managed Redis for capacities");
      }
      if (config.scope_rules.has_totals() && config.redis_wait_replicas == 0 &&
          !TestingTotalsWithoutWait()) {
        return absl::InvalidArgumentError(
            "scope_limits: the file sets total_max_holds or total_max_units, which "
            "--redis_mode=cluster enforces only with --redis_wait_replicas >= 1 (a step of the "
            "scope protocol acknowledged and then lost in a failover would grant over the total; "
            "server/README.md \"Scope totals\")");
      }
      break;
    case RedisMode::kSentinel:
      if (config.redis_sentinel_master.empty()) {
        return absl::InvalidArgumentError(
            "redis_sentinel_master: required with --redis_mode=sentinel (the name the sentinels "
            "monitor the primary under)");
      }
      break;
    case RedisMode::kStandalone:
      if (endpoint.hosts.size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("redis_url: lists ", endpoint.hosts.size(),
                         " hosts but --redis_mode=standalone takes one (a list of sentinels needs "
                         "--redis_mode=sentinel)"));
      }
      ORDERHOLD_RETURN_IF_ERROR(RefuseSentinelSettings(config, "(is --redis_mode missing?)"));
      break;
  }
  return absl::OkStatus();
}

// The Redis settings that must fit together (see ValidateConfig in config.h). No message quotes
// a value: the URL and the sentinel password are secrets, and the rest is no help there.
absl::Status ValidateRedis(const Config& config) {
  const redis::RedisEndpoint& endpoint = config.redis_url;
  ORDERHOLD_RETURN_IF_ERROR(ValidateRedisMode(config));
  if (!config.redis_sentinel_username.empty() && config.redis_sentinel_password.empty() &&
      config.redis_sentinel_password_file.empty()) {
    return absl::InvalidArgumentError(
        "redis_sentinel_username: needs --redis_sentinel_password_file or "
        "--redis_sentinel_password (AUTH takes both)");
  }
  if (!config.redis_password_file.empty() && !endpoint.password.empty()) {
    return absl::InvalidArgumentError(
        "redis_password_file: the redis_url carries a password too; keep only the file");
  }
  if (!config.redis_sentinel_password_file.empty() && !config.redis_sentinel_password.empty()) {
    return absl::InvalidArgumentError(
        "redis_sentinel_password_file: --redis_sentinel_password is given too; keep only the "
        "file");
  }
  const redis::RedisTlsOptions& tls = config.redis_tls;
  if (!endpoint.tls) {
    ORDERHOLD_RETURN_IF_ERROR(RefuseIfGiven({{"redis_tls_ca_file", &tls.ca_file},
                                             {"redis_tls_cert_file", &tls.cert_file},
                                             {"redis_tls_key_file", &tls.key_file},
                                             {"redis_tls_server_name", &tls.server_name}},
                                            "TLS settings need a rediss:// redis_url"));
  }
  if (!tls.cert_file.empty() && tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "redis_tls_cert_file: needs --redis_tls_key_file (the certificate's private key)");
  }
  if (tls.cert_file.empty() && !tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "redis_tls_key_file: needs --redis_tls_cert_file (the key's certificate)");
  }
  if (config.redis_wait_replicas != kWaitAllReplicas &&
      (config.redis_wait_replicas < 0 || config.redis_wait_replicas > kMaxRedisWaitReplicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis_wait_replicas: must be all or 0-", kMaxRedisWaitReplicas));
  }
  if (config.redis_inline_wait < absl::ZeroDuration() ||
      config.redis_inline_wait > absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("redis_inline_wait: must be 0-100ms");
  }
  // WAIT takes whole milliseconds (the client truncates) and 0 means "forever".
  if (config.redis_wait_replicas != 0 && config.redis_wait_timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        "redis_wait_timeout: must be >= 1ms when redis_wait_replicas is not 0");
  }
  if (config.scope_protocol.margin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("scope_clock_margin: must be >= 0");
  }
  if (config.scope_pending_age < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("scope_pending_age: must be >= 100ms");
  }
  return absl::OkStatus();
}

// The checks of who may call what: reflection under a policy, the policy's and the tenants'
// refresh intervals, tenants without verified client certificates.
absl::Status ValidateTrust(const Config& config) {
  if (config.reflection && !config.authz.policy_file.empty()) {
    return absl::InvalidArgumentError(
        "reflection: cannot be on with --authz_policy (this gRPC, 1.51, gives no way to check "
        "server reflection against the policy, and it lists every method to any caller the TLS "
        "handshake admits); leave --reflection unset or false");
  }
  if (config.authz.refresh_interval < absl::Seconds(1) ||
      config.authz.refresh_interval % absl::Seconds(1) != absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "authz_policy_refresh_interval: must be whole seconds, >= 1s");
  }
  if (config.tenants.refresh_interval < absl::Seconds(1) ||
      config.tenants.refresh_interval % absl::Seconds(1) != absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tenants_refresh_interval: must be whole seconds, >= 1s");
  }
  if (!config.tenants.file.empty() && config.grpc_tls.client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "tenants: needs --tls_client_ca_file (a tenant is known by its verified client "
        "certificate; without one every caller would be refused)");
  }
  return absl::OkStatus();
}

}  // namespace

bool TestingTotalsWithoutWait() {
  const char* value = std::getenv("ORDERHOLD_TESTING_TOTALS_WITHOUT_WAIT");
  return value != nullptr && std::string_view(value) == "1";
}

absl::Status ValidateConfig(const Config& config) {
  if (config.grpc_address.empty()) return absl::InvalidArgumentError("grpc_address: empty");
  if (config.metrics_address.empty()) return absl::InvalidArgumentError("metrics_address: empty");
  ORDERHOLD_RETURN_IF_ERROR(grpc_api::ValidateServerTlsOptions(config.grpc_tls));
  ORDERHOLD_RETURN_IF_ERROR(ValidateRedis(config));
  ORDERHOLD_RETURN_IF_ERROR(domain::ValidatePolicy(config.policy));
  ORDERHOLD_RETURN_IF_ERROR(store::ValidateKeyPrefix(config.key_prefix));
  if (config.reap_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reap_interval: must be > 0");
  }
  if (config.redis_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis_timeout: must be > 0");
  }
  if (config.health_check_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("health_check_interval: must be > 0");
  }
  if (config.shutdown_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shutdown_grace: must be >= 0");
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
  if (config.outcomes.event_stream_max_len < 0 ||
      config.outcomes.event_stream_max_len > kMaxEventStreamMaxLen) {
    return absl::InvalidArgumentError(
        absl::StrCat("event_stream_max_len: must be 0-", kMaxEventStreamMaxLen));
  }
  if (config.outcomes.event_stream_max_bytes < 0 ||
      config.outcomes.event_stream_max_bytes > kMaxEventStreamMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("event_stream_max_bytes: must be 0-", kMaxEventStreamMaxBytes));
  }
  if (config.event_retention < absl::Seconds(1)) {
    return absl::InvalidArgumentError("event_retention: must be >= 1s");
  }
  ORDERHOLD_RETURN_IF_ERROR(grpc_api::ValidateServerLimits(config.grpc_limits));
  if (config.max_watches < 1 || config.max_watches > kMaxMaxWatches) {
    return absl::InvalidArgumentError(absl::StrCat("max_watches: must be 1-", kMaxMaxWatches));
  }
  if (config.max_watches_per_caller < 1 || config.max_watches_per_caller > kMaxMaxWatches) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_watches_per_caller: must be 1-", kMaxMaxWatches));
  }
  if (config.events.max_groups_per_caller < 1 ||
      config.events.max_groups_per_caller > domain::kMaxMaxConsumerGroups) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_consumer_groups: must be 1-", domain::kMaxMaxConsumerGroups));
  }
  if (config.consumer_idle_timeout < absl::ZeroDuration() ||
      (config.consumer_idle_timeout > absl::ZeroDuration() &&
       config.consumer_idle_timeout < config.events.ack_timeout)) {
    return absl::InvalidArgumentError(
        "consumer_idle_timeout: must be 0 or >= event_ack_timeout (a consumer reads at least "
        "that often while it has events)");
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateTrust(config));
  if (config.reaper_lease <= config.reap_interval) {
    return absl::InvalidArgumentError("reaper_lease: must be longer than reap_interval");
  }
  return absl::OkStatus();
}

absl::Status ApplyEnvironmentFallbacks() {
  for (const Setting& setting : Settings()) {
    const std::string variable = absl::StrCat("ORDERHOLD_", absl::AsciiStrToUpper(setting.name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(setting.name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(variable, ": ", error));
    }
  }
  return absl::OkStatus();
}

bool AsksForUsage(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    if (absl::StartsWith(arg, "help")) return true;
  }
  return false;
}

absl::StatusOr<Config> ConfigFromFlags() {
  Config config;
  for (const Setting& setting : Settings()) ORDERHOLD_RETURN_IF_ERROR(setting.load(config));
  // "redis://orderhold@host" beside --redis_password_file names the ACL user, as every example of
  // deploy/ writes it (the password is the file's); without a file the lone credential stays the
  // legacy password.
  if (!config.redis_password_file.empty() && config.redis_url.lone_credential) {
    config.redis_url.user = std::exchange(config.redis_url.password, std::string());
    config.redis_url.lone_credential = false;
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

std::string DescribeConfig(const Config& config) {
  std::string described;
  for (const Setting& setting : Settings()) {
    if (setting.describe == nullptr) continue;  // a removed flag
    absl::StrAppend(&described, described.empty() ? "" : " ", setting.name, "=",
                    setting.describe(config));
  }
  return described;
}

}  // namespace orderhold
