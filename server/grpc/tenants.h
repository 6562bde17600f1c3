// Tenants: which tenant a call acts in, from the --tenants file (domain/tenant.h says how a
// tenant's ids are kept apart). The threat it answers: several ticketing backends share one
// deployment, and a certificate the policy lets call PlaceHold must not reach another backend's
// users, scopes or events (the policy decides methods, not whose data).
//
// The file (JSON, read as strictly as the policy: common/strict_json.h):
//   {"tenants": [{"name": "acme", "principals": ["spiffe://example/acme-storefront"],
//                 "max_holds": 3, "max_units": 10, "max_watches": 20,
//                 "max_consumer_groups": 5}],
//    "operators": ["spiffe://example/operator"]}
// - name: a tenant name (domain::ValidateTenantName), once in the file.
// - principals: 1-kMaxPrincipals identities of the tenant's callers, each a typed identity
//   ("uri:<URI SAN>", "dns:<DNS SAN>", "subject:<subject>": authz_policy.h TypedIdentity) or a
//   bare one read by its shape as group owners are (domain/group_owner.h TypedOwner: with ':' a
//   URI SAN, with '=' a subject, else a DNS SAN). One identity belongs to at most one tenant and
//   is not an operator too.
// - max_holds (1..10000) and max_units (0 = none..1e9): optional, replace --max_holds and
//   --max_units for the tenant's users (0 lifts the server's unit cap for them: the file says
//   so); max_consumer_groups (>= 1) replaces --max_consumer_groups for its callers; max_watches
//   (>= 1) caps its callers' open watches on one server, besides --max_watches and
//   --max_watches_per_caller (tenant.h).
// - operators: identities that may act in any tenant: the one the request header
//   `orderhold-tenant` names, or none without it; they may also delete any consumer group.
// Unknown fields, null, repeated keys, wrong types and out-of-range numbers are refused, naming
// the place (INVALID_ARGUMENT): at start the server exits 2; on a reload the previous tenants stay
// in force and orderhold_tenants_reloads_total{result="failure"} counts it.
//
// A call's identities are its client certificate's (URI SANs, DNS SANs, subject), typed. With
// --tenants, a call is PERMISSION_DENIED (counted in orderhold_calls_denied_total{method}) when
// its identities name no tenant and no operator, more than one tenant, or a tenant and an
// operator; and when a tenant's caller sends `orderhold-tenant` naming another tenant.
//
// Thread-safe. The polling thread (common/poller.h) is joined by the destructor.
#ifndef ORDERHOLD_SERVER_GRPC_TENANTS_H_
#define ORDERHOLD_SERVER_GRPC_TENANTS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "server/common/poller.h"
#include "server/domain/tenant.h"
#include "server/grpc/authz_policy.h"
#include "server/metrics/metrics.h"

namespace orderhold::grpc_api {

// The request header an operator names the tenant it acts in with.
inline constexpr char kTenantHeader[] = "orderhold-tenant";

// A --tenants file, parsed.
struct TenantsFile {
  struct Tenant {
    std::string name;
    std::vector<std::string> principals;  // typed identities
    domain::TenantLimits limits;
  };
  std::vector<Tenant> tenants;
  std::vector<std::string> operators;  // typed identities
  std::string text;                    // the bytes it was read from (LoadTenantsFile)

  // Bounds: the file's bytes, tenants, principals per tenant, operators, bytes per identity.
  static constexpr size_t kMaxFileBytes = 1 << 20;
  static constexpr size_t kMaxTenants = 1000;
  static constexpr size_t kMaxPrincipals = 100;
  static constexpr size_t kMaxOperators = 100;
  static constexpr size_t kMaxIdentityBytes = 1024;

  // The file `text` holds, or INVALID_ARGUMENT naming the place ("tenants[1].max_holds: ...").
  static absl::StatusOr<TenantsFile> Parse(absl::string_view text);
};

// Reads and parses the file at `path`: INVALID_ARGUMENT "tenants: <path>: <why>".
absl::StatusOr<TenantsFile> LoadTenantsFile(const std::string& path);

// The tenant a call acts in.
struct CallTenant {
  std::string tenant;  // "" = none (an operator without orderhold-tenant)
  bool is_operator = false;
};

struct TenantsOptions {
  std::string file;  // --tenants; empty: no tenants (App makes no Tenants)
  // --tenants_refresh_interval: how often the file is read again; >= 1s.
  absl::Duration refresh_interval = absl::Seconds(10);
  // The file as ConfigFromFlags read it (a bad file stops the start); Start reads it when unset.
  std::optional<TenantsFile> loaded;
};

class Tenants {
 public:
  // Starts with options.loaded (else LoadTenantsFile) and polls the file. INVALID_ARGUMENT naming
  // tenants_refresh_interval below 1s. `metrics` must outlive this object.
  static absl::StatusOr<std::unique_ptr<Tenants>> Start(TenantsOptions options,
                                                        metrics::Metrics& metrics);
  ~Tenants() = default;  // poller_ first: no Reload after it

  // The tenant of `peer`'s call (its certificate: AuthzRequest's authenticated, SANs, subject),
  // given the values of its orderhold-tenant header. PERMISSION_DENIED as the file comment says;
  // INVALID_ARGUMENT naming orderhold-tenant when it is sent more than once, or names no tenant
  // of the file. Not counted: the caller counts its refusals.
  absl::StatusOr<CallTenant> Resolve(const AuthzRequest& peer,
                                     const std::vector<std::string>& header) const;
  // The same for `context`'s call (its certificate and header).
  absl::StatusOr<CallTenant> Resolve(const grpc::ServerContextBase& context) const;

  // Reads the file now (what the polling thread does; tests and SIGHUP). OK when unchanged or
  // applied; else why it was refused (the previous tenants stay).
  absl::Status Reload();

  // `listener` runs after each new file is applied (on the thread that applied it, never under
  // the lock), so calls admitted under the old one can be checked again. Replaces an earlier
  // listener; null removes it, and once that call returns the old one will not run again.
  void SetChangeListener(absl::AnyInvocable<void()> listener);

  // How many files were applied so far (1 after Start): see Authorizer::generation.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // The limits and operators in force, for the domain (HoldService, EventService set_tenants).
  const domain::TenantTable& table() const { return table_; }

 private:
  Tenants(TenantsOptions options, metrics::Metrics& metrics);
  void Apply(const TenantsFile& file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TenantsOptions options_;
  metrics::Metrics& metrics_;
  domain::TenantTable table_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> tenant_of_ ABSL_GUARDED_BY(mu_);  // identity
  absl::flat_hash_set<std::string> operators_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> names_ ABSL_GUARDED_BY(mu_);  // the tenants
  std::string text_ ABSL_GUARDED_BY(mu_);  // the file last read, applied or refused
  std::atomic<uint64_t> generation_{0};
  // One Reload at a time (the poller and SIGHUP), so an older file is never applied last.
  absl::Mutex reload_mu_ ABSL_ACQUIRED_BEFORE(listener_mu_);
  // Held while the listener runs, which resolves calls again (Resolve takes mu_): before mu_.
  absl::Mutex listener_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::AnyInvocable<void()> listener_ ABSL_GUARDED_BY(listener_mu_);
  // Last: destroyed first, so no Reload runs while the members it uses go.
  std::unique_ptr<Poller> poller_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_TENANTS_H_
