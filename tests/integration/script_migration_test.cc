// The scripts while their slot migrates (Redis Cluster resharding). Redis refuses, part-way through
// a script, an access to a key of a MIGRATING slot that is not on the node — one that moved, never
// existed, or that the script itself emptied (Redis deletes an empty key) — and keeps the writes
// made before ("non local key": https://redis.io/docs/reference/cluster-spec/, eval-intro "Script
// execution"). So every script reads what it needs before its first write and never touches a key
// again after a write that may have emptied it ("Slot migrations" in the prelude):
// - reap.lua finds its users in the partition's due index and names their keys itself; each user
//   is reaped whole or not at all, and a later call finishes the rest with one event per hold;
// - end_hold.lua ending a user's last hold, and end_hold.lua / place_hold.lua ending a user's
//   expired holds on the way, answer as usual and leave the due index right.
// Real 2-primary cluster on free ports; the store talks to the slot's owner directly.
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
#include "server/redis/redis_topology.h"
#include "server/redis_store.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold::store {
namespace {

// The store talks to one cluster node directly (a standalone topology): no scope index, whose keys
// live in other slots.
RedisStoreOptions WithoutScopeIndex(RedisStoreOptions options) {
  options.scope_index = false;
  return options;
}

using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisCluster;
using ::orderhold::testing::RedisClusterOptions;
using ::orderhold::testing::StatusIs;

constexpr int kPartition = 0;

// A 2-primary cluster, a store talking to the owner of partition kPartition's slot, and a user of
// that partition with one PAID hold (so every key the user scripts declare exists: Redis runs a
// script on a MIGRATING node only then, and answers TRYAGAIN otherwise).
class UserScriptMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RedisClusterOptions options;
    options.primaries = 2;
    options.replicas_per_primary = 0;
    ASSERT_OK_AND_ASSIGN(cluster_, RedisCluster::Start(options));
    ASSERT_OK_AND_ASSIGN(slot_, cluster_->KeySlot(keys_.BucketIndexKey(kPartition)));
    ASSERT_OK_AND_ASSIGN(owner_, cluster_->PrimaryFor(slot_));
    RedisStoreOptions store_options;
    store_options.client.topology = std::make_shared<redis::StandaloneTopology>(
        redis::HostPort{"127.0.0.1", cluster_->node(owner_).port()});
    store_options.client.node.user = options.app_user;
    store_options.client.node.password = options.app_password;
    ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(WithoutScopeIndex(std::move(store_options))));
    for (int i = 0; user_.empty(); ++i) {
      if (KeySchema::PartitionOf(absl::StrCat("user-", i)) == kPartition) {
        user_ = absl::StrCat("user-", i);
      }
    }
    ASSERT_THAT(Place("paid", absl::Minutes(10)), IsOk());
    ASSERT_THAT(End("paid", absl::Now()), IsOk());
  }

  absl::StatusOr<PlaceHoldResult> Place(const std::string& order, absl::Duration ttl,
                                        std::optional<absl::Time> now = std::nullopt) {
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold({user_, order, ttl, 3, 0, {}},
                        CallOptions{absl::Now() + absl::Seconds(5), now}, std::move(done));
    });
  }
  absl::StatusOr<EndHoldResult> End(const std::string& order, absl::Time now) {
    return Await<EndHoldResult>([&](auto done) {
      store_->EndHold(user_, order, HoldOutcome::kPaid,
                      CallOptions{absl::Now() + absl::Seconds(5), now}, std::move(done));
    });
  }
  // Resharding begins: the slot is MIGRATING to the other primary (no key moved yet).
  void StartMigration() {
    ASSERT_THAT(cluster_->SetImporting(slot_, 1 - owner_, owner_), IsOk());
    ASSERT_THAT(cluster_->SetMigrating(slot_, owner_, 1 - owner_), IsOk());
  }
  // The migration is called off: the owner serves the slot again, for the checks.
  void StopMigration() {
    ASSERT_THAT(cluster_->SetStable(slot_, owner_), IsOk());
    ASSERT_THAT(cluster_->SetStable(slot_, 1 - owner_), IsOk());
  }
  std::string Owner(const std::vector<std::string>& command) {
    return cluster_->Command(owner_, command).value_or("?");
  }
  // The outcome field ("x") of every event of the partition's stream, in order.
  std::vector<std::string> Outcomes() {
    std::vector<std::string> fields =
        absl::StrSplit(Owner({"XRANGE", keys_.EventsKey(kPartition), "-", "+"}), '\n');
    std::vector<std::string> out;
    for (size_t i = 0; i + 1 < fields.size(); ++i) {
      if (fields[i] == "x") out.push_back(fields[i + 1]);
    }
    return out;
  }

  const KeySchema keys_{"orderhold"};
  std::unique_ptr<RedisCluster> cluster_;
  int slot_ = 0;
  int owner_ = 0;
  std::unique_ptr<RedisHoldStore> store_;
  std::string user_;
};

