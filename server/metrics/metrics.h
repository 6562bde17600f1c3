// The Prometheus metrics of OrderHold, created once per process on a prometheus-cpp Registry and
// passed by reference to the parts that record them. Every child series is resolved in the
// constructor, so recording never calls Family::Add on a hot path. No label carries a user id.
//
// Names follow https://prometheus.io/docs/practices/naming/ (base units: seconds; counters end in
// _total). The README's metrics table documents each one.
//
// Thread-safety: all methods are thread-safe (prometheus-cpp counters, gauges and histograms are).
#ifndef ORDERHOLD_SERVER_METRICS_METRICS_H_
#define ORDERHOLD_SERVER_METRICS_METRICS_H_

#include <array>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace orderhold::metrics {

// Label `reason` of orderhold_holds_rejected_total.
enum class RejectReason {
  kQuotaExceeded,      // "quota_exceeded": the user had max_holds live holds (USER_HOLD_LIMIT)
  kInvalidArgument,    // "invalid_argument": bad user_id, order_id or ttl
  kUnavailable,        // "unavailable": Redis unreachable or failing
  kDeadlineExceeded,   // "deadline_exceeded": the call's deadline passed first
  kOther,              // "other": any other error
  kAlreadyEnded,       // "already_ended": the order's hold already ended (FAILED_PRECONDITION)
  kUserUnitLimit,      // "user_unit_limit": the user's units would exceed --max_units
  kScopeHoldLimit,     // "scope_hold_limit": the user's holds in the scope would exceed its limit
  kScopeUnitLimit,     // "scope_unit_limit": the user's units in the scope would exceed its limit
  kAlreadyExists,      // "already_exists": a retry with another scope, quantity or labels
  kScopeTotalLimit,    // "scope_total_limit": the scope's holds or units across every user would
                       // exceed its total (SCOPE_TOTAL_LIMIT)
  kScopeSoldOut,       // "scope_sold_out": held plus sold units would exceed the scope's capacity
                       // (SCOPE_SOLD_OUT)
  kScopeNotOpen,       // "scope_not_open": the scope's runtime rule is PAUSED or before its
                       // open_time (SCOPE_NOT_OPEN)
  kScopeClosed,        // "scope_closed": the scope's runtime rule is CLOSED or past its close_time
                       // (SCOPE_CLOSED)
  kUserPurchaseLimit,  // "user_purchase_limit": the user's holds plus purchases in the scope would
                       // exceed the runtime rule's purchase cap (USER_PURCHASE_LIMIT)
  kLimitClassDenied,   // "limit_class_denied": the limit class asked is not the caller's to use
                       // (PERMISSION_DENIED, LIMIT_CLASS_DENIED)
};
inline constexpr int kRejectReasonCount = 16;

// Label `method` of the orderhold_grpc_* metrics.
enum class Method {
  kPlaceHold,
  kPay,
  kListHolds,
  kCancelHold,
  kWatchHoldEvents,
  kAckHoldEvents,
  kExtendHold,
  kGetHold,
  kReleaseHolds,
  kDeleteConsumerGroup,
  kGetScopeUsage,
  kListScopeHolds,
  kReleaseScopeHolds,
  kPutScopeRule,
  kGetScopeRule,
  kListScopeRules,
  kDeleteScopeRule,
  kCloseScope,
  kReturnUnits,
};
inline constexpr int kMethodCount = 19;

// The rpc's name as the `method` label and gRPC's path use it: "PlaceHold".
const char* MethodName(Method method);

// Label `result` of orderhold_hold_extensions_total: what an ExtendHold call did.
enum class ExtensionResult {
  kExtended,   // "extended": the expiry moved to now + ttl
  kCapped,     // "capped": the expiry moved, up to the hold's max_expire_time (now + ttl was past)
  kUnchanged,  // "unchanged": nothing moved (now + ttl not after the expiry, at the cap, or a
               // replay of a counted request_id)
  kExhausted,  // "exhausted": refused, --max_extensions used up (RESOURCE_EXHAUSTED)
  kEnded,      // "ended": the hold had ended (PAID, CANCELLED, EXPIRED): FAILED_PRECONDITION
};
inline constexpr int kExtensionResultCount = 5;
inline constexpr int kStatusCodeCount = 17;  // gRPC/absl codes 0 (OK) .. 16 (UNAUTHENTICATED)

// Label `reason` of orderhold_redis_reconnects_total: why a Redis connection was dropped to be
// made again. One to one with store::ReconnectReason (metrics does not depend on the store, so
// App maps one onto the other).
enum class RedisReconnectReason {
  kIoError,     // "io_error": a write or read failed or timed out (its batch's outcome is unknown)
  kPeerClosed,  // "peer_closed": Redis closed it while idle (restart, CLIENT KILL, idle timeout)
  kNotPrimary,  // "not_primary": READONLY or MASTERDOWN, the node is no longer the primary
  kFailover,    // "failover": the primary changed; the connection went to the old one
};
inline constexpr int kRedisReconnectReasonCount = 4;

