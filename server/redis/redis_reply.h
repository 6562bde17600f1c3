// RedisReply, an owned RESP2 reply, and the ONE place that classifies Redis error replies.
//
// No hiredis type leaves the store's connection layer: replies are converted into RedisReply.
// Error replies are replies too (Type::kError) so that the client can decide per reply what an
// error means (ClassifyRedisError) before it becomes a status (RedisErrorStatus).
//
// Sources for the classes: the Redis client guides for Sentinel
// (docs/reference/sentinel-clients.md: READONLY after a demotion), Cluster
// (docs/reference/cluster-spec.md: MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and scripting
// (docs/interact/programmability/eval-intro.md: NOSCRIPT), and the error strings of redis 7.0
// (src/server.c, src/cluster.c, src/replication.c).
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_REPLY_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_REPLY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace orderhold::redis {

// A Redis reply, owned. RESP2 shapes.
struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray, kError };
  Type type = Type::kNil;
  long long integer = 0;             // kInteger
  std::string str;                   // kString, kStatus, kError (the whole error line)
  std::vector<RedisReply> elements;  // kArray
};

// What an error reply means for the client.
enum class RedisErrorKind {
  // NOSCRIPT: the node's script cache lacks the script (restart, failover, SCRIPT FLUSH; Redis 7
  // no longer replicates SCRIPT LOAD); or FCALL's "ERR Function not found" (the library was
  // flushed or deleted). Retry once as EVAL of the body; the command did not run.
  kNoScript,
  // READONLY (writing to a replica: the node was demoted) or MASTERDOWN (a replica whose link to
  // its primary is down): this connection talks to the wrong node. Drop it and make the topology
  // re-resolve the primary. The command did not run.
  kNotPrimary,
  // LOADING, BUSY, NOREPLICAS, OOM: the node is the right one but cannot serve now.
  // UNAVAILABLE, retryable later; the command did not run (BUSY: a script is running).
  kRetryable,
  // TRYAGAIN (a multi-key command while its slot migrates, some keys moved) or CLUSTERDOWN (the
  // cluster lost a slot's primary, or is still forming): Redis Cluster is in flux for a moment.
  // The cluster client retries after a short backoff within the caller's deadline
  // (cluster-spec.md "Multiple keys operations", "Availability"); elsewhere like kRetryable. The
  // command did not run.
  kTryAgain,
  // MOVED <slot> <host:port>: in Redis Cluster the slot lives elsewhere (handled by the cluster
  // topology; in other modes it is an error like kOther).
  kMoved,
  // ASK <slot> <host:port>: the slot is migrating; re-send once, after ASKING, to that node.
  kAsk,
  // Anything else (a script's error, WRONGTYPE, NOPERM...): the command's own failure.
  kOther,
};

// Classifies an error reply by its first word (the error code). Thread-safe, no allocation.
RedisErrorKind ClassifyRedisError(absl::string_view error);

// The status a caller gets for an error reply: UNAVAILABLE "redis: <the error line>" for every
// kind. Whatever Redis answered, this request was not served and may be retried later or
// elsewhere; INTERNAL would blame a bug of ours.
absl::Status RedisErrorStatus(absl::string_view error);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_REPLY_H_
