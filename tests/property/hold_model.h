// HoldModel: a reference model of OrderHold's hold semantics, in plain C++ with no store, no
// Redis and no domain code: live holds, outcome records with retention and a per-user cap, limits
// at the user and scope levels in holds and units, a scope's totals across users (one count per
// scope: its live holds and units, whoever holds them), a scope's capacity (its live units plus
// the units of its holds paid, which every Pay adds), lifetime caps and extension counts,
// expiry by a
// virtual clock (milliseconds, starting at 0). tests/property/hold_property_test.cc drives it and
// HoldService (over the fake and the Redis store) with the same random histories and compares
// every answer.
//
// Each operation mutates the model as the service would and returns the answer a caller sees,
// rendered as text by the Render* functions below (the harness renders the service's replies
// with the same functions, so two answers are equal exactly when their strings are). The rules
// come from the proto's comments and server/README.md; where the code has a documented edge (an
// order past its expiry reads EXPIRED even when --max_outcomes_per_user drops its fresh record),
// the model states it.
//
// Not thread-safe (a value type: copy it to look ahead).
#ifndef ORDERHOLD_TESTS_PROPERTY_HOLD_MODEL_H_
#define ORDERHOLD_TESTS_PROPERTY_HOLD_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace orderhold::property {

// Holds and units at one level; 0 = no limit in that unit.
struct ModelLimits {
  int64_t max_holds = 0;
  int64_t max_units = 0;
  friend bool operator==(const ModelLimits&, const ModelLimits&) = default;
};

// The server's configuration (flags and the scope-limits file), durations in ms.
struct ModelPolicy {
  int max_holds = 3;
  int64_t max_units = 0;
  int64_t default_ttl_ms = 2000;
  int64_t max_ttl_ms = 6000;
  int64_t lifetime_ms = 5000;  // --max_hold_lifetime
  int max_extensions = 0;
  int64_t retention_ms = 120000;  // --outcome_retention
  int max_records = 1000;         // --max_outcomes_per_user
  // Scope rules: scopes starting with kRulePrefix get `rule`, others `default_scope`.
  ModelLimits rule;
  ModelLimits default_scope;
  // Their totals across users (total_max_holds, total_max_units), each scope on its own.
  ModelLimits rule_total;
  ModelLimits default_total;
  // Their capacity (capacity_units: live units plus units sold), each scope on its own; 0 = none.
  int64_t rule_capacity = 0;
  int64_t default_capacity = 0;
  static constexpr const char* kRulePrefix = "event:";
};

// Outcome numbers as in orderhold.v1.HoldOutcome.
enum class ModelOutcome { kPaid = 1, kCancelled = 2, kExpired = 3 };
const char* OutcomeName(ModelOutcome outcome);

using ModelLabels = std::map<std::string, std::string>;

struct ModelHold {
  std::string order_id;
  int64_t expire = 0;
  std::string scope;
  int64_t quantity = 1;
  ModelLabels labels;
  ModelLimits scope_limits;  // as placed ({} when unscoped)
  int64_t place = 0;
  int64_t cap = 0;  // max_expire_time
  int64_t extensions = 0;
  std::deque<std::string> request_ids;  // the last 4 counted
};

struct PlaceCall {
  std::string user_id, order_id;
  std::optional<int64_t> ttl_ms;
  std::string scope;
  uint32_t quantity = 0;  // 0 = 1
  std::vector<std::pair<std::string, std::string>> labels;
  std::optional<ModelLimits> scope_limits;
  // PlaceHoldRequest.limit_class ("" = none) and the caller's one identity, typed.
  std::string limit_class = {};
  std::string identity = {};
};

// A limit class of a runtime rule (ScopeRule.classes): per-person limits and purchase caps of its
// own, for the principals it lists.
struct ModelClass {
  ModelLimits limits;
  ModelLimits purchases;
  std::set<std::string> principals;
};

// A scope's runtime rule (PutScopeRule) as the model keeps it; times in ms on the model's clock,
// 0 = unset. It replaces the file's rule for its exact scope (limits, totals, capacity) and adds a
// state and purchase caps (purchases: holds and units, held plus bought).
struct ModelRule {
  ModelLimits limits;
  ModelLimits totals;
  int64_t capacity = 0;
  ModelLimits purchases;
  int state = 1;  // 1 OPEN, 2 PAUSED, 3 CLOSED (orderhold.v1.ScopeState)
  int64_t open = 0;
  int64_t close = 0;
  std::map<std::string, ModelClass> classes = {};
};

struct ReturnCall {
  std::string user_id, order_id;
  int64_t units = 1;
  std::string request_id;
};

