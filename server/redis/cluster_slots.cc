#include "server/redis/cluster_slots.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/common/status_macros.h"

namespace orderhold::redis {
namespace {

// The spec's Appendix A table, computed: entry i is the CRC of the byte i followed by a zero byte,
// shifted through the polynomial 0x1021 MSB first.
constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

constexpr uint16_t Crc16(const char* data, size_t size) {
  uint16_t crc = 0;
  for (size_t i = 0; i < size; ++i) {
    const auto byte = static_cast<unsigned char>(data[i]);
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ byte) & 0xFF]);
  }
  return crc;
}
// The check value of the spec's "Key distribution model" and Appendix A.
static_assert(Crc16("123456789", 9) == 0x31C3);

constexpr int kMaxPort = 65535;
// CheckCoverage lists at most this many unassigned ranges.
constexpr int kMaxRangesNamed = 5;

bool IsText(const RedisReply& reply) {
  return reply.type == RedisReply::Type::kString || reply.type == RedisReply::Type::kStatus;
}

// An integer field: a RESP integer or a decimal string (a proxy may stringify).
absl::StatusOr<long long> Integer(const RedisReply& reply, absl::string_view what) {
  long long value = 0;
  if (reply.type == RedisReply::Type::kInteger) return reply.integer;
  if (IsText(reply) && absl::SimpleAtoi(reply.str, &value)) return value;
  return absl::InvalidArgumentError(absl::StrCat(what, " is not an integer"));
}

absl::StatusOr<int> SlotNumber(const RedisReply& reply, absl::string_view what) {
  ORDERHOLD_ASSIGN_OR_RETURN(const long long slot, Integer(reply, what));
  if (slot < 0 || slot >= kClusterSlotCount) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", slot, ", not a slot (0-", kClusterSlotCount - 1, ")"));
  }
  return static_cast<int>(slot);
}

absl::StatusOr<int> Port(const RedisReply& reply, absl::string_view what) {
  ORDERHOLD_ASSIGN_OR_RETURN(const long long port, Integer(reply, what));
  if (port < 1 || port > kMaxPort) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", port, ", not a port (1-65535)"));
  }
  return static_cast<int>(port);
}

// Calls fn(name, value) for each field of a RESP2 flat map (an array of name, value, ...).
template <typename Fn>
absl::Status ForEachField(const RedisReply& map, absl::string_view what, Fn fn) {
  if (map.type != RedisReply::Type::kArray || map.elements.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not a map (an array of name, value pairs)"));
  }
  for (size_t i = 0; i < map.elements.size(); i += 2) {
    if (!IsText(map.elements[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": field name ", i / 2 + 1, " is not a string"));
    }
    ORDERHOLD_RETURN_IF_ERROR(fn(map.elements[i].str, map.elements[i + 1]));
  }
  return absl::OkStatus();
}

// The host to connect to for a node's endpoint field (`endpoint` null when the field is absent):
// the endpoint itself; `answering_host` for nil or ""; nullopt for "?" (unknown node).
absl::StatusOr<std::optional<std::string>> EndpointHost(const RedisReply* endpoint,
                                                        absl::string_view answering_host,
                                                        absl::string_view what) {
  const bool absent = endpoint == nullptr || endpoint->type == RedisReply::Type::kNil;
  if (!absent && !IsText(*endpoint)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": endpoint is not a string"));
  }
  if (!absent && endpoint->str == "?") return std::nullopt;
  if (!absent && !endpoint->str.empty()) return endpoint->str;
  if (answering_host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": endpoint is empty (meaning the host the reply came from), and no "
                     "answering host was given"));
  }
  return std::string(answering_host);
}

std::string UnknownEndpointWarning(absl::string_view id, bool primary) {
  return absl::StrCat("node ", id.empty() ? "(no id)" : id, " (", primary ? "primary" : "replica",
                      ") announces endpoint \"?\" (cluster-preferred-endpoint-type hostname "
                      "without cluster-announce-hostname): left out",
                      primary ? ", so its slots have no known primary" : "");
}

// INVALID_ARGUMENT unless `reply` to `command` is an array (quoting an error reply).
absl::Status CheckArrayReply(const RedisReply& reply, absl::string_view command) {
  if (reply.type == RedisReply::Type::kError) {
    return absl::InvalidArgumentError(absl::StrCat(command, " answered an error: ", reply.str));
  }
  if (reply.type != RedisReply::Type::kArray) {
    return absl::InvalidArgumentError(absl::StrCat(command, " reply is not an array"));
  }
  return absl::OkStatus();
}

}  // namespace

