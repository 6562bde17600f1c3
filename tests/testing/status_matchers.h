// Status matchers for GoogleTest (abseil 20220623 ships none). One place for the whole suite.
//   EXPECT_THAT(status_or, IsOk());
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("user_id")));
#ifndef ORDERHOLD_TESTS_TESTING_STATUS_MATCHERS_H_
#define ORDERHOLD_TESTS_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "server/common/status_macros.h"

namespace orderhold::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status " << status.ToString();
  return status.ok();
}

MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status " << status.ToString();
  return status.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "status " << status.ToString();
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

// A StatusOr that is OK and whose value matches `matcher` (a value or a matcher).
MATCHER_P(IsOkAndHolds, matcher, "is OK and holds a matching value") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

// ASSERT_OK_AND_ASSIGN(auto x, StatusOrExpr);
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(ORDERHOLD_CONCAT_(status_or_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)  \
  auto tmp = (expr);                                \
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString(); \
  lhs = std::move(tmp).value()

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_STATUS_MATCHERS_H_
