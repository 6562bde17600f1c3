// App: one running OrderHold server, wired from a Config: Redis store (or, for benchmarks only,
// the no-op store), domain services, the event dispatcher and Redis' nudges to it, gRPC
// server (OrderHold + reflection + standard health), health reporter and reaper. main() and the
// end-to-end tests build it the same way; only main adds flags, signals and the /metrics exposer.
//
// Thread-safety: Start/Shutdown/destructor from one owner thread; accessors are thread-safe.
#ifndef ORDERHOLD_SERVER_APP_H_
#define ORDERHOLD_SERVER_APP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "prometheus/registry.h"
#include "server/common/clock.h"
#include "server/config.h"
#include "server/domain/event_dispatcher.h"
#include "server/domain/event_service.h"
#include "server/domain/hold_service.h"
#include "server/domain/scope_service.h"
#include "server/grpc/health_reporter.h"
#include "server/grpc/orderhold_service.h"
#include "server/metrics/metrics.h"
#include "server/reaper/reaper.h"
#include "server/store/event_nudges.h"
#include "server/store/hold_store.h"
#include "server/store/redis_hold_store.h"

namespace orderhold {

class App {
 public:
  // Starts everything from `config` and listens on config.grpc_address. `config` is as
  // ConfigFromFlags returns it, or one that passes ValidateConfig (tests build their own): Start
  // wires its values (the parsed redis_url, the scope_rules read) and checks none of them again.
  // Redis being down is not an error (health starts NOT_SERVING and recovers by itself). Metrics
  // are registered on `registry`, which must outlive the App.
  // The gRPC port is plaintext, or TLS / mutual TLS with config.grpc_tls (health and reflection
  // included; see grpc/tls_credentials.h); with config.authz.policy_file, every call is checked
  // against it (grpc/authorizer.h). config.health_address adds a plaintext health-only port.
  // Errors: INVALID_ARGUMENT (a --tls_* or --redis_tls_* file that cannot be loaded: the message
  // names the flag and the file), UNAVAILABLE (cannot listen: address taken or invalid;
  // SO_REUSEPORT is off, so a taken port is always an error).
  static absl::StatusOr<std::unique_ptr<App>> Start(const Config& config,
                                                    prometheus::Registry& registry);

