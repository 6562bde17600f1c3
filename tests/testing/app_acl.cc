#include "tests/testing/app_acl.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace orderhold::testing {

absl::StatusOr<std::vector<std::string>> AppAclRules(absl::string_view key_prefix) {
  std::ifstream file(ORDERHOLD_APP_ACL_FILE);
  std::string line;
  if (!std::getline(file, line)) return absl::NotFoundError(ORDERHOLD_APP_ACL_FILE);
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.size() < 5 || words[0] != "user" || words[2] != "on" || words[3][0] != '>') {
    return absl::InvalidArgumentError(
        absl::StrCat(ORDERHOLD_APP_ACL_FILE, ": expected `user <name> on ><password> <rules>`"));
  }
  std::vector<std::string> rules(words.begin() + 4, words.end());
  if (!key_prefix.empty()) {
    for (std::string& rule : rules) {
      if (rule == "~orderhold:*") rule = absl::StrCat("~", key_prefix, "*");
      if (rule == "&orderhold:*") rule = absl::StrCat("&", key_prefix, "*");
    }
  }
  return rules;
}

absl::StatusOr<std::string> AppAclRulesLine(absl::string_view key_prefix) {
  absl::StatusOr<std::vector<std::string>> rules = AppAclRules(key_prefix);
  if (!rules.ok()) return rules.status();
  return absl::StrJoin(*rules, " ");
}

}  // namespace orderhold::testing
