// Unit tests of the CLI's pure formatting and argument logic (place, extend, pay, get, list,
// release, ...), of the client's time conversions and error details, and of RunCommand against a
// fake OrderHold service on an in-process channel. No network, no clock: every time value is a
// constant.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/orderhold_client.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace orderhold::client {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// 2026-11-21T10:00:00Z.
constexpr int64_t kExpireUnixSeconds = 1795255200;
// 2026-11-21T09:30:00Z.
constexpr int64_t kPlaceUnixSeconds = kExpireUnixSeconds - 1800;
// 2026-11-21T11:30:00Z: the lifetime cap (Hold.max_expire_time) of a hold placed at
// kPlaceUnixSeconds under the server's default --max_hold_lifetime, 2h.
constexpr int64_t kCapUnixSeconds = kPlaceUnixSeconds + 7200;

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

// A hold as the release before ExtendHold answers it: quantity and place time always set, no cap.
orderhold::v1::Hold MakePreviousHold(absl::Duration remaining) {
  orderhold::v1::Hold hold = MakeHold(remaining);
  hold.set_quantity(1);
  hold.mutable_place_time()->set_seconds(kPlaceUnixSeconds);
  return hold;
}

// A hold as this release's server answers it: also its lifetime cap, always set.
orderhold::v1::Hold MakeNewHold(absl::Duration remaining) {
  orderhold::v1::Hold hold = MakePreviousHold(remaining);
  hold.mutable_max_expire_time()->set_seconds(kCapUnixSeconds);
  return hold;
}

orderhold::v1::Hold MakeScopedHold(absl::Duration remaining) {
  orderhold::v1::Hold hold = MakeNewHold(remaining);
  hold.set_order_id("order-9");
  hold.set_scope("event:E42");
  hold.set_quantity(2);
  (*hold.mutable_labels())["seat"] = "A12";
  (*hold.mutable_labels())["row"] = "3";
  hold.mutable_scope_limits()->set_max_holds(2);
  hold.mutable_scope_limits()->set_max_units(8);
  return hold;
}

orderhold::v1::LimitUsage Usage(uint32_t holds, uint32_t max_holds, uint32_t units,
                                uint32_t max_units) {
  orderhold::v1::LimitUsage usage;
  usage.set_holds(holds);
  usage.set_max_holds(max_holds);
  usage.set_units(units);
  usage.set_max_units(max_units);
  return usage;
}

TEST(FormatHoldTest, PlainHoldOfThePreviousServerReadsAsBefore) {
  // quantity 1 and a place time, but no scope, units, labels or cap: nothing added.
  const orderhold::v1::Hold hold = MakePreviousHold(absl::Minutes(29) + absl::Seconds(58));
  EXPECT_EQ(FormatHoldDetails(hold), "");
  EXPECT_EQ(FormatHold(hold), "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z");
}

TEST(FormatHoldTest, PlainHoldOfANewServerAddsOnlyItsCap) {
  // The place time stays out of a plain hold's line, as before; the cap is new.
  const orderhold::v1::Hold hold = MakeNewHold(absl::Minutes(29) + absl::Seconds(58));
  EXPECT_EQ(FormatHoldDetails(hold), "cap 2026-11-21T11:30:00Z");
  EXPECT_EQ(FormatHold(hold),
            "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z");
}

TEST(FormatHoldTest, ExtensionsOnlyWhenThereWereAny) {
  orderhold::v1::Hold hold = MakeNewHold(absl::Minutes(50));
  hold.set_extensions(2);
  EXPECT_EQ(FormatHoldDetails(hold), "cap 2026-11-21T11:30:00Z, extensions 2");
  orderhold::v1::Hold capless = MakeHold(absl::Minutes(50));  // extended on an older server
  capless.set_extensions(1);
  EXPECT_EQ(FormatHoldDetails(capless), "extensions 1");
}

TEST(FormatHoldTest, ScopeUnitsLabelsAndPlaceTime) {
  const orderhold::v1::Hold hold = MakeScopedHold(absl::Minutes(29));
  EXPECT_EQ(FormatHoldDetails(hold),
            "scope event:E42 (max_holds 2, max_units 8), 2 units, labels row=3 seat=A12, placed at "
            "2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z");
  EXPECT_EQ(FormatHold(hold),
            "order-9 (user alice) expires in 29m at 2026-11-21T10:00:00Z; scope event:E42 "
            "(max_holds 2, max_units 8), 2 units, labels row=3 seat=A12, placed at "
            "2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z");

  orderhold::v1::Hold scoped_only = MakeHold(absl::Minutes(1));
  scoped_only.set_scope("event:E42");  // quantity unset (0) counts 1; no place time: not shown
  EXPECT_EQ(FormatHoldDetails(scoped_only), "scope event:E42, 1 unit");
  scoped_only.mutable_scope_limits()->set_max_units(4);  // only the limits that are not 0
  EXPECT_EQ(FormatHoldDetails(scoped_only), "scope event:E42 (max_units 4), 1 unit");
  orderhold::v1::Hold units_only = MakeNewHold(absl::Minutes(1));
  units_only.set_quantity(4);
  EXPECT_EQ(FormatHoldDetails(units_only),
            "4 units, placed at 2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z");
  units_only.clear_max_expire_time();  // as the release before ExtendHold answered it
  EXPECT_EQ(FormatHoldDetails(units_only), "4 units, placed at 2026-11-21T09:30:00Z");
}

TEST(FormatUsageTest, LimitOrNoLimit) {
  EXPECT_EQ(FormatUsage("user", Usage(1, 3, 2, 8)), "user: holds 1/3, units 2/8");
  EXPECT_EQ(FormatUsage("scope event:E42", Usage(1, 0, 2, 0)),
            "scope event:E42: holds 1 (no limit), units 2 (no limit)");
}

TEST(FormatUsageTest, ShownOnlyWhenScopesOrUnitsAreInPlay) {
  const orderhold::v1::LimitUsage scope = Usage(1, 2, 1, 0);
  EXPECT_FALSE(ShowsUsage(Usage(2, 3, 2, 0), nullptr));  // today's answer
  EXPECT_FALSE(ShowsUsage(Usage(0, 0, 0, 0), nullptr));  // an older server's: no usage at all
  EXPECT_TRUE(ShowsUsage(Usage(2, 3, 2, 0), &scope));    // a scope
  EXPECT_TRUE(ShowsUsage(Usage(2, 3, 2, 10), nullptr));  // a unit limit
  EXPECT_TRUE(ShowsUsage(Usage(2, 3, 5, 0), nullptr));   // quantities
}

TEST(FormatPlaceHoldTest, UnscopedAnswerOfANewServerAddsOnlyTheCap) {
  orderhold::v1::PlaceHoldResponse response;
  *response.mutable_hold() = MakePreviousHold(absl::Minutes(29) + absl::Seconds(58));
  response.set_created(true);
  response.set_active_holds(1);
  response.set_max_holds(3);
  *response.mutable_user_usage() = Usage(1, 3, 1, 0);
  EXPECT_EQ(FormatPlaceHold(response), "placed order-1 for alice: expires in 29m58s (1/3 active)");

  *response.mutable_hold() = MakeNewHold(absl::Minutes(29) + absl::Seconds(58));
  EXPECT_EQ(FormatPlaceHold(response),
            "placed order-1 for alice: expires in 29m58s (1/3 active); cap 2026-11-21T11:30:00Z");
}

TEST(FormatPlaceHoldTest, ScopedShowsTheHoldsDetailsAndTheUsageOfEachLevel) {
  orderhold::v1::PlaceHoldResponse response;
  *response.mutable_hold() = MakeScopedHold(absl::Minutes(29) + absl::Seconds(58));
  response.set_created(true);
  response.set_active_holds(2);
  response.set_max_holds(3);
  *response.mutable_user_usage() = Usage(2, 3, 3, 0);
  *response.mutable_scope_usage() = Usage(1, 2, 2, 8);
  EXPECT_EQ(FormatPlaceHold(response),
            "placed order-9 for alice: expires in 29m58s (2/3 active); scope event:E42 "
            "(max_holds 2, max_units 8), 2 units, labels row=3 seat=A12, placed at "
            "2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z\n"
            "user: holds 2/3, units 3 (no limit)\n"
            "scope event:E42: holds 1/2, units 2/8");

  response.set_created(false);
  EXPECT_THAT(FormatPlaceHold(response),
              StartsWith("order-9 for alice already held: expires in 29m58s (created=false); "
                         "scope event:E42 (max_holds 2, max_units 8), 2 units,"));
}

TEST(FormatListHoldsTest, UnitsAddTheUsageLine) {
  orderhold::v1::ListHoldsResponse response;
  response.set_max_holds(3);
  orderhold::v1::Hold hold = MakeNewHold(absl::Seconds(90));
  hold.set_quantity(4);
  *response.add_holds() = hold;
  *response.mutable_user_usage() = Usage(1, 3, 4, 10);
  EXPECT_EQ(FormatListHolds("alice", response),
            "alice: 1/3 holds\n"
            "  order-1 (user alice) expires in 1m30s at 2026-11-21T10:00:00Z; 4 units, placed at "
            "2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z\n"
            "user: holds 1/3, units 4/10\n");
}

TEST(FormatListHoldsTest, ScopeFilterCountsAgainstTheScopesLimit) {
  orderhold::v1::ListHoldsResponse response;
  response.set_max_holds(3);
  *response.add_holds() = MakeScopedHold(absl::Minutes(29));
  *response.mutable_user_usage() = Usage(2, 3, 3, 0);
  *response.mutable_scope_usage() = Usage(1, 2, 2, 8);
  EXPECT_EQ(FormatListHolds("alice", response, "event:E42"),
            "alice in scope event:E42: 1/2 holds\n"
            "  order-9 (user alice) expires in 29m at 2026-11-21T10:00:00Z; scope event:E42 "
            "(max_holds 2, max_units 8), 2 units, labels row=3 seat=A12, placed at "
            "2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z\n"
            "user: holds 2/3, units 3 (no limit)\n"
            "scope event:E42: holds 1/2, units 2/8\n");

  orderhold::v1::ListHoldsResponse none;
  none.set_max_holds(3);
  *none.mutable_user_usage() = Usage(0, 3, 0, 0);
  *none.mutable_scope_usage() = Usage(0, 0, 0, 0);
  EXPECT_EQ(FormatListHolds("bob", none, "event:E7"),
            "bob in scope event:E7: 0 holds (no limit)\n"
            "user: holds 0/3, units 0 (no limit)\n"
            "scope event:E7: holds 0 (no limit), units 0 (no limit)\n");
}

