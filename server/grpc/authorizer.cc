#include "server/grpc/authorizer.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/security/auth_context.h"
#include "server/common/files.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace orderhold::grpc_api {
namespace {

// gRPC's names of the peer properties (grpc/grpc_security_constants.h, set by
// src/core/tsi/ssl_transport_security.cc for a TLS peer).
constexpr char kTransportSecurityType[] = "transport_security_type";
constexpr char kSsl[] = "ssl";
constexpr char kTls[] = "tls";
constexpr char kUriSans[] = "peer_uri";
constexpr char kDnsSans[] = "peer_dns";
constexpr char kSubject[] = "x509_subject";

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* name) {
  std::vector<std::string> values;
  for (const grpc::string_ref& value : auth.FindPropertyValues(name)) {
    values.emplace_back(value.data(), value.size());
  }
  return values;
}

struct Peer {
  bool authenticated = false;
  std::vector<std::string> uri_sans;
  std::vector<std::string> dns_sans;
  std::string subject;
};

Peer PeerOf(const grpc::ServerContextBase& context) {
  Peer peer;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return peer;
  // As gRPC's EvaluateArgs reads them: a single-valued property with 0 or several values is "".
  const std::vector<std::string> type = Values(*auth, kTransportSecurityType);
  if (type.size() != 1 || (type.front() != kSsl && type.front() != kTls)) return peer;
  // A TLS peer: with --tls_client_ca_file gRPC has required and verified its certificate before
  // any call; without, it has none and its subject is "".
  peer.authenticated = true;
  peer.uri_sans = Values(*auth, kUriSans);
  peer.dns_sans = Values(*auth, kDnsSans);
  const std::vector<std::string> subject = Values(*auth, kSubject);
  if (subject.size() == 1) peer.subject = subject.front();
  return peer;
}

}  // namespace

const std::string& MethodPath(metrics::Method method) {
  static const auto* const paths = [] {
    auto* paths = new std::array<std::string, metrics::kMethodCount>();
    for (int i = 0; i < metrics::kMethodCount; ++i) {
      (*paths)[i] = absl::StrCat("/orderhold.v1.OrderHold/",
                                 metrics::MethodName(static_cast<metrics::Method>(i)));
    }
    return paths;
  }();
  return (*paths)[static_cast<int>(method)];
}

AuthzRequest AuthzRequestOf(const grpc::ServerContextBase& context, metrics::Method method,
                            bool with_headers) {
  return AuthzRequestOf(context, MethodPath(method), with_headers);
}

AuthzRequest AuthzRequestOf(const grpc::ServerContextBase& context, absl::string_view path,
                            bool with_headers) {
  AuthzRequest request;
  request.path = std::string(path);
  Peer peer = PeerOf(context);
  request.authenticated = peer.authenticated;
  request.uri_sans = std::move(peer.uri_sans);
  request.dns_sans = std::move(peer.dns_sans);
  request.subject = std::move(peer.subject);
  if (!with_headers) return request;
  bool content_type = false;
  for (const auto& [key, value] : context.client_metadata()) {
    std::string name = absl::AsciiStrToLower(absl::string_view(key.data(), key.size()));
    content_type = content_type || name == "content-type";
    request.headers.emplace_back(std::move(name), std::string(value.data(), value.size()));
  }
  // gRPC's transport consumes content-type, so client_metadata() never has it, and a rule on it
  // never matched. gRPC's own engine reads it from the call's metadata batch, where
  // every valid gRPC call has it as "application/grpc" (evaluate_args.cc, GetHeaderValue): the
  // same here.
  if (!content_type) request.headers.emplace_back("content-type", "application/grpc");
  return request;
}

namespace {

// PrincipalOf's choice among a certificate's names.
std::string FirstIdentity(const std::vector<std::string>& uri_sans,
                          const std::vector<std::string>& dns_sans, const std::string& subject) {
  if (!uri_sans.empty()) return TypedIdentity(IdentityKind::kUri, uri_sans.front());
  if (!dns_sans.empty()) return TypedIdentity(IdentityKind::kDns, dns_sans.front());
  if (!subject.empty()) return TypedIdentity(IdentityKind::kSubject, subject);
  return std::string();
}

}  // namespace

