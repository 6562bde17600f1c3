#include "server/domain/event_dispatcher.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/fan_in.h"
#include "server/common/log.h"

namespace orderhold::domain {
namespace {

// How often the sweep thread looks whether a sweep is due (the sweep's own period is
// claim_interval / 2 to claim_interval; this only bounds how late it starts).
constexpr absl::Duration kSweepTick = absl::Milliseconds(100);
// Deadline of each CheckGroups call: far above a healthy round trip; a sweep that cannot finish
// by then is simply followed by the next one.
constexpr absl::Duration kSweepCallTimeout = absl::Seconds(5);

}  // namespace

EventDispatcher::EventDispatcher(store::HoldEventLog& log, EventPolicy policy, const Clock& clock)
    : log_(log), policy_(policy), clock_(clock), partitions_(log.event_partition_count()) {
  absl::MutexLock lock(&mu_);
  next_sweep_ = NextSweepAfter(clock_.Now());
}

EventDispatcher::~EventDispatcher() { Stop(); }

void EventDispatcher::Start() {
  absl::MutexLock lock(&mu_);
  if (sweeper_.joinable() || stopping_) return;
  sweeper_ = std::thread([this] { SweepLoop(); });
}

void EventDispatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* in_flight) { return *in_flight == 0; }, &sweeps_in_flight_));
}

void EventDispatcher::SweepLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kSweepTick)) return;
    }
    SweepIfDue();
  }
}

std::shared_ptr<EventDispatcher::Member> EventDispatcher::Join(std::string group,
                                                               absl::AnyInvocable<bool()> wake) {
  std::shared_ptr<Member> member(new Member(std::move(group), std::move(wake)));
  absl::MutexLock lock(&mu_);
  Group& g = groups_[member->group()];
  if (g.flags.empty()) {
    g.flags.assign(static_cast<size_t>(partitions_), 0);
    g.claim_after.assign(static_cast<size_t>(partitions_), "");
  }
  ++g.members;
  for (int p = 0; p < partitions_; ++p) member->own_.emplace(p, "");
  return member;
}

void EventDispatcher::Leave(const std::shared_ptr<Member>& member) {
  {
    // Waits for a wake in progress; none starts after this.
    absl::MutexLock lock(&member->wake_mu_);
    member->wake_ = nullptr;
  }
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(member->group());
  if (it == groups_.end()) return;
  Group& g = it->second;
  if (member->parked_) {
    g.parked.erase(std::remove(g.parked.begin(), g.parked.end(), member), g.parked.end());
    member->parked_ = false;
  }
  // The group's flags go with its last member: a member that joins later reads everything first.
  if (--g.members == 0) groups_.erase(it);
}

ReadPlan EventDispatcher::TakeWork(const std::shared_ptr<Member>& member) {
  ReadPlan plan;
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(member->group());
  if (it == groups_.end()) return plan;  // left
  Group& g = it->second;
  plan.own = std::exchange(member->own_, {});
  for (int p = 0; p < partitions_; ++p) {
    const uint8_t flags = std::exchange(g.flags[p], 0);
    if (flags != 0 || plan.own.count(p) > 0) plan.partitions.push_back(p);
    if ((flags & kClaim) != 0) {
      plan.claims.push_back(p);
      if (!g.claim_after[p].empty()) plan.claim_after[p] = g.claim_after[p];
    }
  }
  if (plan.empty() && !member->parked_) {
    member->parked_ = true;
    g.parked.push_back(member);
  }
  return plan;
}

std::shared_ptr<EventDispatcher::Member> EventDispatcher::UnparkLocked(Group& group) {
  if (group.parked.empty()) return nullptr;
  std::shared_ptr<Member> member = std::move(group.parked.front());
  group.parked.pop_front();
  member->parked_ = false;
  return member;
}

void EventDispatcher::RaiseLocked(Group& group, int partition, uint8_t flags, WakeList& wake) {
  group.flags[partition] |= flags;
  // None parked: every member is busy, and one of them takes it at its next TakeWork.
  if (std::shared_ptr<Member> member = UnparkLocked(group)) wake.push_back(std::move(member));
}

void EventDispatcher::Wake(WakeList members) {
  while (!members.empty()) {
    std::shared_ptr<Member> member = std::move(members.back());
    members.pop_back();
    bool took = false;
    {
      absl::MutexLock lock(&member->wake_mu_);
      if (member->wake_) took = member->wake_();
    }
    if (took) continue;
    // Ending (or left): its flags must not wait for the next nudge; wake the next one instead.
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(member->group());
    if (it == groups_.end()) continue;
    if (std::shared_ptr<Member> next = UnparkLocked(it->second)) members.push_back(std::move(next));
  }
}

