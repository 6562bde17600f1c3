// Tenants through the real orderhold-server binary, two replicas on one Redis: mutual TLS, the
// example tenants file deploy/tenants.example.json (--tenants; acme with max_holds 4, beta with
// the server's defaults, one operator) and client certificates made by openssl with the file's
// SPIFFE IDs (testing::TlsCerts::IssueClient). One tenant's caller, spelling the other tenant's
// ids, finds nothing and changes nothing by any rpc; herds and totals are exact per tenant; a
// watch sees only its tenant's events, with the ids its tenant sent; a caller in no tenant is
// refused, and an operator acts in the tenant its orderhold-tenant header names.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
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
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kSpiffe[] = "spiffe://orderhold.example/";

class TenantsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, testing::RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(dir_, testing::MakeTempDir("tenants-e2e"));
    ASSERT_OK_AND_ASSIGN(certs_, testing::TlsCerts::Create(dir_ + "/certs"));
    for (const char* who : {"acme-storefront", "beta-storefront", "operator", "stranger"}) {
      ASSERT_THAT(certs_->IssueClient(who, absl::StrCat(kSpiffe, who)), testing::IsOk());
    }
    tenants_ = dir_ + "/tenants.json";
    std::filesystem::copy_file(ORDERHOLD_DEPLOY_DIR "/tenants.example.json", tenants_);
    // A total per event, so that the herd of totals runs too: it applies in every tenant to the
    // scope as that tenant spells it.
    const std::string limits = dir_ + "/limits.yaml";
    std::ofstream(limits) << "rules:\n  - prefix: \"event:\"\n    total_max_holds: 5\n";
    for (testing::ServerProcess* server : {&a_, &b_}) {
      server->Start({"--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                     absl::StrCat("--redis_url=", redis_->url()),
                     absl::StrCat("--tls_cert_file=", certs_->server_cert()),
                     absl::StrCat("--tls_key_file=", certs_->server_key()),
                     absl::StrCat("--tls_client_ca_file=", certs_->ca_cert()),
                     absl::StrCat("--tenants=", tenants_), "--tenants_refresh_interval=1s",
                     absl::StrCat("--scope_limits=", limits), "--event_ack_timeout=200ms"});
      ASSERT_TRUE(server->WaitServing()) << server->log();
    }
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<OrderHold::Stub> StubFor(const std::string& who,
                                           const testing::ServerProcess& server) {
    return OrderHold::NewStub(testing::TlsChannelAs(*certs_, who, server.grpc_port()));
  }
  std::unique_ptr<OrderHold::Stub> StubFor(const std::string& who) { return StubFor(who, a_); }

  // A context with a deadline and, when `tenant` is given, the orderhold-tenant header.
  static void Prepare(grpc::ClientContext& context, const std::string& tenant = "") {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!tenant.empty()) context.AddMetadata("orderhold-tenant", tenant);
  }

  static grpc::Status Place(OrderHold::Stub& stub, const std::string& user,
                            const std::string& order, const std::string& scope = "",
                            const std::string& tenant = "") {
    grpc::ClientContext context;
    Prepare(context, tenant);
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    request.set_scope(scope);
    v1::PlaceHoldResponse response;
    return stub.PlaceHold(&context, request, &response);
  }

  static absl::StatusOr<v1::GetHoldResponse> Get(OrderHold::Stub& stub, const std::string& user,
                                                 const std::string& order,
                                                 const std::string& tenant = "") {
    grpc::ClientContext context;
    Prepare(context, tenant);
    v1::GetHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    v1::GetHoldResponse response;
    const grpc::Status status = stub.GetHold(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  // A watch of `group` for `duration`: how it ended, and, with `seen`, "user_id/order_id" of every
  // event it got.
  static grpc::Status Watch(OrderHold::Stub& stub, const std::string& group,
                            absl::Duration duration, std::vector<std::string>* seen = nullptr) {
    grpc::ClientContext context;
    Prepare(context);
    context.set_deadline(absl::ToChronoTime(absl::Now() + duration));
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group(group);
    request.set_consumer("c1");
    auto reader = stub.WatchHoldEvents(&context, request);
    v1::HoldEvent event;
    while (reader->Read(&event)) {
      if (seen != nullptr) {
        seen->push_back(absl::StrCat(event.hold().user_id(), "/", event.hold().order_id()));
      }
    }
    return reader->Finish();
  }

  // `rpc` of `stub` with `request`: the status code's name, and for an OK "OK <found(response)>".
  template <typename Request, typename Response, typename Found>
  static std::string Outcome(grpc::Status (OrderHold::Stub::*rpc)(grpc::ClientContext*,
                                                                  const Request&, Response*),
                             OrderHold::Stub& stub, const Request& request, Found found) {
    grpc::ClientContext context;
    Prepare(context);
    Response response;
    const grpc::Status status = (stub.*rpc)(&context, request, &response);
    if (status.ok()) return absl::StrCat("OK ", found(response));
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
  }

  // Every rpc of `stub`'s caller on acme's ids (user u1, order o1, scope event:E1, group billing),
  // by method: Outcome, counting the holds (or units, events) it found or ended.
  static std::map<std::string, std::string> EveryRpcOnAcmesIds(OrderHold::Stub& stub) {
    const auto none = [](const auto&) { return 1; };  // an OK that needs no count
    std::map<std::string, std::string> out;
    v1::GetHoldRequest get;
    get.set_user_id("u1");
    get.set_order_id("o1");
    out["GetHold"] = Outcome(&OrderHold::Stub::GetHold, stub, get, none);
    v1::PayRequest pay;
    pay.set_user_id("u1");
    pay.set_order_id("o1");
    out["Pay"] = Outcome(&OrderHold::Stub::Pay, stub, pay, none);
    v1::CancelHoldRequest cancel;
    cancel.set_user_id("u1");
    cancel.set_order_id("o1");
    out["CancelHold"] = Outcome(&OrderHold::Stub::CancelHold, stub, cancel, none);
    v1::ExtendHoldRequest extend;
    extend.set_user_id("u1");
    extend.set_order_id("o1");
    out["ExtendHold"] = Outcome(&OrderHold::Stub::ExtendHold, stub, extend, none);
    v1::DeleteConsumerGroupRequest drop;
    drop.set_consumer_group("billing");
    out["DeleteConsumerGroup"] = Outcome(&OrderHold::Stub::DeleteConsumerGroup, stub, drop, none);
    v1::ListHoldsRequest list;
    list.set_user_id("u1");
    out["ListHolds"] = Outcome(&OrderHold::Stub::ListHolds, stub, list,
                               [](const auto& r) { return r.holds_size(); });
    v1::ReleaseHoldsRequest release;
    release.set_user_id("u1");
    out["ReleaseHolds"] = Outcome(&OrderHold::Stub::ReleaseHolds, stub, release,
                                  [](const auto& r) { return r.released_count(); });
    v1::GetScopeUsageRequest usage;
    usage.set_scope("event:E1");
    out["GetScopeUsage"] = Outcome(&OrderHold::Stub::GetScopeUsage, stub, usage, [](const auto& r) {
      return r.usage().holds() + r.usage().units();
    });
    v1::ListScopeHoldsRequest scope_list;
    scope_list.set_scope("event:E1");
    out["ListScopeHolds"] = Outcome(&OrderHold::Stub::ListScopeHolds, stub, scope_list,
                                    [](const auto& r) { return r.holds_size(); });
    v1::ReleaseScopeHoldsRequest scope_release;
    scope_release.set_scope("event:E1");
    out["ReleaseScopeHolds"] = Outcome(&OrderHold::Stub::ReleaseScopeHolds, stub, scope_release,
                                       [](const auto& r) { return r.released_count(); });
    v1::AckHoldEventsRequest ack;
    ack.set_consumer_group("billing");
    ack.add_event_ids("1/1-0");
    out["AckHoldEvents"] = Outcome(&OrderHold::Stub::AckHoldEvents, stub, ack,
                                   [](const auto& r) { return r.acked(); });
    return out;
  }

  // The data set's digest (RedisServer::DataDigest).
  std::string Snapshot() {
    absl::StatusOr<std::string> digest = redis_->DataDigest();
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.value_or("");
  }

  static double Metric(const testing::ServerProcess& server, const std::string& series) {
    return testing::ScrapedValue(server.metrics_port(), series);
  }

  std::unique_ptr<testing::RedisServer> redis_;
  std::string dir_;
  std::optional<testing::TlsCerts> certs_;
  std::string tenants_;
  testing::ServerProcess a_{ORDERHOLD_SERVER_BINARY};
  testing::ServerProcess b_{ORDERHOLD_SERVER_BINARY};
};

TEST_F(TenantsE2eTest, EveryRpcOfOneTenantAgainstTheOthersIdsFindsNothingAndChangesNothing) {
  auto acme = StubFor("acme-storefront");
  auto beta = StubFor("beta-storefront", b_);
  ASSERT_TRUE(Place(*acme, "u1", "o1", "event:E1").ok());
  ASSERT_TRUE(Place(*acme, "u1", "o2").ok());
  // acme's group "billing" exists, with the ends of acme's holds to come.
  EXPECT_EQ(Watch(*acme, "billing", absl::Milliseconds(300)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  const std::string before = Snapshot();

  // beta spells acme's ids: each rpc answers as for ids nobody used.
  const std::map<std::string, std::string> nobodys = {{"GetHold", "NOT_FOUND"},
                                                      {"Pay", "NOT_FOUND"},
                                                      {"CancelHold", "NOT_FOUND"},
                                                      {"ExtendHold", "NOT_FOUND"},
                                                      {"DeleteConsumerGroup", "NOT_FOUND"},
                                                      {"ListHolds", "OK 0"},
                                                      {"GetScopeUsage", "OK 0"},
                                                      {"ListScopeHolds", "OK 0"},
                                                      {"ReleaseHolds", "OK 0"},
                                                      {"ReleaseScopeHolds", "OK 0"},
                                                      {"AckHoldEvents", "OK 0"}};
  EXPECT_EQ(EveryRpcOnAcmesIds(*beta), nobodys);
  EXPECT_EQ(Snapshot(), before) << "a call of beta changed acme's data";

  // acme still sees its own, with its own ids; beta's "u1" is another user.
  ASSERT_OK_AND_ASSIGN(v1::GetHoldResponse held, Get(*acme, "u1", "o1"));
  EXPECT_EQ(held.hold().user_id(), "u1");
  EXPECT_EQ(held.hold().scope(), "event:E1");
  EXPECT_TRUE(Place(*beta, "u1", "o1", "event:E1").ok());
  ASSERT_OK_AND_ASSIGN(v1::GetHoldResponse theirs, Get(*beta, "u1", "o1"));
  EXPECT_EQ(theirs.hold().user_id(), "u1");
}

TEST_F(TenantsE2eTest, HerdsAndTotalsAreExactPerTenantAcrossReplicas) {
  // 40 PlaceHolds of one user per tenant, half on each replica: acme's own max_holds (4) and
  // beta's server default (3); then 40 users per tenant into one event with a total of 5.
  const std::vector<std::string> who = {"acme-storefront", "beta-storefront"};
  std::vector<std::unique_ptr<OrderHold::Stub>> stubs;
  for (const std::string& caller : who) {
    stubs.push_back(StubFor(caller, a_));
    stubs.push_back(StubFor(caller, b_));
  }
  std::atomic<int> granted[2][2] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 40; ++i) {
      threads.emplace_back([&, t, i] {
        OrderHold::Stub& stub = *stubs[t * 2 + i % 2];
        if (Place(stub, "herd", absl::StrCat("o", i)).ok()) ++granted[t][0];
        if (Place(stub, absl::StrCat("fan", i), "o1", "event:E9").ok()) ++granted[t][1];
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(granted[0][0].load(), 4) << "acme's max_holds";
  EXPECT_EQ(granted[1][0].load(), 3) << "beta's (the server's --max_holds)";
  EXPECT_EQ(granted[0][1].load(), 5) << "acme's event:E9 total";
  EXPECT_EQ(granted[1][1].load(), 5) << "beta's event:E9 total";
}

TEST_F(TenantsE2eTest, AWatchSeesOnlyItsTenantsEventsWithItsOwnIds) {
  auto acme = StubFor("acme-storefront", a_);
  auto beta = StubFor("beta-storefront", b_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Place(*acme, "same-user", absl::StrCat("o", i)).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Place(*beta, "same-user", absl::StrCat("o", i)).ok());
  // Both tenants name their group "orders"; each cancels its holds on the other replica.
  auto read_all = [&](OrderHold::Stub& stub) {
    std::vector<std::string> seen;
    Watch(stub, "orders", absl::Seconds(2), &seen);
    std::sort(seen.begin(), seen.end());
    return seen;
  };
  auto cancel = [&](OrderHold::Stub& stub, int count) {
    for (int i = 0; i < count; ++i) {
      grpc::ClientContext c;
      Prepare(c);
      v1::CancelHoldRequest r;
      r.set_user_id("same-user");
      r.set_order_id(absl::StrCat("o", i));
      v1::CancelHoldResponse out;
      EXPECT_TRUE(stub.CancelHold(&c, r, &out).ok());
    }
  };
  // The groups start at the earliest retained event: create them before the ends.
  read_all(*StubFor("acme-storefront", b_));
  read_all(*StubFor("beta-storefront", a_));
  cancel(*StubFor("acme-storefront", b_), 3);
  cancel(*StubFor("beta-storefront", a_), 2);
  EXPECT_THAT(read_all(*acme), ElementsAre("same-user/o0", "same-user/o1", "same-user/o2"));
  EXPECT_THAT(read_all(*beta), ElementsAre("same-user/o0", "same-user/o1"));
}

TEST_F(TenantsE2eTest, ACallerInNoTenantIsRefusedAndAnOperatorActsInTheTenantItsHeaderNames) {
  auto acme = StubFor("acme-storefront");
  auto op = StubFor("operator");
  auto stranger = StubFor("stranger");
  ASSERT_TRUE(Place(*acme, "u1", "o1").ok());
  const std::string before = Snapshot();
  EXPECT_EQ(Place(*stranger, "u1", "o9").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Place(*acme, "u1", "o9", "", "beta").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Place(*op, "u1", "o9", "", "nope").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_GE(Metric(a_, "orderhold_calls_denied_total{method=\"PlaceHold\"}"), 2);

  EXPECT_THAT(Get(*op, "u1", "o1"), testing::StatusIs(absl::StatusCode::kNotFound))
      << "without the header an operator acts in no tenant";
  ASSERT_OK_AND_ASSIGN(v1::GetHoldResponse seen, Get(*op, "u1", "o1", "acme"));
  EXPECT_EQ(seen.hold().user_id(), "u1");
  EXPECT_TRUE(Place(*op, "u1", "o2", "", "acme").ok());
  EXPECT_TRUE(Get(*acme, "u1", "o2").ok()) << "the operator's hold is acme's";
  EXPECT_EQ(Place(*acme, "u1", "o3", "", "acme").error_code(), grpc::StatusCode::OK)
      << "a tenant's caller may name its own tenant";
  // orderhold-cli --tenant sends the header.
  const std::vector<std::string> cli = {ORDERHOLD_CLI_BINARY,
                                        absl::StrCat("--target=127.0.0.1:", a_.grpc_port()),
                                        absl::StrCat("--tls_ca_file=", certs_->ca_cert()),
                                        absl::StrCat("--tls_cert_file=", certs_->cert("operator")),
                                        absl::StrCat("--tls_key_file=", certs_->key("operator")),
                                        "--tls_server_name=localhost"};
  std::vector<std::string> get = cli;
  get.insert(get.end(), {"--tenant=acme", "get", "u1", "o1"});
  EXPECT_THAT(testing::RunProgram(get), testing::IsOk());
  get = cli;
  get.insert(get.end(), {"get", "u1", "o1"});
  EXPECT_THAT(testing::RunProgram(get), ::testing::Not(testing::IsOk()));
}

TEST_F(TenantsE2eTest, AnEditedFileTakesEffectAndABadOneKeepsTheTenantsInForce) {
  auto stranger = StubFor("stranger");
  EXPECT_EQ(Place(*stranger, "u1", "o1").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  std::ofstream(tenants_ + ".tmp")
      << R"({"tenants": [{"name": "gamma", "principals": [")" << kSpiffe
      << R"(stranger"]}, {"name": "acme", "principals": [null]}]})";
  std::filesystem::rename(tenants_ + ".tmp", tenants_);
  EXPECT_TRUE(Eventually(
      [&] { return Metric(a_, "orderhold_tenants_reloads_total{result=\"failure\"}") >= 1; }));
  EXPECT_EQ(Place(*stranger, "u1", "o1").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // An open watch of acme's, which the next edit takes out of every tenant.
  auto acme = StubFor("acme-storefront");
  grpc::ClientContext watch_context;
  Prepare(watch_context);
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchHoldEventsRequest watch;
  watch.set_consumer_group("orders");
  watch.set_consumer("c1");
  auto reader = acme->WatchHoldEvents(&watch_context, watch);
  ASSERT_TRUE(Eventually([&] { return Metric(a_, "orderhold_watches") == 1; }));
  std::ofstream(tenants_ + ".tmp")
      << R"({"tenants": [{"name": "gamma", "principals": [")" << kSpiffe << R"(stranger"]}]})";
  std::filesystem::rename(tenants_ + ".tmp", tenants_);
  EXPECT_TRUE(Eventually([&] { return Place(*stranger, "u1", "o1").ok(); }));
  v1::HoldEvent event;
  while (reader->Read(&event)) {
  }
  const grpc::Status ended = reader->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::PERMISSION_DENIED) << ended.error_message();
  EXPECT_EQ(Place(*StubFor("acme-storefront"), "u1", "o2").error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "acme is gone from the file";
}

// A tenant's own max_watches caps its callers' open watches on a server (the example's 20 for
// acme, lowered to 2 here by an edit of the file): the third is refused RESOURCE_EXHAUSTED naming
// it, while beta, with no max_watches of its own, keeps the server's caps and opens three.
TEST_F(TenantsE2eTest, ATenantsMaxWatchesCapsItsOpenWatchesAndAnotherTenantKeepsTheServers) {
  std::ifstream in(tenants_);
  const std::string example((std::istreambuf_iterator<char>(in)), {});
  const std::string lowered =
      absl::StrReplaceAll(example, {{"\"max_watches\": 20", "\"max_watches\": 2"}});
  ASSERT_NE(lowered, example) << "the example no longer gives acme max_watches 20";
  std::ofstream(tenants_ + ".tmp") << lowered;
  std::filesystem::rename(tenants_ + ".tmp", tenants_);
  ASSERT_TRUE(Eventually(
      [&] { return Metric(a_, "orderhold_tenants_reloads_total{result=\"success\"}") >= 1; }));
  struct OpenWatch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::HoldEvent>> reader;
  };
  auto open = [](OrderHold::Stub& stub, const std::string& consumer) {
    auto watch = std::make_unique<OpenWatch>();
    Prepare(watch->context);
    watch->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group("orders");
    request.set_consumer(consumer);
    watch->reader = stub.WatchHoldEvents(&watch->context, request);
    return watch;
  };
  auto acme = StubFor("acme-storefront");
  auto beta = StubFor("beta-storefront");
  std::vector<std::unique_ptr<OpenWatch>> kept;
  kept.push_back(open(*acme, "c1"));
  kept.push_back(open(*acme, "c2"));
  ASSERT_TRUE(Eventually([&] { return Metric(a_, "orderhold_watches") == 2; })) << a_.log();
  std::unique_ptr<OpenWatch> third = open(*acme, "c3");
  v1::HoldEvent event;
  while (third->reader->Read(&event)) {
  }
  const grpc::Status refused = third->reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("(its max_watches 2)"));
  for (const char* consumer : {"c1", "c2", "c3"}) kept.push_back(open(*beta, consumer));
  EXPECT_TRUE(Eventually([&] { return Metric(a_, "orderhold_watches") == 5; })) << a_.log();
  // Each admitted watch stayed open until cancelled here.
  for (std::unique_ptr<OpenWatch>& watch : kept) {
    watch->context.TryCancel();
    while (watch->reader->Read(&event)) {
    }
    EXPECT_EQ(watch->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

}  // namespace
}  // namespace orderhold
