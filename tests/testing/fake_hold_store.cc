#include "tests/testing/fake_hold_store.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/hold_details_codec.h"

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
    if (hold->second.expire <= now) {
      const absl::Time expire = hold->second.expire;
      expired.push_back(expire);
      RecordEnd(user, hold->first, store::HoldEnd{store::HoldOutcome::kExpired, expire, expire},
                hold->second.details, now);
      hold = it->second.erase(hold);
    } else {
      ++hold;
    }
  }
  if (it->second.empty()) holds_.erase(it);
  return expired;
}

void FakeHoldStore::RecordEnd(const std::string& user, const std::string& order, store::HoldEnd end,
                              store::HoldDetails details, absl::Time now) {
  auto& ends = ends_[user];
  ends[order] = Ended{end, std::move(details)};
  // Retention, then the per-user cap (oldest end first), as trim_outcomes in the prelude.
  for (auto it = ends.begin(); it != ends.end();) {
    it = it->second.end.end_time <= now - outcomes_.retention ? ends.erase(it) : std::next(it);
  }
  while (static_cast<int>(ends.size()) > outcomes_.max_per_user) {
    auto oldest = ends.begin();
    for (auto it = ends.begin(); it != ends.end(); ++it) {
      const absl::Time a = it->second.end.end_time, b = oldest->second.end.end_time;
      if (a < b || (a == b && it->first < oldest->first)) {
        oldest = it;
      }
    }
    ends.erase(oldest);
  }
}

std::optional<FakeHoldStore::Ended> FakeHoldStore::PriorEnd(const std::string& user,
                                                            const std::string& order,
                                                            absl::Time now) {
  if (auto user_it = holds_.find(user); user_it != holds_.end()) {
    if (auto it = user_it->second.find(order); it != user_it->second.end()) {
      const Held& held = it->second;
      if (held.expire > now || held.expire <= now - outcomes_.retention) return std::nullopt;
      return Ended{store::HoldEnd{store::HoldOutcome::kExpired, held.expire, held.expire},
                   held.details};
    }
  }
  if (const Ended* ended = FindEnd(user, order, now)) return *ended;
  return std::nullopt;
}

const FakeHoldStore::Ended* FakeHoldStore::FindEnd(const std::string& user,
                                                   const std::string& order, absl::Time now) {
  auto user_it = ends_.find(user);
  if (user_it == ends_.end()) return nullptr;
  auto it = user_it->second.find(order);
  if (it == user_it->second.end() || it->second.end.end_time <= now - outcomes_.retention) {
    return nullptr;
  }
  return &it->second;
}

