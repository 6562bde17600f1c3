#include "tests/testing/redis_cluster.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/common/status_macros.h"
#include "tests/testing/app_acl.h"
#include "tests/testing/eventually.h"
#include "tests/testing/os_util.h"

namespace orderhold::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
// Keys per MIGRATE, and MIGRATE's own timeout for one batch (milliseconds, Redis' unit).
constexpr int kMigrateBatch = 100;
constexpr int kMigrateTimeoutMs = 5000;

using SlotRanges = std::vector<std::pair<int, int>>;  // inclusive, sorted, merged

// One line of CLUSTER NODES (https://redis.io/commands/cluster-nodes/):
//   <id> <ip:port@cport[,hostname]> <flags> <primary id|-> <ping-sent> <pong-recv> <config-epoch>
//   <link-state> <slot> <slot-slot> ... [<slot>->-<id>] [<slot>-<-<id>]
struct NodeLine {
  std::string id;
  int port = 0;
  std::vector<std::string> flags;  // myself, master, slave, fail?, fail, handshake, noaddr, ...
  std::string primary_id;          // "-" for a primary
  std::string link_state;          // connected | disconnected
  SlotRanges slots;                // owned; the [migrating/importing] marks are left out

  bool HasFlag(absl::string_view flag) const {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  }
  bool Owns(int slot) const {
    return std::any_of(slots.begin(), slots.end(),
                       [&](const auto& r) { return r.first <= slot && slot <= r.second; });
  }
  // "master of 0-5460" / "slave of <id>", for messages.
  std::string Describe() const {
    std::vector<std::string> ranges;
    for (const auto& [first, last] : slots) ranges.push_back(absl::StrCat(first, "-", last));
    return absl::StrCat(absl::StrJoin(flags, ","), " of ", primary_id, " slots [",
                        absl::StrJoin(ranges, " "), "]");
  }
};

SlotRanges Normalize(SlotRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  SlotRanges merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && merged.back().second + 1 >= r.first) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

absl::StatusOr<std::vector<NodeLine>> ParseClusterNodes(absl::string_view text) {
  std::vector<NodeLine> lines;
  for (absl::string_view row : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = absl::StrSplit(row, ' ', absl::SkipEmpty());
    absl::string_view address = f.size() >= 8 ? f[1].substr(0, f[1].find('@')) : "";
    NodeLine line;
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &line.port)) {
      return absl::InternalError(absl::StrCat("unexpected CLUSTER NODES line: ", row));
    }
    line.id = std::string(f[0]);
    line.flags = absl::StrSplit(f[2], ',');
    line.primary_id = std::string(f[3]);
    line.link_state = std::string(f[7]);
    for (size_t i = 8; i < f.size(); ++i) {
      if (absl::StartsWith(f[i], "[")) continue;
      std::pair<absl::string_view, absl::string_view> bounds = absl::StrSplit(f[i], '-');
      int first = 0;
      int last = 0;
      if (!absl::SimpleAtoi(bounds.first, &first) ||
          !absl::SimpleAtoi(bounds.second.empty() ? bounds.first : bounds.second, &last)) {
        return absl::InternalError(absl::StrCat("unexpected slot '", f[i], "' in: ", row));
      }
      line.slots.emplace_back(first, last);
    }
    line.slots = Normalize(std::move(line.slots));
    lines.push_back(std::move(line));
  }
  return lines;
}

absl::StatusOr<std::vector<NodeLine>> ClusterNodes(RedisServer& node) {
  ORDERHOLD_ASSIGN_OR_RETURN(std::string text, node.Command({"CLUSTER", "NODES"}));
  return ParseClusterNodes(text);
}

const NodeLine* FindSelf(const std::vector<NodeLine>& view) {
  for (const NodeLine& line : view) {
    if (line.HasFlag("myself")) return &line;
  }
  return nullptr;
}

