// OrderHoldClient: a small synchronous C++ client for the orderhold.v1.OrderHold service.
//
// It turns each RPC into one call that returns absl::StatusOr, applies a deadline to every call,
// and converts between absl time types and the google.protobuf ones. The service contract (what
// each RPC does, field units, error codes) lives in proto/orderhold/v1/orderhold.proto; this header
// repeats only what a caller needs at the call site.
//
//   auto client = orderhold::client::OrderHoldClient::Connect("localhost:50051", {});
//   absl::StatusOr<orderhold::v1::PlaceHoldResponse> placed =
//       client->PlaceHold("alice", "order-1", absl::Minutes(10));
//   if (absl::IsResourceExhausted(placed.status())) {
//     // A limit was reached; GetErrorDetails(placed.status()) says which and when to retry.
//   }
//
// Errors. Every gRPC status is returned unchanged as an absl::Status (same code, same message):
// INVALID_ARGUMENT, RESOURCE_EXHAUSTED (PlaceHold at a limit; ExtendHold of a hold that has used
// its extensions), ALREADY_EXISTS (PlaceHold of a live order with another scope, quantity or
// labels), FAILED_PRECONDITION (the order's hold already ended in a way that forbids the call, or,
// for ReturnUnits, is not PAID or has fewer units left), NOT_FOUND
// (Pay/CancelHold/ExtendHold/GetHold/ReturnUnits of an unknown order), UNAVAILABLE (server or Redis
// down; retrying is safe), DEADLINE_EXCEEDED (ClientOptions::timeout passed). The google.rpc
// error details the server sent (grpc-status-details-bin) become the status' payloads, one per
// detail, keyed by its type URL ("type.googleapis.com/google.rpc.QuotaFailure"), the same
// convention the server uses; GetErrorDetails decodes the ones OrderHold sends. The client adds no
// retries of its own.
//
// Thread-safety. OrderHoldClient is thread-safe: its methods are const, it holds no mutable state,
// and the gRPC stub it wraps may be used from any number of threads at once. Share one instance
// (and so one channel) rather than creating one per call.
#ifndef ORDERHOLD_CLIENT_ORDERHOLD_CLIENT_H_
#define ORDERHOLD_CLIENT_ORDERHOLD_CLIENT_H_

#include <grpcpp/support/status.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/rpc/error_details.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

