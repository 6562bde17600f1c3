// The RedisCaller contract (server/redis/redis_caller.h and the file comments of redis_client.h
// and redis_cluster_client.h), run over every way OrderHold reaches Redis, as the hold-store
// contract suite runs the store's: a RedisClient on a standalone server, a RedisClient following
// a Sentinel-managed primary, and a RedisClusterClient on a Redis Cluster (the app user of each
// fixture, so the ACLs under test are the documented ones).
//
// - scripts are called by EVALSHA and survive SCRIPT FLUSH (NOSCRIPT is answered by EVAL of the
//   body, which reloads it); with a function library, by FCALL, and they survive FUNCTION FLUSH
//   ("Function not found" is answered the same way, then EVALSHA);
// - a command whose deadline passed before it was sent is DEADLINE_EXCEEDED and does not run;
// - a Redis that does not answer within command_timeout is UNAVAILABLE, and the caller then fails
//   fast (UNAVAILABLE "failing fast" without waiting) until retry_backoff has passed;
// - with wait_replicas, a write that fewer replicas acknowledged is UNAVAILABLE ("not yet
//   replicated") although it ran, and a read is not held back by WAIT;
// - writes never succeed on a demoted primary: READONLY (standalone, Sentinel) or MOVED
//   (Cluster) turn into UNAVAILABLE or a redirect, and once a replica is promoted (Sentinel,
//   Cluster) writes succeed on it.
//
// Each backend is one process (tests/CMakeLists.txt ONE_PROCESS) sharing one fixture; the demote
// case comes last, as it changes the primary.
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/common/fan_in.h"
#include "server/redis/cluster_topology.h"
#include "server/redis/redis_caller.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_cluster_client.h"
#include "server/redis/redis_topology.h"
#include "server/redis/sentinel_topology.h"
#include "tests/testing/eventually.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {
namespace {

using ::orderhold::testing::Eventually;
using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// The one script of the suite: returns its argument, touching its key's slot only.
constexpr char kEchoScript[] = "return ARGV[1]";
// The echo script as a Redis Functions library (RedisClientOptions::function_library), whose
// function marks its answers ("f:"): a case sees which way each call went.
constexpr char kEchoLibrary[] =
    "#!lua name=orderhold_contract\n"
    "redis.register_function('orderhold_contract_echo', function(KEYS, ARGV)\n"
    "  return 'f:' .. ARGV[1]\n"
    "end)\n";

// A key of one hash slot, the same for every case (a Cluster routes it to one primary), under the
// prefix the fixtures' app ACL allows.
constexpr char kKey[] = "orderhold:{caller-contract}k";

// Whether an admin command on one node of OnEveryNode is done: it ran, or a replica refused a
// write (READONLY) that its primary passes on.
bool Done(const absl::Status& status) {
  return status.ok() || absl::StrContains(status.message(), "READONLY");
}

// One way to reach Redis, and the admin hooks the cases need.
class Backend {
 public:
  virtual ~Backend() = default;
  // A caller whose pools take `pool` (scripts, timeouts, WAIT); credentials and topology are the
  // backend's.
  virtual absl::StatusOr<std::unique_ptr<RedisCaller>> Caller(RedisClientOptions pool) = 0;
  // Runs `args` as admin on every data node (primaries and replicas). A replica's READONLY
  // answer counts as done: a write (FUNCTION FLUSH) reaches the replicas from their primary.
  virtual absl::Status OnEveryNode(const std::vector<std::string>& args) = 0;
  // Replicas each primary has.
  virtual int replicas() const = 0;
  // Makes the primary serving kKey stop being one: Sentinel and Cluster promote a replica (true);
  // standalone becomes a replica of a spare server, with no new primary to find (false).
  virtual absl::StatusOr<bool> Demote() = 0;
};

class StandaloneBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Start() {
    auto backend = std::make_unique<StandaloneBackend>();
    auto primary = testing::RedisServer::Start();
    if (!primary.ok()) return primary.status();
    backend->primary_ = *std::move(primary);
    return std::unique_ptr<Backend>(std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<RedisCaller>> Caller(RedisClientOptions pool) override {
    pool.topology = std::make_shared<StandaloneTopology>(HostPort{"127.0.0.1", primary_->port()});
    auto client = RedisClient::Create(std::move(pool));
    if (!client.ok()) return client.status();
    return std::unique_ptr<RedisCaller>(*std::move(client));
  }
  absl::Status OnEveryNode(const std::vector<std::string>& args) override {
    return primary_->Command(args).status();
  }
  int replicas() const override { return 0; }
  absl::StatusOr<bool> Demote() override {
    auto spare = testing::RedisServer::Start();
    if (!spare.ok()) return spare.status();
    spare_ = *std::move(spare);
    absl::Status status =
        primary_->Command({"REPLICAOF", "127.0.0.1", absl::StrCat(spare_->port())}).status();
    if (!status.ok()) return status;
    return false;
  }

 private:
  std::unique_ptr<testing::RedisServer> primary_;
  std::unique_ptr<testing::RedisServer> spare_;
};

class SentinelBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Start() {
    auto backend = std::make_unique<SentinelBackend>();
    testing::SentinelGroupOptions options;
    options.replicas = 1;
    // Well above the cases' CLIENT PAUSE (up to 1,500 ms): a paused primary must not look dead
    // to the sentinels (with the default 1 s it sometimes did, and they failed over mid-case).
    // No case waits for them to notice a failure: Demote asks for SENTINEL FAILOVER.
    options.down_after = absl::Seconds(5);
    auto group = testing::SentinelGroup::Start(options);
    if (!group.ok()) return group.status();
    backend->group_ = *std::move(group);
    SentinelOptions sentinel;
    for (int i = 0; i < backend->group_->sentinel_count(); ++i) {
      sentinel.sentinels.push_back({"127.0.0.1", backend->group_->sentinel_port(i)});
    }
    sentinel.master_name = backend->group_->master_name();
    sentinel.poll_interval = absl::Milliseconds(200);
    auto topology = SentinelTopology::Create(std::move(sentinel));
    if (!topology.ok()) return topology.status();
    backend->topology_ = *std::move(topology);
    return std::unique_ptr<Backend>(std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<RedisCaller>> Caller(RedisClientOptions pool) override {
    pool.topology = topology_;
    pool.node.user = group_->options().app_user;
    pool.node.password = group_->options().app_password;
    auto client = RedisClient::Create(std::move(pool));
    if (!client.ok()) return client.status();
    return std::unique_ptr<RedisCaller>(*std::move(client));
  }
  absl::Status OnEveryNode(const std::vector<std::string>& args) override {
    for (int i = 0; i < group_->node_count(); ++i) {
      if (absl::Status status = group_->node(i).Command(args).status(); !Done(status)) {
        return status;
      }
    }
    return absl::OkStatus();
  }
  int replicas() const override { return 1; }
  absl::StatusOr<bool> Demote() override {
    absl::Status status = group_->Failover();
    if (!status.ok()) return status;
    return true;
  }

 private:
  std::unique_ptr<testing::SentinelGroup> group_;
  std::shared_ptr<SentinelTopology> topology_;
};

class ClusterBackend : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Start() {
    auto backend = std::make_unique<ClusterBackend>();
    auto cluster = testing::RedisCluster::Start({.primaries = 2, .replicas_per_primary = 1});
    if (!cluster.ok()) return cluster.status();
    backend->cluster_ = *std::move(cluster);
    ClusterTopologyOptions topology;
    topology.seeds = {{"127.0.0.1", backend->cluster_->node(0).port()}};
    topology.node.user = backend->cluster_->options().app_user;
    topology.node.password = backend->cluster_->options().app_password;
    auto created = ClusterTopology::Create(std::move(topology));
    if (!created.ok()) return created.status();
    backend->topology_ = *std::move(created);
    return std::unique_ptr<Backend>(std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<RedisCaller>> Caller(RedisClientOptions pool) override {
    RedisClusterClientOptions options;
    options.pool = std::move(pool);
    options.pool.node.user = cluster_->options().app_user;
    options.pool.node.password = cluster_->options().app_password;
    options.topology = topology_;
    auto client = RedisClusterClient::Create(std::move(options));
    if (!client.ok()) return client.status();
    return std::unique_ptr<RedisCaller>(*std::move(client));
  }
  absl::Status OnEveryNode(const std::vector<std::string>& args) override {
    for (int i = 0; i < cluster_->node_count(); ++i) {
      if (absl::Status status = cluster_->Command(i, args).status(); !Done(status)) return status;
    }
    return absl::OkStatus();
  }
  int replicas() const override { return 1; }
  absl::StatusOr<bool> Demote() override {
    absl::StatusOr<int> slot = cluster_->KeySlot(kKey);
    if (!slot.ok()) return slot.status();
    absl::StatusOr<int> primary = cluster_->PrimaryFor(*slot);
    if (!primary.ok()) return primary.status();
    for (int i = 0; i < cluster_->node_count(); ++i) {
      absl::StatusOr<std::string> role = cluster_->Command(i, {"ROLE"});
      if (i == *primary || !role.ok() ||
          !absl::StrContains(*role, absl::StrCat(cluster_->node(*primary).port()))) {
        continue;
      }
      if (absl::Status status = cluster_->Failover(i); !status.ok()) return status;
      if (absl::Status status = cluster_->WaitForPrimary(*slot, i, absl::Seconds(20));
          !status.ok()) {
        return status;
      }
      return true;
    }
    return absl::NotFoundError("no replica of the primary serving the key");
  }

 private:
  std::unique_ptr<testing::RedisCluster> cluster_;
  std::shared_ptr<ClusterTopology> topology_;
};

enum class Kind { kStandalone, kSentinel, kCluster };

std::string NameOf(Kind kind) {
  switch (kind) {
    case Kind::kStandalone:
      return "standalone";
    case Kind::kSentinel:
      return "sentinel";
    case Kind::kCluster:
      return "cluster";
  }
  return "";
}

class RedisCallerContractTest : public ::testing::TestWithParam<Kind> {
 protected:
  static void TearDownTestSuite() { backend_.reset(); }