// `field:value` of an INFO-style reply ("" when missing).
std::string InfoField(absl::string_view info, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(info, absl::ByAnyChar("\r\n"), absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, field) && absl::ConsumePrefix(&line, ":")) {
      return std::string(line);
    }
  }
  return "";
}

// Checks `check` (OK = done) at once and every kPollInterval until it is OK or `timeout` passes;
// then DEADLINE_EXCEEDED with `what` and the last status.
template <typename Check>
absl::Status PollUntilOk(Check check, absl::Duration timeout, absl::string_view what) {
  absl::Status last;
  if (Eventually(
          [&] {
            last = check();
            return last.ok();
          },
          timeout, kPollInterval)) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      what, " not within ", absl::FormatDuration(timeout), "; last: ", last.ToString()));
}

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::ZeroDuration());
}

absl::Status CheckSlot(int slot) {
  if (slot < 0 || slot >= kClusterSlots) {
    return absl::InvalidArgumentError(absl::StrCat("slot ", slot, " is not in 0-16383"));
  }
  return absl::OkStatus();
}

// redis-cli's even split of the slots over `primaries` (clusterManagerCommandCreate).
SlotRanges SplitSlots(int primaries) {
  SlotRanges ranges;
  const double per_node = static_cast<double>(kClusterSlots) / primaries;
  double cursor = 0;
  long first = 0;
  for (int i = 0; i < primaries; ++i) {
    long last = std::lround(cursor + per_node - 1);
    if (last > kClusterSlots - 1 || i == primaries - 1) last = kClusterSlots - 1;
    if (last < first) last = first;
    ranges.emplace_back(static_cast<int>(first), static_cast<int>(last));
    first = last + 1;
    cursor += per_node;
  }
  return ranges;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisCluster>> RedisCluster::Start(RedisClusterOptions options) {
  if (options.primaries < 1 || options.primaries > 1000 || options.replicas_per_primary < 0) {
    return absl::InvalidArgumentError(
        "RedisClusterOptions: primaries must be 1-1000 and replicas_per_primary >= 0");
  }
  if (options.node_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RedisClusterOptions::node_timeout must be positive");
  }
  if (options.admin_password.empty() || options.app_user.empty() || options.app_password.empty()) {
    return absl::InvalidArgumentError(
        "RedisClusterOptions: admin_password, app_user and app_password must be set");
  }
  if (options.app_acl_rules.empty()) {
    ORDERHOLD_ASSIGN_OR_RETURN(options.app_acl_rules, AppAclRulesLine());
  }
  std::unique_ptr<RedisCluster> cluster(new RedisCluster(std::move(options)));
  const RedisClusterOptions& opts = cluster->options_;

  RedisServerOptions node_options{
      .appendonly = opts.appendonly,
      .extra_config =
          absl::StrCat("cluster-node-timeout ", absl::ToInt64Milliseconds(opts.node_timeout), "\n",
                       opts.extra_config),
      .command_timeout = opts.command_timeout,
      .admin_password = opts.admin_password,
      .acl_users = {absl::StrCat(opts.app_user, " on >", opts.app_password, " ", opts.app_acl_rules,
                                 " ", opts.app_acl_extra_rules)},
      .cluster = true,
  };
  const int total = opts.primaries * (1 + opts.replicas_per_primary);
  for (int i = 0; i < total; ++i) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> node, RedisServer::Start(node_options));
    cluster->nodes_.push_back(std::move(node));
  }
  const absl::Time deadline = absl::Now() + opts.ready_timeout;

  // 1. Identities, distinct config epochs (only possible while a node knows no other), slots.
  const SlotRanges split = SplitSlots(opts.primaries);
  for (int i = 0; i < total; ++i) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::string id, cluster->Command(i, {"CLUSTER", "MYID"}));
    cluster->ids_.push_back(std::move(id));
    ORDERHOLD_RETURN_IF_ERROR(
        cluster->Command(i, {"CLUSTER", "SET-CONFIG-EPOCH", absl::StrCat(i + 1)}).status());
    if (i < opts.primaries) {
      ORDERHOLD_RETURN_IF_ERROR(
          cluster
              ->Command(i, {"CLUSTER", "ADDSLOTSRANGE", absl::StrCat(split[i].first),
                            absl::StrCat(split[i].second)})
              .status());
    }
  }
  // 2. Everybody meets node 0; gossip spreads the rest.
  RedisServer& first = cluster->node(0);
  for (int i = 1; i < total; ++i) {
    ORDERHOLD_RETURN_IF_ERROR(
        cluster
            ->Command(i, {"CLUSTER", "MEET", "127.0.0.1", absl::StrCat(first.port()),
                          absl::StrCat(first.cluster_port())})
            .status());
  }
  ORDERHOLD_RETURN_IF_ERROR(PollUntilOk(
      [&]() -> absl::Status {
        for (int i = 0; i < total; ++i) {
          ORDERHOLD_ASSIGN_OR_RETURN(std::vector<NodeLine> view, ClusterNodes(cluster->node(i)));
          const bool settled = std::none_of(view.begin(), view.end(), [](const NodeLine& l) {
            return l.HasFlag("handshake") || l.HasFlag("noaddr");
          });
          if (static_cast<int>(view.size()) != total || !settled) {
            return absl::FailedPreconditionError(absl::StrCat("node ", i, " knows ", view.size(),
                                                              " of ", total, " nodes (handshakes ",
                                                              settled ? "done" : "pending", ")"));
          }
        }
        return absl::OkStatus();
      },
      Remaining(deadline), "every cluster node knowing every other one"));
  // 3. Replicas.
  for (int p = 0; p < opts.primaries; ++p) {
    for (int k = 0; k < opts.replicas_per_primary; ++k) {
      ORDERHOLD_RETURN_IF_ERROR(
          cluster
              ->Command(cluster->InitialReplica(p, k), {"CLUSTER", "REPLICATE", cluster->ids_[p]})
              .status());
    }
  }
  // 4. Ready.
  ORDERHOLD_RETURN_IF_ERROR(cluster->WaitForReady(Remaining(deadline)));
  return cluster;
}

