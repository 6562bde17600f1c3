// RedisArgs: a command's arguments packed into one buffer.
//
// A std::vector<std::string> costs one allocation per argument longer than the string's inline
// room (15 bytes in libstdc++), and every OrderHold key is longer ("orderhold:{17}:u:<id>"): a
// PlaceHold has 7 keys. RedisArgs keeps every argument's bytes back to back in one string and
// their end offsets inline, so a command of up to kInlineArgs arguments costs one allocation for
// its bytes (none when they fit the string's own room). An argument can be written as the
// concatenation of pieces (PushCat), so a key is built in place instead of as a string of its own
// (callgrind figures: tests/bench/README.md "Packed command arguments").
//
// Arguments are binary-safe: any bytes, empty ones too; at most 4 GiB in all (32-bit offsets; a
// Redis argument is at most 512 MB, proto-max-bulk-len). A push past 4 GiB is a bug, not input:
// it aborts the process with a message instead of wrapping an offset.
//
// Thread-safety: a value type; const methods may be called concurrently, others not.
#ifndef ORDERHOLD_SERVER_REDIS_REDIS_ARGS_H_
#define ORDERHOLD_SERVER_REDIS_REDIS_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"

namespace orderhold::redis {

class RedisArgs {
 public:
  // Arguments whose end offsets are held without an allocation of their own (PlaceHold sends
  // numkeys + 7 keys + 15 ARGV = 23).
  static constexpr size_t kInlineArgs = 24;

  RedisArgs() = default;
  // The arguments `args`, copied: {"GET", key}. Implicit, so that a braced list of strings is a
  // command's arguments (RedisCommand{RedisCommand::kNoScript, {"GET", key}}).
  RedisArgs(std::initializer_list<absl::string_view> args);  // NOLINT(google-explicit-constructor)
  // Makes room for `args` more arguments of `bytes` bytes in all, so that the pushes that follow
  // allocate nothing.
  void Reserve(size_t args, size_t bytes);
  // Appends one argument, copied.
  void Push(absl::string_view arg);
  // Appends one argument made of `pieces` concatenated (as absl::StrCat would, without the
  // temporary string): PushCat({partition_prefix, "u:", user_id}). The pieces must not view this
  // object's own arguments (an append may move them).
  void PushCat(std::initializer_list<absl::string_view> pieces);
  // Appends one argument: `value` in decimal ("-12").
  void PushInt(int64_t value);

  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }
  // The bytes of every argument together (for sizing a buffer that holds them all).
  size_t bytes() const { return bytes_.size(); }
  // Argument `i`, 0 <= i < size(): a view valid until the next non-const call.
  absl::string_view operator[](size_t i) const {
    const size_t begin = i == 0 ? 0 : ends_[i - 1];
    return absl::string_view(bytes_.data() + begin, ends_[i] - begin);
  }

  // Calls `visit(absl::string_view arg)` for each argument in order: a walk over the packed
  // buffer, cheaper than operator[] per index.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    size_t begin = 0;
    for (const uint32_t end : ends_) {
      visit(absl::string_view(bytes_.data() + begin, end - begin));
      begin = end;
    }
  }

  // Element-wise equality: the same arguments, in the same order.
  friend bool operator==(const RedisArgs& a, const RedisArgs& b) {
    return a.ends_ == b.ends_ && a.bytes_ == b.bytes_;
  }

 private:
  std::string bytes_;                                // every argument, back to back
  absl::InlinedVector<uint32_t, kInlineArgs> ends_;  // end offset of each in bytes_
};

}  // namespace orderhold::redis

#endif  // ORDERHOLD_SERVER_REDIS_REDIS_ARGS_H_
