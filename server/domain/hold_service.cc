#include "server/domain/hold_service.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/domain/page_token.h"
#include "server/domain/tenant.h"

namespace orderhold::domain {
namespace {

// INVALID_ARGUMENT naming user_id or order_id.
absl::Status ValidateIds(absl::string_view user_id, absl::string_view order_id) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateId("user_id", user_id));
  return ValidateLocalId("order_id", order_id);  // orders live under their (qualified) user
}

}  // namespace

HoldService::HoldService(store::HoldStore& store, HoldPolicy policy, metrics::Metrics& metrics)
    : store_(store), policy_(policy), metrics_(metrics) {}

void HoldService::Reject(metrics::RejectReason reason) { metrics_.RecordRejected(reason); }

void HoldService::SetScopeRules(ScopeRules rules) {
  absl::MutexLock lock(&rules_mu_);
  has_scope_rules_.store(!rules.rules().empty() || rules.default_limits() != ScopeLimits{},
                         std::memory_order_relaxed);
  rules_ = std::move(rules);
}

ScopeLimits HoldService::RulesFor(absl::string_view scope) const {
  absl::ReaderMutexLock lock(&rules_mu_);
  return rules_.Resolve(LocalId(scope));
}

ScopeRules::Resolved HoldService::ResolvedFor(absl::string_view scope) const {
  absl::ReaderMutexLock lock(&rules_mu_);
  return rules_.ResolveAll(LocalId(scope));
}

ScopeLimits HoldService::UserLimitsFor(absl::string_view user_id) const {
  ScopeLimits limits{policy_.max_holds, policy_.max_units};
  if (tenants_ == nullptr) return limits;
  const TenantLimits tenant = tenants_->For(TenantOfId(user_id));
  return ScopeLimits{tenant.max_holds.value_or(limits.max_holds),
                     tenant.max_units.value_or(limits.max_units)};
}

bool HoldService::ReportsUsage(bool asks_more) const {
  return asks_more || policy_.max_units > 0 || has_scope_rules_.load(std::memory_order_relaxed);
}