RedisCluster::~RedisCluster() { nodes_.clear(); }

absl::Status RedisCluster::CheckIndex(int i, absl::string_view what) const {
  if (i < 0 || i >= node_count()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no node ", i, " (the cluster has ", node_count(), ")"));
  }
  return absl::OkStatus();
}

std::vector<int> RedisCluster::LiveNodes() const {
  std::vector<int> live;
  for (int i = 0; i < node_count(); ++i) {
    if (nodes_[i]->running() && !nodes_[i]->paused()) live.push_back(i);
  }
  return live;
}

int RedisCluster::NodeIndexForPort(int port) const {
  for (int i = 0; i < node_count(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  return -1;
}

std::string RedisCluster::SeedUrl(const std::vector<int>& nodes) const {
  std::vector<std::string> hosts;
  if (nodes.empty()) {
    for (int i = 0; i < options_.primaries; ++i) {
      hosts.push_back(absl::StrCat("127.0.0.1:", nodes_.at(i)->port()));
    }
  }
  for (int i : nodes) hosts.push_back(absl::StrCat("127.0.0.1:", nodes_.at(i)->port()));
  return absl::StrCat("redis://", options_.app_user, ":", options_.app_password, "@",
                      absl::StrJoin(hosts, ","));
}

absl::StatusOr<std::string> RedisCluster::Command(int i, const std::vector<std::string>& args) {
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(i, "Command()"));
  return node(i).Command(args);
}

absl::StatusOr<int> RedisCluster::KeySlot(absl::string_view key) {
  std::vector<int> live = LiveNodes();
  if (live.empty()) return absl::UnavailableError("KeySlot(): no cluster node is running");
  ORDERHOLD_ASSIGN_OR_RETURN(std::string reply,
                             Command(live[0], {"CLUSTER", "KEYSLOT", std::string(key)}));
  int slot = 0;
  if (!absl::SimpleAtoi(reply, &slot)) {
    return absl::InternalError(absl::StrCat("CLUSTER KEYSLOT answered '", reply, "'"));
  }
  return slot;
}

absl::StatusOr<int> RedisCluster::PrimaryFor(int slot) {
  ORDERHOLD_RETURN_IF_ERROR(CheckSlot(slot));
  std::map<int, std::vector<int>> owners;  // owner index (-1: unassigned) -> nodes saying so
  for (int i : LiveNodes()) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::vector<NodeLine> view, ClusterNodes(node(i)));
    int owner = -1;
    for (const NodeLine& line : view) {
      if (!line.Owns(slot)) continue;
      auto it = std::find(ids_.begin(), ids_.end(), line.id);
      if (it == ids_.end()) {
        return absl::InternalError(
            absl::StrCat("node ", i, " says slot ", slot, " is served by unknown node ", line.id));
      }
      owner = static_cast<int>(it - ids_.begin());
    }
    owners[owner].push_back(i);
  }
  if (owners.empty()) return absl::UnavailableError("PrimaryFor(): no cluster node is running");
  if (owners.size() > 1) {
    std::vector<std::string> views;
    for (const auto& [owner, viewers] : owners) {
      views.push_back(absl::StrCat("nodes ", absl::StrJoin(viewers, ","), " say ",
                                   owner < 0 ? "unassigned" : absl::StrCat("node ", owner)));
    }
    return absl::UnavailableError(
        absl::StrCat("nodes disagree about slot ", slot, ": ", absl::StrJoin(views, "; ")));
  }
  const int owner = owners.begin()->first;
  if (owner < 0) return absl::NotFoundError(absl::StrCat("slot ", slot, " is not assigned"));
  return owner;
}

