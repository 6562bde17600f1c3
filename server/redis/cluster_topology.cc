#include "server/redis/cluster_topology.h"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/log.h"
#include "server/common/status_macros.h"

namespace orderhold::redis {
namespace {

void AddUnique(std::vector<HostPort>& list, const HostPort& node) {
  if (std::find(list.begin(), list.end(), node) == list.end()) list.push_back(node);
}

std::string Describe(const std::vector<HostPort>& nodes) {
  return absl::StrJoin(nodes, ", ", [](std::string* out, const HostPort& node) {
    absl::StrAppend(out, node.ToString());
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterTopology>> ClusterTopology::Create(
    ClusterTopologyOptions options) {
  if (options.seeds.empty()) {
    return absl::InvalidArgumentError("redis_url: cluster mode needs at least one seed host:port");
  }
  ORDERHOLD_RETURN_IF_ERROR(ValidateNodeOptions(options.node, "redis cluster"));
  if (options.refresh_interval <= absl::ZeroDuration() ||
      options.min_refresh_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "redis cluster: refresh_interval must be > 0, min_refresh_interval >= 0");
  }
  std::unique_ptr<ClusterTopology> topology(new ClusterTopology(std::move(options)));
  // One refresh before returning, so a server whose cluster is up routes from its first request.
  topology->DoRefresh("start");
  topology->thread_ = std::thread([raw = topology.get()] { raw->Run(); });
  return topology;
}

ClusterTopology::ClusterTopology(ClusterTopologyOptions options)
    : options_(std::move(options)),
      error_(absl::UnavailableError("redis cluster: slot map not fetched yet")) {}

ClusterTopology::~ClusterTopology() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<HostPort> ClusterTopology::NodeFor(int slot) {
  if (slot != kAnySlot && (slot < 0 || slot >= kClusterSlotCount)) {
    return absl::InvalidArgumentError(absl::StrCat("redis cluster: no such slot ", slot));
  }
  absl::MutexLock lock(&mu_);
  if (map_.has_value()) {
    if (slot == kAnySlot) {
      const std::vector<HostPort> primaries = map_->Primaries();
      if (!primaries.empty()) return primaries.front();
    } else if (std::optional<HostPort> node = map_->NodeFor(slot)) {
      return *std::move(node);
    }
  }
  // Unassigned (or no map): an error only after one re-fetch, so ask for it now.
  refresh_requested_ = true;
  std::string message = absl::StrCat("redis cluster: no primary known for slot ", slot);
  if (!error_.ok()) absl::StrAppend(&message, " (", error_.message(), ")");
  return absl::UnavailableError(message);
}

void ClusterTopology::RequestRefresh() {
  absl::MutexLock lock(&mu_);
  refresh_requested_ = true;
}

void ClusterTopology::ReportNotPrimary(const HostPort&) { RequestRefresh(); }

void ClusterTopology::ReportMoved(int slot, const HostPort& node) {
  absl::MutexLock lock(&mu_);
  if (map_.has_value()) map_->Update(slot, node);
  refresh_requested_ = true;
}

absl::Status ClusterTopology::CheckCoverage() {
  absl::MutexLock lock(&mu_);
  absl::Status coverage = map_.has_value() ? map_->CheckCoverage() : error_;
  if (!coverage.ok()) refresh_requested_ = true;
  return coverage;
}

std::vector<HostPort> ClusterTopology::Primaries() {
  absl::MutexLock lock(&mu_);
  if (!map_.has_value()) return {};
  return map_->Primaries();
}

std::optional<SlotMap> ClusterTopology::slot_map() {
  absl::MutexLock lock(&mu_);
  return map_;
}

absl::StatusOr<HostPort> ClusterTopology::Refresh(int slot, absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    const uint64_t target = refreshes_started_ + 1;
    refresh_requested_ = true;
    const auto answered = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || refreshes_done_ >= target;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&answered), deadline)) {
      return absl::UnavailableError("redis cluster: slot map not refreshed in time");
    }
  }
  return NodeFor(slot);
}

void ClusterTopology::Run() {
  // A node that went away must be an error on this thread, never a dead process.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

  absl::Time next_poll = absl::Now() + options_.refresh_interval;  // Create() just refreshed
  absl::Time last_refresh = absl::Now();
  while (true) {
    bool refresh = false;
    absl::string_view why = "periodic";
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      const absl::Time now = absl::Now();
      const bool requested =
          refresh_requested_ && now >= last_refresh + options_.min_refresh_interval;
      if (requested || now >= next_poll) {
        refresh = true;
        if (requested) why = "requested";
        refresh_requested_ = false;  // any refresh answers the request
      }
    }
    if (refresh) {
      last_refresh = absl::Now();
      DoRefresh(why);
      next_poll = absl::Now() + options_.refresh_interval;
    }
    absl::MutexLock lock(&mu_);
    if (refresh_requested_) {
      // Requested but rate-limited: wake when it is allowed, or to stop.
      mu_.AwaitWithDeadline(absl::Condition(&stopping_),
                            std::min(next_poll, last_refresh + options_.min_refresh_interval));
    } else {
      mu_.AwaitWithDeadline(
          absl::Condition(
              +[](ClusterTopology* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                return self->stopping_ || self->refresh_requested_;
              },
              this),
          next_poll);
    }
  }
  connection_.reset();
}

