#include "client/tls_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(bool, tls, false,
          "Connect with TLS (implied by any other --tls_* flag). The server's certificate is "
          "verified against --tls_ca_file, or gRPC's default roots.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CAs that sign the server's certificate; empty: gRPC's default roots.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM client certificate for a server that requires mutual TLS (with --tls_key_file).");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry (and SNI); empty: the target's host. E.g. "
          "--target=10.0.0.7:50051 --tls_server_name=orderhold.example.");

namespace orderhold::client {

absl::StatusOr<TlsOptions> TlsOptionsFromFlags() {
  TlsOptions tls;
  tls.enabled = absl::GetFlag(FLAGS_tls);
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.server_name = absl::GetFlag(FLAGS_tls_server_name);
  tls.enabled = tls.Effective();
  if (absl::Status valid = ValidateTlsOptions(tls); !valid.ok()) return valid;
  return tls;
}

}  // namespace orderhold::client
