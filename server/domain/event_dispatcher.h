// EventDispatcher: decides, for one server, which partition streams its WatchHoldEvents watches
// read and when, so that delivery costs Redis nothing while no hold ends.
//
// Work is per (consumer group, partition): a flag "read this partition for this group", plus
// "and claim its events pending longer than ack_timeout". Flags are raised by
//   - a nudge (OnNudge): a script that ended a hold published on the partition's channel
//     (store/event_nudges.h), or a subscription was made again (everything it may have missed);
//   - the safety sweep (Sweep, every claim_interval / 2 to claim_interval, jittered): one
//     HoldEventLog::CheckGroups per partition asks which of this server's groups have undelivered
//     or claimable events there; pub/sub is lossy (a reconnect, a failover), this is what finds
//     what a nudge missed, events appended while no watch was open, and redeliveries;
//   - a read's follow-up (ReadDone): a read that filled its budget raises the read flag again; a
//     claim scan that stopped before the end of the group's pending list raises the claim flag
//     again with its cursor (kept here per group and partition, as XAUTOCLAIM's), so claiming
//     goes on through the whole list one bounded read at a time and every pending entry gets its
//     turn (a scan from the start each time would re-take the same oldest entries forever).
// A watch asks for work (TakeWork) whenever it has sent everything it had: it gets every flagged
// partition of its group and lowers the flags, so watches of one group on this server share
// reads (one read per nudged partition, not one per watch; consumer groups hand each event to one
// consumer anyway). A watch that gets nothing is parked; raising a flag wakes one parked watch of
// the group (the longest parked), which then asks again. A watch's first TakeWork covers every
// partition and its own pending events (a consumer reconnecting under its name resumes).
// A resume of the member's own pending events that is not done goes on at its next TakeWork.
// Each group's flags, cursors and watches are its own: one group's backlog never delays another's
// reads or redeliveries.
//
// Cost while idle: one CheckGroups call per partition per sweep, whatever the number of groups and
// watches (64 calls every 0.5-1 s); nothing at all while no watch is open.
//
// Thread-safety: thread-safe. `wake` callbacks are never called under the dispatcher's lock, so
// they may call TakeWork; after Leave returns, a member's `wake` is never called again.
#ifndef ORDERHOLD_SERVER_DOMAIN_EVENT_DISPATCHER_H_
#define ORDERHOLD_SERVER_DOMAIN_EVENT_DISPATCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/domain/event_service.h"
#include "server/store/event_log.h"

namespace orderhold::domain {

class EventDispatcher {
 public:
  // One watch as the dispatcher knows it (returned by Join, given back to TakeWork and Leave).
  class Member {
   public:
    const std::string& group() const { return group_; }

   private:
    friend class EventDispatcher;
    // `wake` is set here, not under wake_mu_: Join may run under a caller's lock that wake itself
    // takes, and locking wake_mu_ there would order the two both ways.
    Member(std::string group, absl::AnyInvocable<bool()> wake)
        : group_(std::move(group)), wake_(std::move(wake)) {}
    const std::string group_;
    // Partitions where this consumer's own pending events are still to take back, and after which
    // stream id ("": from the first); every partition at first. Guarded by the dispatcher's mu_.
    std::map<int, std::string> own_;
    bool parked_ = false;  // guarded by the dispatcher's mu_
    absl::Mutex wake_mu_;
    absl::AnyInvocable<bool()> wake_ ABSL_GUARDED_BY(wake_mu_);
  };

  // `log` (CheckGroups), `policy` (ack_timeout, claim_interval) and `clock` (host time: when the
  // next sweep is due) must outlive the dispatcher. Nothing runs until Start().
  EventDispatcher(store::HoldEventLog& log, EventPolicy policy, const Clock& clock);
  // Stop().
  ~EventDispatcher();
  EventDispatcher(const EventDispatcher&) = delete;
  EventDispatcher& operator=(const EventDispatcher&) = delete;

