// Parsing of --redis_url: redis[s]://[[user]:password@]host[:port][,host[:port]...][/db]
// (the schemes of https://www.iana.org/assignments/uri-schemes/prov/redis and .../rediss; rediss
// is TLS). The host part may list several host:port, comma separated, as libpq and MongoDB
// connection strings do: the sentinels in sentinel mode, the seed nodes in cluster mode. An IPv6
// literal is written in brackets, as in any URL (RFC 3986 section 3.2.2): "[::1]:6380". User and
// password (the data nodes' ACL credentials) may be percent-encoded; a lone credential before the
// "@" ("redis://secret@host") is the password, as Redis' own clients read it.
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_URL_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::redis {

// A node's address. `host` is a DNS name or an IP literal (IPv6 without brackets).
struct HostPort {
  std::string host = "127.0.0.1";
  int port = 6379;

  // "host:port" ("[::1]:6379" for IPv6).
  std::string ToString() const;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Where and as whom to connect, parsed from a redis:// or rediss:// URL.
struct RedisEndpoint {
  // The URL's hosts in order (at least one, no two equal; port 6379 when not given).
  std::vector<HostPort> hosts = {HostPort{}};
  bool tls = false;      // rediss://
  std::string user;      // empty: AUTH with the password only (or no AUTH)
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECTed on connect when not 0
  // The URL's credential had no ':' ("redis://x@host"): x is in `password` (the legacy requirepass
  // reading, as redis-cli takes it), unless the caller knows better: ConfigFromFlags reads x as
  // the ACL user when --redis_password_file gives the password.
  bool lone_credential = false;

  // The URL with the password replaced by "****", for logs: the scheme, every host in order and
  // the database ("rediss://app:****@a:1,[::1]:2/0"). The user is percent-encoded where a URL
  // needs it, so the result parses back to the same endpoint (but for the password).
  std::string MaskedUrl() const;
};

// Parses `url`. INVALID_ARGUMENT naming the part that is wrong — the scheme (redis:// or
// rediss://), a %-escape in the user or the password, a port (1-65535), the database (integer >=
// 0), a missing host, an empty element of the host list ("h1,,h2"), a repeated host, an IPv6
// address not in brackets or not valid in them — and, when the URL lists several hosts, which one
// ("host 2"); the message never quotes any of the URL, so it is safe to print whatever the URL
// holds. Thread-safe.
absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_URL_H_
