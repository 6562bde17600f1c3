#include "server/redis/redis_cluster_client.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/status_macros.h"
#include "server/redis/cluster_slots.h"

namespace orderhold::redis {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(10);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(160);
// How often the retry thread looks whether the map dropped a node whose pool should close.
constexpr absl::Duration kPoolCheck = absl::Milliseconds(100);

// The topology of one node's pool: that node, always. It does not check ROLE at connect: a node
// that stopped being the slot's primary answers MOVED, which the cluster client follows. READONLY
// or MASTERDOWN from it (a replica) makes the cluster map refresh.
class NodeTopology final : public RedisTopology {
 public:
  NodeTopology(HostPort node, std::shared_ptr<ClusterTopology> cluster)
      : node_(std::move(node)), cluster_(std::move(cluster)) {}
  absl::StatusOr<HostPort> NodeFor(int) override { return node_; }
  void ReportNotPrimary(const HostPort&) override { cluster_->RequestRefresh(); }
  bool verify_role() const override { return false; }

 private:
  const HostPort node_;
  const std::shared_ptr<ClusterTopology> cluster_;
};

}  // namespace

int CommandSlot(const RedisCommand& command) {
  if (command.script >= 0) {
    // FCALL function / EVALSHA sha, then numkeys key...: args start with numkeys.
    if (command.args.size() >= 2 && command.args[0] != "0") return HashSlot(command.args[1]);
    return RedisTopology::kAnySlot;
  }
  if (command.args.size() >= 2) return HashSlot(command.args[1]);
  return RedisTopology::kAnySlot;
}

struct RedisClusterClient::Attempt {
  RedisCommand command;
  absl::Time deadline;
  ReplyCallback done;
  // Retries on TRYAGAIN/CLUSTERDOWN/no primary stop here: min(deadline, first try + window).
  absl::Time retry_until;
  absl::Duration backoff = kFirstBackoff;
  int redirects = 0;
  // Where the next send goes (a MOVED or ASK target); nullopt: the slot's primary.
  std::optional<HostPort> target;
  // Where the last send went (the host of a redirect that names none).
  HostPort sent_to;
  // A command without a key goes to any primary: the next one is tried when one is unreachable,
  // each at most once (`tried` of the `of` primaries the map had at the first send).
  int tried = 0;
  int of = 0;
};

absl::StatusOr<std::unique_ptr<RedisClusterClient>> RedisClusterClient::Create(
    RedisClusterClientOptions options) {
  if (options.topology == nullptr) {
    return absl::InvalidArgumentError("redis cluster client: no topology");
  }
  if (options.pool.db != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "redis_url: database ", options.pool.db,
        " is not possible in cluster mode: Redis Cluster has only database 0 (drop the /",
        options.pool.db, " from the URL)"));
  }
  if (options.max_redirects < 0 || options.retry_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "redis cluster client: max_redirects and retry_window must be >= 0");
  }
  // Check the node options once, as RedisClient would for every pool.
  {
    RedisClientOptions probe = options.pool;
    probe.connections = 1;
    probe.topology = std::make_shared<StandaloneTopology>(HostPort{});
    ORDERHOLD_RETURN_IF_ERROR(RedisClient::Create(std::move(probe)).status());
  }
  if (options.pool.failure_log == nullptr) {
    options.pool.failure_log = std::make_shared<RedisFailureLog>();
  }
  options.pool.cluster_replies = true;
  // A node's connection failing (killed, partitioned) most likely means the map changed.
  options.pool.on_reconnect = [topology = options.topology,
                               inner =
                                   std::move(options.pool.on_reconnect)](ReconnectReason reason) {
    if (inner) inner(reason);
    if (reason == ReconnectReason::kIoError || reason == ReconnectReason::kPeerClosed) {
      topology->RequestRefresh();
    }
  };
  std::unique_ptr<RedisClusterClient> client(new RedisClusterClient(std::move(options)));
  client->pools_generation_ = client->options_.topology->generation();
  client->thread_ = std::thread([raw = client.get()] { raw->Run(); });
  return client;
}

RedisClusterClient::RedisClusterClient(RedisClusterClientOptions options)
    : options_(std::move(options)) {}

