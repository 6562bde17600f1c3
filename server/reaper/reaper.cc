#include "server/reaper/reaper.h"

#include <algorithm>
#include <vector>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "server/common/fan_in.h"
#include "server/common/log.h"

namespace orderhold::reaper {

Reaper::Reaper(store::HoldStore& store, metrics::Metrics& metrics, ReaperOptions options,
               const Clock& clock, store::HoldEventLog* events)
    : store_(store),
      metrics_(metrics),
      options_(options),
      clock_(clock),
      ownership_(store, options.replica_id, options.membership_ttl, options.call_timeout) {
  if (events != nullptr) {
    trimmer_.emplace(*events, metrics, clock,
                     EventTrimOptions{options.event_retention, options.event_trim_interval,
                                      options.call_timeout});
  }
}

Reaper::~Reaper() { Stop(); }

absl::StatusOr<ReapStats> Reaper::RunOnce(std::optional<absl::Time> now) {
  const absl::Time started = clock_.Now();
  ReapStats stats;
  absl::Status first_error = absl::OkStatus();

  absl::StatusOr<std::vector<int>> claimed = ownership_.Claim(now);
  if (!claimed.ok()) first_error = claimed.status();
  // Without a fresh view keep the last one: the leases still fence any overlap.
  std::vector<int> partitions = claimed.ok() ? *claimed : ownership_.owned();
  const std::vector<int> owned_now = partitions;
  stats.owned = static_cast<int>(partitions.size());
  metrics_.reaper_owned_partitions().Set(stats.owned);
  // Standby: the partitions this replica does not own, reaped only when overdue.
  std::vector<bool> standby(store_.partition_count(), false);
  if (!options_.replica_id.empty() && options_.standby_after > absl::ZeroDuration()) {
    std::vector<bool> mine(store_.partition_count(), false);
    for (int partition : owned_now) mine[partition] = true;
    for (int partition = 0; partition < store_.partition_count(); ++partition) {
      if (!mine[partition]) {
        standby[partition] = true;
        partitions.push_back(partition);
      }
    }
  }

  // Round r: one call for every partition still flagged `more`; all calls of a round run at once.
  absl::Duration backlog = absl::ZeroDuration();
  std::optional<absl::Time> store_now;
  for (int round = 0; round < options_.max_calls_per_partition && !partitions.empty(); ++round) {
    // Deadlines are host time (what the store compares them with), one fresh budget per round.
    const store::CallOptions call{absl::Now() + options_.call_timeout, now};
    const store::ReapArgs owner_args{options_.max_users_per_call, options_.replica_id,
                                     options_.lease, std::nullopt};
    const store::ReapArgs standby_args{options_.max_users_per_call, "", options_.lease,
                                       options_.standby_after};
    auto results = AwaitAll<store::ReapResult>(partitions.size(), [&](size_t i, auto done) {
      store_.Reap(partitions[i], standby[partitions[i]] ? standby_args : owner_args, call,
                  std::move(done));
    });
    stats.calls += static_cast<int>(partitions.size());

    std::vector<int> again;
    for (size_t i = 0; i < partitions.size(); ++i) {
      if (!results[i].ok()) {
        if (first_error.ok()) first_error = results[i].status();
        continue;
      }
      const store::ReapResult& result = *results[i];
      store_now = result.now;
      // Backlog over every partition this replica saw (owned or standby): a dead owner's
      // partitions show up here too.
      if (round == 0 && result.oldest_due.has_value() && *result.oldest_due <= result.now) {
        backlog = std::max(backlog, result.now - *result.oldest_due);
      }
      if (result.not_owner) {
        if (!standby[partitions[i]]) ++stats.not_owner;
        continue;
      }
      if (standby[partitions[i]]) {
        stats.standby_reaped += static_cast<int>(result.reaped_expire_times.size());
      }
      for (absl::Time expire_time : result.reaped_expire_times) {
        metrics_.reaper_lag().Observe(absl::ToDoubleSeconds(result.now - expire_time));
      }
      stats.reaped += static_cast<int>(result.reaped_expire_times.size());
      if (result.more) again.push_back(partitions[i]);
    }
    partitions.swap(again);
  }
  stats.backlog_left = !partitions.empty();
  if (stats.reaped > 0) {
    metrics_.holds_expired().Increment(stats.reaped);
    metrics_.events_appended().Increment(stats.reaped);
  }
  metrics_.reaper_backlog().Set(absl::ToDoubleSeconds(backlog));

  if (trimmer_.has_value() && store_now.has_value() && !owned_now.empty()) {
    trimmer_->MaybeTrim(owned_now, *store_now);
  }

  metrics_.reaper_tick_duration().Observe(absl::ToDoubleSeconds(clock_.Now() - started));
  if (!first_error.ok()) return first_error;
  metrics_.reaper_last_success().Set(absl::ToDoubleSeconds(clock_.Now() - absl::UnixEpoch()));
  return stats;
}

void Reaper::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Reaper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  ownership_.HandOver();
}

void Reaper::Loop() {
  absl::BitGen random;
  bool was_failing = false;
  while (true) {
    const absl::Time tick_start = clock_.Now();
    absl::StatusOr<ReapStats> stats = RunOnce();
    if (!stats.ok()) {
      // Punt: log on the first failure of a streak (not every second), retry next tick.
      if (!was_failing) LogWarning("reaper: tick failed, retrying: ", stats.status().ToString());
      was_failing = true;
    } else {
      if (was_failing) LogInfo("reaper: recovered");
      was_failing = false;
      if (stats->backlog_left)
        LogWarning("reaper: backlog left after tick (", stats->reaped,
                   " reaped); continuing next tick");
    }
    // Fixed rate: the next tick starts `interval` (with jitter) after this one started, so a
    // hold waits at most about one interval whatever the tick took. A tick that left a backlog
    // starts the next one at once.
    const bool behind = stats.ok() && stats->backlog_left;
    const double factor = 1.0 + absl::Uniform(random, -options_.jitter, options_.jitter);
    const absl::Duration wait =
        behind ? absl::ZeroDuration()
               : std::max(absl::ZeroDuration(),
                          tick_start + options_.interval * factor - clock_.Now());
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait)) return;
  }
}

}  // namespace orderhold::reaper
