#include "server/redis/sharded_subscriber.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/common/status_macros.h"
#include "server/redis/cluster_slots.h"
#include "server/redis/redis_client.h"
#include "server/redis/redis_reply.h"

namespace orderhold::redis {
namespace {

// How long a thread waits at most before it looks at its stop flag and its assignment again: the
// bound on stopping and on picking up a new assignment.
constexpr absl::Duration kSlice = absl::Milliseconds(100);

// In-flight marker of a PING among the channels whose SSUBSCRIBE awaits its answer.
constexpr int kPing = -1;

bool IsString(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kString || reply.type == RedisReply::Type::kStatus;
}

// A pushed pub/sub message or subscription answer: {kind, channel, ...}; empty kind otherwise.
// RESP2 answers PING in subscribed mode with {"pong", ""}, and with +PONG when the connection has
// no subscription (every SSUBSCRIBE refused).
std::pair<std::string, std::string> Push(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::kStatus && absl::EqualsIgnoreCase(reply.str, "pong")) {
    return {"pong", ""};
  }
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() < 2 ||
      !IsString(reply.elements[0]) || !IsString(reply.elements[1])) {
    return {};
  }
  std::string kind = reply.elements[0].str;
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {std::move(kind), reply.elements[1].str};
}

// `status` with its message as "<name>: ..." (instead of "redis: ..."), so the log line says
// which connection failed.
absl::Status Prefixed(absl::string_view name, const absl::Status& status) {
  absl::string_view message = status.message();
  absl::ConsumePrefix(&message, "redis: ");
  return absl::Status(status.code(), absl::StrCat(name, ": ", message));
}

}  // namespace

