#include "server/metrics/metrics.h"

#include <array>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>

namespace orderhold::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

const char* const kReasonNames[kRejectReasonCount] = {"quota_exceeded",
                                                      "invalid_argument",
                                                      "unavailable",
                                                      "deadline_exceeded",
                                                      "other",
                                                      "already_ended",
                                                      "user_unit_limit",
                                                      "scope_hold_limit",
                                                      "scope_unit_limit",
                                                      "already_exists",
                                                      "scope_total_limit",
                                                      "scope_sold_out",
                                                      "scope_not_open",
                                                      "scope_closed",
                                                      "user_purchase_limit",
                                                      "limit_class_denied"};
const char* const kReconnectReasonNames[kRedisReconnectReasonCount] = {"io_error", "peer_closed",
                                                                       "not_primary", "failover"};
const char* const kMethodNames[kMethodCount] = {"PlaceHold",         "Pay",
                                                "ListHolds",         "CancelHold",
                                                "WatchHoldEvents",   "AckHoldEvents",
                                                "ExtendHold",        "GetHold",
                                                "ReleaseHolds",      "DeleteConsumerGroup",
                                                "GetScopeUsage",     "ListScopeHolds",
                                                "ReleaseScopeHolds", "PutScopeRule",
                                                "GetScopeRule",      "ListScopeRules",
                                                "DeleteScopeRule",   "CloseScope",
                                                "ReturnUnits"};
const char* const kReloadResultNames[2] = {"success", "failure"};
const char* const kScopeSweepActionNames[5] = {"settled", "fenced", "dropped", "audited",
                                               "ghost_dropped"};
const char* const kScopeStepNames[4] = {"take", "place", "extend", "drop"};
const char* const kExtensionResultNames[kExtensionResultCount] = {"extended", "capped", "unchanged",
                                                                  "exhausted", "ended"};

