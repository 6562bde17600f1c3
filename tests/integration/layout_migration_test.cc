// The migration of the shapes earlier releases wrote (server/store/lua/migrations/v1_layout.lua),
// against a real redis-server: data written here with raw commands exactly as those releases
// wrote it (a user's holds in the sorted set u:<user>, their details and life records in
// x:<user>, the user filed in its due-index bucket; or, before the buckets, in the partition's
// old due index only), then served by today's store. Deleted with the migration file.
//   - a call that touches an old user counts its old holds before it decides (the cap is exact)
//     and moves them; reads (ListHolds, GetHold) see them without moving them;
//   - the reaper ends an old user's due hold on time, one event;
//   - the sweep (MigrateStep) moves the users nobody touches, the old due index first, and ends
//     with nothing left; the reaper's sweep sets orderhold_layout_migration_users_left to 0;
//   - once the migration is declared over (--layout_migration_done), calls no longer look for
//     older shapes (what declaring it too early costs) and the sweep still moves what is left.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/fan_in.h"
#include "server/metrics/metrics.h"
#include "server/reaper/reaper.h"
#include "server/redis/redis_topology.h"
#include "server/redis_store.h"
#include "server/store/hold_details_codec.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StoredHoldsCommand;

class LayoutMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    RedisStoreOptions options;
    options.client.topology =
        std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
    ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
    base_ = absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  }

  std::string Run(const std::vector<std::string>& command) {
    absl::StatusOr<std::string> reply = redis_->Command(command);
    EXPECT_THAT(reply, IsOk());
    return reply.value_or("?");
  }
  static std::string Ms(absl::Time t) { return absl::StrCat(absl::ToUnixMillis(t)); }
  std::string Prefix(const std::string& user) const {
    return keys().PartitionPrefix(KeySchema::PartitionOf(user));
  }
  const KeySchema& keys() const { return store_->keys(); }

  // A hold as an earlier release kept it: in u:<user>, its life record (and details, for a scoped
  // one) in x:<user>; the user filed in its bucket (`bucketed`) or in the old due index. Placed a
  // minute before it expires; `life` false: placed before life records existed (none).
  void WriteOldHold(const std::string& user, const std::string& order, absl::Time expire,
                    const HoldDetails& details = {}, bool bucketed = true, bool life = true) {
    const absl::Time place = expire - absl::Minutes(1);
    Run({"ZADD", Prefix(user) + "u:" + user, Ms(expire), order});
    if (life) {
      Run({"HSET", keys().OutcomesKey(user), std::string("\x02") + order,
           absl::StrCat(Ms(expire), ":", Ms(place), ":", Ms(expire + absl::Minutes(30)), ":0:0:")});
    }
    if (!IsPlain(details)) {
      Run({"HSET", keys().OutcomesKey(user), std::string("\x01") + order,
           absl::StrCat(Ms(expire), ":", Ms(place), ":", EncodeDetailsTail(details))});
    }
    const std::string first = Run({"ZRANGE", Prefix(user) + "u:" + user, "0", "0", "WITHSCORES"});
    const std::string score = first.substr(first.find('\n') + 1);
    if (bucketed) {
      Run({"ZADD", keys().DueBucketKey(user), score, user});
      Run({"ZADD", keys().BucketIndexKey(KeySchema::PartitionOf(user)), "LT", score,
           absl::StrCat(KeySchema::DueBucketOf(user))});
    } else {
      Run({"ZADD", Prefix(user) + "due", score, user});
    }
  }
  bool Old(const std::string& user) { return Run({"EXISTS", Prefix(user) + "u:" + user}) == "1"; }

  CallOptions At(absl::Time now) const { return CallOptions{absl::Now() + absl::Seconds(5), now}; }
  absl::StatusOr<PlaceHoldResult> Place(const std::string& user, const std::string& order,
                                        absl::Time now) {
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold(PlaceHoldArgs{user, order, absl::Minutes(5), 3, 0, {}}, At(now),
                        std::move(done));
    });
  }
  absl::StatusOr<MigrateResult> Step(int partition, const std::string& cursor, int max_users) {
    return Await<MigrateResult>([&](auto done) {
      store_->MigrateStep(partition,
                          MigrateArgs{.owner = "", .max_users = max_users, .cursor = cursor},
                          At(base_), std::move(done));
    });
  }
  // Steps partition `partition` until its sweep is done; the steps made.
  int Sweep(int partition, int max_users) {
    std::string cursor;
    for (int steps = 1; steps < 1000; ++steps) {
      absl::StatusOr<MigrateResult> step = Step(partition, cursor, max_users);
      EXPECT_THAT(step, IsOk());
      if (!step.ok()) return steps;
      EXPECT_FALSE(step->not_owner);
      moved_ += step->users_moved;
      if (step->cursor.empty()) {
        EXPECT_EQ(step->users_left, 0);
        return steps;
      }
      EXPECT_GE(step->users_left, 0);
      cursor = step->cursor;
    }
    ADD_FAILURE() << "the sweep of partition " << partition << " never ended";
    return 0;
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisHoldStore> store_;
  absl::Time base_;
  int64_t moved_ = 0;  // users the sweeps moved (Sweep)
};

