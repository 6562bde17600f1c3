// AuthzPolicy against gRFC A43 and gRPC 1.51's translator and matchers (rbac_translator.cc,
// matchers.cc): the table of what a rule matches, and what Parse refuses.
#include "server/grpc/authz_policy.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::grpc_api {
namespace {

using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

AuthzRequest Peer(std::string path, std::vector<std::string> uri_sans = {},
                  std::vector<std::string> dns_sans = {}, std::string subject = "",
                  bool tls = true) {
  AuthzRequest request;
  request.path = std::move(path);
  request.authenticated = tls;
  request.uri_sans = std::move(uri_sans);
  request.dns_sans = std::move(dns_sans);
  request.subject = std::move(subject);
  return request;
}

AuthzPolicy MustParse(const std::string& json) {
  absl::StatusOr<AuthzPolicy> policy = AuthzPolicy::Parse(json);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *std::move(policy);
}

TEST(StringPatternTest, MatchesAsGrpcTranslatesIt) {
  struct Case {
    const char* pattern;
    const char* value;
    bool matches;
  };
  const Case cases[] = {
      {"*", "anything", true}, {"*", "", false},  // ".+": not empty
      {"abc", "abc", true},    {"abc", "ABC", false}, {"abc", "abcd", false},
      {"ab*", "abc", true},    {"ab*", "ab", true},   {"ab*", "xab", false},
      {"*bc", "abc", true},    {"*bc", "bcx", false}, {"*b*", "ab*", true},   // suffix "b*"
      {"*b*", "abc", false},   {"a*b", "a*b", true},  {"a*b", "axb", false},  // literal
      {"", "", true},          {"", "x", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StringPattern(c.pattern).Matches(c.value), c.matches)
        << "pattern \"" << c.pattern << "\" value \"" << c.value << "\"";
  }
}

TEST(AuthzPolicyTest, DenyFirstThenAllowElseDeny) {
  const AuthzPolicy policy = MustParse(R"({
    "name": "p",
    "deny_rules": [{"name": "no-pay-for-guests",
                    "source": {"principals": ["spiffe://x/guest"]},
                    "request": {"paths": ["/orderhold.v1.OrderHold/Pay"]}}],
    "allow_rules": [{"name": "everyone-tls", "source": {"principals": ["*"]}},
                    {"name": "health-for-all", "request": {"paths": ["/grpc.health.v1.Health/*"]}}]
  })");
  struct Case {
    AuthzRequest request;
    bool allowed;
    const char* rule;
  };
  const Case cases[] = {
      {Peer("/orderhold.v1.OrderHold/Pay", {"spiffe://x/guest"}), false, "no-pay-for-guests"},
      {Peer("/orderhold.v1.OrderHold/GetHold", {"spiffe://x/guest"}), true, "everyone-tls"},
      {Peer("/orderhold.v1.OrderHold/Pay", {"spiffe://x/shop"}), true, "everyone-tls"},
      // A plaintext peer never matches a principal, not even "*"; a rule without one it may.
      {Peer("/orderhold.v1.OrderHold/Pay", {}, {}, "", false), false, ""},
      {Peer("/grpc.health.v1.Health/Check", {}, {}, "", false), true, "health-for-all"},
      // TLS without a client certificate: subject "", which "*" does not match.
      {Peer("/orderhold.v1.OrderHold/Pay", {}, {}, ""), false, ""},
  };
  for (const Case& c : cases) {
    const AuthzPolicy::Decision decision = policy.Evaluate(c.request);
    EXPECT_EQ(decision.allowed, c.allowed) << c.request.path << " " << c.request.authenticated;
    EXPECT_EQ(decision.rule, c.rule) << c.request.path;
  }
}

