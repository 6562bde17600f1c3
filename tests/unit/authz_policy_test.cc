// AuthzPolicy against gRFC A43 and gRPC 1.51's translator and matchers (rbac_translator.cc,
// matchers.cc): the table of what a rule matches, and what Parse refuses.
#include "server/grpc/authz_policy.h"

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

TEST(AuthzPolicyTest, EmptyListsMatchAnythingAndEmptyAllowRulesDenyAll) {
  const AuthzPolicy open = MustParse(
      R"({"name": "p", "allow_rules": [{"name": "all", "source": {"principals": []},
                                         "request": {"paths": [], "headers": []}}]})");
  EXPECT_TRUE(open.Evaluate(Peer("/x", {}, {}, "", false)).allowed);
  EXPECT_FALSE(open.matches_headers());  // headers: [] matches any: nothing to copy
  const AuthzPolicy closed = MustParse(R"({"name": "p", "allow_rules": []})");
  EXPECT_FALSE(closed.Evaluate(Peer("/x", {"spiffe://x/a"})).allowed);
}

TEST(AuthzPolicyTest, ParseRefusesNamingTheField) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"({"allow_rules": []})", "name: required"},
      {R"({"name": "p"})", "allow_rules: required"},
      {R"({"name": "p", "allow_rules": [{"source": {}}]})", "allow_rules[0].name: required"},
      {R"({"name": "p", "allow_rule": []})", "allow_rule"},  // unknown field
      {R"({"name": "p", "allow_rules": [{"name": "a", "sorce": {}}]})", "sorce"},
      {R"({"name": "p", "allow_rules": [{"name": "a"}, {"name": "a"}]})",
       "allow_rules[1].name: \"a\" names an earlier rule"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": ":path",
          "values": ["x"]}]}}]})",
       "allow_rules[0].request.headers[0].key: unsupported key \":path\""},
      {R"({"name": "p", "deny_rules": [{"name": "a", "request": {"headers": [{"key": "grpc-x",
          "values": ["x"]}]}}], "allow_rules": []})",
       "deny_rules[0].request.headers[0].key: unsupported key \"grpc-x\""},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "Host",
          "values": ["x"]}]}}]})",
       "unsupported key \"Host\""},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "TE",
          "values": ["x"]}]}}]})",
       "unsupported key \"TE\""},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "X-User",
          "values": ["x"]}]}}]})",
       "key: must be lower case"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "x-user",
          "values": []}]}}]})",
       "headers[0].values: required"},
      {R"({"name": "p", "allow_rules": [{"name": "a", "source": {"principals": "x"}}]})",
       "principals"},
      {"not json", ""},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(AuthzPolicy::Parse(c.json), StatusIs(kInvalid, HasSubstr(c.error))) << c.json;
  }
  EXPECT_THAT(AuthzPolicy::Parse(std::string(AuthzPolicy::kMaxFileBytes + 1, ' ')),
              StatusIs(kInvalid, HasSubstr("bytes")));
}

}  // namespace
}  // namespace orderhold::grpc_api