TEST_F(LayoutMigrationTest, AnOldUsersHoldsCountFromTheFirstCallWhichMovesThem) {
  HoldDetails scoped;
  scoped.scope = "concert";
  scoped.quantity = 2;
  WriteOldHold("alice", "o1", base_ + absl::Minutes(1));
  WriteOldHold("alice", "o2", base_ + absl::Minutes(2), scoped);
  WriteOldHold("alice", "o3", base_ + absl::Minutes(3));
  // Reads see them, details and life records included, and move nothing.
  ASSERT_OK_AND_ASSIGN(ListHoldsResult listed, Await<ListHoldsResult>([&](auto done) {
                         store_->ListHolds("alice", At(base_), std::move(done));
                       }));
  ASSERT_EQ(listed.holds.size(), 3u);
  EXPECT_EQ(listed.holds[1].order_id, "o2");
  EXPECT_EQ(listed.holds[1].details.scope, "concert");
  EXPECT_EQ(listed.holds[1].details.quantity, 2);
  EXPECT_EQ(listed.holds[0].details.max_expire_time, base_ + absl::Minutes(31));
  ASSERT_OK_AND_ASSIGN(GetHoldResult got, Await<GetHoldResult>([&](auto done) {
                         store_->GetHold("alice", "o2", At(base_), std::move(done));
                       }));
  EXPECT_EQ(got.state, GetHoldResult::State::kLive);
  EXPECT_EQ(got.hold.details.scope, "concert");
  EXPECT_TRUE(Old("alice"));

  // At the cap of 3: refused, and the old holds moved by that very call.
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult refused, Place("alice", "o4", base_));
  EXPECT_EQ(refused.outcome, PlaceHoldResult::Outcome::kLimitReached);
  EXPECT_EQ(refused.active_holds, 3);
  EXPECT_EQ(refused.user_units, 4);
  EXPECT_FALSE(Old("alice"));
  EXPECT_EQ(Run(StoredHoldsCommand(keys(), "alice", "orders")), "o1\no2\no3");
  // A retry of an old order is "already held", with its expiry; a Pay ends it with one event.
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult retry, Place("alice", "o2", base_));
  EXPECT_EQ(retry.outcome, PlaceHoldResult::Outcome::kAlreadyHeld);
  EXPECT_EQ(retry.expire_time, base_ + absl::Minutes(2));
  EXPECT_EQ(retry.details.scope, "concert");
  ASSERT_OK_AND_ASSIGN(EndHoldResult paid, Await<EndHoldResult>([&](auto done) {
                         store_->EndHold("alice", "o2", HoldOutcome::kPaid, At(base_),
                                         std::move(done));
                       }));
  EXPECT_EQ(paid.result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(paid.details.scope, "concert");
  EXPECT_EQ(Run({"XLEN", keys().EventsKey(KeySchema::PartitionOf("alice"))}), "1");
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult placed, Place("alice", "o4", base_));
  EXPECT_EQ(placed.outcome, PlaceHoldResult::Outcome::kCreated);
  EXPECT_EQ(placed.active_holds, 3);
}

