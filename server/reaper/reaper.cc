#include "server/reaper/reaper.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/reaper/tick_pacer.h"

namespace orderhold::reaper {

Reaper::Reaper(store::PartitionStore& store, metrics::Metrics& metrics, ReaperOptions options,
               const Clock& clock, store::HoldEventLog* events)
    : store_(store),
      metrics_(metrics),
      options_(options),
      clock_(clock),
      ownership_(store, options.replica_id, options.membership_ttl, options.call_timeout),
      sweep_(store, metrics,
             MigrationSweepOptions{.max_in_flight = options.max_in_flight,
                                   .call_timeout = options.call_timeout,
                                   .tick_budget = options.interval / 4,
                                   .replica_id = options.replica_id,
                                   .declared_done = options.layout_migration_done}),
      views_(store.partition_count()),
      sent_nudges_(store.partition_count(), 0),
      due_nudges_(new std::atomic<uint64_t>[store.partition_count()]) {
  for (int p = 0; p < store.partition_count(); ++p) due_nudges_[p].store(0);
  if (events != nullptr) {
    trimmer_.emplace(*events, metrics, clock,
                     EventTrimOptions{.retention = options.event_retention,
                                      .interval = options.event_trim_interval,
                                      .max_in_flight = options.max_in_flight,
                                      .call_timeout = options.call_timeout,
                                      .consumer_idle = options.consumer_idle_timeout});
  }
}

Reaper::~Reaper() { Stop(); }

struct Reaper::Tick {
  ReapStats stats;
  absl::Status first_error;
  std::vector<int> owned;     // owned by this replica this tick
  std::vector<bool> standby;  // per partition: reaped in standby (owned by another replica)
  absl::Duration backlog = absl::ZeroDuration();
  std::optional<absl::Time> store_now;  // Redis' clock, from the last answer
};

struct Reaper::PeekCursor {
  const std::vector<int>& partitions;  // the tick's, in slot order
  size_t group_size;                   // ReaperOptions::peek_batch (0: no peeks)
  std::vector<bool> peeked;            // per partition: peeked this tick, or needs no peek
  size_t next = 0;                     // index in `partitions` of the next slot to group
};

absl::StatusOr<ReapStats> Reaper::RunOnce(std::optional<absl::Time> now) {
  const absl::Time started = clock_.Now();
  Tick tick;
  std::vector<int> partitions = PlanTick(now, tick);
  RunCalls(std::move(partitions), now, tick);
  metrics_.reaper_tick_redis_time().Observe(absl::ToDoubleSeconds(tick.stats.redis_time));
  metrics_.reaper_backlog().Set(absl::ToDoubleSeconds(tick.backlog));
  if (trimmer_.has_value() && tick.store_now.has_value() && !tick.owned.empty()) {
    trimmer_->MaybeTrim(tick.owned, *tick.store_now);
  }
  // After the tick's reaping, which took the leases the steps check.
  if (!tick.owned.empty()) sweep_.Step(tick.owned);
  if (store_.sweeps_scopes()) SweepScopes(now, tick);
  metrics_.reaper_tick_duration().Observe(absl::ToDoubleSeconds(clock_.Now() - started));
  if (!tick.first_error.ok()) return tick.first_error;
  metrics_.reaper_last_success().Set(absl::ToDoubleSeconds(clock_.Now() - absl::UnixEpoch()));
  return tick.stats;
}

void Reaper::SweepScopes(std::optional<absl::Time> now, Tick& tick) {
  // Steps per partition and tick at most: a backlog (64 records a step) drains over a few ticks
  // without holding the next tick back for long.
  constexpr int kMaxStepsPerPartition = 8;
  int64_t pending = 0;
  absl::Duration oldest = absl::ZeroDuration();
  std::vector<bool> mine(store_.partition_count(), false);
  for (int partition : tick.owned) mine[partition] = true;
  // A failover the topology saw (orderhold_redis_failovers_total moved) starts an audit of every
  // partition; each replica walks those it owns, a page a tick (ScopeAudit), and forgets others.
  const double failovers = metrics_.redis_failovers().Value();
  if (failovers != failovers_seen_) {
    failovers_seen_ = failovers;
    for (int partition = 0; partition < store_.partition_count(); ++partition) {
      audits_[partition] = "";
    }
  }
  for (int partition = 0; partition < store_.partition_count(); ++partition) {
    store::ScopeSweepArgs args{.pending_age = options_.scope_pending_age};
    if (tick.standby[partition]) {
      // Another replica's: only what its owner left for longer than a standby waits.
      args.pending_age += options_.standby_after;
      args.journal = false;
    } else if (!mine[partition]) {
      continue;
    }
    for (int step = 0; step < kMaxStepsPerPartition; ++step) {
      store::CallOptions call{.deadline = absl::Now() + options_.call_timeout, .now = now};
      absl::StatusOr<store::ScopeSweepResult> result = absl::UnknownError("no answer");
      store_.ScopeSweep(partition, args, call,
                        [&](absl::StatusOr<store::ScopeSweepResult> r) { result = std::move(r); });
      if (!result.ok()) {
        if (tick.first_error.ok()) tick.first_error = result.status();
        break;
      }
      if (step == 0 && mine[partition]) {
        pending += result->pending;
        oldest = std::max(oldest, result->oldest_pending);
      }
      using Action = metrics::Metrics::ScopeSweepAction;
      metrics_.scope_sweep_actions(Action::kSettled).Increment(result->settled);
      metrics_.scope_sweep_actions(Action::kFenced).Increment(result->fenced);
      metrics_.scope_sweep_actions(Action::kDropped).Increment(result->dropped);
      metrics_.scope_sweep_actions(Action::kGhostDropped).Increment(result->ghosts);
      if (!result->more) break;
    }
    Audit(partition, mine[partition], now, tick);
  }
  metrics_.scope_pending_takes().Set(static_cast<double>(pending));
  metrics_.scope_oldest_pending_take().Set(absl::ToDoubleSeconds(oldest));
}

void Reaper::Audit(int partition, bool mine, std::optional<absl::Time> now, Tick& tick) {
  auto audit = audits_.find(partition);
  if (audit == audits_.end()) return;
  if (!mine) {
    audits_.erase(audit);  // its owner audits it
    return;
  }
  // Entries a tick and partition at most: an on-sale's index of 100,000 entries is handed to the
  // sweep in ~200 ticks, and the sweep's checks (8 x 64 a tick) keep pace.
  constexpr int kAuditEntriesPerTick = 512;
  store::CallOptions call{.deadline = absl::Now() + options_.call_timeout, .now = now};
  absl::StatusOr<store::ScopeAuditResult> result = absl::UnknownError("no answer");
  store_.ScopeAudit(partition,
                    store::ScopeAuditArgs{.cursor = audit->second,
                                          .max_entries = kAuditEntriesPerTick,
                                          .pending_age = options_.scope_pending_age},
                    call,
                    [&](absl::StatusOr<store::ScopeAuditResult> r) { result = std::move(r); });
  if (!result.ok()) {
    if (tick.first_error.ok()) tick.first_error = result.status();
    return;  // the same page next tick
  }
  using Action = metrics::Metrics::ScopeSweepAction;
  metrics_.scope_sweep_actions(Action::kAudited).Increment(result->marked);
  if (result->cursor.empty()) {
    audits_.erase(audit);
  } else {
    audit->second = std::move(result->cursor);
  }
}

std::vector<int> Reaper::PlanTick(std::optional<absl::Time> now, Tick& tick) {
  absl::StatusOr<std::vector<int>> claimed = ownership_.Claim(now);
  if (!claimed.ok()) tick.first_error = claimed.status();
  // Without a fresh view keep the last one: the leases still fence any overlap.
  tick.owned = claimed.ok() ? *claimed : ownership_.owned();
  std::vector<int> partitions = tick.owned;
  tick.stats.owned = static_cast<int>(partitions.size());
  metrics_.reaper_owned_partitions().Set(tick.stats.owned);
  // Standby: the partitions this replica does not own, reaped only when overdue.
  tick.standby.assign(store_.partition_count(), false);
  if (!options_.replica_id.empty() && options_.standby_after > absl::ZeroDuration()) {
    std::vector<bool> mine(store_.partition_count(), false);
    for (int partition : tick.owned) mine[partition] = true;
    for (int partition = 0; partition < store_.partition_count(); ++partition) {
      if (!mine[partition]) {
        tick.standby[partition] = true;
        partitions.push_back(partition);
      }
    }
  }
  std::sort(partitions.begin(), partitions.end());  // owned and standby interleaved over the window
  // Only those that may have a hold due by the next tick (idle_look_interval).
  const absl::Time host_now = clock_.Now();
  std::erase_if(partitions, [&](int partition) {
    const bool skip = !NeedsLook(partition, tick.standby[partition], host_now);
    tick.stats.skipped += skip ? 1 : 0;
    return skip;
  });
  return partitions;
}

void Reaper::SetDueNudges(std::function<bool()> complete) {
  due_nudges_complete_ = std::move(complete);
}

void Reaper::OnDueNudge(int partition) {
  if (partition < 0 || partition >= store_.partition_count()) return;
  due_nudges_[partition].fetch_add(1);
}

bool Reaper::NeedsLook(int partition, bool standby, absl::Time host_now) const {
  if (!due_nudges_complete_ || options_.idle_look_interval <= absl::ZeroDuration() ||
      !due_nudges_complete_()) {
    return true;
  }
  const View& view = views_[partition];
  if (!view.known || view.nudges != due_nudges_[partition].load() ||
      (partition < static_cast<int>(busy_.size()) && busy_[partition]) ||
      host_now - view.looked >= options_.idle_look_interval ||
      // The migration sweep steps only under a lease this replica's looks keep.
      (!standby && sweep_.Pending(partition))) {
    return true;
  }
  if (!view.next.has_value()) return false;  // an empty index, and no nudge since
  const absl::Duration late_by = standby ? options_.standby_after : absl::ZeroDuration();
  return *view.next + late_by <= host_now + store_offset_ + options_.interval;
}

bool Reaper::KnownDue(int partition, absl::Time host_now) const {
  const View& view = views_[partition];
  return view.known && view.nudges == due_nudges_[partition].load() && view.next.has_value() &&
         *view.next <= host_now + store_offset_;
}

void Reaper::RunCalls(std::vector<int> partitions, std::optional<absl::Time> now, Tick& tick) {
  // The calls, paced (tick_pacer.h): started from this thread when the pacer lets them, their
  // results handed back by the store's callbacks through `inbox`.
  struct Finished {
    int partition;
    absl::StatusOr<store::ReapResult> result;
    absl::Duration round_trip;
  };
  // Shared with the callbacks: the last of them may still be unlocking when this tick returns.
  struct Inbox {
    absl::Mutex mu;
    std::deque<Finished> done ABSL_GUARDED_BY(mu);
  };
  auto inbox = std::make_shared<Inbox>();
  const store::ReapArgs owner_args{options_.max_users_per_call, options_.replica_id, options_.lease,
                                   std::nullopt};
  const store::ReapArgs standby_args{options_.max_users_per_call, "", options_.lease,
                                     options_.standby_after};
  TickPacer pacer(
      partitions, clock_.Now(),
      PaceOptions{options_.pace_window, options_.max_in_flight, options_.max_calls_per_partition});
  // Peeks: a group of partitions (in slot order) is peeked when its first one's call comes; the
  // partitions found with nothing due by the group's last slot are skipped.
  PeekCursor peeks = StartPeeks(partitions);
  while (!pacer.finished()) {
    if (stop_requested_.load()) pacer.Abandon();
    const absl::Time host_now = clock_.Now();
    while (std::optional<int> partition = pacer.Next(host_now)) {
      if (!PeekBeforeCall(*partition, peeks, pacer, now, tick)) {
        pacer.Done(*partition, false);
        continue;
      }
      metrics_.reaper_calls_in_flight().Set(pacer.in_flight());
      ++tick.stats.calls;
      // Deadlines are host time (what the store compares them with), one budget per call.
      const store::CallOptions call{absl::Now() + options_.call_timeout, now};
      store::ReapArgs args = tick.standby[*partition] ? standby_args : owner_args;
      Sent(*partition);
      // Alone: a paced first call with nothing else in flight (a drain's follow-ups pipeline).
      args.alone = pacer.in_flight() == 1 && pacer.first_call(*partition);
      store_.Reap(*partition, std::move(args), call,
                  [clock = &clock_, inbox, partition = *partition,
                   sent = clock_.Now()](absl::StatusOr<store::ReapResult> result) {
                    const absl::Duration round_trip = clock->Now() - sent;
                    absl::MutexLock lock(&inbox->mu);
                    inbox->done.push_back({partition, std::move(result), round_trip});
                  });
    }
    if (pacer.finished()) break;
    // Wait for a call to end, or for the next slot when another call may start (host time).
    // Capped, so a stop request is seen within a second even while calls are slow.
    const absl::Duration wait =
        std::min(pacer.full() ? absl::InfiniteDuration() : pacer.next_slot() - clock_.Now(),
                 absl::Seconds(1));
    std::deque<Finished> ended;
    {
      absl::MutexLock lock(&inbox->mu);
      auto any_done = [&inbox]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox->mu) { return !inbox->done.empty(); };
      if (wait > absl::ZeroDuration()) inbox->mu.AwaitWithTimeout(absl::Condition(&any_done), wait);
      ended.swap(inbox->done);
    }
    for (Finished& finished : ended) {
      const bool first = pacer.first_call(finished.partition);
      const bool more =
          Account(finished.partition, first, finished.result, finished.round_trip, tick);
      pacer.Done(finished.partition, more);
    }
    metrics_.reaper_calls_in_flight().Set(pacer.in_flight());
  }
  metrics_.reaper_calls_in_flight().Set(0);
  tick.stats.backlog_left = !pacer.left().empty();
}

