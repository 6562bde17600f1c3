// ScopeRuleService: an exact scope's runtime rule, for the operators of an on-sale:
// PutScopeRule, GetScopeRule, ListScopeRules, DeleteScopeRule and CloseScope (the rpcs of those
// names). The rule lives in the store (store::ScopeRuleRecord), which reads it in the step that
// places a hold, so an edit applies on every replica from the step on, with no reload.
//
// Precedence of the rules a scoped PlaceHold is checked against: the scope's runtime rule when it
// has one (its limits, totals, capacity and state, whole: nothing is merged from the file), else
// the --scope_limits file's rule with the longest matching prefix, else the file's default. The
// request's own scope_limits then only tighten the per-user limits (or replace them, with
// --request_scope_limits=replace), as with the file's.
//
// Edits are guarded by etags (AIP-154, https://google.aip.dev/154): a write that sends an etag
// changes the rule only if it is still the rule's, else ABORTED; one that sends none writes
// whatever is there.
//
// Errors: INVALID_ARGUMENT naming the field (rule.scope / scope required and valid as
// PlaceHoldRequest.scope; rule.limits, rule.total_max_*, rule.capacity_units,
// rule.max_purchased_* out of bounds; rule.classes beyond the bounds below, a class without
// principals or with one that is not a typed identity; rule.open_time not before rule.close_time;
// rule.expire_time not after now; etag longer than kMaxEtagBytes; page_size, page_token); NOT_FOUND
// (Get, Delete: no rule); ABORTED (a stale etag); FAILED_PRECONDITION (a store that keeps no
// runtime rules: a Redis Cluster, --store=noop); UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL from the
// store. Thread-safe (no state of its own).
#ifndef ORDERHOLD_SERVER_DOMAIN_SCOPE_RULE_SERVICE_H_
#define ORDERHOLD_SERVER_DOMAIN_SCOPE_RULE_SERVICE_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/domain/hold_service.h"
#include "server/domain/scope_service.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// An etag longer than this is refused (a real one is a decimal counter: under 20 bytes).
inline constexpr size_t kMaxEtagBytes = 64;

// Bounds of a rule's limit classes (ScopeRule.classes), which the placing step reads whole: at
// most kMaxLimitClasses classes, names 1-kMaxLimitClassNameBytes bytes of [A-Za-z0-9_.-],
// kMaxClassPrincipals principals in all, each a typed identity ("uri:", "dns:" or "subject:")
// whose value is 1-kMaxPrincipalBytes bytes. Packed, a rule's classes stay under about 18 KB.
// (kMaxLimitClassNameBytes: scope_limits.h.)
inline constexpr int kMaxLimitClasses = 16;
inline constexpr int kMaxClassPrincipals = 64;
inline constexpr size_t kMaxPrincipalBytes = 256;

// A rule as answered: the stored rule (scope in its stored form) and its state at `now`.
struct ScopeRuleReply {
  store::ScopeRuleRecord rule;
  absl::Time now;  // the store's clock at the call
  // store::EffectiveState(rule, now): what a PlaceHold meets now (a PAUSED rule past its
  // open_time reads kOpen).
  store::ScopeState effective_state = store::ScopeState::kOpen;
};

struct ListScopeRulesReply {
  std::vector<ScopeRuleReply> rules;  // one page, partition by partition, scopes in byte order
  std::string next_page_token;        // "" on the last page
};

struct CloseScopeReply {
  ScopeRuleReply rule;         // the rule as closed
  int64_t released_count = 0;  // live holds ended CANCELLED (release_holds), each with its event
};

class ScopeRuleService {
 public:
  // `store` and `scopes` must outlive this object.
  ScopeRuleService(store::HoldStore& store, ScopeService& scopes);

  // Writes `rule` (rule.etag: "" = unconditional, else the etag it must still have). Answers the
  // rule with its new etag.
  void PutScopeRule(store::ScopeRuleRecord rule, store::CallOptions options,
                    store::Callback<ScopeRuleReply> done);
  // The scope's rule; NOT_FOUND when it has none (it follows the file's rules).
  void GetScopeRule(std::string scope, store::CallOptions options,
                    store::Callback<ScopeRuleReply> done);
  // One page of the rules of `tenant` ("" = rules of no tenant; a tenant's scopes are stored
  // qualified: tenant.h), AIP-158: page.page_size 0 = kDefaultPageSize, at most kMaxPageSize. A
  // page may hold fewer rules than asked (a tenant's rules among others', expired ones), and still
  // have a next_page_token.
  void ListScopeRules(std::string tenant, ListPage page, store::CallOptions options,
                      store::Callback<ListScopeRulesReply> done);
  // Removes the scope's rule (etag as PutScopeRule's); its scope follows the file's rules again.
  void DeleteScopeRule(std::string scope, std::string etag, store::CallOptions options,
                       store::Callback<absl::Time> done);
  // Sets the scope's rule CLOSED (creating one, CLOSED and with no limits, when it has none): from
  // the store's step on, no PlaceHold of the scope succeeds on any replica. With `release_holds`,
  // then ends every live hold of the scope CANCELLED (ScopeService::ReleaseScopeHolds: one event
  // each). Live holds not released may still be paid.
  void CloseScope(std::string scope, bool release_holds, store::CallOptions options,
                  store::Callback<CloseScopeReply> done);

 private:
  store::HoldStore& store_;
  ScopeService& scopes_;
};

// INVALID_ARGUMENT naming the first bad field of `rule` (prefix "rule."), as the file comment
// lists them (the expiry against now is the store's check); OK otherwise.
absl::Status ValidateScopeRule(const store::ScopeRuleRecord& rule);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_SCOPE_RULE_SERVICE_H_
