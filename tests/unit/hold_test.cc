#include "server/domain/hold.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::domain {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ValidateIdTest, AcceptsPrintableUtf8UpTo128Bytes) {
  EXPECT_THAT(ValidateId("user_id", "a"), IsOk());
  EXPECT_THAT(ValidateId("user_id", std::string(128, 'x')), IsOk());
  EXPECT_THAT(ValidateId("user_id", "{tag}:*  spaces"), IsOk());
  EXPECT_THAT(ValidateId("user_id", "票-ü-🎫"), IsOk());
}

TEST(ValidateIdTest, RejectsBadIdsNamingTheField) {
  EXPECT_THAT(ValidateId("user_id", ""), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(ValidateId("order_id", std::string(129, 'x')),
              StatusIs(kInvalid, HasSubstr("order_id: must be 1-128 bytes (got 129)")));
  EXPECT_THAT(ValidateId("order_id", "a\nb"), StatusIs(kInvalid, HasSubstr("control")));
  EXPECT_THAT(ValidateId("order_id", std::string("a\0b", 3)),
              StatusIs(kInvalid, HasSubstr("control")));
  EXPECT_THAT(ValidateId("order_id", "a\x7f"), StatusIs(kInvalid, HasSubstr("control")));
  EXPECT_THAT(ValidateId("order_id", "a\xc2\x85"), StatusIs(kInvalid, HasSubstr("control")));  // C1
  EXPECT_THAT(ValidateId("user_id", "\xff"), StatusIs(kInvalid, HasSubstr("UTF-8")));
  EXPECT_THAT(ValidateId("user_id", "\xc3"), StatusIs(kInvalid, HasSubstr("UTF-8")));  // truncated
  EXPECT_THAT(ValidateId("user_id", "\xc0\xaf"),
              StatusIs(kInvalid, HasSubstr("UTF-8")));  // overlong
  EXPECT_THAT(ValidateId("user_id", "\xed\xa0\x80"),
              StatusIs(kInvalid, HasSubstr("UTF-8")));  // surrogate
}

TEST(ResolveTtlTest, DefaultsBoundsAndMillisecondPrecision) {
  HoldPolicy policy;
  EXPECT_EQ(*ResolveTtl(std::nullopt, policy), absl::Minutes(30));
  EXPECT_EQ(*ResolveTtl(absl::Milliseconds(200), policy), absl::Milliseconds(200));
  EXPECT_EQ(*ResolveTtl(absl::Microseconds(1500), policy), absl::Milliseconds(1));
  EXPECT_EQ(*ResolveTtl(absl::Hours(24), policy), absl::Hours(24));
  EXPECT_THAT(ResolveTtl(absl::ZeroDuration(), policy), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(ResolveTtl(absl::Seconds(-1), policy), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(ResolveTtl(absl::Microseconds(999), policy), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(ResolveTtl(absl::Hours(24) + absl::Milliseconds(1), policy),
              StatusIs(kInvalid, HasSubstr("max_ttl")));
}

TEST(ValidatePolicyTest, RejectsNonsense) {
  EXPECT_THAT(ValidatePolicy(HoldPolicy{}), IsOk());
  EXPECT_THAT(ValidatePolicy(HoldPolicy{0, absl::Minutes(1), absl::Hours(1)}),
              StatusIs(kInvalid, HasSubstr("max_holds")));
  EXPECT_THAT(ValidatePolicy(HoldPolicy{3, absl::Hours(2), absl::Hours(1)}),
              StatusIs(kInvalid, HasSubstr("default_ttl")));
  EXPECT_THAT(ValidatePolicy(HoldPolicy{3, absl::Minutes(1), absl::ZeroDuration()}),
              StatusIs(kInvalid, HasSubstr("max_ttl")));
}

}  // namespace
}  // namespace orderhold::domain
