// RedisHoldStore against a real redis-server: what only a real Redis can show (script cache
// loss, Redis down or hung, concurrency through the pipelined pool, the data left behind).
#include "server/store/redis_hold_store.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/blocking_counter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/reaper/reaper.h"
#include "server/redis/redis_topology.h"
#include "server/redis_store.h"
#include "tests/testing/event_batches.h"
#include "tests/testing/eventually.h"
#include "tests/testing/metric_values.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/stored_holds.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::EventsOf;
using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::MetricValue;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::StatusIs;
using ::testing::AnyOf;

class RedisHoldStoreTest : public ::testing::Test {
 protected:
  // store_'s command and connect timeouts, and its fail-fast window (retry_backoff).
  static constexpr absl::Duration kTimeout = absl::Seconds(1);

  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(redis_, RedisServer::Start());
    RedisStoreOptions options;
    options.client.topology =
        std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
    options.client.command_timeout = kTimeout;
    options.client.node.connect_timeout = kTimeout;
    options.client.retry_backoff = kTimeout;
    options.client.errors = &metrics_.redis_errors();
    ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  }

  absl::StatusOr<PlaceHoldResult> Place(const std::string& user, const std::string& order,
                                        absl::Duration ttl = absl::Minutes(1),
                                        absl::Duration timeout = absl::Seconds(2)) {
    return Await<PlaceHoldResult>([&](auto done) {
      store_->PlaceHold(PlaceHoldArgs{user, order, ttl, 3, 0, {}},
                        CallOptions{absl::Now() + timeout, std::nullopt}, std::move(done));
    });
  }

  // Store options on redis_ with one connection (so a call after a flush reuses the connection
  // that met it), counting errors in metrics_.
  RedisStoreOptions OneConnection() {
    RedisStoreOptions options;
    options.client.topology =
        std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
    options.client.connections = 1;
    options.client.errors = &metrics_.redis_errors();
    return options;
  }

  std::unique_ptr<RedisServer> redis_;
  prometheus::Registry registry_;
  metrics::Metrics metrics_{registry_};
  std::unique_ptr<RedisHoldStore> store_;
};

TEST_F(RedisHoldStoreTest, UsesRedisServerClock) {
  auto result = Place("alice", "o1", absl::Milliseconds(200));
  ASSERT_THAT(result, IsOk());
  ASSERT_OK_AND_ASSIGN(std::string time, redis_->Command({"TIME"}));
  int64_t redis_seconds = std::stoll(time.substr(0, time.find('\n')));
  EXPECT_NEAR(absl::ToUnixSeconds(result->now), redis_seconds, 2);
  EXPECT_EQ(result->expire_time - result->now, absl::Milliseconds(200));
  // The stored expire time in ms; the user is in its bucket's due index at that score.
  ASSERT_OK_AND_ASSIGN(std::string score, redis_->Command(testing::StoredHoldsCommand(
                                              store_->keys(), "alice", "score", "o1")));
  EXPECT_EQ(score, absl::StrCat(absl::ToUnixMillis(result->expire_time)));
  ASSERT_OK_AND_ASSIGN(std::string due,
                       redis_->Command({"ZSCORE", store_->keys().DueBucketKey("alice"), "alice"}));
  EXPECT_EQ(due, score);
}

// How many times Redis ran `command` (lower case: "fcall", "evalsha", "eval"), from INFO
// commandstats; 0 when it never did.
int64_t CommandCalls(RedisServer& redis, absl::string_view command) {
  absl::StatusOr<std::string> stats = redis.Command({"INFO", "commandstats"});
  if (!stats.ok()) return -1;
  const std::string prefix = absl::StrCat("cmdstat_", command, ":calls=");
  const size_t at = stats->find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoll(stats->substr(at + prefix.size()));
}

TEST_F(RedisHoldStoreTest, ScriptFlushMidRunIsRecoveredTransparently) {
  // One connection, so the call after the flush reuses the connection whose SHAs went stale; by
  // EVALSHA (no function library), which is what SCRIPT FLUSH empties.
  RedisStoreOptions options = OneConnection();
  options.functions = false;
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  ASSERT_THAT(redis_->Command({"SCRIPT", "FLUSH"}), IsOk());
  auto second = Place("alice", "o2");
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->active_holds, 2);
  ASSERT_THAT(redis_->Command({"SCRIPT", "FLUSH"}), IsOk());
  auto list = Await<ListHoldsResult>([&](auto done) {
    store_->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                      std::move(done));
  });
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->holds.size(), 2u);
  // Both NOSCRIPTs were answered by one EVAL retry each, and nothing counted as an error.
  ASSERT_OK_AND_ASSIGN(std::string stats, redis_->Command({"INFO", "commandstats"}));
  EXPECT_THAT(stats, ::testing::HasSubstr("cmdstat_eval:calls=2,"));
  EXPECT_EQ(CommandCalls(*redis_, "fcall"), 0);
  EXPECT_EQ(MetricValue(registry_, "orderhold_redis_errors_total"), 0);
}