// `list --scope` right after `place --scope_max_holds 2 --scope_max_units 8`: the server's rules
// for the scope are none (scope_usage's limits are 0), but the holds were placed, and are checked,
// under the limits they carry. The header and the scope line show those, not "(no limit)".
TEST(FormatListHoldsTest, ScopeFilterShowsTheLimitsTheHoldsCarry) {
  orderhold::v1::ListHoldsResponse response;
  response.set_max_holds(3);
  *response.add_holds() = MakeScopedHold(absl::Minutes(29));
  orderhold::v1::Hold second = MakeScopedHold(absl::Minutes(30));
  second.set_order_id("order-10");
  *response.add_holds() = second;
  *response.mutable_user_usage() = Usage(2, 3, 4, 0);
  *response.mutable_scope_usage() = Usage(2, 0, 4, 0);  // the server's rules: none
  const std::string out = FormatListHolds("alice", response, "event:E42");
  EXPECT_THAT(out, StartsWith("alice in scope event:E42: 2/2 holds\n"));
  EXPECT_THAT(out, EndsWith("user: holds 2/3, units 4 (no limit)\n"
                            "scope event:E42: holds 2/2, units 4/8\n"));

  // Holds placed under different limits: each line shows its own, the header says they differ.
  second.mutable_scope_limits()->set_max_holds(3);
  *response.mutable_holds(1) = second;
  const std::string mixed = FormatListHolds("alice", response, "event:E42");
  EXPECT_THAT(mixed, StartsWith("alice in scope event:E42: 2 holds (limits differ by hold)\n"));
  EXPECT_THAT(mixed, EndsWith("scope event:E42: holds 2 (limits differ by hold), units 4/8\n"));

  // Holds that carry no limits (a scoped hold answered without them): the server's rules.
  for (orderhold::v1::Hold& hold : *response.mutable_holds()) hold.clear_scope_limits();
  *response.mutable_scope_usage() = Usage(2, 5, 4, 0);
  EXPECT_THAT(FormatListHolds("alice", response, "event:E42"),
              StartsWith("alice in scope event:E42: 2/5 holds\n"));
}

TEST(FormatPayTest, OneLine) {
  orderhold::v1::PayResponse response;
  *response.mutable_hold() = MakeHold(absl::Minutes(12) + absl::Seconds(3));
  EXPECT_EQ(FormatPay(response), "paid order-1 for alice (had 12m3s left)");
  response.mutable_hold()->set_payment_reference("pi_3N1");
  EXPECT_EQ(FormatPay(response), "paid order-1 for alice with pi_3N1 (had 12m3s left)");
}

// ---------------------------------------------------------------------------------------------
// ReturnUnits and RETURNED events

// The hold a ReturnUnits answer (and a RETURNED event) carries: the scoped hold as paid, with its
// payment reference and no time left.
orderhold::v1::Hold PaidScopedHold() {
  orderhold::v1::Hold hold = MakeScopedHold(absl::ZeroDuration());
  hold.clear_remaining();
  hold.set_payment_reference("pi_3N1");
  return hold;
}

TEST(FormatReturnUnitsTest, ReturnedUnitsAndTheTotal) {
  orderhold::v1::ReturnUnitsResponse response;
  *response.mutable_hold() = PaidScopedHold();  // 2 units
  response.set_returned_units(1);
  response.set_total_returned_units(1);
  EXPECT_EQ(FormatReturnUnits(response),
            "returned 1 unit of order-9 for alice (1 of 2 returned in all)");

  // The scope has a runtime rule: the user's purchase-cap level there follows.
  *response.mutable_scope_usage() = Usage(1, 0, 1, 8);
  EXPECT_EQ(FormatReturnUnits(response),
            "returned 1 unit of order-9 for alice (1 of 2 returned in all)\n"
            "scope event:E42 held + bought: holds 1 (no limit), units 1/8");

  orderhold::v1::ReturnUnitsResponse bare;  // no quantity in the answer: the total alone
  bare.mutable_hold()->set_user_id("alice");
  bare.mutable_hold()->set_order_id("order-1");
  bare.set_returned_units(3);
  bare.set_total_returned_units(3);
  EXPECT_EQ(FormatReturnUnits(bare), "returned 3 units of order-1 for alice (3 returned in all)");
}

TEST(FormatReturnUnitsTest, AlreadyReturnedIsARetry) {
  orderhold::v1::ReturnUnitsResponse response;
  *response.mutable_hold() = PaidScopedHold();
  response.set_returned_units(2);
  response.set_total_returned_units(2);
  response.set_already_returned(true);
  // Every unit back: the hold no longer counts against the scope's purchase caps.
  *response.mutable_scope_usage() = Usage(0, 2, 0, 8);
  EXPECT_EQ(FormatReturnUnits(response),
            "2 units of order-9 for alice were already returned (2 of 2 returned in all)\n"
            "scope event:E42 held + bought: holds 0/2, units 0/8");

  response.clear_scope_usage();
  response.set_returned_units(1);  // the first call's units, whatever the retry asked
  response.set_total_returned_units(1);
  EXPECT_EQ(FormatReturnUnits(response),
            "1 unit of order-9 for alice was already returned (1 of 2 returned in all)");
}

// A RETURNED event as the server streams it: 2 units of the paid scoped hold given back.
orderhold::v1::HoldEvent ReturnedEvent() {
  orderhold::v1::HoldEvent event;
  event.set_event_id("3/1795255800000-0");
  *event.mutable_hold() = PaidScopedHold();
  event.set_outcome(orderhold::v1::RETURNED);
  event.mutable_end_time()->set_seconds(kPlaceUnixSeconds + 600);
  event.set_delivery_count(1);
  event.set_returned_units(2);
  return event;
}

TEST(FormatHoldEventTest, ReturnedEventLineCarriesItsUnits) {
  const std::string line = FormatHoldEvent(ReturnedEvent());
  EXPECT_THAT(line, StartsWith("{\"eventId\":\"3/1795255800000-0\",\"hold\":{"));
  EXPECT_THAT(line, EndsWith("}"));
  EXPECT_EQ(line.find('\n'), std::string::npos);  // one line per event
  EXPECT_THAT(line, HasSubstr("\"outcome\":\"RETURNED\""));
  EXPECT_THAT(line, HasSubstr("\"returnedUnits\":2"));
  EXPECT_THAT(line, HasSubstr("\"endTime\":\"2026-11-21T09:40:00Z\""));
  EXPECT_THAT(line, HasSubstr("\"orderId\":\"order-9\""));
  EXPECT_THAT(line, HasSubstr("\"quantity\":2"));  // the hold as paid, not what is left
  EXPECT_THAT(line, HasSubstr("\"paymentReference\":\"pi_3N1\""));

  // An end: every field is printed, so its returnedUnits reads 0.
  orderhold::v1::HoldEvent paid = ReturnedEvent();
  paid.set_outcome(orderhold::v1::PAID);
  paid.clear_returned_units();
  const std::string end = FormatHoldEvent(paid);
  EXPECT_THAT(end, HasSubstr("\"outcome\":\"PAID\""));
  EXPECT_THAT(end, HasSubstr("\"returnedUnits\":0"));
}

// ---------------------------------------------------------------------------------------------
// ExtendHold, GetHold, ReleaseHolds

// An ExtendHold answer: the hold after the call, 12 minutes left, extended once.
orderhold::v1::ExtendHoldResponse ExtendAnswer(bool extended, bool capped) {
  orderhold::v1::ExtendHoldResponse response;
  *response.mutable_hold() = MakeNewHold(absl::Minutes(12));
  response.mutable_hold()->set_extensions(1);
  response.set_extended(extended);
  response.set_capped(capped);
  return response;
}

TEST(FormatExtendHoldTest, ExtendedUnchangedAndCapped) {
  EXPECT_EQ(FormatExtendHold(ExtendAnswer(true, false)),
            "extended order-1 for alice: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1");
  EXPECT_EQ(FormatExtendHold(ExtendAnswer(true, true)),
            "extended order-1 for alice (capped): expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1");
  EXPECT_EQ(FormatExtendHold(ExtendAnswer(false, false)),
            "order-1 for alice unchanged: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1");
  EXPECT_EQ(FormatExtendHold(ExtendAnswer(false, true)),
            "order-1 for alice unchanged (capped): expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1");
}

TEST(FormatExtendHoldTest, ExtensionsLeftWhenTheServerLimitsThem) {
  orderhold::v1::ExtendHoldResponse response = ExtendAnswer(true, false);
  response.set_extensions_left(1);
  EXPECT_EQ(FormatExtendHold(response),
            "extended order-1 for alice: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1 (1 left)");
  // Not moved yet: the count is shown anyway, beside what is left.
  response = ExtendAnswer(false, false);
  response.mutable_hold()->set_extensions(0);
  response.set_extensions_left(2);
  EXPECT_EQ(FormatExtendHold(response),
            "order-1 for alice unchanged: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 0 (2 left)");
  // Unset (--max_extensions 0): no count at all while there is none.
  response.clear_extensions_left();
  EXPECT_EQ(FormatExtendHold(response),
            "order-1 for alice unchanged: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z");
}

TEST(FormatGetHoldTest, LiveHoldReadsAsInAList) {
  orderhold::v1::GetHoldResponse response;
  *response.mutable_hold() = MakeNewHold(absl::Minutes(29) + absl::Seconds(58));
  EXPECT_EQ(FormatGetHold(response), FormatHold(response.hold()));
  EXPECT_EQ(FormatGetHold(response),
            "order-1 (user alice) expires in 29m58s at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z");
}

TEST(FormatGetHoldTest, EndedHoldNamesItsOutcomeAndEndTime) {
  orderhold::v1::GetHoldResponse paid;
  *paid.mutable_hold() = MakeNewHold(absl::Minutes(20));
  paid.mutable_hold()->clear_remaining();  // an ended hold has none
  paid.set_outcome(orderhold::v1::PAID);
  paid.mutable_end_time()->set_seconds(kPlaceUnixSeconds + 600);
  paid.mutable_end_time()->set_nanos(120'000'000);
  EXPECT_EQ(FormatGetHold(paid),
            "order-1 (user alice) PAID at 2026-11-21T09:40:00.12Z; cap 2026-11-21T11:30:00Z");

  orderhold::v1::GetHoldResponse expired;
  *expired.mutable_hold() = MakeScopedHold(absl::ZeroDuration());
  expired.mutable_hold()->clear_remaining();
  expired.set_outcome(orderhold::v1::EXPIRED);
  expired.mutable_end_time()->set_seconds(kExpireUnixSeconds);
  EXPECT_EQ(FormatGetHold(expired),
            "order-9 (user alice) EXPIRED at 2026-11-21T10:00:00Z; scope event:E42 (max_holds 2, "
            "max_units 8), 2 units, labels row=3 seat=A12, placed at 2026-11-21T09:30:00Z, cap "
            "2026-11-21T11:30:00Z");

  orderhold::v1::GetHoldResponse future;  // an outcome this binary does not know
  *future.mutable_hold() = MakeHold(absl::ZeroDuration());
  future.set_outcome(static_cast<orderhold::v1::HoldOutcome>(9));
  EXPECT_EQ(FormatGetHold(future), "order-1 (user alice) ended (outcome 9)");
}