uint16_t Crc16Xmodem(absl::string_view data) { return Crc16(data.data(), data.size()); }

int HashSlot(absl::string_view key) {
  const size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16Xmodem(key) & (kClusterSlotCount - 1);
}

// ---- SlotMap ----------------------------------------------------------------------------------

SlotMap::SlotMap() : owner_(kClusterSlotCount, kUnassigned) {}

std::optional<HostPort> SlotMap::NodeFor(int slot) const {
  if (slot < 0 || slot >= kClusterSlotCount || owner_[slot] == kUnassigned) return std::nullopt;
  return owners_[owner_[slot]];
}

bool SlotMap::CoversAllSlots() const {
  return std::find(owner_.begin(), owner_.end(), kUnassigned) == owner_.end();
}

absl::Status SlotMap::CheckCoverage() const {
  std::vector<std::string> ranges;
  int unassigned = 0;
  int ranges_total = 0;
  for (int slot = 0; slot < kClusterSlotCount; ++slot) {
    if (owner_[slot] != kUnassigned) continue;
    int last = slot;
    while (last + 1 < kClusterSlotCount && owner_[last + 1] == kUnassigned) ++last;
    unassigned += last - slot + 1;
    if (++ranges_total <= kMaxRangesNamed) {
      ranges.push_back(last == slot ? absl::StrCat(slot) : absl::StrCat(slot, "-", last));
    }
    slot = last;
  }
  if (unassigned == 0) return absl::OkStatus();
  if (ranges_total > kMaxRangesNamed) ranges.push_back("...");
  std::string message =
      absl::StrCat("no primary known for slots ", absl::StrJoin(ranges, ", "), " (",
                   kClusterSlotCount - unassigned, " of ", kClusterSlotCount, " slots covered)");
  if (!warnings_.empty()) absl::StrAppend(&message, "; ", absl::StrJoin(warnings_, "; "));
  return absl::UnavailableError(message);
}

std::vector<HostPort> SlotMap::Primaries() const {
  std::vector<HostPort> primaries;
  std::vector<bool> seen(owners_.size(), false);
  for (const uint16_t index : owner_) {
    if (index == kUnassigned || seen[index]) continue;
    seen[index] = true;
    primaries.push_back(owners_[index]);
  }
  return primaries;
}

absl::Status SlotMap::Assign(int first, int last, const HostPort& primary) {
  if (first < 0 || first > last || last >= kClusterSlotCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot range ", first, "-", last, " is not within 0-", kClusterSlotCount - 1));
  }
  const uint16_t index = OwnerIndex(primary);
  for (int slot = first; slot <= last; ++slot) SetOwner(slot, index);
  return absl::OkStatus();
}

bool SlotMap::Update(int slot, const HostPort& primary) {
  if (slot < 0 || slot >= kClusterSlotCount) return false;
  if (owner_[slot] != kUnassigned && owners_[owner_[slot]] == primary) return false;
  SetOwner(slot, OwnerIndex(primary));
  return true;
}

uint16_t SlotMap::OwnerIndex(const HostPort& address) {
  const auto found = std::find(owners_.begin(), owners_.end(), address);
  if (found != owners_.end()) return static_cast<uint16_t>(found - owners_.begin());
  // Reuse an entry that owns nothing any more, so MOVEDs over a long life cannot grow the table
  // past the number of slots (< kUnassigned).
  const auto idle = std::find(owned_count_.begin(), owned_count_.end(), 0);
  if (idle != owned_count_.end()) {
    const auto index = static_cast<uint16_t>(idle - owned_count_.begin());
    owners_[index] = address;
    return index;
  }
  owners_.push_back(address);
  owned_count_.push_back(0);
  return static_cast<uint16_t>(owners_.size() - 1);
}

void SlotMap::SetOwner(int slot, uint16_t index) {
  if (owner_[slot] != kUnassigned) --owned_count_[owner_[slot]];
  owner_[slot] = index;
  ++owned_count_[index];
}

