// One contract, two stores: every case runs against FakeHoldStore and against RedisHoldStore on a
// real redis-server (started on a free port for this suite). Time is passed explicitly
// (CallOptions::now), so expiry is decided without sleeping and both stores see the same instants.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/hold_store.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Outcome = PlaceHoldResult::Outcome;

const absl::Time kT0 = absl::FromUnixMillis(1795000000123);

class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<HoldStore> Make() = 0;
};

class FakeFactory : public StoreFactory {
 public:
  std::unique_ptr<HoldStore> Make() override {
    return std::make_unique<orderhold::testing::FakeHoldStore>(clock_);
  }

 private:
  orderhold::testing::FakeClock clock_;
};

class RedisFactory : public StoreFactory {
 public:
  std::unique_ptr<HoldStore> Make() override {
    if (redis_ == nullptr) {
      auto redis = orderhold::testing::RedisServer::Start();
      EXPECT_TRUE(redis.ok()) << redis.status();
      if (!redis.ok()) return nullptr;
      redis_ = std::move(*redis);
    }
    RedisHoldStoreOptions options;
    options.client.endpoint.port = redis_->port();
    options.key_prefix = absl::StrCat("contract", ++tests_);  // isolates tests sharing the server
    auto store = RedisHoldStore::Create(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

 private:
  std::unique_ptr<orderhold::testing::RedisServer> redis_;
  int tests_ = 0;
};

// One factory of each kind per test process; the Environment stops the shared redis-server (and
// removes its data dir) when the process's tests are done.
class Factories : public ::testing::Environment {
 public:
  static StoreFactory& Get(const std::string& name) {
    if (name == "fake") return *instance_->fake_;
    return *instance_->redis_;
  }
  void SetUp() override {
    fake_ = std::make_unique<FakeFactory>();
    redis_ = std::make_unique<RedisFactory>();
    instance_ = this;
  }
  void TearDown() override {
    redis_.reset();
    fake_.reset();
  }

 private:
  static inline Factories* instance_ = nullptr;
  std::unique_ptr<FakeFactory> fake_;
  std::unique_ptr<RedisFactory> redis_;
};
::testing::Environment* const kFactories = ::testing::AddGlobalTestEnvironment(new Factories);

class HoldStoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    store_ = Factories::Get(GetParam()).Make();
    ASSERT_NE(store_, nullptr);
  }

  static CallOptions At(absl::Time now) { return CallOptions{absl::Now() + absl::Seconds(5), now}; }

  absl::StatusOr<PlaceHoldResult> Place(const std::string& user, const std::string& order,
                                        absl::Duration ttl, absl::Time now, int max_holds = 3) {
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold(PlaceHoldArgs{user, order, ttl, max_holds}, At(now), std::move(done));
    });
  }
  absl::StatusOr<PayResult> Pay(const std::string& user, const std::string& order, absl::Time now) {
    return Await<PayResult>([&](auto done) { store_->Pay(user, order, At(now), std::move(done)); });
  }
  std::vector<StoredHold> List(const std::string& user, absl::Time now) {
    auto result = Await<ListHoldsResult>(
        [&](auto done) { store_->ListHolds(user, At(now), std::move(done)); });
    EXPECT_THAT(result, IsOk());
    return result.ok() ? result->holds : std::vector<StoredHold>{};
  }
  // Reaps every shard until none reports more; returns the expire times of the reaped holds.
  std::vector<absl::Time> ReapAll(absl::Time now, int max_users = 100) {
    std::vector<absl::Time> reaped;
    for (int shard = 0; shard < store_->shard_count(); ++shard) {
      for (bool more = true; more;) {
        auto result = Await<ReapResult>(
            [&](auto done) { store_->Reap(shard, max_users, At(now), std::move(done)); });
        EXPECT_THAT(result, IsOk());
        if (!result.ok()) return reaped;
        reaped.insert(reaped.end(), result->reaped_expire_times.begin(),
                      result->reaped_expire_times.end());
        more = result->more;
      }
    }
    return reaped;
  }

  std::unique_ptr<HoldStore> store_;
};

