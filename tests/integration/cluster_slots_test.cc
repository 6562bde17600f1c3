// Cluster routing against a real redis-server 7.0 in cluster mode: HashSlot equals CLUSTER
// KEYSLOT for every kind of key OrderHold writes, the spec's hash-tag edge cases and thousands of
// random binary keys; and the node's own CLUSTER SHARDS and CLUSTER SLOTS replies, over plain TCP
// and TLS, parse into a SlotMap that routes every slot to it. One node holds all 16384 slots
// (CLUSTER ADDSLOTSRANGE 0 16383): enough for the pure parts; redirects need several nodes.
#include "server/redis/cluster_slots.h"

#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/redis/redis_connection.h"
#include "server/store/keys.h"
#include "tests/testing/os_util.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tls_certs.h"

namespace orderhold::store {
namespace {

using ::orderhold::testing::IsOk;
using ::orderhold::testing::RedisServer;
using ::orderhold::testing::RedisServerOptions;
using ::orderhold::testing::StatusIs;
using ::orderhold::testing::TlsCerts;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// A cluster-enabled node (the fixture's `cluster` option: its own bus port) owning every slot.
absl::StatusOr<std::unique_ptr<RedisServer>> StartClusterNode(RedisServerOptions options) {
  options.cluster = true;
  ORDERHOLD_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> node, RedisServer::Start(options));
  ORDERHOLD_RETURN_IF_ERROR(node->Command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}).status());
  return node;
}

// Runs `args` on `connection` and returns the reply (an error reply is a reply).
absl::StatusOr<redis::RedisReply> Ask(redis::RedisConnection& connection,
                                      std::vector<std::string> args) {
  return connection.Run(args, In(absl::Seconds(5)));
}

// Every key name OrderHold writes, for every partition, some odd user ids, the spec's hash-tag
// cases, and random binary keys made of the bytes that matter ({, }, :, NUL, 0xFF).
std::vector<std::string> KeysToCheck() {
  std::vector<std::string> keys;
  for (const char* prefix : {"orderhold", "oh-test"}) {
    const KeySchema schema(prefix);
    for (int partition = 0; partition < KeySchema::kPartitionCount; ++partition) {
      for (const std::string& key : {schema.BucketIndexKey(partition), schema.EventsKey(partition),
                                     schema.LeaseKey(partition), schema.NudgeChannel(partition),
                                     schema.PartitionPrefix(partition)}) {
        keys.push_back(key);
      }
    }
    keys.push_back(schema.ReplicasKey());
    std::vector<std::string> users = {"",    "{",          "}", "{}",  "a{b}c",
                                      "{x}", "with space", "ü", "*?[", std::string("\0\xff", 2)};
    for (int i = 0; i < 300; ++i) users.push_back(absl::StrCat("user-", i));
    for (const std::string& user : users) {
      keys.push_back(schema.HoldsBucketKey(user));
      keys.push_back(schema.OutcomesKey(user));
      keys.push_back(schema.EndedKey(user));
      keys.push_back(schema.DueBucketKey(user));
    }
  }
  for (const char* key : {"", "123456789", "{user1000}.following", "{user1000}.followers",
                          "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}", "}{",
                          "{a", "a}", "}{a}", "{}{a}", "{{}}", "{{a}}", "a{b}{c}d"}) {
    keys.emplace_back(key);
  }
  std::mt19937 random(20241112);
  const char alphabet[] = {'{', '}', ':', 'a', 'b', '\0', '\xff'};
  for (int i = 0; i < 3000; ++i) {
    std::string key(random() % 20, 'a');
    for (char& c : key) c = alphabet[random() % sizeof(alphabet)];
    keys.push_back(key);
  }
  return keys;
}

