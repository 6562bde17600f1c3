#include "server/grpc/authz_policy.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/common/strict_json.h"

namespace orderhold::grpc_api {
namespace {

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// gRPC 1.51's translator refuses rules on these headers (rbac_translator.cc): pseudo-headers and
// grpc- ones (case-sensitive prefixes) and the hop-by-hop and host headers (any case), which are
// the transport's, not what a caller says. A key with an upper-case letter passes there and can
// never match (HTTP/2 keys are lower case); here it is refused, as a rule that cannot match.
absl::Status ValidateHeaderKey(absl::string_view path, absl::string_view key) {
  static constexpr absl::string_view kUnsupported[] = {"host",
                                                       "connection",
                                                       "keep-alive",
                                                       "proxy-authenticate",
                                                       "proxy-authorization",
                                                       "te",
                                                       "trailer",
                                                       "transfer-encoding",
                                                       "upgrade"};
  // gRPC's words: "\"key\" is not present." for "", "Unsupported \"key\" <key>." for the rest.
  if (key.empty()) return Invalid(path, "is not present.");
  if (absl::StartsWith(key, ":") || absl::StartsWith(key, "grpc-")) {
    return Invalid(path, absl::StrCat("Unsupported \"key\" ", key,
                                      ". (pseudo-headers and grpc- ones are the transport's)"));
  }
  for (absl::string_view unsupported : kUnsupported) {
    if (absl::EqualsIgnoreCase(key, unsupported)) {
      return Invalid(path, absl::StrCat("Unsupported \"key\" ", key, ". (a transport header)"));
    }
  }
  if (key != absl::AsciiStrToLower(key)) {
    return Invalid(path, "must be lower case (metadata keys are; it could never match)");
  }
  return absl::OkStatus();
}

using nlohmann::json;

// Schema checks on the strict document, each naming the place and saying what gRPC's translator
// says of the same mistake (rbac_translator.cc: "is not a string.", "is not an object.", ...).

// `value` is an object whose keys are all in `known`; else what gRPC says of an unknown field
// (`where` is its "in \"rule\"" part, empty at the top).
absl::Status CheckObject(const json& value, const std::string& path,
                         std::initializer_list<absl::string_view> known,
                         absl::string_view where = "") {
  if (!value.is_object()) {
    return Invalid(path.empty() ? "the policy" : path,
                   absl::StrCat("is not an object (", JsonTypeName(value), ")."));
  }
  for (const auto& [key, unused] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Invalid(JsonPath(path, key),
                     absl::StrCat("policy contains unknown field \"", key, "\"", where, "."));
    }
  }
  return absl::OkStatus();
}

// The field `key` of `object`, or nullptr when absent.
const json* Field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

absl::StatusOr<std::string> StringAt(const json& value, const std::string& path) {
  if (!value.is_string()) {
    return Invalid(path, absl::StrCat("is not a string (", JsonTypeName(value), ")."));
  }
  return value.get<std::string>();
}

// A list of string patterns (principals, paths, header values). A list inside it is refused,
// never flattened.
absl::StatusOr<std::vector<StringPattern>> PatternList(const json& value, const std::string& path) {
  if (!value.is_array()) {
    return Invalid(path, absl::StrCat("is not an array (", JsonTypeName(value), ")."));
  }
  std::vector<StringPattern> patterns;
  patterns.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::string text, StringAt(value[i], JsonPath(path, i)));
    patterns.emplace_back(text);
  }
  return patterns;
}

absl::StatusOr<AuthzPolicy::Header> ParseHeader(const json& value, const std::string& path) {
  ORDERHOLD_RETURN_IF_ERROR(CheckObject(value, path, {"key", "values"}));
  AuthzPolicy::Header header;
  const json* key = Field(value, "key");
  if (key == nullptr) return Invalid(JsonPath(path, "key"), "is not present.");
  ORDERHOLD_ASSIGN_OR_RETURN(header.key, StringAt(*key, JsonPath(path, "key")));
  ORDERHOLD_RETURN_IF_ERROR(ValidateHeaderKey(JsonPath(path, "key"), header.key));
  const json* values = Field(value, "values");
  if (values == nullptr) return Invalid(JsonPath(path, "values"), "is not present.");
  ORDERHOLD_ASSIGN_OR_RETURN(header.values, PatternList(*values, JsonPath(path, "values")));
  if (header.values.empty()) return Invalid(JsonPath(path, "values"), "list is empty.");
  return header;
}