Reaper::PeekCursor Reaper::StartPeeks(const std::vector<int>& partitions) {
  PeekCursor peeks{partitions, static_cast<size_t>(std::max(0, options_.peek_batch)),
                   std::vector<bool>(store_.partition_count(), false)};
  // A partition that reaped last tick is called without a peek (under load a peek would only
  // delay its call).
  if (busy_.size() != peeks.peeked.size()) busy_.assign(peeks.peeked.size(), false);
  // Nor one whose last look said a hold is due now.
  const absl::Time host_now = clock_.Now();
  for (int partition : partitions) {
    peeks.peeked[partition] =
        busy_[partition] || (due_nudges_complete_ && KnownDue(partition, host_now));
    busy_[partition] = false;  // Account() sets it again
  }
  return peeks;
}

bool Reaper::PeekBeforeCall(int partition, PeekCursor& peeks, TickPacer& pacer,
                            std::optional<absl::Time> now, Tick& tick) {
  if (peeks.group_size == 0 || peeks.peeked[partition]) return true;
  const std::vector<int>& partitions = peeks.partitions;
  // The group: the partitions needing a peek among the next `group_size` slots from the first one
  // needing it (busy partitions in between take slots, not places: the group never spans more
  // than group_size slots, which bounds the lag of a hold it misses).
  std::vector<int> group;
  std::optional<size_t> first;
  while (peeks.next < partitions.size() &&
         (!first.has_value() || peeks.next - *first < peeks.group_size)) {
    if (!peeks.peeked[partitions[peeks.next]]) {
      if (!first.has_value()) first = peeks.next;
      group.push_back(partitions[peeks.next]);
    }
    ++peeks.next;
  }
  if (std::find(group.begin(), group.end(), partition) == group.end()) {
    group.insert(group.begin(), partition);  // not reached: Next() goes in slot order
  }
  // Due "by the group's last slot": within its slots' span from now.
  const absl::Duration within = options_.pace_window *
                                static_cast<double>(peeks.next - first.value_or(peeks.next)) /
                                static_cast<double>(partitions.size());
  const std::vector<bool> due = Peek(group, within, now, tick);
  bool call = false;
  for (size_t i = 0; i < group.size(); ++i) {
    peeks.peeked[group[i]] = true;
    if (group[i] == partition) {
      call = due[i];
    } else if (!due[i]) {
      pacer.Skip(group[i]);
    }
  }
  return call;
}