void FakeHoldStore::PlaceHold(store::PlaceHoldArgs args, store::CallOptions options,
                              store::Callback<store::PlaceHoldResult> done) {
  Answer(done, [&] {
    using Outcome = store::PlaceHoldResult::Outcome;
    store::PlaceHoldResult result;
    result.now = NowFor(options);
    // How the order ended, as it stood before this call's cleanup (the scripts read everything
    // before their first write): the cleanup's trim may drop the record it answers from.
    const std::optional<Ended> prior = PriorEnd(args.user_id, args.order_id, result.now);
    // The runtime rule, and a quantity that can never fit first, as place_hold.lua: nothing is
    // written then.
    const std::optional<store::ScopeState> state = ApplyRule(args, result);
    if (result.outcome == Outcome::kClassDenied || NeverFits(args, result)) return result;
    result.expired_removed = static_cast<int>(ExpireDue(args.user_id, result.now).size());
    auto& holds = holds_[args.user_id];
    const std::string& scope = args.details.scope;
    const int64_t quantity = std::max<int64_t>(1, args.details.quantity);
    // Usage and the earliest expiry per level, as place_hold.lua sums them.
    std::optional<absl::Time> user_first, scope_first;
    for (const auto& [order, held] : holds) {
      result.user_units += held.details.quantity;
      if (!user_first.has_value() || held.expire < *user_first) user_first = held.expire;
      if (!scope.empty() && held.details.scope == scope) {
        ++result.scope_holds;
        result.scope_units += held.details.quantity;
        if (!scope_first.has_value() || held.expire < *scope_first) scope_first = held.expire;
      }
    }
    result.active_holds = static_cast<int>(holds.size());
    const store::LevelLimits& scope_limits = args.details.scope_limits;
    if (auto it = holds.find(args.order_id); it != holds.end()) {
      result.outcome = Outcome::kAlreadyHeld;
      result.expire_time = it->second.expire;
      result.details = it->second.details;
    } else if (prior.has_value()) {
      result.outcome = Outcome::kEnded;
      result.expire_time = prior->end.expire_time;
      result.ended = prior->end;
    } else if (state.has_value() && *state != store::ScopeState::kOpen) {
      const bool closed = *state == store::ScopeState::kClosed;
      const store::ScopeRuleRecord& rule = rules_.at(args.details.scope);
      result.outcome = closed ? Outcome::kScopeClosed : Outcome::kScopeNotOpen;
      result.expire_time = !closed && rule.open_time.has_value() && result.now < *rule.open_time
                               ? *rule.open_time
                               : absl::UnixEpoch();
    } else {
      if (result.active_holds + 1 > args.max_holds) result.violations |= store::kUserHoldLimit;
      if (args.max_units > 0 && result.user_units + quantity > args.max_units) {
        result.violations |= store::kUserUnitLimit;
      }
      if (!scope.empty() && scope_limits.max_holds > 0 &&
          result.scope_holds + 1 > scope_limits.max_holds) {
        result.violations |= store::kScopeHoldLimit;
      }
      if (!scope.empty() && scope_limits.max_units > 0 &&
          result.scope_units + quantity > scope_limits.max_units) {
        result.violations |= store::kScopeUnitLimit;
      }
      // The scope's totals, across users: every live hold of the scope (the script's index).
      std::optional<absl::Time> total_first;
      const bool totals = !scope.empty() && (args.totals.max_holds > 0 ||
                                             args.totals.max_units > 0 || args.capacity_units > 0);
      if (totals) {
        for (const auto& [user, theirs] : holds_) {
          for (const auto& [order, held] : theirs) {
            if (held.details.scope != scope || held.expire <= result.now) continue;
            ++result.total_holds;
            result.total_units += held.details.quantity;
            if (!total_first.has_value() || held.expire < *total_first) total_first = held.expire;
          }
        }
        if (args.totals.max_holds > 0 && result.total_holds + 1 > args.totals.max_holds) {
          result.violations |= store::kScopeTotalHoldLimit;
        }
        if (args.totals.max_units > 0 && result.total_units + quantity > args.totals.max_units) {
          result.violations |= store::kScopeTotalUnitLimit;
        }
        if (args.capacity_units > 0) {
          result.sold_units = sold_[scope];
          if (result.total_units + result.sold_units + quantity > args.capacity_units) {
            result.violations |= store::kScopeCapacity;
          }
        }
      }
      // A runtime rule's purchase caps: the user's live holds in the scope plus its purchases.
      if (result.rule.has_value() && result.rule->purchases != store::LevelLimits{}) {
        const Bought bought = BoughtIn(args.user_id, scope);
        result.purchased_units = bought.units;
        result.purchased_holds = bought.holds;
        const store::LevelLimits& cap = result.rule->purchases;
        if (cap.max_holds > 0 && result.scope_holds + bought.holds + 1 > cap.max_holds) {
          result.violations |= store::kUserPurchasedHolds;
        }
        if (cap.max_units > 0 && result.scope_units + bought.units + quantity > cap.max_units) {
          result.violations |= store::kUserPurchasedUnits;
        }
      }
      if (result.violations != 0) {
        result.outcome = Outcome::kLimitReached;
        result.expire_time = absl::UnixEpoch();
        if (result.violations & (store::kUserHoldLimit | store::kUserUnitLimit)) {
          result.expire_time = user_first.value_or(result.now);
        }
        if (result.violations & (store::kScopeHoldLimit | store::kScopeUnitLimit |
                                 store::kUserPurchasedHolds | store::kUserPurchasedUnits)) {
          result.expire_time = std::max(result.expire_time, scope_first.value_or(result.now));
        }
        if (result.violations &
            (store::kScopeTotalHoldLimit | store::kScopeTotalUnitLimit | store::kScopeCapacity)) {
          result.expire_time = std::max(result.expire_time, total_first.value_or(result.now));
        }
      } else {
        result.outcome = Outcome::kCreated;
        result.expire_time = result.now + absl::Trunc(args.ttl, absl::Milliseconds(1));
        const bool scoped = !scope.empty();
        result.details = std::move(args.details);  // `scope` refers to it: read first
        result.details.quantity = quantity;
        if (!scoped) result.details.scope_limits = {};
        // Every hold has a life record (place_hold.lua): place time and cap.
        result.details.place_time = result.now;
        result.details.max_expire_time = std::max(
            result.expire_time, result.now + absl::Trunc(args.max_lifetime, absl::Milliseconds(1)));
        result.details.extensions = 0;
        holds[args.order_id] = Held{result.expire_time, result.details, {}};
        ++result.active_holds;
        result.user_units += quantity;
        if (scoped) {
          ++result.scope_holds;
          result.scope_units += quantity;
          if (totals) {
            ++result.total_holds;
            result.total_units += quantity;
          }
        }
      }
    }
    if (holds.empty()) holds_.erase(args.user_id);
    return result;
  });
}

