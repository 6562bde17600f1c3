// FakeHoldStore: an in-memory HoldStore with the same semantics as the Lua scripts (outcome
// records with retention and per-user cap, limits at every level in holds and units, details,
// reaper registry and leases; no event log), on a
// FakeClock (or CallOptions::now). For domain unit tests and the contract suite, which runs the
// same cases against it and against RedisHoldStore. Callbacks run inline. Thread-safe.
#ifndef ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_
#define ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/common/clock.h"
#include "server/store/hold_store.h"
#include "server/store/partition_store.h"

namespace orderhold::testing {

class FakeHoldStore final : public store::HoldStore, public store::PartitionStore {
 public:
  static constexpr int kPartitions = 4;

  explicit FakeHoldStore(const Clock& clock, store::OutcomePolicy outcomes = {})
      : clock_(clock), outcomes_(outcomes) {}

  // The index partition of `user_id` (std::hash: fixed within one build).
  static int PartitionOf(const std::string& user_id);

  // Reap calls answered so far: peeks (max_users 0) and the others.
  int peeks() const {
    absl::MutexLock lock(&mu_);
    return peeks_;
  }
  int reap_calls() const {
    absl::MutexLock lock(&mu_);
    return reap_calls_;
  }

  // While set, every operation fails with this status (simulates Redis down).
  void SetFailure(absl::Status failure) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(failure);
  }

  void PlaceHold(store::PlaceHoldArgs args, store::CallOptions options,
                 store::Callback<store::PlaceHoldResult> done) override;
  void EndHold(std::string user_id, std::string order_id, store::HoldOutcome outcome,
               std::string payment_reference, store::CallOptions options,
               store::Callback<store::EndHoldResult> done) override;
  using HoldStore::EndHold;
  void ReturnUnits(store::ReturnUnitsArgs args, store::CallOptions options,
                   store::Callback<store::ReturnUnitsResult> done) override;
  using store::HoldStore::ListHolds;
  void ListHolds(store::ListHoldsArgs args, store::CallOptions options,
                 store::Callback<store::ListHoldsResult> done) override;
  void ExtendHold(store::ExtendHoldArgs args, store::CallOptions options,
                  store::Callback<store::ExtendHoldResult> done) override;
  void GetHold(std::string user_id, std::string order_id, store::CallOptions options,
               store::Callback<store::GetHoldResult> done) override;
  void ReleaseHolds(std::string user_id, std::string scope, store::CallOptions options,
                    store::Callback<store::ReleaseHoldsResult> done) override;
  // The index is every live hold: totals count them all, as the Redis store's index does.
  bool keeps_scope_index() const override { return true; }
  void ListScopeHolds(store::ListScopeHoldsArgs args, store::CallOptions options,
                      store::Callback<store::ListScopeHoldsResult> done) override;
  // A scope hold's index key, as the Redis store's (keys.h): the page cursor's order_id.
  static std::string ScopeKey(const store::ScopeHold& hold);
  void Reap(int partition, store::ReapArgs args, store::CallOptions options,
            store::Callback<store::ReapResult> done) override;
  // Keeps no data of earlier releases: nothing left to move.
  void MigrateStep(int partition, store::MigrateArgs args, store::CallOptions options,
                   store::Callback<store::MigrateResult> done) override;
  void Heartbeat(std::string replica_id, absl::Duration ttl, store::CallOptions options,
                 store::Callback<std::vector<std::string>> done) override;
  void ReleaseLease(int partition, std::string replica_id, store::CallOptions options,
                    store::Callback<bool> done) override;
  void Unregister(std::string replica_id, store::CallOptions options,
                  store::Callback<bool> done) override;
  int partition_count() const override { return kPartitions; }
  // Runtime scope rules, as scope_rule.lua and place_hold.lua keep and apply them (one list: the
  // cursor's partition is always 0; etags count up from 1).
  bool keeps_scope_rules() const override { return true; }
  void PutScopeRule(store::ScopeRuleRecord rule, store::CallOptions options,
                    store::Callback<store::ScopeRuleResult> done) override;
  void GetScopeRule(std::string scope, store::CallOptions options,
                    store::Callback<store::ScopeRuleResult> done) override;
  void DeleteScopeRule(std::string scope, std::string etag, store::CallOptions options,
                       store::Callback<store::ScopeRuleResult> done) override;
  void CloseScopeRule(std::string scope, store::CallOptions options,
                      store::Callback<store::ScopeRuleResult> done) override;
  void ListScopeRules(store::ScopeRuleCursor from, int page_size, store::CallOptions options,
                      store::Callback<store::ListScopeRulesResult> done) override;
  void Ping(store::CallOptions options, store::Callback<absl::Time> done) override;

