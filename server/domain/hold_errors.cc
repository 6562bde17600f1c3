#include "server/domain/hold_errors.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/error_details.pb.h"
#include "server/domain/tenant.h"

namespace orderhold::domain {

namespace {

// Times in messages: RFC 3339, UTC, milliseconds ("2026-11-21T10:00:00.000Z").
std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

}  // namespace

metrics::RejectReason RejectReasonFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return metrics::RejectReason::kQuotaExceeded;
    case absl::StatusCode::kInvalidArgument:
      return metrics::RejectReason::kInvalidArgument;
    case absl::StatusCode::kUnavailable:
      return metrics::RejectReason::kUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
      return metrics::RejectReason::kDeadlineExceeded;
    default:
      return metrics::RejectReason::kOther;
  }
}

absl::Status EndedError(absl::string_view order_id, const store::HoldEnd& end,
                        absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "order_id \"", order_id, "\" already ended: ", store::HoldOutcomeName(end.outcome), " at ",
      FormatUtc(end.end_time), what));
}

absl::Status PaidWithOtherReferenceError(absl::string_view order_id, const store::HoldEnd& end) {
  absl::Status status = absl::FailedPreconditionError(
      absl::StrCat("order_id \"", order_id, "\" was already paid at ", FormatUtc(end.end_time),
                   " with another payment_reference; this payment was not recorded"));
  google::rpc::ErrorInfo info;
  info.set_reason("PAID_WITH_OTHER_REFERENCE");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = std::string(order_id);
  (*info.mutable_metadata())["payment_reference"] = end.payment_reference;
  AttachDetail(info, &status);
  return status;
}

absl::Status ReturnExceedsError(absl::string_view order_id, int64_t asked, int64_t quantity,
                                int64_t returned) {
  absl::Status status = absl::FailedPreconditionError(absl::StrCat(
      "order_id \"", order_id, "\": ", asked, " units cannot be returned, ", quantity - returned,
      " of its ", quantity, " units are left (", returned, " returned)"));
  google::rpc::ErrorInfo info;
  info.set_reason("RETURN_EXCEEDS_QUANTITY");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = std::string(order_id);
  (*info.mutable_metadata())["quantity"] = absl::StrCat(quantity);
  (*info.mutable_metadata())["returned_units"] = absl::StrCat(returned);
  AttachDetail(info, &status);
  return status;
}

absl::Status TooManyReturnsError(absl::string_view order_id) {
  absl::Status status = absl::FailedPreconditionError(
      absl::StrCat("order_id \"", order_id, "\" has had ", store::kMaxReturnsPerHold,
                   " returns, the most a hold may have"));
  google::rpc::ErrorInfo info;
  info.set_reason("TOO_MANY_RETURNS");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = std::string(order_id);
  AttachDetail(info, &status);
  return status;
}

absl::Status UnknownOrderError(absl::string_view order_id) {
  return absl::NotFoundError(absl::StrCat("no hold for order_id \"", order_id,
                                          "\" of this user_id (never placed, or ended longer ago "
                                          "than the outcome retention)"));
}