TEST(FormatReleaseHoldsTest, CountThenOneLinePerReleasedHold) {
  orderhold::v1::ReleaseHoldsResponse none;
  EXPECT_EQ(FormatReleaseHolds("bob", none), "released 0 holds of bob\n");

  orderhold::v1::ReleaseHoldsResponse response;
  *response.add_holds() = MakeNewHold(absl::Minutes(29) + absl::Seconds(58));
  *response.add_holds() = MakeScopedHold(absl::Minutes(10));
  EXPECT_EQ(FormatReleaseHolds("alice", response),
            "released 2 holds of alice\n"
            "  order-1 (had 29m58s left); cap 2026-11-21T11:30:00Z\n"
            "  order-9 (had 10m left); scope event:E42 (max_holds 2, max_units 8), 2 units, labels "
            "row=3 seat=A12, placed at 2026-11-21T09:30:00Z, cap 2026-11-21T11:30:00Z\n");

  orderhold::v1::ReleaseHoldsResponse scoped;
  *scoped.add_holds() = MakePreviousHold(absl::Seconds(90));
  EXPECT_EQ(FormatReleaseHolds("alice", scoped, "event:E42"),
            "released 1 hold of alice in scope event:E42\n"
            "  order-1 (had 1m30s left)\n");
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

TEST(ParseCommandTest, ScopeCommandsTakeOneScope) {
  for (const auto& [name, kind] : std::vector<std::pair<std::string, CliCommand::Kind>>{
           {"scope-usage", CliCommand::Kind::kScopeUsage},
           {"scope-list", CliCommand::Kind::kScopeList},
           {"scope-release", CliCommand::Kind::kScopeRelease}}) {
    auto command = ParseCommand({name, "event:E42"}, std::nullopt);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->kind, kind);
    EXPECT_EQ(command->scope, "event:E42");
    // The hold flags leave SCOPE as it is, and refuse --scope beside it.
    ASSERT_TRUE(ParseHoldFlags(HoldFlags{}, &*command).ok());
    EXPECT_EQ(command->scope, "event:E42");
    HoldFlags with_scope;
    with_scope.scope = "event:E1";
    EXPECT_FALSE(ParseHoldFlags(with_scope, &*command).ok());
    EXPECT_FALSE(ParseCommand({name}, std::nullopt).ok());
    EXPECT_FALSE(ParseCommand({name, "a", "b"}, std::nullopt).ok());
    EXPECT_FALSE(ParseCommand({name, "event:E42"}, absl::Seconds(1)).ok());
  }
}

TEST(FormatScopeTest, UsageHoldsAndReleases) {
  orderhold::v1::GetScopeUsageResponse usage;
  usage.mutable_usage()->set_holds(97);
  usage.mutable_usage()->set_max_holds(100);
  usage.mutable_usage()->set_units(180);
  EXPECT_EQ(FormatScopeUsage("event:E42", usage),
            "event:E42: 97/100 holds, 180 units across all users\n");
  usage.set_sold_units(20);
  EXPECT_EQ(FormatScopeUsage("event:E42", usage),
            "event:E42: 97/100 holds, 180 units across all users; 20 sold\n");
  usage.set_capacity_units(250);
  usage.set_available_units(50);
  EXPECT_EQ(FormatScopeUsage("event:E42", usage),
            "event:E42: 97/100 holds, 180 units across all users; 20 sold, 50 of capacity 250 "
            "available\n");

  orderhold::v1::ListScopeHoldsResponse list;
  list.mutable_usage()->set_holds(2);
  list.mutable_usage()->set_units(3);
  list.mutable_usage()->set_max_units(500);
  orderhold::v1::Hold* first = list.add_holds();
  first->set_user_id("alice");
  first->set_order_id("o1");
  first->set_quantity(2);
  *first->mutable_remaining() = google::protobuf::util::TimeUtil::SecondsToDuration(90);
  orderhold::v1::Hold* second = list.add_holds();
  second->set_user_id("bob");
  second->set_order_id("o7");
  second->set_quantity(1);
  *second->mutable_remaining() = google::protobuf::util::TimeUtil::SecondsToDuration(600);
  EXPECT_EQ(FormatScopeHolds("event:E42", list),
            "event:E42: 2 holds, 3/500 units across all users\n"
            "  alice o1 (1m30s left) x2\n"
            "  bob o7 (10m left)\n");

  orderhold::v1::ReleaseScopeHoldsResponse released;
  released.set_released_count(101);
  *released.add_holds() = *second;
  EXPECT_EQ(FormatReleaseScopeHolds("event:E42", released),
            "released 101 holds in scope event:E42\n"
            "  bob o7 (had 10m left)\n"
            "  ... and 100 more\n");
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

TEST(ParseCommandTest, ExtendGetAndRelease) {
  auto extend = ParseCommand({"extend", "alice", "order-1"}, absl::Minutes(10));
  ASSERT_TRUE(extend.ok()) << extend.status();
  EXPECT_EQ(extend->kind, CliCommand::Kind::kExtend);
  EXPECT_EQ(extend->user_id, "alice");
  EXPECT_EQ(extend->order_id, "order-1");
  EXPECT_EQ(extend->ttl, absl::Minutes(10));
  auto plain = ParseCommand({"extend", "alice", "order-1"}, std::nullopt);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->ttl, std::nullopt);  // the server's --default_ttl

  auto get = ParseCommand({"get", "alice", "order-1"}, std::nullopt);
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->kind, CliCommand::Kind::kGet);
  EXPECT_EQ(get->order_id, "order-1");

  auto release = ParseCommand({"release", "alice"}, std::nullopt);
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_EQ(release->kind, CliCommand::Kind::kRelease);
  EXPECT_EQ(release->user_id, "alice");
  EXPECT_EQ(release->order_id, "");

  const std::vector<std::vector<std::string>> bad = {
      {"extend", "alice"},
      {"get", "alice"},
      {"get", "alice", "o", "x"},
      {"release"},
      {"release", "alice", "order-1"},
  };
  for (const auto& args : bad) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseCommand(args, std::nullopt).status())) << args[0];
  }
  const absl::Status ttl = ParseCommand({"get", "alice", "o"}, absl::Seconds(1)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(ttl));
  EXPECT_EQ(ttl.message(), "--ttl applies only to place and extend, not get");
  EXPECT_TRUE(
      absl::IsInvalidArgument(ParseCommand({"release", "alice"}, absl::Seconds(1)).status()));
  EXPECT_THAT(std::string(ParseCommand({"refresh"}, std::nullopt).status().message()),
              HasSubstr("extend"));
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

TEST(ParseCommandTest, WatchOutcomesTakeReturned) {
  CliCommand watch;
  ASSERT_TRUE(ParseWatchFlags("refunds", "c1", "Returned", "earliest", 0, false, &watch).ok());
  ASSERT_EQ(watch.watch.outcomes_size(), 1);
  EXPECT_EQ(watch.watch.outcomes(0), orderhold::v1::RETURNED);

  CliCommand bad;
  const absl::Status status =
      ParseWatchFlags("g", "c", "paid,refunded", "earliest", 0, false, &bad);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(),
            "--outcomes: \"refunded\" is not PAID, CANCELLED, EXPIRED or RETURNED");
}

TEST(ParseCommandTest, ReturnTakesUserOrderAndUnits) {
  auto ret = ParseCommand({"return", "alice", "order-9", "2"}, std::nullopt);
  ASSERT_TRUE(ret.ok()) << ret.status();
  EXPECT_EQ(ret->kind, CliCommand::Kind::kReturn);
  EXPECT_EQ(ret->user_id, "alice");
  EXPECT_EQ(ret->order_id, "order-9");
  EXPECT_EQ(ret->units, 2u);
  EXPECT_EQ(ret->ttl, std::nullopt);
  // 0 and the largest uint32 can be sent: the server judges them.
  auto zero = ParseCommand({"return", "alice", "order-9", "0"}, std::nullopt);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->units, 0u);
  auto most = ParseCommand({"return", "alice", "order-9", "4294967295"}, std::nullopt);
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(most->units, 4294967295u);

  const std::vector<std::vector<std::string>> bad_count = {
      {"return"}, {"return", "alice", "order-9"}, {"return", "alice", "order-9", "1", "x"}};
  for (const auto& args : bad_count) {
    const absl::Status status = ParseCommand(args, std::nullopt).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << args.size();
    EXPECT_THAT(std::string(status.message()), StartsWith("return takes USER ORDER UNITS, got "));
  }
  for (const char* units : {"two", "-1", "4294967296", "1.5", ""}) {
    const absl::Status status =
        ParseCommand({"return", "alice", "o", units}, std::nullopt).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << units;
    EXPECT_EQ(status.message(),
              absl::StrCat("return: UNITS must be from 0 to 4294967295, got \"", units, "\""));
  }
  const absl::Status ttl = ParseCommand({"return", "alice", "o", "1"}, absl::Seconds(1)).status();
  EXPECT_EQ(ttl.message(), "--ttl applies only to place and extend, not return");
  EXPECT_THAT(std::string(ParseCommand({"refund"}, std::nullopt).status().message()),
              HasSubstr("return"));
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

// ---------------------------------------------------------------------------------------------
// Error details: FromGrpcStatus keeps them, GetErrorDetails and FormatErrorDetails read them.

constexpr char kRefusal[] =
    "user_id already has 2 unpaid holds in scope \"event:E42\" (max_holds 2); a retry can pass "
    "from 2026-11-21T10:00:00Z (in 9m58.123s)";

// The trailer a server sends with a refused scoped PlaceHold (as server/domain/hold_service.cc
// builds it: one QuotaFailure violation per exceeded level, ErrorInfo, RetryInfo).
grpc::Status RefusalWithDetails() {
  google::rpc::QuotaFailure quota;
  auto* violation = quota.add_violations();
  violation->set_subject("user/scope:event:E42");
  violation->set_description(
      "user_id already has 2 unpaid holds in scope \"event:E42\" (max_holds 2)");
  violation = quota.add_violations();
  violation->set_subject("user/scope:event:E42");
  violation->set_description(
      "user_id holds 8 units in scope \"event:E42\"; 2 more would exceed max_units 8");
  google::rpc::ErrorInfo info;
  info.set_reason("SCOPE_HOLD_LIMIT");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["scope"] = "event:E42";
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(598);
  retry.mutable_retry_delay()->set_nanos(123'000'000);
  google::rpc::Status details;
  details.set_code(8);
  details.set_message(kRefusal);
  details.add_details()->PackFrom(quota);
  details.add_details()->PackFrom(info);
  details.add_details()->PackFrom(retry);
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, kRefusal, details.SerializeAsString());
}

TEST(ErrorDetailsTest, FromGrpcStatusKeepsEachDetailAsAPayload) {
  const absl::Status status = FromGrpcStatus(RefusalWithDetails());
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), kRefusal);
  EXPECT_TRUE(status.GetPayload("type.googleapis.com/google.rpc.QuotaFailure").has_value());

  const ErrorDetails details = GetErrorDetails(status);
  ASSERT_TRUE(details.quota_failure.has_value());
  ASSERT_EQ(details.quota_failure->violations_size(), 2);
  EXPECT_EQ(details.quota_failure->violations(0).subject(), "user/scope:event:E42");
  ASSERT_TRUE(details.error_info.has_value());
  EXPECT_EQ(details.error_info->reason(), "SCOPE_HOLD_LIMIT");
  ASSERT_TRUE(details.retry_info.has_value());
  EXPECT_EQ(details.retry_info->retry_delay().seconds(), 598);
}

TEST(ErrorDetailsTest, NoneOrUnreadableDetailsKeepCodeAndMessage) {
  const absl::Status plain =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "at max_holds"));
  EXPECT_EQ(plain, absl::ResourceExhaustedError("at max_holds"));
  const ErrorDetails none = GetErrorDetails(plain);
  EXPECT_FALSE(none.quota_failure.has_value());
  EXPECT_FALSE(none.error_info.has_value());
  EXPECT_FALSE(none.retry_info.has_value());
  EXPECT_EQ(FormatErrorDetails(plain), "");

  const absl::Status garbled = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "at max_holds", "\xff\xff\xff"));
  EXPECT_EQ(garbled, absl::ResourceExhaustedError("at max_holds"));
}

