#include "server/limits_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/os_util.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::domain::ScopeLimits;
using ::orderhold::domain::ScopeRules;
using ::orderhold::domain::ScopeTotals;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// The message of ParseLimitsFile's error for `text` (named "limits.yaml"), or "OK" and a test
// failure when it parses.
std::string ErrorOf(absl::string_view text) {
  const absl::StatusOr<ScopeRules> rules = ParseLimitsFile(text, "limits.yaml");
  EXPECT_THAT(rules, StatusIs(kInvalid)) << text;
  return rules.ok() ? "OK" : std::string(rules.status().message());
}

void ExpectSameRules(const ScopeRules& a, const ScopeRules& b) {
  EXPECT_EQ(a.default_limits(), b.default_limits());
  EXPECT_EQ(a.rules(), b.rules());
}

constexpr absl::string_view kExampleJson = R"({
  "default": {"max_holds": 1, "max_units": 0},
  "rules": [{"prefix": "event:", "max_holds": 2, "max_units": 8}]
})";

constexpr absl::string_view kExampleYaml = R"(# a file of one default and one rule, with a comment
default:
  max_holds: 1
  max_units: 0
rules:
  - prefix: "event:"
    max_holds: 2
    max_units: 8
)";

TEST(LimitsFileTest, JsonAndYamlOfTheSameShapeGiveTheSameRules) {
  ASSERT_OK_AND_ASSIGN(const ScopeRules from_json, ParseLimitsFile(kExampleJson, "l.json"));
  ASSERT_OK_AND_ASSIGN(const ScopeRules from_yaml, ParseLimitsFile(kExampleYaml, "l.yaml"));
  ExpectSameRules(from_json, from_yaml);
  EXPECT_EQ(from_yaml.default_limits(), (ScopeLimits{1, 0}));
  ASSERT_EQ(from_yaml.rules().size(), 1u);
  EXPECT_EQ(from_yaml.rules()[0].prefix, "event:");
  EXPECT_EQ(from_yaml.rules()[0].limits, (ScopeLimits{2, 8}));
  EXPECT_EQ(from_yaml.Resolve("event:E42"), (ScopeLimits{2, 8}));
  EXPECT_EQ(from_yaml.Resolve("show:S1"), (ScopeLimits{1, 0}));
  // The same rules as one line of JSON, and in YAML's flow style.
  ASSERT_OK_AND_ASSIGN(
      const ScopeRules one_line,
      ParseLimitsFile(R"({"default": {"max_holds": 1, "max_units": 0}, "rules": [{"prefix": )"
                      R"("event:", "max_holds": 2, "max_units": 8}]})",
                      "l.json"));
  ExpectSameRules(one_line, from_yaml);
  ASSERT_OK_AND_ASSIGN(
      const ScopeRules flow,
      ParseLimitsFile("default: {max_holds: 1}\nrules: [{prefix: 'event:', max_holds: 2, "
                      "max_units: 8}]\n",
                      "l.yaml"));
  ExpectSameRules(flow, from_yaml);
}

TEST(LimitsFileTest, AbsentFieldsAreZeroMeaningNoLimit) {
  ASSERT_OK_AND_ASSIGN(const ScopeRules empty_mapping, ParseLimitsFile("{}", "l.json"));
  EXPECT_EQ(empty_mapping.default_limits(), (ScopeLimits{0, 0}));
  EXPECT_TRUE(empty_mapping.rules().empty());
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules,
                       ParseLimitsFile("rules:\n  - prefix: a\n    max_units: 3\n", "l.yaml"));
  EXPECT_EQ(rules.default_limits(), (ScopeLimits{0, 0}));
  EXPECT_EQ(rules.Resolve("ab"), (ScopeLimits{0, 3}));
}

