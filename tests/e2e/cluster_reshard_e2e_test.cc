// Resharding: a real `redis-cli --cluster reshard` of slots holding live holds, under
// PlaceHold/Pay load, while the reapers of two Apps (--redis_mode=cluster, the same wiring as
// orderhold-server) end holds that expire every second. The slots moved are those of several of
// the 64 partition hash tags ({0}..{63}, server/store/keys.h): each such slot carries one
// partition's due index, event stream, lease and every key of its users, so the reshard migrates
// (MIGRATE, key by key) exactly what reap.lua reads and writes. reap.lua names each user's keys
// itself (not in KEYS) and is made per-user idempotent under migration (see its header and
// tests/integration/script_migration_test.cc); this is the proof at App level. So that reap.lua
// surely runs while those slots migrate (the Apps tick every 100 ms; one slot migrates in a few
// ms), a third reaper in standby mode reaps the moving partitions back to back during the
// reshards, racing the owners; the test prints how often Redis stopped it part-way ("non local
// key").
//
// The oracle, with two consumer groups watching the events throughout: no hold lost (every hold
// acknowledged created is listed live when ListHolds is asked after the reshard, or has ended;
// and every one of them ends, with an event), none ended twice (one event id per hold in each
// group), each with the outcome the test caused (PAID when the Pay was acknowledged, EXPIRED when
// no Pay was tried). Holds live 1-3 s. A watch whose poll fails mid-migration ends (that is the
// service's contract: the consumer reconnects); the test's consumers resume under the same name.
//
// Prints what moved and the counts. Every wait is bounded; about 15 s on 2 cores, 30-35 s under
// ASan.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/orderhold_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/app.h"
#include "server/common/fan_in.h"
#include "server/redis/cluster_slots.h"
#include "server/store/keys.h"
#include "tests/testing/eventually.h"
#include "tests/testing/hold_event_watcher.h"
#include "tests/testing/hold_load.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/parsed_redis_url.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"

namespace orderhold {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::HoldLoad;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::LoadCall;
using ::orderhold::testing::LoadOptions;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::ParsedRedisUrl;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisClusterOptions;
using ::orderhold::testing::ResumingWatcher;
using ::orderhold::v1::HoldEvent;
using ::orderhold::v1::HoldOutcome;

constexpr int kMaxHolds = 3;
// Partition tags moved by each reshard (the lowest slots of node 0), and as many that stay.
constexpr int kMovedTags = 10;
constexpr int kUsersPerPartition = 60;
constexpr int kWorkers = 4;
constexpr int kPayOneIn = 5;  // a created hold is paid at once with this odds
const char* const kGroups[] = {"billing", "inventory"};
// Failures reported one by one per kind (the counts are asserted).
constexpr int kFailuresShown = 5;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string HoldKey(absl::string_view user, absl::string_view order) {
  return absl::StrCat(user, "/", order);
}

// A hold answered created=true, and what became of the Pay tried on it.
struct Acked {
  std::string user, order;
  absl::Time expire;
  LoadCall::Pay pay = LoadCall::Pay::kNotTried;
};

// Per hold ("user/order"), the distinct event ids a group received and their outcomes.
struct GroupTally {
  std::map<std::string, std::map<std::string, HoldOutcome>> by_hold;
  void Add(const std::vector<HoldEvent>& events) {
    for (const HoldEvent& event : events) {
      by_hold[HoldKey(event.hold().user_id(), event.hold().order_id())][event.event_id()] =
          event.outcome();
    }
  }
};

TEST(ClusterReshardE2eTest, ReshardUnderLoadWithReaperLosesNoHoldAndEndsEachOnce) {
  const absl::Time test_start = absl::Now();
  RedisClusterOptions cluster_options;
  cluster_options.primaries = 2;
  cluster_options.replicas_per_primary = 0;
  cluster_options.appendonly = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start(cluster_options));
  const absl::Duration cluster_up = absl::Now() - test_start;

