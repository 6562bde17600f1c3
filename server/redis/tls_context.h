// TlsContext: the OpenSSL client context for rediss:// (--redis_tls_*), built once and shared by
// every connection (redis_connection.h). TLS 1.2+; the server's certificate is always verified,
// against --redis_tls_ca_file or the system's CAs; a client certificate is presented when one is
// configured (Redis' `tls-auth-clients yes`). See
// https://redis.io/docs/management/security/encryption/.
//
// Thread-safety: a TlsContext is immutable once created and may be shared by any threads.
#ifndef ORDERHOLD_SERVER_REDIS_TLS_CONTEXT_H_
#define ORDERHOLD_SERVER_REDIS_TLS_CONTEXT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX; kept out of this header.

namespace orderhold::redis {

// TLS settings (the --redis_tls_* flags). File paths are PEM files; empty means not given.
struct RedisTlsOptions {
  std::string ca_file;      // CAs to verify the server with; empty: the system's default CAs
  std::string cert_file;    // client certificate (mutual TLS); needs key_file
  std::string key_file;     // its private key
  std::string server_name;  // name to verify (and send as SNI); empty: the host connected to
};

// An OpenSSL client context built once from RedisTlsOptions and shared by every connection.
class TlsContext {
 public:
  // INVALID_ARGUMENT naming the flag (redis_tls_ca_file, redis_tls_cert_file, redis_tls_key_file)
  // when a file cannot be read or parsed, or the key does not match the certificate, or only one
  // of cert/key is given.
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Create(const RedisTlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* ctx() const { return ctx_; }
  const std::string& server_name() const { return server_name_; }
  // The CAs the server is verified against, for error messages: "redis_tls_ca_file <path>", or
  // "the system's CAs (no redis_tls_ca_file)".
  const std::string& trusted() const { return trusted_; }

 private:
  TlsContext(ssl_ctx_st* ctx, std::string server_name, std::string trusted);
  ssl_ctx_st* ctx_;
  std::string server_name_;
  std::string trusted_;
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_TLS_CONTEXT_H_