struct ExtendCall {
  std::string user_id, order_id;
  std::optional<int64_t> ttl_ms;
  std::string request_id;
};

// The per-user scope limits under `rule` when the request asked `asked`: it only tightens
// (--request_scope_limits=ceiling): per field the smaller, 0 = none on either side.
ModelLimits RuleLimitsFor(const ModelLimits& rule, const std::optional<ModelLimits>& asked);

class HoldModel {
 public:
  explicit HoldModel(ModelPolicy policy) : policy_(std::move(policy)) {}

  int64_t now() const { return now_; }
  const ModelPolicy& policy() const { return policy_; }
  void Advance(int64_t ms) { now_ += ms; }

  std::string PlaceHold(const PlaceCall& call);
  // Pay (pay = true) or CancelHold.
  std::string End(const std::string& user_id, const std::string& order_id, bool pay);
  std::string ExtendHold(const ExtendCall& call);
  std::string GetHold(const std::string& user_id, const std::string& order_id) const;
  std::string ReleaseHolds(const std::string& user_id, const std::string& scope);
  // ReturnUnits: `units` of a PAID hold back to its scope's sold count and to the buyer's
  // purchases under the rule it was paid under; idempotent by request_id; at most its quantity.
  std::string ReturnUnits(const ReturnCall& call);
  // PutScopeRule without an etag ("OK"), DeleteScopeRule ("OK" or NOT_FOUND).
  std::string PutRule(const std::string& scope, const ModelRule& rule);
  std::string DeleteRule(const std::string& scope);
  std::string ListHolds(const std::string& user_id, const std::string& scope) const;
  // One reaper pass over every user: the due holds ended as EXPIRED.
  std::string Reap();

  // Users that have or had a hold, for the final comparison.
  std::vector<std::string> Users() const;
  // (user, order) of every hold held or remembered, so generated calls can aim at them.
  std::vector<std::pair<std::string, std::string>> KnownOrders() const;
  // (user, order) of every PAID order remembered (ReturnUnits aims at them).
  std::vector<std::pair<std::string, std::string>> PaidOrders() const;
  // (user, order) of every live hold.
  std::vector<std::pair<std::string, std::string>> LiveOrders() const;
  // The earliest expiry still ahead (> now), if any: clock steps aim at it to hit the boundary.
  std::optional<int64_t> NextExpiry() const;

 private:
  struct Record {
    ModelOutcome outcome;
    int64_t end = 0;
    ModelHold hold;
    // kPaid: the id of the rule its purchase counted under (0: none), its returns (request id,
    // units) and their sum.
    int64_t rule_id = 0;
    std::vector<std::pair<std::string, int64_t>> returns = {};
    int64_t returned = 0;
  };
  struct User {
    std::map<std::string, ModelHold> live;  // may hold due ones until something ends them
    std::map<std::string, Record> records;  // outcome records, trimmed when one is added
  };
  // Ends the user's due holds (expire <= now) as EXPIRED; returns their expire times.
  std::vector<int64_t> ExpireDue(User& user);
  // Adds a record, then drops records past the retention and the oldest (end, then order id)
  // beyond max_records.
  void AddRecord(User& user, const std::string& order_id, Record record);
  // A record still within the retention, or nullptr.
  const Record* Visible(const User& user, const std::string& order_id) const;
  // How `order_id` has ended as a call sees it before its own cleanup: EXPIRED at its expiry when
  // its hold is due (whatever max_records then keeps of the fresh record), else its visible
  // record; nullopt when live or unknown. (The scripts read everything before their first write:
  // the prelude's outcome_of.)
  std::optional<Record> Ended(const User& user, const std::string& order_id) const;
  ModelLimits ScopeLimitsFor(const PlaceCall& call) const;
  // The totals and the capacity of `scope` ({}, 0 when unscoped).
  std::pair<ModelLimits, int64_t> AcrossUsersRuleFor(const std::string& scope) const;
  // The live holds of `scope` across users: how many, their units, the earliest expiry.
  struct AcrossUsers {
    int64_t holds = 0;
    int64_t units = 0;
    std::optional<int64_t> first;
  };
  AcrossUsers CountAcrossUsers(const std::string& scope) const;

  // The scope's runtime rule and the id it was created with, or nullptr.
  struct LiveRule {
    ModelRule rule;
    int64_t id = 0;
  };
  const LiveRule* RuleOf(const std::string& scope) const;
  // A PlaceHold under `rule`: its refusal by the rule's state, or "" when the rule is open.
  std::string StateRefusal(const ModelRule& rule) const;