namespace {

// The exceeded levels of a refusal, in the order of their reasons.
struct Level {
  int bit;
  const char* reason;  // google.rpc.ErrorInfo.reason
  metrics::RejectReason metric;
};
constexpr Level kLevels[] = {
    {store::kUserHoldLimit, "USER_HOLD_LIMIT", metrics::RejectReason::kQuotaExceeded},
    {store::kUserUnitLimit, "USER_UNIT_LIMIT", metrics::RejectReason::kUserUnitLimit},
    {store::kScopeHoldLimit, "SCOPE_HOLD_LIMIT", metrics::RejectReason::kScopeHoldLimit},
    {store::kScopeUnitLimit, "SCOPE_UNIT_LIMIT", metrics::RejectReason::kScopeUnitLimit},
    {store::kScopeTotalHoldLimit, "SCOPE_TOTAL_LIMIT", metrics::RejectReason::kScopeTotalLimit},
    {store::kScopeTotalUnitLimit, "SCOPE_TOTAL_LIMIT", metrics::RejectReason::kScopeTotalLimit},
    {store::kScopeCapacity, "SCOPE_SOLD_OUT", metrics::RejectReason::kScopeSoldOut},
    {store::kUserPurchasedHolds, "USER_PURCHASE_LIMIT", metrics::RejectReason::kUserPurchaseLimit},
    {store::kUserPurchasedUnits, "USER_PURCHASE_LIMIT", metrics::RejectReason::kUserPurchaseLimit},
};

// The first exceeded level of `violations` (LimitViolation bits); the user's hold limit when none.
const Level& FirstLevel(int violations) {
  for (const Level& level : kLevels) {
    if ((violations & level.bit) != 0) return level;
  }
  return kLevels[0];
}

// One exceeded level's description (QuotaFailure.Violation.description, and the message's part).
std::string LevelDescription(int bit, const PlaceHoldArgsView& a, const store::PlaceHoldResult& r) {
  switch (bit) {
    case store::kUserHoldLimit:
      return absl::StrCat("user_id already has ", r.active_holds, " unpaid holds (max_holds ",
                          a.user_limits.max_holds, ")");
    case store::kUserUnitLimit:
      return absl::StrCat("user_id holds ", r.user_units, " units; ", a.quantity,
                          " more would exceed max_units ", a.user_limits.max_units);
    case store::kScopeHoldLimit:
      return absl::StrCat("user_id already has ", r.scope_holds, " unpaid holds in scope \"",
                          a.scope, "\" (max_holds ", a.scope_limits.max_holds, ")");
    case store::kScopeUnitLimit:
      return absl::StrCat("user_id holds ", r.scope_units, " units in scope \"", a.scope, "\"; ",
                          a.quantity, " more would exceed max_units ", a.scope_limits.max_units);
    case store::kScopeTotalHoldLimit:
      return absl::StrCat("scope \"", a.scope, "\" already has ", r.total_holds,
                          " unpaid holds across all users (total_max_holds ", a.totals.max_holds,
                          ")");
    case store::kScopeTotalUnitLimit:
      return absl::StrCat("scope \"", a.scope, "\" holds ", r.total_units,
                          " units across all users; ", a.quantity,
                          " more would exceed total_max_units ", a.totals.max_units);
    case store::kUserPurchasedHolds:
      return absl::StrCat("user_id has ", r.scope_holds, " unpaid holds in scope \"", a.scope,
                          "\" and bought ", r.purchased_holds, " (max_purchased_holds ",
                          a.purchases.max_holds, ")");
    case store::kUserPurchasedUnits:
      return absl::StrCat("user_id holds ", r.scope_units, " units in scope \"", a.scope,
                          "\" and bought ", r.purchased_units, "; ", a.quantity,
                          " more would exceed max_purchased_units ", a.purchases.max_units);
    default:
      return absl::StrCat("scope \"", a.scope, "\" is sold out: ", r.total_units,
                          " units held and ", r.sold_units, " sold; ", a.quantity,
                          " more would exceed capacity_units ", a.capacity_units);
  }
}

}  // namespace

