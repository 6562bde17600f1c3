// End to end in one process: real redis-server, App (the same wiring as orderhold-server) on
// port 0, and the client library over a real channel.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "grpc/grpc.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/support/alloc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "src/proto/grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/testing/eventually.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;

// Calls the gRPC servers of this process have received so far, from channelz (on by default):
// tells a test that a call it started on another thread has reached the server.
int64_t ServerCallsStarted() {
  char* json = grpc_channelz_get_servers(0);
  constexpr absl::string_view kKey = "\"callsStarted\":\"";
  int64_t total = 0;
  absl::string_view rest = json;
  for (size_t at = rest.find(kKey); at != absl::string_view::npos; at = rest.find(kKey)) {
    rest.remove_prefix(at + kKey.size());
    int64_t calls = 0;
    if (absl::SimpleAtoi(rest.substr(0, rest.find('"')), &calls)) total += calls;
  }
  gpr_free(json);
  return total;
}

class ServerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start()); }

  Config TestConfig(bool run_reaper = false) {
    Config config;
    config.grpc_address = "127.0.0.1:0";
    config.redis_url = ParsedRedisUrl(redis_->url());
    config.run_reaper = run_reaper;
    config.reap_interval = absl::Milliseconds(50);
    config.health_check_interval = absl::Milliseconds(50);
    config.redis_timeout = absl::Milliseconds(500);
    return config;
  }

  // Starts an App reporting into `registry` (tests running two Apps give each its own).
  std::unique_ptr<App> StartApp(const Config& config, prometheus::Registry& registry) {
    auto app = App::Start(config, registry);
    EXPECT_THAT(app, IsOk());
    return app.ok() ? std::move(*app) : nullptr;
  }

  static std::string Target(const App& app) { return absl::StrCat("127.0.0.1:", app.grpc_port()); }

  std::unique_ptr<client::OrderHoldClient> ClientFor(const App& app) {
    return client::OrderHoldClient::Connect(Target(app),
                                            client::ClientOptions{absl::Seconds(2), ""});
  }

  static HealthCheckResponse::ServingStatus Health(const App& app, const std::string& service) {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(Target(app), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    if (!stub->Check(&context, request, &response).ok()) return HealthCheckResponse::UNKNOWN;
    return response.status();
  }

  // Starts app_ with the fixture's registry_, and client_ for it.
  void StartDefault(bool run_reaper = false) {
    app_ = StartApp(TestConfig(run_reaper), registry_);
    ASSERT_NE(app_, nullptr);
    client_ = ClientFor(*app_);
  }

  std::unique_ptr<RedisServer> redis_;
  prometheus::Registry registry_;
  std::unique_ptr<App> app_;
  std::unique_ptr<client::OrderHoldClient> client_;
};

TEST_F(ServerE2eTest, TrainTicketStory) {
  StartDefault(/*run_reaper=*/true);

  for (const char* order : {"train-1", "train-2", "train-3"}) {
    auto placed = client_->PlaceHold("alice", order);
    ASSERT_THAT(placed, IsOk());
    EXPECT_TRUE(placed->created());
    EXPECT_EQ(placed->max_holds(), 3u);
    EXPECT_NEAR(placed->hold().remaining().seconds(), 30 * 60, 2);
  }
  EXPECT_THAT(client_->PlaceHold("alice", "train-4"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("max_holds 3"), HasSubstr("earliest expires"))));
  auto paid = client_->Pay("alice", "train-2");
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->hold().order_id(), "train-2");
  auto fourth = client_->PlaceHold("alice", "train-4");
  ASSERT_THAT(fourth, IsOk());
  EXPECT_EQ(fourth->active_holds(), 3u);

  // A short hold expires on its own: not listed once due, and the reaper removes it.
  auto quick = client_->PlaceHold("bob", "concert-1", absl::Milliseconds(200));
  ASSERT_THAT(quick, IsOk());
  EXPECT_LE(quick->hold().remaining().nanos(), 200000000);
  EXPECT_TRUE(Eventually([&] {
    auto list = client_->ListHolds("bob");
    return list.ok() && list->holds_size() == 0;
  }));
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(registry_, "orderhold_reaper_lag_seconds") >= 1 &&
           MetricValue(registry_, "orderhold_holds_expired_total") >= 1;
  }));
  auto list = client_->ListHolds("alice");
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->holds_size(), 3);
  EXPECT_EQ(MetricValue(registry_, "orderhold_grpc_requests_total",
                        {{"method", "PlaceHold"}, {"code", "RESOURCE_EXHAUSTED"}}),
            1);
}

