#include "server/domain/group_owner.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace orderhold::domain {
namespace {

constexpr absl::string_view kKinds[] = {"uri:", "dns:", "subject:"};

bool IsTyped(absl::string_view owner) {
  for (absl::string_view kind : kKinds) {
    if (absl::StartsWith(owner, kind)) return true;
  }
  return false;
}

}  // namespace

std::string TypedOwner(absl::string_view stored) {
  if (stored.empty() || IsTyped(stored)) return std::string(stored);
  if (absl::StrContains(stored, ':')) return absl::StrCat("uri:", stored);
  if (absl::StrContains(stored, '=')) return absl::StrCat("subject:", stored);
  return absl::StrCat("dns:", stored);
}

bool IsOwner(absl::string_view stored, absl::string_view caller) {
  return TypedOwner(stored) == caller;
}

std::vector<std::string> OwnerSpellings(absl::string_view caller) {
  std::vector<std::string> spellings = {std::string(caller)};
  for (absl::string_view kind : kKinds) {
    absl::string_view bare = caller;
    if (absl::ConsumePrefix(&bare, kind) && !bare.empty() && !IsTyped(bare) &&
        TypedOwner(bare) == caller) {
      spellings.emplace_back(bare);
    }
  }
  return spellings;
}

}  // namespace orderhold::domain