void FakeHoldStore::EndHold(std::string user_id, std::string order_id, store::HoldOutcome outcome,
                            std::string payment_reference, store::CallOptions options,
                            store::Callback<store::EndHoldResult> done) {
  Answer(done, [&] {
    store::EndHoldResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(user_id); user != holds_.end()) {
      auto it = user->second.find(order_id);
      if (it != user->second.end() && it->second.expire > result.now) {
        result.result = store::EndHoldResult::Result::kEnded;
        result.end = store::HoldEnd{
            outcome, result.now, it->second.expire,
            outcome == store::HoldOutcome::kPaid ? payment_reference : std::string()};
        // A payment moves a scoped hold's units to its scope's sold count (end_hold).
        int64_t rule_id = 0;
        if (outcome == store::HoldOutcome::kPaid && !it->second.details.scope.empty()) {
          sold_[it->second.details.scope] += it->second.details.quantity;
          rule_id = RecordPurchase(user_id, it->second.details.scope, it->second.details.quantity,
                                   result.now);
        }
        result.details = std::move(it->second.details);
        user->second.erase(it);
        if (user->second.empty()) holds_.erase(user);
        RecordEnd(user_id, order_id, result.end, result.details, result.now);
        if (auto ended = ends_[user_id].find(order_id); ended != ends_[user_id].end()) {
          ended->second.rule_id = rule_id;
        }
        return result;
      }
    }
    const std::optional<Ended> prior = PriorEnd(user_id, order_id, result.now);
    result.expired_removed = static_cast<int>(ExpireDue(user_id, result.now).size());
    if (prior.has_value()) {
      result.result = store::EndHoldResult::Result::kAlreadyEnded;
      result.end = prior->end;
      result.details = prior->details;
    }
    return result;
  });
}

void FakeHoldStore::ListHolds(store::ListHoldsArgs args, store::CallOptions options,
                              store::Callback<store::ListHoldsResult> done) {
  Answer(done, [&] {
    store::ListHoldsResult result;
    result.now = NowFor(options);
    std::vector<store::StoredHold> live;
    if (auto user = holds_.find(args.user_id); user != holds_.end()) {
      for (const auto& [order, held] : user->second) {
        if (held.expire > result.now) {
          live.push_back(store::StoredHold{order, held.expire, held.details});
        }
      }
    }
    auto before = [](absl::Time expire_a, const std::string& order_a, absl::Time expire_b,
                     const std::string& order_b) {
      return expire_a != expire_b ? expire_a < expire_b : order_a < order_b;
    };
    std::sort(live.begin(), live.end(), [&](const auto& a, const auto& b) {
      return before(a.expire_time, a.order_id, b.expire_time, b.order_id);
    });
    for (store::StoredHold& hold : live) {
      ++result.user_holds;
      result.user_units += hold.details.quantity;
      result.plain = result.plain && store::IsPlain(hold.details);
      if (!args.scope.empty() && hold.details.scope != args.scope) continue;
      if (!args.scope.empty()) {
        ++result.scope_holds;
        result.scope_units += hold.details.quantity;
      }
      if (args.after.has_value() &&
          !before(args.after->expire_time, args.after->order_id, hold.expire_time, hold.order_id)) {
        continue;
      }
      if (static_cast<int64_t>(result.holds.size()) < args.page_size) {
        result.holds.push_back(std::move(hold));
      } else {
        result.more = true;
      }
    }
    // The scope's runtime rule, read in the step (list_holds.lua's "rule").
    if (auto rule = rules_.find(args.scope);
        !args.scope.empty() && rule != rules_.end() && Live(rule->second, result.now)) {
      result.rule = rule->second;
    }
    return result;
  });
}