namespace {

// Moves `command`'s limit class and the caller's identities into `args`; INVALID_ARGUMENT naming
// limit_class when it is not a class name or comes without a scope.
absl::Status TakeLimitClass(PlaceHoldCommand& command, store::PlaceHoldArgs& args) {
  if (command.limit_class.empty()) return absl::OkStatus();
  if (command.scope.empty()) return absl::InvalidArgumentError("limit_class: only with a scope");
  ORDERHOLD_RETURN_IF_ERROR(ValidateLimitClassName("limit_class", command.limit_class));
  args.limit_class = std::move(command.limit_class);
  args.caller_identities = std::move(command.caller_identities);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<store::PlaceHoldArgs> HoldService::ValidatedArgs(PlaceHoldCommand& command) const {
  ORDERHOLD_RETURN_IF_ERROR(ValidateIds(command.user_id, command.order_id));
  ORDERHOLD_ASSIGN_OR_RETURN(absl::Duration ttl, ResolveTtl(command.ttl, policy_));
  ORDERHOLD_RETURN_IF_ERROR(ValidateScope(command.scope));
  store::PlaceHoldArgs args;
  args.ttl = ttl;
  args.max_lifetime = policy_.max_hold_lifetime;
  const ScopeLimits user_limits = UserLimitsFor(command.user_id);
  args.max_holds = user_limits.max_holds;
  args.max_units = user_limits.max_units;
  store::HoldDetails& details = args.details;
  details.quantity = command.quantity == 0 ? 1 : command.quantity;
  if (details.quantity > kMaxUnits) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantity: must be at most ", kMaxUnits, " (got ", details.quantity, ")"));
  }
  ORDERHOLD_ASSIGN_OR_RETURN(details.labels, ValidateLabels(std::move(command.labels)));
  if (command.scope_limits.has_value()) {
    if (command.scope.empty()) {
      return absl::InvalidArgumentError("scope_limits: only with a scope");
    }
    ORDERHOLD_RETURN_IF_ERROR(ValidateScopeLimits("scope_limits", *command.scope_limits));
  }
  if (!command.scope.empty()) {
    // The operator's rule is a ceiling a request can only lower (unless
    // --request_scope_limits=replace): a caller must not lift or switch off an event's limit.
    const ScopeRules::Resolved rule = ResolvedFor(command.scope);
    details.scope_limits = rule.limits;
    args.totals = rule.totals;
    if (args.totals != ScopeTotals{} && !store_.keeps_scope_index()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "scope \"", LocalId(command.scope),
          "\" has a total (total_max_holds/total_max_units), which this server's Redis mode "
          "cannot enforce (it keeps no scope index); the operator must remove it"));
    }
    args.capacity_units = rule.capacity_units;
    if (args.capacity_units > 0 && !store_.counts_sales()) {
      return absl::FailedPreconditionError(
          absl::StrCat("scope \"", LocalId(command.scope),
                       "\" has a capacity (capacity_units), which this server's Redis mode cannot "
                       "enforce (it counts no sales); the operator must remove it"));
    }
    if (command.scope_limits.has_value()) {
      details.scope_limits = ApplyRequestLimits(details.scope_limits, *command.scope_limits,
                                                policy_.request_scope_limits);
      // For the scope's runtime rule, which the store reads in the step that places the hold.
      args.asked_limits = *command.scope_limits;
      args.asked_replaces = policy_.request_scope_limits == RequestScopeLimits::kReplace;
    }
  }
  // A quantity no hold can ever have: refused as malformed rather than as "retry later". A store
  // with runtime rules checks the scope's own in the step (kNeverFits): only it knows the rule.
  const bool scope_checked_here = !store_.keeps_scope_rules();
  if (args.max_units > 0 && details.quantity > args.max_units) {
    return absl::InvalidArgumentError(absl::StrCat("quantity: ", details.quantity,
                                                   " exceeds the user's max_units ", args.max_units,
                                                   "; it can never be granted"));
  }
  if (scope_checked_here && details.scope_limits.max_units > 0 &&
      details.quantity > details.scope_limits.max_units) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantity: ", details.quantity, " exceeds max_units ", details.scope_limits.max_units,
        " of scope \"", LocalId(command.scope), "\"; it can never be granted"));
  }
  if (scope_checked_here && args.totals.max_units > 0 && details.quantity > args.totals.max_units) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantity: ", details.quantity, " exceeds total_max_units ", args.totals.max_units,
        " of scope \"", LocalId(command.scope), "\"; it can never be granted"));
  }
  if (scope_checked_here && args.capacity_units > 0 && details.quantity > args.capacity_units) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantity: ", details.quantity, " exceeds capacity_units ", args.capacity_units,
        " of scope \"", LocalId(command.scope), "\"; it can never be granted"));
  }
  ORDERHOLD_RETURN_IF_ERROR(TakeLimitClass(command, args));
  details.scope = std::move(command.scope);
  args.user_id = std::move(command.user_id);
  args.order_id = std::move(command.order_id);
  return args;
}

void HoldService::PlaceHold(PlaceHoldCommand command, store::CallOptions options,
                            store::Callback<PlaceHoldReply> done) {
  absl::StatusOr<store::PlaceHoldArgs> args = ValidatedArgs(command);
  if (!args.ok()) {
    Reject(metrics::RejectReason::kInvalidArgument);
    std::move(done)(args.status());
    return;
  }
  // (command's strings have moved into args.) A unit cap (the tenant's too) reports usage.
  const bool asks_more = !args->details.scope.empty() || args->details.quantity > 1 ||
                         !args->details.labels.empty() || command.scope_limits.has_value() ||
                         args->max_units > 0;
  HoldService::Asked asked{
      args->user_id,           args->order_id,
      args->details,           store::LevelLimits{args->max_holds, args->max_units},
      ReportsUsage(asks_more), args->totals,
      args->capacity_units,    {},
      args->limit_class};
  store_.PlaceHold(
      *std::move(args), options,
      [this, asked = std::move(asked),
       done = std::move(done)](absl::StatusOr<store::PlaceHoldResult> result) mutable {
        if (!result.ok()) {
          Reject(RejectReasonFor(result.status().code()));
          std::move(done)(result.status());
          return;
        }
        CountLazyExpiries(metrics_, result->expired_removed);
        using Outcome = store::PlaceHoldResult::Outcome;
        if (result->rule.has_value()) {  // the scope's runtime rule decided, not the file's
          asked.details.scope_limits = result->rule->limits;
          asked.totals = result->rule->totals;
          asked.capacity_units = result->rule->capacity_units;
          asked.purchases = result->rule->purchases;
        }
        if (std::optional<absl::Status> refused = Refusal(asked, *result); refused.has_value()) {
          std::move(done)(*std::move(refused));
          return;
        }
        if (result->outcome == Outcome::kAlreadyHeld) {
          if (absl::Status differs =
                  FingerprintError(asked.order_id, result->details, asked.details);
              !differs.ok()) {
            Reject(metrics::RejectReason::kAlreadyExists);
            std::move(done)(std::move(differs));
            return;
          }
        }
        const bool created = result->outcome == Outcome::kCreated;
        if (created) metrics_.holds_placed().Increment();
        PlaceHoldReply reply;
        reply.hold = Hold{std::move(asked.user_id), std::move(asked.order_id), result->expire_time,
                          std::move(result->details)};
        reply.now = result->now;
        reply.created = created;
        reply.active_holds = result->active_holds;
        reply.max_holds = static_cast<int>(asked.user_limits.max_holds);
        if (asked.reports_usage) {
          reply.user_usage =
              LevelUsage{result->active_holds, result->user_units, asked.user_limits};
        }
        if (!asked.details.scope.empty()) {
          reply.scope_usage =
              LevelUsage{result->scope_holds, result->scope_units, asked.details.scope_limits};
          if (asked.totals != ScopeTotals{} && created) {
            reply.scope_total_usage =
                LevelUsage{result->total_holds, result->total_units, asked.totals};
          }
        }
        std::move(done)(std::move(reply));
      });
}