  // Starts the sweep thread: SweepIfDue about every 100 ms of real time.
  void Start();
  // Stops and joins the sweep thread and waits for sweeps in flight (their store calls answer
  // within their deadline). Idempotent. The destructor calls it: the log must still be there.
  void Stop();

  // Registers a watch of `group`. `wake` is called (on any thread, never under the dispatcher's
  // lock, never twice at once) when the member is parked and work for its group appears; it
  // should make the watch call TakeWork soon and return true, or return false when the watch is
  // ending (then the next parked member of the group is woken instead). The member's first
  // TakeWork covers every partition.
  std::shared_ptr<Member> Join(std::string group, absl::AnyInvocable<bool()> wake);
  // Unregisters `member`. When it returns, `wake` is not running and will never be called again.
  // Must not be called from inside `wake`.
  void Leave(const std::shared_ptr<Member>& member);

  // The partitions `member` should read now, their flags lowered, with the group's claim cursors
  // and the member's own resume; empty: nothing, and the member is parked (woken when work
  // appears). The first call for a member covers every partition with its own pending events.
  ReadPlan TakeWork(const std::shared_ptr<Member>& member);
  // What `member`'s read of `plan` leaves to do: raises the read flag of result.again, and the
  // claim flag (with its cursor) of result.claim_next, waking a parked member of the group; a
  // claimed partition without a cursor starts its next scan at the beginning of the list;
  // result.own_next goes into the member's next TakeWork. Call it once per read, before the next
  // TakeWork of `member`.
  void ReadDone(const std::shared_ptr<Member>& member, const ReadPlan& plan,
                const ReadResult& result);
  // `partition` may have new events (a nudge): raises its read flag for every group with a
  // member here. Out-of-range partitions are ignored. Cheap; called on the nudge thread.
  void OnNudge(int partition);

  // Runs a sweep when one is due by `clock` (then schedules the next: claim_interval times a
  // uniform factor in [0.5, 1)); returns whether it ran one.
  bool SweepIfDue();
  // One safety sweep now: CheckGroups on every partition for every group with a member here
  // (claims: events pending >= ack_timeout); raises the flags it reports, and on a partition whose
  // check failed raises the read flag for every group (a watch's read then meets the error, as a
  // watch would by polling). `done` (may be null) runs when every partition answered. With no
  // member, does nothing.
  void Sweep(absl::AnyInvocable<void()> done = nullptr);

  // Whether a watch is open here (a member of any group): the event nudges are subscribed only
  // then (store::OnDemandEventNudges). Thread-safe.
  bool watched() const;

  // When the next sweep is due (tests).
  absl::Time next_sweep() const;

  // Flag bits per (group, partition).
  static constexpr uint8_t kRead = 1;
  static constexpr uint8_t kClaim = 2;

 private:
  struct Group {
    std::vector<uint8_t> flags;  // per partition: kRead | kClaim
    // Per partition: where the next claim scan of the pending list starts ("": its beginning).
    std::vector<std::string> claim_after;
    std::deque<std::shared_ptr<Member>> parked;
    int members = 0;
  };
  using WakeList = std::vector<std::shared_ptr<Member>>;

  // The longest parked member of `group`, no longer parked; null when none is.
  std::shared_ptr<Member> UnparkLocked(Group& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Raises `flags` on (group, partition) and takes one parked member of the group to wake.
  void RaiseLocked(Group& group, int partition, uint8_t flags, WakeList& wake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes `members`; for each that declines (ending), the next parked member of its group.
  void Wake(WakeList members);
  absl::Time NextSweepAfter(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLoop();

  store::HoldEventLog& log_;
  const EventPolicy policy_;
  const Clock& clock_;
  const int partitions_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Group> groups_ ABSL_GUARDED_BY(mu_);
  absl::Time next_sweep_ ABSL_GUARDED_BY(mu_);
  absl::BitGen jitter_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int sweeps_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_failure_ ABSL_GUARDED_BY(mu_);  // the sweep failure logged last; "": none
  std::thread sweeper_;
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_EVENT_DISPATCHER_H_
