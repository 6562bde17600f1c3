#include "server/store/keys.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace orderhold::store {

namespace {

// FNV-1a, 32 bits (http://www.isthe.com/chongo/tech/comp/fnv/).
uint32_t Fnv1a32(absl::string_view s) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : s) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

}  // namespace

int KeySchema::PartitionOf(absl::string_view user_id) {
  return static_cast<int>(Fnv1a32(user_id) % kPartitionCount);
}

int KeySchema::DueBucketOf(absl::string_view user_id) {
  return static_cast<int>(Fnv1a32(user_id) / kPartitionCount % kDueBucketCount);
}

KeySchema::KeySchema(std::string prefix) : prefix_(std::move(prefix)) {
  partition_prefixes_.reserve(kPartitionCount);
  for (int partition = 0; partition < kPartitionCount; ++partition) {
    partition_prefixes_.push_back(absl::StrCat(prefix_, ":{", partition, "}:"));
  }
  buckets_.reserve(kDueBucketCount);
  for (int bucket = 0; bucket < kDueBucketCount; ++bucket) {
    buckets_.push_back(absl::StrCat(bucket));
  }
}

std::string KeySchema::Pieces::Join() const { return absl::StrCat(partition_prefix, kind, id); }

KeySchema::UserKeys KeySchema::ForUser(absl::string_view user_id) const {
  const uint32_t hash = Fnv1a32(user_id);
  UserKeys keys;
  keys.partition = static_cast<int>(hash % kPartitionCount);
  keys.bucket = static_cast<int>(hash / kPartitionCount % kDueBucketCount);
  const std::string& prefix = PartitionPrefix(keys.partition);
  const std::string& bucket = buckets_[static_cast<size_t>(keys.bucket)];
  keys.holds_bucket = {prefix, "h:", bucket};
  keys.due_bucket = {prefix, "hd:", bucket};
  keys.outcomes = {prefix, "x:", user_id};
  keys.ended = {prefix, "xt:", user_id};
  keys.events = {prefix, "events", {}};
  keys.bucket_index = {prefix, "bdue", {}};
  return keys;
}

KeySchema::Pieces KeySchema::BucketIndexKeyPieces(int partition) const {
  return {PartitionPrefix(partition), "bdue", {}};
}

KeySchema::Pieces KeySchema::EventsKeyPieces(int partition) const {
  return {PartitionPrefix(partition), "events", {}};
}

std::string KeySchema::LeaseKey(int partition) const {
  return absl::StrCat(PartitionPrefix(partition), "lease");
}

std::string KeySchema::NudgeChannel(int partition) const {
  return absl::StrCat(PartitionPrefix(partition), "nudge");
}

std::string KeySchema::ReaperChannel(int partition) const {
  return absl::StrCat(PartitionPrefix(partition), "reaper");
}

std::string KeySchema::ReplicasKey() const { return absl::StrCat(prefix_, ":replicas"); }
std::string KeySchema::GroupOwnersKey() const { return absl::StrCat(prefix_, ":{groups}:owners"); }
std::string KeySchema::GroupCountsKey() const { return absl::StrCat(prefix_, ":{groups}:counts"); }

absl::Status ValidateKeyPrefix(absl::string_view prefix) {
  if (prefix.empty() || prefix.size() > 64) {
    return absl::InvalidArgumentError("key_prefix: must be 1-64 bytes");
  }
  for (unsigned char c : prefix) {
    if (c <= 0x20 || c == 0x7f || c == '{' || c == '}') {
      return absl::InvalidArgumentError(
          "key_prefix: must not contain '{', '}', spaces or control characters");
    }
  }
  return absl::OkStatus();
}

}  // namespace orderhold::store
