// HoldService on the fake store and a fake clock: validation, outcome -> status mapping, metrics.
#include "server/domain/hold_service.h"

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "gtest/gtest.h"
#include "server/domain/return_service.h"
#include "server/domain/scope_rule_service.h"
#include "server/domain/scope_service.h"
#include "server/domain/tenant.h"
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
    PlaceHoldCommand command;
    command.user_id = std::move(user);
    command.order_id = std::move(order);
    command.ttl = ttl;
    return Place(std::move(command));
  }
  absl::StatusOr<PayReply> Pay(std::string user, std::string order,
                               std::string payment_reference = "") {
    return Await<PayReply>(
        [&](auto done) { service_.Pay(user, order, payment_reference, {}, std::move(done)); });
  }
  absl::StatusOr<CancelReply> Cancel(std::string user, std::string order) {
    return Await<CancelReply>(
        [&](auto done) { service_.Cancel(user, order, {}, std::move(done)); });
  }
  absl::StatusOr<ListHoldsReply> List(std::string user, std::string scope = "") {
    return Await<ListHoldsReply>(
        [&](auto done) { service_.ListHolds(user, scope, {}, std::move(done)); });
  }
  absl::StatusOr<PlaceHoldReply> Place(PlaceHoldCommand command) {
    return Await<PlaceHoldReply>(
        [&](auto done) { service_.PlaceHold(std::move(command), {}, std::move(done)); });
  }
  // PlaceHold of `quantity` units in `scope`, with the request's scope limits when given.
  static PlaceHoldCommand Scoped(std::string user, std::string order, std::string scope,
                                 uint32_t quantity = 0,
                                 std::optional<ScopeLimits> limits = std::nullopt) {
    PlaceHoldCommand command;
    command.user_id = std::move(user);
    command.order_id = std::move(order);
    command.scope = std::move(scope);
    command.quantity = quantity;
    command.scope_limits = limits;
    return command;
  }
  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(registry_, name, labels);
  }

  orderhold::testing::FakeClock clock_;
  orderhold::testing::FakeHoldStore store_{clock_};
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  HoldService service_{store_, HoldPolicy{3, absl::Minutes(30), absl::Hours(24), 10}, metrics_};
  ScopeService scopes_{store_, service_, metrics_};
};

// The payload of `status` of type T (a google.rpc detail), or nullopt.
template <typename T>
std::optional<T> Detail(const absl::Status& status) {
  absl::optional<absl::Cord> payload =
      status.GetPayload(absl::StrCat(kDetailTypeUrlPrefix, T::descriptor()->full_name()));
  if (!payload.has_value()) return std::nullopt;
  T message;
  if (!message.ParseFromString(std::string(*payload))) return std::nullopt;
  return message;
}

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

// A replayed payment webhook (the same reference) is already_paid; a second charge (another
// reference) is FAILED_PRECONDITION with PAID_WITH_OTHER_REFERENCE and changes nothing; a Pay
// without one, or of an order paid without one, compares nothing.
TEST_F(HoldServiceTest, APaymentReferenceMakesAReplayAlreadyPaidAndASecondChargeRefused) {
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  ASSERT_THAT(Place("alice", "o2"), IsOk());
  auto paid = Pay("alice", "o1", "pi_3N1");
  ASSERT_THAT(paid, IsOk());
  EXPECT_FALSE(paid->already_paid);
  EXPECT_EQ(paid->payment_reference, "pi_3N1");
  auto replay = Pay("alice", "o1", "pi_3N1");
  ASSERT_THAT(replay, IsOk());
  EXPECT_TRUE(replay->already_paid);
  EXPECT_EQ(replay->payment_reference, "pi_3N1");
  auto without = Pay("alice", "o1");
  ASSERT_THAT(without, IsOk());
  EXPECT_TRUE(without->already_paid);
  EXPECT_EQ(without->payment_reference, "pi_3N1");
  auto second = Pay("alice", "o1", "pi_3N2");
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("already paid at 2026-11-18T11:06:40.000Z with another "
                                         "payment_reference")));
  auto info = Detail<google::rpc::ErrorInfo>(second.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "PAID_WITH_OTHER_REFERENCE");
  EXPECT_EQ(info->domain(), "orderhold.v1");
  EXPECT_EQ(info->metadata().at("order_id"), "o1");
  EXPECT_EQ(info->metadata().at("payment_reference"), "pi_3N1");
  // Paid without one (say by a replica of an earlier release): nothing to compare; the answer
  // shows the caller that none was recorded.
  ASSERT_THAT(Pay("alice", "o2"), IsOk());
  auto unrecorded = Pay("alice", "o2", "pi_3N3");
  ASSERT_THAT(unrecorded, IsOk());
  EXPECT_TRUE(unrecorded->already_paid);
  EXPECT_EQ(unrecorded->payment_reference, "");
  EXPECT_EQ(Metric("orderhold_holds_paid_total"), 2);
  EXPECT_EQ(Metric("orderhold_events_appended_total"), 2);
}