// Ending the user's last live hold empties its holds key (Redis deletes it); reading it again
// for the due index was refused as a non-local key after the end was written: the caller got
// UNAVAILABLE and the due index kept a stale entry.
TEST_F(UserScriptMigrationTest, EndingTheLastLiveHoldAnswersAndClearsTheDueIndex) {
  ASSERT_THAT(Place("o1", absl::Minutes(10)), IsOk());
  StartMigration();
  ASSERT_OK_AND_ASSIGN(EndHoldResult ended, End("o1", absl::Now()));
  EXPECT_EQ(ended.result, EndHoldResult::Result::kEnded);
  StopMigration();
  EXPECT_EQ(Owner({"HEXISTS", keys_.HoldsBucketKey(user_), user_}), "0");
  EXPECT_EQ(Owner({"ZSCORE", keys_.DueBucketKey(user_), user_}), "(nil)");
  EXPECT_THAT(Outcomes(), ::testing::ElementsAre("1", "1"));  // two PAID, once each
}

// A live hold's details live in its packed field of the holds bucket, a key every user script
// declares, so scoped holds are placed, listed and ended while the slot migrates, details intact,
// and the scope's limit holds there too.
TEST_F(UserScriptMigrationTest, ScopedHoldsAreServedWithTheirDetailsWhileTheSlotMigrates) {
  auto scoped = [&](const std::string& order) {
    PlaceHoldArgs args{user_, order, absl::Minutes(10), 3, 0, {}};
    args.details.scope = "event:E1";
    args.details.quantity = 2;
    args.details.labels = {{"seats", "A1,A2"}};
    args.details.scope_limits = LevelLimits{2, 0};
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold(std::move(args), CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
                        std::move(done));
    });
  };
  ASSERT_THAT(scoped("s1"), IsOk());
  StartMigration();
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult second, scoped("s2"));
  EXPECT_EQ(second.outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_EQ(second.scope_units, 4);
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult third, scoped("s3"));
  EXPECT_EQ(third.outcome, PlaceHoldResult::Outcome::kLimitReached);
  ASSERT_OK_AND_ASSIGN(ListHoldsResult listed, Await<ListHoldsResult>([&](auto done) {
                         store_->ListHolds(
                             user_, CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
                             std::move(done));
                       }));
  ASSERT_EQ(listed.holds.size(), 2u);
  EXPECT_EQ(listed.holds[0].details.labels.at("seats"), "A1,A2");
  ASSERT_OK_AND_ASSIGN(EndHoldResult ended, End("s1", absl::Now()));
  EXPECT_EQ(ended.result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(ended.details.scope, "event:E1");
  EXPECT_EQ(ended.details.quantity, 2);
  StopMigration();
}

// Ending one of two live holds: the due index moves to the one left.
TEST_F(UserScriptMigrationTest, EndingTheEarliestOfTwoHoldsMovesTheDueIndexToTheOther) {
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult first, Place("o1", absl::Minutes(10)));
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult second, Place("o2", absl::Minutes(20)));
  StartMigration();
  ASSERT_OK_AND_ASSIGN(EndHoldResult ended, End("o1", absl::Now()));
  EXPECT_EQ(ended.result, EndHoldResult::Result::kEnded);
  StopMigration();
  EXPECT_EQ(Owner({"ZSCORE", keys_.DueBucketKey(user_), user_}),
            absl::StrCat(absl::ToUnixMillis(second.expire_time)));
  (void)first;
}