// One primary node's connection and thread: subscribes the channels the manager assigns it.
class ShardedSubscriber::Node {
 public:
  Node(ShardedSubscriber& parent, HostPort address)
      : parent_(parent), options_(parent.options_), address_(std::move(address)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Node() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

  void SetWanted(std::set<int> channels) {
    absl::MutexLock lock(&mu_);
    if (channels == wanted_) return;
    wanted_ = std::move(channels);
    ++wanted_version_;
  }

 private:
  bool stopping() const {
    return stop_.load(std::memory_order_acquire) ||
           parent_.stopping_.load(std::memory_order_acquire);
  }

  void Run() {
    // A write to a socket Redis closed must come back as EPIPE, not kill the process.
    sigset_t sigpipe;
    sigemptyset(&sigpipe);
    sigaddset(&sigpipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

    absl::Duration backoff = options_.timings.retry_backoff;
    absl::Time retry_at = absl::InfinitePast();
    while (!stopping()) {
      if (connection_ == nullptr) {
        const absl::Time now = absl::Now();
        if (now < retry_at) {
          absl::SleepFor(std::min(retry_at - now, kSlice));
          continue;
        }
        if (absl::Status status = Connect(); !status.ok()) {
          if (options_.connect_failure_log != nullptr) {
            options_.connect_failure_log->Transition(status, "");
          } else {
            log_.Transition(Prefixed(options_.name, status), "");
          }
          retry_at = absl::Now() + backoff;
          backoff = std::min(backoff * 2, options_.timings.max_retry_backoff);
          parent_.RequestRecheck();
          continue;
        }
        backoff = options_.timings.retry_backoff;
      }
      absl::Status status = Step();
      if (!status.ok()) {
        log_.Transition(Prefixed(options_.name, status), "");
        Drop();
        retry_at = absl::Now() + backoff;
        backoff = std::min(backoff * 2, options_.timings.max_retry_backoff);
        parent_.RequestRecheck();
      }
    }
    Drop();
  }

  absl::Status Connect() {
    ORDERHOLD_ASSIGN_OR_RETURN(connection_,
                               ConnectAuthenticated(address_, options_.node, "", "node",
                                                    absl::Now() + options_.node.connect_timeout));
    last_heard_ = absl::Now();
    subscribe_at_ = absl::InfinitePast();
    return absl::OkStatus();
  }

  // Forgets the connection and everything subscribed on it.
  void Drop() {
    connection_.reset();
    parent_.subscribed_.fetch_sub(static_cast<int>(subscribed_.size()), std::memory_order_acq_rel);
    subscribed_.clear();
    sent_.clear();
    in_flight_.clear();
    ping_outstanding_ = false;
  }

  // One turn: subscribes what is missing, keeps the connection alive, handles what Redis sent
  // within one slice. An error: the connection must go.
  absl::Status Step() {
    {
      absl::MutexLock lock(&mu_);
      if (seen_version_ != wanted_version_) {
        wanted_copy_ = wanted_;
        seen_version_ = wanted_version_;
      }
    }
    for (int channel : subscribed_) {
      if (wanted_copy_.count(channel) == 0) {
        // Leaving a node that still serves it: connect again without it (no SUNSUBSCRIBE, so the
        // app ACL needs no permission for it; this happens only when the topology moved). One
        // merely sent is left to its answer: usually a MOVED, else it is subscribed and lands
        // here.
        Drop();
        return absl::OkStatus();
      }
    }
    absl::Time now = absl::Now();
    bool appended = false;
    if (now >= subscribe_at_) {
      for (int channel : wanted_copy_) {
        if (subscribed_.count(channel) > 0 || sent_.count(channel) > 0) continue;
        // One channel per SSUBSCRIBE: Redis Cluster refuses channels of two slots in one.
        connection_->Append({"SSUBSCRIBE", options_.channels[channel]});
        sent_.insert(channel);
        in_flight_.push_back(channel);
        appended = true;
      }
    }
    if (!ping_outstanding_ && now - last_heard_ >= options_.timings.keepalive_interval) {
      connection_->Append({"PING"});
      in_flight_.push_back(kPing);
      ping_outstanding_ = true;
      ping_sent_ = now;
      appended = true;
    }
    if (appended)
      ORDERHOLD_RETURN_IF_ERROR(connection_->Flush(now + options_.node.connect_timeout));
    if (ping_outstanding_ && now - ping_sent_ >= options_.timings.keepalive_timeout) {
      return absl::UnavailableError(
          absl::StrCat(address_.ToString(), " did not answer PING in ",
                       absl::FormatDuration(options_.timings.keepalive_timeout)));
    }
    const absl::Time wake = ping_outstanding_ ? ping_sent_ + options_.timings.keepalive_timeout
                                              : last_heard_ + options_.timings.keepalive_interval;
    ORDERHOLD_ASSIGN_OR_RETURN(std::optional<RedisReply> reply,
                               connection_->TryRead(std::min(now + kSlice, wake)));
    if (!reply.has_value()) return absl::OkStatus();
    last_heard_ = absl::Now();
    return Handle(*reply);
  }

  absl::Status Handle(const RedisReply& reply) {
    const auto [kind, name] = Push(reply);
    const auto found = parent_.channel_index_.find(name);
    const int channel = found == parent_.channel_index_.end() ? -1 : found->second;
    if (kind == "smessage") {
      if (channel < 0) return absl::OkStatus();
      if (options_.messages != nullptr) options_.messages->Increment();
      // {"smessage", channel, payload}
      options_.on_message(channel, reply.elements.size() > 2 ? reply.elements[2].str : "");
      return absl::OkStatus();
    }
    if (kind == "sunsubscribe") {
      // Unsolicited (we never send SUNSUBSCRIBE): the channel's slot left this node.
      if (channel >= 0 && subscribed_.erase(channel) > 0) {
        parent_.subscribed_.fetch_sub(1, std::memory_order_acq_rel);
      }
      parent_.RequestRecheck();
      return absl::OkStatus();
    }
    if (kind != "ssubscribe" && kind != "pong" && reply.type != RedisReply::Type::kError) {
      return absl::OkStatus();  // nothing we asked for (a message of another kind)
    }
    // An answer to the oldest command in flight.
    if (in_flight_.empty()) {
      return absl::UnavailableError(absl::StrCat(
          address_.ToString(), " answered ", kind.empty() ? reply.str : kind, " to nothing asked"));
    }
    const int asked = in_flight_.front();
    in_flight_.pop_front();
    if (asked == kPing) {
      ping_outstanding_ = false;  // an error (no +ping in the ACL) shows the connection lives too
      return absl::OkStatus();
    }
    sent_.erase(asked);
    if (reply.type == RedisReply::Type::kError) return Refused(reply.str);
    if (subscribed_.insert(asked).second) {
      parent_.subscribed_.fetch_add(1, std::memory_order_acq_rel);
      if (options_.subscriptions != nullptr) options_.subscriptions->Increment();
      // Whatever was published while it was not subscribed is lost: the user may look now.
      options_.on_subscribed(asked);
    }
    if (sent_.empty() && subscribed_.size() == wanted_copy_.size()) {
      log_.Transition(absl::OkStatus(), address_.ToString(),
                      absl::StrCat(options_.name, ": subscribed at"));
    }
    return absl::OkStatus();
  }

  // An SSUBSCRIBE was answered with `error`: try again later; not a reason to drop the
  // connection.
  absl::Status Refused(const std::string& error) {
    const RedisErrorKind kind = ClassifyRedisError(error);
    if (kind == RedisErrorKind::kMoved || kind == RedisErrorKind::kAsk) {
      // The slot is served elsewhere and the topology does not know yet.
      subscribe_at_ = absl::Now() + options_.timings.subscribe_retry;
      parent_.RequestRecheck();
      return absl::OkStatus();
    }
    const bool refused = absl::StartsWith(error, "NOPERM");
    const absl::Duration retry =
        refused ? options_.timings.refused_retry : options_.timings.subscribe_retry;
    subscribe_at_ = absl::Now() + retry;
    // One line per node, whatever the channel: the channel is left out of the message.
    log_.Transition(absl::PermissionDeniedError(absl::StrCat(
                        options_.name, ": SSUBSCRIBE refused at ", address_.ToString(), ": ", error,
                        refused && !options_.refused_hint.empty() ? "; " : "",
                        refused ? options_.refused_hint : "", "; retrying every ",
                        absl::FormatDuration(retry))),
                    "");
    return absl::OkStatus();
  }

  ShardedSubscriber& parent_;
  const ShardedSubscriberOptions& options_;
  const HostPort address_;
  std::atomic<bool> stop_{false};
  RedisFailureLog log_;

  absl::Mutex mu_;
  std::set<int> wanted_ ABSL_GUARDED_BY(mu_);
  uint64_t wanted_version_ ABSL_GUARDED_BY(mu_) = 0;

  // The node thread's own state.
  uint64_t seen_version_ = 0;
  std::set<int> wanted_copy_;
  std::unique_ptr<RedisConnection> connection_;
  std::set<int> subscribed_;   // SSUBSCRIBE confirmed
  std::set<int> sent_;         // SSUBSCRIBE sent, not answered yet
  std::deque<int> in_flight_;  // channels (kPing for a PING) in the order their answers come
  absl::Time subscribe_at_ = absl::InfinitePast();  // no SSUBSCRIBE before (after a refusal)
  absl::Time last_heard_;
  bool ping_outstanding_ = false;
  absl::Time ping_sent_;
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<ShardedSubscriber>> ShardedSubscriber::Start(
    ShardedSubscriberOptions options) {
  if (options.topology == nullptr || !options.on_message || !options.on_subscribed ||
      options.channels.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.name, ": topology, on_message, on_subscribed and a channel are required"));
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateNodeOptions(options.node, options.name));
  for (const absl::Duration d :
       {options.timings.keepalive_interval, options.timings.keepalive_timeout,
        options.timings.recheck_interval, options.timings.retry_backoff,
        options.timings.max_retry_backoff, options.timings.subscribe_retry,
        options.timings.refused_retry}) {
    if (d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(options.name, ": every duration must be > 0"));
    }
  }
  std::unique_ptr<ShardedSubscriber> subscriber(new ShardedSubscriber(std::move(options)));
  if (subscriber->channel_index_.size() != subscriber->options_.channels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(subscriber->options_.name, ": a channel is named twice"));
  }
  subscriber->manager_ = std::thread([raw = subscriber.get()] { raw->Run(); });
  return subscriber;
}