// --layout_migration_done: the calls of a store so configured no longer look for a user's holds
// in older shapes (no EXISTS of u:<user> on a user's first hold: what the flag saves), so holds
// still there when it is declared too early are not counted; the sweep still moves them, after
// which every call sees them. The negative control of the flag is the case above, on the same
// data: without it, the first call counts the old holds.
TEST_F(LayoutMigrationTest, DeclaredOverCallsStopLookingForOlderShapesAndTheSweepStillMoves) {
  RedisStoreOptions options;
  options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  options.outcomes.layout_migration_done = true;
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));  // every call below
  WriteOldHold("dave", "o1", base_ + absl::Minutes(1));
  WriteOldHold("dave", "o2", base_ + absl::Minutes(2));
  WriteOldHold("dave", "o3", base_ + absl::Minutes(3));
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult placed, Await<PlaceHoldResult>([&](auto done) {
                         store_->PlaceHold(PlaceHoldArgs{"dave", "o4", absl::Minutes(5), 3, 0, {}},
                                           At(base_), std::move(done));
                       }));
  EXPECT_EQ(placed.outcome, PlaceHoldResult::Outcome::kCreated);  // not counted: 1 of 3
  EXPECT_EQ(placed.active_holds, 1);
  EXPECT_TRUE(Old("dave"));
  Sweep(KeySchema::PartitionOf("dave"), 256);
  EXPECT_EQ(moved_, 1);
  EXPECT_FALSE(Old("dave"));
  ASSERT_OK_AND_ASSIGN(ListHoldsResult listed, Await<ListHoldsResult>([&](auto done) {
                         store_->ListHolds("dave", At(base_), std::move(done));
                       }));
  EXPECT_EQ(listed.holds.size(), 4u);
}

// A hold placed before life records existed gets one from the migration, as a read sees it and
// as the call that moves it writes it: its place time from its details, else as if placed with
// the default ttl, its cap that place + the lifetime (the store's defaults: 2 h and 30 min).
TEST_F(LayoutMigrationTest, AHoldPlacedBeforeLifeRecordsGetsItsLifeRecordAsItMoves) {
  HoldDetails scoped;
  scoped.scope = "concert";
  WriteOldHold("carol", "plain", base_ + absl::Minutes(1), {}, true, /*life=*/false);
  WriteOldHold("carol", "scoped", base_ + absl::Minutes(2), scoped, true, /*life=*/false);
  const absl::Time plain_place = base_ + absl::Minutes(1) - absl::Minutes(30);
  const absl::Time scoped_place = base_ + absl::Minutes(2) - absl::Minutes(1);  // its details'
  auto expect_lives = [&](const std::vector<StoredHold>& holds) {
    ASSERT_EQ(holds.size(), 2u);
    EXPECT_EQ(holds[0].details.place_time, plain_place);
    EXPECT_EQ(holds[0].details.max_expire_time, plain_place + absl::Hours(2));
    EXPECT_EQ(holds[1].details.place_time, scoped_place);
    EXPECT_EQ(holds[1].details.max_expire_time, scoped_place + absl::Hours(2));
  };
  auto list = [&] {
    return Await<ListHoldsResult>(
        [&](auto done) { store_->ListHolds("carol", At(base_), std::move(done)); });
  };
  ASSERT_OK_AND_ASSIGN(ListHoldsResult before, list());
  expect_lives(before.holds);
  EXPECT_TRUE(Old("carol"));  // a read moves nothing
  // An extension past the cap moves the user and stops at the cap.
  ASSERT_OK_AND_ASSIGN(ExtendHoldResult extended, Await<ExtendHoldResult>([&](auto done) {
                         ExtendHoldArgs args;
                         args.user_id = "carol";
                         args.order_id = "plain";
                         args.ttl = absl::Hours(3);
                         store_->ExtendHold(std::move(args), At(base_), std::move(done));
                       }));
  EXPECT_FALSE(Old("carol"));
  EXPECT_EQ(extended.result, ExtendHoldResult::Result::kLive);
  EXPECT_TRUE(extended.capped);
  EXPECT_EQ(extended.hold.expire_time, plain_place + absl::Hours(2));
  ASSERT_OK_AND_ASSIGN(ListHoldsResult after, list());
  ASSERT_EQ(after.holds.size(), 2u);
  EXPECT_EQ(after.holds[1].details.max_expire_time, plain_place + absl::Hours(2));  // now last
  EXPECT_EQ(after.holds[0].order_id, "scoped");
  EXPECT_EQ(after.holds[0].details.max_expire_time, scoped_place + absl::Hours(2));
}

TEST_F(LayoutMigrationTest, TheReaperEndsAnOldUsersDueHoldOnTimeWithOneEvent) {
  WriteOldHold("bob", "o1", base_ + absl::Seconds(1));
  WriteOldHold("bob", "o2", base_ + absl::Minutes(10));
  const int partition = KeySchema::PartitionOf("bob");
  ASSERT_OK_AND_ASSIGN(ReapResult reaped, Await<ReapResult>([&](auto done) {
                         store_->Reap(partition, ReapArgs{}, At(base_ + absl::Seconds(1)),
                                      std::move(done));
                       }));
  EXPECT_THAT(reaped.reaped_expire_times, ::testing::ElementsAre(base_ + absl::Seconds(1)));
  EXPECT_FALSE(Old("bob"));
  EXPECT_EQ(Run(StoredHoldsCommand(keys(), "bob", "orders")), "o2");
  EXPECT_EQ(Run({"ZSCORE", keys().DueBucketKey("bob"), "bob"}), Ms(base_ + absl::Minutes(10)));
  EXPECT_EQ(Run({"XLEN", keys().EventsKey(partition)}), "1");
}

