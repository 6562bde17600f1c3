// Reaper: the background loop that removes expired holds from Redis.
//
// Expired holds already stop counting the moment they expire (every script compares against
// Redis TIME); the reaper only reclaims their memory, keeps the due index small and measures how
// late it is (orderhold_reaper_lag_seconds). Shaped after Sidekiq's scheduled poller
// (lib/sidekiq/scheduled.rb): every interval (each replica at a random phase, so replicas started
// together do not tick in lockstep) it visits each index partition with bounded atomic batches
// (reap.lua), "punts" on errors (log + count, retry next tick) and never dies; its sleep is
// interruptible by Stop().
//
// Several replicas: each due hold is ended (outcome record + EXPIRED event) and counted by exactly
// one script run whatever the replicas do; on top of that the work is divided so it is not done
// N times over: each tick a replica claims the partitions it owns (server/reaper/ownership.h:
// registry of live replicas, rendezvous hashing, per-partition leases) and reaps those. Standby
// reaping bounds the delay after a replica is killed: every replica also checks the partitions it
// does not own and reaps those whose oldest due hold is `standby_after` overdue, so a dead owner's
// holds wait at most about standby_after + one interval rather than the whole lease.
//
// Work per tick: with due nudges (SetDueNudges), a partition is looked at only when a hold may be
// due by the next tick: its last look's next due hold (ReapResult::next_due), a due nudge since
// (a script published one when a hold lowered the partition's earliest due time, or a
// resubscription may have lost some), it reaped last tick, or `idle_look_interval` has passed.
// So an idle replica's Redis calls follow what is due, not partitions x ticks. Those looked at get
// one peek each when not known due, `peek_batch` partitions per round trip, then one call per
// partition with something due (or that reaped last tick) plus one per further batch of due
// users: it grows with the due holds, not with the number of users (tests/bench/README.md "Idle
// reaper", "What a hold costs Redis"). The calls are small (max_users_per_call) and paced
// (server/reaper/tick_pacer.h): the partitions' first calls spread over `pace_window`, at most
// `max_in_flight` outstanding, follow-ups of full batches at once within that bound; so Redis never
// runs a long stretch of reaper scripts while requests wait, and a backlog still drains at full
// speed. The store sends them on a connection of their own (RedisHoldStore's background client),
// never in a pipelined batch with requests. Every `event_trim_interval` the reaper also trims the
// event streams of its partitions (server/reaper/event_trimmer.h).
//
// Thread-safety: RunOnce() may be called from any thread, one tick at a time (tests call it with
// the loop stopped); Start()/Stop() from one owner thread.
#ifndef ORDERHOLD_SERVER_REAPER_REAPER_H_
#define ORDERHOLD_SERVER_REAPER_REAPER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/common/clock.h"
#include "server/metrics/metrics.h"
#include "server/reaper/event_trimmer.h"
#include "server/reaper/migration_sweep.h"
#include "server/reaper/ownership.h"
#include "server/reaper/tick_pacer.h"
#include "server/store/event_log.h"
#include "server/store/partition_store.h"

