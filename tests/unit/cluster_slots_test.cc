// Cluster routing, the pure parts: CRC16/XMODEM and hash slots (the spec's rules and examples),
// SlotMap, and the parsers of CLUSTER SHARDS, CLUSTER SLOTS and MOVED/ASK — fed reply shapes
// captured from live redis-server 7.0.15 nodes (a 2-primary + 1-replica cluster with
// tls-cluster yes, read over plain TCP and over TLS; the same with a hostname and a "?" endpoint
// and a failed replica; a lone node that never met another). The parity with CLUSTER KEYSLOT and
// the live replies themselves are checked in tests/integration/cluster_slots_test.cc.
#include "server/redis/cluster_slots.h"

#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace orderhold::redis {

// Readable failure messages (found by argument-dependent lookup, hence outside the anonymous
// namespace).
void PrintTo(const HostPort& address, std::ostream* os) { *os << address.ToString(); }
void PrintTo(const ClusterNode& node, std::ostream* os) {
  *os << node.address.ToString() << " " << node.id << (node.primary ? " primary" : " replica");
}

namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using Type = RedisReply::Type;

// ---- Reply builders -----------------------------------------------------------------------------

redis::RedisReply Str(std::string s) {
  RedisReply r;
  r.type = Type::kString;
  r.str = std::move(s);
  return r;
}
redis::RedisReply Int(long long v) {
  RedisReply r;
  r.type = Type::kInteger;
  r.integer = v;
  return r;
}
redis::RedisReply Nil() { return RedisReply{}; }
redis::RedisReply Err(std::string s) {
  RedisReply r = Str(std::move(s));
  r.type = Type::kError;
  return r;
}
redis::RedisReply Arr(std::vector<RedisReply> elements) {
  RedisReply r;
  r.type = Type::kArray;
  r.elements = std::move(elements);
  return r;
}
// A RESP2 flat map, fields in the order given.
redis::RedisReply Map(std::vector<std::pair<std::string, RedisReply>> fields) {
  std::vector<RedisReply> flat;
  for (auto& [name, value] : fields) {
    flat.push_back(Str(name));
    flat.push_back(std::move(value));
  }
  return Arr(std::move(flat));
}
redis::RedisReply Ints(std::vector<long long> values) {
  std::vector<RedisReply> elements;
  for (long long v : values) elements.push_back(Int(v));
  return Arr(std::move(elements));
}

// A CLUSTER SHARDS node map with redis 7.0.15's fields in its order ("hostname" only when set).
redis::RedisReply ShardNodeMap(std::string id, int port, int tls_port, std::string endpoint,
                               std::string role, long long offset, std::string health,
                               std::string hostname = "") {
  std::vector<std::pair<std::string, RedisReply>> fields = {{"id", Str(std::move(id))}};
  if (port != 0) fields.emplace_back("port", Int(port));
  if (tls_port != 0) fields.emplace_back("tls-port", Int(tls_port));
  fields.emplace_back("ip", Str(endpoint == "" ? "" : "127.0.0.1"));
  fields.emplace_back("endpoint", Str(std::move(endpoint)));
  if (!hostname.empty()) fields.emplace_back("hostname", Str(std::move(hostname)));
  fields.emplace_back("role", Str(std::move(role)));
  fields.emplace_back("replication-offset", Int(offset));
  fields.emplace_back("health", Str(std::move(health)));
  return Map(std::move(fields));
}
redis::RedisReply Shard(std::vector<long long> slots, std::vector<RedisReply> nodes) {
  return Map({{"slots", Ints(std::move(slots))}, {"nodes", Arr(std::move(nodes))}});
}
// A CLUSTER SLOTS node: endpoint, port, id, metadata map.
redis::RedisReply SlotsNode(RedisReply endpoint, int port, std::string id,
                            std::vector<std::pair<std::string, RedisReply>> metadata = {}) {
  return Arr({std::move(endpoint), Int(port), Str(std::move(id)), Map(std::move(metadata))});
}

// ---- Live captures ------------------------------------------------------------------------------

// The 3-node cluster (tls-cluster yes): primary A with slots 0-8000 and 10000-10010 and replica
// R, primary B with 8001-9999 and 10011-16383.
constexpr char kIdA[] = "0d306f475b3446b633fcc95021dfdb6403c5b5bd";
constexpr char kIdB[] = "8ae8ecd3c852dde9e2766b2aa5977bd6e9868673";
constexpr char kIdR[] = "bb2063cded6fe0538e901c8bcb44ed6c15d0b033";
constexpr int kPortA = 60289, kTlsPortA = 33217;
constexpr int kPortB = 54917, kTlsPortB = 39991;
constexpr int kPortR = 59271, kTlsPortR = 54163;

