// MigrationSweep: the reaper's step that moves, partition by partition, the data earlier releases
// wrote in older shapes into the store's layout, for the users no call touches
// (PartitionStore::MigrateStep; what moves is the store's: server/store/lua/migrations/). A call
// moves the user it touches itself and the reaper a user whose hold comes due, so the sweep is what
// makes the migration end: once it has checked every user of every partition, nothing of the old
// shapes is left but what older replicas still running write.
//
// Each tick, for each partition this replica owns whose sweep is not done, one step of at most
// MigrationSweepOptions::max_users users (whole buckets), a few calls at a time, like the reap
// calls (tick_pacer.h): each step is one short script, leased per partition (a step runs only
// while this replica holds the partition's reaper lease). The progress (a cursor per partition)
// is this process's: a partition that changes owner is swept again from the start by its new
// owner, a restarted replica sweeps its partitions again (cheap when nothing is left: one EXISTS
// per user, e.g. ~64 steps of 256 users per partition at 1M users).
//
// Metrics: orderhold_layout_migration_users_left (the users the sweep has still to check in the
// partitions this replica owns: an upper bound of those still in an older shape, a partition not
// checked yet counting 1; 0 once done), a
// log line when the sweep of a partition that had users to move is done, and one when every
// owned partition is (so a fresh deployment logs one line, not one per partition).
//
// Thread-safety: Step is called by the reaper's thread, one tick at a time.
#ifndef ORDERHOLD_SERVER_REAPER_MIGRATION_SWEEP_H_
#define ORDERHOLD_SERVER_REAPER_MIGRATION_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/metrics/metrics.h"
#include "server/store/partition_store.h"

namespace orderhold::reaper {

struct MigrationSweepOptions {
  // Users checked per step, at least (whole buckets): ~0.5 us of Redis per user with nothing to
  // move, a few us per user moved, so a step is a short script.
  int max_users = 256;
  // Steps outstanding at once (>= 1), as the reap calls.
  int max_in_flight = 4;
  // Deadline of one round of steps.
  absl::Duration call_timeout = absl::Seconds(2);
  // The most one Step may take, rounds and their calls included: a step refused while its slot
  // migrates (Redis Cluster's TRYAGAIN, retried by the client within the call's deadline) must not
  // hold the reaper's next tick back. The partitions not stepped go first next time. The reaper
  // gives it a quarter of --reap_interval.
  absl::Duration tick_budget = absl::Milliseconds(250);
  // This replica's id (the lease owner); empty: no lease checked (tests, single-process tools).
  std::string replica_id;
  // --layout_migration_done: calls no longer look for older shapes, so a user the sweep still
  // finds in one had holds that no call counted; each such partition is logged as a warning.
  bool declared_done = false;
};

class MigrationSweep {
 public:
  // `store` and `metrics` must outlive this object.
  MigrationSweep(store::PartitionStore& store, metrics::Metrics& metrics,
                 MigrationSweepOptions options);
  MigrationSweep(const MigrationSweep&) = delete;
  MigrationSweep& operator=(const MigrationSweep&) = delete;

  // One step for each partition of `owned` whose sweep is not done, as many as tick_budget allows
  // (those left go first next time), then sets the gauge to the users left in `owned` (a
  // partition no step of which has answered yet counts 1, so the gauge reads 0 only once every
  // owned partition is done). Blocks until the steps answered (at most tick_budget). A failed step
  // (UNAVAILABLE, DEADLINE_EXCEEDED, a slot migrating) is retried next tick from the same cursor.
  void Step(const std::vector<int>& owned);

  // Whether `partition`'s sweep is not done yet in this process (its steps need this replica's
  // lease, which the reaper's looks take). Called by the reaper's thread.
  bool Pending(int partition) const {
    return partition >= 0 && static_cast<size_t>(partition) < partitions_.size() &&
           !partitions_[static_cast<size_t>(partition)].done;
  }

 private:
  // Whether every partition of `owned` has been swept by this process.
  bool Done(const std::vector<int>& owned) const;

  struct Partition {
    std::string cursor;       // the next step's
    bool answered = false;    // a step of this process answered
    bool done = false;        // the sweep ended
    int64_t users_left = 0;   // from the last answer
    int64_t users_moved = 0;  // by this process's sweep of the partition so far
  };

  store::PartitionStore& store_;
  metrics::Metrics& metrics_;
  const MigrationSweepOptions options_;
  std::vector<Partition> partitions_;  // [partition]
  size_t next_ = 0;                    // where in `owned` the next Step starts
};

}  // namespace orderhold::reaper

#endif  // ORDERHOLD_SERVER_REAPER_MIGRATION_SWEEP_H_