namespace orderhold::reaper {

struct ReaperOptions {
  // Time between ticks (--reap_interval).
  absl::Duration interval = absl::Seconds(1);
  // Ticks start at a fixed period of `interval` (a slow tick does not push the next one back),
  // shifted once by a random phase of U(0, jitter) * interval so replicas started together do not
  // tick in lockstep. A fixed period, not a jittered one: a hold waits at most one interval (plus
  // its call's queueing) for its partition's visit, which the lag objective (p99 <= 1.2 s at 1 s)
  // needs; per-tick jitter let it wait 1.1 intervals.
  double jitter = 0.1;
  // Users visited per script call: bounds the time one call blocks Redis (about 25 us of Redis
  // time per user ending one hold, ~40 us on a loaded 2-core machine: ~0.15 ms per call). 4, not
  // 8: with 8, 381 reap.lua calls ran over 0.5 ms and 33 over 1 ms in the open-loop phase of
  // tests/bench/run.sh; with 4 in the next run, 40 and 3, with the same lag p99 (0.99 s) and
  // backlog drain (85,000 holds/s: the calls are cheaper, more of them overlap).
  int max_users_per_call = 4;
  // Calls per partition per tick; what is left waits for the next tick, which then starts at once
  // (bounds one tick: 5,000 users per partition).
  int max_calls_per_partition = 1250;
  // Reap calls outstanding at once (>= 1): bounds how many reaper scripts a request can find
  // queued in Redis ahead of it. 4, not fewer: with 2 the small calls queued behind one another
  // and the lag p99 reached 1.19 s (tests/bench/run.sh); more round trips overlap with 4.
  int max_in_flight = 4;
  // The partitions' first calls of a tick are spread evenly over this (host time) from its start.
  // Zero: all may start at once (still max_in_flight at a time); the App sets 0.6 x the interval,
  // leaving the rest for follow-ups so a tick rarely overruns the next one's start.
  absl::Duration pace_window = absl::ZeroDuration();
  // Peeks (ReapArgs::max_users = 0: the lease taken as by a call, the partition's oldest due
  // hold read, nothing ended): when the first call of a group's first partition comes, the group
  // (the partitions that need a peek among the next `peek_batch` slots) is peeked at once, as one
  // pipelined round trip. A partition whose oldest hold is not due by the group's last slot gets
  // no call this tick, and the tick does not wait for its slot. A partition that reaped in the last
  // tick is called without a peek: under load every partition is, and a peek would only add a round
  // trip. A failed peek leaves the partition to its call. 16 of 64: a peek costs Redis a few us,
  // so a group is well under a millisecond of scripts in a row. A hold placed after its group's
  // peek, with a ttl shorter than the group's slots (~0.15 s by default), or due between the
  // group's last slot and a late first call (calls in flight held it back), waits for the next
  // tick: at most one more interval. 0: no peeks, every partition's first call reaps.
  int peek_batch = 16;
  // Deadline of one store call, from its start.
  absl::Duration call_timeout = absl::Seconds(2);
  // This replica's id in the registry; empty: no registry and no leases (reap every partition;
  // tests and single-process tools).
  std::string replica_id;
  // --layout_migration_done (MigrationSweepOptions::declared_done).
  bool layout_migration_done = false;
  // How long a heartbeat keeps this replica in the registry, and how long a lease lasts without
  // renewal. Both bound the takeover delay after an ungraceful kill.
  absl::Duration membership_ttl = absl::Seconds(3);
  absl::Duration lease = absl::Seconds(3);
  // Standby reaping: each tick a replica also visits the partitions it does not own and reaps
  // those whose oldest due hold is at least this overdue (their owner is late or dead), without
  // taking them over. Zero: off. Keep it above what a healthy owner leaves (about 1.1 x interval
  // + a tick): 1.5 x interval by default (set by the App).
  absl::Duration standby_after = absl::ZeroDuration();
  // With due nudges (SetDueNudges): a partition is looked at (peeked or called) only when its
  // index may have a hold due by the next tick, as its last look answered (ReapResult::next_due)
  // and no due nudge (OnDueNudge) came since; and at least this often anyway, which bounds how
  // late a hold whose nudge was lost (pub/sub is lossy between two subscriptions) can be reaped.
  // An idle replica's looks are then partitions / this per second (64 / 30 s ~ 2.1), not
  // partitions per tick. Zero: every partition every tick (as without nudges).
  absl::Duration idle_look_interval = absl::Seconds(30);
  // Event retention (--event_retention) and how often the streams are trimmed.
  absl::Duration event_retention = absl::Hours(24);
  // --consumer_idle_timeout: EventTrimOptions::consumer_idle.
  absl::Duration consumer_idle_timeout = absl::ZeroDuration();
  absl::Duration event_trim_interval = absl::Seconds(10);
  // Redis Cluster's scope sweep (store::PartitionStore::ScopeSweep, when the store
  // sweeps_scopes()): every tick, each owned partition's takes older than this are settled and
  // its stream's ends since the last tick have their entries dropped; with standby reaping, every
  // other partition's takes older than this + standby_after (a dead owner's) too.
  absl::Duration scope_pending_age = absl::Seconds(3);
};

// What one tick did.
struct ReapStats {
  int reaped = 0;             // holds ended as EXPIRED
  int calls = 0;              // reap script calls made, peeks not included
  int peeks = 0;              // peeks made (ReaperOptions::peek_batch)
  bool backlog_left = false;  // a partition had due holds left after max_calls_per_partition
  int owned = 0;              // partitions this replica reaped (all without a replica_id)
  int not_owner = 0;          // owned partitions skipped because another replica's lease held
  int standby_reaped = 0;     // of `reaped`, holds of partitions this replica does not own
  int skipped = 0;  // partitions not looked at: nothing due by the next tick, as last seen
  absl::Duration
      redis_time;  // sum of the round trips of the reap calls and peek groups (host clock)
};

class Reaper {
 public:
  // `store`, `metrics`, `clock` and `events` (optional: no trimming without it) must outlive the
  // reaper.
  Reaper(store::PartitionStore& store, metrics::Metrics& metrics, ReaperOptions options,
         const Clock& clock = SystemClock::Get(), store::HoldEventLog* events = nullptr);
  // Stops the loop if running.
  ~Reaper();
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;

