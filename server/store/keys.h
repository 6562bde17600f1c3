// Redis key naming, in one place.
//
//   <prefix>:{<partition>}:h:<bucket>    the live holds of the partition's users in `bucket`
//                                        (hash: user_id -> the user's holds, packed:
//                                        lua/prelude/ pack_holds, with each hold's details and
//                                        life record)
//   <prefix>:{<partition>}:x:<user_id>   the user's outcome records (hash: order_id ->
//                                        "<outcome>:<end ms>:<expire ms>"), see lua/prelude/,
//                                        with its ended holds' details (fields "\x01" + order_id:
//                                        only holds with a scope, a quantity or labels) and life
//                                        records (fields "\x02" + order_id; formats in
//                                        hold_details_codec.h). Created at the user's first end.
//   <prefix>:{<partition>}:xt:<user_id>  the user's ended orders (sorted set: order_id -> end ms)
//   <prefix>:{<partition>}:hd:<bucket>   the due index of the partition's users in `bucket`
//                                        (sorted set: user_id -> the user's earliest expire ms)
//   <prefix>:{<partition>}:bdue          the partition's bucket index (sorted set: bucket ->
//                                        the earliest score in its hd:<bucket>, or earlier:
//                                        see lua/prelude/ set_due)
//   <prefix>:{<partition>}:events        the partition's hold event stream (Redis Stream)
//   <prefix>:{<partition>}:lease         the partition's reaper lease (string: replica id, PX
//                                        expiry)
//   <prefix>:{<partition>}:nudge         not a key: the partition's sharded pub/sub channel
//                                        (SPUBLISH/SSUBSCRIBE), an empty message published by
//                                        each script call that appended to the partition's
//                                        stream (event_nudges.h). The scripts derive it from the
//                                        events key ("events" -> "nudge", lua/prelude/
//                                        end_hold, which says why not KEYS). The hash tag puts it
//                                        in the partition's slot, which Redis Cluster requires of
//                                        a channel published in a script. ACL: &<prefix>:*
//   <prefix>:{groups}:owners             the consumer group registry (hash: group -> owner,
//                                        the principal that created it; "" for an anonymous one)
//   <prefix>:{groups}:counts             groups per owner (hash: owner -> count), beside it in
//                                        one slot: lua/claim_group.lua
//   <prefix>:{<partition>}:s:<scope>     the scope index: every
//                                        live hold of the scope across users (sorted set:
//                                        "<quantity>:<user_id>\0<order_id>" -> expire ms), in
//                                        the scope's partition (PartitionOf(scope), as a user's);
//                                        lua/prelude/ "The scope index"
//   <prefix>:{<partition>}:su:<scope>    beside it: the sum of its entries' quantities (string)
//   <prefix>:{<partition>}:ss:<scope>    beside it: the units sold, the sum of the quantities of
//                                        its holds ended PAID (string; no expiry; not on a Cluster)
//   <prefix>:{<partition>}:sr:<scope>    beside them: the scope's runtime rule (string, packed:
//                                        lua/prelude/ "A scope's runtime rule"; expires at its
//                                        expire_time; not on a Cluster)
//   <prefix>:{<partition>}:sr            the partition's scopes with a rule (sorted set, score
//                                        0: ZRANGE BYLEX pages), lua/scope_rule.lua
//   <prefix>:{<partition>}:srv           the partition's last rule version (string: INCRBY), the
//                                        rules' etags
//   <prefix>:{<partition>}:pb:<user_id>\0<scope>  in the user's partition: what the user bought
//                                        in the scope under its runtime rule ("<rule id>:<units>:
//                                        <holds>"; expires with the rule: lua/prelude/
//                                        purchases_key)
//   <prefix>:{<partition>}:sp            Redis Cluster only: the partition's pending scope takes
//                                        (hash: "n" -> the stamp counter; "<scope>\0<member>" ->
//                                        "<stamp>:<take ms>"), lua/scope_take.lua; the scope
//                                        index keys s: and su: are kept there too
//   <prefix>:{<partition>}:spt           beside it: the pending takes by age (sorted set:
//                                        "<scope>\0<member>" -> take ms)
//   <prefix>:{<partition>}:sx            Redis Cluster only: the partition's scopes (sorted set:
//                                        scope -> its latest lease end, ms), lua/scope_take.lua;
//                                        the audit after a failover walks it (scope_audit.lua)
//   <prefix>:{<partition>}:sj            Redis Cluster only: the last event of the partition's
//                                        stream whose end the scope sweep has dropped from its
//                                        scope's index (string: a stream id)
//   <prefix>:replicas                    live reaper replicas (sorted set: id -> alive until ms);
//                                        not hash-tagged: it is only ever touched alone
// Keys of the shapes earlier releases wrote are known only to their migration
// (lua/migrations/v1_layout.lua).
//
// partition = FNV-1a-32(user_id) mod kPartitionCount, written in decimal inside a Redis Cluster
// hash tag (https://redis.io/docs/reference/cluster-spec/#hash-tags); "<partition>" above stands
// for that number, e.g. "orderhold:{17}:bdue". A user's key and its partition's indexes share the
// tag, hence the hash slot, so every script touches one slot and Redis Cluster needs no
// data-model change. The reaper visits kPartitionCount indexes per tick, never all users.
//
// bucket = (FNV-1a-32(user_id) / kPartitionCount) mod kDueBucketCount (the hash bits the
// partition does not use). Why buckets: one sorted set per partition holding every user with a
// hold is a skiplist, ~110 B per user; kDueBucketCount small ones per partition stay listpacks
// (zset-max-listpack-entries, 128 by default: up to ~2M users with holds, with ids of at most
// zset-max-listpack-value bytes, 64 by default; deploy/README.md), ~20 B per user, and the holds
// buckets likewise (hash-max-listpack-entries). That is the Redis memory-optimization guide's
// idea (https://redis.io/docs/management/optimization/memory-optimization/, "Use hashes when
// possible": many small aggregates instead of one big one), measured in tests/bench/README.md
// ("Memory per live hold").
//
// Ids are stored verbatim: `{`, `}`, `:`, `*` and spaces in a user_id cannot change the slot (the
// tag is the first `{...}` and precedes the id) nor reach another user's key (the mapping from
// user_id to key is injective: fixed prefix + tag derived from the id + ":x:" + the id itself).
// Commands are sent as binary-safe arguments and no pattern (KEYS/SCAN) is ever run on them.
//
// kPartitionCount and kDueBucketCount are part of the data model: changing them orphans data.
#ifndef ORDERHOLD_SERVER_STORE_KEYS_H_
#define ORDERHOLD_SERVER_STORE_KEYS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace orderhold::store {

