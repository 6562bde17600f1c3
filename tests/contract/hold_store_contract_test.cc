// One contract, four stores: every case runs against FakeHoldStore, against RedisHoldStore on a
// real redis-server (started on a free port for this suite), against RedisHoldStore over
// rediss:// with mutual TLS (another redis-server, its TLS port, certificates from TlsCerts), and
// against RedisHoldStore in cluster mode on a real Redis Cluster of three primaries (RedisCluster).
// Time is passed explicitly (CallOptions::now), so expiry is decided without sleeping and every
// store sees the same instants.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"
#include "server/redis_store.h"
#include "server/store/event_log.h"
#include "server/store/hold_store.h"
#include "server/store/partition_store.h"
#include "server/store/redis_hold_store.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/event_batches.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_hold_store.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::EventsOf;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Outcome = PlaceHoldResult::Outcome;

const absl::Time kT0 = absl::FromUnixMillis(1795000000123);

class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<HoldStore> Make(OutcomePolicy outcomes) = 0;
  // Waits for what `store` does after answering a call (the Cluster's scope settles), so that a
  // case reads what that call left. Nothing by default.
  virtual void Quiesce(HoldStore& store) { (void)store; }
};

class FakeFactory : public StoreFactory {
 public:
  std::unique_ptr<HoldStore> Make(OutcomePolicy outcomes) override {
    return std::make_unique<orderhold::testing::FakeHoldStore>(clock_, outcomes);
  }

 private:
  orderhold::testing::FakeClock clock_;
};

// Creates the app user of deploy/redis/orderhold.acl (deploy/README.md "Redis settings for a
// deployment"), with its key and channel patterns widened to the suite's prefixes ("contract1:...")
// and the password "contract-pw".
absl::Status AddAppUser(orderhold::testing::RedisServer& redis) {
  absl::StatusOr<std::vector<std::string>> rules = orderhold::testing::AppAclRules("contract");
  if (!rules.ok()) return rules.status();
  std::vector<std::string> args = {"ACL", "SETUSER", "orderhold", "on", ">contract-pw"};
  args.insert(args.end(), rules->begin(), rules->end());
  return redis.Command(args).status();
}

// RedisHoldStore on a redis-server of its own; with `tls`, over rediss:// with mutual TLS (the
// server wants a client certificate) to the server's TLS port, verified against the test CA.
class RedisFactory : public StoreFactory {
 public:
  explicit RedisFactory(bool tls) : tls_(tls) {}
  ~RedisFactory() override {
    redis_.reset();
    std::error_code ignored;
    if (!certs_dir_.empty()) std::filesystem::remove_all(certs_dir_, ignored);
  }

  std::unique_ptr<HoldStore> Make(OutcomePolicy outcomes) override {
    if (redis_ == nullptr && !StartRedis()) return nullptr;
    RedisStoreOptions options;
    options.client.topology = std::make_shared<redis::StandaloneTopology>(
        redis::HostPort{"127.0.0.1", tls_ ? redis_->tls_port() : redis_->port()});
    options.client.node.tls = tls_context_;
    // As the app user of deploy/redis/orderhold.acl: the suite proves that ACL is enough.
    options.client.node.user = "orderhold";
    options.client.node.password = "contract-pw";
    options.key_prefix = absl::StrCat("contract", ++tests_);  // isolates tests sharing the server
    options.outcomes = outcomes;
    auto store = ConnectRedisStore(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

 private:
  bool StartRedis() {
    orderhold::testing::RedisServerOptions redis_options;
    if (tls_) {
      auto dir = orderhold::testing::MakeTempDir("contract-certs");
      EXPECT_TRUE(dir.ok()) << dir.status();
      if (!dir.ok()) return false;
      certs_dir_ = *dir;
      auto certs = orderhold::testing::TlsCerts::Create(certs_dir_);
      EXPECT_TRUE(certs.ok()) << certs.status();
      if (!certs.ok()) return false;
      redis_options.tls = orderhold::testing::RedisTlsOptions{.cert_file = certs->server_cert(),
                                                              .key_file = certs->server_key(),
                                                              .ca_cert_file = certs->ca_cert(),
                                                              .auth_clients = "yes"};
      redis::RedisTlsOptions client_tls;
      client_tls.ca_file = certs->ca_cert();
      client_tls.cert_file = certs->client_cert();
      client_tls.key_file = certs->client_key();
      auto context = redis::TlsContext::Create(client_tls);
      EXPECT_TRUE(context.ok()) << context.status();
      if (!context.ok()) return false;
      tls_context_ = *std::move(context);
    }
    auto redis = orderhold::testing::RedisServer::Start(redis_options);
    EXPECT_TRUE(redis.ok()) << redis.status();
    if (!redis.ok()) return false;
    redis_ = std::move(*redis);
    const absl::Status acl = AddAppUser(*redis_);  // over the fixture's plain port
    EXPECT_TRUE(acl.ok()) << acl;
    return true;
  }

  const bool tls_;
  std::string certs_dir_;  // TLS: the certificates, removed with the factory
  std::shared_ptr<const redis::TlsContext> tls_context_;
  std::unique_ptr<orderhold::testing::RedisServer> redis_;
  int tests_ = 0;
};

// RedisHoldStore in cluster mode (--redis_mode=cluster, as App wires it: a ClusterTopology on the
// seed list, RedisClusterClients over it) on a RedisCluster of three primaries, started on first
// use. No replicas: the contract involves no failover, and a replica's first sync would only add
// start time. As the fixture's app user, whose ACL is deploy/redis/orderhold.acl plus
// kClusterAppAclRules, so the suite also proves that ACL is enough in cluster mode; its key
// pattern "~orderhold:*" is kept, and each store gets a fresh prefix "orderhold:contract<N>"
// (isolates the tests sharing the cluster, as RedisFactory's prefixes do).
class RedisClusterFactory : public StoreFactory {
 public:
  std::unique_ptr<HoldStore> Make(OutcomePolicy outcomes) override {
    if (cluster_ == nullptr) {
      auto cluster = orderhold::testing::RedisCluster::Start({.replicas_per_primary = 0});
      EXPECT_TRUE(cluster.ok()) << cluster.status();
      if (!cluster.ok()) return nullptr;
      cluster_ = std::move(*cluster);
    }
    RedisStoreOptions options;
    auto endpoint = redis::ParseRedisUrl(cluster_->SeedUrl());
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    if (!endpoint.ok()) return nullptr;
    options.client.node.user = endpoint->user;
    options.client.node.password = endpoint->password;
    redis::ClusterTopologyOptions topology_options;
    topology_options.seeds = endpoint->hosts;
    topology_options.node.user = options.client.node.user;
    topology_options.node.password = options.client.node.password;
    auto topology = redis::ClusterTopology::Create(std::move(topology_options));
    EXPECT_TRUE(topology.ok()) << topology.status();
    if (!topology.ok()) return nullptr;
    options.cluster = *std::move(topology);
    options.key_prefix = absl::StrCat("orderhold:contract", ++tests_);
    options.outcomes = outcomes;
    // The scope protocol's entries outlive their holds by the clock margin, and a take not yet
    // settled by its window: one host's nodes share a clock (margin 0), and the shortest window
    // leaves an unsettled entry 1 s past its hold, which these cases' times step over.
    options.scope_protocol.margin = absl::ZeroDuration();
    options.scope_protocol.window = absl::Seconds(1);
    auto store = ConnectRedisStore(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  void Quiesce(HoldStore& store) override {
    auto& redis = static_cast<store::RedisHoldStore&>(store);
    EXPECT_TRUE(orderhold::testing::Eventually([&] { return redis.settles_in_flight() == 0; }));
  }

 private:
  std::unique_ptr<orderhold::testing::RedisCluster> cluster_;
  int tests_ = 0;
};

// One factory of each kind per test process; the Environment stops the shared redis-server (and
// removes its data dir) when the process's tests are done.
class Factories : public ::testing::Environment {
 public:
  static StoreFactory& Get(const std::string& name) {
    if (name == "fake") return *instance_->fake_;
    if (name == "redis_tls") return *instance_->redis_tls_;
    if (name == "redis_cluster") return *instance_->redis_cluster_;
    return *instance_->redis_;
  }
  void SetUp() override {
    fake_ = std::make_unique<FakeFactory>();
    redis_ = std::make_unique<RedisFactory>(/*tls=*/false);
    redis_tls_ = std::make_unique<RedisFactory>(/*tls=*/true);
    redis_cluster_ = std::make_unique<RedisClusterFactory>();
    instance_ = this;
  }
  void TearDown() override {
    redis_cluster_.reset();
    redis_tls_.reset();
    redis_.reset();
    fake_.reset();
  }

 private:
  static inline Factories* instance_ = nullptr;
  std::unique_ptr<FakeFactory> fake_;
  std::unique_ptr<RedisFactory> redis_;
  std::unique_ptr<RedisFactory> redis_tls_;
  std::unique_ptr<RedisClusterFactory> redis_cluster_;
};
::testing::Environment* const kFactories = ::testing::AddGlobalTestEnvironment(new Factories);

class HoldStoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  static StoreFactory& factory() { return Factories::Get(GetParam()); }
  void SetUp() override {
    store_ = Factories::Get(GetParam()).Make(OutcomePolicy{});
    ASSERT_NE(store_, nullptr);
  }

  static CallOptions At(absl::Time now) { return CallOptions{absl::Now() + absl::Seconds(5), now}; }

  absl::StatusOr<PlaceHoldResult> Place(const std::string& user, const std::string& order,
                                        absl::Duration ttl, absl::Time now, int max_holds = 3) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = ttl;
    args.max_holds = max_holds;
    return Place(std::move(args), now);
  }
  absl::StatusOr<PlaceHoldResult> Place(PlaceHoldArgs args, absl::Time now) {
    auto placed = Await<PlaceHoldResult>(
        [&](auto done) { store_->PlaceHold(std::move(args), At(now), std::move(done)); });
    factory().Quiesce(*store_);
    return placed;
  }
  // A scoped placement: `quantity` units in `scope` (limits `scope_limits`), the user's limits
  // max_holds 3 and `max_units`.
  absl::StatusOr<PlaceHoldResult> PlaceIn(const std::string& user, const std::string& order,
                                          const std::string& scope, int64_t quantity,
                                          LevelLimits scope_limits, absl::Time now,
                                          int64_t max_units = 0, Labels labels = {}) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = absl::Seconds(10);
    args.max_holds = 3;
    args.max_units = max_units;
    args.details.scope = scope;
    args.details.quantity = quantity;
    args.details.labels = std::move(labels);
    args.details.scope_limits = scope_limits;
    return Place(std::move(args), now);
  }
  absl::StatusOr<EndHoldResult> End(const std::string& user, const std::string& order,
                                    absl::Time now, HoldOutcome outcome = HoldOutcome::kPaid,
                                    const std::string& payment_reference = "") {
    return Await<EndHoldResult>([&](auto done) {
      store_->EndHold(user, order, outcome, payment_reference, At(now), std::move(done));
    });
  }
  absl::StatusOr<ReapResult> ReapAs(int partition, const std::string& owner, absl::Time now) {
    return Await<ReapResult>([&](auto done) {
      partitions().Reap(partition, ReapArgs{100, owner, absl::Seconds(30), std::nullopt}, At(now),
                        std::move(done));
    });
  }
  // ExtendHold of (user, order) to `ttl` from `now`.
  absl::StatusOr<ExtendHoldResult> Extend(const std::string& user, const std::string& order,
                                          absl::Duration ttl, absl::Time now,
                                          std::string request_id = "", int max_extensions = 0) {
    ExtendHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = ttl;
    args.request_id = std::move(request_id);
    args.max_extensions = max_extensions;
    auto extended = Await<ExtendHoldResult>(
        [&](auto done) { store_->ExtendHold(std::move(args), At(now), std::move(done)); });
    factory().Quiesce(*store_);
    return extended;
  }
  absl::StatusOr<GetHoldResult> Get(const std::string& user, const std::string& order,
                                    absl::Time now) {
    return Await<GetHoldResult>(
        [&](auto done) { store_->GetHold(user, order, At(now), std::move(done)); });
  }
  absl::StatusOr<ReleaseHoldsResult> Release(const std::string& user, const std::string& scope,
                                             absl::Time now) {
    return Await<ReleaseHoldsResult>(
        [&](auto done) { store_->ReleaseHolds(user, scope, At(now), std::move(done)); });
  }
  // A plain hold of `ttl` whose lifetime cap is `lifetime`.
  absl::StatusOr<PlaceHoldResult> PlaceCapped(const std::string& user, const std::string& order,
                                              absl::Duration ttl, absl::Duration lifetime,
                                              absl::Time now) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = ttl;
    args.max_holds = 3;
    args.max_lifetime = lifetime;
    return Place(std::move(args), now);
  }
  // The user's live holds, with their details.
  std::vector<StoredHold> ListFull(const std::string& user, absl::Time now) {
    auto result = Await<ListHoldsResult>(
        [&](auto done) { store_->ListHolds(user, At(now), std::move(done)); });
    EXPECT_THAT(result, IsOk());
    return result.ok() ? result->holds : std::vector<StoredHold>{};
  }
  // Order ids and expiry only (details cleared), for the cases about those.
  std::vector<StoredHold> List(const std::string& user, absl::Time now) {
    std::vector<StoredHold> holds = ListFull(user, now);
    for (StoredHold& hold : holds) hold.details = HoldDetails{};
    return holds;
  }
  // Reaps every partition until none reports more; returns the expire times of the reaped holds.
  std::vector<absl::Time> ReapAll(absl::Time now, int max_users = 100) {
    std::vector<absl::Time> reaped;
    for (int partition = 0; partition < partitions().partition_count(); ++partition) {
      for (bool more = true; more;) {
        auto result = Await<ReapResult>([&](auto done) {
          partitions().Reap(partition, ReapArgs{max_users, "", {}, std::nullopt}, At(now),
                            std::move(done));
        });
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
  // store_'s reaper side: every store of the suite (the fake, Redis) is a PartitionStore too.
  PartitionStore& partitions() { return *dynamic_cast<PartitionStore*>(store_.get()); }
};

// The contract per interface, on the same stores: HoldStoreContractTest is HoldStore's (what
// domain/ uses), PartitionStoreContractTest the reaper's PartitionStore, HoldEventLogContractTest
// the event log's (the Redis store's; the fake has none, so those cases skip on it).
class PartitionStoreContractTest : public HoldStoreContractTest {};
class HoldEventLogContractTest : public HoldStoreContractTest {};

TEST_P(HoldStoreContractTest, CreatesHoldExpiringAfterTtl) {
  auto result = Place("alice", "order-1", absl::Minutes(30), kT0);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->outcome, Outcome::kCreated);
  EXPECT_EQ(result->now, kT0);
  EXPECT_EQ(result->expire_time, kT0 + absl::Minutes(30));
  EXPECT_EQ(result->active_holds, 1);
  EXPECT_EQ(result->expired_removed, 0);
  EXPECT_THAT(List("alice", kT0), ElementsAre(StoredHold{"order-1", kT0 + absl::Minutes(30), {}}));
}

TEST_P(HoldStoreContractTest, RetryOfLiveOrderReturnsItUnchanged) {
  ASSERT_THAT(Place("alice", "order-1", absl::Seconds(10), kT0), IsOk());
  auto retry = Place("alice", "order-1", absl::Seconds(60), kT0 + absl::Seconds(5));
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->outcome, Outcome::kAlreadyHeld);
  EXPECT_EQ(retry->expire_time, kT0 + absl::Seconds(10));  // not extended
  EXPECT_EQ(retry->active_holds, 1);                       // no second slot
}

// A retry answers from the live hold, and ends the user's other holds that fell due as every
// call does (the one retry path on which place_hold.lua parses the retention).
TEST_P(HoldStoreContractTest, RetryOfALiveOrderEndsTheUsersDueHolds) {
  ASSERT_THAT(Place("alice", "short", absl::Seconds(1), kT0), IsOk());
  ASSERT_THAT(Place("alice", "long", absl::Seconds(60), kT0), IsOk());
  auto retry = Place("alice", "long", absl::Seconds(30), kT0 + absl::Seconds(2));
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->outcome, Outcome::kAlreadyHeld);
  EXPECT_EQ(retry->expire_time, kT0 + absl::Seconds(60));
  EXPECT_EQ(retry->active_holds, 1);
  EXPECT_EQ(retry->expired_removed, 1);
  // Ended once, by the retry: nothing is left to reap, and its outcome is remembered.
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(3)), IsEmpty());
  auto late = End("alice", "short", kT0 + absl::Seconds(3));
  ASSERT_THAT(late, IsOk());
  EXPECT_EQ(late->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(late->end,
            (HoldEnd{HoldOutcome::kExpired, kT0 + absl::Seconds(1), kT0 + absl::Seconds(1)}));
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
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(2), {}}));
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(2)), IsEmpty());
}