  // One tick: reaps every partition (calls paced, see the file comment; with a pace_window the
  // tick lasts about that long), records orderhold_holds_expired_total and
  // orderhold_events_appended_total (as each call ends, so a tick cut short still counts what it
  // ended),
  // orderhold_reaper_lag_seconds (store clock), orderhold_reaper_tick_duration_seconds,
  // orderhold_reaper_tick_redis_seconds and orderhold_reaper_calls_in_flight; then one step of
  // the layout migration's sweep of the owned partitions (migration_sweep.h); on full success sets
  // orderhold_reaper_last_success_timestamp_seconds. `now` overrides the store clock (tests).
  // Returns the first store error (UNAVAILABLE, DEADLINE_EXCEEDED) after doing what it could.
  absl::StatusOr<ReapStats> RunOnce(std::optional<absl::Time> now = std::nullopt);

  // Due nudges (the scripts' SPUBLISH of "due" on the partition's reaper channel when a hold
  // lowers its earliest due time: set_due in server/store/lua/prelude/; store/event_nudges.h
  // delivers them). Until
  // this is called, and whenever `complete` answers false (some partition's nudge channel is not
  // subscribed), every partition is looked at every tick. Call before Start(); `complete` is
  // called from the reaper's thread and must be thread-safe.
  void SetDueNudges(std::function<bool()> complete);
  // A hold may have come due earlier than `partition`'s last look said (a nudge), or nudges may
  // have been lost (a new subscription): the partition is looked at in the next tick. Thread-safe,
  // never blocks; out-of-range partitions are ignored.
  void OnDueNudge(int partition);

  // A consumer group was created on `partition`'s stream (a "group" nudge): the trimmer trims it
  // at its next interval (event_trimmer.h). Thread-safe, never blocks long.
  void OnGroupCreated(int partition) {
    if (trimmer_.has_value()) trimmer_->OnGroupCreated(partition);
  }

  // Starts the background loop (first tick at once). No-op if already running.
  void Start();
  // Stops and joins the loop; an in-flight tick starts no more calls and waits for those
  // outstanding (each bounded by call_timeout). Then, with a replica_id, releases this replica's
  // leases and unregisters it so the others take over at their next tick.
  void Stop();

  // The partitions this replica owned at its last tick.
  std::vector<int> owned() const { return ownership_.owned(); }