std::vector<bool> Reaper::Peek(const std::vector<int>& group, absl::Duration within,
                               std::optional<absl::Time> now, Tick& tick) {
  struct Answers {
    absl::Mutex mu;
    std::vector<std::optional<absl::StatusOr<store::ReapResult>>> results ABSL_GUARDED_BY(mu);
    size_t left ABSL_GUARDED_BY(mu) = 0;
  };
  auto answers = std::make_shared<Answers>();
  {
    absl::MutexLock lock(&answers->mu);
    answers->results.resize(group.size());
    answers->left = group.size();
  }
  const absl::Time sent = clock_.Now();
  const store::CallOptions call{absl::Now() + options_.call_timeout, now};
  for (size_t i = 0; i < group.size(); ++i) {
    store::ReapArgs args{0, options_.replica_id, options_.lease, std::nullopt};
    if (tick.standby[group[i]]) args = {0, "", options_.lease, options_.standby_after};
    Sent(group[i]);
    store_.Reap(group[i], std::move(args), call,
                [answers, i](absl::StatusOr<store::ReapResult> result) {
                  absl::MutexLock lock(&answers->mu);
                  answers->results[i] = std::move(result);
                  --answers->left;
                });
  }
  tick.stats.peeks += static_cast<int>(group.size());
  std::vector<std::optional<absl::StatusOr<store::ReapResult>>> results;
  {
    absl::MutexLock lock(&answers->mu);
    auto all_answered = [&answers]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(answers->mu) {
      return answers->left == 0;
    };
    answers->mu.Await(absl::Condition(&all_answered));  // each call ends by its deadline
    results.swap(answers->results);
  }
  const absl::Duration round_trip = clock_.Now() - sent;
  std::vector<bool> due(group.size(), false);
  for (size_t i = 0; i < group.size(); ++i) {
    const absl::StatusOr<store::ReapResult>& result = *results[i];
    // Counted as a first call (backlog, not_owner, errors): the partition's first look this tick;
    // the group's one round trip once.
    Account(group[i], /*first=*/true, result, i == 0 ? round_trip : absl::ZeroDuration(), tick);
    // A failed peek leaves the partition to its call, which tries Redis again at its slot.
    due[i] = !result.ok() || (!result->not_owner && result->oldest_due.has_value() &&
                              *result->oldest_due <= result->now + within);
  }
  return due;
}

