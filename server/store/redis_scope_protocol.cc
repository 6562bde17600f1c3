// RedisHoldStore's scope protocol across slots (Redis Cluster): the steps of a scoped PlaceHold
// and ExtendHold, the drops of ended holds' entries, and the sweep. The protocol, its invariants
// and its failure table: server/README.md "Scope totals"; the scripts: lua/scope_take.lua,
// lua/scope_settle.lua, lua/scope_check.lua, lua/scope_pending.lua and the take checks of
// place_hold.lua and extend_hold.lua (lua/prelude/ "The scope protocol across slots").
//
// Order of steps: each is sent once the previous one answered OK, which with
// --redis_wait_replicas > 0 means replicated (redis_client.h "Acknowledged means replicated"). A
// step that fails, WAIT's timeout included, may still have run: the call answers the error
// (UNAVAILABLE: retry) and what it left is the sweep's to repair.
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/common/fan_in.h"
#include "server/common/status_macros.h"
#include "server/store/redis_hold_store.h"
#include "server/store/redis_script_call.h"

namespace orderhold::store {

using internal::Arg;
using internal::BadReply;
using internal::Eval;
using internal::FromMillis;
using internal::Millis;
using internal::NowArg;
using internal::Parsed;
using internal::ParsedAs;
using internal::Plain;
using internal::StrOf;
using internal::ToDetails;
using internal::ToInt;

namespace {

constexpr absl::string_view kZero("\0", 1);

}  // namespace

std::string RedisHoldStore::ScopeEntry::Member() const {
  return absl::StrCat(quantity, ":", user_id, kZero, order_id);
}

void RedisHoldStore::NoteStepError(absl::string_view step, const absl::Status& status) const {
  if (protocol_->wait_timed_out && redis::IsNotReplicated(status)) protocol_->wait_timed_out(step);
}

std::string RedisHoldStore::TakeArg(const Take& take) const {
  return absl::StrCat(take.stamp, ":", take.now_ms, ":", Millis(protocol_->window));
}

void RedisHoldStore::TakeStep(const ScopeEntry& entry, absl::Duration ttl, LevelLimits totals,
                              bool extend, const CallOptions& options, Callback<Take> done) {
  const int partition = KeySchema::PartitionOf(entry.scope);
  redis::RedisCommand command = Eval(
      {keys_.ScopeLiveKey(entry.scope), keys_.ScopeUnitsKey(entry.scope),
       keys_.ScopePendingKey(partition), keys_.ScopePendingAgesKey(partition),
       keys_.ScopeSetKey(partition)},
      lua::ScopeTakeArgv<Arg>{.scope = entry.scope,
                              .member = entry.Member(),
                              .quantity = entry.quantity,
                              .lease = Millis(ttl + protocol_->window + protocol_->margin),
                              .now = NowArg(options),
                              .totals = absl::StrCat(std::max<int64_t>(0, totals.max_holds), ":",
                                                     std::max<int64_t>(0, totals.max_units)),
                              .mode = extend ? "extend" : "place"});
  command.writes = true;
  client_->Submit(std::move(command), options.deadline,
                  ParsedAs<lua::ScopeTakeReply>(
                      std::move(done), [](const lua::ScopeTakeReply& r) -> absl::StatusOr<Take> {
                        if (r.result != 1 && r.result != -1) return BadReply("scope_take.lua");
                        return Take{.taken = r.result == 1,
                                    .now_ms = r.now,
                                    .stamp = r.stamp,
                                    .holds = r.holds,
                                    .units = r.units,
                                    .first_ms = r.first,
                                    .violations = static_cast<int>(r.violations)};
                      }));
}

void RedisHoldStore::SettleBatch(std::vector<Settle> settles, redis::RedisCaller& caller,
                                 absl::Time deadline, bool writes,
                                 Callback<std::vector<bool>> done) {
  const ScopeEntry& first = settles.front().entry;
  const int partition = KeySchema::PartitionOf(first.scope);
  std::vector<std::string> tail;
  tail.reserve(4 * settles.size());
  for (const Settle& settle : settles) {
    tail.push_back(settle.entry.Member());
    tail.push_back(absl::StrCat(settle.entry.quantity));
    tail.push_back(settle.stamp > 0 ? absl::StrCat(settle.stamp) : std::string());
    tail.push_back(absl::StrCat(settle.expire_ms));
  }
  redis::RedisCommand command = Eval(
      {keys_.ScopeLiveKey(first.scope), keys_.ScopeUnitsKey(first.scope),
       keys_.ScopePendingKey(partition), keys_.ScopePendingAgesKey(partition)},
      lua::ScopeSettleArgv<Arg>{
          .scope = first.scope, .margin = Millis(protocol_->margin), .settles = std::move(tail)});
  command.writes = writes;
  caller.Submit(std::move(command), deadline,
                ParsedAs<lua::ScopeSettleReply>(std::move(done),
                                                [n = settles.size()](const lua::ScopeSettleReply& r)
                                                    -> absl::StatusOr<std::vector<bool>> {
                                                  if (r.results.size() != n)
                                                    return BadReply("scope_settle.lua");
                                                  std::vector<bool> acted;
                                                  for (const redis::RedisReply& one : r.results) {
                                                    int64_t v = 0;
                                                    if (!ToInt(one, &v))
                                                      return BadReply("scope_settle.lua");
                                                    acted.push_back(v == 1);
                                                  }
                                                  return acted;
                                                }));
}

void RedisHoldStore::SettleStep(const ScopeEntry& entry, int64_t stamp, int64_t expire_ms,
                                redis::RedisCaller& caller, absl::Time deadline,
                                Callback<bool> done) {
  SettleBatch({Settle{entry, stamp, expire_ms}}, caller, deadline, /*writes=*/true,
              [done = std::move(done)](absl::StatusOr<std::vector<bool>> acted) mutable {
                if (!acted.ok()) {
                  std::move(done)(acted.status());
                  return;
                }
                std::move(done)(acted->front());
              });
}

void RedisHoldStore::QueueSettle(Settle settle) {
  ++*settles_;
  std::string scope = settle.entry.scope;
  {
    absl::MutexLock lock(&settle_mu_);
    if (closing_) {
      --*settles_;
      return;
    }
    auto [queue, idle] = settle_queues_.try_emplace(scope);
    if (!idle) {
      queue->second.push_back(std::move(settle));
      return;
    }
  }
  std::vector<Settle> batch;
  batch.push_back(std::move(settle));
  SendSettles(scope, std::move(batch));
}

void RedisHoldStore::SendSettles(const std::string& scope, std::vector<Settle> batch) {
  ++settle_calls_;
  settles_sent_ += static_cast<int64_t>(batch.size());
  const int sent = static_cast<int>(batch.size());
  // Whatever it answered: a lost settle is the sweep's.
  SettleBatch(std::move(batch), *client_, absl::Now() + protocol_->settle_timeout,
              /*writes=*/false, [this, scope, sent](absl::StatusOr<std::vector<bool>>) {
                std::vector<Settle> next;
                {
                  absl::MutexLock lock(&settle_mu_);
                  *settles_ -= sent;
                  auto queue = settle_queues_.find(scope);
                  if (queue == settle_queues_.end()) return;
                  if (closing_ || queue->second.empty()) {
                    *settles_ -= static_cast<int>(queue->second.size());
                    settle_queues_.erase(queue);
                    return;
                  }
                  std::vector<Settle>& waiting = queue->second;
                  const size_t take =
                      std::min(waiting.size(),
                               static_cast<size_t>(std::max(1, protocol_->max_settle_batch)));
                  next.assign(std::make_move_iterator(waiting.begin()),
                              std::make_move_iterator(waiting.begin() + take));
                  waiting.erase(waiting.begin(), waiting.begin() + take);
                }
                SendSettles(scope, std::move(next));
              });
}

RedisHoldStore::~RedisHoldStore() {
  absl::MutexLock lock(&settle_mu_);
  closing_ = true;
}

void RedisHoldStore::DropEnded(const std::string& user_id, const std::vector<StoredHold>& ended,
                               absl::AnyInvocable<void()> then) {
  auto entries = std::make_shared<std::vector<ScopeEntry>>();
  for (const StoredHold& hold : ended) {
    if (hold.details.scope.empty()) continue;
    entries->push_back(
        ScopeEntry{hold.details.scope, user_id, hold.order_id, hold.details.quantity});
  }
  if (!entries->empty() && protocol_->after_step) protocol_->after_step("end");
  const absl::Time deadline = absl::Now() + protocol_->settle_timeout;
  // Whatever each drop answered: a lost one is the sweep's journal pass's.
  FanIn<bool>(
      entries->size(),
      [this, entries, deadline](size_t i, Callback<bool> done) {
        SettleStep((*entries)[i], 0, -1, *client_, deadline,
                   [this, done = std::move(done)](absl::StatusOr<bool> dropped) mutable {
                     if (!dropped.ok()) NoteStepError("drop", dropped.status());
                     std::move(done)(std::move(dropped));
                   });
      },
      [then = std::move(then)](std::vector<absl::StatusOr<bool>>) mutable { then(); });
}

void RedisHoldStore::PlaceAcrossSlots(PlaceHoldArgs args, CallOptions options,
                                      Callback<PlaceHoldResult> done) {
  const ScopeEntry entry{args.details.scope, args.user_id, args.order_id, args.details.quantity};
  const absl::Duration ttl = args.ttl;
  const LevelLimits totals = args.totals;
  auto shared = std::make_shared<PlaceHoldArgs>(std::move(args));
  TakeStep(
      entry, ttl, totals, /*extend=*/false, options,
      [this, entry, shared, options, done = std::move(done)](absl::StatusOr<Take> take) mutable {
        if (!take.ok()) {
          NoteStepError("take", take.status());
          std::move(done)(take.status());
          return;
        }
        if (take->taken && protocol_->after_step) protocol_->after_step("take");
        if (!take->taken) {
          PlaceHoldResult refused;
          refused.outcome = PlaceHoldResult::Outcome::kLimitReached;
          refused.now = FromMillis(take->now_ms);
          refused.expire_time =
              take->first_ms >= 0 ? FromMillis(take->first_ms) - protocol_->margin : refused.now;
          refused.violations = take->violations;
          refused.total_holds = take->holds;
          refused.total_units = take->units;
          std::move(done)(std::move(refused));
          return;
        }
        PlaceInUserSlot(
            *shared, options, TakeArg(*take),
            [this, entry, taken = *take,
             done = std::move(done)](absl::StatusOr<PlaceHoldResult> placed) mutable {
              if (!placed.ok()) {
                NoteStepError("place", placed.status());
                // It may have run: the pending take is the sweep's to settle.
                std::move(done)(std::move(placed));
                return;
              }
              const bool ours = placed->outcome == PlaceHoldResult::Outcome::kCreated ||
                                (placed->outcome == PlaceHoldResult::Outcome::kAlreadyHeld &&
                                 placed->details.scope == entry.scope &&
                                 placed->details.quantity == entry.quantity);
              const int64_t expire = ours ? absl::ToUnixMillis(placed->expire_time) : -1;
              if (placed->outcome == PlaceHoldResult::Outcome::kCreated) {
                placed->total_holds = taken.holds;
                placed->total_units = taken.units;
              }
              if (protocol_->after_step) protocol_->after_step("place");
              // Submitted before the answer (the store is used only until then; the caller does
              // not wait for it): a lost settle is the sweep's.
              QueueSettle(Settle{entry, taken.stamp, expire});
              std::move(done)(std::move(placed));
            });
      });
}

void RedisHoldStore::ExtendAcrossSlots(ExtendHoldArgs args, CallOptions options,
                                       Callback<ExtendHoldResult> done) {
  auto shared = std::make_shared<ExtendHoldArgs>(std::move(args));
  ExtendInUserSlot(
      *shared, options, "-",
      [this, shared, options, done = std::move(done)](absl::StatusOr<ExtendStep> step) mutable {
        if (!step.ok() || !step->needs_take) {
          std::move(done)(step.ok() ? absl::StatusOr<ExtendHoldResult>(std::move(step->result))
                                    : step.status());
          return;
        }
        const HoldDetails& details = step->result.hold.details;
        const ScopeEntry entry{details.scope, shared->user_id, shared->order_id, details.quantity};
        TakeStep(entry, shared->ttl, LevelLimits{}, /*extend=*/true, options,
                 [this, entry, shared, options,
                  done = std::move(done)](absl::StatusOr<Take> take) mutable {
                   if (!take.ok()) {
                     NoteStepError("take", take.status());
                     std::move(done)(take.status());
                     return;
                   }
                   ExtendInUserSlot(
                       *shared, options, TakeArg(*take),
                       [this, entry, stamp = take->stamp,
                        done = std::move(done)](absl::StatusOr<ExtendStep> extended) mutable {
                         if (!extended.ok()) NoteStepError("extend", extended.status());
                         if (!extended.ok() || extended->needs_take) {
                           std::move(done)(
                               extended.ok()
                                   ? absl::UnavailableError("the hold's scope entry moved; retry")
                                   : extended.status());
                           return;
                         }
                         const ExtendHoldResult::Result r = extended->result.result;
                         const bool live = r == ExtendHoldResult::Result::kLive ||
                                           r == ExtendHoldResult::Result::kExhausted;
                         const int64_t expire =
                             live ? absl::ToUnixMillis(extended->result.hold.expire_time) : -1;
                         QueueSettle(Settle{entry, stamp, expire});
                         std::move(done)(std::move(extended->result));
                       });
                 });
      });
}

// A pending take's record as scope_pending.lua lists it: its field
// "<scope>\0<quantity>:<user>\0<order>" and "<stamp>:<take ms>"; false when malformed.
bool RedisHoldStore::OldTakeOf(absl::string_view field, absl::string_view record, OldTake* out) {
  std::vector<absl::string_view> parts = absl::StrSplit(field, kZero);
  const size_t colon = parts.size() == 3 ? parts[1].find(':') : absl::string_view::npos;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(parts[1].substr(0, colon), &out->entry.quantity) ||
      !absl::SimpleAtoi(record.substr(0, record.find(':')), &out->stamp)) {
    return false;
  }
  out->audit = absl::EndsWith(record, ":audit");
  out->entry.scope = std::string(parts[0]);
  out->entry.user_id = std::string(parts[1].substr(colon + 1));
  out->entry.order_id = std::string(parts[2]);
  return true;
}

