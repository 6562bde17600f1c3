// RedisClient: a small pool of connections to the primary, each driven by its own I/O thread,
// that pipelines queued commands (redis-plus-plus' pool + the batching of a pipelined client).
//
// Layers: RedisConnection (redis_connection.h) is "how to talk to a node" (our socket, plain or
// TLS, RESP commands, hiredis' reader); RedisTopology (redis_topology.h) is "which node" (the
// standalone address, or the primary Sentinel names). This class is the pool: batching,
// deadlines, fail-fast, script loading, error classification (redis_reply.h) and WAIT.
//
// Why this shape: each I/O thread owns one connection, takes up to `max_pipeline` queued commands
// at once, writes them all, then reads all replies: one round trip per batch, so throughput is
// not bounded by one round trip at a time, and callers (gRPC callback threads) only enqueue and
// never block.
//
// Connecting: the topology names the primary; the connection AUTHs, SELECTs the database,
// checks `ROLE` is master when the topology asks for it (Sentinel, and standalone too, so a
// demoted node is refused at connect instead of answering READONLY to every write; an ACL
// without +role skips the check), and loads the scripts — all in one round trip. A plain
// connection that Redis drops before answering any of that gets a hint to use rediss://: that is
// how Redis treats a plain client on its TLS port. Then it asks the topology again
// (RedisTopology::Refresh: Sentinel asks the sentinels afresh) and is dropped unless the answer
// is still that node, so a connect begun before a failover and completed by a hung old primary
// that resumed is never used.
//
// Scripts: the Lua bodies given in the options are loaded (SCRIPT LOAD) on every new connection
// and called by EVALSHA; a NOSCRIPT reply (Redis restart, failover, SCRIPT FLUSH) is retried once
// as EVAL of the body, which reloads the script and runs it in one step
// (https://redis.io/docs/interact/programmability/eval-intro/).
// With `function_library`, every new connection also sends FUNCTION LOAD of that library (Redis 7
// Functions, https://redis.io/docs/latest/develop/interact/programmability/functions-intro/), and
// where the node takes it (loaded now, or "already exists": the name is a hash of the code) the
// scripts are called by FCALL of `functions` instead: the same code, but its helpers are compiled
// once per load, where EVALSHA runs the whole body, closures and all, on every call (~2-3 µs of
// Redis per PlaceHold, tests/bench/README.md). Where FUNCTION LOAD is refused (an ACL without
// +function|load, a Redis before 7.0, a managed Redis without FUNCTION), the connection calls
// by EVALSHA; the first refusal is logged once per client. Where it fails otherwise (OOM, a
// library the node cannot compile), that connection calls by EVALSHA until it is made again, and
// each such connection logs why. An FCALL answered "Function not found"
// (FUNCTION FLUSH or DELETE) is retried like NOSCRIPT, as EVAL of the body, and that connection
// calls by EVALSHA until it is made again.
//
// Failover: before a batch is written, a connection made before the topology's last change
// (RedisTopology::generation) is dropped, so after a switch is seen nothing more is written to
// the old primary; idle connections are dropped within ~1 s of the change. A READONLY or
// MASTERDOWN reply (the node was demoted, e.g. by hand or by a failover nobody announced) drops
// the connection and asks the topology to re-resolve (the #1191 bug of envoy ratelimit: keeping
// such a connection fails every write forever); in standalone mode that also drops every other
// pooled connection, and so does a new connection that reached another address than the pool's
// (the DNS name moved), since a demoted node goes on serving reads (StandaloneTopology).
//
// Acknowledged means replicated (`wait_replicas` > 0): every batch holding a command with
// `writes` set is followed on the same connection by `WAIT wait_replicas wait_timeout`; when fewer
// replicas acknowledge, each write of the batch answers UNAVAILABLE ("not yet replicated") even
// though it ran: the caller retries (PlaceHold/EndHold are idempotent by order id) and gets the
// same answer once it is replicated. See https://redis.io/commands/wait/ for what WAIT does not
// promise (it is not strong consistency: a failover can still pick a replica that missed it).
//
// Failures: a connection that fails (refused, timeout, EOF, TLS error) is dropped and reconnected
// for the next batch; Redis being down at start is not an error. A connection that Redis closed
// while it was idle is noticed before the next batch is written to it and replaced first. A
// command is never re-sent after it was written: if the connection fails then, its outcome is
// unknown (a script may have run) and it fails UNAVAILABLE. Error replies become UNAVAILABLE
// (redis_reply.h); a command whose deadline passed before it was sent becomes
// DEADLINE_EXCEEDED. A round trip waits at most min(command_timeout (+ wait_timeout with WAIT),
// the latest deadline in its batch). After a connection failure the client fails fast for
// `retry_backoff` (everything queued and everything submitted meanwhile gets UNAVAILABLE at once,
// instead of queueing behind a dead or hung Redis), then tries again on the next command. A
// batch whose callers' deadlines all ran out before connect_timeout / the round trip's bound
// drops its connection (DEADLINE_EXCEEDED for them) but opens no fail-fast window: a caller's
// short deadline says nothing about Redis and must not fail everyone else's calls. A
// failure's message is logged once when it first appears (and "connected" when it ends), so a
// TLS verification failure or a wrong password is one clear log line, not one per call.
//
// Inline round trips (`inline_wait` > 0): a command marked `inline_ok` (and not a write that WAIT
// follows: WAIT may take up to wait_timeout) that finds nothing in flight (the queue empty, every
// I/O thread idle) borrows an idle connection and runs its round trip on the submitting thread,
// which waits up to `inline_wait` for the reply, gives the connection back and runs the callback
// itself. This takes the cross-thread hops out of a lone call (wake an I/O thread, complete on
// it, hand the answer back to the caller's thread): on a 2-core VM each such wake-up cost ~30 µs
// of CPU and they made a PlaceHold cost twice a no-op gRPC call (tests/bench/cpu.sh). A reply not
// begun by then is left to the connection's I/O thread, so a slow or hung Redis blocks the caller
// for `inline_wait` at most; a reply that has begun is read to its end on the caller's thread
// (bounded by the round trip's deadline: a reply split across TCP segments, or a NOSCRIPT
// answered by EVAL of the body, costs the caller that wait). A connection that is stale, closed
// by Redis or not yet made is never borrowed: the command is queued and the I/O thread
// (re)connects. Everything else (deadlines, NOSCRIPT, fail-fast, READONLY) is the same code on
// either thread.
//
// Thread-safety: Submit() is thread-safe. Callbacks run on the I/O threads (or inline in
// Submit(): an inline round trip, a full queue, the fail-fast window, shutdown) and must not
// block.
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_CLIENT_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_CLIENT_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/redis_caller.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_reply.h"
#include "server/redis/redis_topology.h"
#include "server/redis/redis_url.h"

