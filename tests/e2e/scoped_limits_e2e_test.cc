// Scoped limits end to end: two replicas (Apps) on one real redis-server, called over real gRPC
// channels with the generated stubs, as a ticketing backend calls them. Concurrent PlaceHolds
// over two scopes never exceed any level, in holds or in units, whether a scope's limits come
// from the --scope_limits file or from the request; refused calls leave no trace; a refusal's
// google.rpc details reach the client; SIGHUP's reload keeps the old rules when the file is bad.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/app.h"
#include "server/limits_file.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/os_util.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisServer;
using ::testing::HasSubstr;

constexpr int kRounds = 20;
constexpr int kCallsPerRound = 100;
constexpr int kThreads = 4;

// What one concurrent round leaves: the live holds per scope, and what the calls answered.
struct RoundResult {
  std::map<std::string, int64_t> holds;  // scope -> live holds
  std::map<std::string, int64_t> units;  // scope -> live units
  int64_t total_holds = 0;
  int64_t total_units = 0;
  int64_t created = 0;        // calls answered OK, created = true
  int64_t created_units = 0;  // their quantities
  int64_t refused = 0;        // RESOURCE_EXHAUSTED
  int64_t other = 0;          // anything else (must stay 0)
  std::string first_other;
};

class ScopedLimitsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    ASSERT_OK_AND_ASSIGN(dir_, orderhold::testing::MakeTempDir("scoped-limits"));
  }
  void TearDown() override {
    apps_.clear();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string WriteLimits(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << text;
    return path;
  }

  // Starts `replicas` Apps on the fixture's Redis: max_holds 3, `max_units`, the limits file.
  void StartReplicas(int replicas, int64_t max_units, const std::string& limits_file,
                     domain::RequestScopeLimits mode = domain::RequestScopeLimits::kCeiling) {
    for (int i = 0; i < replicas; ++i) {
      Config config;
      config.policy.request_scope_limits = mode;
      config.grpc_address = "127.0.0.1:0";
      config.redis_url = ParsedRedisUrl(redis_->url());
      config.run_reaper = false;
      config.health_check_interval = absl::Milliseconds(50);
      config.policy.max_holds = 3;
      config.policy.max_units = max_units;
      config.scope_limits_file = limits_file;
      if (!limits_file.empty()) {
        ASSERT_OK_AND_ASSIGN(config.scope_rules, LoadLimitsFile(limits_file));
      }
      registries_.push_back(std::make_unique<prometheus::Registry>());
      auto app = App::Start(config, *registries_.back());
      ASSERT_THAT(app, IsOk());
      stubs_.push_back(v1::OrderHold::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", (*app)->grpc_port()), grpc::InsecureChannelCredentials())));
      apps_.push_back(*std::move(app));
    }
  }

  grpc::Status Place(int replica, const v1::PlaceHoldRequest& request,
                     v1::PlaceHoldResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stubs_[replica]->PlaceHold(&context, request, response);
  }

  v1::ListHoldsResponse List(int replica, const std::string& user, const std::string& scope = "") {
    v1::ListHoldsRequest request;
    request.set_user_id(user);
    request.set_scope(scope);
    v1::ListHoldsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    EXPECT_TRUE(stubs_[replica]->ListHolds(&context, request, &response).ok());
    return response;
  }

  // kCallsPerRound concurrent PlaceHolds for `user` from kThreads threads, alternating replicas
  // and scopes "event:A" / "event:B", each with a quantity from `quantity(i)` and, when set, the
  // scope limits `carried`; then the user's live holds, listed through replica 0.
  RoundResult RunRound(const std::string& user, const std::function<uint32_t(int)>& quantity,
                       const v1::ScopeLimits* carried) {
    RoundResult result;
    std::atomic<int64_t> created{0}, created_units{0}, refused{0}, other{0};
    std::atomic<int> next{0};
    absl::Mutex mu;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < kCallsPerRound; i = next++) {
          v1::PlaceHoldRequest request;
          request.set_user_id(user);
          request.set_order_id(absl::StrCat("order-", i));
          request.set_scope(i % 2 == 0 ? "event:A" : "event:B");
          request.set_quantity(quantity(i));
          (*request.mutable_labels())["seat"] = absl::StrCat("S", i);
          if (carried != nullptr) *request.mutable_scope_limits() = *carried;
          v1::PlaceHoldResponse response;
          grpc::Status status = Place(i % static_cast<int>(stubs_.size()), request, &response);
          if (status.ok() && response.created()) {
            ++created;
            EXPECT_GE(response.hold().quantity(), 1u);  // always sent, 1 included
            created_units += response.hold().quantity();
          } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++refused;
          } else {
            ++other;
            absl::MutexLock lock(&mu);
            if (result.first_other.empty()) result.first_other = status.error_message();
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    result.created = created;
    result.created_units = created_units;
    result.refused = refused;
    result.other = other;
    const v1::ListHoldsResponse listed = List(0, user);
    for (const v1::Hold& hold : listed.holds()) {
      ++result.holds[hold.scope()];
      EXPECT_GE(hold.quantity(), 1u);  // always sent, 1 included
      const int64_t units = hold.quantity();
      result.units[hold.scope()] += units;
      ++result.total_holds;
      result.total_units += units;
    }
    EXPECT_EQ(listed.user_usage().holds(), result.total_holds);
    EXPECT_EQ(listed.user_usage().units(), result.total_units);
    return result;
  }

  // `callers` PlaceHolds for `user` in scope "event:A" released at once (one thread each, a
  // barrier), alternating replicas, each carrying `carried` (null: none); how many created a hold.
  // Any answer but OK or RESOURCE_EXHAUSTED fails the test.
  int Herd(const std::string& user, const v1::ScopeLimits* carried, int callers = 50) {
    std::atomic<int> created{0}, waiting{callers};
    std::vector<std::thread> threads;
    for (int i = 0; i < callers; ++i) {
      threads.emplace_back([&, i] {
        v1::PlaceHoldRequest request;
        request.set_user_id(user);
        request.set_order_id(absl::StrCat("herd-", i));
        request.set_scope("event:A");
        if (carried != nullptr) *request.mutable_scope_limits() = *carried;
        --waiting;
        while (waiting.load() > 0) std::this_thread::yield();
        v1::PlaceHoldResponse response;
        const grpc::Status status = Place(i % static_cast<int>(stubs_.size()), request, &response);
        if (status.ok()) {
          created += response.created() ? 1 : 0;
        } else {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
              << status.error_message();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    return created.load();
  }

  std::unique_ptr<RedisServer> redis_;
  std::string dir_;
  std::vector<std::unique_ptr<prometheus::Registry>> registries_;
  std::vector<std::unique_ptr<App>> apps_;
  std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs_;
};

TEST_F(ScopedLimitsE2eTest, ConcurrentPlacesOverTwoScopesKeepBothLevelsFromTheFile) {
  StartReplicas(2, 0,
                WriteLimits("limits.yaml", "rules:\n  - prefix: \"event:\"\n    max_holds: 2\n"));
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    RoundResult r = RunRound(
        absl::StrCat("user-", round), [](int) { return 0; }, nullptr);
    EXPECT_EQ(r.other, 0) << r.first_other;
    EXPECT_LE(r.holds["event:A"], 2);
    EXPECT_LE(r.holds["event:B"], 2);
    // 100 attempts over two scopes always fill the user's 3 slots, never more.
    EXPECT_EQ(r.total_holds, 3);
    // Refused calls left no trace: what is live is exactly what was granted.
    EXPECT_EQ(r.created, r.total_holds);
    EXPECT_EQ(r.created + r.refused, kCallsPerRound);
  }
}

TEST_F(ScopedLimitsE2eTest, ConcurrentPlacesWithQuantitiesKeepUnitSumsExact) {
  // User: 3 holds, 8 units. Each scope: 5 units (the rule), any number of holds.
  StartReplicas(2, 8,
                WriteLimits("limits.json", R"({"rules": [{"prefix": "event:", "max_units": 5}]})"));
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    RoundResult r = RunRound(
        absl::StrCat("user-", round), [](int i) { return static_cast<uint32_t>(1 + i % 3); },
        nullptr);
    EXPECT_EQ(r.other, 0) << r.first_other;
    EXPECT_LE(r.units["event:A"], 5);
    EXPECT_LE(r.units["event:B"], 5);
    EXPECT_LE(r.total_units, 8);
    EXPECT_LE(r.total_holds, 3);
    EXPECT_EQ(r.created, r.total_holds);
    EXPECT_EQ(r.created_units, r.total_units);
  }
}

TEST_F(ScopedLimitsE2eTest, ConcurrentPlacesWithLimitsCarriedByTheRequest) {
  StartReplicas(2, 0, "");  // no file: the request's limits are the only scope limits
  v1::ScopeLimits carried;
  carried.set_max_holds(2);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    RoundResult r = RunRound(
        absl::StrCat("user-", round), [](int) { return 0; }, &carried);
    EXPECT_EQ(r.other, 0) << r.first_other;
    EXPECT_LE(r.holds["event:A"], 2);
    EXPECT_LE(r.holds["event:B"], 2);
    EXPECT_EQ(r.total_holds, 3);
    EXPECT_EQ(r.created, r.total_holds);
  }
}

// The operator's rule is a ceiling: a 50-way herd over two replicas whose requests carry looser
// limits, or {} (which once meant "no limit"), places no more than the file's rule allows.
TEST_F(ScopedLimitsE2eTest, RequestLimitsCannotLiftTheFilesRuleInAHerdOverTwoReplicas) {
  StartReplicas(2, 0,
                WriteLimits("limits.yaml", "rules:\n  - prefix: \"event:\"\n    max_holds: 1\n"));
  v1::ScopeLimits looser;
  looser.set_max_holds(5);
  const v1::ScopeLimits none;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    EXPECT_EQ(Herd(absl::StrCat("looser-", round), &looser), 1);
    EXPECT_EQ(Herd(absl::StrCat("empty-", round), &none), 1);
    EXPECT_EQ(Herd(absl::StrCat("plain-", round), nullptr), 1);
    EXPECT_EQ(List(0, absl::StrCat("looser-", round)).holds_size(), 1);
  }
}

// --request_scope_limits=replace keeps the meaning of earlier releases: the request's limits
// replace the rule, and {} lifts it (only the user's 3 holds are left).
TEST_F(ScopedLimitsE2eTest, WithReplaceTheRequestsLimitsReplaceTheRule) {
  StartReplicas(2, 0,
                WriteLimits("limits.yaml", "rules:\n  - prefix: \"event:\"\n    max_holds: 1\n"),
                domain::RequestScopeLimits::kReplace);
  v1::ScopeLimits two;
  two.set_max_holds(2);
  const v1::ScopeLimits none;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    EXPECT_EQ(Herd(absl::StrCat("two-", round), &two), 2);
    EXPECT_EQ(Herd(absl::StrCat("empty-", round), &none), 3);
    EXPECT_EQ(Herd(absl::StrCat("plain-", round), nullptr), 1);
  }
}

