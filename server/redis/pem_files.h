// Loading PEM files into an OpenSSL context with errors that name the flag the file came from:
// shared by the Redis client's TLS (redis/redis_connection.cc, --redis_tls_*) and the startup
// check of the gRPC port's certificate (grpc/tls_credentials.cc, --tls_*).
#ifndef ORDERHOLD_SERVER_COMMON_OPENSSL_FILES_H_
#define ORDERHOLD_SERVER_COMMON_OPENSSL_FILES_H_

#include <openssl/ssl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace orderhold {

// OpenSSL's error queue of this thread as one line ("error:...; error:..."), emptying it, or
// `fallback` when it is empty.
std::string SslErrors(absl::string_view fallback);

// Loads the PEM certificate chain `cert_file` (leaf first) and its unencrypted PEM private key
// `key_file` into `ctx`. INVALID_ARGUMENT, starting with the flag the file came from and naming
// the file: "<cert_flag>: cannot load <file>: <OpenSSL's reasons>" (missing, unreadable, not
// PEM), the same for the key, or "<key_flag>: <file> does not match <cert_flag>" when the key
// belongs to another certificate. Thread-safe for distinct contexts.
absl::Status UseCertificateAndKey(SSL_CTX* ctx, const std::string& cert_file,
                                  const std::string& key_file, absl::string_view cert_flag,
                                  absl::string_view key_flag);

}  // namespace orderhold

#endif  // ORDERHOLD_SERVER_COMMON_OPENSSL_FILES_H_
