// SentinelGroup: a Redis Sentinel deployment for tests — one primary, N replicas and three
// sentinels, each a RedisServer child process on its own free 127.0.0.1 port.
//
// Set up as in /work/shared/notes/redis-ha.md section 3.2 (and the Sentinel guide,
// https://redis.io/docs/management/sentinel/):
// - data nodes: appendonly yes, requirepass + masterauth = admin_password, one ACL user for the
// code
//   under test (`<app_user> on ><app_password> <app_acl_rules>`), extra lines from
//   data_extra_config (e.g. "min-replicas-to-write 1"); replicas `replicaof` the primary;
// - sentinels: `redis-server <own writable conf> --sentinel` with `sentinel monitor <master_name>
//   127.0.0.1 <primary port> 2`, auth-pass admin_password (they AUTH as `default`),
//   down-after-milliseconds, failover-timeout, parallel-syncs 1; optional requirepass
//   (sentinel_password) and ACL users of their own.
// Start() returns once the group can fail over: every replica's master_link_status is up, and every
// sentinel sees the primary with 2 other sentinels and all replicas (flags exactly "slave") and
// answers SENTINEL CKQUORUM with OK. That takes about 2 s here (the sentinels find each other
// through hello messages published every 2 s).
//
//   ASSERT_OK_AND_ASSIGN(std::unique_ptr<SentinelGroup> group, SentinelGroup::Start());
//   config.redis_mode = "sentinel";
//   config.redis_url = ParsedRedisUrl(group->SentinelUrl());  // redis://orderhold:ohpw@...:s0,...
//   config.redis_sentinel_master = group->master_name();
//   ASSERT_OK(group->Failover());
//   ASSERT_OK(group->WaitForPrimary(group->node(1).port(), absl::Seconds(10)));
//   ASSERT_OK(group->WaitForRole(0, "slave", absl::Seconds(30)));  // demotion takes ~10 s
//
// Faults: node(i).Crash()/Pause()/Stop()/Restart() on data nodes, StopSentinel()/RestartSentinel()
// and KillSentinelPubsubClients() on sentinels. Node indices never change: node(0) is the initial
// primary whatever Sentinel has done since; ask PrimaryPort()/PrimaryNode() for the current one.
//
// Errors (absl codes): those of RedisServer::Start() for each process; INVALID_ARGUMENT for bad
// options; DEADLINE_EXCEEDED when the group is not ready within ready_timeout (the message says
// what was still missing); per method below. Every wait is bounded by its timeout.
//
// Process hygiene as RedisServer (PR_SET_PDEATHSIG): create and destroy the group on a thread that
// outlives it. The destructor kills the sentinels first (so they start no failover while the data
// nodes go), then the data nodes, and removes every data directory.
//
// Thread-safety: thread-compatible (like RedisServer: use one group from one thread at a time).
#ifndef ORDERHOLD_TESTS_TESTING_SENTINEL_GROUP_H_
#define ORDERHOLD_TESTS_TESTING_SENTINEL_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/testing/redis_server.h"

namespace orderhold::testing {

struct SentinelGroupOptions {
  // Replicas of the primary (>= 1: Sentinel needs one to fail over).
  int replicas = 1;
  // The name the sentinels monitor (`sentinel monitor <name> ...`, --redis_sentinel_master).
  std::string master_name = "orderhold-primary";
  // requirepass and masterauth of the data nodes, and the sentinels' auth-pass. The fixture uses
  // it for its own commands (node(i).Command()).
  std::string admin_password = "adminpw";
  // The ACL user for the code under test on every data node, as in SentinelUrl(). Narrow
  // app_acl_rules to test the minimal command set, e.g. "~orderhold:* &* -@all +evalsha +ping".
  std::string app_user = "orderhold";
  std::string app_password = "ohpw";
  std::string app_acl_rules = "~orderhold:* &* +@all";
  // Extra redis.conf lines for every data node, e.g. "min-replicas-to-write 1\n"
  // "min-replicas-max-lag 2".
  std::string data_extra_config = {};
  // requirepass on the sentinels (--redis_sentinel_password); empty: sentinels need no AUTH.
  // SentinelCommand() and the readiness checks AUTH with it.
  std::string sentinel_password = {};
  // ACL users on the sentinels (--redis_sentinel_username), as RedisServerOptions::acl_users, e.g.
  // "ohsentinel on >spw -@all +auth +client|getname +client|id +client|setname +command +hello "
  // "+ping +role +sentinel|get-master-addr-by-name +sentinel|master +sentinel|myid "
  // "+sentinel|replicas +sentinel|sentinels +subscribe &*" (the documented minimal client ACL
  // plus SUBSCRIBE).
  std::vector<std::string> sentinel_acl_users = {};
  // `sentinel down-after-milliseconds`: how long a node may not answer before it is SDOWN. With
  // 1 s a kill -9 of the primary is followed by +switch-master after about 3 s.
  absl::Duration down_after = absl::Seconds(1);
  // `sentinel failover-timeout`.
  absl::Duration failover_timeout = absl::Seconds(5);
  // `SENTINEL DEBUG <param> <ms> ...` sent to every sentinel after it starts (Start() and
  // RestartSentinel()), to shorten Sentinel's internal periods (milliseconds), e.g.
  // {"info-period", "1000", "publish-period", "500"}: demotion of a replaced primary then takes
  // ~2.5 s instead of ~10 s, and Start() ~1.5 s instead of ~3 s. Empty (default): Redis' real
  // periods (info 10 s, publish 2 s), which tests measuring the production windows need.
  std::vector<std::string> sentinel_debug = {};
  // appendonly on the data nodes (so Crash() + Restart() keeps data, up to appendfsync everysec).
  bool appendonly = true;
  // Bound on Start()'s readiness wait (after the processes answer PING).
  absl::Duration ready_timeout = absl::Seconds(30);
  // RedisServerOptions::command_timeout of every process.
  absl::Duration command_timeout = absl::Seconds(2);
};

class SentinelGroup {
 public:
  // Starts the data nodes, waits for the replicas' links, starts the sentinels and waits until the
  // group is ready (see the file comment). INVALID_ARGUMENT for replicas < 1 or an empty
  // master_name/app_user/app_password/admin_password; DEADLINE_EXCEEDED after ready_timeout.
  static absl::StatusOr<std::unique_ptr<SentinelGroup>> Start(SentinelGroupOptions options = {});

