// Scope limits: how many holds, and how many units, one user may have live in one scope (e.g.
// "event:E42") at once, when the request brings no limits of its own. The server's rules come
// from the --scope_limits file (server/limits_file.h reads it); here they are plain values and the
// choice of the rule for a scope: the longest matching prefix, else the default.
// Domain vocabulary: no I/O, no protobuf.
#ifndef ORDERHOLD_SERVER_DOMAIN_SCOPE_LIMITS_H_
#define ORDERHOLD_SERVER_DOMAIN_SCOPE_LIMITS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/domain/hold.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// The limits of one (user, scope) level: max_holds (live holds of the user in the scope, at most;
// 0-kMaxScopeHolds) and max_units (units, the sum of those holds' quantities; 0-kMaxUnits). 0 means
// no limit in that unit; the other one may still limit. The store's type, so that what the domain
// resolves is what the store checks and records (store::HoldDetails::scope_limits).
using ScopeLimits = store::LevelLimits;

// Upper bound of ScopeLimits::max_holds: the bound of the user level (--max_holds), which keeps
// every script's work per call small.
inline constexpr int64_t kMaxScopeHolds = kMaxHoldsLimit;

// The totals of one scope across every user (the limits file's total_max_holds, total_max_units):
// max_holds is the most live holds of the scope, whoever holds them, max_units the most units
// (the sum of their quantities); 0 = none in that unit. An operator's rule only: a request
// cannot carry or change them. A prefix rule's totals apply to each matching scope separately.
using ScopeTotals = store::LevelLimits;
// Upper bound of both ScopeTotals fields (a count of holds or of units in one scope).
inline constexpr int64_t kMaxScopeTotal = 1000000000;

// One rule: the scopes that start with `prefix` (bytes, case-sensitive) get `limits` (per user),
// `totals` (across users) and `capacity_units`, unless a longer prefix also matches.
struct ScopeRule {
  std::string prefix;
  ScopeLimits limits;
  ScopeTotals totals = {};
  // The scope's capacity in units (an event's tickets): its live holds' units plus the units
  // sold (paid holds') at most, 0-kMaxScopeTotal; 0 = none. Each matching scope on its own, as
  // totals.
  int64_t capacity_units = 0;
  friend bool operator==(const ScopeRule&, const ScopeRule&) = default;
};

// A limit class name (ScopeRule.classes' keys, PlaceHoldRequest.limit_class) is 1 to this many
// bytes of [A-Za-z0-9_.-].
inline constexpr size_t kMaxLimitClassNameBytes = 64;

// INVALID_ARGUMENT "<field>: a class name must be 1-64 bytes of [A-Za-z0-9_.-] (got ...)" unless
// `name` is a limit class name.
absl::Status ValidateLimitClassName(absl::string_view field, absl::string_view name);

// INVALID_ARGUMENT "<field>.capacity_units: must be 0-1000000000 (0: no capacity), got N" when
// out of bounds; OK otherwise.
absl::Status ValidateCapacity(absl::string_view field, int64_t capacity_units);

// INVALID_ARGUMENT "<field>.total_max_holds: must be 0-1000000000 (0: no total), got N" (or
// .total_max_units) when `totals` are out of bounds; OK otherwise.
absl::Status ValidateScopeTotals(absl::string_view field, const ScopeTotals& totals);

// The server's scope rules: a default and prefix rules, validated. Immutable once built, so any
// number of threads may call Resolve at once; replacing the rules (a reload) means building a new
// ScopeRules and swapping which one the caller reads, which is the caller's business.
// INVALID_ARGUMENT "<field>.max_holds: must be 0-10000 (0: no limit), got N" (or .max_units) when
// `limits` are out of bounds; OK otherwise. For the file's rules and for a request's scope_limits.
absl::Status ValidateScopeLimits(absl::string_view field, const ScopeLimits& limits);

// The limits a placement is checked against when the request carries `requested` and the
// operator's rule for the scope is `rule`: with kCeiling, per field the smaller non-zero of the
// two (a request's 0 takes nothing from the request, so {} and {0, 0} leave the rule as it is,
// and a rule's 0 lets the request set that field); with kReplace, `requested` as it is.
ScopeLimits ApplyRequestLimits(const ScopeLimits& rule, const ScopeLimits& requested,
                               RequestScopeLimits mode);

class ScopeRules {
 public:
  // No rules and a default of {0, 0}: every scope is unlimited (the server without a file).
  ScopeRules() = default;

  // Rules for `default_limits` and `rules` (in the order of the file; error messages count them
  // from 0). INVALID_ARGUMENT naming the first bad field, as "default.max_units: ..." or
  // "rules[2].prefix: ...", when:
  //   - a prefix is empty ("" would match every scope: that is what the default is for);
  //   - a prefix is not valid scope text: 1-128 bytes of UTF-8 without control characters
  //     (ValidateLocalId), since a longer or invalid prefix could never match a scope;
  //   - a prefix appears twice (the message names the earlier rule);
  //   - a max_holds is outside 0-kMaxScopeHolds, a max_units outside 0-kMaxUnits;
  //   - a total_max_holds, total_max_units or capacity_units is outside 0-kMaxScopeTotal.
  // `default_totals`, `default_capacity`: the totals and capacity of each scope no rule matches.
  static absl::StatusOr<ScopeRules> Create(ScopeLimits default_limits, std::vector<ScopeRule> rules,
                                           ScopeTotals default_totals = {},
                                           int64_t default_capacity = 0);

  // The limits for `scope`: those of the rule with the longest prefix that `scope` starts with,
  // else default_limits(). Called on every PlaceHold with a scope and no limits of its own: no
  // allocation, no lock; O(R) prefix comparisons for R rules, each a length check and a memcmp of
  // at most the prefix's length (128 bytes), stopping at the first match, since the rules are kept
  // longest first. Fine for the tens of rules a file has; thousands would want a trie.
  ScopeLimits Resolve(absl::string_view scope) const;
  // The per-user limits and the totals of `scope`, from the same rule (as Resolve chooses it).
  struct Resolved {
    ScopeLimits limits;
    ScopeTotals totals;
    int64_t capacity_units = 0;
  };
  Resolved ResolveAll(absl::string_view scope) const;
  // Whether any rule, or the default, sets a total or a capacity (both need the scope index).
  bool has_totals() const { return has_totals_; }
  // Whether any rule, or the default, sets a capacity (counting sales: not on a Redis Cluster).
  bool has_capacity() const { return has_capacity_; }
  const ScopeTotals& default_totals() const { return default_totals_; }
  int64_t default_capacity() const { return default_capacity_; }

  // The limits of scopes no rule matches ({0, 0} when the file gave none).
  const ScopeLimits& default_limits() const { return default_limits_; }
  // The rules in the order Resolve tries them: longest prefix first, rules with prefixes of the
  // same length in the order given to Create (at most one of those can match a scope).
  const std::vector<ScopeRule>& rules() const { return rules_; }

 private:
  ScopeRules(ScopeLimits default_limits, std::vector<ScopeRule> rules, ScopeTotals default_totals,
             int64_t default_capacity);

  ScopeLimits default_limits_;
  ScopeTotals default_totals_;
  int64_t default_capacity_ = 0;
  bool has_totals_ = false;
  bool has_capacity_ = false;
  std::vector<ScopeRule> rules_;  // longest prefix first
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_SCOPE_LIMITS_H_
