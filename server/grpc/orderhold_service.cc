#include "server/grpc/orderhold_service.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "server/grpc/lenient_requests.pb.h"

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

// Parses request bytes into a lenient mirror. INVALID_ARGUMENT when they do not decode.
absl::Status Parse(const grpc::ByteBuffer& request, absl::string_view type,
                   google::protobuf::Message* out) {
  grpc::ByteBuffer copy(request);  // shares the slices; the reader consumes its buffer
  grpc::ProtoBufferReader reader(&copy);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat("request: not a valid ", type));
  }
  return absl::OkStatus();
}

absl::Status Serialize(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  return SerializeToByteBuffer(message, out);
}

absl::Status NoEventLog() {
  return absl::UnavailableError("hold events need the Redis store (this server runs --store=noop)");
}

// Finishes `reactor` with a status and records the call's metrics. Copyable; call it once.
auto Finisher(metrics::Metrics& metrics, grpc::ServerUnaryReactor* reactor, Method method) {
  return [&metrics, reactor, method, start = absl::Now()](const absl::Status& status) {
    metrics.RecordRequest(method, status.code(), absl::Now() - start);
    reactor->Finish(ToGrpcStatus(status));
  };
}

store::CallOptions OptionsFor(const grpc::CallbackServerContext* context) {
  store::CallOptions options;
  options.deadline = absl::FromChrono(context->deadline());
  return options;
}

}  // namespace

absl::Status SerializeToByteBuffer(const google::protobuf::Message& message,
                                   grpc::ByteBuffer* out) {
  bool own_buffer = false;
  grpc::Status status = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, out, &own_buffer);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return absl::OkStatus();
}