class KeySchema {
 public:
  static constexpr int kPartitionCount = 64;
  // Due-index buckets per partition (see the table above). Part of the data model as well.
  static constexpr int kDueBucketCount = 256;

  // `prefix` must be validated by the caller (non-empty, no `{`, `}` or whitespace). Builds the
  // kPartitionCount partition prefixes and the kDueBucketCount bucket numbers once, so each key
  // of a call is one concatenation, or none (Pieces): each key cost ~740 instructions with its
  // prefix formatted per call (callgrind, tests/bench/README.md "Instructions per call").
  // Thread-safety: const methods may be called concurrently.
  explicit KeySchema(std::string prefix);

  // FNV-1a 32-bit of the id, mod kPartitionCount: stable across processes and versions (unlike
  // absl::Hash, which is seeded per process).
  static int PartitionOf(absl::string_view user_id);
  // The user's due-index bucket in its partition, 0 <= bucket < kDueBucketCount: the FNV-1a hash's
  // bits above the partition's, so stable across processes and versions as PartitionOf is.
  static int DueBucketOf(absl::string_view user_id);

  // A key as the three pieces it is the concatenation of: views into this schema and the
  // caller's user id, valid while both are. For writing a key straight into a command's packed
  // arguments (redis::RedisArgs::PushCat) instead of into a string of its own; Join() is the key.
  struct Pieces {
    absl::string_view partition_prefix;  // "<prefix>:{<partition>}:"
    absl::string_view kind;              // "h:", "hd:", "x:", "bdue", ...
    absl::string_view id;                // the user id, the bucket in decimal, or empty
    // The key: the three pieces concatenated.
    std::string Join() const;
  };

  // Every key of one user's scripts, with its partition and bucket: the user id is hashed once.
  // Views into this schema and `user_id` (Pieces), valid while both are.
  struct UserKeys {
    int partition = 0;
    int bucket = 0;
    Pieces holds_bucket;  // <prefix>:{<partition>}:h:<bucket>, the user's field there
    Pieces due_bucket;    // <prefix>:{<partition>}:hd:<bucket>, the user's due-index bucket
    Pieces outcomes;      // <prefix>:{<partition>}:x:<user_id>
    Pieces ended;         // <prefix>:{<partition>}:xt:<user_id>
    Pieces events;        // <prefix>:{<partition>}:events
    Pieces bucket_index;  // <prefix>:{<partition>}:bdue
  };
  UserKeys ForUser(absl::string_view user_id) const;