namespace orderhold::client {

// The prefix of the type URLs under which error details are kept as absl::Status payloads (that
// of google.protobuf.Any, followed by the message's full name).
inline constexpr char kErrorDetailTypeUrlPrefix[] = "type.googleapis.com/";

// Converts a gRPC status to an absl::Status: the codes are the same numbers (absl::StatusCode was
// modelled on them), the message is kept verbatim. An OK status becomes absl::OkStatus(). When
// the status carries error details (a serialized google.rpc.Status), each of its `details` becomes
// a payload: key = the Any's type URL, value = its serialized message. Details that cannot be
// parsed are dropped; the code and message are kept whatever the details say.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The google.rpc error details OrderHold sends with a refused PlaceHold or ExtendHold
// (RESOURCE_EXHAUSTED; see proto/orderhold/v1/orderhold.proto), decoded from a status made by
// FromGrpcStatus. Each is unset when the status does not carry it (or it does not parse).
struct ErrorDetails {
  // PlaceHold: one violation per exceeded level, subject "user" or "user/scope:<scope>".
  // ExtendHold: subject "hold/extensions".
  std::optional<google::rpc::QuotaFailure> quota_failure;
  // reason USER_HOLD_LIMIT, USER_UNIT_LIMIT, SCOPE_HOLD_LIMIT or SCOPE_UNIT_LIMIT (PlaceHold),
  // HOLD_EXTENSION_LIMIT (ExtendHold), RETURN_EXCEEDS_QUANTITY or TOO_MANY_RETURNS (ReturnUnits,
  // FAILED_PRECONDITION), domain "orderhold.v1".
  std::optional<google::rpc::ErrorInfo> error_info;
  // The earliest moment a retry can pass, from a PlaceHold refusal (ExtendHold sends none: no
  // wait makes an extension possible again).
  std::optional<google::rpc::RetryInfo> retry_info;
};
ErrorDetails GetErrorDetails(const absl::Status& status);

// What a PlaceHold carries besides the ids. A default-constructed value places an unscoped hold
// of quantity 1 living the server's --default_ttl, as before scopes existed. Every field is sent
// as given; the server validates (INVALID_ARGUMENT naming the field).
struct PlaceHoldOptions {
  // How long the hold lives; unset: the server's --default_ttl (30m).
  std::optional<absl::Duration> ttl;
  // The scope the hold also counts against, e.g. "event:E42"; "" = none.
  std::string scope;
  // Units held, e.g. tickets; 0 = unset (the server counts 1).
  uint32_t quantity = 0;
  // Labels stored with the hold and returned in every Hold (and HoldEvent).
  std::map<std::string, std::string> labels;
  // The scope's limits for this placement (with `scope` only); unset: the server's rules.
  std::optional<orderhold::v1::ScopeLimits> scope_limits;
  // The class of the scope's runtime rule placed under (with `scope` only; PERMISSION_DENIED
  // unless the caller is among its principals); "" = the rule's own per-person limits.
  std::string limit_class;
};

// What an ExtendHold carries besides the ids. A default-constructed value asks for the server's
// --default_ttl from now, counted as a new extension. Sent as given; the server validates
// (INVALID_ARGUMENT naming the field).
struct ExtendHoldOptions {
  // The wanted time left from now; unset: the server's --default_ttl. The new expiry is
  // max(expire_time, min(now + ttl, max_expire_time)): never shorter, never past the cap.
  std::optional<absl::Duration> ttl;
  // Makes a retry count once against the server's --max_extensions: unique per attempt (a UUID),
  // the same on its retries; "" = none (every call that moves the expiry counts).
  std::string request_id;
};

// Converts an absl::Duration to a google.protobuf.Duration. Seconds and nanos carry the same sign,
// as the proto requires, so negative durations round-trip (e.g. -1.5s -> {seconds: -1, nanos:
// -500000000}); sub-nanosecond parts are truncated toward zero. Durations beyond the proto's range
// (+-315,576,000,000 s, including absl::InfiniteDuration()) are clamped to that range.
google::protobuf::Duration ToProtoDuration(absl::Duration d);

// The inverse conversions, for reading Hold.remaining and Hold.expire_time.
absl::Duration FromProtoDuration(const google::protobuf::Duration& d);
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t);

// Converts a finite absl::Time to a google.protobuf.Timestamp (seconds floored, nanos 0 to
// 999,999,999, as the proto requires; sub-nanosecond parts are dropped), e.g. for
// ScopeRule.open_time. The caller keeps infinite times out.
google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);

struct ClientOptions {
  // Deadline applied to every call, measured from when the call starts. Must be positive; a call
  // that does not finish in time fails with DEADLINE_EXCEEDED.
  absl::Duration timeout = absl::Seconds(5);
  // An operator's tenant (a server with --tenants): sent as the `orderhold-tenant` header of
  // every call. Empty: none (an operator then acts in no tenant; a tenant's caller in its own).
  std::string tenant;
};

class OrderHoldClient {
 public:
  // Wraps an existing stub. Tests inject a fake StubInterface here; `stub` must not be null.
  // `health` (may be null: Health() then fails) is the grpc.health.v1 stub of the same server.
  OrderHoldClient(std::shared_ptr<orderhold::v1::OrderHold::StubInterface> stub,
                  ClientOptions options,
                  std::shared_ptr<grpc::health::v1::Health::StubInterface> health = nullptr);

  // Creates a client on a new channel to `target`, any gRPC target string ("host:port",
  // "dns:///host:port", "unix:/path"): plaintext, or TLS / mutual TLS as `tls` says (NewChannel
  // in client/channel.h). The channel connects lazily: an unreachable server, or a TLS handshake
  // that fails (wrong CA, a server that wants a client certificate), surfaces as UNAVAILABLE (or
  // DEADLINE_EXCEEDED) on the first call. Errors: INVALID_ARGUMENT naming the flag when a TLS
  // file cannot be read or a client certificate comes without its key (or the reverse).
  static absl::StatusOr<std::unique_ptr<OrderHoldClient>> Create(const std::string& target,
                                                                 const TlsOptions& tls,
                                                                 ClientOptions options);

  // Create on a plaintext channel, which cannot fail.
  static std::unique_ptr<OrderHoldClient> Connect(const std::string& target, ClientOptions options);