TEST(ClusterSlotsLiveTest, HashSlotEqualsClusterKeyslot) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> node, StartClusterNode({}));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<redis::RedisConnection> connection,
      redis::RedisConnection::Connect({"127.0.0.1", node->port()}, nullptr, In(absl::Seconds(5))));
  const std::vector<std::string> keys = KeysToCheck();
  ASSERT_GT(keys.size(), 4000u);
  for (const std::string& key : keys) connection->Append({"CLUSTER", "KEYSLOT", key});
  ASSERT_THAT(connection->Flush(In(absl::Seconds(10))), IsOk());
  int mismatches = 0;
  for (const std::string& key : keys) {
    ASSERT_OK_AND_ASSIGN(const redis::RedisReply reply, connection->Read(In(absl::Seconds(10))));
    ASSERT_EQ(reply.type, redis::RedisReply::Type::kInteger) << reply.str;
    if (reply.integer != redis::HashSlot(key) && ++mismatches <= 10) {
      ADD_FAILURE() << "key \"" << absl::CEscape(key) << "\": CLUSTER KEYSLOT " << reply.integer
                    << ", HashSlot " << redis::HashSlot(key);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Every key of a partition is in one slot (what lets each script touch one slot), and the 64
// partitions are 64 slots: as the node computes it.
TEST(ClusterSlotsLiveTest, OrderHoldPartitionsAreSixtyFourDistinctSlots) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> node, StartClusterNode({}));
  const KeySchema schema("orderhold");
  std::vector<std::string> users(KeySchema::kPartitionCount);  // one user of each partition
  for (int i = 0; i < 100000; ++i) {
    const std::string user = absl::StrCat("user-", i);
    if (users[KeySchema::PartitionOf(user)].empty()) users[KeySchema::PartitionOf(user)] = user;
  }
  std::set<std::string> slots;
  for (int partition = 0; partition < KeySchema::kPartitionCount; ++partition) {
    ASSERT_FALSE(users[partition].empty()) << partition;
    std::set<std::string> of_partition;
    for (const std::string& key :
         {schema.HoldsBucketKey(users[partition]), schema.OutcomesKey(users[partition]),
          schema.EndedKey(users[partition]), schema.DueBucketKey(users[partition]),
          schema.BucketIndexKey(partition), schema.EventsKey(partition), schema.LeaseKey(partition),
          schema.NudgeChannel(partition)}) {
      ASSERT_OK_AND_ASSIGN(const std::string slot, node->Command({"CLUSTER", "KEYSLOT", key}));
      of_partition.insert(slot);
    }
    EXPECT_EQ(of_partition.size(), 1u) << "partition " << partition;
    slots.insert(*of_partition.begin());
  }
  EXPECT_EQ(slots.size(), 64u);
}