void EventDispatcher::ReadDone(const std::shared_ptr<Member>& member, const ReadPlan& plan,
                               const ReadResult& result) {
  WakeList wake;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(member->group());
    if (it == groups_.end()) return;
    Group& g = it->second;
    auto in_range = [this](int p) { return p >= 0 && p < partitions_; };
    for (const auto& [p, cursor] : result.own_next) {
      if (in_range(p)) member->own_[p] = cursor;
    }
    for (int p : plan.claims) {
      if (!in_range(p)) continue;
      auto next = result.claim_next.find(p);
      if (next == result.claim_next.end()) {
        g.claim_after[p].clear();  // scanned to the end: the next sweep's claims start over
        continue;
      }
      g.claim_after[p] = next->second;
      RaiseLocked(g, p, kClaim, wake);
    }
    for (int p : result.again) {
      if (in_range(p)) RaiseLocked(g, p, kRead, wake);
    }
  }
  Wake(std::move(wake));
}

void EventDispatcher::OnNudge(int partition) {
  if (partition < 0 || partition >= partitions_) return;
  WakeList wake;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, group] : groups_) RaiseLocked(group, partition, kRead, wake);
  }
  Wake(std::move(wake));
}

absl::Time EventDispatcher::NextSweepAfter(absl::Time now) {
  return now + policy_.claim_interval * absl::Uniform(jitter_, 0.5, 1.0);
}

bool EventDispatcher::watched() const {
  absl::MutexLock lock(&mu_);
  return !groups_.empty();
}

absl::Time EventDispatcher::next_sweep() const {
  absl::MutexLock lock(&mu_);
  return next_sweep_;
}

bool EventDispatcher::SweepIfDue() {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    if (now < next_sweep_) return false;
    next_sweep_ = NextSweepAfter(now);
  }
  Sweep();
  return true;
}

void EventDispatcher::Sweep(absl::AnyInvocable<void()> done) {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, group] : groups_) names.push_back(name);
    if (!names.empty()) ++sweeps_in_flight_;
  }
  if (names.empty()) {
    if (done) done();
    return;
  }
  const store::CallOptions options{absl::Now() + kSweepCallTimeout, std::nullopt};
  FanIn<std::vector<store::GroupWork>>(
      static_cast<size_t>(partitions_),
      [&](size_t partition, Callback<std::vector<store::GroupWork>> slot) {
        log_.CheckGroups(static_cast<int>(partition), names, policy_.ack_timeout, options,
                         std::move(slot));
      },
      [this, done = std::move(done)](
          std::vector<absl::StatusOr<std::vector<store::GroupWork>>> results) mutable {
        WakeList wake;
        absl::Status failure;
        int failed = 0;
        {
          absl::MutexLock lock(&mu_);
          for (int p = 0; p < static_cast<int>(results.size()); ++p) {
            if (!results[p].ok()) {
              if (failed++ == 0) failure = results[p].status();
              for (auto& [name, group] : groups_) RaiseLocked(group, p, kRead, wake);
              continue;
            }
            for (const store::GroupWork& work : *results[p]) {
              auto it = groups_.find(work.group);
              if (it == groups_.end()) continue;  // its last member left meanwhile
              const uint8_t flags = (work.undelivered ? kRead : 0) | (work.claimable ? kClaim : 0);
              if (flags != 0) RaiseLocked(it->second, p, flags, wake);
            }
          }
        }
        Wake(std::move(wake));
        // Logged when it changes, not every sweep: an outage is one line (and the watches end
        // with its error); a sweep that cannot run (an ACL without a command check_groups.lua
        // needs) is one clear line, not silence.
        std::string message = failed == 0 ? "" : failure.ToString();
        {
          absl::MutexLock lock(&mu_);
          if (message != last_failure_) {
            if (failed > 0) {
              LogWarning("events: safety sweep failed on ", failed, " of ", partitions_,
                         " partitions: ", message);
            } else {
              LogInfo("events: safety sweep works again");
            }
            last_failure_ = std::move(message);
          }
        }
        if (done) done();
        absl::MutexLock lock(&mu_);
        --sweeps_in_flight_;
      });
}

}  // namespace orderhold::domain
