// Authorizer: who a caller is, and whether the --authz_policy lets it make a call. The one place
// the OrderHold service asks before any handler does work (orderhold_service.cc: every unary call
// and WatchHoldEvents start with Check); a refusal is PERMISSION_DENIED (AIP-193: the caller is
// known, it may not do this) and is counted in orderhold_calls_denied_total{method}.
//
// The policy is gRPC's (gRFC A43, authz_policy.h), read from a file that is polled every
// refresh_interval: a changed file that parses replaces the policy for calls that start after it;
// one that does not parse (or cannot be read) is logged and counted
// (orderhold_authz_policy_reloads_total{result="failure"}) and the previous policy stays in force.
// A new policy also reaches calls already open: its change listener (SetChangeListener) has the
// service check every open WatchHoldEvents again and end those now refused.
// This is what gRPC's FileWatcherAuthorizationPolicyProvider does (grpcpp/security/
// authorization_policy_provider.h), whose library Debian's gRPC 1.51 lacks.
//
// Identity comes from the call's grpc::AuthContext, as gRPC's own policy engine reads it
// (src/core/lib/security/authorization/evaluate_args.cc, matchers.cc): principal patterns match a
// TLS peer only, against its certificate's URI SANs, DNS SANs, then subject. gRPC does not check
// that the certificate was verified: principals mean something only with --tls_client_ca_file,
// where every client must present a certificate that verifies before any call. A caller's
// identity (for group ownership and per-caller bounds) is typed (TypedIdentity: "uri:...",
// "dns:...", "subject:..."): the one the allowing rule's principals matched (Admit), else, for a
// rule without principals or without a policy, its first URI SAN (a SPIFFE ID), else its first
// DNS SAN, else its subject.
//
// Thread-safe. The polling thread (common/poller.h) is joined by the destructor.
#ifndef ORDERHOLD_SERVER_GRPC_AUTHORIZER_H_
#define ORDERHOLD_SERVER_GRPC_AUTHORIZER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "server/common/poller.h"
#include "server/grpc/authz_policy.h"
#include "server/grpc/trusted_proxies.h"
#include "server/metrics/metrics.h"

namespace orderhold::grpc_api {

// The full method of `method` for a policy's request.paths: "/orderhold.v1.OrderHold/Pay".
const std::string& MethodPath(metrics::Method method);

// What a policy may match of `context`'s call to `method`: the path, the peer's certificate
// (authenticated, URI SANs, DNS SANs, subject) and, `with_headers`, the metadata, with
// content-type "application/grpc" as gRPC's engine sees it (the transport keeps it out of
// client_metadata()).
AuthzRequest AuthzRequestOf(const grpc::ServerContextBase& context, metrics::Method method,
                            bool with_headers = true);
// The same for a call to the full method `path` of another service on the port
// ("/grpc.health.v1.Health/Check").
AuthzRequest AuthzRequestOf(const grpc::ServerContextBase& context, absl::string_view path,
                            bool with_headers = true);

// The caller's identity, typed (TypedIdentity): "uri:" + its first URI SAN, else "dns:" + its
// first DNS SAN, else "subject:" + its subject; empty for a peer without a client certificate
// (plaintext or TLS without one).
std::string PrincipalOf(const grpc::ServerContextBase& context);

// Who a per-caller bound counts against: "principal:<PrincipalOf>" with a client certificate,
// else "address:<the client's IP>" (the port left out: one host's connections count together):
// the peer's, or, when the peer is one of `proxies`, the client its x-forwarded-for names
// (TrustedProxies::ClientOf).
std::string CallerKeyOf(const grpc::ServerContextBase& context,
                        const TrustedProxies& proxies = TrustedProxies());

// A policy file as read: its bytes and the policy they hold.
struct LoadedPolicy {
  std::string text;
  std::shared_ptr<const AuthzPolicy> policy;
};

// Reads and parses the policy file at `file`. INVALID_ARGUMENT "authz_policy: <file>: <why>" when
// it cannot be read or does not parse (AuthzPolicy::Parse names the field). Thread-safe.
absl::StatusOr<LoadedPolicy> LoadAuthzPolicy(const std::string& file);

struct AuthorizerOptions {
  std::string policy_file;  // --authz_policy; empty: no policy (App makes no Authorizer)
  // --authz_policy_refresh_interval: how often the file is read again; whole seconds, >= 1s.
  absl::Duration refresh_interval = absl::Seconds(10);
  // The file as ConfigFromFlags read it (so that a bad file stops the start with exit 2);
  // Start reads it itself when unset.
  std::optional<LoadedPolicy> loaded;
};

class Authorizer {
 public:
  // Starts with options.loaded (else LoadAuthzPolicy(options.policy_file), and its error) and
  // polls the file. INVALID_ARGUMENT naming authz_policy_refresh_interval below 1s. `metrics` must
  // outlive the authorizer.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Start(AuthorizerOptions options,
                                                           metrics::Metrics& metrics);
  ~Authorizer() = default;  // poller_ first: no Reload after it

