// RedisCluster: a real Redis Cluster for tests — `primaries` primaries with `replicas_per_primary`
// replicas each (default 3 + 1), every node a RedisServer child on its own free 127.0.0.1 port with
// its cluster bus on a second free port, so parallel test binaries never collide.
//
// Formed in C++ as `redis-cli --cluster create` does it (redis/redis@7.0.15:src/redis-cli.c,
// clusterManagerCommandCreate; /work/shared/notes/redis-ha.md section 3.1), without redis-cli:
//   1. each node gets its own config epoch (CLUSTER SET-CONFIG-EPOCH i+1: no epoch collisions to
//      resolve later), primaries take an even split of the 16384 slots with CLUSTER ADDSLOTSRANGE
//      (redis-cli's split: 0-5460, 5461-10922, 10923-16383 for 3);
//   2. every node CLUSTER MEETs node 0, and Start() waits until every node knows every other one;
//   3. replica k of primary p (node primaries + p * replicas_per_primary + k) runs CLUSTER
//      REPLICATE <p's id>;
//   4. Start() returns once the cluster is *ready*: every node answers `cluster_state:ok`, every
//      node's CLUSTER NODES agrees with what each node says of itself (role, primary, slots, no
//      fail/handshake flags, links connected), and every replica reports
//      `master_link_status:up` — a replica before its first sync cannot fail over
//      ("Disconnected from master for longer than allowed", redis-ha.md 2.2).
// Primaries wait CLUSTER_WRITABLE_DELAY (2 s, src/cluster.c) after they start before they report
// `cluster_state:ok`, so Start() takes a little over 2 s whatever the machine.
//
// Nodes: appendonly yes, requirepass + masterauth = admin_password (the fixture's own commands AUTH
// as `default` with it), cluster-node-timeout, and one ACL user for the code under test:
// `<app_user> on ><app_password> <rules>` where the rules are those of deploy/redis/orderhold.acl
// (AppAclRulesLine(), app_acl.h) plus kClusterAppAclRules, which a cluster client needs on top
// (measured on 7.0.15: the file's rules alone get NOPERM for CLUSTER SHARDS, CLUSTER SLOTS and
// ASKING; data commands and MOVED replies work). READONLY is not added: OrderHold never reads
// from replicas.
//
//   ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisCluster> cluster, RedisCluster::Start());
//   config.redis_mode = "cluster";
//   config.redis_url = ParsedRedisUrl(cluster->SeedUrl());  // redis://orderhold:ohpw@...:p0,...
//   ASSERT_OK_AND_ASSIGN(int slot, cluster->KeySlot("orderhold:{17}:u:alice"));  // 12304
//   ASSERT_OK_AND_ASSIGN(int owner, cluster->PrimaryFor(slot));
//   const int replica = cluster->InitialReplica(owner);
//   ASSERT_OK(cluster->Failover(replica));         // graceful CLUSTER FAILOVER
//   ASSERT_OK(cluster->WaitForPrimary(slot, replica, absl::Seconds(10)));
//   ASSERT_OK(cluster->node(owner).Crash());       // or Pause(): kill -9 / SIGSTOP
//
// Node indices never change: 0..primaries-1 are the initial primaries; whatever failovers have
// happened since, ask PrimaryFor(). Crash()/Restart()/Pause()/Resume() go through node(i); a
// restarted node rejoins with its identity (nodes.conf in its data directory) and, if it was
// replaced meanwhile, as a replica of its successor. The cluster's own view is read with CLUSTER
// NODES (one text reply that carries each node's flags, primary, slots and migrating/importing
// marks; RedisServer::Command() flattens the nested arrays of CLUSTER SHARDS/SLOTS).
//
// Errors (absl codes): those of RedisServer::Start() for each process; INVALID_ARGUMENT for bad
// options or arguments (index, slot, mode); DEADLINE_EXCEEDED when a wait runs out (the message
// says what was still missing); INTERNAL with Redis' message when a node refuses a command;
// UNAVAILABLE when the running nodes disagree about a slot or none answers. Every wait is bounded.
//
// Process hygiene as RedisServer (PR_SET_PDEATHSIG): create and destroy the cluster on a thread
// that outlives it. The destructor kills every node and removes every data directory.
//
// Thread-safety: thread-compatible (like RedisServer: use one cluster from one thread at a time).
// The code under test may talk to the nodes from any number of threads.
#ifndef ORDERHOLD_TESTS_TESTING_REDIS_CLUSTER_H_
#define ORDERHOLD_TESTS_TESTING_REDIS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/testing/redis_server.h"

