// Scope totals end to end: two replicas (Apps) on a real Redis, standalone or managed by Sentinel
// (a primary and a replica), called over real gRPC with the generated stubs. 5,000 users race for
// a scope whose rule sets a total (total_max_holds 100, or total_max_units 100): never more than
// the total is live at any instant, checked from the client-side history as the soak's oracle
// checks the per-user cap; exactly the total is granted when nothing ends; every refusal leaves no
// trace and carries SCOPE_TOTAL_LIMIT. The scope rpcs (GetScopeUsage, ListScopeHolds,
// ReleaseScopeHolds) see and end what the herd left. On a Redis Cluster (3 primaries with a
// replica each, WAIT 1) the same, through the scope protocol across slots; without WAIT a file
// with totals is refused at start (server/README.md "Scope totals"). A capacity (held + sold
// units) under racing payments, with its negative control, on standalone and Sentinel; a Cluster
// refuses capacities.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "orderhold/v1/orderhold.grpc.pb.h"
#include "server/app.h"
#include "server/limits_file.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/grpc_retry.h"
#include "tests/testing/herd_ends.h"
#include "tests/testing/live_intervals.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/os_util.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Grant;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::MostLiveAtOnce;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::SentinelGroup;
using ::orderhold::testing::SentinelGroupOptions;

constexpr int kUsers = 5000;
constexpr int kTotal = 100;
constexpr int kThreads = 16;
constexpr char kScope[] = "event:onsale";

// What a herd did.
struct HerdResult {
  std::vector<Grant> grants;
  std::vector<std::string> granted_users;
  std::vector<std::string> refused_users;
  int64_t granted_units = 0;
  int64_t paid_units = 0;  // units of the grants whose Pay answered OK (not already_paid)
  int64_t other = 0;       // answers other than OK and RESOURCE_EXHAUSTED (must stay 0)
  std::string first_other;
  bool refusal_details_checked = false;
};

