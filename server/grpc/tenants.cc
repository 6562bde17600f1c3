#include "server/grpc/tenants.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/files.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"
#include "server/common/strict_json.h"
#include "server/domain/event_service.h"
#include "server/domain/group_owner.h"
#include "server/domain/hold.h"
#include "server/grpc/authorizer.h"

namespace orderhold::grpc_api {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// `value` is an object whose keys are all in `known`.
absl::Status CheckObject(const json& value, absl::string_view path,
                         std::initializer_list<absl::string_view> known) {
  if (!value.is_object()) {
    return Invalid(path, absl::StrCat("must be an object (got ", JsonTypeName(value), ")"));
  }
  for (const auto& [key, unused] : value.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Invalid(JsonPath(path, key), "unknown field");
    }
  }
  return absl::OkStatus();
}

// The integer at `path`, within [min, max].
absl::StatusOr<int64_t> Integer(const json& value, absl::string_view path, int64_t min,
                                int64_t max) {
  if (!value.is_number_integer()) {
    return Invalid(path, absl::StrCat("must be an integer (got ", JsonTypeName(value), ")"));
  }
  // nlohmann reads a non-negative integer as unsigned: compare it as such first.
  const bool too_large =
      value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max);
  if (too_large || value.get<int64_t>() < min || value.get<int64_t>() > max) {
    return Invalid(path, absl::StrCat("must be ", min, "-", max));
  }
  return value.get<int64_t>();
}

// The list of identities at `path` (1..max of them), typed.
absl::StatusOr<std::vector<std::string>> Identities(const json& value, const std::string& path,
                                                    size_t max) {
  if (!value.is_array()) {
    return Invalid(path, absl::StrCat("must be a list (got ", JsonTypeName(value), ")"));
  }
  if (value.empty() || value.size() > max) {
    return Invalid(path, absl::StrCat("must list 1-", max, " identities (got ", value.size(), ")"));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = JsonPath(path, i);
    if (!value[i].is_string()) {
      return Invalid(at, absl::StrCat("must be a string (got ", JsonTypeName(value[i]), ")"));
    }
    const std::string& identity = value[i].get_ref<const std::string&>();
    if (identity.empty() || identity.size() > TenantsFile::kMaxIdentityBytes ||
        domain::Utf8ValidPrefix(identity) < identity.size()) {
      return Invalid(at,
                     absl::StrCat("must be 1-", TenantsFile::kMaxIdentityBytes, " bytes of UTF-8"));
    }
    std::string typed = domain::TypedOwner(identity);
    if (typed == "uri:" || typed == "dns:" || typed == "subject:") {
      return Invalid(at, "names a kind of identity without a value");
    }
    out.push_back(std::move(typed));
  }
  return out;
}

absl::StatusOr<TenantsFile::Tenant> ParseTenant(const json& value, const std::string& path) {
  ORDERHOLD_RETURN_IF_ERROR(CheckObject(
      value, path,
      {"name", "principals", "max_holds", "max_units", "max_watches", "max_consumer_groups"}));
  TenantsFile::Tenant tenant;
  const auto name = value.find("name");
  if (name == value.end() || !name->is_string()) {
    return Invalid(JsonPath(path, "name"), "required, a string");
  }
  tenant.name = name->get<std::string>();
  ORDERHOLD_RETURN_IF_ERROR(domain::ValidateTenantName(JsonPath(path, "name"), tenant.name));
  const auto principals = value.find("principals");
  if (principals == value.end()) return Invalid(JsonPath(path, "principals"), "required");
  ORDERHOLD_ASSIGN_OR_RETURN(
      tenant.principals,
      Identities(*principals, JsonPath(path, "principals"), TenantsFile::kMaxPrincipals));
  domain::TenantLimits& limits = tenant.limits;
  if (const auto it = value.find("max_holds"); it != value.end()) {
    ORDERHOLD_ASSIGN_OR_RETURN(
        limits.max_holds, Integer(*it, JsonPath(path, "max_holds"), 1, domain::kMaxHoldsLimit));
  }
  if (const auto it = value.find("max_units"); it != value.end()) {
    ORDERHOLD_ASSIGN_OR_RETURN(limits.max_units,
                               Integer(*it, JsonPath(path, "max_units"), 0, domain::kMaxUnits));
  }
  if (const auto it = value.find("max_watches"); it != value.end()) {
    ORDERHOLD_ASSIGN_OR_RETURN(limits.max_watches,
                               Integer(*it, JsonPath(path, "max_watches"), 1, 1000000));
  }
  if (const auto it = value.find("max_consumer_groups"); it != value.end()) {
    ORDERHOLD_ASSIGN_OR_RETURN(
        limits.max_consumer_groups,
        Integer(*it, JsonPath(path, "max_consumer_groups"), 1, domain::kMaxMaxConsumerGroups));
  }
  return tenant;
}

}  // namespace