TEST_P(HoldStoreContractTest, ExpiredHoldEndsAsExpiredTheSameBeforeAndAfterTheReaper) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(1), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(1), kT0), IsOk());
  const HoldEnd expired{HoldOutcome::kExpired, kT0 + absl::Seconds(1), kT0 + absl::Seconds(1)};
  // Before the reaper: the call itself ends the due holds (lazy cleanup), never pays them.
  auto late = End("alice", "a", kT0 + absl::Seconds(1));
  ASSERT_THAT(late, IsOk());
  EXPECT_EQ(late->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(late->end, expired);
  EXPECT_EQ(late->expired_removed, 2);
  // After (nothing left to reap): the same answer.
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(5)), IsEmpty());
  auto cancel = End("alice", "b", kT0 + absl::Seconds(5), HoldOutcome::kCancelled);
  ASSERT_THAT(cancel, IsOk());
  EXPECT_EQ(cancel->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(cancel->end, expired);
  EXPECT_EQ(cancel->expired_removed, 0);
  // Reaped first, asked later: the same answer again.
  ASSERT_THAT(Place("bob", "c", absl::Seconds(1), kT0), IsOk());
  EXPECT_EQ(ReapAll(kT0 + absl::Seconds(2)).size(), 1u);
  auto reaped = End("bob", "c", kT0 + absl::Seconds(3));
  ASSERT_THAT(reaped, IsOk());
  EXPECT_EQ(reaped->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(reaped->end, expired);
}

TEST_P(HoldStoreContractTest, EndedOrdersAreRememberedAndNeverPlacedAgain) {
  ASSERT_THAT(Place("alice", "p", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("alice", "c", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(End("alice", "p", kT0 + absl::Seconds(1)), IsOk());
  ASSERT_THAT(End("alice", "c", kT0 + absl::Seconds(2), HoldOutcome::kCancelled), IsOk());
  auto cancelled = End("alice", "c", kT0 + absl::Seconds(3));  // pay after cancel
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(cancelled->end,
            (HoldEnd{HoldOutcome::kCancelled, kT0 + absl::Seconds(2), kT0 + absl::Seconds(10)}));
  auto replay = Place("alice", "p", absl::Seconds(10), kT0 + absl::Seconds(4));
  ASSERT_THAT(replay, IsOk());
  EXPECT_EQ(replay->outcome, Outcome::kEnded);
  EXPECT_EQ(replay->ended,
            (HoldEnd{HoldOutcome::kPaid, kT0 + absl::Seconds(1), kT0 + absl::Seconds(10)}));
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(4)), IsEmpty());
}

// A payment reference is kept with a PAID outcome: a later end of the order answers the one it was
// paid with (the caller compares), GetHold shows it, and it goes with the outcome: an order
// forgotten and paid again without one has none (not the earlier hold's).
TEST_P(HoldStoreContractTest, APaymentReferenceIsKeptWithItsOutcomeAndForgottenWithIt) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 10});
  ASSERT_NE(store_, nullptr);
  for (const char* order : {"a", "b", "c"}) {
    ASSERT_THAT(Place("alice", order, absl::Seconds(10), kT0), IsOk());
  }
  const absl::Time t1 = kT0 + absl::Seconds(1);
  auto paid = End("alice", "a", t1, HoldOutcome::kPaid, "pi_3N1");
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(paid->end, (HoldEnd{HoldOutcome::kPaid, t1, kT0 + absl::Seconds(10), "pi_3N1"}));
  for (const char* retry : {"pi_3N1", "pi_other", ""}) {
    auto again = End("alice", "a", kT0 + absl::Seconds(2), HoldOutcome::kPaid, retry);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->result, EndHoldResult::Result::kAlreadyEnded) << retry;
    EXPECT_EQ(again->end, paid->end) << retry;
  }
  auto got = Get("alice", "a", kT0 + absl::Seconds(2));
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->end.payment_reference, "pi_3N1");
  // Paid without one, and cancelled (a reference is for payments only): none.
  ASSERT_THAT(End("alice", "b", t1), IsOk());
  auto cancelled = End("alice", "c", t1, HoldOutcome::kCancelled, "pi_ignored");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->end.payment_reference, "");
  for (const char* order : {"b", "c"}) {
    auto ended = Get("alice", order, kT0 + absl::Seconds(2));
    ASSERT_THAT(ended, IsOk());
    EXPECT_EQ(ended->end.payment_reference, "") << order;
  }
  // Past the retention "a" is placed and paid again, without a reference: the first one is gone.
  const absl::Time later = kT0 + absl::Hours(2);
  auto replaced = Place("alice", "a", absl::Seconds(10), later);
  ASSERT_THAT(replaced, IsOk());
  ASSERT_EQ(replaced->outcome, Outcome::kCreated);
  auto second = End("alice", "a", later + absl::Seconds(1));
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->end.payment_reference, "");
  auto seen = Get("alice", "a", later + absl::Seconds(2));
  ASSERT_THAT(seen, IsOk());
  EXPECT_EQ(seen->end.payment_reference, "");
  auto retried = End("alice", "a", later + absl::Seconds(2), HoldOutcome::kPaid, "pi_3N1");
  ASSERT_THAT(retried, IsOk());
  EXPECT_EQ(retried->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(retried->end.payment_reference, "");
}

TEST_P(HoldStoreContractTest, OutcomesAreForgottenAfterRetentionAndBeyondTheCap) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 2});
  ASSERT_NE(store_, nullptr);
  for (const char* order : {"a", "b", "c"}) {
    ASSERT_THAT(Place("alice", order, absl::Seconds(10), kT0), IsOk());
    ASSERT_THAT(End("alice", order, kT0 + absl::Seconds(order[0] - 'a' + 1)), IsOk());
  }
  // Cap 2: "a", the oldest end, was dropped.
  auto a = End("alice", "a", kT0 + absl::Seconds(5));
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->result, EndHoldResult::Result::kUnknown);
  auto c = End("alice", "c", kT0 + absl::Seconds(5));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->result, EndHoldResult::Result::kAlreadyEnded);
  // Retention: an hour after its end, "c" is unknown and may be placed again.
  auto later = End("alice", "c", kT0 + absl::Seconds(3) + absl::Hours(1));
  ASSERT_THAT(later, IsOk());
  EXPECT_EQ(later->result, EndHoldResult::Result::kUnknown);
  auto again = Place("alice", "c", absl::Seconds(10), kT0 + absl::Hours(2));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->outcome, Outcome::kCreated);
}

// Every level is checked in the one call, all or nothing: the user's holds, the scope's holds and
// units, the user's units; a refusal names every exceeded level and records nothing.
TEST_P(HoldStoreContractTest, ScopedLimitsAreCheckedTogetherAndRefusalsLeaveNoTrace) {
  const LevelLimits two{2, 0};
  ASSERT_THAT(PlaceIn("alice", "a1", "event:A", 1, two, kT0), IsOk());
  auto a2 = PlaceIn("alice", "a2", "event:A", 1, two, kT0 + absl::Seconds(1));
  ASSERT_THAT(a2, IsOk());
  EXPECT_EQ(a2->outcome, Outcome::kCreated);
  EXPECT_EQ(a2->scope_holds, 2);
  EXPECT_EQ(a2->scope_units, 2);
  EXPECT_EQ(a2->active_holds, 2);
  EXPECT_EQ(a2->user_units, 2);
  // Scope A is full; the user is not.
  auto a3 = PlaceIn("alice", "a3", "event:A", 1, two, kT0 + absl::Seconds(2));
  ASSERT_THAT(a3, IsOk());
  EXPECT_EQ(a3->outcome, Outcome::kLimitReached);
  EXPECT_EQ(a3->violations, kScopeHoldLimit);
  EXPECT_EQ(a3->expire_time, kT0 + absl::Seconds(10));  // a1, the scope's earliest
  EXPECT_EQ(a3->scope_holds, 2);
  // Scope B has room, and takes the user's last slot.
  auto b1 = PlaceIn("alice", "b1", "event:B", 1, two, kT0 + absl::Seconds(3));
  ASSERT_THAT(b1, IsOk());
  EXPECT_EQ(b1->outcome, Outcome::kCreated);
  EXPECT_EQ(b1->scope_holds, 1);
  EXPECT_EQ(b1->active_holds, 3);
  // Both levels exceeded: both named; a retry can pass once both have freed a hold.
  auto a4 = PlaceIn("alice", "a4", "event:A", 1, two, kT0 + absl::Seconds(4));
  ASSERT_THAT(a4, IsOk());
  EXPECT_EQ(a4->outcome, Outcome::kLimitReached);
  EXPECT_EQ(a4->violations, kUserHoldLimit | kScopeHoldLimit);
  EXPECT_EQ(a4->expire_time, kT0 + absl::Seconds(10));
  // Units: the user's and the scope's, each alone.
  auto b2 = PlaceIn("bob", "b2", "event:B", 5, LevelLimits{0, 6}, kT0, /*max_units=*/8);
  ASSERT_THAT(b2, IsOk());
  EXPECT_EQ(b2->outcome, Outcome::kCreated);
  EXPECT_EQ(b2->user_units, 5);
  auto over_scope = PlaceIn("bob", "b3", "event:B", 2, LevelLimits{0, 6}, kT0, 8);
  ASSERT_THAT(over_scope, IsOk());
  EXPECT_EQ(over_scope->violations, kScopeUnitLimit);
  auto over_user = PlaceIn("bob", "c1", "event:C", 4, LevelLimits{}, kT0, 8);
  ASSERT_THAT(over_user, IsOk());
  EXPECT_EQ(over_user->violations, kUserUnitLimit);
  EXPECT_EQ(over_user->expire_time, kT0 + absl::Seconds(10));
  auto fits = PlaceIn("bob", "c2", "event:C", 3, LevelLimits{}, kT0, 8);
  ASSERT_THAT(fits, IsOk());
  EXPECT_EQ(fits->outcome, Outcome::kCreated);
  EXPECT_EQ(fits->user_units, 8);
  EXPECT_EQ(fits->scope_units, 3);
  // Refused calls recorded nothing: exactly the created holds are live.
  std::vector<std::string> alice, bob;
  for (const StoredHold& h : List("alice", kT0 + absl::Seconds(5))) alice.push_back(h.order_id);
  for (const StoredHold& h : List("bob", kT0 + absl::Seconds(5))) bob.push_back(h.order_id);
  EXPECT_THAT(alice, ElementsAre("a1", "a2", "b1"));
  EXPECT_THAT(bob, UnorderedElementsAre("b2", "c2"));
  // A lowered limit ends nothing; it only refuses: scope A at 1 with two live holds.
  auto lowered = PlaceIn("alice", "a5", "event:A", 1, LevelLimits{1, 0}, kT0 + absl::Seconds(5));
  ASSERT_THAT(lowered, IsOk());
  EXPECT_EQ(lowered->outcome, Outcome::kLimitReached);
  EXPECT_EQ(List("alice", kT0 + absl::Seconds(5)).size(), 3u);
  // Expired holds stop counting at every level.
  auto after = PlaceIn("alice", "a6", "event:A", 1, two, kT0 + absl::Seconds(11));
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->outcome, Outcome::kCreated);
  EXPECT_EQ(after->expired_removed, 2);  // a1, a2 (b1 expires at 13 s)
  EXPECT_EQ(after->scope_holds, 1);
}

// A hold keeps what it was placed with (scope, quantity, labels, the scope limits, the place
// time), listed, on a retry, and after it ended while its outcome is remembered.
TEST_P(HoldStoreContractTest, DetailsArePlacedOnceAndKeptUntilTheOutcomeIsForgotten) {
  const Labels labels = {{"seat", "12:A\n{x}"}, {"section", "B"}, {"z.-_9", ""}};
  auto placed = PlaceIn("alice", "o1", "tenant:T1/event:E42", 3, LevelLimits{2, 8}, kT0, 0, labels);
  ASSERT_THAT(placed, IsOk());
  HoldDetails expected;
  expected.scope = "tenant:T1/event:E42";
  expected.quantity = 3;
  expected.labels = labels;
  expected.scope_limits = LevelLimits{2, 8};
  expected.place_time = kT0;
  expected.max_expire_time = kT0 + absl::Hours(2);  // PlaceHoldArgs::max_lifetime's default
  EXPECT_EQ(placed->details, expected);
  ASSERT_THAT(Place("alice", "plain", absl::Seconds(5), kT0), IsOk());
  HoldDetails plain;  // a plain hold has no details, but a life record: place time and cap
  plain.place_time = kT0;
  plain.max_expire_time = kT0 + absl::Hours(2);
  EXPECT_THAT(ListFull("alice", kT0 + absl::Seconds(1)),
              ElementsAre(StoredHold{"plain", kT0 + absl::Seconds(5), plain},
                          StoredHold{"o1", kT0 + absl::Seconds(10), expected}));
  // A retry gets the existing hold's details back (the caller compares them with its own).
  auto retry = PlaceIn("alice", "o1", "other", 1, LevelLimits{}, kT0 + absl::Seconds(2));
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->outcome, Outcome::kAlreadyHeld);
  EXPECT_EQ(retry->details, expected);
  auto paid = End("alice", "o1", kT0 + absl::Seconds(3));
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->details, expected);
  auto again = End("alice", "o1", kT0 + absl::Seconds(4));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(again->details, expected);
  // Expired by a later call, the hold still reads with its details.
  auto expired = End("alice", "plain", kT0 + absl::Seconds(6));
  ASSERT_THAT(expired, IsOk());
  EXPECT_EQ(expired->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(expired->end.outcome, HoldOutcome::kExpired);
  EXPECT_EQ(expired->details, plain);
}

// An order placed again after its outcome was forgotten gets its new details, not the old ones,
// and keeps them when the old record is trimmed.
TEST_P(HoldStoreContractTest, OrderPlacedAgainAfterRetentionHasItsNewDetails) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 10});
  ASSERT_NE(store_, nullptr);
  ASSERT_THAT(PlaceIn("alice", "o1", "event:A", 2, LevelLimits{}, kT0), IsOk());
  ASSERT_THAT(End("alice", "o1", kT0 + absl::Seconds(1)), IsOk());
  const absl::Time later = kT0 + absl::Hours(2);
  auto again = PlaceIn("alice", "o1", "event:B", 4, LevelLimits{}, later);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->outcome, Outcome::kCreated);
  std::vector<StoredHold> holds = ListFull("alice", later);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0].details.scope, "event:B");
  EXPECT_EQ(holds[0].details.quantity, 4);
  EXPECT_EQ(holds[0].details.place_time, later);
  auto paid = End("alice", "o1", later + absl::Seconds(1));
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(paid->details.scope, "event:B");
}

