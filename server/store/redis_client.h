// RedisClient: a small pool of hiredis connections, each driven by its own I/O thread, that
// pipelines queued commands (redis-plus-plus' pool + the batching of a pipelined client).
//
// Why this shape: hiredis 0.14 contexts are not thread-safe and its async API has no timeouts.
// Here each I/O thread owns one blocking context with a socket timeout (redisSetTimeout), takes
// up to `max_pipeline` queued commands at once, writes them all, then reads all replies: one
// round trip per batch, so throughput is not bounded by one round trip at a time, and callers
// (gRPC callback threads) only enqueue and never block.
//
// Scripts: the Lua bodies given in the options are loaded (SCRIPT LOAD) on every new connection
// and called by EVALSHA; a NOSCRIPT reply (Redis restart, failover, SCRIPT FLUSH) is retried once
// as EVAL of the body, which reloads the script and runs it in one step
// (https://redis.io/docs/interact/programmability/eval-intro/).
//
// Failures: a connection that fails (refused, timeout, EOF) is dropped and reconnected for the
// next batch; Redis being down at start is not an error. A connection that Redis closed while it
// was idle (Redis restarted) is noticed before the next batch is written to it (its socket is
// readable though no reply is owed) and reconnected first, so that batch does not fail. A
// command is never re-sent after it was written: if the connection fails then, its outcome is
// unknown (a script may have run) and it fails. Error replies (LOADING, READONLY, OOM,
// script errors...) and I/O failures become UNAVAILABLE; a command whose deadline passed before
// it was sent becomes DEADLINE_EXCEEDED. A round trip waits at most min(command_timeout, the
// latest deadline in its batch). After a connection failure the client fails fast for
// `retry_backoff` (everything queued and everything submitted meanwhile gets UNAVAILABLE at once,
// instead of queueing behind a dead or hung Redis), then tries again on the next command. Each
// failed command increments `errors`, if given.
//
// Thread-safety: Submit() is thread-safe. Callbacks run on the I/O threads (or inline in
// Submit() when the queue is full or the client is shutting down) and must not block.
#ifndef ORDERHOLD_SERVER_STORE_REDIS_CLIENT_H_
#define ORDERHOLD_SERVER_STORE_REDIS_CLIENT_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/store/redis_url.h"

namespace orderhold::store {

// A Redis reply, owned (no hiredis type leaves redis_client.cc). RESP2 shapes.
struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray };
  Type type = Type::kNil;
  long long integer = 0;             // kInteger
  std::string str;                   // kString, kStatus
  std::vector<RedisReply> elements;  // kArray
};

// One command. With `script` >= 0 it is sent as EVALSHA <sha of scripts[script]> <args...>, so
// args start with numkeys; otherwise args is the whole command ("PING").
struct RedisCommand {
  int script = -1;
  std::vector<std::string> args;
};

struct RedisClientOptions {
  RedisEndpoint endpoint;
  // Connections, one I/O thread each.
  int connections = 4;
  // Max commands written per round trip on one connection.
  int max_pipeline = 128;
  // Max queued commands; beyond it Submit answers UNAVAILABLE at once (load shedding).
  size_t max_queue = 100000;
  // Bound on connecting (and loading scripts) to Redis.
  absl::Duration connect_timeout = absl::Milliseconds(500);
  // Bound on one round trip, whatever the callers' deadlines (which can only shorten it).
  absl::Duration command_timeout = absl::Seconds(1);
  // After a connection failure, fail fast for this long before trying Redis again.
  absl::Duration retry_backoff = absl::Milliseconds(200);
  // Lua script bodies, referred to by index in RedisCommand::script.
  std::vector<std::string> scripts;
  // orderhold_redis_errors_total, or null.
  prometheus::Counter* errors = nullptr;
};

class RedisClient {
 public:
  using ReplyCallback = absl::AnyInvocable<void(absl::StatusOr<RedisReply>) &&>;

  // Starts the I/O threads. Does not connect: connections are made (and remade) on demand, so
  // this succeeds whether or not Redis is up. INVALID_ARGUMENT for nonsensical options.
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(RedisClientOptions options);

  // Fails queued commands with UNAVAILABLE, stops and joins the I/O threads.
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Queues `command`; `done` is called exactly once with the reply, UNAVAILABLE or
  // DEADLINE_EXCEEDED (see the file comment). Never blocks on I/O.
  void Submit(RedisCommand command, absl::Time deadline, ReplyCallback done);

 private:
  struct Pending {
    RedisCommand command;
    absl::Time deadline;
    ReplyCallback done;
  };
  class Connection;

  explicit RedisClient(RedisClientOptions options);
  void IoLoop();
  void CountError();
  // Records a connection failure: fails everything queued and opens the fail-fast window.
  void MarkDown(const absl::Status& failure);

  const RedisClientOptions options_;
  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Until when Submit fails fast, and why (the last connection failure).
  absl::Time down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Status down_status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_CLIENT_H_
