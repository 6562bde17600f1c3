// Tenants (--tenants): one deployment shared by several ticketing backends, each acting only
// inside its own namespace. The gRPC layer decides which tenant a call acts in (grpc/tenants.h);
// this file is how a tenant's ids are stored, so that no two tenants' ids can ever meet.
//
// A tenant's caller sends the ids it knows ("alice", "concert-1", "orders"); the server stores
// them qualified by the tenant:
//   - user_id and scope: "<tenant>\x1f<id>" (U+001F, INFORMATION SEPARATOR ONE). An id a caller
//     sends can never hold it (ValidateLocalId refuses control characters), so a qualified id is
//     only ever made here and no id of one tenant spells another's. Orders live under their user,
//     so qualifying the user qualifies its orders too; an unscoped hold ("" scope) stays "".
//   - consumer groups: "<tenant>:<group>". A group name a caller sends is of [A-Za-z0-9_.-]
//     (event_service.h ValidateGroup), so ':' is likewise the server's only; it stays readable as
//     a Redis group name and a metric label ("acme:orders").
// A caller in no tenant (a server without --tenants, or an operator without the orderhold-tenant
// header) uses its ids as sent, as before tenants existed. Answers, events and error messages show
// every caller its ids as it sent them (LocalId, LocalGroup).
//
// Limits: a tenant may replace, for its own callers, the server's --max_holds and --max_units
// (per user) and --max_consumer_groups (groups one of its callers may own), and cap its callers'
// open watches on one server (max_watches, besides the server's own watch caps): TenantLimits,
// looked up by the tenant of a stored id in
// TenantTable, which also lists the file's operators (who may act in any tenant and delete any
// group).
//
// Pure functions, and a thread-safe table.
#ifndef ORDERHOLD_SERVER_DOMAIN_TENANT_H_
#define ORDERHOLD_SERVER_DOMAIN_TENANT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace orderhold::domain {

// Between a tenant and an id (user_id, scope) in the stored form.
inline constexpr char kTenantIdSeparator = '\x1f';
// Between a tenant and a consumer group name in the stored form.
inline constexpr char kTenantGroupSeparator = ':';
// A tenant's name: 1-63 bytes of [a-z0-9-], starting with a letter or digit (a DNS label).
inline constexpr size_t kMaxTenantNameBytes = 63;

// INVALID_ARGUMENT "<field>: ..." unless `name` is a tenant name as above.
absl::Status ValidateTenantName(absl::string_view field, absl::string_view name);

// The stored form of `id` (a user_id or a non-empty scope) of `tenant` ("" = no tenant: `id`).
std::string QualifiedId(absl::string_view tenant, absl::string_view id);
// The tenant of a stored id ("" for an id of no tenant), and the id as its tenant's callers spell
// it (the stored id itself for one of no tenant).
absl::string_view TenantOfId(absl::string_view stored);
absl::string_view LocalId(absl::string_view stored);

// The stored form of consumer group `group` of `tenant` ("" = no tenant: `group`); and back.
std::string QualifiedGroup(absl::string_view tenant, absl::string_view group);
absl::string_view TenantOfGroup(absl::string_view stored);
absl::string_view LocalGroup(absl::string_view stored);

// At the edge: `id` as a caller sent it, validated as such (hold.h ValidateLocalId:
// INVALID_ARGUMENT naming `field`), in its stored form for `tenant`.
absl::StatusOr<std::string> QualifyId(absl::string_view field, absl::string_view tenant,
                                      std::string id);
// The same for a scope ("" = unscoped, kept as it is).
absl::StatusOr<std::string> QualifyScope(absl::string_view tenant, std::string scope);
// The same for a consumer group (ValidateLocalGroup: INVALID_ARGUMENT naming consumer_group).
absl::StatusOr<std::string> QualifyGroup(absl::string_view tenant, std::string group);

// What a tenant sets for its own callers; unset: the server's flag.
struct TenantLimits {
  std::optional<int> max_holds;            // per user, 1..kMaxHoldsLimit (--max_holds)
  std::optional<int64_t> max_units;        // per user, 0 (none)..kMaxUnits (--max_units)
  std::optional<int> max_watches;          // its callers' open watches per server (--max_watches)
  std::optional<int> max_consumer_groups;  // groups each of its callers may own
  friend bool operator==(const TenantLimits&, const TenantLimits&) = default;
};

// What the tenants file says that the domain needs: the limits of every tenant and the operators
// (typed identities, grpc_api::TypedIdentity), replaced whole when the file is read again.
// Thread-safe.
class TenantTable {
 public:
  void Set(absl::flat_hash_map<std::string, TenantLimits> limits,
           absl::flat_hash_set<std::string> operators) ABSL_LOCKS_EXCLUDED(mu_);
  // `tenant`'s limits; all unset for "" and for a tenant the table does not know.
  TenantLimits For(absl::string_view tenant) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `caller` (a typed identity) is one of the operators.
  bool IsOperator(absl::string_view caller) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, TenantLimits> limits_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> operators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_TENANT_H_