// Events carry the hold's details, whoever ended it (Pay, the reaper), so an expiry consumer can
// release seats without a lookup.
TEST_P(HoldEventLogContractTest, EventsCarryTheHoldsDetails) {
  auto* log = dynamic_cast<HoldEventLog*>(store_.get());
  if (log == nullptr) GTEST_SKIP() << "the fake store has no event log";
  const int p = KeySchema::PartitionOf("carol");
  ASSERT_THAT(Await<bool>([&](auto done) {
                log->EnsureGroup(p, "details", GroupStart::kLatest, At(kT0), std::move(done));
              }),
              IsOk());
  const Labels seats = {{"seats", "A1,A2"}};
  ASSERT_THAT(PlaceIn("carol", "paid", "event:E1", 2, LevelLimits{}, kT0, 0, seats), IsOk());
  ASSERT_THAT(PlaceIn("carol", "expires", "event:E1", 1, LevelLimits{4, 0}, kT0, 0, {}), IsOk());
  ASSERT_THAT(Place("carol", "plain", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(End("carol", "paid", kT0 + absl::Seconds(1), HoldOutcome::kPaid, "pi_3N1"), IsOk());
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(11)), ::testing::SizeIs(2));
  auto events = EventsOf(Await<EventBatch>([&](auto done) {
    log->ReadEvents(p, ReadEventsArgs{"details", "c", 10, std::nullopt, false, "", ""}, At(kT0),
                    std::move(done));
  }));
  ASSERT_THAT(events, IsOk());
  std::map<std::string, HoldDetails> by_order;
  std::map<std::string, std::string> references;
  for (const StoredEvent& e : *events) {
    if (e.user_id != "carol") continue;
    by_order[e.order_id] = e.details;
    references[e.order_id] = e.end.payment_reference;
  }
  ASSERT_EQ(by_order.size(), 3u);
  EXPECT_THAT(references, ElementsAre(std::pair<const std::string, std::string>("expires", ""),
                                      std::pair<const std::string, std::string>("paid", "pi_3N1"),
                                      std::pair<const std::string, std::string>("plain", "")));
  EXPECT_EQ(by_order["paid"].labels, seats);
  EXPECT_EQ(by_order["paid"].quantity, 2);
  EXPECT_EQ(by_order["paid"].scope, "event:E1");
  EXPECT_EQ(by_order["paid"].place_time, kT0);
  EXPECT_EQ(by_order["expires"].scope_limits, (LevelLimits{4, 0}));
  EXPECT_EQ(by_order["plain"].quantity, 1);
  EXPECT_EQ(by_order["plain"].scope, "");
}

// A return appends one RETURNED event with its units, the hold's details and its payment
// reference; its retry appends none. On every Redis mode (a Cluster records the return and its
// event; it keeps no sold counts).
TEST_P(HoldEventLogContractTest, AReturnAppendsOneReturnedEventAndItsRetryNone) {
  auto* log = dynamic_cast<HoldEventLog*>(store_.get());
  if (log == nullptr) GTEST_SKIP() << "the fake store has no event log";
  const int p = KeySchema::PartitionOf("dora");
  ASSERT_THAT(Await<bool>([&](auto done) {
                log->EnsureGroup(p, "returns", GroupStart::kLatest, At(kT0), std::move(done));
              }),
              IsOk());
  ASSERT_THAT(PlaceIn("dora", "paid", "event:E2", 3, LevelLimits{}, kT0, 0, {}), IsOk());
  ASSERT_THAT(End("dora", "paid", kT0 + absl::Seconds(1), HoldOutcome::kPaid, "pi_9"), IsOk());
  for (int i = 0; i < 2; ++i) {  // the second is a retry
    auto returned = Await<ReturnUnitsResult>([&](auto done) {
      store_->ReturnUnits(ReturnUnitsArgs{"dora", "paid", 2, "refund-1"},
                          At(kT0 + absl::Seconds(2)), std::move(done));
    });
    ASSERT_THAT(returned, IsOk());
    EXPECT_EQ(returned->result, i == 0 ? ReturnUnitsResult::Result::kReturned
                                       : ReturnUnitsResult::Result::kAlreadyReturned);
  }
  auto events = EventsOf(Await<EventBatch>([&](auto done) {
    log->ReadEvents(p, ReadEventsArgs{"returns", "c", 10, std::nullopt, false, "", ""}, At(kT0),
                    std::move(done));
  }));
  ASSERT_THAT(events, IsOk());
  std::vector<StoredEvent> dora;
  for (StoredEvent& e : *events) {
    if (e.user_id == "dora") dora.push_back(std::move(e));
  }
  ASSERT_EQ(dora.size(), 2u);
  EXPECT_EQ(dora[0].end.outcome, HoldOutcome::kPaid);
  EXPECT_EQ(dora[0].returned_units, 0);
  EXPECT_EQ(dora[1].end.outcome, HoldOutcome::kReturned);
  EXPECT_EQ(dora[1].returned_units, 2);
  EXPECT_EQ(dora[1].order_id, "paid");
  EXPECT_EQ(dora[1].end.payment_reference, "pi_9");
  EXPECT_EQ(dora[1].end.end_time, kT0 + absl::Seconds(2));
  EXPECT_EQ(dora[1].details.quantity, 3);
  EXPECT_EQ(dora[1].details.scope, "event:E2");
}

using ExtendResult = ExtendHoldResult::Result;

// New expiry = max(expire, min(now + ttl, cap)): moved, kept, cut at the cap; the due index (the
// reaper) follows the new time.
TEST_P(HoldStoreContractTest, ExtendHoldMovesUpToTheCapAndNeverShortens) {
  auto placed = PlaceCapped("alice", "o1", absl::Seconds(10), absl::Seconds(60), kT0);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->details.place_time, kT0);
  EXPECT_EQ(placed->details.max_expire_time, kT0 + absl::Seconds(60));
  EXPECT_EQ(placed->details.extensions, 0);

  auto moved = Extend("alice", "o1", absl::Seconds(20), kT0 + absl::Seconds(5));
  ASSERT_THAT(moved, IsOk());
  EXPECT_EQ(moved->result, ExtendResult::kLive);
  EXPECT_TRUE(moved->extended);
  EXPECT_FALSE(moved->capped);
  EXPECT_EQ(moved->now, kT0 + absl::Seconds(5));
  EXPECT_EQ(moved->hold.order_id, "o1");
  EXPECT_EQ(moved->hold.expire_time, kT0 + absl::Seconds(25));
  EXPECT_EQ(moved->hold.details.extensions, 1);
  EXPECT_EQ(moved->hold.details.max_expire_time, kT0 + absl::Seconds(60));
  EXPECT_EQ(moved->hold.details.place_time, kT0);
  std::vector<StoredHold> listed = ListFull("alice", kT0 + absl::Seconds(6));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0], moved->hold);

  // Shorter than what is left: nothing moves, nothing counts.
  auto kept = Extend("alice", "o1", absl::Seconds(5), kT0 + absl::Seconds(6));
  ASSERT_THAT(kept, IsOk());
  EXPECT_EQ(kept->result, ExtendResult::kLive);
  EXPECT_FALSE(kept->extended);
  EXPECT_FALSE(kept->capped);
  EXPECT_EQ(kept->hold.expire_time, kT0 + absl::Seconds(25));
  EXPECT_EQ(kept->hold.details.extensions, 1);

  // The original expiry passes: the reaper does not end it (the due index moved).
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(11)), IsEmpty());

  // Past the cap: cut at it, then no further.
  auto capped = Extend("alice", "o1", absl::Seconds(50), kT0 + absl::Seconds(20));
  ASSERT_THAT(capped, IsOk());
  EXPECT_TRUE(capped->extended);
  EXPECT_TRUE(capped->capped);
  EXPECT_EQ(capped->hold.expire_time, kT0 + absl::Seconds(60));
  EXPECT_EQ(capped->hold.details.extensions, 2);
  auto at_cap = Extend("alice", "o1", absl::Seconds(30), kT0 + absl::Seconds(55));
  ASSERT_THAT(at_cap, IsOk());
  EXPECT_FALSE(at_cap->extended);
  EXPECT_TRUE(at_cap->capped);
  EXPECT_EQ(at_cap->hold.expire_time, kT0 + absl::Seconds(60));
  EXPECT_EQ(at_cap->hold.details.extensions, 2);

  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(59)), IsEmpty());
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(60)), ElementsAre(kT0 + absl::Seconds(60)));
}

// A ttl beyond the lifetime makes the hold's own expiry its cap: max_expire_time is never before
// expire_time, and such a hold cannot be extended.
TEST_P(HoldStoreContractTest, AHoldLongerThanTheLifetimeIsCappedAtItsExpiry) {
  auto placed = PlaceCapped("alice", "long", absl::Seconds(60), absl::Seconds(10), kT0);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->details.max_expire_time, kT0 + absl::Seconds(60));
  auto extended = Extend("alice", "long", absl::Seconds(90), kT0 + absl::Seconds(1));
  ASSERT_THAT(extended, IsOk());
  EXPECT_FALSE(extended->extended);
  EXPECT_TRUE(extended->capped);
  EXPECT_EQ(extended->hold.expire_time, kT0 + absl::Seconds(60));
}

// Instants are written into records and scores as integers whatever their size. Lua formats a
// number it concatenates with '%.14g', exact to 14 digits only; Unix ms have 15 from the year
// 5138 on. A hold placed, extended, listed, ended and expired there keeps every instant exactly.
TEST_P(HoldStoreContractTest, FifteenDigitInstantsAreKeptExactly) {
  const absl::Time t0 = absl::FromUnixMillis(100'000'000'000'123);
  auto placed = PlaceIn("alice", "o1", "event:E1", 2, LevelLimits{2, 8}, t0);
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->outcome, Outcome::kCreated);
  EXPECT_EQ(placed->expire_time, t0 + absl::Seconds(10));
  EXPECT_EQ(placed->details.place_time, t0);
  EXPECT_EQ(placed->details.max_expire_time, t0 + absl::Hours(2));
  EXPECT_EQ(placed->details.quantity, 2);
  ASSERT_THAT(Place("alice", "plain", absl::Seconds(5), t0), IsOk());

  auto extended = Extend("alice", "o1", absl::Seconds(20), t0 + absl::Seconds(1));
  ASSERT_THAT(extended, IsOk());
  EXPECT_TRUE(extended->extended);
  EXPECT_EQ(extended->hold.expire_time, t0 + absl::Seconds(21));
  EXPECT_EQ(extended->hold.details.place_time, t0);
  EXPECT_EQ(extended->hold.details.extensions, 1);
  HoldDetails plain;
  plain.place_time = t0;
  plain.max_expire_time = t0 + absl::Hours(2);
  EXPECT_THAT(ListFull("alice", t0 + absl::Seconds(2)),
              ElementsAre(StoredHold{"plain", t0 + absl::Seconds(5), plain}, extended->hold));

  auto paid = End("alice", "o1", t0 + absl::Seconds(3));
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->end,
            (HoldEnd{HoldOutcome::kPaid, t0 + absl::Seconds(3), t0 + absl::Seconds(21)}));
  EXPECT_EQ(paid->details, extended->hold.details);
  EXPECT_THAT(ReapAll(t0 + absl::Seconds(6)), ElementsAre(t0 + absl::Seconds(5)));
  auto expired = Get("alice", "plain", t0 + absl::Seconds(7));
  ASSERT_THAT(expired, IsOk());
  EXPECT_EQ(expired->state, GetHoldResult::State::kEnded);
  EXPECT_EQ(expired->end,
            (HoldEnd{HoldOutcome::kExpired, t0 + absl::Seconds(5), t0 + absl::Seconds(5)}));
  EXPECT_EQ(expired->hold, (StoredHold{"plain", t0 + absl::Seconds(5), plain}));
}

// A due order answers EXPIRED from itself even when the per-user cap trims its fresh record.
TEST_P(HoldStoreContractTest, ADueOrderAnswersExpiredWhateverTheRecordCapKeeps) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 1});
  ASSERT_NE(store_, nullptr);
  ASSERT_THAT(Place("alice", "a", absl::Seconds(5), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(10), kT0), IsOk());
  auto extended = Extend("alice", "a", absl::Seconds(30), kT0 + absl::Seconds(11));
  ASSERT_THAT(extended, IsOk());
  EXPECT_EQ(extended->result, ExtendResult::kEnded);
  EXPECT_EQ(extended->end.outcome, HoldOutcome::kExpired);
  EXPECT_EQ(extended->expired_removed, 2);
}

// A call answers from the order's record as it stood before the call's own cleanup, even when that
// cleanup (another hold expiring, with --max_outcomes_per_user 1) drops the record: a cancelled
// order is not placed again, and a repeated Cancel says it was cancelled. Found by the property
// test (tests/property/): the fake answered after its cleanup, so it placed a cancelled order.
TEST_P(HoldStoreContractTest, ACallAnswersFromTheRecordItsOwnCleanupDrops) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 1});
  ASSERT_NE(store_, nullptr);
  ASSERT_THAT(Place("alice", "a", absl::Seconds(60), kT0), IsOk());
  ASSERT_THAT(End("alice", "a", kT0, HoldOutcome::kCancelled), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(2), kT0), IsOk());
  ASSERT_THAT(Place("alice", "c", absl::Seconds(4), kT0), IsOk());
  // b is due: PlaceHold of a ends b (its record replaces a's under the cap) and answers a's end.
  auto placed = Place("alice", "a", absl::Seconds(60), kT0 + absl::Seconds(2));
  ASSERT_THAT(placed, IsOk());
  EXPECT_EQ(placed->outcome, PlaceHoldResult::Outcome::kEnded);
  EXPECT_EQ(placed->ended.outcome, HoldOutcome::kCancelled);
  EXPECT_EQ(placed->expired_removed, 1);
  // c is due: Cancel of b answers b's EXPIRED record, which c's replaces.
  auto cancelled = End("alice", "b", kT0 + absl::Seconds(4), HoldOutcome::kCancelled);
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(cancelled->end.outcome, HoldOutcome::kExpired);
  EXPECT_EQ(cancelled->end.end_time, kT0 + absl::Seconds(2));
  EXPECT_EQ(cancelled->expired_removed, 1);
  // Now b is forgotten.
  auto again = End("alice", "b", kT0 + absl::Seconds(4), HoldOutcome::kCancelled);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->result, EndHoldResult::Result::kUnknown);
}

// One call may trim thousands of outcome records at once (here a ReleaseHolds after the retention
// of 2,700 ended orders): 3 fields each (record, details, life), past the 8,000 values Lua's
// unpack takes in one call. The scripts drop them in chunks.
TEST_P(HoldStoreContractTest, ACallThatTrimsThousandsOfRecordsDropsThemAll) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 10000});
  ASSERT_NE(store_, nullptr);
  constexpr int kOrders = 2700;
  for (int i = 0; i < kOrders; ++i) {
    const std::string order = absl::StrCat("o", i);
    ASSERT_THAT(Place("many", order, absl::Seconds(60), kT0), IsOk());
    auto paid = End("many", order, kT0);
    ASSERT_THAT(paid, IsOk());
    ASSERT_EQ(paid->result, EndHoldResult::Result::kEnded);
  }
  const absl::Time later = kT0 + absl::Hours(2);
  ASSERT_THAT(Place("many", "live", absl::Seconds(60), later), IsOk());
  auto released = Release("many", "", later);
  ASSERT_THAT(released, IsOk());
  ASSERT_EQ(released->released.size(), 1u);
  auto forgotten = Get("many", "o0", later);
  ASSERT_THAT(forgotten, IsOk());
  EXPECT_EQ(forgotten->state, GetHoldResult::State::kUnknown);
  auto placed_again = Place("many", "o1", absl::Seconds(60), later);  // forgotten: placeable
  ASSERT_THAT(placed_again, IsOk());
  EXPECT_EQ(placed_again->outcome, Outcome::kCreated);
}

