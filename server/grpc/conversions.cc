#include "server/grpc/conversions.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "server/common/status_macros.h"
#include "server/domain/group_owner.h"
#include "server/domain/tenant.h"

namespace orderhold::grpc_api {
namespace {

// The range google.protobuf.Duration allows: about 10,000 years either way.
constexpr int64_t kMaxProtoDurationSeconds = 315'576'000'000;
constexpr int32_t kNanosPerSecond = 1'000'000'000;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  google::rpc::Status details;
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& value) {
    if (!absl::StartsWith(type_url, domain::kDetailTypeUrlPrefix)) return;
    google::protobuf::Any* any = details.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(value));
  });
  if (details.details_size() == 0) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        std::string(status.message()));
  }
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      details.SerializeAsString());
}

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& bytes, absl::string_view type,
                                 google::protobuf::Message* out) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader consumes its buffer
  grpc::ProtoBufferReader reader(&copy);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    return absl::InvalidArgumentError(absl::StrCat("request: not a valid ", type));
  }
  return absl::OkStatus();
}

absl::Status SerializeToByteBuffer(const google::protobuf::Message& message,
                                   grpc::ByteBuffer* out) {
  bool own_buffer = false;
  grpc::Status status = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, out, &own_buffer);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return absl::OkStatus();
}

void TimestampToProto(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t ms = absl::ToUnixMillis(time);  // holds have millisecond precision
  int64_t seconds = ms / 1000, millis = ms % 1000;
  if (millis < 0) seconds -= 1, millis += 1000;
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(millis * 1000000));
}

void DurationToProto(absl::Duration duration, google::protobuf::Duration* out) {
  const int64_t ms = absl::ToInt64Milliseconds(duration);  // truncates toward zero
  out->set_seconds(ms / 1000);                             // same sign as nanos
  out->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
}

absl::StatusOr<absl::Duration> TtlFromProto(const google::protobuf::Duration& ttl) {
  const int64_t seconds = ttl.seconds();
  const int32_t nanos = ttl.nanos();
  if (seconds < -kMaxProtoDurationSeconds || seconds > kMaxProtoDurationSeconds ||
      nanos <= -kNanosPerSecond || nanos >= kNanosPerSecond || (seconds > 0 && nanos < 0) ||
      (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError("ttl: not a valid google.protobuf.Duration");
  }
  return absl::Seconds(seconds) + absl::Nanoseconds(nanos);
}

absl::StatusOr<domain::PlaceHoldCommand> PlaceHoldCommandFromProto(
    internal::PlaceHoldRequest& request) {
  domain::PlaceHoldCommand command;
  command.user_id = std::move(*request.mutable_user_id());
  command.order_id = std::move(*request.mutable_order_id());
  if (request.has_ttl()) {
    ORDERHOLD_ASSIGN_OR_RETURN(command.ttl, TtlFromProto(request.ttl()));
  }
  command.scope = std::move(*request.mutable_scope());
  command.quantity = request.quantity();
  command.labels.reserve(request.labels_size());
  for (auto& label : *request.mutable_labels()) {
    command.labels.emplace_back(std::move(*label.mutable_key()), std::move(*label.mutable_value()));
  }
  if (request.has_scope_limits()) {
    command.scope_limits =
        domain::ScopeLimits{request.scope_limits().max_holds(), request.scope_limits().max_units()};
  }
  command.limit_class = std::move(*request.mutable_limit_class());
  return command;
}

absl::StatusOr<domain::ExtendHoldCommand> ExtendHoldCommandFromProto(
    internal::ExtendHoldRequest& request) {
  domain::ExtendHoldCommand command;
  command.user_id = std::move(*request.mutable_user_id());
  command.order_id = std::move(*request.mutable_order_id());
  if (request.has_ttl()) {
    ORDERHOLD_ASSIGN_OR_RETURN(command.ttl, TtlFromProto(request.ttl()));
  }
  command.request_id = std::move(*request.mutable_request_id());
  return command;
}

absl::StatusOr<store::HoldOutcome> OutcomeFromProto(int32_t outcome) {
  switch (outcome) {
    case v1::PAID:
      return store::HoldOutcome::kPaid;
    case v1::CANCELLED:
      return store::HoldOutcome::kCancelled;
    case v1::EXPIRED:
      return store::HoldOutcome::kExpired;
    case v1::RETURNED:
      return store::HoldOutcome::kReturned;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("outcomes: ", outcome, " is not PAID, CANCELLED, EXPIRED or RETURNED"));
  }
}

