// EventService: hold events for consumers, on top of a HoldEventLog (Redis Streams consumer
// groups), independent of gRPC. It validates what callers send, reads the partitions a watch was
// given (EventDispatcher decides which: event_dispatcher.h) with a bounded budget (flow control
// lives in the caller: it asks for more only when it has sent what it got), applies a watch's
// outcome filter (events filtered out are acked for the group, which has seen them) and records
// the event metrics it owns (acked).
//
// Errors (absl codes, = gRPC codes): INVALID_ARGUMENT naming the field (consumer_group,
// consumer, outcomes, event_ids); UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL from the log.
//
// Thread-safe.
#ifndef ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/domain/tenant.h"
#include "server/metrics/metrics.h"
#include "server/store/event_log.h"

namespace orderhold::domain {

// --event_ack_timeout, the per-watch read budget and the safety sweep's period.
struct EventPolicy {
  // An event pending (sent, not acked) this long is redelivered to a connected consumer.
  absl::Duration ack_timeout = absl::Seconds(30);
  // Max events read at once over all partitions (bounds the memory of one watch: 64 events of
  // the largest labels, ~2.3 KB each, are ~150 KB, so --max_watches = 1000 watches fit the k8s
  // kit's 512 MiB; measured in tests/e2e/bounds_e2e_test.cc).
  int max_events_per_read = 64;
  // The safety sweep (EventDispatcher) runs every claim_interval / 2 to claim_interval,
  // uniformly jittered: it finds what a nudge missed, events appended while this server was away,
  // and events pending longer than ack_timeout, which it has claimed (redelivered). So a
  // redelivery comes at most claim_interval after ack_timeout, plus the reads of what other
  // consumers left pending before it: within ack_timeout + 2 s behind a backlog of 600
  // (tests/e2e/redelivery_e2e_test.cc). Default 1 s: a sweep every 0.5-1 s.
  absl::Duration claim_interval = absl::Seconds(1);
  // --max_consumer_groups: groups one caller (a principal; all callers without one count as one)
  // may own in the group registry; its next new group is RESOURCE_EXHAUSTED.
  int max_groups_per_caller = 100;
  // With an --authz_policy: a group is its owner's only. Another caller's Subscribe, Ack or
  // DeleteGroup is PERMISSION_DENIED (without a policy every caller may use every group, as
  // before). Owners are typed identities (group_owner.h).
  bool enforce_owners = false;
  // --operators: typed identities ("uri:spiffe://example/operator") that may delete any group.
  absl::flat_hash_set<std::string> operators;
};

// Bounds of --max_consumer_groups.
inline constexpr int kMaxMaxConsumerGroups = 100000;

struct WatchSpec {
  std::string group;
  std::string consumer;
  std::set<store::HoldOutcome> outcomes;  // empty: all
  store::GroupStart start = store::GroupStart::kEarliest;
  // Who watches: its typed identity (group_owner.h), "" without one (the group's owner-to-be).
  std::string caller;
  // --tenants: only events of this tenant's users are read ("": of users in no tenant; tenant.h);
  // the others are acked for the group, as filtered outcomes are. Unset: every event.
  std::optional<std::string> tenant;
};

// What one read of a watch covers (decided by EventDispatcher::TakeWork).
struct ReadPlan {
  std::vector<int> partitions;  // to read, ascending; empty: nothing to read
  std::vector<int> claims;      // those of `partitions` where pending events are claimed too
  // Of `claims`: where the claim scan of the group's pending list goes on (after this stream id;
  // a partition not here starts at the beginning of the list).
  std::map<int, std::string> claim_after;
  // Those of `partitions` where the consumer first takes back its own pending events (a consumer
  // reconnecting under its name resumes), after this stream id ("": from the first).
  std::map<int, std::string> own;
  bool empty() const { return partitions.empty(); }
};

// What one Read found.
struct ReadResult {
  std::vector<store::StoredEvent> events;  // in partition order, only those matching the filter
  // Partitions to read again: their read filled its share of the budget (more may be waiting).
  // A failed partition is not among them: the safety sweep finds what is left there. In
  // `plan.partitions` order.
  std::vector<int> again;
  // Claimed partitions whose claim scan stopped before the end of the pending list: where it goes
  // on. A claimed partition not here was scanned to the end (or failed).
  std::map<int, std::string> claim_next;
  // Partitions where the consumer's own pending events are not all back yet: where the resume
  // goes on.
  std::map<int, std::string> own_next;
  absl::Status status;  // OK, or the first failed partition's error
};

// INVALID_ARGUMENT naming `consumer_group` unless 1-64 characters of [A-Za-z0-9_.-] (it becomes a
// metric label and a Redis group name): a group as a caller names it.
absl::Status ValidateLocalGroup(absl::string_view group);
// A group as the domain receives it: ValidateLocalGroup's, or a tenant's ("<tenant>:<group>",
// tenant.h QualifiedGroup, made only by the gRPC layer).
absl::Status ValidateGroup(absl::string_view group);

class EventService {
 public:
  // `log` and `metrics` must outlive this object.
  EventService(store::HoldEventLog& log, EventPolicy policy, metrics::Metrics& metrics);

