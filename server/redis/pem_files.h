// Loading PEM files into an OpenSSL context with errors that name the flag the file came from.
// This room is the one that links OpenSSL, so it serves both TLS users: the Redis client's own TLS
// (tls_context.cc, redis_connection.cc: --redis_tls_*) and the startup check of the gRPC port's
// files (App::Start: --tls_*), which gRPC reads itself but would only log when unusable.
#ifndef ORDERHOLD_SERVER_REDIS_PEM_FILES_H_
#define ORDERHOLD_SERVER_REDIS_PEM_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

// OpenSSL's SSL_CTX, declared rather than included: grpc/ includes this file, and OpenSSL is the
// redis room's private dependency (server/CMakeLists.txt).
struct ssl_ctx_st;

namespace orderhold::redis {

// OpenSSL's error queue of this thread as one line ("error:...; error:..."), emptying it, or
// `fallback` when it is empty.
std::string SslErrors(absl::string_view fallback);

// Loads the PEM certificate chain `cert_file` (leaf first) and its unencrypted PEM private key
// `key_file` into `ctx`. INVALID_ARGUMENT, starting with the flag the file came from and naming
// the file: "<cert_flag>: cannot load <file>: <OpenSSL's reasons>" (missing, unreadable, not
// PEM), the same for the key, or "<key_flag>: <file> does not match <cert_flag>" when the key
// belongs to another certificate. Thread-safe for distinct contexts.
absl::Status UseCertificateAndKey(ssl_ctx_st* ctx, const std::string& cert_file,
                                  const std::string& key_file, absl::string_view cert_flag,
                                  absl::string_view key_flag);

// The files a TLS server is configured with, and the flags they came from (for errors).
struct ServerPemFiles {
  std::string cert_file;  // PEM certificate chain, leaf first
  std::string key_file;   // its unencrypted PEM private key
  std::string ca_file;    // PEM CAs that verify client certificates; empty: none
  std::string cert_flag, key_flag, ca_flag;
};

// Loads `files` into a scratch TLS server context, as a server would at its first handshake, and
// drops it. UseCertificateAndKey's errors, or INVALID_ARGUMENT "<ca_flag>: cannot load <file>:
// <OpenSSL's reasons>"; INTERNAL when OpenSSL cannot make a context. Thread-safe.
absl::Status CheckServerPemFiles(const ServerPemFiles& files);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_PEM_FILES_H_
