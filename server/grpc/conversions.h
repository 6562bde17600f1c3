// Conversions between the gRPC/protobuf side of the OrderHold API and the domain: status codes,
// request bytes, times, requests into domain commands and domain replies into responses. Pure
// functions without I/O or gRPC calls, so the adapter's mapping is unit-tested on its own
// (tests/unit/conversions_test.cc); OrderHoldService and HoldEventWatch only wire them up.
//
// Requests arrive as the lenient mirrors of lenient_requests.proto (ids as bytes; the domain
// validates them). Every error is INVALID_ARGUMENT with a message naming the field (AIP-193), or
// INTERNAL for a message that does not serialize. Thread-safe (no state).
#ifndef ORDERHOLD_SERVER_GRPC_CONVERSIONS_H_
#define ORDERHOLD_SERVER_GRPC_CONVERSIONS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "orderhold/v1/orderhold.pb.h"
#include "server/domain/event_service.h"
#include "server/domain/hold_service.h"
#include "server/domain/return_service.h"
#include "server/domain/scope_rule_service.h"
#include "server/domain/scope_service.h"
#include "server/grpc/lenient_requests.pb.h"
#include "server/store/event_log.h"

namespace orderhold::grpc_api {

// ---- Status and bytes ------------------------------------------------------------------------

// absl::Status -> grpc::Status: the same code (absl::StatusCode was modelled on the gRPC codes and
// shares their numbers 0..16) and the message verbatim. OK becomes grpc::Status::OK. Payloads
// under domain::kDetailTypeUrlPrefix (google.rpc error details, see hold_service.h) become the
// details of a google.rpc.Status sent as the binary error details (`grpc-status-details-bin`,
// https://grpc.io/docs/guides/error/#richer-error-model); other payloads are not sent.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Parses request bytes into `out` (a lenient mirror). INVALID_ARGUMENT "request: not a valid
// <type>" when they do not decode; `type` is the API's name for the message
// ("orderhold.v1.PayRequest"). `bytes` is left as it was.
absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& bytes, absl::string_view type,
                                 google::protobuf::Message* out);

// Serializes `message` into `out`, which must be empty. INTERNAL if serialization fails.
absl::Status SerializeToByteBuffer(const google::protobuf::Message& message, grpc::ByteBuffer* out);

// ---- Times -----------------------------------------------------------------------------------

// `time` as a google.protobuf.Timestamp with millisecond precision (holds have no finer one):
// floored to the millisecond, so nanos is always in [0, 1e9) as the Timestamp rules require, also
// before 1970.
void TimestampToProto(absl::Time time, google::protobuf::Timestamp* out);

// `duration` as a google.protobuf.Duration with millisecond precision, truncated toward zero;
// seconds and nanos carry the same sign (e.g. -1.5 s -> {seconds: -1, nanos: -500000000}).
void DurationToProto(absl::Duration duration, google::protobuf::Duration* out);

// PlaceHoldRequest.ttl as an absl::Duration, exactly (nanoseconds kept; the domain checks the
// bounds and truncates to milliseconds). INVALID_ARGUMENT "ttl: not a valid
// google.protobuf.Duration" when the message breaks the Duration rules: seconds within
// +-315,576,000,000, |nanos| < 1e9, seconds and nanos not of opposite signs. Zero and negative
// durations are valid here (the domain refuses them, naming `ttl`).
absl::StatusOr<absl::Duration> TtlFromProto(const google::protobuf::Duration& ttl);

// ---- Requests -> domain ----------------------------------------------------------------------

// The PlaceHold command of `request`; its ids, scope and labels are moved out. An unset ttl stays
// unset (the server's --default_ttl applies), as does unset scope_limits (the server's rules).
// Errors: those of TtlFromProto.
absl::StatusOr<domain::PlaceHoldCommand> PlaceHoldCommandFromProto(
    internal::PlaceHoldRequest& request);

// The ExtendHold command of `request`; its ids and request_id are moved out. An unset ttl stays
// unset (the server's --default_ttl applies). Errors: those of TtlFromProto.
absl::StatusOr<domain::ExtendHoldCommand> ExtendHoldCommandFromProto(
    internal::ExtendHoldRequest& request);

// A WatchHoldEventsRequest.outcomes value (orderhold.v1.HoldOutcome, whose numbers are those of
// store::HoldOutcome). INVALID_ARGUMENT "outcomes: <n> is not PAID, CANCELLED or EXPIRED" for
// HOLD_OUTCOME_UNSPECIFIED and numbers the enum does not have.
absl::StatusOr<store::HoldOutcome> OutcomeFromProto(int32_t outcome);