absl::Status LimitError(const PlaceHoldArgsView& stored, const store::PlaceHoldResult& r) {
  // The scope as the caller spelled it (a tenant's is stored qualified: tenant.h).
  PlaceHoldArgsView a = stored;
  a.scope = LocalId(stored.scope);
  google::rpc::QuotaFailure quota;
  std::vector<std::string> parts;
  const std::string scope_subject = absl::StrCat("user/scope:", a.scope);
  const std::string total_subject = absl::StrCat("scope/", a.scope);
  for (const Level& level : kLevels) {
    if ((r.violations & level.bit) == 0) continue;
    std::string description = LevelDescription(level.bit, a, r);
    google::rpc::QuotaFailure::Violation* v = quota.add_violations();
    v->set_subject(level.bit <= store::kUserUnitLimit ? "user"
                   : level.bit <= store::kScopeUnitLimit || level.bit >= store::kUserPurchasedHolds
                       ? scope_subject
                       : total_subject);
    v->set_description(description);
    parts.push_back(std::move(description));
  }
  const absl::Duration wait = std::max(absl::ZeroDuration(), r.expire_time - r.now);
  const std::string when =
      absl::StrCat(FormatUtc(r.expire_time), " (in ", absl::FormatDuration(wait), ")");
  // Sold out beyond what expiries can free (the units sold alone leave no room for the quantity):
  // no retry time is given.
  // Likewise a purchase cap the user's purchases alone fill.
  const bool never = ((r.violations & store::kScopeCapacity) != 0 &&
                      r.sold_units + a.quantity > a.capacity_units) ||
                     ((r.violations & store::kUserPurchasedUnits) != 0 &&
                      r.purchased_units + a.quantity > a.purchases.max_units) ||
                     ((r.violations & store::kUserPurchasedHolds) != 0 &&
                      r.purchased_holds + 1 > a.purchases.max_holds);
  // The user's hold limit alone keeps the message it has always had.
  absl::Status status = absl::ResourceExhaustedError(
      r.violations == store::kUserHoldLimit
          ? absl::StrCat(parts[0], "; the earliest expires at ", when)
      : never ? absl::StrCat(absl::StrJoin(parts, "; "), "; expiries cannot free enough units")
              : absl::StrCat(absl::StrJoin(parts, "; "), "; a retry can pass from ", when));
  google::rpc::ErrorInfo info;
  info.set_reason(FirstLevel(r.violations).reason);
  info.set_domain("orderhold.v1");
  if (!a.scope.empty()) (*info.mutable_metadata())["scope"] = std::string(a.scope);
  google::rpc::RetryInfo retry;
  *retry.mutable_retry_delay() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(wait));
  AttachDetail(quota, &status);
  AttachDetail(info, &status);
  if (!never) AttachDetail(retry, &status);
  return status;
}

absl::Status ScopeStateError(absl::string_view stored_scope, const store::PlaceHoldResult& r) {
  const absl::string_view scope = LocalId(stored_scope);
  const bool closed = r.outcome == store::PlaceHoldResult::Outcome::kScopeClosed;
  const bool opens = !closed && r.expire_time > absl::UnixEpoch();
  const absl::Duration wait = std::max(absl::ZeroDuration(), r.expire_time - r.now);
  absl::Status status = absl::FailedPreconditionError(
      closed  ? absl::StrCat("scope \"", scope, "\" is closed; no hold can be placed in it")
      : opens ? absl::StrCat("scope \"", scope, "\" is not open; it opens at ",
                             FormatUtc(r.expire_time), " (in ", absl::FormatDuration(wait), ")")
              : absl::StrCat("scope \"", scope,
                             "\" is paused; no hold can be placed in it until "
                             "its rule opens it"));
  google::rpc::ErrorInfo info;
  info.set_reason(closed ? "SCOPE_CLOSED" : "SCOPE_NOT_OPEN");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["scope"] = std::string(scope);
  if (opens) (*info.mutable_metadata())["open_time"] = FormatUtc(r.expire_time);
  AttachDetail(info, &status);
  if (opens) {
    google::rpc::RetryInfo retry;
    *retry.mutable_retry_delay() =
        google::protobuf::util::TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(wait));
    AttachDetail(retry, &status);
  }
  return status;
}

absl::Status ClassDeniedError(absl::string_view stored_scope, absl::string_view limit_class) {
  const absl::string_view scope = LocalId(stored_scope);
  absl::Status status = absl::PermissionDeniedError(
      absl::StrCat("limit_class: scope \"", scope, "\" has no runtime rule with a class \"",
                   limit_class, "\" that lists the caller (its client certificate's identities)"));
  google::rpc::ErrorInfo info;
  info.set_reason("LIMIT_CLASS_DENIED");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["scope"] = std::string(scope);
  (*info.mutable_metadata())["limit_class"] = std::string(limit_class);
  AttachDetail(info, &status);
  return status;
}