class Metrics {
 public:
  // Registers every family on `registry`, which must outlive this object.
  explicit Metrics(prometheus::Registry& registry);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // orderhold_limits_reload_errors_total: SIGHUP re-reads of --scope_limits that failed (the old
  // rules stay in force).
  prometheus::Counter& limits_reload_errors() { return limits_reload_errors_; }
  // orderhold_authz_policy_reloads_total{result="success"|"failure"}: reads of a changed
  // --authz_policy file; on failure the previous policy stays in force.
  prometheus::Counter& authz_policy_reloads(bool ok) { return *authz_policy_reloads_[ok ? 0 : 1]; }
  // orderhold_tenants_reloads_total{result="success"|"failure"}: reads of a changed --tenants
  // file; on failure the previous tenants stay in force.
  prometheus::Counter& tenants_reloads(bool ok) { return *tenants_reloads_[ok ? 0 : 1]; }
  // orderhold_calls_denied_total{method}: calls refused PERMISSION_DENIED by the --authz_policy,
  // by --tenants (a caller in no tenant, or outside its own) or by a consumer group's owner (every
  // method is exported from the start, at 0).
  prometheus::Counter& calls_denied(Method method) {
    return *calls_denied_[static_cast<int>(method)];
  }
  // orderhold_redis_replicas_not_waited_for: the replicas of the Redis primary (the most over the
  // primaries, in Cluster mode) a write is not waited for: the primary's connected replicas minus
  // --redis_wait_replicas, at least 0. Above 0, a failover to such a replica can lose holds
  // already answered OK (deploy/README.md "What acknowledged means").
  prometheus::Gauge& redis_replicas_not_waited_for() { return redis_replicas_not_waited_for_; }
  // orderhold_holds_placed_total: holds created (idempotent retries not counted).
  prometheus::Counter& holds_placed() { return holds_placed_; }
  // orderhold_holds_paid_total: holds removed by a successful Pay.
  prometheus::Counter& holds_paid() { return holds_paid_; }
  // orderhold_units_returned_total: units of paid holds given back by ReturnUnits (retries of a
  // request_id not counted).
  prometheus::Counter& units_returned() { return units_returned_; }
  // orderhold_holds_cancelled_total: holds ended by a successful CancelHold or ReleaseHolds.
  prometheus::Counter& holds_cancelled() { return holds_cancelled_; }
  // orderhold_holds_expired_total: holds ended as EXPIRED, by the reaper or by the lazy cleanup
  // inside PlaceHold, Pay, CancelHold, ExtendHold and ReleaseHolds.
  prometheus::Counter& holds_expired() { return holds_expired_; }
  // orderhold_events_appended_total: hold events appended by this replica's scripts (one per
  // ended hold: paid + cancelled + expired; and one per return).
  prometheus::Counter& events_appended() { return events_appended_; }
  // orderhold_events_delivered_total: events sent to watchers (redeliveries included).
  prometheus::Counter& events_delivered() { return events_delivered_; }
  // orderhold_events_redelivered_total: of those, deliveries with delivery_count > 1.
  prometheus::Counter& events_redelivered() { return events_redelivered_; }
  // orderhold_events_acked_total: events acked (by AckHoldEvents, or by the server for events a
  // watch's outcome filter left out).
  prometheus::Counter& events_acked() { return events_acked_; }
  // orderhold_events_trimmed_unacked_total: events deleted by --event_retention before some group
  // acked them.
  prometheus::Counter& events_trimmed_unacked() { return events_trimmed_unacked_; }
  // orderhold_watches: WatchHoldEvents streams open on this server now (<= --max_watches).
  prometheus::Gauge& watches() { return watches_; }
  // orderhold_event_delivery_delay_seconds: per first delivery of an event (delivery_count 1),
  // the time it was written to a watcher (host clock) minus the hold's end time (Redis clock):
  // what a consumer waits to learn of an end. Redeliveries are left out (they wait for
  // --event_ack_timeout by design).
  prometheus::Histogram& event_delivery_delay() { return event_delivery_delay_; }
  // orderhold_events_oldest_unacked_age_seconds{group}: age of the group's oldest unacked event
  // in the partitions this replica reaps (0 when none); use max by (group) across replicas.
  void SetOldestUnackedAge(const std::string& group, double seconds);
  // Removes the group's orderhold_events_oldest_unacked_age_seconds series (a deleted group).
  void ForgetGroup(const std::string& group);
  // orderhold_reaper_backlog_seconds: age of the oldest due-but-unreaped hold seen at the start of
  // the last tick, over the partitions this replica owns or checked as standby (0 when none is
  // due).
  prometheus::Gauge& reaper_backlog() { return reaper_backlog_; }
  // orderhold_reaper_owned_partitions: index partitions this replica reaps.
  prometheus::Gauge& reaper_owned_partitions() { return reaper_owned_partitions_; }
  // orderhold_layout_migration_users_left: users of the partitions this replica owns that the
  // layout migration's sweep has still to check (an upper bound of those still in an older shape,
  // a partition not checked yet counting 1; reaper/migration_sweep.h); 0 once every owned
  // partition is done. Sum across replicas.
  prometheus::Gauge& layout_migration_users_left() { return layout_migration_users_left_; }
  // Redis Cluster's scope sweep (reaper.h; server/README.md "Scope totals"):
  // orderhold_scope_sweep_actions_total{action}: what the sweep did, "settled" (a take whose settle
  // never came, its hold live: the entry follows it), "fenced" (such a take without a live hold:
  // fenced in the user's slot and its entry dropped), "dropped" (an end's entry dropped again from
  // the stream's record of it); and orderhold_scope_pending_takes: takes waiting for their settle
  // in the partitions this replica owned last tick (sum them across replicas; a steady value well
  // above the call rate x a round trip means settles are being lost).
  // After a failover the audit hands live entries to the sweep: "audited" counts them,
  // "ghost_dropped" those whose hold was gone (a failover lost it) and that the sweep dropped.
  enum class ScopeSweepAction { kSettled, kFenced, kDropped, kAudited, kGhostDropped };
  prometheus::Counter& scope_sweep_actions(ScopeSweepAction action) {
    return *scope_sweep_actions_[static_cast<size_t>(action)];
  }
  prometheus::Gauge& scope_pending_takes() { return scope_pending_takes_; }
  // orderhold_scope_oldest_pending_take_seconds: the age of the oldest of those takes (0: none),
  // on the scope nodes' clocks; it stays below --scope_pending_age + a tick while the sweep keeps
  // up.
  prometheus::Gauge& scope_oldest_pending_take() { return scope_oldest_pending_take_; }
  // orderhold_scope_wait_timeouts_total{step}: protocol steps whose write ran but whose WAIT
  // answered fewer replicas than --redis_wait_replicas in time (the caller got UNAVAILABLE, or,
  // for a drop, the sweep repeats it), by step: take, place, extend, drop.
  enum class ScopeStep { kTake, kPlace, kExtend, kDrop };
  // The step of a name ScopeProtocolOptions::wait_timed_out passes; nullopt for another.
  static std::optional<ScopeStep> ScopeStepOf(absl::string_view name);
  prometheus::Counter& scope_wait_timeouts(ScopeStep step) {
    return *scope_wait_timeouts_[static_cast<size_t>(step)];
  }
  // orderhold_redis_errors_total: Redis commands that failed (connect, I/O, timeout, error reply).
  prometheus::Counter& redis_errors() { return redis_errors_; }
  // orderhold_redis_failovers_total: changes of the Redis primary's address this replica saw
  // (Sentinel mode: a +switch-master event or a poll that found another primary; Cluster mode: a
  // slot map refresh in which a primary left and another joined; finding the first primary or
  // map at start is not one). Standalone mode follows a moved DNS name without
  // knowing, so it counts none there; its reconnects show.
  prometheus::Counter& redis_failovers() { return redis_failovers_; }
  // orderhold_redis_topology_refreshes_total: Redis Cluster slot map fetches attempted.
  prometheus::Counter& redis_topology_refreshes() { return redis_topology_refreshes_; }
  // orderhold_event_nudges_total: nudges received from Redis (one per script call that ended
  // holds in a partition this server subscribes; store/event_nudges.h).
  prometheus::Counter& event_nudges() { return event_nudges_; }
  // orderhold_event_nudge_subscriptions_total: nudge channel subscriptions made (one per partition
  // when the first watch opens here, again for a node's partitions after a reconnect, and for a
  // partition whose slot moved). Growing steadily while watches stay open: the subscriptions keep
  // being lost.
  prometheus::Counter& event_nudge_subscriptions() { return event_nudge_subscriptions_; }
  // orderhold_redis_redirects_total{kind="moved"|"ask"}: Redis Cluster redirects followed.
  prometheus::Counter& redis_redirects_moved() { return *redis_redirects_moved_; }
  prometheus::Counter& redis_redirects_ask() { return *redis_redirects_ask_; }
  // orderhold_redis_reconnects_total{reason}: Redis connections dropped to be made again, by
  // why (every reason is exported from the start, at 0).
  prometheus::Counter& redis_reconnects(RedisReconnectReason reason) {
    return *redis_reconnects_[static_cast<int>(reason)];
  }
  // orderhold_reaper_lag_seconds: per reaped hold, reap time minus expire time (Redis clock).
  prometheus::Histogram& reaper_lag() { return reaper_lag_; }
  // orderhold_reaper_tick_duration_seconds: wall time of one reaper tick (host clock).
  prometheus::Histogram& reaper_tick_duration() { return reaper_tick_duration_; }
  // orderhold_reaper_tick_redis_seconds: per tick, the sum of its reap calls' round trips (host
  // clock): what the reaper costs Redis (and its other tenants) each tick.
  prometheus::Histogram& reaper_tick_redis_time() { return reaper_tick_redis_time_; }
  // orderhold_reaper_calls_in_flight: reap calls outstanding now (<= the pacer's bound).
  prometheus::Gauge& reaper_calls_in_flight() { return reaper_calls_in_flight_; }
  // orderhold_reaper_last_success_timestamp_seconds: Unix time of the last tick without error.
  prometheus::Gauge& reaper_last_success() { return reaper_last_success_; }

