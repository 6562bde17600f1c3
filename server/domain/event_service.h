// EventService: hold events for consumers, on top of a HoldEventLog (Redis Streams consumer
// groups), independent of gRPC. It validates what callers send, fans reads out over the event
// partitions with a bounded budget (flow control lives in the caller: it polls again only when
// it has sent what it got), applies a watch's outcome filter (events filtered out are acked for
// the group, which has seen them) and records the event metrics it owns (acked).
//
// Errors (absl codes, = gRPC codes): INVALID_ARGUMENT naming the field (consumer_group,
// consumer, outcomes, event_ids); UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL from the log.
//
// Thread-safe, except that one WatchCursor must only be used by one poll at a time.
#ifndef ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/metrics/metrics.h"
#include "server/store/event_log.h"

namespace orderhold::domain {

// --event_ack_timeout and the per-watch read budget.
struct EventPolicy {
  // An event pending (sent, not acked) this long is redelivered to a connected consumer.
  absl::Duration ack_timeout = absl::Seconds(30);
  // Max events read per poll over all partitions (bounds the memory of one watch).
  int max_events_per_poll = 256;
  // Pending events are looked for claims at most this often per watch.
  absl::Duration claim_interval = absl::Seconds(1);
};

struct WatchSpec {
  std::string group;
  std::string consumer;
  std::set<store::HoldOutcome> outcomes;  // empty: all
  store::GroupStart start = store::GroupStart::kEarliest;
};

// Per-watch poll state, owned by the watch.
struct WatchCursor {
  bool first_poll = true;  // take back the consumer's own pending events first
  absl::Time next_claim = absl::InfinitePast();
};

// INVALID_ARGUMENT naming `consumer_group` unless 1-64 characters of [A-Za-z0-9_.-] (it becomes a
// metric label and a Redis group name).
absl::Status ValidateGroup(absl::string_view group);

class EventService {
 public:
  // `log`, `metrics` and `clock` must outlive this object. `clock` (host time) schedules the
  // claims of pending events (EventPolicy::claim_interval).
  EventService(store::HoldEventLog& log, EventPolicy policy, metrics::Metrics& metrics,
               const Clock& clock);

  // Validates `spec` (group, consumer: see hold.h ValidateId) and creates the group on every
  // partition where it does not exist yet, starting at spec.start.
  void Subscribe(const WatchSpec& spec, store::CallOptions options, store::Callback<bool> done);

  // The next events for spec.consumer, at most policy.max_events_per_poll, possibly none: its own
  // pending events on the first poll, then events pending longer than ack_timeout (claimed), then
  // new ones; only those matching spec.outcomes (the others are acked). Each returned event is
  // pending for the consumer until acked. Fails with the first partition's error; events read
  // from other partitions in that poll stay pending and are redelivered after ack_timeout.
  void Poll(const WatchSpec& spec, WatchCursor& cursor, store::CallOptions options,
            store::Callback<std::vector<store::StoredEvent>> done);

  // Acks `event_ids` (HoldEvent.event_id) for `group`; yields how many were pending. At most
  // kMaxAckIds ids; INVALID_ARGUMENT naming consumer_group or event_ids otherwise.
  void Ack(std::string group, const std::vector<std::string>& event_ids, store::CallOptions options,
           store::Callback<int64_t> done);

  static constexpr int kMaxAckIds = 10000;

  const EventPolicy& policy() const { return policy_; }

 private:
  store::HoldEventLog& log_;
  const EventPolicy policy_;
  metrics::Metrics& metrics_;
  const Clock& clock_;
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_EVENT_SERVICE_H_