// CLUSTER SHARDS, the same over plain TCP and TLS.
redis::RedisReply LiveShards() {
  return Arr({
      Shard({8001, 9999, 10011, 16383},
            {ShardNodeMap(kIdB, kPortB, kTlsPortB, "127.0.0.1", "master", 0, "online")}),
      Shard({0, 8000, 10000, 10010},
            {ShardNodeMap(kIdA, kPortA, kTlsPortA, "127.0.0.1", "master", 14, "online"),
             ShardNodeMap(kIdR, kPortR, kTlsPortR, "127.0.0.1", "replica", 14, "online")}),
  });
}

// CLUSTER SLOTS: the ports are those of the connection's transport.
redis::RedisReply LiveSlots(bool tls) {
  const RedisReply a = SlotsNode(Str("127.0.0.1"), tls ? kTlsPortA : kPortA, kIdA);
  const RedisReply r = SlotsNode(Str("127.0.0.1"), tls ? kTlsPortR : kPortR, kIdR);
  const RedisReply b = SlotsNode(Str("127.0.0.1"), tls ? kTlsPortB : kPortB, kIdB);
  return Arr({
      Arr({Int(0), Int(8000), a, r}),
      Arr({Int(8001), Int(9999), b}),
      Arr({Int(10000), Int(10010), a, r}),
      Arr({Int(10011), Int(16383), b}),
  });
}

// The same cluster after `cluster-announce-hostname node2.example.com` on B and
// `cluster-preferred-endpoint-type hostname` on the node asked (A), and a `kill -9` of R.
redis::RedisReply LiveShardsHostnames() {
  return Arr({
      Shard({8001, 9999, 10011, 16383}, {ShardNodeMap(kIdB, kPortB, kTlsPortB, "node2.example.com",
                                                      "master", 0, "online", "node2.example.com")}),
      Shard({0, 8000, 10000, 10010},
            {ShardNodeMap(kIdA, kPortA, kTlsPortA, "?", "master", 14, "online"),
             ShardNodeMap(kIdR, kPortR, kTlsPortR, "?", "replica", 14, "fail")}),
  });
}
redis::RedisReply LiveSlotsHostnames() {
  const RedisReply a = SlotsNode(Str("?"), kPortA, kIdA, {{"ip", Str("127.0.0.1")}});
  const RedisReply b =
      SlotsNode(Str("node2.example.com"), kPortB, kIdB, {{"ip", Str("127.0.0.1")}});
  return Arr({
      Arr({Int(0), Int(8000), a}),
      Arr({Int(8001), Int(9999), b}),
      Arr({Int(10000), Int(10010), a}),
      Arr({Int(10011), Int(16383), b}),
  });
}

// A lone node given all slots by CLUSTER ADDSLOTSRANGE 0 16383: it never learnt its own IP.
constexpr char kIdLone[] = "883a70e084f722d79b258e660a39ae772879ae6d";
redis::RedisReply LiveLoneShards() {
  return Arr({Shard({0, 16383}, {ShardNodeMap(kIdLone, 44813, 0, "", "master", 0, "online")})});
}
redis::RedisReply LiveLoneSlots() {
  return Arr({Arr({Int(0), Int(16383), SlotsNode(Str(""), 44813, kIdLone)})});
}

redis::HostPort Local(int port) { return HostPort{"127.0.0.1", port}; }

redis::ClusterNode Node(std::string host, int port, std::string id, bool primary) {
  ClusterNode node;
  node.address.host = std::move(host);
  node.address.port = port;
  node.id = std::move(id);
  node.primary = primary;
  return node;
}

// "MOVED 3999 127.0.0.1:6381" for a parsed redirect (IPv6 hosts in brackets), else the status.
std::string Describe(const absl::StatusOr<Redirect>& redirect) {
  if (!redirect.ok()) return redirect.status().ToString();
  return absl::StrCat(redirect->kind == Redirect::Kind::kMoved ? "MOVED " : "ASK ", redirect->slot,
                      " ", redirect->address.ToString());
}

// ---- CRC16 and hash slots -----------------------------------------------------------------------

// The spec's definition, bit by bit, to check the table-driven one against.
uint16_t BitwiseCrc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc;
}

TEST(Crc16XmodemTest, CheckValueOfTheSpec) {
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(Crc16Xmodem(""), 0);
}

TEST(Crc16XmodemTest, TableAgreesWithTheBitwiseDefinitionOnRandomBytes) {
  std::mt19937 random(12);
  for (int i = 0; i < 2000; ++i) {
    std::string data(random() % 64, '\0');
    for (char& c : data) c = static_cast<char>(random() & 0xFF);
    ASSERT_EQ(Crc16Xmodem(data), BitwiseCrc16(data)) << i;
  }
}