RedisClusterClient::~RedisClusterClient() {
  std::map<std::string, std::shared_ptr<RedisClient>> pools;
  std::vector<std::shared_ptr<RedisClient>> closing;
  std::vector<std::shared_ptr<Attempt>> waiting;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  {
    absl::MutexLock lock(&mu_);
    pools.swap(pools_);
    closing.swap(closing_);
    while (!later_.empty()) {
      waiting.push_back(later_.top().attempt);
      later_.pop();
    }
  }
  for (std::shared_ptr<Attempt>& attempt : waiting) {
    std::move(attempt->done)(absl::UnavailableError("redis client shutting down"));
  }
  // Each pool's destructor fails what it has queued; replies under way may still call OnReply,
  // which now fails instead of routing (stopping_).
  pools.clear();
  closing.clear();
}

void RedisClusterClient::Submit(RedisCommand command, absl::Time deadline, ReplyCallback done) {
  auto attempt = std::make_shared<Attempt>();
  attempt->command = std::move(command);
  attempt->deadline = deadline;
  attempt->done = std::move(done);
  attempt->retry_until = std::min(deadline, absl::Now() + options_.retry_window);
  Route(std::move(attempt));
}

absl::Status RedisClusterClient::CheckRouting() { return options_.topology->CheckCoverage(); }

std::shared_ptr<RedisClient> RedisClusterClient::PoolFor(const HostPort& node,
                                                         absl::Status* error) {
  const std::string key = node.ToString();
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    *error = absl::UnavailableError("redis client shutting down");
    return nullptr;
  }
  auto it = pools_.find(key);
  if (it != pools_.end()) return it->second;
  RedisClientOptions options = options_.pool;
  options.topology = std::make_shared<NodeTopology>(node, options_.topology);
  absl::StatusOr<std::unique_ptr<RedisClient>> pool = RedisClient::Create(std::move(options));
  if (!pool.ok()) {  // Create() checked these options already: not expected
    *error = absl::UnavailableError(pool.status().message());
    return nullptr;
  }
  std::shared_ptr<RedisClient> shared = *std::move(pool);
  pools_.emplace(key, shared);
  return shared;
}

void RedisClusterClient::Route(std::shared_ptr<Attempt> attempt) {
  HostPort node;
  if (attempt->target.has_value()) {
    node = *std::move(attempt->target);
    attempt->target.reset();
  } else {
    const int slot = CommandSlot(attempt->command);
    std::vector<HostPort> primaries;
    if (slot == RedisTopology::kAnySlot) primaries = options_.topology->Primaries();
    if (!primaries.empty()) {
      if (attempt->of == 0) attempt->of = static_cast<int>(primaries.size());
      node = std::move(primaries[attempt->tried % primaries.size()]);
    } else {
      absl::StatusOr<HostPort> primary = options_.topology->NodeFor(slot);
      if (!primary.ok()) {
        // NodeFor requested a refresh: an unassigned slot is an error only after it.
        RetryLater(std::move(attempt), primary.status());
        return;
      }
      node = *std::move(primary);
    }
  }
  absl::Status error;
  std::shared_ptr<RedisClient> pool = PoolFor(node, &error);
  if (pool == nullptr) {
    std::move(attempt->done)(std::move(error));
    return;
  }
  attempt->sent_to = node;
  RedisCommand command = attempt->command;  // kept for a redirect or a retry
  attempt->command.asking = false;          // ASKING is for this one send
  const absl::Time deadline = attempt->deadline;
  pool->Submit(std::move(command), deadline,
               [this, attempt = std::move(attempt)](absl::StatusOr<RedisReply> reply) mutable {
                 OnReply(std::move(attempt), std::move(reply));
               });
}

