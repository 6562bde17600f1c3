#include "server/grpc/trusted_proxies.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace orderhold::grpc_api {
namespace {

// An address: its family and bytes (an IPv4-mapped IPv6 address as its IPv4 one).
struct Address {
  int family = 0;
  std::array<uint8_t, 16> bytes{};
};

std::optional<Address> ParseAddress(absl::string_view text) {
  const std::string s(absl::StripAsciiWhitespace(text));
  Address address;
  if (inet_pton(AF_INET, s.c_str(), address.bytes.data()) == 1) {
    address.family = AF_INET;
    return address;
  }
  if (inet_pton(AF_INET6, s.c_str(), address.bytes.data()) != 1) return std::nullopt;
  address.family = AF_INET6;
  constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(kMapped, kMapped + 12, address.bytes.begin())) {
    Address v4;
    v4.family = AF_INET;
    std::copy(address.bytes.begin() + 12, address.bytes.end(), v4.bytes.begin());
    return v4;
  }
  return address;
}

std::string Format(const Address& address) {
  char out[INET6_ADDRSTRLEN] = {};
  inet_ntop(address.family, address.bytes.data(), out, sizeof(out));
  return out;
}

int Bits(int family) { return family == AF_INET ? 32 : 128; }

// Whether the first `prefix` bits of a and b agree.
bool SamePrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int prefix) {
  for (int bit = 0; bit < prefix; bit += 8) {
    const int n = std::min(8, prefix - bit);
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - n));
    if ((a[bit / 8] & mask) != (b[bit / 8] & mask)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<TrustedProxies> TrustedProxies::Parse(const std::vector<std::string>& networks) {
  if (networks.size() > kMaxNetworks) {
    return absl::InvalidArgumentError(absl::StrCat("trusted_proxies: at most ", kMaxNetworks,
                                                   " networks, got ", networks.size()));
  }
  TrustedProxies proxies;
  for (const std::string& entry : networks) {
    auto bad = [&entry](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("trusted_proxies: \"", entry.substr(0, 64), "\" ", why));
    };
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, absl::MaxSplits('/', 1));
    const std::optional<Address> address = ParseAddress(parts[0]);
    if (!address.has_value()) return bad("is not an IP address or network (CIDR)");
    Network network{address->family, address->bytes, Bits(address->family)};
    if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], &network.prefix) || network.prefix < 0 ||
                              network.prefix > Bits(network.family))) {
      return bad(absl::StrCat("has no prefix length 0-", Bits(network.family)));
    }
    std::array<uint8_t, 16> zero{};
    std::array<uint8_t, 16> host_bits = network.bytes;
    for (int bit = 0; bit < network.prefix; ++bit) {
      host_bits[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
    }
    if (host_bits != zero) return bad("has host bits set beyond its prefix length");
    proxies.networks_.push_back(network);
  }
  return proxies;
}

bool TrustedProxies::Contains(absl::string_view ip) const {
  const std::optional<Address> address = ParseAddress(ip);
  if (!address.has_value()) return false;
  for (const Network& network : networks_) {
    if (network.family == address->family &&
        SamePrefix(network.bytes, address->bytes, network.prefix)) {
      return true;
    }
  }
  return false;
}

std::string TrustedProxies::ClientOf(absl::string_view peer_ip,
                                     const std::vector<absl::string_view>& forwarded) const {
  std::string client(peer_ip);
  if (!Contains(peer_ip)) return client;
  size_t bytes = 0;
  for (absl::string_view value : forwarded) bytes += value.size();
  if (bytes > kMaxForwardedBytes) return client;
  std::vector<absl::string_view> hops;
  for (absl::string_view value : forwarded) {
    for (absl::string_view hop : absl::StrSplit(value, ',')) hops.push_back(hop);
  }
  for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop) {
    const std::optional<Address> address = ParseAddress(*hop);
    if (!address.has_value()) return client;  // the last trusted hop's own address
    client = Format(*address);
    if (!Contains(client)) return client;
  }
  return client;  // every hop trusted: the leftmost one
}

std::string TrustedProxies::ToString() const {
  std::vector<std::string> out;
  for (const Network& network : networks_) {
    out.push_back(
        absl::StrCat(Format(Address{network.family, network.bytes}), "/", network.prefix));
  }
  return absl::StrJoin(out, ",");
}

}  // namespace orderhold::grpc_api
