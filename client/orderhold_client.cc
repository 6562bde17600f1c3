#include "client/orderhold_client.h"

#include <grpcpp/client_context.h>

#include <cstdint>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/status.pb.h"

namespace orderhold::client {
namespace {

using Stub = orderhold::v1::OrderHold::StubInterface;

// The range google.protobuf.Duration allows: about 10,000 years either way.
constexpr int64_t kMaxProtoDurationSeconds = 315'576'000'000;

// One unary call of `rpc` on `stub` with a deadline of now + options.timeout (and the
// orderhold-tenant header of options.tenant): the response, or the call's status as an
// absl::Status.
template <typename StubT, typename Request, typename Response>
absl::StatusOr<Response> CallUnary(StubT& stub,
                                   grpc::Status (StubT::*rpc)(grpc::ClientContext*, const Request&,
                                                              Response*),
                                   const Request& request, const ClientOptions& options) {
  grpc::ClientContext context;
  // ToChronoTime saturates, so an infinite timeout becomes "no deadline" rather than overflowing.
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  if (!options.tenant.empty()) context.AddMetadata("orderhold-tenant", options.tenant);
  Response response;
  if (absl::Status status = FromGrpcStatus((stub.*rpc)(&context, request, &response));
      !status.ok()) {
    return status;
  }
  return response;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering (0..16).
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  if (status.error_details().empty()) return out;
  google::rpc::Status details;
  // Details are an addition to the code and message: unreadable ones are not an error of the call.
  if (!details.ParseFromString(status.error_details())) return out;
  for (const google::protobuf::Any& any : details.details()) {
    out.SetPayload(any.type_url(), absl::Cord(any.value()));
  }
  return out;
}

namespace {

// The payload of `status` that holds a `Message`, parsed; nullopt when absent or unparsable.
template <typename Message>
std::optional<Message> DetailOf(const absl::Status& status) {
  const auto payload = status.GetPayload(  // absl::optional: not std:: in Debian's build
      absl::StrCat(kErrorDetailTypeUrlPrefix, Message::descriptor()->full_name()));
  if (!payload.has_value()) return std::nullopt;
  Message message;
  if (!message.ParseFromString(std::string(*payload))) return std::nullopt;
  return message;
}

}  // namespace

ErrorDetails GetErrorDetails(const absl::Status& status) {
  ErrorDetails details;
  details.quota_failure = DetailOf<google::rpc::QuotaFailure>(status);
  details.error_info = DetailOf<google::rpc::ErrorInfo>(status);
  details.retry_info = DetailOf<google::rpc::RetryInfo>(status);
  return details;
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  const absl::Duration max = absl::Seconds(kMaxProtoDurationSeconds);
  if (d > max) d = max;
  if (d < -max) d = -max;
  // IDivDuration truncates toward zero, so the remainder has the sign of `d` (or is zero): seconds
  // and nanos never disagree in sign.
  absl::Duration rem;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &rem);
  google::protobuf::Duration out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rem)));
  return out;
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  // ToUnixSeconds floors, so the rest is from 0 to just under a second, before 1970 too.
  const int64_t seconds = absl::ToUnixSeconds(t);
  google::protobuf::Timestamp out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return out;
}

OrderHoldClient::OrderHoldClient(std::shared_ptr<orderhold::v1::OrderHold::StubInterface> stub,
                                 ClientOptions options,
                                 std::shared_ptr<grpc::health::v1::Health::StubInterface> health)
    : stub_(std::move(stub)), health_(std::move(health)), options_(options) {}

absl::StatusOr<std::unique_ptr<OrderHoldClient>> OrderHoldClient::Create(const std::string& target,
                                                                         const TlsOptions& tls,
                                                                         ClientOptions options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = NewChannel(target, tls);
  if (!channel.ok()) return channel.status();
  return std::make_unique<OrderHoldClient>(orderhold::v1::OrderHold::NewStub(*channel), options,
                                           grpc::health::v1::Health::NewStub(*channel));
}

std::unique_ptr<OrderHoldClient> OrderHoldClient::Connect(const std::string& target,
                                                          ClientOptions options) {
  // Plaintext: nothing to read, so Create cannot fail.
  return *Create(target, TlsOptions(), options);
}

absl::StatusOr<orderhold::v1::PlaceHoldResponse> OrderHoldClient::PlaceHold(
    absl::string_view user_id, absl::string_view order_id,
    std::optional<absl::Duration> ttl) const {
  PlaceHoldOptions options;
  options.ttl = ttl;
  return PlaceHold(user_id, order_id, options);
}

absl::StatusOr<orderhold::v1::PlaceHoldResponse> OrderHoldClient::PlaceHold(
    absl::string_view user_id, absl::string_view order_id, const PlaceHoldOptions& options) const {
  orderhold::v1::PlaceHoldRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  if (options.ttl.has_value()) *request.mutable_ttl() = ToProtoDuration(*options.ttl);
  request.set_scope(options.scope);
  request.set_quantity(options.quantity);
  for (const auto& [key, value] : options.labels) (*request.mutable_labels())[key] = value;
  if (options.scope_limits.has_value()) *request.mutable_scope_limits() = *options.scope_limits;
  request.set_limit_class(options.limit_class);
  return CallUnary(*stub_, &Stub::PlaceHold, request, options_);
}

