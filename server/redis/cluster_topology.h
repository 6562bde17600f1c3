// Where each hash slot of a Redis Cluster is served: a RedisTopology that keeps the slot -> primary
// map (SlotMap) fresh by asking the cluster's nodes CLUSTER SHARDS (CLUSTER SLOTS on servers that
// refuse it), on start, periodically, and when asked (a MOVED, a dead connection).
#ifndef ORDERHOLD_SERVER_REDIS_CLUSTER_TOPOLOGY_H_
#define ORDERHOLD_SERVER_REDIS_CLUSTER_TOPOLOGY_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "server/redis/cluster_slots.h"
#include "server/redis/redis_connection.h"
#include "server/redis/redis_topology.h"
#include "server/redis/refresh_schedule.h"

namespace orderhold::redis {

// Options of ClusterTopology::Create().
struct ClusterTopologyOptions {
  // Nodes asked first for the slot map (any node of the cluster: primary or replica). Not empty.
  std::vector<HostPort> seeds;
  // How to reach the nodes: the data nodes' ACL user and password (AUTH [user] password on each
  // connection; both empty: no AUTH), TLS (and CLUSTER SHARDS' tls-port is used; null: plain
  // TCP), the bound on connecting to one node, AUTH and the CLUSTER SHARDS/SLOTS round trip, and
  // CLIENT SETNAME of the topology's connection (suffixed "-topology").
  NodeOptions node = TopologyNodeOptions();
  // How often the map is fetched again with no one asking. > 0.
  absl::Duration refresh_interval = absl::Seconds(5);
  // Requested refreshes (RequestRefresh, ReportNotPrimary, Refresh, an unassigned slot) closer
  // than this to the previous one are coalesced into one refresh at its end. >= 0.
  absl::Duration min_refresh_interval = absl::Milliseconds(100);
  // Incremented once per refresh whose new map moved a slot away from a primary to a new one
  // (failover: primaries left and joined); null: not counted.
  prometheus::Counter* failovers = nullptr;
  // Incremented once per refresh attempt (orderhold_redis_topology_refreshes_total); nullable.
  prometheus::Counter* refreshes = nullptr;
};

// The slot -> primary map of a Redis Cluster, kept by one background thread (the cluster spec's
// "Client connections and redirection handling": clients cache the map, refresh it on start, on
// MOVED and on connection failures). Each refresh asks, in turn, the node that answered last, the
// seeds, then the known primaries: CLUSTER SHARDS, or CLUSTER SLOTS when the node answers that
// with an error; the first answer that parses replaces the map. When no node answers, the last
// good map is kept (and the failure logged once per distinct error). Each new map that routes any
// slot differently bumps generation() (redis-py/Lettuce-style "topology changed" signal) and is
// logged; options.failovers counts those where a primary was replaced.
//
// Thread-safe. The destructor stops the thread within about node.connect_timeout (the refresh under
// way).
class ClusterTopology final : public RedisTopology {
 public:
  // Validates `options` (INVALID_ARGUMENT: no seeds, user without password, a duration out of
  // range, a client_name with a space), fetches the map once (bounded by node.connect_timeout per
  // node asked; failing is not an error: NodeFor() says UNAVAILABLE until a refresh succeeds), and
  // starts the refresh thread.
  static absl::StatusOr<std::unique_ptr<ClusterTopology>> Create(ClusterTopologyOptions options);
  ~ClusterTopology() override;

  // The primary serving `slot` (0..16383), or any primary for kAnySlot. UNAVAILABLE "redis
  // cluster: no primary known for slot N" when the slot is unassigned in the current map (or
  // there is no map yet): a refresh is requested, as the spec treats an unassigned slot as an
  // error only after re-fetching the map. INVALID_ARGUMENT for another slot number.
  absl::StatusOr<HostPort> NodeFor(int slot) override;

  // Asks the thread for a refresh (coalesced with others by min_refresh_interval) and returns at
  // once. For MOVED replies and connection failures.
  void RequestRefresh();

  // A MOVED reply said `slot` is served by `node`: the map remembers it at once (the spec's
  // "MOVED Redirection") and a refresh is requested, as one MOVED usually means more slots moved
  // (coalesced by min_refresh_interval). Does not bump generation(): the next refresh does if the
  // cluster's own map differs. A slot outside 0..16383 is ignored.
  void ReportMoved(int slot, const HostPort& node);

  // OK when the current map gives every slot a primary; UNAVAILABLE naming the slots without one
  // (SlotMap::CheckCoverage), or the last refresh error while there is no map yet. For health.
  // When not OK it requests a refresh, as NodeFor() does for a slot it cannot route: a server
  // kept out of traffic while NOT_SERVING (a readiness probe) would otherwise see the cluster
  // come back only at the next periodic refresh (refresh_interval, 5 s by default).
  absl::Status CheckCoverage();

  // The primaries serving at least one slot in the current map (SlotMap::Primaries); empty
  // before the first successful refresh.
  std::vector<HostPort> Primaries();

  // A node refused a write as not a primary (READONLY, a replica): RequestRefresh().
  void ReportNotPrimary(const HostPort& address) override;

  // Waits until a refresh started after this call is done (or `deadline`: UNAVAILABLE), then
  // NodeFor(slot).
  absl::StatusOr<HostPort> Refresh(int slot, absl::Time deadline) override;

  // A copy of the current map; nullopt before the first successful refresh. For tests and status.
  std::optional<SlotMap> slot_map();

 private:
  explicit ClusterTopology(ClusterTopologyOptions options);
  void Run();
  void DoRefresh(absl::string_view why);
  absl::StatusOr<SlotMap> AskNode(const HostPort& node);
  absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectNode(const HostPort& node,
                                                               absl::Time deadline);
  void SetMap(SlotMap map, const HostPort& from, absl::string_view why);
  void SetError(absl::Status error);

  const ClusterTopologyOptions options_;
  absl::Mutex mu_;
  std::optional<SlotMap> map_ ABSL_GUARDED_BY(mu_);  // the last refresh's, patched by MOVEDs
  // The last refresh's map as read (no MOVED patches): failovers are counted against it.
  std::optional<SlotMap> refreshed_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the last refresh's error; OK after a success
  // A primary left the map with its slots unassigned and no primary has joined since: a failover
  // seen half-way (the map read while the replica was not yet reported as the slots' primary),
  // counted once the new primary joins.
  bool awaiting_replacement_ ABSL_GUARDED_BY(mu_) = false;
  // A primary joined without one leaving: its departure, in a later map, completes a failover.
  bool awaiting_departure_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<HostPort> last_answered_ ABSL_GUARDED_BY(mu_);
  // When to refresh: every refresh_interval, and on request (min_refresh_interval apart).
  RefreshSchedule schedule_;
  std::unique_ptr<RedisConnection> connection_;  // refresh thread only: to the last answering node
  std::thread thread_;
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_CLUSTER_TOPOLOGY_H_