absl::StatusOr<TenantsFile> TenantsFile::Parse(absl::string_view text) {
  StrictJsonOptions strict;
  strict.max_bytes = kMaxFileBytes;
  strict.max_depth = 4;  // the file, its lists, a tenant, a tenant's principals
  ORDERHOLD_ASSIGN_OR_RETURN(json document, ParseStrictJson(text, strict));
  ORDERHOLD_RETURN_IF_ERROR(CheckObject(document, "the file", {"tenants", "operators"}));
  TenantsFile file;
  file.text = std::string(text);
  // Where each identity was named, so that none is named twice.
  absl::flat_hash_map<std::string, std::string> named;
  const auto claim = [&](const std::string& identity, const std::string& at) -> absl::Status {
    const auto [it, added] = named.emplace(identity, at);
    if (added) return absl::OkStatus();
    return Invalid(
        at, absl::StrCat("\"", absl::CHexEscape(identity.substr(0, 64)), "\" is already named at ",
                         it->second, " (an identity belongs to one tenant, or is an operator)"));
  };
  if (const auto tenants = document.find("tenants"); tenants != document.end()) {
    if (!tenants->is_array()) {
      return Invalid("tenants", absl::StrCat("must be a list (got ", JsonTypeName(*tenants), ")"));
    }
    if (tenants->size() > kMaxTenants) {
      return Invalid("tenants", absl::StrCat("at most ", kMaxTenants, " tenants"));
    }
    absl::flat_hash_set<std::string> names;
    for (size_t i = 0; i < tenants->size(); ++i) {
      const std::string path = JsonPath("tenants", i);
      ORDERHOLD_ASSIGN_OR_RETURN(Tenant tenant, ParseTenant((*tenants)[i], path));
      if (!names.insert(tenant.name).second) {
        return Invalid(JsonPath(path, "name"),
                       absl::StrCat("\"", tenant.name, "\" is named twice"));
      }
      for (size_t p = 0; p < tenant.principals.size(); ++p) {
        ORDERHOLD_RETURN_IF_ERROR(
            claim(tenant.principals[p], JsonPath(JsonPath(path, "principals"), p)));
      }
      file.tenants.push_back(std::move(tenant));
    }
  }
  if (const auto operators = document.find("operators"); operators != document.end()) {
    ORDERHOLD_ASSIGN_OR_RETURN(file.operators, Identities(*operators, "operators", kMaxOperators));
    for (size_t i = 0; i < file.operators.size(); ++i) {
      ORDERHOLD_RETURN_IF_ERROR(claim(file.operators[i], JsonPath("operators", i)));
    }
  }
  return file;
}

absl::StatusOr<TenantsFile> LoadTenantsFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, TenantsFile::kMaxFileBytes);
  absl::StatusOr<TenantsFile> file =
      text.ok() ? TenantsFile::Parse(*text) : absl::StatusOr<TenantsFile>(text.status());
  if (!file.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenants: ", path, ": ", file.status().message()));
  }
  return file;
}

absl::StatusOr<std::unique_ptr<Tenants>> Tenants::Start(TenantsOptions options,
                                                        metrics::Metrics& metrics) {
  if (options.refresh_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("tenants_refresh_interval: must be >= 1s");
  }
  TenantsFile file;
  if (options.loaded.has_value()) {
    file = *std::move(options.loaded);
  } else {
    ORDERHOLD_ASSIGN_OR_RETURN(file, LoadTenantsFile(options.file));
  }
  options.loaded.reset();
  std::unique_ptr<Tenants> tenants(new Tenants(std::move(options), metrics));
  LogInfo("tenants: ", tenants->options_.file, ": ", file.tenants.size(), " tenants, ",
          file.operators.size(), " operators; a caller in no tenant is refused PERMISSION_DENIED");
  {
    absl::MutexLock lock(&tenants->mu_);
    tenants->Apply(file);
  }
  tenants->poller_ =
      std::make_unique<Poller>(tenants->options_.refresh_interval, [raw = tenants.get()] {
        raw->Reload().IgnoreError();  // logged and counted by Reload
      });
  return tenants;
}

