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

int FakeHoldStore::ShardOf(const std::string& user_id) {
  return static_cast<int>(std::hash<std::string>()(user_id) % kShards);
}

void FakeHoldStore::PlaceHold(store::PlaceHoldArgs args, store::CallOptions options,
                              store::Callback<store::PlaceHoldResult> done) {
  Answer(done, [&] {
    store::PlaceHoldResult result;
    result.now = NowFor(options);
    auto& holds = holds_[args.user_id];
    for (auto it = holds.begin(); it != holds.end();) {
      if (it->second <= result.now) {
        it = holds.erase(it);
        ++result.expired_removed;
      } else {
        ++it;
      }
    }
    result.active_holds = static_cast<int>(holds.size());
    if (auto it = holds.find(args.order_id); it != holds.end()) {
      result.outcome = store::PlaceHoldResult::Outcome::kAlreadyHeld;
      result.expire_time = it->second;
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

void FakeHoldStore::Pay(std::string user_id, std::string order_id, store::CallOptions options,
                        store::Callback<store::PayResult> done) {
  Answer(done, [&] {
    store::PayResult result;
    result.now = NowFor(options);
    auto user = holds_.find(user_id);
    if (user == holds_.end()) return result;
    auto it = user->second.find(order_id);
    if (it != user->second.end() && it->second > result.now) {
      result.paid = true;
      result.expire_time = it->second;
      user->second.erase(it);
      if (user->second.empty()) holds_.erase(user);
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

void FakeHoldStore::Reap(int shard, int max_users, store::CallOptions options,
                         store::Callback<store::ReapResult> done) {
  Answer(done, [&] {
    store::ReapResult result;
    result.now = NowFor(options);
    int users = 0;
    for (auto user = holds_.begin(); user != holds_.end();) {
      if (ShardOf(user->first) != shard) {
        ++user;
        continue;
      }
      bool due = false;
      for (auto it = user->second.begin(); it != user->second.end();) {
        if (it->second <= result.now) {
          result.reaped_expire_times.push_back(it->second);
          it = user->second.erase(it);
          due = true;
        } else {
          ++it;
        }
      }
      user = user->second.empty() ? holds_.erase(user) : std::next(user);
      if (due && ++users == max_users) {
        result.more = true;
        break;
      }
    }
    return result;
  });
}

void FakeHoldStore::Ping(store::CallOptions options, store::Callback<absl::Time> done) {
  Answer(done, [&] { return NowFor(options); });
}

}  // namespace orderhold::testing
