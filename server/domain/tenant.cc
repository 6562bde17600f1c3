#include "server/domain/tenant.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/domain/event_service.h"
#include "server/domain/hold.h"

namespace orderhold::domain {
namespace {

// The part of `stored` before `separator` and the part after it; no separator: ("", stored).
std::pair<absl::string_view, absl::string_view> Split(absl::string_view stored, char separator) {
  const size_t at = stored.find(separator);
  if (at == absl::string_view::npos) return {"", stored};
  return {stored.substr(0, at), stored.substr(at + 1)};
}

std::string Join(absl::string_view tenant, char separator, absl::string_view id) {
  if (tenant.empty()) return std::string(id);
  return absl::StrCat(tenant, absl::string_view(&separator, 1), id);
}

}  // namespace

absl::Status ValidateTenantName(absl::string_view field, absl::string_view name) {
  bool valid = !name.empty() && name.size() <= kMaxTenantNameBytes && name.front() != '-';
  for (char c : name)
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": a tenant name must be 1-", kMaxTenantNameBytes,
      " bytes of [a-z0-9-], starting with a letter or digit (got ", name.size(), " bytes)"));
}

std::string QualifiedId(absl::string_view tenant, absl::string_view id) {
  return Join(tenant, kTenantIdSeparator, id);
}
absl::string_view TenantOfId(absl::string_view stored) {
  return Split(stored, kTenantIdSeparator).first;
}
absl::string_view LocalId(absl::string_view stored) {
  return Split(stored, kTenantIdSeparator).second;
}

std::string QualifiedGroup(absl::string_view tenant, absl::string_view group) {
  return Join(tenant, kTenantGroupSeparator, group);
}
absl::string_view TenantOfGroup(absl::string_view stored) {
  return Split(stored, kTenantGroupSeparator).first;
}
absl::string_view LocalGroup(absl::string_view stored) {
  return Split(stored, kTenantGroupSeparator).second;
}

absl::StatusOr<std::string> QualifyId(absl::string_view field, absl::string_view tenant,
                                      std::string id) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateLocalId(field, id));
  if (tenant.empty()) return id;
  return QualifiedId(tenant, id);
}

absl::StatusOr<std::string> QualifyScope(absl::string_view tenant, std::string scope) {
  if (scope.empty()) return scope;
  return QualifyId("scope", tenant, std::move(scope));
}

absl::StatusOr<std::string> QualifyGroup(absl::string_view tenant, std::string group) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateLocalGroup(group));
  if (tenant.empty()) return group;
  return QualifiedGroup(tenant, group);
}

void TenantTable::Set(absl::flat_hash_map<std::string, TenantLimits> limits,
                      absl::flat_hash_set<std::string> operators) {
  absl::MutexLock lock(&mu_);
  limits_ = std::move(limits);
  operators_ = std::move(operators);
}

bool TenantTable::IsOperator(absl::string_view caller) const {
  absl::ReaderMutexLock lock(&mu_);
  return operators_.contains(caller);
}

TenantLimits TenantTable::For(absl::string_view tenant) const {
  if (tenant.empty()) return {};
  absl::ReaderMutexLock lock(&mu_);
  const auto it = limits_.find(tenant);
  return it == limits_.end() ? TenantLimits{} : it->second;
}

}  // namespace orderhold::domain
