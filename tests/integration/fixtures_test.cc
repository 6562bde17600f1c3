// The HA and TLS fixtures themselves (RedisServer's options, TlsCerts, SentinelGroup,
// RedisCluster): they must work before any test of the code under test can rely on them. redis-cli
// stands in for a TLS client; the real one is OrderHold's own connection layer, tested elsewhere.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_cluster.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/sentinel_group.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Prints a measured duration to the log and records it in the test's XML properties.
void ReportTime(absl::string_view what, absl::Duration d) {
  std::cout << "[timing] " << what << ": " << absl::FormatDuration(d) << std::endl;
  ::testing::Test::RecordProperty(std::string(what), absl::StrCat(absl::ToInt64Milliseconds(d)));
}

class TlsFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Time start = absl::Now();
    ASSERT_OK_AND_ASSIGN(dir_, MakeTempDir("certs"));
    ASSERT_OK_AND_ASSIGN(certs_, TlsCerts::Create(dir_));
    ReportTime("TlsCerts::Create", absl::Now() - start);
  }

  absl::StatusOr<std::unique_ptr<RedisServer>> StartTls(absl::string_view auth_clients) {
    RedisServerOptions o{.admin_password = "adminpw",
                         .acl_users = {"orderhold on >ohpw ~orderhold:* &* +@all"}};
    o.tls = RedisTlsOptions{.cert_file = certs_->server_cert(),
                            .key_file = certs_->server_key(),
                            .ca_cert_file = certs_->ca_cert(),
                            .auth_clients = std::string(auth_clients)};
    return RedisServer::Start(o);
  }

  // redis-cli over TLS to `redis`'s TLS port as the app user; `extra` adds --cacert/--cert/...
  static absl::StatusOr<std::string> TlsCli(const RedisServer& redis,
                                            std::vector<std::string> extra,
                                            std::vector<std::string> command) {
    std::vector<std::string> argv = {"redis-cli",
                                     "--tls",
                                     "-h",
                                     "127.0.0.1",
                                     "-p",
                                     absl::StrCat(redis.tls_port()),
                                     "--user",
                                     "orderhold",
                                     "--pass",
                                     "ohpw",
                                     "--no-auth-warning"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), command.begin(), command.end());
    return RunProgram(argv, absl::Seconds(10));
  }

  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  std::optional<TlsCerts> certs_;
};

TEST_F(TlsFixtureTest, ServesTlsPortBesidePlainPortWithTheCertificates) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, StartTls("no"));
  EXPECT_NE(redis->tls_port(), 0);
  EXPECT_NE(redis->tls_port(), redis->port());
  EXPECT_EQ(redis->tls_url(), absl::StrCat("rediss://127.0.0.1:", redis->tls_port()));
  // The fixture's own (plain) connection AUTHs with the admin password.
  EXPECT_THAT(redis->Command({"PING"}), IsOk());
  EXPECT_THAT(redis->CommandAs("", "", {"PING"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOAUTH")));

  // Our CA verifies the server certificate's chain (redis-cli checks no host name).
  EXPECT_THAT(TlsCli(*redis, {"--cacert", certs_->ca_cert()}, {"SET", "orderhold:k", "v"}), IsOk());
  EXPECT_EQ(redis->Command({"GET", "orderhold:k"}).value_or(""), "v");
  EXPECT_THAT(TlsCli(*redis, {"--cacert", certs_->ca_cert(), "--sni", "localhost"}, {"PING"}),
              IsOk());
  // The unrelated CA does not.
  EXPECT_THAT(TlsCli(*redis, {"--cacert", certs_->other_ca_cert()}, {"PING"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("certificate verify failed")));
}

TEST_F(TlsFixtureTest, MutualTlsNeedsTheClientCertificate) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, StartTls("yes"));
  EXPECT_THAT(TlsCli(*redis, {"--cacert", certs_->ca_cert()}, {"PING"}), Not(IsOk()));
  ASSERT_OK_AND_ASSIGN(std::string pong,
                       TlsCli(*redis,
                              {"--cacert", certs_->ca_cert(), "--cert", certs_->client_cert(),
                               "--key", certs_->client_key()},
                              {"PING"}));
  EXPECT_THAT(pong, StartsWith("PONG"));
}

TEST_F(TlsFixtureTest, ReplicaFollowsItsPrimaryOverMutualTls) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> primary, StartTls("yes"));
  RedisServerOptions o{.admin_password = "adminpw",
                       .replicaof = absl::StrCat("127.0.0.1:", primary->tls_port())};
  o.tls = RedisTlsOptions{.cert_file = certs_->server_cert(),
                          .key_file = certs_->server_key(),
                          .ca_cert_file = certs_->ca_cert(),
                          .auth_clients = "yes",
                          .replication = true};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> replica, RedisServer::Start(o));
  ASSERT_THAT(primary->Command({"SET", "orderhold:r", "1"}), IsOk());
  EXPECT_TRUE(Eventually(
      [&] {
        return replica->Command({"GET", "orderhold:r"}).value_or("") == "1";
      },
      absl::Seconds(10), absl::Milliseconds(50)));
}

