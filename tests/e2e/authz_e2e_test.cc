// Who may call what, through the real orderhold-server binary: mutual TLS on the gRPC port, the
// example policy deploy/authz_policy.example.json (--authz_policy), and five client certificates
// made by openssl with SPIFFE IDs (testing::TlsCerts::IssueClient): storefront, payments,
// event-consumer and operator (the policy's roles) and a stranger (no role). Each role can make
// exactly the calls the policy grants; every other call is PERMISSION_DENIED, counted in
// orderhold_calls_denied_total{method}, and leaves Redis as it was. An edit of the policy file
// takes effect without a restart; a bad edit keeps the old policy and is counted. A consumer
// group is its creator's: another principal cannot watch it, ack it or steal its pending events,
// even once the policy lets it call WatchHoldEvents and AckHoldEvents.
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/channel.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"
#include "tests/testing/tls_channel.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Eventually;
using orderhold::v1::OrderHold;

constexpr char kAuthzSpiffePrefix[] = "spiffe://orderhold.example/";

// Every method of the service with a request the caller may send (valid where it matters).
enum class AuthzCall {
  kPlaceHold,
  kPay,
  kListHolds,
  kCancelHold,
  kWatchHoldEvents,
  kAckHoldEvents,
  kExtendHold,
  kGetHold,
  kReleaseHolds,
  kDeleteConsumerGroup,
  kGetScopeUsage,
  kListScopeHolds,
  kReleaseScopeHolds,
  kReturnUnits,
};
const std::vector<std::pair<AuthzCall, std::string>>& AllAuthzCalls() {
  static const auto* const calls = new std::vector<std::pair<AuthzCall, std::string>>{
      {AuthzCall::kPlaceHold, "PlaceHold"},
      {AuthzCall::kPay, "Pay"},
      {AuthzCall::kListHolds, "ListHolds"},
      {AuthzCall::kCancelHold, "CancelHold"},
      {AuthzCall::kWatchHoldEvents, "WatchHoldEvents"},
      {AuthzCall::kAckHoldEvents, "AckHoldEvents"},
      {AuthzCall::kExtendHold, "ExtendHold"},
      {AuthzCall::kGetHold, "GetHold"},
      {AuthzCall::kReleaseHolds, "ReleaseHolds"},
      {AuthzCall::kDeleteConsumerGroup, "DeleteConsumerGroup"},
      {AuthzCall::kGetScopeUsage, "GetScopeUsage"},
      {AuthzCall::kListScopeHolds, "ListScopeHolds"},
      {AuthzCall::kReleaseScopeHolds, "ReleaseScopeHolds"},
      {AuthzCall::kReturnUnits, "ReturnUnits"},
  };
  return *calls;
}

// What deploy/authz_policy.example.json grants each role.
const std::map<std::string, std::set<std::string>>& RoleGrants() {
  static const auto* const granted = new std::map<std::string, std::set<std::string>>{
      {"storefront",
       {"PlaceHold", "ExtendHold", "CancelHold", "ListHolds", "GetHold", "ReleaseHolds",
        "GetScopeUsage"}},
      {"payments", {"Pay", "GetHold", "ReturnUnits"}},
      {"event-consumer", {"WatchHoldEvents", "AckHoldEvents", "DeleteConsumerGroup"}},
      {"operator",
       {"PlaceHold", "Pay", "ListHolds", "CancelHold", "WatchHoldEvents", "AckHoldEvents",
        "ExtendHold", "GetHold", "ReleaseHolds", "DeleteConsumerGroup", "GetScopeUsage",
        "ListScopeHolds", "ReleaseScopeHolds", "ReturnUnits"}},
      {"stranger", {}},
  };
  return *granted;
}

