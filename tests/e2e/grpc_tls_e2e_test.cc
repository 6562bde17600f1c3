// TLS and mutual TLS on the gRPC port, in one process: a real redis-server,
// App (the same wiring as orderhold-server) on port 0 with --tls_* settings, and clients built by
// the client library's NewChannel, with certificates made by openssl (testing::TlsCerts). Two
// certificate sets, each its own CA: `certs_` and `other_` (a stranger's CA, and the set a
// rotation switches to). Every channel has its own subchannel pool, so each one is a new TCP
// connection with its own handshake: what "a new connection sees the new certificate" needs.
// The binaries over TLS (orderhold-cli, orderhold-bench) are in binaries_e2e_test.cc.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "grpc/grpc.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "server/config.h"
#include "tests/testing/eventually.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/os_util.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr auto kUnavailable = absl::StatusCode::kUnavailable;

class GrpcTlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("grpc-tls"));
    ASSERT_OK_AND_ASSIGN(certs_, testing::TlsCerts::Create(dir_ + "/a"));
    ASSERT_OK_AND_ASSIGN(other_, testing::TlsCerts::Create(dir_ + "/b"));
  }

  void TearDown() override {
    app_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // A Config serving TLS with `cert`/`key` (and requiring client certificates signed by
  // `client_ca` when it is not empty), the files re-read every second.
  Config TlsConfig(const std::string& cert, const std::string& key,
                   const std::string& client_ca = "") {
    Config config;
    config.grpc_address = "127.0.0.1:0";
    config.redis_url = ParsedRedisUrl(redis_->url());
    config.run_reaper = false;
    config.health_check_interval = absl::Milliseconds(50);
    config.grpc_tls.cert_file = cert;
    config.grpc_tls.key_file = key;
    config.grpc_tls.client_ca_file = client_ca;
    config.grpc_tls.refresh_interval = absl::Seconds(1);
    return config;
  }

  void StartApp(const Config& config) {
    auto app = App::Start(config, registry_);
    ASSERT_THAT(app, IsOk());
    app_ = std::move(*app);
  }

  std::string Target() const { return absl::StrCat("127.0.0.1:", app_->grpc_port()); }

  // A new channel (its own connection: a local subchannel pool) to app_ with `tls`.
  std::shared_ptr<grpc::Channel> Channel(const client::TlsOptions& tls) const {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = client::NewChannel(Target(), tls, args);
    EXPECT_THAT(channel, IsOk());
    return channel.ok() ? *channel : nullptr;
  }

  // TLS trusting `ca_file`, with a client certificate when `cert` is given.
  static client::TlsOptions Trusting(const std::string& ca_file, const std::string& cert = "",
                                     const std::string& key = "") {
    client::TlsOptions tls;
    tls.enabled = true;
    tls.ca_file = ca_file;
    tls.cert_file = cert;
    tls.key_file = key;
    return tls;
  }

  // One PlaceHold on a new connection with `tls`; its status.
  absl::Status Place(const client::TlsOptions& tls, const std::string& order) {
    client::OrderHoldClient client(orderhold::v1::OrderHold::NewStub(Channel(tls)),
                                   client::ClientOptions{absl::Seconds(2), ""});
    return client.PlaceHold("alice", order).status();
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::string dir_;
  std::optional<testing::TlsCerts> certs_, other_;
  prometheus::Registry registry_;
  std::unique_ptr<App> app_;
};

// A plain client to a TLS server is refused; a client trusting the server's CA gets health
// and its calls; one trusting another CA, or checking another name, is refused.
TEST_F(GrpcTlsE2eTest, TlsPortRefusesPlaintextAndServesClientsThatTrustItsCa) {
  StartApp(TlsConfig(certs_->server_cert(), certs_->server_key()));

  EXPECT_THAT(Place(client::TlsOptions(), "plain-1"), StatusIs(kUnavailable));
  EXPECT_EQ(testing::Health(app_->grpc_port()), HealthCheckResponse::UNKNOWN);  // plaintext

  const client::TlsOptions trusting = Trusting(certs_->ca_cert());
  EXPECT_TRUE(Eventually(
      [&] { return testing::Health(Channel(trusting)) == HealthCheckResponse::SERVING; }));
  EXPECT_THAT(Place(trusting, "tls-1"), IsOk());
  client::OrderHoldClient client(orderhold::v1::OrderHold::NewStub(Channel(trusting)),
                                 client::ClientOptions{absl::Seconds(2), ""});
  auto listed = client.ListHolds("alice");
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->holds_size(), 1);
  EXPECT_EQ(listed->holds(0).order_id(), "tls-1");

  EXPECT_THAT(Place(Trusting(other_->ca_cert()), "stranger-1"), StatusIs(kUnavailable));
  // The certificate names localhost and 127.0.0.1 (the target): --tls_server_name replaces the
  // name checked, so a right one passes and a wrong one fails although the CA is right.
  client::TlsOptions named = trusting;
  named.server_name = "localhost";
  EXPECT_THAT(Place(named, "named-1"), IsOk());
  named.server_name = "orderhold.example";
  EXPECT_THAT(Place(named, "misnamed-1"), StatusIs(kUnavailable));
}

