// Redis Cluster routing, the pure parts: which slot a key is in, which primary serves a slot, and
// what the nodes say about it (CLUSTER SHARDS, CLUSTER SLOTS, MOVED and ASK). No I/O, no clock:
// the cluster topology (what fetches the map, when, and from whom) builds on these.
//
// Source: the Redis Cluster specification, redis/redis-doc docs/reference/cluster-spec.md
// ("Key distribution model", "Hash tags", "MOVED Redirection", "ASK redirection", "Client
// connections and redirection handling", Appendix A), and the command pages
// commands/cluster-shards.md and commands/cluster-slots.md. Where the docs and redis-server 7.0.15
// differ, the server wins and the comment says so (health "fail", not "failed").
//
// Thread-safety: the functions are thread-safe; a SlotMap is a value (thread-compatible: const
// methods may run concurrently, a mutation needs exclusive access).
#ifndef ORDERHOLD_SERVER_REDIS_CLUSTER_SLOTS_H_
#define ORDERHOLD_SERVER_REDIS_CLUSTER_SLOTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/redis/redis_reply.h"
#include "server/redis/redis_url.h"

namespace orderhold::redis {

// Number of hash slots of a Redis Cluster; slots are 0 .. kClusterSlotCount - 1.
inline constexpr int kClusterSlotCount = 16384;

// CRC-16/XMODEM of `data` (poly 0x1021, init 0, neither input nor output reflected, no final
// xor), table-driven: the CRC of the spec's "Key distribution model" and Appendix A.
// Crc16Xmodem("123456789") == 0x31C3. Binary-safe. Thread-safe.
uint16_t Crc16Xmodem(absl::string_view data);

// The hash slot of `key`, 0..16383: CRC16 of the key mod 16384, where a key with a hash tag is
// hashed by the tag alone ("Hash tags": the bytes between the first `{` and the first `}` after
// it, when there is at least one; otherwise the whole key, so "foo{}{bar}" hashes whole and
// "foo{{bar}}zap" hashes "{bar"). Equals CLUSTER KEYSLOT on a real node (tested). Binary-safe.
// Thread-safe.
int HashSlot(absl::string_view key);

struct SlotMapDiff;
class SlotMap;
// The routing difference from `before` to `after` (SlotMapDiff, below; nodes() and warnings() are
// not compared): what a caller acts on after a refresh. Thread-safe.
SlotMapDiff DiffSlotMaps(const SlotMap& before, const SlotMap& after);

// A node named by CLUSTER SHARDS or CLUSTER SLOTS.
struct ClusterNode {
  // Where to connect: the node's endpoint, or the host the reply came from when the endpoint is
  // empty, and the port for the transport in use (see ParseClusterShards).
  HostPort address;
  // The node id (40 hex characters). Empty only from a CLUSTER SLOTS of a server older than 4.0.
  std::string id;
  // Role "master" (a shard's primary, with or without slots); false for a replica.
  bool primary = false;

  friend bool operator==(const ClusterNode&, const ClusterNode&) = default;
};

// The client's copy of the cluster's slot -> primary map ("Client connections and redirection
// handling"): every slot starts unassigned, a parsed CLUSTER SHARDS/SLOTS reply assigns what it
// covers, and a MOVED updates one slot. Nodes are identified by address, as the spec's client
// interface does ("MOVED Redirection": a map between hash slots and endpoint:port pairs).
//
// Copyable value (32 KiB of slot table plus the node list).
class SlotMap {
 public:
  // Every slot unassigned; no nodes.
  SlotMap();

  // The primary serving `slot`; nullopt when the slot is unassigned or out of 0..16383 (the
  // spec: report unassigned slots as an error, after fetching the map once more).
  std::optional<HostPort> NodeFor(int slot) const;

  // Whether every slot has a primary.
  bool CoversAllSlots() const;