absl::StatusOr<store::GroupStart> StartPositionFromProto(int32_t start_position) {
  switch (start_position) {
    case v1::START_POSITION_UNSPECIFIED:
    case v1::EARLIEST:
      return store::GroupStart::kEarliest;
    case v1::LATEST:
      return store::GroupStart::kLatest;
    default:
      return absl::InvalidArgumentError("start_position: must be EARLIEST or LATEST");
  }
}

absl::StatusOr<domain::WatchSpec> WatchSpecFromProto(internal::WatchHoldEventsRequest& request) {
  domain::WatchSpec spec;
  // start_position first: its error is the one reported when outcomes are bad too.
  ORDERHOLD_ASSIGN_OR_RETURN(spec.start, StartPositionFromProto(request.start_position()));
  for (int32_t value : request.outcomes()) {
    ORDERHOLD_ASSIGN_OR_RETURN(store::HoldOutcome outcome, OutcomeFromProto(value));
    spec.outcomes.insert(outcome);
  }
  spec.group = std::move(*request.mutable_consumer_group());
  spec.consumer = std::move(*request.mutable_consumer());
  return spec;
}

// Ids are shown as their caller spells them: a tenant's are stored qualified (domain/tenant.h).
void DetailsToProto(const store::HoldDetails& details, v1::Hold* out) {
  out->set_scope(std::string(domain::LocalId(details.scope)));
  // Always set, 1 included: a consumer that sums quantity (an expiry handler releasing seats)
  // must not read a single-unit hold as 0. The store's quantity is >= 1; max() keeps that true on
  // the wire whatever it reads.
  out->set_quantity(static_cast<uint32_t>(std::max<int64_t>(1, details.quantity)));
  for (const auto& [key, value] : details.labels) (*out->mutable_labels())[key] = value;
  if (details.place_time.has_value()) {
    TimestampToProto(*details.place_time, out->mutable_place_time());
  }
  if (details.max_expire_time.has_value()) {
    TimestampToProto(*details.max_expire_time, out->mutable_max_expire_time());
  }
  out->set_extensions(static_cast<uint32_t>(details.extensions));
  if (!details.scope.empty()) {
    out->mutable_scope_limits()->set_max_holds(
        static_cast<uint32_t>(details.scope_limits.max_holds));
    out->mutable_scope_limits()->set_max_units(
        static_cast<uint32_t>(details.scope_limits.max_units));
  }
}

void HoldToProto(const domain::Hold& hold, absl::Time now, v1::Hold* out) {
  out->set_user_id(std::string(domain::LocalId(hold.user_id)));
  out->set_order_id(hold.order_id);
  TimestampToProto(hold.expire_time, out->mutable_expire_time());
  DurationToProto(hold.expire_time - now, out->mutable_remaining());
  DetailsToProto(hold.details, out);
}

void UsageToProto(const domain::LevelUsage& usage, v1::LimitUsage* out) {
  out->set_holds(static_cast<uint32_t>(usage.holds));
  out->set_max_holds(static_cast<uint32_t>(usage.limits.max_holds));
  out->set_units(static_cast<uint32_t>(usage.units));
  out->set_max_units(static_cast<uint32_t>(usage.limits.max_units));
}