absl::StatusOr<std::vector<RedisHoldStore::OldTake>> RedisHoldStore::OldTakes(
    int partition, const ScopeSweepArgs& args, const CallOptions& options, int64_t* total,
    absl::Duration* oldest) {
  redis::RedisCommand look =
      Eval({keys_.ScopePendingKey(partition), keys_.ScopePendingAgesKey(partition)},
           lua::ScopePendingArgv<Arg>{.age = Millis(args.pending_age),
                                      .now = NowArg(options),
                                      .limit = int64_t{std::max(1, args.max_records)}});
  auto reply = Await<redis::RedisReply>([&](Callback<redis::RedisReply> got) {
    background_->Submit(std::move(look), options.deadline,
                        Parsed(std::move(got), [](const redis::RedisReply& r) {
                          return absl::StatusOr<redis::RedisReply>(r);
                        }));
  });
  if (!reply.ok()) return reply.status();
  lua::ScopePendingReply pending;  // views into `reply`
  ORDERHOLD_RETURN_IF_ERROR(lua::Parse(*reply, &pending));
  *total = pending.total;
  *oldest = pending.oldest >= 0
                ? absl::Milliseconds(std::max<int64_t>(0, pending.now - pending.oldest))
                : absl::ZeroDuration();
  std::vector<OldTake> old;
  for (size_t i = 0; i + 1 < pending.page.size(); i += 2) {
    const std::optional<absl::string_view> field = StrOf(pending.page[i]);
    const std::optional<absl::string_view> record = StrOf(pending.page[i + 1]);
    OldTake one;
    if (!field || !record || !OldTakeOf(*field, *record, &one))
      return BadReply("scope_pending.lua");
    old.push_back(std::move(one));
  }
  return old;
}

