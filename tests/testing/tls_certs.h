// TlsCerts: throwaway certificates for TLS tests, made with the openssl command-line tool.
//
// Create(dir) writes into `dir` (created if missing):
//   ca.crt / ca.key              "OrderHold test CA", the CA every other certificate here chains to
//   server.crt / server.key      CN=localhost, SAN DNS:localhost and IP:127.0.0.1, signed by the
//   CA;
//                                extendedKeyUsage serverAuth and clientAuth, so Redis can also
//                                present it to its primary with tls-replication
//   client.crt / client.key      CN=orderhold-test-client, clientAuth, signed by the CA (mutual
//   TLS) other_ca.crt / other_ca.key  "Unrelated test CA": trusting it instead of ca.crt must make
//                                verification of server.crt fail (the "wrong CA" case)
// Keys are EC P-256 (unencrypted PKCS#8 PEM), which redis-server 7.0 accepts and openssl makes in
// milliseconds; certificates are valid from now for 2 days. The whole set takes about 0.1 s. The
// files stay until the caller removes `dir` (TlsCerts does not own it; pass a RedisServer's or a
// test's temporary directory).
//
//   ASSERT_OK_AND_ASSIGN(TlsCerts certs, TlsCerts::Create(::testing::TempDir() + "/certs"));
//   RedisServerOptions o;
//   o.tls = RedisTlsOptions{.cert_file = certs.server_cert(), .key_file = certs.server_key(),
//                           .ca_cert_file = certs.ca_cert(), .auth_clients = "yes"};
//
// Errors: NOT_FOUND when `openssl` is not installed (apt-get install openssl); INTERNAL when a
// directory cannot be made or openssl fails (its command line and output in the message);
// DEADLINE_EXCEEDED if openssl hangs for 30 s.
// Thread-safety: Create() is thread-safe for distinct directories; a TlsCerts is an immutable
// value.
#ifndef ORDERHOLD_TESTS_TESTING_TLS_CERTS_H_
#define ORDERHOLD_TESTS_TESTING_TLS_CERTS_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace orderhold::testing {

class TlsCerts {
 public:
  // Generates the set described above into `dir`. Existing files of the same names are replaced.
  static absl::StatusOr<TlsCerts> Create(absl::string_view dir);

  // Issues `<name>.crt` / `<name>.key` in dir(): a client certificate (clientAuth) signed by
  // ca.crt with CN=<name> and the one URI SAN `uri_san` (a SPIFFE ID such as
  // "spiffe://orderhold.example/payments"), for tests of principals. Errors as Create's.
  absl::Status IssueClient(absl::string_view name, absl::string_view uri_san) const;
  std::string cert(absl::string_view name) const { return Path(absl::StrCat(name, ".crt")); }
  std::string key(absl::string_view name) const { return Path(absl::StrCat(name, ".key")); }

  // The directory given to Create().
  const std::string& dir() const { return dir_; }
  // Absolute (if `dir` was) paths of the PEM files.
  std::string ca_cert() const { return Path("ca.crt"); }
  std::string ca_key() const { return Path("ca.key"); }
  std::string server_cert() const { return Path("server.crt"); }
  std::string server_key() const { return Path("server.key"); }
  std::string client_cert() const { return Path("client.crt"); }
  std::string client_key() const { return Path("client.key"); }
  std::string other_ca_cert() const { return Path("other_ca.crt"); }
  std::string other_ca_key() const { return Path("other_ca.key"); }

 private:
  explicit TlsCerts(std::string dir) : dir_(std::move(dir)) {}
  std::string Path(absl::string_view file) const;

  std::string dir_;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_TLS_CERTS_H_