  // The partitions by slot; node 0 serves the low slots (0-8191). A reshard of node 0's lowest
  // `slot_count` slots moves its kMovedTags lowest partition tags.
  const store::KeySchema keys("orderhold");
  std::vector<std::pair<int, int>> tag_slots;  // (slot, partition)
  for (int partition = 0; partition < store::KeySchema::kPartitionCount; ++partition) {
    tag_slots.emplace_back(redis::HashSlot(keys.BucketIndexKey(partition)), partition);
  }
  std::sort(tag_slots.begin(), tag_slots.end());
  std::vector<int> moving, staying;
  for (const auto& [slot, partition] : tag_slots) {
    ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
    if (owner == 0 && static_cast<int>(moving.size()) < kMovedTags) {
      moving.push_back(partition);
    } else if (static_cast<int>(staying.size()) < kMovedTags) {
      staying.push_back(partition);
    }
  }
  ASSERT_EQ(moving.size(), static_cast<size_t>(kMovedTags));
  const int slot_count = redis::HashSlot(keys.BucketIndexKey(moving.back())) + 1;

  // Users of the moving partitions and of as many others.
  std::map<int, std::vector<std::string>> users_of;
  std::vector<std::string> users;
  std::set<int> chosen(moving.begin(), moving.end());
  chosen.insert(staying.begin(), staying.end());
  for (int i = 0; users.size() < chosen.size() * kUsersPerPartition; ++i) {
    const std::string user = absl::StrCat("user-", i);
    const int partition = store::KeySchema::PartitionOf(user);
    if (chosen.count(partition) == 0 || users_of[partition].size() >= kUsersPerPartition) continue;
    users_of[partition].push_back(user);
    users.push_back(user);
  }

  // Two Apps, so two reapers share (and fence) the partitions.
  Config config;
  config.grpc_address = "127.0.0.1:0";
  config.redis_mode = RedisMode::kCluster;
  config.redis_url = ParsedRedisUrl(cluster->SeedUrl());
  config.redis_connections = 2;
  config.reap_interval = absl::Milliseconds(100);
  config.reaper_lease = absl::Seconds(1);
  config.health_check_interval = absl::Milliseconds(50);
  config.policy.max_holds = kMaxHolds;
  // An event left pending by a watch that ended mid-poll comes back after this (claimed).
  config.events.ack_timeout = absl::Seconds(2);
  prometheus::Registry registries[2];
  std::unique_ptr<App> apps[2];
  std::unique_ptr<client::OrderHoldClient> clients[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(apps[i], App::Start(config, registries[i]));
    clients[i] = client::OrderHoldClient::Connect(absl::StrCat("127.0.0.1:", apps[i]->grpc_port()),
                                                  client::ClientOptions{absl::Seconds(10), ""});
  }
  ASSERT_TRUE(Eventually([&] { return clients[0]->PlaceHold("warm", "up", absl::Seconds(1)).ok(); },
                         absl::Seconds(10)));
  const auto metric_sum = [&](const std::string& name,
                              const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(registries[0], name, labels) + MetricValue(registries[1], name, labels);
  };

  // Each group's consumer resumes under its name when a watch ends mid-migration, and acks in
  // batches (a consumer acking each event in its own call fell 30-55 s behind under ASan with
  // other tests running: events past ack_timeout were claimed and sent again).
  std::vector<std::unique_ptr<ResumingWatcher>> consumers;
  for (const char* group : kGroups) {
    v1::WatchHoldEventsRequest request;
    request.set_consumer_group(group);
    request.set_consumer("c1");
    consumers.push_back(std::make_unique<ResumingWatcher>(*clients[1], request));
  }

