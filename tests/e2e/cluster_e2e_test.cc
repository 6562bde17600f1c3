// Redis Cluster end to end: Apps (the same wiring as orderhold-server) in --redis_mode=cluster
// against a real cluster of 3 primaries with one replica each (RedisCluster, free ports), as the
// app user of deploy/redis/orderhold.acl plus the cluster rules, with 50 concurrent PlaceHold
// callers through gRPC. Three failures: a graceful CLUSTER FAILOVER, kill -9 of a primary, and
// every seed node down at start.
//
// The oracle of every case: each PlaceHold answered created=true is afterwards on the primary
// that serves its slot — read with ZSCORE straight from the cluster, not through the code under
// test — (none lost), and no user was ever answered created more than max_holds times (no
// over-grant). Each case prints its measured times; deploy/README.md's recovery table comes from
// them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "server/redis/cluster_slots.h"
#include "tests/testing/eventually.h"
#include "tests/testing/failover_app.h"
#include "tests/testing/grpc_health.h"
#include "tests/testing/hold_load.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::HoldLoad;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::LoadCall;
using ::orderhold::testing::LoadOptions;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisClusterOptions;
using ::orderhold::testing::StatusIs;

constexpr int kMaxHolds = 3;
constexpr int kUsers = 2000;
constexpr int kCallers = 50;
// The callers' deadline, and the bound on any answer: the server gives up on a slot after its
// retry window (1.5 s) and on a node after --redis_timeout (500 ms here), so every call is
// answered long before its deadline; an answer near the deadline would be a hang.
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kAnswerBound = absl::Seconds(5);

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string UserId(int user) { return absl::StrCat("u", user); }

// One PlaceHold answer.
struct Call {
  int user = 0;  // UserId(user)
  std::string order;
  int slot = 0;  // the hash slot of the user's keys
  absl::Time start, end;
  absl::StatusCode code = absl::StatusCode::kOk;
  bool created = false;

  // OK or RESOURCE_EXHAUSTED (the user at the limit): the service working.
  bool served() const {
    return code == absl::StatusCode::kOk || code == absl::StatusCode::kResourceExhausted;
  }
};

using CallFilter = std::function<bool(const Call&)>;

// Calls on the given slots (or, with `inside` false, on every other slot).
CallFilter OnSlots(std::set<int> slots, bool inside = true) {
  return [slots = std::move(slots), inside](const Call& call) {
    return (slots.count(call.slot) > 0) == inside;
  };
}

// The longest stretch within [from, to] in which no call matching `where` was served (by the end
// times of served calls): how long those slots were out of service.
absl::Duration LongestUnserved(const std::vector<Call>& calls, const CallFilter& where,
                               absl::Time from, absl::Time to) {
  std::vector<absl::Time> served;
  for (const Call& call : calls) {
    if (call.served() && where(call) && call.end >= from && call.end <= to) {
      served.push_back(call.end);
    }
  }
  std::sort(served.begin(), served.end());
  absl::Duration longest;
  absl::Time previous = from;
  for (absl::Time t : served) {
    longest = std::max(longest, t - previous);
    previous = t;
  }
  return std::max(longest, to - previous);
}

// Calls matching `where` that started at or after `since` and were not served.
int Failures(const std::vector<Call>& calls, const CallFilter& where, absl::Time since) {
  return static_cast<int>(std::count_if(calls.begin(), calls.end(), [&](const Call& call) {
    return call.start >= since && where(call) && !call.served();
  }));
}

// PlaceHold from `workers` threads through one client until Stop() (testing::HoldLoad): random
// users among kUsers, fresh order ids, ttl 10 min (nothing expires during a case), a 10 ms
// back-off after a failed call. Its calls are read as Calls, with the slot of each user.
class Load {
 public:
  // `user_slots[i]`: the hash slot of UserId(i)'s keys.
  Load(const client::OrderHoldClient& client, std::vector<int> user_slots, int workers)
      : user_slots_(std::move(user_slots)),
        load_(LoadOptions{.clients = {&client}, .users = Users(), .workers = workers}) {}

  void Stop() { load_.Stop(); }

  std::vector<Call> calls() {
    std::vector<Call> out;
    for (const LoadCall& call : load_.calls()) out.push_back(ToCall(call));
    return out;
  }

