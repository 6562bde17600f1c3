#include "server/domain/event_service.h"

#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/common/fan_in.h"
#include "server/common/status_macros.h"
#include "server/domain/group_owner.h"
#include "server/domain/hold.h"
#include "server/domain/hold_service.h"
#include "server/domain/tenant.h"

namespace orderhold::domain {
namespace {

template <typename T>
absl::Status FirstError(const std::vector<absl::StatusOr<T>>& results) {
  for (const auto& result : results) {
    if (!result.ok()) return result.status();
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming consumer_group or consumer.
absl::Status ValidateWatchSpec(const WatchSpec& spec) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateGroup(spec.group));
  return ValidateLocalId("consumer", spec.consumer);
}

// The stream ids of `event_ids` by partition, once group and ids are valid: INVALID_ARGUMENT
// naming consumer_group or event_ids.
absl::StatusOr<std::map<int, std::vector<std::string>>> StreamIdsByPartition(
    absl::string_view group, const std::vector<std::string>& event_ids, int partition_count) {
  ORDERHOLD_RETURN_IF_ERROR(ValidateGroup(group));
  if (event_ids.size() > EventService::kMaxAckIds) {
    return absl::InvalidArgumentError(
        absl::StrCat("event_ids: at most ", EventService::kMaxAckIds, " per call"));
  }
  std::map<int, std::vector<std::string>> by_partition;
  for (const std::string& event_id : event_ids) {
    ORDERHOLD_ASSIGN_OR_RETURN(auto parsed, store::ParseEventId(event_id, partition_count));
    by_partition[parsed.first].push_back(std::move(parsed.second));
  }
  return by_partition;
}

}  // namespace

absl::Status ValidateGroup(absl::string_view group) {
  const absl::string_view tenant = TenantOfGroup(group);
  if (!tenant.empty()) ORDERHOLD_RETURN_IF_ERROR(ValidateTenantName("consumer_group", tenant));
  return ValidateLocalGroup(LocalGroup(group));
}

absl::Status ValidateLocalGroup(absl::string_view group) {
  if (group.empty() || group.size() > 64) {
    return absl::InvalidArgumentError("consumer_group: must be 1-64 characters of [A-Za-z0-9_.-]");
  }
  for (char c : group) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return absl::InvalidArgumentError(
          "consumer_group: must be 1-64 characters of [A-Za-z0-9_.-]");
    }
  }
  return absl::OkStatus();
}

EventService::EventService(store::HoldEventLog& log, EventPolicy policy, metrics::Metrics& metrics)
    : log_(log), policy_(policy), metrics_(metrics) {}

int EventService::MaxGroupsFor(absl::string_view group) const {
  if (tenants_ == nullptr) return policy_.max_groups_per_caller;
  return tenants_->For(TenantOfGroup(group))
      .max_consumer_groups.value_or(policy_.max_groups_per_caller);
}

void EventService::Subscribe(const WatchSpec& spec, store::CallOptions options,
                             store::Callback<bool> done) {
  if (absl::Status status = ValidateWatchSpec(spec); !status.ok()) {
    std::move(done)(status);
    return;
  }
  log_.ClaimGroup(spec.group, spec.caller, MaxGroupsFor(spec.group), options,
                  [this, spec, options,
                   done = std::move(done)](absl::StatusOr<store::GroupClaim> claim) mutable {
                    if (!claim.ok()) return std::move(done)(claim.status());
                    if (absl::Status refused = RefuseClaim(spec.group, spec.caller, *claim);
                        !refused.ok()) {
                      return std::move(done)(refused);
                    }
                    EnsureGroupEverywhere(spec, options, std::move(done));
                  });
}

