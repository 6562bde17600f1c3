// Unit tests of orderhold-bench's generator (client/bench/load_generator.h): ValidateOptions
// accepts the defaults and the valid variants, and names the offending flag for each value out of
// range (no server, no clock); the open-loop pacer's SleepUntilSteadyNs never returns before its
// target (one 2 ms sleep on the real clock: what it sleeps on is the point); a short run against a
// fake service on an in-process channel extends and reads the holds it placed (no network), and
// one with --call_log writes one line per completed call, ReleaseHolds included.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/bench/call_log.h"
#include "client/bench/load_generator.h"
#include "client/bench/method.h"
#include "client/bench/report.h"
#include "client/bench/workload.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

namespace orderhold::client::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------------------------
// SleepUntilSteadyNs

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TEST(SleepUntilSteadyNsTest, NeverReturnsBeforeItsTargetAndAtOnceWhenThatHasPassed) {
  for (int i = 0; i < 3; ++i) {
    const int64_t target = SteadyNowNs() + 2'000'000;
    SleepUntilSteadyNs(target);
    EXPECT_GE(SteadyNowNs(), target);
  }
  // Targets in the past return at once (a sleep on another clock, or one that misread the target,
  // would hang here until ctest's timeout fails the test).
  SleepUntilSteadyNs(SteadyNowNs() - int64_t{3'600} * 1'000'000'000);
  SleepUntilSteadyNs(0);
}

// ---------------------------------------------------------------------------------------------
// ValidateOptions

void ExpectRejected(const LoadOptions& options, const std::string& flag) {
  const absl::Status status = ValidateOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag << ": " << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(flag)) << status;
}

TEST(BenchValidateOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateOptions(LoadOptions{}).ok()) << ValidateOptions(LoadOptions{});
}

TEST(BenchValidateOptionsTest, ValidVariants) {
  LoadOptions open;
  open.rate = 1000;
  open.concurrency = 0;  // Ignored in open loop.
  EXPECT_TRUE(ValidateOptions(open).ok()) << ValidateOptions(open);

  LoadOptions zipf;
  zipf.distribution = Distribution::kZipf;
  zipf.users = 2;
  zipf.zipf_exponent = 1.01;
  zipf.warmup = absl::ZeroDuration();
  zipf.count = 100;
  zipf.ttl = absl::Seconds(30);
  EXPECT_TRUE(ValidateOptions(zipf).ok()) << ValidateOptions(zipf);

  LoadOptions one_user;
  one_user.users = 1;
  EXPECT_TRUE(ValidateOptions(one_user).ok()) << ValidateOptions(one_user);
}

TEST(BenchValidateOptionsTest, BadRate) {
  for (double rate :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    LoadOptions o;
    o.rate = rate;
    ExpectRejected(o, "--rate");
  }
}

TEST(BenchValidateOptionsTest, BadConcurrencyInClosedLoop) {
  LoadOptions o;
  o.concurrency = 0;
  ExpectRejected(o, "--concurrency");
  EXPECT_THAT(std::string(ValidateOptions(o).message()), HasSubstr("got 0"));
}

TEST(BenchValidateOptionsTest, BadMaxInFlight) {
  LoadOptions o;
  o.max_in_flight = 0;
  ExpectRejected(o, "--max_in_flight");
}