TEST(HashSlotTest, ValuesRedisAnswered) {
  EXPECT_EQ(HashSlot("123456789"), 12739);  // CLUSTER KEYSLOT 123456789
  EXPECT_EQ(HashSlot("foo"), 12182);        // MOVED 12182 for GET foo
  EXPECT_EQ(HashSlot("x"), 16287);
  EXPECT_EQ(HashSlot("a"), 15495);
  EXPECT_EQ(HashSlot("orderhold:{17}:u:alice"), 12304);
  EXPECT_EQ(HashSlot(""), 0);
}

TEST(HashSlotTest, HashTagsFollowTheSpecExamples) {
  const auto whole = [](absl::string_view key) { return Crc16Xmodem(key) % 16384; };
  EXPECT_EQ(HashSlot("{user1000}.following"), HashSlot("user1000"));
  EXPECT_EQ(HashSlot("{user1000}.followers"), HashSlot("user1000"));
  EXPECT_EQ(HashSlot("foo{}{bar}"), whole("foo{}{bar}"));  // empty first tag: hash it all
  EXPECT_EQ(HashSlot("foo{{bar}}zap"), whole("{bar"));     // first '{' to the next '}'
  EXPECT_EQ(HashSlot("foo{bar}{zap}"), HashSlot("bar"));   // the first tag only
  EXPECT_EQ(HashSlot("{}binary"), whole("{}binary"));      // "{}" first: hashed whole
  EXPECT_EQ(HashSlot("{"), whole("{"));
  EXPECT_EQ(HashSlot("no}close{"), whole("no}close{"));  // '}' before '{' does not count
  EXPECT_EQ(HashSlot("}{a}"), HashSlot("a"));
  EXPECT_EQ(HashSlot(std::string("x\0{b\0}y", 7)), whole(std::string("b\0", 2)));  // binary-safe
  EXPECT_NE(HashSlot("foo{}{bar}"), HashSlot("bar"));
}

TEST(HashSlotTest, OrderHoldKeysOfAPartitionShareTheirSlot) {
  EXPECT_EQ(HashSlot("orderhold:{17}:u:alice"), HashSlot("orderhold:{17}:due"));
  EXPECT_EQ(HashSlot("orderhold:{17}:x:a{b}c"), HashSlot("17"));  // a '{' in the user id is inert
}

TEST(HashSlotTest, AlwaysWithinTheSlotRange) {
  std::mt19937 random(7);
  for (int i = 0; i < 2000; ++i) {
    std::string key(random() % 16, 'k');
    for (char& c : key) c = "{}ab\xff"[random() % 5];
    const int slot = HashSlot(key);
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, kClusterSlotCount);
  }
}

// ---- SlotMap ------------------------------------------------------------------------------------

TEST(SlotMapTest, StartsWithEverySlotUnassigned) {
  const SlotMap map;
  EXPECT_FALSE(map.CoversAllSlots());
  EXPECT_EQ(map.NodeFor(0), std::nullopt);
  EXPECT_THAT(map.Primaries(), IsEmpty());
  EXPECT_THAT(map.nodes(), IsEmpty());
  EXPECT_THAT(map.CheckCoverage(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "no primary known for slots 0-16383 (0 of 16384 slots covered)"));
}

TEST(SlotMapTest, AssignRoutesRangesAndListsPrimariesByLowestSlot) {
  SlotMap map;
  ASSERT_THAT(map.Assign(100, 16383, Local(2)), IsOk());
  ASSERT_THAT(map.Assign(0, 99, Local(1)), IsOk());
  ASSERT_THAT(map.Assign(5000, 5000, Local(3)), IsOk());
  EXPECT_THAT(map.NodeFor(0), Optional(Local(1)));
  EXPECT_THAT(map.NodeFor(99), Optional(Local(1)));
  EXPECT_THAT(map.NodeFor(100), Optional(Local(2)));
  EXPECT_THAT(map.NodeFor(5000), Optional(Local(3)));
  EXPECT_THAT(map.NodeFor(16383), Optional(Local(2)));
  EXPECT_EQ(map.NodeFor(-1), std::nullopt);
  EXPECT_EQ(map.NodeFor(16384), std::nullopt);
  EXPECT_TRUE(map.CoversAllSlots());
  EXPECT_THAT(map.CheckCoverage(), IsOk());
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(1), Local(2), Local(3)));
}