void EventToProto(const store::StoredEvent& event, orderhold::v1::HoldEvent* out) {
  out->set_event_id(store::FormatEventId(event.partition, event.stream_id));
  orderhold::v1::Hold* hold = out->mutable_hold();
  hold->set_user_id(event.user_id);
  hold->set_order_id(event.order_id);
  SetTimestamp(event.end.expire_time, hold->mutable_expire_time());
  out->set_outcome(static_cast<orderhold::v1::HoldOutcome>(event.end.outcome));
  SetTimestamp(event.end.end_time, out->mutable_end_time());
  out->set_delivery_count(static_cast<uint32_t>(event.delivery_count));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

OrderHoldService::OrderHoldService(domain::HoldService& holds, domain::EventService* events,
                                   metrics::Metrics& metrics, absl::Duration idle_poll)
    : holds_(holds), events_(events), metrics_(metrics), idle_poll_(idle_poll) {}

grpc::ServerUnaryReactor* OrderHoldService::PlaceHold(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = Finisher(metrics_, reactor, Method::kPlaceHold);
  orderhold::internal::PlaceHoldRequest parsed;
  absl::Status status = Parse(*request, "orderhold.v1.PlaceHoldRequest", &parsed);
  std::optional<absl::Duration> ttl;
  if (status.ok() && parsed.has_ttl()) {
    absl::StatusOr<absl::Duration> converted = TtlFromProto(parsed.ttl());
    status = converted.status();
    if (converted.ok()) ttl = *converted;
  }
  if (!status.ok()) {
    metrics_.RecordRejected(metrics::RejectReason::kInvalidArgument);
    finish(status);
    return reactor;
  }
  holds_.PlaceHold(domain::PlaceHoldCommand{std::move(*parsed.mutable_user_id()),
                                            std::move(*parsed.mutable_order_id()), ttl},
                   OptionsFor(context),
                   [response, finish](absl::StatusOr<domain::PlaceHoldReply> reply) {
                     if (!reply.ok()) return finish(reply.status());
                     orderhold::v1::PlaceHoldResponse out;
                     SetHold(reply->hold, reply->now, out.mutable_hold());
                     out.set_created(reply->created);
                     out.set_active_holds(static_cast<uint32_t>(reply->active_holds));
                     out.set_max_holds(static_cast<uint32_t>(reply->max_holds));
                     finish(Serialize(out, response));
                   });
  return reactor;
}

grpc::ServerUnaryReactor* OrderHoldService::Pay(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = Finisher(metrics_, reactor, Method::kPay);
  orderhold::internal::PayRequest parsed;
  if (absl::Status status = Parse(*request, "orderhold.v1.PayRequest", &parsed); !status.ok()) {
    finish(status);
    return reactor;
  }
  holds_.Pay(std::move(*parsed.mutable_user_id()), std::move(*parsed.mutable_order_id()),
             OptionsFor(context), [response, finish](absl::StatusOr<domain::PayReply> reply) {
               if (!reply.ok()) return finish(reply.status());
               orderhold::v1::PayResponse out;
               SetHold(reply->hold, reply->now, out.mutable_hold());
               out.set_already_paid(reply->already_paid);
               finish(Serialize(out, response));
             });
  return reactor;
}

grpc::ServerUnaryReactor* OrderHoldService::ListHolds(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = Finisher(metrics_, reactor, Method::kListHolds);
  orderhold::internal::ListHoldsRequest parsed;
  if (absl::Status status = Parse(*request, "orderhold.v1.ListHoldsRequest", &parsed);
      !status.ok()) {
    finish(status);
    return reactor;
  }
  holds_.ListHolds(std::move(*parsed.mutable_user_id()), OptionsFor(context),
                   [response, finish](absl::StatusOr<domain::ListHoldsReply> reply) {
                     if (!reply.ok()) return finish(reply.status());
                     orderhold::v1::ListHoldsResponse out;
                     for (const domain::Hold& hold : reply->holds) {
                       SetHold(hold, reply->now, out.add_holds());
                     }
                     out.set_max_holds(static_cast<uint32_t>(reply->max_holds));
                     finish(Serialize(out, response));
                   });
  return reactor;
}

grpc::ServerUnaryReactor* OrderHoldService::CancelHold(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = Finisher(metrics_, reactor, Method::kCancelHold);
  orderhold::internal::CancelHoldRequest parsed;
  if (absl::Status status = Parse(*request, "orderhold.v1.CancelHoldRequest", &parsed);
      !status.ok()) {
    finish(status);
    return reactor;
  }
  holds_.Cancel(std::move(*parsed.mutable_user_id()), std::move(*parsed.mutable_order_id()),
                OptionsFor(context), [response, finish](absl::StatusOr<domain::CancelReply> reply) {
                  if (!reply.ok()) return finish(reply.status());
                  orderhold::v1::CancelHoldResponse out;
                  SetHold(reply->hold, reply->now, out.mutable_hold());
                  out.set_already_cancelled(reply->already_cancelled);
                  finish(Serialize(out, response));
                });
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* OrderHoldService::WatchHoldEvents(
    grpc::CallbackServerContext* /*context*/, const grpc::ByteBuffer* request) {
  orderhold::internal::WatchHoldEventsRequest parsed;
  absl::Status status = Parse(*request, "orderhold.v1.WatchHoldEventsRequest", &parsed);
  domain::WatchSpec spec;
  if (status.ok() && events_ == nullptr) status = NoEventLog();
  if (status.ok()) {
    spec.group = std::move(*parsed.mutable_consumer_group());
    spec.consumer = std::move(*parsed.mutable_consumer());
    for (int outcome : parsed.outcomes()) {
      if (outcome < 1 || outcome > 3) {
        status = absl::InvalidArgumentError(
            absl::StrCat("outcomes: ", outcome, " is not PAID, CANCELLED or EXPIRED"));
        break;
      }
      spec.outcomes.insert(static_cast<store::HoldOutcome>(outcome));
    }
    if (parsed.start_position() < 0 || parsed.start_position() > 2) {
      status = absl::InvalidArgumentError("start_position: must be EARLIEST or LATEST");
    }
    spec.start = parsed.start_position() == orderhold::v1::LATEST ? store::GroupStart::kLatest
                                                                  : store::GroupStart::kEarliest;
  }
  if (!status.ok()) {
    // A reactor that only finishes: the call ends with `status`.
    class Failed final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
     public:
      explicit Failed(const grpc::Status& status) { Finish(status); }
      void OnDone() override { delete this; }
    };
    metrics_.RecordRequest(Method::kWatchHoldEvents, status.code(), absl::ZeroDuration());
    return new Failed(ToGrpcStatus(status));
  }
  return new HoldEventWatch(*events_, metrics_, watches_, std::move(spec), idle_poll_);
}

grpc::ServerUnaryReactor* OrderHoldService::AckHoldEvents(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto finish = Finisher(metrics_, reactor, Method::kAckHoldEvents);
  orderhold::internal::AckHoldEventsRequest parsed;
  absl::Status status = Parse(*request, "orderhold.v1.AckHoldEventsRequest", &parsed);
  if (status.ok() && events_ == nullptr) status = NoEventLog();
  if (!status.ok()) {
    finish(status);
    return reactor;
  }
  std::vector<std::string> ids(parsed.event_ids().begin(), parsed.event_ids().end());
  events_->Ack(std::move(*parsed.mutable_consumer_group()), ids, OptionsFor(context),
               [response, finish](absl::StatusOr<int64_t> acked) {
                 if (!acked.ok()) return finish(acked.status());
                 orderhold::v1::AckHoldEventsResponse out;
                 out.set_acked(static_cast<uint32_t>(*acked));
                 finish(Serialize(out, response));
               });
  return reactor;
}

}  // namespace orderhold::grpc_api