  ModelPolicy policy_;
  int64_t now_ = 0;
  std::map<std::string, LiveRule> rules_;
  int64_t rule_ids_ = 0;
  // What each (user, scope) bought under the rule created as `id`.
  struct Bought {
    int64_t id = 0;
    int64_t units = 0;
    int64_t holds = 0;
  };
  std::map<std::pair<std::string, std::string>, Bought> bought_;
  // What PlaceHold checks a call against: the file's rule, or the scope's runtime rule over it.
  struct PlaceLimits {
    int64_t max_units = 0;  // the user's (--max_units)
    ModelLimits scope;
    ModelLimits total;
    int64_t capacity = 0;
    ModelLimits purchases;
    const LiveRule* rule = nullptr;
    // A quantity above a unit limit: it can never be granted (INVALID_ARGUMENT).
    bool NeverFits(int64_t quantity) const {
      for (int64_t limit :
           {max_units, scope.max_units, total.max_units, capacity, purchases.max_units}) {
        if (limit > 0 && quantity > limit) return true;
      }
      return false;
    }
  };
  PlaceLimits LimitsFor(const PlaceCall& call) const;
  // A PlaceHold's limit class (call.limit_class): false when the caller may not use it (the scope
  // has no runtime rule, the rule no such class, or the class does not list call.identity); else
  // true, with the class's per-person limits and purchase caps in `limits`.
  static bool ApplyClass(const PlaceCall& call, PlaceLimits& limits);
  // The user's live units, and its holds and units in `scope`, with the earliest expiries.
  struct UserUsage {
    int64_t units = 0;
    int64_t scope_holds = 0;
    int64_t scope_units = 0;
    std::optional<int64_t> first;
    std::optional<int64_t> scope_first;
  };
  static UserUsage UsageOf(const User& user, const std::string& scope);
  // What the user bought in `scope` under `rule` (none without a rule, or under an older one).
  Bought BoughtUnder(const std::string& user_id, const std::string& scope,
                     const LiveRule* rule) const;
  // The hold a PlaceCall creates now.
  ModelHold NewHold(const PlaceCall& call, int64_t quantity, ModelLabels labels,
                    const ModelLimits& scope_limits) const;
  std::map<std::string, User> users_;
  std::map<std::string, int64_t> sold_;  // units sold per scope: every scoped hold paid
};

// --- Answers as text, shared by the model and the harness. Times are ms on the model's clock.
std::string RenderHold(const ModelHold& hold);
std::string RenderHolds(const std::vector<ModelHold>& holds);
std::string RenderCode(const std::string& code);             // "INVALID_ARGUMENT", "NOT_FOUND", ...
std::string RenderEnded(ModelOutcome outcome, int64_t end);  // FAILED_PRECONDITION
// RESOURCE_EXHAUSTED, bits as the store's; retry_ms -1: no RetryInfo (sold out beyond expiries).
std::string RenderLimit(int violations, int64_t retry_ms);
// FAILED_PRECONDITION of a scope's state: SCOPE_CLOSED, or SCOPE_NOT_OPEN with the ms until it
// opens (-1: no RetryInfo).
std::string RenderScopeState(bool closed, int64_t retry_ms);
std::string RenderExtensionLimit();
std::string RenderPlaced(bool created, const ModelHold& hold, int active);
std::string RenderEndedNow(bool repeated, int64_t end, const ModelHold& hold);  // Pay/Cancel OK
std::string RenderExtended(bool extended, bool capped, std::optional<int64_t> left,
                           const ModelHold& hold);
std::string RenderGotLive(const ModelHold& hold);
std::string RenderGotEnded(ModelOutcome outcome, int64_t end, const ModelHold& hold);
std::string RenderList(const std::vector<ModelHold>& holds);
std::string RenderReaped(std::vector<int64_t> expire_times);
// ReturnUnits' answer: the request's units, the hold's returned in all, and the purchase-cap
// level (holds, units, caps) when the scope has a runtime rule.
std::string RenderReturned(bool repeated, int64_t units, int64_t total,
                           std::optional<std::pair<ModelLimits, ModelLimits>> usage);
// ReturnUnits' FAILED_PRECONDITION other than an ended hold's: "live", "too_many", or
// "exceeds <quantity> <returned>".
std::string RenderNotReturnable(const std::string& why);

// For RapidCheck's report of a failing case.
std::ostream& operator<<(std::ostream& os, const ModelPolicy& policy);

}  // namespace orderhold::property

#endif  // ORDERHOLD_TESTS_PROPERTY_HOLD_MODEL_H_