absl::StatusOr<bool> RedisHoldStore::SettleOldTake(const OldTake& take,
                                                   const CallOptions& options) {
  const KeySchema::UserKeys keys = keys_.ForUser(take.entry.user_id);
  redis::RedisCommand check =
      Eval({keys.holds_bucket, keys.outcomes},
           lua::ScopeCheckArgv<Arg>{.user = take.entry.user_id,
                                    .order = take.entry.order_id,
                                    .scope = take.entry.scope,
                                    .quantity = take.entry.quantity,
                                    .stamp = take.stamp,
                                    .window = Millis(2 * protocol_->window + protocol_->margin),
                                    .now = NowArg(options),
                                    .store = store_arg_});
  check.writes = true;
  auto expire = Await<int64_t>([&](Callback<int64_t> got) {
    background_->Submit(
        std::move(check), options.deadline,
        ParsedAs<lua::ScopeCheckReply>(
            std::move(got), [](const lua::ScopeCheckReply& r) -> int64_t { return r.expire; }));
  });
  if (!expire.ok()) return expire.status();
  auto settled = Await<bool>([&](Callback<bool> got) {
    SettleStep(take.entry, take.stamp, *expire, *background_, options.deadline, std::move(got));
  });
  if (!settled.ok()) return settled.status();
  if (!*settled) return absl::NotFoundError("another take owns the entry");
  return *expire >= 0;
}