ShardedSubscriber::ShardedSubscriber(ShardedSubscriberOptions options)
    : options_(std::move(options)), assigned_(options_.channels.size()) {
  for (size_t i = 0; i < options_.channels.size(); ++i) {
    slots_.push_back(HashSlot(options_.channels[i]));
    channel_index_.emplace(options_.channels[i], static_cast<int>(i));
  }
}

ShardedSubscriber::~ShardedSubscriber() {
  {
    absl::MutexLock lock(&mu_);  // wakes the manager's wait
    stopping_.store(true, std::memory_order_release);
  }
  manager_.join();
  nodes_.clear();  // joins every node thread
}

void ShardedSubscriber::RequestRecheck() {
  absl::MutexLock lock(&mu_);
  recheck_ = true;
}

void ShardedSubscriber::Run() {
  absl::Time next_assign = absl::InfinitePast();
  uint64_t generation = options_.topology->generation();
  while (true) {
    bool refresh = false;
    {
      absl::MutexLock lock(&mu_);
      const auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return recheck_ || stopping_.load(std::memory_order_acquire);
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken),
                           std::clamp(next_assign - absl::Now(), absl::ZeroDuration(), kSlice));
      if (stopping_.load(std::memory_order_acquire)) return;
      refresh = recheck_;
      recheck_ = false;
    }
    if (refresh) {
      // Ask the source of truth rather than the map that sent us to the wrong node.
      (void)options_.topology->Refresh(RedisTopology::kAnySlot,
                                       absl::Now() + options_.node.connect_timeout);
    }
    const uint64_t now_generation = options_.topology->generation();
    if (refresh || now_generation != generation || absl::Now() >= next_assign) {
      generation = now_generation;
      Assign();
      next_assign = absl::Now() + options_.timings.recheck_interval;
    }
  }
}

void ShardedSubscriber::Assign() {
  std::map<std::string, std::pair<HostPort, std::set<int>>> wanted;
  for (int p = 0; p < static_cast<int>(options_.channels.size()); ++p) {
    absl::StatusOr<HostPort> node = options_.topology->NodeFor(slots_[p]);
    if (!node.ok()) {
      // No answer for now (no map, no sentinel): keep the channel where it is.
      if (!assigned_[p].has_value()) continue;
      std::pair<HostPort, std::set<int>>& entry = wanted[assigned_[p]->ToString()];
      entry.first = *assigned_[p];
      entry.second.insert(p);
      continue;
    }
    std::pair<HostPort, std::set<int>>& entry = wanted[node->ToString()];
    entry.first = *node;
    entry.second.insert(p);
    assigned_[p] = *node;
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    it = wanted.count(it->first) == 0 ? nodes_.erase(it) : std::next(it);
  }
  for (auto& [key, entry] : wanted) {
    std::unique_ptr<Node>& node = nodes_[key];
    if (node == nullptr) node = std::make_unique<Node>(*this, entry.first);
    node->SetWanted(std::move(entry.second));
  }
}

}  // namespace orderhold::redis
