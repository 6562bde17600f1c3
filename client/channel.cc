#include "client/channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace orderhold::client {
namespace {

// The whole of `path` ("" when `path` is empty); INVALID_ARGUMENT "<flag>: cannot read <path>:
// <reason>" when it cannot be opened or is empty.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  if (path.empty()) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream content;
  content << in.rdbuf();
  if (content.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path, ": empty"));
  }
  return content.str();
}

}  // namespace

absl::Status ValidateTlsOptions(const TlsOptions& tls) {
  if (!tls.cert_file.empty() && tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert_file: needs --tls_key_file (its private key)");
  }
  if (tls.cert_file.empty() && !tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls_key_file: needs --tls_cert_file (its certificate)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewChannel(const std::string& target,
                                                          const TlsOptions& tls,
                                                          grpc::ChannelArguments args) {
  if (absl::Status valid = ValidateTlsOptions(tls); !valid.ok()) return valid;
  if (!tls.Effective()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "tls_ca_file");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "tls_cert_file");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key_file, "tls_key_file");
  if (!key.ok()) return key.status();
  ssl.pem_root_certs = *std::move(ca);
  ssl.pem_cert_chain = *std::move(cert);
  ssl.pem_private_key = *std::move(key);
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

}  // namespace orderhold::client
