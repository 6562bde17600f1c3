// NewChannel: the one place the client library, orderhold-cli and orderhold-bench make a gRPC
// channel, plaintext or TLS (mutual TLS with a client certificate), from a small options struct.
#ifndef ORDERHOLD_CLIENT_CHANNEL_H_
#define ORDERHOLD_CLIENT_CHANNEL_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace orderhold::client {

// How to reach the server (the --tls* flags of orderhold-cli and orderhold-bench). Default:
// plaintext.
struct TlsOptions {
  // TLS on (--tls). Any of the fields below turns it on too (see Effective()).
  bool enabled = false;
  // PEM bundle of the CAs that sign the server's certificate (--tls_ca_file); empty: gRPC's
  // default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else the roots built into gRPC).
  std::string ca_file;
  // Client certificate chain and its private key, both PEM, for a server that requires mutual TLS
  // (--tls_cert_file, --tls_key_file): give both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry, also sent as SNI (--tls_server_name); empty:
  // the host of the target. For reaching a server by IP or through a tunnel whose certificate
  // names its DNS name.
  std::string server_name;

  // enabled, or any file or the server name given.
  bool Effective() const {
    return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty() ||
           !server_name.empty();
  }
};

// INVALID_ARGUMENT naming the flag when tls_cert_file is given without tls_key_file or the
// reverse. Reads no file.
absl::Status ValidateTlsOptions(const TlsOptions& tls);

// A new channel to `target` (any gRPC target string), plaintext unless tls.Effective(); `args`
// are passed on (the server name override is added to them). The channel connects lazily: an
// unreachable server, or one whose certificate does not verify, shows as UNAVAILABLE on the first
// call. Errors: ValidateTlsOptions's; INVALID_ARGUMENT naming the flag and the file when a file
// cannot be read. Thread-safe.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(
    const std::string& target, const TlsOptions& tls,
    grpc::ChannelArguments args = grpc::ChannelArguments());

}  // namespace orderhold::client

#endif  // ORDERHOLD_CLIENT_CHANNEL_H_
