// RedisHoldStore's HoldEventLog: the consumer groups, their registry, reads, acks and trims of the
// partitions' event streams.
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
using internal::kMaxTrimIdsPerGroup;
using internal::Millis;
using internal::OutOfRange;
using internal::Parsed;
using internal::Plain;
using internal::Script;
using internal::ToDetails;
using internal::ToInt;
using internal::ToOutcome;

void RedisHoldStore::EnsureGroup(int partition, std::string group, GroupStart start,
                                 CallOptions options, Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("ensure_group"));
  redis::RedisCommand command = Eval<Script::kEnsureGroup>(
      {keys_.EventsKeyPieces(partition)}, {group, start == GroupStart::kEarliest ? "0" : "$"});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("ensure_group.lua");
        return n == 1;
      }));
}

void RedisHoldStore::ClaimGroup(std::string group, std::string caller, int max_groups,
                                CallOptions options, Callback<GroupClaim> done) {
  const std::string owners = keys_.GroupOwnersKey();
  const std::string counts = keys_.GroupCountsKey();
  redis::RedisCommand command = Eval<Script::kClaimGroup>(
      {owners, counts}, {group, caller, absl::StrCat(std::max(1, max_groups))});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<GroupClaim> {
        int64_t code = 0;
        GroupClaim claim;
        if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() != 3 ||
            !ToInt(reply.elements[0], &code) || code < -1 || code > 1 ||
            reply.elements[1].type != redis::RedisReply::Type::kString ||
            !ToInt(reply.elements[2], &claim.owned)) {
          return BadReply("claim_group.lua");
        }
        claim.result = code == 1   ? GroupClaim::Result::kClaimed
                       : code == 0 ? GroupClaim::Result::kRegistered
                                   : GroupClaim::Result::kOverLimit;
        claim.owner = reply.elements[1].str;
        return claim;
      }));
}

void RedisHoldStore::GroupOwner(std::string group, CallOptions options,
                                Callback<std::optional<std::string>> done) {
  client_->Submit(
      Plain({"HGET", keys_.GroupOwnersKey(), group}), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::optional<std::string>> {
               if (reply.type == redis::RedisReply::Type::kNil) return std::nullopt;
               if (reply.type != redis::RedisReply::Type::kString) return BadReply("HGET");
               return reply.str;
             }));
}

void RedisHoldStore::DropGroup(std::string group, CallOptions options,
                               Callback<std::optional<std::string>> done) {
  const std::string owners = keys_.GroupOwnersKey();
  const std::string counts = keys_.GroupCountsKey();
  redis::RedisCommand command = Eval<Script::kDropGroup>({owners, counts}, {group});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done),
             [](const redis::RedisReply& reply) -> absl::StatusOr<std::optional<std::string>> {
               if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() > 1 ||
                   (reply.elements.size() == 1 &&
                    reply.elements[0].type != redis::RedisReply::Type::kString)) {
                 return BadReply("drop_group.lua");
               }
               if (reply.elements.empty()) return std::nullopt;
               return reply.elements[0].str;
             }));
}

void RedisHoldStore::DestroyGroup(int partition, std::string group, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("destroy_group"));
  redis::RedisCommand command =
      Eval<Script::kDestroyGroup>({keys_.EventsKeyPieces(partition)}, {group});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<bool> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("destroy_group.lua");
        return n == 1;
      }));
}

void RedisHoldStore::ReadEvents(int partition, ReadEventsArgs args, CallOptions options,
                                Callback<EventBatch> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("read_events"));
  std::string own_after;
  if (args.own_pending) own_after = args.own_after.empty() ? "0-0" : args.own_after;
  redis::RedisCommand command = Eval<Script::kReadEvents>(
      {keys_.EventsKeyPieces(partition)},
      {args.group, args.consumer, absl::StrCat(std::max(1, args.max_events)),
       args.claim_idle.has_value() ? absl::StrCat(Millis(*args.claim_idle)) : "", args.claim_after,
       std::move(own_after)});
  // It writes (the group's pending list), and with --redis_wait_replicas the WAIT that follows
  // also covers the events it returns, which were appended before it: an event is delivered only
  // once the replicas have it, so a failover cannot lose an end a consumer was told about and
  // then have the promoted replica end the hold again (two events for one end).
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done),
          [partition](const redis::RedisReply& reply) -> absl::StatusOr<EventBatch> {
            // {claim_next, own_next, then 8 per event}
            constexpr size_t kCursors = 2;
            constexpr size_t kFields = 8;
            if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() < kCursors ||
                (reply.elements.size() - kCursors) % kFields != 0 ||
                reply.elements[0].type != redis::RedisReply::Type::kString ||
                reply.elements[1].type != redis::RedisReply::Type::kString) {
              return BadReply("read_events.lua");
            }
            EventBatch batch;
            const auto& e = reply.elements;
            batch.claim_next = e[0].str;
            batch.own_next = e[1].str;
            for (size_t i = kCursors; i < e.size(); i += kFields) {
              StoredEvent event;
              event.partition = partition;
              int64_t count = 0, outcome = 0, expire = 0, end = 0;
              if (e[i].type != redis::RedisReply::Type::kString || !ToInt(e[i + 1], &count) ||
                  e[i + 2].type != redis::RedisReply::Type::kString ||
                  e[i + 3].type != redis::RedisReply::Type::kString || !ToInt(e[i + 4], &outcome) ||
                  !ToOutcome(outcome, &event.end.outcome) || !ToInt(e[i + 5], &expire) ||
                  !ToInt(e[i + 6], &end) || !ToDetails(e[i + 7], expire, &event.details)) {
                return BadReply("read_events.lua");
              }
              event.stream_id = e[i].str;
              event.delivery_count = static_cast<int>(count);
              event.user_id = e[i + 2].str;
              event.order_id = e[i + 3].str;
              event.end.expire_time = FromMillis(expire);
              event.end.end_time = FromMillis(end);
              batch.events.push_back(std::move(event));
            }
            return batch;
          }));
}

