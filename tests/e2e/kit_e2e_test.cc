// The Kubernetes kit's own settings, run: the ORDERHOLD_* variables of deploy/k8s/
// kustomization.yaml's ConfigMap (mutual TLS, the authorization policy, the plaintext health port,
// the Redis ACL user and password file, Redis over TLS, reflection off, ...) given to the real
// orderhold-server as its environment, as the Deployment gives them. Only what is this machine's
// is replaced: the listening addresses (port 0 on loopback), the mounted files' paths
// (certificates made by openssl, the example policy the kit's ConfigMap is generated from, a 0600
// password file, the Redis CA) and the Redis host and TLS port (a redis-server with the ACL user
// of deploy/redis/orderhold.acl and a TLS port). Every
// other value, the key prefix the ACL allows included, is the kit's.
//
// A kit nobody ran is broken: gRPC 1.51 refused to build the health port's server (no service of
// its own), so every pod of the kit crash-looped, and no test started a server with
// --health_address. Here the kubelet's view (plaintext health on the health port, nothing else
// there) and a client's (mutual TLS on the main port, the policy applied) are both checked.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "tests/testing/eventually.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"
#include "tests/testing/tls_channel.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::v1::OrderHold;

constexpr char kRedisPassword[] = "kit-e2e-password";

// A file of deploy/, e.g. "/k8s/kustomization.yaml".
std::string KitFile(const std::string& path) {
  std::ifstream in(ORDERHOLD_DEPLOY_DIR + path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// The ConfigMap's literals ("- ORDERHOLD_NAME=value" lines) of the kit's kustomization.yaml.
std::map<std::string, std::string> KitSettings() {
  std::map<std::string, std::string> settings;
  for (absl::string_view line : absl::StrSplit(KitFile("/k8s/kustomization.yaml"), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "- ORDERHOLD_")) continue;
    std::pair<std::string, std::string> setting = absl::StrSplit(line, absl::MaxSplits('=', 1));
    settings[absl::StrCat("ORDERHOLD_", setting.first)] = setting.second;
  }
  return settings;
}

// deploy/redis/orderhold.acl's user, with `password` for its placeholder, as RedisServerOptions
// takes it (without the leading "user").
std::string KitAclUser(const std::string& password) {
  const std::string file = KitFile("/redis/orderhold.acl");
  absl::string_view acl =
      absl::StripAsciiWhitespace(absl::string_view(file).substr(0, file.find('\n')));
  EXPECT_TRUE(absl::ConsumePrefix(&acl, "user ")) << acl;
  return absl::StrReplaceAll(acl, {{">CHANGE-ME", absl::StrCat(">", password)}});
}

class KitE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    settings_ = KitSettings();
    // What this test is about: the kit sets all of these.
    for (const char* name :
         {"ORDERHOLD_HEALTH_ADDRESS", "ORDERHOLD_TLS_CERT_FILE", "ORDERHOLD_TLS_KEY_FILE",
          "ORDERHOLD_TLS_CLIENT_CA_FILE", "ORDERHOLD_AUTHZ_POLICY", "ORDERHOLD_REDIS_URL",
          "ORDERHOLD_REDIS_PASSWORD_FILE", "ORDERHOLD_REDIS_TLS_CA_FILE"}) {
      ASSERT_TRUE(settings_.contains(name)) << name << " is not in the kit's ConfigMap";
    }
    ASSERT_EQ(settings_["ORDERHOLD_REFLECTION"], "false");

    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("kit-e2e"));
    ASSERT_OK_AND_ASSIGN(certs_, testing::TlsCerts::Create(dir_ + "/certs"));
    // The kit speaks TLS to Redis: a Redis with a TLS port, its certificate signed by the CA the
    // kit's ORDERHOLD_REDIS_TLS_CA_FILE points at.
    testing::RedisServerOptions redis_options;
    redis_options.admin_password = "kit-e2e-admin";
    redis_options.acl_users = {KitAclUser(kRedisPassword)};
    redis_options.tls = testing::RedisTlsOptions{.cert_file = certs_->server_cert(),
                                                 .key_file = certs_->server_key(),
                                                 .ca_cert_file = certs_->ca_cert()};
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start(redis_options));
    for (const char* role : {"operator", "stranger"}) {
      ASSERT_THAT(certs_->IssueClient(role, absl::StrCat("spiffe://orderhold.example/", role)),
                  IsOk());
    }
    const std::string password_file = dir_ + "/password";
    std::ofstream(password_file) << kRedisPassword << "\n";
    ASSERT_EQ(chmod(password_file.c_str(), 0600), 0);

    // The kit's Redis URL with this machine's host and TLS port: its user and scheme stay.
    std::string url = settings_["ORDERHOLD_REDIS_URL"];
    ASSERT_TRUE(absl::StartsWith(url, "rediss://"))
        << "the kit talks to Redis in cleartext: " << url;
    const size_t at = url.rfind('@');
    ASSERT_NE(at, std::string::npos) << "the kit's Redis URL names no ACL user: " << url;
    url = absl::StrCat(url.substr(0, at + 1), redis_->host(), ":", redis_->tls_port());

    std::map<std::string, std::string> env = settings_;
    env["ORDERHOLD_GRPC_ADDRESS"] = "127.0.0.1:0";
    env["ORDERHOLD_METRICS_ADDRESS"] = "127.0.0.1:0";
    env["ORDERHOLD_HEALTH_ADDRESS"] = "127.0.0.1:0";
    env["ORDERHOLD_TLS_CERT_FILE"] = certs_->server_cert();
    env["ORDERHOLD_TLS_KEY_FILE"] = certs_->server_key();
    env["ORDERHOLD_TLS_CLIENT_CA_FILE"] = certs_->ca_cert();
    env["ORDERHOLD_AUTHZ_POLICY"] = ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json";
    env["ORDERHOLD_REDIS_URL"] = url;
    env["ORDERHOLD_REDIS_PASSWORD_FILE"] = password_file;
    env["ORDERHOLD_REDIS_TLS_CA_FILE"] = certs_->ca_cert();
    server_.Start({}, {env.begin(), env.end()});
    ASSERT_TRUE(server_.WaitServing()) << server_.log();
    ASSERT_GT(server_.health_port(), 0) << server_.log();
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::shared_ptr<grpc::Channel> TlsChannel(const std::string& role) {
    return testing::TlsChannelAs(*certs_, role, server_.grpc_port());
  }

  static grpc::Status Place(const std::shared_ptr<grpc::Channel>& channel,
                            const std::string& order) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::PlaceHoldRequest request;
    request.set_user_id("kit-user");
    request.set_order_id(order);
    v1::PlaceHoldResponse response;
    return OrderHold::NewStub(channel)->PlaceHold(&context, request, &response);
  }

  std::map<std::string, std::string> settings_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::string dir_;
  std::optional<testing::TlsCerts> certs_;
  testing::ServerProcess server_{ORDERHOLD_SERVER_BINARY};
};