// Moving a user's earliest hold later keeps the due index at the user's new earliest expiry.
TEST_P(HoldStoreContractTest, ExtendingTheEarliestHoldKeepsTheOthersReapable) {
  ASSERT_THAT(Place("bob", "early", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("bob", "late", absl::Seconds(20), kT0), IsOk());
  auto moved = Extend("bob", "early", absl::Seconds(60), kT0 + absl::Seconds(1));
  ASSERT_THAT(moved, IsOk());
  EXPECT_EQ(moved->hold.expire_time, kT0 + absl::Seconds(61));
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(20)), ElementsAre(kT0 + absl::Seconds(20)));
  EXPECT_THAT(List("bob", kT0 + absl::Seconds(20)),
              ElementsAre(StoredHold{"early", kT0 + absl::Seconds(61), {}}));
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(61)), ElementsAre(kT0 + absl::Seconds(61)));
}

// --max_extensions counts calls that moved the expiry; a request_id counts once.
TEST_P(HoldStoreContractTest, ExtensionsAreCountedOncePerRequestIdAndRefusedWhenUsedUp) {
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(10), kT0), IsOk());
  absl::Time now = kT0;
  auto extend = [&](const std::string& id, absl::Duration ttl = absl::Seconds(30)) {
    now += absl::Seconds(1);
    return Extend("alice", "o1", ttl, now, id, /*max_extensions=*/2);
  };
  auto first = extend("r1");
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(first->extended);
  EXPECT_EQ(first->hold.details.extensions, 1);
  auto retried = extend("r1");  // a replay: answers as the call it repeats, changes nothing
  ASSERT_THAT(retried, IsOk());
  EXPECT_EQ(retried->result, ExtendResult::kLive);
  EXPECT_TRUE(retried->extended);
  EXPECT_TRUE(retried->replayed);
  EXPECT_FALSE(first->replayed);
  EXPECT_EQ(retried->hold.expire_time, first->hold.expire_time);
  EXPECT_EQ(retried->hold.details.extensions, 1);
  auto second = extend("r2");
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->hold.details.extensions, 2);
  const absl::Time expire = second->hold.expire_time;
  for (const std::string id : {"r3", ""}) {
    auto refused = extend(id);
    ASSERT_THAT(refused, IsOk());
    EXPECT_EQ(refused->result, ExtendResult::kExhausted) << id;
    EXPECT_EQ(refused->hold.expire_time, expire);
    EXPECT_EQ(refused->hold.details.extensions, 2);
  }
  // A call that would not move the expiry is not refused: it changes nothing.
  auto short_one = extend("r4", absl::Seconds(1));
  ASSERT_THAT(short_one, IsOk());
  EXPECT_EQ(short_one->result, ExtendResult::kLive);
  EXPECT_FALSE(short_one->extended);
  // A counted request_id is still a replay once used up: answered, not refused, not moved.
  auto retry_of_second = extend("r2");
  ASSERT_THAT(retry_of_second, IsOk());
  EXPECT_EQ(retry_of_second->result, ExtendResult::kLive);
  EXPECT_TRUE(retry_of_second->extended);
  EXPECT_TRUE(retry_of_second->replayed);
  EXPECT_EQ(retry_of_second->hold.expire_time, expire);
  EXPECT_EQ(retry_of_second->hold.details.extensions, 2);
  EXPECT_THAT(List("alice", now), ElementsAre(StoredHold{"o1", expire, {}}));
}

// Extending never resurrects a hold: one past its expiry is ended EXPIRED by the call, and the
// answer is the same before and after the reaper; paid, cancelled and unknown orders too.
TEST_P(HoldStoreContractTest, ExtendHoldOfAnEndedHoldAnswersItsEnd) {
  ASSERT_THAT(Place("alice", "due", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("bob", "due", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("bob", "paid", absl::Seconds(30), kT0), IsOk());
  ASSERT_THAT(End("bob", "paid", kT0 + absl::Seconds(1)), IsOk());
  const absl::Time at_expiry = kT0 + absl::Seconds(10);
  auto first = Extend("alice", "due", absl::Seconds(30), at_expiry);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->result, ExtendResult::kEnded);
  EXPECT_EQ(first->end, (HoldEnd{HoldOutcome::kExpired, at_expiry, at_expiry}));
  EXPECT_EQ(first->expired_removed, 1);
  auto again = Extend("alice", "due", absl::Seconds(30), at_expiry + absl::Seconds(1));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->end, first->end);
  EXPECT_EQ(again->expired_removed, 0);
  EXPECT_THAT(ReapAll(at_expiry + absl::Seconds(1)), ElementsAre(at_expiry));  // bob's only
  auto reaped = Extend("bob", "due", absl::Seconds(30), at_expiry + absl::Seconds(2));
  ASSERT_THAT(reaped, IsOk());
  EXPECT_EQ(reaped->end, first->end);
  auto paid = Extend("bob", "paid", absl::Seconds(30), at_expiry + absl::Seconds(2));
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->result, ExtendResult::kEnded);
  EXPECT_EQ(paid->end.outcome, HoldOutcome::kPaid);
  EXPECT_EQ(paid->end.end_time, kT0 + absl::Seconds(1));
  auto unknown = Extend("bob", "never", absl::Seconds(30), at_expiry);
  ASSERT_THAT(unknown, IsOk());
  EXPECT_EQ(unknown->result, ExtendResult::kUnknown);
  EXPECT_THAT(List("alice", at_expiry), IsEmpty());
}

// GetHold reads what Pay/Cancel's outcome memory says, before and after the reaper.
TEST_P(HoldStoreContractTest, GetHoldAgreesWithTheOutcomeMemoryBeforeAndAfterTheReaper) {
  store_ = Factories::Get(GetParam()).Make(OutcomePolicy{absl::Hours(1), 10});
  ASSERT_NE(store_, nullptr);
  using State = GetHoldResult::State;
  ASSERT_THAT(PlaceIn("alice", "live", "event:A", 2, LevelLimits{}, kT0), IsOk());
  for (const char* order : {"paid", "cancelled", "expired"}) {
    auto placed = Place("alice", order, absl::Seconds(5), kT0, /*max_holds=*/4);
    ASSERT_THAT(placed, IsOk());
    ASSERT_EQ(placed->outcome, Outcome::kCreated) << order;
  }
  ASSERT_THAT(End("alice", "paid", kT0 + absl::Seconds(1)), IsOk());
  ASSERT_THAT(End("alice", "cancelled", kT0 + absl::Seconds(2), HoldOutcome::kCancelled), IsOk());
  const absl::Time t = kT0 + absl::Seconds(6);  // "expired" is due, not reaped
  auto check = [&](absl::Time now) {
    auto live = Get("alice", "live", now);
    ASSERT_THAT(live, IsOk());
    EXPECT_EQ(live->state, State::kLive);
    EXPECT_EQ(live->now, now);
    EXPECT_EQ(live->hold.expire_time, kT0 + absl::Seconds(10));
    EXPECT_EQ(live->hold.details.scope, "event:A");
    EXPECT_EQ(live->hold.details.quantity, 2);
    EXPECT_EQ(live->hold.details.max_expire_time, kT0 + absl::Hours(2));
    const std::pair<const char*, HoldEnd> ended[] = {
        {"paid", {HoldOutcome::kPaid, kT0 + absl::Seconds(1), kT0 + absl::Seconds(5)}},
        {"cancelled", {HoldOutcome::kCancelled, kT0 + absl::Seconds(2), kT0 + absl::Seconds(5)}},
        {"expired", {HoldOutcome::kExpired, kT0 + absl::Seconds(5), kT0 + absl::Seconds(5)}},
    };
    for (const auto& [order, end] : ended) {
      auto got = Get("alice", order, now);
      ASSERT_THAT(got, IsOk());
      EXPECT_EQ(got->state, State::kEnded) << order;
      EXPECT_EQ(got->end, end) << order;
      EXPECT_EQ(got->hold.expire_time, end.expire_time) << order;
      EXPECT_EQ(got->hold.details.place_time, kT0) << order;
    }
    auto unknown = Get("alice", "never", now);
    ASSERT_THAT(unknown, IsOk());
    EXPECT_EQ(unknown->state, State::kUnknown);
  };
  check(t);
  EXPECT_THAT(ReapAll(t), ElementsAre(kT0 + absl::Seconds(5)));
  check(t);
  // Pay's memory agrees.
  auto expired = End("alice", "expired", t);
  ASSERT_THAT(expired, IsOk());
  EXPECT_EQ(expired->end.outcome, HoldOutcome::kExpired);
  // After the retention, ended orders are forgotten.
  auto forgotten = Get("alice", "paid", kT0 + absl::Hours(1) + absl::Seconds(1));
  ASSERT_THAT(forgotten, IsOk());
  EXPECT_EQ(forgotten->state, State::kUnknown);
}

// ReleaseHolds ends the live holds of a user (or one scope) CANCELLED, expired ones EXPIRED
// (unlisted), leaves paid ones alone, and a second call releases nothing.
TEST_P(HoldStoreContractTest, ReleaseHoldsEndsTheUsersLiveHoldsOnce) {
  ASSERT_THAT(PlaceIn("alice", "a", "event:A", 1, LevelLimits{}, kT0), IsOk());
  ASSERT_THAT(PlaceIn("alice", "b", "event:B", 2, LevelLimits{}, kT0), IsOk());
  ASSERT_THAT(Place("alice", "c", absl::Seconds(2), kT0), IsOk());
  ASSERT_THAT(Place("bob", "x", absl::Seconds(10), kT0), IsOk());
  const absl::Time t = kT0 + absl::Seconds(3);
  auto scoped = Release("alice", "event:A", t);
  ASSERT_THAT(scoped, IsOk());
  ASSERT_EQ(scoped->released.size(), 1u);
  EXPECT_EQ(scoped->released[0].order_id, "a");
  EXPECT_EQ(scoped->released[0].expire_time, kT0 + absl::Seconds(10));
  EXPECT_EQ(scoped->released[0].details.scope, "event:A");
  EXPECT_EQ(scoped->expired_removed, 1);  // "c", ended EXPIRED on the way
  auto all = Release("alice", "", t + absl::Seconds(1));
  ASSERT_THAT(all, IsOk());
  ASSERT_EQ(all->released.size(), 1u);
  EXPECT_EQ(all->released[0].order_id, "b");
  EXPECT_EQ(all->released[0].details.quantity, 2);
  EXPECT_EQ(all->expired_removed, 0);
  auto again = Release("alice", "", t + absl::Seconds(2));
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(again->released, IsEmpty());
  EXPECT_THAT(List("alice", t + absl::Seconds(2)), IsEmpty());
  EXPECT_EQ(List("bob", t).size(), 1u);  // another user's holds stay
  auto a = Get("alice", "a", t + absl::Seconds(2));
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->end, (HoldEnd{HoldOutcome::kCancelled, t, kT0 + absl::Seconds(10)}));
  auto c = Get("alice", "c", t + absl::Seconds(2));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->end.outcome, HoldOutcome::kExpired);
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(11)), ElementsAre(kT0 + absl::Seconds(10)));  // bob's
  // The slots are free again.
  for (const char* order : {"d", "e", "f"}) {
    auto placed = Place("alice", order, absl::Seconds(10), t);
    ASSERT_THAT(placed, IsOk());
    EXPECT_EQ(placed->outcome, Outcome::kCreated);
  }
}

TEST_P(PartitionStoreContractTest, LeaseFencesReapersAndRegistryListsLiveReplicas) {
  const int partition = 1;
  auto first = ReapAs(partition, "replica-a", kT0);
  ASSERT_THAT(first, IsOk());
  EXPECT_FALSE(first->not_owner);
  auto other = ReapAs(partition, "replica-b", kT0);
  ASSERT_THAT(other, IsOk());
  EXPECT_TRUE(other->not_owner);
  auto released = Await<bool>([&](auto done) {
    partitions().ReleaseLease(partition, "replica-a", At(kT0), std::move(done));
  });
  ASSERT_THAT(released, IsOk());
  EXPECT_TRUE(*released);
  auto taken = ReapAs(partition, "replica-b", kT0);
  ASSERT_THAT(taken, IsOk());
  EXPECT_FALSE(taken->not_owner);

  // Standby: reaps only what is overdue by standby_after, whoever holds the lease.
  ASSERT_THAT(Place("zed", "o", absl::Seconds(1), kT0), IsOk());
  const int zed = [&] {
    for (int s = 0; s < partitions().partition_count(); ++s) {
      auto r = Await<ReapResult>([&](auto done) {
        partitions().Reap(s, ReapArgs{100, "", {}, absl::Hours(1)}, At(kT0), std::move(done));
      });
      if (r.ok() && r->oldest_due.has_value()) return s;  // the only partition with a hold
    }
    return -1;
  }();
  ASSERT_GE(zed, 0);
  auto standby = [&](absl::Time now) {
    return Await<ReapResult>([&](auto done) {
      partitions().Reap(zed, ReapArgs{100, "", {}, absl::Seconds(1)}, At(now), std::move(done));
    });
  };
  auto early = standby(kT0 + absl::Milliseconds(1500));  // 0.5 s overdue
  ASSERT_THAT(early, IsOk());
  EXPECT_TRUE(early->not_owner);
  EXPECT_TRUE(early->reaped_expire_times.empty());
  auto late = standby(kT0 + absl::Milliseconds(2500));  // 1.5 s overdue
  ASSERT_THAT(late, IsOk());
  EXPECT_FALSE(late->not_owner);
  EXPECT_THAT(late->reaped_expire_times, ElementsAre(kT0 + absl::Seconds(1)));

  auto beat = [&](const std::string& id, absl::Time now) {
    auto live = Await<std::vector<std::string>>(
        [&](auto done) { partitions().Heartbeat(id, absl::Seconds(3), At(now), std::move(done)); });
    EXPECT_THAT(live, IsOk());
    return live.ok() ? *live : std::vector<std::string>{};
  };
  EXPECT_THAT(beat("r2", kT0), ElementsAre("r2"));
  EXPECT_THAT(beat("r1", kT0 + absl::Seconds(1)), ElementsAre("r1", "r2"));
  EXPECT_THAT(beat("r1", kT0 + absl::Seconds(3)), ElementsAre("r1"));  // r2 timed out
  ASSERT_THAT(
      Await<bool>([&](auto done) { partitions().Unregister("r1", At(kT0), std::move(done)); }),
      IsOk());
  EXPECT_THAT(beat("r3", kT0 + absl::Seconds(3)), ElementsAre("r3"));
}

