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
using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::InRange;
using internal::Millis;
using internal::NowArg;
using internal::OutOfRange;
using internal::Parsed;
using internal::ParsedAs;
using internal::Plain;
using internal::StrOf;
using internal::ToInt;

void RedisHoldStore::Reap(int partition, ReapArgs args, CallOptions options,
                          Callback<ReapResult> done) {
  if (!InRange(partition) || args.max_users < 0) {
    std::move(done)(absl::InvalidArgumentError("reap: partition or max_users out of range"));
    return;
  }
  const std::string standby =
      args.standby_after.has_value() ? absl::StrCat(Millis(*args.standby_after)) : std::string();
  redis::RedisCommand command =
      Eval({keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
            keys_.LeaseKey(partition)},
           lua::ReapArgv<Arg>{.prefix = keys_.PartitionPrefix(partition),
                              .budget = int64_t{args.max_users},
                              .now = NowArg(options),
                              .replica = args.owner,
                              .lease = std::max<int64_t>(1, Millis(args.lease)),
                              .standby = standby,
                              .store = store_arg_});
  command.writes = true;
  // A paced call alone in flight (tick_pacer.h) runs on the reaper's thread, without waking the
  // pool's I/O thread (see redis_client.h); a backlog drain's calls stay pipelined.
  command.inline_ok = args.alone;
  background_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ReapReply>(std::move(done),
                               [](const lua::ReapReply& r) -> absl::StatusOr<ReapResult> {
                                 ReapResult result;
                                 result.now = FromMillis(r.now);
                                 result.more = r.more == 1;
                                 result.not_owner = r.more == -1;
                                 if (r.oldest_due >= 0)
                                   result.oldest_due = FromMillis(r.oldest_due);
                                 if (r.next_due >= 0) result.next_due = FromMillis(r.next_due);
                                 result.reaped_expire_times.reserve(r.expires.size());
                                 for (const redis::RedisReply& element : r.expires) {
                                   int64_t expire = 0;
                                   if (!ToInt(element, &expire)) return BadReply("reap.lua");
                                   result.reaped_expire_times.push_back(FromMillis(expire));
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
  redis::RedisCommand command =
      Eval({keys_.BucketIndexKeyPieces(partition), keys_.EventsKeyPieces(partition),
            keys_.LeaseKey(partition)},
           lua::MigrateArgv<Arg>{.prefix = keys_.PartitionPrefix(partition),
                                 .replica = args.owner,
                                 .budget = int64_t{args.max_users},
                                 .cursor = args.cursor,
                                 .store = store_arg_});
  command.writes = true;
  background_->Submit(std::move(command), options.deadline,
                      ParsedAs<lua::MigrateReply>(std::move(done), [](const lua::MigrateReply& r) {
                        MigrateResult result;
                        result.users_moved = r.moved;
                        result.not_owner = r.left < 0;
                        result.users_left = std::max<int64_t>(0, r.left);
                        result.cursor = std::string(r.cursor);
                        return absl::StatusOr<MigrateResult>(std::move(result));
                      }));
}

void RedisHoldStore::Heartbeat(std::string replica_id, absl::Duration ttl, CallOptions options,
                               Callback<std::vector<std::string>> done) {
  redis::RedisCommand command = Eval(
      {keys_.ReplicasKey()}, lua::HeartbeatArgv<Arg>{.replica = replica_id,
                                                     .alive = std::max<int64_t>(1, Millis(ttl)),
                                                     .now = NowArg(options)});
  command.writes = true;
  command.inline_ok = true;  // one call per reaper tick
  background_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::HeartbeatReply>(
          std::move(done),
          [](const lua::HeartbeatReply& r) -> absl::StatusOr<std::vector<std::string>> {
            std::vector<std::string> ids;
            for (const redis::RedisReply& element : r.ids) {
              const std::optional<absl::string_view> id = StrOf(element);
              if (!id) return BadReply("heartbeat.lua");
              ids.emplace_back(*id);
            }
            return ids;
          }));
}

void RedisHoldStore::ReleaseLease(int partition, std::string replica_id, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("release_lease"));
  redis::RedisCommand command =
      Eval({keys_.LeaseKey(partition)}, lua::ReleaseLeaseArgv<Arg>{.replica = replica_id});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ReleaseLeaseReply>(std::move(done), [](const lua::ReleaseLeaseReply& r) {
        return absl::StatusOr<bool>(r.released > 0);
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