absl::StatusOr<orderhold::v1::PayResponse> OrderHoldClient::Pay(
    absl::string_view user_id, absl::string_view order_id,
    absl::string_view payment_reference) const {
  orderhold::v1::PayRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  request.set_payment_reference(std::string(payment_reference));
  return CallUnary(*stub_, &Stub::Pay, request, options_);
}

absl::StatusOr<orderhold::v1::ReturnUnitsResponse> OrderHoldClient::ReturnUnits(
    absl::string_view user_id, absl::string_view order_id, uint32_t units,
    absl::string_view request_id) const {
  orderhold::v1::ReturnUnitsRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  request.set_units(units);
  request.set_request_id(std::string(request_id));
  return CallUnary(*stub_, &Stub::ReturnUnits, request, options_);
}

absl::StatusOr<orderhold::v1::CancelHoldResponse> OrderHoldClient::CancelHold(
    absl::string_view user_id, absl::string_view order_id) const {
  orderhold::v1::CancelHoldRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  return CallUnary(*stub_, &Stub::CancelHold, request, options_);
}

absl::StatusOr<orderhold::v1::ExtendHoldResponse> OrderHoldClient::ExtendHold(
    absl::string_view user_id, absl::string_view order_id,
    std::optional<absl::Duration> ttl) const {
  ExtendHoldOptions options;
  options.ttl = ttl;
  return ExtendHold(user_id, order_id, options);
}

absl::StatusOr<orderhold::v1::ExtendHoldResponse> OrderHoldClient::ExtendHold(
    absl::string_view user_id, absl::string_view order_id, const ExtendHoldOptions& options) const {
  orderhold::v1::ExtendHoldRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  if (options.ttl.has_value()) *request.mutable_ttl() = ToProtoDuration(*options.ttl);
  request.set_request_id(options.request_id);
  return CallUnary(*stub_, &Stub::ExtendHold, request, options_);
}

absl::StatusOr<orderhold::v1::GetHoldResponse> OrderHoldClient::GetHold(
    absl::string_view user_id, absl::string_view order_id) const {
  orderhold::v1::GetHoldRequest request;
  request.set_user_id(std::string(user_id));
  request.set_order_id(std::string(order_id));
  return CallUnary(*stub_, &Stub::GetHold, request, options_);
}

absl::StatusOr<orderhold::v1::ReleaseHoldsResponse> OrderHoldClient::ReleaseHolds(
    absl::string_view user_id, absl::string_view scope) const {
  orderhold::v1::ReleaseHoldsRequest request;
  request.set_user_id(std::string(user_id));
  request.set_scope(std::string(scope));
  return CallUnary(*stub_, &Stub::ReleaseHolds, request, options_);
}

absl::Status OrderHoldClient::WatchHoldEvents(
    const orderhold::v1::WatchHoldEventsRequest& request,
    absl::FunctionRef<bool(const orderhold::v1::HoldEvent&)> on_event,
    grpc::ClientContext& context) const {
  if (!options_.tenant.empty()) context.AddMetadata("orderhold-tenant", options_.tenant);
  std::unique_ptr<grpc::ClientReaderInterface<orderhold::v1::HoldEvent>> reader =
      stub_->WatchHoldEvents(&context, request);
  orderhold::v1::HoldEvent event;
  bool stopped = false;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      stopped = true;
      context.TryCancel();
      break;
    }
  }
  if (stopped) {
    while (reader->Read(&event)) {
    }
    (void)reader->Finish();
    return absl::OkStatus();
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<orderhold::v1::AckHoldEventsResponse> OrderHoldClient::AckHoldEvents(
    absl::string_view group, const std::vector<std::string>& event_ids) const {
  orderhold::v1::AckHoldEventsRequest request;
  request.set_consumer_group(std::string(group));
  for (const std::string& id : event_ids) request.add_event_ids(id);
  return CallUnary(*stub_, &Stub::AckHoldEvents, request, options_);
}

absl::StatusOr<orderhold::v1::DeleteConsumerGroupResponse> OrderHoldClient::DeleteConsumerGroup(
    absl::string_view group) const {
  orderhold::v1::DeleteConsumerGroupRequest request;
  request.set_consumer_group(std::string(group));
  return CallUnary(*stub_, &Stub::DeleteConsumerGroup, request, options_);
}

absl::StatusOr<orderhold::v1::ListHoldsResponse> OrderHoldClient::ListHolds(
    absl::string_view user_id, absl::string_view scope) const {
  orderhold::v1::ListHoldsRequest request;
  request.set_user_id(std::string(user_id));
  request.set_scope(std::string(scope));
  return ListHolds(request);
}

absl::StatusOr<orderhold::v1::ListHoldsResponse> OrderHoldClient::ListHolds(
    const orderhold::v1::ListHoldsRequest& request) const {
  return CallUnary(*stub_, &Stub::ListHolds, request, options_);
}

absl::StatusOr<orderhold::v1::ListHoldsResponse> OrderHoldClient::ListAllHolds(
    absl::string_view user_id, absl::string_view scope, int max_pages) const {
  orderhold::v1::ListHoldsRequest request;
  request.set_user_id(std::string(user_id));
  request.set_scope(std::string(scope));
  request.set_page_size(1000);
  absl::StatusOr<orderhold::v1::ListHoldsResponse> all = ListHolds(request);
  for (int page = 1; all.ok() && !all->next_page_token().empty(); ++page) {
    if (page >= max_pages) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ListHolds: more than ", max_pages,
                       " pages; stopped (raise max_pages or page yourself)"));
    }
    request.set_page_token(all->next_page_token());
    absl::StatusOr<orderhold::v1::ListHoldsResponse> next = ListHolds(request);
    if (!next.ok()) return next.status();
    for (orderhold::v1::Hold& hold : *next->mutable_holds()) *all->add_holds() = std::move(hold);
    all->set_next_page_token(next->next_page_token());
  }
  return all;
}

