#include "tests/testing/fake_hold_store.h"

#include <algorithm>
#include <vector>

namespace orderhold::testing {

template <typename T, typename Body>
void FakeHoldStore::Answer(store::Callback<T>& done, Body body) {
  absl::StatusOr<T> out;
  {
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) {
      out = body();
    } else {
      out = failure_;
    }
  }
  std::move(done)(std::move(out));
}

absl::Time FakeHoldStore::NowFor(const store::CallOptions& options) const {
  const absl::Time now = options.now.value_or(clock_.Now());
  return absl::FromUnixMillis(absl::ToUnixMillis(now));
}

int FakeHoldStore::PartitionOf(const std::string& user_id) {
  return static_cast<int>(std::hash<std::string>()(user_id) % kPartitions);
}

std::vector<absl::Time> FakeHoldStore::ExpireDue(const std::string& user, absl::Time now) {
  std::vector<absl::Time> expired;
  auto it = holds_.find(user);
  if (it == holds_.end()) return expired;
  for (auto hold = it->second.begin(); hold != it->second.end();) {
    if (hold->second <= now) {
      expired.push_back(hold->second);
      RecordEnd(user, hold->first,
                store::HoldEnd{store::HoldOutcome::kExpired, hold->second, hold->second}, now);
      hold = it->second.erase(hold);
    } else {
      ++hold;
    }
  }
  if (it->second.empty()) holds_.erase(it);
  return expired;
}

void FakeHoldStore::RecordEnd(const std::string& user, const std::string& order, store::HoldEnd end,
                              absl::Time now) {
  auto& ends = ends_[user];
  ends[order] = end;
  // Retention, then the per-user cap (oldest end first), as trim_outcomes in prelude.lua.
  for (auto it = ends.begin(); it != ends.end();) {
    it = it->second.end_time <= now - outcomes_.retention ? ends.erase(it) : std::next(it);
  }
  while (static_cast<int>(ends.size()) > outcomes_.max_per_user) {
    auto oldest = ends.begin();
    for (auto it = ends.begin(); it != ends.end(); ++it) {
      if (it->second.end_time < oldest->second.end_time ||
          (it->second.end_time == oldest->second.end_time && it->first < oldest->first)) {
        oldest = it;
      }
    }
    ends.erase(oldest);
  }
}

const store::HoldEnd* FakeHoldStore::FindEnd(const std::string& user, const std::string& order,
                                             absl::Time now) {
  auto user_it = ends_.find(user);
  if (user_it == ends_.end()) return nullptr;
  auto it = user_it->second.find(order);
  if (it == user_it->second.end() || it->second.end_time <= now - outcomes_.retention) {
    return nullptr;
  }
  return &it->second;
}

void FakeHoldStore::PlaceHold(store::PlaceHoldArgs args, store::CallOptions options,
                              store::Callback<store::PlaceHoldResult> done) {
  Answer(done, [&] {
    store::PlaceHoldResult result;
    result.now = NowFor(options);
    result.expired_removed = static_cast<int>(ExpireDue(args.user_id, result.now).size());
    auto& holds = holds_[args.user_id];
    result.active_holds = static_cast<int>(holds.size());
    if (auto it = holds.find(args.order_id); it != holds.end()) {
      result.outcome = store::PlaceHoldResult::Outcome::kAlreadyHeld;
      result.expire_time = it->second;
    } else if (const store::HoldEnd* end = FindEnd(args.user_id, args.order_id, result.now)) {
      result.outcome = store::PlaceHoldResult::Outcome::kEnded;
      result.expire_time = end->expire_time;
      result.ended = *end;
    } else if (result.active_holds >= args.max_holds) {
      result.outcome = store::PlaceHoldResult::Outcome::kLimitReached;
      result.expire_time = absl::InfiniteFuture();
      for (const auto& [order, expire] : holds) {
        result.expire_time = std::min(result.expire_time, expire);
      }
    } else {
      result.outcome = store::PlaceHoldResult::Outcome::kCreated;
      result.expire_time = result.now + absl::Trunc(args.ttl, absl::Milliseconds(1));
      holds[args.order_id] = result.expire_time;
      ++result.active_holds;
    }
    if (holds.empty()) holds_.erase(args.user_id);
    return result;
  });
}