TEST_F(ScopedLimitsE2eTest, RefusalDetailsReachTheClientAsGoogleRpcStatus) {
  StartReplicas(1, 0, "");
  v1::PlaceHoldRequest request;
  request.set_user_id("alice");
  request.set_scope("event:A");
  request.mutable_scope_limits()->set_max_holds(1);
  request.set_order_id("o1");
  v1::PlaceHoldResponse response;
  ASSERT_TRUE(Place(0, request, &response).ok());
  EXPECT_EQ(response.scope_usage().holds(), 1u);
  EXPECT_EQ(response.scope_usage().max_holds(), 1u);
  EXPECT_EQ(response.user_usage().max_holds(), 3u);
  EXPECT_TRUE(response.hold().has_place_time());
  request.set_order_id("o2");
  grpc::Status refused = Place(0, request, &response);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("in scope \"event:A\" (max_holds 1)"));
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(refused.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  google::rpc::QuotaFailure quota;
  google::rpc::ErrorInfo info;
  google::rpc::RetryInfo retry;
  for (const google::protobuf::Any& any : details.details()) {
    if (any.Is<google::rpc::QuotaFailure>()) {
      ASSERT_TRUE(any.UnpackTo(&quota));
    } else if (any.Is<google::rpc::ErrorInfo>()) {
      ASSERT_TRUE(any.UnpackTo(&info));
    } else if (any.Is<google::rpc::RetryInfo>()) {
      ASSERT_TRUE(any.UnpackTo(&retry));
    }
  }
  ASSERT_EQ(quota.violations_size(), 1);
  EXPECT_EQ(quota.violations(0).subject(), "user/scope:event:A");
  EXPECT_EQ(info.reason(), "SCOPE_HOLD_LIMIT");
  EXPECT_EQ(info.domain(), "orderhold.v1");
  EXPECT_GT(retry.retry_delay().seconds(), 29 * 60);  // o1 expires 30 min after placement
  // A retry of o1 with other labels is ALREADY_EXISTS; the same request is an idempotent retry.
  request.set_order_id("o1");
  (*request.mutable_labels())["seat"] = "A1";
  EXPECT_EQ(Place(0, request, &response).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  request.clear_labels();
  ASSERT_TRUE(Place(0, request, &response).ok());
  EXPECT_FALSE(response.created());
}

// The full names of the fields set in `message`, recursively ("orderhold.v1.Hold.order_id", ...).
void CollectSetFields(const google::protobuf::Message& message, std::set<std::string>* out) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    out->insert(field->full_name());
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < message.GetReflection()->FieldSize(message, field); ++i) {
        CollectSetFields(message.GetReflection()->GetRepeatedMessage(message, field, i), out);
      }
    } else {
      CollectSetFields(message.GetReflection()->GetMessage(message, field), out);
    }
  }
}

