// PartitionStore: what the reaper asks of the store, partition by partition: end the due holds
// (Reap), move older releases' data into the layout (MigrateStep), and the replica registry and
// partition leases that divide the partitions between replicas (Heartbeat, ReleaseLease,
// Unregister). The requests' operations are HoldStore's (hold_store.h), the event log's
// HoldEventLog's (event_log.h); RedisHoldStore implements all three, the fakes what their users
// need.
//
// Every operation is asynchronous as HoldStore's (callback exactly once, possibly on a Redis I/O
// thread). Errors: UNAVAILABLE, DEADLINE_EXCEEDED (see hold_store.h); INVALID_ARGUMENT for a
// partition out of range or a bad bound. Thread-safety: implementations are thread-safe.
#ifndef ORDERHOLD_SERVER_STORE_PARTITION_STORE_H_
#define ORDERHOLD_SERVER_STORE_PARTITION_STORE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/store/hold_store.h"

namespace orderhold::store {

struct ReapArgs {
  // Users visited by this call, >= 0. 0: a peek. It takes or renews the lease, or answers
  // not_owner, as a call does (standby: not_owner unless overdue enough). It reports oldest_due
  // and ends nothing (more is false). The reaper peeks a group of partitions in one round trip and
  // calls only those with something due (reaper.h).
  int max_users = 100;
  // With an owner: the call takes (or renews) the partition's lease for `lease` and does nothing if
  // another owner holds it. Empty: no lease (tests, single replica tools).
  std::string owner;
  absl::Duration lease = absl::Seconds(3);
  // Standby mode (`owner` and `lease` ignored, the lease untouched): reap only if the partition's
  // oldest due hold is at least this overdue, i.e. its owner is late or dead. Else not_owner.
  std::optional<absl::Duration> standby_after;
  // The caller has no other call in flight and waits for this one (a paced first call of a tick):
  // a store may run its round trip on the caller's thread (RedisHoldStore: RedisCommand::inline_ok)
  // instead of handing it to another thread. False while calls are pipelined (a backlog drain).
  bool alone = false;
};

struct ReapResult {
  absl::Time now;                               // the store's clock when the operation ran
  std::vector<absl::Time> reaped_expire_times;  // one entry per hold ended as EXPIRED
  bool more = false;       // the partition may still have due holds beyond this batch's limit
  bool not_owner = false;  // another owner holds the partition's lease, or (standby) nothing is
                           // overdue enough; nothing was done
  // The earliest expire_time in the partition's index before the call; unset when it has no holds,
  // or when another owner holds the lease (not_owner without standby). A store may report an
  // earlier instant at which nothing was due any more (RedisHoldStore: a bucket's score left
  // early by a Pay, which the call that visits it sets right), never a later one.
  std::optional<absl::Time> oldest_due;
  // The earliest expire_time the call leaves in the index, or earlier (RedisHoldStore: oldest_due
  // when nothing was due, the store's `now` when the call ended holds or visited a bucket: the
  // next peek tells); unset when the index is empty, or when another owner holds the lease. Never
  // late unless a hold placed since lowered it (the store then publishes a due nudge:
  // event_nudges.h). The reaper sleeps on it (reaper.h).
  std::optional<absl::Time> next_due;
};

// One step of the background sweep that moves data written by earlier releases into the store's
// layout (MigrateStep).
struct MigrateArgs {
  std::string owner;    // the calling replica: the step runs only while it holds the lease
  int max_users = 256;  // users checked by this step, at least (whole groups), >= 1
  std::string cursor;   // "" to start, else the previous step's MigrateResult::cursor
};

struct MigrateResult {
  bool not_owner = false;  // another replica (or none) holds the partition's lease: nothing done
  // Users of the partition the sweep has still to check after this step: an upper bound of those
  // still in an older shape; 0 once the sweep is done.
  int64_t users_left = 0;
  std::string cursor;       // the next step's MigrateArgs::cursor; "" once the sweep is done
  int64_t users_moved = 0;  // users this step moved into the store's layout
};

// One step of Redis Cluster's scope sweep over one partition (PartitionStore::ScopeSweep; the
// protocol: server/README.md "Scope totals").
struct ScopeSweepArgs {
  // Pending takes (a scope's entry taken, its settle not seen) at least this old, on the scope
  // node's clock, are settled from what the user's slot holds: the hold's expiry when it is live,
  // else a fence and a drop. Above a healthy take-to-settle time (two round trips and their WAITs).
  absl::Duration pending_age = absl::Seconds(3);
  // Records handled per step at most (pending takes, and ends read from the stream).
  int max_records = 64;
  // Also read the partition's event stream from where the last step stopped and drop the entries
  // of the holds it shows paid or cancelled (ends whose own drop may have been lost). The owner's
  // step does; a standby's does not.
  bool journal = true;
};

struct ScopeSweepResult {
  int64_t pending = 0;  // pending takes in the partition, old or not, when the step looked
  // The age of the partition's oldest pending take then, on the scope node's clock (zero: none).
  absl::Duration oldest_pending = absl::ZeroDuration();
  int settled = 0;    // old takes whose hold was live: the entry now follows the hold
  int fenced = 0;     // old takes without a live hold: fenced in the user's slot and dropped
  int dropped = 0;    // ends read from the stream whose entries this step dropped
  int ghosts = 0;     // entries the audit handed over that had no live hold: dropped
  bool more = false;  // records were left for the next step
};

// The audit of a scope partition's indexes after a failover (Redis Cluster; server/README.md
// "Scope totals"): each live entry with no take pending is handed to the sweep as a pending take
// dated `pending_age` ago, so the sweep's next step checks its hold in the user's slot, fences,
// and drops it when no hold is there (a ghost: a place held for a hold a failover lost).
struct ScopeAuditArgs {
  std::string cursor;     // where the previous call stopped; "" = the partition's start
  int max_entries = 512;  // entries looked at in this call, at most
  absl::Duration pending_age = absl::ZeroDuration();  // ScopeSweepArgs::pending_age
};
struct ScopeAuditResult {
  int marked = 0;      // entries handed to the sweep
  std::string cursor;  // where the next call starts; "" when the partition is done
};

class PartitionStore {
 public:
  virtual ~PartitionStore() = default;

