// Unit tests of the CLI's pure formatting and argument logic, and of the client's time conversions.
// No network, no clock: every time value is a constant.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/orderhold_client.h"

namespace orderhold::client {
namespace {

// 2026-11-21T10:00:00Z.
constexpr int64_t kExpireUnixSeconds = 1795255200;

orderhold::v1::Hold MakeHold(absl::Duration remaining, int32_t expire_nanos = 0) {
  orderhold::v1::Hold hold;
  hold.set_user_id("alice");
  hold.set_order_id("order-1");
  hold.mutable_expire_time()->set_seconds(kExpireUnixSeconds);
  hold.mutable_expire_time()->set_nanos(expire_nanos);
  *hold.mutable_remaining() = ToProtoDuration(remaining);
  return hold;
}

TEST(FormatRemainingTest, TruncatesToWholeSecondsFromOneSecond) {
  EXPECT_EQ(FormatRemaining(absl::Minutes(29) + absl::Seconds(58) + absl::Milliseconds(999)),
            "29m58s");
  EXPECT_EQ(FormatRemaining(absl::Seconds(1)), "1s");
  EXPECT_EQ(FormatRemaining(absl::Milliseconds(1999)), "1s");
  EXPECT_EQ(FormatRemaining(absl::Minutes(12) + absl::Seconds(3)), "12m3s");
  EXPECT_EQ(FormatRemaining(absl::Hours(1) + absl::Seconds(5)), "1h5s");
  EXPECT_EQ(FormatRemaining(absl::Hours(24)), "24h");
}

TEST(FormatRemainingTest, MillisecondsUnderOneSecond) {
  EXPECT_EQ(FormatRemaining(absl::Milliseconds(850)), "850ms");
  EXPECT_EQ(FormatRemaining(absl::Microseconds(850999)), "850ms");
  EXPECT_EQ(FormatRemaining(absl::Milliseconds(999)), "999ms");
  EXPECT_EQ(FormatRemaining(absl::Milliseconds(1)), "1ms");
  EXPECT_EQ(FormatRemaining(absl::Microseconds(300)), "<1ms");
}

TEST(FormatRemainingTest, ZeroOrNegativeIsZeroSeconds) {
  EXPECT_EQ(FormatRemaining(absl::ZeroDuration()), "0s");
  EXPECT_EQ(FormatRemaining(absl::Milliseconds(-1)), "0s");
  EXPECT_EQ(FormatRemaining(-absl::Hours(3)), "0s");
  EXPECT_EQ(FormatRemaining(-absl::InfiniteDuration()), "0s");
}

TEST(FormatRemainingTest, Infinite) { EXPECT_EQ(FormatRemaining(absl::InfiniteDuration()), "inf"); }

TEST(FormatTimestampTest, UtcWithZAndFractionOnlyWhenPresent) {
  EXPECT_EQ(FormatTimestamp(absl::FromUnixSeconds(kExpireUnixSeconds)), "2026-11-21T10:00:00Z");
  EXPECT_EQ(FormatTimestamp(absl::FromUnixSeconds(kExpireUnixSeconds) + absl::Milliseconds(250)),
            "2026-11-21T10:00:00.25Z");
}

TEST(FormatHoldTest, OneLine) {
  EXPECT_EQ(FormatHold(MakeHold(absl::Minutes(29) + absl::Seconds(58) + absl::Milliseconds(120))),
            "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z");
  EXPECT_EQ(FormatHold(MakeHold(absl::Milliseconds(850), 123'000'000)),
            "order-1 (user alice) expires in 850ms at 2026-11-21T10:00:00.123Z");
}

TEST(FormatPlaceHoldTest, CreatedAndExisting) {
  orderhold::v1::PlaceHoldResponse response;
  *response.mutable_hold() = MakeHold(absl::Minutes(29) + absl::Seconds(58));
  response.set_created(true);
  response.set_active_holds(1);
  response.set_max_holds(3);
  EXPECT_EQ(FormatPlaceHold(response), "placed order-1 for alice: expires in 29m58s (1/3 active)");

  response.set_created(false);
  EXPECT_EQ(FormatPlaceHold(response),
            "order-1 for alice already held: expires in 29m58s (created=false)");
}

TEST(FormatPayTest, OneLine) {
  orderhold::v1::PayResponse response;
  *response.mutable_hold() = MakeHold(absl::Minutes(12) + absl::Seconds(3));
  EXPECT_EQ(FormatPay(response), "paid order-1 for alice (had 12m3s left)");
}

TEST(FormatListHoldsTest, HeaderThenOneLinePerHold) {
  orderhold::v1::ListHoldsResponse response;
  response.set_max_holds(3);
  EXPECT_EQ(FormatListHolds("alice", response), "alice: 0/3 holds\n");

  *response.add_holds() = MakeHold(absl::Seconds(90));
  orderhold::v1::Hold second = MakeHold(absl::Minutes(29));
  second.set_order_id("order-2");
  *response.add_holds() = second;
  EXPECT_EQ(FormatListHolds("alice", response),
            "alice: 2/3 holds\n"
            "  order-1 (user alice) expires in 1m30s at 2026-11-21T10:00:00Z\n"
            "  order-2 (user alice) expires in 29m at 2026-11-21T10:00:00Z\n");
}

TEST(FormatErrorTest, NamesTheCodeAndExitsWithItsNumber) {
  const absl::Status status = absl::ResourceExhaustedError("alice already has 3 holds");
  EXPECT_EQ(FormatError(status), "error: RESOURCE_EXHAUSTED: alice already has 3 holds");
  EXPECT_EQ(ExitCodeFor(status), 8);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("")), 5);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("")), 14);
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_GT(kExitUsage, 16);
}