class AuthzE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("authz-e2e"));
    ASSERT_OK_AND_ASSIGN(certs_, testing::TlsCerts::Create(dir_ + "/certs"));
    for (const auto& [role, unused] : RoleGrants()) {
      ASSERT_THAT(certs_->IssueClient(role, absl::StrCat(kAuthzSpiffePrefix, role)),
                  testing::IsOk());
    }
    policy_ = dir_ + "/policy.json";
    std::filesystem::copy_file(ORDERHOLD_DEPLOY_DIR "/authz_policy.example.json", policy_);
    server_.Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                   absl::StrCat("--redis_url=", redis_->url()),
                   absl::StrCat("--tls_cert_file=", certs_->server_cert()),
                   absl::StrCat("--tls_key_file=", certs_->server_key()),
                   absl::StrCat("--tls_client_ca_file=", certs_->ca_cert()),
                   absl::StrCat("--authz_policy=", policy_), "--authz_policy_refresh_interval=1s",
                   absl::StrCat("--operators=uri:", kAuthzSpiffePrefix, "operator"),
                   "--event_ack_timeout=100ms"});
    ASSERT_TRUE(server_.WaitServing()) << server_.log();
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<OrderHold::Stub> StubFor(const std::string& role) {
    return OrderHold::NewStub(ChannelFor(role));
  }
  std::shared_ptr<grpc::Channel> ChannelFor(const std::string& role) {
    return testing::TlsChannelAs(*certs_, role, server_.grpc_port());
  }

  // Makes `call` as `stub`'s caller; its status code. A watch that is let through stays open
  // until its deadline: DEADLINE_EXCEEDED.
  grpc::StatusCode Make(OrderHold::Stub& stub, AuthzCall call,
                        const std::string& group = "billing") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(800));
    grpc::Status status;
    switch (call) {
      case AuthzCall::kPlaceHold: {
        v1::PlaceHoldRequest request;
        request.set_user_id("u1");
        request.set_order_id("o1");
        v1::PlaceHoldResponse response;
        status = stub.PlaceHold(&context, request, &response);
        break;
      }
      case AuthzCall::kPay: {
        v1::PayRequest request;
        request.set_user_id("u1");
        request.set_order_id("unknown");
        v1::PayResponse response;
        status = stub.Pay(&context, request, &response);
        break;
      }
      case AuthzCall::kListHolds: {
        v1::ListHoldsRequest request;
        request.set_user_id("u1");
        v1::ListHoldsResponse response;
        status = stub.ListHolds(&context, request, &response);
        break;
      }
      case AuthzCall::kCancelHold: {
        v1::CancelHoldRequest request;
        request.set_user_id("u1");
        request.set_order_id("unknown");
        v1::CancelHoldResponse response;
        status = stub.CancelHold(&context, request, &response);
        break;
      }
      case AuthzCall::kWatchHoldEvents: {
        v1::WatchHoldEventsRequest request;
        request.set_consumer_group(group);
        request.set_consumer("c1");
        auto reader = stub.WatchHoldEvents(&context, request);
        v1::HoldEvent event;
        while (reader->Read(&event)) {
        }
        status = reader->Finish();
        break;
      }
      case AuthzCall::kAckHoldEvents: {
        v1::AckHoldEventsRequest request;
        request.set_consumer_group(group);
        request.add_event_ids("1/1-0");
        v1::AckHoldEventsResponse response;
        status = stub.AckHoldEvents(&context, request, &response);
        break;
      }
      case AuthzCall::kExtendHold: {
        v1::ExtendHoldRequest request;
        request.set_user_id("u1");
        request.set_order_id("unknown");
        v1::ExtendHoldResponse response;
        status = stub.ExtendHold(&context, request, &response);
        break;
      }
      case AuthzCall::kGetHold: {
        v1::GetHoldRequest request;
        request.set_user_id("u1");
        request.set_order_id("o1");
        v1::GetHoldResponse response;
        status = stub.GetHold(&context, request, &response);
        break;
      }
      case AuthzCall::kReleaseHolds: {
        v1::ReleaseHoldsRequest request;
        request.set_user_id("nobody");
        v1::ReleaseHoldsResponse response;
        status = stub.ReleaseHolds(&context, request, &response);
        break;
      }
      case AuthzCall::kDeleteConsumerGroup: {
        v1::DeleteConsumerGroupRequest request;
        request.set_consumer_group("no-such-group");
        v1::DeleteConsumerGroupResponse response;
        status = stub.DeleteConsumerGroup(&context, request, &response);
        break;
      }
      case AuthzCall::kGetScopeUsage: {
        v1::GetScopeUsageRequest request;
        request.set_scope("event:E1");
        v1::GetScopeUsageResponse response;
        status = stub.GetScopeUsage(&context, request, &response);
        break;
      }
      case AuthzCall::kListScopeHolds: {
        v1::ListScopeHoldsRequest request;
        request.set_scope("event:E1");
        v1::ListScopeHoldsResponse response;
        status = stub.ListScopeHolds(&context, request, &response);
        break;
      }
      case AuthzCall::kReleaseScopeHolds: {
        v1::ReleaseScopeHoldsRequest request;
        request.set_scope("event:nothing-held");
        v1::ReleaseScopeHoldsResponse response;
        status = stub.ReleaseScopeHolds(&context, request, &response);
        break;
      }
      case AuthzCall::kReturnUnits: {
        v1::ReturnUnitsRequest request;
        request.set_user_id("u1");
        request.set_order_id("unknown");
        request.set_units(1);
        request.set_request_id("refund-1");
        v1::ReturnUnitsResponse response;
        status = stub.ReturnUnits(&context, request, &response);
        break;
      }
    }
    return status.error_code();
  }

  // The data set's digest (RedisServer::DataDigest).
  std::string Snapshot() {
    absl::StatusOr<std::string> digest = redis_->DataDigest();
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.value_or("");
  }

  double DeniedCount(const std::string& method) {
    return testing::ScrapedValue(
        server_.metrics_port(),
        absl::StrCat("orderhold_calls_denied_total{method=\"", method, "\"}"));
  }

  void WritePolicy(const std::string& text) {
    // Written beside and renamed over: the server never reads half a file.
    const std::string tmp = policy_ + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, policy_);
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::string dir_;
  std::optional<testing::TlsCerts> certs_;
  std::string policy_;
  testing::ServerProcess server_{ORDERHOLD_SERVER_BINARY};
};