TEST(LimitsFileTest, TotalsAreReadForTheDefaultAndEachRuleAndBounded) {
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules,
                       ParseLimitsFile("default: {max_holds: 1, total_max_holds: 50}\n"
                                       "rules:\n"
                                       "  - prefix: 'event:'\n"
                                       "    max_holds: 2\n"
                                       "    total_max_holds: 500\n"
                                       "    total_max_units: 2000\n",
                                       "l.yaml"));
  EXPECT_TRUE(rules.has_totals());
  EXPECT_EQ(rules.default_totals(), (ScopeTotals{50, 0}));
  EXPECT_EQ(rules.ResolveAll("event:E1").totals, (ScopeTotals{500, 2000}));
  EXPECT_EQ(rules.ResolveAll("event:E1").limits, (ScopeLimits{2, 0}));
  EXPECT_EQ(rules.ResolveAll("show:1").totals, (ScopeTotals{50, 0}));
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    total_max_units: 4294967296\n"),
            "limits.yaml:3: rules[0].total_max_units: must be 0-1000000000 (0: no limit), got "
            "4294967296");
  EXPECT_EQ(ErrorOf("default: {total_max_holds: 1000000001}\n"),
            "limits.yaml:1: default.total_max_holds: must be 0-1000000000 (0: no total), got "
            "1000000001");
}

TEST(LimitsFileTest, CapacitiesAreReadForTheDefaultAndEachRuleAndBounded) {
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules, ParseLimitsFile("default: {capacity_units: 50}\n"
                                                               "rules:\n"
                                                               "  - prefix: 'event:'\n"
                                                               "    max_units: 4\n"
                                                               "    capacity_units: 2000\n"
                                                               "  - prefix: 'free:'\n"
                                                               "    max_units: 4\n",
                                                               "l.yaml"));
  EXPECT_TRUE(rules.has_capacity());
  EXPECT_TRUE(rules.has_totals());  // a capacity needs the scope index as totals do
  EXPECT_EQ(rules.ResolveAll("event:E1").capacity_units, 2000);
  EXPECT_EQ(rules.ResolveAll("free:1").capacity_units, 0);
  EXPECT_EQ(rules.ResolveAll("show:1").capacity_units, 50);
  ASSERT_OK_AND_ASSIGN(const ScopeRules none,
                       ParseLimitsFile("rules: [{prefix: a, total_max_holds: 3}]\n", "l.yaml"));
  EXPECT_FALSE(none.has_capacity());
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    capacity_units: 1000000001\n"),
            "limits.yaml:3: rules[0].capacity_units: must be 0-1000000000 (0: no capacity), got "
            "1000000001");
}

TEST(LimitsFileTest, ValuesAsProtobufsJsonMappingTakesThem) {
  // A quoted number is a number to protobuf's JSON mapping; so is 1e3.
  ASSERT_OK_AND_ASSIGN(
      const ScopeRules rules,
      ParseLimitsFile("default: {max_holds: \"3\", max_units: 1e3}\nrules: [{prefix: !!str 5}]\n",
                      "l.yaml"));
  EXPECT_EQ(rules.default_limits(), (ScopeLimits{3, 1000}));
  EXPECT_EQ(rules.Resolve("55"), (ScopeLimits{0, 0}));  // prefix "5", a string by its tag
  EXPECT_EQ(rules.Resolve("6"), (ScopeLimits{3, 1000}));
  // Bytes that JSON must escape, and UTF-8, reach the prefix unchanged.
  ASSERT_OK_AND_ASSIGN(const ScopeRules text,
                       ParseLimitsFile(R"(rules: [{prefix: "q\"b\\s/票", max_holds: 1}])", "l"));
  EXPECT_EQ(text.Resolve("q\"b\\s/票1"), (ScopeLimits{1, 0}));
}

