-- reap.lua: removes due holds of the users of one index shard, in a bounded batch.
--
-- Why Lua: finding the due users, ZREMRANGEBYSCORE on each and fixing the index must be atomic,
-- so that several OrderHold replicas reaping at once remove (and report, for the expired counter
-- and the lag histogram) each due hold exactly once.
--
-- Cluster note: the user keys are built here from ARGV[1] rather than passed in KEYS (they are
-- only known after reading the index). They share KEYS[1]'s hash tag, so every key this script
-- touches is in KEYS[1]'s hash slot.
--
-- KEYS[1]  the due index of one shard: sorted set, member = user_id, score = the user's earliest
--          expire time (Unix ms)
-- ARGV[1]  the user-key prefix of that shard; a user's key is ARGV[1] .. user_id
-- ARGV[2]  max users to visit, integer >= 1 (bounds the script's run time)
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {now, more, expire_1, expire_2, ...}: one expire time (Unix ms) per hold removed;
--          more = 1 when the batch was full (call again), else 0.
-- now_ms and set_earliest: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[3])

local limit = tonumber(ARGV[2])
local users = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local out = {now, 0}
if #users == limit then
  out[2] = 1
end
for _, user in ipairs(users) do
  local key = ARGV[1] .. user
  local due = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'WITHSCORES')
  if #due > 0 then
    for i = 2, #due, 2 do
      out[#out + 1] = tonumber(due[i])
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  end
  set_earliest(key, KEYS[1], user)
end
return out