std::optional<absl::Status> HoldService::Refusal(const Asked& asked,
                                                 const store::PlaceHoldResult& result) {
  const PlaceHoldArgsView view{
      asked.details.scope, asked.details.quantity, asked.user_limits, asked.details.scope_limits,
      asked.totals,        asked.capacity_units,   asked.purchases,   asked.limit_class};
  std::optional<PlaceRefusal> refusal = PlaceRefusalOf(asked.order_id, view, result);
  if (!refusal.has_value()) return std::nullopt;
  Reject(refusal->reason);
  return std::move(refusal->status);
}

void CountLazyExpiries(metrics::Metrics& metrics, int expired) {
  if (expired <= 0) return;
  metrics.holds_expired().Increment(expired);
  metrics.events_appended().Increment(expired);
}

void HoldService::End(std::string user_id, std::string order_id, store::HoldOutcome outcome,
                      std::string payment_reference, store::CallOptions options,
                      store::Callback<Ended> done) {
  absl::Status valid = ValidateIds(user_id, order_id);
  if (valid.ok()) valid = ValidatePaymentReference(payment_reference);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  std::string asked = payment_reference;  // compared with a paid hold's
  store_.EndHold(user_id, order_id, outcome, std::move(payment_reference), options,
                 [this, user_id, order_id, outcome, asked = std::move(asked),
                  done = std::move(done)](absl::StatusOr<store::EndHoldResult> result) mutable {
                   if (!result.ok()) {
                     std::move(done)(result.status());
                     return;
                   }
                   CountLazyExpiries(metrics_, result->expired_removed);
                   using Result = store::EndHoldResult::Result;
                   if (result->result == Result::kUnknown) {
                     std::move(done)(UnknownOrderError(order_id));
                     return;
                   }
                   const bool repeated = result->result == Result::kAlreadyEnded;
                   if (repeated && result->end.outcome != outcome) {
                     std::move(done)(EndedError(order_id, result->end,
                                                outcome == store::HoldOutcome::kPaid
                                                    ? "; it can no longer be paid"
                                                    : "; it can no longer be cancelled"));
                     return;
                   }
                   // An order paid without a reference (by a replica of an earlier release in a
                   // rolling upgrade, or a caller that sent none) has nothing to compare: it
                   // answers already_paid with its empty reference, for the caller to see.
                   if (repeated && !asked.empty() && !result->end.payment_reference.empty() &&
                       result->end.payment_reference != asked) {
                     std::move(done)(PaidWithOtherReferenceError(order_id, result->end));
                     return;
                   }
                   if (!repeated) {
                     (outcome == store::HoldOutcome::kPaid ? metrics_.holds_paid()
                                                           : metrics_.holds_cancelled())
                         .Increment();
                     metrics_.events_appended().Increment();
                   }
                   std::move(done)(Ended{Hold{std::move(user_id), std::move(order_id),
                                              result->end.expire_time, std::move(result->details)},
                                         repeated ? result->end.end_time : result->now, repeated,
                                         std::move(result->end.payment_reference)});
                 });
}