TEST(BenchValidateOptionsTest, BadDuration) {
  for (absl::Duration d : {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.duration = d;
    ExpectRejected(o, "--duration");
  }
}

TEST(BenchValidateOptionsTest, BadCount) {
  LoadOptions o;
  o.count = -1;
  ExpectRejected(o, "--count");
}

TEST(BenchValidateOptionsTest, BadDeadline) {
  for (absl::Duration d :
       {absl::ZeroDuration(), absl::Milliseconds(-5), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.deadline = d;
    ExpectRejected(o, "--deadline");
  }
}

TEST(BenchValidateOptionsTest, BadWarmup) {
  for (absl::Duration d : {absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.warmup = d;
    ExpectRejected(o, "--warmup");
  }
}

TEST(BenchValidateOptionsTest, BadTtl) {
  for (absl::Duration d : {absl::Seconds(-1), absl::InfiniteDuration()}) {
    LoadOptions o;
    o.ttl = d;
    ExpectRejected(o, "--ttl");
  }
}

TEST(BenchValidateOptionsTest, BadConnections) {
  LoadOptions o;
  o.connections = 0;
  ExpectRejected(o, "--connections");
}

TEST(BenchValidateOptionsTest, BadUsers) {
  LoadOptions o;
  o.users = 0;
  ExpectRejected(o, "--users");

  LoadOptions zipf;
  zipf.distribution = Distribution::kZipf;
  zipf.users = 1;
  ExpectRejected(zipf, "--users");
  EXPECT_THAT(std::string(ValidateOptions(zipf).message()), HasSubstr("zipf"));
}

TEST(BenchValidateOptionsTest, BadZipfExponent) {
  for (double q : {1.0, 0.5, -2.0, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN()}) {
    LoadOptions o;
    o.distribution = Distribution::kZipf;
    o.zipf_exponent = q;
    ExpectRejected(o, "--zipf_exponent");
  }
  // Only checked for zipf.
  LoadOptions uniform;
  uniform.zipf_exponent = 0.5;
  EXPECT_TRUE(ValidateOptions(uniform).ok());
}

TEST(BenchValidateOptionsTest, BadMix) {
  LoadOptions zero;
  zero.mix = Mix{{0, 0, 0}};
  ExpectRejected(zero, "--mix");

  LoadOptions negative;
  negative.mix = Mix{{10, -1, 0}};
  ExpectRejected(negative, "--mix");
  EXPECT_THAT(std::string(ValidateOptions(negative).message()), HasSubstr("pay"));
}

TEST(BenchValidateOptionsTest, ScopedPlaceShape) {
  LoadOptions scoped;
  scoped.place = PlaceShape{.scopes = 4, .quantity = 2, .scope_max_holds = 2, .scope_max_units = 8};
  EXPECT_TRUE(ValidateOptions(scoped).ok()) << ValidateOptions(scoped);

  LoadOptions bad;
  bad.place.scopes = -1;
  ExpectRejected(bad, "--scopes");
  bad.place = PlaceShape{.scopes = 0, .quantity = 0, .scope_max_holds = 2, .scope_max_units = 0};
  ExpectRejected(bad, "--scope_max_holds");  // a scope limit without scopes
  bad.place = PlaceShape{.scopes = 2, .quantity = 9, .scope_max_holds = 0, .scope_max_units = 8};
  ExpectRejected(bad, "--quantity");  // could never be granted
}

TEST(BenchValidateOptionsTest, ExtendAndGetMixIsValid) {
  LoadOptions o;
  o.mix = Mix{{2, 0, 0, 0, 1, 1}};
  EXPECT_TRUE(ValidateOptions(o).ok()) << ValidateOptions(o);
  o.mix = Mix{{0, 0, 0, 0, -1, 1}};
  ExpectRejected(o, "--mix");
  EXPECT_THAT(std::string(ValidateOptions(o).message()), HasSubstr("extend"));
}

TEST(BenchValidateOptionsTest, BadPoolCapacity) {
  LoadOptions o;
  o.pool_capacity = 0;
  const absl::Status status = ValidateOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("pool capacity"));
}

// ---------------------------------------------------------------------------------------------
// A run against a fake service: ExtendHold and GetHold visit holds the run placed

// Creates every hold it is asked for; records which orders ExtendHold and GetHold named and
// whether a PlaceHold had created each before. Sync handlers run on gRPC's threads: one mutex.
class RecordingOrderHold final : public orderhold::v1::OrderHold::Service {
 public:
  grpc::Status PlaceHold(grpc::ServerContext*, const orderhold::v1::PlaceHoldRequest* request,
                         orderhold::v1::PlaceHoldResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    placed.insert(request->order_id());
    response->set_created(true);
    return grpc::Status::OK;
  }
  grpc::Status ExtendHold(grpc::ServerContext*, const orderhold::v1::ExtendHoldRequest* request,
                          orderhold::v1::ExtendHoldResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    extends.push_back(*request);
    extends_of_placed += placed.count(request->order_id()) > 0 ? 1 : 0;
    response->set_extended(true);
    return grpc::Status::OK;
  }
  grpc::Status GetHold(grpc::ServerContext*, const orderhold::v1::GetHoldRequest* request,
                       orderhold::v1::GetHoldResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    gets.push_back(*request);
    gets_of_placed += placed.count(request->order_id()) > 0 ? 1 : 0;
    return grpc::Status::OK;
  }
  // Answers one released hold named after the user; every other call is UNAVAILABLE.
  grpc::Status ReleaseHolds(grpc::ServerContext*, const orderhold::v1::ReleaseHoldsRequest* request,
                            orderhold::v1::ReleaseHoldsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    if (++releases % 2 == 0) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
    response->add_holds()->set_order_id(absl::StrCat("r-", request->user_id()));
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::set<std::string> placed;
  std::vector<orderhold::v1::ExtendHoldRequest> extends;
  std::vector<orderhold::v1::GetHoldRequest> gets;
  int extends_of_placed = 0;
  int gets_of_placed = 0;
  int releases = 0;
};

// One run of the generator on an in-process channel to `server`.
RunReport RunOn(grpc::Server& server, const LoadOptions& options) {
  std::vector<std::shared_ptr<orderhold::v1::OrderHold::StubInterface>> stubs;
  stubs.push_back(
      orderhold::v1::OrderHold::NewStub(server.InProcessChannel(grpc::ChannelArguments())));
  LoadGenerator generator(options, std::move(stubs));
  return generator.Run();
}

TEST(BenchLoadGeneratorTest, ExtendAndGetVisitHoldsThisRunPlaced) {
  RecordingOrderHold service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  LoadOptions options;
  options.concurrency = 1;  // one call at a time: each starts after the previous one completed
  options.warmup = absl::ZeroDuration();
  options.count = 300;
  options.users = 5;
  options.ttl = absl::Minutes(5);
  options.run_seed = 0xbeef;
  const absl::StatusOr<Mix> mix = ParseMix("place=1,extend=1,get=1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  options.mix = *mix;
  ASSERT_TRUE(ValidateOptions(options).ok()) << ValidateOptions(options);
  const RunReport report = RunOn(*server, options);
  server->Shutdown();

  EXPECT_EQ(report.all.completed, 300);
  EXPECT_EQ(report.all.errors, 0);
  const MethodReport& extend = report.methods[static_cast<int>(Method::kExtendHold)];
  const MethodReport& get = report.methods[static_cast<int>(Method::kGetHold)];
  EXPECT_GT(extend.completed, 0);
  EXPECT_GT(get.completed, 0);
  std::lock_guard<std::mutex> lock(service.mu);
  EXPECT_EQ(static_cast<int64_t>(service.extends.size()), extend.completed);
  EXPECT_EQ(static_cast<int64_t>(service.gets.size()), get.completed);
  // Every ExtendHold and GetHold names a hold this run placed, except those sent before the first
  // PlaceHold completed, which name an order never placed.
  for (const orderhold::v1::ExtendHoldRequest& sent : service.extends) {
    EXPECT_TRUE(service.placed.count(sent.order_id()) > 0 ||
                sent.order_id().rfind("b0000beef-missing-", 0) == 0)
        << sent.order_id();
    EXPECT_EQ(sent.ttl().seconds(), 300);  // --ttl is ExtendHold's wanted time left too
    EXPECT_EQ(sent.request_id(), "");
  }
  for (const orderhold::v1::GetHoldRequest& sent : service.gets) {
    EXPECT_TRUE(service.placed.count(sent.order_id()) > 0 ||
                sent.order_id().rfind("b0000beef-missing-", 0) == 0)
        << sent.order_id();
  }
  EXPECT_GT(service.extends_of_placed, 0);
  EXPECT_GT(service.gets_of_placed, 0);
}

TEST(BenchLoadGeneratorTest, CallLogHasOneLinePerCompletedCall) {
  RecordingOrderHold service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string path = absl::StrCat(testing::TempDir(), "/call_log_test.jsonl");
  absl::StatusOr<std::unique_ptr<CallLog>> log = CallLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status();

  LoadOptions options;
  options.concurrency = 4;
  options.warmup = absl::Milliseconds(1);  // warmup calls are logged too
  options.count = 200;
  options.users = 3;
  options.run_seed = 0xbeef;
  options.call_log = log->get();
  const absl::StatusOr<Mix> mix = ParseMix("place=1,release=1");
  ASSERT_TRUE(mix.ok()) << mix.status();
  options.mix = *mix;
  const RunReport report = RunOn(*server, options);
  server->Shutdown();
  ASSERT_TRUE((*log)->Close());

  std::ifstream in(path);
  std::string line;
  int places = 0, released = 0, unavailable = 0;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, R"({"m":"place","u":"u)")) {
      ++places;
      EXPECT_TRUE(absl::StrContains(line, R"(,"o":"b0000beef-)")) << line;
      EXPECT_TRUE(absl::StrContains(line, R"(,"c":0,)")) << line;
      EXPECT_TRUE(absl::StrContains(line, R"(,"created":true,"exp":)")) << line;
    } else if (absl::StartsWith(line, R"({"m":"release","u":"u)")) {
      EXPECT_FALSE(absl::StrContains(line, R"("o":)")) << line;
      if (absl::StrContains(line, R"(,"c":14,)")) {
        ++unavailable;
        EXPECT_FALSE(absl::StrContains(line, "released")) << line;
      } else {
        ++released;
        EXPECT_TRUE(absl::StrContains(line, R"(,"released":["r-u)")) << line;
      }
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  // Measured calls plus those of the warmup: every call the server saw, each once.
  EXPECT_GE(places + released + unavailable, report.all.completed);
  EXPECT_GT(places, 0);
  EXPECT_GT(released, 0);
  EXPECT_GT(unavailable, 0);
  std::lock_guard<std::mutex> lock(service.mu);
  EXPECT_EQ(static_cast<int>(service.placed.size()), places);
  EXPECT_EQ(released + unavailable, service.releases);
}

}  // namespace
}  // namespace orderhold::client::bench