// A peek (max_users 0, the reaper's look at a partition before it calls: reaper.h) takes the
// lease as a call does, reports the oldest hold and ends nothing.
TEST_P(PartitionStoreContractTest, APeekTakesTheLeaseReportsTheOldestAndEndsNothing) {
  ASSERT_THAT(Place("zed", "o", absl::Seconds(1), kT0), IsOk());
  auto peek = [&](int partition, const std::string& owner, absl::Time now) {
    return Await<ReapResult>([&](auto done) {
      partitions().Reap(partition, ReapArgs{0, owner, absl::Seconds(30), std::nullopt}, At(now),
                        std::move(done));
    });
  };
  int zed = -1;
  for (int s = 0; s < partitions().partition_count(); ++s) {
    auto r = peek(s, "replica-a", kT0 + absl::Seconds(2));
    ASSERT_THAT(r, IsOk());
    EXPECT_FALSE(r->not_owner);
    EXPECT_FALSE(r->more);
    EXPECT_THAT(r->reaped_expire_times, IsEmpty());
    if (r->oldest_due.has_value()) {
      EXPECT_EQ(zed, -1) << "one partition has a hold";
      EXPECT_EQ(*r->oldest_due, kT0 + absl::Seconds(1));
      zed = s;
    }
  }
  ASSERT_GE(zed, 0);
  // The hold is still live to the store's readers until a call ends it.
  EXPECT_THAT(List("zed", kT0), ElementsAre(StoredHold{"o", kT0 + absl::Seconds(1), {}}));
  auto other = peek(zed, "replica-b", kT0 + absl::Seconds(2));
  ASSERT_THAT(other, IsOk());
  EXPECT_TRUE(other->not_owner);  // replica-a's peek took the lease
  auto reaped = ReapAs(zed, "replica-a", kT0 + absl::Seconds(2));
  ASSERT_THAT(reaped, IsOk());
  EXPECT_THAT(reaped->reaped_expire_times, ElementsAre(kT0 + absl::Seconds(1)));
  auto after = peek(zed, "replica-a", kT0 + absl::Seconds(2));
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->oldest_due, std::nullopt);
  auto negative = Await<ReapResult>([&](auto done) {
    partitions().Reap(zed, ReapArgs{-1, "", {}, std::nullopt}, At(kT0), std::move(done));
  });
  EXPECT_THAT(negative, ::orderhold::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(HoldStoreContractTest, EndHoldEndsLiveHoldOnceAndRetriesSeeTheOutcome) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(10), kT0), IsOk());
  auto paid = End("alice", "a", kT0 + absl::Seconds(3));
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->result, EndHoldResult::Result::kEnded);
  EXPECT_EQ(paid->end,
            (HoldEnd{HoldOutcome::kPaid, kT0 + absl::Seconds(3), kT0 + absl::Seconds(10)}));
  EXPECT_EQ(paid->now, kT0 + absl::Seconds(3));
  auto again = End("alice", "a", kT0 + absl::Seconds(4));
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->result, EndHoldResult::Result::kAlreadyEnded);
  EXPECT_EQ(again->end, paid->end);
  auto never = End("alice", "zzz", kT0);
  ASSERT_THAT(never, IsOk());
  EXPECT_EQ(never->result, EndHoldResult::Result::kUnknown);
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(3)),
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(10), {}}));
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
  EXPECT_THAT(List("alice", kT0), ElementsAre(StoredHold{"z", kT0 + absl::Seconds(5), {}},
                                              StoredHold{"x", kT0 + absl::Seconds(9), {}},
                                              StoredHold{"y", kT0 + absl::Seconds(9), {}}));
  EXPECT_THAT(List("nobody", kT0), IsEmpty());
}

TEST_P(PartitionStoreContractTest, ReapRemovesOnlyDueHoldsExactlyOnce) {
  ASSERT_THAT(Place("alice", "a", absl::Seconds(1), kT0), IsOk());
  ASSERT_THAT(Place("alice", "b", absl::Seconds(5), kT0), IsOk());
  ASSERT_THAT(Place("bob", "c", absl::Seconds(2), kT0), IsOk());
  EXPECT_THAT(ReapAll(kT0 + absl::Milliseconds(500)), IsEmpty());
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(2)),
              UnorderedElementsAre(kT0 + absl::Seconds(1), kT0 + absl::Seconds(2)));
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(2)), IsEmpty());  // nothing twice
  EXPECT_THAT(List("alice", kT0 + absl::Seconds(2)),
              ElementsAre(StoredHold{"b", kT0 + absl::Seconds(5), {}}));
  // The reaped slots are not counted as "removed" again by a later PlaceHold.
  auto place = Place("bob", "d", absl::Seconds(1), kT0 + absl::Seconds(3));
  ASSERT_THAT(place, IsOk());
  EXPECT_EQ(place->expired_removed, 0);
  EXPECT_THAT(ReapAll(kT0 + absl::Seconds(10)),
              UnorderedElementsAre(kT0 + absl::Seconds(5), kT0 + absl::Seconds(4)));
}

TEST_P(PartitionStoreContractTest, ReapWorksInBoundedBatches) {
  // 300 users over the partitions: most partitions hold more than 2 due users, so "more"
  // continuations are exercised.
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
      EXPECT_THAT(holds, ElementsAre(StoredHold{
                             absl::StrCat("order of ", user), kT0 + absl::Seconds(10), {}}))
          << user;
    }
  }
  auto paid = End("a:b", "c", kT0);  // must not reach user "a"'s order "b:c"
  ASSERT_THAT(paid, IsOk());
  EXPECT_EQ(paid->result, EndHoldResult::Result::kUnknown);
}

TEST_P(PartitionStoreContractTest, PartitionOutOfRangeIsInvalidArgument) {
  const auto invalid = ::orderhold::testing::StatusIs(absl::StatusCode::kInvalidArgument);
  for (int partition : {-1, partitions().partition_count()}) {
    SCOPED_TRACE(partition);
    EXPECT_THAT(Await<ReapResult>([&](auto done) {
                  partitions().Reap(partition, ReapArgs{100, "", {}, std::nullopt}, At(kT0),
                                    std::move(done));
                }),
                invalid);
    EXPECT_THAT(Await<bool>([&](auto done) {
                  partitions().ReleaseLease(partition, "replica-a", At(kT0), std::move(done));
                }),
                invalid);
  }
  // The event log (the Redis store's; the fake has none) promises the same for its partitions.
  auto* log = dynamic_cast<HoldEventLog*>(store_.get());
  if (log == nullptr) return;
  ASSERT_EQ(log->event_partition_count(), partitions().partition_count());
  for (int partition : {-1, log->event_partition_count()}) {
    SCOPED_TRACE(partition);
    EXPECT_THAT(Await<bool>([&](auto done) {
                  log->EnsureGroup(partition, "g", GroupStart::kEarliest, At(kT0), std::move(done));
                }),
                invalid);
    EXPECT_THAT(EventsOf(Await<EventBatch>([&](auto done) {
                  log->ReadEvents(partition,
                                  ReadEventsArgs{"g", "c", 1, std::nullopt, false, "", ""}, At(kT0),
                                  std::move(done));
                })),
                invalid);
    EXPECT_THAT(Await<int64_t>([&](auto done) {
                  log->AckEvents(partition, "g", {"1-0"}, At(kT0), std::move(done));
                }),
                invalid);
    EXPECT_THAT(Await<TrimEventsResult>(
                    [&](auto done) { log->TrimEvents(partition, kT0, At(kT0), std::move(done)); }),
                invalid);
  }
}

// CheckGroups (the safety sweep's question, check_groups.lua) on a real Redis: undelivered events,
// claimable pending ones, groups missing, and a trimmed stream; standalone, TLS and Cluster, as
// the documented ACL user.
TEST_P(HoldEventLogContractTest, EventLogCheckGroupsAndTrimBacklogReportUndeliveredAndPendingWork) {
  auto* log = dynamic_cast<HoldEventLog*>(store_.get());
  if (log == nullptr) GTEST_SKIP() << "the fake store has no event log";
  const int p = KeySchema::PartitionOf("alice");
  auto check = [&](std::optional<absl::Duration> claim_idle) {
    absl::StatusOr<std::vector<GroupWork>> work = Await<std::vector<GroupWork>>([&](auto done) {
      log->CheckGroups(p, {"g", "h", "nosuch"}, claim_idle, At(kT0), std::move(done));
    });
    EXPECT_THAT(work, IsOk());
    std::map<std::string, std::pair<bool, bool>> out;
    if (work.ok()) {
      for (const GroupWork& w : *work) out[w.group] = {w.undelivered, w.claimable};
    }
    return out;
  };
  using Work = std::map<std::string, std::pair<bool, bool>>;
  EXPECT_EQ(check(absl::ZeroDuration()), Work{});  // no stream yet
  for (const auto& group_start :
       {std::pair{"g", GroupStart::kEarliest}, std::pair{"h", GroupStart::kLatest}}) {
    ASSERT_THAT(Await<bool>([&](auto done) {
                  log->EnsureGroup(p, group_start.first, group_start.second, At(kT0),
                                   std::move(done));
                }),
                IsOk());
  }
  EXPECT_EQ(check(absl::ZeroDuration()), Work{});  // no event
  ASSERT_THAT(Place("alice", "o1", absl::Seconds(10), kT0), IsOk());
  ASSERT_THAT(End("alice", "o1", kT0), IsOk());
  EXPECT_EQ(check(absl::Hours(1)), (Work{{"g", {true, false}}, {"h", {true, false}}}));

  absl::StatusOr<std::vector<StoredEvent>> read = EventsOf(Await<EventBatch>([&](auto done) {
    log->ReadEvents(p, ReadEventsArgs{"g", "c", 10, std::nullopt, false, "", ""}, At(kT0),
                    std::move(done));
  }));
  ASSERT_THAT(read, IsOk());
  ASSERT_EQ(read->size(), 1u);
  // g: delivered, pending; claimable only once pending at least claim_idle.
  EXPECT_EQ(check(absl::ZeroDuration()), (Work{{"g", {false, true}}, {"h", {true, false}}}));
  EXPECT_EQ(check(absl::Hours(1)), (Work{{"h", {true, false}}}));
  EXPECT_EQ(check(std::nullopt), (Work{{"h", {true, false}}}));
  // TrimEvents with nothing old enough to trim skips its per-group passes but still reports each
  // group's backlog: g's pending event, h's undelivered one; after g acks, g has none.
  auto backlog = [&]() {
    std::map<std::string, bool> out;  // group -> has an oldest unacked event
    absl::StatusOr<TrimEventsResult> trim = Await<TrimEventsResult>(
        [&](auto done) { log->TrimEvents(p, absl::FromUnixMillis(1), At(kT0), std::move(done)); });
    EXPECT_THAT(trim, IsOk());
    if (!trim.ok()) return out;
    EXPECT_EQ(trim->trimmed, 0);
    for (const GroupBacklog& group : trim->groups) {
      out[group.group] = group.oldest_unacked.has_value();
    }
    return out;
  };
  EXPECT_EQ(backlog(), (std::map<std::string, bool>{{"g", true}, {"h", true}}));
  ASSERT_THAT(Await<int64_t>([&](auto done) {
                log->AckEvents(p, "g", {read->front().stream_id}, At(kT0), std::move(done));
              }),
              IsOk());
  EXPECT_EQ(check(absl::ZeroDuration()), (Work{{"h", {true, false}}}));
  EXPECT_EQ(backlog(), (std::map<std::string, bool>{{"g", false}, {"h", true}}));
  // Trimmed before h read it: nothing left to read, so no work (the trim counted it unacked).
  absl::StatusOr<TrimEventsResult> all = Await<TrimEventsResult>([&](auto done) {
    log->TrimEvents(p, absl::Now() + absl::Hours(1), At(kT0), std::move(done));
  });
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->trimmed, 1);
  EXPECT_EQ(all->trimmed_unacked, 1);  // h never got it
  for (const GroupBacklog& group : all->groups) EXPECT_FALSE(group.oldest_unacked.has_value());
  EXPECT_EQ(check(absl::ZeroDuration()), Work{});
}

TEST_P(HoldStoreContractTest, PingAnswersWithStoreTime) {
  auto now = Await<absl::Time>([&](auto done) { store_->Ping(At(kT0), std::move(done)); });
  EXPECT_THAT(now, IsOk());
}

// redis_tls: the whole contract once more over rediss://; redis_cluster: once more on a
// Redis Cluster (tests/CMakeLists.txt runs those cases as one process so the cluster
// starts once); "_" as test names allow no "-".
// ListHolds pages: each live hold of the scope once, in list order, however the pages fall; the
// usage of both levels counts every live hold whatever the page; `more` says whether a page
// follows.
TEST_P(HoldStoreContractTest, ListHoldsPagesEveryHoldOnceWithTheUsageOfAll) {
  // 7 holds: 5 in "event:A" (2 units each), 2 without a scope; two share an expiry (order_id
  // breaks the tie).
  const std::vector<std::pair<std::string, absl::Duration>> orders = {{"a1", absl::Seconds(10)},
                                                                      {"a2", absl::Seconds(20)},
                                                                      {"a3", absl::Seconds(20)},
                                                                      {"a4", absl::Seconds(30)},
                                                                      {"a5", absl::Seconds(40)}};
  for (const auto& [order, ttl] : orders) {
    PlaceHoldArgs args;
    args.user_id = "pager";
    args.order_id = order;
    args.ttl = ttl;
    args.max_holds = 10;
    args.details.scope = "event:A";
    args.details.quantity = 2;
    ASSERT_THAT(Place(std::move(args), kT0), IsOk());
  }
  ASSERT_THAT(Place("pager", "p1", absl::Seconds(15), kT0, 10), IsOk());
  ASSERT_THAT(Place("pager", "p2", absl::Seconds(50), kT0, 10), IsOk());
  auto page = [&](const std::string& scope, std::optional<ListCursor> after, int size) {
    ListHoldsArgs args;
    args.user_id = "pager";
    args.scope = scope;
    args.after = std::move(after);
    args.page_size = size;
    auto result = Await<ListHoldsResult>(
        [&](auto done) { store_->ListHolds(std::move(args), At(kT0), std::move(done)); });
    EXPECT_THAT(result, IsOk());
    return result.value_or(ListHoldsResult{});
  };
  for (const std::string scope : {"", "event:A"}) {
    for (int size : {1, 2, 3, 100}) {
      SCOPED_TRACE(absl::StrCat("scope '", scope, "' page size ", size));
      std::vector<std::string> seen;
      std::optional<ListCursor> after;
      for (int pages = 0; pages < 20; ++pages) {
        const ListHoldsResult result = page(scope, after, size);
        EXPECT_LE(static_cast<int>(result.holds.size()), size);
        EXPECT_EQ(result.user_holds, 7);
        EXPECT_EQ(result.user_units, 12);
        EXPECT_EQ(result.scope_holds, scope.empty() ? 0 : 5);
        EXPECT_EQ(result.scope_units, scope.empty() ? 0 : 10);
        EXPECT_FALSE(result.plain);
        for (const StoredHold& hold : result.holds) seen.push_back(hold.order_id);
        if (!result.more) break;
        ASSERT_FALSE(result.holds.empty());
        after = ListCursor{result.holds.back().expire_time, result.holds.back().order_id};
      }
      const std::vector<std::string> all =
          scope.empty() ? std::vector<std::string>{"a1", "p1", "a2", "a3", "a4", "a5", "p2"}
                        : std::vector<std::string>{"a1", "a2", "a3", "a4", "a5"};
      EXPECT_EQ(seen, all);
    }
  }
  // A cursor past the last hold: an empty last page.
  const ListHoldsResult past = page("", ListCursor{kT0 + absl::Seconds(50), "p2"}, 5);
  EXPECT_TRUE(past.holds.empty());
  EXPECT_FALSE(past.more);
}