// The benchmark-only mode: same binary and API, nothing stored, no Redis needed.
TEST_F(ServerE2eTest, NoopStoreAnswersWithoutRedisAndStoresNothing) {
  ASSERT_THAT(redis_->Stop(), IsOk());
  Config config = TestConfig(/*run_reaper=*/true);
  config.store = StoreKind::kNoop;
  app_ = StartApp(config, registry_);
  ASSERT_NE(app_, nullptr);
  EXPECT_EQ(app_->redis_store(), nullptr);
  client_ = ClientFor(*app_);
  for (const char* order : {"o1", "o2", "o3", "o4"}) {  // no limit: nothing is remembered
    auto placed = client_->PlaceHold("alice", order, absl::Seconds(90));
    ASSERT_THAT(placed, IsOk());
    EXPECT_TRUE(placed->created());
    EXPECT_EQ(placed->hold().remaining().seconds(), 90);
  }
  EXPECT_THAT(client_->Pay("alice", "anything"), IsOk());
  auto list = client_->ListHolds("alice");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->holds_size(), 0);
  EXPECT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::SERVING; }));
}

TEST_F(ServerE2eTest, HundredConcurrentPlaceHoldsOverTwoServersCreateExactlyMaxHolds) {
  prometheus::Registry registry_a, registry_b;
  auto app_a = StartApp(TestConfig(), registry_a);
  auto app_b = StartApp(TestConfig(), registry_b);
  ASSERT_NE(app_a, nullptr);
  ASSERT_NE(app_b, nullptr);
  auto client_a = ClientFor(*app_a);
  auto client_b = ClientFor(*app_b);

  std::atomic<int> created{0}, exhausted{0}, other{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      auto& client = i % 2 == 0 ? client_a : client_b;
      auto result = client->PlaceHold("alice", absl::StrCat("order-", i));
      if (result.ok() && result->created()) {
        ++created;
      } else if (result.status().code() == absl::StatusCode::kResourceExhausted) {
        ++exhausted;
      } else {
        ++other;
      }
    });
  }
  go = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(exhausted.load(), 97);
  EXPECT_EQ(other.load(), 0);
  auto list = client_b->ListHolds("alice");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->holds_size(), 3);
}

TEST_F(ServerE2eTest, IdempotentRetryNeitherTakesASlotNorExtends) {
  StartDefault();
  auto first = client_->PlaceHold("alice", "o1", absl::Seconds(60));
  ASSERT_THAT(first, IsOk());
  auto retry = client_->PlaceHold("alice", "o1", absl::Hours(1));
  ASSERT_THAT(retry, IsOk());
  EXPECT_FALSE(retry->created());
  EXPECT_EQ(retry->active_holds(), 1u);
  EXPECT_EQ(retry->hold().expire_time().seconds(), first->hold().expire_time().seconds());
  EXPECT_EQ(retry->hold().expire_time().nanos(), first->hold().expire_time().nanos());
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_placed_total"), 1);
}

