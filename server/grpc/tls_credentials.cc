#include "server/grpc/tls_credentials.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "server/common/status_macros.h"
#include "server/redis/pem_files.h"

namespace orderhold::grpc_api {
absl::Status ValidateServerTlsOptions(const ServerTlsOptions& options) {
  if (!options.cert_file.empty() && options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert_file: needs --tls_key_file (the certificate's private key)");
  }
  if (options.cert_file.empty() && !options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "tls_key_file: needs --tls_cert_file (the key's certificate)");
  }
  if (!options.client_ca_file.empty() && !options.enabled()) {
    return absl::InvalidArgumentError(
        "tls_client_ca_file: needs --tls_cert_file and --tls_key_file (mutual TLS is TLS with a "
        "client certificate)");
  }
  if (options.refresh_interval < absl::Seconds(1) ||
      options.refresh_interval != absl::Seconds(absl::ToInt64Seconds(options.refresh_interval))) {
    return absl::InvalidArgumentError("tls_refresh_interval: must be whole seconds, at least 1s");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options) {
  if (!options.enabled()) return grpc::InsecureServerCredentials();
  // The files as gRPC will read them, checked once first (with OpenSSL, which the redis room
  // links): gRPC itself only logs a file it cannot use and then fails every handshake, which
  // would make a typo look like a network problem.
  ORDERHOLD_RETURN_IF_ERROR(
      redis::CheckServerPemFiles({options.cert_file, options.key_file, options.client_ca_file,
                                  "tls_cert_file", "tls_key_file", "tls_client_ca_file"}));
  // An empty root path: no client CAs watched (server-only TLS).
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.key_file, options.cert_file, options.client_ca_file,
      static_cast<unsigned int>(absl::ToInt64Seconds(options.refresh_interval)));
  grpc::experimental::TlsServerCredentialsOptions tls(std::move(provider));
  tls.watch_identity_key_cert_pairs();
  if (options.client_ca_file.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

}  // namespace orderhold::grpc_api