// A server without --scope_limits or --max_units, called without scope, quantity, labels or
// scope_limits, answers no usage and no scope fields: the hold's ids, expiry, remaining time,
// place_time and max_expire_time (its lifetime cap), and its quantity, which every Hold carries
// (1 here) so that a consumer summing quantities counts it. (A RESOURCE_EXHAUSTED keeps its
// message and gains the google.rpc details in the status trailer.)
TEST_F(ScopedLimitsE2eTest, PlainCallsOnAServerWithoutRulesAnswerNoUsageAndNoScope) {
  StartReplicas(1, 0, "");
  const std::set<std::string> hold = {
      "orderhold.v1.Hold.user_id",         "orderhold.v1.Hold.order_id",
      "orderhold.v1.Hold.expire_time",     "orderhold.v1.Hold.remaining",
      "google.protobuf.Timestamp.seconds", "google.protobuf.Timestamp.nanos",
      "google.protobuf.Duration.seconds",  "google.protobuf.Duration.nanos",
      "orderhold.v1.Hold.place_time",      "orderhold.v1.Hold.max_expire_time",
      "orderhold.v1.Hold.quantity"};
  auto only = [&](const google::protobuf::Message& message, std::set<std::string> allowed) {
    std::set<std::string> set;
    CollectSetFields(message, &set);
    allowed.insert(hold.begin(), hold.end());
    for (const std::string& name : set) {
      EXPECT_TRUE(allowed.count(name)) << name << " set in " << message.ShortDebugString();
    }
  };
  v1::PlaceHoldRequest plain;
  plain.set_user_id("bob");
  plain.set_order_id("o1");
  v1::PlaceHoldResponse placed;
  ASSERT_TRUE(Place(0, plain, &placed).ok());
  EXPECT_EQ(placed.hold().quantity(), 1u);
  only(placed,
       {"orderhold.v1.PlaceHoldResponse.hold", "orderhold.v1.PlaceHoldResponse.created",
        "orderhold.v1.PlaceHoldResponse.active_holds", "orderhold.v1.PlaceHoldResponse.max_holds"});
  plain.set_order_id("o2");
  ASSERT_TRUE(Place(0, plain, &placed).ok());
  only(List(0, "bob"),
       {"orderhold.v1.ListHoldsResponse.holds", "orderhold.v1.ListHoldsResponse.max_holds"});
  grpc::ClientContext context;
  v1::PayRequest pay;
  pay.set_user_id("bob");
  pay.set_order_id("o1");
  v1::PayResponse paid;
  ASSERT_TRUE(stubs_[0]->Pay(&context, pay, &paid).ok());
  only(paid, {"orderhold.v1.PayResponse.hold"});
}