namespace orderhold::testing {

// The ACL rules a Redis Cluster client needs beyond the standalone app ACL: the slot map (CLUSTER
// SHARDS, or CLUSTER SLOTS before 7.0) and ASKING for an ASK redirect (cluster-spec.md "ASK
// redirection"), and CLIENT SETNAME, which the slot map's connection sends (without it each
// connect leaves a NOPERM entry in ACL LOG). MOVED, TRYAGAIN and CLUSTERDOWN replies need no
// permission.
inline constexpr char kClusterAppAclRules[] =
    "+cluster|shards +cluster|slots +asking +client|setname";

// The number of hash slots (cluster-spec.md "Key distribution model").
inline constexpr int kClusterSlots = 16384;

struct RedisClusterOptions {
  // Primaries (>= 1), each with its share of the slots.
  int primaries = 3;
  // Replicas of each primary (>= 0); a primary without one cannot be failed over.
  int replicas_per_primary = 1;
  // cluster-node-timeout: how long a node may not answer before it is flagged FAIL and its
  // replica takes over (a kill -9 is followed by a promotion after about 2 x this: 3.8-5 s
  // measured with 2 s).
  absl::Duration node_timeout = absl::Milliseconds(2000);
  // requirepass and masterauth on every node; the fixture's own commands AUTH with it.
  std::string admin_password = "adminpw";
  // The ACL user for the code under test, as in SeedUrl().
  std::string app_user = "orderhold";
  std::string app_password = "ohpw";
  // Its rules; empty (default): AppAclRulesLine(), i.e. deploy/redis/orderhold.acl.
  std::string app_acl_rules = {};
  // Appended to app_acl_rules. Set it to "" to test what the file's rules alone allow.
  std::string app_acl_extra_rules = kClusterAppAclRules;
  // Extra redis.conf lines for every node, e.g. "cluster-require-full-coverage no".
  std::string extra_config = {};
  // appendonly on every node (so Crash() + Restart() keeps data, up to appendfsync everysec).
  bool appendonly = true;
  // Bound on Start()'s formation and readiness waits (after the processes answer PING).
  absl::Duration ready_timeout = absl::Seconds(30);
  // RedisServerOptions::command_timeout of every node.
  absl::Duration command_timeout = absl::Seconds(2);
};

class RedisCluster {
 public:
  // Starts the nodes, forms the cluster and waits until it is ready (see the file comment).
  // INVALID_ARGUMENT for primaries < 1 or > 1000, replicas_per_primary < 0, a non-positive
  // node_timeout, or an empty admin_password/app_user/app_password; NOT_FOUND/INVALID_ARGUMENT
  // from AppAclRulesLine() when app_acl_rules is empty and the ACL file is unreadable;
  // DEADLINE_EXCEEDED after ready_timeout.
  static absl::StatusOr<std::unique_ptr<RedisCluster>> Start(RedisClusterOptions options = {});

  // Kills every node and removes their directories.
  ~RedisCluster();

  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  const RedisClusterOptions& options() const { return options_; }

  // Node i: 0..primaries-1 the initial primaries, then the replicas (see InitialReplica()).
  // Indices are fixed. std::out_of_range for a bad index.
  RedisServer& node(int i) { return *nodes_.at(static_cast<size_t>(i)); }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  int primary_count() const { return options_.primaries; }
  // The node index of replica k (0-based) of initial primary `primary`:
  // primaries + primary * replicas_per_primary + k. No bounds check.
  int InitialReplica(int primary, int k = 0) const {
    return options_.primaries + primary * options_.replicas_per_primary + k;
  }
  // Node i's cluster node id (40 hex characters; CLUSTER MYID at Start()). Stable across
  // Restart(). std::out_of_range for a bad index.
  const std::string& NodeId(int i) const { return ids_.at(static_cast<size_t>(i)); }
  // The index of the node listening on `port` (data port), or -1.
  int NodeIndexForPort(int port) const;

  // "redis://<app_user>:<app_password>@127.0.0.1:<p>,127.0.0.1:<q>,...": the given nodes' data
  // ports in the given order, with the app credentials (as given, not %-escaped). Empty `nodes`
  // (default): the initial primaries. Indices are not checked (std::out_of_range).
  std::string SeedUrl(const std::vector<int>& nodes = {}) const;

  // One command on node i as the admin (RedisServer::Command()). INVALID_ARGUMENT for a bad index.
  absl::StatusOr<std::string> Command(int i, const std::vector<std::string>& args);

  // CLUSTER KEYSLOT `key` on the first running, unpaused node: the key's hash slot (0-16383).
  // UNAVAILABLE when no node is running.
  absl::StatusOr<int> KeySlot(absl::string_view key);

  // The index of the primary that serves `slot`, as every running, unpaused node's CLUSTER NODES
  // says. A crashed primary not yet replaced is still the answer (the cluster still names it).
  // INVALID_ARGUMENT for a slot outside 0-16383; NOT_FOUND if no node assigns the slot;
  // UNAVAILABLE, with each node's answer, while they disagree (a failover or migration being
  // learnt), or when no node is running; the error of a node that does not answer.
  absl::StatusOr<int> PrimaryFor(int slot);

  // CLUSTER FAILOVER [FORCE|TAKEOVER] on node `replica`: "" is the graceful manual failover (the
  // primary stops, the replica catches up and takes over: no acknowledged write lost), "FORCE"
  // does not wait for the primary (it may be down) but needs a majority of primaries, "TAKEOVER"
  // needs nobody (commands/cluster-failover.md). Returns once the node accepted; the switch
  // follows (about 0.1 s for graceful): WaitForPrimary(). INVALID_ARGUMENT for another mode or a
  // bad index; INTERNAL with Redis' message if the node refuses (e.g. "ERR You should send CLUSTER
  // FAILOVER to a replica", "ERR Master is down or failed, please use CLUSTER FAILOVER FORCE").
  absl::Status Failover(int replica, absl::string_view mode = "");

