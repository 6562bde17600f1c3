// Refusals: every status HoldService (and EventService, for per-caller bounds) answers a caller
// with when it refuses, and the google.rpc details a caller acts on (QuotaFailure, ErrorInfo,
// RetryInfo: https://cloud.google.com/apis/design/errors#error_details), attached as
// absl::Status payloads that grpc_api::ToGrpcStatus sends as the status' details. Codes as
// AIP-193 uses them: RESOURCE_EXHAUSTED for a limit, FAILED_PRECONDITION for an ended hold,
// ALREADY_EXISTS for a retry that does not match, NOT_FOUND for an unknown order. Messages name
// the limit or the field, times in RFC 3339 UTC with milliseconds. Pure functions: thread-safe.
#ifndef ORDERHOLD_SERVER_DOMAIN_HOLD_ERRORS_H_
#define ORDERHOLD_SERVER_DOMAIN_HOLD_ERRORS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/metrics/metrics.h"
#include "server/store/hold_store.h"

namespace orderhold::domain {

// The reject reason recorded for a failed PlaceHold with this status code.
metrics::RejectReason RejectReasonFor(absl::StatusCode code);

// The key prefix of the type URLs under which error details are attached to a status
// (absl::Status::SetPayload), as google.protobuf.Any names them.
inline constexpr char kDetailTypeUrlPrefix[] = "type.googleapis.com/";

// Attaches `message` (a google.rpc error detail: QuotaFailure, ErrorInfo, RetryInfo) to `status`
// under its type URL; grpc_api::ToGrpcStatus sends them as the status' details.
template <typename Message>
void AttachDetail(const Message& message, absl::Status* status) {
  status->SetPayload(absl::StrCat(kDetailTypeUrlPrefix, Message::descriptor()->full_name()),
                     absl::Cord(message.SerializeAsString()));
}

// RESOURCE_EXHAUSTED `message`, with a google.rpc.QuotaFailure (one violation: `subject`,
// `description`) and a google.rpc.ErrorInfo (`reason`, domain "orderhold.v1") attached: a
// per-caller bound a client must act on (close a watch, delete a group).
absl::Status QuotaError(absl::string_view message, absl::string_view subject,
                        absl::string_view description, absl::string_view reason);

// What a PlaceHold asked for, as LimitError reports it.
struct PlaceHoldArgsView {
  absl::string_view scope;
  int64_t quantity = 1;
  store::LevelLimits user_limits;
  store::LevelLimits scope_limits;
  store::LevelLimits totals;           // the scope's totals across users (ScopeTotals)
  int64_t capacity_units = 0;          // the scope's capacity (ScopeRule::capacity_units)
  store::LevelLimits purchases = {};   // a runtime rule's purchase caps (0 = none)
  absl::string_view limit_class = {};  // the limit class asked ("" = none)
};

// The RESOURCE_EXHAUSTED of a refused PlaceHold (`result.outcome` kLimitReached), with the
// google.rpc QuotaFailure, ErrorInfo and RetryInfo payloads described in the file comment. The
// message of the user's hold limit alone is the one OrderHold has always sent: `user_id already
// has 3 unpaid holds (max_holds 3); the earliest expires at <time> (in 29m)`.
absl::Status LimitError(const PlaceHoldArgsView& asked, const store::PlaceHoldResult& result);

// The FAILED_PRECONDITION of a PlaceHold the scope's runtime rule refused (`result.outcome`
// kScopeClosed or kScopeNotOpen): `scope "event:1" is closed` / `... is not open (it opens at
// <time>, in 2s)`, with a google.rpc.ErrorInfo (reason SCOPE_CLOSED or SCOPE_NOT_OPEN, domain
// "orderhold.v1", metadata scope and, when known, open_time in RFC 3339) and, for a scope that
// opens at a known time, a google.rpc.RetryInfo until then (AIP-193: the system is not in the
// state the call needs; this one says when it will be).
absl::Status ScopeStateError(absl::string_view scope, const store::PlaceHoldResult& result);

// The INVALID_ARGUMENT of a PlaceHold whose quantity is above a unit limit of its scope
// (`result.outcome` kNeverFits; the limits are those `asked` names): `quantity: 5 exceeds
// capacity_units 4 of scope "event:1"; it can never be granted`.
absl::Status NeverFitsError(const PlaceHoldArgsView& asked, const store::PlaceHoldResult& result);

// The PERMISSION_DENIED of a PlaceHold whose limit class the caller may not use (`result.outcome`
// kClassDenied): `limit_class: scope "event:1" has no runtime rule with a class "vip" that lists
// the caller`, the same whether the rule, the class or the caller's place in it is missing (a
// caller learns nothing of the rule), with a google.rpc.ErrorInfo (reason LIMIT_CLASS_DENIED,
// domain "orderhold.v1", metadata scope and limit_class). AIP-193: the caller is known and may not
// do this.
absl::Status ClassDeniedError(absl::string_view scope, absl::string_view limit_class);

// What a PlaceHold answers for a store result that placed nothing: the error (EndedError,
// LimitError, ScopeStateError, NeverFitsError or ClassDeniedError) and the reject reason it counts.
struct PlaceRefusal {
  absl::Status status;
  metrics::RejectReason reason;
};
// nullopt for kCreated and kAlreadyHeld (nothing refused).
std::optional<PlaceRefusal> PlaceRefusalOf(absl::string_view order_id,
                                           const PlaceHoldArgsView& asked,
                                           const store::PlaceHoldResult& result);

// The reject reason of a refusal: its first exceeded level.
metrics::RejectReason RejectReasonForViolations(int violations);

// OK when `requested` has the scope, quantity and labels of `existing` (place_time and scope
// limits are not compared: limits may come from rules that changed); else ALREADY_EXISTS naming
// the first that differs, in that order.
absl::Status FingerprintError(absl::string_view order_id, const store::HoldDetails& existing,
                              const store::HoldDetails& requested);

// The RESOURCE_EXHAUSTED of an ExtendHold refused because the hold has been extended
// `max_extensions` times: a google.rpc.QuotaFailure (subject "hold/extensions") and an ErrorInfo
// (reason HOLD_EXTENSION_LIMIT, domain "orderhold.v1", metadata order_id) as payloads, as
// LimitError attaches them. No RetryInfo: retrying cannot pass.
absl::Status ExtensionLimitError(absl::string_view order_id, int64_t extensions,
                                 int max_extensions);

// FAILED_PRECONDITION: `order_id "o-1" already ended: EXPIRED at 2026-11-21T10:00:00.000Z`, plus
// `what` (e.g. "; it cannot be paid"). The same text whoever ended the hold.
absl::Status EndedError(absl::string_view order_id, const store::HoldEnd& end,
                        absl::string_view what);

// FAILED_PRECONDITION: `order_id "o-1" was already paid at <time> with another payment_reference;
// this payment was not recorded`, with a google.rpc.ErrorInfo (reason PAID_WITH_OTHER_REFERENCE,
// domain "orderhold.v1", metadata order_id and payment_reference: the one `end` was paid with) as a
// payload: a second charge for one order, which the caller must refund or reconcile. For a Pay
// whose reference differs from the non-empty one `end` was paid with.
absl::Status PaidWithOtherReferenceError(absl::string_view order_id, const store::HoldEnd& end);

// FAILED_PRECONDITION of a ReturnUnits asking for more units than the paid hold has left:
// `order_id "o-1": 3 units cannot be returned, 1 of its 4 units are left (3 returned)`, with a
// google.rpc.ErrorInfo (reason RETURN_EXCEEDS_QUANTITY, domain "orderhold.v1", metadata order_id,
// quantity, returned_units) as a payload.
absl::Status ReturnExceedsError(absl::string_view order_id, int64_t asked, int64_t quantity,
                                int64_t returned);

// FAILED_PRECONDITION of a ReturnUnits of a paid hold that has had store::kMaxReturnsPerHold
// returns already, with an ErrorInfo (reason TOO_MANY_RETURNS, metadata order_id).
absl::Status TooManyReturnsError(absl::string_view order_id);

// NOT_FOUND: no hold for `order_id` of this user_id (never placed, or ended longer ago than the
// outcome retention).
absl::Status UnknownOrderError(absl::string_view order_id);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_HOLD_ERRORS_H_