// EndHold of another order finds the user's only hold expired: ending it as EXPIRED empties the
// holds key, and the due index must still be fixed without reading that key again.
TEST_F(UserScriptMigrationTest, EndHoldThatExpiresTheLastHoldOnTheWayAnswersAndClearsTheIndex) {
  ASSERT_THAT(Place("o1", absl::Minutes(1)), IsOk());
  StartMigration();
  ASSERT_OK_AND_ASSIGN(EndHoldResult ended, End("o1", absl::Now() + absl::Minutes(2)));
  EXPECT_EQ(ended.result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(ended.end.outcome, HoldOutcome::kExpired);
  EXPECT_EQ(ended.expired_removed, 1);
  StopMigration();
  EXPECT_EQ(Owner({"HEXISTS", keys_.HoldsBucketKey(user_), user_}), "0");
  EXPECT_EQ(Owner({"ZSCORE", keys_.DueBucketKey(user_), user_}), "(nil)");
  EXPECT_THAT(Outcomes(), ::testing::ElementsAre("1", "3"));  // PAID, then one EXPIRED
}

// PlaceHold finds the user's only hold expired: the new hold is written before the old one is
// removed, so the holds key is never emptied, and the due index follows the new hold.
TEST_F(UserScriptMigrationTest, PlaceHoldThatExpiresTheLastHoldOnTheWayCreatesTheNewOne) {
  ASSERT_THAT(Place("o1", absl::Minutes(1)), IsOk());
  StartMigration();
  const absl::Time later = absl::Now() + absl::Minutes(2);
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult placed, Place("o2", absl::Minutes(10), later));
  EXPECT_EQ(placed.outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_EQ(placed.expired_removed, 1);
  EXPECT_EQ(placed.active_holds, 1);
  // The same order placed again once it expired is reported as ended, not created.
  ASSERT_THAT(Place("o3", absl::Minutes(1), later), IsOk());
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult again,
                       Place("o3", absl::Minutes(1), later + absl::Hours(1)));
  EXPECT_EQ(again.outcome, PlaceHoldResult::Outcome::kEnded);
  EXPECT_EQ(again.ended.outcome, HoldOutcome::kExpired);
  StopMigration();
  EXPECT_EQ(Owner(testing::StoredHoldsCommand(keys_, user_, "orders")), "");
  EXPECT_EQ(Owner({"ZSCORE", keys_.DueBucketKey(user_), user_}), "(nil)");
  EXPECT_THAT(Outcomes(), ::testing::ElementsAre("1", "3", "3", "3"));
}

// A cluster of two primaries, no replicas: kPartition's slot, its owner and the other node. Its
// stores keep holds as every store does (the user's field of its holds bucket).
class ReapMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.primaries = 2;
    options_.replicas_per_primary = 0;
    ASSERT_OK_AND_ASSIGN(cluster_, RedisCluster::Start(options_));
    ASSERT_OK_AND_ASSIGN(slot_, cluster_->KeySlot(keys_.BucketIndexKey(kPartition)));
    ASSERT_OK_AND_ASSIGN(owner_, cluster_->PrimaryFor(slot_));
    target_ = 1 - owner_;
  }

  // A store talking to the slot's owner alone (standalone mode: no redirect is followed).
  absl::StatusOr<std::unique_ptr<RedisHoldStore>> ConnectToOwner() {
    RedisStoreOptions store_options;
    store_options.client.topology = std::make_shared<redis::StandaloneTopology>(
        redis::HostPort{"127.0.0.1", cluster_->node(owner_).port()});
    store_options.client.node.user = options_.app_user;
    store_options.client.node.password = options_.app_password;
    return ConnectRedisStore(WithoutScopeIndex(std::move(store_options)));
  }

  // Whether `user` has a hold `order` (on the slot's owner).
  bool HasHold(const std::string& user, const std::string& order) {
    return cluster_->Command(owner_, testing::StoredHoldsCommand(keys_, user, "score", order))
               .value_or("(nil)") != "(nil)";
  }
  // Whether `user` has any hold left.
  bool HasHolds(const std::string& user) {
    return cluster_->Command(owner_, {"HEXISTS", keys_.HoldsBucketKey(user), user}).value_or("?") !=
           "0";
  }

  RedisClusterOptions options_;
  std::unique_ptr<RedisCluster> cluster_;
  const KeySchema keys_{"orderhold"};
  int slot_ = -1;
  int owner_ = -1;
  int target_ = -1;
};

