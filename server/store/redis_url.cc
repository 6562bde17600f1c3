#include "server/store/redis_url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"

namespace orderhold::store {
namespace {

// Decodes %XX escapes of the URL's `part` ("user" or "password"). The error names the part, never
// its text: the text may be the password.
absl::StatusOr<std::string> PercentDecode(absl::string_view in, absl::string_view part) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= in.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis_url: truncated %-escape in the ", part));
    }
    for (int k = 1; k <= 2; ++k) {
      const char c = in[i + k];
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(absl::StrCat("redis_url: bad %-escape in the ", part));
      }
      value = value * 16 + (absl::ascii_isdigit(static_cast<unsigned char>(c))
                                ? c - '0'
                                : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10);
    }
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

}  // namespace

std::string HostPort::ToString() const {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string RedisEndpoint::MaskedUrl() const {
  std::string auth;
  if (!user.empty() || !password.empty()) {
    auth = absl::StrCat(user, password.empty() ? "" : ":****", "@");
  }
  return absl::StrCat("redis://", auth, hosts.front().host, ":", hosts.front().port, "/", db);
}

// No error quotes the URL or a part of it: a malformed URL may hold its password anywhere (in
// "redis://default:hunter2", the host forgotten, it sits where the port goes).
absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url) {
  RedisEndpoint endpoint;
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "redis://")) {
    return absl::InvalidArgumentError("redis_url: must start with redis://");
  }
  if (const size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    absl::string_view auth = rest.substr(0, at);
    rest = rest.substr(at + 1);
    absl::string_view user = auth, password;
    if (const size_t colon = auth.find(':'); colon != absl::string_view::npos) {
      user = auth.substr(0, colon);
      password = auth.substr(colon + 1);
    } else {
      // "redis://secret@host": a lone credential is the password (legacy requirepass).
      password = auth;
      user = "";
    }
    ORDERHOLD_ASSIGN_OR_RETURN(endpoint.user, PercentDecode(user, "user"));
    ORDERHOLD_ASSIGN_OR_RETURN(endpoint.password, PercentDecode(password, "password"));
  }
  absl::string_view hostport = rest;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hostport = rest.substr(0, slash);
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!absl::SimpleAtoi(db, &endpoint.db) || endpoint.db < 0)) {
      return absl::InvalidArgumentError("redis_url: database must be an integer >= 0");
    }
  }
  if (const size_t colon = hostport.rfind(':');
      colon != absl::string_view::npos && hostport.find(']') == absl::string_view::npos) {
    absl::string_view port = hostport.substr(colon + 1);
    int& number = endpoint.hosts.front().port;
    if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
      return absl::InvalidArgumentError("redis_url: port must be 1-65535");
    }
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) return absl::InvalidArgumentError("redis_url: missing host");
  endpoint.hosts.front().host = std::string(hostport);
  return endpoint;
}

}  // namespace orderhold::store
