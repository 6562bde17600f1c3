// Redis Sentinel end to end: Apps (the same wiring as orderhold-server) in --redis_mode=sentinel
// against a real primary, replica and three sentinels on free ports, as the app user of
// deploy/redis/orderhold.acl, with 50 concurrent PlaceHold callers through gRPC. The oracle of
// every failover case: every PlaceHold answered created=true is on the primary afterwards (none
// lost) and no user was ever answered created more than max_holds times (no over-grant).
//
// The sentinels run with short info/publish periods (SENTINEL DEBUG, see SentinelGroupOptions::
// sentinel_debug), so a replaced primary is demoted in ~3 s instead of ~10 s and the suite stays
// short; ORDERHOLD_SENTINEL_REAL_TIMING=1 runs the same cases with Redis' real periods, which is
// how the failover times in deploy/README.md were measured. Each case prints its measured times.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/eventually.h"
#include "tests/testing/failover_app.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/hold_event_watcher.h"
#include "tests/testing/hold_load.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::HoldLoad;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::LoadCall;
using ::orderhold::testing::LoadOptions;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::ResumingWatcher;
using ::orderhold::testing::SentinelGroup;
using ::orderhold::testing::SentinelGroupOptions;
using ::orderhold::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int kMaxHolds = 3;
constexpr int kUsers = 2000;
// The callers' deadline, and the bound on a failed call: the server (--redis_timeout 500ms)
// answers UNAVAILABLE long before the callers give up, even on a loaded or sanitized build.
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kAnswerBound =
    absl::Seconds(5);  // 50 callers put every user at the limit within a second or two

bool RealTiming() {
  const char* env = std::getenv("ORDERHOLD_SENTINEL_REAL_TIMING");
  return env != nullptr && std::string(env) == "1";
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// PlaceHold from `workers` threads through one client until Stop() (testing::HoldLoad): random
// users among kUsers, fresh order ids, ttl 10 min (nothing expires during a case), a 10 ms
// back-off after a failed call; read as this file's checks want it.
class Load {
 public:
  struct Acked {
    std::string user, order;
    absl::Time at;  // when the caller got the answer
  };

  Load(const client::OrderHoldClient& client, int workers)
      : load_(LoadOptions{.clients = {&client}, .users = Users(), .workers = workers}) {}
  void Stop() { load_.Stop(); }
  // Blocks until `n` more answers were served after now (or `timeout`).
  bool ServeMore(int64_t n, absl::Duration timeout = absl::Seconds(30)) {
    return load_.ServeMore(n, timeout);
  }
  std::vector<Acked> acked() {
    std::vector<Acked> out;
    for (const LoadCall& call : load_.calls()) {
      if (call.created) out.push_back({load_.user(call), call.order, call.end});
    }
    return out;
  }
  // The end of the last failed call that started after `since`: when calls were served again.
  std::optional<absl::Time> LastFailureAfter(absl::Time since) {
    std::optional<absl::Time> last;
    for (const LoadCall& call : load_.calls()) {
      if (!call.served() && call.start >= since && (!last.has_value() || call.end > *last)) {
        last = call.end;
      }
    }
    return last;
  }
  int failures() {
    int failed = 0;
    for (const LoadCall& call : load_.calls()) failed += call.served() ? 0 : 1;
    return failed;
  }
  absl::Duration max_failed_call() {
    absl::Duration longest;
    for (const LoadCall& call : load_.calls()) {
      if (!call.served()) longest = std::max(longest, call.end - call.start);
    }
    return longest;
  }

 private:
  static std::vector<std::string> Users() {
    std::vector<std::string> users;
    for (int i = 0; i < kUsers; ++i) users.push_back(absl::StrCat("u", i));
    return users;
  }
  HoldLoad load_;
};

class SentinelE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SentinelGroupOptions options;
    ASSERT_OK_AND_ASSIGN(options.app_acl_rules, testing::AppAclRulesLine());
    if (!RealTiming()) options.sentinel_debug = {"info-period", "1000", "publish-period", "500"};
    ASSERT_OK_AND_ASSIGN(group_, SentinelGroup::Start(options));
  }

  Config SentinelConfig(int wait_replicas) {
    Config config = testing::FailoverAppConfig(kMaxHolds);
    config.redis_mode = RedisMode::kSentinel;
    config.redis_url = ParsedRedisUrl(group_->SentinelUrl());
    config.redis_sentinel_master = group_->master_name();
    config.redis_wait_replicas = wait_replicas;
    return config;
  }

  void StartApp(const Config& config) {
    ASSERT_OK_AND_ASSIGN(app_, App::Start(config, registry_));
    client_ = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", app_->grpc_port()),
                                               client::ClientOptions{kCallTimeout, ""});
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    return testing::Health(app_->grpc_port(), "", absl::Seconds(2));
  }

  // The oracle, on the current primary: acknowledged holds (those answered after `since`) that
  // are missing there, and users answered created more than kMaxHolds times.
  struct Verdict {
    int checked = 0;
    int lost = 0;
    int over_granted_users = 0;
  };
  Verdict Check(const std::vector<Load::Acked>& acked, absl::Time since = absl::InfinitePast()) {
    Verdict verdict;
    absl::StatusOr<int> primary = group_->PrimaryNode();
    EXPECT_THAT(primary, IsOk());
    if (!primary.ok()) return verdict;
    std::map<std::string, int> created;
    for (const Load::Acked& hold : acked) {
      ++created[hold.user];
      if (hold.at < since) continue;
      ++verdict.checked;
      const std::vector<std::string> zscore =
          testing::StoredHoldsCommand(app_->redis_store()->keys(), hold.user, "score", hold.order);
      absl::StatusOr<std::string> score = group_->node(*primary).Command(zscore);
      // Sentinel's CLIENT KILL at the failover closed the fixture's connection: once more.
      if (!score.ok()) score = group_->node(*primary).Command(zscore);
      EXPECT_THAT(score, IsOk());
      if (score.ok() && *score == "(nil)") ++verdict.lost;
    }
    for (const auto& [user, n] : created) verdict.over_granted_users += n > kMaxHolds ? 1 : 0;
    return verdict;
  }

  std::unique_ptr<SentinelGroup> group_;
  prometheus::Registry registry_;
  std::unique_ptr<App> app_;
  std::unique_ptr<client::OrderHoldClient> client_;
};