prometheus::Gauge& Gauge(prometheus::Registry& registry, const std::string& name,
                         const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Counter& Counter(prometheus::Registry& registry, const std::string& name,
                             const std::string& help) {
  return BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

// A counter family `name`{reason} with one child per entry of `reasons`, created now so that
// each exports 0 from the start; `children[i]` is the child of reasons[i].
template <size_t N>
void CountersByReason(prometheus::Registry& registry, const std::string& name,
                      const std::string& help, const char* const (&reasons)[N],
                      std::array<prometheus::Counter*, N>& children,
                      const std::string& label = "reason") {
  auto& family = BuildCounter().Name(name).Help(help).Register(registry);
  for (size_t i = 0; i < N; ++i) children[i] = &family.Add({{label, reasons[i]}});
}

}  // namespace

Metrics::Metrics(prometheus::Registry& registry)
    : limits_reload_errors_(Counter(registry, "orderhold_limits_reload_errors_total",
                                    "Re-reads of the --scope_limits file (SIGHUP) that failed; "
                                    "the previous rules stay in force.")),
      redis_replicas_not_waited_for_(
          Gauge(registry, "orderhold_redis_replicas_not_waited_for",
                "Replicas of the Redis primary (the most over primaries) a write is not waited "
                "for (connected replicas - --redis_wait_replicas, >= 0): a failover to one can "
                "lose holds already answered OK.")),
      holds_placed_(Counter(registry, "orderhold_holds_placed_total",
                            "Holds created by PlaceHold (idempotent retries not counted).")),
      holds_paid_(Counter(registry, "orderhold_holds_paid_total", "Holds paid (removed by Pay).")),
      units_returned_(Counter(registry, "orderhold_units_returned_total",
                              "Units of paid holds given back by ReturnUnits.")),
      holds_cancelled_(Counter(registry, "orderhold_holds_cancelled_total",
                               "Holds cancelled (ended by CancelHold or ReleaseHolds).")),
      holds_expired_(Counter(registry, "orderhold_holds_expired_total",
                             "Holds ended as EXPIRED (reaper or lazy cleanup).")),
      events_appended_(Counter(registry, "orderhold_events_appended_total",
                               "Hold events appended (one per ended hold).")),
      events_delivered_(Counter(registry, "orderhold_events_delivered_total",
                                "Hold events sent to watchers, redeliveries included.")),
      events_redelivered_(Counter(registry, "orderhold_events_redelivered_total",
                                  "Hold events sent again (delivery_count > 1).")),
      events_acked_(Counter(registry, "orderhold_events_acked_total",
                            "Hold events acked (AckHoldEvents, or filtered out by a watch).")),
      events_trimmed_unacked_(Counter(registry, "orderhold_events_trimmed_unacked_total",
                                      "Hold events deleted by --event_retention before some "
                                      "consumer group acked them.")),
      watches_(Gauge(registry, "orderhold_watches",
                     "WatchHoldEvents streams open on this server (at most --max_watches).")),
      // 1 ms .. 60 s: milliseconds when a nudge wakes the watchers, up to the safety sweep's
      // interval when a nudge was missed, plus the reaper's lag for an expiry (its end time is
      // its expire time).
      event_delivery_delay_(
          BuildHistogram()
              .Name("orderhold_event_delivery_delay_seconds")
              .Help("Per first delivery of a hold event: time written to a watcher (host clock) "
                    "minus the hold's end time (Redis clock).")
              .Register(registry)
              .Add({}, Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60})),
      oldest_unacked_family_(BuildGauge()
                                 .Name("orderhold_events_oldest_unacked_age_seconds")
                                 .Help("Age of the group's oldest unacked hold event, in the "
                                       "partitions this replica reaps (max by group).")
                                 .Register(registry)),
      reaper_backlog_(Gauge(registry, "orderhold_reaper_backlog_seconds",
                            "Age of the oldest due-but-unreaped hold at the start of the last "
                            "tick, in the partitions this replica owns or checks as standby.")),
      reaper_owned_partitions_(Gauge(registry, "orderhold_reaper_owned_partitions",
                                     "Index partitions this replica reaps.")),
      layout_migration_users_left_(
          Gauge(registry, "orderhold_layout_migration_users_left",
                "Users of the partitions this replica owns that the layout migration's sweep has "
                "still to check (an upper bound of those in an older shape); 0 once done.")),
      scope_pending_takes_(
          Gauge(registry, "orderhold_scope_pending_takes",
                "Redis Cluster: scope takes waiting for their settle in the partitions this "
                "replica owned last tick.")),
      scope_oldest_pending_take_(
          Gauge(registry, "orderhold_scope_oldest_pending_take_seconds",
                "Redis Cluster: age of the oldest scope take waiting for its settle in the "
                "partitions this replica owned last tick, on the scope nodes' clocks; 0 when "
                "none.")),
      redis_errors_(Counter(registry, "orderhold_redis_errors_total",
                            "Redis commands that failed: connect, I/O, timeout or error reply.")),
      redis_failovers_(Counter(registry, "orderhold_redis_failovers_total",
                               "Changes of the Redis primary's address seen (Sentinel: a "
                               "+switch-master event or a poll finding another primary; Cluster: "
                               "a slot map refresh in which a primary was replaced; the first "
                               "primary or map found at start does not count).")),
      redis_topology_refreshes_(Counter(registry, "orderhold_redis_topology_refreshes_total",
                                        "Redis Cluster slot map fetches attempted (at start, "
                                        "every 5 s, and on MOVED or a node failure, at most one "
                                        "per 100 ms).")),
      event_nudges_(Counter(registry, "orderhold_event_nudges_total",
                            "Event nudges received from Redis (one per script call that ended "
                            "holds in a partition).")),
      event_nudge_subscriptions_(Counter(registry, "orderhold_event_nudge_subscriptions_total",
                                         "Event nudge channel subscriptions made (each partition "
                                         "when a first watch opens, after a reconnect or a slot "
                                         "move).")),
      // 1 ms .. 60 s, fine around one second: the lag objective is p99 <= 1.2 s.
      reaper_lag_(
          BuildHistogram()
              .Name("orderhold_reaper_lag_seconds")
              .Help("Per reaped hold: reap time minus expire time, Redis clock.")
              .Register(registry)
              .Add({}, Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                   0.5,   0.75,  0.9,  1,     1.1,  1.2, 1.3,
                                                   1.5,   2,     3,    5,     10,   30,  60})),
      reaper_tick_duration_(
          BuildHistogram()
              .Name("orderhold_reaper_tick_duration_seconds")
              .Help("Wall time of one reaper tick (its first calls are paced over 0.6 of the "
                    "reap interval).")
              .Register(registry)
              .Add({}, Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      reaper_tick_redis_time_(
          BuildHistogram()
              .Name("orderhold_reaper_tick_redis_seconds")
              .Help("Per reaper tick: the sum of its reap calls' round trips, host clock.")
              .Register(registry)
              .Add({}, Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      reaper_calls_in_flight_(Gauge(registry, "orderhold_reaper_calls_in_flight",
                                    "Reap script calls outstanding now.")),
      reaper_last_success_(BuildGauge()
                               .Name("orderhold_reaper_last_success_timestamp_seconds")
                               .Help("Unix time of the last reaper tick that completed without "
                                     "error.")
                               .Register(registry)
                               .Add({})) {
  CountersByReason(registry, "orderhold_holds_rejected_total",
                   "PlaceHold calls that did not yield a hold, by reason (quota_exceeded is the "
                   "user's hold limit).",
                   kReasonNames, rejected_);
  CountersByReason(registry, "orderhold_authz_policy_reloads_total",
                   "Reads of a changed --authz_policy file, by result (failure: the previous "
                   "policy stays in force).",
                   kReloadResultNames, authz_policy_reloads_, "result");
  CountersByReason(registry, "orderhold_scope_sweep_actions_total",
                   "Redis Cluster: what the scope sweep did, by action: settled (a take whose "
                   "settle never came, its hold live), fenced (such a take without a live hold: "
                   "fenced and dropped), dropped (an end's entry dropped again); after a "
                   "failover, audited (entries handed to the sweep) and ghost_dropped (those "
                   "whose hold was gone).",
                   kScopeSweepActionNames, scope_sweep_actions_, "action");
  CountersByReason(registry, "orderhold_scope_wait_timeouts_total",
                   "Redis Cluster: scope protocol steps whose write ran but whose WAIT answered "
                   "fewer replicas than --redis_wait_replicas in time, by step (take, place, "
                   "extend, drop).",
                   kScopeStepNames, scope_wait_timeouts_, "step");
  CountersByReason(registry, "orderhold_tenants_reloads_total",
                   "Reads of a changed --tenants file, by result (failure: the previous tenants "
                   "stay in force).",
                   kReloadResultNames, tenants_reloads_, "result");
  CountersByReason(registry, "orderhold_calls_denied_total",
                   "Calls refused PERMISSION_DENIED by the --authz_policy, by --tenants or by a "
                   "consumer group's owner, by method.",
                   kMethodNames, calls_denied_, "method");
  CountersByReason(registry, "orderhold_hold_extensions_total",
                   "ExtendHold calls that found the hold, by result: extended, capped (moved up "
                   "to the hold's max_expire_time), unchanged (nothing moved), exhausted "
                   "(--max_extensions used up), ended (the hold had ended).",
                   kExtensionResultNames, extensions_, "result");
  CountersByReason(registry, "orderhold_redis_reconnects_total",
                   "Redis connections dropped to be made again, by reason: io_error (a write or "
                   "read failed or timed out), peer_closed (Redis closed it while idle), "
                   "not_primary (READONLY or MASTERDOWN), failover (it went to a primary since "
                   "replaced).",
                   kReconnectReasonNames, redis_reconnects_);
  auto& redirects = BuildCounter()
                        .Name("orderhold_redis_redirects_total")
                        .Help(
                            "Redis Cluster redirects followed, by kind: moved (the slot's "
                            "primary changed: the map was behind) or ask (the slot is "
                            "migrating).")
                        .Register(registry);
  redis_redirects_moved_ = &redirects.Add({{"kind", "moved"}});
  redis_redirects_ask_ = &redirects.Add({{"kind", "ask"}});
  auto& requests = BuildCounter()
                       .Name("orderhold_grpc_requests_total")
                       .Help("Finished OrderHold gRPC calls, by method and status code.")
                       .Register(registry);
  auto& durations = BuildHistogram()
                        .Name("orderhold_grpc_request_duration_seconds")
                        .Help("Server-side duration of OrderHold gRPC calls, by method.")
                        .Register(registry);
  for (int m = 0; m < kMethodCount; ++m) {
    for (int c = 0; c < kStatusCodeCount; ++c) {
      // absl status codes equal gRPC's; label values use gRPC's names ("RESOURCE_EXHAUSTED").
      const std::string code = absl::StatusCodeToString(static_cast<absl::StatusCode>(c));
      requests_[m][c] = &requests.Add({{"method", kMethodNames[m]}, {"code", code}});
    }
    request_duration_[m] =
        &durations.Add({{"method", kMethodNames[m]}},
                       Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                   0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5});
  }
}

void Metrics::SetOldestUnackedAge(const std::string& group, double seconds) {
  absl::MutexLock lock(&groups_mu_);
  prometheus::Gauge*& gauge = oldest_unacked_[group];
  if (gauge == nullptr) gauge = &oldest_unacked_family_.Add({{"group", group}});
  gauge->Set(seconds);
}

const char* MethodName(Method method) { return kMethodNames[static_cast<int>(method)]; }

void Metrics::ForgetGroup(const std::string& group) {
  absl::MutexLock lock(&groups_mu_);
  const auto it = oldest_unacked_.find(group);
  if (it == oldest_unacked_.end()) return;
  oldest_unacked_family_.Remove(it->second);
  oldest_unacked_.erase(it);
}

void Metrics::RecordRequest(Method method, absl::StatusCode code, absl::Duration elapsed) {
  const int m = static_cast<int>(method);
  int c = static_cast<int>(code);
  if (c < 0 || c >= kStatusCodeCount) c = static_cast<int>(absl::StatusCode::kUnknown);
  requests_[m][c]->Increment();
  request_duration_[m]->Observe(absl::ToDoubleSeconds(elapsed));
}

std::optional<Metrics::ScopeStep> Metrics::ScopeStepOf(absl::string_view name) {
  for (size_t i = 0; i < std::size(kScopeStepNames); ++i) {
    if (name == kScopeStepNames[i]) return static_cast<ScopeStep>(i);
  }
  return std::nullopt;
}

}  // namespace orderhold::metrics