v1::PlaceHoldResponse PlaceHoldReplyToProto(const domain::PlaceHoldReply& reply) {
  v1::PlaceHoldResponse out;
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  out.set_created(reply.created);
  out.set_active_holds(static_cast<uint32_t>(reply.active_holds));
  out.set_max_holds(static_cast<uint32_t>(reply.max_holds));
  if (reply.user_usage.has_value()) UsageToProto(*reply.user_usage, out.mutable_user_usage());
  if (reply.scope_usage.has_value()) UsageToProto(*reply.scope_usage, out.mutable_scope_usage());
  if (reply.scope_total_usage.has_value()) {
    UsageToProto(*reply.scope_total_usage, out.mutable_scope_total_usage());
  }
  return out;
}

v1::PayResponse PayReplyToProto(const domain::PayReply& reply) {
  v1::PayResponse out;
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  out.mutable_hold()->set_payment_reference(reply.payment_reference);
  out.set_already_paid(reply.already_paid);
  return out;
}

v1::ReturnUnitsResponse ReturnUnitsReplyToProto(const domain::ReturnUnitsReply& reply) {
  v1::ReturnUnitsResponse out;
  out.set_returned_units(static_cast<uint32_t>(reply.returned_units));
  out.set_total_returned_units(static_cast<uint32_t>(reply.total_returned_units));
  out.set_already_returned(reply.already_returned);
  if (reply.scope_usage.has_value()) UsageToProto(*reply.scope_usage, out.mutable_scope_usage());
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  out.mutable_hold()->clear_remaining();
  out.mutable_hold()->set_payment_reference(reply.payment_reference);
  return out;
}

v1::CancelHoldResponse CancelReplyToProto(const domain::CancelReply& reply) {
  v1::CancelHoldResponse out;
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  out.set_already_cancelled(reply.already_cancelled);
  return out;
}

v1::ListHoldsResponse ListHoldsReplyToProto(const domain::ListHoldsReply& reply) {
  v1::ListHoldsResponse out;
  for (const domain::Hold& hold : reply.holds) HoldToProto(hold, reply.now, out.add_holds());
  out.set_max_holds(static_cast<uint32_t>(reply.max_holds));
  if (reply.user_usage.has_value()) UsageToProto(*reply.user_usage, out.mutable_user_usage());
  if (reply.scope_usage.has_value()) UsageToProto(*reply.scope_usage, out.mutable_scope_usage());
  out.set_next_page_token(reply.next_page_token);
  return out;
}

v1::ExtendHoldResponse ExtendHoldReplyToProto(const domain::ExtendHoldReply& reply) {
  v1::ExtendHoldResponse out;
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  out.set_extended(reply.extended);
  out.set_capped(reply.capped);
  if (reply.extensions_left.has_value()) {
    out.set_extensions_left(static_cast<uint32_t>(*reply.extensions_left));
  }
  return out;
}

v1::GetHoldResponse GetHoldReplyToProto(const domain::GetHoldReply& reply) {
  v1::GetHoldResponse out;
  HoldToProto(reply.hold, reply.now, out.mutable_hold());
  if (reply.end.has_value()) {
    out.mutable_hold()->clear_remaining();  // an ended hold has no time left
    // store::HoldOutcome has the numbers of v1::HoldOutcome.
    out.set_outcome(static_cast<v1::HoldOutcome>(reply.end->outcome));
    TimestampToProto(reply.end->end_time, out.mutable_end_time());
    out.mutable_hold()->set_payment_reference(reply.end->payment_reference);
  }
  return out;
}

v1::ReleaseHoldsResponse ReleaseHoldsReplyToProto(const domain::ReleaseHoldsReply& reply) {
  v1::ReleaseHoldsResponse out;
  for (const domain::Hold& hold : reply.holds) HoldToProto(hold, reply.now, out.add_holds());
  out.set_released_count(static_cast<uint32_t>(reply.released));
  return out;
}

v1::GetScopeUsageResponse ScopeUsageReplyToProto(const domain::ScopeUsageReply& reply) {
  v1::GetScopeUsageResponse out;
  UsageToProto(reply.usage, out.mutable_usage());
  if (reply.first_expire_time.has_value()) {
    TimestampToProto(*reply.first_expire_time, out.mutable_earliest_expire_time());
  }
  out.set_sold_units(static_cast<uint32_t>(std::min<int64_t>(reply.sold_units, UINT32_MAX)));
  out.set_capacity_units(static_cast<uint32_t>(reply.capacity_units));
  out.set_available_units(static_cast<uint32_t>(reply.available_units));
  return out;
}

