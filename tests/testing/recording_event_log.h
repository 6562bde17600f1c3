// RecordingEventLog: a HoldEventLog for domain unit tests that answers at once, inline, and
// records the calls. Every group is new; every acked id was pending; ReadEvents returns as many
// events as `events_per_read` says for the partition (default none) and the cursors `SetCursors`
// gave it (default "": done); CheckGroups returns what
// `SetWork` scripted for the partition, or `SetCheckError`'s error; TrimEvents trims nothing and
// reports the groups `SetTrimGroups` gave the partition (none by default). The group registry
// (ClaimGroup, GroupOwner, DropGroup) is a map with claim_group.lua's rules; DestroyGroup says
// every group existed. Delivery semantics are
// Redis' own and are tested against a real redis-server, not here. Thread-safe.
#ifndef ORDERHOLD_TESTS_TESTING_RECORDING_EVENT_LOG_H_
#define ORDERHOLD_TESTS_TESTING_RECORDING_EVENT_LOG_H_

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/store/event_log.h"

namespace orderhold::testing {

class RecordingEventLog final : public store::HoldEventLog {
 public:
  // One CheckGroups call as it was made.
  struct Check {
    int partition;
    std::vector<std::string> groups;
    std::optional<absl::Duration> claim_idle;
  };

  explicit RecordingEventLog(int partitions = 2) : partitions_(partitions) {}

