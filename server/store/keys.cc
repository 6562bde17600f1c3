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

std::string KeySchema::UserKeyPrefix(int shard) const {
  return absl::StrCat(prefix_, ":{", shard, "}:u:");
}

std::string KeySchema::UserKey(absl::string_view user_id) const {
  return absl::StrCat(UserKeyPrefix(ShardOf(user_id)), user_id);
}

std::string KeySchema::DueKey(int shard) const {
  return absl::StrCat(prefix_, ":{", shard, "}:due");
}

}  // namespace orderhold::store