absl::Status RedisCluster::Failover(int replica, absl::string_view mode) {
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(replica, "Failover()"));
  const std::string upper = absl::AsciiStrToUpper(mode);
  std::vector<std::string> args = {"CLUSTER", "FAILOVER"};
  if (upper == "FORCE" || upper == "TAKEOVER") {
    args.push_back(upper);
  } else if (!upper.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Failover(): mode must be \"\", FORCE or TAKEOVER, got '", mode, "'"));
  }
  return Command(replica, args).status();
}

absl::Status RedisCluster::WaitForPrimary(int slot, int node, absl::Duration timeout) {
  ORDERHOLD_RETURN_IF_ERROR(CheckSlot(slot));
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(node, "WaitForPrimary()"));
  return PollUntilOk(
      [&]() -> absl::Status {
        ORDERHOLD_ASSIGN_OR_RETURN(int owner, PrimaryFor(slot));
        if (owner == node) return absl::OkStatus();
        return absl::FailedPreconditionError(absl::StrCat("node ", owner, " serves it"));
      },
      timeout, absl::StrCat("node ", node, " serving slot ", slot));
}

absl::Status RedisCluster::WaitForClusterOk(absl::Duration timeout) {
  return PollUntilOk(
      [&]() -> absl::Status {
        std::vector<int> live = LiveNodes();
        if (live.empty()) return absl::FailedPreconditionError("no node is running");
        std::vector<std::string> not_ok;
        for (int i : live) {
          absl::StatusOr<std::string> info = Command(i, {"CLUSTER", "INFO"});
          std::string state = info.ok() ? InfoField(*info, "cluster_state") : "?";
          if (state != "ok") not_ok.push_back(absl::StrCat("node ", i, ": ", state));
        }
        if (not_ok.empty()) return absl::OkStatus();
        return absl::FailedPreconditionError(
            absl::StrCat("cluster_state not ok on ", absl::StrJoin(not_ok, ", ")));
      },
      timeout, "cluster_state:ok on every running node");
}

absl::Status RedisCluster::WaitForReady(absl::Duration timeout) {
  return PollUntilOk([&] { return CheckReady(); }, timeout, "Redis Cluster ready");
}