  // Kills the sentinels, then the data nodes; removes their directories.
  ~SentinelGroup();

  SentinelGroup(const SentinelGroup&) = delete;
  SentinelGroup& operator=(const SentinelGroup&) = delete;

  const SentinelGroupOptions& options() const { return options_; }
  const std::string& master_name() const { return options_.master_name; }

  // Data node i: 0 is the initial primary, 1..replicas the initial replicas. Indices are fixed.
  RedisServer& node(int i) { return *nodes_.at(static_cast<size_t>(i)); }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  // The index of the data node listening on `port`, or -1.
  int NodeIndexForPort(int port) const;

  // Sentinel i (0..2), e.g. for CommandAs() or pid().
  RedisServer& sentinel(int i) { return *sentinels_.at(static_cast<size_t>(i)); }
  int sentinel_count() const { return static_cast<int>(sentinels_.size()); }
  int sentinel_port(int i) const { return sentinels_.at(static_cast<size_t>(i))->port(); }

  // "redis://<app_user>:<app_password>@127.0.0.1:<s0>,127.0.0.1:<s1>,127.0.0.1:<s2>": the
  // sentinels, in order, with the data nodes' app credentials (user and password are used as
  // given, not %-escaped).
  std::string SentinelUrl() const;

  // One command on sentinel i (RedisServer::Command(), AUTHed with sentinel_password if any).
  absl::StatusOr<std::string> SentinelCommand(int i, const std::vector<std::string>& args);

  // The primary's port as the first running sentinel that answers reports it (`SENTINEL
  // get-master-addr-by-name`). NOT_FOUND if that sentinel does not know master_name; the last
  // sentinel's error (UNAVAILABLE, DEADLINE_EXCEEDED, ...) if none answers.
  absl::StatusOr<int> PrimaryPort();
  // PrimaryPort() as a node index; NOT_FOUND if the port is none of ours.
  absl::StatusOr<int> PrimaryNode();

  // `SENTINEL FAILOVER <master_name>` on the first running sentinel that answers: a failover "as
  // if the master was not reachable", without the other sentinels' agreement. Returns once the
  // sentinel accepted it (the switch follows in about 1 s); INTERNAL with Sentinel's message if it
  // refused (e.g. "NOGOODSLAVE ...", "INPROG ...").
  absl::Status Failover();

  // Polls (every 50 ms) until every running sentinel reports 127.0.0.1:`port` as the primary.
  // DEADLINE_EXCEEDED after `timeout`, with what they reported last.
  absl::Status WaitForPrimary(int port, absl::Duration timeout);

  // Polls (every 50 ms) until data node `node` answers ROLE with `role` ("master" or "slave"; for
  // "slave" also INFO replication master_link_status:up). INVALID_ARGUMENT for another role or
  // index; DEADLINE_EXCEEDED after `timeout`. An old primary that Sentinel replaced stays "master"
  // for about 10 s before Sentinel converts it (redis-ha.md 1.2): give "slave" waits 30 s.
  absl::Status WaitForRole(int node, absl::string_view role, absl::Duration timeout);

  // RedisServer::Stop()/Restart() of sentinel i (same port and config file: it comes back knowing
  // what it knew; RestartSentinel() applies sentinel_debug again). PrimaryPort(), Failover() and
  // WaitForPrimary() skip stopped sentinels.
  absl::Status StopSentinel(int i);
  absl::Status RestartSentinel(int i);

  // `CLIENT KILL TYPE pubsub` on sentinel i: drops every pub/sub subscriber (such as a client's
  // +switch-master subscription; the sentinels' own links are not pub/sub clients of a sentinel).
  // Returns how many were killed.
  absl::StatusOr<int> KillSentinelPubsubClients(int i);

 private:
  explicit SentinelGroup(SentinelGroupOptions options) : options_(std::move(options)) {}

  // Sends options_.sentinel_debug to sentinel i (no-op when empty).
  absl::Status ApplySentinelDebug(int i);
  // One readiness check: OK when ready, else FAILED_PRECONDITION saying what is missing.
  absl::Status CheckReady();

  SentinelGroupOptions options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_SENTINEL_GROUP_H_
