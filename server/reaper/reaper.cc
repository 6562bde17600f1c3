#include "server/reaper/reaper.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "server/common/log.h"

namespace orderhold::reaper {
namespace {

// FNV-1a 64 of "<replica>/<shard>": stable across processes (unlike absl::Hash).
uint64_t Weight(const std::string& replica, int shard) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](absl::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(replica);
  mix(absl::StrCat("/", shard));
  // FNV's low bits mix poorly for inputs differing only at the end: finalize (splitmix64).
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ull;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebull;
  return hash ^ (hash >> 31);
}

// Runs `start(i, callback)` for i in [0, n) at once and waits for all callbacks.
template <typename T, typename Start>
std::vector<absl::StatusOr<T>> RunAll(size_t n, Start start) {
  std::vector<absl::StatusOr<T>> results(n, absl::UnknownError("not run"));
  absl::BlockingCounter pending(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    start(i, [&results, &pending, i](absl::StatusOr<T> result) {
      results[i] = std::move(result);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  return results;
}

}  // namespace

std::string MakeReplicaId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  absl::BitGen random;
  return absl::StrCat(host[0] != '\0' ? host : "orderhold", "-", getpid(), "-",
                      absl::Hex(absl::Uniform<uint32_t>(random), absl::kZeroPad8));
}

std::string OwnerOf(int shard, const std::vector<std::string>& replicas) {
  const std::string* best = nullptr;
  uint64_t best_weight = 0;
  for (const std::string& replica : replicas) {
    const uint64_t weight = Weight(replica, shard);
    if (best == nullptr || weight > best_weight || (weight == best_weight && replica < *best)) {
      best = &replica;
      best_weight = weight;
    }
  }
  return best == nullptr ? "" : *best;
}

Reaper::Reaper(store::HoldStore& store, metrics::Metrics& metrics, ReaperOptions options,
               const Clock& clock, store::HoldEventLog* events)
    : store_(store), metrics_(metrics), options_(options), clock_(clock), events_(events) {}

Reaper::~Reaper() { Stop(); }

std::vector<int> Reaper::owned() const {
  absl::MutexLock lock(&owned_mu_);
  return owned_;
}

absl::StatusOr<std::vector<int>> Reaper::Claim(std::optional<absl::Time> now) {
  std::vector<int> all(store_.shard_count());
  for (int i = 0; i < store_.shard_count(); ++i) all[i] = i;
  if (options_.replica_id.empty()) return all;

  const store::CallOptions call{absl::Now() + options_.call_timeout, now};
  absl::StatusOr<std::vector<std::string>> replicas =
      store::Await<std::vector<std::string>>([&](auto done) {
        store_.Heartbeat(options_.replica_id, options_.membership_ttl, call, std::move(done));
      });
  std::vector<int> previous = owned();
  // Without a fresh view keep the last one: the leases still fence any overlap.
  if (!replicas.ok()) return replicas.status();
  std::vector<int> mine, lost;
  for (int shard : all) {
    if (OwnerOf(shard, *replicas) == options_.replica_id) mine.push_back(shard);
  }
  std::set_difference(previous.begin(), previous.end(), mine.begin(), mine.end(),
                      std::back_inserter(lost));
  if (!lost.empty()) ReleaseLeases(lost);
  if (mine != previous) {
    LogInfo("reaper: ", options_.replica_id, " owns ", mine.size(), " of ", all.size(),
            " partitions (", replicas->size(), " live replicas)");
  }
  return mine;
}

void Reaper::ReleaseLeases(const std::vector<int>& shards) {
  const store::CallOptions call{absl::Now() + options_.call_timeout, std::nullopt};
  RunAll<bool>(shards.size(), [&](size_t i, auto done) {
    store_.Release(shards[i], options_.replica_id, call, std::move(done));
  });
}

void Reaper::TrimEvents(const std::vector<int>& shards, absl::Time store_now) {
  const store::CallOptions call{absl::Now() + options_.call_timeout, std::nullopt};
  auto results = RunAll<store::TrimEventsResult>(shards.size(), [&](size_t i, auto done) {
    events_->TrimEvents(shards[i], store_now - options_.event_retention, call, std::move(done));
  });
  int64_t trimmed_unacked = 0;
  std::map<std::string, absl::Time> oldest;  // group -> oldest unacked over the shards
  for (const auto& result : results) {
    if (!result.ok()) continue;
    trimmed_unacked += result->trimmed_unacked;
    for (const store::GroupBacklog& group : result->groups) {
      auto [it, inserted] = oldest.emplace(group.group, absl::InfiniteFuture());
      if (group.oldest_unacked.has_value())
        it->second = std::min(it->second, *group.oldest_unacked);
    }
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
}

absl::StatusOr<ReapStats> Reaper::RunOnce(std::optional<absl::Time> now) {
  const absl::Time started = clock_.Now();
  ReapStats stats;
  absl::Status first_error = absl::OkStatus();

  absl::StatusOr<std::vector<int>> claimed = Claim(now);
  if (!claimed.ok()) first_error = claimed.status();
  std::vector<int> shards = claimed.ok() ? *claimed : owned();
  {
    absl::MutexLock lock(&owned_mu_);
    owned_ = shards;
  }
  const std::vector<int> owned_now = shards;
  stats.owned = static_cast<int>(shards.size());
  metrics_.reaper_owned_partitions().Set(stats.owned);
  // Standby: the partitions this replica does not own, reaped only when overdue.
  std::vector<bool> standby(store_.shard_count(), false);
  if (!options_.replica_id.empty() && options_.standby_after > absl::ZeroDuration()) {
    std::vector<bool> mine(store_.shard_count(), false);
    for (int shard : owned_now) mine[shard] = true;
    for (int shard = 0; shard < store_.shard_count(); ++shard) {
      if (!mine[shard]) {
        standby[shard] = true;
        shards.push_back(shard);
      }
    }
  }

  // Round r: one call for every shard still flagged `more`; all calls of a round run at once.
  absl::Duration backlog = absl::ZeroDuration();
  std::optional<absl::Time> store_now;
  for (int round = 0; round < options_.max_calls_per_shard && !shards.empty(); ++round) {
    // Deadlines are host time (what the store compares them with), one fresh budget per round.
    const store::CallOptions call{absl::Now() + options_.call_timeout, now};
    const store::ReapArgs owner_args{options_.max_users_per_call, options_.replica_id,
                                     options_.lease, std::nullopt};
    const store::ReapArgs standby_args{options_.max_users_per_call, "", options_.lease,
                                       options_.standby_after};
    auto results = RunAll<store::ReapResult>(shards.size(), [&](size_t i, auto done) {
      store_.Reap(shards[i], standby[shards[i]] ? standby_args : owner_args, call, std::move(done));
    });
    stats.calls += static_cast<int>(shards.size());

    std::vector<int> again;
    for (size_t i = 0; i < shards.size(); ++i) {
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
        if (!standby[shards[i]]) ++stats.not_owner;
        continue;
      }
      if (standby[shards[i]]) {
        stats.standby_reaped += static_cast<int>(result.reaped_expire_times.size());
      }
      for (absl::Time expire_time : result.reaped_expire_times) {
        metrics_.reaper_lag().Observe(absl::ToDoubleSeconds(result.now - expire_time));
      }
      stats.reaped += static_cast<int>(result.reaped_expire_times.size());
      if (result.more) again.push_back(shards[i]);
    }
    shards.swap(again);
  }
  stats.backlog_left = !shards.empty();
  if (stats.reaped > 0) {
    metrics_.holds_expired().Increment(stats.reaped);
    metrics_.events_appended().Increment(stats.reaped);
  }
  metrics_.reaper_backlog().Set(absl::ToDoubleSeconds(backlog));

  if (events_ != nullptr && store_now.has_value() && !owned_now.empty()) {
    bool trim = false;
    {
      absl::MutexLock lock(&owned_mu_);
      const absl::Time host_now = clock_.Now();
      if (host_now >= next_trim_) {
        next_trim_ = host_now + options_.event_trim_interval;
        trim = true;
      }
    }
    if (trim) TrimEvents(owned_now, *store_now);
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
  if (options_.replica_id.empty()) return;
  std::vector<int> shards;
  {
    absl::MutexLock lock(&owned_mu_);
    shards.swap(owned_);
  }
  if (!shards.empty()) ReleaseLeases(shards);
  const store::CallOptions call{absl::Now() + options_.call_timeout, std::nullopt};
  (void)store::Await<bool>(
      [&](auto done) { store_.Release(-1, options_.replica_id, call, std::move(done)); });
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
