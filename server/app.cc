#include "server/app.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/common/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"
#include "server/grpc/health_service.h"
#include "server/grpc/tls_credentials.h"
#include "server/limits_file.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"
#include "server/redis/sentinel_topology.h"
#include "server/redis/tls_context.h"
#include "server/redis_store.h"
#include "server/store/event_nudges.h"
#include "server/store/keys.h"
#include "server/store/noop_hold_store.h"

namespace orderhold {
namespace {

metrics::RedisReconnectReason ToMetric(redis::ReconnectReason reason) {
  switch (reason) {
    case redis::ReconnectReason::kIoError:
      return metrics::RedisReconnectReason::kIoError;
    case redis::ReconnectReason::kPeerClosed:
      return metrics::RedisReconnectReason::kPeerClosed;
    case redis::ReconnectReason::kNotPrimary:
      return metrics::RedisReconnectReason::kNotPrimary;
    case redis::ReconnectReason::kFailover:
      return metrics::RedisReconnectReason::kFailover;
  }
  return metrics::RedisReconnectReason::kIoError;
}

// The replica counts the primaries report (RedisClientOptions::on_replicas), against
// --redis_wait_replicas: orderhold_redis_replicas_not_waited_for, and a warning whenever a count
// changes while the setting is below it. Thread-safe (I/O threads report).
class ReplicaWatch {
 public:
  ReplicaWatch(int wait_replicas, prometheus::Gauge& not_waited)
      : wait_replicas_(wait_replicas), not_waited_(not_waited) {}

  void Report(const std::string& primary, int replicas) {
    absl::MutexLock lock(&mu_);
    // Each connection pool reports what it saw: log a primary's count once per change.
    auto [it, first] = counts_.emplace(primary, replicas);
    if (!first && it->second == replicas) return;
    it->second = replicas;
    int most = 0;
    for (const auto& [unused, count] : counts_) most = std::max(most, count);
    const bool all = wait_replicas_ == kWaitAllReplicas;
    not_waited_.Set(all ? 0 : std::max(0, most - wait_replicas_));
    if (all) {
      LogInfo("redis: primary ", primary, " has ", replicas,
              " replicas; --redis_wait_replicas=all waits for each");
    } else if (replicas > wait_replicas_) {
      LogWarning("redis: primary ", primary, " has ", replicas,
                 " replicas and --redis_wait_replicas=", wait_replicas_, " waits for ",
                 wait_replicas_,
                 ": a failover to one of the others can lose holds already answered OK (and "
                 "answer a paid hold EXPIRED later); --redis_wait_replicas=all keeps them "
                 "(deploy/README.md \"What acknowledged means\")");
    }
  }