namespace {

// For each owner index of `from`, the index of the same address in `to`'s owner table, or -1.
std::vector<int> MapOwners(const std::vector<HostPort>& from, const std::vector<HostPort>& to) {
  std::vector<int> mapped(from.size(), -1);
  for (size_t i = 0; i < from.size(); ++i) {
    const auto found = std::find(to.begin(), to.end(), from[i]);
    if (found != to.end()) mapped[i] = static_cast<int>(found - to.begin());
  }
  return mapped;
}

// Elements of `a` not in `b`, in `a`'s order.
std::vector<HostPort> Missing(const std::vector<HostPort>& a, const std::vector<HostPort>& b) {
  std::vector<HostPort> missing;
  for (const HostPort& address : a) {
    if (std::find(b.begin(), b.end(), address) == b.end()) missing.push_back(address);
  }
  return missing;
}

}  // namespace

SlotMapDiff DiffSlotMaps(const SlotMap& before, const SlotMap& after) {
  SlotMapDiff diff;
  const std::vector<int> to_after = MapOwners(before.owners_, after.owners_);
  for (int slot = 0; slot < kClusterSlotCount; ++slot) {
    const uint16_t was = before.owner_[slot];
    const uint16_t is = after.owner_[slot];
    const bool same = was == SlotMap::kUnassigned
                          ? is == SlotMap::kUnassigned
                          : is != SlotMap::kUnassigned && to_after[was] == static_cast<int>(is);
    if (!same) ++diff.slots_moved;
  }
  const std::vector<HostPort> old_primaries = before.Primaries();
  const std::vector<HostPort> new_primaries = after.Primaries();
  diff.primaries_left = Missing(old_primaries, new_primaries);
  diff.primaries_joined = Missing(new_primaries, old_primaries);
  return diff;
}

bool operator==(const SlotMap& a, const SlotMap& b) {
  return a.nodes_ == b.nodes_ && DiffSlotMaps(a, b).slots_moved == 0;
}

// ---- Parsing CLUSTER SHARDS / CLUSTER SLOTS ---------------------------------------------------

// Builds a SlotMap from the ranges and nodes of one reply.
struct SlotMapParser {
  // Gives `first`..`last` to `primary` (nullopt: an unknown node; the slots stay unassigned).
  // INTERNAL when a slot was already claimed by another range of this reply.
  absl::Status Claim(int first, int last, const std::optional<HostPort>& primary,
                     absl::string_view what) {
    if (first > last) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": slot range ", first, "-", last, " ends before it starts"));
    }
    for (int slot = first; slot <= last; ++slot) {
      if (claimed[slot]) {
        return absl::InternalError(
            absl::StrCat(what, ": slot ", slot, " is claimed by two ranges of the reply"));
      }
      claimed[slot] = true;
    }
    if (!primary.has_value()) return absl::OkStatus();
    return map.Assign(first, last, *primary);
  }

  void AddNode(ClusterNode node) {
    if (std::find(map.nodes_.begin(), map.nodes_.end(), node) == map.nodes_.end()) {
      map.nodes_.push_back(std::move(node));
    }
  }

  void Warn(std::string warning) {
    if (std::find(map.warnings_.begin(), map.warnings_.end(), warning) == map.warnings_.end()) {
      map.warnings_.push_back(std::move(warning));
    }
  }

  SlotMap Finish() && {
    std::sort(map.nodes_.begin(), map.nodes_.end(), [](const ClusterNode& a, const ClusterNode& b) {
      return std::tie(a.address.host, a.address.port, a.id, a.primary) <
             std::tie(b.address.host, b.address.port, b.id, b.primary);
    });
    return std::move(map);
  }

  SlotMap map;
  std::vector<bool> claimed = std::vector<bool>(kClusterSlotCount, false);
};