  void SetUp() override {
    if (backend_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Backend>> started =
          GetParam() == Kind::kStandalone ? StandaloneBackend::Start()
          : GetParam() == Kind::kSentinel ? SentinelBackend::Start()
                                          : ClusterBackend::Start();
      ASSERT_THAT(started, IsOk());
      backend_ = *std::move(started);
    }
  }

  // Pool options of the suite: the echo script, short timeouts.
  static RedisClientOptions Pool() {
    RedisClientOptions pool;
    pool.connections = 1;
    pool.scripts = {kEchoScript};
    pool.command_timeout = absl::Seconds(2);
    pool.retry_backoff = absl::Milliseconds(100);
    return pool;
  }

  std::unique_ptr<RedisCaller> MakeCaller(RedisClientOptions pool = Pool()) {
    absl::StatusOr<std::unique_ptr<RedisCaller>> caller = backend_->Caller(std::move(pool));
    EXPECT_THAT(caller, IsOk());
    return caller.ok() ? *std::move(caller) : nullptr;
  }

  static absl::StatusOr<RedisReply> Call(RedisCaller& caller, RedisCommand command,
                                         absl::Time deadline = absl::Now() + absl::Seconds(5)) {
    return Await<RedisReply>([&](Callback<RedisReply> done) {
      caller.Submit(std::move(command), deadline, std::move(done));
    });
  }
  static RedisCommand Echo(std::string value) { return RedisCommand{0, {"1", kKey, value}}; }
  // The echo script's answer to `sent` through `caller`, checked to be `want` ("f:" + sent when
  // it went by FCALL of kEchoLibrary's function).
  static void ExpectEcho(RedisCaller& caller, const std::string& sent, const std::string& want) {
    absl::StatusOr<RedisReply> reply = Call(caller, Echo(sent));
    ASSERT_THAT(reply, IsOk());
    EXPECT_EQ(reply->str, want) << "sent " << sent;
  }
  static RedisCommand Set(std::string value) {
    RedisCommand command{-1, {"SET", kKey, std::move(value)}};
    command.writes = true;
    return command;
  }
  static RedisCommand Get() { return RedisCommand{RedisCommand::kNoScript, {"GET", kKey}}; }