TEST(ClusterSlotsLiveTest, LiveShardsAndSlotsRouteEverySlotToTheNode) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> node, StartClusterNode({}));
  ASSERT_OK_AND_ASSIGN(const std::string id, node->Command({"CLUSTER", "MYID"}));
  const redis::HostPort address{"127.0.0.1", node->port()};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<redis::RedisConnection> connection,
                       redis::RedisConnection::Connect(address, nullptr, In(absl::Seconds(5))));

  ASSERT_OK_AND_ASSIGN(const redis::RedisReply shards_reply,
                       Ask(*connection, {"CLUSTER", "SHARDS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap shards,
                       redis::ParseClusterShards(shards_reply, address.host, /*tls=*/false));
  EXPECT_THAT(shards.CheckCoverage(), IsOk());
  EXPECT_THAT(shards.Primaries(), ElementsAre(address));
  EXPECT_THAT(shards.nodes(), ElementsAre(redis::ClusterNode{address, id, true}));
  EXPECT_THAT(shards.warnings(), IsEmpty());
  for (int slot = 0; slot < redis::kClusterSlotCount; ++slot)
    ASSERT_EQ(shards.NodeFor(slot), address);

  ASSERT_OK_AND_ASSIGN(const redis::RedisReply slots_reply, Ask(*connection, {"CLUSTER", "SLOTS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap slots,
                       redis::ParseClusterSlots(slots_reply, address.host));
  EXPECT_THAT(slots.CheckCoverage(), IsOk());
  EXPECT_TRUE(slots == shards);
}

TEST(ClusterSlotsLiveTest, SlotsTheNodeDoesNotServeAreUnassigned) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisServer> node, StartClusterNode({}));
  ASSERT_THAT(node->Command({"CLUSTER", "DELSLOTS", "5", "100", "101"}), IsOk());
  const redis::HostPort address{"127.0.0.1", node->port()};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<redis::RedisConnection> connection,
                       redis::RedisConnection::Connect(address, nullptr, In(absl::Seconds(5))));
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply shards_reply,
                       Ask(*connection, {"CLUSTER", "SHARDS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap shards,
                       redis::ParseClusterShards(shards_reply, "127.0.0.1", false));
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply slots_reply, Ask(*connection, {"CLUSTER", "SLOTS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap slots,
                       redis::ParseClusterSlots(slots_reply, "127.0.0.1"));
  for (const redis::SlotMap* map : {&shards, &slots}) {
    EXPECT_THAT(map->CheckCoverage(),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("slots 5, 100-101 (16381 of 16384 slots covered)")));
    EXPECT_EQ(map->NodeFor(5), std::nullopt);
    EXPECT_EQ(map->NodeFor(4), address);
    EXPECT_EQ(map->NodeFor(102), address);
  }
  EXPECT_TRUE(shards == slots);

  ASSERT_THAT(node->Command({"CLUSTER", "ADDSLOTS", "5", "100", "101"}), IsOk());
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply again, Ask(*connection, {"CLUSTER", "SHARDS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap full,
                       redis::ParseClusterShards(again, "127.0.0.1", false));
  EXPECT_THAT(full.CheckCoverage(), IsOk());
  const redis::SlotMapDiff diff = redis::DiffSlotMaps(shards, full);
  EXPECT_EQ(diff.slots_moved, 3);
  EXPECT_THAT(diff.primaries_left, IsEmpty());
  EXPECT_THAT(diff.primaries_joined, IsEmpty());
}

// With tls-cluster yes, CLUSTER SHARDS names both ports and the client picks; CLUSTER SLOTS
// answers the port of the transport it was asked over.
TEST(ClusterSlotsLiveTest, TlsClusterNamesTlsPorts) {
  ASSERT_OK_AND_ASSIGN(const std::string dir, orderhold::testing::MakeTempDir("cluster-slots"));
  ASSERT_OK_AND_ASSIGN(const TlsCerts certs, TlsCerts::Create(dir));
  RedisServerOptions options;
  options.tls = orderhold::testing::RedisTlsOptions{.cert_file = certs.server_cert(),
                                                    .key_file = certs.server_key(),
                                                    .ca_cert_file = certs.ca_cert()};
  options.extra_config = "tls-cluster yes";
  absl::StatusOr<std::unique_ptr<RedisServer>> node = StartClusterNode(options);
  redis::RedisTlsOptions client_tls;
  client_tls.ca_file = certs.ca_cert();
  absl::StatusOr<std::shared_ptr<const redis::TlsContext>> tls =
      redis::TlsContext::Create(client_tls);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);  // both have read the files
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(tls.ok()) << tls.status();
  const redis::HostPort plain{"127.0.0.1", (*node)->port()};
  const redis::HostPort secure{"127.0.0.1", (*node)->tls_port()};

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<redis::RedisConnection> plain_connection,
                       redis::RedisConnection::Connect(plain, nullptr, In(absl::Seconds(5))));
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply shards_reply,
                       Ask(*plain_connection, {"CLUSTER", "SHARDS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap for_tls,
                       redis::ParseClusterShards(shards_reply, "127.0.0.1", true));
  EXPECT_THAT(for_tls.Primaries(), ElementsAre(secure));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap for_plain,
                       redis::ParseClusterShards(shards_reply, "127.0.0.1", false));
  EXPECT_THAT(for_plain.Primaries(), ElementsAre(plain));

  ASSERT_OK_AND_ASSIGN(const redis::RedisReply plain_slots,
                       Ask(*plain_connection, {"CLUSTER", "SLOTS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap plain_map,
                       redis::ParseClusterSlots(plain_slots, "127.0.0.1"));
  EXPECT_TRUE(plain_map == for_plain);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<redis::RedisConnection> tls_connection,
                       redis::RedisConnection::Connect(secure, tls->get(), In(absl::Seconds(5))));
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply tls_slots,
                       Ask(*tls_connection, {"CLUSTER", "SLOTS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap tls_map,
                       redis::ParseClusterSlots(tls_slots, "127.0.0.1"));
  EXPECT_TRUE(tls_map == for_tls);
  ASSERT_OK_AND_ASSIGN(const redis::RedisReply tls_shards,
                       Ask(*tls_connection, {"CLUSTER", "SHARDS"}));
  ASSERT_OK_AND_ASSIGN(const redis::SlotMap tls_shards_map,
                       redis::ParseClusterShards(tls_shards, "127.0.0.1", true));
  EXPECT_TRUE(tls_shards_map == for_tls);
}

}  // namespace
}  // namespace orderhold::store