  // OK when every slot has a primary; otherwise UNAVAILABLE naming the unassigned slots as
  // ranges (the first few) and how many are covered, followed by warnings() — e.g. "no primary
  // known for slots 5, 100-200 (16283 of 16384 slots covered)". For health and for the error a
  // command gets on an unassigned slot after the re-fetch.
  absl::Status CheckCoverage() const;

  // The distinct primaries that serve at least one slot, in the order of the lowest slot each
  // serves. Any of them will do for a command without a key.
  std::vector<HostPort> Primaries() const;

  // Assigns slots `first`..`last` (inclusive) to `primary`, replacing earlier owners.
  // INVALID_ARGUMENT unless 0 <= first <= last <= 16383. The parsers use it; so can tests.
  absl::Status Assign(int first, int last, const HostPort& primary);

  // Records a MOVED: `slot` is now served by `primary` ("MOVED Redirection": the client should
  // remember the mapping). Returns whether the map changed; false (no change) for a slot out of
  // 0..16383, which ParseRedirect never returns. nodes() is left as the last reply described it.
  bool Update(int slot, const HostPort& primary);

  // Every node the parsed reply named, sorted by address then id: the shards' primaries (also
  // those without slots, or with a health other than "online") and their replicas whose health
  // is "online" (CLUSTER SLOTS, too, lists only replicas not flagged FAIL). Nodes whose endpoint
  // is unknown ("?") are left out (see warnings()). Empty for a default-constructed map.
  const std::vector<ClusterNode>& nodes() const { return nodes_; }

  // Configuration problems seen while parsing, one sentence each, for the caller to log (once,
  // when the map changes): a node whose endpoint is "?" ("cluster-preferred-endpoint-type
  // hostname" without "cluster-announce-hostname": the command pages call it a configuration
  // error and an unknown node), so its slots are left unassigned.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Equal when every slot has the same primary (or none in both) and nodes() are equal.
  // warnings() are not compared.
  friend bool operator==(const SlotMap& a, const SlotMap& b);

 private:
  friend struct SlotMapParser;
  friend SlotMapDiff DiffSlotMaps(const SlotMap& before, const SlotMap& after);

  static constexpr uint16_t kUnassigned = 0xFFFF;

  // Index of `address` in owners_, appended when new.
  uint16_t OwnerIndex(const HostPort& address);
  // owner_[slot] = index, keeping owned_count_ right.
  void SetOwner(int slot, uint16_t index);

  std::vector<uint16_t> owner_;   // per slot: index into owners_, or kUnassigned
  std::vector<HostPort> owners_;  // every address ever assigned a slot (some may own none now)
  std::vector<int> owned_count_;  // per owners_ entry: how many slots it owns
  std::vector<ClusterNode> nodes_;
  std::vector<std::string> warnings_;
};

// How a new map differs from the one it replaces (DiffSlotMaps).
struct SlotMapDiff {
  // Served a slot before and none now (left the cluster, demoted to replica by a failover, or
  // emptied by resharding): close the connections to them. In `before`'s Primaries() order.
  std::vector<HostPort> primaries_left;
  // Serve a slot now and none before (a promoted replica, a new node). In `after`'s order.
  std::vector<HostPort> primaries_joined;
  // Slots whose primary differs, counting a slot that became assigned or unassigned.
  int slots_moved = 0;

