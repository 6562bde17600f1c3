// TrustedProxies (server/grpc/trusted_proxies.h): which networks are trusted, and which address of
// an x-forwarded-for chain names the client.
#include "server/grpc/trusted_proxies.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::grpc_api {
namespace {

using ::orderhold::testing::StatusIs;
using ::testing::HasSubstr;

TrustedProxies Parsed(const std::vector<std::string>& networks) {
  absl::StatusOr<TrustedProxies> proxies = TrustedProxies::Parse(networks);
  EXPECT_TRUE(proxies.ok()) << proxies.status();
  return proxies.value_or(TrustedProxies());
}

TEST(TrustedProxiesTest, ParsesNetworksAndRefusesWhatIsNotOne) {
  const TrustedProxies proxies = Parsed({"10.0.0.0/8", "192.168.1.7", "fd00::/8"});
  EXPECT_EQ(proxies.ToString(), "10.0.0.0/8,192.168.1.7/32,fd00::/8");
  EXPECT_TRUE(proxies.Contains("10.1.2.3"));
  EXPECT_TRUE(proxies.Contains("::ffff:10.1.2.3"));  // IPv4-mapped
  EXPECT_TRUE(proxies.Contains("192.168.1.7"));
  EXPECT_FALSE(proxies.Contains("192.168.1.8"));
  EXPECT_TRUE(proxies.Contains("fd12::1"));
  EXPECT_FALSE(proxies.Contains("fe80::1"));
  EXPECT_FALSE(proxies.Contains("not-an-address"));
  for (const char* bad :
       {"10.0.0.0/33", "10.0.0.1/8", "example.com", "10.0.0.0/x", "fd00::/129", ""}) {
    EXPECT_THAT(TrustedProxies::Parse({std::string(bad)}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trusted_proxies: ")))
        << bad;
  }
  EXPECT_THAT(TrustedProxies::Parse(std::vector<std::string>(101, "10.0.0.1")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 100")));
}

TEST(TrustedProxiesTest, TheClientIsTheRightmostAddressNoTrustedProxyAppended) {
  const TrustedProxies proxies = Parsed({"10.0.0.0/8"});
  // Not from a trusted proxy: the peer, whatever the header says.
  EXPECT_EQ(proxies.ClientOf("203.0.113.9", {"198.51.100.1"}), "203.0.113.9");
  // From one: the address it appended.
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"198.51.100.1"}), "198.51.100.1");
  // What the client wrote itself (left of it) is never reached...
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"192.0.2.66, 198.51.100.1"}), "198.51.100.1");
  // ...unless the hops after it are trusted proxies too; values of repeated headers chain.
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"198.51.100.1, 10.0.0.2", "10.0.0.3"}), "198.51.100.1");
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {" ::ffff:198.51.100.1 "}), "198.51.100.1");
  // No header, an entry that is no address, a header over the bound, every hop trusted: the last
  // trusted hop (shared by all behind it, never another client's).
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {}), "10.0.0.1");
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"198.51.100.1, unknown"}), "10.0.0.1");
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"198.51.100.1, 10.0.0.2, garbage"}), "10.0.0.1");
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {std::string(4097, ' ')}), "10.0.0.1");
  EXPECT_EQ(proxies.ClientOf("10.0.0.1", {"10.0.0.5, 10.0.0.2"}), "10.0.0.5");
  // None trusted: always the peer.
  EXPECT_EQ(TrustedProxies().ClientOf("10.0.0.1", {"198.51.100.1"}), "10.0.0.1");
}

}  // namespace
}  // namespace orderhold::grpc_api
