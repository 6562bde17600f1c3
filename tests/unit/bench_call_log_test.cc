// Unit tests of orderhold-bench's --call_log lines (client/bench/call_log.h): each method's line
// with and without an OK answer, JSON escaping, and the file's open error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "client/bench/call_log.h"
#include "google/protobuf/util/time_util.h"

namespace orderhold::client::bench {
namespace {

using google::protobuf::util::TimeUtil;

CallLine Line(Method method, int code, const char* order = "o1") {
  return CallLine{.method = method,
                  .user_id = "u7",
                  .order_id = order,
                  .code = code,
                  .start_unix_us = 1764140000123456,
                  .done_unix_us = 1764140000124001};
}

TEST(CallLogTest, PlaceHoldCreatedCarriesCreatedAndExpireTime) {
  orderhold::v1::PlaceHoldResponse r;
  r.set_created(true);
  *r.mutable_hold()->mutable_expire_time() = TimeUtil::MillisecondsToTimestamp(1764140010123);
  std::string out;
  AppendCallLine(Line(Method::kPlaceHold, 0), r, &out);
  EXPECT_EQ(out,
            R"({"m":"place","u":"u7","o":"o1","c":0,"t0":1764140000123456,"t1":1764140000124001,)"
            R"("created":true,"exp":1764140010123})"
            "\n");
}

TEST(CallLogTest, AScopedPlaceCarriesItsScopeAndQuantity) {
  orderhold::v1::PlaceHoldResponse r;
  std::string out;
  CallLine line = Line(Method::kPlaceHold, 8);
  line.scope = "event:0";
  line.quantity = 0;  // unset: one unit
  AppendCallLine(line, r, &out);
  EXPECT_EQ(out, R"({"m":"place","u":"u7","o":"o1","s":"event:0","q":1,"c":8,)"
                 R"("t0":1764140000123456,"t1":1764140000124001})"
                 "\n");
}

TEST(CallLogTest, AFailedCallHasNoAnswerFields) {
  orderhold::v1::PlaceHoldResponse r;
  r.set_created(true);  // what a failed call's response object may still hold: not logged
  std::string out;
  AppendCallLine(Line(Method::kPlaceHold, 14), r, &out);
  EXPECT_EQ(out, R"({"m":"place","u":"u7","o":"o1","c":14,"t0":1764140000123456,)"
                 R"("t1":1764140000124001})"
                 "\n");
}

TEST(CallLogTest, EachMethodsAnswer) {
  std::string out;
  orderhold::v1::PayResponse pay;
  pay.set_already_paid(true);
  AppendCallLine(Line(Method::kPay, 0), pay, &out);
  EXPECT_THAT(out, testing::EndsWith(R"(,"already":true})"
                                     "\n"));
  out.clear();
  orderhold::v1::CancelHoldResponse cancel;
  AppendCallLine(Line(Method::kCancelHold, 0), cancel, &out);
  EXPECT_THAT(out, testing::StartsWith(R"({"m":"cancel",)"));
  EXPECT_THAT(out, testing::EndsWith(R"(,"already":false})"
                                     "\n"));
  out.clear();
  orderhold::v1::ExtendHoldResponse extend;
  *extend.mutable_hold()->mutable_expire_time() = TimeUtil::MillisecondsToTimestamp(5);
  AppendCallLine(Line(Method::kExtendHold, 0), extend, &out);
  EXPECT_THAT(out, testing::EndsWith(R"(,"exp":5})"
                                     "\n"));
  out.clear();
  orderhold::v1::GetHoldResponse get;
  get.set_outcome(orderhold::v1::EXPIRED);
  *get.mutable_hold()->mutable_expire_time() = TimeUtil::MillisecondsToTimestamp(9);
  AppendCallLine(Line(Method::kGetHold, 0), get, &out);
  EXPECT_THAT(out, testing::EndsWith(R"(,"outcome":3,"exp":9})"
                                     "\n"));
  out.clear();
  orderhold::v1::ListHoldsResponse list;
  list.add_holds();
  list.add_holds();
  AppendCallLine(Line(Method::kListHolds, 0, ""), list, &out);
  EXPECT_EQ(out, R"({"m":"list","u":"u7","c":0,"t0":1764140000123456,"t1":1764140000124001,"n":2})"
                 "\n");
  out.clear();
  orderhold::v1::ReleaseHoldsResponse release;
  AppendCallLine(Line(Method::kReleaseHolds, 0, ""), release, &out);
  EXPECT_THAT(out, testing::EndsWith(R"(,"released":[]})"
                                     "\n"));
  out.clear();
  release.add_holds()->set_order_id("a");
  release.add_holds()->set_order_id("b");
  AppendCallLine(Line(Method::kReleaseHolds, 0, ""), release, &out);
  EXPECT_THAT(out, testing::EndsWith(R"(,"released":["a","b"]})"
                                     "\n"));
}

TEST(CallLogTest, IdsAreJsonEscaped) {
  orderhold::v1::PayResponse pay;
  std::string out;
  CallLine line = Line(Method::kPay, 5, "a\"b\\c\n");
  AppendCallLine(line, pay, &out);
  EXPECT_THAT(out, testing::HasSubstr(R"("o":"a\"b\\c\u000a")"));
}

TEST(CallLogTest, OpenNamesThePathItCannotCreate) {
  const auto log = CallLog::Open("/nonexistent-dir/calls.jsonl");
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(log.status().message()),
              testing::HasSubstr("--call_log: cannot open /nonexistent-dir/calls.jsonl: "));
}

}  // namespace
}  // namespace orderhold::client::bench