absl::Status RedisCluster::CheckReady() {
  std::vector<std::vector<NodeLine>> views;
  std::map<std::string, NodeLine> self;  // by id: what each node says of itself
  for (int i = 0; i < node_count(); ++i) {
    if (!node(i).running() || node(i).paused()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", i, " (port ", node(i).port(), ") is ", node(i).running() ? "paused" : "down"));
    }
    ORDERHOLD_ASSIGN_OR_RETURN(std::vector<NodeLine> view, ClusterNodes(node(i)));
    const NodeLine* me = FindSelf(view);
    if (me == nullptr) return absl::InternalError(absl::StrCat("node ", i, ": no myself line"));
    self[me->id] = *me;
    views.push_back(std::move(view));
  }
  for (int i = 0; i < node_count(); ++i) {
    const std::string who = absl::StrCat("node ", i, " (port ", node(i).port(), ")");
    ORDERHOLD_ASSIGN_OR_RETURN(std::string info, Command(i, {"CLUSTER", "INFO"}));
    if (std::string state = InfoField(info, "cluster_state"); state != "ok") {
      return absl::FailedPreconditionError(absl::StrCat(who, " has cluster_state:", state));
    }
    if (static_cast<int>(views[i].size()) != node_count()) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " knows ", views[i].size(), " nodes, not ", node_count()));
    }
    for (const NodeLine& line : views[i]) {
      auto truth = self.find(line.id);
      if (truth == self.end()) {
        return absl::FailedPreconditionError(absl::StrCat(who, " knows a stranger: ", line.id));
      }
      const bool troubled = line.HasFlag("fail") || line.HasFlag("fail?") ||
                            line.HasFlag("handshake") || line.HasFlag("noaddr");
      if (troubled || (!line.HasFlag("myself") && line.link_state != "connected") ||
          line.HasFlag("master") != truth->second.HasFlag("master") ||
          line.primary_id != truth->second.primary_id || line.slots != truth->second.slots) {
        return absl::FailedPreconditionError(absl::StrCat(who, " sees ", line.id, " as ",
                                                          line.Describe(), " (", line.link_state,
                                                          "); it says ", truth->second.Describe()));
      }
    }
    if (FindSelf(views[i])->HasFlag("slave")) {
      ORDERHOLD_ASSIGN_OR_RETURN(std::string replication, Command(i, {"INFO", "replication"}));
      if (std::string link = InfoField(replication, "master_link_status"); link != "up") {
        return absl::FailedPreconditionError(
            absl::StrCat(who, " is a replica with master_link_status:", link));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::CheckSlotMapsAgree() {
  std::vector<int> live = LiveNodes();
  if (live.empty()) return absl::FailedPreconditionError("no node is running");
  std::vector<std::pair<std::pair<int, int>, std::string>> reference;
  for (int i : live) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::vector<NodeLine> view, ClusterNodes(node(i)));
    std::vector<std::pair<std::pair<int, int>, std::string>> map;
    for (const NodeLine& line : view) {
      for (const auto& range : line.slots) map.emplace_back(range, line.id);
    }
    std::sort(map.begin(), map.end());
    if (i == live[0]) {
      reference = std::move(map);
    } else if (map != reference) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", i, "'s slot map differs from node ", live[0], "'s"));
    }
  }
  return absl::OkStatus();
}

absl::Status RedisCluster::SetSlot(int node, int slot, absl::string_view state, int target) {
  ORDERHOLD_RETURN_IF_ERROR(CheckSlot(slot));
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(node, "CLUSTER SETSLOT"));
  std::vector<std::string> args = {"CLUSTER", "SETSLOT", absl::StrCat(slot), std::string(state)};
  if (target >= 0) {
    ORDERHOLD_RETURN_IF_ERROR(CheckIndex(target, "CLUSTER SETSLOT"));
    args.push_back(ids_[target]);
  }
  return Command(node, args).status();
}

absl::Status RedisCluster::SetImporting(int slot, int node, int source) {
  return SetSlot(node, slot, "IMPORTING", source);
}

