#include "server/domain/scope_limits.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::domain {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ScopeRulesTest, DefaultConstructedLeavesEveryScopeUnlimited) {
  const ScopeRules rules;
  EXPECT_EQ(rules.Resolve("event:E42"), (ScopeLimits{0, 0}));
  EXPECT_EQ(rules.Resolve(""), (ScopeLimits{0, 0}));
  EXPECT_TRUE(rules.rules().empty());
  EXPECT_EQ(rules.default_limits(), (ScopeLimits{0, 0}));
}

TEST(ScopeRulesTest, TotalsComeFromTheSameRuleAsTheLimitsAndAreBounded) {
  auto rules =
      ScopeRules::Create(ScopeLimits{1, 0},
                         {ScopeRule{"event:", ScopeLimits{2, 0}, ScopeTotals{100, 0}},
                          ScopeRule{"event:big:", ScopeLimits{3, 0}, ScopeTotals{0, 5000}}},
                         ScopeTotals{7, 0});
  ASSERT_THAT(rules, IsOk());
  EXPECT_TRUE(rules->has_totals());
  EXPECT_EQ(rules->ResolveAll("event:E1").totals, (ScopeTotals{100, 0}));
  EXPECT_EQ(rules->ResolveAll("event:E1").limits, (ScopeLimits{2, 0}));
  EXPECT_EQ(rules->ResolveAll("event:big:E2").totals, (ScopeTotals{0, 5000}));
  EXPECT_EQ(rules->ResolveAll("show:1").totals, (ScopeTotals{7, 0}));
  EXPECT_EQ(rules->ResolveAll("show:1").limits, (ScopeLimits{1, 0}));
  EXPECT_FALSE(ScopeRules().has_totals());
  auto none = ScopeRules::Create(ScopeLimits{1, 0}, {ScopeRule{"event:", ScopeLimits{2, 0}}});
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->has_totals());
  EXPECT_THAT(ScopeRules::Create(ScopeLimits{}, {ScopeRule{"e:", {}, ScopeTotals{-1, 0}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rules[0].total_max_holds: must be 0-1000000000")));
  EXPECT_THAT(ScopeRules::Create(ScopeLimits{}, {}, ScopeTotals{0, 1000000001}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("default.total_max_units: must be 0-1000000000")));
}

TEST(ScopeRulesTest, NoRulesGiveTheDefault) {
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules, ScopeRules::Create({1, 5}, {}));
  EXPECT_EQ(rules.Resolve("event:E42"), (ScopeLimits{1, 5}));
  EXPECT_EQ(rules.Resolve("x"), (ScopeLimits{1, 5}));
  EXPECT_EQ(rules.default_limits(), (ScopeLimits{1, 5}));
}

TEST(ScopeRulesTest, LongestMatchingPrefixWinsWhateverTheOrder) {
  // The shorter prefix first, so that a first-match resolution would pick the wrong rule.
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules, ScopeRules::Create({1, 0}, {{"event:", {2, 8}},
                                                                           {"event:E42", {4, 20}},
                                                                           {"e", {7, 7}},
                                                                           {"tenant:", {5, 0}}}));
  EXPECT_EQ(rules.Resolve("event:E42"), (ScopeLimits{4, 20}));
  EXPECT_EQ(rules.Resolve("event:E421"), (ScopeLimits{4, 20}));  // a prefix, not a whole id
  EXPECT_EQ(rules.Resolve("event:E4"), (ScopeLimits{2, 8}));
  EXPECT_EQ(rules.Resolve("event:"), (ScopeLimits{2, 8}));  // the prefix itself matches
  EXPECT_EQ(rules.Resolve("event"), (ScopeLimits{7, 7}));
  EXPECT_EQ(rules.Resolve("tenant:T1/event:E42"), (ScopeLimits{5, 0}));  // starts with, only
  EXPECT_EQ(rules.Resolve("Event:E42"), (ScopeLimits{1, 0}));            // case-sensitive
  EXPECT_EQ(rules.Resolve("x"), (ScopeLimits{1, 0}));
  EXPECT_EQ(rules.Resolve(""), (ScopeLimits{1, 0}));
}

TEST(ScopeRulesTest, RulesAreKeptLongestPrefixFirst) {
  ASSERT_OK_AND_ASSIGN(
      const ScopeRules rules,
      ScopeRules::Create({}, {{"ab", {1, 0}}, {"abcd", {2, 0}}, {"xy", {3, 0}}, {"a", {4, 0}}}));
  EXPECT_THAT(rules.rules(), ElementsAre(ScopeRule{"abcd", {2, 0}}, ScopeRule{"ab", {1, 0}},
                                         ScopeRule{"xy", {3, 0}}, ScopeRule{"a", {4, 0}}));
}

TEST(ScopeRulesTest, ZeroMeansNoLimitAtThatLevelAndIsAValidRule) {
  // A rule of {0, 0} exempts its scopes from a limiting default.
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules, ScopeRules::Create({1, 1}, {{"loadtest:", {0, 0}}}));
  EXPECT_EQ(rules.Resolve("loadtest:1"), (ScopeLimits{0, 0}));
  EXPECT_EQ(rules.Resolve("other"), (ScopeLimits{1, 1}));
}