void RedisHoldStore::ScopeSweep(int partition, ScopeSweepArgs args, CallOptions options,
                                Callback<ScopeSweepResult> done) {
  if (!internal::InRange(partition)) {
    std::move(done)(internal::OutOfRange("ScopeSweep"));
    return;
  }
  ScopeSweepResult result;
  if (!protocol_.has_value()) {
    std::move(done)(result);
    return;
  }
  // 1. Old pending takes: ask each user's slot (and fence it), then settle.
  absl::StatusOr<std::vector<OldTake>> old =
      OldTakes(partition, args, options, &result.pending, &result.oldest_pending);
  if (!old.ok()) {
    std::move(done)(old.status());
    return;
  }
  result.more = old->size() >= static_cast<size_t>(std::max(1, args.max_records));
  absl::Status first_error;
  for (const OldTake& take : *old) {
    absl::StatusOr<bool> live = SettleOldTake(take, options);
    if (live.ok() && take.audit) {
      if (!*live) ++result.ghosts;
    } else if (live.ok()) {
      ++(*live ? result.settled : result.fenced);
    } else if (live.status().code() != absl::StatusCode::kNotFound && first_error.ok()) {
      first_error = live.status();
    }
  }
  // 2. The stream's ends since the mark: their entries dropped, then the mark moved.
  if (args.journal) {
    absl::StatusOr<int> dropped = SweepJournal(partition, args, options, &result.more);
    if (dropped.ok()) {
      result.dropped = *dropped;
    } else if (first_error.ok()) {
      first_error = dropped.status();
    }
  }
  if (!first_error.ok()) {
    std::move(done)(first_error);
    return;
  }
  std::move(done)(result);
}