TEST(ErrorDetailsTest, FormatsEveryViolationTheReasonAndTheExactRetryDelay) {
  const absl::Status status = FromGrpcStatus(RefusalWithDetails());
  EXPECT_EQ(FormatError(status), absl::StrCat("error: RESOURCE_EXHAUSTED: ", kRefusal));
  EXPECT_EQ(FormatErrorDetails(status),
            "  violation user/scope:event:E42: user_id already has 2 unpaid holds in scope "
            "\"event:E42\" (max_holds 2)\n"
            "  violation user/scope:event:E42: user_id holds 8 units in scope \"event:E42\"; 2 "
            "more would exceed max_units 8\n"
            "  reason SCOPE_HOLD_LIMIT (orderhold.v1; scope=event:E42)\n"
            "  retry after 9m58.123s\n");
}

constexpr char kExtensionRefusal[] =
    "order_id \"order-1\" has been extended 2 times (max_extensions 2); it keeps its expire_time "
    "until paid, cancelled or expired";

// The trailer a server sends with an ExtendHold refused at --max_extensions (as
// server/domain/hold_service.cc builds it: a QuotaFailure and an ErrorInfo, no RetryInfo).
grpc::Status ExtensionRefusal() {
  google::rpc::QuotaFailure quota;
  auto* violation = quota.add_violations();
  violation->set_subject("hold/extensions");
  violation->set_description("order_id \"order-1\" has been extended 2 times (max_extensions 2)");
  google::rpc::ErrorInfo info;
  info.set_reason("HOLD_EXTENSION_LIMIT");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = "order-1";
  google::rpc::Status details;
  details.set_code(8);
  details.set_message(kExtensionRefusal);
  details.add_details()->PackFrom(quota);
  details.add_details()->PackFrom(info);
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, kExtensionRefusal,
                      details.SerializeAsString());
}

TEST(ErrorDetailsTest, ExtensionRefusalFormatsItsViolationAndReason) {
  const absl::Status status = FromGrpcStatus(ExtensionRefusal());
  const ErrorDetails details = GetErrorDetails(status);
  ASSERT_TRUE(details.quota_failure.has_value());
  EXPECT_EQ(details.quota_failure->violations(0).subject(), "hold/extensions");
  EXPECT_FALSE(details.retry_info.has_value());
  EXPECT_EQ(FormatErrorDetails(status),
            "  violation hold/extensions: order_id \"order-1\" has been extended 2 times "
            "(max_extensions 2)\n"
            "  reason HOLD_EXTENSION_LIMIT (orderhold.v1; order_id=order-1)\n");
}

// ---------------------------------------------------------------------------------------------
// ParseHoldFlags / TakeRepeatedFlag

CliCommand Command(const std::vector<std::string>& args) {
  absl::StatusOr<CliCommand> command = ParseCommand(args, std::nullopt);
  EXPECT_TRUE(command.ok()) << command.status();
  return command.value_or(CliCommand{});
}

TEST(ParseHoldFlagsTest, PlaceTakesEveryFlag) {
  CliCommand place = Command({"place", "alice", "order-9"});
  HoldFlags flags;
  flags.scope = "event:E42";
  flags.quantity = 2;
  flags.labels = {"seat=A12", "row=3", "note=a=b, c"};
  flags.scope_max_holds = 2;
  ASSERT_TRUE(ParseHoldFlags(flags, &place).ok()) << ParseHoldFlags(flags, &place);
  EXPECT_EQ(place.scope, "event:E42");
  EXPECT_EQ(place.quantity, 2u);
  EXPECT_EQ(place.labels, (std::map<std::string, std::string>{
                              {"seat", "A12"}, {"row", "3"}, {"note", "a=b, c"}}));
  ASSERT_TRUE(place.scope_limits.has_value());
  EXPECT_EQ(place.scope_limits->max_holds(), 2u);
  EXPECT_EQ(place.scope_limits->max_units(), 0u);  // not given: no limit at that level
}

TEST(ParseHoldFlagsTest, PlaceTakesLimitClassAsGiven) {
  CliCommand place = Command({"place", "alice", "order-9"});
  HoldFlags flags;
  flags.scope = "event:E42";
  flags.limit_class = "box_office";
  ASSERT_TRUE(ParseHoldFlags(flags, &place).ok()) << ParseHoldFlags(flags, &place);
  EXPECT_EQ(place.limit_class, "box_office");
  EXPECT_FALSE(place.scope_limits.has_value());  // a class sends no scope limits of its own

  // The name is the server's to judge (INVALID_ARGUMENT naming limit_class), as is its use
  // without --scope.
  CliCommand odd = Command({"place", "alice", "order-10"});
  HoldFlags unscoped;
  unscoped.limit_class = "not a name!";
  ASSERT_TRUE(ParseHoldFlags(unscoped, &odd).ok());
  EXPECT_EQ(odd.limit_class, "not a name!");

  CliCommand none = Command({"place", "alice", "order-11"});
  ASSERT_TRUE(ParseHoldFlags(HoldFlags{}, &none).ok());
  EXPECT_EQ(none.limit_class, "");
}

TEST(ParseHoldFlagsTest, NoFlagsChangeNothing) {
  CliCommand place = Command({"place", "alice", "order-1"});
  ASSERT_TRUE(ParseHoldFlags(HoldFlags{}, &place).ok());
  EXPECT_EQ(place.scope, "");
  EXPECT_EQ(place.quantity, 0u);
  EXPECT_TRUE(place.labels.empty());
  EXPECT_FALSE(place.scope_limits.has_value());
  // A value the server judges (quantity 0 means 1; a bad label key) is sent as given.
  HoldFlags edge;
  edge.quantity = 0;
  edge.labels = {"Not A Key=x", "empty="};
  ASSERT_TRUE(ParseHoldFlags(edge, &place).ok());
  EXPECT_EQ(place.labels.at("Not A Key"), "x");
  EXPECT_EQ(place.labels.at("empty"), "");
}

TEST(ParseHoldFlagsTest, ListTakesScopeOnly) {
  CliCommand list = Command({"list", "alice"});
  HoldFlags flags;
  flags.scope = "event:E42";
  ASSERT_TRUE(ParseHoldFlags(flags, &list).ok());
  EXPECT_EQ(list.scope, "event:E42");

  HoldFlags quantity;
  quantity.quantity = 2;
  const absl::Status status = ParseHoldFlags(quantity, &list);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(), "--quantity applies only to place, not list");
}

TEST(ParseHoldFlagsTest, ExtendTakesRequestIdReleaseTakesScope) {
  CliCommand extend = Command({"extend", "alice", "order-1"});
  HoldFlags id;
  id.request_id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
  ASSERT_TRUE(ParseHoldFlags(id, &extend).ok());
  EXPECT_EQ(extend.request_id, "7c9e6679-7425-40de-944b-e07fc1f90ae7");
  EXPECT_EQ(extend.scope, "");

  CliCommand release = Command({"release", "alice"});
  HoldFlags scope;
  scope.scope = "event:E42";
  ASSERT_TRUE(ParseHoldFlags(scope, &release).ok());
  EXPECT_EQ(release.scope, "event:E42");

  CliCommand none = Command({"extend", "alice", "order-1"});
  ASSERT_TRUE(ParseHoldFlags(HoldFlags{}, &none).ok());
  EXPECT_EQ(none.request_id, "");  // every call that moves the expiry counts

  CliCommand pay = Command({"pay", "alice", "order-1"});
  HoldFlags reference;
  reference.payment_reference = "pi_3N1";
  ASSERT_TRUE(ParseHoldFlags(reference, &pay).ok());
  EXPECT_EQ(pay.payment_reference, "pi_3N1");

  CliCommand ret = Command({"return", "alice", "order-1", "1"});
  HoldFlags refund;
  refund.request_id = "re_1Q2";
  ASSERT_TRUE(ParseHoldFlags(refund, &ret).ok());
  EXPECT_EQ(ret.request_id, "re_1Q2");
  CliCommand unnamed = Command({"return", "alice", "order-1", "1"});
  const absl::Status status = ParseHoldFlags(HoldFlags{}, &unnamed);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(),
            "return needs --request_id: the return's own id (e.g. the refund's), the same on its "
            "retries");
}

// A command, the flags it is given, and how its usage error starts.
struct UsageCase {
  std::vector<std::string> command;
  HoldFlags flags;
  std::string message_start;
};

// `set` applied to default flags.
template <typename Set>
HoldFlags With(Set set) {
  HoldFlags flags;
  set(flags);
  return flags;
}

// Each case's flags are refused INVALID_ARGUMENT with a message starting as the case says.
void ExpectUsageErrors(const std::vector<UsageCase>& cases) {
  for (const UsageCase& c : cases) {
    CliCommand command = Command(c.command);
    const absl::Status status = ParseHoldFlags(c.flags, &command);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.message_start << ": " << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(c.message_start));
  }
}

TEST(ParseHoldFlagsTest, UsageErrorsNameTheFlag) {
  const std::vector<UsageCase> cases = {
      {{"pay", "alice", "o"},
       With([](HoldFlags& f) { f.scope = "e"; }),
       "--scope applies only to place, list and release, not pay"},
      {{"extend", "alice", "o"},
       With([](HoldFlags& f) { f.scope = "e"; }),
       "--scope applies only to place, list and release, not extend"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.request_id = "r1"; }),
       "--request_id applies only to extend and return, not place"},
      {{"get", "alice", "o"},
       With([](HoldFlags& f) { f.request_id = "r1"; }),
       "--request_id applies only to extend and return, not get"},
      {{"cancel", "alice", "o"},
       With([](HoldFlags& f) { f.payment_reference = "pi_3N1"; }),
       "--payment_reference applies only to pay, not cancel"},
      {{"extend", "alice", "o"},
       With([](HoldFlags& f) { f.quantity = 2; }),
       "--quantity applies only to place, not extend"},
      {{"release", "alice"},
       With([](HoldFlags& f) { f.labels = {"a=b"}; }),
       "--label applies only to place, not release"},
      {{"health"}, With([](HoldFlags& f) { f.scope = "e"; }), "--scope applies only"},
      {{"list", "alice"},
       With([](HoldFlags& f) { f.labels = {"a=b"}; }),
       "--label applies only to place"},
      {{"cancel", "alice", "o"},
       With([](HoldFlags& f) { f.scope_max_units = 1; }),
       "--scope_max_units applies only to place"},
      {{"list", "alice"},
       With([](HoldFlags& f) { f.limit_class = "box_office"; }),
       "--limit_class applies only to place, not list"},
      {{"extend", "alice", "o"},
       With([](HoldFlags& f) { f.limit_class = "box_office"; }),
       "--limit_class applies only to place, not extend"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.labels = {"seat"}; }),
       "--label \"seat\" is not key=value"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.labels = {"=A12"}; }),
       "--label \"=A12\" has an empty key"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) {
         f.labels = {"seat=A1", "seat=A2"};
       }),
       "--label: key \"seat\" is given twice"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.quantity = -1; }),
       "--quantity must be from 0 to 4294967295, got -1"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.quantity = int64_t{1} << 32; }),
       "--quantity must be from 0 to 4294967295"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) { f.scope_max_holds = 2; }),
       "--scope_max_holds needs --scope"},
      {{"place", "alice", "o"},
       With([](HoldFlags& f) {
         f.scope = "e";
         f.scope_max_units = -5;
       }),
       "--scope_max_units must be from 0 to"},
  };
  ExpectUsageErrors(cases);
}