TEST(AuthzPolicyTest, PrincipalsMatchUriSansThenDnsSansThenSubject) {
  const AuthzPolicy policy = MustParse(R"({"name": "p", "allow_rules": [
    {"name": "uri", "source": {"principals": ["spiffe://example/payments"]}},
    {"name": "dns", "source": {"principals": ["*.payments.internal"]}},
    {"name": "subject", "source": {"principals": ["CN=ops,O=Example"]}}]})");
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"spiffe://example/payments"})).rule, "uri");
  // A URI SAN that does not match does not stop the DNS SAN or the subject.
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"spiffe://example/other"}, {"a.payments.internal"})).rule,
            "dns");
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"spiffe://example/other"}, {}, "CN=ops,O=Example")).rule,
            "subject");
  EXPECT_FALSE(policy.Evaluate(Peer("/p", {"spiffe://example/other"}, {}, "CN=ops")).allowed);
  // Any of several SANs.
  EXPECT_TRUE(policy.Evaluate(Peer("/p", {"urn:a", "spiffe://example/payments"})).allowed);
}

// The decision names the identity the allowing rule matched, typed, so that the owner of what the
// call creates is what the policy admitted: a DNS SAN that spells a SPIFFE ID is "dns:", never the
// URI SAN it imitates; a rule without principals names none (the caller's first name applies).
TEST(AuthzPolicyTest, TheDecisionNamesTheTypedIdentityTheRuleMatched) {
  const AuthzPolicy policy = MustParse(R"({"name": "p", "allow_rules": [
    {"name": "consumer", "source": {"principals": ["spiffe://example/consumer"]}},
    {"name": "ops", "source": {"principals": ["CN=ops*"]}},
    {"name": "anyone", "request": {"paths": ["/open"]}}]})");
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"spiffe://example/consumer"}), true).identity,
            "uri:spiffe://example/consumer");
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"urn:x"}, {"spiffe://example/consumer"}), true).identity,
            "dns:spiffe://example/consumer");
  EXPECT_EQ(
      policy.Evaluate(Peer("/p", {"urn:x"}, {"a.example"}, "CN=ops,O=Example"), true).identity,
      "subject:CN=ops,O=Example");
  const AuthzPolicy::Decision open = policy.Evaluate(Peer("/open", {"urn:x"}), true);
  EXPECT_TRUE(open.allowed);
  EXPECT_EQ(open.identity, "");
  EXPECT_EQ(TypedIdentity(IdentityKind::kUri, "spiffe://a"), "uri:spiffe://a");
  // Not asked for: not formatted.
  EXPECT_EQ(policy.Evaluate(Peer("/p", {"spiffe://example/consumer"})).identity, "");
}

TEST(AuthzPolicyTest, PathsOrHeadersAndAcrossFields) {
  const AuthzPolicy policy = MustParse(R"({"name": "p", "allow_rules": [
    {"name": "r",
     "source": {"principals": ["spiffe://x/a"]},
     "request": {"paths": ["/s/A", "/s/B"],
                 "headers": [{"key": "x-tenant", "values": ["t1", "t2*"]},
                             {"key": "x-env", "values": ["prod"]}]}}]})");
  auto with = [](AuthzRequest request, std::vector<std::pair<std::string, std::string>> headers) {
    request.headers = std::move(headers);
    return request;
  };
  const std::vector<std::pair<std::string, std::string>> good = {{"x-tenant", "t1"},
                                                                 {"x-env", "prod"}};
  EXPECT_TRUE(policy.matches_headers());  // so the Authorizer copies a call's metadata
  EXPECT_TRUE(policy.Evaluate(with(Peer("/s/A", {"spiffe://x/a"}), good)).allowed);
  EXPECT_TRUE(policy.Evaluate(with(Peer("/s/B", {"spiffe://x/a"}), good)).allowed);
  EXPECT_FALSE(policy.Evaluate(with(Peer("/s/C", {"spiffe://x/a"}), good)).allowed);  // path
  EXPECT_FALSE(policy.Evaluate(with(Peer("/s/A", {"spiffe://x/b"}), good)).allowed);  // principal
  EXPECT_FALSE(policy.Evaluate(with(Peer("/s/A", {"spiffe://x/a"}), {{"x-tenant", "t1"}}))
                   .allowed);  // every header entry must match
  EXPECT_TRUE(policy
                  .Evaluate(with(Peer("/s/A", {"spiffe://x/a"}),
                                 {{"x-tenant", "t2-eu"}, {"x-env", "prod"}}))
                  .allowed);
  // Repeated values are matched joined by ",": "t1,t9" is neither "t1" nor "t2*".
  EXPECT_FALSE(policy
                   .Evaluate(with(Peer("/s/A", {"spiffe://x/a"}),
                                  {{"x-tenant", "t1"}, {"x-tenant", "t9"}, {"x-env", "prod"}}))
                   .allowed);
  EXPECT_TRUE(policy
                  .Evaluate(with(Peer("/s/A", {"spiffe://x/a"}),
                                 {{"x-tenant", "t2"}, {"x-tenant", "t9"}, {"x-env", "prod"}}))
                  .allowed);  // "t2,t9" has the prefix t2
}

