#include "server/redis/tls_context.h"

#include <openssl/ssl.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/redis/pem_files.h"

namespace orderhold::redis {

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Create(
    const RedisTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "redis_tls_cert_file, redis_tls_key_file: give both (mutual TLS) or neither");
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return absl::InternalError(SslErrors("SSL_CTX_new failed"));
  std::shared_ptr<const TlsContext> context(new TlsContext(
      ctx, options.server_name,
      options.ca_file.empty() ? "the system's CAs (no redis_tls_ca_file)"
                              : absl::StrCat("redis_tls_ca_file ", options.ca_file)));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (options.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis_tls_ca_file: none given and the system CAs cannot be loaded: ", SslErrors("")));
    }
  } else if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis_tls_ca_file: cannot load ", options.ca_file, ": ", SslErrors("")));
  }
  if (!options.cert_file.empty()) {
    ORDERHOLD_RETURN_IF_ERROR(UseCertificateAndKey(ctx, options.cert_file, options.key_file,
                                                   "redis_tls_cert_file", "redis_tls_key_file"));
  }
  return context;
}

TlsContext::TlsContext(ssl_ctx_st* ctx, std::string server_name, std::string trusted)
    : ctx_(ctx), server_name_(std::move(server_name)), trusted_(std::move(trusted)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

}  // namespace orderhold::redis
