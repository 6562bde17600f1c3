// TrustedProxies: the networks of the proxies in front of the gRPC port (--trusted_proxies), so
// that a caller without a client certificate is counted by its own address rather than by its
// proxy's: behind an L7 proxy every call comes from the proxy's address, and one caller could
// use up, for example, --max_watches_per_caller for everyone behind it.
//
// A call whose peer is one of them names its client in the `x-forwarded-for` header (the de facto
// standard, https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/X-Forwarded-For: each proxy
// appends the address it received the request from). Only addresses appended by trusted proxies
// are believed: the list is read from the right, past every trusted proxy, and the first address
// that is not one is the client (an address the client wrote itself, further left, is never
// reached unless every proxy after it is trusted). A call from any other peer is keyed by that
// peer's address, whatever its headers say.
//
// Fails closed: an entry that is not an IP address, or a header over kMaxForwardedBytes, stops the
// walk at the last trusted hop, so the call counts against that proxy's address (shared, never
// another client's).
//
// Immutable once parsed; thread-safe.
#ifndef ORDERHOLD_SERVER_GRPC_TRUSTED_PROXIES_H_
#define ORDERHOLD_SERVER_GRPC_TRUSTED_PROXIES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orderhold::grpc_api {

class TrustedProxies {
 public:
  // At most this many networks, and this many bytes of x-forwarded-for read (all its values).
  static constexpr size_t kMaxNetworks = 100;
  static constexpr size_t kMaxForwardedBytes = 4096;

  TrustedProxies() = default;  // none: every call is keyed by its peer

  // Parses networks in CIDR notation ("10.0.0.0/8", "fd00::/8"; a bare address is one host).
  // INVALID_ARGUMENT "trusted_proxies: ..." naming an entry that is not one (a bad address, a
  // prefix length out of range, host bits set), or a list over kMaxNetworks.
  static absl::StatusOr<TrustedProxies> Parse(const std::vector<std::string>& networks);

  bool empty() const { return networks_.empty(); }
  // Whether `ip` (textual IPv4 or IPv6; an IPv4-mapped IPv6 address counts as its IPv4 one) is in
  // one of the networks. False for anything that is not an address.
  bool Contains(absl::string_view ip) const;

  // The client of a call from `peer_ip` carrying the x-forwarded-for values `forwarded` (each a
  // comma-separated list, in arrival order): `peer_ip` itself unless it is trusted; else the
  // rightmost address that is not a trusted proxy (see the file comment), normalized
  // ("::ffff:10.0.0.1" as "10.0.0.1").
  std::string ClientOf(absl::string_view peer_ip,
                       const std::vector<absl::string_view>& forwarded) const;

  // The networks as given, normalized ("10.0.0.0/8"), for DescribeConfig.
  std::string ToString() const;

 private:
  struct Network {
    int family = 0;                   // AF_INET or AF_INET6
    std::array<uint8_t, 16> bytes{};  // 4 used for AF_INET
    int prefix = 0;
  };
  std::vector<Network> networks_;
};

}  // namespace orderhold::grpc_api

#endif  // ORDERHOLD_SERVER_GRPC_TRUSTED_PROXIES_H_