TEST(AuthzPolicyTest, EmptyListsMatchAnything) {
  const AuthzPolicy open = MustParse(
      R"({"name": "p", "allow_rules": [{"name": "all", "source": {"principals": []},
                                         "request": {"paths": [], "headers": []}}]})");
  EXPECT_TRUE(open.Evaluate(Peer("/x", {}, {}, "", false)).allowed);
  EXPECT_FALSE(open.matches_headers());  // headers: [] matches any: nothing to copy
}

// gRPC's own translator tests (test/core/security/rbac_translator_test.cc, GenerateRbacPolicies
// cases about parsing; the audit_logging_options ones are left out: that field is not supported
// here and is refused as unknown), ported: the same policy text, and the same verdict. `grpc` is
// gRPC's message verbatim (empty: gRPC accepts the policy); `ours` is what Parse's message must
// contain: the place, then gRPC's words.
struct TranslatorCase {
  const char* test;  // gRPC's test name
  const char* json;
  const char* grpc;
  const char* ours;
};
const TranslatorCase kTranslatorCases[] = {
    {"InvalidPolicy", R"({"name": "authz-policy",,})", "Failed to parse", "not JSON at byte"},
    {"MissingAuthorizationPolicyName", "{}", R"("name" field is not present.)",
     "name: field is not present."},
    {"IncorrectAuthorizationPolicyNameType", R"({"name": ["authz_policy"]})",
     R"("name" is not a string.)", "name: is not a string (a list)."},
    {"MissingAllowRules", R"({"name": "authz_policy"})", R"("allow_rules" is not present.)",
     "allow_rules: is not present."},
    {"MissingDenyRules", R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}]})", "", ""},
    {"IncorrectAllowRulesType", R"({"name": "authz", "allow_rules": {}})",
     R"("allow_rules" is not an array.)", "allow_rules: is not an array (an object)."},
    {"IncorrectDenyRulesType", R"({"name": "authz", "deny_rules": 123})",
     R"("deny_rules" is not an array.)", "deny_rules: is not an array (a number)."},
    {"IncorrectRuleType", R"({"name": "authz", "allow_rules": ["rule-a"]})",
     "allow_rules 0: is not an object.", "allow_rules[0]: is not an object (a string)."},
    {"EmptyRuleArray", R"({"name": "authz", "allow_rules": []})", "allow_rules is empty.",
     "allow_rules: is empty."},
    {"MissingRuleNameField", R"({"name": "authz", "allow_rules": [{}]})",
     R"(allow_rules 0: "name" is not present.)", "allow_rules[0].name: is not present."},
    {"IncorrectRuleNameType", R"({"name": "authz", "allow_rules": [{"name": 123}]})",
     R"(allow_rules 0: "name" is not a string.)", "allow_rules[0].name: is not a string"},
    {"MissingSourceAndRequest", R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}]})",
     "", ""},
    {"EmptySourceAndRequest",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "source": {},
         "request": {}}]})",
     "", ""},
    {"IncorrectSourceType",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "source": 111}]})",
     R"(allow_rules 0: "source" is not an object.)", "allow_rules[0].source: is not an object"},
    {"IncorrectPrincipalsType",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "source": {"principals": ["*", 123]}}]})",
     R"(allow_rules 0: "principals" 1: is not a string.)",
     "allow_rules[0].source.principals[1]: is not a string (a number)."},
    {"ParseSourceSuccess",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "source": {"principals": [
         "spiffe://foo.abc", "spiffe://bar*", "*baz", "spiffe://abc.*.com"]}}],
         "deny_rules": [{"name": "deny_policy", "source": {"principals": ["*"]}}]})",
     "", ""},
    {"IncorrectRequestType",
     R"({"name": "authz", "deny_rules": [{"name": "deny_policy", "request": 111}]})",
     R"(deny_rules 0: "request" is not an object.)", "deny_rules[0].request: is not an object"},
    {"IncorrectPathType",
     R"({"name": "authz", "deny_rules": [{"name": "allow_policy",
         "request": {"paths": ["path-a", 123]}}]})",
     R"(deny_rules 0: "paths" 1: is not a string.)",
     "deny_rules[0].request.paths[1]: is not a string"},
    {"ParseRequestPathsSuccess",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "request": {"paths": ["*"]}}],
         "deny_rules": [{"name": "deny_policy", "request": {"paths": ["path-foo", "path-bar*",
         "*baz"]}}]})",
     "", ""},
    {"IncorrectHeaderType",
     R"({"name": "authz", "deny_rules": [{"name": "allow_policy",
         "request": {"headers": ["header-a"]}}]})",
     R"(deny_rules 0: "headers" 0: is not an object.)",
     "deny_rules[0].request.headers[0]: is not an object (a string)."},
    {"MissingHeaderKey",
     R"({"name": "authz", "allow_rules": [{"name": "policy", "request": {"headers": [{}]}}]})",
     R"(allow_rules 0: "headers" 0: "key" is not present.)",
     "allow_rules[0].request.headers[0].key: is not present."},
    {"MissingHeaderValues",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "key-abc"}]}}]})",
     R"(allow_rules 0: "headers" 0: "values" is not present.)",
     "allow_rules[0].request.headers[0].values: is not present."},
    {"IncorrectHeaderKeyType",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": 123, "values": ["value-a"]}]}}]})",
     R"(allow_rules 0: "headers" 0: "key" is not a string.)",
     "allow_rules[0].request.headers[0].key: is not a string"},
    {"IncorrectHeaderValuesType",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "key-abc", "values": {}}]}}]})",
     R"(allow_rules 0: "headers" 0: "values" is not an array.)",
     "allow_rules[0].request.headers[0].values: is not an array"},
    {"UnsupportedGrpcHeaders",
     R"({"name": "authz", "deny_rules": [{"name": "policy",
         "request": {"headers": [{"key": "grpc-xxx", "values": ["*"]}]}}]})",
     R"(deny_rules 0: "headers" 0: Unsupported "key" grpc-xxx.)",
     R"(deny_rules[0].request.headers[0].key: Unsupported "key" grpc-xxx.)"},
    {"UnsupportedPseudoHeaders",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": ":method", "values": ["*"]}]}}]})",
     R"(allow_rules 0: "headers" 0: Unsupported "key" :method.)", R"(Unsupported "key" :method.)"},
    {"UnsupportedHostHeader",
     R"({"name": "authz", "allow_rules": [{"name": "policy",
         "request": {"headers": [{"key": "Host", "values": ["*"]}]}}]})",
     R"(allow_rules 0: "headers" 0: Unsupported "key" Host.)", R"(Unsupported "key" Host.)"},
    {"EmptyHeaderValuesList",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy_1",
         "request": {"headers": [{"key": "key-a", "values": []}]}}]})",
     R"(allow_rules 0: "headers" 0: "values" list is empty.)",
     "allow_rules[0].request.headers[0].values: list is empty."},
    {"ParseRequestHeadersSuccess",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "request": {"headers": [
         {"key": "key-1", "values": ["*"]},
         {"key": "key-2", "values": ["foo", "bar*", "*baz"]}]}}]})",
     "", ""},
    {"ParseRulesArraySuccess",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy_1",
         "source": {"principals": ["spiffe://foo.abc"]}, "request": {"paths": ["foo"]}},
         {"name": "allow_policy_2"}]})",
     "", ""},
    {"UnknownFieldInTopLayer",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy"}], "foo": "123"})",
     R"(policy contains unknown field "foo".)", R"(foo: policy contains unknown field "foo".)"},
    {"UnknownFieldInRule",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "foo": {}}]})",
     R"(allow_rules 0: policy contains unknown field "foo" in "rule".)",
     R"(allow_rules[0].foo: policy contains unknown field "foo" in "rule".)"},
    {"UnknownFieldInSource",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "source": {"principals": ["spiffe://foo.abc"], "foo": {}}}]})",
     R"(allow_rules 0: policy contains unknown field "foo" in "source".)",
     R"(allow_rules[0].source.foo: policy contains unknown field "foo" in "source".)"},
    {"UnknownFieldInRequest",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy", "request": {"foo": {}}}]})",
     R"(allow_rules 0: policy contains unknown field "foo" in "request".)",
     R"(allow_rules[0].request.foo: policy contains unknown field "foo" in "request".)"},
    {"UnknownFieldInHeaders",
     R"({"name": "authz", "allow_rules": [{"name": "allow_policy",
         "request": {"headers": [{"foo": {}}]}}]})",
     R"(allow_rules 0: "headers" 0: policy contains unknown field "foo".)",
     R"(allow_rules[0].request.headers[0].foo: policy contains unknown field "foo".)"},
};