TEST_F(ReapMigrationTest, EachUserIsReapedWholeOrNotAtAllWhileItsSlotMigrates) {
  RedisCluster* const cluster = cluster_.get();
  const KeySchema& keys = keys_;
  const int slot = slot_, owner = owner_, target = target_;

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store, ConnectToOwner());
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
    ASSERT_THAT(Await<PlaceHoldResult>([&](auto done) {
                  store->PlaceHold({users[i], "paid", absl::Minutes(10), 3, 0, {}}, call(),
                                   std::move(done));
                }),
                IsOk());
    ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                  store->EndHold(users[i], "paid", HoldOutcome::kPaid, call(), std::move(done));
                }),
                IsOk());
    ASSERT_THAT(Await<PlaceHoldResult>([&](auto done) {
                  store->PlaceHold(
                      {users[i], "due", absl::Minutes(1 + static_cast<int>(i)), 3, 0, {}}, call(),
                      std::move(done));
                }),
                IsOk());
  }
  // u[1] also has a hold that is not due: reaping it leaves its holds key non-empty.
  ASSERT_THAT(
      Await<PlaceHoldResult>([&](auto done) {
        store->PlaceHold({users[1], "later", absl::Hours(10), 3, 0, {}}, call(), std::move(done));
      }),
      IsOk());
  const auto has_due_hold = [&](const std::string& user) { return HasHold(user, "due"); };
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
  // u[0]'s bucket is written once its users are reaped, before the next bucket (u[1]'s) is read:
  // in one bucket, u[0]'s entry would stay (early, and harmless) after the refusal at u[1].
  ASSERT_NE(keys.DueBucketKey(users[0]), keys.DueBucketKey(users[1]));
  EXPECT_EQ(
      cluster->Command(owner, {"ZSCORE", keys.DueBucketKey(users[0]), users[0]}).value_or("?"),
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
  EXPECT_TRUE(HasHold(users[1], "later"));

  // Every reap reads the old due index of earlier releases first (reap.lua, "Old index"); it does
  // not exist here, so while the slot migrates Redis refuses the read: the script skips it and
  // reaps the buckets all the same (u[1]'s "later" hold, due 11 h from now).
  ASSERT_THAT(cluster->SetImporting(slot, target, owner), IsOk());
  ASSERT_THAT(cluster->SetMigrating(slot, owner, target), IsOk());
  ASSERT_OK_AND_ASSIGN(
      ReapResult while_migrating, Await<ReapResult>([&](auto done) {
        store->Reap(kPartition, reap_args,
                    CallOptions{absl::Now() + absl::Seconds(5), absl::Now() + absl::Hours(11)},
                    std::move(done));
      }));
  EXPECT_EQ(while_migrating.reaped_expire_times.size(), 1u);
  ASSERT_THAT(cluster->SetStable(slot, owner), IsOk());
  ASSERT_THAT(cluster->SetStable(slot, target), IsOk());
  EXPECT_FALSE(HasHolds(users[1]));
}

