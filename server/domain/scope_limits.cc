#include "server/domain/scope_limits.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace orderhold::domain {
absl::Status ValidateScopeLimits(absl::string_view field, const ScopeLimits& limits) {
  if (limits.max_holds < 0 || limits.max_holds > kMaxScopeHolds) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".max_holds: must be 0-", kMaxScopeHolds,
                                                   " (0: no limit), got ", limits.max_holds));
  }
  if (limits.max_units < 0 || limits.max_units > kMaxUnits) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".max_units: must be 0-", kMaxUnits,
                                                   " (0: no limit), got ", limits.max_units));
  }
  return absl::OkStatus();
}

absl::Status ValidateScopeTotals(absl::string_view field, const ScopeTotals& totals) {
  if (totals.max_holds < 0 || totals.max_holds > kMaxScopeTotal) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".total_max_holds: must be 0-",
                                                   kMaxScopeTotal, " (0: no total), got ",
                                                   totals.max_holds));
  }
  if (totals.max_units < 0 || totals.max_units > kMaxScopeTotal) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".total_max_units: must be 0-",
                                                   kMaxScopeTotal, " (0: no total), got ",
                                                   totals.max_units));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimitClassName(absl::string_view field, absl::string_view name) {
  const bool valid_bytes = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
  if (name.empty() || name.size() > kMaxLimitClassNameBytes || !valid_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": a class name must be 1-", kMaxLimitClassNameBytes,
        " bytes of [A-Za-z0-9_.-] (got \"", absl::CHexEscape(name.substr(0, 64)), "\")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCapacity(absl::string_view field, int64_t capacity_units) {
  if (capacity_units < 0 || capacity_units > kMaxScopeTotal) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".capacity_units: must be 0-",
                                                   kMaxScopeTotal, " (0: no capacity), got ",
                                                   capacity_units));
  }
  return absl::OkStatus();
}

namespace {

// The checks of ScopeRules::Create on the rules, in their given order.
absl::Status ValidateRules(const std::vector<ScopeRule>& rules) {
  absl::flat_hash_map<absl::string_view, size_t> first_rule;  // prefix -> index of its first rule
  first_rule.reserve(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    const ScopeRule& rule = rules[i];
    const std::string field = absl::StrCat("rules[", i, "]");
    if (rule.prefix.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".prefix: must not be empty (the default applies to the scopes no rule matches)"));
    }
    ORDERHOLD_RETURN_IF_ERROR(ValidateLocalId(absl::StrCat(field, ".prefix"), rule.prefix));
    if (auto [it, inserted] = first_rule.emplace(rule.prefix, i); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".prefix: \"", rule.prefix,
                                                     "\" is already the prefix of rules[",
                                                     it->second, "]"));
    }
    ORDERHOLD_RETURN_IF_ERROR(ValidateScopeLimits(field, rule.limits));
    ORDERHOLD_RETURN_IF_ERROR(ValidateScopeTotals(field, rule.totals));
    ORDERHOLD_RETURN_IF_ERROR(ValidateCapacity(field, rule.capacity_units));
  }
  return absl::OkStatus();
}

}  // namespace

ScopeRules::ScopeRules(ScopeLimits default_limits, std::vector<ScopeRule> rules,
                       ScopeTotals default_totals, int64_t default_capacity)
    : default_limits_(default_limits),
      default_totals_(default_totals),
      default_capacity_(default_capacity),
      rules_(std::move(rules)) {
  has_capacity_ = default_capacity_ > 0 ||
                  std::any_of(rules_.begin(), rules_.end(),
                              [](const ScopeRule& rule) { return rule.capacity_units > 0; });
  has_totals_ = has_capacity_ || default_totals_ != ScopeTotals{} ||
                std::any_of(rules_.begin(), rules_.end(),
                            [](const ScopeRule& rule) { return rule.totals != ScopeTotals{}; });
}

absl::StatusOr<ScopeRules> ScopeRules::Create(ScopeLimits default_limits,
                                              std::vector<ScopeRule> rules,
                                              ScopeTotals default_totals,
                                              int64_t default_capacity) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateScopeLimits("default", default_limits));
  ORDERHOLD_RETURN_IF_ERROR(ValidateScopeTotals("default", default_totals));
  ORDERHOLD_RETURN_IF_ERROR(ValidateCapacity("default", default_capacity));
  ORDERHOLD_RETURN_IF_ERROR(ValidateRules(rules));
  // Longest first, so the first match in Resolve is the longest. Stable: equal lengths keep the
  // caller's order (at most one of them matches a given scope; this is for readers of rules()).
  std::stable_sort(rules.begin(), rules.end(), [](const ScopeRule& a, const ScopeRule& b) {
    return a.prefix.size() > b.prefix.size();
  });
  return ScopeRules(default_limits, std::move(rules), default_totals, default_capacity);
}

ScopeLimits ScopeRules::Resolve(absl::string_view scope) const {
  for (const ScopeRule& rule : rules_) {
    if (absl::StartsWith(scope, rule.prefix)) return rule.limits;
  }
  return default_limits_;
}

ScopeRules::Resolved ScopeRules::ResolveAll(absl::string_view scope) const {
  for (const ScopeRule& rule : rules_) {
    if (absl::StartsWith(scope, rule.prefix)) {
      return {rule.limits, rule.totals, rule.capacity_units};
    }
  }
  return {default_limits_, default_totals_, default_capacity_};
}

ScopeLimits ApplyRequestLimits(const ScopeLimits& rule, const ScopeLimits& requested,
                               RequestScopeLimits mode) {
  if (mode == RequestScopeLimits::kReplace) return requested;
  auto tighter = [](auto from_rule, auto from_request) {
    if (from_request == 0) return from_rule;
    if (from_rule == 0) return from_request;
    return std::min(from_rule, from_request);
  };
  ScopeLimits limits = rule;
  limits.max_holds = tighter(rule.max_holds, requested.max_holds);
  limits.max_units = tighter(rule.max_units, requested.max_units);
  return limits;
}

}  // namespace orderhold::domain