// WAIT 1 with one replica: the promoted replica has no replica of its own
// until Sentinel demotes the old primary, so writes are refused ("not yet replicated") until
// then, and nothing acknowledged is lost. Holds with a 1 s ttl, placed throughout, each end with
// an event that a consumer group receives: the reaper and event delivery carry on. Events too are
// delivered only once replicated, so the watch ends UNAVAILABLE in that window and the consumer
// resumes under its name, as the contract asks (a consumer that did not would wait forever).
TEST_F(SentinelE2eTest, FailoverUnderLoadWithWaitLosesNothingAndGrantsNoMore) {
  StartApp(SentinelConfig(/*wait_replicas=*/1));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  ResumingWatcher watcher(*client_, [] {
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group("failover");
    request.set_consumer("c1");
    return request;
  }());
  std::atomic<bool> stop_short{false};
  std::vector<std::string> short_holds;  // "user/order" of ttl=1s holds answered created
  absl::Mutex short_mu;
  std::thread short_placer([&] {
    for (int i = 0; !stop_short.load(); ++i) {
      const std::string user = absl::StrCat("short", i);
      auto placed = client_->PlaceHold(user, "o", absl::Seconds(1));
      if (placed.ok() && placed->created()) {
        absl::MutexLock lock(&short_mu);
        short_holds.push_back(absl::StrCat(user, "/o"));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  Load load(*client_, 50);
  ASSERT_TRUE(load.ServeMore(500));
  ASSERT_OK_AND_ASSIGN(const int old_primary, group_->PrimaryNode());
  const absl::Time failover = absl::Now();
  ASSERT_THAT(group_->Failover(), IsOk());
  ASSERT_THAT(group_->WaitForRole(old_primary, "slave", absl::Seconds(40)), IsOk());
  const absl::Duration demoted = absl::Now() - failover;
  ASSERT_TRUE(load.ServeMore(500));
  load.Stop();
  stop_short = true;
  short_placer.join();

  const std::optional<absl::Time> last_failure = load.LastFailureAfter(failover);
  std::printf(
      "[sentinel wait=1] old primary demoted after %.2f s; writes served again %.2f s after "
      "SENTINEL FAILOVER; %d failed calls, longest %.2f s\n",
      Seconds(demoted), last_failure ? Seconds(*last_failure - failover) : 0.0, load.failures(),
      Seconds(load.max_failed_call()));
  const Verdict verdict = Check(load.acked());
  std::printf("[sentinel wait=1] %d acknowledged holds checked, %d lost, %d users over-granted\n",
              verdict.checked, verdict.lost, verdict.over_granted_users);
  EXPECT_GT(verdict.checked, 0);
  EXPECT_EQ(verdict.lost, 0);
  EXPECT_EQ(verdict.over_granted_users, 0);
  EXPECT_LT(load.max_failed_call(), kAnswerBound);  // the server answered: no hang
  EXPECT_GE(MetricValue(registry_, "orderhold_redis_failovers_total"), 1);

  // Every short hold ends (the reaper, on the new primary) and its event reaches the group.
  std::set<std::string> expected;
  {
    absl::MutexLock lock(&short_mu);
    expected.insert(short_holds.begin(), short_holds.end());
  }
  ASSERT_FALSE(expected.empty());
  std::set<std::string> seen;
  std::map<std::string, std::set<std::string>> ids_per_hold;
  EXPECT_TRUE(Eventually(
      [&] {
        for (const v1::HoldEvent& event : watcher.events()) {
          const std::string hold =
              absl::StrCat(event.hold().user_id(), "/", event.hold().order_id());
          seen.insert(hold);
          ids_per_hold[hold].insert(event.event_id());
        }
        return std::includes(seen.begin(), seen.end(), expected.begin(), expected.end());
      },
      absl::Seconds(20), absl::Milliseconds(100)));
  int duplicated = 0;
  for (const auto& [hold, ids] : ids_per_hold) duplicated += ids.size() > 1 ? 1 : 0;
  std::printf("[sentinel wait=1] %zu short holds, events for %zu, %d with two event ids\n",
              expected.size(), seen.size(), duplicated);
}

// Case 2 without WAIT: served again as soon as the switch is seen; what the old primary
// acknowledged in between is lost (asynchronous replication). The test reports it; it asserts
// only that calls are served again and nothing acknowledged after the switch was seen is lost.
TEST_F(SentinelE2eTest, FailoverUnderLoadWithoutWaitServesAgainAtTheSwitch) {
  StartApp(SentinelConfig(/*wait_replicas=*/0));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  Load load(*client_, 50);
  ASSERT_TRUE(load.ServeMore(500));
  ASSERT_OK_AND_ASSIGN(const int old_primary, group_->PrimaryNode());
  const int new_primary = 1 - old_primary;
  const absl::Time failover = absl::Now();
  ASSERT_THAT(group_->Failover(), IsOk());
  ASSERT_TRUE(
      Eventually([&] { return MetricValue(registry_, "orderhold_redis_failovers_total") >= 1; },
                 absl::Seconds(20)));
  const absl::Time switched = absl::Now();
  ASSERT_TRUE(load.ServeMore(500));
  ASSERT_THAT(group_->WaitForRole(old_primary, "slave", absl::Seconds(40)), IsOk());
  load.Stop();
  ASSERT_EQ(group_->PrimaryNode().value_or(-1), new_primary);

  const std::optional<absl::Time> last_failure = load.LastFailureAfter(failover);
  const Verdict all = Check(load.acked());
  const Verdict after_switch = Check(load.acked(), switched + absl::Milliseconds(100));
  std::printf(
      "[sentinel wait=0] switch seen %.2f s after SENTINEL FAILOVER; writes served again %.2f s "
      "after it; %d failed calls; %d acknowledged holds, %d lost, %d users over-granted\n",
      Seconds(switched - failover), last_failure ? Seconds(*last_failure - failover) : 0.0,
      load.failures(), all.checked, all.lost, all.over_granted_users);
  EXPECT_EQ(after_switch.lost, 0);
  EXPECT_LT(load.max_failed_call(), kAnswerBound);  // the server answered: no hang
}

// Case 3: kill -9 of the primary. Calls fail UNAVAILABLE within their deadline (never a hang)
// until Sentinel promotes the replica (down-after 1 s), then are served there.
TEST_F(SentinelE2eTest, PrimaryKilledIsUnavailableThenServedOnThePromotedReplica) {
  StartApp(SentinelConfig(/*wait_replicas=*/0));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  Load load(*client_, 10);
  ASSERT_TRUE(load.ServeMore(200));
  ASSERT_OK_AND_ASSIGN(const int old_primary, group_->PrimaryNode());
  const absl::Time killed = absl::Now();
  ASSERT_THAT(group_->node(old_primary).Crash(), IsOk());
  ASSERT_THAT(group_->WaitForPrimary(group_->node(1 - old_primary).port(), absl::Seconds(30)),
              IsOk());
  ASSERT_TRUE(load.ServeMore(200));
  load.Stop();
  const std::optional<absl::Time> last_failure = load.LastFailureAfter(killed);
  std::printf(
      "[sentinel kill -9] %d failed calls, longest %.2f s; served again %.2f s after the kill\n",
      load.failures(), Seconds(load.max_failed_call()),
      last_failure ? Seconds(*last_failure - killed) : 0.0);
  EXPECT_GT(load.failures(), 0);
  EXPECT_LT(load.max_failed_call(), kAnswerBound);  // the server answered: no hang
  const Verdict after = Check(load.acked(), last_failure.value_or(killed));
  EXPECT_EQ(after.lost, 0);
}

// Case 4: the primary hangs (SIGSTOP), Sentinel fails over, then it resumes and is still a
// primary for a while (until Sentinel demotes it). No write it accepts after resuming is
// acknowledged: every hold acknowledged from the resume on is on the new primary.
TEST_F(SentinelE2eTest, ResumedOldPrimaryGetsNoAcknowledgedWrite) {
  StartApp(SentinelConfig(/*wait_replicas=*/0));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  Load load(*client_, 20);
  ASSERT_TRUE(load.ServeMore(200));
  ASSERT_OK_AND_ASSIGN(const int old_primary, group_->PrimaryNode());
  const int new_primary = 1 - old_primary;
  const absl::Time paused = absl::Now();
  ASSERT_THAT(group_->node(old_primary).Pause(), IsOk());
  ASSERT_THAT(group_->WaitForPrimary(group_->node(new_primary).port(), absl::Seconds(30)), IsOk());
  const absl::Time resumed = absl::Now();
  ASSERT_THAT(group_->node(old_primary).Resume(), IsOk());
  ASSERT_TRUE(load.ServeMore(300));
  ASSERT_THAT(group_->WaitForRole(old_primary, "slave", absl::Seconds(40)), IsOk());
  load.Stop();
  const Verdict after = Check(load.acked(), resumed);
  const std::optional<absl::Time> last_failure = load.LastFailureAfter(paused);
  std::printf(
      "[sentinel SIGSTOP] switch %.2f s after the pause; served again %.2f s after it; %d "
      "acknowledged after the resume, %d lost\n",
      Seconds(resumed - paused), last_failure ? Seconds(*last_failure - paused) : 0.0,
      after.checked, after.lost);
  EXPECT_GT(after.checked, 0);
  EXPECT_EQ(after.lost, 0);
  EXPECT_LT(load.max_failed_call(), kAnswerBound);  // the server answered: no hang
}

// Case 5: every sentinel down at start: the server starts, NOT_SERVING, calls UNAVAILABLE saying
// why; it serves once the sentinels are back. A master name no sentinel knows is its own error.
TEST_F(SentinelE2eTest, StartsNotServingWithoutSentinelsAndServesOnceTheyAreBack) {
  for (int i = 0; i < group_->sentinel_count(); ++i) ASSERT_THAT(group_->StopSentinel(i), IsOk());
  StartApp(SentinelConfig(/*wait_replicas=*/0));
  EXPECT_TRUE(
      Eventually([&] { return Health() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }));
  EXPECT_THAT(client_->PlaceHold("alice", "o1").status(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no sentinel reachable")));
  for (int i = 0; i < group_->sentinel_count(); ++i) {
    ASSERT_THAT(group_->RestartSentinel(i), IsOk());
  }
  EXPECT_TRUE(Eventually([&] { return Health() == grpc::health::v1::HealthCheckResponse::SERVING; },
                         absl::Seconds(15)));
  EXPECT_TRUE(Eventually([&] { return client_->PlaceHold("alice", "o1").ok(); }));

  Config wrong = SentinelConfig(0);
  wrong.redis_sentinel_master = "no-such-master";
  prometheus::Registry registry;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<App> app, App::Start(wrong, registry));
  auto client = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", app->grpc_port()),
                                                 client::ClientOptions{kCallTimeout, ""});
  EXPECT_TRUE(Eventually([&] {
    absl::Status status = client->PlaceHold("alice", "o2").status();
    return absl::IsUnavailable(status) &&
           absl::StrContains(status.message(), "no sentinel knows master 'no-such-master'");
  }));
}

// --redis_wait_replicas below the primary's replica count is logged and counted
// (orderhold_redis_replicas_not_waited_for), naming what can be lost; =all waits for every replica
// the primary reports: with one of two replicas frozen, a write is not acknowledged ("not yet
// replicated"), where WAIT 1 would have answered OK and a failover to the frozen one would lose it.
TEST_F(SentinelE2eTest, AWaitBelowTheReplicaCountIsLoggedAndCountedAndAllWaitsForEveryReplica) {
  group_.reset();
  SentinelGroupOptions options;
  ASSERT_OK_AND_ASSIGN(options.app_acl_rules, testing::AppAclRulesLine());
  if (!RealTiming()) options.sentinel_debug = {"info-period", "1000", "publish-period", "500"};
  options.replicas = 2;
  ASSERT_OK_AND_ASSIGN(group_, SentinelGroup::Start(options));
  ::testing::internal::CaptureStderr();
  StartApp(SentinelConfig(/*wait_replicas=*/1));
  // Eventually: a replica of the just-started group may still be syncing (WAIT then fails
  // "not yet replicated", as under the sanitizers in CI).
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("u1", "o1").ok(); }, absl::Seconds(10)));
  EXPECT_TRUE(Eventually(
      [&] { return MetricValue(registry_, "orderhold_redis_replicas_not_waited_for") == 1; },
      absl::Seconds(5)));
  app_.reset();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("has 2 replicas and --redis_wait_replicas=1 waits for 1: a failover "
                             "to one of the others can lose holds already answered OK"));

  prometheus::Registry all_registry;
  Config all = SentinelConfig(kWaitAllReplicas);
  ASSERT_OK_AND_ASSIGN(app_, App::Start(all, all_registry));
  client_ = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", app_->grpc_port()),
                                             client::ClientOptions{kCallTimeout, ""});
  // Eventually: a replica of the just-started group may still be syncing (WAIT then fails
  // "not yet replicated", as under the sanitizers in CI).
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("u2", "o1").ok(); }, absl::Seconds(10)));
  EXPECT_EQ(MetricValue(all_registry, "orderhold_redis_replicas_not_waited_for"), 0);
  ASSERT_OK_AND_ASSIGN(const int primary, group_->PrimaryNode());
  const int frozen = primary == 0 ? 1 : 0;
  ASSERT_THAT(group_->node(frozen).Pause(), IsOk());
  EXPECT_THAT(client_->PlaceHold("u2", "o2"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not yet replicated")));
  ASSERT_THAT(group_->node(frozen).Resume(), IsOk());
  EXPECT_TRUE(Eventually([&] { return client_->PlaceHold("u2", "o2").ok(); }, absl::Seconds(10)));
  app_.reset();  // before all_registry, which its metrics live on
}
}  // namespace
}  // namespace orderhold
