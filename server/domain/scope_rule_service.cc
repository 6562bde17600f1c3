#include "server/domain/scope_rule_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"
#include "server/domain/page_token.h"
#include "server/domain/scope_limits.h"
#include "server/domain/tenant.h"

namespace orderhold::domain {
namespace {

// INVALID_ARGUMENT naming `field` when `scope` is empty or not a valid scope.
absl::Status ValidateRequiredScope(absl::string_view field, absl::string_view scope) {
  if (scope.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  absl::Status valid = ValidateScope(scope);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", valid.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateEtag(absl::string_view field, absl::string_view etag) {
  if (etag.size() > kMaxEtagBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": at most ", kMaxEtagBytes, " bytes (got ", etag.size(), ")"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming `field` unless `principal` is typed ("uri:", "dns:" or "subject:", then
// 1-kMaxPrincipalBytes bytes of UTF-8 without control characters).
absl::Status ValidatePrincipal(absl::string_view field, absl::string_view principal) {
  absl::string_view value = principal;
  if (!absl::ConsumePrefix(&value, "uri:") && !absl::ConsumePrefix(&value, "dns:") &&
      !absl::ConsumePrefix(&value, "subject:")) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not a \"uri:\", \"dns:\" or \"subject:\" identity"));
  }
  const bool control = std::any_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (value.empty() || value.size() > kMaxPrincipalBytes || control ||
      Utf8ValidPrefix(value) < value.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be 1-", kMaxPrincipalBytes,
                     " bytes of UTF-8 without control characters after its kind (got \"",
                     absl::CHexEscape(value.substr(0, 64)), "\")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimitClasses(const store::ScopeRuleRecord& rule) {
  if (rule.classes.size() > static_cast<size_t>(kMaxLimitClasses)) {
    return absl::InvalidArgumentError(absl::StrCat("rule.classes: at most ", kMaxLimitClasses,
                                                   " classes (got ", rule.classes.size(), ")"));
  }
  size_t principals = 0;
  for (const auto& [name, limit_class] : rule.classes) {
    ORDERHOLD_RETURN_IF_ERROR(ValidateLimitClassName("rule.classes", name));
    const std::string at = absl::StrCat("rule.classes[", name, "]");
    ORDERHOLD_RETURN_IF_ERROR(ValidateScopeLimits(absl::StrCat(at, ".limits"), limit_class.limits));
    for (const auto& [field, value] :
         {std::pair{".max_purchased_units", limit_class.purchases.max_units},
          std::pair{".max_purchased_holds", limit_class.purchases.max_holds}}) {
      if (value < 0 || value > kMaxScopeTotal) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, field, ": must be 0-", kMaxScopeTotal, " (0: no cap), got ", value));
      }
    }
    if (limit_class.principals.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, ".principals: required: the identities that may place holds in the class"));
    }
    for (size_t i = 0; i < limit_class.principals.size(); ++i) {
      ORDERHOLD_RETURN_IF_ERROR(
          ValidatePrincipal(absl::StrCat(at, ".principals[", i, "]"), limit_class.principals[i]));
    }
    principals += limit_class.principals.size();
  }
  if (principals > static_cast<size_t>(kMaxClassPrincipals)) {
    return absl::InvalidArgumentError(absl::StrCat("rule.classes: at most ", kMaxClassPrincipals,
                                                   " principals in all (got ", principals, ")"));
  }
  return absl::OkStatus();
}

ScopeRuleReply ReplyOf(store::ScopeRuleRecord rule, absl::Time now) {
  const store::ScopeState state = store::EffectiveState(rule, now);
  return ScopeRuleReply{std::move(rule), now, state};
}

// A ListScopeRules page token binds the tenant: its cursor is (partition, scope), carried as a
// ListCursor's (expire_time = the partition in ms, order_id = "/" + the scope: never empty, as a
// token's cursor must not be).
constexpr char kRulesTokenOwner[] = "\x01scope-rules";

}  // namespace

absl::Status ValidateScopeRule(const store::ScopeRuleRecord& rule) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateRequiredScope("rule.scope", rule.scope));
  ORDERHOLD_RETURN_IF_ERROR(ValidateScopeLimits("rule.limits", rule.limits));
  ORDERHOLD_RETURN_IF_ERROR(ValidateScopeTotals("rule", rule.totals));
  ORDERHOLD_RETURN_IF_ERROR(ValidateCapacity("rule", rule.capacity_units));
  for (const auto& [field, value] :
       {std::pair{"rule.max_purchased_units", rule.purchases.max_units},
        std::pair{"rule.max_purchased_holds", rule.purchases.max_holds}}) {
    if (value < 0 || value > kMaxScopeTotal) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": must be 0-", kMaxScopeTotal, " (0: no cap), got ", value));
    }
  }
  if (rule.open_time.has_value() && rule.close_time.has_value() &&
      *rule.open_time >= *rule.close_time) {
    return absl::InvalidArgumentError("rule.open_time: must be before rule.close_time");
  }
  for (const auto& [field, t] :
       {std::pair{"rule.open_time", rule.open_time}, std::pair{"rule.close_time", rule.close_time},
        std::pair{"rule.expire_time", rule.expire_time}}) {
    if (t.has_value() && *t <= absl::UnixEpoch()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be after 1970-01-01"));
    }
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateLimitClasses(rule));
  return ValidateEtag("rule.etag", rule.etag);
}