 private:
  const int wait_replicas_;
  prometheus::Gauge& not_waited_;
  absl::Mutex mu_;
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

// Fills in how `client` finds and talks to Redis from --redis_url (config.redis_url, parsed by
// ConfigFromFlags) and --redis_mode: credentials, TLS for rediss://, the database, the topology
// (standalone: the URL's host; sentinel: its hosts are the sentinels; cluster: its hosts are
// seeds, and the slot map goes to `*cluster_topology` instead), WAIT, and the reconnect and
// failover metrics.
absl::Status ConnectRedis(const Config& config, metrics::Metrics& metrics,
                          redis::RedisClientOptions& client,
                          std::shared_ptr<redis::ClusterTopology>* cluster_topology) {
  const redis::RedisEndpoint& endpoint = config.redis_url;
  client.node.user = endpoint.user;
  client.node.password = endpoint.password;
  client.node.password_file = config.redis_password_file;
  if (endpoint.tls) {
    ORDERHOLD_ASSIGN_OR_RETURN(client.node.tls, redis::TlsContext::Create(config.redis_tls));
  }
  client.node.connect_timeout = std::min(config.redis_timeout, absl::Milliseconds(500));
  client.db = endpoint.db;
  switch (config.redis_mode) {
    case RedisMode::kStandalone:
      client.topology = std::make_shared<redis::StandaloneTopology>(endpoint.hosts.front());
      break;
    case RedisMode::kSentinel: {
      redis::SentinelOptions sentinel;
      sentinel.sentinels = endpoint.hosts;
      sentinel.master_name = config.redis_sentinel_master;
      sentinel.node.user = config.redis_sentinel_username;
      sentinel.node.password = config.redis_sentinel_password;
      sentinel.node.password_file = config.redis_sentinel_password_file;
      sentinel.node.tls = client.node.tls;
      sentinel.failovers = &metrics.redis_failovers();
      ORDERHOLD_ASSIGN_OR_RETURN(client.topology,
                                 redis::SentinelTopology::Create(std::move(sentinel)));
      break;
    }
    case RedisMode::kCluster: {
      redis::ClusterTopologyOptions cluster;
      cluster.seeds = endpoint.hosts;
      cluster.node.user = client.node.user;
      cluster.node.password = client.node.password;
      cluster.node.password_file = client.node.password_file;
      cluster.node.tls = client.node.tls;
      cluster.failovers = &metrics.redis_failovers();
      cluster.refreshes = &metrics.redis_topology_refreshes();
      ORDERHOLD_ASSIGN_OR_RETURN(*cluster_topology,
                                 redis::ClusterTopology::Create(std::move(cluster)));
      break;
    }
  }
  client.wait_replicas = config.redis_wait_replicas;
  client.wait_timeout = config.redis_wait_timeout;
  // One high-water mark for every pool of this server (a Cluster's nodes, the background pool).
  client.most_replicas = std::make_shared<std::atomic<int>>(0);
  if (config.redis_mode != RedisMode::kStandalone) {
    // Where failovers happen: say what a setting below the replica count can lose.
    auto watch = std::make_shared<ReplicaWatch>(config.redis_wait_replicas,
                                                metrics.redis_replicas_not_waited_for());
    client.on_replicas = [watch](const std::string& primary, int replicas) {
      watch->Report(primary, replicas);
    };
  }
  client.on_reconnect = [&metrics](redis::ReconnectReason reason) {
    metrics.redis_reconnects(ToMetric(reason)).Increment();
  };
  return absl::OkStatus();
}

// Server reflection on one ServerBuilder, or none. Not grpc::reflection::
// InitProtoReflectionServerBuilderPlugin(): that registers the plugin for every ServerBuilder the
// process makes afterwards, and the --health_address server must serve health only.
class Reflection final : public grpc::ServerBuilderOption {
 public:
  explicit Reflection(bool on) : on_(on) {}
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string name = grpc::reflection::ProtoServerReflectionPlugin().name();
    std::erase_if(*plugins, [&](const auto& plugin) { return plugin->name() == name; });
    if (on_) plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
  }