TEST_F(ServerE2eTest, ExpiredButUnreapedHoldsAreNeitherCountedListedNorPayable) {
  StartDefault();
  for (const char* order : {"a", "b", "c"}) {
    ASSERT_THAT(client_->PlaceHold("alice", order, absl::Milliseconds(200)), IsOk());
  }
  ASSERT_TRUE(Eventually([&] {
    auto list = client_->ListHolds("alice");
    return list.ok() && list->holds_size() == 0;
  }));
  // Still in Redis: nothing reaped them.
  ASSERT_OK_AND_ASSIGN(std::string stored, redis_->Command(testing::StoredHoldsCommand(
                                               app_->redis_store()->keys(), "alice", "count")));
  EXPECT_EQ(stored, "3");
  EXPECT_THAT(client_->Pay("alice", "a"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("EXPIRED")));
  for (const char* order : {"d", "e", "f"}) {
    auto placed = client_->PlaceHold("alice", order);
    ASSERT_THAT(placed, IsOk());
    EXPECT_TRUE(placed->created());
  }
  EXPECT_THAT(client_->PlaceHold("alice", "g"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_lag_seconds"), 0);
}

TEST_F(ServerE2eTest, EveryBadInputIsInvalidArgumentNamingTheField) {
  StartDefault();
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(client_->PlaceHold("", "o"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->PlaceHold("u", ""), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->PlaceHold(std::string(129, 'u'), "o"),
              StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->PlaceHold("u", std::string(129, 'o')),
              StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->PlaceHold("u\n", "o"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->PlaceHold("u", "o\x7f"), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->PlaceHold("u", "o", absl::ZeroDuration()),
              StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(client_->PlaceHold("u", "o", absl::Seconds(-5)),
              StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(client_->PlaceHold("u", "o", absl::Hours(25)), StatusIs(kInvalid, HasSubstr("ttl")));
  EXPECT_THAT(client_->Pay("", "o"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->Pay("u", std::string("o\0", 2)), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->ListHolds(""), StatusIs(kInvalid, HasSubstr("user_id")));

  // A Duration message that breaks its own rules (mixed signs), sent with the raw stub.
  auto stub = v1::OrderHold::NewStub(
      grpc::CreateChannel(Target(*app_), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::PlaceHoldRequest request;
  request.set_user_id("u");
  request.set_order_id("o");
  request.mutable_ttl()->set_seconds(5);
  request.mutable_ttl()->set_nanos(-1);
  v1::PlaceHoldResponse response;
  grpc::Status status = stub->PlaceHold(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("ttl"));

  // Nothing was stored by any of them.
  ASSERT_OK_AND_ASSIGN(std::string keys, redis_->Command({"DBSIZE"}));
  EXPECT_EQ(keys, "0");
  EXPECT_EQ(
      MetricValue(registry_, "orderhold_holds_rejected_total", {{"reason", "invalid_argument"}}),
      10);
}

TEST_F(ServerE2eTest, RedisDownIsUnavailableAndNotServingThenRecovers) {
  StartDefault(/*run_reaper=*/true);
  ASSERT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::SERVING; }));
  EXPECT_EQ(Health(*app_, "orderhold.v1.OrderHold"), HealthCheckResponse::SERVING);
  ASSERT_THAT(client_->PlaceHold("alice", "o1"), IsOk());

  ASSERT_THAT(redis_->Stop(), IsOk());
  // Refused at once, not at the deadline (that would be DEADLINE_EXCEEDED). The refusal takes
  // milliseconds; a client deadline far above it and a bound at half of it keep the check
  // meaningful without failing when a loaded machine stalls a while.
  constexpr absl::Duration kDeadline = absl::Seconds(10);
  auto patient =
      client::OrderHoldClient::Connect(Target(*app_), client::ClientOptions{kDeadline, ""});
  const absl::Time start = absl::Now();
  EXPECT_THAT(patient->PlaceHold("alice", "o2"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, kDeadline / 2);
  EXPECT_THAT(client_->ListHolds("alice"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Eventually([&] {
    return Health(*app_, "") == HealthCheckResponse::NOT_SERVING &&
           Health(*app_, "orderhold.v1.OrderHold") == HealthCheckResponse::NOT_SERVING;
  }));
  // Out of readiness, still alive: a liveness probe must not restart a server for Redis' outage.
  EXPECT_EQ(Health(*app_, "liveness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_rejected_total", {{"reason", "unavailable"}}),
            1);

  ASSERT_THAT(redis_->Restart(), IsOk());
  EXPECT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::SERVING; }));
  EXPECT_EQ(Health(*app_, "orderhold.v1.OrderHold"), HealthCheckResponse::SERVING);
  EXPECT_THAT(client_->PlaceHold("alice", "o2"), IsOk());
}

TEST_F(ServerE2eTest, RedisDownAtStartIsNotFatal) {
  ASSERT_THAT(redis_->Stop(), IsOk());
  StartDefault(/*run_reaper=*/true);
  EXPECT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::NOT_SERVING; }));
  ASSERT_THAT(redis_->Restart(), IsOk());
  EXPECT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::SERVING; }));
  EXPECT_THAT(client_->PlaceHold("alice", "o1"), IsOk());
}