// A scope's totals across users (PlaceHoldArgs::totals) on a store that keeps a scope index: in
// the placing script on a single Redis, by the scope protocol across slots on a Redis Cluster.
class ScopeTotalsTest : public HoldStoreContractTest {
 protected:
  void SetUp() override {
    HoldStoreContractTest::SetUp();
    if (!store_->keeps_scope_index()) GTEST_SKIP() << "no scope index (Redis Cluster)";
  }
  absl::StatusOr<PlaceHoldResult> PlaceTotal(const std::string& user, const std::string& order,
                                             int64_t quantity, LevelLimits totals, absl::Time now,
                                             absl::Duration ttl = absl::Seconds(10),
                                             const std::string& scope = "event:T") {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = ttl;
    args.max_holds = 3;
    args.details.scope = scope;
    args.details.quantity = quantity;
    args.totals = totals;
    return Place(std::move(args), now);
  }
  ListScopeHoldsResult Scope(absl::Time now, int page_size = 100,
                             std::optional<ListCursor> after = std::nullopt,
                             const std::string& scope = "event:T") {
    ListScopeHoldsArgs args;
    args.scope = scope;
    args.page_size = page_size;
    args.after = std::move(after);
    auto result = Await<ListScopeHoldsResult>(
        [&](auto done) { store_->ListScopeHolds(std::move(args), At(now), std::move(done)); });
    EXPECT_THAT(result, IsOk());
    return result.value_or(ListScopeHoldsResult{});
  }
};

TEST_P(ScopeTotalsTest, TotalHoldsRefuseAcrossUsersAndEveryEndGivesThePlaceBack) {
  const LevelLimits total{3, 0};
  for (const char* user : {"u1", "u2", "u3"}) {
    auto placed = PlaceTotal(user, "o", 1, total, kT0, absl::Seconds(user[1] == '3' ? 5 : 10));
    ASSERT_THAT(placed, IsOk());
    EXPECT_EQ(placed->outcome, Outcome::kCreated);
  }
  auto refused = PlaceTotal("u4", "o", 1, total, kT0 + absl::Seconds(1));
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->outcome, Outcome::kLimitReached);
  EXPECT_EQ(refused->violations, kScopeTotalHoldLimit);
  EXPECT_EQ(refused->total_holds, 3);
  EXPECT_EQ(refused->expire_time, kT0 + absl::Seconds(5));     // u3's: the scope's earliest
  EXPECT_THAT(List("u4", kT0 + absl::Seconds(1)), IsEmpty());  // no trace
  EXPECT_EQ(Scope(kT0 + absl::Seconds(1)).scope_holds, 3);
  // Pay gives the place back.
  ASSERT_THAT(End("u1", "o", kT0 + absl::Seconds(2)), IsOk());
  auto after_pay = PlaceTotal("u4", "o", 1, total, kT0 + absl::Seconds(2));
  ASSERT_THAT(after_pay, IsOk());
  EXPECT_EQ(after_pay->outcome, Outcome::kCreated);
  EXPECT_EQ(after_pay->total_holds, 3);
  // CancelHold.
  EXPECT_EQ(PlaceTotal("u5", "o", 1, total, kT0 + absl::Seconds(2))->outcome,
            Outcome::kLimitReached);
  ASSERT_THAT(End("u2", "o", kT0 + absl::Seconds(2), HoldOutcome::kCancelled), IsOk());
  EXPECT_EQ(PlaceTotal("u5", "o", 1, total, kT0 + absl::Seconds(2))->outcome, Outcome::kCreated);
  // Expiry, with nothing reaped yet: u3's hold (5 s) is no longer live at 6 s.
  EXPECT_EQ(PlaceTotal("u6", "o", 1, total, kT0 + absl::Seconds(3))->outcome,
            Outcome::kLimitReached);
  EXPECT_EQ(PlaceTotal("u6", "o", 1, total, kT0 + absl::Seconds(6))->outcome, Outcome::kCreated);
  // ReleaseHolds of one user's scope.
  ASSERT_THAT(Release("u4", "event:T", kT0 + absl::Seconds(7)), IsOk());
  EXPECT_EQ(PlaceTotal("u7", "o", 1, total, kT0 + absl::Seconds(7))->outcome, Outcome::kCreated);
  // ExtendHold keeps the place (and moves it).
  auto extended = Extend("u5", "o", absl::Seconds(30), kT0 + absl::Seconds(8));
  ASSERT_THAT(extended, IsOk());
  ASSERT_EQ(extended->result, ExtendHoldResult::Result::kLive);
  const ListScopeHoldsResult usage = Scope(kT0 + absl::Seconds(8));
  EXPECT_EQ(usage.scope_holds, 3);
  EXPECT_EQ(usage.scope_units, 3);
  ASSERT_EQ(usage.holds.size(), 3u);
  EXPECT_EQ(usage.holds.back().user_id, "u5");
  EXPECT_EQ(usage.holds.back().expire_time, kT0 + absl::Seconds(38));
  EXPECT_EQ(PlaceTotal("u8", "o", 1, total, kT0 + absl::Seconds(8))->outcome,
            Outcome::kLimitReached);
  // Another scope of the same rule counts on its own.
  EXPECT_EQ(PlaceTotal("u8", "o", 1, total, kT0 + absl::Seconds(8), absl::Seconds(10), "event:U")
                ->outcome,
            Outcome::kCreated);
}

TEST_P(ScopeTotalsTest, TotalUnitsCountQuantitiesAndLoweringATotalEndsNothing) {
  EXPECT_EQ(PlaceTotal("a", "o1", 2, {0, 5}, kT0)->outcome, Outcome::kCreated);
  EXPECT_EQ(PlaceTotal("b", "o1", 2, {0, 5}, kT0)->outcome, Outcome::kCreated);
  auto refused = PlaceTotal("c", "o1", 2, {0, 5}, kT0);
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->outcome, Outcome::kLimitReached);
  EXPECT_EQ(refused->violations, kScopeTotalUnitLimit);
  EXPECT_EQ(refused->total_units, 4);
  auto fits = PlaceTotal("c", "o1", 1, {0, 5}, kT0);
  ASSERT_THAT(fits, IsOk());
  EXPECT_EQ(fits->outcome, Outcome::kCreated);
  EXPECT_EQ(fits->total_holds, 3);
  EXPECT_EQ(fits->total_units, 5);
  // Both totals at once.
  EXPECT_EQ(PlaceTotal("d", "o1", 1, {3, 5}, kT0)->violations,
            kScopeTotalHoldLimit | kScopeTotalUnitLimit);
  // Lowering the total ends nothing: the holds stay, new ones wait.
  EXPECT_EQ(PlaceTotal("d", "o1", 1, {1, 0}, kT0)->outcome, Outcome::kLimitReached);
  EXPECT_EQ(Scope(kT0).scope_holds, 3);
  EXPECT_EQ(Scope(kT0).scope_units, 5);
}

// A capacity counts the scope's live units plus its units sold; only a payment sells (the units
// move from held to sold in the step that pays), every other end gives the units back; the count
// is kept per scope, also for a scope without a capacity (one added later counts those sales).
TEST_P(ScopeTotalsTest, ACapacityCountsHeldAndSoldUnitsAndOnlyPaymentsSell) {
  if (!store_->counts_sales()) GTEST_SKIP() << "counts no sales (Redis Cluster)";
  auto place = [&](const std::string& user, int64_t quantity, absl::Time now,
                   absl::Duration ttl = absl::Seconds(10), const std::string& scope = "event:T",
                   int64_t capacity = 5) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = "o";
    args.ttl = ttl;
    args.max_holds = 3;
    args.details.scope = scope;
    args.details.quantity = quantity;
    args.capacity_units = capacity;
    auto placed = Place(std::move(args), now);
    EXPECT_THAT(placed, IsOk());
    return placed.value_or(PlaceHoldResult{});
  };
  EXPECT_EQ(place("a", 2, kT0).outcome, Outcome::kCreated);
  EXPECT_EQ(place("b", 2, kT0, absl::Seconds(5)).outcome, Outcome::kCreated);
  PlaceHoldResult refused = place("c", 2, kT0);
  EXPECT_EQ(refused.outcome, Outcome::kLimitReached);
  EXPECT_EQ(refused.violations, kScopeCapacity);
  EXPECT_EQ(refused.total_units, 4);
  EXPECT_EQ(refused.sold_units, 0);
  EXPECT_EQ(refused.expire_time, kT0 + absl::Seconds(5));  // b's: the scope's earliest
  EXPECT_EQ(place("c", 1, kT0).outcome, Outcome::kCreated);
  // Pay: a's 2 units are sold now, still counted.
  const absl::Time t1 = kT0 + absl::Seconds(1);
  ASSERT_THAT(End("a", "o", t1), IsOk());
  EXPECT_EQ(Scope(t1).scope_units, 3);
  EXPECT_EQ(Scope(t1).sold_units, 2);
  refused = place("d", 1, t1);
  EXPECT_EQ(refused.violations, kScopeCapacity);
  EXPECT_EQ(refused.sold_units, 2);
  // CancelHold gives its units back; so does an expiry (b's, at 5 s, nothing reaped).
  ASSERT_THAT(End("c", "o", kT0 + absl::Seconds(2), HoldOutcome::kCancelled), IsOk());
  EXPECT_EQ(place("d", 1, kT0 + absl::Seconds(2)).outcome, Outcome::kCreated);
  EXPECT_EQ(place("e", 2, kT0 + absl::Seconds(3)).outcome, Outcome::kLimitReached);
  EXPECT_EQ(place("e", 2, kT0 + absl::Seconds(6)).outcome, Outcome::kCreated);
  // Sold out: 5 sold, nothing held.
  const absl::Time t7 = kT0 + absl::Seconds(7);
  ASSERT_THAT(End("d", "o", t7), IsOk());
  ASSERT_THAT(End("e", "o", t7), IsOk());
  refused = place("f", 1, t7);
  EXPECT_EQ(refused.violations, kScopeCapacity);
  EXPECT_EQ(refused.sold_units, 5);
  EXPECT_EQ(refused.total_units, 0);
  EXPECT_EQ(Scope(t7).sold_units, 5);
  EXPECT_EQ(Scope(t7).scope_units, 0);
  // Another scope counts on its own; a scope without a capacity counts its sales too.
  EXPECT_EQ(place("f", 5, t7, absl::Seconds(10), "event:U").outcome, Outcome::kCreated);
  EXPECT_EQ(place("g", 1, t7, absl::Seconds(10), "event:V", 0).outcome, Outcome::kCreated);
  ASSERT_THAT(End("g", "o", t7), IsOk());
  EXPECT_EQ(Scope(t7, 100, std::nullopt, "event:V").sold_units, 1);
  EXPECT_EQ(Scope(t7, 100, std::nullopt, "event:U").sold_units, 0);
  // An expired hold not yet reaped (wa's, at t7 + 5 s) neither refuses a hold that fits the live
  // units nor lets one past the capacity (the Redis store checks its units counter, which still
  // counts it, before the entries).
  const absl::Time t13 = t7 + absl::Seconds(6);
  EXPECT_EQ(place("wa", 2, t7, absl::Seconds(5), "event:W").outcome, Outcome::kCreated);
  EXPECT_EQ(place("wb", 3, t13, absl::Seconds(10), "event:W").outcome, Outcome::kCreated);
  EXPECT_EQ(place("wc", 2, t13, absl::Seconds(10), "event:W").outcome, Outcome::kCreated);
  refused = place("wd", 1, t13, absl::Seconds(10), "event:W");
  EXPECT_EQ(refused.violations, kScopeCapacity);
  EXPECT_EQ(refused.total_units, 5);
}

TEST_P(ScopeTotalsTest, HoldsPlacedWithoutATotalCountOnceOneIsSet) {
  EXPECT_EQ(PlaceTotal("a", "o1", 1, {}, kT0)->outcome, Outcome::kCreated);
  EXPECT_EQ(PlaceTotal("b", "o1", 1, {}, kT0)->outcome, Outcome::kCreated);
  EXPECT_EQ(PlaceTotal("c", "o1", 1, {2, 0}, kT0)->outcome, Outcome::kLimitReached);
}

TEST_P(ScopeTotalsTest, ReapedHoldsLeaveNothingInTheIndex) {
  for (int i = 0; i < 6; ++i) {
    ASSERT_THAT(PlaceTotal(absl::StrCat("r", i), "o", i + 1, {10, 100}, kT0), IsOk());
  }
  EXPECT_EQ(Scope(kT0).scope_units, 21);
  EXPECT_EQ(ReapAll(kT0 + absl::Seconds(11)).size(), 6u);
  const ListScopeHoldsResult after = Scope(kT0 + absl::Seconds(11));
  EXPECT_EQ(after.scope_holds, 0);
  EXPECT_EQ(after.scope_units, 0);
  EXPECT_FALSE(after.first_expire_time.has_value());
  EXPECT_EQ(PlaceTotal("r9", "o", 10, {1, 10}, kT0 + absl::Seconds(11))->outcome,
            Outcome::kCreated);
}

TEST_P(ScopeTotalsTest, ListScopeHoldsPagesEveryUsersHoldOnce) {
  // 7 holds of 4 users; three share one expiry (the index key breaks the tie).
  const std::vector<std::tuple<std::string, std::string, int>> holds = {
      {"w1", "a", 10}, {"w2", "a", 20}, {"w3", "a", 20}, {"w1", "b", 20},
      {"w4", "a", 30}, {"w2", "b", 40}, {"w3", "b", 50}};
  for (const auto& [user, order, seconds] : holds) {
    ASSERT_THAT(PlaceTotal(user, order, 2, {}, kT0, absl::Seconds(seconds)), IsOk());
  }
  ASSERT_THAT(PlaceTotal("w9", "x", 1, {}, kT0, absl::Seconds(5), "event:other"), IsOk());
  for (int size : {1, 2, 3, 100}) {
    SCOPED_TRACE(absl::StrCat("page size ", size));
    std::vector<std::string> seen;
    std::optional<ListCursor> after;
    for (int pages = 0; pages < 20; ++pages) {
      const ListScopeHoldsResult result = Scope(kT0, size, after);
      EXPECT_LE(static_cast<int>(result.holds.size()), size);
      EXPECT_EQ(result.scope_holds, 7);
      EXPECT_EQ(result.scope_units, 14);
      EXPECT_EQ(result.first_expire_time, kT0 + absl::Seconds(10));
      for (const ScopeHold& hold : result.holds) {
        EXPECT_EQ(hold.quantity, 2);
        seen.push_back(absl::StrCat(hold.user_id, "/", hold.order_id));
      }
      if (!result.more) break;
      ASSERT_FALSE(result.holds.empty());
      after = ListCursor{result.holds.back().expire_time, result.last_key};
    }
    EXPECT_THAT(seen, UnorderedElementsAre("w1/a", "w2/a", "w3/a", "w1/b", "w4/a", "w2/b", "w3/b"));
    EXPECT_EQ(seen.front(), "w1/a");
    EXPECT_EQ(seen.back(), "w3/b");
  }
  // The usage alone (page size 0), and after expiry without a reap.
  const ListScopeHoldsResult usage = Scope(kT0 + absl::Seconds(25), 0);
  EXPECT_TRUE(usage.holds.empty());
  EXPECT_FALSE(usage.more);
  EXPECT_EQ(usage.scope_holds, 3);
  EXPECT_EQ(usage.scope_units, 6);
}

