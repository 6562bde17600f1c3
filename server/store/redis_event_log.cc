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
using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::InRange;
using internal::kMaxTrimIdsPerGroup;
using internal::Millis;
using internal::OutOfRange;
using internal::Parsed;
using internal::ParsedAs;
using internal::Plain;
using internal::StrOf;
using internal::ToDetails;
using internal::ToInt;
using internal::ToOutcome;

namespace {

// One event of read_events.lua's reply: its 10 elements {id, delivery_count, user, order, outcome,
// expire, end, details, reference, returned}, from partition `partition`. False for any other
// shape (a RETURNED event without its units, or another event with some).
bool EventOf(absl::Span<const redis::RedisReply> e, int partition, StoredEvent* event) {
  const std::optional<absl::string_view> id = StrOf(e[0]), user = StrOf(e[2]), order = StrOf(e[3]),
                                         details = StrOf(e[7]), reference = StrOf(e[8]);
  int64_t count = 0, outcome = 0, expire = 0, end = 0, returned = 0;
  if (!id || !user || !order || !details || !reference || !ToInt(e[1], &count) ||
      !ToInt(e[4], &outcome) || !ToOutcome(outcome, &event->end.outcome) || !ToInt(e[5], &expire) ||
      !ToInt(e[6], &end) || !ToDetails(*details, expire, &event->details) ||
      !ToInt(e[9], &returned) ||
      (event->end.outcome == HoldOutcome::kReturned) != (returned >= 1)) {
    return false;
  }
  event->returned_units = returned;
  event->partition = partition;
  event->stream_id = std::string(*id);
  event->delivery_count = static_cast<int>(count);
  event->user_id = std::string(*user);
  event->order_id = std::string(*order);
  event->end.expire_time = FromMillis(expire);
  event->end.end_time = FromMillis(end);
  event->end.payment_reference = std::string(*reference);
  return true;
}

}  // namespace

void RedisHoldStore::EnsureGroup(int partition, std::string group, GroupStart start,
                                 CallOptions options, Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("ensure_group"));
  redis::RedisCommand command =
      Eval({keys_.EventsKeyPieces(partition)},
           lua::EnsureGroupArgv<Arg>{.group = group,
                                     .start = start == GroupStart::kEarliest ? "0" : "$"});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::EnsureGroupReply>(std::move(done), [](const lua::EnsureGroupReply& r) {
        return absl::StatusOr<bool>(r.created == 1);
      }));
}

void RedisHoldStore::ClaimGroup(std::string group, std::string caller, int max_groups,
                                CallOptions options, Callback<GroupClaim> done) {
  const std::string owners = keys_.GroupOwnersKey();
  const std::string counts = keys_.GroupCountsKey();
  redis::RedisCommand command =
      Eval({owners, counts},
           lua::ClaimGroupArgv<Arg>{
               .group = group, .caller = caller, .max_groups = int64_t{std::max(1, max_groups)}});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::ClaimGroupReply>(
          std::move(done), [](const lua::ClaimGroupReply& r) -> absl::StatusOr<GroupClaim> {
            if (r.result < -1 || r.result > 1) return BadReply("claim_group.lua");
            GroupClaim claim;
            claim.result = r.result == 1   ? GroupClaim::Result::kClaimed
                           : r.result == 0 ? GroupClaim::Result::kRegistered
                                           : GroupClaim::Result::kOverLimit;
            claim.owner = std::string(r.owner);
            claim.owned = r.groups;
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

void RedisHoldStore::DropGroup(std::string group, std::vector<std::string> owners,
                               CallOptions options, Callback<GroupDrop> done) {
  redis::RedisCommand command =
      Eval({keys_.GroupOwnersKey(), keys_.GroupCountsKey()},
           lua::DropGroupArgv<Arg>{.group = group, .owners = std::move(owners)});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::DropGroupReply>(
          std::move(done), [](const lua::DropGroupReply& r) -> absl::StatusOr<GroupDrop> {
            switch (r.result) {
              case 1:
                return GroupDrop{GroupDrop::Result::kDropped, std::string(r.owner)};
              case 0:
                return GroupDrop{GroupDrop::Result::kNotRegistered, ""};
              case -1:
                return GroupDrop{GroupDrop::Result::kNotOwner, ""};
            }
            return BadReply("drop_group.lua");
          }));
}

void RedisHoldStore::DestroyGroup(int partition, std::string group, CallOptions options,
                                  Callback<bool> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("destroy_group"));
  redis::RedisCommand command =
      Eval({keys_.EventsKeyPieces(partition)}, lua::DestroyGroupArgv<Arg>{.group = group});
  command.writes = true;
  client_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::DestroyGroupReply>(std::move(done), [](const lua::DestroyGroupReply& r) {
        return absl::StatusOr<bool>(r.destroyed == 1);
      }));
}

