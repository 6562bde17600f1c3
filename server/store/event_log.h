// HoldEventLog: the log of hold ends, one Redis Stream per index partition, read through Redis
// consumer groups (https://redis.io/docs/data-types/streams/#consumer-groups). Events are
// appended by the store's scripts in the same step that ends a hold (see lua/prelude/,
// end_hold); this interface only reads, acknowledges and trims them.
//
// Event ids. A stream entry is named by its partition and Redis stream id; the public event_id is
// "<partition>/<stream id>" (FormatEventId / ParseEventId), opaque to clients.
//
// Every operation is asynchronous like HoldStore's (callback exactly once, possibly on a Redis
// I/O thread). Errors: UNAVAILABLE, DEADLINE_EXCEEDED (see hold_store.h); INVALID_ARGUMENT for a
// partition out of range; INTERNAL for a reply the scripts never produce.
//
// Implemented by RedisHoldStore only: delivery semantics (pending lists, claims, delivery
// counts) are Redis' own and are tested against a real redis-server.
// Thread-safety: implementations are thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_EVENT_LOG_H_
#define ORDERHOLD_SERVER_STORE_EVENT_LOG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/store/hold_store.h"

namespace orderhold::store {

// One event as read for one consumer.
struct StoredEvent {
  int partition = 0;
  std::string stream_id;  // Redis stream id "<ms>-<seq>"
  std::string user_id;
  std::string order_id;
  HoldEnd end;
  int delivery_count = 1;  // deliveries to the group, this one included
  HoldDetails details;     // the hold's scope, quantity, labels, place time (as placed)
  // end.outcome kReturned: the units that return gave back (>= 1); else 0. end.end_time is then
  // the return's time, end.payment_reference the payment's.
  int64_t returned_units = 0;
};

// Where a consumer group created by EnsureGroup starts.
enum class GroupStart {
  kEarliest,  // the oldest retained event
  kLatest,    // events appended after the group was created
};

struct ReadEventsArgs {
  std::string group;
  std::string consumer;
  int max_events = 1;  // >= 1
  // Claim (redeliver to this consumer) events other consumers of the group have had pending for
  // at least this long; unset: claim nothing. A consumer never claims its own entries: they are
  // in its hands, or it resumes them (own_pending).
  std::optional<absl::Duration> claim_idle;
  // First take back this consumer's own pending events (a reconnect under the same name), after
  // own_after.
  bool own_pending = false;
  // The claim scan of the group's pending list starts after this stream id ("" = at its start):
  // EventBatch::claim_next of the previous read of this group and partition (as XAUTOCLAIM's
  // cursor, https://redis.io/commands/xautoclaim/).
  std::string claim_after;
  // With own_pending: resume after this stream id ("" = from the first one): EventBatch::own_next
  // of this consumer's previous read of the partition.
  std::string own_after;
};

// What one ReadEvents call returned, and where the next one goes on.
struct EventBatch {
  std::vector<StoredEvent> events;  // own pending first, then claimed, then new; in id order each
  // Where the next claim scan starts (ReadEventsArgs::claim_after); "" = this one reached the end
  // of the pending list (nothing more to claim until an entry's idle time passes claim_idle).
  std::string claim_next;
  // Where the resume goes on (ReadEventsArgs::own_after); "" = every own pending event is back.
  std::string own_next;
};

struct GroupBacklog {
  std::string group;
  std::optional<absl::Time> oldest_unacked;  // id time of the oldest pending or undelivered event
};

// What CheckGroups found for one group on one partition.
struct GroupWork {
  std::string group;
  bool undelivered = false;  // events never delivered to the group
  bool claimable = false;    // events pending (delivered, not acked) for at least claim_idle
};

// What TrimEvents does besides trimming by age.
struct TrimEventsArgs {
  absl::Time cutoff;  // events older than this go
  // Consumers idle (no read) longer than this leave their groups, their pending events going
  // back to the group (trim_events.lua); ZeroDuration: none.
  absl::Duration consumer_idle = absl::ZeroDuration();
};

struct TrimEventsResult {
  int64_t consumers_removed = 0;     // consumers removed as idle (TrimEventsArgs::consumer_idle)
  int64_t trimmed = 0;               // entries deleted
  int64_t trimmed_unacked = 0;       // of them, summed over groups: pending or not yet delivered
  std::vector<GroupBacklog> groups;  // every group of the partition, after the trim
};

// What ClaimGroup found (claim_group.lua).
struct GroupClaim {
  enum class Result {
    kClaimed,     // the group was not registered: now it is the caller's
    kRegistered,  // the group is registered, to `owner` (the caller or another)
    kOverLimit,   // not registered, and the caller owns max_groups already: nothing written
  };
  Result result = Result::kClaimed;
  std::string owner;  // the group's owner (kOverLimit: the caller); "" for an anonymous one
  int64_t owned = 0;  // how many groups `owner` has
};

// What DropGroup did (drop_group.lua).
struct GroupDrop {
  enum class Result {
    kDropped,        // unregistered: `owner` had it and has one group less
    kNotRegistered,  // the group was not registered: nothing written
    kNotOwner,       // registered to an owner not among those asked for: nothing written
  };
  Result result = Result::kNotRegistered;
  std::string owner;  // kDropped: the former owner ("" for an anonymous one); else ""
};

class HoldEventLog {
 public:
  virtual ~HoldEventLog() = default;