namespace {

// One node of a CLUSTER SHARDS shard, as far as routing cares.
struct ShardNode {
  ClusterNode node;
  bool known = true;  // false: endpoint "?"
  bool online = true;
};

absl::StatusOr<ShardNode> ParseShardNode(const RedisReply& fields, absl::string_view answering_host,
                                         bool tls, absl::string_view what) {
  ShardNode parsed;
  std::optional<int> port;
  std::optional<int> tls_port;
  const RedisReply* endpoint = nullptr;
  bool has_role = false;
  ORDERHOLD_RETURN_IF_ERROR(ForEachField(
      fields, what, [&](absl::string_view name, const RedisReply& value) -> absl::Status {
        const std::string field = absl::StrCat(what, ": \"", name, "\"");
        if (name == "port" || name == "tls-port") {
          ORDERHOLD_ASSIGN_OR_RETURN(const int number, Port(value, field));
          (name == "port" ? port : tls_port) = number;
        } else if (name == "id" || name == "role" || name == "health") {
          if (!IsText(value)) return absl::InvalidArgumentError(field + " is not a string");
          if (name == "id") parsed.node.id = value.str;
          if (name == "role") {
            has_role = true;
            parsed.node.primary = value.str == "master";
          }
          if (name == "health") parsed.online = value.str == "online";
        } else if (name == "endpoint") {
          endpoint = &value;
        }
        return absl::OkStatus();
      }));
  if (parsed.node.id.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " has no id"));
  if (!has_role) return absl::InvalidArgumentError(absl::StrCat(what, " has no role"));
  const std::optional<int>& wanted = tls ? tls_port : port;
  if (!wanted.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " (", parsed.node.id, ") has no ",
        tls ? "\"tls-port\" (a TLS client needs the cluster to run with tls-cluster yes)"
            : "\"port\" (the node serves TLS only: use rediss://)"));
  }
  ORDERHOLD_ASSIGN_OR_RETURN(std::optional<std::string> host,
                             EndpointHost(endpoint, answering_host, what));
  parsed.known = host.has_value();
  if (parsed.known) parsed.node.address = HostPort{std::move(*host), *wanted};
  return parsed;
}

}  // namespace

absl::StatusOr<SlotMap> ParseClusterShards(const RedisReply& reply,
                                           absl::string_view answering_host, bool tls) {
  ORDERHOLD_RETURN_IF_ERROR(CheckArrayReply(reply, "CLUSTER SHARDS"));
  SlotMapParser parser;
  for (size_t s = 0; s < reply.elements.size(); ++s) {
    const std::string shard_what = absl::StrCat("CLUSTER SHARDS shard ", s + 1);
    const RedisReply* slots = nullptr;
    const RedisReply* nodes = nullptr;
    ORDERHOLD_RETURN_IF_ERROR(ForEachField(reply.elements[s], shard_what,
                                           [&](absl::string_view name, const RedisReply& value) {
                                             if (name == "slots") slots = &value;
                                             if (name == "nodes") nodes = &value;
                                             return absl::OkStatus();
                                           }));
    for (const auto& [field, value] : {std::pair{"slots", slots}, std::pair{"nodes", nodes}}) {
      if (value == nullptr || value->type != RedisReply::Type::kArray) {
        return absl::InvalidArgumentError(absl::StrCat(
            shard_what, ": \"", field, "\" is ", value == nullptr ? "missing" : "not an array"));
      }
    }
    if (slots->elements.size() % 2 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(shard_what, ": \"slots\" has an odd number of elements (start, end pairs)"));
    }

    std::optional<HostPort> primary;
    bool has_primary = false;
    for (size_t n = 0; n < nodes->elements.size(); ++n) {
      const std::string node_what = absl::StrCat(shard_what, " node ", n + 1);
      ORDERHOLD_ASSIGN_OR_RETURN(
          ShardNode parsed, ParseShardNode(nodes->elements[n], answering_host, tls, node_what));
      if (parsed.node.primary) {
        if (has_primary) {
          return absl::InternalError(absl::StrCat(shard_what, " has two masters"));
        }
        has_primary = true;
        if (parsed.known) primary = parsed.node.address;
      }
      if (!parsed.known) {
        parser.Warn(UnknownEndpointWarning(parsed.node.id, parsed.node.primary));
      } else if (parsed.node.primary || parsed.online) {
        parser.AddNode(std::move(parsed.node));
      }
    }

    if (!slots->elements.empty() && !has_primary) {
      return absl::InternalError(absl::StrCat(shard_what, " has slots but no master"));
    }
    for (size_t i = 0; i < slots->elements.size(); i += 2) {
      const std::string range_what = absl::StrCat(shard_what, " slot range ", i / 2 + 1);
      ORDERHOLD_ASSIGN_OR_RETURN(const int first,
                                 SlotNumber(slots->elements[i], range_what + " start"));
      ORDERHOLD_ASSIGN_OR_RETURN(const int last,
                                 SlotNumber(slots->elements[i + 1], range_what + " end"));
      ORDERHOLD_RETURN_IF_ERROR(parser.Claim(first, last, primary, shard_what));
    }
  }
  return std::move(parser).Finish();
}

