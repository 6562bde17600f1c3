// RedisCaller: where OrderHold's code sends Redis commands — the interface the hold store and the
// reaper's calls depend on, whatever the deployment: one node's pool (RedisClient,
// redis_client.h) or a Redis Cluster (RedisClusterClient, redis_cluster_client.h). A command is
// a plain command or a call of a script the caller was created with (FCALL of its function, or
// EVALSHA; redis_client.h "Scripts"); the answer comes back
// once, asynchronously (see RedisCaller::Submit).
//
// Thread-safety: every function here is thread-safe; see RedisCaller for its methods.
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_CALLER_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_CALLER_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/redis/redis_args.h"
#include "server/redis/redis_reply.h"

namespace orderhold::redis {

// One command. With `script` >= 0 it is sent as FCALL <functions[script]> <args...> where the
// node took the function library, else EVALSHA <sha of scripts[script]> <args...>, so args start
// with numkeys; otherwise args is the whole command ("PING").
struct RedisCommand {
  // `script` of a plain command.
  static constexpr int kNoScript = -1;
  int script = kNoScript;
  RedisArgs args;  // packed: one allocation for all of them (redis_args.h)
  // The command may write: with RedisClientOptions::wait_replicas > 0 it is answered OK only
  // once that many replicas acknowledged its batch (WAIT).
  bool writes = false;
  // Redis Cluster's ASK redirection (cluster-spec.md "ASK redirection"): send ASKING right before
  // the command on the same connection, so a node importing the slot serves it once. Set by
  // RedisClusterClient only. An error answer to ASKING becomes the command's answer.
  bool asking = false;
  // The submitting thread may run this command's round trip itself and get its answer inline
  // (RedisClientOptions::inline_wait): for a caller that submits one command and has nothing else
  // to do, such as a gRPC handler. A caller that submits many in a row (the reaper, a fan-out
  // over partitions) leaves it false, so its commands are pipelined by the I/O threads.
  bool inline_ok = false;
};

// Where commands are submitted: one node's pool (RedisClient) or a Redis Cluster
// (RedisClusterClient, redis_cluster_client.h). The store sends its commands through this
// interface; the app builds the callers (server/redis_store.h).
class RedisCaller {
 public:
  using ReplyCallback = absl::AnyInvocable<void(absl::StatusOr<RedisReply>) &&>;

  virtual ~RedisCaller() = default;

  // Queues `command`; `done` is called exactly once with the reply, UNAVAILABLE or
  // DEADLINE_EXCEEDED (see the implementations' file comments), on an I/O thread or inline.
  // Never blocks on I/O, except a command with `inline_ok` that an idle connection runs on the
  // calling thread for at most RedisClientOptions::inline_wait. Thread-safe.
  virtual void Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) = 0;

  // Whether the store can serve every key right now as far as routing knows, for health: OK for
  // one node; for a cluster, UNAVAILABLE naming the slots that have no known primary. Never
  // blocks on I/O. Thread-safe.
  virtual absl::Status CheckRouting() { return absl::OkStatus(); }
};

// The UNAVAILABLE a RedisClient answers for a command it never wrote to any connection because
// it is shutting down (still queued in ~RedisClient, or submitted after it began): it did not
// run, so sending it elsewhere is safe (RedisClusterClient sends a closed pool's queue to the
// slot's new primary). Thread-safe.
absl::Status NotSentError(absl::string_view message);
// Whether `status` is a NotSentError. Thread-safe.
bool IsNotSent(const absl::Status& status);

// The UNAVAILABLE a RedisClient answers for a write that ran but whose WAIT answered fewer
// replicas than asked within its timeout ("not yet replicated": RedisClientOptions::wait_replicas):
// the caller's retry finds it done. Thread-safe.
absl::Status NotReplicatedError(absl::string_view message);
// Whether `status` is a NotReplicatedError. Thread-safe.
bool IsNotReplicated(const absl::Status& status);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_CALLER_H_