void RedisHoldStore::ScopeAudit(int partition, ScopeAuditArgs args, CallOptions options,
                                Callback<ScopeAuditResult> done) {
  if (!internal::InRange(partition)) {
    std::move(done)(internal::OutOfRange("ScopeAudit"));
    return;
  }
  ScopeAuditResult result;
  if (!protocol_.has_value()) {
    std::move(done)(result);
    return;
  }
  // The partition's scopes, by name, so that the cursor's place survives their leases moving.
  auto listed = Await<std::vector<std::string>>([&](Callback<std::vector<std::string>> got) {
    background_->Submit(
        Plain({"ZRANGE", keys_.ScopeSetKey(partition), "0", "-1"}), options.deadline,
        Parsed(std::move(got),
               [](const redis::RedisReply& reply) -> absl::StatusOr<std::vector<std::string>> {
                 if (reply.type != redis::RedisReply::Type::kArray) return BadReply("ZRANGE");
                 std::vector<std::string> names;
                 for (const redis::RedisReply& name : reply.elements) names.push_back(name.str);
                 return names;
               }));
  });
  if (!listed.ok()) {
    std::move(done)(listed.status());
    return;
  }
  std::vector<std::string>& scopes = *listed;
  std::sort(scopes.begin(), scopes.end());
  // The cursor: "<scope>\0<rank>", the next page's scope and its first entry's rank.
  std::vector<absl::string_view> at = absl::StrSplit(args.cursor, kZero);
  int64_t start = 0;
  if (at.size() != 2 || !absl::SimpleAtoi(at[1], &start)) at = {"", "0"};
  auto scope = std::lower_bound(scopes.begin(), scopes.end(), at[0]);
  if (scope == scopes.end() || *scope != at[0]) start = 0;
  for (int budget = std::max(1, args.max_entries); budget > 0 && scope != scopes.end();) {
    const int limit = std::min(budget, 64);
    redis::RedisCommand page =
        Eval({keys_.ScopeLiveKey(*scope), keys_.ScopeSetKey(partition),
              keys_.ScopePendingKey(partition), keys_.ScopePendingAgesKey(partition)},
             lua::ScopeAuditArgv<Arg>{.scope = *scope,
                                      .start = start,
                                      .limit = int64_t{limit},
                                      .age = Millis(args.pending_age),
                                      .now = NowArg(options)});
    page.writes = true;
    auto reply = Await<lua::ScopeAuditReply>([&](Callback<lua::ScopeAuditReply> got) {
      background_->Submit(std::move(page), options.deadline,
                          ParsedAs<lua::ScopeAuditReply>(
                              std::move(got), [](const lua::ScopeAuditReply& r) { return r; }));
    });
    if (!reply.ok()) {
      std::move(done)(reply.status());
      return;
    }
    result.marked += static_cast<int>(reply->marked);
    budget -= limit;
    if (reply->next < 0) {
      ++scope;
      start = 0;
    } else {
      start = reply->next;
    }
  }
  if (scope != scopes.end()) result.cursor = absl::StrCat(*scope, kZero, start);
  std::move(done)(std::move(result));
}