TEST(LimitsFileTest, WrongTypeNamesLineAndField) {
  EXPECT_EQ(ErrorOf("default:\n"
                    "  max_holds: 1\n"
                    "rules:\n"
                    "  - prefix: \"a\"\n"
                    "    max_holds: 1\n"
                    "  - prefix: \"b\"\n"
                    "    max_holds: two\n"),
            "limits.yaml:7: rules[1].max_holds: expected an unsigned integer, got \"two\"");
  EXPECT_EQ(ErrorOf("{\n"
                    "  \"rules\": [\n"
                    "    {\"prefix\": \"a\"},\n"
                    "    {\"prefix\": \"b\", \"max_units\": true}\n"
                    "  ]\n"
                    "}\n"),
            "limits.yaml:4: rules[1].max_units: expected an unsigned integer, got true");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: 5\n"),
            "limits.yaml:2: rules[0].prefix: expected a string, got 5 (quote it)");
  EXPECT_EQ(ErrorOf("default: {max_holds: 2.5}\n"),
            "limits.yaml:1: default.max_holds: expected an unsigned integer, got 2.5");
  EXPECT_EQ(ErrorOf("default:\n  max_holds: 0x10\n"),
            "limits.yaml:2: default.max_holds: expected an unsigned integer, got \"0x10\"");
  EXPECT_EQ(ErrorOf("default: 3\n"), "limits.yaml:1: default: expected a mapping, got 3");
  EXPECT_EQ(ErrorOf("default: [1]\n"), "limits.yaml:1: default: expected a mapping, got a list");
  EXPECT_EQ(ErrorOf("rules: event\n"),
            "limits.yaml:1: rules: expected a list of mappings, got \"event\"");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n  - b\n"),
            "limits.yaml:3: rules[1]: expected a mapping, got \"b\"");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_holds: [1]\n"),
            "limits.yaml:3: rules[0].max_holds: expected a single value, got a list");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_holds:\n      n: 1\n"),
            "limits.yaml:3: rules[0].max_holds: expected a single value, got a mapping");
  EXPECT_EQ(ErrorOf("- prefix: a\n"),
            "limits.yaml:1: the document is not a mapping: want a mapping with \"default\" "
            "and/or \"rules\" ({} for no limits)");
}

TEST(LimitsFileTest, UnknownFieldsAreErrorsNamingLineAndField) {
  // A typo must not silently mean "no limit".
  EXPECT_EQ(ErrorOf("rules:\n"
                    "  - prefix: a\n"
                    "    max_hold: 2\n"),
            "limits.yaml:3: rules[0].max_hold: unknown field (known here: prefix, max_holds, "
            "max_units, total_max_holds, total_max_units, capacity_units)");
  EXPECT_EQ(ErrorOf("defaults:\n  max_holds: 1\n"),
            "limits.yaml:1: defaults: unknown field (known here: default, rules)");
  EXPECT_EQ(ErrorOf("default:\n  max_holds: 1\n  maxUnits: 2\n"),
            "limits.yaml:3: default.maxUnits: unknown field (known here: max_holds, max_units, "
            "total_max_holds, total_max_units, capacity_units)");
  EXPECT_EQ(ErrorOf("{\"default\": {},\n \"rules\": [{\"prefix\": \"a\", \"limit\": 1}]}"),
            "limits.yaml:2: rules[0].limit: unknown field (known here: prefix, max_holds, "
            "max_units, total_max_holds, total_max_units, capacity_units)");
}

TEST(LimitsFileTest, NegativeAndTooLargeNumbersNameLineAndField) {
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_units: -1\n"),
            "limits.yaml:3: rules[0].max_units: expected an unsigned integer, got -1");
  EXPECT_EQ(ErrorOf("{\"default\": {\"max_holds\": -3}}"),
            "limits.yaml:1: default.max_holds: expected an unsigned integer, got -3");
  // Beyond uint32 (protobuf's check) and beyond the domain's bounds (ScopeRules'): one message.
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_holds: 99999999999\n"),
            "limits.yaml:3: rules[0].max_holds: must be 0-10000 (0: no limit), got 99999999999");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_holds: 10001\n"),
            "limits.yaml:3: rules[0].max_holds: must be 0-10000 (0: no limit), got 10001");
  EXPECT_EQ(ErrorOf("default:\n  max_units: 1000000001\n"),
            "limits.yaml:2: default.max_units: must be 0-1000000000 (0: no limit), got "
            "1000000001");
}