  // The keys above as strings (tests and tools; the store uses ForUser).
  std::string HoldsBucketKey(absl::string_view user_id) const {
    return ForUser(user_id).holds_bucket.Join();
  }
  std::string DueBucketKey(absl::string_view user_id) const {
    return ForUser(user_id).due_bucket.Join();
  }
  std::string OutcomesKey(absl::string_view user_id) const {
    return ForUser(user_id).outcomes.Join();
  }
  std::string EndedKey(absl::string_view user_id) const { return ForUser(user_id).ended.Join(); }
  // The partition's bucket index: <prefix>:{<partition>}:bdue. A partition out of range is
  // std::out_of_range, as in PartitionPrefix.
  std::string BucketIndexKey(int partition) const { return BucketIndexKeyPieces(partition).Join(); }
  Pieces BucketIndexKeyPieces(int partition) const;
  Pieces EventsKeyPieces(int partition) const;
  std::string EventsKey(int partition) const { return EventsKeyPieces(partition).Join(); }
  std::string LeaseKey(int partition) const;
  // The partition's nudge channel (see the table above): EventsKey(partition) with "events"
  // replaced by "nudge", as the scripts derive it. Subscribed to by EventNudgeSubscriber.
  std::string NudgeChannel(int partition) const;
  // The partition's reaper channel (see the table above): the bucket index key with "bdue"
  // replaced by "reaper", as the scripts derive it ("due" and "group" messages: event_nudges.h).
  std::string ReaperChannel(int partition) const;
  std::string ReplicasKey() const;
  // The scope index's keys (see the table above), in the scope's partition, and their common
  // start "<prefix>:{", which the scripts complete with the scope's partition and the scope
  // (lua/prelude/ scope_keys). Injective as a user's keys are: the kinds "s:", "su:", "ss:" differ
  // from every other kind, and the scope follows them as it is.
  std::string ScopeIndexStart() const { return absl::StrCat(prefix_, ":{"); }
  std::string ScopeLiveKey(absl::string_view scope) const {
    return absl::StrCat(PartitionPrefix(PartitionOf(scope)), "s:", scope);
  }
  std::string ScopeUnitsKey(absl::string_view scope) const {
    return absl::StrCat(PartitionPrefix(PartitionOf(scope)), "su:", scope);
  }
  // The scope's units sold ("ss:", lua/prelude/ scope_sold_key), beside its index.
  std::string ScopeSoldKey(absl::string_view scope) const {
    return absl::StrCat(PartitionPrefix(PartitionOf(scope)), "ss:", scope);
  }
  // A scope's runtime rule, and its partition's rule list and version counter (see the table
  // above; the scripts derive the rule key as the list's key + ":" + scope).
  std::string ScopeRuleKey(absl::string_view scope) const {
    return absl::StrCat(PartitionPrefix(PartitionOf(scope)), "sr:", scope);
  }
  // A user's purchases in a scope (see the table above), in the user's partition.
  std::string PurchasesKey(absl::string_view user_id, absl::string_view scope) const {
    return absl::StrCat(PartitionPrefix(PartitionOf(user_id)), "pb:", user_id,
                        absl::string_view("\0", 1), scope);
  }
  std::string ScopeRulesKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "sr");
  }
  std::string ScopeRuleVersionsKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "srv");
  }
  // Redis Cluster's scope protocol (see the table above): a partition's pending takes, and the
  // sweep's place in a partition's event stream.
  std::string ScopePendingKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "sp");
  }
  std::string ScopePendingAgesKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "spt");
  }
  std::string ScopeJournalKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "sj");
  }
  // The partition's scopes with entries, for the audit after a failover (see the table above).
  std::string ScopeSetKey(int partition) const {
    return absl::StrCat(PartitionPrefix(partition), "sx");
  }
  // The consumer group registry and its per-owner counts (see the table above).
  std::string GroupOwnersKey() const;
  std::string GroupCountsKey() const;
  // The prefix of every key of `partition`, "<prefix>:{<partition>}:":
  // OutcomesKey(id) == PartitionPrefix(PartitionOf(id)) + "x:" + id. 0 <= partition <
  // kPartitionCount (std::out_of_range otherwise: a bug, never input).
  const std::string& PartitionPrefix(int partition) const {
    return partition_prefixes_.at(static_cast<size_t>(partition));
  }

  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  std::vector<std::string> partition_prefixes_;  // [partition]
  std::vector<std::string> buckets_;             // [bucket]: the bucket in decimal
};

// Checks a --key_prefix value. INVALID_ARGUMENT naming `key_prefix` when it is empty, longer than
// 64 bytes, or has `{`, `}`, whitespace or control characters (which would break the hash tags).
// Thread-safe.
absl::Status ValidateKeyPrefix(absl::string_view prefix);

}  // namespace orderhold::store

#endif  // ORDERHOLD_SERVER_STORE_KEYS_H_