TEST_F(AuthzE2eTest, EachRoleCanDoExactlyWhatThePolicyGrantsAndADeniedCallChangesNothing) {
  for (const auto& [role, granted] : RoleGrants()) {
    auto stub = StubFor(role);
    for (const auto& [call, method] : AllAuthzCalls()) {
      const bool allowed = granted.contains(method);
      const std::string before = allowed ? "" : Snapshot();
      const double denied_before = DeniedCount(method);
      // A group of its own per role: a group is its creator's (the last test).
      const grpc::StatusCode code = Make(*stub, call, absl::StrCat(role, "-group"));
      if (allowed) {
        EXPECT_NE(code, grpc::StatusCode::PERMISSION_DENIED) << role << " " << method;
        continue;
      }
      EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED) << role << " " << method;
      EXPECT_EQ(Snapshot(), before) << role << " " << method << " changed Redis";
      EXPECT_EQ(DeniedCount(method), denied_before + 1) << method;
    }
  }
  // A client without a certificate does not get past the handshake (mutual TLS), and the policy
  // is never asked.
  client::TlsOptions anonymous;
  anonymous.ca_file = certs_->ca_cert();
  anonymous.server_name = "localhost";
  auto channel = client::NewChannel(absl::StrCat("127.0.0.1:", server_.grpc_port()), anonymous);
  ASSERT_TRUE(channel.ok());
  EXPECT_EQ(Make(*OrderHold::NewStub(*channel), AuthzCall::kGetHold),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(AuthzE2eTest, AnEditOfThePolicyTakesEffectWithoutARestartAndABadOneKeepsTheOld) {
  auto stranger = StubFor("stranger");
  ASSERT_EQ(Make(*stranger, AuthzCall::kGetHold), grpc::StatusCode::PERMISSION_DENIED);
  std::ifstream in(policy_);
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  // The payments role extended to the stranger.
  WritePolicy(absl::StrReplaceAll(
      original,
      {{"\"spiffe://orderhold.example/payments\"",
        "\"spiffe://orderhold.example/payments\", \"spiffe://orderhold.example/stranger\""}}));
  // Allowed now: the order is unknown.
  EXPECT_TRUE(Eventually(
      [&] { return Make(*stranger, AuthzCall::kGetHold) == grpc::StatusCode::NOT_FOUND; },
      absl::Seconds(10)))
      << server_.log();
  EXPECT_EQ(Make(*stranger, AuthzCall::kPlaceHold), grpc::StatusCode::PERMISSION_DENIED);
  // A bad edit: logged, counted, and the policy in force stays.
  WritePolicy("{\"name\": \"broken\", \"allow_rules\": [{\"nam\": \"x\"}]}");
  EXPECT_TRUE(Eventually(
      [&] { return absl::StrContains(server_.log(), "reload failed, the previous policy stays"); },
      absl::Seconds(10)))
      << server_.log();
  EXPECT_EQ(Make(*stranger, AuthzCall::kGetHold), grpc::StatusCode::NOT_FOUND);
  // A null where a rule names its callers or its calls: a reader that dropped it ("principals":
  // [null] read as []) would let every caller, or every call, through, and the stranger could
  // place a hold. Each is a bad edit too: logged at its place, counted, and the policy in force
  // stays (the stranger may still get a hold, and still not place one).
  constexpr char kStrangerSource[] = R"({"principals": ["spiffe://orderhold.example/stranger"]})";
  constexpr char kPlaceHoldRequest[] = R"({"paths": ["/orderhold.v1.OrderHold/PlaceHold"]})";
  const struct {
    absl::string_view source;
    absl::string_view request;
    absl::string_view where;  // the place the log names
  } nulls[] = {
      {R"({"principals": [null]})", kPlaceHoldRequest, "allow_rules[0].source.principals[0]"},
      {"null", kPlaceHoldRequest, "allow_rules[0].source"},
      {kStrangerSource, R"({"paths": [null]})", "allow_rules[0].request.paths[0]"},
      {kStrangerSource, "null", "allow_rules[0].request"},
  };
  auto reload_failures = [&] {
    return testing::ScrapedValue(server_.metrics_port(),
                                 "orderhold_authz_policy_reloads_total{result=\"failure\"}");
  };
  for (const auto& bad : nulls) {
    const double failures_before = reload_failures();
    WritePolicy(absl::StrCat(R"({"name": "nulls", "allow_rules": [{"name": "stranger", "source": )",
                             bad.source, R"(, "request": )", bad.request, "}]}"));
    EXPECT_TRUE(Eventually([&] {
      return absl::StrContains(server_.log(), absl::StrCat(bad.where, ": null is not allowed"));
    })) << server_.log();
    EXPECT_EQ(reload_failures(), failures_before + 1) << bad.where;
    EXPECT_EQ(Make(*stranger, AuthzCall::kPlaceHold), grpc::StatusCode::PERMISSION_DENIED)
        << bad.where;
    EXPECT_EQ(Make(*stranger, AuthzCall::kGetHold), grpc::StatusCode::NOT_FOUND) << bad.where;
  }
  // Back to the example: the stranger is out again.
  WritePolicy(original);
  EXPECT_TRUE(Eventually(
      [&] { return Make(*stranger, AuthzCall::kGetHold) == grpc::StatusCode::PERMISSION_DENIED; },
      absl::Seconds(10)));
}

// A denial tells the caller nothing of the policy: the same words whatever rule
// decided; the operator finds the rule in the log (one line per rule and method per minute).
TEST_F(AuthzE2eTest, ADenialNamesNoRuleAndTheLogDoes) {
  auto stranger = StubFor("stranger");
  grpc::ClientContext context;
  v1::GetHoldRequest request;
  request.set_user_id("u1");
  request.set_order_id("o1");
  v1::GetHoldResponse response;
  const grpc::Status status = stranger->GetHold(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(
      status.error_message(),
      "\"uri:spiffe://orderhold.example/stranger\" may not call /orderhold.v1.OrderHold/GetHold "
      "(the authorization policy does not allow it)");
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(server_.log(),
                             "/orderhold.v1.OrderHold/GetHold: no allow rule matches");
  })) << server_.log();
}