 private:
  const bool on_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<App>> App::Start(const Config& config,
                                                prometheus::Registry& registry) {
  // First: a certificate that cannot be loaded stops the start before anything connects.
  ORDERHOLD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                             grpc_api::MakeServerCredentials(config.grpc_tls));
  // Host time for deadlines, scheduling and metrics; expiry is decided on the Redis clock.
  const Clock& clock = SystemClock::Get();
  std::unique_ptr<App> app(new App());
  app->metrics_ = std::make_unique<metrics::Metrics>(registry);
  if (!config.authz.policy_file.empty()) {
    ORDERHOLD_ASSIGN_OR_RETURN(app->authorizer_,
                               grpc_api::Authorizer::Start(config.authz, *app->metrics_));
  }
  if (!config.tenants.file.empty()) {
    ORDERHOLD_ASSIGN_OR_RETURN(app->tenants_,
                               grpc_api::Tenants::Start(config.tenants, *app->metrics_));
  }
  WarnIfOpen(config);
  store::EventNudgeOptions nudges;
  ORDERHOLD_RETURN_IF_ERROR(app->StartStore(config, nudges));
  app->holds_ = std::make_unique<domain::HoldService>(*app->store_, config.policy, *app->metrics_);
  app->scopes_ = std::make_unique<domain::ScopeService>(*app->store_, *app->holds_, *app->metrics_);
  app->totals_need_wait_ = config.redis_mode == RedisMode::kCluster &&
                           config.redis_wait_replicas == 0 && !TestingTotalsWithoutWait();
  if (config.scope_rules.has_totals()) {
    if (absl::Status refused = app->TotalsRefused(config.scope_rules); !refused.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("scope_limits: ", refused.message()));
    }
  }
  app->holds_->SetScopeRules(config.scope_rules);
  if (app->tenants_ != nullptr) app->holds_->set_tenants(&app->tenants_->table());
  app->scope_limits_file_ = config.scope_limits_file;
  app->MakeReaper(config, clock);  // before the nudges, which it receives
  ORDERHOLD_RETURN_IF_ERROR(app->StartEvents(config, clock, std::move(nudges)));
  ORDERHOLD_RETURN_IF_ERROR(app->Listen(config, std::move(credentials)));
  if (config.run_reaper) app->reaper_->Start();
  return app;
}

namespace {

// Tests of the scope protocol's crash points (tests/e2e/scope_faults_e2e_test.cc):
// ORDERHOLD_TESTING_SCOPE_STEP_SIGNAL="<step>:<KILL|STOP>" sends the process that signal once,
// the first time that step answers (RedisHoldStore's ScopeProtocolOptions::after_step). Unset, as
// in every deployment: no hook.
std::function<void(absl::string_view)> ScopeStepSignal() {
  const char* spec = std::getenv("ORDERHOLD_TESTING_SCOPE_STEP_SIGNAL");
  if (spec == nullptr || *spec == '\0') return nullptr;
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() != 2 || (parts[1] != "KILL" && parts[1] != "STOP")) return nullptr;
  LogInfo("testing: signal ", parts[1], " after the first scope step \"", parts[0], "\"");
  auto fired = std::make_shared<std::atomic<bool>>(false);
  const int signal = parts[1] == "KILL" ? SIGKILL : SIGSTOP;
  return [step = parts[0], signal, fired](absl::string_view done) {
    if (done == step && !fired->exchange(true)) raise(signal);
  };
}

}  // namespace

absl::Status App::TotalsRefused(const domain::ScopeRules& rules) const {
  if (rules.has_capacity() && !store_->counts_sales()) {
    return absl::FailedPreconditionError(
        "the file sets capacity_units, which this store does not count sales for (a Redis "
        "Cluster: the scope's slot is not its users'); server/README.md \"Scope totals\"");
  }
  if (!store_->keeps_scope_index()) {
    return absl::FailedPreconditionError(
        "the file sets total_max_holds or total_max_units, which this store cannot enforce "
        "without a scope index; server/README.md \"Scope totals\"");
  }
  if (totals_need_wait_) {
    return absl::FailedPreconditionError(
        "the file sets total_max_holds or total_max_units, which a Redis Cluster enforces only "
        "with --redis_wait_replicas >= 1 (a step of the scope protocol acknowledged and then lost "
        "in a failover would grant over the total); server/README.md \"Scope totals\"");
  }
  return absl::OkStatus();
}

absl::Status App::ReloadScopeLimits() {
  if (scope_limits_file_.empty()) return absl::OkStatus();
  absl::StatusOr<domain::ScopeRules> rules = LoadLimitsFile(scope_limits_file_);
  if (!rules.ok()) {
    metrics_->limits_reload_errors().Increment();
    LogError("scope_limits: reload failed, the previous rules stay in force: ",
             rules.status().message());
    return rules.status();
  }
  if (absl::Status refused = rules->has_totals() ? TotalsRefused(*rules) : absl::OkStatus();
      !refused.ok()) {
    metrics_->limits_reload_errors().Increment();
    LogError("scope_limits: reload refused, the previous rules stay in force: ", refused.message());
    return refused;
  }
  const size_t count = rules->rules().size();
  holds_->SetScopeRules(*std::move(rules));
  LogInfo("scope_limits: reloaded ", scope_limits_file_, " (", count, " rules)");
  return absl::OkStatus();
}