TEST(ParseHoldFlagsTest, ReturnsUsageErrorsNameTheFlag) {
  ExpectUsageErrors({
      {{"return", "alice", "o", "1"},
       With([](HoldFlags& f) { f.request_id = ""; }),
       "return needs --request_id"},
      {{"return", "alice", "o", "1"},
       With([](HoldFlags& f) {
         f.request_id = "re_1";
         f.payment_reference = "pi_3N1";
       }),
       "--payment_reference applies only to pay, not return"},
      {{"return", "alice", "o", "1"},
       With([](HoldFlags& f) {
         f.request_id = "re_1";
         f.quantity = 1;
       }),
       "--quantity applies only to place, not return"},
  });
}

// 2026-12-07T10:00:00Z, 2026-12-31T00:00:00Z: a scope rule's open and expire times.
constexpr int64_t kOpenUnixSeconds = 1796637600;
constexpr int64_t kRuleExpireUnixSeconds = 1798675200;

TEST(ParseCommandTest, RuleCommandsAndScopeClose) {
  for (const auto& [name, kind] : std::vector<std::pair<std::string, CliCommand::Kind>>{
           {"rule-put", CliCommand::Kind::kRulePut},
           {"rule-get", CliCommand::Kind::kRuleGet},
           {"rule-delete", CliCommand::Kind::kRuleDelete},
           {"scope-close", CliCommand::Kind::kScopeClose}}) {
    auto command = ParseCommand({name, "event:1"}, std::nullopt);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->kind, kind);
    EXPECT_EQ(command->scope, "event:1");
    EXPECT_FALSE(ParseCommand({name}, std::nullopt).ok());
    EXPECT_FALSE(ParseCommand({name, "event:1"}, absl::Seconds(1)).ok());
  }
  auto list = ParseCommand({"rule-list"}, std::nullopt);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->kind, CliCommand::Kind::kRuleList);
  EXPECT_FALSE(ParseCommand({"rule-list", "event:1"}, std::nullopt).ok());
}

TEST(ParseRuleFlagsTest, RulePutTakesEveryFlag) {
  CliCommand put = Command({"rule-put", "event:1"});
  RuleFlags flags;
  flags.max_holds = 4;
  flags.max_units = 8;
  flags.total_max_holds = 0;
  flags.total_max_units = 100;
  flags.capacity_units = 250;
  flags.state = "PAUSED";
  flags.open_time = "2026-12-07T10:00:00Z";
  flags.close_time = "2026-12-07T13:00:00.25+01:00";
  flags.expire_time = "2026-12-31T00:00:00Z";
  flags.etag = "17";
  ASSERT_TRUE(ParseRuleFlags(flags, &put).ok()) << ParseRuleFlags(flags, &put);
  const orderhold::v1::ScopeRule& rule = put.rule;
  EXPECT_EQ(rule.scope(), "event:1");
  ASSERT_TRUE(rule.has_limits());
  EXPECT_EQ(rule.limits().max_holds(), 4u);
  EXPECT_EQ(rule.limits().max_units(), 8u);
  EXPECT_EQ(rule.total_max_holds(), 0u);
  EXPECT_EQ(rule.total_max_units(), 100u);
  EXPECT_EQ(rule.capacity_units(), 250u);
  EXPECT_EQ(rule.state(), orderhold::v1::PAUSED);
  EXPECT_EQ(rule.open_time().seconds(), kOpenUnixSeconds);
  EXPECT_EQ(rule.open_time().nanos(), 0);
  // 13:00:00.25+01:00 is 12:00:00.25Z.
  EXPECT_EQ(rule.close_time().seconds(), kOpenUnixSeconds + 7200);
  EXPECT_EQ(rule.close_time().nanos(), 250000000);
  EXPECT_EQ(rule.expire_time().seconds(), kRuleExpireUnixSeconds);
  EXPECT_EQ(rule.etag(), "17");

  // Without --max_holds and --max_units no limits are sent; unset times stay unset.
  CliCommand bare = Command({"rule-put", "event:2"});
  RuleFlags totals;
  totals.total_max_holds = 3;
  ASSERT_TRUE(ParseRuleFlags(totals, &bare).ok());
  EXPECT_EQ(bare.rule.scope(), "event:2");
  EXPECT_FALSE(bare.rule.has_limits());
  EXPECT_EQ(bare.rule.total_max_holds(), 3u);
  EXPECT_EQ(bare.rule.state(), orderhold::v1::SCOPE_STATE_UNSPECIFIED);
  EXPECT_FALSE(bare.rule.has_open_time());
  EXPECT_FALSE(bare.rule.has_close_time());
  EXPECT_FALSE(bare.rule.has_expire_time());
}

TEST(ParseRuleFlagsTest, DeleteListAndCloseTakeTheirs) {
  CliCommand remove = Command({"rule-delete", "event:1"});
  RuleFlags etag;
  etag.etag = "17";
  ASSERT_TRUE(ParseRuleFlags(etag, &remove).ok());
  EXPECT_EQ(remove.etag, "17");

  CliCommand list = Command({"rule-list"});
  RuleFlags page;
  page.page_size = 50;
  page.page_token = "next";
  ASSERT_TRUE(ParseRuleFlags(page, &list).ok());
  EXPECT_EQ(list.list_rules.page_size(), 50);
  EXPECT_EQ(list.list_rules.page_token(), "next");

  CliCommand close = Command({"scope-close", "event:1"});
  RuleFlags release;
  release.release_holds = true;
  ASSERT_TRUE(ParseRuleFlags(release, &close).ok());
  EXPECT_TRUE(close.release_holds);
}

// A command, the rule flags it is given, and how its usage error starts.
struct RuleUsageCase {
  std::vector<std::string> command;
  RuleFlags flags;
  std::string message_start;
};

// `set` applied to default rule flags.
template <typename Set>
RuleFlags RuleWith(Set set) {
  RuleFlags flags;
  set(flags);
  return flags;
}

// Each case's flags are refused by ParseRuleFlags INVALID_ARGUMENT with a message starting as the
// case says.
void ExpectRuleUsageErrors(const std::vector<RuleUsageCase>& cases) {
  for (const RuleUsageCase& c : cases) {
    CliCommand command = Command(c.command);
    const absl::Status status = ParseRuleFlags(c.flags, &command);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.message_start << ": " << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(c.message_start));
  }
}

TEST(ParseRuleFlagsTest, UsageErrorsNameTheFlag) {
  const std::vector<RuleUsageCase> cases = {
      {{"rule-put", "event:1"},
       RuleWith([](RuleFlags& f) { f.open_time = "2026-12-07 10:00"; }),
       "--open_time \"2026-12-07 10:00\" is not an RFC 3339 time"},
      {{"rule-put", "event:1"},
       RuleWith([](RuleFlags& f) { f.close_time = "infinite-future"; }),
       "--close_time \"infinite-future\" is not an RFC 3339 time"},
      {{"rule-put", "event:1"},
       RuleWith([](RuleFlags& f) { f.state = "open"; }),
       "--state \"open\" is not OPEN, PAUSED or CLOSED"},
      {{"rule-put", "event:1"},
       RuleWith([](RuleFlags& f) { f.capacity_units = -1; }),
       "--capacity_units must be from 0 to 4294967295, got -1"},
      {{"rule-get", "event:1"},
       RuleWith([](RuleFlags& f) { f.max_holds = 2; }),
       "--max_holds applies only to rule-put, not rule-get"},
      {{"scope-close", "event:1"},
       RuleWith([](RuleFlags& f) { f.etag = "17"; }),
       "--etag applies only to rule-put and rule-delete, not scope-close"},
      {{"rule-delete", "event:1"},
       RuleWith([](RuleFlags& f) { f.release_holds = true; }),
       "--release_holds applies only to scope-close, not rule-delete"},
      {{"place", "alice", "o"},
       RuleWith([](RuleFlags& f) { f.page_token = "t"; }),
       "--page_token applies only to rule-list, not place"},
      {{"rule-list"},
       RuleWith([](RuleFlags& f) { f.page_size = -1; }),
       "--page_size must be from 0 to 2147483647, got -1"},
  };
  ExpectRuleUsageErrors(cases);
}

TEST(ParseRuleFlagsTest, ClassesTakeTheirLimitsCapsAndPrincipals) {
  CliCommand put = Command({"rule-put", "event:1"});
  RuleFlags flags;
  flags.max_units = 4;
  flags.classes = {
      "box_office;max_units=20;principal=uri:spiffe://t/box-office;principal=dns:desk.example",
      "vip;max_holds=2;max_purchased_units=6;max_purchased_holds=3;principal=CN=desk,O=T;"
      "principal=subject:CN=a=b,O=T"};
  ASSERT_TRUE(ParseRuleFlags(flags, &put).ok()) << ParseRuleFlags(flags, &put);
  const orderhold::v1::ScopeRule& rule = put.rule;
  EXPECT_EQ(rule.limits().max_units(), 4u);  // the rule's own limits stay as they were
  ASSERT_EQ(rule.classes().size(), 2u);

  const orderhold::v1::LimitClass& box = rule.classes().at("box_office");
  ASSERT_TRUE(box.has_limits());
  EXPECT_EQ(box.limits().max_holds(), 0u);  // not given: 0 = none
  EXPECT_EQ(box.limits().max_units(), 20u);
  EXPECT_EQ(box.max_purchased_units(), 0u);
  EXPECT_EQ(box.max_purchased_holds(), 0u);
  EXPECT_THAT(box.principals(),
              ::testing::ElementsAre("uri:spiffe://t/box-office", "dns:desk.example"));

  const orderhold::v1::LimitClass& vip = rule.classes().at("vip");
  ASSERT_TRUE(vip.has_limits());
  EXPECT_EQ(vip.limits().max_holds(), 2u);
  EXPECT_EQ(vip.limits().max_units(), 0u);
  EXPECT_EQ(vip.max_purchased_units(), 6u);
  EXPECT_EQ(vip.max_purchased_holds(), 3u);
  // All after the first '=', '=' and ',' included: a subject is one principal.
  EXPECT_THAT(vip.principals(), ::testing::ElementsAre("CN=desk,O=T", "subject:CN=a=b,O=T"));

  // Without max_holds and max_units the class sends no limits; a class with only its name (the
  // server wants principals) and an empty principal are the server's to judge.
  CliCommand caps = Command({"rule-put", "event:2"});
  RuleFlags only_caps;
  only_caps.classes = {"resellers;max_purchased_units=0;principal=", "bare"};
  ASSERT_TRUE(ParseRuleFlags(only_caps, &caps).ok()) << ParseRuleFlags(only_caps, &caps);
  ASSERT_EQ(caps.rule.classes().size(), 2u);
  EXPECT_FALSE(caps.rule.classes().at("resellers").has_limits());
  EXPECT_THAT(caps.rule.classes().at("resellers").principals(), ::testing::ElementsAre(""));
  EXPECT_FALSE(caps.rule.classes().at("bare").has_limits());
  EXPECT_TRUE(caps.rule.classes().at("bare").principals().empty());
  EXPECT_FALSE(caps.rule.has_limits());
}