Tenants::Tenants(TenantsOptions options, metrics::Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

void Tenants::Apply(const TenantsFile& file) {
  tenant_of_.clear();
  operators_.clear();
  names_.clear();
  absl::flat_hash_map<std::string, domain::TenantLimits> limits;
  for (const TenantsFile::Tenant& tenant : file.tenants) {
    for (const std::string& principal : tenant.principals) tenant_of_[principal] = tenant.name;
    limits[tenant.name] = tenant.limits;
    names_.insert(tenant.name);
  }
  operators_.insert(file.operators.begin(), file.operators.end());
  text_ = file.text;
  table_.Set(std::move(limits), operators_);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

absl::Status Tenants::Reload() {
  absl::MutexLock reloading(&reload_mu_);
  absl::StatusOr<std::string> text = ReadSmallFile(options_.file, TenantsFile::kMaxFileBytes);
  {
    absl::MutexLock lock(&mu_);
    if (text.ok() && *text == text_) return absl::OkStatus();  // unchanged (or refused already)
    if (text.ok()) text_ = *text;
  }
  absl::StatusOr<TenantsFile> file =
      text.ok() ? TenantsFile::Parse(*text) : absl::StatusOr<TenantsFile>(text.status());
  if (!file.ok()) {
    metrics_.tenants_reloads(false).Increment();
    LogError("tenants: reload failed, the previous tenants stay in force: ", options_.file, ": ",
             file.status().message());
    return file.status();
  }
  {
    absl::MutexLock lock(&mu_);
    Apply(*file);
  }
  // Counted once in force: whoever sees the count (a test, an operator) sees the new tenants.
  LogInfo("tenants: reloaded ", options_.file, ": ", file->tenants.size(), " tenants, ",
          file->operators.size(), " operators");
  metrics_.tenants_reloads(true).Increment();
  absl::MutexLock lock(&listener_mu_);
  if (listener_) listener_();
  return absl::OkStatus();
}

void Tenants::SetChangeListener(absl::AnyInvocable<void()> listener) {
  absl::MutexLock lock(&listener_mu_);  // waits for a listener running now
  listener_ = std::move(listener);
}

absl::StatusOr<CallTenant> Tenants::Resolve(const AuthzRequest& peer,
                                            const std::vector<std::string>& header) const {
  if (header.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kTenantHeader, ": sent ", header.size(), " times; send it once"));
  }
  const std::vector<std::string> identities = PeerIdentities(peer);
  absl::ReaderMutexLock lock(&mu_);  // every call: readers share it
  std::optional<std::string> tenant;
  bool is_operator = false;
  for (const std::string& identity : identities) {
    if (operators_.contains(identity)) is_operator = true;
    const auto it = tenant_of_.find(identity);
    if (it == tenant_of_.end()) continue;
    if (tenant.has_value() && *tenant != it->second) {
      return absl::PermissionDeniedError(
          "the caller's certificate names principals of more than one tenant (--tenants)");
    }
    tenant = it->second;
  }
  if (tenant.has_value() && is_operator) {
    return absl::PermissionDeniedError(
        "the caller's certificate names a tenant's principal and an operator (--tenants)");
  }
  if (tenant.has_value()) {
    if (!header.empty() && header.front() != *tenant) {
      return absl::PermissionDeniedError(absl::StrCat(
          "a tenant's caller acts only in its own tenant (", kTenantHeader, " names another)"));
    }
    return CallTenant{*tenant, false};
  }
  if (!is_operator) {
    return absl::PermissionDeniedError(
        "the caller belongs to no tenant (--tenants) and is not an operator");
  }
  if (header.empty()) return CallTenant{"", true};
  const std::string& named = header.front();
  if (!names_.contains(named)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kTenantHeader, ": no tenant \"", absl::CHexEscape(named.substr(0, 64)), "\" in --tenants"));
  }
  return CallTenant{named, true};
}

absl::StatusOr<CallTenant> Tenants::Resolve(const grpc::ServerContextBase& context) const {
  std::vector<std::string> header;
  const auto [begin, end] = context.client_metadata().equal_range(kTenantHeader);
  for (auto it = begin; it != end; ++it) header.emplace_back(it->second.data(), it->second.size());
  return Resolve(AuthzRequestOf(context, "", /*with_headers=*/false), header);
}

}  // namespace orderhold::grpc_api