  // Validates `spec` (group, consumer: see hold.h ValidateId), registers the group to spec.caller
  // unless it is registered (store::HoldEventLog::ClaimGroup), and creates it on every partition
  // where it does not exist yet, starting at spec.start. Errors besides the log's:
  // INVALID_ARGUMENT; RESOURCE_EXHAUSTED (QuotaFailure subject "caller/consumer_groups", ErrorInfo
  // reason CONSUMER_GROUP_LIMIT) when the group is new and the caller owns max_groups_per_caller;
  // PERMISSION_DENIED when policy.enforce_owners and another caller owns it.
  void Subscribe(const WatchSpec& spec, store::CallOptions options, store::Callback<bool> done);

  // Reads plan.partitions for spec.consumer, all at once, at most policy.max_events_per_read
  // events in all (an equal share per partition, at least 1): per partition its own pending
  // events (where plan.own says), then events other consumers have had pending longer than
  // ack_timeout (claimed, where plan.claims says, from plan.claim_after), then new ones; only those
  // matching spec.outcomes are returned (the others are acked for the group). Each returned event
  // is pending for the consumer until acked. With a failed partition, result.status is its error;
  // events read from other partitions are returned all the same (the caller may drop them: they
  // stay pending and are redelivered after ack_timeout). `done` runs once, on a store thread or
  // inline.
  void Read(const WatchSpec& spec, const ReadPlan& plan, store::CallOptions options,
            absl::AnyInvocable<void(ReadResult) &&> done);

  // Acks `event_ids` (HoldEvent.event_id) for `group`; yields how many were pending. At most
  // kMaxAckIds ids; INVALID_ARGUMENT naming consumer_group or event_ids otherwise. With
  // policy.enforce_owners, PERMISSION_DENIED unless `caller` owns the group (one more round trip).
  void Ack(std::string group, std::string caller, const std::vector<std::string>& event_ids,
           store::CallOptions options, store::Callback<int64_t> done);

  // Deletes `group`: out of the registry (its owner gets the place back), then destroyed on every
  // partition with its consumers and pending events, and its metric series dropped on this
  // server (the others once their trims have not reported it for two idle intervals:
  // reaper/event_trimmer.h). Yields whether it was
  // registered or existed on a partition. INVALID_ARGUMENT naming consumer_group; with
  // policy.enforce_owners, PERMISSION_DENIED (nothing deleted) when the group is registered to
  // another caller than `caller` (a typed identity) and `caller` is not one of policy.operators.
  // A group on the streams but not registered (made by a release before the registry) has no
  // owner to check.
  void DeleteGroup(std::string group, std::string caller, store::CallOptions options,
                   store::Callback<bool> done);

  static constexpr int kMaxAckIds = 10000;

  const EventPolicy& policy() const { return policy_; }

  // The tenants file (tenant.h): a tenant's max_consumer_groups replaces
  // policy.max_groups_per_caller for its groups, and its operators may delete any group as
  // policy.operators may. `tenants` must outlive this object; set it before the first call.
  void set_tenants(const TenantTable* tenants) { tenants_ = tenants; }

 private:
  // The groups one owner may have when it claims `group`: its tenant's max_consumer_groups, else
  // policy.max_groups_per_caller.
  int MaxGroupsFor(absl::string_view group) const;
  // Why a claim refuses the caller (OK when it does not); see Subscribe.
  absl::Status RefuseClaim(absl::string_view group, absl::string_view caller,
                           const store::GroupClaim& claim) const;
  static absl::Status NotOwner(absl::string_view group);
  void EnsureGroupEverywhere(const WatchSpec& spec, store::CallOptions options,
                             store::Callback<bool> done);
  void AckValid(std::string group, std::map<int, std::vector<std::string>> by_partition,
                store::CallOptions options, store::Callback<int64_t> done);

  store::HoldEventLog& log_;
  const EventPolicy policy_;
  metrics::Metrics& metrics_;
  const TenantTable* tenants_ = nullptr;
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_