TEST(ParseRuleFlagsTest, ClassUsageErrorsNameTheFlagAndThePart) {
  const auto put = std::vector<std::string>{"rule-put", "event:1"};
  const auto classes = [](std::vector<std::string> specs) {
    return RuleWith([&specs](RuleFlags& f) { f.classes = specs; });
  };
  ExpectRuleUsageErrors({
      {put, classes({";max_units=2"}), "--class \";max_units=2\": empty NAME"},
      {put, classes({""}), "--class \"\": empty NAME"},
      {put, classes({"vip;max_units=2;principal"}),
       "--class \"vip;max_units=2;principal\": \"principal\" is not key=value"},
      {put, classes({"vip;"}), "--class \"vip;\": \"\" is not key=value"},
      {put, classes({"vip;max_unit=2"}),
       "--class \"vip;max_unit=2\": unknown key \"max_unit\" (want max_holds, max_units, "
       "max_purchased_units, max_purchased_holds or principal)"},
      {put, classes({"vip;max_units=-1"}),
       "--class \"vip;max_units=-1\": max_units must be from 0 to 4294967295, got \"-1\""},
      {put, classes({"vip;max_purchased_holds=4294967296"}),
       "--class \"vip;max_purchased_holds=4294967296\": max_purchased_holds must be from 0 to "
       "4294967295"},
      {put, classes({"vip;max_holds=two"}), "--class \"vip;max_holds=two\": max_holds must be"},
      {put, classes({"vip;max_units=2;max_units=3"}),
       "--class \"vip;max_units=2;max_units=3\": max_units is given twice"},
      {put, classes({"vip;max_units=2", "box;max_units=1", "vip;max_units=3"}),
       "--class \"vip;max_units=3\": class \"vip\" is given twice"},
      {{"rule-get", "event:1"},
       classes({"vip;max_units=2"}),
       "--class applies only to rule-put, not rule-get"},
      {{"scope-close", "event:1"}, classes({"vip"}), "--class applies only to rule-put"},
      {{"place", "alice", "o"}, classes({"vip"}), "--class applies only to rule-put, not place"},
  });
}

TEST(FormatScopeRuleTest, OneLineWithoutWhatIsUnset) {
  orderhold::v1::ScopeRule rule;
  rule.set_scope("event:1");
  rule.set_state(orderhold::v1::OPEN);
  rule.set_effective_state(orderhold::v1::OPEN);
  rule.set_etag("17");
  rule.mutable_limits()->set_max_holds(4);
  rule.mutable_limits()->set_max_units(8);
  rule.set_total_max_units(100);
  rule.set_capacity_units(250);
  rule.mutable_open_time()->set_seconds(kOpenUnixSeconds);
  rule.mutable_close_time()->set_seconds(kOpenUnixSeconds + 7200);
  rule.mutable_expire_time()->set_seconds(kRuleExpireUnixSeconds);
  EXPECT_EQ(FormatScopeRule(rule),
            "event:1 OPEN (now OPEN) etag 17: per user 4 holds / 8 units; totals 0 holds / 100 "
            "units; capacity 250; opens 2026-12-07T10:00:00Z; closes 2026-12-07T12:00:00Z; "
            "expires 2026-12-31T00:00:00Z");

  orderhold::v1::ScopeRule bare;
  bare.set_scope("event:2");
  EXPECT_EQ(FormatScopeRule(bare), "event:2 OPEN: no limits");
  bare.set_state(orderhold::v1::PAUSED);
  bare.set_effective_state(orderhold::v1::OPEN);
  bare.set_total_max_holds(1);
  EXPECT_EQ(FormatScopeRule(bare), "event:2 PAUSED (now OPEN): totals 1 hold / 0 units");

  orderhold::v1::ListScopeRulesResponse page;
  *page.add_rules() = bare;
  page.set_next_page_token("abc");
  EXPECT_EQ(FormatScopeRules(page),
            "event:2 PAUSED (now OPEN): totals 1 hold / 0 units\n"
            "next page: --page_token abc\n");
  EXPECT_EQ(FormatScopeRules(orderhold::v1::ListScopeRulesResponse()), "no rules\n");
}

// A rule with two classes, as a server answers it.
orderhold::v1::ScopeRule RuleWithClasses() {
  orderhold::v1::ScopeRule rule;
  rule.set_scope("event:1");
  rule.set_etag("17");
  rule.mutable_limits()->set_max_units(4);
  orderhold::v1::LimitClass& box = (*rule.mutable_classes())["box_office"];
  box.mutable_limits()->set_max_units(20);
  box.add_principals("uri:spiffe://t/box-office");
  box.add_principals("dns:desk.example");
  orderhold::v1::LimitClass& vip = (*rule.mutable_classes())["vip"];
  vip.mutable_limits()->set_max_holds(2);
  vip.set_max_purchased_holds(3);
  vip.set_max_purchased_units(6);
  vip.add_principals("subject:CN=desk,O=T");
  return rule;
}

TEST(FormatScopeRuleTest, OneIndentedLinePerClassByName) {
  // A proto map has no order: the lines come by name.
  EXPECT_EQ(FormatScopeRule(RuleWithClasses()),
            "event:1 OPEN etag 17: per user 0 holds / 4 units\n"
            "  class box_office: max_units 20, principals uri:spiffe://t/box-office, "
            "dns:desk.example\n"
            "  class vip: max_holds 2, max_purchased_holds 3, max_purchased_units 6, principals "
            "subject:CN=desk,O=T");

  // A class without numbers reads "no limits"; one without principals shows none.
  orderhold::v1::ScopeRule bare;
  bare.set_scope("event:2");
  (*bare.mutable_classes())["open"].add_principals("dns:a.example");
  (*bare.mutable_classes())["empty"] = orderhold::v1::LimitClass();
  EXPECT_EQ(FormatScopeRule(bare),
            "event:2 OPEN: no limits\n"
            "  class empty: no limits\n"
            "  class open: no limits, principals dns:a.example");

  // rule-list: each rule's lines, then the next one.
  orderhold::v1::ListScopeRulesResponse page;
  *page.add_rules() = bare;
  page.add_rules()->set_scope("event:3");
  EXPECT_EQ(FormatScopeRules(page),
            "event:2 OPEN: no limits\n"
            "  class empty: no limits\n"
            "  class open: no limits, principals dns:a.example\n"
            "event:3 OPEN: no limits\n");
}

TEST(FormatCloseScopeTest, ClosedWithItsEtagAndWhatWasReleased) {
  orderhold::v1::CloseScopeResponse response;
  response.set_released_count(12);
  response.mutable_rule()->set_scope("event:1");
  response.mutable_rule()->set_state(orderhold::v1::CLOSED);
  response.mutable_rule()->set_etag("18");
  EXPECT_EQ(FormatCloseScope("event:1", response, /*release_holds=*/true),
            "closed event:1 (etag 18); released 12 holds");
  response.set_released_count(1);
  EXPECT_EQ(FormatCloseScope("event:1", response, /*release_holds=*/true),
            "closed event:1 (etag 18); released 1 hold");
  // Without --release_holds the live holds stay: nothing is said of them.
  response.set_released_count(0);
  EXPECT_EQ(FormatCloseScope("event:1", response, /*release_holds=*/false),
            "closed event:1 (etag 18)");
}

// argv as TakeRepeatedFlag sees it; the strings outlive the pointers.
struct Argv {
  explicit Argv(std::vector<std::string> args) : strings(std::move(args)) {
    for (std::string& s : strings) pointers.push_back(s.data());
  }
  std::vector<std::string> Remaining() const {
    return std::vector<std::string>(pointers.begin(), pointers.end());
  }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

TEST(TakeRepeatedFlagTest, TakesEveryFormAndKeepsTheRest) {
  Argv argv({"cli", "place", "--label=seat=A12", "alice", "--label", "row=3", "-label=x=1",
             "-label", "y=", "--labels=no", "--scope=e", "o1", "--", "--label=kept"});
  absl::StatusOr<std::vector<std::string>> labels = TakeRepeatedFlag("label", &argv.pointers);
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(*labels, (std::vector<std::string>{"seat=A12", "row=3", "x=1", "y="}));
  EXPECT_EQ(argv.Remaining(), (std::vector<std::string>{"cli", "place", "alice", "--labels=no",
                                                        "--scope=e", "o1", "--", "--label=kept"}));
}

TEST(TakeRepeatedFlagTest, NoneAndMissingValue) {
  Argv plain({"cli", "list", "alice"});
  absl::StatusOr<std::vector<std::string>> none = TakeRepeatedFlag("label", &plain.pointers);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(plain.Remaining(), (std::vector<std::string>{"cli", "list", "alice"}));

  Argv dangling({"cli", "place", "alice", "o", "--label"});
  const absl::Status status = TakeRepeatedFlag("label", &dangling.pointers).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(), "--label needs a value");
}

// ---------------------------------------------------------------------------------------------
// RunCommand against a fake service (an in-process channel: no network)

// Answers PlaceHold, ListHolds, ExtendHold, GetHold, ReleaseHolds, CloseScope and ReturnUnits with
// canned responses (PutScopeRule with the rule sent, etag "17"; WatchHoldEvents with the canned
// events, then the end of the stream) or a canned error and keeps the requests.
class FakeOrderHold final : public orderhold::v1::OrderHold::Service {
 public:
  grpc::Status PlaceHold(grpc::ServerContext*, const orderhold::v1::PlaceHoldRequest* request,
                         orderhold::v1::PlaceHoldResponse* response) override {
    place_request = *request;
    *response = place_response;
    return status;
  }
  grpc::Status ListHolds(grpc::ServerContext*, const orderhold::v1::ListHoldsRequest* request,
                         orderhold::v1::ListHoldsResponse* response) override {
    list_request = *request;
    *response = list_response;
    return status;
  }

  grpc::Status ExtendHold(grpc::ServerContext*, const orderhold::v1::ExtendHoldRequest* request,
                          orderhold::v1::ExtendHoldResponse* response) override {
    extend_request = *request;
    *response = extend_response;
    return status;
  }
  grpc::Status GetHold(grpc::ServerContext*, const orderhold::v1::GetHoldRequest* request,
                       orderhold::v1::GetHoldResponse* response) override {
    get_request = *request;
    *response = get_response;
    return status;
  }
  grpc::Status ReleaseHolds(grpc::ServerContext*, const orderhold::v1::ReleaseHoldsRequest* request,
                            orderhold::v1::ReleaseHoldsResponse* response) override {
    release_request = *request;
    *response = release_response;
    return status;
  }
  grpc::Status PutScopeRule(grpc::ServerContext*, const orderhold::v1::PutScopeRuleRequest* request,
                            orderhold::v1::ScopeRule* response) override {
    put_rule_request = *request;
    *response = request->rule();
    response->set_etag("17");
    response->set_effective_state(orderhold::v1::OPEN);
    return status;
  }
  grpc::Status CloseScope(grpc::ServerContext*, const orderhold::v1::CloseScopeRequest* request,
                          orderhold::v1::CloseScopeResponse* response) override {
    close_request = *request;
    *response = close_response;
    return status;
  }
  grpc::Status ReturnUnits(grpc::ServerContext*, const orderhold::v1::ReturnUnitsRequest* request,
                           orderhold::v1::ReturnUnitsResponse* response) override {
    return_request = *request;
    *response = return_response;
    return status;
  }
  grpc::Status WatchHoldEvents(grpc::ServerContext*,
                               const orderhold::v1::WatchHoldEventsRequest* request,
                               grpc::ServerWriter<orderhold::v1::HoldEvent>* writer) override {
    watch_request = *request;
    for (const orderhold::v1::HoldEvent& event : watch_events) {
      if (!writer->Write(event)) break;  // the client stopped (--max_events)
    }
    return status;
  }

