-- heartbeat.lua: registers one reaper replica as alive and returns the live ones.
--
-- Why Lua: dropping the dead, refreshing this replica and reading the list must be one step so
-- every replica derives partition ownership from a consistent view (server/reaper/ownership.h).
--
-- KEYS[1]  the replica registry: sorted set, member = replica id, score = alive until (Unix ms)
-- ARGV[1]  this replica's id
-- ARGV[2]  alive for this long, ms >= 1 (renewed every reaper tick)
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {now, id_1, id_2, ...}: the live replicas, this one included, sorted by id.
local now = now_ms(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int_str(now))
redis.call('ZADD', KEYS[1], int_str(now + tonumber(ARGV[2])), ARGV[1])
local ids = redis.call('ZRANGE', KEYS[1], '0', '-1')
table.sort(ids)
table.insert(ids, 1, now)
return ids