  // Blocks until `n` calls matching `where` that started at or after `since` were served (true),
  // or `timeout` passes (false).
  bool Served(int n, const CallFilter& where, absl::Time since,
              absl::Duration timeout = absl::Seconds(30)) {
    return load_.Served(
        n, [&](const LoadCall& call) { return where(ToCall(call)); }, since, timeout);
  }
  // The same on every slot.
  bool Served(int n, absl::Time since = absl::Now()) {
    return Served(
        n, [](const Call&) { return true; }, since);
  }

 private:
  static std::vector<std::string> Users() {
    std::vector<std::string> users;
    for (int i = 0; i < kUsers; ++i) users.push_back(UserId(i));
    return users;
  }
  Call ToCall(const LoadCall& call) const {
    return Call{call.user, call.order,  user_slots_[call.user], call.start, call.end,
                call.code, call.created};
  }

  const std::vector<int> user_slots_;
  HoldLoad load_;
};

// The oracle's findings.
struct Verdict {
  int checked = 0;                // acknowledged holds looked up
  int lost = 0;                   // of those, missing on the slot's primary
  std::set<int> users_with_lost;  // whose acknowledged hold is missing
  std::set<int> over_granted;     // answered created more than kMaxHolds times
};

class ClusterE2eTest : public ::testing::Test {
 protected:
  void StartCluster(absl::Duration node_timeout) {
    RedisClusterOptions options;
    options.node_timeout = node_timeout;
    ASSERT_OK_AND_ASSIGN(cluster_, RedisCluster::Start(options));
  }

  // Seeds: the three initial primaries.
  Config ClusterConfig(int wait_replicas) {
    Config config = testing::FailoverAppConfig(kMaxHolds);
    config.redis_mode = RedisMode::kCluster;
    config.redis_url = ParsedRedisUrl(cluster_->SeedUrl());
    config.redis_wait_replicas = wait_replicas;
    return config;
  }

  void StartApp(const Config& config) {
    ASSERT_OK_AND_ASSIGN(app_, App::Start(config, registry_));
    client_ = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", app_->grpc_port()),
                                               client::ClientOptions{kCallTimeout, ""});
    for (int user = 0; user < kUsers; ++user) {
      user_slots_.push_back(
          redis::HashSlot(app_->redis_store()->keys().HoldsBucketKey(UserId(user))));
    }
  }

  HealthCheckResponse::ServingStatus Health() {
    return testing::Health(app_->grpc_port(), "", absl::Seconds(2));
  }

  // The slots of the load's users that node `node` serves now.
  std::set<int> SlotsServedBy(int node) {
    std::set<int> slots;
    for (int slot : std::set<int>(user_slots_.begin(), user_slots_.end())) {
      absl::StatusOr<int> owner = cluster_->PrimaryFor(slot);
      EXPECT_THAT(owner, IsOk());
      if (owner.ok() && *owner == node) slots.insert(slot);
    }
    return slots;
  }

  // The oracle (see the file comment). Holds matching `must_be_present` are looked up on the
  // primary now serving their slot; every acknowledged hold counts towards over-grants.
  Verdict Check(const std::vector<Call>& calls, const CallFilter& must_be_present) {
    Verdict verdict;
    std::map<int, int> owners;  // slot -> node
    std::map<int, int> created;
    for (const Call& call : calls) {
      if (!call.created) continue;
      if (++created[call.user] > kMaxHolds) verdict.over_granted.insert(call.user);
      if (!must_be_present(call)) continue;
      auto owner = owners.find(call.slot);
      if (owner == owners.end()) {
        // The nodes may still be learning a failover: wait until they agree.
        absl::StatusOr<int> node;
        Eventually([&] { return (node = cluster_->PrimaryFor(call.slot)).ok(); }, absl::Seconds(10),
                   absl::Milliseconds(50));
        EXPECT_THAT(node, IsOk());
        if (!node.ok()) continue;
        owner = owners.emplace(call.slot, *node).first;
      }
      ++verdict.checked;
      absl::StatusOr<std::string> score = cluster_->Command(
          owner->second, testing::StoredHoldsCommand(app_->redis_store()->keys(), UserId(call.user),
                                                     "score", call.order));
      EXPECT_THAT(score, IsOk());
      if (score.ok() && *score == "(nil)") {
        ++verdict.lost;
        verdict.users_with_lost.insert(call.user);
      }
    }
    return verdict;
  }

  // Every answer came within kAnswerBound, and with a code the case allows: OK,
  // RESOURCE_EXHAUSTED, UNAVAILABLE (Redis could not serve it, retrying is safe), or
  // DEADLINE_EXCEEDED only once the caller's own deadline had passed.
  void ExpectAnsweredInTime(const std::vector<Call>& calls) {
    absl::Duration longest;
    std::map<absl::StatusCode, int> unexpected;
    for (const Call& call : calls) {
      longest = std::max(longest, call.end - call.start);
      const bool allowed = call.served() || call.code == absl::StatusCode::kUnavailable ||
                           (call.code == absl::StatusCode::kDeadlineExceeded &&
                            call.end - call.start >= kCallTimeout);
      if (!allowed) ++unexpected[call.code];
    }
    EXPECT_LT(longest, kAnswerBound) << "a call hung";
    for (const auto& [code, n] : unexpected) {
      ADD_FAILURE() << n << " calls answered " << absl::StatusCodeToString(code);
    }
  }

  double Moved() {
    return MetricValue(registry_, "orderhold_redis_redirects_total", {{"kind", "moved"}});
  }
  double Failovers() { return MetricValue(registry_, "orderhold_redis_failovers_total"); }

  std::unique_ptr<RedisCluster> cluster_;
  prometheus::Registry registry_;
  std::unique_ptr<App> app_;
  std::unique_ptr<client::OrderHoldClient> client_;
  std::vector<int> user_slots_;  // by user index
};

