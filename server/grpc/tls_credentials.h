// The gRPC port's credentials: plaintext, TLS, or mutual TLS, with certificates re-read from disk
// so that a renewed certificate is served without a restart.
//
// Rotation. The files are watched by gRPC's FileWatcherCertificateProvider (grpcpp/security/
// tls_certificate_provider.h, experimental in gRPC 1.51; the idea and the API are described in
// grpc.io's "Credential Reloading on File Changes" guide). Every `refresh_interval` it reads the
// key, the certificate chain and the client CAs again; when they changed, new TLS handshakes use
// the new ones and connections already open keep theirs. This is what cert-manager (a Secret it
// renews) and the kubelet (which updates a mounted Secret by swapping a `..data` symlink, so key
// and certificate change together) need. Replacing the key and the certificate by two separate
// renames can, for at most one interval, pair a new key with an old certificate: gRPC 1.51 loads
// such a pair as it is and every handshake fails until the next read (checked by hand with the
// binaries): swap a directory symlink instead. A file missing at a read is logged by gRPC (every
// interval) and the pair loaded last stays in use.
// The files are also checked once here at startup, so a wrong path or a key that does not belong
// to the certificate is a startup error instead of a server that refuses every handshake.
//
// Health (grpc.health.v1) and reflection share the port, and so its credentials. The /metrics
// port is a separate plain HTTP listener (prometheus-cpp) and is not covered.
#ifndef ORDERHOLD_SERVER_GRPC_TLS_CREDENTIALS_H_
#define ORDERHOLD_SERVER_GRPC_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"

namespace orderhold::grpc_api {

// The TLS settings of the gRPC port (--tls_* flags of orderhold-server). All empty: plaintext.
struct ServerTlsOptions {
  // PEM certificate chain the server presents, leaf first (--tls_cert_file); needs key_file.
  std::string cert_file;
  // PEM private key of cert_file's leaf (--tls_key_file), unencrypted.
  std::string key_file;
  // PEM bundle of the CAs that sign client certificates (--tls_client_ca_file). When set, every
  // client must present a certificate that verifies against it (mutual TLS); needs cert_file.
  std::string client_ca_file;
  // How often the files are read again (--tls_refresh_interval); whole seconds, at least 1 s.
  // 60 s by default: a renewed certificate is served within a minute, long before the old one
  // expires (cert-manager renews at two thirds of the lifetime), for 3 small file reads a minute.
  absl::Duration refresh_interval = absl::Seconds(60);

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// INVALID_ARGUMENT naming the flag when the settings do not fit together: cert_file without
// key_file or the reverse; client_ca_file without cert_file and key_file (mutual TLS is TLS
// first); refresh_interval under 1 s or not whole seconds (gRPC takes seconds). Reads no file.
absl::Status ValidateServerTlsOptions(const ServerTlsOptions& options);

// The credentials for ServerBuilder::AddListeningPort: grpc::InsecureServerCredentials() when
// TLS is off, else TLS served from the watched files (see the top of this file), requiring and
// verifying a client certificate when client_ca_file is set. `options` are as
// ValidateServerTlsOptions accepts them (config.cc's ValidateConfig checks them once, in
// ConfigFromFlags, before App::Start calls this). Errors: INVALID_ARGUMENT naming the flag
// (tls_cert_file, tls_key_file, tls_client_ca_file) and the file when a file cannot be read or
// holds no PEM certificate or key, or when the key does not belong to the certificate. Thread-safe;
// the watcher it starts lives as long as the credentials (and so the server) do.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options);

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_TLS_CREDENTIALS_H_