TEST_F(ServerE2eTest, ScriptFlushMidRunCallsStillSucceed) {
  StartDefault(/*run_reaper=*/true);
  for (int i = 0; i < 6; ++i) {
    // The scripts are called by FCALL first (--redis_functions), by EVALSHA once a connection
    // met a FUNCTION FLUSH: both caches are emptied in turn.
    ASSERT_THAT(redis_->Command({i % 2 == 0 ? "FUNCTION" : "SCRIPT", "FLUSH"}), IsOk());
    EXPECT_THAT(client_->PlaceHold(absl::StrCat("user", i), "o"), IsOk());
    EXPECT_THAT(client_->ListHolds(absl::StrCat("user", i)), IsOk());
    EXPECT_THAT(client_->Pay(absl::StrCat("user", i), "o"), IsOk());
  }
}

TEST_F(ServerE2eTest, PortAlreadyTakenIsAnError) {
  prometheus::Registry registry_a, registry_b;
  auto first = StartApp(TestConfig(), registry_a);
  ASSERT_NE(first, nullptr);
  Config config = TestConfig();
  config.grpc_address = Target(*first);
  EXPECT_THAT(App::Start(config, registry_b), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ServerE2eTest, ReflectionListsTheServiceAndHealth) {
  StartDefault();
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(
      grpc::CreateChannel(Target(*app_), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("*");
  ASSERT_TRUE(stream->Write(request));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  EXPECT_THAT(names, Contains("orderhold.v1.OrderHold"));
  // And the descriptors resolve, so grpcurl can describe and call the service.
  request.set_file_containing_symbol("orderhold.v1.OrderHold");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServerE2eTest, ShutdownReportsNotServingAndFinishesInFlightCalls) {
  StartDefault(/*run_reaper=*/true);
  ASSERT_TRUE(Eventually([&] { return Health(*app_, "") == HealthCheckResponse::SERVING; }));

  // A watcher sees the transition (new calls are refused once shutdown starts).
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(Target(*app_), grpc::InsecureChannelCredentials()));
  grpc::ClientContext watch_context;
  HealthCheckRequest watch_request;
  watch_request.set_service("orderhold.v1.OrderHold");
  auto watch = health->Watch(&watch_context, watch_request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  // An in-flight call: Redis is hung, so it is still waiting when shutdown begins.
  ASSERT_THAT(redis_->Pause(), IsOk());
  absl::StatusOr<v1::PlaceHoldResponse> in_flight;
  const int64_t calls_before = ServerCallsStarted();
  std::thread caller([&] { in_flight = client_->PlaceHold("alice", "o1"); });
  // Until it has reached the server (EXPECT, not ASSERT: the threads below must be joined).
  EXPECT_TRUE(Eventually([&] { return ServerCallsStarted() > calls_before; }));
  std::thread stopper([&] { app_->Shutdown(absl::Seconds(5)); });
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  watch_context.TryCancel();  // an open Watch is an in-flight call too: let shutdown finish
  caller.join();
  stopper.join();
  ASSERT_THAT(redis_->Resume(), IsOk());
  // Finished by the server with its real outcome (Redis did not answer within --redis_timeout),
  // not cancelled by the shutdown.
  EXPECT_THAT(in_flight, StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(ServerE2eTest, InvalidUtf8OrUndecodableRequestIsInvalidArgument) {
  StartDefault();
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  // (The C++ client_ logs a protobuf error while serializing these, and sends them anyway.)
  EXPECT_THAT(client_->PlaceHold("\xff\xfe", "o1"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->PlaceHold("alice", "o\xc3"), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->Pay("alice", "\xed\xa0\x80"), StatusIs(kInvalid, HasSubstr("order_id")));
  EXPECT_THAT(client_->ListHolds("\xc0\xaf"), StatusIs(kInvalid, HasSubstr("user_id")));
  EXPECT_THAT(client_->PlaceHold("alice", "o\xc2\x85"), StatusIs(kInvalid, HasSubstr("control")));

  // Bytes that are not a PlaceHoldRequest at all, through a generic stub.
  grpc::GenericStub generic(grpc::CreateChannel(Target(*app_), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  const std::string garbage = "\x0a\xff\xff\xff";  // field 1, length that overruns
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), response;
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&context, "/orderhold.v1.OrderHold/PlaceHold", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("PlaceHoldRequest"));

  ASSERT_OK_AND_ASSIGN(std::string keys, redis_->Command({"DBSIZE"}));
  EXPECT_EQ(keys, "0");
}

}  // namespace
}  // namespace orderhold
