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

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/redis/redis_caller.h"
#include "server/store/event_log.h"
#include "server/store/hold_store.h"
#include "server/store/keys.h"
#include "server/store/partition_store.h"

namespace orderhold::store {

// Redis Cluster's scope protocol (server/README.md "Scope totals"; lua/prelude/ "The scope
// protocol across slots"): a scoped hold's entry in its scope's index is a lease taken in the
// scope's slot before the hold is placed in the user's, and settled after.
struct ScopeProtocolOptions {
  // How long after its take a place or extend step may still land (on the user node's clock): a
  // later one is refused (UNAVAILABLE: retry). Covers a slow round trip and its WAIT.
  absl::Duration window = absl::Seconds(60);
  // The clock margin between nodes (--scope_clock_margin): an entry's lease ends this long after
  // the hold it stands for, as the user's node dates it, so a scope node's clock that runs ahead
  // by up to this never ends an entry before its hold. Reported times take it off again.
  absl::Duration margin = absl::Seconds(2);
  // The deadline of a settle or drop sent after the caller was answered.
  absl::Duration settle_timeout = absl::Seconds(5);
  // At most this many settles of one scope in one scope_settle.lua call (>= 1). Settles of a
  // scope wait in a queue while one call for that scope is in flight, then go together.
  int max_settle_batch = 64;
  // Tests of crash points only (null in production): called on the Redis I/O thread after each
  // step answered OK, with the step's name: "take" (before the place is sent), "place" (before
  // the settle is sent and the caller answered) and "end" (an end's script answered, before its
  // drop is sent). The fault tests make it kill or stop the process there.
  std::function<void(absl::string_view step)> after_step;
  // Called (on a Redis I/O thread or the reaper's) each time a step's write ran but its WAIT
  // answered fewer replicas than --redis_wait_replicas in time (redis::IsNotReplicated), with the
  // step: "take", "place", "extend" or "drop" (an end's, or the sweep's from the journal). The
  // app counts them in orderhold_scope_wait_timeouts_total{step}. May be null.
  std::function<void(absl::string_view step)> wait_timed_out;
};

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
  // `protocol`: keep the scope index on a Redis Cluster, across slots, by the scope protocol
  // (scope_index must then be false): a scoped PlaceHold takes its entry (scope_take.lua), places
  // the hold with the take's stamp and settles the entry after answering (scope_settle.lua); an
  // ExtendHold of a scoped hold likewise; Pay, CancelHold and ReleaseHolds drop the entries of the
  // holds they end before answering; the reaper's ScopeSweep repairs what a crash or a lost step
  // leaves. Each step is sent after the previous one's answer, which with WAIT
  // (wait_replicas > 0) means replicated.
  // INVALID_ARGUMENT for a bad key_prefix or outcome policy, a null caller, both kinds of index,
  // or a protocol window under 1 s or a negative margin.
  static absl::StatusOr<std::unique_ptr<RedisHoldStore>> Create(
      std::string key_prefix, OutcomePolicy outcomes, std::unique_ptr<redis::RedisCaller> client,
      std::unique_ptr<redis::RedisCaller> background, bool scope_index = true,
      std::optional<ScopeProtocolOptions> protocol = std::nullopt);

