-- pay.lua: pays (removes) one live hold.
--
-- Why Lua: "is it live?" and the ZREM must be one atomic step, or a hold could be paid in the
-- millisecond after it expired, or paid twice by two replicas.
--
-- KEYS[1]  the user's holds (see place_hold.lua)
-- KEYS[2]  the due index of the user's shard (see place_hold.lua)
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  order_id
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {1, now, expire} when the live hold was removed (expire = its expire time, Unix ms);
--          {0, now} when there is no live hold for order_id (never placed, paid, or expired: an
--          expired hold is left for the reaper and never paid).
-- now_ms and set_earliest: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[3])

local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score or tonumber(score) <= now then
  return {0, now}
end
redis.call('ZREM', KEYS[1], ARGV[2])

set_earliest(KEYS[1], KEYS[2], ARGV[1])
return {1, now, tonumber(score)}