// Revocation reaches open streams: once a reloaded policy no longer lets the
// event-consumer watch, its open watch ends with PERMISSION_DENIED within a refresh interval
// (1 s here) of the file's change, counted as a denied call; the operator's open watch, still
// allowed, stays open. Without the re-check the consumer's watch would run to its deadline.
TEST_F(AuthzE2eTest, AReloadThatRevokesACallerEndsItsOpenWatchWithPermissionDenied) {
  auto consumer = StubFor("event-consumer");
  auto operator_stub = StubFor("operator");
  struct OpenWatch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::HoldEvent>> reader;
  };
  auto open = [](OrderHold::Stub& stub, const std::string& group) {
    auto watch = std::make_unique<OpenWatch>();
    watch->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group(group);
    request.set_consumer("c1");
    watch->reader = stub.WatchHoldEvents(&watch->context, request);
    return watch;
  };
  std::unique_ptr<OpenWatch> revoked = open(*consumer, "billing");
  std::unique_ptr<OpenWatch> kept = open(*operator_stub, "audit");
  // Both open and admitted: each gets the event of a hold ended now.
  auto storefront = StubFor("storefront");
  ASSERT_EQ(Make(*storefront, AuthzCall::kPlaceHold), grpc::StatusCode::OK);
  {
    grpc::ClientContext context;
    v1::CancelHoldRequest request;
    request.set_user_id("u1");
    request.set_order_id("o1");
    v1::CancelHoldResponse response;
    ASSERT_TRUE(storefront->CancelHold(&context, request, &response).ok());
  }
  v1::HoldEvent event;
  ASSERT_TRUE(revoked->reader->Read(&event));
  ASSERT_TRUE(kept->reader->Read(&event));

  std::ifstream in(policy_);
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  const absl::Time written = absl::Now();
  WritePolicy(absl::StrReplaceAll(original, {{"\"spiffe://orderhold.example/event-consumer\"",
                                              "\"spiffe://orderhold.example/nobody\""}}));
  while (revoked->reader->Read(&event)) {
  }
  const grpc::Status status = revoked->reader->Finish();
  const absl::Duration took = absl::Now() - written;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("no longer allows"));
  // One refresh interval (1 s) plus the read of the file and the end of the stream (more room under
  // AddressSanitizer, where every step is slower).
  EXPECT_LT(took, testing::kAddressSanitized ? absl::Seconds(6) : absl::Seconds(3))
      << server_.log();
  std::printf("[ figures ] revoked watch ended %.2f s after the policy file changed\n",
              absl::ToDoubleSeconds(took));
  // New calls of the revoked caller are refused; the operator's watch is still open.
  EXPECT_EQ(Make(*consumer, AuthzCall::kAckHoldEvents), grpc::StatusCode::PERMISSION_DENIED);
  kept->context.TryCancel();
  while (kept->reader->Read(&event)) {
  }
  EXPECT_EQ(kept->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// A header rule on content-type fires as in gRPC's engine (it never did before: the transport
// keeps content-type out of the call's metadata): every gRPC call has "application/grpc".
TEST_F(AuthzE2eTest, AHeaderRuleOnContentTypeMatchesAsGrpcsEngineMatchesIt) {
  auto stranger = StubFor("stranger");
  auto policy_for = [](const std::string& content_type) {
    return absl::StrCat(R"({"name": "content-type", "allow_rules": [{"name": "by-content-type",
        "source": {"principals": ["spiffe://orderhold.example/stranger"]},
        "request": {"paths": ["/orderhold.v1.OrderHold/GetHold"],
                    "headers": [{"key": "content-type", "values": [")",
                        content_type, R"("]}]}}]})");
  };
  WritePolicy(policy_for("application/grpc"));
  EXPECT_TRUE(Eventually(
      [&] { return Make(*stranger, AuthzCall::kGetHold) == grpc::StatusCode::NOT_FOUND; },
      absl::Seconds(10)))
      << server_.log();
  WritePolicy(policy_for("application/json"));
  EXPECT_TRUE(Eventually(
      [&] { return Make(*stranger, AuthzCall::kGetHold) == grpc::StatusCode::PERMISSION_DENIED; },
      absl::Seconds(10)))
      << server_.log();
}