void HoldService::Pay(std::string user_id, std::string order_id, std::string payment_reference,
                      store::CallOptions options, store::Callback<PayReply> done) {
  End(std::move(user_id), std::move(order_id), store::HoldOutcome::kPaid,
      std::move(payment_reference), options,
      [done = std::move(done)](absl::StatusOr<Ended> ended) mutable {
        if (!ended.ok()) return std::move(done)(ended.status());
        std::move(done)(PayReply{std::move(ended->hold), ended->now, ended->repeated,
                                 std::move(ended->payment_reference)});
      });
}

void HoldService::Cancel(std::string user_id, std::string order_id, store::CallOptions options,
                         store::Callback<CancelReply> done) {
  End(std::move(user_id), std::move(order_id), store::HoldOutcome::kCancelled, std::string(),
      options, [done = std::move(done)](absl::StatusOr<Ended> ended) mutable {
        if (!ended.ok()) return std::move(done)(ended.status());
        std::move(done)(CancelReply{std::move(ended->hold), ended->now, ended->repeated});
      });
}

void HoldService::ExtendHold(ExtendHoldCommand command, store::CallOptions options,
                             store::Callback<ExtendHoldReply> done) {
  absl::Status valid = ValidateIds(command.user_id, command.order_id);
  absl::StatusOr<absl::Duration> ttl = ResolveTtl(command.ttl, policy_);
  if (valid.ok()) valid = ttl.status();
  if (valid.ok()) valid = ValidateRequestId(command.request_id);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store::ExtendHoldArgs args;
  args.ttl = *ttl;
  args.user_id = command.user_id;
  args.order_id = command.order_id;
  args.request_id = std::move(command.request_id);
  args.max_extensions = policy_.max_extensions;
  store_.ExtendHold(
      std::move(args), options,
      [this, user_id = std::move(command.user_id), order_id = std::move(command.order_id),
       done = std::move(done)](absl::StatusOr<store::ExtendHoldResult> result) mutable {
        if (!result.ok()) {
          std::move(done)(result.status());
          return;
        }
        CountLazyExpiries(metrics_, result->expired_removed);
        using Result = store::ExtendHoldResult::Result;
        using metrics::ExtensionResult;
        switch (result->result) {
          case Result::kUnknown:
            std::move(done)(UnknownOrderError(order_id));
            return;
          case Result::kEnded:
            metrics_.RecordExtension(ExtensionResult::kEnded);
            std::move(done)(EndedError(order_id, result->end, "; it can no longer be extended"));
            return;
          case Result::kExhausted:
            metrics_.RecordExtension(ExtensionResult::kExhausted);
            std::move(done)(ExtensionLimitError(order_id, result->hold.details.extensions,
                                                policy_.max_extensions));
            return;
          case Result::kLive:
            break;
        }
        // A replay moved nothing now: unchanged, whatever the call it repeats did.
        metrics_.RecordExtension(!result->extended || result->replayed ? ExtensionResult::kUnchanged
                                 : result->capped                      ? ExtensionResult::kCapped
                                                  : ExtensionResult::kExtended);
        ExtendHoldReply reply;
        reply.now = result->now;
        reply.extended = result->extended;
        reply.capped = result->capped;
        if (policy_.max_extensions > 0) {
          reply.extensions_left =
              std::max<int64_t>(0, policy_.max_extensions - result->hold.details.extensions);
        }
        reply.hold = Hold{std::move(user_id), std::move(result->hold.order_id),
                          result->hold.expire_time, std::move(result->hold.details)};
        std::move(done)(std::move(reply));
      });
}

void HoldService::GetHold(std::string user_id, std::string order_id, store::CallOptions options,
                          store::Callback<GetHoldReply> done) {
  if (absl::Status status = ValidateIds(user_id, order_id); !status.ok()) {
    std::move(done)(status);
    return;
  }
  store_.GetHold(user_id, order_id, options,
                 [user_id, order_id,
                  done = std::move(done)](absl::StatusOr<store::GetHoldResult> result) mutable {
                   if (!result.ok()) {
                     std::move(done)(result.status());
                     return;
                   }
                   using State = store::GetHoldResult::State;
                   if (result->state == State::kUnknown) {
                     std::move(done)(UnknownOrderError(order_id));
                     return;
                   }
                   GetHoldReply reply;
                   reply.now = result->now;
                   if (result->state == State::kEnded) reply.end = result->end;
                   reply.hold = Hold{std::move(user_id), std::move(order_id),
                                     result->hold.expire_time, std::move(result->hold.details)};
                   std::move(done)(std::move(reply));
                 });
}