  // Shutdown(absl::Seconds(10)) unless already shut down.
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Graceful stop: health NOT_SERVING, open WatchHoldEvents streams end with UNAVAILABLE (their
  // consumers reconnect elsewhere and resume), no new calls, in-flight calls finish (cancelled
  // after `grace`), then the reaper stops and hands its partitions over. Idempotent.
  void Shutdown(absl::Duration grace);

  // Re-reads the --scope_limits file (main calls it on SIGHUP). A valid file replaces the rules
  // at once (live holds are never ended by lowered limits: new PlaceHolds are checked against the
  // new rules); an invalid or unreadable one keeps the old rules, is logged with its error and
  // counted in orderhold_limits_reload_errors_total. Returns that error, OK otherwise, and OK
  // doing nothing without --scope_limits. Thread-safe.
  absl::Status ReloadScopeLimits();

  // Re-reads the --authz_policy file now (main calls it on SIGHUP; it is also polled every
  // --authz_policy_refresh_interval): see grpc_api::Authorizer::Reload. OK doing nothing without
  // --authz_policy. Thread-safe.
  absl::Status ReloadAuthzPolicy();

  // Re-reads the --tenants file now (main calls it on SIGHUP; it is also polled every
  // --tenants_refresh_interval): see grpc_api::Tenants::Reload. OK doing nothing without
  // --tenants. Thread-safe.
  absl::Status ReloadTenants();

  // The bound gRPC port (useful with port 0), and the --health_address port (0 without one).
  int grpc_port() const { return grpc_port_; }
  int health_port() const { return health_port_; }
  metrics::Metrics& metrics() { return *metrics_; }
  reaper::Reaper& reaper() { return *reaper_; }
  // The Redis store; nullptr with --store=noop.
  store::RedisHoldStore* redis_store() { return redis_store_; }

  // The start-up warnings `config` earns about trust, one line each: a gRPC port
  // beyond loopback without TLS, with TLS but without --tls_client_ca_file, or with mutual TLS but
  // without --authz_policy; --reflection=true under a policy; a password inside --redis_url; a
  // password file readable by others or by a group the server is not in (its own group is how a
  // non-root server reads a Kubernetes Secret: root:<fsGroup> 0440). Empty when none applies. Reads
  // nothing but the password files' modes (stat). Thread-safe.
  static std::vector<std::string> TrustWarnings(const Config& config);

 private:
  App() = default;
  // The steps of Start, in order. The store (Redis or no-op) and, for Redis, the nudge
  // subscriber's connection options in `nudges`.
  absl::Status StartStore(const Config& config, store::EventNudgeOptions& nudges);
  // Event reads, the dispatcher and the nudge subscriber (nothing with --store=noop).
  absl::Status StartEvents(const Config& config, const Clock& clock,
                           store::EventNudgeOptions nudges);
  // The gRPC server on config.grpc_address, and health.
  absl::Status Listen(const Config& config, std::shared_ptr<grpc::ServerCredentials> credentials);
  // The reaper, not started (Start starts it with config.run_reaper, once the nudges it receives
  // are wired).
  void MakeReaper(const Config& config, const Clock& clock);
  // Logs TrustWarnings(config), one line each.
  static void WarnIfOpen(const Config& config);

  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<grpc_api::Authorizer> authorizer_;  // null without --authz_policy
  std::unique_ptr<grpc_api::Tenants> tenants_;        // null without --tenants
  std::unique_ptr<store::HoldStore> store_;
  store::RedisHoldStore* redis_store_ = nullptr;  // store_ when it is the Redis store
  store::PartitionStore* partitions_ = nullptr;   // store_'s reaper side (the reaper's store)
  std::unique_ptr<domain::HoldService> holds_;
  std::unique_ptr<domain::ScopeService> scopes_;
  std::unique_ptr<domain::EventService> events_;  // null with --store=noop
  // Receives the nudges of reaper_nudges_ (declared before it, destroyed after it).
  std::unique_ptr<reaper::Reaper> reaper_;
  // Which partitions the watches read, and the safety sweep; null with --store=noop.
  std::unique_ptr<domain::EventDispatcher> dispatcher_;
  // Redis' event nudges to dispatcher_, while a watch is open (destroyed first: it calls into
  // dispatcher_); null with noop.
  std::unique_ptr<store::OnDemandEventNudges> nudges_;
  // Redis' reaper nudges (due, group) to reaper_; null with noop.
  std::unique_ptr<store::EventNudgeSubscriber> reaper_nudges_;
  std::unique_ptr<grpc_api::OrderHoldService> service_;
  std::unique_ptr<grpc::Server> server_;
  // Registered on health_server_ only so that gRPC 1.51 builds it: its ServerBuilder refuses a
  // server with no service of its own ("At least one of the completion queues must be frequently
  // polled"; the default health service is added later, in Server::Start), and a callback generic
  // service counts as one. It answers every method but health UNIMPLEMENTED, as gRPC does for an
  // unknown method. Declared before health_server_, which must die first.
  std::unique_ptr<grpc::CallbackGenericService> health_unimplemented_;
  std::unique_ptr<grpc::Server> health_server_;  // --health_address; null without
  std::unique_ptr<grpc_api::HealthReporter> health_;
  int grpc_port_ = 0;
  int health_port_ = 0;
  bool shut_down_ = false;
  std::string scope_limits_file_;  // --scope_limits; empty: none
  // A Redis Cluster without WAIT (--redis_wait_replicas=0): scope totals are refused.
  bool totals_need_wait_ = false;
  // FAILED_PRECONDITION when this server cannot enforce the totals or capacities of `rules` (no
  // scope index, a Redis Cluster without WAIT, or capacities on a store that counts no sales),
  // saying why; OK otherwise.
  absl::Status TotalsRefused(const domain::ScopeRules& rules) const;
};

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_APP_H_