std::string PrincipalOf(const grpc::ServerContextBase& context) {
  const Peer peer = PeerOf(context);
  return FirstIdentity(peer.uri_sans, peer.dns_sans, peer.subject);
}

std::string CallerKeyOf(const grpc::ServerContextBase& context, const TrustedProxies& proxies) {
  std::string principal = PrincipalOf(context);
  if (!principal.empty()) return absl::StrCat("principal:", principal);
  // "ipv4:10.0.0.7:51234", "ipv6:[::1]:51234", "unix:/path": the host without the port.
  const std::string address = context.peer();
  absl::string_view peer = address;
  if (absl::ConsumePrefix(&peer, "ipv4:") || absl::ConsumePrefix(&peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon != absl::string_view::npos) peer = peer.substr(0, colon);
  }
  if (proxies.empty()) return absl::StrCat("address:", peer);
  // An IPv6 host is bracketed ("[::1]", or "%5B::1%5D" URL-encoded).
  absl::string_view ip = peer;
  if (absl::ConsumePrefix(&ip, "[")) absl::ConsumeSuffix(&ip, "]");
  if (absl::ConsumePrefix(&ip, "%5B")) absl::ConsumeSuffix(&ip, "%5D");
  if (!proxies.Contains(ip)) return absl::StrCat("address:", peer);
  std::vector<absl::string_view> forwarded;
  const auto [first, last] = context.client_metadata().equal_range("x-forwarded-for");
  for (auto it = first; it != last; ++it)
    forwarded.emplace_back(it->second.data(), it->second.size());
  return absl::StrCat("address:", proxies.ClientOf(ip, forwarded));
}

absl::StatusOr<LoadedPolicy> LoadAuthzPolicy(const std::string& file) {
  absl::StatusOr<std::string> text = ReadSmallFile(file, AuthzPolicy::kMaxFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("authz_policy: ", text.status().message()));
  }
  absl::StatusOr<AuthzPolicy> policy = AuthzPolicy::Parse(*text);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("authz_policy: ", file, ": ", policy.status().message()));
  }
  return LoadedPolicy{*std::move(text), std::make_shared<const AuthzPolicy>(*std::move(policy))};
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Start(AuthorizerOptions options,
                                                              metrics::Metrics& metrics) {
  if (options.refresh_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("authz_policy_refresh_interval: must be >= 1s");
  }
  LoadedPolicy loaded;
  if (options.loaded.has_value()) {
    loaded = *std::move(options.loaded);
  } else {
    ORDERHOLD_ASSIGN_OR_RETURN(loaded, LoadAuthzPolicy(options.policy_file));
  }
  options.loaded.reset();
  std::unique_ptr<Authorizer> authorizer(new Authorizer(std::move(options), metrics));
  LogInfo("authz_policy: ", authorizer->options_.policy_file, ": policy \"", loaded.policy->name(),
          "\" with ", loaded.policy->rule_count(),
          " rules; calls it does not allow are refused PERMISSION_DENIED");
  {
    absl::MutexLock lock(&authorizer->mu_);
    authorizer->policy_ = std::move(loaded.policy);
    authorizer->text_ = std::move(loaded.text);
  }
  authorizer->poller_ =
      std::make_unique<Poller>(authorizer->options_.refresh_interval, [raw = authorizer.get()] {
        raw->Reload().IgnoreError();  // logged and counted by Reload
      });
  return authorizer;
}