TEST(AuthzPolicyTest, RefusesWhatGrpcsTranslatorRefusesAndAcceptsWhatItAccepts) {
  for (const TranslatorCase& c : kTranslatorCases) {
    SCOPED_TRACE(c.test);
    if (*c.grpc == '\0') {
      EXPECT_THAT(AuthzPolicy::Parse(c.json).status(), testing::IsOk());
    } else {
      EXPECT_THAT(AuthzPolicy::Parse(c.json), StatusIs(kInvalid, HasSubstr(c.ours)))
          << "gRPC says: " << c.grpc;
    }
  }
}

TEST(AuthzPolicyTest, NullIsRefusedWhereverItStandsNeverReadAsAbsent) {
  // Each of these widened a rule to every peer or every path when protobuf's JSON parser dropped
  // the null (gRPC's translator refuses all four; Helm's toJson and jq write null for an unset
  // value).
  struct Case {
    const char* json;
    const char* place;
  };
  const Case cases[] = {
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": [null]},
          "request": {"paths": ["/x"]}}]})",
       "allow_rules[0].source.principals[0]: null is not allowed"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": null,
          "request": {"paths": ["/x"]}}]})",
       "allow_rules[0].source: null is not allowed"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": ["x"]},
          "request": {"paths": [null]}}]})",
       "allow_rules[0].request.paths[0]: null is not allowed"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": ["x"]},
          "request": null}]})",
       "allow_rules[0].request: null is not allowed"},
      {R"({"name": null, "allow_rules": [{"name": "a"}]})", "name: null is not allowed"},
      {R"({"name": "p", "deny_rules": null, "allow_rules": [{"name": "a"}]})",
       "deny_rules: null is not allowed"},
      {R"({"name": "p", "allow_rules": [null]})", "allow_rules[0]: null is not allowed"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "x-a",
          "values": ["v", null]}]}}]})",
       "allow_rules[0].request.headers[0].values[1]: null is not allowed"},
      {"null", "null is not allowed"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(AuthzPolicy::Parse(c.json), StatusIs(kInvalid, HasSubstr(c.place))) << c.json;
  }
}

