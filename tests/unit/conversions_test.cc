// The gRPC adapter's conversions (server/grpc/conversions.h) on their own: status codes and
// messages, request bytes, times, requests -> domain (ttl, outcomes, start position) and domain
// replies -> responses, edge cases included.
#include "server/grpc/conversions.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "server/domain/hold_service.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::grpc_api {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixMillis(1'767'225'600'123);  // 2026-01-01T00:00:00.123Z

// ---- Status ----------------------------------------------------------------------------------

TEST(ToGrpcStatusTest, EveryCodeMapsToTheGrpcCodeOfTheSameName) {
  const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>> codes = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  ASSERT_EQ(codes.size(), 16u);  // every code but OK
  for (const auto& [absl_code, grpc_code] : codes) {
    const grpc::Status status = ToGrpcStatus(absl::Status(absl_code, "why"));
    EXPECT_EQ(status.error_code(), grpc_code) << absl::StatusCodeToString(absl_code);
    EXPECT_EQ(status.error_message(), "why") << absl::StatusCodeToString(absl_code);
    // The client maps it back to the same absl status.
    EXPECT_EQ(client::FromGrpcStatus(status), absl::Status(absl_code, "why"));
  }
}

TEST(ToGrpcStatusTest, OkIsOk) {
  const grpc::Status status = ToGrpcStatus(absl::OkStatus());
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(status.error_message(), "");
}

TEST(ToGrpcStatusTest, KeepsTheMessageVerbatim) {
  const std::string message =
      "order_id \"票-1\" already ended: PAID at 2026-01-01T00:00:00.123Z; an order is held at "
      "most once (place a new order_id)\n\ttabs, quotes \" and a trailing space ";
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError(message)).error_message(), message);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("")).error_message(), "");
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// ---- Bytes -----------------------------------------------------------------------------------

