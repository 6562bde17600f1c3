// Fuzzes the --authz_policy parser (server/grpc/authz_policy.h over server/common/strict_json.h)
// for what matters in a security policy: it never fails open. Any text must parse or be refused
// INVALID_ARGUMENT, never crash nor hang; and when it parses, each rule's principals and paths are
// exactly the lists the JSON spelled: a parsed list is empty only where the JSON wrote [] or left
// the field out (an empty list matches every peer or every path), and holds as many patterns as
// the JSON list has entries (nothing dropped, nothing flattened). The JSON is read a second time,
// independently, by nlohmann's ordinary parser for the comparison; a text with a null anywhere
// must never parse.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/grpc/authz_policy.h"

namespace {

using nlohmann::json;

void Fail(const char* what, const std::string& rule) {
  std::fprintf(stderr, "authz_policy_fuzzer: %s (rule \"%s\")\n", what, rule.c_str());
  std::abort();
}

bool HasNull(const json& value) {
  if (value.is_null()) return true;
  if (value.is_structured()) {
    for (const json& child : value) {
      if (HasNull(child)) return true;
    }
  }
  return false;
}

// The number of entries of object[outer][inner] as the JSON has it; 0 when absent.
size_t ListSize(const json& rule, const char* outer, const char* inner) {
  const auto o = rule.find(outer);
  if (o == rule.end()) return 0;
  const auto i = o->find(inner);
  return i == o->end() ? 0 : i->size();
}

void CheckRules(const std::vector<orderhold::grpc_api::AuthzPolicy::Rule>& parsed,
                const json& document, const char* list) {
  const auto it = document.find(list);
  const size_t count = it == document.end() ? 0 : it->size();
  if (parsed.size() != count) Fail("a rule list's length differs from the JSON's", list);
  for (size_t i = 0; i < count; ++i) {
    const json& rule = (*it)[i];
    if (parsed[i].principals.size() != ListSize(rule, "source", "principals")) {
      Fail("principals differ from the JSON's list", parsed[i].name);
    }
    if (parsed[i].paths.size() != ListSize(rule, "request", "paths")) {
      Fail("paths differ from the JSON's list", parsed[i].name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const auto policy = orderhold::grpc_api::AuthzPolicy::Parse(text);
  if (!policy.ok()) {
    if (policy.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("refused with a code other than INVALID_ARGUMENT", "");
    }
    return 0;
  }
  // It parsed: nlohmann's ordinary reader must agree that it is JSON, and see no null.
  const json document = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) Fail("parsed a text that is not JSON", "");
  if (HasNull(document)) Fail("parsed a text with a null in it", "");
  CheckRules(policy->deny_rules(), document, "deny_rules");
  CheckRules(policy->allow_rules(), document, "allow_rules");
  return 0;
}