TEST(ParseCommandTest, ValidCommands) {
  auto place = ParseCommand({"place", "alice", "order-1"}, absl::Seconds(45));
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->kind, CliCommand::Kind::kPlace);
  EXPECT_EQ(place->user_id, "alice");
  EXPECT_EQ(place->order_id, "order-1");
  EXPECT_EQ(place->ttl, absl::Seconds(45));

  auto pay = ParseCommand({"pay", "alice", "order-1"}, std::nullopt);
  ASSERT_TRUE(pay.ok()) << pay.status();
  EXPECT_EQ(pay->kind, CliCommand::Kind::kPay);
  EXPECT_EQ(pay->ttl, std::nullopt);

  auto list = ParseCommand({"list", "alice"}, std::nullopt);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->kind, CliCommand::Kind::kList);
  EXPECT_EQ(list->user_id, "alice");
  EXPECT_EQ(list->order_id, "");
}

TEST(ParseCommandTest, ZeroTtlIsStillSent) {
  auto place = ParseCommand({"place", "alice", "order-1"}, absl::ZeroDuration());
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->ttl, absl::ZeroDuration());
}

TEST(ParseCommandTest, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},       {"hold", "alice", "order-1"}, {"place", "alice"}, {"pay", "alice", "o", "extra"},
      {"list"}, {"list", "alice", "order-1"},
  };
  for (const auto& args : bad) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand(args, std::nullopt).status())) << args.size();
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(ParseCommand({"pay", "alice", "o"}, absl::Seconds(1)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand({"list", "alice"}, absl::Seconds(1)).status()));
}

TEST(ParseCommandTest, HealthTakesAnOptionalService) {
  auto whole = ParseCommand({"health"}, std::nullopt);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->kind, CliCommand::Kind::kHealth);
  EXPECT_EQ(whole->health_service, "");
  auto liveness = ParseCommand({"health", "liveness"}, std::nullopt);
  ASSERT_TRUE(liveness.ok()) << liveness.status();
  EXPECT_EQ(liveness->health_service, "liveness");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand({"health", "a", "b"}, std::nullopt).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand({"health"}, absl::Seconds(1)).status()));
}