absl::StatusOr<SlotMap> ParseClusterSlots(const RedisReply& reply,
                                          absl::string_view answering_host) {
  ORDERHOLD_RETURN_IF_ERROR(CheckArrayReply(reply, "CLUSTER SLOTS"));
  SlotMapParser parser;
  for (size_t r = 0; r < reply.elements.size(); ++r) {
    const std::string range_what = absl::StrCat("CLUSTER SLOTS range ", r + 1);
    const RedisReply& range = reply.elements[r];
    if (range.type != RedisReply::Type::kArray || range.elements.size() < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(range_what, " is not an array of start, end, primary[, replicas]"));
    }
    ORDERHOLD_ASSIGN_OR_RETURN(const int first,
                               SlotNumber(range.elements[0], range_what + " start"));
    ORDERHOLD_ASSIGN_OR_RETURN(const int last, SlotNumber(range.elements[1], range_what + " end"));
    std::optional<HostPort> primary;
    for (size_t n = 2; n < range.elements.size(); ++n) {
      const std::string node_what = absl::StrCat(range_what, " node ", n - 1);
      const RedisReply& node = range.elements[n];
      if (node.type != RedisReply::Type::kArray || node.elements.size() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(node_what, " is not an array of endpoint, port[, id, metadata]"));
      }
      ClusterNode parsed;
      parsed.primary = n == 2;
      if (node.elements.size() > 2 && node.elements[2].type != RedisReply::Type::kNil) {
        if (!IsText(node.elements[2])) {
          return absl::InvalidArgumentError(absl::StrCat(node_what, ": id is not a string"));
        }
        parsed.id = node.elements[2].str;
      }
      ORDERHOLD_ASSIGN_OR_RETURN(const int port, Port(node.elements[1], node_what + ": port"));
      ORDERHOLD_ASSIGN_OR_RETURN(std::optional<std::string> host,
                                 EndpointHost(&node.elements[0], answering_host, node_what));
      if (!host.has_value()) {
        parser.Warn(UnknownEndpointWarning(parsed.id, parsed.primary));
        continue;
      }
      parsed.address = HostPort{std::move(*host), port};
      if (parsed.primary) primary = parsed.address;
      parser.AddNode(std::move(parsed));
    }
    ORDERHOLD_RETURN_IF_ERROR(parser.Claim(first, last, primary, range_what));
  }
  return std::move(parser).Finish();
}

// ---- MOVED / ASK ------------------------------------------------------------------------------

absl::StatusOr<Redirect> ParseRedirect(absl::string_view error, absl::string_view answering_host) {
  const auto malformed = [error](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("redirect \"", error, "\": ", why));
  };
  const std::vector<absl::string_view> words = absl::StrSplit(error, ' ');
  if (words.size() != 3) return malformed("not MOVED|ASK <slot> <endpoint>:<port>");
  Redirect redirect;
  if (words[0] == "MOVED") {
    redirect.kind = Redirect::Kind::kMoved;
  } else if (words[0] == "ASK") {
    redirect.kind = Redirect::Kind::kAsk;
  } else {
    return malformed("not a MOVED or ASK error");
  }
  if (!absl::SimpleAtoi(words[1], &redirect.slot) || redirect.slot < 0 ||
      redirect.slot >= kClusterSlotCount) {
    return malformed(absl::StrCat("the slot is not within 0-", kClusterSlotCount - 1));
  }
  const absl::string_view endpoint = words[2];
  const size_t colon = endpoint.rfind(':');
  if (colon == absl::string_view::npos) return malformed("no ':' before the port");
  if (!absl::SimpleAtoi(endpoint.substr(colon + 1), &redirect.address.port) ||
      redirect.address.port < 1 || redirect.address.port > kMaxPort) {
    return malformed("the port is not within 1-65535");
  }
  absl::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "?") {
    return malformed(
        "the endpoint is unknown (\"?\": cluster-preferred-endpoint-type hostname without "
        "cluster-announce-hostname); refresh the slot map instead");
  }
  if (host.empty()) {
    if (answering_host.empty()) {
      return malformed("the endpoint is empty (the answering node's host), and none was given");
    }
    host = answering_host;
  }
  redirect.address.host = std::string(host);
  return redirect;
}

}  // namespace orderhold::redis