absl::StatusOr<AuthzPolicy::Rule> ParseRule(const json& value, const std::string& path) {
  ORDERHOLD_RETURN_IF_ERROR(
      CheckObject(value, path, {"name", "source", "request"}, " in \"rule\""));
  AuthzPolicy::Rule rule;
  if (const json* name = Field(value, "name"); name != nullptr) {
    ORDERHOLD_ASSIGN_OR_RETURN(rule.name, StringAt(*name, JsonPath(path, "name")));
  }
  if (rule.name.empty()) return Invalid(JsonPath(path, "name"), "is not present.");
  if (const json* source = Field(value, "source"); source != nullptr) {
    const std::string at = JsonPath(path, "source");
    ORDERHOLD_RETURN_IF_ERROR(CheckObject(*source, at, {"principals"}, " in \"source\""));
    if (const json* principals = Field(*source, "principals"); principals != nullptr) {
      ORDERHOLD_ASSIGN_OR_RETURN(rule.principals,
                                 PatternList(*principals, JsonPath(at, "principals")));
    }
  }
  if (const json* request = Field(value, "request"); request != nullptr) {
    const std::string at = JsonPath(path, "request");
    ORDERHOLD_RETURN_IF_ERROR(CheckObject(*request, at, {"paths", "headers"}, " in \"request\""));
    if (const json* paths = Field(*request, "paths"); paths != nullptr) {
      ORDERHOLD_ASSIGN_OR_RETURN(rule.paths, PatternList(*paths, JsonPath(at, "paths")));
    }
    if (const json* headers = Field(*request, "headers"); headers != nullptr) {
      const std::string list = JsonPath(at, "headers");
      if (!headers->is_array()) {
        return Invalid(list, absl::StrCat("is not an array (", JsonTypeName(*headers), ")."));
      }
      for (size_t h = 0; h < headers->size(); ++h) {
        ORDERHOLD_ASSIGN_OR_RETURN(AuthzPolicy::Header header,
                                   ParseHeader((*headers)[h], JsonPath(list, h)));
        rule.headers.push_back(std::move(header));
      }
    }
  }
  return rule;
}

bool AnyMatches(const std::vector<StringPattern>& patterns, absl::string_view value) {
  for (const StringPattern& pattern : patterns) {
    if (pattern.Matches(value)) return true;
  }
  return false;
}

}  // namespace

StringPattern::StringPattern(absl::string_view pattern) {
  if (pattern == "*") {
    kind_ = Kind::kAny;
  } else if (absl::StartsWith(pattern, "*")) {  // before the prefix: "*b*" is the suffix "b*"
    kind_ = Kind::kSuffix;
    text_ = std::string(pattern.substr(1));
  } else if (absl::EndsWith(pattern, "*")) {
    kind_ = Kind::kPrefix;
    text_ = std::string(pattern.substr(0, pattern.size() - 1));
  } else {
    kind_ = Kind::kExact;
    text_ = std::string(pattern);
  }
}

bool StringPattern::Matches(absl::string_view value) const {
  switch (kind_) {
    case Kind::kAny:
      return !value.empty();  // gRPC's translator: the regex ".+"

    case Kind::kExact:
      return value == text_;
    case Kind::kPrefix:
      return absl::StartsWith(value, text_);
    case Kind::kSuffix:
      return absl::EndsWith(value, text_);
  }
  return false;
}

absl::StatusOr<AuthzPolicy> AuthzPolicy::Parse(absl::string_view text) {
  StrictJsonOptions options;
  options.max_bytes = kMaxFileBytes;
  options.max_depth = kMaxDepth;
  ORDERHOLD_ASSIGN_OR_RETURN(const json document, ParseStrictJson(text, options));
  ORDERHOLD_RETURN_IF_ERROR(CheckObject(document, "", {"name", "deny_rules", "allow_rules"}));
  AuthzPolicy policy;
  const json* name = Field(document, "name");
  if (name == nullptr) return Invalid("name", "field is not present.");
  ORDERHOLD_ASSIGN_OR_RETURN(policy.name_, StringAt(*name, "name"));
  for (auto [list, out] :
       {std::pair("deny_rules", &policy.deny_), std::pair("allow_rules", &policy.allow_)}) {
    const json* rules = Field(document, list);
    if (rules == nullptr) continue;
    if (!rules->is_array()) {
      return Invalid(list, absl::StrCat("is not an array (", JsonTypeName(*rules), ")."));
    }
    // gRPC's translator refuses an empty list of either kind: leave deny_rules out instead.
    if (rules->empty()) return Invalid(list, "is empty.");
    if (policy.deny_.size() + rules->size() > static_cast<size_t>(kMaxRules)) {
      return Invalid(list, absl::StrCat("more than ", kMaxRules, " rules in all"));
    }
    for (size_t i = 0; i < rules->size(); ++i) {
      const std::string path = JsonPath(list, i);
      ORDERHOLD_ASSIGN_OR_RETURN(Rule rule, ParseRule((*rules)[i], path));
      for (const Rule& earlier : *out) {
        // gRPC's translator keeps only the last of two rules of one name; refused here instead.
        if (earlier.name == rule.name) {
          return Invalid(JsonPath(path, "name"),
                         absl::StrCat("\"", rule.name, "\" names an earlier rule of ", list));
        }
      }
      policy.matches_headers_ = policy.matches_headers_ || !rule.headers.empty();
      out->push_back(std::move(rule));
    }
  }
  // Last, as gRPC's translator checks it: a deny_rules mistake is named first.
  if (Field(document, "allow_rules") == nullptr) return Invalid("allow_rules", "is not present.");
  return policy;
}