// A reshard moves a slot's keys in batches. Here the bucket index, the stream and the lease have
// reached the importing node and a bucket's due index and its user's keys have not: the old owner
// answers ASK (every declared key has left), and reap.lua runs on the importing node, which
// serves a one-key command on a key it does not have as if the key were empty. A one-key read of
// the missing bucket would drop the bucket, and so its user, from the bucket index for good; the
// bucket is read with a two-key EXISTS first, which Redis refuses instead, and the hold is reaped
// once the slot has moved.
TEST_F(ReapMigrationTest, ABucketNotImportedYetIsNotDroppedFromTheIndex) {
  RedisCluster* const cluster = cluster_.get();
  const RedisClusterOptions& options = options_;
  const KeySchema& keys = keys_;
  const int slot = slot_, owner = owner_, target = target_;

  RedisStoreOptions store_options;
  store_options.client.node.user = options.app_user;
  store_options.client.node.password = options.app_password;
  redis::ClusterTopologyOptions topology_options;
  for (int i = 0; i < 2; ++i) {
    topology_options.seeds.push_back({"127.0.0.1", cluster->node(i).port()});
  }
  topology_options.node = store_options.client.node;
  ASSERT_OK_AND_ASSIGN(store_options.cluster,
                       redis::ClusterTopology::Create(std::move(topology_options)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisHoldStore> store,
                       ConnectRedisStore(WithoutScopeIndex(std::move(store_options))));
  const auto call = [](std::optional<absl::Time> now = std::nullopt) {
    return CallOptions{absl::Now() + absl::Seconds(5), now};
  };
  std::string user;
  for (int i = 0; user.empty(); ++i) {
    if (KeySchema::PartitionOf(absl::StrCat("user-", i)) == kPartition) {
      user = absl::StrCat("user-", i);
    }
  }
  // A paid hold (so the partition's stream exists) and a hold due in a minute.
  ASSERT_THAT(
      Await<PlaceHoldResult>([&](auto done) {
        store->PlaceHold({user, "paid", absl::Minutes(10), 3, 0, {}}, call(), std::move(done));
      }),
      IsOk());
  ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                store->EndHold(user, "paid", HoldOutcome::kPaid, call(), std::move(done));
              }),
              IsOk());
  ASSERT_OK_AND_ASSIGN(
      PlaceHoldResult due, Await<PlaceHoldResult>([&](auto done) {
        store->PlaceHold({user, "due", absl::Minutes(1), 3, 0, {}}, call(), std::move(done));
      }));
  ReapArgs reap_args;
  reap_args.owner = "replica-1";
  reap_args.lease = absl::Minutes(10);
  const auto reap = [&](std::optional<absl::Time> now) {
    return Await<ReapResult>(
        [&](auto done) { store->Reap(kPartition, reap_args, call(now), std::move(done)); });
  };
  ASSERT_THAT(reap(std::nullopt), IsOk());  // takes the lease: nothing due yet

  ASSERT_THAT(cluster->SetImporting(slot, target, owner), IsOk());
  ASSERT_THAT(cluster->SetMigrating(slot, owner, target), IsOk());
  ASSERT_THAT(
      cluster->Command(
          owner, {"MIGRATE", "127.0.0.1", absl::StrCat(cluster->node(target).port()), "", "0",
                  "5000", "AUTH", options.admin_password, "KEYS", keys.BucketIndexKey(kPartition),
                  keys.EventsKey(kPartition), keys.LeaseKey(kPartition)}),
      IsOk());
  const absl::Time later = due.expire_time + absl::Seconds(1);
  absl::StatusOr<ReapResult> refused = reap(later);
  EXPECT_FALSE(refused.ok()) << "reaped " << refused->reaped_expire_times.size();
  std::printf("[reap on the importing node] %s\n", refused.status().ToString().c_str());

  ASSERT_THAT(cluster->MigrateSlot(slot, owner, target), IsOk());
  absl::StatusOr<ReapResult> reaped = absl::UnavailableError("not yet");
  for (int i = 0; i < 50 && !reaped.ok(); ++i) {  // until the store has the new slot map
    reaped = reap(later);
    if (!reaped.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_THAT(reaped, IsOk());
  EXPECT_THAT(reaped->reaped_expire_times, ::testing::ElementsAre(due.expire_time))
      << "the hold's bucket was dropped from the bucket index";
}

}  // namespace
}  // namespace orderhold::store
