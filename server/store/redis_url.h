// Parsing of --redis_url: redis://[[user]:password@]host[:port][/db]
// (the scheme of https://www.iana.org/assignments/uri-schemes/prov/redis; no TLS: hiredis 0.14 has
// none). User and password may be percent-encoded.
#ifndef ORDERHOLD_SERVER_STORE_REDIS_URL_H_
#define ORDERHOLD_SERVER_STORE_REDIS_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::store {

// Where and as whom to connect, parsed from a redis:// URL.
struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
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
