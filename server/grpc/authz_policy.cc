#include "server/grpc/authz_policy.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/grpc/authz_policy.pb.h"

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
  if (key.empty()) return Invalid(path, "must not be empty");
  if (absl::StartsWith(key, ":") || absl::StartsWith(key, "grpc-")) {
    return Invalid(path, absl::StrCat("unsupported key \"", key, "\" (pseudo and grpc- headers)"));
  }
  for (absl::string_view unsupported : kUnsupported) {
    if (absl::EqualsIgnoreCase(key, unsupported)) {
      return Invalid(path, absl::StrCat("unsupported key \"", key, "\" (a transport header)"));
    }
  }
  if (key != absl::AsciiStrToLower(key)) {
    return Invalid(path, "must be lower case (metadata keys are; it could never match)");
  }
  return absl::OkStatus();
}

using google::protobuf::Value;

// What protobuf's JSON parser lets through and A43 does not: a single value where a list belongs
// (protobuf 3.21 takes "principals": "x" as ["x"]), and an absent name or allow_rules (protobuf
// cannot tell an absent list from an empty one; A43 requires allow_rules but lets it be []).
// Checked on the document as a google.protobuf.Struct; the types of scalars are left to the
// parse into the schema, which names them.
absl::Status CheckShape(absl::string_view json) {
  google::protobuf::Struct document;
  if (!google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(json.data(), json.size()), &document)
           .ok()) {
    return absl::OkStatus();  // the parse into the schema says what is wrong
  }
  const auto& top = document.fields();
  if (!top.contains("name")) return Invalid("name", "required");
  if (!top.contains("allow_rules"))
    return Invalid("allow_rules", "required ([] denies every call)");
  auto list_at = [](const google::protobuf::Struct& object, const char* field,
                    const std::string& path) -> absl::Status {
    const auto it = object.fields().find(field);
    if (it == object.fields().end() || it->second.kind_case() == Value::kListValue) {
      return absl::OkStatus();
    }
    return Invalid(path.empty() ? field : absl::StrCat(path, ".", field), "must be a list");
  };
  for (const char* list : {"deny_rules", "allow_rules"}) {
    ORDERHOLD_RETURN_IF_ERROR(list_at(document, list, ""));
    const auto it = top.find(list);
    if (it == top.end()) continue;
    for (int i = 0; i < it->second.list_value().values_size(); ++i) {
      const Value& rule = it->second.list_value().values(i);
      if (rule.kind_case() != Value::kStructValue) continue;  // the schema parse names it
      const std::string at = absl::StrCat(list, "[", i, "]");
      const auto& fields = rule.struct_value().fields();
      if (auto source = fields.find("source");
          source != fields.end() && source->second.kind_case() == Value::kStructValue) {
        ORDERHOLD_RETURN_IF_ERROR(
            list_at(source->second.struct_value(), "principals", at + ".source"));
      }
      auto request = fields.find("request");
      if (request == fields.end() || request->second.kind_case() != Value::kStructValue) continue;
      const google::protobuf::Struct& req = request->second.struct_value();
      ORDERHOLD_RETURN_IF_ERROR(list_at(req, "paths", at + ".request"));
      ORDERHOLD_RETURN_IF_ERROR(list_at(req, "headers", at + ".request"));
      auto headers = req.fields().find("headers");
      if (headers == req.fields().end()) continue;
      for (int h = 0; h < headers->second.list_value().values_size(); ++h) {
        const Value& header = headers->second.list_value().values(h);
        if (header.kind_case() != Value::kStructValue) continue;
        ORDERHOLD_RETURN_IF_ERROR(list_at(header.struct_value(), "values",
                                          absl::StrCat(at, ".request.headers[", h, "]")));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<StringPattern> Patterns(const google::protobuf::RepeatedPtrField<std::string>& texts) {
  std::vector<StringPattern> patterns;
  patterns.reserve(texts.size());
  for (const std::string& text : texts) patterns.emplace_back(text);
  return patterns;
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

absl::StatusOr<AuthzPolicy> AuthzPolicy::Parse(absl::string_view json) {
  if (json.size() > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the policy is ", json.size(),
                                                   " bytes, over the ", kMaxFileBytes, " allowed"));
  }
  authz::AuthorizationPolicy file;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a typo ("allow_rule") must not widen or drop a rule
  if (const auto status = google::protobuf::util::JsonStringToMessage(
          google::protobuf::StringPiece(json.data(), json.size()), &file, options);
      !status.ok()) {
    return absl::InvalidArgumentError(std::string(status.message()));
  }
  ORDERHOLD_RETURN_IF_ERROR(CheckShape(json));
  if (file.deny_rules_size() + file.allow_rules_size() > kMaxRules) {
    return Invalid("allow_rules", absl::StrCat("more than ", kMaxRules, " rules in all"));
  }
  AuthzPolicy policy;
  policy.name_ = file.name();
  for (auto [list, rules, out] : {std::tuple("deny_rules", &file.deny_rules(), &policy.deny_),
                                  std::tuple("allow_rules", &file.allow_rules(), &policy.allow_)}) {
    for (int i = 0; i < rules->size(); ++i) {
      const authz::Rule& in = (*rules)[i];
      const std::string path = absl::StrCat(list, "[", i, "]");
      if (in.name().empty()) return Invalid(absl::StrCat(path, ".name"), "required");
      for (const Rule& earlier : *out) {
        // gRPC's translator keeps only the last of two rules of one name; refused here instead.
        if (earlier.name == in.name()) {
          return Invalid(absl::StrCat(path, ".name"),
                         absl::StrCat("\"", in.name(), "\" names an earlier rule of ", list));
        }
      }
      Rule rule;
      rule.name = in.name();
      rule.principals = Patterns(in.source().principals());
      rule.paths = Patterns(in.request().paths());
      for (int h = 0; h < in.request().headers_size(); ++h) {
        const authz::Header& header = in.request().headers(h);
        const std::string at = absl::StrCat(path, ".request.headers[", h, "]");
        ORDERHOLD_RETURN_IF_ERROR(ValidateHeaderKey(absl::StrCat(at, ".key"), header.key()));
        if (header.values().empty()) {
          return Invalid(absl::StrCat(at, ".values"), "required, at least one value");
        }
        rule.headers.push_back({header.key(), Patterns(header.values())});
      }
      policy.matches_headers_ = policy.matches_headers_ || !rule.headers.empty();
      out->push_back(std::move(rule));
    }
  }
  return policy;
}

bool AuthzPolicy::Rule::Matches(const AuthzRequest& request) const {
  if (!principals.empty()) {
    if (!request.authenticated) return false;  // not a TLS peer
    bool matched = false;
    for (const StringPattern& principal : principals) {
      // gRPC's AuthenticatedAuthorizationMatcher: the URI SANs, then the DNS SANs, then the
      // subject.
      for (const std::string& uri : request.uri_sans) matched = matched || principal.Matches(uri);
      for (const std::string& dns : request.dns_sans) matched = matched || principal.Matches(dns);
      matched = matched || principal.Matches(request.subject);
      if (matched) break;
    }
    if (!matched) return false;
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
  return true;
}

AuthzPolicy::Decision AuthzPolicy::Evaluate(const AuthzRequest& request) const {
  for (const Rule& rule : deny_) {
    if (rule.Matches(request)) return {false, rule.name};
  }
  for (const Rule& rule : allow_) {
    if (rule.Matches(request)) return {true, rule.name};
  }
  return {false, ""};
}

}  // namespace orderhold::grpc_api
