// Who owns a consumer group, as the group registry (store/lua/claim_group.lua) records it: a
// caller's typed identity, "uri:<URI SAN>", "dns:<DNS SAN>" or "subject:<subject>"
// (grpc_api::TypedIdentity: the identity the allowing policy rule matched), or "" for a caller
// without a client certificate. Typed, one spelling never names two identities: a certificate
// whose DNS SAN spells another caller's SPIFFE ID does not share that caller's groups.
//
// Releases before typed identities stored the bare value (the first URI SAN, else the first DNS
// SAN, else the subject). Such an owner is read as typed by its shape (TypedOwner), so the groups
// those releases registered keep their owners across an upgrade.
//
// Pure functions; thread-safe.
#ifndef ORDERHOLD_SERVER_DOMAIN_GROUP_OWNER_H_
#define ORDERHOLD_SERVER_DOMAIN_GROUP_OWNER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace orderhold::domain {

// A registry's owner as a typed identity: a typed one ("uri:", "dns:" or "subject:" first) as it
// is; a bare one (an earlier release's) as "uri:" when it holds ':' (a URI has a scheme, a DNS
// name never holds one), else as "subject:" when it holds '=' (an RFC 2253 subject,
// "CN=payments,O=Example"), else as "dns:"; "" (a caller without a certificate) stays "".
std::string TypedOwner(absl::string_view stored);

// Whether the registry's owner `stored` is `caller` (a typed identity, or "").
bool IsOwner(absl::string_view stored, absl::string_view caller);

// Every spelling of `caller` a registry may hold: `caller` itself, and the bare value an earlier
// release stored for it when TypedOwner reads that value back as `caller`. A store that must
// compare owners inside one script (drop_group.lua) takes this list.
std::vector<std::string> OwnerSpellings(absl::string_view caller);

}  // namespace orderhold::domain

#endif  // ORDERHOLD_SERVER_DOMAIN_GROUP_OWNER_H_
