// TLS to Redis (rediss://) through RedisHoldStore against a real redis-server with a TLS port:
// what verifies (the CA, the DNS and IP names of the certificate, mutual TLS) and what fails,
// each failure with a message an operator can act on and nothing granted. The certificates come
// from TlsCerts (server.crt: CN=localhost, SAN DNS:localhost and IP:127.0.0.1). "Nothing
// granted" is checked on the fixture's plain port: the database stays empty.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis_store.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::RedisServerOptions;
using ::orderhold::testing::StatusIs;
using ::orderhold::testing::TlsCerts;
using ::testing::AllOf;
using ::testing::HasSubstr;

class RedisTlsTest : public ::testing::Test {
 protected:
  // One set of certificates for the suite (openssl takes ~0.1 s per set).
  static void SetUpTestSuite() {
    auto dir = orderhold::testing::MakeTempDir("tls-test");
    ASSERT_THAT(dir, IsOk());
    dir_ = new std::string(*dir);
    auto certs = TlsCerts::Create(*dir_);
    ASSERT_THAT(certs, IsOk());
    certs_ = new TlsCerts(*certs);
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ignored);
    delete certs_;
    delete dir_;
    certs_ = nullptr;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(certs_, nullptr);
    ASSERT_OK_AND_ASSIGN(redis_, StartRedis("no"));
  }

  // A redis-server with a TLS port beside its plain one; `auth_clients` is its
  // tls-auth-clients ("yes": mutual TLS).
  static absl::StatusOr<std::unique_ptr<RedisServer>> StartRedis(const std::string& auth_clients) {
    RedisServerOptions options;
    options.tls = orderhold::testing::RedisTlsOptions{.cert_file = certs_->server_cert(),
                                                      .key_file = certs_->server_key(),
                                                      .ca_cert_file = certs_->ca_cert(),
                                                      .auth_clients = auth_clients};
    return RedisServer::Start(options);
  }

  // The store's TLS settings (the --redis_tls_* flags); empty means not given.
  static redis::RedisTlsOptions Tls(std::string ca_file, std::string cert_file = "",
                                    std::string key_file = "") {
    redis::RedisTlsOptions tls;
    tls.ca_file = std::move(ca_file);
    tls.cert_file = std::move(cert_file);
    tls.key_file = std::move(key_file);
    return tls;
  }
  // TLS settings that verify the fixture's server certificate.
  static redis::RedisTlsOptions GoodTls() { return Tls(certs_->ca_cert()); }

  // A store talking to `address`, over TLS with `tls` unless it is nullopt. Short timeouts: the
  // failures here are immediate, and a mistaken hang shows as DEADLINE_EXCEEDED soon.
  absl::StatusOr<std::unique_ptr<RedisHoldStore>> MakeStore(
      const redis::HostPort& address, const std::optional<redis::RedisTlsOptions>& tls) {
    RedisStoreOptions options;
    options.client.topology = std::make_shared<redis::StandaloneTopology>(address);
    if (tls.has_value()) {
      ORDERHOLD_ASSIGN_OR_RETURN(options.client.node.tls, redis::TlsContext::Create(*tls));
    }
    options.client.connections = 1;
    options.client.node.connect_timeout = absl::Milliseconds(500);
    options.client.command_timeout = absl::Seconds(1);
    options.client.retry_backoff = absl::Milliseconds(50);
    options.key_prefix = "tls";
    return ConnectRedisStore(std::move(options));
  }

  // One PlaceHold through a store built as MakeStore does.
  absl::StatusOr<PlaceHoldResult> PlaceVia(const redis::HostPort& address,
                                           const std::optional<redis::RedisTlsOptions>& tls) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisHoldStore> store, MakeStore(address, tls));
    return Await<PlaceHoldResult>([&](auto done) {
      store->PlaceHold(PlaceHoldArgs{"alice", "o1", absl::Minutes(1), 3, 0, {}},
                       CallOptions{absl::Now() + absl::Seconds(3), std::nullopt}, std::move(done));
    });
  }

  redis::HostPort TlsPort(const std::string& host = "127.0.0.1") const {
    return redis::HostPort{host, redis_->tls_port()};
  }
  redis::HostPort PlainPort() const { return redis::HostPort{"127.0.0.1", redis_->port()}; }

  // Keys in the database, read over the fixture's plain connection: "0" means nothing granted.
  std::string Keys() { return redis_->Command({"DBSIZE"}).value_or("(error)"); }

  static inline std::string* dir_ = nullptr;
  static inline TlsCerts* certs_ = nullptr;
  std::unique_ptr<RedisServer> redis_;
};

TEST_F(RedisTlsTest, VerifiedByTheCaAndTheIpSanWhenConnectingByIp) {
  auto placed = PlaceVia(TlsPort("127.0.0.1"), GoodTls());
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_NE(Keys(), "0");
}