TEST(SlotMapTest, AssignRejectsRangesOutsideTheSlots) {
  SlotMap map;
  EXPECT_THAT(map.Assign(-1, 3, Local(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(map.Assign(3, 16384, Local(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(map.Assign(9, 8, Local(1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("9-8")));
  EXPECT_THAT(map.Primaries(), IsEmpty());
}

TEST(SlotMapTest, CoverageErrorNamesTheFirstUnassignedRanges) {
  SlotMap map;
  ASSERT_THAT(map.Assign(0, 16383, Local(1)), IsOk());
  SlotMap holes;
  for (int slot : {0, 2, 3, 10, 20, 30, 40}) {
    ASSERT_THAT(holes.Assign(slot, slot, Local(1)), IsOk());
  }
  // Unassigned: 1, 4-9, 11-19, 21-29, 31-39, 41-16383.
  EXPECT_THAT(holes.CheckCoverage(),
              StatusIs(absl::StatusCode::kUnavailable,
                       "no primary known for slots 1, 4-9, 11-19, 21-29, 31-39, ... (7 of 16384 "
                       "slots covered)"));
}

TEST(SlotMapTest, UpdateRecordsAMovedSlot) {
  SlotMap map;
  ASSERT_THAT(map.Assign(0, 16383, Local(1)), IsOk());
  EXPECT_TRUE(map.Update(3999, Local(2)));
  EXPECT_FALSE(map.Update(3999, Local(2)));  // already so
  EXPECT_FALSE(map.Update(16384, Local(2)));
  EXPECT_FALSE(map.Update(-1, Local(2)));
  EXPECT_THAT(map.NodeFor(3999), Optional(Local(2)));
  EXPECT_THAT(map.NodeFor(3998), Optional(Local(1)));
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(1), Local(2)));

  SlotMap one;
  ASSERT_THAT(one.Assign(7, 7, Local(1)), IsOk());
  EXPECT_TRUE(one.Update(7, Local(2)));  // the only slot of Local(1) moves: it is no primary now
  EXPECT_THAT(one.Primaries(), ElementsAre(Local(2)));
  EXPECT_TRUE(one.Update(8, Local(3)));  // an unassigned slot learnt from a MOVED
  EXPECT_THAT(one.Primaries(), ElementsAre(Local(2), Local(3)));
}

TEST(SlotMapTest, ManyMovedsToNewAddressesDoNotGrowWithoutBound) {
  SlotMap map;
  for (int port = 1; port <= 70000; ++port) map.Update(0, Local(port % 65535 + 1));
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(70000 % 65535 + 1)));
}

TEST(SlotMapTest, DiffNamesThePrimariesThatLeftAndJoined) {
  SlotMap before;
  ASSERT_THAT(before.Assign(0, 8000, Local(1)), IsOk());
  ASSERT_THAT(before.Assign(8001, 16383, Local(2)), IsOk());
  SlotMap after;  // Local(1) failed over to Local(3); two slots became unassigned
  ASSERT_THAT(after.Assign(0, 8000, Local(3)), IsOk());
  ASSERT_THAT(after.Assign(8001, 16381, Local(2)), IsOk());
  const SlotMapDiff diff = DiffSlotMaps(before, after);
  EXPECT_THAT(diff.primaries_left, ElementsAre(Local(1)));
  EXPECT_THAT(diff.primaries_joined, ElementsAre(Local(3)));
  EXPECT_EQ(diff.slots_moved, 8001 + 2);
  EXPECT_EQ(DiffSlotMaps(after, before).slots_moved, 8001 + 2);
  EXPECT_EQ(DiffSlotMaps(before, before), SlotMapDiff{});
  EXPECT_FALSE(before == after);
}

TEST(SlotMapTest, EqualityIgnoresHowTheTableWasBuilt) {
  SlotMap a;
  ASSERT_THAT(a.Assign(0, 16383, Local(1)), IsOk());
  ASSERT_THAT(a.Assign(10, 20, Local(2)), IsOk());
  SlotMap b;  // the same routing, owners registered in the other order
  ASSERT_THAT(b.Assign(10, 20, Local(2)), IsOk());
  ASSERT_THAT(b.Assign(0, 9, Local(1)), IsOk());
  ASSERT_THAT(b.Assign(21, 16383, Local(1)), IsOk());
  EXPECT_TRUE(a == b);
  b.Update(21, Local(2));
  EXPECT_FALSE(a == b);
  EXPECT_EQ(DiffSlotMaps(a, b).slots_moved, 1);
  EXPECT_THAT(DiffSlotMaps(a, b).primaries_left, IsEmpty());
}

// ---- CLUSTER SHARDS -----------------------------------------------------------------------------

TEST(ParseClusterShardsTest, LiveClusterOverPlainTcp) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(LiveShards(), "127.0.0.1", false));
  EXPECT_THAT(map.CheckCoverage(), IsOk());
  EXPECT_THAT(map.NodeFor(0), Optional(Local(kPortA)));
  EXPECT_THAT(map.NodeFor(8000), Optional(Local(kPortA)));
  EXPECT_THAT(map.NodeFor(8001), Optional(Local(kPortB)));
  EXPECT_THAT(map.NodeFor(10005), Optional(Local(kPortA)));
  EXPECT_THAT(map.NodeFor(16383), Optional(Local(kPortB)));
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(kPortA), Local(kPortB)));
  EXPECT_THAT(map.nodes(), ElementsAre(ClusterNode{Local(kPortB), kIdB, true},
                                       ClusterNode{Local(kPortR), kIdR, false},
                                       ClusterNode{Local(kPortA), kIdA, true}));
  EXPECT_THAT(map.warnings(), IsEmpty());
}

