#include "server/store/keys.h"

#include "absl/strings/str_cat.h"

namespace orderhold::store {

int KeySchema::ShardOf(absl::string_view user_id) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : user_id) {
    hash ^= c;
    hash *= 16777619u;
  }
  return static_cast<int>(hash % kShardCount);
}

std::string KeySchema::ShardPrefix(int shard) const {
  return absl::StrCat(prefix_, ":{", shard, "}:");
}

std::string KeySchema::UserKey(absl::string_view user_id) const {
  return absl::StrCat(ShardPrefix(ShardOf(user_id)), "u:", user_id);
}

std::string KeySchema::OutcomesKey(absl::string_view user_id) const {
  return absl::StrCat(ShardPrefix(ShardOf(user_id)), "x:", user_id);
}

std::string KeySchema::EndedKey(absl::string_view user_id) const {
  return absl::StrCat(ShardPrefix(ShardOf(user_id)), "xt:", user_id);
}

std::string KeySchema::DueKey(int shard) const { return absl::StrCat(ShardPrefix(shard), "due"); }

std::string KeySchema::EventsKey(int shard) const {
  return absl::StrCat(ShardPrefix(shard), "events");
}

std::string KeySchema::LeaseKey(int shard) const {
  return absl::StrCat(ShardPrefix(shard), "lease");
}

std::string KeySchema::ReplicasKey() const { return absl::StrCat(prefix_, ":replicas"); }

}  // namespace orderhold::store
