#include "tests/property/hold_model.h"

#include <algorithm>
#include <ostream>

#include "absl/strings/str_cat.h"

namespace orderhold::property {
namespace {

constexpr size_t kMaxRequestIds = 4;

bool ValidText(const std::string& s, size_t max_bytes) {
  if (s.empty() || s.size() > max_bytes) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;  // the generator sends ASCII only
  }
  return true;
}

bool ValidLabelKey(const std::string& key) {
  if (key.empty() || key.size() > 63) return false;
  for (char c : key) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool ValidTtl(const std::optional<int64_t>& ttl, const ModelPolicy& policy) {
  return !ttl.has_value() || (*ttl >= 1 && *ttl <= policy.max_ttl_ms);
}

// Live holds, earliest expiry first, ties by order id.
bool Earlier(const ModelHold& a, const ModelHold& b) {
  return a.expire != b.expire ? a.expire < b.expire : a.order_id < b.order_id;
}

}  // namespace

const char* OutcomeName(ModelOutcome outcome) {
  switch (outcome) {
    case ModelOutcome::kPaid:
      return "PAID";
    case ModelOutcome::kCancelled:
      return "CANCELLED";
    case ModelOutcome::kExpired:
      return "EXPIRED";
  }
  return "?";
}

std::vector<int64_t> HoldModel::ExpireDue(User& user) {
  std::vector<int64_t> expired;
  std::vector<ModelHold> due;
  for (auto it = user.live.begin(); it != user.live.end();) {
    if (it->second.expire <= now_) {
      due.push_back(std::move(it->second));
      it = user.live.erase(it);
    } else {
      ++it;
    }
  }
  for (ModelHold& hold : due) {
    expired.push_back(hold.expire);
    const std::string order = hold.order_id;
    const int64_t expire = hold.expire;
    AddRecord(user, order, Record{ModelOutcome::kExpired, expire, std::move(hold)});
  }
  return expired;
}

void HoldModel::AddRecord(User& user, const std::string& order_id, Record record) {
  user.records[order_id] = std::move(record);
  std::erase_if(user.records,
                [&](const auto& entry) { return entry.second.end <= now_ - policy_.retention_ms; });
  while (static_cast<int>(user.records.size()) > policy_.max_records) {
    auto oldest = user.records.begin();
    for (auto it = user.records.begin(); it != user.records.end(); ++it) {
      if (it->second.end < oldest->second.end) oldest = it;  // ties: the map's first (order id)
    }
    user.records.erase(oldest);
  }
}

const HoldModel::Record* HoldModel::Visible(const User& user, const std::string& order_id) const {
  auto it = user.records.find(order_id);
  if (it == user.records.end() || it->second.end <= now_ - policy_.retention_ms) return nullptr;
  return &it->second;
}

std::optional<HoldModel::Record> HoldModel::Ended(const User& user,
                                                  const std::string& order_id) const {
  if (auto it = user.live.find(order_id); it != user.live.end()) {
    const ModelHold& hold = it->second;
    if (hold.expire > now_ || hold.expire <= now_ - policy_.retention_ms) return std::nullopt;
    return Record{ModelOutcome::kExpired, hold.expire, hold};
  }
  if (const Record* record = Visible(user, order_id)) return *record;
  return std::nullopt;
}

const HoldModel::LiveRule* HoldModel::RuleOf(const std::string& scope) const {
  if (scope.empty()) return nullptr;
  auto it = rules_.find(scope);
  return it == rules_.end() ? nullptr : &it->second;
}

std::string HoldModel::StateRefusal(const ModelRule& rule) const {
  if (rule.state == 3 || (rule.close > 0 && now_ >= rule.close)) {
    return RenderScopeState(true, -1);
  }
  if (rule.open > 0 && now_ < rule.open) return RenderScopeState(false, rule.open - now_);
  if (rule.state == 2 && rule.open == 0) return RenderScopeState(false, -1);
  return "";
}

std::string HoldModel::PutRule(const std::string& scope, const ModelRule& rule) {
  auto it = rules_.find(scope);
  if (it == rules_.end()) {
    rules_[scope] = LiveRule{rule, ++rule_ids_};
  } else {
    it->second.rule = rule;  // an edit keeps the purchases
  }
  return "OK";
}

std::string HoldModel::DeleteRule(const std::string& scope) {
  return rules_.erase(scope) > 0 ? "OK" : RenderCode("NOT_FOUND");
}

ModelLimits HoldModel::ScopeLimitsFor(const PlaceCall& call) const {
  if (call.scope.empty()) return {};
  const ModelLimits rule =
      call.scope.starts_with(ModelPolicy::kRulePrefix) ? policy_.rule : policy_.default_scope;
  return RuleLimitsFor(rule, call.scope_limits);
}

ModelLimits RuleLimitsFor(const ModelLimits& rule, const std::optional<ModelLimits>& asked) {
  if (!asked.has_value()) return rule;
  const ModelLimits* scope_limits = &*asked;
  // The request's limits only tighten the operator's (--request_scope_limits=ceiling): per field
  // the smaller, where 0 means "none" on either side.
  auto tighter = [](int64_t from_rule, int64_t from_request) {
    if (from_request == 0) return from_rule;
    if (from_rule == 0) return from_request;
    return from_rule < from_request ? from_rule : from_request;
  };
  return ModelLimits{tighter(rule.max_holds, scope_limits->max_holds),
                     tighter(rule.max_units, scope_limits->max_units)};
}

// The call's labels (a key sent twice: the last wins), or nullopt when a key is malformed.
static std::optional<ModelLabels> LabelsOf(const PlaceCall& call) {
  ModelLabels labels;
  for (const auto& [key, value] : call.labels) {
    if (!ValidLabelKey(key)) return std::nullopt;
    labels[key] = value;
  }
  return labels;
}

std::pair<ModelLimits, int64_t> HoldModel::AcrossUsersRuleFor(const std::string& scope) const {
  if (scope.empty()) return {ModelLimits{}, 0};
  return scope.starts_with(ModelPolicy::kRulePrefix)
             ? std::pair(policy_.rule_total, policy_.rule_capacity)
             : std::pair(policy_.default_total, policy_.default_capacity);
}

HoldModel::AcrossUsers HoldModel::CountAcrossUsers(const std::string& scope) const {
  AcrossUsers across;
  if (scope.empty()) return across;
  for (const auto& [id, other] : users_) {
    for (const auto& [order, held] : other.live) {
      if (held.scope != scope || held.expire <= now_) continue;
      ++across.holds;
      across.units += held.quantity;
      across.first = std::min(across.first.value_or(held.expire), held.expire);
    }
  }
  return across;
}

HoldModel::PlaceLimits HoldModel::LimitsFor(const PlaceCall& call) const {
  PlaceLimits limits;
  limits.max_units = policy_.max_units;
  limits.scope = ScopeLimitsFor(call);
  std::tie(limits.total, limits.capacity) = AcrossUsersRuleFor(call.scope);
  // The scope's runtime rule wins over the file's; the request still only tightens.
  limits.rule = RuleOf(call.scope);
  if (limits.rule != nullptr) {
    limits.scope = RuleLimitsFor(limits.rule->rule.limits, call.scope_limits);
    limits.total = limits.rule->rule.totals;
    limits.capacity = limits.rule->rule.capacity;
    limits.purchases = limits.rule->rule.purchases;
  }
  return limits;
}

bool HoldModel::ApplyClass(const PlaceCall& call, PlaceLimits& limits) {
  if (call.limit_class.empty()) return true;
  if (limits.rule == nullptr) return false;
  const auto it = limits.rule->rule.classes.find(call.limit_class);
  if (it == limits.rule->rule.classes.end() || !it->second.principals.contains(call.identity)) {
    return false;
  }
  limits.scope = RuleLimitsFor(it->second.limits, call.scope_limits);
  limits.purchases = it->second.purchases;
  return true;
}

HoldModel::UserUsage HoldModel::UsageOf(const User& user, const std::string& scope) {
  UserUsage usage;
  for (const auto& [order, held] : user.live) {
    usage.units += held.quantity;
    usage.first = std::min(usage.first.value_or(held.expire), held.expire);
    if (!scope.empty() && held.scope == scope) {
      ++usage.scope_holds;
      usage.scope_units += held.quantity;
      usage.scope_first = std::min(usage.scope_first.value_or(held.expire), held.expire);
    }
  }
  return usage;
}

HoldModel::Bought HoldModel::BoughtUnder(const std::string& user_id, const std::string& scope,
                                         const LiveRule* rule) const {
  if (rule == nullptr) return Bought{};
  auto it = bought_.find({user_id, scope});
  return it != bought_.end() && it->second.id == rule->id ? it->second : Bought{};
}

ModelHold HoldModel::NewHold(const PlaceCall& call, int64_t quantity, ModelLabels labels,
                             const ModelLimits& scope_limits) const {
  ModelHold hold;
  hold.order_id = call.order_id;
  hold.expire = now_ + call.ttl_ms.value_or(policy_.default_ttl_ms);
  hold.scope = call.scope;
  hold.quantity = quantity;
  hold.labels = std::move(labels);
  hold.scope_limits = scope_limits;
  hold.place = now_;
  hold.cap = std::max(hold.expire, now_ + policy_.lifetime_ms);
  return hold;
}

std::string HoldModel::PlaceHold(const PlaceCall& call) {
  // Validation first: nothing is touched on a malformed call.
  if (!ValidText(call.user_id, 128) || !ValidText(call.order_id, 128) ||
      !ValidTtl(call.ttl_ms, policy_) || (!call.scope.empty() && !ValidText(call.scope, 128)) ||
      (call.scope_limits.has_value() && call.scope.empty()) ||
      (!call.limit_class.empty() && call.scope.empty())) {
    return RenderCode("INVALID_ARGUMENT");
  }
  std::optional<ModelLabels> labels = LabelsOf(call);
  if (!labels.has_value()) return RenderCode("INVALID_ARGUMENT");
  const int64_t quantity = call.quantity == 0 ? 1 : call.quantity;
  PlaceLimits limits = LimitsFor(call);
  // The user's unit cap is checked before the store; a class, then the scope's, in its step.
  if (limits.max_units > 0 && quantity > limits.max_units) return RenderCode("INVALID_ARGUMENT");
  if (!ApplyClass(call, limits)) return RenderCode("PERMISSION_DENIED");
  if (limits.NeverFits(quantity)) return RenderCode("INVALID_ARGUMENT");
  User& user = users_[call.user_id];
  // How the order ended is read before this call's cleanup ends the user's due holds (and may
  // drop records beyond max_records): see Ended().
  const std::optional<Record> ended = Ended(user, call.order_id);
  ExpireDue(user);
  if (auto it = user.live.find(call.order_id); it != user.live.end()) {
    const ModelHold& held = it->second;
    if (held.scope != call.scope || held.quantity != quantity || held.labels != *labels) {
      return RenderCode("ALREADY_EXISTS");
    }
    return RenderPlaced(false, held, static_cast<int>(user.live.size()));
  }
  if (ended.has_value()) return RenderEnded(ended->outcome, ended->end);
  if (limits.rule != nullptr) {
    if (std::string refused = StateRefusal(limits.rule->rule); !refused.empty()) return refused;
  }
  const auto [user_units, scope_holds, scope_units, user_first, scope_first] =
      UsageOf(user, call.scope);
  int violations = 0;
  if (static_cast<int64_t>(user.live.size()) + 1 > policy_.max_holds) violations |= 1;
  if (policy_.max_units > 0 && user_units + quantity > policy_.max_units) violations |= 2;
  if (!call.scope.empty()) {
    if (limits.scope.max_holds > 0 && scope_holds + 1 > limits.scope.max_holds) violations |= 4;
    if (limits.scope.max_units > 0 && scope_units + quantity > limits.scope.max_units) {
      violations |= 8;
    }
  }
  // The scope across users: its totals, and its capacity (live units plus the units sold).
  const AcrossUsers across = CountAcrossUsers(call.scope);
  const int64_t sold = limits.capacity > 0 ? sold_[call.scope] : 0;
  if (limits.total.max_holds > 0 && across.holds + 1 > limits.total.max_holds) violations |= 16;
  if (limits.total.max_units > 0 && across.units + quantity > limits.total.max_units)
    violations |= 32;
  if (limits.capacity > 0 && across.units + sold + quantity > limits.capacity) violations |= 64;
  // A runtime rule's purchase caps: the user's live holds in the scope plus what it bought there.
  const Bought bought = BoughtUnder(call.user_id, call.scope, limits.rule);
  if (limits.purchases.max_holds > 0 &&
      scope_holds + bought.holds + 1 > limits.purchases.max_holds) {
    violations |= 128;
  }
  if (limits.purchases.max_units > 0 &&
      scope_units + bought.units + quantity > limits.purchases.max_units) {
    violations |= 256;
  }
  if (violations != 0) {
    // The earliest a retry can pass: every exceeded level has had its earliest hold expire.
    int64_t retry_at = 0;
    if (violations & 3) retry_at = user_first.value_or(now_);
    if (violations & (12 | 384)) retry_at = std::max(retry_at, scope_first.value_or(now_));
    if (violations & 112) retry_at = std::max(retry_at, across.first.value_or(now_));
    // Sold out, or bought up, beyond what expiries can free: no retry time.
    if (((violations & 64) && sold + quantity > limits.capacity) ||
        ((violations & 256) && bought.units + quantity > limits.purchases.max_units) ||
        ((violations & 128) && bought.holds + 1 > limits.purchases.max_holds)) {
      return RenderLimit(violations, -1);
    }
    return RenderLimit(violations, std::max<int64_t>(0, retry_at - now_));
  }
  // A record past the retention (invisible) is replaced by the new hold's when it ends.
  user.records.erase(call.order_id);
  const ModelHold& placed = user.live[call.order_id] =
      NewHold(call, quantity, *std::move(labels), limits.scope);
  return RenderPlaced(true, placed, static_cast<int>(user.live.size()));
}

std::string HoldModel::End(const std::string& user_id, const std::string& order_id, bool pay) {
  if (!ValidText(user_id, 128) || !ValidText(order_id, 128)) {
    return RenderCode("INVALID_ARGUMENT");
  }
  const ModelOutcome wanted = pay ? ModelOutcome::kPaid : ModelOutcome::kCancelled;
  User& user = users_[user_id];
  if (auto it = user.live.find(order_id); it != user.live.end() && it->second.expire > now_) {
    ModelHold hold = std::move(it->second);
    user.live.erase(it);
    int64_t rule_id = 0;
    // A payment moves a scoped hold's units to its scope's sold count.
    if (pay && !hold.scope.empty()) {
      sold_[hold.scope] += hold.quantity;
      // And to the buyer's purchases under the scope's runtime rule.
      if (const LiveRule* rule = RuleOf(hold.scope); rule != nullptr) {
        Bought& bought = bought_[{user_id, hold.scope}];
        if (bought.id != rule->id) bought = Bought{rule->id, 0, 0};
        bought.units += hold.quantity;
        bought.holds += 1;
        rule_id = rule->id;
      }
    }
    const std::string answer = RenderEndedNow(false, now_, hold);
    AddRecord(user, order_id, Record{wanted, now_, std::move(hold), rule_id});
    return answer;
  }
  // Not live: the user's due holds end as EXPIRED (lazy cleanup); the answer is how the order
  // stood before that cleanup.
  const std::optional<Record> found = Ended(user, order_id);
  ExpireDue(user);
  if (!found.has_value()) return RenderCode("NOT_FOUND");
  if (found->outcome != wanted) return RenderEnded(found->outcome, found->end);
  return RenderEndedNow(true, found->end, found->hold);
}

std::string HoldModel::ReturnUnits(const ReturnCall& call) {
  if (!ValidText(call.user_id, 128) || !ValidText(call.order_id, 128) || call.units < 1 ||
      call.request_id.empty() || !ValidText(call.request_id, 128)) {
    return RenderCode("INVALID_ARGUMENT");
  }
  User& user = users_[call.user_id];
  if (auto it = user.live.find(call.order_id); it != user.live.end() && it->second.expire > now_) {
    return RenderNotReturnable("live");
  }
  const std::optional<Record> found = Ended(user, call.order_id);  // no cleanup: a read first
  if (!found.has_value()) return RenderCode("NOT_FOUND");
  if (found->outcome != ModelOutcome::kPaid) return RenderEnded(found->outcome, found->end);
  Record& record = user.records.at(call.order_id);
  const std::string& scope = record.hold.scope;
  const LiveRule* rule = scope.empty() ? nullptr : RuleOf(scope);
  auto usage = [&]() -> std::optional<std::pair<ModelLimits, ModelLimits>> {
    if (rule == nullptr) return std::nullopt;
    const Bought bought = BoughtUnder(call.user_id, scope, rule);
    ModelLimits level{bought.holds, bought.units};  // plus the live holds in the scope
    for (const auto& [order, held] : user.live) {
      if (held.expire > now_ && held.scope == scope) {
        ++level.max_holds;
        level.max_units += held.quantity;
      }
    }
    return std::pair{level, rule->rule.purchases};
  };
  for (const auto& [request, units] : record.returns) {
    if (request == call.request_id) return RenderReturned(true, units, record.returned, usage());
  }
  if (record.returned + call.units > record.hold.quantity) {
    return RenderNotReturnable(
        absl::StrCat("exceeds ", record.hold.quantity, " ", record.returned));
  }
  if (record.returns.size() >= 100) return RenderNotReturnable("too_many");
  record.returns.emplace_back(call.request_id, call.units);
  record.returned += call.units;
  if (!scope.empty()) {
    sold_[scope] -= call.units;
    if (rule != nullptr && record.rule_id == rule->id) {
      Bought& bought = bought_[{call.user_id, scope}];
      if (bought.id == rule->id) {
        bought.units = std::max<int64_t>(0, bought.units - call.units);
        if (record.returned == record.hold.quantity) {
          bought.holds = std::max<int64_t>(0, bought.holds - 1);
        }
      }
    }
  }
  return RenderReturned(false, call.units, record.returned, usage());
}

std::string HoldModel::ExtendHold(const ExtendCall& call) {
  if (!ValidText(call.user_id, 128) || !ValidText(call.order_id, 128) ||
      !ValidTtl(call.ttl_ms, policy_) ||
      (!call.request_id.empty() && !ValidText(call.request_id, 64))) {
    return RenderCode("INVALID_ARGUMENT");
  }
  User& user = users_[call.user_id];
  if (auto it = user.live.find(call.order_id); it != user.live.end() && it->second.expire > now_) {
    ModelHold& hold = it->second;
    const int64_t wanted = now_ + call.ttl_ms.value_or(policy_.default_ttl_ms);
    const int64_t moved_to = std::max(hold.expire, std::min(wanted, hold.cap));
    const bool capped = wanted > hold.cap;
    const bool replay =
        !call.request_id.empty() && std::find(hold.request_ids.begin(), hold.request_ids.end(),
                                              call.request_id) != hold.request_ids.end();
    bool extended = replay;  // a replay answers as the call it repeats did, changing nothing
    if (!replay && moved_to > hold.expire) {
      if (policy_.max_extensions > 0 && hold.extensions >= policy_.max_extensions) {
        return RenderExtensionLimit();
      }
      ++hold.extensions;
      if (!call.request_id.empty()) {
        hold.request_ids.push_back(call.request_id);
        if (hold.request_ids.size() > kMaxRequestIds) hold.request_ids.pop_front();
      }
      hold.expire = moved_to;
      extended = true;
    }
    std::optional<int64_t> left;
    if (policy_.max_extensions > 0) {
      left = std::max<int64_t>(0, policy_.max_extensions - hold.extensions);
    }
    return RenderExtended(extended, capped, left, hold);
  }
  const std::optional<Record> ended = Ended(user, call.order_id);
  ExpireDue(user);
  if (!ended.has_value()) return RenderCode("NOT_FOUND");
  return RenderEnded(ended->outcome, ended->end);
}

std::string HoldModel::GetHold(const std::string& user_id, const std::string& order_id) const {
  if (!ValidText(user_id, 128) || !ValidText(order_id, 128)) {
    return RenderCode("INVALID_ARGUMENT");
  }
  auto user = users_.find(user_id);
  if (user == users_.end()) return RenderCode("NOT_FOUND");
  if (auto it = user->second.live.find(order_id); it != user->second.live.end()) {
    const ModelHold& hold = it->second;
    if (hold.expire > now_) return RenderGotLive(hold);
    // Past its expiry, not ended yet: EXPIRED at it (unless that is past the retention).
    if (hold.expire > now_ - policy_.retention_ms) {
      return RenderGotEnded(ModelOutcome::kExpired, hold.expire, hold);
    }
    return RenderCode("NOT_FOUND");
  }
  if (const Record* record = Visible(user->second, order_id)) {
    return RenderGotEnded(record->outcome, record->end, record->hold);
  }
  return RenderCode("NOT_FOUND");
}

std::string HoldModel::ReleaseHolds(const std::string& user_id, const std::string& scope) {
  if (!ValidText(user_id, 128) || (!scope.empty() && !ValidText(scope, 128))) {
    return RenderCode("INVALID_ARGUMENT");
  }
  User& user = users_[user_id];
  ExpireDue(user);
  std::vector<ModelHold> released;
  for (auto it = user.live.begin(); it != user.live.end();) {
    if (scope.empty() || it->second.scope == scope) {
      released.push_back(std::move(it->second));
      it = user.live.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(released.begin(), released.end(), Earlier);
  for (const ModelHold& hold : released) {
    AddRecord(user, hold.order_id, Record{ModelOutcome::kCancelled, now_, hold});
  }
  return RenderList(released);
}

std::string HoldModel::ListHolds(const std::string& user_id, const std::string& scope) const {
  if (!ValidText(user_id, 128) || (!scope.empty() && !ValidText(scope, 128))) {
    return RenderCode("INVALID_ARGUMENT");
  }
  std::vector<ModelHold> holds;
  if (auto user = users_.find(user_id); user != users_.end()) {
    for (const auto& [order, hold] : user->second.live) {
      if (hold.expire > now_ && (scope.empty() || hold.scope == scope)) holds.push_back(hold);
    }
  }
  std::sort(holds.begin(), holds.end(), Earlier);
  return RenderList(holds);
}

std::string HoldModel::Reap() {
  std::vector<int64_t> reaped;
  for (auto& [id, user] : users_) {
    for (int64_t expire : ExpireDue(user)) reaped.push_back(expire);
  }
  return RenderReaped(std::move(reaped));
}

std::vector<std::string> HoldModel::Users() const {
  std::vector<std::string> ids;
  for (const auto& [id, user] : users_) ids.push_back(id);
  return ids;
}

std::vector<std::pair<std::string, std::string>> HoldModel::KnownOrders() const {
  std::vector<std::pair<std::string, std::string>> known;
  for (const auto& [id, user] : users_) {
    for (const auto& [order, hold] : user.live) known.emplace_back(id, order);
    for (const auto& [order, record] : user.records) known.emplace_back(id, order);
  }
  return known;
}

std::vector<std::pair<std::string, std::string>> HoldModel::PaidOrders() const {
  std::vector<std::pair<std::string, std::string>> paid;
  for (const auto& [id, user] : users_) {
    for (const auto& [order, record] : user.records) {
      if (record.outcome == ModelOutcome::kPaid) paid.emplace_back(id, order);
    }
  }
  return paid;
}

std::vector<std::pair<std::string, std::string>> HoldModel::LiveOrders() const {
  std::vector<std::pair<std::string, std::string>> live;
  for (const auto& [id, user] : users_) {
    for (const auto& [order, hold] : user.live) {
      if (hold.expire > now_) live.emplace_back(id, order);
    }
  }
  return live;
}

std::optional<int64_t> HoldModel::NextExpiry() const {
  std::optional<int64_t> next;
  for (const auto& [id, user] : users_) {
    for (const auto& [order, hold] : user.live) {
      if (hold.expire > now_) next = std::min(next.value_or(hold.expire), hold.expire);
    }
  }
  return next;
}

// --- Rendering.

std::string RenderHold(const ModelHold& h) {
  std::string out =
      absl::StrCat(h.order_id, "{expire=", h.expire, " cap=", h.cap, " ext=", h.extensions,
                   " place=", h.place, " scope=", h.scope, " qty=", h.quantity);
  if (!h.scope.empty()) {
    absl::StrAppend(&out, " limits=", h.scope_limits.max_holds, "/", h.scope_limits.max_units);
  }
  for (const auto& [key, value] : h.labels) absl::StrAppend(&out, " ", key, ":", value);
  return absl::StrCat(out, "}");
}

std::string RenderHolds(const std::vector<ModelHold>& holds) {
  std::string out = "[";
  for (const ModelHold& hold : holds) absl::StrAppend(&out, RenderHold(hold), " ");
  return absl::StrCat(out, "]");
}

std::string RenderCode(const std::string& code) { return code; }

std::string RenderEnded(ModelOutcome outcome, int64_t end) {
  return absl::StrCat("FAILED_PRECONDITION ", OutcomeName(outcome), " at ", end);
}

std::string RenderLimit(int violations, int64_t retry_ms) {
  return absl::StrCat("RESOURCE_EXHAUSTED violations=", violations, " retry=", retry_ms);
}

std::string RenderScopeState(bool closed, int64_t retry_ms) {
  return closed ? "FAILED_PRECONDITION SCOPE_CLOSED"
                : absl::StrCat("FAILED_PRECONDITION SCOPE_NOT_OPEN retry=", retry_ms);
}

std::string RenderExtensionLimit() { return "RESOURCE_EXHAUSTED HOLD_EXTENSION_LIMIT"; }

std::string RenderPlaced(bool created, const ModelHold& hold, int active) {
  return absl::StrCat("OK created=", created, " ", RenderHold(hold), " active=", active);
}

std::string RenderEndedNow(bool repeated, int64_t end, const ModelHold& hold) {
  return absl::StrCat("OK repeated=", repeated, " at=", end, " ", RenderHold(hold));
}

std::string RenderExtended(bool extended, bool capped, std::optional<int64_t> left,
                           const ModelHold& hold) {
  return absl::StrCat("OK extended=", extended, " capped=", capped,
                      " left=", left.has_value() ? absl::StrCat(*left) : "unset", " ",
                      RenderHold(hold));
}

std::string RenderReturned(bool repeated, int64_t units, int64_t total,
                           std::optional<std::pair<ModelLimits, ModelLimits>> usage) {
  std::string out = absl::StrCat("OK returned repeated=", repeated, " units=", units,
                                 " total=", total, " usage=");
  if (!usage.has_value()) return out + "none";
  return absl::StrCat(out, usage->first.max_holds, "/", usage->first.max_units, " of ",
                      usage->second.max_holds, "/", usage->second.max_units);
}

std::string RenderNotReturnable(const std::string& why) {
  return "FAILED_PRECONDITION not returnable: " + why;
}

std::string RenderGotLive(const ModelHold& hold) {
  return absl::StrCat("OK live ", RenderHold(hold));
}

std::string RenderGotEnded(ModelOutcome outcome, int64_t end, const ModelHold& hold) {
  return absl::StrCat("OK ", OutcomeName(outcome), " at ", end, " ", RenderHold(hold));
}

std::string RenderList(const std::vector<ModelHold>& holds) {
  return absl::StrCat("OK ", RenderHolds(holds));
}

std::string RenderReaped(std::vector<int64_t> expire_times) {
  std::sort(expire_times.begin(), expire_times.end());
  std::string out = "reaped";
  for (int64_t t : expire_times) absl::StrAppend(&out, " ", t);
  return out;
}

std::ostream& operator<<(std::ostream& os, const ModelPolicy& p) {
  return os << "max_holds=" << p.max_holds << " max_units=" << p.max_units
            << " lifetime=" << p.lifetime_ms << " max_extensions=" << p.max_extensions
            << " retention=" << p.retention_ms << " max_records=" << p.max_records
            << " rule=" << p.rule.max_holds << "/" << p.rule.max_units
            << " default_scope=" << p.default_scope.max_holds << "/" << p.default_scope.max_units
            << " rule_total=" << p.rule_total.max_holds << "/" << p.rule_total.max_units
            << " default_total=" << p.default_total.max_holds << "/" << p.default_total.max_units
            << " capacity=" << p.rule_capacity << "/" << p.default_capacity;
}

}  // namespace orderhold::property