TEST(ParseClusterShardsTest, TlsTakesTheTlsPorts) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(LiveShards(), "127.0.0.1", true));
  EXPECT_THAT(map.NodeFor(0), Optional(Local(kTlsPortA)));
  EXPECT_THAT(map.NodeFor(16383), Optional(Local(kTlsPortB)));
  EXPECT_THAT(map.nodes(), ElementsAre(ClusterNode{Local(kTlsPortA), kIdA, true},
                                       ClusterNode{Local(kTlsPortB), kIdB, true},
                                       ClusterNode{Local(kTlsPortR), kIdR, false}));
}

TEST(ParseClusterShardsTest, AgreesWithClusterSlotsOfTheSameCluster) {
  ASSERT_OK_AND_ASSIGN(const SlotMap shards, ParseClusterShards(LiveShards(), "127.0.0.1", false));
  ASSERT_OK_AND_ASSIGN(const SlotMap slots, ParseClusterSlots(LiveSlots(false), "127.0.0.1"));
  EXPECT_TRUE(shards == slots);
  ASSERT_OK_AND_ASSIGN(const SlotMap tls_shards,
                       ParseClusterShards(LiveShards(), "127.0.0.1", true));
  ASSERT_OK_AND_ASSIGN(const SlotMap tls_slots, ParseClusterSlots(LiveSlots(true), "127.0.0.1"));
  EXPECT_TRUE(tls_shards == tls_slots);
  EXPECT_FALSE(shards == tls_shards);
}

TEST(ParseClusterShardsTest, EmptyEndpointMeansTheHostTheReplyCameFrom) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(LiveLoneShards(), "10.1.2.3", false));
  EXPECT_THAT(map.CheckCoverage(), IsOk());
  EXPECT_THAT(map.Primaries(), ElementsAre(HostPort{"10.1.2.3", 44813}));
  EXPECT_THAT(map.nodes(), ElementsAre(Node("10.1.2.3", 44813, kIdLone, true)));
  EXPECT_THAT(ParseClusterShards(LiveLoneShards(), "", false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("endpoint is empty")));
}

TEST(ParseClusterShardsTest, NilEndpointMeansTheHostTheReplyCameFrom) {
  RedisReply reply = LiveLoneShards();
  RedisReply& fields = reply.elements[0].elements[3].elements[0];
  for (size_t i = 0; i < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == "endpoint") fields.elements[i + 1] = Nil();
  }
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(reply, "::1", false));
  EXPECT_THAT(map.NodeFor(42), Optional(HostPort{"::1", 44813}));
}

TEST(ParseClusterShardsTest, HostnameEndpointsAndUnknownEndpoints) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map,
                       ParseClusterShards(LiveShardsHostnames(), "127.0.0.1", false));
  const HostPort b{"node2.example.com", kPortB};
  EXPECT_THAT(map.NodeFor(8001), Optional(b));
  EXPECT_EQ(map.NodeFor(0), std::nullopt);  // A's endpoint is "?": an unknown node
  EXPECT_EQ(map.NodeFor(10010), std::nullopt);
  EXPECT_THAT(map.Primaries(), ElementsAre(b));
  EXPECT_THAT(map.nodes(), ElementsAre(ClusterNode{b, kIdB, true}));
  EXPECT_THAT(map.warnings(), ElementsAre(AllOf(HasSubstr(kIdA), HasSubstr("(primary)"),
                                                HasSubstr("cluster-announce-hostname"),
                                                HasSubstr("its slots have no known primary")),
                                          AllOf(HasSubstr(kIdR), HasSubstr("(replica)"))));
  EXPECT_THAT(map.CheckCoverage(),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("slots 0-8000, 10000-10010 (8372 of 16384"), HasSubstr(kIdA),
                             HasSubstr("cluster-announce-hostname"))));
}

TEST(ParseClusterShardsTest, PrimariesStayWhateverTheirHealthReplicasOnlyWhenOnline) {
  RedisReply reply = Arr({
      Shard({0, 8000}, {ShardNodeMap(kIdA, kPortA, 0, "127.0.0.1", "master", 14, "fail"),
                        ShardNodeMap(kIdR, kPortR, 0, "127.0.0.1", "replica", 0, "loading")}),
      Shard({8001, 16383},
            {ShardNodeMap(kIdB, kPortB, 0, "127.0.0.1", "master", 0, "online"),
             ShardNodeMap(std::string(40, 'f'), 7000, 0, "127.0.0.1", "replica", 0, "fail")}),
  });
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(reply, "127.0.0.1", false));
  EXPECT_THAT(map.CheckCoverage(), IsOk());
  EXPECT_THAT(map.NodeFor(0), Optional(Local(kPortA)));
  EXPECT_THAT(map.nodes(), ElementsAre(ClusterNode{Local(kPortB), kIdB, true},
                                       ClusterNode{Local(kPortA), kIdA, true}));
}

