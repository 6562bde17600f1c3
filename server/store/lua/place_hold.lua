-- place_hold.lua: places one hold for one user, enforcing the per-user limit.
--
-- Why Lua and not MULTI/EXEC: the decision (already held? at the limit?) depends on what is read
-- in the same step; a script runs atomically, so concurrent PlaceHolds from any number of
-- OrderHold replicas can never both take the last slot.
--
-- KEYS[1]  the user's holds: sorted set, member = order_id, score = expire time (Unix ms)
-- KEYS[2]  the due index of the user's shard: sorted set, member = user_id, score = the user's
--          earliest expire time (Unix ms). Same hash tag as KEYS[1].
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  order_id
-- ARGV[3]  ttl, integer ms >= 1
-- ARGV[4]  max_holds, integer >= 1
-- ARGV[5]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {outcome, now, expire, active, removed}
--          outcome  1 created (expire = now + ttl), 0 already held (expire = the existing hold's,
--                   not extended), -1 limit reached (expire = the earliest live hold's)
--          now      the instant used, Unix ms
--          active   live holds after the call
--          removed  holds found no longer live (score <= now) and removed
-- A hold is live while its score > now.
-- now_ms and set_earliest: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[5])

local removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local active = redis.call('ZCARD', KEYS[1])
local existing = redis.call('ZSCORE', KEYS[1], ARGV[2])
local outcome, expire
if existing then
  outcome, expire = 0, tonumber(existing)
elseif active >= tonumber(ARGV[4]) then
  outcome = -1
  expire = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
else
  outcome, expire = 1, now + tonumber(ARGV[3])
  redis.call('ZADD', KEYS[1], expire, ARGV[2])
  active = active + 1
end

-- Keep the due index at the user's earliest expiry so the reaper finds the user when it is due.
if removed > 0 or outcome == 1 then
  set_earliest(KEYS[1], KEYS[2], ARGV[1])
end
return {outcome, now, expire, active, removed}