ScopeRuleService::ScopeRuleService(store::HoldStore& store, ScopeService& scopes)
    : store_(store), scopes_(scopes) {}

void ScopeRuleService::PutScopeRule(store::ScopeRuleRecord rule, store::CallOptions options,
                                    store::Callback<ScopeRuleReply> done) {
  if (absl::Status valid = ValidateScopeRule(rule); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store_.PutScopeRule(std::move(rule), options,
                      [done = std::move(done)](absl::StatusOr<store::ScopeRuleResult> r) mutable {
                        if (!r.ok()) return std::move(done)(r.status());
                        if (!r->rule.has_value()) {
                          return std::move(done)(absl::InternalError("the store kept no rule"));
                        }
                        std::move(done)(ReplyOf(*std::move(r->rule), r->now));
                      });
}

void ScopeRuleService::GetScopeRule(std::string scope, store::CallOptions options,
                                    store::Callback<ScopeRuleReply> done) {
  if (absl::Status valid = ValidateRequiredScope("scope", scope); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store_.GetScopeRule(
      std::move(scope), options,
      [done = std::move(done)](absl::StatusOr<store::ScopeRuleResult> r) mutable {
        if (!r.ok()) return std::move(done)(r.status());
        if (!r->rule.has_value()) {
          return std::move(done)(absl::NotFoundError(
              "scope: has no runtime rule (the --scope_limits file's rules apply to it)"));
        }
        std::move(done)(ReplyOf(*std::move(r->rule), r->now));
      });
}

void ScopeRuleService::ListScopeRules(std::string tenant, ListPage page, store::CallOptions options,
                                      store::Callback<ListScopeRulesReply> done) {
  absl::StatusOr<int> size = ResolvePageSize(page.page_size);
  store::ScopeRuleCursor from;
  if (size.ok() && !page.page_token.empty()) {
    absl::StatusOr<store::ListCursor> cursor =
        DecodePageToken(page.page_token, kRulesTokenOwner, tenant);
    if (!cursor.ok()) {
      size = cursor.status();
    } else {
      from.partition = static_cast<int>(absl::ToUnixMillis(cursor->expire_time));
      from.scope = cursor->order_id.substr(1);
    }
  }
  if (!size.ok()) {
    std::move(done)(size.status());
    return;
  }
  store_.ListScopeRules(std::move(from), *size, options,
                        [tenant = std::move(tenant), done = std::move(done)](
                            absl::StatusOr<store::ListScopeRulesResult> r) mutable {
                          if (!r.ok()) return std::move(done)(r.status());
                          ListScopeRulesReply reply;
                          for (store::ScopeRuleRecord& rule : r->rules) {
                            if (TenantOfId(rule.scope) != tenant)
                              continue;  // another tenant's: invisible
                            reply.rules.push_back(ReplyOf(std::move(rule), r->now));
                          }
                          if (r->next.has_value()) {
                            reply.next_page_token = EncodePageToken(
                                kRulesTokenOwner, tenant,
                                store::ListCursor{absl::FromUnixMillis(r->next->partition),
                                                  absl::StrCat("/", r->next->scope)});
                          }
                          std::move(done)(std::move(reply));
                        });
}

void ScopeRuleService::DeleteScopeRule(std::string scope, std::string etag,
                                       store::CallOptions options,
                                       store::Callback<absl::Time> done) {
  absl::Status valid = ValidateRequiredScope("scope", scope);
  if (valid.ok()) valid = ValidateEtag("etag", etag);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store_.DeleteScopeRule(
      std::move(scope), std::move(etag), options,
      [done = std::move(done)](absl::StatusOr<store::ScopeRuleResult> r) mutable {
        if (!r.ok()) return std::move(done)(r.status());
        std::move(done)(r->now);
      });
}

void ScopeRuleService::CloseScope(std::string scope, bool release_holds, store::CallOptions options,
                                  store::Callback<CloseScopeReply> done) {
  if (absl::Status valid = ValidateRequiredScope("scope", scope); !valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store_.CloseScopeRule(scope, options,
                        [this, scope, release_holds, options,
                         done = std::move(done)](absl::StatusOr<store::ScopeRuleResult> r) mutable {
                          if (!r.ok()) return std::move(done)(r.status());
                          if (!r->rule.has_value()) {
                            return std::move(done)(absl::InternalError("the store kept no rule"));
                          }
                          CloseScopeReply reply{ReplyOf(*std::move(r->rule), r->now), 0};
                          if (!release_holds) return std::move(done)(std::move(reply));
                          // Closed first: nothing placed from now on, so the release ends every
                          // live hold.
                          scopes_.ReleaseScopeHolds(
                              std::move(scope), options,
                              [reply = std::move(reply), done = std::move(done)](
                                  absl::StatusOr<ReleaseScopeHoldsReply> released) mutable {
                                if (!released.ok()) return std::move(done)(released.status());
                                reply.released_count = released->released;
                                std::move(done)(std::move(reply));
                              });
                        });
}

}  // namespace orderhold::domain