grpc::ByteBuffer Bytes(const std::string& data) {
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

TEST(ByteBufferTest, ParsesApiBytesIntoTheMirror) {
  v1::PayRequest api;
  api.set_user_id("alice");
  api.set_order_id("order-1");
  const grpc::ByteBuffer bytes = Bytes(api.SerializeAsString());
  internal::PayRequest parsed;
  ASSERT_THAT(ParseFromByteBuffer(bytes, "orderhold.v1.PayRequest", &parsed), IsOk());
  EXPECT_EQ(parsed.user_id(), "alice");
  EXPECT_EQ(parsed.order_id(), "order-1");
  // The buffer is left as it was: it can be read again.
  EXPECT_EQ(ToString(bytes), api.SerializeAsString());
}

TEST(ByteBufferTest, AcceptsInvalidUtf8Ids) {
  // What the mirrors are for: the domain names the field instead of a parse failure.
  internal::PlaceHoldRequest lenient;
  lenient.set_user_id("\xff\xfe");
  internal::PlaceHoldRequest parsed;
  EXPECT_THAT(ParseFromByteBuffer(Bytes(lenient.SerializeAsString()),
                                  "orderhold.v1.PlaceHoldRequest", &parsed),
              IsOk());
  EXPECT_EQ(parsed.user_id(), "\xff\xfe");
}

TEST(ByteBufferTest, ParsesNoBytesAsAnEmptyRequest) {
  internal::ListHoldsRequest parsed;
  EXPECT_THAT(ParseFromByteBuffer(Bytes(""), "orderhold.v1.ListHoldsRequest", &parsed), IsOk());
  EXPECT_EQ(parsed.user_id(), "");
}

TEST(ByteBufferTest, UndecodableBytesAreInvalidArgumentNamingTheType) {
  internal::PayRequest pay;
  // Field 1 (length-delimited) claiming 100 bytes where 1 follows.
  EXPECT_EQ(
      ParseFromByteBuffer(Bytes(std::string("\x0a\x64x", 3)), "orderhold.v1.PayRequest", &pay),
      absl::InvalidArgumentError("request: not a valid orderhold.v1.PayRequest"));
  // A wire type that does not exist (7).
  internal::AckHoldEventsRequest ack;
  EXPECT_EQ(ParseFromByteBuffer(Bytes("\x0f"), "orderhold.v1.AckHoldEventsRequest", &ack),
            absl::InvalidArgumentError("request: not a valid orderhold.v1.AckHoldEventsRequest"));
}

TEST(ByteBufferTest, SerializeRoundTrips) {
  v1::AckHoldEventsResponse message;
  message.set_acked(7);
  grpc::ByteBuffer buffer;
  ASSERT_THAT(SerializeToByteBuffer(message, &buffer), IsOk());
  EXPECT_EQ(ToString(buffer), message.SerializeAsString());
}

// ---- Times -----------------------------------------------------------------------------------

TEST(TimestampToProtoTest, MillisecondPrecision) {
  google::protobuf::Timestamp t;
  TimestampToProto(kT0 + absl::Microseconds(999), &t);  // sub-millisecond parts are dropped
  EXPECT_EQ(t.seconds(), 1'767'225'600);
  EXPECT_EQ(t.nanos(), 123'000'000);
  TimestampToProto(absl::UnixEpoch(), &t);
  EXPECT_EQ(t.seconds(), 0);
  EXPECT_EQ(t.nanos(), 0);
}

TEST(TimestampToProtoTest, BeforeTheEpochNanosStayPositive) {
  google::protobuf::Timestamp t;
  TimestampToProto(absl::UnixEpoch() - absl::Milliseconds(1500), &t);
  EXPECT_EQ(t.seconds(), -2);
  EXPECT_EQ(t.nanos(), 500'000'000);
  TimestampToProto(absl::UnixEpoch() - absl::Milliseconds(1), &t);
  EXPECT_EQ(t.seconds(), -1);
  EXPECT_EQ(t.nanos(), 999'000'000);
  TimestampToProto(absl::UnixEpoch() - absl::Seconds(3), &t);
  EXPECT_EQ(t.seconds(), -3);
  EXPECT_EQ(t.nanos(), 0);
}

TEST(TimestampToProtoTest, RoundTripsThroughTheClient) {
  for (absl::Time time : {kT0, absl::UnixEpoch(), absl::UnixEpoch() - absl::Milliseconds(1),
                          absl::UnixEpoch() - absl::Milliseconds(86'400'001),
                          absl::FromUnixMillis(253'402'300'799'999)}) {  // 9999-12-31T23:59:59.999
    google::protobuf::Timestamp t;
    TimestampToProto(time, &t);
    EXPECT_EQ(client::FromProtoTimestamp(t), time) << time;
  }
}

TEST(DurationToProtoTest, SameSignTruncatedToMilliseconds) {
  google::protobuf::Duration d;
  DurationToProto(absl::Milliseconds(1500), &d);
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500'000'000);
  DurationToProto(absl::Milliseconds(-1500), &d);
  EXPECT_EQ(d.seconds(), -1);
  EXPECT_EQ(d.nanos(), -500'000'000);
  DurationToProto(absl::Milliseconds(-500), &d);
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), -500'000'000);
  DurationToProto(absl::Microseconds(1999), &d);  // toward zero
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), 1'000'000);
  DurationToProto(absl::Microseconds(-1999), &d);  // toward zero
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), -1'000'000);
  DurationToProto(absl::ZeroDuration(), &d);
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), 0);
}

TEST(DurationToProtoTest, RoundTripsThroughTheClient) {
  for (absl::Duration x : {absl::Minutes(29) + absl::Milliseconds(58'001), absl::Milliseconds(-1),
                           absl::Hours(-24), absl::Milliseconds(1)}) {
    google::protobuf::Duration d;
    DurationToProto(x, &d);
    EXPECT_EQ(client::FromProtoDuration(d), x) << x;
  }
}

google::protobuf::Duration ProtoDuration(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

TEST(TtlFromProtoTest, ValidDurationsConvertExactly) {
  EXPECT_EQ(TtlFromProto(ProtoDuration(45, 0)).value(), absl::Seconds(45));
  EXPECT_EQ(TtlFromProto(ProtoDuration(1, 500'000'001)).value(),
            absl::Seconds(1) + absl::Nanoseconds(500'000'001));
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, 1)).value(), absl::Nanoseconds(1));
  // Zero and negative durations are valid messages: the domain refuses them, naming `ttl`.
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, 0)).value(), absl::ZeroDuration());
  EXPECT_EQ(TtlFromProto(ProtoDuration(-1, -500'000'000)).value(), absl::Milliseconds(-1500));
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, -5)).value(), absl::Nanoseconds(-5));
}