void FakeHoldStore::ExtendHold(store::ExtendHoldArgs args, store::CallOptions options,
                               store::Callback<store::ExtendHoldResult> done) {
  Answer(done, [&] {
    using Result = store::ExtendHoldResult::Result;
    constexpr size_t kMaxRequestIds = 4;  // extend_hold.lua's MAX_REQUEST_IDS
    store::ExtendHoldResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(args.user_id); user != holds_.end()) {
      auto it = user->second.find(args.order_id);
      if (it != user->second.end() && it->second.expire > result.now) {
        Held& held = it->second;
        // Every hold placed here has a life record, so a cap (see extend_hold.lua for holds an
        // earlier release placed).
        store::HoldDetails& d = held.details;
        const absl::Time wanted = result.now + absl::Trunc(args.ttl, absl::Milliseconds(1));
        const absl::Time moved_to = std::max(held.expire, std::min(wanted, *d.max_expire_time));
        const bool retry =
            !args.request_id.empty() && std::find(held.request_ids.begin(), held.request_ids.end(),
                                                  args.request_id) != held.request_ids.end();
        result.capped = wanted > *d.max_expire_time;
        result.result = Result::kLive;
        if (retry) {
          result.extended = true;  // a replay of the call that moved it: nothing changes
          result.replayed = true;
        } else if (moved_to > held.expire) {
          if (args.max_extensions > 0 && d.extensions >= args.max_extensions) {
            result.result = Result::kExhausted;
          } else {
            ++d.extensions;
            if (!args.request_id.empty()) {
              held.request_ids.push_back(args.request_id);
              if (held.request_ids.size() > kMaxRequestIds) {
                held.request_ids.erase(held.request_ids.begin());
              }
            }
            held.expire = moved_to;
            result.extended = true;
          }
        }
        result.hold = store::StoredHold{args.order_id, held.expire, d};
        return result;
      }
    }
    const std::optional<Ended> prior = PriorEnd(args.user_id, args.order_id, result.now);
    result.expired_removed = static_cast<int>(ExpireDue(args.user_id, result.now).size());
    if (prior.has_value()) {
      result.result = Result::kEnded;
      result.end = prior->end;
    }
    return result;
  });
}

void FakeHoldStore::GetHold(std::string user_id, std::string order_id, store::CallOptions options,
                            store::Callback<store::GetHoldResult> done) {
  Answer(done, [&] {
    using State = store::GetHoldResult::State;
    store::GetHoldResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(user_id); user != holds_.end()) {
      if (auto it = user->second.find(order_id); it != user->second.end()) {
        const Held& held = it->second;
        // Past its expiry and not reaped yet: EXPIRED at it, unless that is past the retention.
        if (held.expire > result.now || held.expire > result.now - outcomes_.retention) {
          result.state = held.expire > result.now ? State::kLive : State::kEnded;
          result.hold = store::StoredHold{order_id, held.expire, held.details};
          if (result.state == State::kEnded) {
            result.end = store::HoldEnd{store::HoldOutcome::kExpired, held.expire, held.expire};
          }
        }
        return result;
      }
    }
    if (const Ended* ended = FindEnd(user_id, order_id, result.now)) {
      result.state = State::kEnded;
      result.hold = store::StoredHold{order_id, ended->end.expire_time, ended->details};
      result.end = ended->end;
    }
    return result;
  });
}