  grpc::Status status;
  orderhold::v1::PlaceHoldResponse place_response;
  orderhold::v1::ListHoldsResponse list_response;
  orderhold::v1::ExtendHoldResponse extend_response;
  orderhold::v1::GetHoldResponse get_response;
  orderhold::v1::ReleaseHoldsResponse release_response;
  orderhold::v1::PlaceHoldRequest place_request;
  orderhold::v1::ListHoldsRequest list_request;
  orderhold::v1::ExtendHoldRequest extend_request;
  orderhold::v1::GetHoldRequest get_request;
  orderhold::v1::ReleaseHoldsRequest release_request;
  orderhold::v1::CloseScopeResponse close_response;
  orderhold::v1::PutScopeRuleRequest put_rule_request;
  orderhold::v1::CloseScopeRequest close_request;
  orderhold::v1::ReturnUnitsResponse return_response;
  orderhold::v1::ReturnUnitsRequest return_request;
  std::vector<orderhold::v1::HoldEvent> watch_events;
  orderhold::v1::WatchHoldEventsRequest watch_request;
};

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<OrderHoldClient>(
        orderhold::v1::OrderHold::NewStub(server_->InProcessChannel(grpc::ChannelArguments())),
        ClientOptions());
  }
  void TearDown() override { server_->Shutdown(); }

  int Run(const CliCommand& command, bool json = false) {
    out_.str("");
    err_.str("");
    return RunCommand(*client_, command, json, out_, err_);
  }

  FakeOrderHold service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<OrderHoldClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(RunCommandTest, ScopedPlaceSendsEveryFieldAndPrintsTheUsage) {
  service_.place_response.set_created(true);
  *service_.place_response.mutable_hold() = MakeScopedHold(absl::Minutes(10));
  service_.place_response.set_active_holds(2);
  service_.place_response.set_max_holds(3);
  *service_.place_response.mutable_user_usage() = Usage(2, 3, 3, 0);
  *service_.place_response.mutable_scope_usage() = Usage(1, 2, 2, 8);
  CliCommand place = Command({"place", "alice", "order-9"});
  place.ttl = absl::Minutes(10);
  HoldFlags flags;
  flags.scope = "event:E42";
  flags.quantity = 2;
  flags.labels = {"seat=A12", "row=3"};
  flags.scope_max_holds = 2;
  flags.scope_max_units = 8;
  flags.limit_class = "box_office";
  ASSERT_TRUE(ParseHoldFlags(flags, &place).ok());

  EXPECT_EQ(Run(place), 0) << err_.str();
  const orderhold::v1::PlaceHoldRequest& sent = service_.place_request;
  EXPECT_EQ(sent.user_id(), "alice");
  EXPECT_EQ(sent.order_id(), "order-9");
  EXPECT_EQ(sent.ttl().seconds(), 600);
  EXPECT_EQ(sent.scope(), "event:E42");
  EXPECT_EQ(sent.quantity(), 2u);
  EXPECT_EQ(sent.labels().size(), 2u);
  EXPECT_EQ(sent.labels().at("seat"), "A12");
  EXPECT_EQ(sent.scope_limits().max_holds(), 2u);
  EXPECT_EQ(sent.scope_limits().max_units(), 8u);
  EXPECT_EQ(sent.limit_class(), "box_office");
  EXPECT_EQ(out_.str(), FormatPlaceHold(service_.place_response) + "\n");
  EXPECT_EQ(err_.str(), "");

  EXPECT_EQ(Run(place, /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"scope\":\"event:E42\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"scopeUsage\":{\"holds\":1,\"maxHolds\":2,"));
  EXPECT_THAT(out_.str(), HasSubstr("\"placeTime\":\"2026-11-21T09:30:00Z\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"maxExpireTime\":\"2026-11-21T11:30:00Z\""));
}

TEST_F(RunCommandTest, PlainPlaceSendsNoneOfTheNewFields) {
  service_.place_response.set_created(true);
  *service_.place_response.mutable_hold() = MakeNewHold(absl::Minutes(30));
  service_.place_response.set_active_holds(1);
  service_.place_response.set_max_holds(3);
  *service_.place_response.mutable_user_usage() = Usage(1, 3, 1, 0);
  EXPECT_EQ(Run(Command({"place", "alice", "order-1"})), 0);
  EXPECT_EQ(service_.place_request.scope(), "");
  EXPECT_EQ(service_.place_request.quantity(), 0u);
  EXPECT_TRUE(service_.place_request.labels().empty());
  EXPECT_FALSE(service_.place_request.has_scope_limits());
  EXPECT_EQ(service_.place_request.limit_class(), "");
  EXPECT_FALSE(service_.place_request.has_ttl());
  EXPECT_EQ(out_.str(),
            "placed order-1 for alice: expires in 30m (1/3 active); cap 2026-11-21T11:30:00Z\n");
}

TEST_F(RunCommandTest, RefusalPrintsTheDecodedDetails) {
  service_.status = RefusalWithDetails();
  CliCommand place = Command({"place", "alice", "order-10"});
  EXPECT_EQ(Run(place), 8);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), absl::StrCat("error: RESOURCE_EXHAUSTED: ", kRefusal, "\n",
                                     FormatErrorDetails(FromGrpcStatus(RefusalWithDetails()))));
  EXPECT_THAT(err_.str(),
              HasSubstr("\n  reason SCOPE_HOLD_LIMIT (orderhold.v1; scope=event:E42)\n"));

  // --json: the same on stderr, and the google.rpc.Status as JSON on stdout for scripts.
  EXPECT_EQ(Run(place, /*json=*/true), 8);
  EXPECT_THAT(out_.str(), StartsWith("{\"code\":8,\"message\":"));
  EXPECT_THAT(out_.str(), HasSubstr("{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\","
                                    "\"violations\":[{\"subject\":\"user/scope:event:E42\","));
  EXPECT_THAT(out_.str(), HasSubstr("\"reason\":\"SCOPE_HOLD_LIMIT\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"retryDelay\":\"598.123s\""));
  EXPECT_THAT(err_.str(), StartsWith("error: RESOURCE_EXHAUSTED: "));
}

TEST_F(RunCommandTest, ErrorsWithoutDetailsPrintOneLineAsBefore) {
  service_.status = grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                                 "order_id order-9 is held with another quantity");
  EXPECT_EQ(Run(Command({"place", "alice", "order-9"}), /*json=*/true), 6);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "error: ALREADY_EXISTS: order_id order-9 is held with another quantity\n");
}

TEST_F(RunCommandTest, ListWithScopeFilters) {
  service_.list_response.set_max_holds(3);
  *service_.list_response.add_holds() = MakeScopedHold(absl::Minutes(29));
  *service_.list_response.mutable_user_usage() = Usage(2, 3, 3, 0);
  *service_.list_response.mutable_scope_usage() = Usage(1, 2, 2, 8);
  CliCommand list = Command({"list", "alice"});
  list.scope = "event:E42";
  EXPECT_EQ(Run(list), 0) << err_.str();
  EXPECT_EQ(service_.list_request.scope(), "event:E42");
  EXPECT_EQ(out_.str(), FormatListHolds("alice", service_.list_response, "event:E42"));
  EXPECT_THAT(out_.str(), StartsWith("alice in scope event:E42: 1/2 holds\n"));
}

TEST_F(RunCommandTest, ExtendSendsTtlAndRequestIdAndPrintsTheNewExpiry) {
  service_.extend_response = ExtendAnswer(/*extended=*/true, /*capped=*/false);
  service_.extend_response.set_extensions_left(1);
  CliCommand extend = Command({"extend", "alice", "order-1"});
  extend.ttl = absl::Minutes(12);
  HoldFlags flags;
  flags.request_id = "r-1";
  ASSERT_TRUE(ParseHoldFlags(flags, &extend).ok());

  EXPECT_EQ(Run(extend), 0) << err_.str();
  const orderhold::v1::ExtendHoldRequest& sent = service_.extend_request;
  EXPECT_EQ(sent.user_id(), "alice");
  EXPECT_EQ(sent.order_id(), "order-1");
  EXPECT_EQ(sent.ttl().seconds(), 720);
  EXPECT_EQ(sent.request_id(), "r-1");
  EXPECT_EQ(out_.str(),
            "extended order-1 for alice: expires in 12m at 2026-11-21T10:00:00Z; cap "
            "2026-11-21T11:30:00Z, extensions 1 (1 left)\n");
  EXPECT_EQ(err_.str(), "");

  EXPECT_EQ(Run(extend, /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"extended\":true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"extensionsLeft\":1"));
  EXPECT_THAT(out_.str(), HasSubstr("\"maxExpireTime\":\"2026-11-21T11:30:00Z\""));
}

TEST_F(RunCommandTest, ExtendWithoutFlagsSendsNoTtlAndNoRequestId) {
  service_.extend_response = ExtendAnswer(/*extended=*/false, /*capped=*/true);
  EXPECT_EQ(Run(Command({"extend", "alice", "order-1"})), 0) << err_.str();
  EXPECT_FALSE(service_.extend_request.has_ttl());  // the server's --default_ttl
  EXPECT_EQ(service_.extend_request.request_id(), "");
  EXPECT_THAT(out_.str(), StartsWith("order-1 for alice unchanged (capped): expires in 12m"));
}

TEST_F(RunCommandTest, ExtendRefusedAtTheExtensionLimitPrintsTheDetails) {
  service_.status = ExtensionRefusal();
  EXPECT_EQ(Run(Command({"extend", "alice", "order-1"})), 8);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(),
            absl::StrCat("error: RESOURCE_EXHAUSTED: ", kExtensionRefusal, "\n",
                         "  violation hold/extensions: order_id \"order-1\" has been extended 2 "
                         "times (max_extensions 2)\n"
                         "  reason HOLD_EXTENSION_LIMIT (orderhold.v1; order_id=order-1)\n"));

  EXPECT_EQ(Run(Command({"extend", "alice", "order-1"}), /*json=*/true), 8);
  EXPECT_THAT(out_.str(), StartsWith("{\"code\":8,\"message\":"));
  EXPECT_THAT(out_.str(), HasSubstr("\"reason\":\"HOLD_EXTENSION_LIMIT\""));
}