  // HoldStore.
  void PlaceHold(PlaceHoldArgs args, CallOptions options, Callback<PlaceHoldResult> done) override;
  void EndHold(std::string user_id, std::string order_id, HoldOutcome outcome,
               std::string payment_reference, CallOptions options,
               Callback<EndHoldResult> done) override;
  using HoldStore::EndHold;
  using HoldStore::ListHolds;
  void ListHolds(ListHoldsArgs args, CallOptions options, Callback<ListHoldsResult> done) override;
  void ExtendHold(ExtendHoldArgs args, CallOptions options,
                  Callback<ExtendHoldResult> done) override;
  void GetHold(std::string user_id, std::string order_id, CallOptions options,
               Callback<GetHoldResult> done) override;
  void ReleaseHolds(std::string user_id, std::string scope, CallOptions options,
                    Callback<ReleaseHoldsResult> done) override;
  bool keeps_scope_index() const override { return !scope_index_.empty() || protocol_.has_value(); }
  bool counts_sales() const override { return !scope_index_.empty(); }
  // scope_holds.lua on the request connections. Across slots (the protocol), the times are the
  // entries' lease ends less the clock margin: a settled entry's hold's expiry; a hold still being
  // placed, its take's bound.
  void ListScopeHolds(ListScopeHoldsArgs args, CallOptions options,
                      Callback<ListScopeHoldsResult> done) override;
  // Runtime scope rules (redis_scope_rules.cc): scope_rule.lua writes, scope_rules.lua reads, on
  // the request connections; kept where the scope index is (not across slots).
  bool keeps_scope_rules() const override { return !scope_index_.empty(); }
  void PutScopeRule(ScopeRuleRecord rule, CallOptions options,
                    Callback<ScopeRuleResult> done) override;
  void GetScopeRule(std::string scope, CallOptions options,
                    Callback<ScopeRuleResult> done) override;
  void DeleteScopeRule(std::string scope, std::string etag, CallOptions options,
                       Callback<ScopeRuleResult> done) override;
  void CloseScopeRule(std::string scope, CallOptions options,
                      Callback<ScopeRuleResult> done) override;
  void ListScopeRules(ScopeRuleCursor from, int page_size, CallOptions options,
                      Callback<ListScopeRulesResult> done) override;
  // redis_returns.cc: return_units.lua, on the request connections.
  void ReturnUnits(ReturnUnitsArgs args, CallOptions options,
                   Callback<ReturnUnitsResult> done) override;
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
  bool sweeps_scopes() const override { return protocol_.has_value(); }
  // Blocks until its pages answered (the reaper's thread).
  void ScopeAudit(int partition, ScopeAuditArgs args, CallOptions options,
                  Callback<ScopeAuditResult> done) override;
  // Blocks the calling thread until done (the reaper's; never a Redis I/O thread).
  // On the background connection: scope_pending.lua, then per old take scope_check.lua in the
  // user's slot and scope_settle.lua; then the stream's ends since the partition's mark (keys.h
  // ":sj"), each scoped PAID or CANCELLED end's entry dropped (scope_settle.lua), and the mark
  // moved. An absent mark starts a minute back. An end older than half the outcome retention is
  // skipped: its order may have been placed again since.
  void ScopeSweep(int partition, ScopeSweepArgs args, CallOptions options,
                  Callback<ScopeSweepResult> done) override;
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
  // Settles queued or sent after their caller was answered that have not answered yet (the scope
  // protocol; 0 without it). Counted before the caller is answered, so a caller that sees 0 after
  // its answer knows its own settle is done. Tests wait on it to read settled entries.
  int settles_in_flight() const { return settles_->load(); }
  // scope_settle.lua calls made for settles of the request path (not drops, not the sweep's), and
  // the settles they carried: their ratio is the mean batch. Thread-safe.
  int64_t settle_calls() const { return settle_calls_.load(); }
  int64_t settles_sent() const { return settles_sent_.load(); }

  ~RedisHoldStore() override;

 private:
  RedisHoldStore(KeySchema keys, OutcomePolicy outcomes, std::unique_ptr<redis::RedisCaller> client,
                 std::unique_ptr<redis::RedisCaller> background, bool scope_index,
                 std::optional<ScopeProtocolOptions> protocol);

  // A hold's entry in its scope's index (lua/prelude/ scope_member).
  struct ScopeEntry {
    std::string scope;
    std::string user_id;
    std::string order_id;
    int64_t quantity = 1;
    std::string Member() const;
  };
  // ExtendHold's step in the user's slot: whether extend_hold.lua asked for a take first (-4),
  // else its result.
  struct ExtendStep {
    bool needs_take = false;
    ExtendHoldResult result;
  };