 private:
  // Calls `done` with body() run under the lock, or with the configured failure.
  template <typename T, typename Body>
  void Answer(store::Callback<T>& done, Body body);
  // Truncated to ms, like Redis TIME in the scripts.
  absl::Time NowFor(const store::CallOptions& options) const;
  // Ends every due hold of `user` as EXPIRED; returns their expire times.
  std::vector<absl::Time> ExpireDue(const std::string& user, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Held {
    absl::Time expire;
    store::HoldDetails details;
    std::vector<std::string> request_ids;  // the last ones ExtendHold counted, oldest first
  };
  struct Ended {
    store::HoldEnd end;
    store::HoldDetails details;
    // kPaid: the rule id its purchase counted under (0: none), and its returns (request id,
    // units), oldest first, with their sum.
    int64_t rule_id = 0;
    std::vector<std::pair<std::string, int64_t>> returns = {};
    int64_t returned = 0;
  };
  void RecordEnd(const std::string& user, const std::string& order, store::HoldEnd end,
                 store::HoldDetails details, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How `order` has ended, as a script reads it before its first write (the prelude's
  // outcome_of): EXPIRED at its expiry when its hold is due (and not past the retention), else its
  // record within the retention; nullopt when live or unknown. Read before ExpireDue, whose trim
  // (--max_outcomes_per_user) may drop the very record the answer comes from.
  std::optional<Ended> PriorEnd(const std::string& user, const std::string& order, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PlaceHold's step of the scope's runtime rule: applies it to `args` (limits after the
  // request's own, totals, capacity; result.rule); its state at result.now (nullopt: no rule).
  // A limit class the rule does not have, or that does not list the caller: result.outcome
  // kClassDenied (and nullopt).
  std::optional<store::ScopeState> ApplyRule(store::PlaceHoldArgs& args,
                                             store::PlaceHoldResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the quantity is above a unit limit of the scope (then kNeverFits in `result`).
  static bool NeverFits(const store::PlaceHoldArgs& args, store::PlaceHoldResult& result);
  static bool Live(const store::ScopeRuleRecord& rule, absl::Time now);
  // A user's purchases in a scope under the rule created as `rule_id` (place_hold.lua's
  // "purchased"), and the payment that adds to them (end_hold's record_purchase).
  struct Bought {
    int64_t rule_id = 0;
    int64_t units = 0;
    int64_t holds = 0;
  };
  Bought BoughtIn(const std::string& user, const std::string& scope)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns the rule id the purchase counted under (0: the scope has no live rule).
  int64_t RecordPurchase(const std::string& user, const std::string& scope, int64_t quantity,
                         absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A return's purchase-cap level: the user's live holds in the scope plus its purchases.
  std::optional<store::PurchaseUsage> PurchaseUsageOf(const std::string& user,
                                                      const std::string& scope, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Ended* FindEnd(const std::string& user, const std::string& order, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  const store::OutcomePolicy outcomes_;
  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int peeks_ ABSL_GUARDED_BY(mu_) = 0;
  int reap_calls_ ABSL_GUARDED_BY(mu_) = 0;
  // user_id -> order_id -> expire_time and details
  std::map<std::string, std::map<std::string, Held>> holds_ ABSL_GUARDED_BY(mu_);
  // user_id -> order_id -> how it ended, and its details
  std::map<std::string, std::map<std::string, Ended>> ends_ ABSL_GUARDED_BY(mu_);
  // Units sold per scope: every scoped hold paid (the Redis store's "ss:" keys).
  std::map<std::string, int64_t> sold_ ABSL_GUARDED_BY(mu_);
  // Runtime scope rules by scope, and the last etag given.
  std::map<std::string, store::ScopeRuleRecord> rules_ ABSL_GUARDED_BY(mu_);
  int64_t rule_version_ ABSL_GUARDED_BY(mu_) = 0;
  // scope -> the version its live rule was created with; (user, scope) -> purchases.
  std::map<std::string, int64_t> rule_ids_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, Bought> bought_ ABSL_GUARDED_BY(mu_);
  // replica id -> alive until; partition -> (owner, lease until)
  std::map<std::string, absl::Time> replicas_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::pair<std::string, absl::Time>> leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_FAKE_HOLD_STORE_H_
