#include "server/reaper/migration_sweep.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/fan_in.h"
#include "server/common/log.h"

namespace orderhold::reaper {

MigrationSweep::MigrationSweep(store::PartitionStore& store, metrics::Metrics& metrics,
                               MigrationSweepOptions options)
    : store_(store),
      metrics_(metrics),
      options_(std::move(options)),
      partitions_(static_cast<size_t>(store.partition_count())) {}

void MigrationSweep::Step(const std::vector<int>& owned) {
  // The partitions not done, from where the last tick's time ran out (each gets its turn).
  std::vector<int> todo;
  for (size_t i = 0; i < owned.size(); ++i) {
    const int partition = owned[(i + next_) % owned.size()];
    if (!partitions_[static_cast<size_t>(partition)].done) todo.push_back(partition);
  }
  // Deadlines are host time (what the store compares them with).
  const absl::Time stop = absl::Now() + options_.tick_budget;
  const size_t step = static_cast<size_t>(std::max(1, options_.max_in_flight));
  size_t stepped = 0;
  for (size_t first = 0; first < todo.size() && absl::Now() < stop; first += step) {
    const size_t n = std::min(step, todo.size() - first);
    stepped += n;
    const store::CallOptions call{std::min(stop, absl::Now() + options_.call_timeout),
                                  std::nullopt};
    std::vector<absl::StatusOr<store::MigrateResult>> results =
        AwaitAll<store::MigrateResult>(n, [&](size_t i, auto done) {
          const Partition& state = partitions_[static_cast<size_t>(todo[first + i])];
          store_.MigrateStep(todo[first + i],
                             store::MigrateArgs{.owner = options_.replica_id,
                                                .max_users = options_.max_users,
                                                .cursor = state.cursor},
                             call, std::move(done));
        });
    for (size_t i = 0; i < n; ++i) {
      const int partition = todo[first + i];
      Partition& state = partitions_[static_cast<size_t>(partition)];
      if (!results[i].ok()) {
        metrics_.redis_errors().Increment();
        continue;
      }
      if (results[i]->not_owner) continue;
      state.answered = true;
      state.cursor = results[i]->cursor;
      state.users_left = results[i]->users_left;
      state.users_moved += results[i]->users_moved;
      if (state.cursor.empty()) {
        state.done = true;
        state.users_left = 0;
        if (state.users_moved > 0 && options_.declared_done) {
          LogWarning("reaper: layout migration of partition ", partition, " moved ",
                     state.users_moved,
                     " users of an older shape although --layout_migration_done is set: calls "
                     "did not count their holds until now (server/README.md \"Upgrading\")");
        } else if (state.users_moved > 0) {
          LogInfo("reaper: layout migration of partition ", partition, " done: ", state.users_moved,
                  " users moved, none is left in an older shape");
        }
      }
    }
  }
  next_ = owned.empty() ? 0 : (next_ + stepped) % owned.size();
  if (!todo.empty() && Done(owned)) {
    LogInfo("reaper: layout migration done in the ", owned.size(),
            " partitions this replica owns: no user is left in an older shape");
  }
  int64_t left = 0;
  for (int partition : owned) {
    const Partition& state = partitions_[static_cast<size_t>(partition)];
    left += state.answered ? state.users_left : 1;
  }
  metrics_.layout_migration_users_left().Set(static_cast<double>(left));
}

bool MigrationSweep::Done(const std::vector<int>& owned) const {
  return std::all_of(owned.begin(), owned.end(), [&](int partition) {
    return partitions_[static_cast<size_t>(partition)].done;
  });
}

}  // namespace orderhold::reaper