  // Polls (every 50 ms) until PrimaryFor(slot) is `node`. DEADLINE_EXCEEDED after `timeout`, with
  // the last answer; INVALID_ARGUMENT for a bad slot or index.
  absl::Status WaitForPrimary(int slot, int node, absl::Duration timeout);

  // Polls (every 50 ms) until every running, unpaused node answers CLUSTER INFO with
  // `cluster_state:ok` (after a kill -9 of a primary every node says `fail` for about a second
  // once the failure is agreed, until the replica takes over). DEADLINE_EXCEEDED after `timeout`,
  // naming the nodes that are not ok (or saying that none is running).
  absl::Status WaitForClusterOk(absl::Duration timeout);

  // Polls (every 50 ms) until the cluster is ready as after Start() (see the file comment): every
  // node running and unpaused, all views agreeing, every replica's link up. For use after a
  // Restart() of a crashed node, before the next failover. DEADLINE_EXCEEDED after `timeout`
  // saying what was missing.
  absl::Status WaitForReady(absl::Duration timeout);

  // Moves `slot` from node `from` to node `to` (both primaries) with its keys, as `redis-cli
  // --cluster reshard` does for one slot (redis-cli.c clusterManagerMoveSlot; cluster-spec.md
  // "Cluster live reconfiguration"): SETSLOT IMPORTING on `to`, SETSLOT MIGRATING on `from`,
  // CLUSTER GETKEYSINSLOT + MIGRATE (100 keys at a time, AUTH with admin_password) until the slot
  // is empty on `from`, then SETSLOT NODE <to> on `to`, `from` and every other primary; returns
  // once every node agrees (WaitForPrimary). Keys must not contain "\n" (Command() joins array
  // elements with it). INVALID_ARGUMENT for bad arguments or from == to; INTERNAL with Redis'
  // message (e.g. "ERR I'm not the owner of hash slot ..." when `from` does not serve the slot,
  // "BUSYKEY ..." when `to` already holds one of the keys); DEADLINE_EXCEEDED after `timeout`.
  absl::Status MigrateSlot(int slot, int from, int to, absl::Duration timeout = absl::Seconds(10));

  // The single steps, for a hand-made ASK/TRYAGAIN test (cluster-spec.md "ASK redirection"):
  // CLUSTER SETSLOT <slot> IMPORTING <source's id> on node `node`, CLUSTER SETSLOT <slot>
  // MIGRATING <destination's id> on node `node`, CLUSTER SETSLOT <slot> STABLE on node `node`.
  // While `source` is MIGRATING to `destination` and `destination` IMPORTING from `source`:
  // a key missing on the source gets `ASK <slot> 127.0.0.1:<destination port>`, a multi-key
  // command with some keys missing gets TRYAGAIN, the destination answers MOVED unless ASKING
  // came first on the same connection. INVALID_ARGUMENT for bad arguments; INTERNAL with Redis'
  // message when refused.
  absl::Status SetImporting(int slot, int node, int source);
  absl::Status SetMigrating(int slot, int node, int destination);
  absl::Status SetStable(int slot, int node);

  // Runs `redis-cli --cluster reshard 127.0.0.1:<from port> --cluster-from <from id> --cluster-to
  // <to id> --cluster-slots <slot_count> --cluster-yes` with the admin password — the real
  // operator tool, for tests of a reshard under load — then waits until every node agrees on the
  // new slot map. INVALID_ARGUMENT for bad arguments; INTERNAL with redis-cli's output if it
  // fails (it refuses while a slot is open or the nodes disagree); DEADLINE_EXCEEDED after
  // `timeout`. Returns redis-cli's output.
  absl::StatusOr<std::string> Reshard(int from, int to, int slot_count,
                                      absl::Duration timeout = absl::Seconds(30));

 private:
  explicit RedisCluster(RedisClusterOptions options) : options_(std::move(options)) {}

  // OK when `i` names a node, else INVALID_ARGUMENT mentioning `what`.
  absl::Status CheckIndex(int i, absl::string_view what) const;
  // Indices of the nodes that are running and not paused.
  std::vector<int> LiveNodes() const;
  // One CLUSTER SETSLOT on node `node`.
  absl::Status SetSlot(int node, int slot, absl::string_view state, int target);
  // One readiness check (see WaitForReady): OK, or FAILED_PRECONDITION saying what is missing.
  absl::Status CheckReady();
  // OK when every live node's CLUSTER NODES gives the same slot -> owner map, else
  // FAILED_PRECONDITION naming the first difference.
  absl::Status CheckSlotMapsAgree();

  RedisClusterOptions options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;  // CLUSTER MYID of each node, by index
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_REDIS_CLUSTER_H_