  // The single-slot scripts (redis_hold_store.cc), with `take` (place_hold.lua's and
  // extend_hold.lua's ARGV take: "" outside the protocol). A stale take (-3) or one needed (-4)
  // answers UNAVAILABLE (retry), but ExtendStep::needs_take.
  void PlaceInUserSlot(const PlaceHoldArgs& args, const CallOptions& options,
                       const std::string& take, Callback<PlaceHoldResult> done);
  void ExtendInUserSlot(const ExtendHoldArgs& args, const CallOptions& options,
                        const std::string& take, Callback<ExtendStep> done);
  // The protocol (redis_scope_protocol.cc).
  void PlaceAcrossSlots(PlaceHoldArgs args, CallOptions options, Callback<PlaceHoldResult> done);
  // scope_rule.lua's `op` ("put", "delete", "close") on `scope`'s rule (redis_scope_rules.cc),
  // `body` and `classes` its A.rule and A.classes.
  void WriteScopeRule(std::string scope, const char* op, std::string etag, std::string body,
                      std::string classes, const CallOptions& options,
                      Callback<ScopeRuleResult> done);
  // ListScopeRules' calls, one partition each, into `page` until it has page_size rules.
  void ListScopeRulesFrom(ScopeRuleCursor from, int page_size, CallOptions options,
                          std::shared_ptr<ListScopeRulesResult> page,
                          Callback<ListScopeRulesResult> done);
  void ExtendAcrossSlots(ExtendHoldArgs args, CallOptions options, Callback<ExtendHoldResult> done);
  // scope_take.lua for `entry`: the take's reply, parsed.
  struct Take {
    bool taken = false;
    int64_t now_ms = 0, stamp = 0, holds = 0, units = 0, first_ms = -1;
    int violations = 0;
  };
  void TakeStep(const ScopeEntry& entry, absl::Duration ttl, LevelLimits totals, bool extend,
                const CallOptions& options, Callback<Take> done);
  // One settle of scope_settle.lua: `stamp` 0 = an end's drop; `expire_ms` -1 = no live hold.
  struct Settle {
    ScopeEntry entry;
    int64_t stamp = 0;
    int64_t expire_ms = -1;
  };
  // scope_settle.lua for `settles`, all of one scope (settles[0]'s), in one call; `writes`: WAIT
  // after it (--redis_wait_replicas). Yields whether each acted.
  void SettleBatch(std::vector<Settle> settles, redis::RedisCaller& caller, absl::Time deadline,
                   bool writes, Callback<std::vector<bool>> done);
  // SettleBatch for one settle, with WAIT. Yields whether it acted.
  void SettleStep(const ScopeEntry& entry, int64_t stamp, int64_t expire_ms,
                  redis::RedisCaller& caller, absl::Time deadline, Callback<bool> done);
  // Settles: the settle of a place or extend, after its caller is answered. Sent at once when no
  // call for its scope is in flight, else queued and sent with the others queued for that scope
  // when the call in flight answers (at most max_settle_batch a call). Without WAIT: a settle
  // lost in a failover leaves the take's pending record and its longer lease, which the sweep
  // settles again (server/README.md "Scope totals"). Counted in settles_in_flight().
  void QueueSettle(Settle settle);
  void SendSettles(const std::string& scope, std::vector<Settle> batch);
  // Drops the entries of the scoped holds among `ended` (their details name a scope), all at
  // once, then calls `then` (whatever each drop answered: the sweep repairs a lost one).
  void DropEnded(const std::string& user_id, const std::vector<StoredHold>& ended,
                 absl::AnyInvocable<void()> then);
  // ScopeSweep's first half (blocking, the reaper's thread): the partition's takes older than
  // args.pending_age (scope_pending.lua; *total: all its pending takes, *oldest: the oldest one's
  // age), and for one of them the user slot's answer and fence (scope_check.lua) then its settle:
  // true when its hold was live, false when fenced and dropped, NOT_FOUND when a newer take owns
  // the entry.
  struct OldTake {
    ScopeEntry entry;
    int64_t stamp = 0;
    bool audit = false;  // handed over by the audit (scope_audit.lua), not left by a take
  };
  static bool OldTakeOf(absl::string_view field, absl::string_view record, OldTake* out);
  absl::StatusOr<std::vector<OldTake>> OldTakes(int partition, const ScopeSweepArgs& args,
                                                const CallOptions& options, int64_t* total,
                                                absl::Duration* oldest);
  absl::StatusOr<bool> SettleOldTake(const OldTake& take, const CallOptions& options);
  static absl::StatusOr<std::vector<ScopeEntry>> EndsToDrop(const redis::RedisReply& events,
                                                            int64_t oldest_ms, std::string* last);
  // ScopeSweep's second half: the ends of `partition`'s stream since its mark, their entries
  // dropped, the mark moved; sets *more when a full page was read. Blocks (the reaper's thread).
  absl::StatusOr<int> SweepJournal(int partition, const ScopeSweepArgs& args,
                                   const CallOptions& options, bool* more);
  // A take's ARGV for place_hold.lua / extend_hold.lua: "<stamp>:<take ms>:<window ms>".
  std::string TakeArg(const Take& take) const;
  // Calls protocol_->wait_timed_out(step) when `status` says WAIT fell short.
  void NoteStepError(absl::string_view step, const absl::Status& status) const;

  const KeySchema keys_;
  const std::string retention_ms_;  // outcome retention, ms, as a decimal string
  const std::string trim_keep_;     // what trim_events.lua keeps of a stream: 9/10 of its bound
  const std::string scope_index_;   // the scope index's key start: "<prefix>:{", or "" for none
  // The store's constants as the scripts' `store` argument (store_of in lua/prelude/):
  // "<retention ms>:<max outcome records per user>:<stream length bound>:<stream byte bound>:<max
  // hold lifetime ms>:<default ttl ms>:<scope_index_>".
  const std::string store_arg_;
  const std::optional<ScopeProtocolOptions> protocol_;  // Redis Cluster's scope protocol, if kept
  // settles_in_flight(), shared with the settles' callbacks.
  std::shared_ptr<std::atomic<int>> settles_ = std::make_shared<std::atomic<int>>(0);
  std::atomic<int64_t> settle_calls_{0};
  std::atomic<int64_t> settles_sent_{0};
  // QueueSettle's queues, by scope: present while a call for the scope is in flight. Declared
  // before the callers, so a settle answering while ~RedisClient runs finds them.
  absl::Mutex settle_mu_;
  absl::flat_hash_map<std::string, std::vector<Settle>> settle_queues_ ABSL_GUARDED_BY(settle_mu_);
  bool closing_ ABSL_GUARDED_BY(settle_mu_) = false;  // ~RedisHoldStore began: send no more
  std::unique_ptr<redis::RedisCaller> client_;        // requests
  std::unique_ptr<redis::RedisCaller> background_;  // the reaper's calls: one connection of its own
};

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_REDIS_HOLD_STORE_H_