TEST_F(RedisHoldStoreTest, ScriptsRunAsFunctionsAndSurviveAFunctionFlush) {
  RedisStoreOptions options = OneConnection();
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  // The library is loaded under the name the build gave it, and the call went by FCALL.
  ASSERT_OK_AND_ASSIGN(std::string libraries, redis_->Command({"FUNCTION", "LIST"}));
  const std::string library = RedisHoldStore::FunctionLibrary();
  const size_t start = library.find("name=") + 5;
  const std::string name = library.substr(start, library.find('\n') - start);
  EXPECT_THAT(name, ::testing::MatchesRegex("orderhold_[0-9a-f]{12}"));
  EXPECT_THAT(libraries, ::testing::HasSubstr(name));
  EXPECT_THAT(libraries, ::testing::HasSubstr(absl::StrCat(name, "_place_hold")));
  EXPECT_EQ(CommandCalls(*redis_, "fcall"), 1);
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 0);

  // FUNCTION FLUSH: the next call is answered "Function not found", retried once as EVAL of the
  // body, and the connection goes on by EVALSHA; a store made afterwards loads the library again.
  ASSERT_THAT(redis_->Command({"FUNCTION", "FLUSH"}), IsOk());
  auto second = Place("alice", "o2");
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->active_holds, 2);
  auto list = Await<ListHoldsResult>([&](auto done) {
    store_->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                      std::move(done));
  });
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->holds.size(), 2u);
  EXPECT_EQ(CommandCalls(*redis_, "fcall"), 2);
  EXPECT_EQ(CommandCalls(*redis_, "eval"), 1);
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 1);
  EXPECT_EQ(MetricValue(registry_, "orderhold_redis_errors_total"), 0);
}

// Redis out of memory (maxmemory below what it uses, noeviction): a script that may write is
// refused before it runs (a function without allow-oom; scripts.txt), so it leaves nothing half
// done, while the no-writes and allow-oom ones (reads, event reads and trims, lease releases)
// still run, as they did by EVAL.
TEST_F(RedisHoldStoreTest, OutOfMemoryRefusesAWritingScriptWholeButReadsTrimsAndLeasesRun) {
  const CallOptions options{absl::Now() + absl::Seconds(2), std::nullopt};
  const int partition = KeySchema::PartitionOf("alice");
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  ASSERT_THAT(Place("alice", "o2"), IsOk());
  ASSERT_THAT(Await<bool>([&](auto done) {
                store_->EnsureGroup(partition, "g", GroupStart::kEarliest, options,
                                    std::move(done));
              }),
              IsOk());
  ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                store_->EndHold("alice", "o1", HoldOutcome::kPaid, options, std::move(done));
              }),
              IsOk());
  ASSERT_THAT(redis_->Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), IsOk());
  ASSERT_THAT(redis_->Command({"CONFIG", "SET", "maxmemory", "1"}), IsOk());

  EXPECT_THAT(Place("alice", "o3"),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr("OOM")));
  auto list = Await<ListHoldsResult>(
      [&](auto done) { store_->ListHolds("alice", options, std::move(done)); });
  ASSERT_THAT(list, IsOk());
  ASSERT_EQ(list->holds.size(), 1u);
  EXPECT_EQ(list->holds[0].order_id, "o2");
  auto events = EventsOf(Await<EventBatch>([&](auto done) {
    store_->ReadEvents(partition, ReadEventsArgs{"g", "c", 10, std::nullopt, true, "", ""}, options,
                       std::move(done));
  }));
  ASSERT_THAT(events, IsOk());
  EXPECT_EQ(events->size(), 1u);
  EXPECT_THAT(Await<TrimEventsResult>([&](auto done) {
                store_->TrimEvents(partition, absl::Now() - absl::Hours(1), options,
                                   std::move(done));
              }),
              IsOk());
  EXPECT_THAT(Await<bool>([&](auto done) {
                store_->ReleaseLease(partition, "replica-1", options, std::move(done));
              }),
              IsOk());
  // Nothing of the refused call was written; with memory back it goes through.
  ASSERT_OK_AND_ASSIGN(std::string members, redis_->Command(testing::StoredHoldsCommand(
                                                store_->keys(), "alice", "orders")));
  EXPECT_EQ(members, "o2");
  ASSERT_THAT(redis_->Command({"CONFIG", "SET", "maxmemory", "0"}), IsOk());
  auto placed = Place("alice", "o3");
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->active_holds, 2);
}

TEST_F(RedisHoldStoreTest, AnAclWithoutFunctionsFallsBackToEvalsha) {
  // An app user that may not FUNCTION LOAD or FCALL (a Redis ACL written before Functions).
  ASSERT_THAT(redis_->Command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all",
                               "-function", "-fcall", "-fcall_ro"}),
              IsOk());
  RedisStoreOptions options;
  options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  options.client.node.user = "app";
  options.client.node.password = "pw";
  options.client.errors = &metrics_.redis_errors();
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  for (int i = 0; i < 3; ++i) {
    auto placed = Place("alice", absl::StrCat("o", i));
    ASSERT_THAT(placed, IsOk());
    EXPECT_EQ(placed->active_holds, i + 1);
  }
  EXPECT_EQ(CommandCalls(*redis_, "fcall"), 0);
  EXPECT_EQ(CommandCalls(*redis_, "evalsha"), 3);
  ASSERT_OK_AND_ASSIGN(std::string libraries, redis_->Command({"FUNCTION", "LIST"}));
  EXPECT_EQ(libraries, "");
  EXPECT_EQ(MetricValue(registry_, "orderhold_redis_errors_total"), 0);
}

