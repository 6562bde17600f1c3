#include "server/store/hold_store.h"

#include <utility>

namespace orderhold::store {
namespace {

absl::Status NoScopeRules() {
  return absl::FailedPreconditionError(
      "runtime scope rules need a store that keeps them (a standalone or Sentinel-managed Redis); "
      "this server's cannot: use the --scope_limits file");
}

}  // namespace

const char* HoldOutcomeName(HoldOutcome outcome) {
  switch (outcome) {
    case HoldOutcome::kPaid:
      return "PAID";
    case HoldOutcome::kCancelled:
      return "CANCELLED";
    case HoldOutcome::kExpired:
      return "EXPIRED";
    case HoldOutcome::kReturned:
      return "RETURNED";
  }
  return "HOLD_OUTCOME_UNSPECIFIED";
}

ScopeState EffectiveState(const ScopeRuleRecord& rule, absl::Time now) {
  if (rule.state == ScopeState::kClosed ||
      (rule.close_time.has_value() && now >= *rule.close_time)) {
    return ScopeState::kClosed;
  }
  if (rule.open_time.has_value() && now < *rule.open_time) return ScopeState::kPaused;
  if (rule.state == ScopeState::kPaused && !rule.open_time.has_value()) {
    return ScopeState::kPaused;
  }
  return ScopeState::kOpen;
}

void HoldStore::PutScopeRule(ScopeRuleRecord, CallOptions, Callback<ScopeRuleResult> done) {
  std::move(done)(NoScopeRules());
}
void HoldStore::GetScopeRule(std::string, CallOptions, Callback<ScopeRuleResult> done) {
  std::move(done)(NoScopeRules());
}
void HoldStore::DeleteScopeRule(std::string, std::string, CallOptions,
                                Callback<ScopeRuleResult> done) {
  std::move(done)(NoScopeRules());
}
void HoldStore::CloseScopeRule(std::string, CallOptions, Callback<ScopeRuleResult> done) {
  std::move(done)(NoScopeRules());
}
void HoldStore::ReturnUnits(ReturnUnitsArgs, CallOptions, Callback<ReturnUnitsResult> done) {
  std::move(done)(absl::UnimplementedError("this store keeps no returns"));
}
void HoldStore::ListScopeRules(ScopeRuleCursor, int, CallOptions,
                               Callback<ListScopeRulesResult> done) {
  std::move(done)(NoScopeRules());
}

}  // namespace orderhold::store