TEST_F(HoldServiceTest, APaymentReferenceIsBoundedAndFreeOfControlCharacters) {
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  for (const std::string& bad : {std::string(kMaxPaymentReferenceBytes + 1, 'r'),
                                 std::string("pi\n1"), std::string("\xff\xfe")}) {
    EXPECT_THAT(Pay("alice", "o1", bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("payment_reference")));
  }
  auto longest = Pay("alice", "o1", std::string(kMaxPaymentReferenceBytes, 'r'));
  ASSERT_THAT(longest, IsOk());
  EXPECT_FALSE(longest->already_paid);  // the refused calls changed nothing
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

namespace orderhold::domain {
namespace {

TEST_F(HoldServiceTest, ScopeLimitsComeFromTheRulesAndARequestCanOnlyTightenThem) {
  // No rules: a scope alone limits nothing beyond the user's 3 holds.
  ASSERT_THAT(Place(Scoped("alice", "o1", "event:E1")), IsOk());
  ASSERT_THAT(Place(Scoped("alice", "o2", "event:E1")), IsOk());
  auto rules = ScopeRules::Create(ScopeLimits{1, 0}, {ScopeRule{"event:", ScopeLimits{2, 0}}});
  ASSERT_THAT(rules, IsOk());
  service_.SetScopeRules(*rules);
  // The rule for "event:" (2) now refuses a third; the default (1) applies to other scopes.
  auto refused = Place(Scoped("alice", "o3", "event:E1"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("in scope \"event:E1\" (max_holds 2)")));
  auto other = Place(Scoped("bob", "o1", "show:S1"));
  ASSERT_THAT(other, IsOk());
  ASSERT_TRUE(other->scope_usage.has_value());
  EXPECT_EQ(other->scope_usage->limits, (ScopeLimits{1, 0}));
  EXPECT_EQ(other->hold.details.scope_limits, (ScopeLimits{1, 0}));
  EXPECT_THAT(Place(Scoped("bob", "o2", "show:S1")),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // Limits carried by the request cannot lift the rule (4 > 1), nor switch it off ({} or 0)...
  EXPECT_THAT(Place(Scoped("bob", "o3", "show:S1", 1, ScopeLimits{4, 0})),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("(max_holds 1)")));
  EXPECT_THAT(Place(Scoped("bob", "o3", "show:S1", 1, ScopeLimits{0, 0})),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("(max_holds 1)")));
  // ...but they tighten it, field by field: units the rule leaves open, holds below it.
  auto carried = Place(Scoped("carol", "o1", "event:E1", 2, ScopeLimits{5, 4}));
  ASSERT_THAT(carried, IsOk());
  EXPECT_EQ(carried->scope_usage, (LevelUsage{1, 2, ScopeLimits{2, 4}}));
  EXPECT_THAT(Place(Scoped("carol", "o2", "event:E1", 3, ScopeLimits{5, 4})),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_units 4")));
  EXPECT_THAT(Place(Scoped("carol", "o2", "event:E1", 1, ScopeLimits{1, 0})),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("(max_holds 1)")));
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "scope_hold_limit"}}), 5);
}

TEST(ApplyRequestLimitsTest, CeilingTakesTheSmallerPerFieldAndReplaceTakesTheRequest) {
  using Mode = RequestScopeLimits;
  EXPECT_EQ(ApplyRequestLimits({2, 0}, {4, 8}, Mode::kCeiling), (ScopeLimits{2, 8}));
  EXPECT_EQ(ApplyRequestLimits({2, 10}, {1, 0}, Mode::kCeiling), (ScopeLimits{1, 10}));
  EXPECT_EQ(ApplyRequestLimits({2, 10}, {0, 0}, Mode::kCeiling), (ScopeLimits{2, 10}));
  EXPECT_EQ(ApplyRequestLimits({0, 0}, {3, 0}, Mode::kCeiling), (ScopeLimits{3, 0}));
  EXPECT_EQ(ApplyRequestLimits({2, 10}, {4, 0}, Mode::kReplace), (ScopeLimits{4, 0}));
  EXPECT_EQ(ApplyRequestLimits({2, 10}, {0, 0}, Mode::kReplace), (ScopeLimits{0, 0}));
}

TEST_F(HoldServiceTest, RefusalCarriesQuotaFailureErrorInfoAndRetryInfo) {
  ASSERT_THAT(Place(Scoped("alice", "o1", "event:E1", 6, ScopeLimits{0, 8})), IsOk());
  clock_.Advance(absl::Seconds(30));
  auto refused = Place(Scoped("alice", "o2", "event:E1", 3, ScopeLimits{0, 8}));
  ASSERT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  const absl::Status& status = refused.status();
  auto quota = Detail<google::rpc::QuotaFailure>(status);
  ASSERT_TRUE(quota.has_value());
  ASSERT_EQ(quota->violations_size(), 1);
  EXPECT_EQ(quota->violations(0).subject(), "user/scope:event:E1");
  EXPECT_THAT(quota->violations(0).description(), HasSubstr("would exceed max_units 8"));
  auto info = Detail<google::rpc::ErrorInfo>(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "SCOPE_UNIT_LIMIT");
  EXPECT_EQ(info->domain(), "orderhold.v1");
  auto retry = Detail<google::rpc::RetryInfo>(status);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->retry_delay().seconds(), 29 * 60 + 30);  // o1 expires 30m after placement
  // Two levels at once (user units 10, scope units 8): both named, the user's first.
  auto both = Place(Scoped("alice", "o3", "event:E1", 5, ScopeLimits{0, 8}));
  ASSERT_THAT(both, StatusIs(absl::StatusCode::kResourceExhausted));
  quota = Detail<google::rpc::QuotaFailure>(both.status());
  ASSERT_TRUE(quota.has_value());
  ASSERT_EQ(quota->violations_size(), 2);
  EXPECT_EQ(quota->violations(0).subject(), "user");
  EXPECT_EQ(Detail<google::rpc::ErrorInfo>(both.status())->reason(), "USER_UNIT_LIMIT");
  // The user's hold limit alone keeps the message it always had, now with details too.
  ASSERT_THAT(Place("bob", "a"), IsOk());
  ASSERT_THAT(Place("bob", "b"), IsOk());
  ASSERT_THAT(Place("bob", "c"), IsOk());
  auto fourth = Place("bob", "d");
  EXPECT_THAT(fourth,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::StartsWith("user_id already has 3 unpaid holds (max_holds "
                                             "3); the earliest expires at ")));
  EXPECT_EQ(Detail<google::rpc::ErrorInfo>(fourth.status())->reason(), "USER_HOLD_LIMIT");
}

TEST_F(HoldServiceTest, RetryWithAnotherScopeQuantityOrLabelsIsAlreadyExists) {
  PlaceHoldCommand first = Scoped("alice", "o1", "event:E1", 2);
  first.labels = {{"seat", "A1"}, {"seat", "A2"}};  // the last value of a key wins
  auto placed = Place(first);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->hold.details.labels, (store::Labels{{"seat", "A2"}}));
  auto same = Place(first);
  ASSERT_THAT(same, IsOk());
  EXPECT_FALSE(same->created);
  EXPECT_EQ(same->hold.details.place_time, placed->hold.details.place_time);
  PlaceHoldCommand other_scope = first;
  other_scope.scope = "event:E2";
  EXPECT_THAT(Place(other_scope),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("scope \"event:E1\"")));
  PlaceHoldCommand other_quantity = first;
  other_quantity.quantity = 3;
  EXPECT_THAT(Place(other_quantity),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("quantity 2")));
  PlaceHoldCommand other_labels = first;
  other_labels.labels = {{"seat", "A1"}};
  EXPECT_THAT(Place(other_labels),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("other labels")));
  // quantity 0 means 1: the same as 1.
  ASSERT_THAT(Place(Scoped("alice", "o2", "", 0)), IsOk());
  auto one = Place(Scoped("alice", "o2", "", 1));
  ASSERT_THAT(one, IsOk());
  EXPECT_FALSE(one->created);
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "already_exists"}}), 3);
}