TEST_F(RedisHoldStoreTest, RedisDownIsUnavailableWithinDeadlineThenRecovers) {
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  ASSERT_THAT(redis_->Stop(), IsOk());
  // Refused by the closed port, not by waiting out the call's deadline (that would be
  // DEADLINE_EXCEEDED). The refusal takes milliseconds; a deadline far above it and a bound at
  // half of it keep the check meaningful without failing when a loaded machine stalls a while.
  constexpr absl::Duration kDeadline = absl::Seconds(10);
  const absl::Time start = absl::Now();
  EXPECT_THAT(Place("alice", "o2", absl::Minutes(1), kDeadline),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, kDeadline / 2);
  EXPECT_GT(MetricValue(registry_, "orderhold_redis_errors_total"), 0);

  ASSERT_THAT(redis_->Restart(), IsOk());
  // Once the fail-fast window is over: a fresh connection, scripts loaded again.
  absl::StatusOr<PlaceHoldResult> after;
  EXPECT_TRUE(Eventually([&] { return (after = Place("alice", "o2")).ok(); }));
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->outcome, PlaceHoldResult::Outcome::kCreated);
}

TEST_F(RedisHoldStoreTest, ConnectionsIdleThroughARedisRestartServeTheNextCallsWithoutAnError) {
  // One command per round trip, so a burst of concurrent calls spreads over the pool.
  constexpr int kConnections = 4;
  RedisStoreOptions options;
  options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  options.client.connections = kConnections;
  options.client.max_pipeline = 1;
  options.client.retry_backoff = kTimeout;
  options.client.errors = &metrics_.redis_errors();
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  std::atomic<int> failed{0};
  auto burst = [&] {  // 2 calls per connection at once; counts the failed ones
    constexpr int kCalls = 2 * kConnections;
    absl::BlockingCounter pending(kCalls);
    for (int i = 0; i < kCalls; ++i) {
      store_->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
                        [&](absl::StatusOr<ListHoldsResult> result) {
                          if (!result.ok()) {
                            ++failed;
                            ADD_FAILURE() << result.status();
                          }
                          pending.DecrementCount();
                        });
    }
    pending.Wait();
  };
  // Every pooled connection is connected: CLIENT LIST has a line for each, and one for the
  // connection asking.
  ASSERT_TRUE(Eventually([&] {
    burst();
    auto clients = redis_->Command({"CLIENT", "LIST"});
    return clients.ok() &&
           std::vector<std::string>(absl::StrSplit(*clients, '\n', absl::SkipEmpty())).size() >
               kConnections;
  }));
  ASSERT_THAT(redis_->Stop(), IsOk());
  ASSERT_THAT(redis_->Restart(), IsOk());
  // No call was made while Redis was down, so every connection Redis closed is still in the pool:
  // each is replaced before a command is written to it, and no call fails (a failure would also
  // fail everything after it for the 1 s fail-fast window).
  for (int i = 0; i < 4; ++i) burst();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(MetricValue(registry_, "orderhold_redis_errors_total"), 0);
}

TEST_F(RedisHoldStoreTest, HungRedisFailsByTheDeadlineAndNothingIsGranted) {
  // Command and connect timeouts far above the call's 150 ms deadline, so "ended by the deadline"
  // stands apart from "ended by a timeout" by seconds, which a loaded machine cannot blur; and a
  // short fail-fast window, so the recovery below does not wait a second for it.
  constexpr absl::Duration kLongTimeout = absl::Seconds(10);
  RedisStoreOptions options;
  options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  options.client.command_timeout = kLongTimeout;
  options.client.node.connect_timeout = kLongTimeout;
  options.client.retry_backoff = absl::Milliseconds(100);
  options.client.errors = &metrics_.redis_errors();
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  ASSERT_THAT(redis_->Pause(), IsOk());
  const absl::Time start = absl::Now();
  auto result = Place("alice", "o1", absl::Minutes(1), absl::Milliseconds(150));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_THAT(redis_->Resume(), IsOk());
  EXPECT_THAT(result, AnyOf(StatusIs(absl::StatusCode::kDeadlineExceeded),
                            StatusIs(absl::StatusCode::kUnavailable)));
  // Bounded by the call's deadline (150 ms), not by the 10 s command and connect timeouts.
  EXPECT_LT(elapsed, kLongTimeout / 2);
  // Works again once Redis does (after the fail-fast window).
  EXPECT_TRUE(Eventually([&] { return Place("bob", "o1").ok(); }));
}