void FakeHoldStore::EndHold(std::string user_id, std::string order_id, store::HoldOutcome outcome,
                            store::CallOptions options,
                            store::Callback<store::EndHoldResult> done) {
  Answer(done, [&] {
    store::EndHoldResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(user_id); user != holds_.end()) {
      auto it = user->second.find(order_id);
      if (it != user->second.end() && it->second > result.now) {
        result.result = store::EndHoldResult::Result::kEnded;
        result.end = store::HoldEnd{outcome, result.now, it->second};
        user->second.erase(it);
        if (user->second.empty()) holds_.erase(user);
        RecordEnd(user_id, order_id, result.end, result.now);
        return result;
      }
    }
    result.expired_removed = static_cast<int>(ExpireDue(user_id, result.now).size());
    if (const store::HoldEnd* end = FindEnd(user_id, order_id, result.now)) {
      result.result = store::EndHoldResult::Result::kAlreadyEnded;
      result.end = *end;
    }
    return result;
  });
}

void FakeHoldStore::ListHolds(std::string user_id, store::CallOptions options,
                              store::Callback<store::ListHoldsResult> done) {
  Answer(done, [&] {
    store::ListHoldsResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(user_id); user != holds_.end()) {
      for (const auto& [order, expire] : user->second) {
        if (expire > result.now) result.holds.push_back(store::StoredHold{order, expire});
      }
    }
    std::sort(result.holds.begin(), result.holds.end(), [](const auto& a, const auto& b) {
      return a.expire_time != b.expire_time ? a.expire_time < b.expire_time
                                            : a.order_id < b.order_id;
    });
    return result;
  });
}

void FakeHoldStore::Reap(int partition, store::ReapArgs args, store::CallOptions options,
                         store::Callback<store::ReapResult> done) {
  if (partition < 0 || partition >= kPartitions || args.max_users < 1) {
    std::move(done)(absl::InvalidArgumentError("reap: partition or max_users out of range"));
    return;
  }
  Answer(done, [&] {
    store::ReapResult result;
    result.now = NowFor(options);
    if (args.standby_after.has_value()) {
      std::optional<absl::Time> oldest;
      for (const auto& [user, holds] : holds_) {
        if (PartitionOf(user) != partition) continue;
        for (const auto& [order, expire] : holds) {
          if (!oldest.has_value() || expire < *oldest) oldest = expire;
        }
      }
      if (!oldest.has_value() || *oldest > result.now - *args.standby_after) {
        result.not_owner = true;
        result.oldest_due = oldest;
        return result;
      }
    } else if (!args.owner.empty()) {
      auto lease = leases_.find(partition);
      if (lease != leases_.end() && lease->second.second > result.now &&
          lease->second.first != args.owner) {
        result.not_owner = true;
        return result;
      }
      leases_[partition] = {args.owner, result.now + args.lease};
    }
    std::vector<std::string> due_users;
    for (const auto& [user, holds] : holds_) {
      if (PartitionOf(user) != partition) continue;
      for (const auto& [order, expire] : holds) {
        if (!result.oldest_due.has_value() || expire < *result.oldest_due) {
          result.oldest_due = expire;
        }
        if (expire <= result.now && (due_users.empty() || due_users.back() != user)) {
          due_users.push_back(user);
        }
      }
    }
    if (static_cast<int>(due_users.size()) >= args.max_users) {
      due_users.resize(args.max_users);
      result.more = true;
    }
    for (const std::string& user : due_users) {
      for (absl::Time expire : ExpireDue(user, result.now)) {
        result.reaped_expire_times.push_back(expire);
      }
    }
    return result;
  });
}

void FakeHoldStore::Heartbeat(std::string replica_id, absl::Duration ttl,
                              store::CallOptions options,
                              store::Callback<std::vector<std::string>> done) {
  Answer(done, [&] {
    const absl::Time now = NowFor(options);
    for (auto it = replicas_.begin(); it != replicas_.end();) {
      it = it->second <= now ? replicas_.erase(it) : std::next(it);
    }
    replicas_[replica_id] = now + ttl;
    std::vector<std::string> ids;
    for (const auto& [id, until] : replicas_) ids.push_back(id);
    return ids;
  });
}

void FakeHoldStore::ReleaseLease(int partition, std::string replica_id,
                                 store::CallOptions /*options*/, store::Callback<bool> done) {
  if (partition < 0 || partition >= kPartitions) {
    return std::move(done)(absl::InvalidArgumentError("release_lease: partition out of range"));
  }
  Answer(done, [&] {
    auto lease = leases_.find(partition);
    if (lease == leases_.end() || lease->second.first != replica_id) return false;
    leases_.erase(lease);
    return true;
  });
}

void FakeHoldStore::Unregister(std::string replica_id, store::CallOptions /*options*/,
                               store::Callback<bool> done) {
  Answer(done, [&] { return replicas_.erase(replica_id) > 0; });
}

void FakeHoldStore::Ping(store::CallOptions options, store::Callback<absl::Time> done) {
  Answer(done, [&] { return NowFor(options); });
}

}  // namespace orderhold::testing
