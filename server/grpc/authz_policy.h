// AuthzPolicy: gRPC's authorization policy (gRFC A43, "gRPC Authorization Policy":
// https://github.com/grpc/proposal/blob/master/A43-grpc-authorization-api.md), parsed from its
// JSON and evaluated for one call. The format and the matching rules are gRPC's, so a policy means
// here what it means to any gRPC server; only the engine is ours, because Debian's gRPC 1.51 ships
// the header of FileWatcherAuthorizationPolicyProvider but not its library. The semantics follow
// gRPC's translator and matchers (src/core/lib/security/authorization/rbac_translator.cc,
// matchers.cc, evaluate_args.cc):
//   - deny_rules first: a call matching one is denied; then allowed when it matches an allow rule;
//     nothing matched: denied.
//   - A rule matches when its source and its request match; within a list any entry matches (OR);
//     across headers every entry must match (AND).
//   - A string pattern is "*" (any non-empty value), "*x" (suffix), "x*" (prefix) or "x" (exact);
//     matching is case-sensitive.
//   - A principal pattern needs a TLS peer and is matched against each URI SAN, then each DNS SAN,
//     then the subject ("" without a client certificate); an empty principals list matches every
//     peer, plaintext included.
//   - A header is matched against its values joined by "," in arrival order; an absent header
//     never matches.
// Where gRPC 1.51 silently accepts what cannot be meant, Parse refuses it naming the field: an
// unknown field (a typo that would widen or drop a rule; later gRPC releases refuse it too), a
// header key with an upper-case letter (it never matches), two rules of one name in a list
// (gRPC keeps the last). The schema is server/grpc/authz_policy.proto.
//
// Thread-safety: an AuthzPolicy is immutable once parsed; Evaluate may run on any thread.
#ifndef ORDERHOLD_SERVER_GRPC_AUTHZ_POLICY_H_
#define ORDERHOLD_SERVER_GRPC_AUTHZ_POLICY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::grpc_api {

// What a policy can match of one call (read from grpc::ServerContext by Authorizer).
struct AuthzRequest {
  std::string path;  // the full method: "/orderhold.v1.OrderHold/Pay"
  // A TLS peer (transport_security_type "ssl" or "tls"). Principal patterns match only then; with
  // --tls_client_ca_file, gRPC has verified its certificate before any call.
  bool authenticated = false;
  std::vector<std::string> uri_sans;  // the certificate's URI SANs (a SPIFFE ID is one)
  std::vector<std::string> dns_sans;  // its DNS SANs
  std::string subject;                // its subject, RFC 2253 ("CN=payments,O=Example")
  // The call's metadata, keys lower case, in arrival order; a key may repeat.
  std::vector<std::pair<std::string, std::string>> headers;
};

// One of A43's string patterns, compiled.
class StringPattern {
 public:
  // "*": any non-empty value; "*x": suffix x; "x*": prefix x; else exact (gRPC's order).
  explicit StringPattern(absl::string_view pattern);
  bool Matches(absl::string_view value) const;

 private:
  enum class Kind { kAny, kExact, kPrefix, kSuffix };
  Kind kind_;
  std::string text_;
};

class AuthzPolicy {
 public:
  // Bounds of a policy file: larger ones are refused INVALID_ARGUMENT (they are typos or attacks;
  // a policy of four roles is ~1 KB).
  static constexpr size_t kMaxFileBytes = 1 << 20;
  static constexpr int kMaxRules = 1000;

  // Parses a policy. INVALID_ARGUMENT naming the field ("allow_rules[1].request.headers[0].key:
  // ...") when the JSON does not parse, has an unknown field or a wrong type, or breaks A43's
  // rules: name or allow_rules absent (allow_rules [] is valid: every call is denied); a rule
  // without a name, or with the name of an earlier rule of its list; a header with an empty,
  // upper-case, pseudo (":..."), "grpc-..." or transport ("host", "te", ...) key or without
  // values; more than kMaxRules rules; text over kMaxFileBytes.
  static absl::StatusOr<AuthzPolicy> Parse(absl::string_view json);

  // What Evaluate decided: allowed or not, and the rule that decided (empty when no rule matched:
  // denied by default).
  struct Decision {
    bool allowed = false;
    std::string rule;
  };
  Decision Evaluate(const AuthzRequest& request) const;

  const std::string& name() const { return name_; }
  // Whether any rule matches on headers (else Evaluate never reads AuthzRequest::headers).
  bool matches_headers() const { return matches_headers_; }
  int rule_count() const { return static_cast<int>(deny_.size() + allow_.size()); }

 private:
  struct Header {
    std::string key;
    std::vector<StringPattern> values;
  };
  struct Rule {
    std::string name;
    std::vector<StringPattern> principals;  // empty: any peer
    std::vector<StringPattern> paths;       // empty: any path
    std::vector<Header> headers;            // all must match
    bool Matches(const AuthzRequest& request) const;
  };

  std::string name_;
  bool matches_headers_ = false;
  std::vector<Rule> deny_;
  std::vector<Rule> allow_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_AUTHZ_POLICY_H_