void FakeHoldStore::ReleaseHolds(std::string user_id, std::string scope, store::CallOptions options,
                                 store::Callback<store::ReleaseHoldsResult> done) {
  Answer(done, [&] {
    store::ReleaseHoldsResult result;
    result.now = NowFor(options);
    result.expired_removed = static_cast<int>(ExpireDue(user_id, result.now).size());
    auto user = holds_.find(user_id);
    if (user == holds_.end()) return result;
    for (auto it = user->second.begin(); it != user->second.end();) {
      if (!scope.empty() && it->second.details.scope != scope) {
        ++it;
        continue;
      }
      result.released.push_back(
          store::StoredHold{it->first, it->second.expire, it->second.details});
      RecordEnd(user_id, it->first,
                store::HoldEnd{store::HoldOutcome::kCancelled, result.now, it->second.expire},
                it->second.details, result.now);
      it = user->second.erase(it);
    }
    if (user->second.empty()) holds_.erase(user);
    std::sort(result.released.begin(), result.released.end(), [](const auto& a, const auto& b) {
      return a.expire_time != b.expire_time ? a.expire_time < b.expire_time
                                            : a.order_id < b.order_id;
    });
    return result;
  });
}

void FakeHoldStore::MigrateStep(int partition, store::MigrateArgs args,
                                store::CallOptions /*options*/,
                                store::Callback<store::MigrateResult> done) {
  if (partition < 0 || partition >= kPartitions || args.max_users < 1) {
    std::move(done)(absl::InvalidArgumentError("migrate: partition or max_users out of range"));
    return;
  }
  std::move(done)(store::MigrateResult{});
}