namespace orderhold::redis {

// Why a connection was dropped to be made again (orderhold_redis_reconnects_total{reason}).
enum class ReconnectReason {
  kIoError,     // a write or read failed or timed out
  kPeerClosed,  // Redis closed it while it was idle (restart, CLIENT KILL, timeout)
  kNotPrimary,  // READONLY or MASTERDOWN: the node is no longer the primary
  kFailover,    // the topology's primary changed: the connection went to the old one
};

// The last connection failure logged (see RedisClientOptions::failure_log). Thread-safe.
class RedisFailureLog {
 public:
  // Logs `status` (a warning with its message) if it differs from the last one logged; an OK
  // status after a failure logs "<recovered> <node>" ("redis: connected to <node>") once.
  void Transition(const absl::Status& status, absl::string_view node,
                  absl::string_view recovered = "redis: connected to");

 private:
  absl::Mutex mu_;
  std::string logged_ ABSL_GUARDED_BY(mu_);  // last failure logged; empty: none
};

struct RedisClientOptions {
  // Credentials, TLS, connect timeout (bound on connecting and loading the scripts) and client
  // name of every connection (NodeOptions; CLIENT SETNAME is sent when client_name is set).
  NodeOptions node;
  // The database to SELECT after AUTH; 0: no SELECT (a Redis Cluster has only database 0).
  int db = 0;
  // Which node is the primary (StandaloneTopology, SentinelTopology, or a cluster node's
  // NodeTopology); shared by the clients of one store. Required.
  std::shared_ptr<RedisTopology> topology;
  // WAIT after each batch holding a write: replicas that must acknowledge (0: no WAIT;
  // kWaitAllReplicas: as many as the primary last reported, see on_replicas), and how long Redis
  // waits for them.
  static constexpr int kWaitAllReplicas = -1;
  int wait_replicas = 0;
  // How many replicas the primary has, as its ROLE reply lists them (connected replicas): asked in
  // each connection's handshake and, after a batch, at most every replica_check_interval (one
  // more command in that batch's round trip), when wait_replicas is kWaitAllReplicas or
  // on_replicas is set. on_replicas (may be null) is called on an I/O thread with the primary's
  // address and the count whenever it differs from the last one reported (the first included).
  std::function<void(const std::string& primary, int replicas)> on_replicas;
  absl::Duration replica_check_interval = absl::Seconds(1);
  // With kWaitAllReplicas: the most replicas any primary has reported since the process started,
  // shared by every pool made from these options (a Cluster's node pools, and a promoted
  // replica's pool after a failover). WAIT asks for this many, never fewer: a new primary reports
  // 0 replicas until the others re-point to it, and waiting for 0 then would acknowledge writes
  // a second failover loses (the soak's sentinel mode found 2,036 lost ends that way). So a
  // replica that is down makes writes UNAVAILABLE until it is back, and one removed for good
  // needs the servers restarted. Made by Create when null.
  std::shared_ptr<std::atomic<int>> most_replicas;
  absl::Duration wait_timeout = absl::Milliseconds(500);
  // Connections, one I/O thread each.
  int connections = 4;
  // Max commands written per round trip on one connection.
  int max_pipeline = 128;
  // Max queued commands; beyond it Submit answers UNAVAILABLE at once (load shedding).
  size_t max_queue = 100000;
  // Bound on one round trip, whatever the callers' deadlines (which can only shorten it).
  absl::Duration command_timeout = absl::Seconds(1);
  // After a connection failure, fail fast for this long before trying Redis again.
  absl::Duration retry_backoff = absl::Milliseconds(200);
  // How long a submitting thread waits for the reply of an inline round trip (see the file
  // comment; commands with RedisCommand::inline_ok only); 0: every command goes through the I/O
  // threads. 1 ms: a local or same-zone Redis answers a lone script well within it.
  absl::Duration inline_wait = absl::Milliseconds(1);
  // Lua script bodies, referred to by index in RedisCommand::script.
  std::vector<std::string> scripts;
  // Optional: the same scripts as one Redis Functions library (the code FUNCTION LOAD takes,
  // starting "#!lua name=<library>"), and each script's function name in it, by the same index
  // as `scripts` (so as many). Its name must change whenever its code does (a hash of the code):
  // a node that already has a library of that name is taken to have this code. Empty: scripts
  // are called by EVALSHA only. See the file comment.
  std::string function_library;
  std::vector<std::string> functions;
  // orderhold_redis_errors_total, or null.
  prometheus::Counter* errors = nullptr;
  // Which failure was logged last, shared by the clients of one store so a failure they all
  // see (a TLS verification failure, a wrong password) is one log line. Null: the client's own.
  std::shared_ptr<RedisFailureLog> failure_log;
  // Called (on an I/O thread, or a caller's thread running an inline round trip) each time a
  // connection is dropped to be made again, or null. Thread-safe.
  std::function<void(ReconnectReason)> on_reconnect;
  // A Redis Cluster node's pool (set by RedisClusterClient): MOVED, ASK, TRYAGAIN and
  // CLUSTERDOWN replies are delivered as replies of Type::kError, for the cluster client to
  // redirect or retry, instead of as UNAVAILABLE.
  bool cluster_replies = false;
};

class RedisClient final : public RedisCaller {
 public:
  // Starts the I/O threads. Does not connect: connections are made (and remade) on demand, so
  // this succeeds whether or not Redis is up. INVALID_ARGUMENT for nonsensical options.
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(RedisClientOptions options);

