#include "server/reaper/reaper.h"

#include <vector>

#include "absl/random/random.h"
#include "absl/synchronization/blocking_counter.h"
#include "server/common/log.h"

namespace orderhold::reaper {

Reaper::Reaper(store::HoldStore& store, metrics::Metrics& metrics, ReaperOptions options,
               const Clock& clock)
    : store_(store), metrics_(metrics), options_(options), clock_(clock) {}

Reaper::~Reaper() { Stop(); }

absl::StatusOr<ReapStats> Reaper::RunOnce(std::optional<absl::Time> now) {
  const absl::Time started = clock_.Now();
  ReapStats stats;
  absl::Status first_error = absl::OkStatus();

  // Round r: one call for every shard still flagged `more`; all calls of a round run at once.
  std::vector<int> shards(store_.shard_count());
  for (int i = 0; i < store_.shard_count(); ++i) shards[i] = i;
  for (int round = 0; round < options_.max_calls_per_shard && !shards.empty(); ++round) {
    std::vector<absl::StatusOr<store::ReapResult>> results(shards.size(),
                                                           absl::UnknownError("not run"));
    absl::BlockingCounter pending(static_cast<int>(shards.size()));
    // Deadlines are host time (what the store compares them with), one fresh budget per round.
    const store::CallOptions call{absl::Now() + options_.call_timeout, now};
    for (size_t i = 0; i < shards.size(); ++i) {
      store_.Reap(shards[i], options_.max_users_per_call, call,
                  [&results, &pending, i](absl::StatusOr<store::ReapResult> result) {
                    results[i] = std::move(result);
                    pending.DecrementCount();
                  });
    }
    pending.Wait();
    stats.calls += static_cast<int>(shards.size());

    std::vector<int> again;
    for (size_t i = 0; i < shards.size(); ++i) {
      if (!results[i].ok()) {
        if (first_error.ok()) first_error = results[i].status();
        continue;
      }
      const store::ReapResult& result = *results[i];
      for (absl::Time expire_time : result.reaped_expire_times) {
        metrics_.reaper_lag().Observe(absl::ToDoubleSeconds(result.now - expire_time));
      }
      stats.reaped += static_cast<int>(result.reaped_expire_times.size());
      if (result.more) again.push_back(shards[i]);
    }
    shards.swap(again);
  }
  stats.backlog_left = !shards.empty();
  if (stats.reaped > 0) metrics_.holds_expired().Increment(stats.reaped);
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
}

void Reaper::Loop() {
  absl::BitGen random;
  bool was_failing = false;
  while (true) {
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
    // A tick that left a backlog starts the next one at once; otherwise sleep, interruptibly.
    const bool behind = stats.ok() && stats->backlog_left;
    const double factor = 1.0 + absl::Uniform(random, -options_.jitter, options_.jitter);
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                             behind ? absl::ZeroDuration() : options_.interval * factor)) {
      return;
    }
  }
}

}  // namespace orderhold::reaper