void HoldService::ReleaseHolds(std::string user_id, std::string scope, store::CallOptions options,
                               store::Callback<ReleaseHoldsReply> done) {
  absl::Status valid = ValidateId("user_id", user_id);
  if (valid.ok()) valid = ValidateScope(scope);
  if (!valid.ok()) {
    std::move(done)(valid);
    return;
  }
  store_.ReleaseHolds(
      user_id, std::move(scope), options,
      [this, user_id,
       done = std::move(done)](absl::StatusOr<store::ReleaseHoldsResult> result) mutable {
        if (!result.ok()) {
          std::move(done)(result.status());
          return;
        }
        CountLazyExpiries(metrics_, result->expired_removed);
        const int64_t released = static_cast<int64_t>(result->released.size());
        if (released > 0) {
          metrics_.holds_cancelled().Increment(static_cast<double>(released));
          metrics_.events_appended().Increment(static_cast<double>(released));
        }
        ReleaseHoldsReply reply;
        reply.now = result->now;
        reply.released = released;
        // The answer is bounded as a ListHolds page is: the first page, the count.
        const size_t shown = std::min<size_t>(result->released.size(), kDefaultPageSize);
        reply.holds.reserve(shown);
        for (size_t i = 0; i < shown; ++i) {
          store::StoredHold& hold = result->released[i];
          reply.holds.push_back(
              Hold{user_id, std::move(hold.order_id), hold.expire_time, std::move(hold.details)});
        }
        std::move(done)(std::move(reply));
      });
}

void HoldService::ListHolds(std::string user_id, std::string scope, ListPage page,
                            store::CallOptions options, store::Callback<ListHoldsReply> done) {
  absl::StatusOr<store::ListHoldsArgs> args = [&]() -> absl::StatusOr<store::ListHoldsArgs> {
    ORDERHOLD_RETURN_IF_ERROR(ValidateId("user_id", user_id));
    ORDERHOLD_RETURN_IF_ERROR(ValidateScope(scope));
    store::ListHoldsArgs args;
    ORDERHOLD_ASSIGN_OR_RETURN(args.page_size, ResolvePageSize(page.page_size));
    if (!page.page_token.empty()) {
      ORDERHOLD_ASSIGN_OR_RETURN(args.after, DecodePageToken(page.page_token, user_id, scope));
    }
    args.user_id = user_id;
    args.scope = scope;
    return args;
  }();
  if (!args.ok()) {
    std::move(done)(args.status());
    return;
  }
  store_.ListHolds(
      *std::move(args), options,
      [this, user_id, scope = std::move(scope),
       done = std::move(done)](absl::StatusOr<store::ListHoldsResult> result) mutable {
        if (!result.ok()) {
          std::move(done)(result.status());
          return;
        }
        ListHoldsReply reply;
        reply.now = result->now;
        const ScopeLimits user_limits = UserLimitsFor(user_id);
        reply.max_holds = static_cast<int>(user_limits.max_holds);
        const LevelUsage user{result->user_holds, result->user_units, user_limits};
        if (!scope.empty()) {
          reply.scope_usage = LevelUsage{result->scope_holds, result->scope_units, RulesFor(scope)};
        }
        if (result->more && !result->holds.empty()) {
          const store::StoredHold& last = result->holds.back();
          reply.next_page_token =
              EncodePageToken(user_id, scope, store::ListCursor{last.expire_time, last.order_id});
        }
        reply.holds.reserve(result->holds.size());
        for (store::StoredHold& hold : result->holds) {
          reply.holds.push_back(
              Hold{user_id, std::move(hold.order_id), hold.expire_time, std::move(hold.details)});
        }
        if (ReportsUsage(!scope.empty() || !result->plain || user_limits.max_units > 0)) {
          reply.user_usage = user;
        }
        // The scope's runtime rule, read in the listing step, is what a PlaceHold applies.
        if (reply.scope_usage.has_value() && result->rule.has_value()) {
          reply.scope_usage->limits = result->rule->limits;
        }
        std::move(done)(std::move(reply));
      });
}

}  // namespace orderhold::domain