// Mutual TLS: a client without a certificate is refused, one with a certificate the client CA
// signed is accepted, and one signed by a CA the server does not trust is refused too.
TEST_F(GrpcTlsE2eTest, MutualTlsWantsAClientCertificateSignedByTheClientCa) {
  StartApp(TlsConfig(certs_->server_cert(), certs_->server_key(), certs_->ca_cert()));

  EXPECT_THAT(Place(Trusting(certs_->ca_cert()), "anonymous-1"), StatusIs(kUnavailable));
  EXPECT_THAT(
      Place(Trusting(certs_->ca_cert(), other_->client_cert(), other_->client_key()), "stranger-1"),
      StatusIs(kUnavailable));
  const client::TlsOptions known =
      Trusting(certs_->ca_cert(), certs_->client_cert(), certs_->client_key());
  EXPECT_TRUE(
      Eventually([&] { return testing::Health(Channel(known)) == HealthCheckResponse::SERVING; }));
  EXPECT_THAT(Place(known, "known-1"), IsOk());
  client::OrderHoldClient client(orderhold::v1::OrderHold::NewStub(Channel(known)),
                                 client::ClientOptions{absl::Seconds(2), ""});
  auto listed = client.ListHolds("alice");  // the refused ones never reached the service
  ASSERT_THAT(listed, IsOk());
  ASSERT_EQ(listed->holds_size(), 1);
  EXPECT_EQ(listed->holds(0).order_id(), "known-1");
}

// A certificate rotated on disk is served to new connections without a restart. The
// files are replaced as the kubelet updates a mounted Secret (and so as cert-manager's renewals
// arrive): the new set is written to a new directory, then the `..data` symlink the file names
// go through is swapped by one rename, so key and certificate change together.
TEST_F(GrpcTlsE2eTest, RotatedCertificateIsServedToNewConnectionsWithoutRestart) {
  namespace fs = std::filesystem;
  const fs::path live = dir_ + "/live";
  // Writes the server certificate and key of `set` into live/<version>/ and points live/..data
  // at it with an atomic rename.
  const auto publish = [&](const testing::TlsCerts& set, const std::string& version) {
    fs::create_directories(live / version);
    fs::copy_file(set.server_cert(), live / version / "server.crt");
    fs::copy_file(set.server_key(), live / version / "server.key");
    fs::create_directory_symlink(version, live / "..data_tmp");
    fs::rename(live / "..data_tmp", live / "..data");
  };
  publish(*certs_, "v1");
  fs::create_symlink("..data/server.crt", live / "server.crt");
  fs::create_symlink("..data/server.key", live / "server.key");
  StartApp(TlsConfig((live / "server.crt").string(), (live / "server.key").string()));
  const int port = app_->grpc_port();

  const client::TlsOptions old_ca = Trusting(certs_->ca_cert());
  const client::TlsOptions new_ca = Trusting(other_->ca_cert());
  EXPECT_THAT(Place(old_ca, "before-1"), IsOk());
  EXPECT_THAT(Place(new_ca, "before-2"), StatusIs(kUnavailable));
  // A connection opened before the rotation keeps working on its handshake.
  client::OrderHoldClient kept(orderhold::v1::OrderHold::NewStub(Channel(old_ca)),
                               client::ClientOptions{absl::Seconds(2), ""});
  EXPECT_THAT(kept.ListHolds("alice"), IsOk());

  publish(*other_, "v2");
  // Refreshed within --tls_refresh_interval (1s here); each poll is a new connection.
  const absl::Time rotated = absl::Now();
  EXPECT_TRUE(Eventually([&] { return Place(new_ca, "after-1").ok(); }, absl::Seconds(10),
                         absl::Milliseconds(100)));
  EXPECT_LT(absl::Now() - rotated, absl::Seconds(5));
  EXPECT_THAT(Place(old_ca, "after-2"), StatusIs(kUnavailable));
  EXPECT_EQ(app_->grpc_port(), port);  // the same server all along
  EXPECT_THAT(kept.ListHolds("alice"), IsOk());
}