TEST(ParseClusterShardsTest, AShardWithoutSlotsListsItsPrimaryButRoutesNothingToIt) {
  RedisReply reply = LiveLoneShards();
  reply.elements.push_back(
      Shard({}, {ShardNodeMap(kIdB, kPortB, 0, "127.0.0.1", "master", 0, "online")}));
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(reply, "127.0.0.1", false));
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(44813)));
  EXPECT_EQ(map.nodes().size(), 2u);
}

TEST(ParseClusterShardsTest, IgnoresUnknownFieldsAndAcceptsNumbersAsStrings) {
  RedisReply reply = Arr({Map({
      {"shard-id", Str("abc")},
      {"slots", Arr({Str("0"), Str("16383")})},
      {"nodes", Arr({Map({{"id", Str(kIdA)},
                          {"port", Str("6379")},
                          {"endpoint", Str("redis-0.example")},
                          {"role", Str("master")},
                          {"availability-zone", Str("a")}})})},
  })});
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterShards(reply, "127.0.0.1", false));
  EXPECT_THAT(map.NodeFor(9), Optional(HostPort{"redis-0.example", 6379}));
}

TEST(ParseClusterShardsTest, MalformedRepliesNameWhatIsWrong) {
  const auto node = [](int port, int tls_port) {
    return ShardNodeMap(kIdA, port, tls_port, "127.0.0.1", "master", 0, "online");
  };
  struct Case {
    RedisReply reply;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {Err("ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP."),
       absl::StatusCode::kInvalidArgument,
       "CLUSTER SHARDS answered an error: ERR unknown subcommand 'SHARDS'"},
      {Int(3), absl::StatusCode::kInvalidArgument, "not an array"},
      {Arr({Arr({Str("slots")})}), absl::StatusCode::kInvalidArgument, "shard 1 is not a map"},
      {Arr({Arr({Int(1), Int(2)})}), absl::StatusCode::kInvalidArgument,
       "shard 1: field name 1 is not a string"},
      {Arr({Map({{"nodes", Arr({node(1, 0)})}})}), absl::StatusCode::kInvalidArgument,
       "shard 1: \"slots\" is missing"},
      {Arr({Map({{"slots", Ints({0, 1})}, {"nodes", Str("x")}})}),
       absl::StatusCode::kInvalidArgument, "shard 1: \"nodes\" is not an array"},
      {Arr({Shard({0, 1, 2}, {node(1, 0)})}), absl::StatusCode::kInvalidArgument, "odd number"},
      {Arr({Shard({0, 16384}, {node(1, 0)})}), absl::StatusCode::kInvalidArgument,
       "shard 1 slot range 1 end is 16384, not a slot"},
      {Arr({Shard({-1, 5}, {node(1, 0)})}), absl::StatusCode::kInvalidArgument,
       "start is -1, not a slot"},
      {Arr({Shard({9, 8}, {node(1, 0)})}), absl::StatusCode::kInvalidArgument,
       "9-8 ends before it starts"},
      {Arr({Map({{"slots", Arr({Str("x"), Int(1)})}, {"nodes", Arr({node(1, 0)})}})}),
       absl::StatusCode::kInvalidArgument, "start is not an integer"},
      {Arr({Shard({0, 1}, {node(70000, 0)})}), absl::StatusCode::kInvalidArgument,
       "shard 1 node 1: \"port\" is 70000, not a port"},
      {Arr({Shard({0, 1}, {Map({{"id", Str(kIdA)}, {"port", Int(1)}})})}),
       absl::StatusCode::kInvalidArgument, "node 1 has no role"},
      {Arr({Shard({0, 1}, {Map({{"port", Int(1)}, {"role", Str("master")}})})}),
       absl::StatusCode::kInvalidArgument, "node 1 has no id"},
      {Arr({Shard({0, 1}, {Map({{"id", Int(1)}})})}), absl::StatusCode::kInvalidArgument,
       "\"id\" is not a string"},
      {Arr({Shard({0, 1}, {Map({{"id", Str(kIdA)},
                                {"port", Int(1)},
                                {"role", Str("master")},
                                {"endpoint", Int(5)}})})}),
       absl::StatusCode::kInvalidArgument, "endpoint is not a string"},
      {Arr({Shard({0, 1}, {node(0, 6380)})}), absl::StatusCode::kInvalidArgument,
       "has no \"port\" (the node serves TLS only"},
      {Arr({Shard({0, 1}, {node(1, 0), node(2, 0)})}), absl::StatusCode::kInternal,
       "shard 1 has two masters"},
      {Arr({Shard({0, 1}, {ShardNodeMap(kIdR, 1, 0, "127.0.0.1", "replica", 0, "online")})}),
       absl::StatusCode::kInternal, "shard 1 has slots but no master"},
      {Arr({Shard({0, 10}, {node(1, 0)}), Shard({10, 20}, {node(2, 0)})}),
       absl::StatusCode::kInternal, "shard 2: slot 10 is claimed by two ranges"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseClusterShards(c.reply, "127.0.0.1", false),
                StatusIs(c.code, HasSubstr(c.message)))
        << c.message;
  }
  EXPECT_THAT(
      ParseClusterShards(Arr({Shard({0, 1}, {node(6379, 0)})}), "127.0.0.1", true),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr(kIdA), HasSubstr("no \"tls-port\""), HasSubstr("tls-cluster yes"))));
}