TEST(LimitsFileTest, BadPrefixesNameTheirLine) {
  EXPECT_EQ(ErrorOf("rules:\n"
                    "  - prefix: \"event:\"\n"
                    "    max_holds: 2\n"
                    "  - prefix: \"show:\"\n"
                    "  - max_holds: 1\n"
                    "    prefix: \"event:\"\n"),
            "limits.yaml:6: rules[2].prefix: \"event:\" is already the prefix of rules[0]");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n  - prefix: \"\"\n"),
            "limits.yaml:3: rules[1].prefix: must not be empty (the default applies to the "
            "scopes no rule matches)");
  // No prefix at all: the rule's line.
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n  -\n    max_holds: 1\n"),
            "limits.yaml:4: rules[1].prefix: must not be empty (the default applies to the "
            "scopes no rule matches)");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: \"a\\tb\"\n"),
            "limits.yaml:2: rules[0].prefix: must not contain control characters (one at "
            "offset 1)");
  EXPECT_THAT(ErrorOf(absl::StrCat("rules:\n  - prefix: ", std::string(129, 'p'), "\n")),
              StartsWith("limits.yaml:2: rules[0].prefix: must be 1-128 bytes (got 129)"));
}

TEST(LimitsFileTest, YamlAndJsonSyntaxErrorsNameTheirLine) {
  // Unquoted, "event:" ends in a mapping indicator.
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: event:\n"),
            "limits.yaml:2: YAML syntax error at column 18: illegal map value");
  EXPECT_THAT(ErrorOf("{\n  \"default\": {\"max_holds\": 1}\n  \"rules\": []\n}\n"),
              StartsWith("limits.yaml:3: YAML syntax error at column"));
  EXPECT_THAT(ErrorOf("rules: [\n  {prefix: a},\n"), StartsWith("limits.yaml:3: YAML syntax"));
}

TEST(LimitsFileTest, EmptyFilesAreInvalid) {
  EXPECT_EQ(ErrorOf(""),
            "limits.yaml: the file is empty: want a mapping with \"default\" and/or \"rules\" ({} "
            "for no limits)");
  EXPECT_THAT(ErrorOf(" \n\n\t\n"), StartsWith("limits.yaml: the file is empty"));
  EXPECT_THAT(ErrorOf("# only a comment\n"),
              StartsWith("limits.yaml: the file is empty (only comments)"));
}

TEST(LimitsFileTest, RefusesWhatJsonCannotSayOrProtobufWouldHide) {
  EXPECT_EQ(ErrorOf("default:\n  max_holds: 1\n  max_holds: 2\n"),
            "limits.yaml:3: default.max_holds: given twice (first on line 2)");
  EXPECT_EQ(ErrorOf("{\"default\": {\"max_units\": 1,\n  \"max_units\": 2}}"),
            "limits.yaml:2: default.max_units: given twice (first on line 1)");
  EXPECT_EQ(ErrorOf("rules:\n  - prefix: a\n    max_holds:\n"),
            "limits.yaml:3: rules[0].max_holds: has no value (leave the field out instead)");
  EXPECT_EQ(ErrorOf("{\"default\": null}"),
            "limits.yaml:1: default: has no value (leave the field out instead)");
  EXPECT_EQ(ErrorOf("default:\n  max_holds: !!int 5\n"),
            "limits.yaml:2: default.max_holds: YAML tag tag:yaml.org,2002:int is not supported "
            "(only !!str)");
  EXPECT_EQ(ErrorOf("default: {}\n---\nrules: []\n"),
            "limits.yaml:3: a second YAML document (after ---): the file holds one");
  // yaml-cpp's LoadAll never returned on these (tests/fuzz/limits_file_fuzzer.cc found the first).
  EXPECT_EQ(ErrorOf("{\"default\": {\"max_holds\": 2}},\n"),
            "limits.yaml:1: text after the end of the document at column 30 (a trailing comma?)");
  EXPECT_EQ(ErrorOf("{\"rules\": []}\n]\n"),
            "limits.yaml:2: YAML syntax error at column 1: illegal flow end");
  EXPECT_EQ(ErrorOf("[1], x\n"),
            "limits.yaml:1: text after the end of the document at column 4 (a trailing comma?)");
  EXPECT_EQ(ErrorOf("default: {}\nrules:\n  - prefix: \"a\xff\"\n"),
            "limits.yaml:3: not valid UTF-8 (byte 0xff at column 15)");
  EXPECT_EQ(ErrorOf("? [a]\n: 1\n"), "limits.yaml:1: a mapping key must be plain text");
  // Aliases are refused before anything expands them: 461 bytes of nested aliases expanded to
  // 5.3 GB. A plain anchor alone is harmless.
  std::string laughs = "a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    const char prev = static_cast<char>(c - 1);
    laughs += absl::StrCat(std::string(1, c), ": &", std::string(1, c), " [*", std::string(1, prev),
                           ", *", std::string(1, prev), ", *", std::string(1, prev), "]\n");
  }
  EXPECT_EQ(ErrorOf(laughs),
            "limits.yaml:2: a YAML alias (*name) at column 8: the limits file takes none (write "
            "the values out)");
  EXPECT_EQ(ErrorOf("default: &d {max_holds: 1}\nrules:\n  - prefix: a\n    max_holds: *d\n"),
            "limits.yaml:4: a YAML alias (*name) at column 16: the limits file takes none (write "
            "the values out)");
  EXPECT_THAT(ErrorOf(std::string(40, '[') + std::string(40, ']')),
              HasSubstr("nested deeper than 32 levels"));
  EXPECT_THAT(ErrorOf(std::string(kMaxLimitsFileBytes + 1, ' ')),
              StartsWith("limits.yaml: over 1048576 bytes"));
}