void FakeHoldStore::Reap(int partition, store::ReapArgs args, store::CallOptions options,
                         store::Callback<store::ReapResult> done) {
  if (partition < 0 || partition >= kPartitions || args.max_users < 0) {
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
        for (const auto& [order, held] : holds) {
          if (!oldest.has_value() || held.expire < *oldest) oldest = held.expire;
        }
      }
      if (!oldest.has_value() || *oldest > result.now - *args.standby_after) {
        result.not_owner = true;
        result.oldest_due = oldest;
        result.next_due = oldest;
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
    if (args.max_users == 0) {  // a peek: the oldest expire time, nothing ended
      for (const auto& [user, holds] : holds_) {
        if (PartitionOf(user) != partition) continue;
        for (const auto& [order, held] : holds) {
          if (!result.oldest_due.has_value() || held.expire < *result.oldest_due) {
            result.oldest_due = held.expire;
          }
        }
      }
      ++peeks_;
      result.next_due = result.oldest_due;
      return result;
    }
    ++reap_calls_;
    std::vector<std::string> due_users;
    for (const auto& [user, holds] : holds_) {
      if (PartitionOf(user) != partition) continue;
      for (const auto& [order, held] : holds) {
        if (!result.oldest_due.has_value() || held.expire < *result.oldest_due) {
          result.oldest_due = held.expire;
        }
        if (held.expire <= result.now && (due_users.empty() || due_users.back() != user)) {
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
    for (const auto& [user, holds] : holds_) {
      if (PartitionOf(user) != partition) continue;
      for (const auto& [order, held] : holds) {
        if (!result.next_due.has_value() || held.expire < *result.next_due) {
          result.next_due = held.expire;
        }
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

std::optional<store::ScopeState> FakeHoldStore::ApplyRule(store::PlaceHoldArgs& args,
                                                          store::PlaceHoldResult& result) {
  const std::string& scope = args.details.scope;
  if (scope.empty()) return std::nullopt;
  auto it = rules_.find(scope);
  const bool live = it != rules_.end() && Live(it->second, result.now);
  // A limit class asked: the rule must have it and list one of the caller's identities.
  const store::LimitClassRecord* limit_class = nullptr;
  if (!args.limit_class.empty()) {
    if (live) {
      auto c = it->second.classes.find(args.limit_class);
      if (c != it->second.classes.end() &&
          std::any_of(args.caller_identities.begin(), args.caller_identities.end(),
                      [&](const std::string& id) {
                        return std::find(c->second.principals.begin(), c->second.principals.end(),
                                         id) != c->second.principals.end();
                      })) {
        limit_class = &c->second;
      }
    }
    if (limit_class == nullptr) {
      result.outcome = store::PlaceHoldResult::Outcome::kClassDenied;
      result.expire_time = absl::UnixEpoch();
      return std::nullopt;
    }
  }
  if (!live) return std::nullopt;
  const store::ScopeRuleRecord& rule = it->second;
  store::LevelLimits limits = limit_class != nullptr ? limit_class->limits : rule.limits;
  const store::LevelLimits& purchases =
      limit_class != nullptr ? limit_class->purchases : rule.purchases;
  if (args.asked_limits.has_value()) {
    const store::LevelLimits& asked = *args.asked_limits;
    auto lower = [](int64_t r, int64_t q) { return q == 0 || (r != 0 && r < q) ? r : q; };
    limits = args.asked_replaces ? asked
                                 : store::LevelLimits{lower(limits.max_holds, asked.max_holds),
                                                      lower(limits.max_units, asked.max_units)};
  }
  args.details.scope_limits = limits;
  args.totals = rule.totals;
  args.capacity_units = rule.capacity_units;
  result.rule =
      store::AppliedScopeRule{rule.etag, limits, rule.totals, rule.capacity_units, purchases};
  return store::EffectiveState(rule, result.now);
}

bool FakeHoldStore::NeverFits(const store::PlaceHoldArgs& args, store::PlaceHoldResult& result) {
  if (args.details.scope.empty()) return false;
  const int64_t quantity = std::max<int64_t>(1, args.details.quantity);
  const int64_t unit_limits[] = {args.details.scope_limits.max_units, args.totals.max_units,
                                 args.capacity_units,
                                 result.rule.has_value() ? result.rule->purchases.max_units : 0};
  const int bits[] = {store::kScopeUnitLimit, store::kScopeTotalUnitLimit, store::kScopeCapacity,
                      store::kUserPurchasedUnits};
  for (int i = 0; i < 4; ++i) {
    if (unit_limits[i] > 0 && quantity > unit_limits[i]) result.violations |= bits[i];
  }
  if (result.violations == 0) return false;
  result.outcome = store::PlaceHoldResult::Outcome::kNeverFits;
  result.expire_time = absl::UnixEpoch();
  return true;
}

bool FakeHoldStore::Live(const store::ScopeRuleRecord& rule, absl::Time now) {
  return !rule.expire_time.has_value() || now < *rule.expire_time;
}

void FakeHoldStore::PutScopeRule(store::ScopeRuleRecord rule, store::CallOptions options,
                                 store::Callback<store::ScopeRuleResult> done) {
  Answer(done, [&]() -> absl::StatusOr<store::ScopeRuleResult> {
    store::ScopeRuleResult result;
    result.now = NowFor(options);
    auto it = rules_.find(rule.scope);
    const bool live = it != rules_.end() && Live(it->second, result.now);
    if (!rule.etag.empty() && (!live || it->second.etag != rule.etag)) {
      return absl::AbortedError(absl::StrCat("etag: \"", rule.etag, "\" is not the rule's etag"));
    }
    if (rule.expire_time.has_value() && *rule.expire_time <= result.now) {
      return absl::InvalidArgumentError("rule.expire_time: must be after now");
    }
    rule.etag = absl::StrCat(++rule_version_);
    if (!live) rule_ids_[rule.scope] = rule_version_;  // a new rule: purchases count anew
    rules_[rule.scope] = rule;
    result.rule = std::move(rule);
    return result;
  });
}

FakeHoldStore::Bought FakeHoldStore::BoughtIn(const std::string& user, const std::string& scope) {
  auto it = bought_.find({user, scope});
  if (it == bought_.end() || it->second.rule_id != rule_ids_[scope]) return Bought{};
  return it->second;
}

int64_t FakeHoldStore::RecordPurchase(const std::string& user, const std::string& scope,
                                      int64_t quantity, absl::Time now) {
  auto rule = rules_.find(scope);
  if (rule == rules_.end() || !Live(rule->second, now)) return 0;
  Bought bought = BoughtIn(user, scope);
  bought.rule_id = rule_ids_[scope];
  bought.units += quantity;
  bought.holds += 1;
  bought_[{user, scope}] = bought;
  return bought.rule_id;
}

std::optional<store::PurchaseUsage> FakeHoldStore::PurchaseUsageOf(const std::string& user,
                                                                   const std::string& scope,
                                                                   absl::Time now) {
  auto rule = rules_.find(scope);
  if (scope.empty() || rule == rules_.end() || !Live(rule->second, now)) return std::nullopt;
  const Bought bought = BoughtIn(user, scope);
  store::PurchaseUsage usage{
      .holds = bought.holds, .units = bought.units, .caps = rule->second.purchases};
  if (auto it = holds_.find(user); it != holds_.end()) {
    for (const auto& [order, held] : it->second) {
      if (held.expire > now && held.details.scope == scope) {
        ++usage.holds;
        usage.units += held.details.quantity;
      }
    }
  }
  return usage;
}

// return_units.lua's step, on the maps.
void FakeHoldStore::ReturnUnits(store::ReturnUnitsArgs args, store::CallOptions options,
                                store::Callback<store::ReturnUnitsResult> done) {
  Answer(done, [&] {
    using Result = store::ReturnUnitsResult::Result;
    store::ReturnUnitsResult result;
    result.now = NowFor(options);
    if (auto user = holds_.find(args.user_id); user != holds_.end()) {
      auto it = user->second.find(args.order_id);
      if (it != user->second.end() && it->second.expire > result.now) {
        result.result = Result::kLive;
        return result;
      }
    }
    const std::optional<Ended> prior = PriorEnd(args.user_id, args.order_id, result.now);
    if (!prior.has_value()) return result;  // kUnknown
    result.end = prior->end;
    if (prior->end.outcome != store::HoldOutcome::kPaid) {
      result.result = Result::kNotPaid;
      return result;
    }
    Ended& ended = ends_[args.user_id][args.order_id];
    const std::string& scope = ended.details.scope;
    result.quantity = ended.details.quantity;
    result.total_returned = ended.returned;
    for (const auto& [request, units] : ended.returns) {
      if (request != args.request_id) continue;
      result.result = Result::kAlreadyReturned;
      result.units = units;
      result.details = ended.details;
      result.purchase_usage = PurchaseUsageOf(args.user_id, scope, result.now);
      return result;
    }
    if (ended.returned + args.units > result.quantity) {
      result.result = Result::kExceedsQuantity;
      return result;
    }
    if (static_cast<int>(ended.returns.size()) >= store::kMaxReturnsPerHold) {
      result.result = Result::kTooManyReturns;
      return result;
    }
    ended.returns.emplace_back(args.request_id, args.units);
    ended.returned += args.units;
    if (!scope.empty()) {
      if ((sold_[scope] -= args.units) <= 0) sold_.erase(scope);
      auto rule = rules_.find(scope);
      if (rule != rules_.end() && Live(rule->second, result.now) && ended.rule_id != 0 &&
          ended.rule_id == rule_ids_[scope]) {
        if (auto bought = bought_.find({args.user_id, scope});
            bought != bought_.end() && bought->second.rule_id == ended.rule_id) {
          bought->second.units = std::max<int64_t>(0, bought->second.units - args.units);
          if (ended.returned == result.quantity) {
            bought->second.holds = std::max<int64_t>(0, bought->second.holds - 1);
          }
        }
      }
    }
    result.result = Result::kReturned;
    result.units = args.units;
    result.total_returned = ended.returned;
    result.details = ended.details;
    result.purchase_usage = PurchaseUsageOf(args.user_id, scope, result.now);
    return result;
  });
}

void FakeHoldStore::GetScopeRule(std::string scope, store::CallOptions options,
                                 store::Callback<store::ScopeRuleResult> done) {
  Answer(done, [&]() -> absl::StatusOr<store::ScopeRuleResult> {
    store::ScopeRuleResult result;
    result.now = NowFor(options);
    if (auto it = rules_.find(scope); it != rules_.end() && Live(it->second, result.now)) {
      result.rule = it->second;
    }
    return result;
  });
}

void FakeHoldStore::DeleteScopeRule(std::string scope, std::string etag, store::CallOptions options,
                                    store::Callback<store::ScopeRuleResult> done) {
  Answer(done, [&]() -> absl::StatusOr<store::ScopeRuleResult> {
    store::ScopeRuleResult result;
    result.now = NowFor(options);
    auto it = rules_.find(scope);
    const bool live = it != rules_.end() && Live(it->second, result.now);
    if (!etag.empty() && (!live || it->second.etag != etag)) {
      return absl::AbortedError(absl::StrCat("etag: \"", etag, "\" is not the rule's etag"));
    }
    if (!live) return absl::NotFoundError("scope: has no runtime rule");
    rules_.erase(it);
    return result;
  });
}

void FakeHoldStore::CloseScopeRule(std::string scope, store::CallOptions options,
                                   store::Callback<store::ScopeRuleResult> done) {
  Answer(done, [&]() -> absl::StatusOr<store::ScopeRuleResult> {
    store::ScopeRuleResult result;
    result.now = NowFor(options);
    auto it = rules_.find(scope);
    store::ScopeRuleRecord rule;
    const bool live = it != rules_.end() && Live(it->second, result.now);
    if (live) rule = it->second;
    rule.scope = scope;
    rule.state = store::ScopeState::kClosed;
    rule.etag = absl::StrCat(++rule_version_);
    if (!live) rule_ids_[scope] = rule_version_;
    rules_[scope] = rule;
    result.rule = std::move(rule);
    return result;
  });
}

void FakeHoldStore::ListScopeRules(store::ScopeRuleCursor from, int page_size,
                                   store::CallOptions options,
                                   store::Callback<store::ListScopeRulesResult> done) {
  Answer(done, [&]() -> absl::StatusOr<store::ListScopeRulesResult> {
    // One partition (0): the scopes in byte order.
    store::ListScopeRulesResult result;
    result.now = NowFor(options);
    for (auto it = rules_.upper_bound(from.scope); it != rules_.end(); ++it) {
      if (!Live(it->second, result.now)) continue;
      if (static_cast<int>(result.rules.size()) == std::max(1, page_size)) {
        result.next = store::ScopeRuleCursor{0, result.rules.back().scope};
        break;
      }
      result.rules.push_back(it->second);
    }
    return result;
  });
}

void FakeHoldStore::Ping(store::CallOptions options, store::Callback<absl::Time> done) {
  Answer(done, [&] { return NowFor(options); });
}

}  // namespace orderhold::testing

namespace orderhold::testing {

void FakeHoldStore::ListScopeHolds(store::ListScopeHoldsArgs args, store::CallOptions options,
                                   store::Callback<store::ListScopeHoldsResult> done) {
  Answer(done, [&] {
    store::ListScopeHoldsResult result;
    result.now = NowFor(options);
    if (auto sold = sold_.find(args.scope); sold != sold_.end()) result.sold_units = sold->second;
    if (auto rule = rules_.find(args.scope);
        rule != rules_.end() && Live(rule->second, result.now)) {
      result.rule = rule->second;
    }
    // The scope's live holds in the index's order: expire, then the index key.
    std::vector<std::pair<store::ListCursor, store::ScopeHold>> live;
    for (const auto& [user, theirs] : holds_) {
      for (const auto& [order, held] : theirs) {
        if (held.details.scope != args.scope || held.expire <= result.now) continue;
        store::ScopeHold hold{user, order, held.expire, held.details.quantity};
        live.emplace_back(store::ListCursor{held.expire, ScopeKey(hold)}, std::move(hold));
      }
    }
    std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first.expire_time, a.first.order_id) <
             std::tie(b.first.expire_time, b.first.order_id);
    });
    for (const auto& [key, hold] : live) {
      ++result.scope_holds;
      result.scope_units += hold.quantity;
      if (!result.first_expire_time.has_value()) result.first_expire_time = hold.expire_time;
      if (args.after.has_value() && std::tie(key.expire_time, key.order_id) <=
                                        std::tie(args.after->expire_time, args.after->order_id)) {
        continue;
      }
      if (static_cast<int>(result.holds.size()) >= args.page_size) {
        if (args.page_size > 0) result.more = true;
        continue;
      }
      result.holds.push_back(hold);
      result.last_key = key.order_id;
    }
    return result;
  });
}

std::string FakeHoldStore::ScopeKey(const store::ScopeHold& hold) {
  return absl::StrCat(hold.quantity, ":", hold.user_id, std::string(1, '\0'), hold.order_id);
}

}  // namespace orderhold::testing
