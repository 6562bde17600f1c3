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
// The parser fails closed, as gRPC's translator does and beyond it where 1.51's silently widens a
// rule: the JSON is read by ParseStrictJson (server/common/strict_json.h: `null` anywhere, a
// repeated key and nesting deeper than kMaxDepth are refused) and every field is checked for its
// type, so a `null`, a number or a nested list where a pattern belongs is an error, never an
// absent or empty list (which would match every peer or every path). Refused as gRPC's current
// translator refuses them, with its words after the place ("allow_rules[0].source.principals[0]:
// is not a string (a list)."): unknown fields, a rule or header that is not an object, a name,
// key or pattern that is not a string, absent name or allow_rules, an empty deny_rules or
// allow_rules list (leave deny_rules out instead), a header without values, pseudo, grpc- and
// transport header keys. Refused here beyond gRPC: a header key with an upper-case letter (it
// never matches), two rules of one name in a list (gRPC keeps the last).
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

// A peer identity with its kind, so that one spelling never means two identities (a DNS SAN that
// spells a SPIFFE ID is not that URI SAN): "uri:<URI SAN>", "dns:<DNS SAN>" or
// "subject:<subject>". Group owners and per-caller bounds are keyed by it.
enum class IdentityKind { kUri, kDns, kSubject };
std::string TypedIdentity(IdentityKind kind, absl::string_view value);

// Every identity of `request`'s peer, typed: its URI SANs, its DNS SANs, then its subject (none
// for a peer that is not authenticated or has no certificate). What --tenants and a limit class's
// principals (PlaceHoldRequest.limit_class) are matched against, exactly.
std::vector<std::string> PeerIdentities(const AuthzRequest& request);

// One of A43's string patterns, compiled.
class StringPattern {
 public:
  // "*": any non-empty value; "*x": suffix x; "x*": prefix x; else exact (gRPC's order).
  explicit StringPattern(absl::string_view pattern);
  bool Matches(absl::string_view value) const;
  // What a pattern without its "*": "" for "*".
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kAny, kExact, kPrefix, kSuffix };
  Kind kind_;
  std::string text_;
};

class AuthzPolicy {
 public:
  // Bounds of a policy file: larger ones are refused INVALID_ARGUMENT (they are typos or attacks;
  // a policy of four roles is ~1 KB, and A43's deepest value, a header's value, is at depth 7).
  static constexpr size_t kMaxFileBytes = 1 << 20;
  static constexpr int kMaxRules = 1000;
  static constexpr int kMaxDepth = 16;  // objects and lists nested, the top object is 1

  // Parses a policy. INVALID_ARGUMENT naming the place ("allow_rules[1].request.headers[0].key:
  // ...") for everything listed above: text that is not one JSON value, a `null`, a repeated key,
  // nesting deeper than kMaxDepth, an unknown field or a wrong type anywhere; name or allow_rules
  // absent; deny_rules or allow_rules empty; a rule without a name, or with the name of an earlier
  // rule of its list; a header with an empty, upper-case, pseudo (":..."), "grpc-..." or transport
  // ("host", "te", ...) key, or without values; more than kMaxRules rules; text over
  // kMaxFileBytes.
  static absl::StatusOr<AuthzPolicy> Parse(absl::string_view json);

  struct Header {
    std::string key;
    std::vector<StringPattern> values;  // at least one
  };
  struct Rule {
    std::string name;
    std::vector<StringPattern> principals;  // empty: any peer (the JSON left it out or said [])
    std::vector<StringPattern> paths;       // empty: any path (likewise)
    std::vector<Header> headers;            // all must match
    // Whether the rule matches `request`. With principals, `identity` (when not null) is set to
    // the peer identity that matched, typed as TypedIdentity spells it: the first of gRPC's order
    // (for each pattern: the URI SANs, the DNS SANs, the subject); left alone without them.
    bool Matches(const AuthzRequest& request, std::string* identity = nullptr) const;
  };

  // What Evaluate decided: allowed or not, the rule that decided (empty when no rule matched:
  // denied by default) and the peer identity its principals matched ("uri:...", "dns:...",
  // "subject:...": TypedIdentity; empty when that rule names no principals, and unless asked for
  // with `with_identity`: most calls never need it, and it is formatted only then).
  struct Decision {
    bool allowed = false;
    std::string rule;
    std::string identity;
  };
  Decision Evaluate(const AuthzRequest& request, bool with_identity = false) const;

  const std::string& name() const { return name_; }
  // Whether any rule matches on headers (else Evaluate never reads AuthzRequest::headers).
  bool matches_headers() const { return matches_headers_; }
  int rule_count() const { return static_cast<int>(deny_.size() + allow_.size()); }
  // The rules as parsed, in the file's order (tests and the policy fuzzer read them).
  const std::vector<Rule>& deny_rules() const { return deny_; }
  const std::vector<Rule>& allow_rules() const { return allow_; }

 private:
  std::string name_;
  bool matches_headers_ = false;
  std::vector<Rule> deny_;
  std::vector<Rule> allow_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_AUTHZ_POLICY_H_