absl::Status App::StartStore(const Config& config, store::EventNudgeOptions& nudges) {
  if (config.store == StoreKind::kNoop) {
    auto noop = std::make_unique<store::NoopHoldStore>();
    partitions_ = noop.get();
    store_ = std::move(noop);
    return absl::OkStatus();
  }
  RedisStoreOptions options;
  ORDERHOLD_RETURN_IF_ERROR(ConnectRedis(config, *metrics_, options.client, &options.cluster));
  options.moved_redirects = &metrics_->redis_redirects_moved();
  options.ask_redirects = &metrics_->redis_redirects_ask();
  options.client.connections = config.redis_connections;
  options.client.command_timeout = config.redis_timeout;
  options.client.inline_wait = config.redis_inline_wait;
  options.client.errors = &metrics_->redis_errors();
  options.client.failure_log = std::make_shared<redis::RedisFailureLog>();
  options.key_prefix = config.key_prefix;
  options.outcomes = config.outcomes;
  options.outcomes.max_hold_lifetime = config.policy.max_hold_lifetime;
  options.outcomes.default_ttl = config.policy.default_ttl;
  options.functions = config.redis_functions;
  options.scope_protocol = config.scope_protocol;
  options.scope_protocol.after_step = ScopeStepSignal();
  options.scope_protocol.wait_timed_out = [metrics = metrics_.get()](absl::string_view step) {
    if (auto known = metrics::Metrics::ScopeStepOf(step)) {
      metrics->scope_wait_timeouts(*known).Increment();
    }
  };
  // The nudge subscriber talks to the same primaries as the store, as the same user.
  nudges.topology = options.cluster != nullptr
                        ? std::shared_ptr<redis::RedisTopology>(options.cluster)
                        : options.client.topology;
  nudges.node = options.client.node;
  nudges.key_prefix = config.key_prefix;
  nudges.connect_failure_log = options.client.failure_log;
  nudges.nudges = &metrics_->event_nudges();
  nudges.resubscribes = &metrics_->event_nudge_subscriptions();
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<store::RedisHoldStore> store,
                             ConnectRedisStore(std::move(options)));
  redis_store_ = store.get();
  partitions_ = store.get();
  store_ = std::move(store);
  return absl::OkStatus();
}

absl::Status App::StartEvents(const Config& config, const Clock& clock,
                              store::EventNudgeOptions nudges) {
  if (redis_store_ == nullptr) return absl::OkStatus();  // --store=noop: no events
  domain::EventPolicy events = config.events;
  events.enforce_owners = authorizer_ != nullptr;  // a group is its owner's once callers are known
  events_ = std::make_unique<domain::EventService>(*redis_store_, events, *metrics_);
  if (tenants_ != nullptr) events_->set_tenants(&tenants_->table());
  dispatcher_ = std::make_unique<domain::EventDispatcher>(*redis_store_, config.events, clock);
  dispatcher_->Start();
  // The reaper channels, always: a script that lowers a partition's earliest due time wakes the
  // reaper, which otherwise sleeps until the due time it last saw (reaper.h), and a new group
  // has the trimmer count it (event_trimmer.h).
  store::EventNudgeOptions reaper_nudges = nudges;
  reaper_nudges.channels = store::NudgeChannels::kReaper;
  reaper_nudges.nudges = nullptr;
  reaper_nudges.resubscribes = nullptr;
  reaper_nudges.on_due = [reaper = reaper_.get()](int partition) { reaper->OnDueNudge(partition); };
  reaper_nudges.on_group = [reaper = reaper_.get()](int partition) {
    reaper->OnGroupCreated(partition);
  };
  ORDERHOLD_ASSIGN_OR_RETURN(reaper_nudges_,
                             store::EventNudgeSubscriber::Start(std::move(reaper_nudges)));
  reaper_->SetDueNudges([subscriber = reaper_nudges_.get()] {
    return subscriber->subscribed_partitions() == store::KeySchema::kPartitionCount;
  });
  // Scripts that end holds publish a nudge on their partition's event channel: watches are woken
  // by Redis instead of polling; the dispatcher's sweep covers what pub/sub loses. Subscribed
  // only while a watch is open here: otherwise nobody here needs them.
  nudges.on_nudge = [dispatcher = dispatcher_.get()](int partition) {
    dispatcher->OnNudge(partition);
  };
  ORDERHOLD_ASSIGN_OR_RETURN(nudges_, store::OnDemandEventNudges::Start(
                                          std::move(nudges), [dispatcher = dispatcher_.get()] {
                                            return dispatcher->watched();
                                          }));
  return absl::OkStatus();
}