TEST_F(RedisTlsTest, VerifiedByTheDnsSanWhenConnectingByName) {
  auto placed = PlaceVia(TlsPort("localhost"), GoodTls());
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->outcome, PlaceHoldResult::Outcome::kCreated);
}

TEST_F(RedisTlsTest, ServerNameOverridesTheHost) {
  // By IP, verified for the certificate's DNS name instead.
  redis::RedisTlsOptions tls = GoodTls();
  tls.server_name = "localhost";
  EXPECT_THAT(PlaceVia(TlsPort("127.0.0.1"), tls), IsOk());
}

TEST_F(RedisTlsTest, WrongCaIsAClearErrorAndGrantsNothing) {
  const redis::RedisTlsOptions tls = Tls(certs_->other_ca_cert());
  EXPECT_THAT(PlaceVia(TlsPort(), tls),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("certificate verify failed"),
                             HasSubstr(absl::StrCat("redis_tls_ca_file ", certs_->other_ca_cert())),
                             HasSubstr(TlsPort().ToString()))));
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, WithoutCaFileTheSystemCasVerifyAndRefuseATestCa) {
  // Verification is never off: no --redis_tls_ca_file means the system's CAs.
  EXPECT_THAT(PlaceVia(TlsPort(), redis::RedisTlsOptions{}),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("certificate verify failed"),
                             HasSubstr("the system's CAs (no redis_tls_ca_file)"))));
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, WrongServerNameIsAClearErrorNamingTheName) {
  // A DNS name, and an IP: an IP server name is checked against the IP SANs (127.0.0.1 only),
  // not skipped.
  for (const char* name : {"wrong.example", "127.0.0.2"}) {
    SCOPED_TRACE(name);
    redis::RedisTlsOptions tls = GoodTls();
    tls.server_name = name;
    EXPECT_THAT(PlaceVia(TlsPort(), tls),
                StatusIs(absl::StatusCode::kUnavailable,
                         AllOf(HasSubstr("certificate verify failed"),
                               HasSubstr(absl::StrCat("redis_tls_server_name '", name, "'")))));
  }
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, PlainClientOnTheTlsPortIsToldToUseRediss) {
  EXPECT_THAT(PlaceVia(TlsPort(), std::nullopt),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr(TlsPort().ToString()), HasSubstr("rediss://"))));
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, TlsClientOnThePlainPortIsToldItSpeaksPlainResp) {
  // Redis takes the ClientHello for the start of an inline command and never answers it, so
  // this is known at the connect timeout (500 ms here), with a hint.
  EXPECT_THAT(PlaceVia(PlainPort(), GoodTls()),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr(PlainPort().ToString()), HasSubstr("plain RESP"),
                             HasSubstr("redis://"))));
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, MutualTlsWithoutAClientCertificateIsAClearError) {
  ASSERT_OK_AND_ASSIGN(redis_, StartRedis("yes"));
  EXPECT_THAT(PlaceVia(TlsPort(), GoodTls()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("redis_tls_cert_file")));
  EXPECT_EQ(Keys(), "0");
}

TEST_F(RedisTlsTest, MutualTlsWithTheClientCertificateWorks) {
  ASSERT_OK_AND_ASSIGN(redis_, StartRedis("yes"));
  redis::RedisTlsOptions tls = GoodTls();
  tls.cert_file = certs_->client_cert();
  tls.key_file = certs_->client_key();
  auto placed = PlaceVia(TlsPort(), tls);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_NE(Keys(), "0");
}

TEST_F(RedisTlsTest, BadTlsFilesAreInvalidArgumentNamingTheFlag) {
  const std::string missing = *dir_ + "/missing.pem";
  const auto create = [](const redis::RedisTlsOptions& tls) {
    return redis::TlsContext::Create(tls).status();
  };
  EXPECT_THAT(create(Tls(missing)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("redis_tls_ca_file"), HasSubstr(missing))));
  // A key is not a CA certificate.
  EXPECT_THAT(create(Tls(certs_->ca_key())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis_tls_ca_file")));
  EXPECT_THAT(create(Tls(certs_->ca_cert(), missing, certs_->client_key())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis_tls_cert_file")));
  EXPECT_THAT(create(Tls(certs_->ca_cert(), certs_->client_cert(), missing)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis_tls_key_file")));
  // The server's key with the client's certificate.
  EXPECT_THAT(create(Tls(certs_->ca_cert(), certs_->client_cert(), certs_->server_key())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("redis_tls_key_file"), HasSubstr("does not match"))));
  EXPECT_THAT(create(Tls(certs_->ca_cert(), certs_->client_cert())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("redis_tls_key_file")));
  EXPECT_THAT(create(GoodTls()), IsOk());
}

}  // namespace
}  // namespace orderhold::store