// The client CAs of mutual TLS rotate the same way (a CA is replaced before the certificates it
// signed expire). Here the one file is written beside and renamed over, as a plain file
// replacement by a config management tool would do.
TEST_F(GrpcTlsE2eTest, RotatedClientCaDecidesNewConnectionsWithoutRestart) {
  const std::string client_ca = dir_ + "/client-ca.crt";
  std::filesystem::copy_file(certs_->ca_cert(), client_ca);
  StartApp(TlsConfig(certs_->server_cert(), certs_->server_key(), client_ca));
  // A client of `set`: its certificate, and the server's CA (which does not change here).
  const auto client_of = [&](const testing::TlsCerts& set) {
    return Trusting(certs_->ca_cert(), set.client_cert(), set.client_key());
  };
  EXPECT_THAT(Place(client_of(*certs_), "before-1"), IsOk());
  EXPECT_THAT(Place(client_of(*other_), "before-2"), StatusIs(kUnavailable));

  std::filesystem::copy_file(other_->ca_cert(), client_ca + ".new");
  std::filesystem::rename(client_ca + ".new", client_ca);
  EXPECT_TRUE(Eventually([&] { return Place(client_of(*other_), "after-1").ok(); },
                         absl::Seconds(10), absl::Milliseconds(100)));
  EXPECT_THAT(Place(client_of(*certs_), "after-2"), StatusIs(kUnavailable));
}

// A wrong file is a startup error naming the flag and the file, before anything listens (gRPC's
// watcher alone would log it and then refuse every handshake).
TEST_F(GrpcTlsE2eTest, UnusableFilesStopTheStartNamingTheFlag) {
  const std::string missing = dir_ + "/missing.pem";
  struct Case {
    Config config;
    std::string message;
  };
  for (const Case& bad : {
           Case{TlsConfig(missing, certs_->server_key()), "tls_cert_file: cannot load " + missing},
           Case{TlsConfig(certs_->server_cert(), missing), "tls_key_file: cannot load " + missing},
           Case{TlsConfig(certs_->server_cert(), other_->server_key()),
                absl::StrCat("tls_key_file: ", other_->server_key(), " does not match")},
           Case{TlsConfig(certs_->server_cert(), certs_->server_key(), missing),
                "tls_client_ca_file: cannot load " + missing},
       }) {
    EXPECT_THAT(App::Start(bad.config, registry_),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad.message)));
  }
  // A certificate without its key never reaches App::Start: ConfigFromFlags refuses it
  // (BinariesE2eTest.BadFlagsExitNonZeroNamingTheFlag: exit 2).
  Config half = TlsConfig(certs_->server_cert(), "");
  EXPECT_THAT(ValidateConfig(half),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tls_cert_file"), HasSubstr("--tls_key_file"))));
}

}  // namespace
}  // namespace orderhold