absl::Status App::Listen(const Config& config,
                         std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc_api::ServiceOptions service;
  service.max_watches = config.max_watches;
  service.max_watches_per_caller = config.max_watches_per_caller;
  service.authorizer = authorizer_.get();
  service.trusted_proxies = config.trusted_proxies;
  service.tenants = tenants_.get();
  service_ = std::make_unique<grpc_api::OrderHoldService>(*holds_, *scopes_, events_.get(),
                                                          dispatcher_.get(), *metrics_, service);
  // A reloaded policy reaches open watches too (removed in Shutdown, before the service goes).
  if (authorizer_ != nullptr) {
    authorizer_->SetChangeListener([service = service_.get()] { service->RecheckWatches(); });
  }
  if (tenants_ != nullptr) {
    tenants_->SetChangeListener([service = service_.get()] { service->RecheckWatches(); });
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<Reflection>(config.reflection));
  if (authorizer_ != nullptr) {
    // Health under the policy too (health_service.h): ours instead of gRPC's own, which the
    // server then owns; the health-only port below keeps gRPC's.
    auto health = std::make_unique<grpc_api::HealthService>(authorizer_.get());
    builder.RegisterService(health.get());
    builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(
        std::unique_ptr<grpc::HealthCheckServiceInterface>(health.release())));
  }
  // gRPC 1.51 enables SO_REUSEPORT by default: a second server would bind the same port silently
  // and steal half the traffic. Off, so a taken port is a startup error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc_api::ApplyServerLimits(config.grpc_limits, builder);
  builder.AddListeningPort(config.grpc_address, std::move(credentials), &grpc_port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || grpc_port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.grpc_address, " (address in use or invalid)"));
  }
  std::vector<grpc::HealthCheckServiceInterface*> health = {server_->GetHealthCheckService()};
  if (!config.health_address.empty()) {
    // Its own server: nothing but health is served on the plaintext port.
    grpc::ServerBuilder health_builder;
    health_builder.SetOption(std::make_unique<Reflection>(false));
    health_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    health_builder.AddListeningPort(config.health_address, grpc::InsecureServerCredentials(),
                                    &health_port_);
    health_unimplemented_ = std::make_unique<grpc::CallbackGenericService>();
    health_builder.RegisterCallbackGenericService(health_unimplemented_.get());
    health_server_ = health_builder.BuildAndStart();
    if (health_server_ == nullptr || health_port_ == 0) {
      health_server_.reset();
      return absl::UnavailableError(absl::StrCat("health_address: cannot listen on ",
                                                 config.health_address,
                                                 " (address in use or invalid)"));
    }
    health.push_back(health_server_->GetHealthCheckService());
  }
  health_ = std::make_unique<grpc_api::HealthReporter>(
      *store_, std::move(health), config.health_check_interval, config.redis_timeout);
  health_->Start();
  return absl::OkStatus();
}

namespace {

// Whether the process is in group `gid` (its effective group or a supplementary one).
bool InOwnGroups(gid_t gid) {
  if (gid == ::getegid()) return true;
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, ::getgroups(0, nullptr))));
  const int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  return n > 0 && std::find(groups.begin(), groups.begin() + n, gid) != groups.begin() + n;
}

}  // namespace