  // Fails queued commands with UNAVAILABLE (NotSentError), stops and joins the I/O threads.
  ~RedisClient() override;
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Queues `command`; `done` is called exactly once with the reply, UNAVAILABLE or
  // DEADLINE_EXCEEDED (see the file comment). Never blocks on I/O, except an inline round trip
  // (at most `inline_wait`, then the I/O thread takes over).
  void Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) override;

 private:
  struct Pending {
    RedisCommand command;
    absl::Time deadline;
    ReplyCallback done;
  };
  class Connection;
  class IoThread;

  explicit RedisClient(RedisClientOptions options);
  void CountError();
  // Records a connection failure: fails everything queued and opens the fail-fast window.
  void MarkDown(const absl::Status& failure);

  // The replicas WAIT waits for now: options_.wait_replicas, or with kWaitAllReplicas the count
  // the primary last reported (0 before any report: no WAIT until the handshake's ROLE answers).
  int WaitCount() const;
  // Whether connections ask ROLE for the replica count (see RedisClientOptions::on_replicas).
  bool WantsReplicaCount() const {
    return options_.wait_replicas == RedisClientOptions::kWaitAllReplicas ||
           options_.on_replicas != nullptr;
  }
  // Takes a ROLE reply of `primary`: records its replica count, reporting a change.
  void TakeRole(const RedisReply& reply, const std::string& primary);
  // Whether a batch now should carry a ROLE (due every replica_check_interval); claims the slot.
  bool RoleDue();

  const RedisClientOptions options_;
  std::atomic<int> replicas_{-1};               // the last count ROLE gave; -1: none yet
  std::atomic<int64_t> next_role_check_ns_{0};  // when a batch may carry the next ROLE
  // Set by the first connection whose FUNCTION LOAD was refused, which logs why (once per client).
  std::atomic<bool> functions_refused_ = false;
  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Until when Submit fails fast, and why (the last connection failure).
  absl::Time down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status down_status_ ABSL_GUARDED_BY(mu_);
  // One per connection, made in Create before the threads start; an idle one's connection can be
  // lent to a submitting thread (IoThread::Lend).
  std::vector<std::unique_ptr<IoThread>> io_threads_;
  std::vector<std::thread> threads_;
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_CLIENT_H_