  static inline std::unique_ptr<Backend> backend_;
};

TEST_P(RedisCallerContractTest, ScriptsAnswerByEvalshaAndSurviveScriptFlush) {
  std::unique_ptr<RedisCaller> caller = MakeCaller();
  ASSERT_NE(caller, nullptr);
  ExpectEcho(*caller, "before", "before");
  // A restart, failover or SCRIPT FLUSH empties the script cache: NOSCRIPT is answered by EVAL of
  // the body (which loads it again), never by an error to the caller.
  ASSERT_THAT(backend_->OnEveryNode({"SCRIPT", "FLUSH"}), IsOk());
  ExpectEcho(*caller, "after", "after");
  ExpectEcho(*caller, "again", "again");
}

TEST_P(RedisCallerContractTest, ACommandPastItsDeadlineIsDeadlineExceededAndDoesNotRun) {
  std::unique_ptr<RedisCaller> caller = MakeCaller();
  ASSERT_NE(caller, nullptr);
  ASSERT_THAT(Call(*caller, Set("kept")), IsOk());
  EXPECT_THAT(Call(*caller, Set("late"), absl::Now() - absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  absl::StatusOr<RedisReply> value = Call(*caller, Get());
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(value->str, "kept");
}

TEST_P(RedisCallerContractTest, ARedisThatDoesNotAnswerIsUnavailableThenFailsFast) {
  RedisClientOptions pool = Pool();
  pool.command_timeout = absl::Milliseconds(300);
  pool.retry_backoff = absl::Seconds(2);
  std::unique_ptr<RedisCaller> caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  ASSERT_THAT(Call(*caller, Set("warm")), IsOk());
  // Every client's commands wait (CLIENT PAUSE ... ALL), as on a Redis stuck in a slow command.
  ASSERT_THAT(backend_->OnEveryNode({"CLIENT", "PAUSE", "1500", "ALL"}), IsOk());
  EXPECT_THAT(Call(*caller, Set("paused")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("did not answer in time")));
  // Within retry_backoff the caller does not queue behind a Redis that does not answer.
  EXPECT_THAT(Call(*caller, Set("paused-2")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("failing fast")));
  ASSERT_THAT(backend_->OnEveryNode({"CLIENT", "UNPAUSE"}), IsOk());
  EXPECT_TRUE(Eventually([&] { return Call(*caller, Set("back")).ok(); }, absl::Seconds(10),
                         absl::Milliseconds(100)));
}

TEST_P(RedisCallerContractTest, WaitHoldsBackAWriteFewerReplicasAcknowledgedButNotAGet) {
  RedisClientOptions pool = Pool();
  pool.wait_replicas = backend_->replicas() + 1;  // one more than there are
  pool.wait_timeout = absl::Milliseconds(100);
  std::unique_ptr<RedisCaller> too_many = MakeCaller(pool);
  ASSERT_NE(too_many, nullptr);
  EXPECT_THAT(Call(*too_many, Set("unreplicated")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not yet replicated")));
  // It ran: UNAVAILABLE means "retry", and the retry of an idempotent write finds it done.
  absl::StatusOr<RedisReply> read = Call(*too_many, Get());
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->str, "unreplicated");

  if (backend_->replicas() == 0) return;
  pool.wait_replicas = backend_->replicas();
  pool.wait_timeout = absl::Seconds(2);
  std::unique_ptr<RedisCaller> enough = MakeCaller(pool);
  ASSERT_NE(enough, nullptr);
  EXPECT_THAT(Call(*enough, Set("replicated")), IsOk());
}

// Inline round trips (RedisClientOptions::inline_wait): a lone command marked inline_ok is run
// and answered on the submitting thread, with the same NOSCRIPT and deadline handling, except a
// write that WAIT follows; one Redis does not answer within inline_wait is left to the I/O
// thread, which answers it once Redis does.
TEST_P(RedisCallerContractTest, AnInlineCommandIsAnsweredOnTheCallersThreadWithEveryPromise) {
  RedisClientOptions pool = Pool();
  pool.connections = 2;
  pool.inline_wait = absl::Milliseconds(200);  // generous: the thread is the point, not the speed
  std::unique_ptr<RedisCaller> caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  const auto inline_call = [&](RedisCommand command) {
    command.inline_ok = true;
    std::optional<std::thread::id> answered_on;
    absl::StatusOr<RedisReply> reply = Await<RedisReply>([&](Callback<RedisReply> done) {
      caller->Submit(std::move(command), absl::Now() + absl::Seconds(5),
                     [&, done = std::move(done)](absl::StatusOr<RedisReply> r) mutable {
                       answered_on = std::this_thread::get_id();
                       std::move(done)(std::move(r));
                     });
    });
    return std::make_pair(std::move(reply), answered_on);
  };
  // The first command connects on an I/O thread (a connection is never made inline), and the
  // thread must be back waiting for work before its connection can be lent: retry until a call
  // is answered inline (the first retry, but for a busy box).
  const auto answered_inline = [&](const RedisCommand& command, bool flush_first = false) {
    absl::StatusOr<RedisReply> reply = absl::UnknownError("not answered inline");
    Eventually([&] {
      if (flush_first) {
        EXPECT_THAT(backend_->OnEveryNode({"SCRIPT", "FLUSH"}), IsOk());
      }
      auto [r, thread] = inline_call(command);
      if (thread != std::this_thread::get_id()) return false;
      reply = std::move(r);
      return true;
    });
    return reply;
  };
  absl::StatusOr<RedisReply> echo = answered_inline(Echo("inline"));
  ASSERT_THAT(echo, IsOk());
  EXPECT_EQ(echo->str, "inline");
  // NOSCRIPT answered by EVAL of the body, inline too.
  absl::StatusOr<RedisReply> flushed = answered_inline(Echo("after-flush"), /*flush_first=*/true);
  ASSERT_THAT(flushed, IsOk());
  EXPECT_EQ(flushed->str, "after-flush");
  EXPECT_THAT(inline_call(Set("late")).first, IsOk());
  RedisCommand late = Set("past-deadline");
  late.inline_ok = true;
  EXPECT_THAT(Call(*caller, std::move(late), absl::Now() - absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));

  // A write that WAIT follows never runs inline (WAIT may take wait_timeout); a read still does.
  pool.wait_replicas = backend_->replicas() + 1;
  pool.wait_timeout = absl::Milliseconds(50);
  caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  ASSERT_THAT(answered_inline(Get()), IsOk());
  for (int i = 0; i < 3; ++i) {
    auto [reply, thread] = inline_call(Set("unreplicated"));
    EXPECT_THAT(reply, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("not yet replicated")));
    EXPECT_NE(thread, std::this_thread::get_id());
  }
}

TEST_P(RedisCallerContractTest, AnInlineCommandRedisDoesNotAnswerInTimeIsLeftToTheIoThread) {
  RedisClientOptions pool = Pool();
  pool.inline_wait = absl::Milliseconds(2);
  std::unique_ptr<RedisCaller> caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  ASSERT_THAT(Call(*caller, Set("warm")), IsOk());
  // Redis holds every client's commands for 500 ms (as a slow command would).
  ASSERT_THAT(backend_->OnEveryNode({"CLIENT", "PAUSE", "500", "ALL"}), IsOk());
  RedisCommand command = Echo("slow");
  command.inline_ok = true;
  absl::Notification answered;
  absl::StatusOr<RedisReply> reply;
  std::thread::id answered_on;
  const absl::Time start = absl::Now();
  caller->Submit(std::move(command), absl::Now() + absl::Seconds(5),
                 [&](absl::StatusOr<RedisReply> r) {
                   reply = std::move(r);
                   answered_on = std::this_thread::get_id();
                   answered.Notify();
                 });
  const absl::Duration blocked = absl::Now() - start;
  // Submit gave up waiting long before Redis answered; the I/O thread answers it.
  EXPECT_FALSE(answered.HasBeenNotified()) << "blocked " << blocked;
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->str, "slow");
  EXPECT_NE(answered_on, std::this_thread::get_id());
  ASSERT_THAT(backend_->OnEveryNode({"CLIENT", "UNPAUSE"}), IsOk());
  EXPECT_THAT(Call(*caller, Echo("after")), IsOk());
}

// Before the demotion, which changes the primary.
TEST_P(RedisCallerContractTest, ScriptsAnswerByFcallAndSurviveFunctionFlush) {
  // Functions are replicated and persisted, unlike cached scripts: start from none.
  ASSERT_THAT(backend_->OnEveryNode({"FUNCTION", "FLUSH"}), IsOk());
  RedisClientOptions pool = Pool();
  pool.function_library = kEchoLibrary;
  pool.functions = {"orderhold_contract_echo"};
  std::unique_ptr<RedisCaller> caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  ExpectEcho(*caller, "before", "f:before");
  // FUNCTION FLUSH (or DELETE): "Function not found" is answered by EVAL of the script's body,
  // never by an error to the caller, and the connection goes on by EVALSHA.
  ASSERT_THAT(backend_->OnEveryNode({"FUNCTION", "FLUSH"}), IsOk());
  ExpectEcho(*caller, "after", "after");
  ExpectEcho(*caller, "again", "again");
  // A new connection loads the library again; one that finds it loaded calls it too.
  std::unique_ptr<RedisCaller> fresh = MakeCaller(pool);
  ASSERT_NE(fresh, nullptr);
  ExpectEcho(*fresh, "reloaded", "f:reloaded");
  std::unique_ptr<RedisCaller> another = MakeCaller(pool);
  ASSERT_NE(another, nullptr);
  ExpectEcho(*another, "loaded", "f:loaded");
  ASSERT_THAT(backend_->OnEveryNode({"FUNCTION", "FLUSH"}), IsOk());
}

// Last: it changes the primary.
TEST_P(RedisCallerContractTest, WritesNeverSucceedOnADemotedPrimary) {
  RedisClientOptions pool = Pool();
  pool.command_timeout = absl::Milliseconds(500);
  std::unique_ptr<RedisCaller> caller = MakeCaller(pool);
  ASSERT_NE(caller, nullptr);
  ASSERT_THAT(Call(*caller, Set("before")), IsOk());
  absl::StatusOr<bool> promoted = backend_->Demote();
  ASSERT_THAT(promoted, IsOk());
  if (!*promoted) {
    // No primary to go to: every write is refused (READONLY at the node, or ROLE at connect).
    for (int i = 0; i < 5; ++i) {
      EXPECT_THAT(Call(*caller, Set(absl::StrCat("demoted-", i))),
                  StatusIs(absl::StatusCode::kUnavailable,
                           AnyOf(HasSubstr("READONLY"), HasSubstr("not the primary"),
                                 HasSubstr("failing fast"))));
    }
    return;
  }
  // A replica was promoted: writes are refused or redirected until the caller follows, then
  // succeed, and a read sees the last one.
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<RedisReply> reply = Call(*caller, Set("after"));
        EXPECT_TRUE(reply.ok() || absl::IsUnavailable(reply.status())) << reply.status();
        return reply.ok();
      },
      absl::Seconds(20), absl::Milliseconds(100)));
  absl::StatusOr<RedisReply> value = Call(*caller, Get());
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(value->str, "after");
}

INSTANTIATE_TEST_SUITE_P(Backends, RedisCallerContractTest,
                         ::testing::Values(Kind::kStandalone, Kind::kSentinel, Kind::kCluster),
                         [](const auto& info) { return NameOf(info.param); });

}  // namespace
}  // namespace orderhold::redis