void RedisHoldStore::CheckGroups(int partition, std::vector<std::string> groups,
                                 std::optional<absl::Duration> claim_idle, CallOptions options,
                                 Callback<std::vector<GroupWork>> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("check_groups"));
  if (groups.empty()) return std::move(done)(std::vector<GroupWork>{});
  redis::RedisCommand command = Eval<Script::kCheckGroups>(
      {keys_.EventsKeyPieces(partition)},
      {claim_idle.has_value() ? absl::StrCat(Millis(*claim_idle)) : ""}, groups);
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done),
          [](const redis::RedisReply& reply) -> absl::StatusOr<std::vector<GroupWork>> {
            if (reply.type != redis::RedisReply::Type::kArray || reply.elements.size() % 2 != 0) {
              return BadReply("check_groups.lua");
            }
            std::vector<GroupWork> work;
            for (size_t i = 0; i < reply.elements.size(); i += 2) {
              int64_t flags = 0;
              if (reply.elements[i].type != redis::RedisReply::Type::kString ||
                  !ToInt(reply.elements[i + 1], &flags) || flags < 1 || flags > 3) {
                return BadReply("check_groups.lua");
              }
              work.push_back(GroupWork{reply.elements[i].str, (flags & 1) != 0, (flags & 2) != 0});
            }
            return work;
          }));
}

void RedisHoldStore::AckEvents(int partition, std::string group,
                               std::vector<std::string> stream_ids, CallOptions options,
                               Callback<int64_t> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("ack_events"));
  if (stream_ids.empty()) {
    std::move(done)(int64_t{0});
    return;
  }
  redis::RedisCommand command = Plain({"XACK", keys_.EventsKey(partition), group});
  command.writes = true;
  size_t bytes = 0;
  for (const std::string& id : stream_ids) bytes += id.size();
  command.args.Reserve(stream_ids.size(), bytes);
  for (const std::string& id : stream_ids) command.args.Push(id);
  client_->Submit(
      std::move(command), options.deadline,
      Parsed(std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<int64_t> {
        int64_t n = 0;
        if (!ToInt(reply, &n)) return BadReply("XACK");
        return n;
      }));
}

void RedisHoldStore::TrimEvents(int partition, TrimEventsArgs args, CallOptions options,
                                Callback<TrimEventsResult> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("trim_events"));
  redis::RedisCommand command = Eval<Script::kTrimEvents>(
      {keys_.EventsKeyPieces(partition)},
      {absl::StrCat(std::max<int64_t>(0, absl::ToUnixMillis(args.cutoff))),
       absl::StrCat(kMaxTrimIdsPerGroup), trim_keep_,
       absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(args.consumer_idle)))});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      Parsed(
          std::move(done), [](const redis::RedisReply& reply) -> absl::StatusOr<TrimEventsResult> {
            TrimEventsResult result;
            const auto& e = reply.elements;
            if (reply.type != redis::RedisReply::Type::kArray || e.size() < 3 ||
                e.size() % 2 != 1 || !ToInt(e[0], &result.trimmed) ||
                !ToInt(e[1], &result.trimmed_unacked) || !ToInt(e[2], &result.consumers_removed)) {
              return BadReply("trim_events.lua");
            }
            for (size_t i = 3; i < e.size(); i += 2) {
              int64_t oldest = 0;
              if (e[i].type != redis::RedisReply::Type::kString || !ToInt(e[i + 1], &oldest)) {
                return BadReply("trim_events.lua");
              }
              GroupBacklog group{e[i].str, std::nullopt};
              if (oldest >= 0) group.oldest_unacked = FromMillis(oldest);
              result.groups.push_back(std::move(group));
            }
            return result;
          }));
}

}  // namespace orderhold::store