TEST_P(HoldStoreContractTest, CreatesHoldExpiringAfterTtl) {
  auto result = Place("alice", "order-1", absl::Minutes(30), kT0);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->outcome, Outcome::kCreated);
  EXPECT_EQ(result->now, kT0);
  EXPECT_EQ(result->expire_time, kT0 + absl::Minutes(30));
  EXPECT_EQ(result->active_holds, 1);
  EXPECT_EQ(result->expired_removed, 0);
  EXPECT_THAT(List("alice", kT0), ElementsAre(StoredHold{"order-1", kT0 + absl::Minutes(30)}));
}

TEST_P(HoldStoreContractTest, RetryOfLiveOrderReturnsItUnchanged) {
  ASSERT_THAT(Place("alice", "order-1", absl::Seconds(10), kT0), IsOk());
  auto retry = Place("alice", "order-1", absl::Seconds(60), kT0 + absl::Seconds(5));
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->outcome, Outcome::kAlreadyHeld);
  EXPECT_EQ(retry->expire_time, kT0 + absl::Seconds(10));  // not extended
  EXPECT_EQ(retry->active_holds, 1);                       // no second slot
}

TEST_P(HoldStoreContractTest, RefusesAtLimitAndNamesEarliestExpiry) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(30), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("alice", "c", absl::Seconds(20), kT0), IsOk());
  auto fourth = Place("alice", "d", absl::Seconds(30), kT0 + absl::Seconds(1));
  ASSERT_THAT(fourth, IsOk());
  EXPECT_EQ(fourth->outcome, Outcome::kLimitReached);
  EXPECT_EQ(fourth->expire_time, kT0 + absl::Seconds(10));
  EXPECT_EQ(fourth->active_holds, 3);
  EXPECT_EQ(List("alice", kT0 + absl::Seconds(1)).size(), 3u);  // nothing recorded
  // Another user has a quota of their own.
  auto bob = Place("bob", "d", absl::Seconds(30), kT0);
  ASSERT_THAT(bob, IsOk());
  EXPECT_EQ(bob->outcome, Outcome::kCreated);
}

TEST_P(HoldStoreContractTest, ExpiredButUnreapedHoldsDoNotCount) {
  for (const char* order : {"a", "b", "c"}) {
    ASSERT_THAT(Place("alice", order, absl::Seconds(1), kT0), IsOk());
  }
  // At exactly expire_time a hold is no longer live (live = expire_time > now).
  auto result = Place("alice", "d", absl::Seconds(1), kT0 + absl::Seconds(1));
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->outcome, Outcome::kCreated);
  EXPECT_EQ(result->active_holds, 1);
  EXPECT_EQ(result->expired_removed, 3);
}

TEST_P(HoldStoreContractTest, ExpiredButUnreapedHoldsAreNotListed) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(1), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(2), kT0), IsOk());
  EXPECT_EQ(List("alice", kT0 + absl::Milliseconds(999)).size(), 2u);
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(1)),
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(2)}));
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(2)), IsEmpty());
}

TEST_P(HoldStoreContractTest, ExpiredButUnreapedHoldsCannotBePaid) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(1), kT0), IsOk());
  auto late = Pay("alice", "a", kT0 + absl::Seconds(1));
  ASSERT_THAT(late, IsOk());
  EXPECT_FALSE(late->paid);
}

TEST_P(HoldStoreContractTest, PayRemovesLiveHoldOnce) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(10), kT0), IsOk());
  auto paid = Pay("alice", "a", kT0 + absl::Seconds(3));
  ASSERT_THAT(paid, IsOk());
  EXPECT_TRUE(paid->paid);
  EXPECT_EQ(paid->expire_time, kT0 + absl::Seconds(10));
  EXPECT_EQ(paid->now, kT0 + absl::Seconds(3));
  auto again = Pay("alice", "a", kT0 + absl::Seconds(3));
  ASSERT_THAT(again, IsOk());
  EXPECT_FALSE(again->paid);
  auto never = Pay("alice", "zzz", kT0);
  ASSERT_THAT(never, IsOk());
  EXPECT_FALSE(never->paid);
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(3)),
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(10)}));
  // The freed slot can be used again.
  ASSERT_THAT(Place("alice", "c", absl::Seconds(10), kT0 + absl::Seconds(3)), IsOk());
  auto full = Place("alice", "d", absl::Seconds(10), kT0 + absl::Seconds(3), /*max_holds=*/2);
  ASSERT_THAT(full, IsOk());
  EXPECT_EQ(full->outcome, Outcome::kLimitReached);
}