TEST_F(HoldServiceTest, NewFieldsAreValidatedNamingTheField) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(Place(Scoped("alice", "o1", "bad\x01scope")), StatusIs(kInvalid, HasSubstr("scope")));
  EXPECT_THAT(Place(Scoped("alice", "o1", std::string(129, 's'))),
              StatusIs(kInvalid, HasSubstr("scope")));
  // Larger than the user's max_units (10) or the scope's: it could never be granted.
  EXPECT_THAT(Place(Scoped("alice", "o1", "", 11)),
              StatusIs(kInvalid, HasSubstr("quantity: 11 exceeds the user's max_units 10")));
  EXPECT_THAT(Place(Scoped("alice", "o1", "e", 5, ScopeLimits{0, 4})),
              StatusIs(kInvalid, HasSubstr("quantity: 5 exceeds max_units 4 of scope \"e\"")));
  PlaceHoldCommand limits_without_scope = Scoped("alice", "o1", "", 1, ScopeLimits{1, 0});
  EXPECT_THAT(Place(limits_without_scope), StatusIs(kInvalid, HasSubstr("scope_limits")));
  EXPECT_THAT(Place(Scoped("alice", "o1", "e", 1, ScopeLimits{10001, 0})),
              StatusIs(kInvalid, HasSubstr("scope_limits")));
  auto with_labels = [](std::vector<std::pair<std::string, std::string>> labels) {
    PlaceHoldCommand command = Scoped("alice", "o1", "");
    command.labels = std::move(labels);
    return command;
  };
  EXPECT_THAT(Place(with_labels({{"Seat", "1"}})), StatusIs(kInvalid, HasSubstr("labels")));
  EXPECT_THAT(Place(with_labels({{"", "1"}})), StatusIs(kInvalid, HasSubstr("labels")));
  EXPECT_THAT(Place(with_labels({{std::string(64, 'k'), "1"}})),
              StatusIs(kInvalid, HasSubstr("labels")));
  EXPECT_THAT(Place(with_labels({{"k", std::string(257, 'v')}})),
              StatusIs(kInvalid, HasSubstr("labels")));
  EXPECT_THAT(Place(with_labels({{"k", "\xff"}})), StatusIs(kInvalid, HasSubstr("UTF-8")));
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 17; ++i) many.emplace_back(absl::StrCat("k", i), "v");
  EXPECT_THAT(Place(with_labels(many)), StatusIs(kInvalid, HasSubstr("at most 16")));
  std::vector<std::pair<std::string, std::string>> big;
  for (int i = 0; i < 9; ++i) big.emplace_back(absl::StrCat("k", i), std::string(250, 'v'));
  EXPECT_THAT(Place(with_labels(big)), StatusIs(kInvalid, HasSubstr("2048 bytes in total")));
  auto list = List("alice");
  ASSERT_THAT(list, IsOk());
  EXPECT_TRUE(list->holds.empty());
  EXPECT_THAT(List("alice", "\x7f"), StatusIs(kInvalid, HasSubstr("scope")));
}

// A tenant's own max_units (--tenants) replaces --max_units (10 here) for its users; a user of a
// tenant without one, or of no tenant, keeps the server's.
TEST_F(HoldServiceTest, ATenantsMaxUnitsReplacesTheServersForItsUsersOnly) {
  TenantLimits acme;
  acme.max_units = 4;
  TenantTable tenants;
  tenants.Set({{"acme", acme}, {"beta", TenantLimits{}}}, {});
  service_.set_tenants(&tenants);
  const std::string acme_user = QualifiedId("acme", "alice");
  auto placed = Place(Scoped(acme_user, "o1", "", 3));
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->user_usage, (LevelUsage{1, 3, ScopeLimits{3, 4}}));
  EXPECT_THAT(Place(Scoped(acme_user, "o2", "", 2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("user_id holds 3 units; 2 more would exceed max_units 4")));
  EXPECT_THAT(Place(Scoped(acme_user, "o2", "", 5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("quantity: 5 exceeds the user's max_units 4")));
  // The same in beta and in no tenant: 3 + 2 pass, 3 + 2 + 6 is over the server's 10.
  for (const std::string& user : {QualifiedId("beta", "alice"), std::string("alice")}) {
    ASSERT_THAT(Place(Scoped(user, "o1", "", 3)), IsOk()) << user;
    ASSERT_THAT(Place(Scoped(user, "o2", "", 2)), IsOk()) << user;
    EXPECT_THAT(Place(Scoped(user, "o3", "", 6)),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("max_units 10")))
        << user;
  }
}

TEST_F(HoldServiceTest, ListHoldsFiltersByScopeAndReportsUsagePerLevel) {
  ASSERT_THAT(Place(Scoped("alice", "a1", "event:A", 2)), IsOk());
  ASSERT_THAT(Place(Scoped("alice", "b1", "event:B", 3)), IsOk());
  ASSERT_THAT(Place("alice", "plain"), IsOk());
  auto rules = ScopeRules::Create(ScopeLimits{}, {ScopeRule{"event:", ScopeLimits{2, 6}}});
  ASSERT_THAT(rules, IsOk());
  service_.SetScopeRules(*rules);
  auto all = List("alice");
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->holds.size(), 3u);
  EXPECT_EQ(all->user_usage, (LevelUsage{3, 6, ScopeLimits{3, 10}}));
  EXPECT_FALSE(all->scope_usage.has_value());
  auto a = List("alice", "event:A");
  ASSERT_THAT(a, IsOk());
  ASSERT_EQ(a->holds.size(), 1u);
  EXPECT_EQ(a->holds[0].order_id, "a1");
  EXPECT_EQ(a->holds[0].details.quantity, 2);
  EXPECT_EQ(a->user_usage, all->user_usage);
  EXPECT_EQ(a->scope_usage, (LevelUsage{1, 2, ScopeLimits{2, 6}}));
}

