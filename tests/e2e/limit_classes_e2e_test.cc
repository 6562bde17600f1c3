// Limit classes (ScopeRule.classes, PlaceHoldRequest.limit_class) through the real
// orderhold-server binary, two replicas on one Redis, started as the deploy kit starts them:
// mutual TLS and the example policy deploy/authz_policy.example.json (--authz_policy), with
// client certificates made by openssl with the policy's SPIFFE IDs (testing::TlsCerts::
// IssueClient). The operator puts a rule whose class "partner" lists the storefront; the
// storefront places in the class with the class's limits, the operator (which the policy lets
// place holds too) is PERMISSION_DENIED in it, and an edit of the class's principals through one
// replica applies on the other at once.
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"
#include "tests/testing/tls_channel.h"

namespace orderhold {
namespace {

using orderhold::v1::OrderHold;

constexpr char kClassesSpiffe[] = "spiffe://orderhold.example/";
constexpr char kClassesScope[] = "event:vip-night";

class LimitClassesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("limit-classes-e2e"));
    ASSERT_OK_AND_ASSIGN(certs_, testing::TlsCerts::Create(dir_ + "/certs"));
    for (const char* role : {"storefront", "operator"}) {
      ASSERT_THAT(certs_->IssueClient(role, absl::StrCat(kClassesSpiffe, role)), testing::IsOk());
    }
    const std::string policy = dir_ + "/policy.json";
    std::filesystem::copy_file(ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json", policy);
    for (testing::ServerProcess* server : {&a_, &b_}) {
      server->Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                     absl::StrCat("--redis_url=", redis_->url()),
                     absl::StrCat("--tls_cert_file=", certs_->server_cert()),
                     absl::StrCat("--tls_key_file=", certs_->server_key()),
                     absl::StrCat("--tls_client_ca_file=", certs_->ca_cert()),
                     absl::StrCat("--authz_policy=", policy)});
      ASSERT_TRUE(server->WaitServing()) << server->log();
    }
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<OrderHold::Stub> StubFor(const std::string& role,
                                           const testing::ServerProcess& server) {
    return OrderHold::NewStub(testing::TlsChannelAs(*certs_, role, server.grpc_port()));
  }

  static void Prepare(grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // The rule of kClassesScope: 2 units per person; class "partner" 6, for `principals`.
  static v1::ScopeRule Rule(const std::vector<std::string>& principals) {
    v1::ScopeRule rule;
    rule.set_scope(kClassesScope);
    rule.mutable_limits()->set_max_units(2);
    v1::LimitClass& partner = (*rule.mutable_classes())["partner"];
    partner.mutable_limits()->set_max_units(6);
    for (const std::string& principal : principals) partner.add_principals(principal);
    return rule;
  }

  static grpc::Status Put(OrderHold::Stub& stub, const v1::ScopeRule& rule, v1::ScopeRule* out) {
    grpc::ClientContext context;
    Prepare(context);
    v1::PutScopeRuleRequest request;
    *request.mutable_rule() = rule;
    return stub.PutScopeRule(&context, request, out);
  }

  static grpc::Status Place(OrderHold::Stub& stub, const std::string& user, uint32_t quantity,
                            const std::string& limit_class, v1::PlaceHoldResponse* out = nullptr) {
    grpc::ClientContext context;
    Prepare(context);
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id("o1");
    request.set_scope(kClassesScope);
    request.set_quantity(quantity);
    request.set_limit_class(limit_class);
    v1::PlaceHoldResponse response;
    return stub.PlaceHold(&context, request, out != nullptr ? out : &response);
  }

  // The ErrorInfo reason of `status` ("" without one).
  static std::string Reason(const grpc::Status& status) {
    google::rpc::Status details;
    if (!details.ParseFromString(status.error_details())) return "";
    for (const google::protobuf::Any& any : details.details()) {
      google::rpc::ErrorInfo info;
      if (any.UnpackTo(&info)) return info.reason();
    }
    return "";
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::string dir_;
  std::optional<testing::TlsCerts> certs_;
  testing::ServerProcess a_{ORDERHOLD_SERVER_BINARY};
  testing::ServerProcess b_{ORDERHOLD_SERVER_BINARY};
};

TEST_F(LimitClassesE2eTest, AClassServesItsPrincipalsOnlyAndAnEditAppliesOnEveryReplica) {
  auto operator_a = StubFor("operator", a_);
  auto operator_b = StubFor("operator", b_);
  auto storefront_b = StubFor("storefront", b_);
  // A bare SPIFFE ID is read as a URI SAN and answered typed.
  v1::ScopeRule written;
  ASSERT_TRUE(Put(*operator_a, Rule({absl::StrCat(kClassesSpiffe, "storefront")}), &written).ok());
  ASSERT_EQ(written.classes().count("partner"), 1u);
  EXPECT_THAT(written.classes().at("partner").principals(),
              ::testing::ElementsAre(absl::StrCat("uri:", kClassesSpiffe, "storefront")));
  // The storefront places 5 units in the class on the other replica: the class's 6 apply.
  v1::PlaceHoldResponse placed;
  grpc::Status status = Place(*storefront_b, "buyer-1", 5, "partner", &placed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(placed.scope_usage().max_units(), 6u);
  // Without the class, the rule's 2 (5 can never fit).
  EXPECT_EQ(Place(*storefront_b, "buyer-2", 5, "").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // The operator may place holds, but is not in the class; nor is a class the rule lacks open.
  for (const auto& [stub, limit_class] :
       {std::pair{operator_b.get(), "partner"}, std::pair{storefront_b.get(), "gold"}}) {
    status = Place(*stub, "buyer-3", 1, limit_class);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << limit_class;
    EXPECT_EQ(Reason(status), "LIMIT_CLASS_DENIED") << status.error_message();
  }
  status = Place(*storefront_b, "buyer-3", 1, "not a class!");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("limit_class"));
  // The operator hands the class to itself through replica a (etag-guarded): replica b applies
  // it from its next call, no reload.
  v1::ScopeRule edited = Rule({absl::StrCat("uri:", kClassesSpiffe, "operator")});
  edited.set_etag(written.etag());
  ASSERT_TRUE(Put(*operator_a, edited, &written).ok());
  EXPECT_EQ(Place(*storefront_b, "buyer-4", 1, "partner").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  status = Place(*operator_b, "buyer-4", 4, "partner");
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_GE(testing::ScrapedValue(b_.metrics_port(),
                                  "orderhold_holds_rejected_total{reason=\"limit_class_denied\"}"),
            3);
}

}  // namespace
}  // namespace orderhold
