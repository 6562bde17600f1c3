// RedisHoldStore: the production HoldStore, PartitionStore and HoldEventLog, on Redis >= 7.0 (one
// primary, found directly or by Sentinel, or a Redis Cluster: every script's keys share one hash
// tag, see keys.h). Every operation is one call of a script in server/store/lua/ (FCALL of its
// function, or EVALSHA: redis_client.h "Scripts"), sent through a redis::RedisCaller the app built
// (a pipelining RedisClient, or a RedisClusterClient in cluster mode: one such pool per primary;
// see ConnectRedisStore in server/redis_store.h); "now" is Redis server TIME unless
// CallOptions::now is set. The store builds no client.
//
// Two callers: requests (PlaceHold, EndHold, ListHolds, ExtendHold, GetHold, ReleaseHolds, the
// event log's reads and acks, Ping) go
// through the pool of `client.connections`; the reaper's calls (Reap, Heartbeat, ReleaseLease,
// Unregister, TrimEvents) through a second caller of one connection. So a request is never
// written in the same pipelined batch as a reaper script, and never waits for one that happened
// to be queued with it. A separate connection rather than a priority queue on the shared ones:
// a priority queue still lets a reaper script into a batch that requests then wait behind, and
// Redis serves its clients' commands interleaved, so the reaper's own connection, with its calls
// kept few and small by the reaper (server/reaper/tick_pacer.h), is what bounds the wait.
//
// Thread-safe. Errors: see hold_store.h (UNAVAILABLE, DEADLINE_EXCEEDED); INTERNAL if Redis
// answers a shape the scripts never return (a bug, or a foreign key of another type).
// The class is one, its code in a file per interface over one script-call helper
// (redis_script_call.h): redis_hold_store.cc (HoldStore, Ping), redis_partition_store.cc
// (PartitionStore) and redis_event_log.cc (HoldEventLog).
#ifndef ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_
#define ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/redis/redis_caller.h"
#include "server/store/event_log.h"
#include "server/store/hold_store.h"
#include "server/store/keys.h"
#include "server/store/partition_store.h"

namespace orderhold::store {

class RedisHoldStore final : public HoldStore, public PartitionStore, public HoldEventLog {
 public:
  // The Lua bodies both callers must load, by index (redis::RedisClientOptions::scripts): the
  // store's commands name a script by its index in this list.
  static std::vector<std::string> Scripts();
  // The same scripts as one Redis Functions library (redis::RedisClientOptions::function_library:
  // the code FUNCTION LOAD takes, "#!lua name=orderhold_<hash>" first) and each script's function
  // name in it, in Scripts()' order (redis::RedisClientOptions::functions). Both name the code's
  // hash, so releases with different scripts never call each other's.
  static std::string FunctionLibrary();
  static std::vector<std::string> Functions();
  // Max commands per round trip advised for the background caller: the reaper keeps only a few
  // calls in flight, so a batch never holds more than a handful of its scripts, besides a group
  // of peeks (16 by default, a few us of Redis time each: reaper.h), which goes in one.
  static constexpr int kBackgroundMaxPipeline = 16;

  // A store under `key_prefix` (see keys.h: non-empty, no `{`, `}`, whitespace or control
  // characters) keeping `outcomes` (--outcome_retention >= 1 ms, --max_outcomes_per_user >= 1;
  // the lifetime and default ttl of the holds the layout migration moves, >= 1 ms each),
  // sending requests through `client` and the reaper's calls through `background` (one
  // connection of its own; see the file comment). Both callers must have been built with
  // Scripts(). `scope_index`: keep the scope index (keys.h; lua/prelude/ "The scope index"),
  // which only a Redis that lets a script reach keys of other slots allows: true for a standalone
  // or Sentinel-managed primary, false for a Redis Cluster (its scripts would be refused).
  // INVALID_ARGUMENT for a bad key_prefix or outcome policy, or a null caller.
  static absl::StatusOr<std::unique_ptr<RedisHoldStore>> Create(
      std::string key_prefix, OutcomePolicy outcomes, std::unique_ptr<redis::RedisCaller> client,
      std::unique_ptr<redis::RedisCaller> background, bool scope_index = true);

