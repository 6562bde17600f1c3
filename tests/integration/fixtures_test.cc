// The HA and TLS fixtures themselves (RedisServer's options, TlsCerts, SentinelGroup): they must
// work before any test of the code under test can rely on them. redis-cli stands in for a TLS
// client; the real one is OrderHold's own connection layer, tested elsewhere.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"
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

}  // namespace
}  // namespace orderhold::testing