  // Ends, as EXPIRED, the due holds (expire_time <= now) of at most `args.max_users` users of
  // index partition `partition` (0 <= partition < partition_count()) and keeps the due index right.
  // Safe to run concurrently from several processes: each due hold is ended, and reported, by
  // exactly one call. INVALID_ARGUMENT for a partition out of range or max_users < 0.
  virtual void Reap(int partition, ReapArgs args, CallOptions options,
                    Callback<ReapResult> done) = 0;

  // One bounded step of the sweep that moves the data earlier releases wrote in partition
  // `partition` into the store's layout, for the users no call touches (a call moves the user it
  // touches itself, before it decides). Safe against every concurrent call and replica: each user
  // moves in one atomic step. A store without older data (the fakes) answers users_left 0 and
  // cursor "". INVALID_ARGUMENT for a partition out of range or max_users < 1.
  virtual void MigrateStep(int partition, MigrateArgs args, CallOptions options,
                           Callback<MigrateResult> done) = 0;

  // Registers `replica_id` as a live reaper for `ttl` and yields the live replicas' ids (this one
  // included), sorted.
  virtual void Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                         Callback<std::vector<std::string>> done) = 0;

  // Gives up the reaper lease of index partition `partition` (0 <= partition < partition_count())
  // if `replica_id` holds it, so the next owner need not wait for it to expire: yields true when
  // released, false when another replica (or none) held it. INVALID_ARGUMENT for a partition out
  // of range.
  virtual void ReleaseLease(int partition, std::string replica_id, CallOptions options,
                            Callback<bool> done) = 0;

  // Removes `replica_id` from the registry of live reaper replicas (see Heartbeat) at once,
  // instead of after its ttl: yields true when it was registered.
  virtual void Unregister(std::string replica_id, CallOptions options, Callback<bool> done) = 0;

  // Whether the store keeps scope entries as leases across slots (Redis Cluster), which the reaper
  // then sweeps each tick (ScopeSweep). False by default.
  virtual bool sweeps_scopes() const { return false; }

  // One step of the scope sweep of `partition` (ScopeSweepArgs). Idempotent and safe from several
  // replicas at once: a settle acts only on its own take's stamp. A store that does not sweep
  // answers an empty result. INVALID_ARGUMENT for a partition out of range.
  virtual void ScopeSweep(int partition, ScopeSweepArgs args, CallOptions options,
                          Callback<ScopeSweepResult> done) {
    (void)partition, (void)args, (void)options;
    std::move(done)(ScopeSweepResult{});
  }

  // One call of the audit of `partition` (ScopeAuditArgs): hands up to args.max_entries entries,
  // from args.cursor on, to the sweep. Safe from several replicas at once: an entry with a take
  // pending is left to it, and a later take owns the entry again. A store that does not sweep
  // answers an empty result. INVALID_ARGUMENT for a partition out of range.
  virtual void ScopeAudit(int partition, ScopeAuditArgs args, CallOptions options,
                          Callback<ScopeAuditResult> done) {
    (void)partition, (void)args, (void)options;
    std::move(done)(ScopeAuditResult{});
  }

  // Number of index partitions the reaper must visit.
  virtual int partition_count() const = 0;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_PARTITION_STORE_H_