TEST_P(ScopeTotalsTest, ConcurrentPlacesOfOneScopeAreCountedOnceAndEachSettled) {
  // 300 users at once for 200 places: exactly 200, whatever order the store takes them in. On a
  // Redis Cluster their settles go in batches (several per scope_settle.lua call), and every
  // entry ends at its hold's expiry (margin 0), not at its take's longer lease.
  constexpr int kUsers = 300;
  const LevelLimits total{200, 0};
  absl::Mutex mu;
  int created = 0, refused = 0, failed = 0;
  absl::BlockingCounter answered(kUsers);
  for (int i = 0; i < kUsers; ++i) {
    PlaceHoldArgs args;
    args.user_id = absl::StrCat("c", i);
    args.order_id = "o";
    args.ttl = absl::Seconds(10);
    args.max_holds = 3;
    args.details.scope = "event:T";
    args.totals = total;
    store_->PlaceHold(std::move(args), At(kT0), [&](absl::StatusOr<PlaceHoldResult> placed) {
      {
        absl::MutexLock lock(&mu);
        if (!placed.ok()) {
          ++failed;
        } else if (placed->outcome == Outcome::kCreated) {
          ++created;
        } else if (placed->outcome == Outcome::kLimitReached) {
          ++refused;
        }
      }
      // After the lock is released: once the count reaches 0 the test may end and destroy `mu`
      // (an I/O thread stalled between the two aborted a run on "Mutex unlocked when destroyed").
      answered.DecrementCount();
    });
  }
  answered.Wait();
  factory().Quiesce(*store_);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(created, 200);
  EXPECT_EQ(refused, 100);
  const ListScopeHoldsResult usage = Scope(kT0, 300);
  EXPECT_EQ(usage.scope_holds, 200);
  ASSERT_EQ(usage.holds.size(), 200u);
  for (const ScopeHold& hold : usage.holds) {
    EXPECT_EQ(hold.expire_time, kT0 + absl::Seconds(10)) << hold.user_id;
  }
  if (auto* redis = dynamic_cast<RedisHoldStore*>(store_.get());
      redis != nullptr && redis->sweeps_scopes()) {
    EXPECT_EQ(redis->settles_sent(), 200);  // one per take: a take refused by the total has none
    EXPECT_LT(redis->settle_calls(), redis->settles_sent()) << "no settle was batched";
  }
}

// Every fixture runs on the four stores, named by their factory.
// Runtime scope rules: kept by the store, read by the step that places a hold.
class ScopeRuleTest : public HoldStoreContractTest {
 protected:
  void SetUp() override {
    HoldStoreContractTest::SetUp();
    if (!store_->keeps_scope_rules()) GTEST_SKIP() << "keeps no runtime rules (Redis Cluster)";
  }
  absl::StatusOr<ScopeRuleResult> Put(ScopeRuleRecord rule, absl::Time now) {
    return Await<ScopeRuleResult>(
        [&](auto done) { store_->PutScopeRule(std::move(rule), At(now), std::move(done)); });
  }
  absl::StatusOr<ScopeRuleResult> Get(const std::string& scope, absl::Time now) {
    return Await<ScopeRuleResult>(
        [&](auto done) { store_->GetScopeRule(scope, At(now), std::move(done)); });
  }
  PlaceHoldResult PlaceIn(const std::string& scope, const std::string& user, int64_t quantity,
                          absl::Time now, LevelLimits file_limits = {},
                          std::optional<LevelLimits> asked = std::nullopt) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = "o";
    args.ttl = absl::Seconds(10);
    args.max_holds = 3;
    args.details.scope = scope;
    args.details.quantity = quantity;
    args.details.scope_limits = file_limits;
    args.asked_limits = asked;
    auto placed = Place(std::move(args), now);
    EXPECT_THAT(placed, IsOk());
    return placed.value_or(PlaceHoldResult{});
  }
  static ScopeRuleRecord Rule(const std::string& scope) {
    ScopeRuleRecord rule;
    rule.scope = scope;
    return rule;
  }
  // An order of `quantity` units in `scope` at kT0 (ttl 10 s, the user's max_holds 10).
  PlaceHoldResult PlaceOrder(const std::string& scope, const std::string& user,
                             const std::string& order, int64_t quantity) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = absl::Seconds(10);
    args.max_holds = 10;
    args.details.scope = scope;
    args.details.quantity = quantity;
    auto placed = Place(std::move(args), kT0);
    EXPECT_THAT(placed, IsOk());
    return placed.value_or(PlaceHoldResult{});
  }
  absl::Status Delete(const std::string& scope) {
    return Await<ScopeRuleResult>(
               [&](auto done) { store_->DeleteScopeRule(scope, "", At(kT0), std::move(done)); })
        .status();
  }
  // PlaceOrder in limit class `limit_class`, by a caller with `identities`.
  PlaceHoldResult PlaceInClass(const std::string& scope, const std::string& user,
                               const std::string& order, int64_t quantity,
                               const std::string& limit_class,
                               std::vector<std::string> identities) {
    PlaceHoldArgs args;
    args.user_id = user;
    args.order_id = order;
    args.ttl = absl::Seconds(10);
    args.max_holds = 10;
    args.details.scope = scope;
    args.details.quantity = quantity;
    args.limit_class = limit_class;
    args.caller_identities = std::move(identities);
    auto placed = Place(std::move(args), kT0);
    EXPECT_THAT(placed, IsOk());
    return placed.value_or(PlaceHoldResult{});
  }
  // A rule of `scope`: 2 units per person held + bought, and a class box_office (10 units held,
  // no purchase cap) for the principal "uri:spiffe://t/box-office" and a DNS name.
  static ScopeRuleRecord RuleWithABoxOffice(const std::string& scope) {
    ScopeRuleRecord rule = Rule(scope);
    rule.limits = {0, 2};
    rule.purchases = {0, 2};
    rule.capacity_units = 100;
    LimitClassRecord& box_office = rule.classes["box_office"];
    box_office.limits = {0, 10};
    box_office.principals = {"uri:spiffe://t/box-office", "dns:desk.example"};
    rule.classes["vip"] = LimitClassRecord{{0, 6}, {0, 6}, {"subject:CN=vip,O=T"}};
    return rule;
  }
  absl::StatusOr<ReturnUnitsResult> GiveBack(const std::string& user, const std::string& order,
                                             int64_t units, const std::string& request) {
    return Await<ReturnUnitsResult>([&](auto done) {
      store_->ReturnUnits(ReturnUnitsArgs{user, order, units, request}, At(kT0), std::move(done));
    });
  }
};

TEST_P(ScopeRuleTest, ARuleIsKeptWithAnEtagThatAStaleWriteCannotPass) {
  // Redis expires a rule's key at its expire_time on its own clock: the test's clock is Redis'.
  const absl::Time t0 = absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  ScopeRuleRecord rule = Rule("event:R");
  rule.limits = {2, 4};
  rule.totals = {100, 200};
  rule.capacity_units = 300;
  rule.state = ScopeState::kPaused;
  rule.open_time = t0 + absl::Seconds(60);
  rule.close_time = t0 + absl::Hours(2);
  rule.expire_time = t0 + absl::Hours(24);
  auto put = Put(rule, t0);
  ASSERT_THAT(put, IsOk());
  ASSERT_TRUE(put->rule.has_value());
  const std::string etag = put->rule->etag;
  EXPECT_FALSE(etag.empty());
  rule.etag = etag;
  EXPECT_EQ(*put->rule, rule);
  auto got = Get("event:R", t0);
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->rule, rule);
  // A write with the etag read passes and gives a new etag; the old one is stale from then on.
  rule.capacity_units = 250;
  auto second = Put(rule, t0);
  ASSERT_THAT(second, IsOk());
  EXPECT_NE(second->rule->etag, etag);
  rule.capacity_units = 1;
  EXPECT_THAT(Put(rule, t0), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(Get("event:R", t0)->rule->capacity_units, 250);
  EXPECT_THAT(Await<ScopeRuleResult>([&](auto done) {
                store_->DeleteScopeRule("event:R", etag, At(t0), std::move(done));
              }),
              StatusIs(absl::StatusCode::kAborted));
  // Without an etag a write takes whatever is there; a delete removes it, and the etags of a rule
  // deleted and put again are new ones.
  rule.etag = "";
  ASSERT_THAT(Put(rule, t0), IsOk());
  EXPECT_THAT(Await<ScopeRuleResult>([&](auto done) {
                store_->DeleteScopeRule("event:R", "", At(t0), std::move(done));
              }),
              IsOk());
  EXPECT_FALSE(Get("event:R", t0)->rule.has_value());
  EXPECT_THAT(Await<ScopeRuleResult>([&](auto done) {
                store_->DeleteScopeRule("event:R", "", At(t0), std::move(done));
              }),
              StatusIs(absl::StatusCode::kNotFound));
  rule.etag = second->rule->etag;
  EXPECT_THAT(Put(rule, t0), StatusIs(absl::StatusCode::kAborted));  // the deleted rule's etag
  rule.etag = "";
  auto again = Put(rule, t0);
  ASSERT_THAT(again, IsOk());
  EXPECT_NE(again->rule->etag, etag);
  EXPECT_NE(again->rule->etag, second->rule->etag);
  // An expire_time: the rule is gone from it on; one already past is refused.
  EXPECT_FALSE(Get("event:R", t0 + absl::Hours(24)).value().rule.has_value());
  rule.expire_time = t0;
  EXPECT_THAT(Put(rule, t0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_P(ScopeRuleTest, ARuleReplacesTheFilesLimitsTotalsAndCapacityInThePlacingStep) {
  // The file's limits (in details) allow 1 unit; the rule's allow 3, and the request's own
  // ceiling of 2 still lowers them.
  EXPECT_EQ(PlaceIn("event:S", "a", 3, kT0, {1, 1}).outcome, Outcome::kNeverFits);
  ScopeRuleRecord rule = Rule("event:S");
  rule.limits = {0, 3};
  rule.totals = {2, 0};
  rule.capacity_units = 5;
  auto put = Put(rule, kT0);
  ASSERT_THAT(put, IsOk());
  PlaceHoldResult a = PlaceIn("event:S", "a", 3, kT0, {1, 1});
  EXPECT_EQ(a.outcome, Outcome::kCreated);
  ASSERT_TRUE(a.rule.has_value());
  EXPECT_EQ(*a.rule, (AppliedScopeRule{put->rule->etag, {0, 3}, {2, 0}, 5}));
  EXPECT_EQ(a.details.scope_limits, (LevelLimits{0, 3}));  // recorded as placed under
  PlaceHoldResult b = PlaceIn("event:S", "b", 3, kT0, {1, 1}, LevelLimits{0, 2});
  EXPECT_EQ(b.outcome, Outcome::kNeverFits);  // the request's ceiling: 2 < 3
  EXPECT_EQ(b.violations, kScopeUnitLimit);
  EXPECT_EQ(b.rule->limits, (LevelLimits{0, 2}));
  b = PlaceIn("event:S", "b", 2, kT0, {1, 1}, LevelLimits{0, 2});
  EXPECT_EQ(b.outcome, Outcome::kCreated);  // 3 + 2 held: the capacity of 5, 2 of 2 holds
  EXPECT_EQ(b.total_holds, 2);
  EXPECT_EQ(PlaceIn("event:S", "c", 1, kT0).violations, kScopeTotalHoldLimit | kScopeCapacity);
  // A quantity above the rule's unit limits can never fit.
  PlaceHoldResult never = PlaceIn("event:S", "c", 6, kT0);
  EXPECT_EQ(never.outcome, Outcome::kNeverFits);
  EXPECT_EQ(never.violations, kScopeUnitLimit | kScopeCapacity);
  // Another scope keeps the file's rule.
  EXPECT_FALSE(PlaceIn("event:other", "a", 1, kT0, {1, 1}).rule.has_value());
}

TEST_P(ScopeRuleTest, StateAndTimesDecideOnTheStoresClock) {
  ScopeRuleRecord rule = Rule("event:P");
  rule.state = ScopeState::kPaused;
  ASSERT_THAT(Put(rule, kT0), IsOk());
  PlaceHoldResult paused = PlaceIn("event:P", "a", 1, kT0);
  EXPECT_EQ(paused.outcome, Outcome::kScopeNotOpen);
  EXPECT_EQ(paused.expire_time, absl::UnixEpoch());  // no open_time: no retry time
  // PAUSED with an open_time opens by itself then; nothing before.
  rule.open_time = kT0 + absl::Seconds(30);
  rule.close_time = kT0 + absl::Seconds(60);
  ASSERT_THAT(Put(rule, kT0), IsOk());
  paused = PlaceIn("event:P", "a", 1, kT0 + absl::Seconds(29));
  EXPECT_EQ(paused.outcome, Outcome::kScopeNotOpen);
  EXPECT_EQ(paused.expire_time, kT0 + absl::Seconds(30));
  EXPECT_THAT(List("a", kT0 + absl::Seconds(29)), IsEmpty());
  EXPECT_EQ(PlaceIn("event:P", "a", 1, kT0 + absl::Seconds(30)).outcome, Outcome::kCreated);
  // close_time closes.
  EXPECT_EQ(PlaceIn("event:P", "b", 1, kT0 + absl::Seconds(60)).outcome, Outcome::kScopeClosed);
  // CloseScopeRule closes now, keeps the rule's limits and gives a new etag; a scope without a
  // rule gets one, CLOSED.
  rule = Rule("event:Q");
  rule.capacity_units = 9;
  auto put = Put(rule, kT0);
  ASSERT_THAT(put, IsOk());
  auto closed = Await<ScopeRuleResult>(
      [&](auto done) { store_->CloseScopeRule("event:Q", At(kT0), std::move(done)); });
  ASSERT_THAT(closed, IsOk());
  EXPECT_EQ(closed->rule->state, ScopeState::kClosed);
  EXPECT_EQ(closed->rule->capacity_units, 9);
  EXPECT_NE(closed->rule->etag, put->rule->etag);
  EXPECT_EQ(PlaceIn("event:Q", "q", 1, kT0).outcome, Outcome::kScopeClosed);
  closed = Await<ScopeRuleResult>(
      [&](auto done) { store_->CloseScopeRule("event:none", At(kT0), std::move(done)); });
  ASSERT_THAT(closed, IsOk());
  EXPECT_EQ(closed->rule->state, ScopeState::kClosed);
  EXPECT_EQ(PlaceIn("event:none", "q", 1, kT0).outcome, Outcome::kScopeClosed);
}

// A purchase cap counts the user's live units (holds) in the scope plus what it paid for there
// under the rule: a payment no longer gives the place back. Edits keep the purchases; a rule
// deleted and put again starts them anew.
TEST_P(ScopeRuleTest, APurchaseCapCountsHeldAndBoughtUnitsOfTheUser) {
  ScopeRuleRecord rule = Rule("event:B");
  rule.purchases = {3, 4};  // 3 holds, 4 units
  ASSERT_THAT(Put(rule, kT0), IsOk());
  auto place = [&](const std::string& user, const std::string& order, int64_t quantity) {
    return PlaceOrder("event:B", user, order, quantity);
  };
  EXPECT_EQ(place("alice", "o1", 2).outcome, Outcome::kCreated);
  ASSERT_THAT(End("alice", "o1", kT0), IsOk());                   // paid: 2 bought
  EXPECT_EQ(place("alice", "o2", 1).outcome, Outcome::kCreated);  // 2 + 1 + 1... 3 of 4
  PlaceHoldResult refused = place("alice", "o3", 2);
  EXPECT_EQ(refused.outcome, Outcome::kLimitReached);
  EXPECT_EQ(refused.violations, kUserPurchasedUnits);
  EXPECT_EQ(refused.purchased_units, 2);
  EXPECT_EQ(refused.purchased_holds, 1);
  EXPECT_EQ(refused.expire_time, kT0 + absl::Seconds(10));  // o2's expiry frees a unit
  // A cancel gives its place back, as always; another user has its own count.
  ASSERT_THAT(End("alice", "o2", kT0, HoldOutcome::kCancelled), IsOk());
  EXPECT_EQ(place("alice", "o3", 2).outcome, Outcome::kCreated);
  ASSERT_THAT(End("alice", "o3", kT0), IsOk());  // 4 bought, 2 payments
  EXPECT_EQ(place("alice", "o4", 1).violations, kUserPurchasedUnits);
  EXPECT_EQ(place("bob", "o1", 4).outcome, Outcome::kCreated);
  // An edit keeps the count; more than the cap in one order can never fit.
  rule.purchases = {3, 5};
  ASSERT_THAT(Put(rule, kT0), IsOk());
  EXPECT_EQ(place("alice", "o4", 1).outcome, Outcome::kCreated);
  EXPECT_EQ(place("carol", "o1", 6).outcome, Outcome::kNeverFits);
  ASSERT_THAT(End("alice", "o4", kT0), IsOk());  // 3 payments
  EXPECT_EQ(place("alice", "o5", 0 + 1).violations, kUserPurchasedHolds | kUserPurchasedUnits);
  // Deleted and put again: a new rule, purchases from zero.
  ASSERT_THAT(Delete("event:B"), IsOk());
  ASSERT_THAT(Put(rule, kT0), IsOk());
  EXPECT_EQ(place("alice", "o5", 1).outcome, Outcome::kCreated);
}

// ReturnUnits gives a paid hold's units back to the scope's capacity and to the buyer's purchase
// cap, idempotently per request id, never more than the hold had; only a paid hold's.
TEST_P(ScopeRuleTest, AReturnGivesUnitsBackToCapacityAndToThePurchaseCap) {
  ScopeRuleRecord rule = Rule("event:RU");
  rule.capacity_units = 4;
  rule.purchases = {0, 3};  // 3 units per buyer, held + bought
  ASSERT_THAT(Put(rule, kT0), IsOk());
  auto place = [&](const std::string& user, const std::string& order, int64_t quantity) {
    return PlaceOrder("event:RU", user, order, quantity);
  };
  using Result = ReturnUnitsResult::Result;
  ASSERT_EQ(place("alice", "o1", 3).outcome, Outcome::kCreated);
  EXPECT_EQ(GiveBack("alice", "o1", 1, "r1")->result, Result::kLive);  // not paid yet
  ASSERT_THAT(End("alice", "o1", kT0, HoldOutcome::kPaid, "pi_1"), IsOk());
  EXPECT_EQ(place("alice", "o2", 1).violations, kUserPurchasedUnits);  // 3 of 3 bought
  EXPECT_EQ(place("bob", "o1", 2).violations, kScopeCapacity);         // 3 sold + 2 > 4

  absl::StatusOr<ReturnUnitsResult> first = GiveBack("alice", "o1", 2, "r1");
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->result, Result::kReturned);
  EXPECT_EQ(first->units, 2);
  EXPECT_EQ(first->total_returned, 2);
  EXPECT_EQ(first->quantity, 3);
  EXPECT_EQ(first->end.outcome, HoldOutcome::kPaid);
  EXPECT_EQ(first->end.payment_reference, "pi_1");
  EXPECT_EQ(first->details.scope, "event:RU");
  ASSERT_TRUE(first->purchase_usage.has_value());
  EXPECT_EQ(first->purchase_usage->units, 1);  // 3 bought - 2 returned
  EXPECT_EQ(first->purchase_usage->holds, 1);  // the hold still counts: 1 unit kept
  EXPECT_EQ(first->purchase_usage->caps.max_units, 3);
  // A retry answers the first return, whatever its units, and changes nothing.
  absl::StatusOr<ReturnUnitsResult> retry = GiveBack("alice", "o1", 1, "r1");
  ASSERT_THAT(retry, IsOk());
  EXPECT_EQ(retry->result, Result::kAlreadyReturned);
  EXPECT_EQ(retry->units, 2);
  EXPECT_EQ(retry->total_returned, 2);
  // More than is left: refused, nothing changed; the last unit may go back.
  absl::StatusOr<ReturnUnitsResult> over = GiveBack("alice", "o1", 2, "r2");
  ASSERT_THAT(over, IsOk());
  EXPECT_EQ(over->result, Result::kExceedsQuantity);
  EXPECT_EQ(over->total_returned, 2);
  // The capacity has 2 units again (1 sold of 4 + 2 held = 3), and alice may buy 2 more.
  EXPECT_EQ(place("bob", "o1", 2).outcome, Outcome::kCreated);
  EXPECT_EQ(place("alice", "o2", 1).outcome, Outcome::kCreated);  // 1 bought + 1 held of 3
  EXPECT_EQ(place("carol", "o1", 1).violations, kScopeCapacity);  // 1 sold + 3 held of 4
  EXPECT_EQ(GiveBack("alice", "o1", 1, "r2")->result, Result::kReturned);
  EXPECT_EQ(GiveBack("alice", "o1", 1, "r3")->result, Result::kExceedsQuantity);
  EXPECT_EQ(place("carol", "o1", 1).outcome, Outcome::kCreated);  // 0 sold + 4 held of 4

  // Only a paid hold's units; an unknown order is unknown.
  ASSERT_THAT(End("bob", "o1", kT0, HoldOutcome::kCancelled), IsOk());
  absl::StatusOr<ReturnUnitsResult> cancelled = GiveBack("bob", "o1", 1, "r1");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(cancelled->result, Result::kNotPaid);
  EXPECT_EQ(cancelled->end.outcome, HoldOutcome::kCancelled);
  EXPECT_EQ(GiveBack("bob", "nothing", 1, "r1")->result, Result::kUnknown);

  // A purchase under a rule deleted and put again is not given back to the new rule's count.
  ASSERT_THAT(End("alice", "o2", kT0), IsOk());  // 1 bought under the first rule
  ASSERT_THAT(Delete("event:RU"), IsOk());
  ASSERT_THAT(Put(rule, kT0), IsOk());
  ASSERT_EQ(place("alice", "o3", 1).outcome, Outcome::kCreated);  // 1 sold + 1 + 1 held of 4
  ASSERT_THAT(End("alice", "o3", kT0), IsOk());                   // 1 bought under the new rule
  absl::StatusOr<ReturnUnitsResult> old = GiveBack("alice", "o2", 1, "r1");
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->result, Result::kReturned);
  ASSERT_TRUE(old->purchase_usage.has_value());
  EXPECT_EQ(old->purchase_usage->units, 1);  // the new rule's purchase stays counted
}

// ListHolds of a scope reads the scope's runtime rule in the same step (what a PlaceHold of the
// scope meets); none without a rule, without a scope, or once it is deleted.
TEST_P(ScopeRuleTest, ListHoldsOfAScopeReadsItsRuleInTheStep) {
  auto list = [&](const std::string& scope) {
    ListHoldsArgs args;
    args.user_id = "alice";
    args.scope = scope;
    auto listed = Await<ListHoldsResult>(
        [&](auto done) { store_->ListHolds(std::move(args), At(kT0), std::move(done)); });
    EXPECT_THAT(listed, IsOk());
    return listed.value_or(ListHoldsResult{});
  };
  EXPECT_FALSE(list("event:L").rule.has_value());
  ScopeRuleRecord rule = Rule("event:L");
  rule.limits = {2, 5};
  rule.capacity_units = 9;
  ASSERT_THAT(Put(rule, kT0), IsOk());
  const ListHoldsResult listed = list("event:L");
  ASSERT_TRUE(listed.rule.has_value());
  EXPECT_EQ(listed.rule->limits, (LevelLimits{2, 5}));
  EXPECT_EQ(listed.rule->capacity_units, 9);
  EXPECT_EQ(listed.rule->scope, "event:L");
  EXPECT_FALSE(list("").rule.has_value());
  EXPECT_FALSE(list("event:other").rule.has_value());
  ASSERT_THAT(Delete("event:L"), IsOk());
  EXPECT_FALSE(list("event:L").rule.has_value());
}

TEST_P(ScopeRuleTest, ALimitClassIsKeptWithTheRuleAndCloseKeepsIt) {
  const ScopeRuleRecord rule = RuleWithABoxOffice("event:K");
  auto put = Put(rule, kT0);
  ASSERT_THAT(put, IsOk());
  ASSERT_TRUE(put->rule.has_value());
  EXPECT_EQ(put->rule->classes, rule.classes);
  auto got = Get("event:K", kT0);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->rule.has_value());
  EXPECT_EQ(got->rule->classes, rule.classes);
  auto closed = Await<ScopeRuleResult>(
      [&](auto done) { store_->CloseScopeRule("event:K", At(kT0), std::move(done)); });
  ASSERT_THAT(closed, IsOk());
  ASSERT_TRUE(closed->rule.has_value());
  EXPECT_EQ(closed->rule->state, ScopeState::kClosed);
  EXPECT_EQ(closed->rule->classes, rule.classes);
  // A put without classes drops them.
  auto plain = Put(Rule("event:K"), kT0);
  ASSERT_THAT(plain, IsOk());
  EXPECT_TRUE(plain->rule->classes.empty());
}