TEST(AuthzPolicyTest, OtherShapesItDoesNotKnowAreRefused) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      // A nested list is not flattened.
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": [["x"]]}}]})",
       "allow_rules[0].source.principals[0]: is not a string (a list)."},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"paths": [[]]}}]})",
       "allow_rules[0].request.paths[0]: is not a string (a list)."},
      {R"({"name": "p", "allow_rules": [[{"name": "a"}]]})",
       "allow_rules[0]: is not an object (a list)."},
      // A single value where a list belongs (protobuf took "x" as ["x"]).
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": "x"}}]})",
       "allow_rules[0].source.principals: is not an array (a string)."},
      // Duplicate keys, at every level, are not merged.
      {R"({"name": "p", "name": "q", "allow_rules": [{"name": "a"}]})", "name: duplicate key"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": ["x"]},
          "source": {"principals": []}}]})",
       "allow_rules[0].source: duplicate key"},
      {R"({"name": "p", "allow_rules": [{"name": "a"}], "allow_rules": [{"name": "b"}]})",
       "allow_rules: duplicate key"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "x-a",
          "values": ["v"], "key": "x-b"}]}}]})",
       "allow_rules[0].request.headers[0].key: duplicate key"},
      // Empty rule lists, as current gRPC refuses them.
      {R"({"name": "p", "deny_rules": [], "allow_rules": [{"name": "a"}]})",
       "deny_rules: is empty."},
      // Wrong scalar types.
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": [true]}}]})",
       "principals[0]: is not a string (a boolean)."},
      {R"({"name": 7, "allow_rules": [{"name": "a"}]})", "name: is not a string (a number)."},
      {R"(["name", "p"])", "the policy: is not an object (a list)."},
      // Names and header keys.
      {R"({"name": "p", "allow_rules": [{"source": {}}]})", "allow_rules[0].name: is not present."},
      {R"({"name": "p", "allow_rules": [{"name": ""}]})", "allow_rules[0].name: is not present."},
      {R"({"name": "p", "allow_rule": [{"name": "a"}]})", "unknown field \"allow_rule\""},
      {R"({"name": "p", "allow_rules": [{"name": "a"}, {"name": "a"}]})",
       "allow_rules[1].name: \"a\" names an earlier rule"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "TE",
          "values": ["x"]}]}}]})",
       "Unsupported \"key\" TE."},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "",
          "values": ["x"]}]}}]})",
       "headers[0].key: is not present."},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "X-User",
          "values": ["x"]}]}}]})",
       "key: must be lower case"},
      // Text that is not one JSON value.
      {"not json", "not JSON at byte"},
      {R"({"name": "p", "allow_rules": [{"name": "a"}]} {})", "not JSON at byte"},
      {R"({"name": "p", "allow_rules": [{"name": "a"}]} // a comment)", "not JSON at byte"},
      {"{\"name\": \"p\xff\", \"allow_rules\": [{\"name\": \"a\"}]}", "not JSON at byte"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(AuthzPolicy::Parse(c.json), StatusIs(kInvalid, HasSubstr(c.error))) << c.json;
  }
  EXPECT_THAT(AuthzPolicy::Parse(std::string(AuthzPolicy::kMaxFileBytes + 1, ' ')),
              StatusIs(kInvalid, HasSubstr("bytes")));
}