TEST_F(KitE2eTest, HealthOnTheHealthPortOnlyAndMutualTlsWithThePolicyOnTheMainPort) {
  // The kubelet's probe: plaintext, no certificate, on the health port.
  EXPECT_TRUE(Eventually([&] {
    return testing::Health(server_.health_port()) == HealthCheckResponse::SERVING;
  })) << server_.log();
  // Nothing but health there.
  const auto health_port = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_.health_port()),
                                               grpc::InsecureChannelCredentials());
  EXPECT_EQ(Place(health_port, "o-health").error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // The main port speaks mutual TLS only: a plaintext probe gets no answer.
  EXPECT_EQ(testing::Health(server_.grpc_port()), HealthCheckResponse::UNKNOWN);
  // A client the policy names places a hold (through Redis as the kit's ACL user, with the
  // password from the file); one it does not name is refused.
  EXPECT_TRUE(Place(TlsChannel("operator"), "o-1").ok()) << server_.log();
  EXPECT_EQ(Place(TlsChannel("stranger"), "o-2").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The hold is in Redis, under the kit's key prefix (what its ACL allows).
  absl::StatusOr<std::string> keys = redis_->Command({"DBSIZE"});
  ASSERT_THAT(keys.status(), IsOk());
  EXPECT_NE(*keys, "0");
  // Every connection of the kit's user came in on Redis' TLS port: none in cleartext.
  absl::StatusOr<std::string> clients = redis_->Command({"CLIENT", "LIST"});
  ASSERT_THAT(clients.status(), IsOk());
  int tls = 0;
  for (absl::string_view line : absl::StrSplit(*clients, '\n')) {
    if (!absl::StrContains(line, " user=orderhold ")) continue;
    EXPECT_THAT(std::string(line), ::testing::HasSubstr(absl::StrCat("laddr=", redis_->host(), ":",
                                                                     redis_->tls_port(), " ")));
    ++tls;
  }
  EXPECT_GT(tls, 0) << *clients;
  // The third port the kit opens: Prometheus' scrape, plain HTTP, counting the refused call.
  absl::StatusOr<std::string> metrics = testing::RunProgram(
      {"curl", "-s", absl::StrCat("http://127.0.0.1:", server_.metrics_port(), "/metrics")});
  ASSERT_THAT(metrics.status(), IsOk());
  EXPECT_THAT(*metrics,
              ::testing::HasSubstr("orderhold_calls_denied_total{method=\"PlaceHold\"} 1"));
}

}  // namespace
}  // namespace orderhold