  // Places a hold on one of `user_id`'s slots for `order_id`, living `ttl` (unset: the server's
  // --default_ttl, 30m). The ttl is sent as given, negative or zero included, so the server's
  // validation applies (1 ms to --max_ttl, else INVALID_ARGUMENT naming `ttl`). Placing a live
  // order_id again returns the existing hold with created = false and does not extend it.
  // Errors: INVALID_ARGUMENT, RESOURCE_EXHAUSTED (a limit would be exceeded: the user's holds or
  // units, or the scope's; GetErrorDetails says which), ALREADY_EXISTS (the live hold of
  // `order_id` has another scope, quantity or labels), FAILED_PRECONDITION (the order's hold
  // already ended, as PAID, CANCELLED or EXPIRED: an order is held at most once), UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::PlaceHoldResponse> PlaceHold(
      absl::string_view user_id, absl::string_view order_id,
      std::optional<absl::Duration> ttl = std::nullopt) const;
  // The same with a scope, quantity, labels or scope limits (PlaceHoldOptions).
  absl::StatusOr<orderhold::v1::PlaceHoldResponse> PlaceHold(absl::string_view user_id,
                                                             absl::string_view order_id,
                                                             const PlaceHoldOptions& options) const;

  // Pays (ends as PAID) the live hold for (user_id, order_id); returns it as it was just before,
  // its `remaining` being what was left. A retry of a successful Pay is OK with already_paid.
  // `payment_reference` ("" = none) is kept with the outcome: a retry with the same is
  // already_paid, with another FAILED_PRECONDITION (ErrorInfo PAID_WITH_OTHER_REFERENCE).
  // Errors: NOT_FOUND (unknown order), FAILED_PRECONDITION (it ended CANCELLED or EXPIRED, or was
  // paid with another reference), INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::PayResponse> Pay(absl::string_view user_id,
                                                 absl::string_view order_id,
                                                 absl::string_view payment_reference = "") const;

  // Gives back `units` of the PAID hold for (user_id, order_id) (a refund of some of its tickets):
  // they go back to the scope's capacity and to the user's purchases under the scope's runtime
  // rule, and one HoldEvent with outcome RETURNED (HoldEvent.returned_units) is appended; the hold
  // stays PAID. `request_id` (required: the refund's id, the same on its retries) makes a retry
  // answer the first return again with already_returned and change nothing, whatever its `units`.
  // Returns the units given back, the hold's total returned, the user's purchase-cap usage in the
  // scope (when it has a runtime rule) and the hold as paid. `units` and `request_id` are sent as
  // given; the server validates them.
  // Errors: INVALID_ARGUMENT (user_id, order_id, units 0, request_id), NOT_FOUND (unknown order, or
  // paid longer ago than --outcome_retention), FAILED_PRECONDITION (the hold is live or ended
  // CANCELLED or EXPIRED; more units than it has left, ErrorInfo RETURN_EXCEEDS_QUANTITY; more
  // than 100 returns, TOO_MANY_RETURNS), UNAVAILABLE, DEADLINE_EXCEEDED (the return may have been
  // made: retry with the same request_id).
  absl::StatusOr<orderhold::v1::ReturnUnitsResponse> ReturnUnits(
      absl::string_view user_id, absl::string_view order_id, uint32_t units,
      absl::string_view request_id) const;

  // Cancels (ends as CANCELLED) the live hold for (user_id, order_id). A retry is OK with
  // already_cancelled. Errors: NOT_FOUND, FAILED_PRECONDITION (it ended PAID or EXPIRED),
  // INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::CancelHoldResponse> CancelHold(absl::string_view user_id,
                                                               absl::string_view order_id) const;

  // Extends the live hold for (user_id, order_id) to now + `ttl` (unset: the server's
  // --default_ttl), at most to its Hold.max_expire_time (the lifetime cap fixed when it was
  // placed), never shortening it; "now" is the Redis server's time, millisecond precision. The ttl
  // is sent as given, negative or zero included (the server's bounds apply: 1 ms to --max_ttl).
  // The response says whether the expiry moved (`extended`), whether the cap cut the request
  // (`capped`), and, when the server limits extensions (--max_extensions > 0), how many are left
  // (`has_extensions_left()`). Repeating a call is safe: it never passes the cap, and a call with
  // the `request_id` of a counted one does not count again. An extension appends no HoldEvent.
  // Errors: RESOURCE_EXHAUSTED (the hold has used its --max_extensions; GetErrorDetails:
  // QuotaFailure subject "hold/extensions", ErrorInfo reason HOLD_EXTENSION_LIMIT),
  // FAILED_PRECONDITION (the hold already ended: PAID, CANCELLED, or EXPIRED, which this call
  // records if the reaper has not yet), NOT_FOUND (unknown order, or ended longer ago than
  // --outcome_retention), INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::ExtendHoldResponse> ExtendHold(
      absl::string_view user_id, absl::string_view order_id,
      std::optional<absl::Duration> ttl = std::nullopt) const;
  // The same with a request_id (ExtendHoldOptions).
  absl::StatusOr<orderhold::v1::ExtendHoldResponse> ExtendHold(
      absl::string_view user_id, absl::string_view order_id,
      const ExtendHoldOptions& options) const;

  // Reads the hold for (user_id, order_id), live or ended; changes nothing. Live: `outcome` is
  // HOLD_OUTCOME_UNSPECIFIED and Hold.remaining is set. Ended: the hold as it ended, its `outcome`
  // and `end_time` (a hold past its expire_time that the reaper has not removed yet reads as
  // EXPIRED at its expire_time). Errors: NOT_FOUND (unknown order, or ended longer ago than
  // --outcome_retention), INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::GetHoldResponse> GetHold(absl::string_view user_id,
                                                         absl::string_view order_id) const;

  // Releases (ends as CANCELLED, each with its HoldEvent) every live hold of `user_id`, or only
  // those of `scope` when it is not empty, in one atomic step; returns them, earliest expire_time
  // first, each Hold.remaining being what it had left. Empty (not NOT_FOUND) when nothing was live,
  // so a retry is safe. PAID holds are untouched. Errors: INVALID_ARGUMENT, UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::ReleaseHoldsResponse> ReleaseHolds(
      absl::string_view user_id, absl::string_view scope = "") const;

  // Streams hold events for one consumer of a group, calling `on_event` for each on this thread,
  // until `on_event` returns false (the call is then cancelled and OK is returned), the server
  // ends the stream (UNAVAILABLE at server shutdown: reconnect to resume), or `context` is
  // cancelled from another thread (context.TryCancel(): CANCELLED). No deadline is set (a watch
  // is long-lived) unless the caller set one on `context`. Errors: INVALID_ARGUMENT,
  // UNAVAILABLE, DEADLINE_EXCEEDED (the caller's deadline, or Redis did not answer the server in
  // time), CANCELLED.
  absl::Status WatchHoldEvents(const orderhold::v1::WatchHoldEventsRequest& request,
                               absl::FunctionRef<bool(const orderhold::v1::HoldEvent&)> on_event,
                               grpc::ClientContext& context) const;

  // Acks events of `group` (HoldEvent.event_id values); yields how many were pending.
  // Errors: INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::AckHoldEventsResponse> AckHoldEvents(
      absl::string_view group, const std::vector<std::string>& event_ids) const;

  // Deletes consumer group `group` (an operator's call): see the rpc in orderhold.proto.
  // Errors: INVALID_ARGUMENT, NOT_FOUND (no such group), PERMISSION_DENIED, UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::DeleteConsumerGroupResponse> DeleteConsumerGroup(
      absl::string_view group) const;

  // The first page (up to 100) of `user_id`'s live holds, earliest expire_time first, or only
  // those of `scope` when it is not empty; empty (not NOT_FOUND) when there are none. The response
  // also carries the usage of the user's limits (and of the scope's, with `scope`) over all of
  // them, and next_page_token when more follow. Errors: INVALID_ARGUMENT, UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::ListHoldsResponse> ListHolds(absl::string_view user_id,
                                                             absl::string_view scope = "") const;
  // One page as `request` asks (page_size, page_token: AIP-158).
  absl::StatusOr<orderhold::v1::ListHoldsResponse> ListHolds(
      const orderhold::v1::ListHoldsRequest& request) const;
  // Every page (1,000 holds each), the holds of all in one response (the first page's usage).
  // RESOURCE_EXHAUSTED past `max_pages` pages; else ListHolds' errors.
  absl::StatusOr<orderhold::v1::ListHoldsResponse> ListAllHolds(absl::string_view user_id,
                                                                absl::string_view scope = "",
                                                                int max_pages = 100) const;

  // A scope across every user (an event): its live holds and units, the totals in force
  // (total_max_holds, total_max_units of the server's --scope_limits rule) and its earliest
  // expiry. Errors: INVALID_ARGUMENT, FAILED_PRECONDITION (the server's Redis is a Cluster),
  // PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::GetScopeUsageResponse> GetScopeUsage(absl::string_view scope) const;
  // One page of the scope's live holds across users (page_size, page_token: AIP-158), with its
  // usage. Errors as GetScopeUsage, and INVALID_ARGUMENT for a bad page_token.
  absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> ListScopeHolds(
      const orderhold::v1::ListScopeHoldsRequest& request) const;
  // Every page (1,000 holds each) in one response (the last page's usage). RESOURCE_EXHAUSTED
  // past `max_pages` pages; else ListScopeHolds' errors.
  absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> ListAllScopeHolds(
      absl::string_view scope, int max_pages = 100) const;
  // Ends every live hold of the scope, across users, as CANCELLED (an operator's call); returns
  // the first 100 and how many. Errors as GetScopeUsage.
  absl::StatusOr<orderhold::v1::ReleaseScopeHoldsResponse> ReleaseScopeHolds(
      absl::string_view scope) const;

  // The runtime rules of exact scopes (operators' calls; a standalone or Sentinel-managed Redis
  // only, else FAILED_PRECONDITION): see the rpcs in orderhold.proto.
  // Creates or replaces `rule` (rule.scope required; rule.etag "" = whatever is there) and returns
  // it as stored, with its new etag and effective_state. Errors: INVALID_ARGUMENT naming the
  // field, ABORTED (a stale etag: nothing changed), FAILED_PRECONDITION, PERMISSION_DENIED,
  // UNAVAILABLE, DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::ScopeRule> PutScopeRule(const orderhold::v1::ScopeRule& rule) const;
  // The rule of `scope`. Errors as PutScopeRule, and NOT_FOUND (no runtime rule: the server's
  // --scope_limits file applies), not ABORTED.
  absl::StatusOr<orderhold::v1::ScopeRule> GetScopeRule(absl::string_view scope) const;
  // One page of the tenant's rules (page_size, page_token: AIP-158). Errors: INVALID_ARGUMENT
  // (page_size, page_token), FAILED_PRECONDITION, PERMISSION_DENIED, UNAVAILABLE,
  // DEADLINE_EXCEEDED.
  absl::StatusOr<orderhold::v1::ListScopeRulesResponse> ListScopeRules(
      const orderhold::v1::ListScopeRulesRequest& request) const;
  // Removes the rule of `scope` (with an `etag`, only if it is still the rule's). Errors as
  // PutScopeRule, and NOT_FOUND (no rule).
  absl::StatusOr<orderhold::v1::DeleteScopeRuleResponse> DeleteScopeRule(
      absl::string_view scope, absl::string_view etag = "") const;
  // Sets the rule of `scope` to CLOSED (creating one without limits when there is none), then,
  // with `release_holds`, ends every live hold of the scope as CANCELLED; returns the rule as
  // closed and how many holds were released. Errors: INVALID_ARGUMENT, FAILED_PRECONDITION,
  // PERMISSION_DENIED, UNAVAILABLE, DEADLINE_EXCEEDED (the scope may be closed and part of its
  // holds released: call it again).
  absl::StatusOr<orderhold::v1::CloseScopeResponse> CloseScope(absl::string_view scope,
                                                               bool release_holds = false) const;

  // Asks the server's standard grpc.health.v1 service (Check) about `service`: "" or
  // "orderhold.v1.OrderHold" (SERVING while Redis answers: readiness) or "liveness" (SERVING
  // whenever the server runs). Returns the status the server reports (SERVING, NOT_SERVING).
  // Errors: NOT_FOUND (the server knows no such service), UNAVAILABLE, DEADLINE_EXCEEDED;
  // FAILED_PRECONDITION for a client made from a stub without `health`.
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      absl::string_view service) const;

 private:
  const std::shared_ptr<orderhold::v1::OrderHold::StubInterface> stub_;
  const std::shared_ptr<grpc::health::v1::Health::StubInterface> health_;
  const ClientOptions options_;
};

}  // namespace orderhold::client

#endif  // ORDERHOLD_CLIENT_ORDERHOLD_CLIENT_H_