// The entries to drop for the ends among `events` (an XRANGE reply's entries): each PAID or
// CANCELLED end of a scoped hold that ended at or after `oldest_ms`. Sets *last to the last id.
absl::StatusOr<std::vector<RedisHoldStore::ScopeEntry>> RedisHoldStore::EndsToDrop(
    const redis::RedisReply& events, int64_t oldest_ms, std::string* last) {
  if (events.type != redis::RedisReply::Type::kArray) return BadReply("XRANGE");
  std::vector<ScopeEntry> drops;
  for (const redis::RedisReply& entry : events.elements) {
    // {id, {field, value, ...}} (https://redis.io/commands/xrange/).
    if (entry.type != redis::RedisReply::Type::kArray || entry.elements.size() != 2 ||
        entry.elements.back().type != redis::RedisReply::Type::kArray) {
      return BadReply("XRANGE");
    }
    *last = entry.elements.front().str;
    std::string user, order, details;
    int64_t outcome = 0, expire = 0, ended = 0;
    const std::vector<redis::RedisReply>& fields = entry.elements.back().elements;
    for (size_t i = 0; i + 1 < fields.size(); i += 2) {
      const std::string& name = fields[i].str;
      const redis::RedisReply& value = fields[i + 1];
      if (name == "u") user = value.str;
      if (name == "o") order = value.str;
      if (name == "m") details = value.str;
      if (name == "x") (void)ToInt(value, &outcome);
      if (name == "e") (void)ToInt(value, &expire);
      if (name == "t") (void)ToInt(value, &ended);
    }
    HoldDetails decoded;
    if (outcome == static_cast<int>(HoldOutcome::kExpired) || details.empty() ||
        ended < oldest_ms || !ToDetails(details, expire, &decoded) || decoded.scope.empty()) {
      continue;
    }
    drops.push_back(ScopeEntry{decoded.scope, user, order, decoded.quantity});
  }
  return drops;
}