// A WatchHoldEventsRequest.start_position value: START_POSITION_UNSPECIFIED and EARLIEST ->
// kEarliest, LATEST -> kLatest. INVALID_ARGUMENT "start_position: must be EARLIEST or LATEST"
// for numbers the enum does not have.
absl::StatusOr<store::GroupStart> StartPositionFromProto(int32_t start_position);

// The watch of `request`; its group and consumer are moved out (EventService::Subscribe
// validates them), repeated outcomes collapse into the set. Errors: those of
// StartPositionFromProto, which wins over a bad outcome, then those of OutcomeFromProto for the
// first bad outcome.
absl::StatusOr<domain::WatchSpec> WatchSpecFromProto(internal::WatchHoldEventsRequest& request);

// ---- Domain -> responses ---------------------------------------------------------------------

// `hold` as the API's Hold; remaining = expire_time - now (the store's clock at the call); its
// details as DetailsToProto writes them.
void HoldToProto(const domain::Hold& hold, absl::Time now, v1::Hold* out);

// A hold's scope, quantity (always, >= 1), labels, place_time and max_expire_time (when known),
// extensions and scope_limits (scoped holds only).
void DetailsToProto(const store::HoldDetails& details, v1::Hold* out);

// One level's usage as the API's LimitUsage.
void UsageToProto(const domain::LevelUsage& usage, v1::LimitUsage* out);

// The responses of the unary rpcs, field for field from the domain's replies.
v1::PlaceHoldResponse PlaceHoldReplyToProto(const domain::PlaceHoldReply& reply);
v1::PayResponse PayReplyToProto(const domain::PayReply& reply);
v1::ReturnUnitsResponse ReturnUnitsReplyToProto(const domain::ReturnUnitsReply& reply);
v1::CancelHoldResponse CancelReplyToProto(const domain::CancelReply& reply);
v1::ListHoldsResponse ListHoldsReplyToProto(const domain::ListHoldsReply& reply);
v1::ExtendHoldResponse ExtendHoldReplyToProto(const domain::ExtendHoldReply& reply);
// A live hold with its remaining time; an ended one with its outcome and end_time, no remaining.
v1::GetHoldResponse GetHoldReplyToProto(const domain::GetHoldReply& reply);
v1::ReleaseHoldsResponse ReleaseHoldsReplyToProto(const domain::ReleaseHoldsReply& reply);
// The scope rpcs' answers: the usage as a LimitUsage (max_* = the totals), the holds with their
// remaining time at the answer's instant.
v1::GetScopeUsageResponse ScopeUsageReplyToProto(const domain::ScopeUsageReply& reply);
v1::ListScopeHoldsResponse ListScopeHoldsReplyToProto(const domain::ListScopeHoldsReply& reply);
v1::ReleaseScopeHoldsResponse ReleaseScopeHoldsReplyToProto(
    const domain::ReleaseScopeHoldsReply& reply);
// A PutScopeRule's rule as the store keeps it, its scope in the stored form `scope` (the caller
// qualifies it: tenant.h). INVALID_ARGUMENT naming rule.state (not a ScopeState) or
// rule.open_time / close_time / expire_time (not a valid google.protobuf.Timestamp: seconds
// outside 0001-9999, nanos outside 0-999,999,999); times are truncated to whole milliseconds.
absl::StatusOr<store::ScopeRuleRecord> ScopeRuleFromProto(const internal::ScopeRule& rule,
                                                          std::string scope);
// A rule as the API's ScopeRule: its scope as its tenant's callers spell it (LocalId),
// effective_state the reply's.
v1::ScopeRule ScopeRuleReplyToProto(const domain::ScopeRuleReply& reply);
v1::ListScopeRulesResponse ListScopeRulesReplyToProto(const domain::ListScopeRulesReply& reply);
v1::CloseScopeResponse CloseScopeReplyToProto(const domain::CloseScopeReply& reply);

// `acked`: how many of the ids were pending (EventService::Ack).
v1::AckHoldEventsResponse AckedToProto(int64_t acked);

// A stored event as the API's HoldEvent: event_id "<partition>/<stream id>", the hold as it was
// when it ended (remaining unset), outcome, end_time and delivery_count.
void EventToProto(const store::StoredEvent& event, v1::HoldEvent* out);

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_CONVERSIONS_H_
