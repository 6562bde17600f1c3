// StoredHoldsCommand: a command that reads a user's live holds as the store keeps them (the user's
// field of its holds bucket, packed: server/store/lua/prelude/ pack_holds), for tests that look
// at Redis directly. Send it with a fixture's Command() (tests/testing/redis_server.h, or a
// cluster node's: the command names the holds bucket as its key, so it routes as the user's
// scripts do). What it answers:
//   what = "score"   the expire time of `order` (Unix ms, decimal), or (nil) when not held
//   what = "count"   the number of holds (an integer; 0 for a user with none)
//   what = "orders"  the order ids, earliest expiry first (one per line as Command() prints them)
// Thread-safe (builds a vector).
#ifndef ORDERHOLD_TESTS_TESTING_STORED_HOLDS_H_
#define ORDERHOLD_TESTS_TESTING_STORED_HOLDS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/store/keys.h"

namespace orderhold::testing {

inline std::vector<std::string> StoredHoldsCommand(const store::KeySchema& keys,
                                                   absl::string_view user, absl::string_view what,
                                                   absl::string_view order = "") {
  static constexpr char kScript[] = R"lua(
local v, holds, pos = redis.call('HGET', KEYS[1], ARGV[1]), {}, 1
while v and pos <= #v do
  local order, expire, n, _
  order, expire, _, _, _, n, pos = struct.unpack('>Bc0dddI4B', v, pos)
  for _ = 1, n do
    _, pos = struct.unpack('>Bc0', v, pos)
  end
  _, pos = struct.unpack('>Hc0', v, pos)
  holds[#holds + 1] = {order, expire}
end
if ARGV[2] == 'count' then
  return #holds
end
if ARGV[2] == 'orders' then
  local out = {}
  for i, h in ipairs(holds) do
    out[i] = h[1]
  end
  return out
end
for _, h in ipairs(holds) do
  if h[1] == ARGV[3] then
    return string.format('%d', h[2])
  end
end
return false
)lua";
  return {"EVAL",
          kScript,
          "1",
          keys.HoldsBucketKey(user),
          std::string(user),
          std::string(what),
          std::string(order)};
}

}  // namespace orderhold::testing

#endif  // ORDERHOLD_TESTS_TESTING_STORED_HOLDS_H_