// A scope's capacity: held plus sold units. The refusal is SCOPE_SOLD_OUT with a retry time while
// an expiry can free room, none once the units sold alone leave none; GetScopeUsage shows sold,
// capacity and available units.
TEST_F(HoldServiceTest, ACapacityCountsHeldAndSoldUnitsAndSaysWhenItIsSoldOut) {
  auto rules = ScopeRules::Create(ScopeLimits{}, {ScopeRule{"event:", ScopeLimits{}, {}, 4}});
  ASSERT_THAT(rules, IsOk());
  service_.SetScopeRules(*rules);
  EXPECT_THAT(Place(Scoped("carol", "c1", "event:A", 5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("quantity"), HasSubstr("capacity_units 4"))));
  ASSERT_THAT(Place(Scoped("alice", "a1", "event:A", 2)), IsOk());
  ASSERT_THAT(Place(Scoped("bob", "b1", "event:A", 1)), IsOk());
  ASSERT_THAT(Pay("alice", "a1"), IsOk());  // 2 sold, 1 held
  auto usage = Await<ScopeUsageReply>(
      [&](auto done) { scopes_.GetScopeUsage("event:A", {}, std::move(done)); });
  ASSERT_THAT(usage, IsOk());
  EXPECT_EQ(usage->usage.units, 1);
  EXPECT_EQ(usage->sold_units, 2);
  EXPECT_EQ(usage->capacity_units, 4);
  EXPECT_EQ(usage->available_units, 1);
  // Held units can still expire: a retry time, bob's expiry.
  auto wait = Place(Scoped("carol", "c1", "event:A", 2));
  EXPECT_THAT(wait, StatusIs(absl::StatusCode::kResourceExhausted,
                             HasSubstr("scope \"event:A\" is sold out: 1 units held and 2 sold; 2 "
                                       "more would exceed capacity_units 4")));
  auto info = Detail<google::rpc::ErrorInfo>(wait.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "SCOPE_SOLD_OUT");
  EXPECT_EQ(Detail<google::rpc::QuotaFailure>(wait.status())->violations(0).subject(),
            "scope/event:A");
  EXPECT_TRUE(Detail<google::rpc::RetryInfo>(wait.status()).has_value());
  // Sold alone: no expiry frees room, no retry time.
  ASSERT_THAT(Place(Scoped("carol", "c2", "event:A", 1)), IsOk());
  ASSERT_THAT(Pay("bob", "b1"), IsOk());
  ASSERT_THAT(Pay("carol", "c2"), IsOk());  // 4 sold
  auto never = Place(Scoped("dave", "d1", "event:A", 1));
  EXPECT_THAT(never, StatusIs(absl::StatusCode::kResourceExhausted,
                              HasSubstr("expiries cannot free enough units")));
  EXPECT_FALSE(Detail<google::rpc::RetryInfo>(never.status()).has_value());
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "scope_sold_out"}}), 2);
  // Another scope of the rule has its own.
  EXPECT_THAT(Place(Scoped("dave", "d1", "event:B", 4)), IsOk());
}

// A scope's totals across users: the refusal's details, the metric, the usage answers, the scope
// rpcs (on the fake store, whose index is every live hold).
TEST_F(HoldServiceTest, ScopeTotalsRefuseAcrossUsersWithDetailsAndUsage) {
  auto rules = ScopeRules::Create(ScopeLimits{}, {ScopeRule{"event:", ScopeLimits{}, {2, 5}}});
  ASSERT_THAT(rules, IsOk());
  service_.SetScopeRules(*rules);
  // A quantity above total_max_units can never pass: malformed, not "retry later".
  EXPECT_THAT(Place(Scoped("carol", "c1", "event:A", 6)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("quantity"), HasSubstr("total_max_units 5"))));
  auto first = Place(Scoped("alice", "a1", "event:A", 2));
  ASSERT_THAT(first, IsOk());
  ASSERT_TRUE(first->scope_total_usage.has_value());
  EXPECT_EQ(*first->scope_total_usage, (LevelUsage{1, 2, ScopeLimits{2, 5}}));
  clock_.Advance(absl::Seconds(1));
  ASSERT_THAT(Place(Scoped("bob", "b1", "event:A", 1)), IsOk());
  // Another scope of the rule counts on its own.
  ASSERT_THAT(Place(Scoped("bob", "b2", "event:B", 1)), IsOk());
  auto refused = Place(Scoped("carol", "c1", "event:A", 1));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted,
                                HasSubstr("scope \"event:A\" already has 2 unpaid holds across all "
                                          "users (total_max_holds 2)")));
  auto quota = Detail<google::rpc::QuotaFailure>(refused.status());
  ASSERT_TRUE(quota.has_value());
  ASSERT_EQ(quota->violations_size(), 1);
  EXPECT_EQ(quota->violations(0).subject(), "scope/event:A");
  auto info = Detail<google::rpc::ErrorInfo>(refused.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "SCOPE_TOTAL_LIMIT");
  auto retry = Detail<google::rpc::RetryInfo>(refused.status());
  ASSERT_TRUE(retry.has_value());
  // alice's hold, placed 1 s earlier with the 30 min default, expires first.
  EXPECT_EQ(retry->retry_delay().seconds(), 30 * 60 - 1);
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "scope_total_limit"}}), 1);
  // The units total, with both exceeded at once: one QuotaFailure violation each.
  auto both = Place(Scoped("carol", "c1", "event:A", 3));
  ASSERT_EQ(Detail<google::rpc::QuotaFailure>(both.status())->violations_size(), 2);

  auto usage = Await<ScopeUsageReply>(
      [&](auto done) { scopes_.GetScopeUsage("event:A", {}, std::move(done)); });
  ASSERT_THAT(usage, IsOk());
  EXPECT_EQ(usage->usage, (LevelUsage{2, 3, ScopeLimits{2, 5}}));
  ASSERT_TRUE(usage->first_expire_time.has_value());
  EXPECT_THAT(
      Await<ScopeUsageReply>([&](auto done) { scopes_.GetScopeUsage("", {}, std::move(done)); }),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scope")));

  // ListScopeHolds pages across users with AIP-158 tokens bound to the scope.
  auto page = Await<ListScopeHoldsReply>([&](auto done) {
    scopes_.ListScopeHolds("event:A", ListPage{1, ""}, {}, std::move(done));
  });
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->holds.size(), 1u);
  EXPECT_EQ(page->holds[0].user_id, "alice");
  EXPECT_EQ(page->holds[0].details.quantity, 2);
  ASSERT_FALSE(page->next_page_token.empty());
  auto next = Await<ListScopeHoldsReply>([&](auto done) {
    scopes_.ListScopeHolds("event:A", ListPage{1, page->next_page_token}, {}, std::move(done));
  });
  ASSERT_THAT(next, IsOk());
  ASSERT_EQ(next->holds.size(), 1u);
  EXPECT_EQ(next->holds[0].user_id, "bob");
  EXPECT_TRUE(next->next_page_token.empty());
  EXPECT_THAT(
      Await<ListScopeHoldsReply>([&](auto done) {
        scopes_.ListScopeHolds("event:B", ListPage{1, page->next_page_token}, {}, std::move(done));
      }),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));

  // ReleaseScopeHolds ends both as CANCELLED, counts them, and frees the places.
  auto released = Await<ReleaseScopeHoldsReply>(
      [&](auto done) { scopes_.ReleaseScopeHolds("event:A", {}, std::move(done)); });
  ASSERT_THAT(released, IsOk());
  EXPECT_EQ(released->released, 2);
  EXPECT_EQ(released->holds.size(), 2u);
  EXPECT_EQ(Metric("orderhold_holds_cancelled_total"), 2);
  EXPECT_THAT(List("alice"), IsOk());
  EXPECT_TRUE(List("alice")->holds.empty());
  EXPECT_THAT(Place(Scoped("carol", "c1", "event:A", 1)), IsOk());
}

}  // namespace
}  // namespace orderhold::domain