TEST_F(ScopedLimitsE2eTest, ReloadKeepsTheOldRulesWhenTheFileIsBadAndAppliesGoodOnes) {
  const std::string path = WriteLimits("limits.yaml", "default:\n  max_holds: 1\n");
  StartReplicas(1, 0, path);
  auto place = [&](const std::string& user, const std::string& order) {
    v1::PlaceHoldRequest request;
    request.set_user_id(user);
    request.set_order_id(order);
    request.set_scope("show:S1");
    v1::PlaceHoldResponse response;
    return Place(0, request, &response).error_code();
  };
  ASSERT_EQ(place("alice", "o1"), grpc::StatusCode::OK);
  EXPECT_EQ(place("alice", "o2"), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A bad file: the error names the line and field; the old rules stay.
  WriteLimits("limits.yaml",
              "default:\n  max_holds: 1\nrules:\n  - prefix: \"show:\"\n    max_hold: 3\n");
  absl::Status reload = apps_[0]->ReloadScopeLimits();
  EXPECT_THAT(reload, orderhold::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("limits.yaml:5: rules[0].max_hold")));
  EXPECT_EQ(MetricValue(*registries_[0], "orderhold_limits_reload_errors_total"), 1);
  EXPECT_EQ(place("alice", "o2"), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // A good one applies at once; lowering never ends live holds (alice keeps o1).
  WriteLimits("limits.yaml", "rules:\n  - prefix: \"show:\"\n    max_holds: 2\n");
  ASSERT_THAT(apps_[0]->ReloadScopeLimits(), IsOk());
  EXPECT_EQ(place("alice", "o2"), grpc::StatusCode::OK);
  WriteLimits("limits.yaml", "default:\n  max_holds: 1\n");
  ASSERT_THAT(apps_[0]->ReloadScopeLimits(), IsOk());
  EXPECT_EQ(List(0, "alice").holds_size(), 2);
  EXPECT_EQ(place("alice", "o3"), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(MetricValue(*registries_[0], "orderhold_limits_reload_errors_total"), 1);
}

}  // namespace
}  // namespace orderhold