v1::ListScopeHoldsResponse ListScopeHoldsReplyToProto(const domain::ListScopeHoldsReply& reply) {
  v1::ListScopeHoldsResponse out;
  for (const domain::Hold& hold : reply.holds) {
    HoldToProto(hold, reply.usage.now, out.add_holds());
  }
  out.set_next_page_token(reply.next_page_token);
  UsageToProto(reply.usage.usage, out.mutable_usage());
  return out;
}

v1::ReleaseScopeHoldsResponse ReleaseScopeHoldsReplyToProto(
    const domain::ReleaseScopeHoldsReply& reply) {
  v1::ReleaseScopeHoldsResponse out;
  for (const domain::Hold& hold : reply.holds) HoldToProto(hold, reply.now, out.add_holds());
  out.set_released_count(static_cast<uint32_t>(reply.released));
  return out;
}

namespace {

// An optional Timestamp of a rule, whole milliseconds; nullopt when unset.
absl::StatusOr<std::optional<absl::Time>> RuleTimeFromProto(absl::string_view field, bool has,
                                                            const google::protobuf::Timestamp& t) {
  if (!has) return std::nullopt;
  // google.protobuf.Timestamp's range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
  if (t.seconds() < -62135596800 || t.seconds() > 253402300799 || t.nanos() < 0 ||
      t.nanos() > 999999999) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not a valid timestamp (seconds ",
                                                   t.seconds(), ", nanos ", t.nanos(), ")"));
  }
  return absl::FromUnixMillis(t.seconds() * 1000 + t.nanos() / 1000000);
}

uint32_t U32(int64_t v) { return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, UINT32_MAX)); }

}  // namespace

absl::StatusOr<store::ScopeRuleRecord> ScopeRuleFromProto(const internal::ScopeRule& in,
                                                          std::string scope) {
  store::ScopeRuleRecord rule;
  rule.scope = std::move(scope);
  rule.limits = store::LevelLimits{in.limits().max_holds(), in.limits().max_units()};
  rule.totals = store::LevelLimits{in.total_max_holds(), in.total_max_units()};
  rule.capacity_units = in.capacity_units();
  rule.purchases = store::LevelLimits{in.max_purchased_holds(), in.max_purchased_units()};
  switch (in.state()) {
    case v1::SCOPE_STATE_UNSPECIFIED:
    case v1::OPEN:
      rule.state = store::ScopeState::kOpen;
      break;
    case v1::PAUSED:
      rule.state = store::ScopeState::kPaused;
      break;
    case v1::CLOSED:
      rule.state = store::ScopeState::kClosed;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("rule.state: not a ScopeState (got ", in.state(), ")"));
  }
  ORDERHOLD_ASSIGN_OR_RETURN(
      rule.open_time, RuleTimeFromProto("rule.open_time", in.has_open_time(), in.open_time()));
  ORDERHOLD_ASSIGN_OR_RETURN(
      rule.close_time, RuleTimeFromProto("rule.close_time", in.has_close_time(), in.close_time()));
  ORDERHOLD_ASSIGN_OR_RETURN(
      rule.expire_time,
      RuleTimeFromProto("rule.expire_time", in.has_expire_time(), in.expire_time()));
  for (const internal::ScopeRule::ClassesEntry& entry : in.classes()) {
    store::LimitClassRecord& limit_class = rule.classes[entry.key()];  // a later key wins
    const internal::LimitClass& value = entry.value();
    limit_class = store::LimitClassRecord{};
    limit_class.limits = store::LevelLimits{value.limits().max_holds(), value.limits().max_units()};
    limit_class.purchases =
        store::LevelLimits{value.max_purchased_holds(), value.max_purchased_units()};
    for (const std::string& principal : value.principals()) {
      // Bare identities are read by their shape, as in the --tenants file; the domain checks them.
      limit_class.principals.push_back(domain::TypedOwner(principal));
    }
  }
  rule.etag = in.etag();
  return rule;
}

