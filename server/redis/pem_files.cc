#include "server/redis/pem_files.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace orderhold::redis {

std::string SslErrors(absl::string_view fallback) {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!out.empty()) out.append("; ");
    out.append(buffer);
  }
  return out.empty() ? std::string(fallback) : out;
}

absl::Status UseCertificateAndKey(SSL_CTX* ctx, const std::string& cert_file,
                                  const std::string& key_file, absl::string_view cert_flag,
                                  absl::string_view key_flag) {
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_flag, ": cannot load ", cert_file, ": ", SslErrors("")));
  }
  const auto mismatch = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(key_flag, ": ", key_file, " does not match ", cert_flag));
  };
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL 3 compares the key with the certificate while loading it: a key that loaded fine
    // but belongs to another certificate is not "cannot load".
    if (const unsigned long last = ERR_peek_last_error();
        ERR_GET_LIB(last) == ERR_LIB_X509 && ERR_GET_REASON(last) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return mismatch();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(key_flag, ": cannot load ", key_file, ": ", SslErrors("")));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return mismatch();
  }
  return absl::OkStatus();
}

absl::Status CheckServerPemFiles(const ServerPemFiles& files) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        &SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError(SslErrors("SSL_CTX_new failed"));
  if (absl::Status loaded = UseCertificateAndKey(ctx.get(), files.cert_file, files.key_file,
                                                 files.cert_flag, files.key_flag);
      !loaded.ok()) {
    return loaded;
  }
  if (!files.ca_file.empty() &&
      SSL_CTX_load_verify_locations(ctx.get(), files.ca_file.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.ca_flag, ": cannot load ", files.ca_file, ": ", SslErrors("")));
  }
  return absl::OkStatus();
}

}  // namespace orderhold::redis