absl::Status EventService::RefuseClaim(absl::string_view group, absl::string_view caller,
                                       const store::GroupClaim& claim) const {
  switch (claim.result) {
    case store::GroupClaim::Result::kClaimed:
      return absl::OkStatus();
    case store::GroupClaim::Result::kRegistered:
      if (!policy_.enforce_owners || IsOwner(claim.owner, caller)) return absl::OkStatus();
      return NotOwner(group);
    case store::GroupClaim::Result::kOverLimit: {
      const std::string description =
          absl::StrCat("the caller owns ", claim.owned, " consumer groups (max_consumer_groups ",
                       MaxGroupsFor(group), ")");
      return QuotaError(
          absl::StrCat("consumer_group \"", LocalGroup(group), "\" is new and ", description,
                       "; delete one with DeleteConsumerGroup or reuse one"),
          "caller/consumer_groups", description, "CONSUMER_GROUP_LIMIT");
    }
  }
  return absl::InternalError("unknown group claim");
}

absl::Status EventService::NotOwner(absl::string_view group) {
  return absl::PermissionDeniedError(
      absl::StrCat("consumer_group \"", LocalGroup(group),
                   "\" belongs to another caller (a group is its creator's: pick another name)"));
}

void EventService::EnsureGroupEverywhere(const WatchSpec& spec, store::CallOptions options,
                                         store::Callback<bool> done) {
  const int partitions = log_.event_partition_count();
  FanIn<bool>(
      static_cast<size_t>(partitions),
      [&](size_t partition, Callback<bool> slot) {
        log_.EnsureGroup(static_cast<int>(partition), spec.group, spec.start, options,
                         std::move(slot));
      },
      [done = std::move(done)](std::vector<absl::StatusOr<bool>> results) mutable {
        if (absl::Status error = FirstError(results); !error.ok()) {
          return std::move(done)(error);
        }
        bool created = false;
        for (const auto& result : results) created = created || *result;
        std::move(done)(created);
      });
}

void EventService::Read(const WatchSpec& spec, const ReadPlan& plan, store::CallOptions options,
                        absl::AnyInvocable<void(ReadResult) &&> done) {
  store::ReadEventsArgs args;
  args.group = spec.group;
  args.consumer = spec.consumer;
  args.max_events =
      std::max(1, policy_.max_events_per_read / std::max<int>(1, plan.partitions.size()));
  const std::set<int> claims(plan.claims.begin(), plan.claims.end());
  FanIn<store::EventBatch>(
      plan.partitions.size(),
      [&](size_t i, Callback<store::EventBatch> slot) {
        const int partition = plan.partitions[i];
        store::ReadEventsArgs partition_args = args;
        if (claims.count(partition) > 0) {
          partition_args.claim_idle = policy_.ack_timeout;
          if (auto it = plan.claim_after.find(partition); it != plan.claim_after.end()) {
            partition_args.claim_after = it->second;
          }
        }
        if (auto it = plan.own.find(partition); it != plan.own.end()) {
          partition_args.own_pending = true;
          partition_args.own_after = it->second;
        }
        log_.ReadEvents(partition, std::move(partition_args), options, std::move(slot));
      },
      [this, spec, partitions = plan.partitions, max_events = args.max_events, options,
       done = std::move(done)](std::vector<absl::StatusOr<store::EventBatch>> results) mutable {
        ReadResult out;
        std::map<int, std::vector<std::string>> filtered;  // partition -> stream ids to ack
        for (size_t i = 0; i < results.size(); ++i) {
          if (!results[i].ok()) continue;
          store::EventBatch& batch = *results[i];
          const int partition = partitions[i];
          if (static_cast<int>(batch.events.size()) >= max_events) out.again.push_back(partition);
          if (!batch.claim_next.empty()) out.claim_next[partition] = std::move(batch.claim_next);
          if (!batch.own_next.empty()) out.own_next[partition] = std::move(batch.own_next);
          for (store::StoredEvent& event : batch.events) {
            const bool in_tenant =
                !spec.tenant.has_value() || TenantOfId(event.user_id) == *spec.tenant;
            if (in_tenant &&
                (spec.outcomes.empty() || spec.outcomes.count(event.end.outcome) > 0)) {
              out.events.push_back(std::move(event));
            } else {
              filtered[event.partition].push_back(event.stream_id);
            }
          }
        }
        for (auto& [partition, ids] : filtered) {
          log_.AckEvents(partition, spec.group, std::move(ids), options,
                         [this](absl::StatusOr<int64_t> acked) {
                           // Best effort: a failed ack only means a later redelivery, filtered
                           // out again.
                           if (acked.ok()) metrics_.events_acked().Increment(*acked);
                         });
        }
        out.status = FirstError(results);
        std::move(done)(std::move(out));
      });
}