void ClusterTopology::DoRefresh(absl::string_view why) {
  std::vector<HostPort> order;
  {
    absl::MutexLock lock(&mu_);
    ++refreshes_started_;
    if (last_answered_.has_value()) order.push_back(*last_answered_);
    for (const HostPort& seed : options_.seeds) AddUnique(order, seed);
    if (map_.has_value()) {
      for (const HostPort& primary : map_->Primaries()) AddUnique(order, primary);
    }
  }
  // Every way out counts the refresh as done (Refresh() waits on it).
  struct Done {
    ClusterTopology* self;
    ~Done() {
      absl::MutexLock lock(&self->mu_);
      ++self->refreshes_done_;
    }
  } done{this};
  if (options_.refreshes != nullptr) options_.refreshes->Increment();
  std::vector<std::string> failures;
  for (const HostPort& node : order) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<SlotMap> map = AskNode(node);
    if (!map.ok()) {
      failures.emplace_back(map.status().message());
      continue;
    }
    SetMap(*std::move(map), node, why);
    return;
  }
  SetError(
      absl::UnavailableError(absl::StrCat("redis cluster: no node answered CLUSTER SHARDS (",
                                          Describe(order), "): ", absl::StrJoin(failures, "; "))));
}

absl::StatusOr<SlotMap> ClusterTopology::AskNode(const HostPort& node) {
  const absl::Time deadline = absl::Now() + options_.node.connect_timeout;
  std::unique_ptr<RedisConnection> connection = std::move(connection_);
  if (connection == nullptr || connection->address() != node || connection->broken() ||
      connection->PeerClosed()) {
    ORDERHOLD_ASSIGN_OR_RETURN(connection, ConnectNode(node, deadline));
  }
  ORDERHOLD_ASSIGN_OR_RETURN(const RedisReply shards,
                             connection->Run({"CLUSTER", "SHARDS"}, deadline));
  absl::StatusOr<SlotMap> map;
  if (shards.type == RedisReply::Type::kError) {
    // Older than 7.0 (or an ACL without cluster|shards): the deprecated CLUSTER SLOTS.
    ORDERHOLD_ASSIGN_OR_RETURN(const RedisReply slots,
                               connection->Run({"CLUSTER", "SLOTS"}, deadline));
    map = ParseClusterSlots(slots, node.host);
  } else {
    map = ParseClusterShards(shards, node.host, options_.node.tls != nullptr);
  }
  if (!map.ok()) {
    return absl::UnavailableError(
        absl::StrCat("node ", node.ToString(), ": ", map.status().message()));
  }
  connection_ = std::move(connection);  // kept for the next refresh: this node is asked first
  return map;
}

absl::StatusOr<std::unique_ptr<RedisConnection>> ClusterTopology::ConnectNode(const HostPort& node,
                                                                              absl::Time deadline) {
  return ConnectAuthenticated(node, options_.node, "-topology", "node", deadline);
}

void ClusterTopology::SetMap(SlotMap map, const HostPort& from, absl::string_view why) {
  std::optional<SlotMapDiff> diff;  // nullopt: the first map
  bool recovered = false;
  const std::string primaries = Describe(map.Primaries());
  {
    absl::MutexLock lock(&mu_);
    recovered = !error_.ok() && map_.has_value();
    error_ = absl::OkStatus();
    last_answered_ = from;
    if (map_.has_value()) diff = DiffSlotMaps(*map_, map);
    const bool changed = !diff.has_value() || diff->slots_moved > 0;
    map_ = std::move(map);
    if (changed) BumpGeneration();
  }
  if (!diff.has_value()) {
    LogInfo("redis cluster: slot map from ", from.ToString(), " (", why, "): primaries ",
            primaries);
    return;
  }
  if (diff->slots_moved == 0) {
    if (recovered) LogInfo("redis cluster: nodes answer again; slot map unchanged");
    return;
  }
  const bool failover = !diff->primaries_left.empty() && !diff->primaries_joined.empty();
  if (failover && options_.failovers != nullptr) options_.failovers->Increment();
  LogInfo("redis cluster: slot map changed (from ", from.ToString(), ", ", why,
          "): ", diff->slots_moved, " slots moved; primaries left [",
          Describe(diff->primaries_left), "], joined [", Describe(diff->primaries_joined), "]");
}

void ClusterTopology::SetError(absl::Status error) {
  bool changed = false;
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    changed = error_.message() != error.message();
    known = map_.has_value();
    error_ = error;
  }
  if (!changed) return;
  if (known) {
    LogWarning(error.message(), "; keeping the last slot map");
  } else {
    LogWarning(error.message());
  }
}

}  // namespace orderhold::redis