// Case 3: a graceful CLUSTER FAILOVER of a primary under 50-way load, with WAIT 1. The primary
// stops taking writes, its replica catches up and takes over, the old primary then answers MOVED
// (and its pooled connections are closed); the new primary has no scripts (Redis 7.0 does not
// replicate SCRIPT LOAD: the EVAL reload). Nothing acknowledged may be lost, nobody over-granted.
TEST_F(ClusterE2eTest, GracefulFailoverUnderLoadLosesNothingAndGrantsNoMore) {
  StartCluster(absl::Milliseconds(2000));
  StartApp(ClusterConfig(/*wait_replicas=*/1));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  const int old_primary = 0;
  const int new_primary = cluster_->InitialReplica(old_primary);
  const std::set<int> moved = SlotsServedBy(old_primary);
  ASSERT_FALSE(moved.empty());

  Load load(*client_, user_slots_, kCallers);
  ASSERT_TRUE(load.Served(500));
  const double moved_before = Moved();
  const absl::Time failover = absl::Now();
  ASSERT_THAT(cluster_->Failover(new_primary), IsOk());
  ASSERT_THAT(cluster_->WaitForPrimary(*moved.begin(), new_primary, absl::Seconds(15)), IsOk());
  const absl::Time switched = absl::Now();
  ASSERT_TRUE(load.Served(300, OnSlots(moved), switched));
  ASSERT_TRUE(load.Served(300, OnSlots(moved, false), switched));
  EXPECT_TRUE(Eventually([&] { return Failovers() >= 1; }, absl::Seconds(10)));
  load.Stop();
  const absl::Time stopped = absl::Now();

  const std::vector<Call> calls = load.calls();
  const Verdict verdict = Check(calls, [](const Call&) { return true; });
  int created_on_new = 0;
  for (const Call& call : calls) {
    created_on_new += call.created && call.start >= switched && moved.count(call.slot) > 0;
  }
  std::printf(
      "[cluster CLUSTER FAILOVER wait=1] switch seen by every node %.2f s after the command; "
      "moved slots (%zu) without a served call for %.2f s at most, other slots %.2f s; %d failed "
      "calls (%d on the moved slots); orderhold_redis_failovers_total %.0f; MOVED redirects %.0f "
      "(%.0f before)\n",
      Seconds(switched - failover), moved.size(),
      Seconds(LongestUnserved(calls, OnSlots(moved), failover, stopped)),
      Seconds(LongestUnserved(calls, OnSlots(moved, false), failover, stopped)),
      Failures(
          calls, [](const Call&) { return true; }, failover),
      Failures(calls, OnSlots(moved), failover), Failovers(), Moved(), moved_before);
  std::printf(
      "[cluster CLUSTER FAILOVER wait=1] %d calls, %d acknowledged holds checked (%d created on "
      "the new primary), %d lost, %zu users over-granted\n",
      static_cast<int>(calls.size()), verdict.checked, created_on_new, verdict.lost,
      verdict.over_granted.size());
  EXPECT_GT(created_on_new, 0);  // the new primary took writes
  EXPECT_EQ(verdict.lost, 0);
  EXPECT_TRUE(verdict.over_granted.empty());
  ExpectAnsweredInTime(calls);
}