void RedisHoldStore::ReadEvents(int partition, ReadEventsArgs args, CallOptions options,
                                Callback<EventBatch> done) {
  if (!InRange(partition)) return std::move(done)(OutOfRange("read_events"));
  std::string own_after;
  if (args.own_pending) own_after = args.own_after.empty() ? "0-0" : args.own_after;
  const std::string claim_ms =
      args.claim_idle.has_value() ? absl::StrCat(Millis(*args.claim_idle)) : "";
  redis::RedisCommand command =
      Eval({keys_.EventsKeyPieces(partition)},
           lua::ReadEventsArgv<Arg>{.group = args.group,
                                    .consumer = args.consumer,
                                    .budget = int64_t{std::max(1, args.max_events)},
                                    .claim_ms = claim_ms,
                                    .claim_after = args.claim_after,
                                    .resume = own_after});
  // It writes (the group's pending list), and with --redis_wait_replicas the WAIT that follows
  // also covers the events it returns, which were appended before it: an event is delivered only
  // once the replicas have it, so a failover cannot lose an end a consumer was told about and
  // then have the promoted replica end the hold again (two events for one end).
  command.writes = true;
  client_->Submit(std::move(command), options.deadline,
                  ParsedAs<lua::ReadEventsReply>(
                      std::move(done),
                      [partition](const lua::ReadEventsReply& r) -> absl::StatusOr<EventBatch> {
                        constexpr size_t kFields = 10;  // per event
                        if (r.events.size() % kFields != 0) return BadReply("read_events.lua");
                        EventBatch batch;
                        batch.claim_next = std::string(r.claim_next);
                        batch.own_next = std::string(r.own_next);
                        for (size_t i = 0; i < r.events.size(); i += kFields) {
                          StoredEvent event;
                          if (!EventOf(r.events.subspan(i, kFields), partition, &event)) {
                            return BadReply("read_events.lua");
                          }
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
  const std::string claim_ms =
      claim_idle.has_value() ? absl::StrCat(Millis(*claim_idle)) : std::string();
  redis::RedisCommand command =
      Eval({keys_.EventsKeyPieces(partition)},
           lua::CheckGroupsArgv<Arg>{.claim_ms = claim_ms, .groups = std::move(groups)});
  background_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::CheckGroupsReply>(
          std::move(done),
          [](const lua::CheckGroupsReply& r) -> absl::StatusOr<std::vector<GroupWork>> {
            if (r.work.size() % 2 != 0) return BadReply("check_groups.lua");
            std::vector<GroupWork> work;
            for (size_t i = 0; i < r.work.size(); i += 2) {
              const std::optional<absl::string_view> group = StrOf(r.work[i]);
              int64_t flags = 0;
              if (!group || !ToInt(r.work[i + 1], &flags) || flags < 1 || flags > 3) {
                return BadReply("check_groups.lua");
              }
              work.push_back(GroupWork{std::string(*group), (flags & 1) != 0, (flags & 2) != 0});
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
  const std::string cutoff = absl::StrCat(std::max<int64_t>(0, absl::ToUnixMillis(args.cutoff)));
  redis::RedisCommand command = Eval(
      {keys_.EventsKeyPieces(partition)},
      lua::TrimEventsArgv<Arg>{
          .cutoff = cutoff,
          .bound = int64_t{kMaxTrimIdsPerGroup},
          .keep = trim_keep_,
          .consumer_idle = std::max<int64_t>(0, absl::ToInt64Milliseconds(args.consumer_idle))});
  command.writes = true;
  background_->Submit(
      std::move(command), options.deadline,
      ParsedAs<lua::TrimEventsReply>(
          std::move(done), [](const lua::TrimEventsReply& r) -> absl::StatusOr<TrimEventsResult> {
            if (r.groups.size() % 2 != 0) return BadReply("trim_events.lua");
            TrimEventsResult result;
            result.trimmed = r.trimmed;
            result.trimmed_unacked = r.trimmed_unacked;
            result.consumers_removed = r.consumers_removed;
            for (size_t i = 0; i < r.groups.size(); i += 2) {
              const std::optional<absl::string_view> name = StrOf(r.groups[i]);
              int64_t oldest = 0;
              if (!name || !ToInt(r.groups[i + 1], &oldest)) return BadReply("trim_events.lua");
              GroupBacklog group{std::string(*name), std::nullopt};
              if (oldest >= 0) group.oldest_unacked = FromMillis(oldest);
              result.groups.push_back(std::move(group));
            }
            return result;
          }));
}

}  // namespace orderhold::store