TEST(TtlFromProtoTest, TheDurationRangeIsInclusive) {
  EXPECT_EQ(TtlFromProto(ProtoDuration(315'576'000'000, 999'999'999)).value(),
            absl::Seconds(315'576'000'000) + absl::Nanoseconds(999'999'999));
  EXPECT_EQ(TtlFromProto(ProtoDuration(-315'576'000'000, -999'999'999)).value(),
            -absl::Seconds(315'576'000'000) - absl::Nanoseconds(999'999'999));
}

TEST(TtlFromProtoTest, InvalidDurationsAreInvalidArgumentNamingTtl) {
  const absl::Status invalid =
      absl::InvalidArgumentError("ttl: not a valid google.protobuf.Duration");
  EXPECT_EQ(TtlFromProto(ProtoDuration(315'576'000'001, 0)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(-315'576'000'001, 0)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(INT64_MAX, 0)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(INT64_MIN, 0)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, 1'000'000'000)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, -1'000'000'000)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, INT32_MAX)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(0, INT32_MIN)).status(), invalid);
  // Seconds and nanos of opposite signs.
  EXPECT_EQ(TtlFromProto(ProtoDuration(1, -1)).status(), invalid);
  EXPECT_EQ(TtlFromProto(ProtoDuration(-1, 1)).status(), invalid);
}

// ---- Requests -> domain ----------------------------------------------------------------------

TEST(PlaceHoldCommandFromProtoTest, MovesTheIdsAndConvertsTheTtl) {
  internal::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("票-1");
  request.mutable_ttl()->set_seconds(45);
  request.mutable_ttl()->set_nanos(1'000'000);
  ASSERT_OK_AND_ASSIGN(domain::PlaceHoldCommand command, PlaceHoldCommandFromProto(request));
  EXPECT_EQ(command.user_id, "alice");
  EXPECT_EQ(command.order_id, "票-1");
  EXPECT_EQ(command.ttl, absl::Milliseconds(45'001));
}

TEST(PlaceHoldCommandFromProtoTest, AnAbsentTtlStaysUnset) {
  internal::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("order-1");
  ASSERT_OK_AND_ASSIGN(domain::PlaceHoldCommand command, PlaceHoldCommandFromProto(request));
  EXPECT_FALSE(command.ttl.has_value());
  // A ttl that is present but zero is not absent: the domain refuses it.
  request.mutable_ttl();
  ASSERT_OK_AND_ASSIGN(command, PlaceHoldCommandFromProto(request));
  EXPECT_EQ(command.ttl, absl::ZeroDuration());
}

TEST(PlaceHoldCommandFromProtoTest, AnInvalidTtlIsInvalidArgumentNamingTtl) {
  internal::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("order-1");
  request.mutable_ttl()->set_seconds(-1);
  request.mutable_ttl()->set_nanos(1);
  EXPECT_THAT(
      PlaceHoldCommandFromProto(request),
      StatusIs(absl::StatusCode::kInvalidArgument, "ttl: not a valid google.protobuf.Duration"));
}

TEST(OutcomeFromProtoTest, TheThreeEndsAndReturned) {
  EXPECT_EQ(OutcomeFromProto(v1::PAID).value(), store::HoldOutcome::kPaid);
  EXPECT_EQ(OutcomeFromProto(v1::CANCELLED).value(), store::HoldOutcome::kCancelled);
  EXPECT_EQ(OutcomeFromProto(v1::EXPIRED).value(), store::HoldOutcome::kExpired);
  EXPECT_EQ(OutcomeFromProto(v1::RETURNED).value(), store::HoldOutcome::kReturned);
}

TEST(OutcomeFromProtoTest, UnspecifiedAndUnknownValuesAreInvalidArgument) {
  EXPECT_EQ(OutcomeFromProto(v1::HOLD_OUTCOME_UNSPECIFIED).status(),
            absl::InvalidArgumentError("outcomes: 0 is not PAID, CANCELLED, EXPIRED or RETURNED"));
  EXPECT_EQ(OutcomeFromProto(5).status(),
            absl::InvalidArgumentError("outcomes: 5 is not PAID, CANCELLED, EXPIRED or RETURNED"));
  EXPECT_EQ(OutcomeFromProto(-1).status(),
            absl::InvalidArgumentError("outcomes: -1 is not PAID, CANCELLED, EXPIRED or RETURNED"));
  EXPECT_THAT(OutcomeFromProto(INT32_MAX), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StartPositionFromProtoTest, UnspecifiedMeansEarliest) {
  EXPECT_EQ(StartPositionFromProto(v1::START_POSITION_UNSPECIFIED).value(),
            store::GroupStart::kEarliest);
  EXPECT_EQ(StartPositionFromProto(v1::EARLIEST).value(), store::GroupStart::kEarliest);
  EXPECT_EQ(StartPositionFromProto(v1::LATEST).value(), store::GroupStart::kLatest);
}

TEST(StartPositionFromProtoTest, UnknownValuesAreInvalidArgument) {
  const absl::Status invalid =
      absl::InvalidArgumentError("start_position: must be EARLIEST or LATEST");
  EXPECT_EQ(StartPositionFromProto(3).status(), invalid);
  EXPECT_EQ(StartPositionFromProto(-1).status(), invalid);
  EXPECT_EQ(StartPositionFromProto(INT32_MIN).status(), invalid);
}

TEST(WatchSpecFromProtoTest, MovesGroupAndConsumerAndCollectsOutcomes) {
  internal::WatchHoldEventsRequest request;
  request.set_consumer_group("billing");
  request.set_consumer("host-1");
  request.add_outcomes(v1::EXPIRED);
  request.add_outcomes(v1::PAID);
  request.add_outcomes(v1::EXPIRED);
  request.set_start_position(v1::LATEST);
  ASSERT_OK_AND_ASSIGN(domain::WatchSpec spec, WatchSpecFromProto(request));
  EXPECT_EQ(spec.group, "billing");
  EXPECT_EQ(spec.consumer, "host-1");
  EXPECT_THAT(spec.outcomes, ElementsAre(store::HoldOutcome::kPaid, store::HoldOutcome::kExpired));
  EXPECT_EQ(spec.start, store::GroupStart::kLatest);
}

TEST(WatchSpecFromProtoTest, DefaultsAreAllOutcomesFromTheEarliest) {
  internal::WatchHoldEventsRequest request;
  ASSERT_OK_AND_ASSIGN(domain::WatchSpec spec, WatchSpecFromProto(request));
  EXPECT_EQ(spec.group, "");  // EventService::Subscribe refuses it, naming consumer_group
  EXPECT_THAT(spec.outcomes, IsEmpty());
  EXPECT_EQ(spec.start, store::GroupStart::kEarliest);
}

TEST(WatchSpecFromProtoTest, TheFirstBadOutcomeIsReported) {
  internal::WatchHoldEventsRequest request;
  request.add_outcomes(v1::PAID);
  request.add_outcomes(7);
  request.add_outcomes(0);
  EXPECT_EQ(WatchSpecFromProto(request).status(),
            absl::InvalidArgumentError("outcomes: 7 is not PAID, CANCELLED, EXPIRED or RETURNED"));
}

TEST(WatchSpecFromProtoTest, ABadStartPositionWinsOverABadOutcome) {
  internal::WatchHoldEventsRequest request;
  request.add_outcomes(9);
  request.set_start_position(5);
  EXPECT_EQ(WatchSpecFromProto(request).status(),
            absl::InvalidArgumentError("start_position: must be EARLIEST or LATEST"));
}

// ---- Domain -> responses ---------------------------------------------------------------------

// alice's hold on order-1, expiring 30 minutes after kT0.
domain::Hold AHold() { return domain::Hold{"alice", "order-1", kT0 + absl::Minutes(30), {}}; }

void ExpectHold(const v1::Hold& hold, absl::Duration remaining) {
  EXPECT_EQ(hold.user_id(), "alice");
  EXPECT_EQ(hold.order_id(), "order-1");
  EXPECT_EQ(client::FromProtoTimestamp(hold.expire_time()), kT0 + absl::Minutes(30));
  EXPECT_EQ(client::FromProtoDuration(hold.remaining()), remaining);
}

TEST(HoldToProtoTest, RemainingIsExpireTimeMinusNow) {
  v1::Hold out;
  HoldToProto(AHold(), kT0 + absl::Milliseconds(1500), &out);
  ExpectHold(out, absl::Minutes(30) - absl::Milliseconds(1500));
  // Past its expire_time (a hold paid at the last moment, seen later): negative.
  HoldToProto(AHold(), kT0 + absl::Minutes(31), &out);
  ExpectHold(out, absl::Minutes(-1));
}

TEST(ReplyToProtoTest, PlaceHold) {
  const v1::PlaceHoldResponse out =
      PlaceHoldReplyToProto(domain::PlaceHoldReply{AHold(), kT0, true, 2, 3, {}, std::nullopt});
  ExpectHold(out.hold(), absl::Minutes(30));
  EXPECT_TRUE(out.created());
  EXPECT_EQ(out.active_holds(), 2u);
  EXPECT_EQ(out.max_holds(), 3u);
  EXPECT_FALSE(
      PlaceHoldReplyToProto(domain::PlaceHoldReply{AHold(), kT0, false, 1, 1, {}, std::nullopt})
          .created());
}

TEST(ReplyToProtoTest, Pay) {
  const v1::PayResponse out =
      PayReplyToProto(domain::PayReply{AHold(), kT0 + absl::Minutes(1), true, "pi_3N1"});
  ExpectHold(out.hold(), absl::Minutes(29));
  EXPECT_TRUE(out.already_paid());
  EXPECT_EQ(out.hold().payment_reference(), "pi_3N1");
  EXPECT_FALSE(PayReplyToProto(domain::PayReply{AHold(), kT0, false}).already_paid());
}

TEST(ReplyToProtoTest, CancelHold) {
  const v1::CancelHoldResponse out =
      CancelReplyToProto(domain::CancelReply{AHold(), kT0 + absl::Minutes(2), true});
  ExpectHold(out.hold(), absl::Minutes(28));
  EXPECT_TRUE(out.already_cancelled());
  EXPECT_FALSE(CancelReplyToProto(domain::CancelReply{AHold(), kT0, false}).already_cancelled());
}

TEST(ReplyToProtoTest, ListHoldsKeepsTheOrder) {
  domain::Hold later = AHold();
  later.order_id = "order-2";
  later.expire_time += absl::Minutes(5);
  const v1::ListHoldsResponse out =
      ListHoldsReplyToProto(domain::ListHoldsReply{{AHold(), later}, kT0, 3, {}, std::nullopt, ""});
  ASSERT_EQ(out.holds_size(), 2);
  ExpectHold(out.holds(0), absl::Minutes(30));
  EXPECT_EQ(out.holds(1).order_id(), "order-2");
  EXPECT_EQ(client::FromProtoDuration(out.holds(1).remaining()), absl::Minutes(35));
  EXPECT_EQ(out.max_holds(), 3u);
  EXPECT_EQ(
      ListHoldsReplyToProto(domain::ListHoldsReply{{}, kT0, 3, {}, std::nullopt, ""}).holds_size(),
      0);
}

TEST(ReplyToProtoTest, ExtendHoldCarriesTheCapTheCountAndWhatIsLeft) {
  domain::ExtendHoldReply reply;
  reply.hold = AHold();
  reply.hold.details.place_time = kT0 - absl::Minutes(5);
  reply.hold.details.max_expire_time = kT0 + absl::Hours(1);
  reply.hold.details.extensions = 2;
  reply.now = kT0;
  reply.extended = true;
  reply.capped = true;
  reply.extensions_left = 1;
  v1::ExtendHoldResponse out = ExtendHoldReplyToProto(reply);
  ExpectHold(out.hold(), absl::Minutes(30));
  EXPECT_EQ(client::FromProtoTimestamp(out.hold().max_expire_time()), kT0 + absl::Hours(1));
  EXPECT_EQ(client::FromProtoTimestamp(out.hold().place_time()), kT0 - absl::Minutes(5));
  EXPECT_EQ(out.hold().extensions(), 2u);
  EXPECT_TRUE(out.extended());
  EXPECT_TRUE(out.capped());
  ASSERT_TRUE(out.has_extensions_left());
  EXPECT_EQ(out.extensions_left(), 1u);
  reply.extensions_left = std::nullopt;  // --max_extensions 0: not sent at all
  EXPECT_FALSE(ExtendHoldReplyToProto(reply).has_extensions_left());
  reply.extensions_left = 0;  // used up: sent as 0
  EXPECT_TRUE(ExtendHoldReplyToProto(reply).has_extensions_left());
}

TEST(ExtendHoldCommandFromProtoTest, MovesTheIdsAndKeepsAnAbsentTtlUnset) {
  internal::ExtendHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("order-1");
  request.set_request_id("pay-1");
  auto command = ExtendHoldCommandFromProto(request);
  ASSERT_THAT(command, IsOk());
  EXPECT_EQ(command->user_id, "alice");
  EXPECT_EQ(command->order_id, "order-1");
  EXPECT_EQ(command->request_id, "pay-1");
  EXPECT_FALSE(command->ttl.has_value());
  request.mutable_ttl()->set_seconds(90);
  command = ExtendHoldCommandFromProto(request);
  ASSERT_THAT(command, IsOk());
  EXPECT_EQ(command->ttl, absl::Seconds(90));
  request.mutable_ttl()->set_nanos(-1);
  EXPECT_THAT(ExtendHoldCommandFromProto(request),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("ttl")));
}

TEST(ReplyToProtoTest, GetHoldOfALiveHoldHasRemainingAndOfAnEndedOneItsOutcome) {
  domain::GetHoldReply live{AHold(), kT0, std::nullopt};
  v1::GetHoldResponse out = GetHoldReplyToProto(live);
  ExpectHold(out.hold(), absl::Minutes(30));
  EXPECT_EQ(out.outcome(), v1::HOLD_OUTCOME_UNSPECIFIED);
  EXPECT_FALSE(out.has_end_time());
  EXPECT_EQ(out.hold().payment_reference(), "");
  const store::HoldEnd paid{store::HoldOutcome::kPaid, kT0 + absl::Minutes(3),
                            kT0 + absl::Minutes(30), "pi_3N1"};
  out = GetHoldReplyToProto(domain::GetHoldReply{AHold(), kT0 + absl::Hours(1), paid});
  EXPECT_EQ(out.outcome(), v1::PAID);
  EXPECT_EQ(out.hold().payment_reference(), "pi_3N1");
  EXPECT_EQ(client::FromProtoTimestamp(out.end_time()), kT0 + absl::Minutes(3));
  EXPECT_FALSE(out.hold().has_remaining());  // an ended hold has no time left
}

TEST(ReplyToProtoTest, ReleaseHoldsListsWhatEachHadLeft) {
  domain::Hold later = AHold();
  later.order_id = "order-2";
  later.expire_time += absl::Minutes(5);
  const v1::ReleaseHoldsResponse out =
      ReleaseHoldsReplyToProto(domain::ReleaseHoldsReply{{AHold(), later}, kT0, 2});
  ASSERT_EQ(out.holds_size(), 2);
  ExpectHold(out.holds(0), absl::Minutes(30));
  EXPECT_EQ(client::FromProtoDuration(out.holds(1).remaining()), absl::Minutes(35));
}

TEST(ReplyToProtoTest, Acked) {
  EXPECT_EQ(AckedToProto(0).acked(), 0u);
  EXPECT_EQ(AckedToProto(10'000).acked(), 10'000u);
}

TEST(EventToProtoTest, EveryField) {
  for (store::HoldOutcome outcome :
       {store::HoldOutcome::kPaid, store::HoldOutcome::kCancelled, store::HoldOutcome::kExpired}) {
    store::StoredEvent event;
    event.partition = 3;
    event.stream_id = "1767225600123-7";
    event.user_id = "alice";
    event.order_id = "order-1";
    event.end = store::HoldEnd{outcome, kT0 + absl::Seconds(10), kT0 + absl::Minutes(30),
                               outcome == store::HoldOutcome::kPaid ? "pi_3N1" : ""};
    event.delivery_count = 2;
    v1::HoldEvent out;
    EventToProto(event, &out);
    EXPECT_EQ(out.event_id(), "3/1767225600123-7");
    EXPECT_EQ(out.hold().user_id(), "alice");
    EXPECT_EQ(out.hold().order_id(), "order-1");
    EXPECT_EQ(client::FromProtoTimestamp(out.hold().expire_time()), kT0 + absl::Minutes(30));
    EXPECT_FALSE(out.hold().has_remaining());
    EXPECT_EQ(v1::HoldOutcome_Name(out.outcome()), store::HoldOutcomeName(outcome));
    EXPECT_EQ(client::FromProtoTimestamp(out.end_time()), kT0 + absl::Seconds(10));
    EXPECT_EQ(out.delivery_count(), 2u);
    EXPECT_EQ(out.hold().payment_reference(), event.end.payment_reference);
  }
}

// ---- Scopes, quantities, labels, usage, error details -----------------------------------------

TEST(ToGrpcStatusTest, GoogleRpcPayloadsBecomeTheBinaryStatusDetails) {
  absl::Status status = absl::ResourceExhaustedError("full");
  google::rpc::ErrorInfo info;
  info.set_reason("SCOPE_HOLD_LIMIT");
  status.SetPayload("type.googleapis.com/google.rpc.ErrorInfo",
                    absl::Cord(info.SerializeAsString()));
  status.SetPayload("orderhold.internal/other", absl::Cord("not sent"));
  const grpc::Status out = ToGrpcStatus(status);
  EXPECT_EQ(out.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(out.error_message(), "full");
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(out.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(details.message(), "full");
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo back;
  ASSERT_TRUE(details.details(0).UnpackTo(&back));
  EXPECT_EQ(back.reason(), "SCOPE_HOLD_LIMIT");
  // Without such payloads there are no details at all (the bytes of the answer are as before).
  EXPECT_TRUE(ToGrpcStatus(absl::NotFoundError("x")).error_details().empty());
}

TEST(PlaceHoldCommandFromProtoTest, CarriesScopeQuantityLabelsAndScopeLimits) {
  internal::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_order_id("o1");
  request.set_scope("event:E42");
  request.set_quantity(4);
  auto* label = request.add_labels();
  label->set_key("seat");
  label->set_value("A1");
  label = request.add_labels();
  label->set_key("seat");
  label->set_value("A2");
  request.mutable_scope_limits()->set_max_units(8);
  ASSERT_OK_AND_ASSIGN(domain::PlaceHoldCommand command, PlaceHoldCommandFromProto(request));
  EXPECT_EQ(command.scope, "event:E42");
  EXPECT_EQ(command.quantity, 4u);
  using Label = std::pair<std::string, std::string>;
  EXPECT_THAT(command.labels, ::testing::ElementsAre(Label{"seat", "A1"}, Label{"seat", "A2"}));
  ASSERT_TRUE(command.scope_limits.has_value());
  EXPECT_EQ(*command.scope_limits, (domain::ScopeLimits{0, 8}));
  internal::PlaceHoldRequest plain;
  plain.set_user_id("alice");
  plain.set_order_id("o1");
  ASSERT_OK_AND_ASSIGN(command, PlaceHoldCommandFromProto(plain));
  EXPECT_FALSE(command.scope_limits.has_value());  // unset: the server's rules
  EXPECT_EQ(command.quantity, 0u);
}

TEST(HoldToProtoTest, DetailsOfScopedAndUnscopedHolds) {
  domain::Hold hold = AHold();
  hold.details.scope = "event:E42";
  hold.details.quantity = 2;
  hold.details.labels = {{"seats", "A1,A2"}};
  hold.details.scope_limits = store::LevelLimits{1, 4};
  hold.details.place_time = kT0;
  v1::Hold out;
  HoldToProto(hold, kT0, &out);
  EXPECT_EQ(out.scope(), "event:E42");
  EXPECT_EQ(out.quantity(), 2u);
  EXPECT_EQ(out.labels().at("seats"), "A1,A2");
  EXPECT_EQ(client::FromProtoTimestamp(out.place_time()), kT0);
  EXPECT_EQ(out.scope_limits().max_holds(), 1u);
  EXPECT_EQ(out.scope_limits().max_units(), 4u);
  // Unscoped, without recorded details: quantity 1, no place_time, no scope_limits.
  v1::Hold plain;
  HoldToProto(AHold(), kT0, &plain);
  EXPECT_EQ(plain.quantity(), 1u);  // sent: a consumer summing quantities counts it
  EXPECT_FALSE(plain.has_place_time());
  EXPECT_FALSE(plain.has_scope_limits());
  EXPECT_TRUE(plain.labels().empty());
}

TEST(ReplyToProtoTest, PlaceHoldAndListHoldsCarryTheUsagePerLevel) {
  domain::PlaceHoldReply reply{AHold(), kT0, true, 2, 3, {}, std::nullopt};
  reply.user_usage = domain::LevelUsage{2, 5, store::LevelLimits{3, 8}};
  reply.scope_usage = domain::LevelUsage{1, 2, store::LevelLimits{2, 0}};
  const v1::PlaceHoldResponse out = PlaceHoldReplyToProto(reply);
  EXPECT_EQ(out.user_usage().holds(), 2u);
  EXPECT_EQ(out.user_usage().units(), 5u);
  EXPECT_EQ(out.user_usage().max_holds(), 3u);
  EXPECT_EQ(out.user_usage().max_units(), 8u);
  EXPECT_EQ(out.scope_usage().holds(), 1u);
  EXPECT_EQ(out.scope_usage().max_holds(), 2u);
  domain::ListHoldsReply list{{AHold()}, kT0, 3, {}, std::nullopt, ""};
  list.user_usage = domain::LevelUsage{1, 1, store::LevelLimits{3, 0}};
  const v1::ListHoldsResponse listed = ListHoldsReplyToProto(list);
  EXPECT_EQ(listed.user_usage().holds(), 1u);
  EXPECT_FALSE(listed.has_scope_usage());
}

TEST(EventToProtoTest, TheHoldCarriesItsDetails) {
  store::StoredEvent event;
  event.user_id = "alice";
  event.order_id = "order-1";
  event.end = store::HoldEnd{store::HoldOutcome::kExpired, kT0, kT0};
  event.details.scope = "event:E42";
  event.details.quantity = 3;
  event.details.labels = {{"seats", "A1,A2,A3"}};
  event.details.place_time = kT0 - absl::Minutes(30);
  v1::HoldEvent out;
  EventToProto(event, &out);
  EXPECT_EQ(out.hold().scope(), "event:E42");
  EXPECT_EQ(out.hold().quantity(), 3u);
  EXPECT_EQ(out.hold().labels().at("seats"), "A1,A2,A3");
  EXPECT_EQ(client::FromProtoTimestamp(out.hold().place_time()), kT0 - absl::Minutes(30));
}

// A consumer releasing seats sums event.hold.quantity: a single-unit hold must read 1, not 0, in
// every answer and every event.
TEST(QuantityToProtoTest, OneIsSentInEveryAnswerAndEvent) {
  store::StoredEvent event;  // no details recorded: quantity 1
  event.user_id = "alice";
  event.order_id = "order-1";
  event.end = store::HoldEnd{store::HoldOutcome::kExpired, kT0, kT0};
  v1::HoldEvent out;
  EventToProto(event, &out);
  EXPECT_EQ(out.hold().quantity(), 1u);
  event.details.scope = "event:E42";  // scoped, one unit
  EventToProto(event, &out);
  EXPECT_EQ(out.hold().quantity(), 1u);

  const domain::Hold hold = AHold();
  EXPECT_EQ(PlaceHoldReplyToProto({hold, kT0, true, 1, 3, {}, std::nullopt}).hold().quantity(), 1u);
  EXPECT_EQ(PayReplyToProto({hold, kT0, false}).hold().quantity(), 1u);
  EXPECT_EQ(CancelReplyToProto({hold, kT0, false}).hold().quantity(), 1u);
  EXPECT_EQ(ListHoldsReplyToProto({{hold}, kT0, 3, {}, std::nullopt, ""}).holds(0).quantity(), 1u);
  EXPECT_EQ(ReleaseHoldsReplyToProto({{hold}, kT0, 1}).holds(0).quantity(), 1u);
  domain::ExtendHoldReply extended;
  extended.hold = hold;
  extended.now = kT0;
  EXPECT_EQ(ExtendHoldReplyToProto(extended).hold().quantity(), 1u);
  domain::GetHoldReply got;
  got.hold = hold;
  got.now = kT0;
  EXPECT_EQ(GetHoldReplyToProto(got).hold().quantity(), 1u);
  // The wire carries what the store holds, never less than 1.
  domain::Hold zero = AHold();
  zero.details.quantity = 0;
  v1::Hold zero_out;
  HoldToProto(zero, kT0, &zero_out);
  EXPECT_EQ(zero_out.quantity(), 1u);
}

}  // namespace
}  // namespace orderhold::grpc_api
