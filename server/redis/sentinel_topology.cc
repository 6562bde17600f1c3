#include "server/redis/sentinel_topology.h"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace orderhold::redis {
namespace {

// How often the subscription is PINGed, which bounds how long a +switch-master waits in the
// socket and how long a stop or a dead subscription goes unnoticed.
constexpr absl::Duration kSubscriptionSlice = absl::Milliseconds(100);
constexpr char kSwitchMasterChannel[] = "+switch-master";
// How long to wait before subscribing again after the sentinels refused SUBSCRIBE.
constexpr absl::Duration kSubscribeRefusedRetry = absl::Seconds(30);

std::optional<int> ParsePort(absl::string_view text) {
  int port = 0;
  if (!absl::SimpleAtoi(text, &port) || port < 1 || port > 65535) return std::nullopt;
  return port;
}

bool IsString(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kString || reply.type == RedisReply::Type::kStatus;
}

}  // namespace

namespace sentinel_internal {

absl::StatusOr<std::optional<HostPort>> ParseMasterAddrReply(const RedisReply& reply,
                                                             const HostPort& sentinel) {
  if (reply.type == RedisReply::Type::kNil) return std::nullopt;
  if (reply.type == RedisReply::Type::kError) {
    return absl::UnavailableError(
        absl::StrCat("sentinel ", sentinel.ToString(), " answered: ", reply.str));
  }
  if (reply.type == RedisReply::Type::kArray && reply.elements.size() == 2 &&
      IsString(reply.elements[0]) && !reply.elements[0].str.empty() &&
      IsString(reply.elements[1])) {
    if (const std::optional<int> port = ParsePort(reply.elements[1].str)) {
      return HostPort{reply.elements[0].str, *port};
    }
  }
  return absl::UnavailableError(absl::StrCat("sentinel ", sentinel.ToString(),
                                             " answered get-master-addr-by-name with no address"));
}

std::optional<MasterSwitch> ParseSwitchMaster(const RedisReply& message,
                                              absl::string_view master_name) {
  if (message.type != RedisReply::Type::kArray || message.elements.size() != 3) return std::nullopt;
  for (const RedisReply& element : message.elements) {
    if (!IsString(element)) return std::nullopt;
  }
  if (message.elements[0].str != "message" || message.elements[1].str != kSwitchMasterChannel) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> words =
      absl::StrSplit(message.elements[2].str, ' ', absl::SkipEmpty());
  if (words.size() != 5 || words[0] != master_name) return std::nullopt;
  const std::optional<int> old_port = ParsePort(words[2]);
  const std::optional<int> new_port = ParsePort(words[4]);
  if (!old_port || !new_port) return std::nullopt;
  return MasterSwitch{HostPort{std::string(words[1]), *old_port},
                      HostPort{std::string(words[3]), *new_port}};
}

bool IsSubscribedPong(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kArray && !reply.elements.empty() &&
         IsString(reply.elements[0]) && absl::EqualsIgnoreCase(reply.elements[0].str, "pong");
}

absl::Status DiscoveryError(absl::string_view master_name, const std::vector<Attempt>& attempts) {
  std::vector<std::string> unknown;
  std::vector<std::string> failed;
  for (const Attempt& attempt : attempts) {
    if (attempt.error.ok()) {
      unknown.push_back(attempt.sentinel.ToString());
    } else {
      failed.emplace_back(attempt.error.message());
    }
  }
  if (unknown.empty()) {
    return absl::UnavailableError(absl::StrCat("redis sentinel: no sentinel reachable (tried ",
                                               attempts.size(), ": ", absl::StrJoin(failed, "; "),
                                               ")"));
  }
  std::string detail = absl::StrCat("unknown to ", absl::StrJoin(unknown, ", "));
  if (!failed.empty()) absl::StrAppend(&detail, "; not asked: ", absl::StrJoin(failed, "; "));
  return absl::UnavailableError(
      absl::StrCat("redis sentinel: no sentinel knows master '", master_name, "' (", detail, ")"));
}

}  // namespace sentinel_internal

absl::StatusOr<std::unique_ptr<SentinelTopology>> SentinelTopology::Create(
    SentinelOptions options) {
  if (options.sentinels.empty()) {
    return absl::InvalidArgumentError(
        "redis_url: sentinel mode needs at least one sentinel host:port");
  }
  if (options.master_name.empty()) {
    return absl::InvalidArgumentError(
        "redis_sentinel_master: sentinel mode needs the monitored master's name");
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateNodeOptions(options.node, "redis sentinel"));
  if (options.poll_interval <= absl::ZeroDuration() ||
      options.min_reresolve_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "redis sentinel: poll_interval must be > 0, min_reresolve_interval >= 0");
  }
  std::unique_ptr<SentinelTopology> topology(new SentinelTopology(std::move(options)));
  // One resolution before returning (bounded by node.connect_timeout per sentinel), so a server
  // whose sentinels are up serves from its first health check instead of starting NOT_SERVING.
  topology->Resolve("start");
  topology->thread_ = std::thread([raw = topology.get()] { raw->Run(); });
  return topology;
}

