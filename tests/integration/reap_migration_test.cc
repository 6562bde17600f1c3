// reap.lua while its slot migrates (Redis Cluster resharding). The script finds its users in the
// partition's due index, so it names their keys itself rather than in KEYS; Redis refuses, part-way
// through the script, an access to such a key once it has moved ("non local key"), and keeps the
// writes made before (https://redis.io/docs/reference/cluster-spec/, eval-intro "Script
// execution"). reap.lua reads every key of a user before writing any of them, so the refusal can
// only come before that user's first write: each user is reaped whole or not at all, and a later
// call finishes the rest with one event per hold. Real 2-primary cluster on free ports; the store
// talks to the slot's owner directly (cluster routing is issue 12's next step).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/fan_in.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisClusterOptions;
using ::orderhold::testing::StatusIs;

constexpr int kPartition = 0;

TEST(ReapMigrationTest, EachUserIsReapedWholeOrNotAtAllWhileItsSlotMigrates) {
  RedisClusterOptions options;
  options.primaries = 2;
  options.replicas_per_primary = 0;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start(options));
  const KeySchema keys("orderhold");
  ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(keys.DueKey(kPartition)));
  ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
  const int target = 1 - owner;

  RedisHoldStoreOptions store_options;
  store_options.client.endpoint.hosts = {{"127.0.0.1", cluster->node(owner).port()}};
  store_options.client.endpoint.user = options.app_user;
  store_options.client.endpoint.password = options.app_password;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store,
                       RedisHoldStore::Create(std::move(store_options)));
  const auto call = [] { return CallOptions{absl::Now() + absl::Seconds(5), std::nullopt}; };

  // Three users of the partition, each with a paid hold (an outcome record) and a due one; due in
  // the order u[0], u[1], u[2]. u[0]'s holds key is emptied by its reap (Redis deletes an empty
  // key, and then refuses it in a migrating slot like a moved one).
  std::vector<std::string> users;
  for (int i = 0; users.size() < 3; ++i) {
    const std::string user = absl::StrCat("user-", i);
    if (KeySchema::PartitionOf(user) == kPartition) users.push_back(user);
  }
  for (size_t i = 0; i < users.size(); ++i) {
    ASSERT_THAT(
        Await<PlaceHoldResult>([&](auto done) {
          store->PlaceHold({users[i], "paid", absl::Minutes(10), 3}, call(), std::move(done));
        }),
        IsOk());
    ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                  store->EndHold(users[i], "paid", HoldOutcome::kPaid, call(), std::move(done));
                }),
                IsOk());
    ASSERT_THAT(Await<PlaceHoldResult>([&](auto done) {
                  store->PlaceHold({users[i], "due", absl::Minutes(1 + static_cast<int>(i)), 3},
                                   call(), std::move(done));
                }),
                IsOk());
  }
  // u[1] also has a hold that is not due: reaping it leaves its holds key non-empty.
  ASSERT_THAT(Await<PlaceHoldResult>([&](auto done) {
                store->PlaceHold({users[1], "later", absl::Hours(10), 3}, call(), std::move(done));
              }),
              IsOk());
  const auto has_due_hold = [&](const std::string& user) {
    return cluster->Command(owner, {"ZSCORE", keys.UserKey(user), "due"}).value_or("?") != "(nil)";
  };
  const auto expired_events = [&] {
    absl::StatusOr<std::string> stream =
        cluster->Command(owner, {"XRANGE", keys.EventsKey(kPartition), "-", "+"});
    EXPECT_THAT(stream, IsOk());
    std::vector<std::string> out;
    for (const absl::string_view field : absl::StrSplit(stream.value_or(""), '\n')) {
      for (const std::string& user : users) {
        if (field == user) out.push_back(user);
      }
    }
    return out;  // the user id field of every event, paid ones included
  };
  ASSERT_EQ(expired_events().size(), 3u);  // the three PAID events
  // The reaper's lease exists (a first call, nothing due yet): every key the script declares is
  // then present, so Redis runs it during the migration instead of answering TRYAGAIN.
  ReapArgs reap_args;
  reap_args.max_users = 10;
  reap_args.owner = "replica-1";
  reap_args.lease = absl::Minutes(10);
  ASSERT_THAT(Await<ReapResult>(
                  [&](auto done) { store->Reap(kPartition, reap_args, call(), std::move(done)); }),
              IsOk());

  // Resharding has begun: the slot is MIGRATING, and u[1]'s ended-orders index is not on this
  // node any more (deleted here: Redis refuses a key missing from a migrating slot whether it
  // moved or never existed, and a deleted one needs no moving back).
  ASSERT_THAT(cluster->Command(owner, {"DEL", keys.EndedKey(users[1])}), IsOk());
  ASSERT_THAT(cluster->SetImporting(slot, target, owner), IsOk());
  ASSERT_THAT(cluster->SetMigrating(slot, owner, target), IsOk());

  const absl::Time later = absl::Now() + absl::Hours(1);  // every "due" hold is due then
  const auto reap = [&] {
    return Await<ReapResult>([&](auto done) {
      store->Reap(kPartition, reap_args, CallOptions{absl::Now() + absl::Seconds(5), later},
                  std::move(done));
    });
  };
  absl::StatusOr<ReapResult> refused = reap();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable));
  std::printf("[reap while migrating] %s\n", refused.status().ToString().c_str());
  // u[0] reaped whole: its EXPIRED event appended (u[1] and u[2] have none).
  EXPECT_EQ(expired_events().size(), 4u);

  // The migration is called off (SETSLOT STABLE on both): the node serves the slot again, and
  // the holds show what the refused call left.
  ASSERT_THAT(cluster->SetStable(slot, owner), IsOk());
  ASSERT_THAT(cluster->SetStable(slot, target), IsOk());
  EXPECT_FALSE(has_due_hold(users[0]));
  EXPECT_EQ(cluster->Command(owner, {"ZSCORE", keys.DueKey(kPartition), users[0]}).value_or("?"),
            "(nil)")
      << "u[0] left in the due index: the call was refused after its holds key was emptied";
  EXPECT_TRUE(has_due_hold(users[1]));
  EXPECT_EQ(cluster->Command(owner, {"HGET", keys.OutcomesKey(users[1]), "due"}).value_or("?"),
            "(nil)")
      << "u[1] half-reaped: an outcome recorded for a hold that is still live, without its event";
  EXPECT_TRUE(has_due_hold(users[2]));

  // The next call finishes: one EXPIRED event per due hold, none twice.
  ASSERT_OK_AND_ASSIGN(ReapResult result, reap());
  EXPECT_EQ(result.reaped_expire_times.size(), 2u);
  for (const std::string& user : users) EXPECT_FALSE(has_due_hold(user)) << user;
  EXPECT_EQ(expired_events().size(), 6u);  // one EXPIRED event per due hold, none twice
  EXPECT_EQ(cluster->Command(owner, {"ZRANGE", keys.UserKey(users[1]), "0", "-1"}).value_or("?"),
            "later");
}

}  // namespace
}  // namespace orderhold::store