absl::StatusOr<orderhold::v1::GetScopeUsageResponse> OrderHoldClient::GetScopeUsage(
    absl::string_view scope) const {
  orderhold::v1::GetScopeUsageRequest request;
  request.set_scope(std::string(scope));
  return CallUnary(*stub_, &Stub::GetScopeUsage, request, options_);
}

absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> OrderHoldClient::ListScopeHolds(
    const orderhold::v1::ListScopeHoldsRequest& request) const {
  return CallUnary(*stub_, &Stub::ListScopeHolds, request, options_);
}

absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> OrderHoldClient::ListAllScopeHolds(
    absl::string_view scope, int max_pages) const {
  orderhold::v1::ListScopeHoldsRequest request;
  request.set_scope(std::string(scope));
  request.set_page_size(1000);
  absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> all = ListScopeHolds(request);
  for (int page = 1; all.ok() && !all->next_page_token().empty(); ++page) {
    if (page >= max_pages) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ListScopeHolds: more than ", max_pages,
                       " pages; stopped (raise max_pages or page yourself)"));
    }
    request.set_page_token(all->next_page_token());
    absl::StatusOr<orderhold::v1::ListScopeHoldsResponse> next = ListScopeHolds(request);
    if (!next.ok()) return next.status();
    for (orderhold::v1::Hold& hold : *next->mutable_holds()) *all->add_holds() = std::move(hold);
    all->set_next_page_token(next->next_page_token());
    *all->mutable_usage() = next->usage();
  }
  return all;
}

absl::StatusOr<orderhold::v1::ReleaseScopeHoldsResponse> OrderHoldClient::ReleaseScopeHolds(
    absl::string_view scope) const {
  orderhold::v1::ReleaseScopeHoldsRequest request;
  request.set_scope(std::string(scope));
  return CallUnary(*stub_, &Stub::ReleaseScopeHolds, request, options_);
}

absl::StatusOr<orderhold::v1::ScopeRule> OrderHoldClient::PutScopeRule(
    const orderhold::v1::ScopeRule& rule) const {
  orderhold::v1::PutScopeRuleRequest request;
  *request.mutable_rule() = rule;
  return CallUnary(*stub_, &Stub::PutScopeRule, request, options_);
}

absl::StatusOr<orderhold::v1::ScopeRule> OrderHoldClient::GetScopeRule(
    absl::string_view scope) const {
  orderhold::v1::GetScopeRuleRequest request;
  request.set_scope(std::string(scope));
  return CallUnary(*stub_, &Stub::GetScopeRule, request, options_);
}

absl::StatusOr<orderhold::v1::ListScopeRulesResponse> OrderHoldClient::ListScopeRules(
    const orderhold::v1::ListScopeRulesRequest& request) const {
  return CallUnary(*stub_, &Stub::ListScopeRules, request, options_);
}

absl::StatusOr<orderhold::v1::DeleteScopeRuleResponse> OrderHoldClient::DeleteScopeRule(
    absl::string_view scope, absl::string_view etag) const {
  orderhold::v1::DeleteScopeRuleRequest request;
  request.set_scope(std::string(scope));
  request.set_etag(std::string(etag));
  return CallUnary(*stub_, &Stub::DeleteScopeRule, request, options_);
}

absl::StatusOr<orderhold::v1::CloseScopeResponse> OrderHoldClient::CloseScope(
    absl::string_view scope, bool release_holds) const {
  orderhold::v1::CloseScopeRequest request;
  request.set_scope(std::string(scope));
  request.set_release_holds(release_holds);
  return CallUnary(*stub_, &Stub::CloseScope, request, options_);
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> OrderHoldClient::Health(
    absl::string_view service) const {
  if (health_ == nullptr) {
    return absl::FailedPreconditionError("this client was made from a stub: no health service");
  }
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response =
      CallUnary(*health_, &grpc::health::v1::Health::StubInterface::Check, request, options_);
  if (!response.ok()) return response.status();
  return response->status();
}

}  // namespace orderhold::client