SentinelTopology::SentinelTopology(SentinelOptions options)
    : options_(std::move(options)),
      order_(options_.sentinels),
      error_(absl::UnavailableError("redis sentinel: primary not resolved yet")),
      schedule_(options_.poll_interval, options_.min_reresolve_interval,
                absl::Now(),  // the thread resolves at once
                "ReportNotPrimary", "poll") {}

SentinelTopology::~SentinelTopology() {
  schedule_.Stop();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<HostPort> SentinelTopology::NodeFor(int) {
  absl::MutexLock lock(&mu_);
  if (primary_.has_value()) return *primary_;
  return error_;
}

void SentinelTopology::ReportNotPrimary(const HostPort& address) {
  absl::MutexLock lock(&mu_);
  if (primary_.has_value() && *primary_ == address) schedule_.Request();
}

void SentinelTopology::Run() {
  // A sentinel that went away must be an error on this thread, never a dead process.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

  absl::Time next_subscribe = absl::Now();
  absl::Time next_ping = absl::InfinitePast();
  bool subscribed_before = false;
  absl::Time wake = absl::Now();
  std::string why;
  while (true) {
    const RefreshSchedule::Turn turn = schedule_.Next(wake, &why);
    if (turn == RefreshSchedule::Turn::kStop) break;
    if (turn == RefreshSchedule::Turn::kRefresh) Resolve(why);
    if (subscription_ != nullptr) {
      if (absl::Now() >= next_ping) {
        if (!PumpSubscription()) next_subscribe = absl::Now();  // make it again at once
        next_ping = absl::Now() + kSubscriptionSlice;
      }
    } else if (options_.subscribe && absl::Now() >= next_subscribe && !stopping()) {
      if (const absl::Status subscribed = Subscribe(); subscribed.ok()) {
        // Events may have been missed while there was no subscription: ask now.
        if (subscribed_before) schedule_.DueNow("poll after resubscribing");
        subscribed_before = true;
        next_ping = absl::Now() + kSubscriptionSlice;
      } else {
        next_subscribe = absl::Now() + SubscribeRetry(subscribed);
      }
    }
    wake = subscription_ != nullptr ? next_ping
           : options_.subscribe     ? next_subscribe
                                    : absl::InfiniteFuture();
  }
  subscription_.reset();
  poll_connection_.reset();
}

absl::StatusOr<HostPort> SentinelTopology::Refresh(int slot, absl::Time deadline) {
  if (!schedule_.RequestAndWait(deadline)) {
    return absl::UnavailableError(absl::StrCat(
        "redis sentinel: no answer in time from the sentinels about '", options_.master_name, "'"));
  }
  return NodeFor(slot);
}

void SentinelTopology::Resolve(absl::string_view why) {
  schedule_.Begin();
  std::vector<HostPort> order;
  {
    absl::MutexLock lock(&mu_);
    order = order_;
  }
  // Every way out ends the resolution (Refresh waits on it).
  struct Done {
    RefreshSchedule& schedule;
    ~Done() { schedule.End(); }
  } done{schedule_};
  std::vector<sentinel_internal::Attempt> attempts;
  for (const HostPort& sentinel : order) {
    if (stopping()) return;
    absl::StatusOr<std::optional<HostPort>> answer = AskSentinel(sentinel);
    if (!answer.ok()) {
      attempts.push_back({sentinel, answer.status()});
      continue;
    }
    if (!answer->has_value()) {
      attempts.push_back({sentinel, absl::OkStatus()});
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      const auto it = std::find(order_.begin(), order_.end(), sentinel);
      if (it != order_.end()) std::rotate(order_.begin(), it, it + 1);
    }
    SetPrimary(**answer, why);
    return;
  }
  SetError(sentinel_internal::DiscoveryError(options_.master_name, attempts));
}

absl::StatusOr<std::optional<HostPort>> SentinelTopology::AskSentinel(const HostPort& sentinel) {
  const absl::Time deadline = absl::Now() + options_.node.connect_timeout;
  std::unique_ptr<RedisConnection> connection;
  if (poll_connection_ != nullptr && poll_connection_->address() == sentinel &&
      !poll_connection_->PeerClosed()) {
    connection = std::move(poll_connection_);
  } else {
    ORDERHOLD_ASSIGN_OR_RETURN(connection, ConnectSentinel(sentinel, deadline, "-poll"));
  }
  poll_connection_.reset();
  ORDERHOLD_ASSIGN_OR_RETURN(
      const RedisReply reply,
      connection->Run({"SENTINEL", "get-master-addr-by-name", options_.master_name}, deadline));
  ORDERHOLD_ASSIGN_OR_RETURN(std::optional<HostPort> address,
                             sentinel_internal::ParseMasterAddrReply(reply, sentinel));
  // Kept for the next poll when it gave the address (this sentinel is now first in the order).
  if (address.has_value()) poll_connection_ = std::move(connection);
  return address;
}

absl::StatusOr<std::unique_ptr<RedisConnection>> SentinelTopology::ConnectSentinel(
    const HostPort& sentinel, absl::Time deadline, absl::string_view name_suffix) {
  return ConnectAuthenticated(sentinel, options_.node, name_suffix, "sentinel", deadline);
}

absl::Status SentinelTopology::Subscribe() {
  std::vector<HostPort> order;
  {
    absl::MutexLock lock(&mu_);
    order = order_;
  }
  std::vector<std::string> errors;
  bool refused = false;  // a sentinel answered SUBSCRIBE with an error (ACL)
  for (const HostPort& sentinel : order) {
    if (stopping()) return absl::CancelledError("stopping");
    const absl::Time deadline = absl::Now() + options_.node.connect_timeout;
    absl::StatusOr<std::unique_ptr<RedisConnection>> connection =
        ConnectSentinel(sentinel, deadline, "-subscription");
    if (!connection.ok()) {
      errors.emplace_back(connection.status().message());
      continue;
    }
    absl::StatusOr<RedisReply> reply =
        (*connection)->Run({"SUBSCRIBE", kSwitchMasterChannel}, deadline);
    if (!reply.ok()) {
      errors.emplace_back(reply.status().message());
      continue;
    }
    if (reply->type != RedisReply::Type::kArray || reply->elements.empty() ||
        reply->elements[0].str != "subscribe") {
      refused = true;
      errors.push_back(
          absl::StrCat("sentinel ", sentinel.ToString(), " refused SUBSCRIBE: ",
                       reply->type == RedisReply::Type::kError ? reply->str : "unexpected reply"));
      continue;
    }
    subscription_ = std::move(*connection);
    subscribe_failing_ = false;
    LogInfo("redis sentinel: following ", kSwitchMasterChannel, " on ", sentinel.ToString());
    return absl::OkStatus();
  }
  const absl::Status status = refused ? absl::PermissionDeniedError(absl::StrJoin(errors, "; "))
                                      : absl::UnavailableError(absl::StrJoin(errors, "; "));
  if (!subscribe_failing_) {
    LogWarning("redis sentinel: cannot subscribe to ", kSwitchMasterChannel, " (polling every ",
               absl::FormatDuration(options_.poll_interval), ", subscribing again in ",
               absl::FormatDuration(SubscribeRetry(status)), "): ", status.message());
    subscribe_failing_ = true;
  }
  return status;
}

absl::Duration SentinelTopology::SubscribeRetry(const absl::Status& failure) const {
  // A refusal (no SUBSCRIBE in the sentinel's ACL) will not go away soon: don't knock every poll.
  return absl::IsPermissionDenied(failure)
             ? std::max(options_.poll_interval, kSubscribeRefusedRetry)
             : options_.poll_interval;
}

bool SentinelTopology::PumpSubscription() {
  const absl::Time deadline = absl::Now() + options_.node.connect_timeout;
  subscription_->Append({"PING"});
  absl::Status status = subscription_->Flush(deadline);
  while (status.ok()) {
    absl::StatusOr<RedisReply> reply = subscription_->Read(deadline);
    if (!reply.ok()) {
      status = reply.status();
      break;
    }
    if (sentinel_internal::IsSubscribedPong(*reply)) return true;
    if (reply->type == RedisReply::Type::kError) {
      status = absl::UnavailableError(reply->str);
      break;
    }
    if (const std::optional<sentinel_internal::MasterSwitch> change =
            sentinel_internal::ParseSwitchMaster(*reply, options_.master_name)) {
      OnSwitchMaster(change->from, change->to);
    }
  }
  LogWarning("redis sentinel: ", kSwitchMasterChannel, " subscription on ",
             subscription_->address().ToString(), " lost (", status.message(),
             "); subscribing again");
  subscription_.reset();
  return false;
}

void SentinelTopology::OnSwitchMaster(const HostPort& from, const HostPort& to) {
  {
    absl::MutexLock lock(&mu_);
    if (primary_.has_value() && *primary_ != from) {
      // Not a switch from what we know (an old event, or we missed one): ask the sentinels.
      if (*primary_ != to) schedule_.Request();
      return;
    }
  }
  SetPrimary(to, kSwitchMasterChannel);
}

void SentinelTopology::SetPrimary(const HostPort& primary, absl::string_view why) {
  std::optional<HostPort> previous;
  bool recovered = false;
  {
    absl::MutexLock lock(&mu_);
    recovered = !error_.ok() && primary_.has_value();
    error_ = absl::OkStatus();
    if (primary_ == primary) {
      if (recovered) {
        LogInfo("redis sentinel: sentinels answer again; primary of '", options_.master_name,
                "' is still ", primary.ToString());
      }
      return;
    }
    previous = std::move(primary_);
    primary_ = primary;
    BumpGeneration();
  }
  if (previous.has_value() && options_.failovers != nullptr) options_.failovers->Increment();
  LogInfo("redis sentinel: primary of '", options_.master_name, "' is now ", primary.ToString(),
          " (was ", previous.has_value() ? previous->ToString() : "unknown", "; via ", why, ")");
}

void SentinelTopology::SetError(absl::Status error) {
  bool changed = false;
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    changed = error_.message() != error.message();
    known = primary_.has_value();
    error_ = error;
  }
  if (changed) LogRefreshFailure(error, known, "the last known primary");
}

}  // namespace orderhold::redis