  // OK when the policy allows the call; else PERMISSION_DENIED naming the method and the caller
  // (never its metadata, nor the rule that decided: the caller learns nothing of the policy),
  // counted in orderhold_calls_denied_total{method}. The rule that denied (or "no allow rule") is
  // logged, at most one line per rule and method per minute.
  absl::Status Check(const grpc::ServerContextBase& context, metrics::Method method);

  // Check, and on OK the caller's identity: the one the allowing rule's principals matched (so
  // that what the policy admitted is what owns groups: a rule on a DNS SAN makes that DNS SAN the
  // owner), else PrincipalOf(context) ("" without a certificate).
  absl::StatusOr<std::string> Admit(const grpc::ServerContextBase& context, metrics::Method method);

  // Check for a call to another service on the port, by its full method `path`
  // ("/grpc.health.v1.Health/Watch": health_service.h). A denial is logged as Check's, and not
  // counted in orderhold_calls_denied_total, whose method label lists OrderHold's rpcs.
  absl::Status CheckPath(const grpc::ServerContextBase& context, absl::string_view path);

  // Reads the file now; what the polling thread does every refresh_interval (tests; SIGHUP).
  // OK when it is unchanged or was applied; else why it was refused (the old policy stays).
  absl::Status Reload();

  // The policy in force.
  std::shared_ptr<const AuthzPolicy> policy() const;

  // How many policies were applied so far (1 after Start): a call admitted under one generation
  // and registered under another is checked again (OrderHoldService::WatchHoldEvents).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Whether the policy in force allows `request`: a call admitted earlier, checked again (an open
  // WatchHoldEvents after a reload). Not counted; the caller counts what it ends.
  bool Allows(const AuthzRequest& request) const;

  // `listener` runs after each new policy is applied (on the thread that applied it: the polling
  // thread, or Reload's caller; never under the authorizer's lock), so calls admitted under the
  // old one can be checked again. Replaces an earlier listener; null removes it, and when that
  // call returns the old listener is not running and will not run again.
  void SetChangeListener(absl::AnyInvocable<void()> listener);

 private:
  Authorizer(AuthorizerOptions options, metrics::Metrics& metrics);
  // The decision on `context`'s call to `path`: OK, with the caller's identity (Admit) when
  // `with_identity` (else ""), or PERMISSION_DENIED, logged (LogDenial).
  absl::StatusOr<std::string> Decide(const grpc::ServerContextBase& context, absl::string_view path,
                                     bool with_identity);
  // Logs a denial of `path` to `who` and the deciding `rule` ("" = no allow rule matched), unless
  // one of that rule and path was logged within kDenialLogInterval.
  void LogDenial(absl::string_view who, absl::string_view path, absl::string_view rule);
  static constexpr absl::Duration kDenialLogInterval = absl::Minutes(1);

  const AuthorizerOptions options_;
  metrics::Metrics& metrics_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const AuthzPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::string text_ ABSL_GUARDED_BY(mu_);  // the file's content last read, applied or refused
  absl::Mutex denials_mu_;
  // "<rule> <path>" -> when a denial of it was last logged; bounded by rules x methods.
  absl::flat_hash_map<std::string, absl::Time> last_denial_logged_ ABSL_GUARDED_BY(denials_mu_);
  // Held while the listener runs, which checks calls again (Allows takes mu_): before mu_.
  absl::Mutex listener_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::AnyInvocable<void()> listener_ ABSL_GUARDED_BY(listener_mu_);
  std::atomic<uint64_t> generation_{1};
  // One Reload at a time (the poller and SIGHUP), so an older file is never applied last.
  absl::Mutex reload_mu_ ABSL_ACQUIRED_BEFORE(listener_mu_);
  // Last: destroyed first, so no Reload runs while the members it uses go.
  std::unique_ptr<Poller> poller_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_AUTHORIZER_H_