// ExtendHold on a fake clock: the arithmetic of max(expire, min(now + ttl, cap)), the count, the
// refusals and their statuses, and the metric per result.
class ExtendHoldTest : public HoldServiceTest {
 protected:
  static HoldPolicy Policy() {
    HoldPolicy policy;
    policy.max_hold_lifetime = absl::Minutes(60);
    policy.max_extensions = 2;
    return policy;
  }
  absl::StatusOr<ExtendHoldReply> Extend(std::string order, std::optional<absl::Duration> ttl,
                                         std::string request_id = "") {
    ExtendHoldCommand command{"alice", std::move(order), ttl, std::move(request_id)};
    return Await<ExtendHoldReply>(
        [&](auto done) { extending_.ExtendHold(std::move(command), {}, std::move(done)); });
  }
  absl::StatusOr<PlaceHoldReply> PlaceHere(std::string order, absl::Duration ttl) {
    PlaceHoldCommand command;
    command.user_id = "alice";
    command.order_id = std::move(order);
    command.ttl = ttl;
    return Await<PlaceHoldReply>(
        [&](auto done) { extending_.PlaceHold(std::move(command), {}, std::move(done)); });
  }
  double Extensions(const std::string& result) {
    return Metric("orderhold_hold_extensions_total", {{"result", result}});
  }

  HoldService extending_{store_, Policy(), metrics_};
};

TEST_F(ExtendHoldTest, MovesOnTheStoreClockUpToTheCapAndCountsEachMove) {
  auto placed = PlaceHere("o1", absl::Minutes(10));
  ASSERT_THAT(placed, IsOk());
  const absl::Time t0 = placed->now;
  EXPECT_EQ(placed->hold.details.max_expire_time, t0 + absl::Minutes(60));
  clock_.Advance(absl::Minutes(9));
  auto moved = Extend("o1", absl::Minutes(20), "pay-1");
  ASSERT_THAT(moved, IsOk());
  EXPECT_TRUE(moved->extended);
  EXPECT_FALSE(moved->capped);
  EXPECT_EQ(moved->now, t0 + absl::Minutes(9));
  EXPECT_EQ(moved->hold.expire_time, t0 + absl::Minutes(29));
  EXPECT_EQ(moved->hold.details.extensions, 1);
  EXPECT_EQ(moved->extensions_left, 1);
  EXPECT_EQ(Extensions("extended"), 1);
  // The same request again (a retry after a lost answer): the first call's answer, not counted,
  // not moved again.
  clock_.Advance(absl::Minutes(1));
  auto retried = Extend("o1", absl::Minutes(20), "pay-1");
  ASSERT_THAT(retried, IsOk());
  EXPECT_TRUE(retried->extended);
  EXPECT_EQ(retried->hold.expire_time, t0 + absl::Minutes(29));
  EXPECT_EQ(retried->extensions_left, 1);
  EXPECT_EQ(Extensions("extended"), 1);  // the replay moved nothing: unchanged
  EXPECT_EQ(Extensions("unchanged"), 1);
  // Shorter than what is left: unchanged.
  auto kept = Extend("o1", absl::Minutes(1));
  ASSERT_THAT(kept, IsOk());
  EXPECT_FALSE(kept->extended);
  EXPECT_EQ(kept->hold.expire_time, t0 + absl::Minutes(29));
  EXPECT_EQ(Extensions("unchanged"), 2);
  // Past the cap (t0 + 60m): cut at it.
  clock_.Advance(absl::Minutes(15));
  auto capped = Extend("o1", absl::Minutes(40));
  ASSERT_THAT(capped, IsOk());
  EXPECT_TRUE(capped->extended);
  EXPECT_TRUE(capped->capped);
  EXPECT_EQ(capped->hold.expire_time, t0 + absl::Minutes(60));
  EXPECT_EQ(capped->extensions_left, 0);
  EXPECT_EQ(Extensions("capped"), 1);
}

TEST_F(ExtendHoldTest, UsedUpExtensionsAreResourceExhaustedWithQuotaFailure) {
  ASSERT_THAT(PlaceHere("o1", absl::Minutes(1)), IsOk());
  for (int i = 0; i < 2; ++i) {
    clock_.Advance(absl::Seconds(30));
    ASSERT_THAT(Extend("o1", absl::Minutes(1)), IsOk());
  }
  clock_.Advance(absl::Seconds(30));
  absl::StatusOr<ExtendHoldReply> refused = Extend("o1", absl::Minutes(1));
  EXPECT_THAT(refused,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("extended 2 times"), HasSubstr("max_extensions 2"))));
  auto quota = Detail<google::rpc::QuotaFailure>(refused.status());
  ASSERT_TRUE(quota.has_value());
  ASSERT_EQ(quota->violations_size(), 1);
  EXPECT_EQ(quota->violations(0).subject(), "hold/extensions");
  auto info = Detail<google::rpc::ErrorInfo>(refused.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "HOLD_EXTENSION_LIMIT");
  EXPECT_EQ(info->metadata().at("order_id"), "o1");
  EXPECT_FALSE(Detail<google::rpc::RetryInfo>(refused.status()).has_value());
  EXPECT_EQ(Extensions("exhausted"), 1);
}