TEST(LimitsFileTest, LoadReadsTheFileAndNamesItInErrors) {
  ASSERT_OK_AND_ASSIGN(const std::string dir, orderhold::testing::MakeTempDir("limits-file"));
  const std::string good = dir + "/good.yaml";
  const std::string bad = dir + "/bad.json";
  std::ofstream(good) << kExampleYaml;
  std::ofstream(bad) << "{\"rules\": [\n{\"prefix\": \"a\", \"max_holds\": \"two\"}]}";
  ASSERT_OK_AND_ASSIGN(const ScopeRules rules, LoadLimitsFile(good));
  EXPECT_EQ(rules.Resolve("event:E1"), (ScopeLimits{2, 8}));
  EXPECT_THAT(LoadLimitsFile(bad),
              StatusIs(kInvalid, absl::StrCat(bad,
                                              ":2: rules[0].max_holds: expected an unsigned "
                                              "integer, got \"two\"")));
  EXPECT_THAT(LoadLimitsFile(dir + "/missing.yaml"),
              StatusIs(kInvalid, absl::StrCat(dir,
                                              "/missing.yaml: cannot read: No such file or "
                                              "directory")));
  EXPECT_THAT(LoadLimitsFile(dir),
              StatusIs(kInvalid, absl::StrCat(dir, ": cannot read: Is a directory")));
  std::ofstream(dir + "/empty.yaml").flush();
  EXPECT_THAT(LoadLimitsFile(dir + "/empty.yaml"),
              StatusIs(kInvalid, HasSubstr("empty.yaml: the file is empty")));
  std::ofstream(dir + "/big.yaml") << std::string(kMaxLimitsFileBytes + 1, '#');
  EXPECT_THAT(LoadLimitsFile(dir + "/big.yaml"),
              StatusIs(kInvalid, HasSubstr("big.yaml: over 1048576 bytes")));
  std::filesystem::remove_all(dir);
}

TEST(LimitsFileTest, TheDeployExamplesAreValidAndSay) {
  const std::string dir = ORDERHOLD_DEPLOY_DIR;
  ASSERT_OK_AND_ASSIGN(const ScopeRules yaml, LoadLimitsFile(dir + "/limits.example.yaml"));
  ASSERT_OK_AND_ASSIGN(const ScopeRules json, LoadLimitsFile(dir + "/limits.example.json"));
  ExpectSameRules(yaml, json);
  // What the comments of limits.example.yaml say the rules do.
  EXPECT_EQ(yaml.Resolve("event:E7"), (ScopeLimits{2, 8}));
  EXPECT_EQ(yaml.Resolve("event:E42"), (ScopeLimits{4, 20}));
  EXPECT_EQ(yaml.ResolveAll("event:E42").capacity_units, 1800);
  EXPECT_EQ(yaml.ResolveAll("event:E7").capacity_units, 0);
  EXPECT_EQ(yaml.Resolve("tenant:T1/event:E42"), (ScopeLimits{5, 0}));
  EXPECT_EQ(yaml.Resolve("loadtest:run-1"), (ScopeLimits{0, 0}));
  EXPECT_EQ(yaml.Resolve("show:S1"), (ScopeLimits{1, 0}));
}

}  // namespace
}  // namespace orderhold