std::string TypedIdentity(IdentityKind kind, absl::string_view value) {
  switch (kind) {
    case IdentityKind::kUri:
      return absl::StrCat("uri:", value);
    case IdentityKind::kDns:
      return absl::StrCat("dns:", value);
    case IdentityKind::kSubject:
      return absl::StrCat("subject:", value);
  }
  return std::string();
}

std::vector<std::string> PeerIdentities(const AuthzRequest& request) {
  std::vector<std::string> identities;
  if (!request.authenticated) return identities;
  for (const std::string& san : request.uri_sans) {
    identities.push_back(TypedIdentity(IdentityKind::kUri, san));
  }
  for (const std::string& san : request.dns_sans) {
    identities.push_back(TypedIdentity(IdentityKind::kDns, san));
  }
  if (!request.subject.empty()) {
    identities.push_back(TypedIdentity(IdentityKind::kSubject, request.subject));
  }
  return identities;
}

namespace {

// An identity of a request: its kind and the request's value (no copy: formatted only when a
// caller asks for it).
struct MatchedName {
  IdentityKind kind;
  const std::string* value;
};

// The first identity of `request` that `principals` match, in gRPC's order
// (AuthenticatedAuthorizationMatcher: for each pattern, the URI SANs, then the DNS SANs, then the
// subject); nullopt when none does.
std::optional<MatchedName> MatchedIdentity(const std::vector<StringPattern>& principals,
                                           const AuthzRequest& request) {
  for (const StringPattern& principal : principals) {
    for (const std::string& uri : request.uri_sans) {
      if (principal.Matches(uri)) return MatchedName{IdentityKind::kUri, &uri};
    }
    for (const std::string& dns : request.dns_sans) {
      if (principal.Matches(dns)) return MatchedName{IdentityKind::kDns, &dns};
    }
    if (principal.Matches(request.subject)) {
      return MatchedName{IdentityKind::kSubject, &request.subject};
    }
  }
  return std::nullopt;
}

}  // namespace

bool AuthzPolicy::Rule::Matches(const AuthzRequest& request, std::string* identity) const {
  std::optional<MatchedName> matched;
  if (!principals.empty()) {
    if (!request.authenticated) return false;  // not a TLS peer
    matched = MatchedIdentity(principals, request);
    if (!matched.has_value()) return false;
  }
  if (!paths.empty() && !AnyMatches(paths, request.path)) return false;
  for (const Header& header : headers) {
    std::vector<absl::string_view> values;
    for (const auto& [key, value] : request.headers) {
      if (key == header.key) values.push_back(value);
    }
    if (values.empty()) return false;
    if (!AnyMatches(header.values, absl::StrJoin(values, ","))) return false;
  }
  if (identity != nullptr && matched.has_value()) {
    *identity = TypedIdentity(matched->kind, *matched->value);
  }
  return true;
}

AuthzPolicy::Decision AuthzPolicy::Evaluate(const AuthzRequest& request, bool with_identity) const {
  for (const Rule& rule : deny_) {
    if (rule.Matches(request)) return {false, rule.name, ""};
  }
  for (const Rule& rule : allow_) {
    std::string identity;
    if (rule.Matches(request, with_identity ? &identity : nullptr)) {
      return {true, rule.name, std::move(identity)};
    }
  }
  return {false, "", ""};
}

}  // namespace orderhold::grpc_api