TEST(RedisServerFixtureTest, AclUserAndCrashRestartFromAof) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<RedisServer> redis,
      RedisServer::Start({.appendonly = true,
                          .admin_password = "adminpw",
                          .acl_users = {"app on >apppw ~orderhold:* -@all +get +set +ping"}}));
  EXPECT_THAT(redis->CommandAs("app", "apppw", {"SET", "orderhold:a", "1"}), IsOk());
  EXPECT_THAT(redis->CommandAs("app", "apppw", {"SET", "elsewhere", "1"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")));
  EXPECT_THAT(redis->CommandAs("app", "apppw", {"DEL", "orderhold:a"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")));
  EXPECT_THAT(redis->CommandAs("app", "wrong", {"PING"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("WRONGPASS")));

  const pid_t pid = redis->pid();
  EXPECT_GT(pid, 0);
  ASSERT_THAT(redis->Crash(), IsOk());
  EXPECT_FALSE(redis->running());
  EXPECT_EQ(redis->pid(), -1);
  EXPECT_THAT(redis->Command({"PING"}), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(redis->Restart(), IsOk());
  EXPECT_NE(redis->pid(), pid);
  EXPECT_EQ(redis->CommandAs("app", "apppw", {"GET", "orderhold:a"}).value_or(""), "1");
}

// Tests that run OrderHold with another --key_prefix widen both of the app ACL's patterns: its
// keys, and the channels its scripts publish nudges on (<prefix>:{p}:nudge). With only the key
// pattern widened, every SPUBLISH was refused (scripts ignore that: redis.pcall), so those tests
// ran without nudges.
TEST(RedisServerFixtureTest, AppAclForAnotherKeyPrefixCoversItsKeysAndNudgeChannels) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> redis, RedisServer::Start());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> rules, AppAclRules("contract"));
  std::vector<std::string> setuser = {"ACL", "SETUSER", "app", "on", ">apppw"};
  setuser.insert(setuser.end(), rules.begin(), rules.end());
  ASSERT_THAT(redis->Command(setuser), IsOk());
  const auto dry_run = [&](std::vector<std::string> command) {
    command.insert(command.begin(), {"ACL", "DRYRUN", "app"});
    return redis->Command(command);
  };
  EXPECT_EQ(dry_run({"ZADD", "contract7:{3}:u:alice", "1", "o"}).value_or("?"), "OK");
  EXPECT_EQ(dry_run({"SPUBLISH", "contract7:{3}:nudge", ""}).value_or("?"), "OK");
  EXPECT_THAT(dry_run({"SPUBLISH", "other:{3}:nudge", ""}).value_or("?"),
              HasSubstr("no permissions"));
  EXPECT_THAT(dry_run({"ZADD", "orderhold:{3}:u:alice", "1", "o"}).value_or("?"),
              HasSubstr("no permissions"));
}

TEST(RedisServerFixtureTest, RejectsBadTopologyOptions) {
  EXPECT_THAT(RedisServer::Start({.replicaof = "no-port"}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  RedisServerOptions o;
  o.tls = RedisTlsOptions{
      .cert_file = "c", .key_file = "k", .ca_cert_file = "ca", .auth_clients = "sometimes"};
  EXPECT_THAT(RedisServer::Start(o), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The whole Sentinel walk-through on one group: start, ACLs, failover, demotion, a sentinel down.
void FailoverWalkthrough(SentinelGroupOptions options) {
  options.app_acl_rules =
      "~orderhold:* &* -@all +auth +hello +ping +role +get +set +eval +evalsha +script|load";
  options.sentinel_password = "sentinelpw";
  options.sentinel_acl_users = {
      "ohsentinel on >spw -@all +auth +client|getname +client|id +client|setname +command +hello "
      "+ping +role +sentinel|get-master-addr-by-name +sentinel|master +sentinel|myid "
      "+sentinel|replicas +sentinel|sentinels +subscribe &*"};
  const absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SentinelGroup> group, SentinelGroup::Start(options));
  ReportTime("SentinelGroup::Start (1 primary, 1 replica, 3 sentinels)", absl::Now() - start);

  ASSERT_EQ(group->node_count(), 2);
  ASSERT_EQ(group->sentinel_count(), 3);
  EXPECT_EQ(
      group->SentinelUrl(),
      absl::StrCat("redis://orderhold:ohpw@127.0.0.1:", group->sentinel_port(0),
                   ",127.0.0.1:", group->sentinel_port(1), ",127.0.0.1:", group->sentinel_port(2)));
  EXPECT_EQ(group->PrimaryPort().value_or(0), group->node(0).port());
  EXPECT_EQ(group->PrimaryNode().value_or(-1), 0);

  // The app user, with its narrower ACL, on the primary; the replica refuses writes.
  EXPECT_THAT(group->node(0).CommandAs("orderhold", "ohpw", {"SET", "orderhold:x", "1"}), IsOk());
  EXPECT_THAT(group->node(0).CommandAs("orderhold", "ohpw", {"SET", "other:x", "1"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")));
  EXPECT_THAT(group->node(0).CommandAs("orderhold", "ohpw", {"DEL", "orderhold:x"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")));
  EXPECT_THAT(group->node(1).CommandAs("orderhold", "ohpw", {"SET", "orderhold:y", "1"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("READONLY")));
  // Replicated before the failover, so it must be on the new primary afterwards.
  ASSERT_THAT(group->node(0).Command({"SET", "orderhold:z", "1"}), IsOk());
  ASSERT_EQ(group->node(0).Command({"WAIT", "1", "5000"}).value_or(""), "1");

  // The sentinels want their password.
  EXPECT_THAT(group->sentinel(0).CommandAs("", "", {"SENTINEL", "MASTERS"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOAUTH")));
  EXPECT_THAT(group->SentinelCommand(0, {"PING"}), IsOk());
  EXPECT_THAT(group->KillSentinelPubsubClients(0), IsOk());
  // The sentinels' own ACL user (the documented minimal client set) may ask, not act.
  EXPECT_EQ(group->sentinel(1)
                .CommandAs("ohsentinel", "spw",
                           {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", group->master_name()})
                .value_or(""),
            absl::StrCat("127.0.0.1\n", group->node(0).port()));
  EXPECT_THAT(group->sentinel(1).CommandAs("ohsentinel", "spw", {"SENTINEL", "FAILOVER", "x"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")));

  const absl::Time failover = absl::Now();
  ASSERT_THAT(group->Failover(), IsOk());
  ASSERT_THAT(group->WaitForPrimary(group->node(1).port(), absl::Seconds(15)), IsOk());
  ReportTime("Failover() -> every sentinel reports the new primary", absl::Now() - failover);
  ASSERT_THAT(group->WaitForRole(1, "master", absl::Seconds(5)), IsOk());
  EXPECT_EQ(group->PrimaryNode().value_or(-1), 1);
  EXPECT_EQ(group->node(1).Command({"GET", "orderhold:z"}).value_or(""), "1");
  EXPECT_THAT(group->node(1).CommandAs("orderhold", "ohpw", {"SET", "orderhold:y", "2"}), IsOk());

  ASSERT_THAT(group->WaitForRole(0, "slave", absl::Seconds(30)), IsOk());
  ReportTime("Failover() -> old primary is a replica with its link up", absl::Now() - failover);
  EXPECT_THAT(group->node(0).CommandAs("orderhold", "ohpw", {"SET", "orderhold:y", "3"}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("READONLY")));

  // With the first sentinel down the others still answer; it comes back knowing the new primary.
  ASSERT_THAT(group->StopSentinel(0), IsOk());
  EXPECT_EQ(group->PrimaryPort().value_or(0), group->node(1).port());
  EXPECT_THAT(group->SentinelCommand(0, {"PING"}), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(group->RestartSentinel(0), IsOk());
  EXPECT_THAT(group->WaitForPrimary(group->node(1).port(), absl::Seconds(5)), IsOk());
}

// Sentinel's info and publish periods shortened (SENTINEL DEBUG), so the demotion of the old
// primary takes a few seconds instead of ~10.
TEST(SentinelGroupFixtureTest, StartsFailsOverAndDemotesTheOldPrimary) {
  FailoverWalkthrough({.sentinel_debug = {"info-period", "1000", "publish-period", "500"}});
}

// The same with Redis' real periods, to measure them (about 15 s, so not in the suite):
//   integration_tests --gtest_also_run_disabled_tests --gtest_filter='*RealSentinelTiming*'
TEST(SentinelGroupFixtureTest, DISABLED_RealSentinelTiming) { FailoverWalkthrough({}); }

// The app user's command on node i of `cluster`, on a fresh connection.
absl::StatusOr<std::string> AsApp(RedisCluster& cluster, int i,
                                  const std::vector<std::string>& args) {
  return cluster.node(i).CommandAs(cluster.options().app_user, cluster.options().app_password,
                                   args);
}

// Formation, routing, the app ACL in cluster mode, ASK/TRYAGAIN by hand, MigrateSlot, Reshard.
TEST(RedisClusterFixtureTest, FormsRoutesRedirectsAndMigrates) {
  absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start());
  ReportTime("RedisCluster::Start (3 primaries + 3 replicas)", absl::Now() - start);
  ASSERT_EQ(cluster->node_count(), 6);
  ASSERT_EQ(cluster->primary_count(), 3);

  ASSERT_OK_AND_ASSIGN(std::string info, cluster->Command(5, {"CLUSTER", "INFO"}));
  EXPECT_THAT(info, HasSubstr("cluster_state:ok"));
  EXPECT_THAT(info, HasSubstr("cluster_slots_assigned:16384"));
  EXPECT_THAT(info, HasSubstr("cluster_slots_ok:16384"));
  EXPECT_THAT(info, HasSubstr("cluster_known_nodes:6"));
  EXPECT_THAT(info, HasSubstr("cluster_size:3"));
  // redis-cli's split; replica k of primary p is InitialReplica(p, k).
  EXPECT_EQ(cluster->PrimaryFor(0).value_or(-1), 0);
  EXPECT_EQ(cluster->PrimaryFor(5460).value_or(-1), 0);
  EXPECT_EQ(cluster->PrimaryFor(5461).value_or(-1), 1);
  EXPECT_EQ(cluster->PrimaryFor(10922).value_or(-1), 1);
  EXPECT_EQ(cluster->PrimaryFor(10923).value_or(-1), 2);
  EXPECT_EQ(cluster->PrimaryFor(16383).value_or(-1), 2);
  EXPECT_THAT(cluster->PrimaryFor(16384), StatusIs(absl::StatusCode::kInvalidArgument));
  for (int p = 0; p < 3; ++p) {
    const int r = cluster->InitialReplica(p);
    EXPECT_EQ(r, 3 + p);
    EXPECT_THAT(cluster->Command(r, {"ROLE"}).value_or(""), StartsWith("slave"));
    EXPECT_THAT(cluster->Command(r, {"CLUSTER", "NODES"}).value_or(""),
                HasSubstr(absl::StrCat("slave ", cluster->NodeId(p))));
  }
  EXPECT_EQ(cluster->NodeIndexForPort(cluster->node(4).port()), 4);
  EXPECT_EQ(
      cluster->SeedUrl(),
      absl::StrCat("redis://orderhold:ohpw@127.0.0.1:", cluster->node(0).port(),
                   ",127.0.0.1:", cluster->node(1).port(), ",127.0.0.1:", cluster->node(2).port()));
  EXPECT_EQ(cluster->SeedUrl({4}),
            absl::StrCat("redis://orderhold:ohpw@127.0.0.1:", cluster->node(4).port()));

  // The spec's check value (cluster-spec.md Appendix A), and a hash-tagged OrderHold key.
  EXPECT_EQ(cluster->KeySlot("123456789").value_or(-1), 0x31C3);
  const std::string key = "orderhold:{17}:u:alice";
  ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(key));
  EXPECT_EQ(slot, 12304);
  ASSERT_OK_AND_ASSIGN(const int owner, cluster->PrimaryFor(slot));
  ASSERT_EQ(owner, 2);
  const std::string owner_address = absl::StrCat("127.0.0.1:", cluster->node(owner).port());

  // The app user writes through the owner and reads back; other nodes answer MOVED, a replica too
  // (no READONLY).
  EXPECT_EQ(AsApp(*cluster, owner, {"SET", key, "v"}).value_or(""), "OK");
  EXPECT_EQ(AsApp(*cluster, owner, {"GET", key}).value_or(""), "v");
  EXPECT_THAT(
      AsApp(*cluster, 0, {"GET", key}),
      StatusIs(absl::StatusCode::kInternal, absl::StrCat("MOVED ", slot, " ", owner_address)));
  EXPECT_THAT(AsApp(*cluster, cluster->InitialReplica(owner), {"GET", key}),
              StatusIs(absl::StatusCode::kInternal, StartsWith("MOVED")));

  // The app ACL in cluster mode: the deploy file's rules lack what a cluster client needs on top;
  // kClusterAppAclRules (the fixture's default extra) adds it.
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> file_rules, AppAclRules());
  std::vector<std::string> setuser = {"ACL", "SETUSER", "fileonly", "on", ">fpw"};
  setuser.insert(setuser.end(), file_rules.begin(), file_rules.end());
  ASSERT_THAT(cluster->Command(owner, setuser), IsOk());
  for (std::vector<std::string> command :
       {std::vector<std::string>{"CLUSTER", "SHARDS"}, {"CLUSTER", "SLOTS"}, {"ASKING"}}) {
    EXPECT_THAT(cluster->node(owner).CommandAs("fileonly", "fpw", command),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("NOPERM")))
        << command[0];
    EXPECT_THAT(AsApp(*cluster, owner, command), IsOk()) << command[0];
  }
  EXPECT_THAT(cluster->node(owner).CommandAs("fileonly", "fpw", {"GET", key}), IsOk());
  // MOVED needs no permission: a key of another primary's slot.
  std::string elsewhere;
  for (int tag = 0; tag < 64 && elsewhere.empty(); ++tag) {
    std::string k = absl::StrCat("orderhold:{", tag, "}:x");
    ASSERT_OK_AND_ASSIGN(int s, cluster->KeySlot(k));
    if (cluster->PrimaryFor(s).value_or(owner) != owner) elsewhere = k;
  }
  EXPECT_THAT(cluster->node(owner).CommandAs("fileonly", "fpw", {"GET", elsewhere}),
              StatusIs(absl::StatusCode::kInternal, StartsWith("MOVED")));

  // ASK and TRYAGAIN by hand: the slot MIGRATING from its owner to node 0.
  const std::string missing = "orderhold:{17}:missing";
  ASSERT_THAT(cluster->SetImporting(slot, 0, owner), IsOk());
  ASSERT_THAT(cluster->SetMigrating(slot, owner, 0), IsOk());
  EXPECT_EQ(AsApp(*cluster, owner, {"GET", key}).value_or(""), "v");
  EXPECT_THAT(AsApp(*cluster, owner, {"GET", missing}),
              StatusIs(absl::StatusCode::kInternal,
                       absl::StrCat("ASK ", slot, " 127.0.0.1:", cluster->node(0).port())));
  EXPECT_THAT(AsApp(*cluster, 0, {"GET", missing}),
              StatusIs(absl::StatusCode::kInternal, StartsWith("MOVED")));
  // ASKING holds for the next command on the same connection (Command()'s cached one).
  ASSERT_THAT(cluster->Command(0, {"ASKING"}), IsOk());
  EXPECT_EQ(cluster->Command(0, {"GET", missing}).value_or(""), "(nil)");
  EXPECT_THAT(AsApp(*cluster, owner,
                    {"EVAL", "return redis.call('EXISTS', KEYS[1], KEYS[2])", "2", key, missing}),
              StatusIs(absl::StatusCode::kInternal, StartsWith("TRYAGAIN")));
  ASSERT_THAT(cluster->SetStable(slot, 0), IsOk());
  ASSERT_THAT(cluster->SetStable(slot, owner), IsOk());
  EXPECT_THAT(AsApp(*cluster, owner, {"GET", missing}), IsOk());

  // A whole slot with its key.
  start = absl::Now();
  ASSERT_THAT(cluster->MigrateSlot(slot, owner, 0), IsOk());
  ReportTime("MigrateSlot (one key)", absl::Now() - start);
  EXPECT_EQ(cluster->PrimaryFor(slot).value_or(-1), 0);
  EXPECT_EQ(AsApp(*cluster, 0, {"GET", key}).value_or(""), "v");
  EXPECT_THAT(AsApp(*cluster, owner, {"GET", key}),
              StatusIs(absl::StatusCode::kInternal,
                       absl::StrCat("MOVED ", slot, " 127.0.0.1:", cluster->node(0).port())));
  EXPECT_THAT(cluster->MigrateSlot(slot, owner, 1),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not the owner")));
  ASSERT_THAT(cluster->SetStable(slot, 1), IsOk());  // undo the IMPORTING that preceded it

  // The operator's tool: redis-cli moves node 0's lowest slots.
  start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::string output, cluster->Reshard(0, 1, 10));
  ReportTime("Reshard (10 empty slots, redis-cli)", absl::Now() - start);
  EXPECT_THAT(output, HasSubstr("Moving slot"));
  EXPECT_EQ(cluster->PrimaryFor(0).value_or(-1), 1);
  EXPECT_EQ(cluster->PrimaryFor(9).value_or(-1), 1);
  EXPECT_EQ(cluster->PrimaryFor(10).value_or(-1), 0);
  EXPECT_THAT(cluster->WaitForReady(absl::Seconds(10)), IsOk());

  // Every node down, then back (nodes.conf and the AOF keep the cluster): as when a server under
  // test starts before its cluster.
  for (int i = 0; i < cluster->node_count(); ++i) ASSERT_THAT(cluster->node(i).Stop(), IsOk());
  EXPECT_THAT(cluster->PrimaryFor(0), StatusIs(absl::StatusCode::kUnavailable));
  start = absl::Now();
  for (int i = 0; i < cluster->node_count(); ++i) ASSERT_THAT(cluster->node(i).Restart(), IsOk());
  ASSERT_THAT(cluster->WaitForReady(absl::Seconds(20)), IsOk());
  ReportTime("every node stopped, restarted -> ready", absl::Now() - start);
  EXPECT_EQ(AsApp(*cluster, 0, {"GET", key}).value_or(""), "v");
  EXPECT_EQ(cluster->PrimaryFor(0).value_or(-1), 1);
}

// Graceful failover, TAKEOVER back, then kill -9 of a primary and its return as a replica.
TEST(RedisClusterFixtureTest, FailsOverGracefullyAndAfterACrash) {
  absl::Time start = absl::Now();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start());
  ReportTime("RedisCluster::Start (3 primaries + 3 replicas)", absl::Now() - start);

  const std::string key = "orderhold:{17}:u:bob";
  ASSERT_OK_AND_ASSIGN(const int slot, cluster->KeySlot(key));
  ASSERT_OK_AND_ASSIGN(const int p, cluster->PrimaryFor(slot));
  const int r = cluster->InitialReplica(p);
  ASSERT_THAT(AsApp(*cluster, p, {"SET", key, "1"}), IsOk());
  ASSERT_EQ(cluster->Command(p, {"WAIT", "1", "5000"}).value_or(""), "1");

  EXPECT_THAT(cluster->Failover(r, "SOMETIMES"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(cluster->Failover(p), StatusIs(absl::StatusCode::kInternal, HasSubstr("replica")));
  start = absl::Now();
  ASSERT_THAT(cluster->Failover(r), IsOk());
  ASSERT_THAT(cluster->WaitForPrimary(slot, r, absl::Seconds(10)), IsOk());
  ReportTime("graceful Failover() -> every node names the replica", absl::Now() - start);
  EXPECT_EQ(AsApp(*cluster, r, {"GET", key}).value_or(""), "1");
  EXPECT_THAT(AsApp(*cluster, p, {"SET", key, "2"}),
              StatusIs(absl::StatusCode::kInternal,
                       absl::StrCat("MOVED ", slot, " 127.0.0.1:", cluster->node(r).port())));
  EXPECT_THAT(cluster->Command(p, {"ROLE"}).value_or(""), StartsWith("slave"));

  start = absl::Now();
  ASSERT_THAT(cluster->Failover(p, "takeover"), IsOk());
  ASSERT_THAT(cluster->WaitForPrimary(slot, p, absl::Seconds(10)), IsOk());
  ReportTime("Failover(TAKEOVER) back -> every node names it", absl::Now() - start);
  start = absl::Now();
  ASSERT_THAT(cluster->WaitForReady(absl::Seconds(20)), IsOk());
  ReportTime("TAKEOVER -> ready again (old primary's link up)", absl::Now() - start);

  // kill -9 of another primary, whose replica has been in sync since Start().
  const int q = (p + 1) % cluster->primary_count();
  const int q_replica = cluster->InitialReplica(q);
  const int q_slot = q == 0 ? 0 : q == 1 ? 5461 : 10923;
  ASSERT_EQ(cluster->PrimaryFor(q_slot).value_or(-1), q);
  ASSERT_THAT(cluster->node(q).Crash(), IsOk());
  start = absl::Now();
  EXPECT_EQ(cluster->PrimaryFor(q_slot).value_or(-1), q);  // not yet noticed
  EXPECT_TRUE(Eventually(
      [&] {
        return absl::StartsWith(cluster->Command(q_replica, {"ROLE"}).value_or(""), "master");
      },
      absl::Seconds(20)));
  ReportTime("kill -9 primary -> its replica's ROLE is master", absl::Now() - start);
  ASSERT_THAT(cluster->WaitForPrimary(q_slot, q_replica, absl::Seconds(20)), IsOk());
  ReportTime("kill -9 primary -> replica promoted (node timeout 2 s)", absl::Now() - start);
  ASSERT_THAT(cluster->WaitForClusterOk(absl::Seconds(10)), IsOk());
  ReportTime("kill -9 primary -> cluster_state:ok everywhere", absl::Now() - start);
  EXPECT_EQ(AsApp(*cluster, p, {"GET", key}).value_or(""), "1");

  start = absl::Now();
  ASSERT_THAT(cluster->node(q).Restart(), IsOk());
  ASSERT_THAT(cluster->WaitForReady(absl::Seconds(20)), IsOk());
  ReportTime("Restart() of the killed primary -> ready, as a replica", absl::Now() - start);
  EXPECT_EQ(cluster->PrimaryFor(q_slot).value_or(-1), q_replica);
  EXPECT_THAT(cluster->Command(q, {"ROLE"}).value_or(""), StartsWith("slave"));
}

TEST(RedisClusterFixtureTest, RejectsBadOptions) {
  EXPECT_THAT(RedisCluster::Start({.primaries = 0}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RedisCluster::Start({.replicas_per_primary = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RedisCluster::Start({.admin_password = ""}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace orderhold::testing
