#include "server/reaper/event_trimmer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "absl/time/clock.h"
#include "server/common/fan_in.h"
#include "server/common/log.h"

namespace orderhold::reaper {

EventTrimmer::EventTrimmer(store::HoldEventLog& log, metrics::Metrics& metrics, const Clock& clock,
                           EventTrimOptions options)
    : log_(log),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      partition_next_(static_cast<size_t>(log.event_partition_count()), absl::InfinitePast()),
      consumers_next_(static_cast<size_t>(log.event_partition_count()), absl::InfinitePast()) {}

void EventTrimmer::MaybeTrim(const std::vector<int>& partitions, absl::Time store_now) {
  std::vector<int> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time host_now = clock_.Now();
    if (host_now < next_trim_) return;
    next_trim_ = host_now + options_.interval;
    for (int partition : partitions) {
      if (partition >= 0 && static_cast<size_t>(partition) < partition_next_.size() &&
          host_now >= partition_next_[static_cast<size_t>(partition)]) {
        due.push_back(partition);
      }
    }
  }
  if (!due.empty()) Trim(due, store_now);
}

void EventTrimmer::OnGroupCreated(int partition) {
  absl::MutexLock lock(&mu_);
  if (partition >= 0 && static_cast<size_t>(partition) < partition_next_.size()) {
    partition_next_[static_cast<size_t>(partition)] = absl::InfinitePast();
  }
}

void EventTrimmer::Trim(const std::vector<int>& partitions, absl::Time store_now) {
  // A few calls at a time, as the reap calls (tick_pacer.h): a trim call can count up to
  // kMaxTrimIdsPerGroup ids, and Redis runs it while requests wait.
  std::vector<absl::StatusOr<store::TrimEventsResult>> results;
  const size_t step = static_cast<size_t>(std::max(1, options_.max_in_flight));
  for (size_t first = 0; first < partitions.size(); first += step) {
    const size_t n = std::min(step, partitions.size() - first);
    // Deadlines are host time (what the store compares them with), one budget per round.
    const store::CallOptions call{absl::Now() + options_.call_timeout, std::nullopt};
    std::vector<store::TrimEventsArgs> args(n,
                                            store::TrimEventsArgs{store_now - options_.retention});
    if (options_.consumer_idle > absl::ZeroDuration()) {
      absl::MutexLock lock(&mu_);
      const absl::Time now = clock_.Now();
      for (size_t i = 0; i < n; ++i) {
        absl::Time& next = consumers_next_[static_cast<size_t>(partitions[first + i])];
        if (now < next) continue;
        next = now + options_.consumer_check_interval;
        args[i].consumer_idle = options_.consumer_idle;
      }
    }
    for (auto& result : AwaitAll<store::TrimEventsResult>(n, [&](size_t i, auto done) {
           log_.TrimEvents(partitions[first + i], args[i], call, std::move(done));
         })) {
      results.push_back(std::move(result));
    }
  }
  {
    // A partition without groups waits idle_interval; one with groups (or a failed trim) is
    // trimmed again at the next interval.
    absl::MutexLock lock(&mu_);
    const absl::Time idle_until =
        clock_.Now() + std::min(options_.idle_interval, options_.retention);
    for (size_t i = 0; i < results.size(); ++i) {
      partition_next_[static_cast<size_t>(partitions[i])] =
          results[i].ok() && results[i]->groups.empty() ? idle_until : absl::InfinitePast();
    }
  }
  int64_t trimmed_unacked = 0, consumers_removed = 0;
  std::map<std::string, absl::Time> oldest;  // group -> oldest unacked over the partitions
  for (const auto& result : results) {
    if (!result.ok()) continue;
    trimmed_unacked += result->trimmed_unacked;
    consumers_removed += result->consumers_removed;
    for (const store::GroupBacklog& group : result->groups) {
      auto [it, inserted] = oldest.emplace(group.group, absl::InfiniteFuture());
      if (group.oldest_unacked.has_value())
        it->second = std::min(it->second, *group.oldest_unacked);
    }
  }
  if (consumers_removed > 0) {
    LogInfo("reaper: removed ", consumers_removed, " consumers idle longer than ",
            absl::FormatDuration(options_.consumer_idle),
            " from their groups (their pending events go to the group's other consumers)");
  }
  if (trimmed_unacked > 0) {
    metrics_.events_trimmed_unacked().Increment(static_cast<double>(trimmed_unacked));
    LogWarning("reaper: --event_retention trimmed ", trimmed_unacked,
               " hold events that a consumer group had not acked");
  }
  for (const auto& [group, time] : oldest) {
    metrics_.SetOldestUnackedAge(group,
                                 time == absl::InfiniteFuture()
                                     ? 0
                                     : std::max(0.0, absl::ToDoubleSeconds(store_now - time)));
  }
  // A group no trim of this replica has reported for two idle intervals is gone from its
  // partitions (deleted, or its partitions owned elsewhere now): its series goes too.
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  for (const auto& [group, unused] : oldest) group_seen_[group] = now;
  for (auto it = group_seen_.begin(); it != group_seen_.end();) {
    if (now - it->second > 2 * options_.idle_interval) {
      metrics_.ForgetGroup(it->first);
      it = group_seen_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace orderhold::reaper