TEST_F(RedisHoldStoreTest, FailsFastWhileRedisIsKnownDown) {
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  ASSERT_THAT(redis_->Pause(), IsOk());
  // The first call finds out (it waits for the 1 s command timeout)...
  EXPECT_THAT(Place("alice", "o2", absl::Minutes(1), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable));
  // ...the next ones do not queue behind a hung Redis: they fail at once for retry_backoff. The
  // message says the fail-fast path answered; queued, the call would have waited the command
  // timeout, so an answer in less shows it did not wait. (A tighter bound would measure how
  // loaded the machine is, not the client.)
  const absl::Time start = absl::Now();
  EXPECT_THAT(Place("alice", "o3", absl::Minutes(1), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::HasSubstr("failing fast")));
  EXPECT_LT(absl::Now() - start, kTimeout);
  ASSERT_THAT(redis_->Resume(), IsOk());
  EXPECT_TRUE(Eventually([&] { return Place("alice", "o3").ok(); }));
  auto list = Await<ListHoldsResult>([&](auto done) {
    store_->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                      std::move(done));
  });
  ASSERT_THAT(list, IsOk());
  // o2's EVALSHA may have reached the paused Redis and run on resume: a failed PlaceHold may have
  // been recorded (a retry would return it, created = false). o3 was never sent while failing fast.
  std::vector<std::string> orders;
  for (const StoredHold& hold : list->holds) orders.push_back(hold.order_id);
  EXPECT_THAT(orders, ::testing::AnyOf(::testing::ElementsAre("o1", "o3"),
                                       ::testing::UnorderedElementsAre("o1", "o2", "o3")));
}