TEST_F(ExtendHoldTest, EndedUnknownAndMalformedAreRefusedNamingWhy) {
  ASSERT_THAT(PlaceHere("o1", absl::Seconds(10)), IsOk());
  ASSERT_THAT(PlaceHere("paid", absl::Seconds(10)), IsOk());
  ASSERT_THAT(
      Await<PayReply>([&](auto done) { extending_.Pay("alice", "paid", {}, std::move(done)); }),
      IsOk());
  clock_.Advance(absl::Seconds(10));  // o1 expires now: extending must not resurrect it
  EXPECT_THAT(Extend("o1", absl::Minutes(5)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("EXPIRED at"), HasSubstr("can no longer be extended"))));
  EXPECT_EQ(Metric("orderhold_holds_expired_total"), 1);
  EXPECT_THAT(Extend("o1", absl::Minutes(5)),  // the same answer once ended
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("EXPIRED at")));
  EXPECT_THAT(Extend("paid", absl::Minutes(5)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("PAID at")));
  EXPECT_EQ(Extensions("ended"), 3);
  EXPECT_THAT(Extend("never", absl::Minutes(5)), StatusIs(absl::StatusCode::kNotFound));
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(Extend("o1", absl::ZeroDuration()), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(Extend("o1", absl::Hours(25)), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(Extend("o1", absl::Minutes(1), std::string(65, 'r')),
              StatusIs(kInvalid, HasSubstr("request_id")));
  EXPECT_THAT(Extend("o1", absl::Minutes(1), "a\nb"), StatusIs(kInvalid, HasSubstr("request_id")));
  EXPECT_THAT(Extend("", absl::Minutes(1)), StatusIs(kInvalid, HasSubstr("order_id")));
}

TEST_F(HoldServiceTest, GetHoldReadsLiveAndEndedHoldsAndReleaseHoldsCountsCancellations) {
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(60)), IsOk());
  ASSERT_THAT(Place("alice", "o2", absl::Seconds(5)), IsOk());
  auto get = [&](std::string order) {
    return Await<GetHoldReply>(
        [&](auto done) { service_.GetHold("alice", order, {}, std::move(done)); });
  };
  auto live = get("o1");
  ASSERT_THAT(live, IsOk());
  EXPECT_FALSE(live->end.has_value());
  EXPECT_EQ(live->hold.expire_time - live->now, absl::Seconds(60));
  clock_.Advance(absl::Seconds(5));
  auto expired = get("o2");  // due, nothing has ended it: EXPIRED at its expire_time
  ASSERT_THAT(expired, IsOk());
  ASSERT_TRUE(expired->end.has_value());
  EXPECT_EQ(expired->end->outcome, store::HoldOutcome::kExpired);
  EXPECT_EQ(expired->end->end_time, expired->hold.expire_time);
  EXPECT_THAT(get("never"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(get(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("order_id")));

  auto released = Await<ReleaseHoldsReply>(
      [&](auto done) { service_.ReleaseHolds("alice", "", {}, std::move(done)); });
  ASSERT_THAT(released, IsOk());
  ASSERT_EQ(released->holds.size(), 1u);
  EXPECT_EQ(released->holds[0].order_id, "o1");
  EXPECT_EQ(released->holds[0].user_id, "alice");
  EXPECT_EQ(Metric("orderhold_holds_cancelled_total"), 1);
  EXPECT_EQ(Metric("orderhold_holds_expired_total"), 1);  // o2, ended on the way
  EXPECT_EQ(Metric("orderhold_events_appended_total"), 2);
  auto cancelled = get("o1");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->end->outcome, store::HoldOutcome::kCancelled);
  EXPECT_THAT(Await<ReleaseHoldsReply>([&](auto done) {
                service_.ReleaseHolds("alice", "bad\x01", {}, std::move(done));
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scope")));
}

// ListHolds pages with AIP-158 tokens: opaque, bound to the user and scope they came from.
TEST_F(HoldServiceTest, ListHoldsPagesWithTokensBoundToTheirRequest) {
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_THAT(Place("alice", absl::StrCat("o", i)), IsOk());
  }
  auto page = [&](std::string user, int64_t size, std::string token) {
    return Await<ListHoldsReply>([&](auto done) {
      service_.ListHolds(user, "", ListPage{size, token}, {}, std::move(done));
    });
  };
  auto first = page("alice", 2, "");
  ASSERT_THAT(first, IsOk());
  ASSERT_EQ(first->holds.size(), 2u);
  ASSERT_FALSE(first->next_page_token.empty());
  auto second = page("alice", 2, first->next_page_token);
  ASSERT_THAT(second, IsOk());
  ASSERT_EQ(second->holds.size(), 1u);
  EXPECT_EQ(second->holds[0].order_id, "o2");
  EXPECT_TRUE(second->next_page_token.empty());
  // Bound to its request, and checked before the store is asked.
  EXPECT_THAT(page("bob", 2, first->next_page_token),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token: issued for")));
  EXPECT_THAT(Await<ListHoldsReply>([&](auto done) {
                service_.ListHolds("alice", "event:E1", ListPage{2, first->next_page_token}, {},
                                   std::move(done));
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
  EXPECT_THAT(page("alice", 2, "not a token"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
  EXPECT_THAT(page("alice", 2, std::string(kMaxPageTokenBytes + 1, 'A')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token: longer")));
  EXPECT_THAT(page("alice", -1, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_size")));
  // 0 is the default page size, a huge one the maximum.
  EXPECT_EQ(ResolvePageSize(0).value_or(-1), kDefaultPageSize);
  EXPECT_EQ(ResolvePageSize(1 << 30).value_or(-1), kMaxPageSize);
}
}  // namespace
}  // namespace orderhold::domain

namespace orderhold::domain {
namespace {

// Runtime scope rules through the domain, on the fake store (the contract suite checks the store).
class ScopeRuleServiceTest : public HoldServiceTest {
 protected:
  absl::StatusOr<ScopeRuleReply> Put(store::ScopeRuleRecord rule) {
    return Await<ScopeRuleReply>(
        [&](auto done) { rules_.PutScopeRule(std::move(rule), {}, std::move(done)); });
  }
  static store::ScopeRuleRecord Rule(std::string scope) {
    store::ScopeRuleRecord rule;
    rule.scope = std::move(scope);
    return rule;
  }
  ScopeRuleService rules_{store_, scopes_};
};

TEST_F(ScopeRuleServiceTest, ABadRuleIsInvalidArgumentNamingTheFieldAndWritesNothing) {
  store::ScopeRuleRecord rule = Rule("");
  EXPECT_THAT(Put(rule), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.scope")));
  rule = Rule("event:1");
  rule.limits.max_holds = kMaxScopeHolds + 1;
  EXPECT_THAT(Put(rule),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.limits.max_holds")));
  rule = Rule("event:1");
  rule.purchases.max_units = kMaxScopeTotal + 1;
  EXPECT_THAT(Put(rule),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.max_purchased_units")));
  rule = Rule("event:1");
  rule.open_time = absl::FromUnixSeconds(2000000000);
  rule.close_time = *rule.open_time;
  EXPECT_THAT(Put(rule), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.open_time")));
  rule = Rule("event:1");
  rule.etag = std::string(kMaxEtagBytes + 1, '1');
  EXPECT_THAT(Put(rule), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.etag")));
  EXPECT_THAT(Await<ScopeRuleReply>(
                  [&](auto done) { rules_.GetScopeRule("event:1", {}, std::move(done)); }),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ScopeRuleServiceTest, ATenantListsOnlyItsOwnRules) {
  for (const char* tenant : {"", "acme", "other"}) {
    ASSERT_THAT(Put(Rule(QualifiedId(tenant, "event:1"))), IsOk());
    ASSERT_THAT(Put(Rule(QualifiedId(tenant, "event:2"))), IsOk());
  }
  for (const char* tenant : {"", "acme"}) {
    std::vector<std::string> seen;
    ListPage page;
    page.page_size = 1;
    for (int pages = 0; pages < 20; ++pages) {
      auto listed = Await<ListScopeRulesReply>(
          [&](auto done) { rules_.ListScopeRules(tenant, page, {}, std::move(done)); });
      ASSERT_THAT(listed, IsOk());
      for (const ScopeRuleReply& rule : listed->rules) seen.push_back(rule.rule.scope);
      if (listed->next_page_token.empty()) break;
      page.page_token = listed->next_page_token;
    }
    EXPECT_THAT(seen, ::testing::UnorderedElementsAre(QualifiedId(tenant, "event:1"),
                                                      QualifiedId(tenant, "event:2")))
        << tenant;
  }
  // A token of one tenant's listing does not continue another's.
  ListPage page;
  page.page_size = 1;
  auto first = Await<ListScopeRulesReply>(
      [&](auto done) { rules_.ListScopeRules("acme", page, {}, std::move(done)); });
  ASSERT_THAT(first, IsOk());
  page.page_token = first->next_page_token;
  EXPECT_THAT(Await<ListScopeRulesReply>(
                  [&](auto done) { rules_.ListScopeRules("other", page, {}, std::move(done)); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
}

TEST_F(ScopeRuleServiceTest, PlacementsAnswerWithTheRulesLimitsAndItsStatesRefusals) {
  store::ScopeRuleRecord rule = Rule("event:R");
  rule.limits = {0, 6};
  rule.totals = {50, 0};
  ASSERT_THAT(Put(rule), IsOk());
  auto placed = Place(Scoped("alice", "o1", "event:R", 5));  // above no file rule: none here
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->scope_usage->limits, (ScopeLimits{0, 6}));
  auto listed = Await<ListHoldsReply>(
      [&](auto done) { service_.ListHolds("alice", "event:R", {}, std::move(done)); });
  ASSERT_THAT(listed, IsOk());
  EXPECT_EQ(listed->scope_usage->limits, (ScopeLimits{0, 6}));  // the rule's, not the file's
  EXPECT_EQ(placed->scope_total_usage->limits, (ScopeTotals{50, 0}));
  EXPECT_THAT(Place(Scoped("bob", "o1", "event:R", 7)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("quantity: 7 exceeds max_units 6 of scope \"event:R\"")));
  // Not open until a time: FAILED_PRECONDITION with the time to retry at.
  rule.state = store::ScopeState::kPaused;
  rule.open_time = clock_.Now() + absl::Seconds(90);
  ASSERT_THAT(Put(rule), IsOk());
  absl::Status paused = Place(Scoped("bob", "o1", "event:R")).status();
  EXPECT_THAT(paused, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not open")));
  EXPECT_EQ(Detail<google::rpc::ErrorInfo>(paused)->reason(), "SCOPE_NOT_OPEN");
  EXPECT_EQ(Detail<google::rpc::RetryInfo>(paused)->retry_delay().seconds(), 90);
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "scope_not_open"}}), 1);
  // Closed: no retry time; a retry of the live hold still answers it.
  ASSERT_THAT(Await<CloseScopeReply>(
                  [&](auto done) { rules_.CloseScope("event:R", true, {}, std::move(done)); }),
              IsOk());
  absl::Status closed = Place(Scoped("bob", "o1", "event:R")).status();
  EXPECT_EQ(Detail<google::rpc::ErrorInfo>(closed)->reason(), "SCOPE_CLOSED");
  EXPECT_FALSE(Detail<google::rpc::RetryInfo>(closed).has_value());
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "scope_closed"}}), 1);
  EXPECT_THAT(List("alice"), IsOk());
  EXPECT_TRUE(List("alice")->holds.empty());  // released by the close
}

TEST_F(ScopeRuleServiceTest, BadLimitClassesAreInvalidArgumentNamingTheField) {
  const auto with_class = [](const std::string& name, store::LimitClassRecord c) {
    store::ScopeRuleRecord rule = Rule("event:C");
    rule.classes[name] = std::move(c);
    return rule;
  };
  const store::LimitClassRecord ok{{0, 4}, {}, {"uri:spiffe://t/desk"}};
  EXPECT_THAT(Put(with_class("box_office", ok)), IsOk());
  EXPECT_THAT(Put(with_class("box office", ok)), StatusIs(absl::StatusCode::kInvalidArgument,
                                                          HasSubstr("rule.classes: a class name")));
  EXPECT_THAT(Put(with_class(std::string(kMaxLimitClassNameBytes + 1, 'a'), ok)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.classes")));
  EXPECT_THAT(Put(with_class("vip", {{kMaxScopeHolds + 1, 0}, {}, {"dns:a"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rule.classes[vip].limits.max_holds")));
  EXPECT_THAT(Put(with_class("vip", {{}, {0, kMaxScopeTotal + 1}, {"dns:a"}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rule.classes[vip].max_purchased_units")));
  EXPECT_THAT(Put(with_class("vip", {{}, {}, {}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rule.classes[vip].principals: required")));
  for (const std::string& principal :
       {std::string("spiffe://t/a"), std::string("uri:"), std::string("dns:a\nb"),
        "dns:" + std::string(kMaxPrincipalBytes + 1, 'a'), std::string("dns:\xff")}) {
    EXPECT_THAT(
        Put(with_class("vip", {{}, {}, {"dns:ok", principal}})),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rule.classes[vip].principals[1]")))
        << principal;
  }
  store::ScopeRuleRecord many = Rule("event:C");
  for (int i = 0; i <= kMaxLimitClasses; ++i) many.classes[absl::StrCat("c", i)] = ok;
  EXPECT_THAT(Put(many), StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("rule.classes: at most 16 classes")));
  store::ScopeRuleRecord crowded = Rule("event:C");
  for (int i = 0; i < 2; ++i) {
    store::LimitClassRecord& c = crowded.classes[absl::StrCat("c", i)];
    for (int p = 0; p < kMaxClassPrincipals / 2 + 1; ++p) {
      c.principals.push_back(absl::StrCat("dns:p", p));
    }
  }
  EXPECT_THAT(Put(crowded), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("at most 64 principals in all")));
}

TEST_F(ScopeRuleServiceTest, ALimitClassTheCallerMayNotUseIsPermissionDenied) {
  store::ScopeRuleRecord rule = Rule("event:C");
  rule.limits = {0, 2};
  rule.classes["box_office"] = store::LimitClassRecord{{0, 10}, {}, {"uri:spiffe://t/desk"}};
  ASSERT_THAT(Put(rule), IsOk());
  PlaceHoldCommand desk = Scoped("walk-in", "o1", "event:C", 8);
  desk.limit_class = "box_office";
  desk.caller_identities = {"uri:spiffe://t/desk"};
  auto placed = Place(desk);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->scope_usage->limits, (ScopeLimits{0, 10}));
  PlaceHoldCommand shop = Scoped("fan", "o1", "event:C", 1);
  shop.limit_class = "box_office";
  shop.caller_identities = {"uri:spiffe://t/shop"};
  const absl::Status denied = Place(shop).status();
  EXPECT_THAT(denied, StatusIs(absl::StatusCode::kPermissionDenied,
                               HasSubstr("limit_class: scope \"event:C\" has no runtime rule "
                                         "with a class \"box_office\" that lists the caller")));
  const std::optional<google::rpc::ErrorInfo> info = Detail<google::rpc::ErrorInfo>(denied);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "LIMIT_CLASS_DENIED");
  EXPECT_EQ(info->metadata().at("limit_class"), "box_office");
  EXPECT_EQ(info->metadata().at("scope"), "event:C");
  EXPECT_EQ(Metric("orderhold_holds_rejected_total", {{"reason", "limit_class_denied"}}), 1);
  // Malformed: INVALID_ARGUMENT before the store.
  PlaceHoldCommand unscoped = Scoped("fan", "o2", "", 1);
  unscoped.limit_class = "box_office";
  EXPECT_THAT(Place(unscoped), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("limit_class: only with a scope")));
  PlaceHoldCommand bad_name = Scoped("fan", "o2", "event:C", 1);
  bad_name.limit_class = "box office";
  EXPECT_THAT(Place(bad_name),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit_class: a class name")));
}

class ReturnServiceTest : public HoldServiceTest {
 protected:
  absl::StatusOr<ReturnUnitsReply> Return(std::string user, std::string order, int64_t units,
                                          std::string request_id) {
    return Await<ReturnUnitsReply>([&](auto done) {
      returns_.ReturnUnits(
          ReturnUnitsCommand{std::move(user), std::move(order), units, std::move(request_id)}, {},
          std::move(done));
    });
  }
  ReturnService returns_{store_, metrics_};
};

TEST_F(ReturnServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  EXPECT_THAT(Return("", "o1", 1, "r1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("user_id")));
  EXPECT_THAT(Return("u1", "", 1, "r1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("order_id")));
  EXPECT_THAT(Return("u1", "o1", 0, "r1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("units")));
  EXPECT_THAT(Return("u1", "o1", 1, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_id")));
  EXPECT_THAT(Return("u1", "o1", 1, std::string(129, 'r')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("request_id")));
}

TEST_F(ReturnServiceTest, OnlyAPaidHoldsUnitsGoBackAndNeverMoreThanItHad) {
  ASSERT_THAT(Place(Scoped("u1", "o1", "event:1", 3)), IsOk());
  EXPECT_THAT(Return("u1", "o1", 1, "r1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not paid")));
  EXPECT_THAT(Return("u1", "nothing", 1, "r1"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(Pay("u1", "o1", "pi_1"), IsOk());
  absl::StatusOr<ReturnUnitsReply> first = Return("u1", "o1", 2, "r1");
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->returned_units, 2);
  EXPECT_EQ(first->total_returned_units, 2);
  EXPECT_FALSE(first->already_returned);
  EXPECT_EQ(first->payment_reference, "pi_1");
  EXPECT_EQ(first->hold.details.quantity, 3);
  EXPECT_FALSE(first->scope_usage.has_value());  // the scope has no runtime rule
  absl::StatusOr<ReturnUnitsReply> retry = Return("u1", "o1", 1, "r1");
  ASSERT_THAT(retry, IsOk());
  EXPECT_TRUE(retry->already_returned);
  EXPECT_EQ(retry->returned_units, 2);
  absl::StatusOr<ReturnUnitsReply> over = Return("u1", "o1", 2, "r2");
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("1 of its 3")));
  auto info = Detail<google::rpc::ErrorInfo>(over.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "RETURN_EXCEEDS_QUANTITY");
  EXPECT_EQ(info->metadata().at("returned_units"), "2");
  EXPECT_EQ(Metric("orderhold_units_returned_total"), 2);   // the retry and the refusal add none
  EXPECT_EQ(Metric("orderhold_events_appended_total"), 2);  // the payment's, the return's
  ASSERT_THAT(Place("u1", "o2"), IsOk());
  ASSERT_THAT(Cancel("u1", "o2"), IsOk());
  EXPECT_THAT(Return("u1", "o2", 1, "r1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("CANCELLED")));
}

}  // namespace
}  // namespace orderhold::domain