TEST(AuthzPolicyTest, NestingIsBoundedAndDeepTextIsRefusedInLinearTime) {
  // A43's deepest value (a header's value) is at depth 7: well within the bound.
  MustParse(R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [
      {"key": "x-a", "values": ["v"]}]}}]})");
  // One level past the bound, inside a field that would otherwise be refused for its type.
  std::string deep = R"({"name": "p", "allow_rules": [{"name": "a", "source": )";
  for (int i = 0; i < AuthzPolicy::kMaxDepth; ++i) deep += "[";
  EXPECT_THAT(AuthzPolicy::Parse(deep),
              StatusIs(kInvalid, HasSubstr("nested deeper than 16 levels")));
  // A megabyte of brackets: refused at the bound, not walked (a quadratic walk of 500,000 levels
  // would take minutes; a stack overflow would crash).
  EXPECT_THAT(AuthzPolicy::Parse(std::string(AuthzPolicy::kMaxFileBytes / 2, '[')),
              StatusIs(kInvalid, HasSubstr("nested deeper than")));
}

TEST(AuthzPolicyTest, TheExamplePolicyParsesAndHasNoEmptyLists) {
  std::ifstream in(ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json");
  std::stringstream text;
  text << in.rdbuf();
  const AuthzPolicy policy = MustParse(text.str());
  EXPECT_TRUE(policy.deny_rules().empty());
  ASSERT_FALSE(policy.allow_rules().empty());
  for (const AuthzPolicy::Rule& rule : policy.allow_rules()) {
    EXPECT_FALSE(rule.principals.empty()) << rule.name;  // every role names its callers
    EXPECT_FALSE(rule.paths.empty()) << rule.name;
  }
}

}  // namespace
}  // namespace orderhold::grpc_api
