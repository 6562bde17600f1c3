#include "server/redis/redis_url.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"

namespace orderhold::redis {
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

// %XX for every byte but RFC 3986's unreserved characters, so that a user holding ':', '@' or
// ',' still reads back as one user.
std::string PercentEncode(absl::string_view in) {
  std::string out;
  for (const char c : in) {
    const auto byte = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(byte, absl::kZeroPad2));
    }
  }
  return out;
}

// One element of the host list: host, host:port, [v6] or [v6]:port. `which` is appended to every
// message (" (host 2)" when the URL lists several hosts), which never quotes the element.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view element, absl::string_view which) {
  const auto invalid = [which](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("redis_url: ", what, which));
  };
  HostPort out;
  absl::string_view host = element;
  std::optional<absl::string_view> port;
  if (absl::ConsumePrefix(&host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return invalid("'[' of an IPv6 host not closed");
    absl::string_view after = host.substr(close + 1);
    host = host.substr(0, close);
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) return invalid("expected :port after ']'");
      port = after;
    }
    in6_addr address;
    if (!host.empty() && inet_pton(AF_INET6, std::string(host).c_str(), &address) != 1) {
      return invalid("not an IPv6 address in brackets");
    }
  } else {
    if (absl::StrContains(host, '[') || absl::StrContains(host, ']')) {
      return invalid("brackets only go around an IPv6 host ([::1]:6379)");
    }
    const size_t colons = std::count(host.begin(), host.end(), ':');
    if (colons > 1) return invalid("an IPv6 host must be in brackets ([::1]:6379)");
    if (colons == 1) {
      const size_t colon = host.find(':');
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
    }
  }
  if (port.has_value() &&
      (!absl::SimpleAtoi(*port, &out.port) || out.port < 1 || out.port > 65535)) {
    return invalid("port must be 1-65535");
  }
  if (host.empty()) return invalid("missing host");
  out.host = std::string(host);
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
    auth = absl::StrCat(PercentEncode(user), password.empty() ? "" : ":****", "@");
  }
  return absl::StrCat(tls ? "rediss://" : "redis://", auth,
                      absl::StrJoin(hosts, ",",
                                    [](std::string* out, const HostPort& host) {
                                      absl::StrAppend(out, host.ToString());
                                    }),
                      "/", db);
}

// No error quotes the URL or a part of it: a malformed URL may hold its password anywhere (in
// "redis://default:hunter2", the host forgotten, it sits where the port goes).
absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url) {
  RedisEndpoint endpoint;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "rediss://")) {
    endpoint.tls = true;
  } else if (!absl::ConsumePrefix(&rest, "redis://")) {
    return absl::InvalidArgumentError("redis_url: must start with redis:// or rediss://");
  }
  // The last '@': a password may hold an unencoded '@'; a host never does.
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
      endpoint.lone_credential = true;
    }
    ORDERHOLD_ASSIGN_OR_RETURN(endpoint.user, PercentDecode(user, "user"));
    ORDERHOLD_ASSIGN_OR_RETURN(endpoint.password, PercentDecode(password, "password"));
  }
  absl::string_view host_list = rest;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    host_list = rest.substr(0, slash);
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!absl::SimpleAtoi(db, &endpoint.db) || endpoint.db < 0)) {
      return absl::InvalidArgumentError("redis_url: database must be an integer >= 0");
    }
  }
  const std::vector<absl::string_view> elements = absl::StrSplit(host_list, ',');
  endpoint.hosts.clear();
  for (size_t i = 0; i < elements.size(); ++i) {
    const std::string which = elements.size() > 1 ? absl::StrCat(" (host ", i + 1, ")") : "";
    if (elements[i].empty() && elements.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis_url: empty element in the host list", which));
    }
    ORDERHOLD_ASSIGN_OR_RETURN(HostPort host, ParseHostPort(elements[i], which));
    if (const auto same = std::find(endpoint.hosts.begin(), endpoint.hosts.end(), host);
        same != endpoint.hosts.end()) {
      return absl::InvalidArgumentError(absl::StrCat("redis_url: host ", i + 1, " repeats host ",
                                                     same - endpoint.hosts.begin() + 1));
    }
    endpoint.hosts.push_back(std::move(host));
  }
  return endpoint;
}

}  // namespace orderhold::redis