std::vector<std::string> App::TrustWarnings(const Config& config) {
  std::vector<std::string> out;
  const absl::string_view address = config.grpc_address;
  const bool loopback = absl::StartsWith(address, "127.") || absl::StartsWith(address, "[::1]") ||
                        absl::StartsWith(address, "localhost:");
  const bool policy = !config.authz.policy_file.empty();
  if (!loopback && !config.grpc_tls.enabled()) {
    out.push_back(absl::StrCat(
        "grpc_address ", address,
        " listens beyond loopback without TLS: anyone who reaches it can call every method as "
        "anyone (set --tls_cert_file, --tls_key_file, --tls_client_ca_file and --authz_policy; "
        "deploy/README.md \"Security\")"));
  } else if (!loopback && config.grpc_tls.client_ca_file.empty()) {
    out.push_back(absl::StrCat(
        "grpc_address ", address,
        " has TLS without --tls_client_ca_file: any client that reaches it can call every "
        "method, and no caller has a principal for a policy to match"));
  } else if (!loopback && !policy) {
    out.push_back(absl::StrCat(
        "grpc_address ", address,
        " has mutual TLS without --authz_policy: every client the CA signed may call every "
        "method, for every user (set --authz_policy; deploy/authz_policy.example.json)"));
  }
  if (!config.redis_url.password.empty()) {
    out.push_back(
        "--redis_url carries a password: it shows in the process list and in the environment of "
        "whoever reads them; put it in --redis_password_file (mode 0600)");
  }
  for (const std::string& file :
       {config.redis_password_file, config.redis_sentinel_password_file}) {
    struct stat info;
    if (file.empty() || ::stat(file.c_str(), &info) != 0) continue;
    // Group access is fine for the server's own groups: Kubernetes mounts Secrets root:<fsGroup>
    // 0440 (the kit's deployment.yaml), which is how a non-root server reads them.
    const bool other_group = (info.st_mode & S_IRWXG) != 0 && !InOwnGroups(info.st_gid);
    if ((info.st_mode & S_IRWXO) != 0 || other_group) {
      out.push_back(absl::StrCat("password file ", file,
                                 " is readable by others or by a group the server is not in (mode ",
                                 absl::StrFormat("%04o", info.st_mode & 07777),
                                 "): chmod 0600 it"));
    }
  }
  return out;
}

void App::WarnIfOpen(const Config& config) {
  for (const std::string& warning : TrustWarnings(config)) LogWarning(warning);
}

absl::Status App::ReloadAuthzPolicy() {
  if (authorizer_ == nullptr) return absl::OkStatus();
  return authorizer_->Reload();
}

absl::Status App::ReloadTenants() {
  if (tenants_ == nullptr) return absl::OkStatus();
  return tenants_->Reload();
}

void App::MakeReaper(const Config& config, const Clock& clock) {
  reaper::ReaperOptions options;
  options.interval = config.reap_interval;
  options.call_timeout = config.redis_timeout * 2;
  options.replica_id = reaper::MakeReplicaId();
  options.membership_ttl = config.reaper_lease;
  options.lease = config.reaper_lease;
  options.standby_after = config.reap_interval * 3 / 2;
  options.scope_pending_age = config.scope_pending_age;
  options.pace_window = config.reap_interval * 3 / 5;
  options.event_retention = config.event_retention;
  options.consumer_idle_timeout = config.consumer_idle_timeout;
  options.layout_migration_done = config.outcomes.layout_migration_done;
  reaper_ = std::make_unique<reaper::Reaper>(*partitions_, *metrics_, options, clock, redis_store_);
}

App::~App() { Shutdown(absl::Seconds(10)); }

void App::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (authorizer_ != nullptr) authorizer_->SetChangeListener(nullptr);
  if (tenants_ != nullptr) tenants_->SetChangeListener(nullptr);
  if (health_ != nullptr) health_->Stop();
  if (service_ != nullptr) service_->EndWatches();
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING for all, final
    if (health_server_ != nullptr) health_server_->GetHealthCheckService()->Shutdown();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server_->Wait();
  }
  if (health_server_ != nullptr) {
    health_server_->Shutdown(absl::ToChronoTime(absl::Now()));
    health_server_->Wait();
  }
  nudges_.reset();
  if (dispatcher_ != nullptr) dispatcher_->Stop();
  if (reaper_ != nullptr) {
    reaper_->Stop();
    // Its ticks ask reaper_nudges_ whether every channel is subscribed: not once it is gone (tests
    // call RunOnce after a shutdown).
    reaper_->SetDueNudges(nullptr);
  }
  reaper_nudges_.reset();
}

}  // namespace orderhold