Authorizer::Authorizer(AuthorizerOptions options, metrics::Metrics& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

absl::Status Authorizer::Reload() {
  absl::MutexLock reloading(&reload_mu_);
  const std::string& file = options_.policy_file;
  absl::StatusOr<std::string> text = ReadSmallFile(file, AuthzPolicy::kMaxFileBytes);
  absl::StatusOr<AuthzPolicy> policy = absl::UnknownError("");
  {
    absl::MutexLock lock(&mu_);
    if (text.ok() && *text == text_) return absl::OkStatus();  // unchanged (or refused already)
    if (text.ok()) text_ = *text;
  }
  if (text.ok()) policy = AuthzPolicy::Parse(*text);
  const absl::Status status = !text.ok() ? text.status() : policy.status();
  if (!status.ok()) {
    metrics_.authz_policy_reloads(false).Increment();
    LogError("authz_policy: reload failed, the previous policy stays in force: ",
             text.ok() ? absl::StrCat(file, ": ") : "", status.message());
    return status;
  }
  const std::string name = policy->name();
  const int rules = policy->rule_count();
  {
    absl::MutexLock lock(&mu_);
    policy_ = std::make_shared<const AuthzPolicy>(*std::move(policy));
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // Counted once in force: whoever sees the count (a test, an operator) sees the new policy.
  LogInfo("authz_policy: reloaded ", file, ": policy \"", name, "\" with ", rules, " rules");
  metrics_.authz_policy_reloads(true).Increment();
  absl::MutexLock lock(&listener_mu_);
  if (listener_) listener_();
  return absl::OkStatus();
}

bool Authorizer::Allows(const AuthzRequest& request) const {
  return policy()->Evaluate(request).allowed;
}

void Authorizer::SetChangeListener(absl::AnyInvocable<void()> listener) {
  absl::MutexLock lock(&listener_mu_);  // waits for a listener running now
  listener_ = std::move(listener);
}

std::shared_ptr<const AuthzPolicy> Authorizer::policy() const {
  absl::MutexLock lock(&mu_);
  return policy_;
}

absl::Status Authorizer::Check(const grpc::ServerContextBase& context, metrics::Method method) {
  absl::Status status = Decide(context, MethodPath(method), /*with_identity=*/false).status();
  if (!status.ok()) metrics_.calls_denied(method).Increment();
  return status;
}

absl::StatusOr<std::string> Authorizer::Admit(const grpc::ServerContextBase& context,
                                              metrics::Method method) {
  absl::StatusOr<std::string> caller = Decide(context, MethodPath(method), /*with_identity=*/true);
  if (!caller.ok()) metrics_.calls_denied(method).Increment();
  return caller;
}

absl::Status Authorizer::CheckPath(const grpc::ServerContextBase& context, absl::string_view path) {
  return Decide(context, path, /*with_identity=*/false).status();
}

absl::StatusOr<std::string> Authorizer::Decide(const grpc::ServerContextBase& context,
                                               absl::string_view path, bool with_identity) {
  const std::shared_ptr<const AuthzPolicy> in_force = policy();
  // The call's metadata is copied only for a policy with header rules: most have none.
  const AuthzRequest request = AuthzRequestOf(context, path, in_force->matches_headers());
  AuthzPolicy::Decision decision = in_force->Evaluate(request, with_identity);
  if (decision.allowed) {
    if (!with_identity) return std::string();
    if (!decision.identity.empty()) return std::move(decision.identity);
    return FirstIdentity(request.uri_sans, request.dns_sans, request.subject);
  }
  const std::string principal = PrincipalOf(context);
  const std::string who = principal.empty() ? std::string("a caller without a client certificate")
                                            : absl::StrCat("\"", principal, "\"");
  LogDenial(who, request.path, decision.rule);
  // The same words whatever decided: the caller learns nothing of the policy's rules;
  // the log and orderhold_calls_denied_total tell the operator.
  return absl::PermissionDeniedError(absl::StrCat(who, " may not call ", request.path,
                                                  " (the authorization policy does not allow it)"));
}

void Authorizer::LogDenial(absl::string_view who, absl::string_view path, absl::string_view rule) {
  const std::string key = absl::StrCat(rule, " ", path);
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&denials_mu_);
    absl::Time& last = last_denial_logged_[key];
    if (now - last < kDenialLogInterval) return;
    last = now;
  }
  LogInfo(
      "authz_policy: ", who, " may not call ", path,
      rule.empty() ? ": no allow rule matches" : absl::StrCat(": denied by rule \"", rule, "\""),
      " (one line per rule and method per minute; every denial is counted in "
      "orderhold_calls_denied_total)");
}

}  // namespace orderhold::grpc_api
