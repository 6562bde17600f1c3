// HoldService on the fake store and a fake clock: validation, outcome -> status mapping, metrics.
#include "server/domain/hold_service.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::domain {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

class HoldServiceTest : public ::testing::Test {
 protected:
  absl::StatusOr<PlaceHoldReply> Place(std::string user, std::string order,
                                       std::optional<absl::Duration> ttl = std::nullopt) {
    return Await<PlaceHoldReply>([&](auto done) {
      service_.PlaceHold(PlaceHoldCommand{user, order, ttl}, {}, std::move(done));
    });
  }
  absl::StatusOr<PayReply> Pay(std::string user, std::string order) {
    return Await<PayReply>([&](auto done) { service_.Pay(user, order, {}, std::move(done)); });
  }
  absl::StatusOr<CancelReply> Cancel(std::string user, std::string order) {
    return Await<CancelReply>(
        [&](auto done) { service_.Cancel(user, order, {}, std::move(done)); });
  }
  absl::StatusOr<ListHoldsReply> List(std::string user) {
    return Await<ListHoldsReply>([&](auto done) { service_.ListHolds(user, {}, std::move(done)); });
  }
  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(registry_, name, labels);
  }

  orderhold::testing::FakeClock clock_;
  orderhold::testing::FakeHoldStore store_{clock_};
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  HoldService service_{store_, HoldPolicy{3, absl::Minutes(30), absl::Hours(24)}, metrics_};
};

TEST_F(HoldServiceTest, PlacesWithDefaultTtlAndReportsQuota) {
  auto reply = Place("alice", "o1");
  ASSERT_THAT(reply, IsOk());
  EXPECT_TRUE(reply->created);
  EXPECT_EQ(reply->hold.user_id, "alice");
  EXPECT_EQ(reply->hold.order_id, "o1");
  EXPECT_EQ(reply->hold.expire_time - reply->now, absl::Minutes(30));
  EXPECT_EQ(reply->active_holds, 1);
  EXPECT_EQ(reply->max_holds, 3);
  EXPECT_EQ(Metric("orderhold_holds_placed_total"), 1);
}

TEST_F(HoldServiceTest, IdempotentRetryIsNotCountedTwice) {
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(10)), IsOk());
  clock_.Advance(absl::Seconds(4));
  auto retry = Place("alice", "o1", absl::Seconds(10));
  ASSERT_THAT(retry, IsOk());
  EXPECT_FALSE(retry->created);
  EXPECT_EQ(retry->hold.expire_time - retry->now, absl::Seconds(6));
  EXPECT_EQ(Metric("orderhold_holds_placed_total"), 1);
}

TEST_F(HoldServiceTest, FourthHoldIsResourceExhaustedNamingLimitAndEarliestExpiry) {
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(90)), IsOk());
  ASSERT_THAT(Place("alice", "o2"), IsOk());
  ASSERT_THAT(Place("alice", "o3"), IsOk());
  EXPECT_THAT(Place("alice", "o4"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("max_holds 3"), HasSubstr("earliest expires at"),
                             HasSubstr("(in 1m30s)"))));
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "quota_exceeded"}}), 1);
  clock_.Advance(absl::Seconds(90));  // o1 expires: its slot is free, without any reaper
  auto reply = Place("alice", "o4");
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->active_holds, 3);
  EXPECT_EQ(Metric("orderhold_holds_expired_total"), 1);
}

TEST_F(HoldServiceTest, BadInputIsInvalidArgumentNamingTheFieldAndChangesNothing) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(Place("", "o1"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(Place("alice", std::string(129, 'x')), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(Place("alice", "o1", absl::ZeroDuration()), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(Place("alice", "o1", absl::Hours(25)), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(Pay("alice", "a\tb"), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(List("\x01"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "invalid_argument"}}), 4);
  auto list = List("alice");
  ASSERT_THAT(list, IsOk());
  EXPECT_TRUE(list->holds.empty());
}

TEST_F(HoldServiceTest, PayIsIdempotentAndUnknownOrdersAreNotFound) {
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(60)), IsOk());
  clock_.Advance(absl::Seconds(15));
  auto paid = Pay("alice", "o1");
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->hold.order_id, "o1");
  EXPECT_FALSE(paid->already_paid);
  EXPECT_EQ(paid->hold.expire_time - paid->now, absl::Seconds(45));
  clock_.Advance(absl::Seconds(5));
  auto retried = Pay("alice", "o1");
  ASSERT_THAT(retried, IsOk());
  EXPECT_TRUE(retried->already_paid);
  EXPECT_EQ(retried->hold.expire_time - retried->now, absl::Seconds(45));  // as first paid
  EXPECT_THAT(Pay("alice", "never"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("never")));
  EXPECT_THAT(Cancel("alice", "o1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("PAID at")));
  EXPECT_THAT(Place("alice", "o1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already ended: PAID")));
  EXPECT_EQ(Metric("orderhold_holds_paid_total"), 1);
  EXPECT_EQ(Metric("orderhold_events_appended_total"), 1);
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "already_ended"}}), 1);
}

TEST_F(HoldServiceTest, CancelIsIdempotentAndFreesTheSlot) {
  for (const char* order : {"o1", "o2", "o3"}) ASSERT_THAT(Place("alice", order), IsOk());
  EXPECT_THAT(Place("alice", "o4"), StatusIs(absl::StatusCode::kResourceExhausted));
  auto cancelled = Cancel("alice", "o2");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_FALSE(cancelled->already_cancelled);
  auto again = Cancel("alice", "o2");
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->already_cancelled);
  EXPECT_THAT(Pay("alice", "o2"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("CANCELLED at")));
  EXPECT_THAT(Place("alice", "o4"), IsOk());
  EXPECT_EQ(Metric("orderhold_holds_cancelled_total"), 1);
}

TEST_F(HoldServiceTest, ExpiredHoldCannotBePaidOrCancelledAndIsNotListed) {
  ASSERT_THAT(Place("alice", "o1", absl::Milliseconds(200)), IsOk());
  ASSERT_THAT(Place("alice", "o2", absl::Seconds(60)), IsOk());
  clock_.Advance(absl::Milliseconds(200));
  const absl::Status expired = Pay("alice", "o1").status();
  EXPECT_THAT(expired, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("order_id \"o1\" already ended: EXPIRED at")));
  EXPECT_THAT(Cancel("alice", "o1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("EXPIRED at")));
  EXPECT_EQ(Metric("orderhold_holds_expired_total"), 1);  // ended once, by the first call
  auto list = List("alice");
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->holds.size(), 1u);
  EXPECT_EQ(list->holds[0].order_id, "o2");
}

TEST_F(HoldServiceTest, StoreFailureIsPassedThroughAndNothingGranted) {
  store_.SetFailure(absl::UnavailableError("redis: connection refused"));
  EXPECT_THAT(Place("alice", "o1"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Pay("alice", "o1"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "unavailable"}}), 1);
  EXPECT_EQ(Metric("orderhold_holds_placed_total"), 0);
  store_.SetFailure(absl::OkStatus());
  auto list = List("alice");
  ASSERT_THAT(list, IsOk());
  EXPECT_TRUE(list->holds.empty());
}

}  // namespace
}  // namespace orderhold::domain
