#include "server/redis/redis_args.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"

namespace orderhold::redis {

RedisArgs::RedisArgs(std::initializer_list<absl::string_view> args) {
  size_t bytes = 0;
  for (absl::string_view arg : args) bytes += arg.size();
  Reserve(args.size(), bytes);
  for (absl::string_view arg : args) Push(arg);
}

void RedisArgs::Reserve(size_t args, size_t bytes) {
  ends_.reserve(ends_.size() + args);
  bytes_.reserve(bytes_.size() + bytes);
}

void RedisArgs::Push(absl::string_view arg) { PushCat({arg}); }

void RedisArgs::PushCat(std::initializer_list<absl::string_view> pieces) {
  for (absl::string_view piece : pieces) {
    // An empty view's data() may be null.
    if (!piece.empty()) bytes_.append(piece.data(), piece.size());
  }
  if (bytes_.size() > std::numeric_limits<uint32_t>::max()) {
    std::fputs("orderhold: RedisArgs past 4 GiB (a bug: no Redis command is that large)\n", stderr);
    std::abort();
  }
  ends_.push_back(static_cast<uint32_t>(bytes_.size()));
}

void RedisArgs::PushInt(int64_t value) {
  const absl::AlphaNum digits(value);  // formatted in its own buffer, no allocation
  Push(digits.Piece());
}

}  // namespace orderhold::redis