TEST_F(RunCommandTest, ExtendOfAnEndedHoldExitsWithFailedPrecondition) {
  service_.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                 "order_id \"order-1\" already ended: PAID at "
                                 "2026-11-21T09:40:00.120Z; it can no longer be extended");
  EXPECT_EQ(Run(Command({"extend", "alice", "order-1"})), 9);
  EXPECT_THAT(err_.str(), StartsWith("error: FAILED_PRECONDITION: order_id \"order-1\" already "
                                     "ended: PAID"));
}

TEST_F(RunCommandTest, GetPrintsAnEndedHoldAndNotFoundExitsFive) {
  *service_.get_response.mutable_hold() = MakeNewHold(absl::ZeroDuration());
  service_.get_response.mutable_hold()->clear_remaining();
  service_.get_response.set_outcome(orderhold::v1::CANCELLED);
  service_.get_response.mutable_end_time()->set_seconds(kPlaceUnixSeconds + 60);
  EXPECT_EQ(Run(Command({"get", "alice", "order-1"})), 0) << err_.str();
  EXPECT_EQ(service_.get_request.user_id(), "alice");
  EXPECT_EQ(service_.get_request.order_id(), "order-1");
  EXPECT_EQ(out_.str(),
            "order-1 (user alice) CANCELLED at 2026-11-21T09:31:00Z; cap 2026-11-21T11:30:00Z\n");

  EXPECT_EQ(Run(Command({"get", "alice", "order-1"}), /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"outcome\":\"CANCELLED\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"endTime\":\"2026-11-21T09:31:00Z\""));

  service_.status = grpc::Status(grpc::StatusCode::NOT_FOUND, "order_id \"nope\" is unknown");
  EXPECT_EQ(Run(Command({"get", "alice", "nope"})), 5);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "error: NOT_FOUND: order_id \"nope\" is unknown\n");
}

TEST_F(RunCommandTest, ReleaseSendsTheScopeAndListsWhatItReleased) {
  *service_.release_response.add_holds() = MakeScopedHold(absl::Minutes(10));
  CliCommand release = Command({"release", "alice"});
  HoldFlags flags;
  flags.scope = "event:E42";
  ASSERT_TRUE(ParseHoldFlags(flags, &release).ok());
  EXPECT_EQ(Run(release), 0) << err_.str();
  EXPECT_EQ(service_.release_request.user_id(), "alice");
  EXPECT_EQ(service_.release_request.scope(), "event:E42");
  EXPECT_EQ(out_.str(), FormatReleaseHolds("alice", service_.release_response, "event:E42"));
  EXPECT_THAT(out_.str(), StartsWith("released 1 hold of alice in scope event:E42\n  order-9 "
                                     "(had 10m left); scope event:E42"));

  service_.release_response.clear_holds();  // a second call: nothing left
  EXPECT_EQ(Run(Command({"release", "alice"})), 0);
  EXPECT_EQ(service_.release_request.scope(), "");
  EXPECT_EQ(out_.str(), "released 0 holds of alice\n");
}

TEST_F(RunCommandTest, RulePutSendsTheRuleAndPrintsItAsStored) {
  CliCommand put = Command({"rule-put", "event:1"});
  RuleFlags flags;
  flags.max_holds = 4;
  flags.capacity_units = 250;
  flags.open_time = "2026-12-07T10:00:00Z";
  ASSERT_TRUE(ParseRuleFlags(flags, &put).ok());
  EXPECT_EQ(Run(put), 0) << err_.str();
  const orderhold::v1::ScopeRule& sent = service_.put_rule_request.rule();
  EXPECT_EQ(sent.scope(), "event:1");
  EXPECT_EQ(sent.limits().max_holds(), 4u);
  EXPECT_EQ(sent.capacity_units(), 250u);
  EXPECT_EQ(sent.open_time().seconds(), kOpenUnixSeconds);
  EXPECT_EQ(out_.str(),
            "event:1 OPEN (now OPEN) etag 17: per user 4 holds / 0 units; capacity 250; opens "
            "2026-12-07T10:00:00Z\n");

  EXPECT_EQ(Run(put, /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"etag\":\"17\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"openTime\":\"2026-12-07T10:00:00Z\""));
}

TEST_F(RunCommandTest, RulePutSendsItsClassesAndPrintsThem) {
  CliCommand put = Command({"rule-put", "event:1"});
  RuleFlags flags;
  flags.classes = {"box_office;max_units=20;principal=uri:spiffe://t/box-office"};
  ASSERT_TRUE(ParseRuleFlags(flags, &put).ok());
  EXPECT_EQ(Run(put), 0) << err_.str();
  const orderhold::v1::ScopeRule& sent = service_.put_rule_request.rule();
  ASSERT_EQ(sent.classes().size(), 1u);
  EXPECT_EQ(sent.classes().at("box_office").limits().max_units(), 20u);
  EXPECT_EQ(out_.str(),
            "event:1 OPEN (now OPEN) etag 17: no limits\n"
            "  class box_office: max_units 20, principals uri:spiffe://t/box-office\n");

  // --json: the rule's proto3 JSON, classes by name.
  EXPECT_EQ(Run(put, /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"classes\":{\"box_office\":{\"limits\":{\"maxHolds\":0,"
                                    "\"maxUnits\":20},"));
  EXPECT_THAT(out_.str(), HasSubstr("\"principals\":[\"uri:spiffe://t/box-office\"]"));
}

TEST_F(RunCommandTest, ScopeCloseSendsReleaseHoldsAndPrintsWhatItReleased) {
  service_.close_response.set_released_count(12);
  service_.close_response.mutable_rule()->set_scope("event:1");
  service_.close_response.mutable_rule()->set_etag("18");
  CliCommand close = Command({"scope-close", "event:1"});
  RuleFlags flags;
  flags.release_holds = true;
  ASSERT_TRUE(ParseRuleFlags(flags, &close).ok());
  EXPECT_EQ(Run(close), 0) << err_.str();
  EXPECT_EQ(service_.close_request.scope(), "event:1");
  EXPECT_TRUE(service_.close_request.release_holds());
  EXPECT_EQ(out_.str(), "closed event:1 (etag 18); released 12 holds\n");
}

// return USER ORDER UNITS --request_id ID, as cli_main builds it.
CliCommand ReturnCommand(const std::string& units, const std::string& request_id) {
  CliCommand command = Command({"return", "alice", "order-9", units});
  HoldFlags flags;
  flags.request_id = request_id;
  EXPECT_TRUE(ParseHoldFlags(flags, &command).ok());
  return command;
}

TEST_F(RunCommandTest, ReturnSendsUnitsAndRequestIdAndPrintsTheAnswer) {
  *service_.return_response.mutable_hold() = PaidScopedHold();
  service_.return_response.set_returned_units(1);
  service_.return_response.set_total_returned_units(1);
  *service_.return_response.mutable_scope_usage() = Usage(1, 0, 1, 8);
  const CliCommand ret = ReturnCommand("1", "re_1Q2");
  EXPECT_EQ(Run(ret), 0) << err_.str();
  const orderhold::v1::ReturnUnitsRequest& sent = service_.return_request;
  EXPECT_EQ(sent.user_id(), "alice");
  EXPECT_EQ(sent.order_id(), "order-9");
  EXPECT_EQ(sent.units(), 1u);
  EXPECT_EQ(sent.request_id(), "re_1Q2");
  EXPECT_EQ(out_.str(),
            "returned 1 unit of order-9 for alice (1 of 2 returned in all)\n"
            "scope event:E42 held + bought: holds 1 (no limit), units 1/8\n");
  EXPECT_EQ(err_.str(), "");

  service_.return_response.set_already_returned(true);  // a retry with the same request_id
  EXPECT_EQ(Run(ret), 0) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("1 unit of order-9 for alice was already returned (1 of 2 "
                                     "returned in all)\n"));

  EXPECT_EQ(Run(ret, /*json=*/true), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"returnedUnits\":1"));
  EXPECT_THAT(out_.str(), HasSubstr("\"totalReturnedUnits\":1"));
  EXPECT_THAT(out_.str(), HasSubstr("\"alreadyReturned\":true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"scopeUsage\":{\"holds\":1,\"maxHolds\":0,"));
  EXPECT_THAT(out_.str(), HasSubstr("\"paymentReference\":\"pi_3N1\""));
}

constexpr char kReturnRefusal[] =
    "order_id \"order-9\": 2 units cannot be returned, 1 of its 2 units are left (1 returned)";

TEST_F(RunCommandTest, ReturnOfMoreUnitsThanAreLeftPrintsTheReason) {
  // The trailer a server sends with it (server/domain/hold_errors.cc: an ErrorInfo).
  google::rpc::ErrorInfo info;
  info.set_reason("RETURN_EXCEEDS_QUANTITY");
  info.set_domain("orderhold.v1");
  (*info.mutable_metadata())["order_id"] = "order-9";
  (*info.mutable_metadata())["quantity"] = "2";
  (*info.mutable_metadata())["returned_units"] = "1";
  google::rpc::Status details;
  details.set_code(9);
  details.set_message(kReturnRefusal);
  details.add_details()->PackFrom(info);
  service_.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kReturnRefusal,
                                 details.SerializeAsString());
  EXPECT_EQ(Run(ReturnCommand("2", "re_1Q3")), 9);
  EXPECT_EQ(service_.return_request.units(), 2u);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), absl::StrCat("error: FAILED_PRECONDITION: ", kReturnRefusal, "\n",
                                     "  reason RETURN_EXCEEDS_QUANTITY (orderhold.v1; "
                                     "order_id=order-9; quantity=2; returned_units=1)\n"));
}

TEST_F(RunCommandTest, WatchPrintsAReturnedEventWithItsUnits) {
  orderhold::v1::HoldEvent paid = ReturnedEvent();
  paid.set_event_id("3/1795255200000-0");
  paid.set_outcome(orderhold::v1::PAID);
  paid.clear_returned_units();
  service_.watch_events = {paid, ReturnedEvent()};
  CliCommand watch = Command({"watch"});
  ASSERT_TRUE(ParseWatchFlags("refunds", "c1", "paid,returned", "earliest", /*max_events=*/2,
                              /*ack=*/false, &watch)
                  .ok());
  EXPECT_EQ(Run(watch), 0) << err_.str();
  ASSERT_EQ(service_.watch_request.outcomes_size(), 2);
  EXPECT_EQ(service_.watch_request.outcomes(1), orderhold::v1::RETURNED);
  // One line per event, in order. Compared by parts, not with FormatHoldEvent's line: a map's
  // entries (the labels) may come out in another order from another message.
  const std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n');
  ASSERT_EQ(lines.size(), 3u) << out_.str();  // two lines, each ending in '\n'
  EXPECT_THAT(lines[0], StartsWith("{\"eventId\":\"3/1795255200000-0\","));
  EXPECT_THAT(lines[0], HasSubstr("\"outcome\":\"PAID\""));
  EXPECT_THAT(lines[0], HasSubstr("\"returnedUnits\":0"));
  EXPECT_THAT(lines[1], StartsWith("{\"eventId\":\"3/1795255800000-0\","));
  EXPECT_THAT(lines[1], HasSubstr("\"outcome\":\"RETURNED\""));
  EXPECT_THAT(lines[1], HasSubstr("\"returnedUnits\":2"));
  EXPECT_EQ(lines[2], "");
}

}  // namespace
}  // namespace orderhold::client