  friend bool operator==(const SlotMapDiff&, const SlotMapDiff&) = default;
};

// Parses a CLUSTER SHARDS reply (Redis 7.0+; commands/cluster-shards.md) as RESP2 gives it: an
// array of shards, each a flat map with "slots" (a flat list of inclusive start, end pairs) and
// "nodes" (an array of flat maps with "id", "port" and/or "tls-port", "ip", "endpoint",
// "hostname", "role", "replication-offset", "health"; unknown fields are ignored, as the page
// asks). Integers are accepted as RESP integers or decimal strings.
//
// - Address: the node's "endpoint" (IP or hostname, as the cluster's
//   cluster-preferred-endpoint-type says); when it is empty or nil, `answering_host` — the host
//   the reply came from — as the page says (a one-node cluster that never met another node
//   answers "" for endpoint and ip). Port: "tls-port" when `tls`, else "port".
// - Endpoint "?": a configuration error that names no usable node (the page: "treated as an
//   unknown node, not necessarily the same node"); such a node is left out, its shard's slots
//   stay unassigned and warnings() says why. Not an error of the parse: the other shards route.
// - Primaries are kept whatever their "health": a FAIL-flagged primary still owns its slots
//   until the cluster fails it over (CLUSTER SLOTS lists it too), its flag can be stale or
//   cleared, and a command sent to it gets a connection error or CLUSTERDOWN, which the caller
//   retries after a refresh; dropping it would turn those slots into fast errors with no way back
//   but another refresh. Replicas not "online" ("fail" on redis 7.0.15 — the page says "failed" —
//   or "loading") are left out of nodes().
// - A shard with slots must have a node with role "master".
//
// Errors: INVALID_ARGUMENT naming the shard, node and field that is malformed — an error reply
// (quoted: e.g. "ERR unknown subcommand" from a server older than 7.0, so the caller may fall
// back to CLUSTER SLOTS), a shape other than the above, a slot outside 0..16383 or a range that
// ends before it starts, a port outside 1..65535, a node without the port the transport needs
// (tls-port with `tls`: the cluster needs tls-cluster yes), an empty endpoint with an empty
// `answering_host`; INTERNAL when two shards claim one slot or a shard with slots has no master
// (no server sends that). Thread-safe.
absl::StatusOr<SlotMap> ParseClusterShards(const RedisReply& reply,
                                           absl::string_view answering_host, bool tls);

// Parses a CLUSTER SLOTS reply (deprecated since 7.0 but everywhere; commands/cluster-slots.md
// and the spec's "Client connections and redirection handling"): an array of [start, end,
// primary, replica...], each node an array [endpoint, port, id, metadata...] (id from 4.0,
// metadata from 7.0; more elements are ignored). The port is already the one for the
// connection's transport (the server answers TLS ports to a TLS client), so there is no `tls`.
// Endpoint nil or "" -> `answering_host`; "?" -> unknown node, as in ParseClusterShards. The
// server lists only replicas not flagged FAIL; all listed go to nodes(). A node repeated over
// several ranges is listed once. Errors as ParseClusterShards (INVALID_ARGUMENT for an error
// reply or a malformed shape, INTERNAL for overlapping ranges). Thread-safe.
absl::StatusOr<SlotMap> ParseClusterSlots(const RedisReply& reply,
                                          absl::string_view answering_host);

// A MOVED or ASK error reply, parsed.
struct Redirect {
  enum class Kind {
    // The slot now lives at `address`: update the map (or refresh it) and re-send there.
    kMoved,
    // The slot is migrating: send only this command to `address`, preceded by ASKING on the same
    // connection, and leave the map unchanged ("ASK redirection").
    kAsk,
  };
  Kind kind = Kind::kMoved;
  int slot = 0;  // 0..16383
  HostPort address;

  friend bool operator==(const Redirect&, const Redirect&) = default;
};

// Parses the error line of a MOVED or ASK reply (RedisReply::str, without the leading "-"):
// "MOVED 3999 127.0.0.1:6381", "ASK 3999 node2.example.com:6381". The port is after the last
// ':', so an IPv6 endpoint comes as redis 7.0 writes it ("MOVED 3999 ::1:6381") or in brackets
// ("[::1]:6381"). An empty endpoint (":6380") means the host of the node that answered
// ("MOVED Redirection"), given as `answering_host`. INVALID_ARGUMENT, quoting the line, when it
// is not "MOVED|ASK <slot 0..16383> <endpoint>:<port 1..65535>", or the endpoint is "?" (an
// unknown node: refresh the map instead), or it is empty and so is `answering_host`.
// Thread-safe.
absl::StatusOr<Redirect> ParseRedirect(absl::string_view error, absl::string_view answering_host);

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_CLUSTER_SLOTS_H_