void RedisClusterClient::OnReply(std::shared_ptr<Attempt> attempt,
                                 absl::StatusOr<RedisReply> reply) {
  // A pool closed (its node no longer a primary) with this command still queued: it never left,
  // so it goes to the slot's primary as the map now names it, within its deadline and the
  // redirect limit (once stopping_, PoolFor fails it).
  if (!reply.ok() && IsNotSent(reply.status()) && absl::Now() < attempt->deadline &&
      attempt->redirects < options_.max_redirects) {
    ++attempt->redirects;
    attempt->target.reset();
    Route(std::move(attempt));
    return;
  }
  if (!reply.ok()) {
    // A node that fails to answer may have left the map (killed, failed over): look again.
    if (absl::IsUnavailable(reply.status())) {
      options_.topology->RequestRefresh();
      // Any primary will do for a command without a key (health's TIME): one that is down (a
      // killed node before its replica is promoted) must not fail it while others answer.
      if (++attempt->tried < attempt->of && absl::Now() < attempt->deadline) {
        Route(std::move(attempt));
        return;
      }
    }
    std::move(attempt->done)(std::move(reply));
    return;
  }
  if (reply->type != RedisReply::Type::kError) {
    std::move(attempt->done)(std::move(reply));
    return;
  }
  const RedisErrorKind kind = ClassifyRedisError(reply->str);
  if (kind == RedisErrorKind::kTryAgain) {
    if (absl::StartsWith(reply->str, "CLUSTERDOWN")) options_.topology->RequestRefresh();
    RetryLater(std::move(attempt), RedisErrorStatus(reply->str));
    return;
  }
  absl::StatusOr<Redirect> redirect = ParseRedirect(reply->str, attempt->sent_to.host);
  if (!redirect.ok()) {
    // "?" as the endpoint (a node the answering node cannot name): the map must say.
    options_.topology->RequestRefresh();
    std::move(attempt->done)(RedisErrorStatus(reply->str));
    return;
  }
  if (attempt->redirects >= options_.max_redirects) {
    std::move(attempt->done)(absl::UnavailableError(
        absl::StrCat("redis cluster: more than ", options_.max_redirects,
                     " redirects for one command (last: ", reply->str, ")")));
    return;
  }
  ++attempt->redirects;
  if (redirect->kind == Redirect::Kind::kMoved) {
    if (options_.moved != nullptr) options_.moved->Increment();
    options_.topology->ReportMoved(redirect->slot, redirect->address);
  } else {
    if (options_.ask != nullptr) options_.ask->Increment();
    attempt->command.asking = true;
  }
  attempt->target = std::move(redirect->address);
  Route(std::move(attempt));
}

void RedisClusterClient::RetryLater(std::shared_ptr<Attempt> attempt, absl::Status why) {
  const absl::Time when = absl::Now() + attempt->backoff;
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_ && when < attempt->retry_until) {
      attempt->backoff = std::min(attempt->backoff * 2, kMaxBackoff);
      later_.push(Later{when, std::move(attempt)});
      return;
    }
  }
  if (absl::Now() >= attempt->deadline) {
    why = absl::DeadlineExceededError(absl::StrCat("deadline passed while ", why.message()));
  }
  std::move(attempt->done)(std::move(why));
}

void RedisClusterClient::Run() {
  while (true) {
    std::vector<std::shared_ptr<Attempt>> due;
    std::vector<std::shared_ptr<RedisClient>> unused;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time next_check = absl::Now() + kPoolCheck;
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || (!later_.empty() && later_.top().when <= absl::Now());
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready),
                            later_.empty() ? next_check : std::min(next_check, later_.top().when));
      if (stopping_) return;
      const absl::Time now = absl::Now();
      while (!later_.empty() && later_.top().when <= now) {
        due.push_back(later_.top().attempt);
        later_.pop();
      }
      // A closed pool nobody is submitting to any more is destroyed here, off its own threads.
      for (auto it = closing_.begin(); it != closing_.end();) {
        if (it->use_count() == 1) {
          unused.push_back(std::move(*it));
          it = closing_.erase(it);
        } else {
          ++it;
        }
      }
    }
    unused.clear();
    for (std::shared_ptr<Attempt>& attempt : due) Route(std::move(attempt));
    ClosePoolsOfFormerPrimaries();
  }
}

void RedisClusterClient::ClosePoolsOfFormerPrimaries() {
  const uint64_t generation = options_.topology->generation();
  if (generation == pools_generation_) return;
  const std::vector<HostPort> primaries = options_.topology->Primaries();
  if (primaries.empty()) return;  // no map: keep everything until there is one
  pools_generation_ = generation;
  absl::MutexLock lock(&mu_);
  for (auto it = pools_.begin(); it != pools_.end();) {
    const bool primary = std::any_of(primaries.begin(), primaries.end(),
                                     [&](const HostPort& p) { return p.ToString() == it->first; });
    if (primary) {
      ++it;
    } else {
      closing_.push_back(std::move(it->second));
      it = pools_.erase(it);
    }
  }
}

}  // namespace orderhold::redis