TEST_F(RedisHoldStoreTest, ScriptFlushWhileCallsAreInFlight) {
  constexpr int kCalls = 2000;
  std::atomic<int> failed{0};
  absl::BlockingCounter pending(kCalls);
  std::thread flusher([&] {
    for (int i = 0; i < 20; ++i) {
      EXPECT_THAT(redis_->Command({"SCRIPT", "FLUSH"}), IsOk());
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  for (int i = 0; i < kCalls; ++i) {
    store_->PlaceHold(
        PlaceHoldArgs{
            absl::StrCat("user", i % 500), absl::StrCat("o", i), absl::Minutes(1), 3, 0, {}},
        CallOptions{absl::Now() + absl::Seconds(10), std::nullopt},
        [&](absl::StatusOr<PlaceHoldResult> result) {
          if (!result.ok()) {
            ++failed;
            ADD_FAILURE() << result.status();
          }
          pending.DecrementCount();
        });
    if (i % 100 == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  pending.Wait();
  flusher.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(MetricValue(registry_, "orderhold_redis_errors_total"), 0);
}

TEST_F(RedisHoldStoreTest, ConcurrentPlaceHoldsForOneUserGrantExactlyMaxHolds) {
  constexpr int kCalls = 200;
  std::atomic<int> created{0}, refused{0}, failed{0};
  absl::BlockingCounter pending(kCalls);
  for (int i = 0; i < kCalls; ++i) {  // all in flight at once: pipelined through the pool
    store_->PlaceHold(PlaceHoldArgs{"alice", absl::StrCat("o", i), absl::Minutes(1), 3, 0, {}},
                      CallOptions{absl::Now() + absl::Seconds(5), std::nullopt},
                      [&](absl::StatusOr<PlaceHoldResult> result) {
                        if (!result.ok()) {
                          ++failed;
                        } else if (result->outcome == PlaceHoldResult::Outcome::kCreated) {
                          ++created;
                        } else {
                          ++refused;
                        }
                        pending.DecrementCount();
                      });
  }
  pending.Wait();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(refused.load(), kCalls - 3);
  ASSERT_OK_AND_ASSIGN(std::string count, redis_->Command(testing::StoredHoldsCommand(
                                              store_->keys(), "alice", "count")));
  EXPECT_EQ(count, "3");
}

TEST_F(RedisHoldStoreTest, ReaperRemovesDueHoldsKeysAndIndexEntries) {
  reaper::Reaper reaper(*store_, metrics_, reaper::ReaperOptions{});
  absl::Time last_expiry = absl::InfinitePast();
  for (int i = 0; i < 10; ++i) {
    auto placed = Place(absl::StrCat("user", i), "o", absl::Milliseconds(200));
    ASSERT_THAT(placed, IsOk());
    last_expiry = std::max(last_expiry, placed->expire_time);
  }
  ASSERT_THAT(Place("keeper", "o", absl::Minutes(5)), IsOk());
  // A tick at the instant the last 200 ms hold expires (the store's `now` override), instead of
  // sleeping until Redis' clock gets there.
  auto stats = reaper.RunOnce(last_expiry);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->reaped, 10);
  EXPECT_EQ(MetricValue(registry_, "orderhold_reaper_lag_seconds"), 10);
  EXPECT_EQ(MetricValue(registry_, "orderhold_holds_expired_total"), 10);
  // Left: the keeper's holds bucket, its bucket's due index and its partition's bucket index (it
  // has no key of its own before its first end), each expired user's outcome records (hash and
  // sorted set, both with a TTL of --outcome_retention) and the event streams they wrote to.
  ASSERT_OK_AND_ASSIGN(std::string dbsize, redis_->Command({"DBSIZE"}));
  std::set<std::string> streams;
  for (int i = 0; i < 10; ++i) {
    const std::string user = absl::StrCat("user", i);
    streams.insert(store_->keys().EventsKey(store::KeySchema::PartitionOf(user)));
    ASSERT_OK_AND_ASSIGN(std::string ttl,
                         redis_->Command({"PTTL", store_->keys().OutcomesKey(user)}));
    EXPECT_GT(std::stoll(ttl), 0) << user;
  }
  EXPECT_EQ(dbsize, absl::StrCat(3 + 10 * 2 + streams.size()));
  ASSERT_OK_AND_ASSIGN(
      std::string exists,
      redis_->Command({"HEXISTS", store_->keys().HoldsBucketKey("user0"), "user0"}));
  EXPECT_EQ(exists, "0");
}

// set_due (lua/prelude/) never raises a bucket's score in the partition's bucket index: after a
// Pay of the bucket's earliest hold it is early, and the reaper's visit at that score finds
// nothing due and sets it right; the last end removes the bucket from both levels.
TEST_F(RedisHoldStoreTest, ABucketScoreLeftEarlyByAPaymentIsSetRightByTheReaper) {
  const std::string user = "alice";
  const int partition = KeySchema::PartitionOf(user);
  const std::string bucket = absl::StrCat(KeySchema::DueBucketOf(user));
  const KeySchema& keys = store_->keys();
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult first, Place(user, "o1", absl::Minutes(10)));
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult second, Place(user, "o2", absl::Minutes(20)));
  const auto ms = [](absl::Time t) { return absl::StrCat(absl::ToUnixMillis(t)); };
  const auto score = [&](const std::string& key, const std::string& member) {
    return redis_->Command({"ZSCORE", key, member}).value_or("?");
  };
  EXPECT_EQ(score(keys.BucketIndexKey(partition), bucket), ms(first.expire_time));

  ASSERT_OK_AND_ASSIGN(EndHoldResult paid, Await<EndHoldResult>([&](auto done) {
                         store_->EndHold(user, "o1", HoldOutcome::kPaid,
                                         CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                                         std::move(done));
                       }));
  EXPECT_EQ(paid.result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(score(keys.DueBucketKey(user), user), ms(second.expire_time));
  EXPECT_EQ(score(keys.BucketIndexKey(partition), bucket), ms(first.expire_time)) << "early";

  const auto reap = [&](absl::Time at) {
    return Await<ReapResult>([&](auto done) {
      store_->Reap(partition, ReapArgs{}, CallOptions{absl::Now() + absl::Seconds(2), at},
                   std::move(done));
    });
  };
  ASSERT_OK_AND_ASSIGN(ReapResult nothing, reap(first.expire_time + absl::Seconds(1)));
  EXPECT_THAT(nothing.reaped_expire_times, ::testing::IsEmpty());
  EXPECT_EQ(score(keys.BucketIndexKey(partition), bucket), ms(second.expire_time));

  ASSERT_OK_AND_ASSIGN(ReapResult last, reap(second.expire_time));
  EXPECT_THAT(last.reaped_expire_times, ::testing::ElementsAre(second.expire_time));
  EXPECT_EQ(redis_->Command({"EXISTS", keys.DueBucketKey(user), keys.BucketIndexKey(partition)})
                .value_or("?"),
            "0");
}

// A user's second hold that expires after its first leaves the due index as it was (place_hold
// skips set_due: nothing to change); one that expires first lowers the user's score and its
// bucket's, and is reaped at its own expiry; the reaper reports the index's next due hold (a call
// that ended holds: "now", look again).
TEST_F(RedisHoldStoreTest, ADueIndexWriteOnlyWhenAHoldComesFirstAndTheReaperReportsWhatIsNext) {
  const std::string user = "alice";
  const int partition = KeySchema::PartitionOf(user);
  const std::string bucket = absl::StrCat(KeySchema::DueBucketOf(user));
  const KeySchema& keys = store_->keys();
  const auto ms = [](absl::Time t) { return absl::StrCat(absl::ToUnixMillis(t)); };
  const auto score = [&](const std::string& key, const std::string& member) {
    return redis_->Command({"ZSCORE", key, member}).value_or("?");
  };
  const auto zadds = [&] {
    auto stats = redis_->Command({"INFO", "commandstats"});
    const std::string text = stats.value_or("");
    const size_t at = text.find("cmdstat_zadd:calls=");
    return at == std::string::npos ? 0 : std::stoi(text.substr(at + 19));
  };
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult first, Place(user, "o1", absl::Minutes(10)));
  const int after_first = zadds();
  ASSERT_OK_AND_ASSIGN(PlaceHoldResult later, Place(user, "o2", absl::Minutes(20)));
  EXPECT_EQ(zadds(), after_first) << "a later hold changes nothing in the due index";
  EXPECT_EQ(score(keys.DueBucketKey(user), user), ms(first.expire_time));

  ASSERT_OK_AND_ASSIGN(PlaceHoldResult earlier, Place(user, "o3", absl::Minutes(5)));
  EXPECT_EQ(score(keys.DueBucketKey(user), user), ms(earlier.expire_time));
  EXPECT_EQ(score(keys.BucketIndexKey(partition), bucket), ms(earlier.expire_time));

  const auto reap = [&](absl::Time at) {
    return Await<ReapResult>([&](auto done) {
      store_->Reap(partition, ReapArgs{}, CallOptions{absl::Now() + absl::Seconds(2), at},
                   std::move(done));
    });
  };
  ASSERT_OK_AND_ASSIGN(ReapResult none, reap(earlier.expire_time - absl::Seconds(1)));
  EXPECT_THAT(none.reaped_expire_times, ::testing::IsEmpty());
  EXPECT_EQ(none.next_due, earlier.expire_time);
  ASSERT_OK_AND_ASSIGN(ReapResult one, reap(earlier.expire_time));
  EXPECT_THAT(one.reaped_expire_times, ::testing::ElementsAre(earlier.expire_time));
  EXPECT_EQ(one.oldest_due, earlier.expire_time);
  EXPECT_EQ(one.next_due, one.now);
  ASSERT_OK_AND_ASSIGN(ReapResult peek, reap(earlier.expire_time + absl::Seconds(1)));
  EXPECT_EQ(peek.next_due, first.expire_time);
  ASSERT_OK_AND_ASSIGN(ReapResult all, reap(later.expire_time));
  EXPECT_EQ(all.reaped_expire_times.size(), 2u);
  ASSERT_OK_AND_ASSIGN(ReapResult empty, reap(later.expire_time + absl::Seconds(1)));
  EXPECT_EQ(empty.next_due, std::nullopt);
}

TEST_F(RedisHoldStoreTest, KeyPrefixSeparatesDeployments) {
  RedisStoreOptions other_options;
  other_options.client.topology =
      std::make_shared<redis::StandaloneTopology>(redis::HostPort{"127.0.0.1", redis_->port()});
  other_options.key_prefix = "other";
  ASSERT_OK_AND_ASSIGN(auto other, ConnectRedisStore(std::move(other_options)));
  ASSERT_THAT(Place("alice", "o1"), IsOk());
  auto list = Await<ListHoldsResult>([&](auto done) {
    other->ListHolds("alice", CallOptions{absl::Now() + absl::Seconds(2), std::nullopt},
                     std::move(done));
  });
  ASSERT_THAT(list, IsOk());
  EXPECT_TRUE(list->holds.empty());
  RedisStoreOptions bad_prefix;
  bad_prefix.key_prefix = "bad{prefix}";
  EXPECT_THAT(ConnectRedisStore(std::move(bad_prefix)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// --event_stream_max_len: appends keep each stream near its bound (XADD MAXLEN ~, whole nodes of
// 100), and the trimmer keeps it under 9/10 of it, counting what it drops before a group acked it.
TEST_F(RedisHoldStoreTest, EventStreamsStayNearTheirLengthBoundAndTrimsCountWhatGroupsMissed) {
  RedisStoreOptions options = OneConnection();
  options.outcomes.event_stream_max_len = 200;
  ASSERT_OK_AND_ASSIGN(store_, ConnectRedisStore(std::move(options)));
  const CallOptions call{absl::Now() + absl::Seconds(10), std::nullopt};
  // One user's partition: every event of this test goes to one stream.
  const int partition = KeySchema::PartitionOf("flood");
  ASSERT_THAT(Await<bool>([&](auto done) {
                store_->EnsureGroup(partition, "slow", GroupStart::kEarliest, call,
                                    std::move(done));
              }),
              IsOk());
  const std::string stream = KeySchema("orderhold").EventsKey(partition);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_THAT(Place("flood", absl::StrCat("o", i)), IsOk());
    ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                  store_->EndHold("flood", absl::StrCat("o", i), HoldOutcome::kPaid, call,
                                  std::move(done));
                }),
                IsOk());
    ASSERT_OK_AND_ASSIGN(std::string length, redis_->Command({"XLEN", stream}));
    ASSERT_LE(std::stoll(length), 200 + 100) << "after " << i + 1 << " events";
  }
  // The trimmer's pass: down to 180 at most, each event dropped counted for the group that never
  // read it.
  ASSERT_OK_AND_ASSIGN(std::string before, redis_->Command({"XLEN", stream}));
  auto trimmed = Await<TrimEventsResult>(
      [&](auto done) { store_->TrimEvents(partition, absl::UnixEpoch(), call, std::move(done)); });
  ASSERT_THAT(trimmed, IsOk());
  ASSERT_OK_AND_ASSIGN(std::string after, redis_->Command({"XLEN", stream}));
  EXPECT_EQ(std::stoll(after), 180);
  EXPECT_EQ(trimmed->trimmed, std::stoll(before) - 180);
  EXPECT_EQ(trimmed->trimmed_unacked, trimmed->trimmed);
}

// --consumer_idle_timeout: a consumer idle longer leaves its group at the next trim that checks,
// its pending events moved to the group's orphan consumer with their idle time, so another
// consumer claims them at once; the orphan consumer goes once it has nothing pending.
TEST_F(RedisHoldStoreTest, IdleConsumersLeaveTheirGroupAndTheirPendingEventsGoToTheOthers) {
  const CallOptions call{absl::Now() + absl::Seconds(10), std::nullopt};
  const int partition = KeySchema::PartitionOf("idle");
  const std::string stream = KeySchema("orderhold").EventsKey(partition);
  ASSERT_THAT(Await<bool>([&](auto done) {
                store_->EnsureGroup(partition, "g", GroupStart::kEarliest, call, std::move(done));
              }),
              IsOk());
  for (const char* order : {"o1", "o2"}) {
    ASSERT_THAT(Place("idle", order), IsOk());
    ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                  store_->EndHold("idle", order, HoldOutcome::kPaid, call, std::move(done));
                }),
                IsOk());
  }
  auto read = [&](const std::string& consumer, std::optional<absl::Duration> claim) {
    ReadEventsArgs args{"g", consumer, 10, claim, false, "", ""};
    return EventsOf(Await<EventBatch>(
        [&](auto done) { store_->ReadEvents(partition, args, call, std::move(done)); }));
  };
  auto gone = read("gone", std::nullopt);
  ASSERT_THAT(gone, IsOk());
  ASSERT_EQ(gone->size(), 2u);  // pending for "gone", never acked
  auto consumers = [&] {
    absl::StatusOr<std::string> n = redis_->Command(
        {"EVAL", "return #redis.call('XINFO', 'CONSUMERS', KEYS[1], 'g')", "1", stream});
    return n.ok() ? std::stoi(*n) : -1;
  };
  ASSERT_EQ(consumers(), 1);
  absl::SleepFor(absl::Milliseconds(150));
  auto trim = [&](absl::Duration idle) {
    return Await<TrimEventsResult>([&](auto done) {
      store_->TrimEvents(partition, TrimEventsArgs{absl::UnixEpoch(), idle}, call, std::move(done));
    });
  };
  // Without the idle check, or within the timeout, nobody leaves.
  ASSERT_THAT(trim(absl::ZeroDuration()), IsOk());
  ASSERT_THAT(trim(absl::Seconds(60)), IsOk());
  ASSERT_EQ(consumers(), 1);
  auto removed = trim(absl::Milliseconds(100));
  ASSERT_THAT(removed, IsOk());
  EXPECT_EQ(removed->consumers_removed, 1);
  // "gone" is out; the orphan consumer holds its two events, which "alive" claims at once
  // (claim_idle 100 ms: their idle time was kept).
  EXPECT_EQ(consumers(), 1);
  auto alive = read("alive", absl::Milliseconds(100));
  ASSERT_THAT(alive, IsOk());
  EXPECT_EQ(alive->size(), 2u);
  ASSERT_THAT(trim(absl::Seconds(60)), IsOk());  // the orphan consumer has nothing left
  absl::StatusOr<std::string> names = redis_->Command(
      {"EVAL",
       "local n = {} for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], 'g')) do "
       "n[#n + 1] = c[2] end return table.concat(n, ',')",
       "1", stream});
  ASSERT_THAT(names, IsOk());
  EXPECT_EQ(*names, "alive");
}
// read_events.lua's claims: a consumer never claims its own entries, the scan goes on
// from its cursor past a run of them in bounded steps (512 entries per call) and answers "" at the
// end of the list; a resume of the consumer's own entries goes on from its cursor. Without the
// cursor, a scan from the start re-took the same oldest entries forever.
TEST_F(RedisHoldStoreTest, ClaimsSkipTheReadersOwnEntriesAndGoOnFromTheirCursor) {
  const CallOptions call{absl::Now() + absl::Seconds(10), std::nullopt};
  const int partition = KeySchema::PartitionOf("claims");
  ASSERT_THAT(Await<bool>([&](auto done) {
                store_->EnsureGroup(partition, "g", GroupStart::kEarliest, call, std::move(done));
              }),
              IsOk());
  // 700 events of "stuck" (read, never acked), then 3 of "dead".
  constexpr int kStuck = 700;
  const std::string stream = KeySchema("orderhold").EventsKey(partition);
  for (int i = 0; i < kStuck + 3; ++i) {
    ASSERT_THAT(redis_->Command({"XADD", stream, "*", "u", "claims", "o", absl::StrCat("o", i), "x",
                                 "1", "e", "0", "t", "0"}),
                IsOk());
  }
  auto read = [&](const std::string& consumer, int max, std::optional<absl::Duration> claim,
                  std::string claim_after, bool own = false, std::string own_after = "") {
    ReadEventsArgs args{
        "g", consumer, max, claim, own, std::move(claim_after), std::move(own_after)};
    return Await<EventBatch>(
        [&](auto done) { store_->ReadEvents(partition, args, call, std::move(done)); });
  };
  for (int got = 0; got < kStuck;) {
    ASSERT_OK_AND_ASSIGN(EventBatch batch, read("stuck", 100, std::nullopt, ""));
    got += static_cast<int>(batch.events.size());
  }
  ASSERT_OK_AND_ASSIGN(EventBatch dead, read("dead", 10, std::nullopt, ""));
  ASSERT_EQ(dead.events.size(), 3u);
  absl::SleepFor(absl::Milliseconds(20));

  // "stuck" claims nothing of its own: 512 looked at, then the rest, then the end.
  ASSERT_OK_AND_ASSIGN(EventBatch own_scan, read("stuck", 5, absl::Milliseconds(10), ""));
  EXPECT_TRUE(own_scan.events.empty());
  EXPECT_FALSE(own_scan.claim_next.empty());
  ASSERT_OK_AND_ASSIGN(EventBatch rest,
                       read("stuck", 5, absl::Milliseconds(10), own_scan.claim_next));
  ASSERT_EQ(rest.events.size(), 3u);  // dead's, past its own 700
  EXPECT_EQ(rest.events[0].order_id, absl::StrCat("o", kStuck));
  EXPECT_EQ(rest.events[0].delivery_count, 2);
  EXPECT_EQ(rest.claim_next, "");  // the end of the list

  // "live" claims from its cursor, budget by budget: 2 then 2 more, in id order.
  ASSERT_OK_AND_ASSIGN(EventBatch first, read("live", 2, absl::Milliseconds(10), ""));
  ASSERT_EQ(first.events.size(), 2u);
  EXPECT_EQ(first.events[1].order_id, "o1");
  EXPECT_EQ(first.claim_next, first.events[1].stream_id);
  ASSERT_OK_AND_ASSIGN(EventBatch second,
                       read("live", 2, absl::Milliseconds(10), first.claim_next));
  ASSERT_EQ(second.events.size(), 2u);
  EXPECT_EQ(second.events[0].order_id, "o2");

  // A resume that takes the whole budget leaves the claim scan for next time, from the start
  // ("0-0"), rather than saying it reached the end ("").
  ASSERT_OK_AND_ASSIGN(EventBatch full, read("stuck", 3, absl::Milliseconds(10), "", true, ""));
  EXPECT_EQ(full.events.size(), 3u);
  EXPECT_EQ(full.claim_next, "0-0");
  EXPECT_FALSE(full.own_next.empty());

  // "stuck" resumes its own pending entries (a reconnect), 300 at a time, from its cursor.
  int resumed = 0;
  std::string own_after;
  do {
    ASSERT_OK_AND_ASSIGN(EventBatch batch, read("stuck", 300, std::nullopt, "", true, own_after));
    resumed += static_cast<int>(batch.events.size());
    own_after = batch.own_next;
  } while (!own_after.empty());
  EXPECT_EQ(resumed, kStuck - 4 + 3);  // its own, less the 4 "live" took, plus dead's 3
}