class ScopeTotalsE2eTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(dir_, orderhold::testing::MakeTempDir("scope-totals"));
    if (GetParam() == "sentinel") {
      SentinelGroupOptions options;
      ASSERT_OK_AND_ASSIGN(options.app_acl_rules, testing::AppAclRulesLine());
      ASSERT_OK_AND_ASSIGN(group_, SentinelGroup::Start(options));
    } else if (GetParam() == "cluster") {
      testing::RedisClusterOptions options;
      options.primaries = 3;
      options.replicas_per_primary = 1;
      ASSERT_OK_AND_ASSIGN(cluster_, testing::RedisCluster::Start(options));
    } else {
      ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    }
  }
  void TearDown() override {
    stubs_.clear();
    apps_.clear();
    group_.reset();
    cluster_.reset();
    redis_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Two replicas with a limits file whose "event:" rule sets `totals` (JSON members).
  void StartReplicas(const std::string& totals, bool reaper = false) {
    const std::string path = absl::StrCat(dir_, "/limits.json");
    std::ofstream(path) << R"({"rules": [{"prefix": "event:", )" << totals << "}]}";
    for (int i = 0; i < 2; ++i) {
      Config config;
      config.grpc_address = "127.0.0.1:0";
      if (group_ != nullptr) {
        config.redis_mode = RedisMode::kSentinel;
        config.redis_url = ParsedRedisUrl(group_->SentinelUrl());
        config.redis_sentinel_master = group_->master_name();
      } else if (cluster_ != nullptr) {
        config.redis_mode = RedisMode::kCluster;
        config.redis_url = ParsedRedisUrl(cluster_->SeedUrl());
        config.redis_wait_replicas = 1;  // the protocol's steps are acknowledged when replicated
        // Six nodes, two servers and the herd on two cores (under ASan in CI): a round trip with
        // its WAIT may take longer than the default 1 s without anything being wrong.
        config.redis_timeout = absl::Seconds(5);
        config.redis_wait_timeout = absl::Seconds(2);
      } else {
        config.redis_url = ParsedRedisUrl(redis_->url());
      }
      config.run_reaper = reaper;
      config.health_check_interval = absl::Milliseconds(50);
      config.policy.max_holds = 3;
      config.scope_limits_file = path;
      ASSERT_OK_AND_ASSIGN(config.scope_rules, LoadLimitsFile(path));
      registries_.push_back(std::make_unique<prometheus::Registry>());
      auto app = App::Start(config, *registries_.back());
      ASSERT_THAT(app, IsOk());
      stubs_.push_back(v1::OrderHold::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", (*app)->grpc_port()), grpc::InsecureChannelCredentials())));
      apps_.push_back(*std::move(app));
    }
  }

  static grpc::ClientContext* Deadline(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return context;
  }

  // Checks a refusal's details: QuotaFailure subject "scope/<scope>", reason `reason`, a RetryInfo
  // (which a capacity's refusal leaves out when the units sold alone fill it).
  static void ExpectTotalRefusal(const grpc::Status& status,
                                 const std::string& reason = "SCOPE_TOTAL_LIMIT") {
    google::rpc::Status details;
    ASSERT_TRUE(details.ParseFromString(status.error_details()));
    bool quota = false, info = false, retry = false;
    for (const google::protobuf::Any& any : details.details()) {
      google::rpc::QuotaFailure q;
      google::rpc::ErrorInfo e;
      google::rpc::RetryInfo r;
      if (any.UnpackTo(&q)) {
        ASSERT_GE(q.violations_size(), 1);
        EXPECT_EQ(q.violations(0).subject(), absl::StrCat("scope/", kScope));
        quota = true;
      } else if (any.UnpackTo(&e)) {
        EXPECT_EQ(e.reason(), reason);
        info = true;
      } else if (any.UnpackTo(&r)) {
        retry = true;
      }
    }
    EXPECT_TRUE(quota && info && (retry || reason == "SCOPE_SOLD_OUT")) << status.error_message();
  }

  // kUsers users, one PlaceHold each (quantity `quantity(i)`, ttl `ttl`), from kThreads threads
  // over both replicas. With `churn`, half of the granted holds are paid or cancelled by their
  // user after 0-20 ms (the rest expire), and refused users retry until the herd's end. With
  // `sold_stays`, a paid grant counts for ever (a capacity's "held + sold") instead of ending at
  // its payment, and refusals are expected to carry `refusal_reason`.
  HerdResult Herd(absl::Duration ttl, const std::function<uint32_t(int)>& quantity,
                  bool churn = false, absl::Duration churn_for = absl::ZeroDuration(),
                  bool sold_stays = false,
                  const std::string& refusal_reason = "SCOPE_TOTAL_LIMIT") {
    HerdResult result;
    absl::Mutex mu;
    std::atomic<int> next{0};
    const absl::Time until = absl::Now() + churn_for;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 random(static_cast<uint32_t>(t));
        for (int i = next++; i < kUsers || (churn && absl::Now() < until); i = next++) {
          const std::string user = absl::StrCat("buyer-", i % kUsers);
          v1::PlaceHoldRequest request;
          request.set_user_id(user);
          request.set_order_id(absl::StrCat("o-", i));
          request.set_scope(kScope);
          request.set_quantity(quantity(i));
          *request.mutable_ttl() = google::protobuf::util::TimeUtil::MillisecondsToDuration(
              absl::ToInt64Milliseconds(ttl));
          v1::PlaceHoldResponse response;
          const int replica = i % 2;
          // UNAVAILABLE (a node that did not answer in time, on a loaded machine) is retried as a
          // client would; a retry of a placement that was recorded answers its hold (created =
          // false), and of an end that was recorded answers already_paid / already_cancelled.
          testing::CallAttempts placed;
          const grpc::Status status = testing::RetryUnavailableCall(
              [&] {
                grpc::ClientContext context;
                return stubs_[replica]->PlaceHold(Deadline(&context), request, &response);
              },
              &placed);
          const absl::Time answered = absl::Now();
          if (status.ok() && (response.created() || placed.retried())) {
            Grant grant{answered,
                        absl::FromUnixSeconds(response.hold().expire_time().seconds()) +
                            absl::Nanoseconds(response.hold().expire_time().nanos()),
                        response.hold().quantity()};
            if (churn && random() % 2 == 0) {
              absl::SleepFor(absl::Milliseconds(random() % 20));
              if (testing::EndGrant(*stubs_[1 - replica], user, request.order_id(),
                                    random() % 2 == 0, sold_stays, grant)) {
                absl::MutexLock lock(&mu);
                result.paid_units += grant.units;
              }
            }
            absl::MutexLock lock(&mu);
            result.grants.push_back(grant);
            result.granted_users.push_back(user);
            result.granted_units += grant.units;
          } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            absl::MutexLock lock(&mu);
            if (!result.refusal_details_checked) {
              result.refusal_details_checked = true;
              ExpectTotalRefusal(status, refusal_reason);
            }
            result.refused_users.push_back(user);
          } else {
            absl::MutexLock lock(&mu);
            ++result.other;
            if (result.first_other.empty()) result.first_other = status.error_message();
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    return result;
  }

  v1::GetScopeUsageResponse Usage(int replica) {
    v1::GetScopeUsageRequest request;
    request.set_scope(kScope);
    v1::GetScopeUsageResponse response;
    grpc::ClientContext context;
    const grpc::Status status =
        stubs_[replica]->GetScopeUsage(Deadline(&context), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // The scope's live holds, "user/order", through ListScopeHolds pages of `page_size`.
  std::vector<std::string> ListScope(int replica, int page_size) {
    std::vector<std::string> seen;
    std::string token;
    for (int pages = 0; pages < 1000; ++pages) {
      v1::ListScopeHoldsRequest request;
      request.set_scope(kScope);
      request.set_page_size(page_size);
      request.set_page_token(token);
      v1::ListScopeHoldsResponse response;
      grpc::ClientContext context;
      const grpc::Status status =
          stubs_[replica]->ListScopeHolds(Deadline(&context), request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) break;
      EXPECT_LE(response.holds_size(), page_size);
      for (const v1::Hold& hold : response.holds()) {
        EXPECT_EQ(hold.scope(), kScope);
        seen.push_back(absl::StrCat(hold.user_id(), "/", hold.order_id()));
      }
      token = response.next_page_token();
      if (token.empty()) break;
    }
    return seen;
  }

  double Rejected(const std::string& reason) {
    double sum = 0;
    for (const auto& registry : registries_) {
      sum += std::max(
          0.0, MetricValue(*registry, "orderhold_holds_rejected_total", {{"reason", reason}}));
    }
    return sum;
  }

  // Every refused user has no hold (ListHolds through replica 0).
  void ExpectNoTrace(const std::vector<std::string>& refused) {
    int with_holds = 0;
    for (const std::string& user : refused) {
      v1::ListHoldsRequest request;
      request.set_user_id(user);
      v1::ListHoldsResponse response;
      grpc::ClientContext context;
      ASSERT_TRUE(stubs_[0]->ListHolds(Deadline(&context), request, &response).ok());
      with_holds += response.holds_size() > 0 ? 1 : 0;
    }
    EXPECT_EQ(with_holds, 0);
  }

  std::string dir_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<SentinelGroup> group_;
  std::unique_ptr<testing::RedisCluster> cluster_;
  std::vector<std::unique_ptr<prometheus::Registry>> registries_;
  std::vector<std::unique_ptr<App>> apps_;
  std::vector<std::unique_ptr<v1::OrderHold::Stub>> stubs_;
};

TEST_P(ScopeTotalsE2eTest, FiveThousandUsersRaceForOneHundredHolds) {
  StartReplicas(R"("total_max_holds": 100)");
  const HerdResult herd = Herd(absl::Minutes(10), [](int) { return 1u; });
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  EXPECT_EQ(herd.grants.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(herd.refused_users.size(), static_cast<size_t>(kUsers - kTotal));
  EXPECT_LE(MostLiveAtOnce(herd.grants).first, kTotal);
  EXPECT_EQ(Rejected("scope_total_limit"), kUsers - kTotal);
  ExpectNoTrace(herd.refused_users);
  // The scope rpcs, through either replica.
  const v1::GetScopeUsageResponse usage = Usage(1);
  EXPECT_EQ(usage.usage().holds(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(usage.usage().units(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(usage.usage().max_holds(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(usage.usage().max_units(), 0u);
  EXPECT_TRUE(usage.has_earliest_expire_time());
  std::vector<std::string> listed = ListScope(0, 30);
  std::set<std::string> expected;
  for (const std::string& user : herd.granted_users) {
    expected.insert(user);  // one order per user: compare users
  }
  std::set<std::string> listed_users;
  for (const std::string& entry : listed) listed_users.insert(entry.substr(0, entry.find('/')));
  EXPECT_EQ(listed.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(listed_users, expected);
  // ReleaseScopeHolds ends them all, one CANCELLED each; the places are free again.
  v1::ReleaseScopeHoldsRequest release;
  release.set_scope(kScope);
  v1::ReleaseScopeHoldsResponse released;
  grpc::ClientContext context;
  ASSERT_TRUE(stubs_[1]->ReleaseScopeHolds(Deadline(&context), release, &released).ok());
  EXPECT_EQ(released.released_count(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(released.holds_size(), kTotal);
  EXPECT_EQ(Usage(0).usage().holds(), 0u);
  v1::PlaceHoldRequest again;
  again.set_user_id(herd.refused_users.front());
  again.set_order_id("after-release");
  again.set_scope(kScope);
  v1::PlaceHoldResponse placed;
  grpc::ClientContext place_context;
  ASSERT_TRUE(stubs_[0]->PlaceHold(Deadline(&place_context), again, &placed).ok());
  EXPECT_TRUE(placed.created());
  EXPECT_EQ(placed.scope_total_usage().holds(), 1u);
  EXPECT_EQ(placed.scope_total_usage().max_holds(), static_cast<uint32_t>(kTotal));
}

TEST_P(ScopeTotalsE2eTest, FiveThousandUsersRaceForOneHundredUnits) {
  StartReplicas(R"("total_max_units": 100)");
  const HerdResult herd = Herd(absl::Minutes(10), [](int i) { return 1u + i % 3; });
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  EXPECT_EQ(herd.granted_units, kTotal);
  EXPECT_LE(MostLiveAtOnce(herd.grants).second, kTotal);
  ExpectNoTrace(herd.refused_users);
  const v1::GetScopeUsageResponse usage = Usage(0);
  EXPECT_EQ(usage.usage().units(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(usage.usage().holds(), herd.grants.size());
  EXPECT_EQ(usage.usage().max_units(), static_cast<uint32_t>(kTotal));
}

// Holds end all the time (paid, cancelled, expired after 300 ms, reaped): places come back and
// are taken again, and the client-side history never shows more than the total live at once.
TEST_P(ScopeTotalsE2eTest, WithEndsAndExpiriesNeverMoreThanTheTotalLiveAtOnce) {
  StartReplicas(R"("total_max_holds": 100, "total_max_units": 150)", /*reaper=*/true);
  const HerdResult herd = Herd(
      absl::Milliseconds(300), [](int i) { return 1u + i % 2; }, /*churn=*/true, absl::Seconds(3));
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  const auto [holds, units] = MostLiveAtOnce(herd.grants);
  EXPECT_LE(holds, kTotal);
  EXPECT_LE(units, 150);
  EXPECT_GT(herd.grants.size(), static_cast<size_t>(kTotal));  // places came back
  std::cout << "churn herd: " << herd.grants.size() << " grants, " << herd.refused_users.size()
            << " refusals, most live at once " << holds << " holds / " << units << " units\n";
}

// A capacity (held + sold units) under the churn herd: holds paid, cancelled, expired and reaped
// while buyers retry; a paid hold's units count for ever. Never more than the capacity held and
// sold at once (the client-side history), and the sold count Redis keeps is exactly the units of
// the payments answered OK. Not on a Redis Cluster (refused there: ScopeTotalsClusterE2eTest).
// (Standalone and Sentinel only: ScopeCapacityE2eTest's instantiation.)
class ScopeCapacityE2eTest : public ScopeTotalsE2eTest {};

TEST_P(ScopeCapacityE2eTest, HeldAndSoldUnitsNeverPassTheCapacityWithPaymentsRacing) {
  StartReplicas(R"("capacity_units": 100)", /*reaper=*/true);
  const HerdResult herd = Herd(
      absl::Milliseconds(300), [](int i) { return 1u + i % 2; }, /*churn=*/true, absl::Seconds(3),
      /*sold_stays=*/true, "SCOPE_SOLD_OUT");
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  const int64_t most = MostLiveAtOnce(herd.grants).second;
  EXPECT_LE(most, kTotal);
  EXPECT_GT(herd.paid_units, 0);
  EXPECT_GT(Rejected("scope_sold_out"), 0);
  const v1::GetScopeUsageResponse usage = Usage(1);
  EXPECT_EQ(usage.sold_units(), static_cast<uint32_t>(herd.paid_units));
  EXPECT_EQ(usage.capacity_units(), static_cast<uint32_t>(kTotal));
  EXPECT_LE(usage.sold_units() + usage.usage().units(), static_cast<uint32_t>(kTotal));
  EXPECT_EQ(usage.available_units(), kTotal - usage.sold_units() - usage.usage().units());
  std::cout << "capacity herd: " << herd.grants.size() << " grants, " << herd.paid_units
            << " units sold, most held + sold at once " << most << " of " << kTotal << "\n";
}

// The negative control of the case above: the same herd under a total of units (held only) sells
// past 100, and the held + sold history shows it, so that oracle can fail.
TEST_P(ScopeCapacityE2eTest, WithoutACapacityTheSameHerdSellsPastItAndTheOracleSeesIt) {
  StartReplicas(R"("total_max_units": 100)", /*reaper=*/true);
  const HerdResult herd = Herd(
      absl::Milliseconds(300), [](int i) { return 1u + i % 2; }, /*churn=*/true, absl::Seconds(3),
      /*sold_stays=*/true);
  EXPECT_EQ(herd.other, 0) << herd.first_other;
  const int64_t most = MostLiveAtOnce(herd.grants).second;
  EXPECT_GT(most, kTotal);
  EXPECT_EQ(Usage(0).sold_units(), static_cast<uint32_t>(herd.paid_units));
  std::cout << "without a capacity: " << herd.paid_units << " units sold, most held + sold at once "
            << most << "\n";
}

INSTANTIATE_TEST_SUITE_P(Redis, ScopeTotalsE2eTest,
                         ::testing::Values("standalone", "sentinel", "cluster"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Redis, ScopeCapacityE2eTest, ::testing::Values("standalone", "sentinel"),
                         [](const auto& info) { return info.param; });

// On a Redis Cluster without WAIT, a step of the protocol acknowledged and then lost in a failover
// would grant over the total: a file with totals is refused at start, rather than not enforced.
TEST(ScopeTotalsClusterE2eTest, AFileWithTotalsIsRefusedOnARedisClusterWithoutWait) {
  testing::RedisClusterOptions options;
  options.primaries = 3;
  ASSERT_OK_AND_ASSIGN(auto cluster, testing::RedisCluster::Start(options));
  ASSERT_OK_AND_ASSIGN(std::string dir, orderhold::testing::MakeTempDir("scope-totals-cluster"));
  const std::string path = absl::StrCat(dir, "/limits.json");
  std::ofstream(path) << R"({"rules": [{"prefix": "event:", "total_max_holds": 100}]})";
  Config config;
  config.grpc_address = "127.0.0.1:0";
  config.redis_mode = RedisMode::kCluster;
  config.redis_url = ParsedRedisUrl(cluster->SeedUrl());
  config.run_reaper = false;
  ASSERT_OK_AND_ASSIGN(config.scope_rules, LoadLimitsFile(path));
  prometheus::Registry registry;
  auto app = App::Start(config, registry);
  EXPECT_EQ(app.status().code(), absl::StatusCode::kFailedPrecondition) << app.status();
  EXPECT_THAT(app.status().message(), ::testing::HasSubstr("redis_wait_replicas"));
  // With WAIT it starts.
  config.redis_wait_replicas = 1;
  prometheus::Registry waited;
  EXPECT_THAT(App::Start(config, waited), IsOk());
  // A capacity is refused even with WAIT: a Cluster counts no sales (a payment ends the hold in
  // the user's slot, the count would be in the scope's).
  std::ofstream(path) << R"({"rules": [{"prefix": "event:", "capacity_units": 100}]})";
  ASSERT_OK_AND_ASSIGN(config.scope_rules, LoadLimitsFile(path));
  prometheus::Registry capacity;
  auto refused = App::Start(config, capacity);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("capacity_units"));
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace orderhold