// ---- CLUSTER SLOTS ------------------------------------------------------------------------------

TEST(ParseClusterSlotsTest, LiveClusterOverPlainTcpAndTls) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterSlots(LiveSlots(false), "127.0.0.1"));
  EXPECT_THAT(map.CheckCoverage(), IsOk());
  EXPECT_THAT(map.NodeFor(10000), Optional(Local(kPortA)));
  EXPECT_THAT(map.NodeFor(10011), Optional(Local(kPortB)));
  EXPECT_THAT(map.Primaries(), ElementsAre(Local(kPortA), Local(kPortB)));
  EXPECT_EQ(map.nodes().size(), 3u);  // A and R are listed twice in the reply, once here
  ASSERT_OK_AND_ASSIGN(const SlotMap tls, ParseClusterSlots(LiveSlots(true), "127.0.0.1"));
  EXPECT_THAT(tls.Primaries(), ElementsAre(Local(kTlsPortA), Local(kTlsPortB)));
}

TEST(ParseClusterSlotsTest, EmptyOrNilEndpointMeansTheHostTheReplyCameFrom) {
  ASSERT_OK_AND_ASSIGN(const SlotMap lone, ParseClusterSlots(LiveLoneSlots(), "10.1.2.3"));
  EXPECT_THAT(lone.nodes(), ElementsAre(Node("10.1.2.3", 44813, kIdLone, true)));
  ASSERT_OK_AND_ASSIGN(const SlotMap from_shards,
                       ParseClusterShards(LiveLoneShards(), "10.1.2.3", false));
  EXPECT_TRUE(lone == from_shards);
  const RedisReply nil = Arr({Arr({Int(0), Int(16383), SlotsNode(Nil(), 7000, kIdLone)})});
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterSlots(nil, "10.1.2.3"));
  EXPECT_THAT(map.NodeFor(0), Optional(HostPort{"10.1.2.3", 7000}));
  EXPECT_THAT(ParseClusterSlots(nil, ""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ParseClusterSlotsTest, HostnameEndpointsAndUnknownEndpoints) {
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterSlots(LiveSlotsHostnames(), "127.0.0.1"));
  ASSERT_OK_AND_ASSIGN(const SlotMap shards,
                       ParseClusterShards(LiveShardsHostnames(), "127.0.0.1", false));
  EXPECT_TRUE(map == shards);
  EXPECT_THAT(map.warnings(), ElementsAre(HasSubstr(kIdA)));  // once, not once per range
}

TEST(ParseClusterSlotsTest, OldShapesWithoutIdOrMetadata) {
  // Redis 3.x: [ip, port] only.
  const RedisReply reply = Arr({Arr(
      {Int(0), Int(16383), Arr({Str("10.0.0.1"), Int(7000)}), Arr({Str("10.0.0.2"), Int(7001)})})});
  ASSERT_OK_AND_ASSIGN(const SlotMap map, ParseClusterSlots(reply, "127.0.0.1"));
  EXPECT_THAT(map.NodeFor(0), Optional(HostPort{"10.0.0.1", 7000}));
  EXPECT_THAT(map.nodes(),
              ElementsAre(Node("10.0.0.1", 7000, "", true), Node("10.0.0.2", 7001, "", false)));
}