absl::StatusOr<int> RedisHoldStore::SweepJournal(int partition, const ScopeSweepArgs& args,
                                                 const CallOptions& options, bool* more) {
  const std::string mark_key = keys_.ScopeJournalKey(partition);
  auto mark = Await<std::string>([&](Callback<std::string> got) {
    background_->Submit(Plain({"GET", mark_key}), options.deadline,
                        Parsed(std::move(got), [](const redis::RedisReply& reply) {
                          return reply.type == redis::RedisReply::Type::kString ? reply.str
                                                                                : std::string();
                        }));
  });
  if (!mark.ok()) return mark.status();
  const absl::Time now = options.now.value_or(absl::Now());
  const std::string from = mark->empty()
                               ? absl::StrCat(absl::ToUnixMillis(now - absl::Minutes(1)), "-0")
                               : absl::StrCat("(", *mark);
  const int count = std::max(1, args.max_records);
  auto events = Await<redis::RedisReply>([&](Callback<redis::RedisReply> got) {
    background_->Submit(
        Plain({"XRANGE", keys_.EventsKey(partition), from, "+", "COUNT", absl::StrCat(count)}),
        options.deadline, Parsed(std::move(got), [](const redis::RedisReply& reply) {
          return absl::StatusOr<redis::RedisReply>(reply);
        }));
  });
  if (!events.ok()) return events.status();
  *more = *more || (events->type == redis::RedisReply::Type::kArray &&
                    events->elements.size() >= static_cast<size_t>(count));
  // An end older than half the outcome retention is skipped: its order may be placed again.
  int64_t retention_ms = 0;
  (void)absl::SimpleAtoi(retention_ms_, &retention_ms);
  std::string last;
  ORDERHOLD_ASSIGN_OR_RETURN(
      std::vector<ScopeEntry> drops,
      EndsToDrop(*events, absl::ToUnixMillis(now) - retention_ms / 2, &last));
  for (const absl::StatusOr<bool>&dropped :
       AwaitAll<bool>(drops.size(), [&](size_t i, Callback<bool> done) {
         SettleStep(drops[i], 0, -1, *background_, options.deadline, std::move(done));
       })) {
    if (!dropped.ok()) {
      NoteStepError("drop", dropped.status());
      return absl::UnavailableError("scope sweep: a drop failed; retried next tick");
    }
  }
  if (!last.empty()) {
    auto set = Await<bool>([&](Callback<bool> got) {
      redis::RedisCommand command = Plain({"SET", mark_key, last});
      command.writes = true;
      background_->Submit(std::move(command), options.deadline,
                          Parsed(std::move(got), [](const redis::RedisReply&) { return true; }));
    });
    if (!set.ok()) return set.status();
  }
  return static_cast<int>(drops.size());
}

}  // namespace orderhold::store
