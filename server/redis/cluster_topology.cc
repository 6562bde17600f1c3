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
      error_(absl::UnavailableError("redis cluster: slot map not fetched yet")),
      // Create() refreshes once before the thread starts: the first periodic one is an interval
      // after that.
      schedule_(options_.refresh_interval, options_.min_refresh_interval,
                absl::Now() + options_.refresh_interval, "requested", "periodic") {}

ClusterTopology::~ClusterTopology() {
  schedule_.Stop();
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
  schedule_.Request();
  std::string message = absl::StrCat("redis cluster: no primary known for slot ", slot);
  if (!error_.ok()) absl::StrAppend(&message, " (", error_.message(), ")");
  return absl::UnavailableError(message);
}

void ClusterTopology::RequestRefresh() { schedule_.Request(); }

void ClusterTopology::ReportNotPrimary(const HostPort&) { RequestRefresh(); }

void ClusterTopology::ReportMoved(int slot, const HostPort& node) {
  absl::MutexLock lock(&mu_);
  if (map_.has_value()) map_->Update(slot, node);
  schedule_.Request();
}

absl::Status ClusterTopology::CheckCoverage() {
  absl::MutexLock lock(&mu_);
  absl::Status coverage = map_.has_value() ? map_->CheckCoverage() : error_;
  if (!coverage.ok()) schedule_.Request();
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
  if (!schedule_.RequestAndWait(deadline)) {
    return absl::UnavailableError("redis cluster: slot map not refreshed in time");
  }
  return NodeFor(slot);
}

void ClusterTopology::Run() {
  // A node that went away must be an error on this thread, never a dead process.
  sigset_t sigpipe;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, nullptr);

  std::string why;
  while (schedule_.Next(absl::InfiniteFuture(), &why) == RefreshSchedule::Turn::kRefresh) {
    DoRefresh(why);
  }
  connection_.reset();
}

void ClusterTopology::DoRefresh(absl::string_view why) {
  schedule_.Begin();
  std::vector<HostPort> order;
  {
    absl::MutexLock lock(&mu_);
    if (last_answered_.has_value()) order.push_back(*last_answered_);
    for (const HostPort& seed : options_.seeds) AddUnique(order, seed);
    if (map_.has_value()) {
      for (const HostPort& primary : map_->Primaries()) AddUnique(order, primary);
    }
  }
  // Every way out ends the refresh (Refresh() waits on it).
  struct Done {
    RefreshSchedule& schedule;
    ~Done() { schedule.End(); }
  } done{schedule_};
  if (options_.refreshes != nullptr) options_.refreshes->Increment();
  std::vector<std::string> failures;
  for (const HostPort& node : order) {
    if (schedule_.stopping()) return;
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
  bool failover = false;
  const std::string primaries = Describe(map.Primaries());
  {
    absl::MutexLock lock(&mu_);
    recovered = !error_.ok() && map_.has_value();
    error_ = absl::OkStatus();
    last_answered_ = from;
    // Slots moved against the map in use (MOVED patches included): whether routing changes.
    const bool changed = !map_.has_value() || DiffSlotMaps(*map_, map).slots_moved > 0;
    // Primaries left and joined against the last map a refresh read: a MOVED to the promoted
    // replica, patched in before this refresh, must not hide its joining.
    if (refreshed_.has_value()) diff = DiffSlotMaps(*refreshed_, map);
    if (diff.has_value() && diff->slots_moved > 0) {
      // A primary replaced: it left and another joined, in this map or in two steps, in either
      // order (a map read mid-failover may show the promoted replica serving the slots while the
      // old primary is still listed as one, or the old one gone and its slots unassigned).
      const bool left = !diff->primaries_left.empty(), joined = !diff->primaries_joined.empty();
      failover = (joined && (left || awaiting_replacement_)) || (left && awaiting_departure_);
      awaiting_replacement_ = left && !joined ? true : (joined ? false : awaiting_replacement_);
      awaiting_departure_ = joined && !left ? true : (left ? false : awaiting_departure_);
    }
    refreshed_ = map;
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
  if (failover && options_.failovers != nullptr) options_.failovers->Increment();
  LogInfo("redis cluster: slot map changed (from ", from.ToString(), ", ", why,
          "): ", diff->slots_moved, " slots moved since the last refresh; primaries left [",
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
  if (changed) LogRefreshFailure(error, known, "the last slot map");
}

}  // namespace orderhold::redis