absl::Status RedisCluster::SetMigrating(int slot, int node, int destination) {
  return SetSlot(node, slot, "MIGRATING", destination);
}

absl::Status RedisCluster::SetStable(int slot, int node) {
  return SetSlot(node, slot, "STABLE", -1);
}

absl::Status RedisCluster::MigrateSlot(int slot, int from, int to, absl::Duration timeout) {
  ORDERHOLD_RETURN_IF_ERROR(CheckSlot(slot));
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(from, "MigrateSlot()"));
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(to, "MigrateSlot()"));
  if (from == to) return absl::InvalidArgumentError("MigrateSlot(): from == to");
  const absl::Time deadline = absl::Now() + timeout;
  // The target first: once the source is MIGRATING it sends ASK there (cluster-spec.md).
  ORDERHOLD_RETURN_IF_ERROR(SetImporting(slot, to, from));
  ORDERHOLD_RETURN_IF_ERROR(SetMigrating(slot, from, to));
  while (true) {
    ORDERHOLD_ASSIGN_OR_RETURN(std::string reply,
                               Command(from, {"CLUSTER", "GETKEYSINSLOT", absl::StrCat(slot),
                                              absl::StrCat(kMigrateBatch)}));
    std::vector<std::string> keys = absl::StrSplit(reply, '\n', absl::SkipEmpty());
    if (keys.empty()) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("MigrateSlot(", slot, "): keys left after ", absl::FormatDuration(timeout)));
    }
    std::vector<std::string> migrate = {"MIGRATE",
                                        "127.0.0.1",
                                        absl::StrCat(node(to).port()),
                                        "",
                                        "0",
                                        absl::StrCat(kMigrateTimeoutMs),
                                        "AUTH",
                                        options_.admin_password,
                                        "KEYS"};
    migrate.insert(migrate.end(), keys.begin(), keys.end());
    ORDERHOLD_RETURN_IF_ERROR(Command(from, migrate).status());
  }
  // The new owner, the old one, then every other primary (replicas learn it by gossip).
  ORDERHOLD_RETURN_IF_ERROR(SetSlot(to, slot, "NODE", to));
  ORDERHOLD_RETURN_IF_ERROR(SetSlot(from, slot, "NODE", to));
  for (int i : LiveNodes()) {
    if (i == from || i == to) continue;
    ORDERHOLD_ASSIGN_OR_RETURN(std::vector<NodeLine> view, ClusterNodes(node(i)));
    const NodeLine* me = FindSelf(view);
    if (me != nullptr && me->HasFlag("master")) {
      ORDERHOLD_RETURN_IF_ERROR(SetSlot(i, slot, "NODE", to));
    }
  }
  return WaitForPrimary(slot, to, Remaining(deadline));
}

absl::StatusOr<std::string> RedisCluster::Reshard(int from, int to, int slot_count,
                                                  absl::Duration timeout) {
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(from, "Reshard()"));
  ORDERHOLD_RETURN_IF_ERROR(CheckIndex(to, "Reshard()"));
  if (from == to || slot_count < 1 || slot_count > kClusterSlots) {
    return absl::InvalidArgumentError("Reshard(): needs from != to and slot_count in 1-16384");
  }
  const absl::Time deadline = absl::Now() + timeout;
  ORDERHOLD_ASSIGN_OR_RETURN(
      std::string output,
      RunProgram(
          {"redis-cli", "-a", options_.admin_password, "--no-auth-warning", "--cluster", "reshard",
           absl::StrCat("127.0.0.1:", node(from).port()), "--cluster-from", ids_[from],
           "--cluster-to", ids_[to], "--cluster-slots", absl::StrCat(slot_count), "--cluster-yes"},
          timeout));
  ORDERHOLD_RETURN_IF_ERROR(PollUntilOk([&] { return CheckSlotMapsAgree(); }, Remaining(deadline),
                                        "every node agreeing on the slot map after the reshard"));
  return output;
}

}  // namespace orderhold::testing