bool Reaper::Account(int partition, bool first, const absl::StatusOr<store::ReapResult>& result,
                     absl::Duration round_trip, Tick& tick) {
  tick.stats.redis_time += round_trip;
  View& view = views_[partition];
  if (!result.ok()) {
    view.known = false;  // looked at again next tick
    if (tick.first_error.ok()) tick.first_error = result.status();
    return false;
  }
  tick.store_now = result->now;
  const absl::Time host_now = clock_.Now();
  store_offset_ = result->now - host_now;
  // A lease refusal says nothing of the index (a standby refusal does: not overdue enough).
  view.known = !result->not_owner || tick.standby[partition];
  view.next = result->next_due;
  view.looked = host_now;
  view.nudges = sent_nudges_[partition];
  // Backlog over every partition this replica saw (owned or standby): a dead owner's partitions
  // show up here too.
  if (first && result->oldest_due.has_value() && *result->oldest_due <= result->now) {
    tick.backlog = std::max(tick.backlog, result->now - *result->oldest_due);
  }
  if (result->not_owner) {
    if (!tick.standby[partition]) ++tick.stats.not_owner;
    return false;
  }
  const int reaped = static_cast<int>(result->reaped_expire_times.size());
  if (reaped > 0 || result->more) busy_[partition] = true;
  if (tick.standby[partition]) tick.stats.standby_reaped += reaped;
  for (absl::Time expire_time : result->reaped_expire_times) {
    metrics_.reaper_lag().Observe(absl::ToDoubleSeconds(result->now - expire_time));
  }
  // Counted as each call ends, not with the tick: a replica killed part-way through a tick has
  // ended these holds in Redis, each with its event, already.
  if (reaped > 0) {
    metrics_.holds_expired().Increment(reaped);
    metrics_.events_appended().Increment(reaped);
  }
  tick.stats.reaped += reaped;
  return result->more;
}

void Reaper::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  stop_requested_.store(false);
  thread_ = std::thread([this] { Loop(); });
}

void Reaper::Stop() {
  stop_requested_.store(true);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  stop_requested_.store(false);  // RunOnce() works again (tests call it after Stop())
  ownership_.HandOver();
}

void Reaper::Loop() {
  absl::BitGen random;
  bool was_failing = false;
  // The first tick at once, the next ones on a fixed period from a random phase.
  absl::Time next_start =
      clock_.Now() + options_.interval * absl::Uniform(random, 0.0, options_.jitter);
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
    // Fixed rate: the next tick starts one interval after this one was due to, so a hold waits
    // at most about one interval whatever the tick took. A tick that left a backlog, or overran
    // the next start, starts the next one at once and the period restarts from there.
    const absl::Time now = clock_.Now();
    next_start += options_.interval;
    if (next_start < now || (stats.ok() && stats->backlog_left)) next_start = now;
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), next_start - now)) return;
  }
}

}  // namespace orderhold::reaper