TEST(ParseClusterSlotsTest, MalformedRepliesNameWhatIsWrong) {
  const RedisReply a = SlotsNode(Str("127.0.0.1"), 7000, kIdA);
  struct Case {
    RedisReply reply;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {Err("NOPERM this user has no permissions to run the 'cluster|slots' command"),
       absl::StatusCode::kInvalidArgument, "CLUSTER SLOTS answered an error: NOPERM"},
      {Nil(), absl::StatusCode::kInvalidArgument, "not an array"},
      {Arr({Arr({Int(0), Int(1)})}), absl::StatusCode::kInvalidArgument,
       "range 1 is not an array of start, end, primary"},
      {Arr({Arr({Int(0), Int(16384), a})}), absl::StatusCode::kInvalidArgument,
       "range 1 end is 16384"},
      {Arr({Arr({Int(5), Int(4), a})}), absl::StatusCode::kInvalidArgument,
       "ends before it starts"},
      {Arr({Arr({Int(0), Int(1), Arr({Str("h")})})}), absl::StatusCode::kInvalidArgument,
       "range 1 node 1 is not an array of endpoint, port"},
      {Arr({Arr({Int(0), Int(1), a, Arr({Str("h"), Str("port")})})}),
       absl::StatusCode::kInvalidArgument, "range 1 node 2: port is not an integer"},
      {Arr({Arr({Int(0), Int(1), Arr({Str("h"), Int(1), Int(5)})})}),
       absl::StatusCode::kInvalidArgument, "id is not a string"},
      {Arr({Arr({Int(0), Int(10), a}), Arr({Int(10), Int(11), a})}), absl::StatusCode::kInternal,
       "range 2: slot 10 is claimed by two ranges"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseClusterSlots(c.reply, "127.0.0.1"), StatusIs(c.code, HasSubstr(c.message)))
        << c.message;
  }
}

// ---- MOVED / ASK --------------------------------------------------------------------------------

TEST(ParseRedirectTest, MovedAndAskAsRedisWritesThem) {
  EXPECT_EQ(Describe(ParseRedirect("MOVED 3999 127.0.0.1:6381", "10.0.0.9")),
            "MOVED 3999 127.0.0.1:6381");
  EXPECT_EQ(Describe(ParseRedirect("ASK 3999 127.0.0.1:6381", "10.0.0.9")),
            "ASK 3999 127.0.0.1:6381");
  // Captured: a node with cluster-preferred-endpoint-type hostname, and a TLS client's port.
  EXPECT_EQ(Describe(ParseRedirect("MOVED 12182 node2.example.com:54917", "")),
            "MOVED 12182 node2.example.com:54917");
  EXPECT_EQ(Describe(ParseRedirect("MOVED 16383 127.0.0.1:39991", "")),
            "MOVED 16383 127.0.0.1:39991");
  EXPECT_EQ(Describe(ParseRedirect("ASK 0 h:1", "")), "ASK 0 h:1");
}

TEST(ParseRedirectTest, EmptyEndpointIsTheHostOfTheNodeThatAnswered) {
  EXPECT_EQ(Describe(ParseRedirect("MOVED 3999 :6380", "10.0.0.9")), "MOVED 3999 10.0.0.9:6380");
  EXPECT_THAT(ParseRedirect("MOVED 3999 :6380", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("endpoint is empty")));
}

TEST(ParseRedirectTest, Ipv6Endpoints) {
  EXPECT_EQ(Describe(ParseRedirect("MOVED 1 ::1:6381", "")), "MOVED 1 [::1]:6381");
  EXPECT_EQ(Describe(ParseRedirect("ASK 1 [::1]:6381", "")), "ASK 1 [::1]:6381");
  EXPECT_EQ(ParseRedirect("ASK 1 [::1]:6381", "").value().address.host, "::1");
  EXPECT_EQ(Describe(ParseRedirect("MOVED 1 2001:db8::7:7000", "")), "MOVED 1 [2001:db8::7]:7000");
}

TEST(ParseRedirectTest, MalformedRedirectsQuoteTheLine) {
  for (const char* line :
       {"MOVED", "MOVED 3999", "MOVED 3999 127.0.0.1:6381 extra", "MOVED  3999 127.0.0.1:6381",
        "moved 3999 127.0.0.1:6381", "TRYAGAIN Multiple keys request during rehashing of slot",
        "MOVED x 127.0.0.1:6381", "MOVED -1 127.0.0.1:6381", "MOVED 16384 127.0.0.1:6381",
        "ASK 3999 127.0.0.1", "ASK 3999 127.0.0.1:", "ASK 3999 127.0.0.1:0",
        "ASK 3999 127.0.0.1:65536", "ASK 3999 127.0.0.1:63x", ""}) {
    EXPECT_THAT(ParseRedirect(line, "127.0.0.1"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("redirect \"", line, "\""))))
        << line;
  }
  EXPECT_THAT(ParseRedirect("MOVED 3999 ?:6380", "127.0.0.1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown"), HasSubstr("refresh the slot map"))));
}

TEST(ParseRedirectTest, AgreesWithTheErrorClassifier) {
  for (const char* line : {"MOVED 12304 127.0.0.1:7102", "ASK 12304 127.0.0.1:7100"}) {
    ASSERT_OK_AND_ASSIGN(const Redirect redirect, ParseRedirect(line, ""));
    EXPECT_EQ(ClassifyRedisError(line), redirect.kind == Redirect::Kind::kMoved
                                            ? RedisErrorKind::kMoved
                                            : RedisErrorKind::kAsk);
  }
}

}  // namespace
}  // namespace orderhold::redis