 private:
  // What one RunOnce accumulates (defined in reaper.cc).
  struct Tick;
  void Loop();
  // Redis Cluster's scope sweep of the tick's partitions (ReaperOptions::scope_pending_age):
  // blocks until each partition's step answered; counts orderhold_scope_sweep_actions_total and
  // sets orderhold_scope_pending_takes and orderhold_scope_oldest_pending_take_seconds.
  void SweepScopes(std::optional<absl::Time> now, Tick& tick);
  // The audit after a failover (store::ScopeAudit): one call for `partition` when an audit of it
  // is under way and this replica owns it (`mine`); forgets it otherwise.
  void Audit(int partition, bool mine, std::optional<absl::Time> now, Tick& tick);
  // The partitions this tick calls: the owned ones (a fresh claim, or the last view when the claim
  // failed) and, with standby reaping, every other one marked standby in `tick`.
  std::vector<int> PlanTick(std::optional<absl::Time> now, Tick& tick);
  // Makes the paced reap calls over `partitions` until each is done or the tick is abandoned.
  void RunCalls(std::vector<int> partitions, std::optional<absl::Time> now, Tick& tick);
  // One tick's peek state: which partitions still need a peek before their call, and the next
  // slot a peek group may start from (defined in reaper.cc).
  struct PeekCursor;
  // The peek state for a tick over `partitions` (in slot order, kept by reference): each needs a
  // peek but those that reaped last tick (busy_, which this clears for Account to set again).
  PeekCursor StartPeeks(const std::vector<int>& partitions);
  // Before `partition`'s call: when it still needs a peek, peeks the group it opens (those needing
  // one among the next ReaperOptions::peek_batch slots) in one round trip, has `pacer` skip the
  // others of the group found with nothing due by its last slot, and returns whether `partition`
  // itself is to be called. True at once when it needs no peek (or peek_batch is 0).
  bool PeekBeforeCall(int partition, PeekCursor& peeks, TickPacer& pacer,
                      std::optional<absl::Time> now, Tick& tick);
  // Peeks `group` (ReaperOptions::peek_batch) in one round trip and waits for the answers; returns
  // per partition of `group` whether it is to be called: a hold due within `within` of the store's
  // clock, or the peek failed (the error goes to `tick`; the call tries again at its slot).
  std::vector<bool> Peek(const std::vector<int>& group, absl::Duration within,
                         std::optional<absl::Time> now, Tick& tick);
  // Whether `partition` is looked at this tick (see idle_look_interval).
  bool NeedsLook(int partition, bool standby, absl::Time host_now) const;
  // Whether `partition`'s last look said a hold is due now: called without a peek.
  bool KnownDue(int partition, absl::Time host_now) const;
  // Before a look at `partition` is sent: the nudges it covers.
  void Sent(int partition) { sent_nudges_[partition] = due_nudges_[partition].load(); }
  // Counts one ended call into `tick` and the metrics; returns whether its partition has more due.
  bool Account(int partition, bool first, const absl::StatusOr<store::ReapResult>& result,
               absl::Duration round_trip, Tick& tick);

  store::PartitionStore& store_;
  metrics::Metrics& metrics_;
  const ReaperOptions options_;
  const Clock& clock_;
  Ownership ownership_;
  std::optional<EventTrimmer> trimmer_;  // with an event log only
  MigrationSweep sweep_;
  // Per partition: its calls reaped something in its last tick, so the next tick calls it
  // without a peek. Used by the thread running RunOnce (one tick at a time).
  std::vector<bool> busy_;
  // What the reaper knows of each partition's index from its last look (the tick's thread).
  struct View {
    bool known = false;              // a look answered; false after an error or a lease refusal
    std::optional<absl::Time> next;  // its next due hold (store clock); unset: the index is empty
    absl::Time looked = absl::InfinitePast();  // host time of that answer
    uint64_t nudges = 0;                       // due_nudges_ when that look was sent
  };
  std::vector<View> views_;
  // The scope audit (Audit): orderhold_redis_failovers_total when last read, and the partitions
  // with an audit under way -> where it goes on (the tick's thread).
  double failovers_seen_ = 0;
  std::map<int, std::string> audits_;
  std::vector<uint64_t> sent_nudges_;  // per partition: due_nudges_ when its last look was sent
  std::unique_ptr<std::atomic<uint64_t>[]> due_nudges_;  // per partition: nudges received
  std::function<bool()> due_nudges_complete_;            // null: no nudges
  absl::Duration store_offset_;  // store clock - host clock, at the last answer
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set by Stop() so a paced tick stops starting calls (read without mu_ by RunOnce).
  std::atomic<bool> stop_requested_ = false;
  std::thread thread_;
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_REAPER_H_