  // Number of streams (= HoldStore::partition_count()).
  virtual int event_partition_count() const = 0;

  // Creates `group` on the partition's stream unless it exists (an existing group keeps its
  // position). Yields true when this call created it.
  virtual void EnsureGroup(int partition, std::string group, GroupStart start, CallOptions options,
                           Callback<bool> done) = 0;

  // Up to args.max_events events of the partition for args.consumer: its own pending ones first (if
  // asked), then claimed ones, then new ones. Each becomes pending for the consumer until acked.
  // A write for --redis_wait_replicas: with it, the events come only once that many replicas have
  // them, else UNAVAILABLE "not yet replicated" (a failover cannot lose a delivered event).
  virtual void ReadEvents(int partition, ReadEventsArgs args, CallOptions options,
                          Callback<EventBatch> done) = 0;

  // Which of `groups` have work on the partition (check_groups.lua): events not yet delivered to
  // the group, and, with `claim_idle`, events pending at least that long. Only groups with work
  // are returned; groups that do not exist on the stream are left out. One round trip whatever
  // the number of groups: the safety sweep's question (domain/event_dispatcher.h).
  virtual void CheckGroups(int partition, std::vector<std::string> groups,
                           std::optional<absl::Duration> claim_idle, CallOptions options,
                           Callback<std::vector<GroupWork>> done) = 0;

  // XACK: yields how many of `stream_ids` were pending for the group.
  virtual void AckEvents(int partition, std::string group, std::vector<std::string> stream_ids,
                         CallOptions options, Callback<int64_t> done) = 0;

  // The group registry (one hash for all partitions, KeySchema::GroupOwnersKey): registers
  // `group` to `caller` unless it is registered, and unless `caller` has `max_groups` (>= 1)
  // groups already. One round trip.
  virtual void ClaimGroup(std::string group, std::string caller, int max_groups,
                          CallOptions options, Callback<GroupClaim> done) = 0;
  // The owner `group` is registered to, or nullopt when it is not (HGET). Read-only.
  virtual void GroupOwner(std::string group, CallOptions options,
                          Callback<std::optional<std::string>> done) = 0;
  // Unregisters `group` (its owner's count drops by one) when it is registered to one of `owners`
  // (stored spellings, compared exactly: domain/group_owner.h OwnerSpellings), or to anyone when
  // `owners` is empty; one step, so the owner cannot change between the check and the drop.
  virtual void DropGroup(std::string group, std::vector<std::string> owners, CallOptions options,
                         Callback<GroupDrop> done) = 0;
  // XGROUP DESTROY of `group` on the partition's stream (its consumers and pending entries go;
  // the events stay for other groups). Yields whether it existed there.
  virtual void DestroyGroup(int partition, std::string group, CallOptions options,
                            Callback<bool> done) = 0;

  // Deletes the partition's events older than `cutoff` and reports each group's backlog; counts the
  // deleted events some group had not acked (and acks them: they cannot be delivered any more).
  // With args.consumer_idle, also removes the consumers idle longer (see TrimEventsArgs).
  virtual void TrimEvents(int partition, TrimEventsArgs args, CallOptions options,
                          Callback<TrimEventsResult> done) = 0;
  void TrimEvents(int partition, absl::Time cutoff, CallOptions options,
                  Callback<TrimEventsResult> done) {
    TrimEvents(partition, TrimEventsArgs{cutoff}, options, std::move(done));
  }
};

// "<partition>/<stream id>".
std::string FormatEventId(int partition, absl::string_view stream_id);

// The partition and stream id of an event_id. INVALID_ARGUMENT naming `event_ids` unless it is
// "<partition>/<ms>-<seq>" with 0 <= partition < partition_count and decimal ms and seq.
absl::StatusOr<std::pair<int, std::string>> ParseEventId(absl::string_view event_id,
                                                         int partition_count);

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_EVENT_LOG_H_