// Case 4: kill -9 of a primary under load (cluster-node-timeout 1 s). Calls on its slots fail
// UNAVAILABLE at once (its connections are refused) or succeed — never a hang — until its
// replica is promoted (node timeout + election), then succeed on the promoted replica without a
// restart of the App. Every other slot sees the cluster-wide CLUSTERDOWN (every node refuses
// while a slot's primary is FAIL, full coverage being required) for about a second, which the
// App retries inside its window; then they serve again.
//
// WAIT 0: replication is asynchronous, so the holds the killed primary acknowledged in its last
// moments may never have reached its replica (cluster-spec.md "Write safety"). The oracle's "none
// lost" therefore covers every hold on the other slots, and the holds on the killed slots
// acknowledged after the kill (by the promoted replica); the killed primary's own
// acknowledgements are only counted and printed. A user whose acknowledged hold was lost may then
// be granted again: an over-grant is only allowed for such a user.
TEST_F(ClusterE2eTest, KilledPrimaryIsUnavailableThenServedOnThePromotedReplica) {
  StartCluster(absl::Milliseconds(1000));
  StartApp(ClusterConfig(/*wait_replicas=*/0));
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("warm", "up").ok(); }));
  const int victim = 0;
  const int replica = cluster_->InitialReplica(victim);
  const std::set<int> killed_slots = SlotsServedBy(victim);
  ASSERT_FALSE(killed_slots.empty());
  const absl::StatusOr<int> slot0_owner = cluster_->PrimaryFor(0);
  ASSERT_THAT(slot0_owner, IsOk());
  ASSERT_EQ(*slot0_owner, victim);
  const CallFilter on_killed = OnSlots(killed_slots);
  const CallFilter on_others = OnSlots(killed_slots, false);

  Load load(*client_, user_slots_, kCallers);
  ASSERT_TRUE(load.Served(500));
  // Health stays SERVING through the outage although the victim serves slot 0, where a command
  // without a key (health's TIME) goes first: another primary answers it. Not serving would take
  // every App out of a load balancer for a failure of a third of the slots.
  std::atomic<bool> sampling{true};
  std::atomic<int> health_samples{0}, not_serving{0};
  std::thread health_sampler([&] {
    while (sampling.load()) {
      if (Health() != HealthCheckResponse::SERVING) ++not_serving;
      ++health_samples;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const absl::Time killed = absl::Now();
  ASSERT_THAT(cluster_->node(victim).Crash(), IsOk());
  const absl::Time dead = absl::Now();  // no answer from the victim after this
  const absl::Status promotion =
      cluster_->WaitForPrimary(*killed_slots.begin(), replica, absl::Seconds(20));
  sampling = false;
  health_sampler.join();
  ASSERT_THAT(promotion, IsOk());
  const absl::Time promoted = absl::Now();
  EXPECT_EQ(not_serving.load(), 0) << "of " << health_samples.load() << " health checks";
  ASSERT_TRUE(load.Served(300, on_killed, promoted));
  ASSERT_TRUE(load.Served(300, on_others, promoted));
  load.Stop();
  const absl::Time stopped = absl::Now();

  const std::vector<Call> calls = load.calls();
  const Verdict verdict =
      Check(calls, [&](const Call& call) { return !on_killed(call) || call.start >= dead; });
  const Verdict before_kill =
      Check(calls, [&](const Call& call) { return on_killed(call) && call.start < dead; });
  std::printf(
      "[cluster kill -9] replica promoted (every node agreeing) %.2f s after the kill; killed "
      "slots (%zu) without a served call for %.2f s, other slots for %.2f s at most; %d failed "
      "calls on the killed slots, %d on the others; orderhold_redis_failovers_total %.0f\n",
      Seconds(promoted - killed), killed_slots.size(),
      Seconds(LongestUnserved(calls, on_killed, killed, stopped)),
      Seconds(LongestUnserved(calls, on_others, killed, stopped)),
      Failures(calls, on_killed, killed), Failures(calls, on_others, killed), Failovers());
  std::printf(
      "[cluster kill -9] %d acknowledged holds checked, %d lost; of the killed primary's own "
      "acknowledgements %d checked, %d lost (asynchronous replication); %zu users over-granted\n",
      verdict.checked, verdict.lost, before_kill.checked, before_kill.lost,
      verdict.over_granted.size());
  EXPECT_GT(Failures(calls, on_killed, killed), 0);
  EXPECT_EQ(verdict.lost, 0);
  for (int user : verdict.over_granted) {
    EXPECT_EQ(before_kill.users_with_lost.count(user), 1u)
        << UserId(user) << " over-granted without a lost hold";
  }
  EXPECT_GE(Failovers(), 1);
  ExpectAnsweredInTime(calls);
}

// Case 7: every node hung (SIGSTOP) when the App starts, so none of its seeds answers. The server
// starts anyway, health says NOT_SERVING and PlaceHold answers UNAVAILABLE well within its
// deadline; once the nodes run again the App finds the slot map by itself (its failing health
// checks ask for it, with no traffic needed), turns SERVING and serves, without a restart.
TEST_F(ClusterE2eTest, StartsNotServingWithEverySeedDownAndServesOnceTheClusterIsBack) {
  StartCluster(absl::Milliseconds(1000));
  for (int i = 0; i < cluster_->node_count(); ++i) ASSERT_THAT(cluster_->node(i).Pause(), IsOk());
  const absl::Time starting = absl::Now();
  StartApp(ClusterConfig(/*wait_replicas=*/0));
  const absl::Duration start_took = absl::Now() - starting;
  EXPECT_EQ(Health(), HealthCheckResponse::NOT_SERVING);
  const absl::Time refusing = absl::Now();
  EXPECT_THAT(client_->PlaceHold("alice", "o1").status(), StatusIs(absl::StatusCode::kUnavailable));
  const absl::Duration refused_in = absl::Now() - refusing;
  EXPECT_LT(refused_in, kAnswerBound);
  EXPECT_EQ(Health(), HealthCheckResponse::NOT_SERVING);

  const absl::Time resumed = absl::Now();
  for (int i = 0; i < cluster_->node_count(); ++i) {
    ASSERT_THAT(cluster_->node(i).Resume(), IsOk());
  }
  ASSERT_TRUE(
      Eventually([&] { return Health() == HealthCheckResponse::SERVING; }, absl::Seconds(30)));
  const absl::Duration serving_after = absl::Now() - resumed;
  ASSERT_TRUE(Eventually([&] { return client_->PlaceHold("alice", "o1").ok(); }, absl::Seconds(30),
                         absl::Milliseconds(50)));
  const absl::Duration placed_after = absl::Now() - resumed;

  Load load(*client_, user_slots_, kCallers);
  ASSERT_TRUE(load.Served(500));
  load.Stop();
  const std::vector<Call> calls = load.calls();
  const Verdict verdict = Check(calls, [](const Call&) { return true; });
  std::printf(
      "[cluster seeds down] App::Start took %.2f s; PlaceHold UNAVAILABLE in %.2f s; "
      "SERVING %.2f s after the nodes resumed, first hold placed after %.2f s; then %d "
      "acknowledged holds checked, %d lost, %zu users over-granted\n",
      Seconds(start_took), Seconds(refused_in), Seconds(serving_after), Seconds(placed_after),
      verdict.checked, verdict.lost, verdict.over_granted.size());
  EXPECT_EQ(verdict.lost, 0);
  EXPECT_TRUE(verdict.over_granted.empty());
  ExpectAnsweredInTime(calls);
}

}  // namespace
}  // namespace orderhold