TEST_P(ScopeRuleTest, ALimitClassAppliesItsOwnLimitsToItsPrincipalsOnly) {
  ASSERT_THAT(Put(RuleWithABoxOffice("event:B"), kT0), IsOk());
  const std::vector<std::string> box_office = {"uri:spiffe://t/box-office"};
  const std::vector<std::string> storefront = {"uri:spiffe://t/storefront", "dns:shop.example"};
  // The box office places 8 units for one buyer: the class's 10, not the rule's 2.
  PlaceHoldResult desk = PlaceInClass("event:B", "walk-in", "o1", 8, "box_office", box_office);
  EXPECT_EQ(desk.outcome, Outcome::kCreated);
  ASSERT_TRUE(desk.rule.has_value());
  EXPECT_EQ(desk.rule->limits, (LevelLimits{0, 10}));
  EXPECT_EQ(desk.rule->purchases, LevelLimits{});
  EXPECT_EQ(desk.rule->capacity_units, 100);  // the rule's capacity applies to the class
  // Any one of the caller's identities will do (its DNS SAN here).
  EXPECT_EQ(PlaceInClass("event:B", "walk-in-2", "o1", 3, "box_office",
                         {"uri:spiffe://t/other", "dns:desk.example"})
                .outcome,
            Outcome::kCreated);
  // The storefront may not use it, nor a class the rule does not have, nor a caller without
  // identities; nothing is written for them.
  for (const auto& [limit_class, identities] :
       {std::pair{std::string("box_office"), storefront},
        std::pair{std::string("gold"), box_office},
        std::pair{std::string("box_office"), std::vector<std::string>{}},
        std::pair{std::string("vip"), box_office}}) {
    const PlaceHoldResult denied = PlaceInClass("event:B", "fan", "o1", 1, limit_class, identities);
    EXPECT_EQ(denied.outcome, Outcome::kClassDenied) << limit_class;
    EXPECT_FALSE(denied.rule.has_value());
  }
  EXPECT_TRUE(List("fan", kT0).empty());
  // The rule's own limits for everyone else: 2 units.
  EXPECT_EQ(PlaceOrder("event:B", "fan", "o1", 2).outcome, Outcome::kCreated);
  EXPECT_EQ(PlaceOrder("event:B", "fan", "o2", 1).outcome, Outcome::kLimitReached);
  // The VIP class's purchase cap (6) replaces the rule's (2); a subject matches exactly.
  const PlaceHoldResult vip =
      PlaceInClass("event:B", "vip-fan", "o1", 5, "vip", {"subject:CN=vip,O=T"});
  EXPECT_EQ(vip.outcome, Outcome::kCreated);
  ASSERT_TRUE(vip.rule.has_value());
  EXPECT_EQ(vip.rule->purchases, (LevelLimits{0, 6}));
  // A scope without a runtime rule has no classes.
  EXPECT_EQ(PlaceInClass("event:none", "walk-in", "o9", 1, "box_office", box_office).outcome,
            Outcome::kClassDenied);
  // An edit that drops the box office's principal applies from the next step on.
  ScopeRuleRecord edited = RuleWithABoxOffice("event:B");
  edited.classes["box_office"].principals = {"uri:spiffe://t/new-desk"};
  ASSERT_THAT(Put(edited, kT0), IsOk());
  EXPECT_EQ(PlaceInClass("event:B", "walk-in-3", "o1", 1, "box_office", box_office).outcome,
            Outcome::kClassDenied);
}

TEST_P(ScopeRuleTest, ListScopeHoldsReadsTheScopesRuleInTheStep) {
  auto usage = [&](const std::string& scope) {
    ListScopeHoldsArgs args;
    args.scope = scope;
    auto listed = Await<ListScopeHoldsResult>(
        [&](auto done) { store_->ListScopeHolds(std::move(args), At(kT0), std::move(done)); });
    EXPECT_THAT(listed, IsOk());
    return listed.value_or(ListScopeHoldsResult{});
  };
  EXPECT_FALSE(usage("event:U").rule.has_value());
  ScopeRuleRecord rule = RuleWithABoxOffice("event:U");
  rule.totals = {7, 0};
  ASSERT_THAT(Put(rule, kT0), IsOk());
  ASSERT_EQ(PlaceOrder("event:U", "alice", "o1", 2).outcome, Outcome::kCreated);
  const ListScopeHoldsResult listed = usage("event:U");
  EXPECT_EQ(listed.scope_units, 2);
  ASSERT_TRUE(listed.rule.has_value());
  EXPECT_EQ(listed.rule->totals, (LevelLimits{7, 0}));
  EXPECT_EQ(listed.rule->capacity_units, 100);
  EXPECT_EQ(listed.rule->classes, rule.classes);
  EXPECT_FALSE(usage("event:other").rule.has_value());
  ASSERT_THAT(Delete("event:U"), IsOk());
  EXPECT_FALSE(usage("event:U").rule.has_value());
}

TEST_P(ScopeRuleTest, ListScopeRulesPagesEveryRuleOnce) {
  std::set<std::string> put;
  for (int i = 0; i < 23; ++i) {
    const std::string scope = absl::StrCat("event:", i);
    ASSERT_THAT(Put(Rule(scope), kT0), IsOk());
    put.insert(scope);
  }
  std::multiset<std::string> listed;
  ScopeRuleCursor from;
  for (int pages = 0; pages < 100; ++pages) {
    auto page = Await<ListScopeRulesResult>(
        [&](auto done) { store_->ListScopeRules(from, 5, At(kT0), std::move(done)); });
    ASSERT_THAT(page, IsOk());
    EXPECT_LE(page->rules.size(), 5u);
    for (const ScopeRuleRecord& rule : page->rules) listed.insert(rule.scope);
    if (!page->next.has_value()) break;
    from = *page->next;
  }
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), put);
  EXPECT_EQ(listed.size(), put.size());
}

const std::vector<std::string> kStores = {"fake", "redis", "redis_tls", "redis_cluster"};
std::string StoreName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Stores, ScopeTotalsTest, ::testing::ValuesIn(kStores), StoreName);
INSTANTIATE_TEST_SUITE_P(Stores, ScopeRuleTest, ::testing::ValuesIn(kStores), StoreName);
INSTANTIATE_TEST_SUITE_P(Stores, HoldStoreContractTest, ::testing::ValuesIn(kStores), StoreName);
INSTANTIATE_TEST_SUITE_P(Stores, PartitionStoreContractTest, ::testing::ValuesIn(kStores),
                         StoreName);
INSTANTIATE_TEST_SUITE_P(Stores, HoldEventLogContractTest, ::testing::ValuesIn(kStores), StoreName);

}  // namespace
}  // namespace orderhold::store