  // orderhold_hold_extensions_total{result}: ExtendHold calls that reached a live or ended hold,
  // by what they did (every result is exported from the start, at 0).
  void RecordExtension(ExtensionResult result) {
    extensions_[static_cast<int>(result)]->Increment();
  }

  // orderhold_holds_rejected_total{reason}: PlaceHold calls that did not yield a hold.
  void RecordRejected(RejectReason reason) { rejected_[static_cast<int>(reason)]->Increment(); }

  // orderhold_grpc_requests_total{method,code} and
  // orderhold_grpc_request_duration_seconds{method}: one finished call.
  void RecordRequest(Method method, absl::StatusCode code, absl::Duration elapsed);

 private:
  prometheus::Counter& limits_reload_errors_;
  std::array<prometheus::Counter*, 2> authz_policy_reloads_{};
  std::array<prometheus::Counter*, 2> tenants_reloads_{};
  std::array<prometheus::Counter*, kMethodCount> calls_denied_{};
  prometheus::Gauge& redis_replicas_not_waited_for_;
  prometheus::Counter& holds_placed_;
  prometheus::Counter& holds_paid_;
  prometheus::Counter& units_returned_;
  prometheus::Counter& holds_cancelled_;
  prometheus::Counter& holds_expired_;
  prometheus::Counter& events_appended_;
  prometheus::Counter& events_delivered_;
  prometheus::Counter& events_redelivered_;
  prometheus::Counter& events_acked_;
  prometheus::Counter& events_trimmed_unacked_;
  prometheus::Gauge& watches_;
  prometheus::Histogram& event_delivery_delay_;
  prometheus::Family<prometheus::Gauge>& oldest_unacked_family_;
  absl::Mutex groups_mu_;
  std::map<std::string, prometheus::Gauge*> oldest_unacked_ ABSL_GUARDED_BY(groups_mu_);
  prometheus::Gauge& reaper_backlog_;
  prometheus::Gauge& reaper_owned_partitions_;
  prometheus::Gauge& layout_migration_users_left_;
  std::array<prometheus::Counter*, 5> scope_sweep_actions_{};
  prometheus::Gauge& scope_pending_takes_;
  prometheus::Gauge& scope_oldest_pending_take_;
  std::array<prometheus::Counter*, 4> scope_wait_timeouts_{};
  prometheus::Counter& redis_errors_;
  prometheus::Counter& redis_failovers_;
  prometheus::Counter& redis_topology_refreshes_;
  prometheus::Counter& event_nudges_;
  prometheus::Counter& event_nudge_subscriptions_;
  prometheus::Counter* redis_redirects_moved_ = nullptr;
  prometheus::Counter* redis_redirects_ask_ = nullptr;
  prometheus::Histogram& reaper_lag_;
  prometheus::Histogram& reaper_tick_duration_;
  prometheus::Histogram& reaper_tick_redis_time_;
  prometheus::Gauge& reaper_calls_in_flight_;
  prometheus::Gauge& reaper_last_success_;
  std::array<prometheus::Counter*, kRejectReasonCount> rejected_{};
  std::array<prometheus::Counter*, kExtensionResultCount> extensions_{};
  std::array<prometheus::Counter*, kRedisReconnectReasonCount> redis_reconnects_{};
  std::array<std::array<prometheus::Counter*, kStatusCodeCount>, kMethodCount> requests_{};
  std::array<prometheus::Histogram*, kMethodCount> request_duration_{};
};

}  // namespace orderhold::metrics

#endif  // ORDERHOLD_SERVER_METRICS_METRICS_H_