  // HoldStore.
  void PlaceHold(PlaceHoldArgs args, CallOptions options, Callback<PlaceHoldResult> done) override;
  void EndHold(std::string user_id, std::string order_id, HoldOutcome outcome, CallOptions options,
               Callback<EndHoldResult> done) override;
  using HoldStore::ListHolds;
  void ListHolds(ListHoldsArgs args, CallOptions options, Callback<ListHoldsResult> done) override;
  void ExtendHold(ExtendHoldArgs args, CallOptions options,
                  Callback<ExtendHoldResult> done) override;
  void GetHold(std::string user_id, std::string order_id, CallOptions options,
               Callback<GetHoldResult> done) override;
  void ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                    Callback<ReleaseHoldsResult> done) override;
  bool keeps_scope_index() const override { return !scope_index_.empty(); }
  // scope_holds.lua on the request connections.
  void ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                      Callback<ListScopeHoldsResult> done) override;
  void Reap(int partition, ReapArgs args, CallOptions options, Callback<ReapResult> done) override;
  // On the background connection, as Reap: migrate.lua (lua/migrations/ say what moves).
  void MigrateStep(int partition, MigrateArgs args, CallOptions options,
                   Callback<MigrateResult> done) override;
  void Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                 Callback<std::vector<std::string>> done) override;
  void ReleaseLease(int partition, std::string replica_id, CallOptions options,
                    Callback<bool> done) override;
  void Unregister(std::string replica_id, CallOptions options, Callback<bool> done) override;
  int partition_count() const override { return KeySchema::kPartitionCount; }
  void Ping(CallOptions options, Callback<absl::Time> done) override;

  // HoldEventLog.
  int event_partition_count() const override { return KeySchema::kPartitionCount; }
  void EnsureGroup(int partition, std::string group, GroupStart start, CallOptions options,
                   Callback<bool> done) override;
  void ReadEvents(int partition, ReadEventsArgs args, CallOptions options,
                  Callback<EventBatch> done) override;
  // On the background connection, like the reaper's calls: the sweep is background work.
  void CheckGroups(int partition, std::vector<std::string> groups,
                   std::optional<absl::Duration> claim_idle, CallOptions options,
                   Callback<std::vector<GroupWork>> done) override;
  void ClaimGroup(std::string group, std::string caller, int max_groups, CallOptions options,
                  Callback<GroupClaim> done) override;
  void GroupOwner(std::string group, CallOptions options,
                  Callback<std::optional<std::string>> done) override;
  void DropGroup(std::string group, std::vector<std::string> owners, CallOptions options,
                 Callback<GroupDrop> done) override;
  void DestroyGroup(int partition, std::string group, CallOptions options,
                    Callback<bool> done) override;
  void AckEvents(int partition, std::string group, std::vector<std::string> stream_ids,
                 CallOptions options, Callback<int64_t> done) override;
  using HoldEventLog::TrimEvents;
  void TrimEvents(int partition, TrimEventsArgs args, CallOptions options,
                  Callback<TrimEventsResult> done) override;

  const KeySchema& keys() const { return keys_; }

 private:
  RedisHoldStore(KeySchema keys, OutcomePolicy outcomes, std::unique_ptr<redis::RedisCaller> client,
                 std::unique_ptr<redis::RedisCaller> background, bool scope_index);

  const KeySchema keys_;
  const std::string retention_ms_;  // outcome retention, ms, as a decimal string
  const std::string trim_keep_;     // what trim_events.lua keeps of a stream: 9/10 of its bound
  const std::string scope_index_;   // the scope index's key start: "<prefix>:{", or "" for none
  // The store's constants as the scripts' `store` argument (store_of in lua/prelude/):
  // "<retention ms>:<max outcome records per user>:<stream length bound>:<stream byte bound>:<max
  // hold lifetime ms>:<default ttl ms>:<scope_index_>".
  const std::string store_arg_;
  std::unique_ptr<redis::RedisCaller> client_;      // requests
  std::unique_ptr<redis::RedisCaller> background_;  // the reaper's calls: one connection of its own
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_
