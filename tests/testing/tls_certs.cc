#include "tests/testing/tls_certs.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "tests/testing/os_util.h"

namespace orderhold::testing {
namespace {

// Our own openssl config, so the result does not depend on the system's openssl.cnf defaults.
constexpr char kOpensslConfig[] = R"(# Written by orderhold::testing::TlsCerts.
[req]
distinguished_name = dn
prompt = no
[dn]
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
)";

constexpr char kDays[] = "2";

std::vector<std::string> NewKeyArgs() {
  return {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
}

}  // namespace

std::string TlsCerts::Path(absl::string_view file) const { return absl::StrCat(dir_, "/", file); }

absl::StatusOr<TlsCerts> TlsCerts::Create(absl::string_view dir) {
  ORDERHOLD_RETURN_IF_ERROR(FindExecutable("openssl", "openssl").status());
  std::error_code ec;
  std::filesystem::create_directories(std::string(dir), ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir -p ", dir, ": ", ec.message()));
  TlsCerts certs{std::string(dir)};
  const std::string config = certs.Path("openssl.cnf");
  {
    std::ofstream out(config);
    out << kOpensslConfig;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", config));
  }

  // A self-signed CA.
  auto make_ca = [&](absl::string_view name, absl::string_view cn) -> absl::Status {
    std::vector<std::string> args = {"openssl", "req",         "-x509", "-config",
                                     config,    "-extensions", "ca_ext"};
    for (std::string& a : NewKeyArgs()) args.push_back(std::move(a));
    args.insert(args.end(), {"-days", kDays, "-subj", absl::StrCat("/CN=", cn), "-keyout",
                             certs.Path(absl::StrCat(name, ".key")), "-out",
                             certs.Path(absl::StrCat(name, ".crt"))});
    return RunProgram(args).status();
  };
  // A key and a certificate for `cn` signed by ca.crt, with the extensions of `section`.
  auto make_leaf = [&](absl::string_view name, absl::string_view cn, absl::string_view section,
                       absl::string_view serial) -> absl::Status {
    const std::string csr = certs.Path(absl::StrCat(name, ".csr"));
    std::vector<std::string> req = {"openssl", "req", "-new", "-config", config};
    for (std::string& a : NewKeyArgs()) req.push_back(std::move(a));
    req.insert(req.end(), {"-subj", absl::StrCat("/CN=", cn), "-keyout",
                           certs.Path(absl::StrCat(name, ".key")), "-out", csr});
    ORDERHOLD_RETURN_IF_ERROR(RunProgram(req).status());
    ORDERHOLD_RETURN_IF_ERROR(
        RunProgram({"openssl", "x509", "-req", "-in", csr, "-CA", certs.ca_cert(), "-CAkey",
                    certs.ca_key(), "-set_serial", std::string(serial), "-days", kDays, "-extfile",
                    config, "-extensions", std::string(section), "-out",
                    certs.Path(absl::StrCat(name, ".crt"))})
            .status());
    std::filesystem::remove(csr, ec);
    return absl::OkStatus();
  };

  ORDERHOLD_RETURN_IF_ERROR(make_ca("ca", "OrderHold test CA"));
  ORDERHOLD_RETURN_IF_ERROR(make_leaf("server", "localhost", "server_ext", "1001"));
  ORDERHOLD_RETURN_IF_ERROR(make_leaf("client", "orderhold-test-client", "client_ext", "1002"));
  ORDERHOLD_RETURN_IF_ERROR(make_ca("other_ca", "Unrelated test CA"));
  return certs;
}

absl::Status TlsCerts::IssueClient(absl::string_view name, absl::string_view uri_san) const {
  const std::string ext = Path(absl::StrCat(name, ".ext"));
  {
    std::ofstream out(ext);
    out << "[ext]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\n"
           "extendedKeyUsage = clientAuth\nsubjectAltName = URI:"
        << uri_san << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", ext));
  }
  const std::string csr = Path(absl::StrCat(name, ".csr"));
  std::vector<std::string> req = {"openssl", "req", "-new", "-config", Path("openssl.cnf")};
  for (std::string& a : NewKeyArgs()) req.push_back(std::move(a));
  req.insert(req.end(), {"-subj", absl::StrCat("/CN=", name), "-keyout", key(name), "-out", csr});
  ORDERHOLD_RETURN_IF_ERROR(RunProgram(req).status());
  // A serial of its own per name (the CA's other leaves use 1001 and 1002).
  const std::string serial =
      absl::StrCat(2000 + std::hash<std::string>()(std::string(name)) % 100000);
  ORDERHOLD_RETURN_IF_ERROR(RunProgram({"openssl", "x509", "-req", "-in", csr, "-CA", ca_cert(),
                                        "-CAkey", ca_key(), "-set_serial", serial, "-days", kDays,
                                        "-extfile", ext, "-extensions", "ext", "-out", cert(name)})
                                .status());
  std::error_code ec;
  std::filesystem::remove(csr, ec);
  std::filesystem::remove(ext, ec);
  return absl::OkStatus();
}

}  // namespace orderhold::testing