// Users of the due index before the buckets are in no bucket: the sweep moves them first, each
// filed in its bucket (computed in Lua: ids with high bytes and a long one check that it agrees
// with KeySchema), where the reaper finds them when due.
TEST_F(LayoutMigrationTest, TheSweepMovesTheOldDueIndexIntoTheBuckets) {
  const std::vector<std::string> users = {"carol",
                                          "\xff\x80 caf\xc3\xa9 {x}:u:", std::string(128, 'z')};
  for (const std::string& user : users) {
    WriteOldHold(user, "o1", base_ + absl::Seconds(1), {}, /*bucketed=*/false);
    WriteOldHold(user, "o2", base_ + absl::Minutes(10), {}, /*bucketed=*/false);
  }
  for (const std::string& user : users) {
    const int partition = KeySchema::PartitionOf(user);
    Sweep(partition, 1);
    EXPECT_FALSE(Old(user));
    EXPECT_EQ(Run({"EXISTS", Prefix(user) + "due"}), "0");
    EXPECT_EQ(Run({"ZSCORE", keys().DueBucketKey(user), user}), Ms(base_ + absl::Seconds(1)));
    ASSERT_OK_AND_ASSIGN(ReapResult reaped, Await<ReapResult>([&](auto done) {
                           store_->Reap(partition, ReapArgs{}, At(base_ + absl::Seconds(2)),
                                        std::move(done));
                         }));
    EXPECT_THAT(reaped.reaped_expire_times, ::testing::Contains(base_ + absl::Seconds(1)));
    EXPECT_EQ(Run(StoredHoldsCommand(keys(), user, "orders")), "o2");
  }
}

// Users nobody touches, spread over many buckets of one partition, and users of today's layout
// beside them: the sweep moves the old ones in steps of a few users, ends with nothing left, and a
// second sweep finds nothing; no hold is lost or doubled.
TEST_F(LayoutMigrationTest, TheSweepMovesEveryUntouchedUserAndEnds) {
  std::vector<std::string> old_users, new_users;
  for (int i = 0; old_users.size() < 40; ++i) {
    const std::string user = absl::StrCat("user-", i);
    if (KeySchema::PartitionOf(user) != 5) continue;
    if (old_users.size() % 4 == 3) {
      ASSERT_THAT(Place(user, "n1", base_), IsOk());
      new_users.push_back(user);
    }
    WriteOldHold(user, "o1", base_ + absl::Minutes(3));
    WriteOldHold(user, "o2", base_ + absl::Minutes(4));
    old_users.push_back(user);
  }
  EXPECT_GT(Sweep(5, 4), 2);
  EXPECT_EQ(moved_, static_cast<int64_t>(old_users.size()));
  for (const std::string& user : old_users) {
    EXPECT_FALSE(Old(user)) << user;
  }
  for (const std::string& user : new_users) {
    // A user in both shapes (an older replica wrote both): every hold counted once.
    EXPECT_EQ(Run(StoredHoldsCommand(keys(), user, "count")), "3") << user;
  }
  moved_ = 0;
  EXPECT_EQ(Sweep(5, 1000), 1);
  EXPECT_EQ(moved_, 0);
}

TEST_F(LayoutMigrationTest, TheReapersSweepSetsTheGaugeToZero) {
  for (int i = 0; i < 20; ++i) WriteOldHold(absl::StrCat("u", i), "o1", base_ + absl::Minutes(5));
  prometheus::Registry registry;
  metrics::Metrics metrics(registry);
  reaper::Reaper reaper(
      *store_, metrics,
      reaper::ReaperOptions{.replica_id = "r1", .standby_after = absl::ZeroDuration()});
  for (int tick = 0; tick < 5; ++tick) ASSERT_THAT(reaper.RunOnce(base_), IsOk());
  EXPECT_EQ(MetricValue(registry, "orderhold_layout_migration_users_left"), 0);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(Old(absl::StrCat("u", i)));
  reaper.Stop();
}

}  // namespace
}  // namespace orderhold::store