TEST(ScopeRulesTest, AcceptsTheBoundsAndUtf8Prefixes) {
  EXPECT_THAT(
      ScopeRules::Create({kMaxScopeHolds, kMaxUnits},
                         {{std::string(128, 'p'), {kMaxScopeHolds, kMaxUnits}}, {"票:", {1, 1}}}),
      IsOk());
  EXPECT_EQ(kMaxScopeHolds, kMaxHoldsLimit);
}

TEST(ScopeRulesTest, CreateRejectsBadPrefixesNamingTheRule) {
  EXPECT_THAT(ScopeRules::Create({}, {{"a", {}}, {"", {1, 0}}}),
              StatusIs(kInvalid, HasSubstr("rules[1].prefix: must not be empty")));
  EXPECT_THAT(ScopeRules::Create({}, {{std::string(129, 'p'), {}}}),
              StatusIs(kInvalid, HasSubstr("rules[0].prefix: must be 1-128 bytes (got 129)")));
  EXPECT_THAT(ScopeRules::Create({}, {{"a", {}}, {"b", {}}, {"a\nb", {}}}),
              StatusIs(kInvalid, HasSubstr("rules[2].prefix: must not contain control")));
  EXPECT_THAT(ScopeRules::Create({}, {{"a\xff", {}}}),
              StatusIs(kInvalid, HasSubstr("rules[0].prefix: must be valid UTF-8")));
  EXPECT_THAT(ScopeRules::Create({}, {{"event:", {1, 0}}, {"x", {}}, {"event:", {2, 0}}}),
              StatusIs(kInvalid,
                       HasSubstr("rules[2].prefix: \"event:\" is already the prefix of rules[0]")));
}

TEST(ScopeRulesTest, CreateRejectsLimitsOutOfBoundsNamingTheField) {
  EXPECT_THAT(ScopeRules::Create({kMaxScopeHolds + 1, 0}, {}),
              StatusIs(kInvalid, HasSubstr("default.max_holds: must be 0-10000 (0: no limit), "
                                           "got 10001")));
  EXPECT_THAT(ScopeRules::Create({0, kMaxUnits + 1}, {}),
              StatusIs(kInvalid, HasSubstr("default.max_units: must be 0-1000000000")));
  EXPECT_THAT(ScopeRules::Create({-1, 0}, {}),
              StatusIs(kInvalid, HasSubstr("default.max_holds: must be 0-10000 (0: no limit), "
                                           "got -1")));
  EXPECT_THAT(ScopeRules::Create({}, {{"a", {}}, {"b", {0, -5}}}),
              StatusIs(kInvalid, HasSubstr("rules[1].max_units: must be 0-1000000000")));
  EXPECT_THAT(ScopeRules::Create({}, {{"a", {kMaxScopeHolds + 1, 0}}}),
              StatusIs(kInvalid, HasSubstr("rules[0].max_holds")));
}

}  // namespace
}  // namespace orderhold::domain