// What remembering an ended order costs Redis (--outcome_retention keeps it 72 h by default): the
// user's outcome records (x:, xt: and their expiry entries) per paid order, with a 27-byte payment
// reference, measured as used_memory's growth less the event streams'. Printed for deploy/README's
// sizing; bounded so a layout that costs several times more fails here.
TEST_F(RedisHoldStoreTest, AnOrderRememberedAfterItsEndCostsRedisTheDocumentedBytes) {
  const CallOptions call{absl::Now() + absl::Seconds(120), std::nullopt};
  const KeySchema keys("orderhold");
  auto used_memory = [&]() -> int64_t {
    absl::StatusOr<std::string> info = redis_->Command({"INFO", "memory"});
    if (!info.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(*info, "\r\n")) {
      int64_t value = 0;
      if (absl::ConsumePrefix(&line, "used_memory:") && absl::SimpleAtoi(line, &value)) {
        return value;
      }
    }
    return -1;
  };
  auto stream_bytes = [&]() -> int64_t {
    int64_t sum = 0;
    for (int p = 0; p < KeySchema::kPartitionCount; ++p) {
      absl::StatusOr<std::string> usage =
          redis_->Command({"MEMORY", "USAGE", keys.EventsKey(p), "SAMPLES", "0"});
      int64_t bytes = 0;
      if (usage.ok() && absl::SimpleAtoi(*usage, &bytes)) sum += bytes;
    }
    return sum;
  };
  for (const int per_user : {1, 3}) {
    ASSERT_THAT(redis_->Command({"FLUSHALL"}), IsOk());
    const int users = 6000 / per_user;
    const int64_t before = used_memory(), streams_before = stream_bytes();
    for (int u = 0; u < users; ++u) {
      const std::string user = absl::StrCat("user-", 100000 + u);
      for (int o = 0; o < per_user; ++o) {
        const std::string order = absl::StrCat("order-", 1000000 + o);
        ASSERT_THAT(Place(user, order), IsOk());
        ASSERT_THAT(Await<EndHoldResult>([&](auto done) {
                      store_->EndHold(user, order, HoldOutcome::kPaid,
                                      "pi_3N1AbCdEfGhIjKlMnOpQrStU", call, std::move(done));
                    }),
                    IsOk());
      }
    }
    const int64_t grown = used_memory() - before - (stream_bytes() - streams_before);
    // Where it goes: MEMORY USAGE summed by kind of key ("x", "xt", ...), keys counted.
    std::map<std::string, std::pair<int64_t, int>> kinds;
    std::string cursor = "0";
    do {
      absl::StatusOr<std::string> reply = redis_->Command({"SCAN", cursor, "COUNT", "1000"});
      ASSERT_THAT(reply, IsOk());
      const std::vector<std::string> scan = absl::StrSplit(*reply, '\n');
      cursor = scan[0];
      for (size_t i = 1; i < scan.size(); ++i) {
        const std::string& key = scan[i];
        std::vector<std::string> parts = absl::StrSplit(key, ':');
        const std::string kind = parts.size() > 2 ? parts[2] : key;
        absl::StatusOr<std::string> usage = redis_->Command({"MEMORY", "USAGE", key});
        int64_t bytes = 0;
        if (usage.ok() && absl::SimpleAtoi(*usage, &bytes)) {
          kinds[kind].first += bytes;
          ++kinds[kind].second;
        }
      }
    } while (cursor != "0");
    for (const auto& [kind, sum] : kinds) {
      std::cout << "  " << kind << ": " << sum.second << " keys, "
                << static_cast<double>(sum.first) / (users * per_user) << " B per order"
                << std::endl;
    }
    const double per_order = static_cast<double>(grown) / (users * per_user);
    std::cout << "remembered paid orders: " << users * per_user << " at " << per_user
              << " per user: " << per_order << " B per order (streams excluded)" << std::endl;
    EXPECT_GT(per_order, 0);
    EXPECT_LT(per_order, 1200) << per_user << " per user";
  }
}
}  // namespace
}  // namespace orderhold::store