  int event_partition_count() const override { return partitions_; }
  void EnsureGroup(int /*partition*/, std::string /*group*/, store::GroupStart /*start*/,
                   store::CallOptions /*options*/, store::Callback<bool> done) override {
    std::move(done)(true);
  }
  void ReadEvents(int partition, store::ReadEventsArgs args, store::CallOptions /*options*/,
                  store::Callback<store::EventBatch> done) override {
    store::EventBatch batch;
    std::vector<store::StoredEvent>& events = batch.events;
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < events_per_read_[partition]; ++i) {
        store::StoredEvent event;
        event.partition = partition;
        event.stream_id = absl::StrCat(reads_.size(), "-", i);
        event.end.outcome = outcome_;
        events.push_back(std::move(event));
      }
      if (auto it = cursors_.find(partition); it != cursors_.end()) {
        batch.claim_next = it->second.first;
        batch.own_next = it->second.second;
      }
      read_partitions_.push_back(partition);
      reads_.push_back(std::move(args));
    }
    std::move(done)(std::move(batch));
  }
  void CheckGroups(int partition, std::vector<std::string> groups,
                   std::optional<absl::Duration> claim_idle, store::CallOptions /*options*/,
                   store::Callback<std::vector<store::GroupWork>> done) override {
    absl::StatusOr<std::vector<store::GroupWork>> answer;
    {
      absl::MutexLock lock(&mu_);
      checks_.push_back(Check{partition, groups, claim_idle});
      if (auto it = check_errors_.find(partition); it != check_errors_.end()) {
        answer = it->second;
      } else {
        answer = work_[partition];
      }
    }
    std::move(done)(std::move(answer));
  }
  void AckEvents(int partition, std::string /*group*/, std::vector<std::string> stream_ids,
                 store::CallOptions /*options*/, store::Callback<int64_t> done) override {
    const auto n = static_cast<int64_t>(stream_ids.size());
    {
      absl::MutexLock lock(&mu_);
      acks_[partition] = std::move(stream_ids);
    }
    std::move(done)(n);
  }
  void ClaimGroup(std::string group, std::string caller, int max_groups,
                  store::CallOptions /*options*/,
                  store::Callback<store::GroupClaim> done) override {
    store::GroupClaim claim;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = owners_.find(group); it != owners_.end()) {
        claim = {store::GroupClaim::Result::kRegistered, it->second, owned_[it->second]};
      } else if (owned_[caller] >= max_groups) {
        claim = {store::GroupClaim::Result::kOverLimit, caller, owned_[caller]};
      } else {
        owners_[group] = caller;
        claim = {store::GroupClaim::Result::kClaimed, caller, ++owned_[caller]};
      }
    }
    std::move(done)(std::move(claim));
  }
  void GroupOwner(std::string group, store::CallOptions /*options*/,
                  store::Callback<std::optional<std::string>> done) override {
    std::optional<std::string> owner;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = owners_.find(group); it != owners_.end()) owner = it->second;
    }
    std::move(done)(std::move(owner));
  }
  void DropGroup(std::string group, std::vector<std::string> owners, store::CallOptions /*options*/,
                 store::Callback<store::GroupDrop> done) override {
    store::GroupDrop drop;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = owners_.find(group); it != owners_.end()) {
        if (!owners.empty() &&
            std::find(owners.begin(), owners.end(), it->second) == owners.end()) {
          drop.result = store::GroupDrop::Result::kNotOwner;
        } else {
          drop = {store::GroupDrop::Result::kDropped, it->second};
          --owned_[it->second];
          owners_.erase(it);
        }
      }
    }
    std::move(done)(std::move(drop));
  }
  void DestroyGroup(int partition, std::string /*group*/, store::CallOptions /*options*/,
                    store::Callback<bool> done) override {
    {
      absl::MutexLock lock(&mu_);
      destroys_.push_back(partition);
    }
    std::move(done)(true);
  }
  using store::HoldEventLog::TrimEvents;
  void TrimEvents(int partition, store::TrimEventsArgs args, store::CallOptions /*options*/,
                  store::Callback<store::TrimEventsResult> done) override {
    store::TrimEventsResult result;
    {
      absl::MutexLock lock(&mu_);
      trims_.push_back(partition);
      consumer_idles_.push_back(args.consumer_idle);
      for (const std::string& group : trim_groups_[partition]) {
        result.groups.push_back({group, std::nullopt});
      }
    }
    std::move(done)(std::move(result));
  }

  // Scripting.
  void SetEventsPerRead(int partition, int n, store::HoldOutcome outcome) {
    absl::MutexLock lock(&mu_);
    events_per_read_[partition] = n;
    outcome_ = outcome;
  }
  // The claim_next and own_next every later read of `partition` answers ("" = the scan is done).
  void SetCursors(int partition, std::string claim_next, std::string own_next) {
    absl::MutexLock lock(&mu_);
    cursors_[partition] = {std::move(claim_next), std::move(own_next)};
  }
  void SetWork(int partition, std::vector<store::GroupWork> work) {
    absl::MutexLock lock(&mu_);
    work_[partition] = std::move(work);
  }
  void SetTrimGroups(int partition, std::vector<std::string> groups) {
    absl::MutexLock lock(&mu_);
    trim_groups_[partition] = std::move(groups);
  }
  void SetCheckError(int partition, absl::Status error) {
    absl::MutexLock lock(&mu_);
    check_errors_[partition] = std::move(error);
  }

  // What was called (taken: the next call starts afresh).
  std::vector<store::ReadEventsArgs> TakeReads() {
    absl::MutexLock lock(&mu_);
    return std::exchange(reads_, {});
  }
  std::vector<int> TakeReadPartitions() {
    absl::MutexLock lock(&mu_);
    return std::exchange(read_partitions_, {});
  }
  std::vector<int> TakeDestroys() {
    absl::MutexLock lock(&mu_);
    return std::exchange(destroys_, {});
  }
  // The consumer_idle of each TrimEvents call, in call order (taken).
  std::vector<absl::Duration> TakeConsumerIdles() {
    absl::MutexLock lock(&mu_);
    return std::exchange(consumer_idles_, {});
  }
  std::vector<int> TakeTrims() {
    absl::MutexLock lock(&mu_);
    return std::exchange(trims_, {});
  }
  std::vector<Check> TakeChecks() {
    absl::MutexLock lock(&mu_);
    return std::exchange(checks_, {});
  }
  std::map<int, std::vector<std::string>> acks() {
    absl::MutexLock lock(&mu_);
    return acks_;
  }

 private:
  const int partitions_;
  absl::Mutex mu_;
  std::map<std::string, std::string> owners_ ABSL_GUARDED_BY(mu_);  // group -> owner
  std::map<std::string, int64_t> owned_ ABSL_GUARDED_BY(mu_);       // owner -> groups
  std::vector<int> destroys_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> consumer_idles_ ABSL_GUARDED_BY(mu_);
  std::map<int, int> events_per_read_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::pair<std::string, std::string>> cursors_ ABSL_GUARDED_BY(mu_);
  store::HoldOutcome outcome_ ABSL_GUARDED_BY(mu_) = store::HoldOutcome::kPaid;
  std::map<int, std::vector<store::GroupWork>> work_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::Status> check_errors_ ABSL_GUARDED_BY(mu_);
  std::vector<store::ReadEventsArgs> reads_ ABSL_GUARDED_BY(mu_);
  std::vector<int> read_partitions_ ABSL_GUARDED_BY(mu_);
  std::vector<Check> checks_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::vector<std::string>> acks_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::vector<std::string>> trim_groups_ ABSL_GUARDED_BY(mu_);
  std::vector<int> trims_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_RECORDING_EVENT_LOG_H_