TEST(ParseCommandTest, CancelAndWatch) {
  auto cancel = ParseCommand({"cancel", "alice", "order-1"}, std::nullopt);
  ASSERT_TRUE(cancel.ok());
  EXPECT_EQ(cancel->kind, CliCommand::Kind::kCancel);
  EXPECT_EQ(cancel->order_id, "order-1");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand({"cancel", "alice"}, std::nullopt).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand({"watch", "x"}, std::nullopt).status()));

  auto watch = ParseCommand({"watch"}, std::nullopt);
  ASSERT_TRUE(watch.ok());
  EXPECT_EQ(watch->kind, CliCommand::Kind::kWatch);
  ASSERT_TRUE(ParseWatchFlags("billing", "c1", "expired,Paid", "latest", 5, true, &*watch).ok());
  EXPECT_EQ(watch->watch.consumer_group(), "billing");
  EXPECT_EQ(watch->watch.consumer(), "c1");
  ASSERT_EQ(watch->watch.outcomes_size(), 2);
  EXPECT_EQ(watch->watch.outcomes(0), orderhold::v1::EXPIRED);
  EXPECT_EQ(watch->watch.outcomes(1), orderhold::v1::PAID);
  EXPECT_EQ(watch->watch.start_position(), orderhold::v1::LATEST);
  EXPECT_EQ(watch->max_events, 5);
  EXPECT_TRUE(watch->ack);

  CliCommand defaults;
  ASSERT_TRUE(ParseWatchFlags("g", "", "", "earliest", 0, false, &defaults).ok());
  EXPECT_FALSE(defaults.watch.consumer().empty());  // <hostname>-<pid>
  EXPECT_EQ(defaults.watch.outcomes_size(), 0);
  EXPECT_EQ(defaults.watch.start_position(), orderhold::v1::EARLIEST);

  CliCommand bad;
  EXPECT_TRUE(absl::IsInvalidArgument(ParseWatchFlags("", "c", "", "earliest", 0, false, &bad)));
  EXPECT_TRUE(
      absl::IsInvalidArgument(ParseWatchFlags("g", "c", "refunded", "earliest", 0, false, &bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseWatchFlags("g", "c", "", "yesterday", 0, false, &bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseWatchFlags("g", "c", "", "earliest", -1, false, &bad)));
}

TEST(FormatCancelTest, FirstAndRepeated) {
  orderhold::v1::CancelHoldResponse response;
  response.mutable_hold()->set_user_id("alice");
  response.mutable_hold()->set_order_id("order-1");
  response.mutable_hold()->mutable_remaining()->set_seconds(723);
  EXPECT_EQ(FormatCancel(response), "cancelled order-1 for alice (had 12m3s left)");
  response.set_already_cancelled(true);
  EXPECT_EQ(FormatCancel(response), "order-1 for alice was already cancelled (had 12m3s left)");
  orderhold::v1::PayResponse paid;
  paid.mutable_hold()->set_user_id("alice");
  paid.mutable_hold()->set_order_id("order-1");
  paid.set_already_paid(true);
  EXPECT_EQ(FormatPay(paid), "order-1 for alice was already paid (had 0s left)");
}

TEST(ProtoDurationTest, PositiveAndNegativeKeepOneSign) {
  google::protobuf::Duration d = ToProtoDuration(absl::Milliseconds(1500));
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500'000'000);

  d = ToProtoDuration(absl::Milliseconds(-1500));
  EXPECT_EQ(d.seconds(), -1);
  EXPECT_EQ(d.nanos(), -500'000'000);

  d = ToProtoDuration(absl::Milliseconds(-500));
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), -500'000'000);

  d = ToProtoDuration(absl::ZeroDuration());
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), 0);

  for (absl::Duration x : {absl::Milliseconds(1500), absl::Milliseconds(-1500),
                           absl::Nanoseconds(-1), absl::Hours(24)}) {
    EXPECT_EQ(FromProtoDuration(ToProtoDuration(x)), x) << x;
  }
}

TEST(ProtoDurationTest, ClampsToProtoRange) {
  EXPECT_EQ(ToProtoDuration(absl::InfiniteDuration()).seconds(), 315'576'000'000);
  EXPECT_EQ(ToProtoDuration(absl::InfiniteDuration()).nanos(), 0);
  EXPECT_EQ(ToProtoDuration(-absl::InfiniteDuration()).seconds(), -315'576'000'000);
}

TEST(ProtoTimestampTest, ReadsSecondsAndNanos) {
  google::protobuf::Timestamp t;
  t.set_seconds(kExpireUnixSeconds);
  t.set_nanos(5'000'000);
  EXPECT_EQ(FromProtoTimestamp(t),
            absl::FromUnixSeconds(kExpireUnixSeconds) + absl::Milliseconds(5));
}

}  // namespace
}  // namespace orderhold::client