v1::ScopeRule ScopeRuleReplyToProto(const domain::ScopeRuleReply& reply) {
  const store::ScopeRuleRecord& rule = reply.rule;
  v1::ScopeRule out;
  out.set_scope(std::string(domain::LocalId(rule.scope)));
  if (rule.limits != store::LevelLimits{}) {
    out.mutable_limits()->set_max_holds(U32(rule.limits.max_holds));
    out.mutable_limits()->set_max_units(U32(rule.limits.max_units));
  }
  out.set_total_max_holds(U32(rule.totals.max_holds));
  out.set_total_max_units(U32(rule.totals.max_units));
  out.set_capacity_units(U32(rule.capacity_units));
  out.set_max_purchased_units(U32(rule.purchases.max_units));
  out.set_max_purchased_holds(U32(rule.purchases.max_holds));
  // store::ScopeState has the numbers of v1::ScopeState.
  out.set_state(static_cast<v1::ScopeState>(rule.state));
  if (rule.open_time.has_value()) TimestampToProto(*rule.open_time, out.mutable_open_time());
  if (rule.close_time.has_value()) TimestampToProto(*rule.close_time, out.mutable_close_time());
  if (rule.expire_time.has_value()) {
    TimestampToProto(*rule.expire_time, out.mutable_expire_time());
  }
  for (const auto& [name, limit_class] : rule.classes) {
    v1::LimitClass& c = (*out.mutable_classes())[name];
    if (limit_class.limits != store::LevelLimits{}) {
      c.mutable_limits()->set_max_holds(U32(limit_class.limits.max_holds));
      c.mutable_limits()->set_max_units(U32(limit_class.limits.max_units));
    }
    c.set_max_purchased_units(U32(limit_class.purchases.max_units));
    c.set_max_purchased_holds(U32(limit_class.purchases.max_holds));
    for (const std::string& principal : limit_class.principals) c.add_principals(principal);
  }
  out.set_etag(rule.etag);
  out.set_effective_state(static_cast<v1::ScopeState>(reply.effective_state));
  return out;
}

v1::ListScopeRulesResponse ListScopeRulesReplyToProto(const domain::ListScopeRulesReply& reply) {
  v1::ListScopeRulesResponse out;
  for (const domain::ScopeRuleReply& rule : reply.rules) {
    *out.add_rules() = ScopeRuleReplyToProto(rule);
  }
  out.set_next_page_token(reply.next_page_token);
  return out;
}

v1::CloseScopeResponse CloseScopeReplyToProto(const domain::CloseScopeReply& reply) {
  v1::CloseScopeResponse out;
  out.set_released_count(U32(reply.released_count));
  *out.mutable_rule() = ScopeRuleReplyToProto(reply.rule);
  return out;
}

v1::AckHoldEventsResponse AckedToProto(int64_t acked) {
  v1::AckHoldEventsResponse out;
  out.set_acked(static_cast<uint32_t>(acked));
  return out;
}

void EventToProto(const store::StoredEvent& event, v1::HoldEvent* out) {
  out->set_event_id(store::FormatEventId(event.partition, event.stream_id));
  v1::Hold* hold = out->mutable_hold();
  hold->set_user_id(std::string(domain::LocalId(event.user_id)));
  hold->set_order_id(event.order_id);
  TimestampToProto(event.end.expire_time, hold->mutable_expire_time());
  DetailsToProto(event.details, hold);
  hold->set_payment_reference(event.end.payment_reference);
  // store::HoldOutcome has the numbers of v1::HoldOutcome.
  out->set_outcome(static_cast<v1::HoldOutcome>(event.end.outcome));
  TimestampToProto(event.end.end_time, out->mutable_end_time());
  out->set_returned_units(static_cast<uint32_t>(event.returned_units));
  out->set_delivery_count(static_cast<uint32_t>(event.delivery_count));
}

}  // namespace orderhold::grpc_api
