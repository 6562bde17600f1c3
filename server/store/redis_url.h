// Parsing of --redis_url: redis[s]://[[user]:password@]host[:port][,host[:port]...][/db]
// (the schemes of https://www.iana.org/assignments/uri-schemes/prov/redis and .../rediss; rediss
// is TLS). The host part may list several host:port, comma separated, as libpq and MongoDB
// connection strings do: the sentinels in sentinel mode, the seed nodes in cluster mode. User and
// password (the data nodes' ACL credentials) may be percent-encoded.
#ifndef ORDERHOLD_SERVER_STORE_REDIS_URL_H_
#define ORDERHOLD_SERVER_STORE_REDIS_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::store {

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
  // The URL's hosts in order (at least one; port 6379 when not given).
  std::vector<HostPort> hosts = {HostPort{}};
  bool tls = false;      // rediss://
  std::string user;      // empty: AUTH with the password only (or no AUTH)
  std::string password;  // empty: no AUTH
  int db = 0;            // SELECTed on connect when not 0

  // The URL with the password replaced by "****", for logs ("redis://app:****@redis.local:6380/2").
  std::string MaskedUrl() const;
};

// Parses `url`. INVALID_ARGUMENT naming the part that is wrong (scheme, %-escape in the user or the
// password, port 1-65535, database >= 0, host) without quoting any of the URL, so the message is
// safe to print whatever the URL holds. Thread-safe.
absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url);

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_URL_H_