void EventService::Ack(std::string group, std::string caller,
                       const std::vector<std::string>& event_ids, store::CallOptions options,
                       store::Callback<int64_t> done) {
  absl::StatusOr<std::map<int, std::vector<std::string>>> by_partition =
      StreamIdsByPartition(group, event_ids, log_.event_partition_count());
  if (!by_partition.ok()) {
    std::move(done)(by_partition.status());
    return;
  }
  if (!policy_.enforce_owners) {
    AckValid(std::move(group), *std::move(by_partition), options, std::move(done));
    return;
  }
  log_.GroupOwner(
      group, options,
      [this, group, caller = std::move(caller), by_partition = *std::move(by_partition), options,
       done = std::move(done)](absl::StatusOr<std::optional<std::string>> owner) mutable {
        if (!owner.ok()) return std::move(done)(owner.status());
        if (!owner->has_value() || !IsOwner(**owner, caller)) {
          return std::move(done)(NotOwner(group));
        }
        AckValid(std::move(group), std::move(by_partition), options, std::move(done));
      });
}

void EventService::AckValid(std::string group, std::map<int, std::vector<std::string>> by_partition,
                            store::CallOptions options, store::Callback<int64_t> done) {
  // One call per partition named in event_ids, in partition order.
  std::vector<std::pair<int, std::vector<std::string>>> calls(
      std::make_move_iterator(by_partition.begin()), std::make_move_iterator(by_partition.end()));
  FanIn<int64_t>(
      calls.size(),
      [&](size_t i, Callback<int64_t> slot) {
        log_.AckEvents(calls[i].first, group, std::move(calls[i].second), options, std::move(slot));
      },
      [this, done = std::move(done)](std::vector<absl::StatusOr<int64_t>> results) mutable {
        int64_t acked = 0;
        for (const auto& result : results) {
          if (result.ok()) acked += *result;
        }
        if (acked > 0) metrics_.events_acked().Increment(static_cast<double>(acked));
        if (absl::Status error = FirstError(results); !error.ok()) {
          return std::move(done)(error);
        }
        std::move(done)(acked);
      });
}

void EventService::DeleteGroup(std::string group, std::string caller, store::CallOptions options,
                               store::Callback<bool> done) {
  if (absl::Status status = ValidateGroup(group); !status.ok()) {
    std::move(done)(status);
    return;
  }
  // Whose groups `caller` may delete: its own, or any (no owners enforced, or an operator).
  std::vector<std::string> owners;
  const bool operator_call =
      policy_.operators.contains(caller) || (tenants_ != nullptr && tenants_->IsOperator(caller));
  if (policy_.enforce_owners && !operator_call) {
    owners = OwnerSpellings(caller);
  }
  log_.DropGroup(group, std::move(owners), options,
                 [this, group, options,
                  done = std::move(done)](absl::StatusOr<store::GroupDrop> drop) mutable {
                   if (!drop.ok()) return std::move(done)(drop.status());
                   if (drop->result == store::GroupDrop::Result::kNotOwner) {
                     return std::move(done)(NotOwner(group));
                   }
                   const bool registered = drop->result == store::GroupDrop::Result::kDropped;
                   FanIn<bool>(
                       static_cast<size_t>(log_.event_partition_count()),
                       [&](size_t partition, Callback<bool> slot) {
                         log_.DestroyGroup(static_cast<int>(partition), group, options,
                                           std::move(slot));
                       },
                       [this, group, registered,
                        done = std::move(done)](std::vector<absl::StatusOr<bool>> results) mutable {
                         if (absl::Status error = FirstError(results); !error.ok()) {
                           return std::move(done)(error);
                         }
                         bool existed = registered;
                         for (const auto& result : results) existed = existed || *result;
                         metrics_.ForgetGroup(group);
                         std::move(done)(existed);
                       });
                 });
}

}  // namespace orderhold::domain