// DeleteConsumerGroup of `group` by `stub`'s caller.
grpc::StatusCode Delete(v1::OrderHold::Stub& stub, const std::string& group) {
  grpc::ClientContext context;
  v1::DeleteConsumerGroupRequest request;
  request.set_consumer_group(group);
  v1::DeleteConsumerGroupResponse response;
  return stub.DeleteConsumerGroup(&context, request, &response).error_code();
}

TEST_F(AuthzE2eTest, AnotherPrincipalCannotWatchAckDeleteOrStealFromAGroupItDoesNotOwn) {
  // The stranger may call the event rpcs (as a second consumer service would)...
  std::ifstream in(policy_);
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  WritePolicy(absl::StrReplaceAll(original, {{"\"spiffe://orderhold.example/event-consumer\"",
                                              "\"spiffe://orderhold.example/event-consumer\", "
                                              "\"spiffe://orderhold.example/stranger\""}}));
  auto consumer = StubFor("event-consumer");
  auto stranger = StubFor("stranger");
  ASSERT_TRUE(Eventually(
      [&] {
        return Make(*stranger, AuthzCall::kWatchHoldEvents, "strangers-own") ==
               grpc::StatusCode::DEADLINE_EXCEEDED;
      },
      absl::Seconds(10)));
  // ...but "billing" is the consumer's: it created it.
  EXPECT_EQ(Make(*consumer, AuthzCall::kWatchHoldEvents, "billing"),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // An event pending for the consumer (delivered, not acked).
  auto storefront = StubFor("storefront");
  ASSERT_EQ(Make(*storefront, AuthzCall::kPlaceHold), grpc::StatusCode::OK);
  {
    grpc::ClientContext context;
    v1::CancelHoldRequest request;
    request.set_user_id("u1");
    request.set_order_id("o1");
    v1::CancelHoldResponse response;
    ASSERT_TRUE(storefront->CancelHold(&context, request, &response).ok());
  }
  EXPECT_EQ(Make(*consumer, AuthzCall::kWatchHoldEvents, "billing"),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  const std::string before = Snapshot();
  EXPECT_EQ(Make(*stranger, AuthzCall::kWatchHoldEvents, "billing"),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Make(*stranger, AuthzCall::kAckHoldEvents, "billing"),
            grpc::StatusCode::PERMISSION_DENIED);
  // DeleteConsumerGroup, which the policy lets it call, is refused too: it owns no such group.
  EXPECT_EQ(Delete(*stranger, "billing"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Snapshot(), before) << "the stranger's calls changed the group";
  EXPECT_EQ(Make(*consumer, AuthzCall::kAckHoldEvents, "billing"), grpc::StatusCode::OK);
  // Its owner may delete its own groups; the operator (--operators) any.
  EXPECT_EQ(Delete(*stranger, "strangers-own"), grpc::StatusCode::OK);
  auto operator_stub = StubFor("operator");
  EXPECT_EQ(Delete(*operator_stub, "billing"), grpc::StatusCode::OK);
  EXPECT_EQ(Make(*operator_stub, AuthzCall::kDeleteConsumerGroup), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Make(*stranger, AuthzCall::kWatchHoldEvents, "billing"),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

// With a policy, the main port's grpc.health.v1.Health is checked like every method: the example
// policy's "health" rule lets any client certificate call Check and Watch; without it both are
// PERMISSION_DENIED (gRPC's own health service, which the port served before, answered anyone the
// handshake admitted). A name over 200 bytes is INVALID_ARGUMENT, an unknown one NOT_FOUND.
TEST_F(AuthzE2eTest, HealthOnTheMainPortIsUnderThePolicy) {
  using grpc::health::v1::Health;
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  auto health = Health::NewStub(ChannelFor("stranger"));
  auto check = [&](const std::string& service, HealthCheckResponse* response = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse ignored;
    return health->Check(&context, request, response != nullptr ? response : &ignored).error_code();
  };
  auto watch = [&](HealthCheckResponse* first) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service("orderhold.v1.OrderHold");
    auto reader = health->Watch(&context, request);
    if (reader->Read(first)) {
      context.TryCancel();
      return grpc::StatusCode::OK;
    }
    return reader->Finish().error_code();
  };
  HealthCheckResponse response;
  ASSERT_TRUE(Eventually([&] {
    return check("", &response) == grpc::StatusCode::OK &&
           response.status() == HealthCheckResponse::SERVING;
  })) << server_.log();
  EXPECT_EQ(check("orderhold.v1.OrderHold"), grpc::StatusCode::OK);
  EXPECT_EQ(check("no.such.Service"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(check(std::string(201, 's')), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(watch(&response), grpc::StatusCode::OK);
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  // The policy without its health rule: the stranger, and the storefront too, are refused.
  std::ifstream in(policy_);
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  const std::string rule = R"("name": "health")";
  ASSERT_TRUE(absl::StrContains(original, rule));
  WritePolicy(absl::StrReplaceAll(
      original, {{rule, R"("name": "health-off")"}, {"/grpc.health.v1.Health/*", "/nothing/*"}}));
  EXPECT_TRUE(Eventually([&] { return check("") == grpc::StatusCode::PERMISSION_DENIED; },
                         absl::Seconds(10)))
      << server_.log();
  EXPECT_EQ(watch(&response), grpc::StatusCode::PERMISSION_DENIED);
  health = Health::NewStub(ChannelFor("storefront"));
  EXPECT_EQ(check(""), grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace orderhold