  // PlaceHold (ttl 1-3 s) from kWorkers threads over both Apps, for random users, each created
  // hold paid at once one time in kPayOneIn.
  HoldLoad load(LoadOptions{.clients = {clients[0].get(), clients[1].get()},
                            .users = users,
                            .workers = kWorkers,
                            .min_ttl = absl::Seconds(1),
                            .max_ttl = absl::Seconds(3),
                            .pay_one_in = kPayOneIn});
  ASSERT_TRUE(load.ServeMore(1000));
  // Reshard the moving tags' slots to node 1 and back, under load, each with holds expiring.
  int64_t keys_moving = 0;  // in the moving tags' slots as the reshard begins
  for (int partition : moving) {
    keys_moving +=
        std::stoll(cluster
                       ->Command(0, {"CLUSTER", "COUNTKEYSINSLOT",
                                     absl::StrCat(redis::HashSlot(keys.BucketIndexKey(partition)))})
                       .value_or("0"));
  }
  // During the reshards, a third reaper in standby mode (as a replica reaps a partition whose owner
  // is late: the lease untouched, here with no lateness required) reaps the moving partitions back
  // to back, so that reap.lua runs while their slots migrate far more often than the Apps' 100 ms
  // ticks alone would make it, and races the owners' reaps.
  std::atomic<bool> stop_standby{false};
  std::map<std::string, int> standby_answers;  // by outcome: reaped, nothing, refusal
  std::thread standby([&] {
    store::ReapArgs args;
    args.max_users = 20;
    args.standby_after = absl::ZeroDuration();
    while (!stop_standby.load()) {
      for (int partition : moving) {
        absl::StatusOr<store::ReapResult> result = store::Await<store::ReapResult>([&](auto done) {
          apps[0]->redis_store()->Reap(
              partition, args, store::CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
              std::move(done));
        });
        if (!result.ok()) {
          const bool non_local = absl::StrContains(result.status().message(), "non local key");
          ++standby_answers[non_local ? "refused part-way (non local key)"
                                      : absl::StatusCodeToString(result.status().code())];
        } else {
          ++standby_answers[result->reaped_expire_times.empty() ? "nothing due" : "reaped"];
        }
      }
    }
  });
  const absl::Time reshard_start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::string out, cluster->Reshard(0, 1, slot_count));
  const absl::Duration there = absl::Now() - reshard_start;
  for (int partition : moving) {
    EXPECT_EQ(cluster->PrimaryFor(redis::HashSlot(keys.BucketIndexKey(partition))).value_or(-1), 1)
        << "partition " << partition;
  }
  ASSERT_TRUE(load.ServeMore(500));
  const absl::Time back_start = absl::Now();
  ASSERT_OK_AND_ASSIGN(out, cluster->Reshard(1, 0, slot_count));
  const absl::Duration back = absl::Now() - back_start;
  stop_standby = true;
  standby.join();
  for (int partition : moving) {
    EXPECT_EQ(cluster->PrimaryFor(redis::HashSlot(keys.BucketIndexKey(partition))).value_or(-1), 0)
        << "partition " << partition;
  }
  ASSERT_TRUE(load.ServeMore(500));
  load.Stop();
  std::vector<Acked> acked;
  for (const LoadCall& call : load.calls()) {
    if (call.created) acked.push_back({load.user(call), call.order, call.expire, call.pay});
  }

  // Listed now, from whichever node serves its slot after the reshards: every acknowledged hold
  // on which no Pay was tried and that has more than 200 ms left when its user is listed.
  std::map<std::string, std::set<std::string>> listed;  // user -> live order ids
  std::map<std::string, absl::Time> listed_at;          // user -> when it was asked
  for (const std::string& user : users) {
    listed_at[user] = absl::Now();
    absl::StatusOr<v1::ListHoldsResponse> list = clients[0]->ListHolds(user);
    ASSERT_THAT(list, IsOk()) << user;
    for (const v1::Hold& hold : list->holds()) listed[user].insert(hold.order_id());
  }
  int checked_live = 0, missing_live = 0;
  for (const Acked& hold : acked) {
    if (hold.pay != LoadCall::Pay::kNotTried ||
        hold.expire < listed_at[hold.user] + absl::Milliseconds(200)) {
      continue;
    }
    ++checked_live;
    if (listed[hold.user].count(hold.order) == 0) {
      if (++missing_live <= kFailuresShown) {
        ADD_FAILURE() << "acknowledged hold " << HoldKey(hold.user, hold.order)
                      << " is not listed before its expire time";
      }
    }
  }

  // Every acknowledged hold ends (ttl <= 3 s): the reapers empty the due indexes (the bucket
  // index of a partition is empty once every bucket's is).
  const absl::Time drain_start = absl::Now();
  const bool reaped = Eventually(
      [&] {
        for (int partition : chosen) {
          const std::string index = keys.BucketIndexKey(partition);
          absl::StatusOr<int> owner = cluster->PrimaryFor(redis::HashSlot(index));
          if (!owner.ok()) return false;
          absl::StatusOr<std::string> card = cluster->Command(*owner, {"ZCARD", index});
          if (!card.ok() || *card != "0") return false;
        }
        return true;
      },
      absl::Seconds(15), absl::Milliseconds(100));
  EXPECT_TRUE(reaped) << "holds left in the due indexes";
  const absl::Duration drain = absl::Now() - drain_start;
  // A marker (placed and cancelled now) in each partition used: a partition's events reach a
  // consumer in stream order, so once a group has every marker it has every earlier event, the
  // duplicates included.
  for (int partition : chosen) {
    const std::string& user = users_of[partition].front();
    ASSERT_THAT(clients[0]->PlaceHold(user, "marker", absl::Minutes(1)), IsOk()) << user;
    ASSERT_THAT(clients[0]->CancelHold(user, "marker"), IsOk()) << user;
  }
  // The consumers may be behind (a loaded machine): wait for the markers while events keep
  // coming, and fail when a group's events stop (kStalled without one) or the wait passes
  // kCatchUpLimit; a wall-clock bound on delivery speed would only measure the machine.
  GroupTally tallies[2];
  absl::Duration caught_up[2];
  const absl::Time markers_placed = absl::Now();
  for (int g = 0; g < 2; ++g) {
    constexpr absl::Duration kStalled = absl::Seconds(15);
    constexpr absl::Duration kCatchUpLimit = absl::Seconds(60);
    const absl::Time wait_start = absl::Now();
    absl::Time last_progress = wait_start;
    size_t received = 0;
    bool markers = false;
    while (absl::Now() - last_progress < kStalled && absl::Now() - wait_start < kCatchUpLimit) {
      const std::vector<HoldEvent> events = consumers[g]->events();
      if (events.size() > received) {
        received = events.size();
        last_progress = absl::Now();
      }
      std::set<std::string> seen;
      for (const HoldEvent& event : events) {
        if (event.hold().order_id() == "marker") seen.insert(event.hold().user_id());
      }
      if (seen.size() == chosen.size()) {
        markers = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    caught_up[g] = absl::Now() - markers_placed;
    EXPECT_TRUE(markers) << "group " << kGroups[g] << " did not get every marker: "
                         << (absl::Now() - last_progress >= kStalled
                                 ? "its events stopped coming"
                                 : "still catching up after the limit");
  }
  for (int g = 0; g < 2; ++g) {
    consumers[g]->Stop();
    tallies[g].Add(consumers[g]->events());
  }

  // The verdict, per group.
  int lost[2] = {0, 0}, twice[2] = {0, 0}, wrong_outcome[2] = {0, 0}, expired_events[2] = {0, 0};
  for (int g = 0; g < 2; ++g) {
    for (const auto& [hold, ids] : tallies[g].by_hold) {
      if (ids.size() > 1) {
        if (++twice[g] <= kFailuresShown) {
          ADD_FAILURE() << "group " << kGroups[g] << ": " << hold << " ended " << ids.size()
                        << " times";
        }
      }
      for (const auto& [id, outcome] : ids) expired_events[g] += outcome == v1::EXPIRED ? 1 : 0;
    }
    for (const Acked& hold : acked) {
      auto it = tallies[g].by_hold.find(HoldKey(hold.user, hold.order));
      if (it == tallies[g].by_hold.end()) {
        if (++lost[g] <= kFailuresShown) {
          ADD_FAILURE() << "group " << kGroups[g] << ": acknowledged hold "
                        << HoldKey(hold.user, hold.order) << " never ended (no event)";
        }
        continue;
      }
      const HoldOutcome outcome = it->second.begin()->second;
      if ((hold.pay == LoadCall::Pay::kPaid && outcome != v1::PAID) ||
          (hold.pay == LoadCall::Pay::kNotTried && outcome != v1::EXPIRED)) {
        if (++wrong_outcome[g] <= kFailuresShown) {
          ADD_FAILURE() << "group " << kGroups[g] << ": " << HoldKey(hold.user, hold.order)
                        << " ended " << v1::HoldOutcome_Name(outcome);
        }
      }
    }
  }
  int paid = 0;
  for (const Acked& hold : acked) paid += hold.pay == LoadCall::Pay::kPaid ? 1 : 0;

  std::vector<std::string> moved_desc;
  for (int partition : moving) {
    moved_desc.push_back(
        absl::StrCat("{", partition, "}@", redis::HashSlot(keys.BucketIndexKey(partition))));
  }
  std::printf(
      "[reshard] cluster of 2 primaries up in %.2f s; moved slots 0-%d (%d partition tags: %s) "
      "with %lld keys, node 0 -> 1 in %.2f s and back in %.2f s (redis-cli --cluster reshard) "
      "under "
      "load\n",
      Seconds(cluster_up), slot_count - 1, kMovedTags, absl::StrJoin(moved_desc, " ").c_str(),
      static_cast<long long>(keys_moving), Seconds(there), Seconds(back));
  std::printf("[reshard] standby reap calls on the moving partitions during the reshards: %s\n",
              absl::StrJoin(standby_answers, ", ", absl::PairFormatter(" ")).c_str());
  std::printf(
      "[reshard] PlaceHold answers: %s; %zu holds acknowledged (%d paid), %d checked live by "
      "ListHolds after the reshards, %d missing; everything reaped %.2f s after the load stopped\n",
      load.Answers().c_str(), acked.size(), paid, checked_live, missing_live, Seconds(drain));
  for (int g = 0; g < 2; ++g) {
    std::vector<std::string> ends = consumers[g]->ends();
    std::printf(
        "[reshard] group %s: events for %zu holds (%d EXPIRED), %d acknowledged holds without "
        "one, %d holds with two event ids, %d wrong outcomes; every marker %.2f s after they "
        "were placed; watch resumed %zu times%s%s\n",
        kGroups[g], tallies[g].by_hold.size(), expired_events[g], lost[g], twice[g],
        wrong_outcome[g], Seconds(caught_up[g]), ends.size(),
        ends.empty() ? "" : ", first end: ", ends.empty() ? "" : ends.front().c_str());
  }
  // What the nodes refused meanwhile (INFO errorstats, summed over the nodes): MOVED, ASK and
  // TRYAGAIN of the migrations, and ERR for reap.lua stopped part-way ("Script attempted to access
  // a non local key", logged by the reaper as a failed tick).
  std::map<std::string, int64_t> refused;
  for (int node = 0; node < cluster->node_count(); ++node) {
    absl::StatusOr<std::string> stats = cluster->Command(node, {"INFO", "errorstats"});
    ASSERT_THAT(stats, IsOk());
    for (absl::string_view line : absl::StrSplit(*stats, absl::ByAnyChar("\r\n"))) {
      // errorstat_<PREFIX>:count=<n>
      std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(":count=", 1));
      int64_t count = 0;
      if (parts.size() == 2 && absl::ConsumePrefix(&parts[0], "errorstat_") &&
          absl::SimpleAtoi(parts[1], &count)) {
        refused[std::string(parts[0])] += count;
      }
    }
  }
  std::printf("[reshard] errors the nodes answered: %s\n",
              absl::StrJoin(refused, ", ", absl::PairFormatter(" ")).c_str());
  std::printf(
      "[reshard] redirects moved %.0f, ask %.0f; topology refreshes %.0f; failovers counted %.0f; "
      "holds expired (reapers + lazily) %.0f; test took %.1f s\n",
      metric_sum("orderhold_redis_redirects_total", {{"kind", "moved"}}),
      metric_sum("orderhold_redis_redirects_total", {{"kind", "ask"}}),
      metric_sum("orderhold_redis_topology_refreshes_total"),
      metric_sum("orderhold_redis_failovers_total"), metric_sum("orderhold_holds_expired_total"),
      Seconds(absl::Now() - test_start));

  EXPECT_GT(acked.size(), 500u);
  EXPECT_GT(checked_live, 0);
  EXPECT_EQ(missing_live, 0);
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(lost[g], 0) << kGroups[g];
    EXPECT_EQ(twice[g], 0) << kGroups[g];
    EXPECT_EQ(wrong_outcome[g], 0) << kGroups[g];
  }
  // The reshard moved slots the clients were using: they followed MOVED (and maybe ASK).
  EXPECT_GT(metric_sum("orderhold_redis_redirects_total", {{"kind", "moved"}}), 0);
  // Slots moving between primaries that stay is not a failover.
  EXPECT_EQ(metric_sum("orderhold_redis_failovers_total"), 0);
}

}  // namespace
}  // namespace orderhold
