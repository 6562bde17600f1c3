// The stored form of a hold's details (store/hold_details_codec.h): what the scripts prefix and
// read back, round trips of any bytes, and refusal of anything malformed.
#include "server/store/hold_details_codec.h"

#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orderhold::store {
namespace {

// What place_hold.lua stores: "<expire>:<now>:" and the caller's tail.
std::string Stored(int64_t expire_ms, int64_t place_ms, const HoldDetails& details) {
  return absl::StrCat(expire_ms, ":", place_ms, ":", EncodeDetailsTail(details));
}

TEST(HoldDetailsCodecTest, RoundTripsAnyBytes) {
  HoldDetails details;
  details.scope = "tenant:T1/event:E42 {x}\xe2\x82\xac:9:";
  details.quantity = 1000000000;
  details.labels = {{"seat", "12:A\n{x}"}, {"z.-_9", ""}, {"n", std::string("\0:1", 3)}};
  details.scope_limits = LevelLimits{10000, 8};
  const std::string stored = Stored(1795000000123, 1795000000000, details);
  auto decoded = DecodeDetails(stored);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->expire_ms, 1795000000123);
  details.place_time = absl::FromUnixMillis(1795000000000);
  EXPECT_EQ(decoded->details, details);
}

TEST(HoldDetailsCodecTest, TheDefaultIsUnscopedQuantityOneWithoutLabels) {
  EXPECT_EQ(EncodeDetailsTail(HoldDetails{}), "1:0:0:0:0:");
  auto decoded = DecodeDetails("5:4:1:0:0:0:0:");
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->details.quantity, 1);
  EXPECT_EQ(decoded->details.scope, "");
  EXPECT_TRUE(decoded->details.labels.empty());
}

// The header place_hold.lua reads with string.match: expire, place, quantity, scope length, scope.
TEST(HoldDetailsCodecTest, TheScriptsHeaderComesFirst) {
  HoldDetails details;
  details.scope = "event:E1";
  details.quantity = 3;
  EXPECT_THAT(Stored(7, 6, details), ::testing::StartsWith("7:6:3:8:event:E1"));
}

TEST(HoldDetailsCodecTest, MalformedValuesAreRefused) {
  for (const std::string bad :
       {"", "1:2", "1:2:3", "x:2:1:0:0:0:0:", "1:2:0:0:0:0:0:", "1:2:1:5:abc0:0:0:",
        "1:2:1:0:0:0:1:", "1:2:1:0:0:0:1:3:ab", "1:2:1:0:0:0:0:trailing",
        "-1:2:1:0:0:0:0:", "1:2:1:0:0:0:99999999999999999999:", "1:2:1:0::0:0:",
        // 19 digits past int64's range, and a sign.
        "9223372036854775808:2:1:0:0:0:0:", "9999999999999999999:2:1:0:0:0:0:",
        "+1:2:1:0:0:0:0:"}) {
    EXPECT_FALSE(DecodeDetails(bad).has_value()) << bad;
  }
  // The largest number is read whole.
  const std::optional<DecodedDetails> max = DecodeDetails("9223372036854775807:2:1:0:0:0:0:");
  ASSERT_TRUE(max.has_value());
  EXPECT_EQ(max->expire_ms, std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace orderhold::store