absl::Status NeverFitsError(const PlaceHoldArgsView& a, const store::PlaceHoldResult& r) {
  const char* name = "max_units";
  int64_t limit = a.scope_limits.max_units;
  if ((r.violations & store::kUserPurchasedUnits) != 0 &&
      (r.violations &
       (store::kScopeUnitLimit | store::kScopeTotalUnitLimit | store::kScopeCapacity)) == 0) {
    name = "max_purchased_units";
    limit = a.purchases.max_units;
  } else if ((r.violations & store::kScopeUnitLimit) == 0) {
    const bool total = (r.violations & store::kScopeTotalUnitLimit) != 0;
    name = total ? "total_max_units" : "capacity_units";
    limit = total ? a.totals.max_units : a.capacity_units;
  }
  return absl::InvalidArgumentError(absl::StrCat("quantity: ", a.quantity, " exceeds ", name, " ",
                                                 limit, " of scope \"", LocalId(a.scope),
                                                 "\"; it can never be granted"));
}

std::optional<PlaceRefusal> PlaceRefusalOf(absl::string_view order_id,
                                           const PlaceHoldArgsView& asked,
                                           const store::PlaceHoldResult& result) {
  using Outcome = store::PlaceHoldResult::Outcome;
  using Reason = metrics::RejectReason;
  switch (result.outcome) {
    case Outcome::kEnded:
      return PlaceRefusal{EndedError(order_id, result.ended,
                                     "; an order is held at most once (place a new order_id)"),
                          Reason::kAlreadyEnded};
    case Outcome::kLimitReached:
      return PlaceRefusal{LimitError(asked, result), RejectReasonForViolations(result.violations)};
    case Outcome::kScopeClosed:
      return PlaceRefusal{ScopeStateError(asked.scope, result), Reason::kScopeClosed};
    case Outcome::kScopeNotOpen:
      return PlaceRefusal{ScopeStateError(asked.scope, result), Reason::kScopeNotOpen};
    case Outcome::kNeverFits:
      return PlaceRefusal{NeverFitsError(asked, result), Reason::kInvalidArgument};
    case Outcome::kClassDenied:
      return PlaceRefusal{ClassDeniedError(asked.scope, asked.limit_class),
                          Reason::kLimitClassDenied};
    case Outcome::kCreated:
    case Outcome::kAlreadyHeld:
      break;
  }
  return std::nullopt;
}

absl::Status QuotaError(absl::string_view message, absl::string_view subject,
                        absl::string_view description, absl::string_view reason) {
  absl::Status status = absl::ResourceExhaustedError(message);
  google::rpc::QuotaFailure quota;
  google::rpc::QuotaFailure::Violation* v = quota.add_violations();
  v->set_subject(std::string(subject));
  v->set_description(std::string(description));
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain("orderhold.v1");
  AttachDetail(quota, &status);
  AttachDetail(info, &status);
  return status;
}

absl::Status ExtensionLimitError(absl::string_view order_id, int64_t extensions,
                                 int max_extensions) {
  const std::string description =
      absl::StrCat("order_id \"", order_id, "\" has been extended ", extensions,
                   " times (max_extensions ", max_extensions, ")");
  absl::Status status = absl::ResourceExhaustedError(
      absl::StrCat(description, "; it keeps its expire_time until paid, cancelled or expired"));
  google::rpc::QuotaFailure quota;
  google::rpc::QuotaFailure::Violation* v = quota.add_violations();
  v->set_subject("hold/extensions");
  v->set_description(description);
  google::rpc::ErrorInfo info;
  info.set_reason("HOLD_EXTENSION_LIMIT");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = std::string(order_id);
  AttachDetail(quota, &status);
  AttachDetail(info, &status);
  return status;
}

metrics::RejectReason RejectReasonForViolations(int violations) {
  return FirstLevel(violations).metric;
}

absl::Status FingerprintError(absl::string_view order_id, const store::HoldDetails& existing,
                              const store::HoldDetails& requested) {
  std::string what;
  if (existing.scope != requested.scope) {
    what = absl::StrCat("scope \"", LocalId(existing.scope), "\" (this request: \"",
                        LocalId(requested.scope), "\")");
  } else if (existing.quantity != requested.quantity) {
    what =
        absl::StrCat("quantity ", existing.quantity, " (this request: ", requested.quantity, ")");
  } else if (existing.labels != requested.labels) {
    what = "other labels";
  } else {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("order_id \"", order_id, "\" already has a live hold with ", what,
                   "; a retry must repeat the scope, quantity and labels it was placed with"));
}

}  // namespace orderhold::domain
