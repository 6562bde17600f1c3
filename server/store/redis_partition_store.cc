// RedisHoldStore's PartitionStore: the reaper's calls (reap, the layout migration's steps, the
// replica registry and the partition leases), on the background caller.
#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/store/redis_hold_store.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

// The shared script-call helpers (redis_script_call.h).
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::InRange;
using internal::IntArray;
using internal::Ints;
using internal::Millis;
using internal::NowArg;
using internal::OutOfRange;
using internal::Parsed;
using internal::Plain;
using internal::Script;
using internal::ToInt;

void RedisHoldStore::Reap(int partition, ReapArgs args, CallOptions options,
                          Callback<ReapResult> done) {
  if (!InRange(partition) || args.max_users < 0) {
    std::move(done)(absl::InvalidArgumentError("reap: partition or max_users out of range"));
    return;
  }
  redis::RedisCommand command = Eval<Script::kReap>(
      {keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
       keys_.LeaseKey(partition)},
      {keys_.PartitionPrefix(partition), absl::StrCat(args.max_users), NowArg(options),
       retention_ms_, max_outcomes_, args.owner,
       absl::StrCat(std::max<int64_t>(1, Millis(args.lease))),
       args.standby_after.has_value() ? absl::StrCat(Millis(*args.standby_after)) : std::string(),
       max_stream_len_, scope_index_});
  command.writes = true;
  // A paced call alone in flight (tick_pacer.h) runs on the reaper's thread, without waking the
  // pool's I/O thread (see redis_client.h); a backlog drain's calls stay pipelined.
  command.inline_ok = args.alone;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<ReapResult> {
        Ints v;
        if (!IntArray(reply, 4, &v)) return BadReply("reap.lua");
        ReapResult result;
        result.now = FromMillis(v[0]);
        result.more = v[1] == 1;
        result.not_owner = v[1] == -1;
        if (v[2] >= 0) result.oldest_due = FromMillis(v[2]);
        if (v[3] >= 0) result.next_due = FromMillis(v[3]);
        result.reaped_expire_times.reserve(v.size() - 4);
        for (size_t i = 4; i < v.size(); ++i) {
          result.reaped_expire_times.push_back(FromMillis(v[i]));
        }
        return result;
      }));
}

void RedisHoldStore::MigrateStep(int partition, MigrateArgs args, CallOptions options,
                                 Callback<MigrateResult> done) {
  if (!InRange(partition) || args.max_users < 1) {
    std::move(done)(absl::InvalidArgumentError("migrate: partition or max_users out of range"));
    return;
  }
  redis::RedisCommand command = Eval<Script::kMigrate>(
      {keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
       keys_.LeaseKey(partition)},
      {keys_.PartitionPrefix(partition), args.owner, int64_t{args.max_users}, args.cursor});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<MigrateResult> {
        int64_t left = 0;
        int64_t moved = 0;
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 3 ||
            !ToInt(reply.elements[0], &left) ||
            reply.elements[1].type != redis::RedisReply::Type::kString ||
            !ToInt(reply.elements[2], &moved)) {
          return BadReply("migrate.lua");
        }
        MigrateResult result;
        result.users_moved = moved;
        result.not_owner = left < 0;
        result.users_left = std::max<int64_t>(0, left);
        result.cursor = reply.elements[1].str;
        return result;
      }));
}

void RedisHoldStore::Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                               Callback<std::vector<std::string>> done) {
  redis::RedisCommand command = Eval<Script::kHeartbeat>(
      {keys_.ReplicasKey()},
      {replica_id, absl::StrCat(std::max<int64_t>(1, Millis(ttl))), NowArg(options)});
  command.writes = true;
  command.inline_ok = true;  // one call per reaper tick
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::vector<std::string>> {
               if (reply.type != redis::RedisReply::Type::kArray || reply.elements.empty()) {
                 return BadReply("heartbeat.lua");
               }
               std::vector<std::string> ids;
               for (size_t i = 1; i < reply.elements.size(); ++i) {
                 if (reply.elements[i].type != redis::RedisReply::Type::kString) {
                   return BadReply("heartbeat.lua");
                 }
                 ids.push_back(reply.elements[i].str);
               }
               return ids;
             }));
}

void RedisHoldStore::ReleaseLease(int partition, std::string replica_id, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("release_lease"));
  redis::RedisCommand command =
      Eval<Script::kReleaseLease>({keys_.LeaseKey(partition)}, {replica_id});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("release_lease.lua");
        return n > 0;
      }));
}

void RedisHoldStore::Unregister(std::string replica_id, CallOptions options, Callback<bool> done) {
  redis::RedisCommand command = Plain({"ZREM", keys_.ReplicasKey(), replica_id});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("ZREM");
        return n > 0;
      }));
}

}  // namespace orderhold::store