TEST_P(HoldStoreContractTest, ListsEarliestFirstThenByOrderId) {
  ASSERT_THAT(Place("alice", "z", absl::Seconds(5), kT0), IsOk());
  ASSERT_THAT(Place("alice", "y", absl::Seconds(9), kT0), IsOk());
  ASSERT_THAT(Place("alice", "x", absl::Seconds(9), kT0), IsOk());
  EXPECT_THAT(List("alice", kT0), ElementsAre(StoredHold{"z", kT0 + absl::Seconds(5)},
                                              StoredHold{"x", kT0 + absl::Seconds(9)},
                                              StoredHold{"y", kT0 + absl::Seconds(9)}));
  EXPECT_THAT(List("nobody", kT0), IsEmpty());
}

TEST_P(HoldStoreContractTest, ReapRemovesOnlyDueHoldsExactlyOnce) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(1), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(5), kT0), IsOk());
  ASSERT_THAT(Place("bob", "c", absl::Seconds(2), kT0), IsOk());
  EXPECT_THAT(ReapAll(kT0 + absl::Milliseconds(500)), IsEmpty());
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(2)),
              UnorderedElementsAre(kT0 + absl::Seconds(1), kT0 + absl::Seconds(2)));
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(2)), IsEmpty());  // nothing twice
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(2)),
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(5)}));
  // The reaped slots are not counted as "removed" again by a later PlaceHold.
  auto place = Place("bob", "d", absl::Seconds(1), kT0 + absl::Seconds(3));
  ASSERT_THAT(place, IsOk());
  EXPECT_EQ(place->expired_removed, 0);
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(10)),
              UnorderedElementsAre(kT0 + absl::Seconds(5), kT0 + absl::Seconds(4)));
}

TEST_P(HoldStoreContractTest, ReapWorksInBoundedBatches) {
  // 300 users over the shards: most shards hold more than 2 due users, so "more" continuations
  // are exercised.
  for (int i = 0; i < 300; ++i) {
    ASSERT_THAT(Place(absl::StrCat("user-", i), "o", absl::Seconds(1), kT0), IsOk());
  }
  EXPECT_EQ(ReapAll(kT0 + absl::Seconds(1), /*max_users=*/2).size(), 300u);
}

TEST_P(HoldStoreContractTest, IdsWithSpecialCharactersStayWithTheirUser) {
  const std::vector<std::string> users = {"a",   "a:b",   "a:{b}", "{a}",  "*",
                                          "a b", "a:b:c", "}{",    "ü 票", "a\\b"};
  for (const std::string& user : users) {
    ASSERT_THAT(Place(user, absl::StrCat("order of ", user), absl::Seconds(10), kT0), IsOk());
  }
  ASSERT_THAT(Place("a", "b:c", absl::Seconds(10), kT0), IsOk());
  for (const std::string& user : users) {
    std::vector<StoredHold> holds = List(user, kT0);
    if (user == "a") {
      EXPECT_EQ(holds.size(), 2u) << user;
    } else {
      EXPECT_THAT(holds,
                  ElementsAre(StoredHold{absl::StrCat("order of ", user), kT0 + absl::Seconds(10)}))
          << user;
    }
  }
  auto paid = Pay("a:b", "c", kT0);  // must not reach user "a"'s order "b:c"
  ASSERT_THAT(paid, IsOk());
  EXPECT_FALSE(paid->paid);
}

TEST_P(HoldStoreContractTest, PingAnswersWithStoreTime) {
  auto now = Await<absl::Time>([&](auto done) { store_->Ping(At(kT0), std::move(done)); });
  EXPECT_THAT(now, IsOk());
}

INSTANTIATE_TEST_SUITE_P(Stores, HoldStoreContractTest, ::testing::Values("fake", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace orderhold::store
