#include "server/grpc/orderhold_service.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/time/clock.h"

namespace orderhold::grpc_api {
namespace {

using metrics::Method;

void SetTimestamp(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t ms = absl::ToUnixMillis(time);  // holds have millisecond precision
  int64_t seconds = ms / 1000, millis = ms % 1000;
  if (millis < 0) seconds -= 1, millis += 1000;
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(millis * 1000000));
}

void SetDuration(absl::Duration duration, google::protobuf::Duration* out) {
  const int64_t ms = absl::ToInt64Milliseconds(duration);  // truncates toward zero
  out->set_seconds(ms / 1000);                             // same sign as nanos
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
}

void SetHold(const domain::Hold& hold, absl::Time now, orderhold::v1::Hold* out) {
  out->set_user_id(hold.user_id);
  out->set_order_id(hold.order_id);
  SetTimestamp(hold.expire_time, out->mutable_expire_time());
  SetDuration(hold.expire_time - now, out->mutable_remaining());
}

// A google.protobuf.Duration as absl, or INVALID_ARGUMENT naming `ttl` when the message breaks
// the Duration rules (seconds within +-315576000000, |nanos| < 1e9, same sign).
absl::StatusOr<absl::Duration> TtlFromProto(const google::protobuf::Duration& ttl) {
  const int64_t seconds = ttl.seconds();
  const int32_t nanos = ttl.nanos();
  if (seconds < -315576000000 || seconds > 315576000000 || nanos <= -1000000000 ||
      nanos >= 1000000000 || (seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError("ttl: not a valid google.protobuf.Duration");
  }
  return absl::Seconds(seconds) + absl::Nanoseconds(nanos);
}

store::CallOptions OptionsFor(const grpc::CallbackServerContext* context) {
  store::CallOptions options;
  options.deadline = absl::FromChrono(context->deadline());
  return options;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

OrderHoldService::OrderHoldService(domain::HoldService& holds, metrics::Metrics& metrics)
    : holds_(holds), metrics_(metrics) {}

grpc::ServerUnaryReactor* OrderHoldService::PlaceHold(
    grpc::CallbackServerContext* context, const orderhold::v1::PlaceHoldRequest* request,
    orderhold::v1::PlaceHoldResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  auto finish = [this, reactor, start](const absl::Status& status) {
    metrics_.RecordRequest(Method::kPlaceHold, status.code(), absl::Now() - start);
    reactor->Finish(ToGrpcStatus(status));
  };
  std::optional<absl::Duration> ttl;
  if (request->has_ttl()) {
    absl::StatusOr<absl::Duration> parsed = TtlFromProto(request->ttl());
    if (!parsed.ok()) {
      metrics_.RecordRejected(metrics::RejectReason::kInvalidArgument);
      finish(parsed.status());
      return reactor;
    }
    ttl = *parsed;
  }
  holds_.PlaceHold(domain::PlaceHoldCommand{request->user_id(), request->order_id(), ttl},
                   OptionsFor(context),
                   [response, finish](absl::StatusOr<domain::PlaceHoldReply> reply) {
                     if (reply.ok()) {
                       SetHold(reply->hold, reply->now, response->mutable_hold());
                       response->set_created(reply->created);
                       response->set_active_holds(static_cast<uint32_t>(reply->active_holds));
                       response->set_max_holds(static_cast<uint32_t>(reply->max_holds));
                     }
                     finish(reply.status());
                   });
  return reactor;
}

grpc::ServerUnaryReactor* OrderHoldService::Pay(grpc::CallbackServerContext* context,
                                                const orderhold::v1::PayRequest* request,
                                                orderhold::v1::PayResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  holds_.Pay(request->user_id(), request->order_id(), OptionsFor(context),
             [this, reactor, start, response](absl::StatusOr<domain::PayReply> reply) {
               if (reply.ok()) SetHold(reply->hold, reply->now, response->mutable_hold());
               metrics_.RecordRequest(Method::kPay, reply.status().code(), absl::Now() - start);
               reactor->Finish(ToGrpcStatus(reply.status()));
             });
  return reactor;
}

grpc::ServerUnaryReactor* OrderHoldService::ListHolds(
    grpc::CallbackServerContext* context, const orderhold::v1::ListHoldsRequest* request,
    orderhold::v1::ListHoldsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  holds_.ListHolds(request->user_id(), OptionsFor(context),
                   [this, reactor, start, response](absl::StatusOr<domain::ListHoldsReply> reply) {
                     if (reply.ok()) {
                       for (const domain::Hold& hold : reply->holds) {
                         SetHold(hold, reply->now, response->add_holds());
                       }
                       response->set_max_holds(static_cast<uint32_t>(reply->max_holds));
                     }
                     metrics_.RecordRequest(Method::kListHolds, reply.status().code(),
                                            absl::Now() - start);
                     reactor->Finish(ToGrpcStatus(reply.status()));
                   });
  return reactor;
}

}  // namespace orderhold::grpc_api
