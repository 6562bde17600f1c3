-- heartbeat.lua: registers one reaper replica as alive and returns the live ones.
--
-- Why Lua: dropping the dead, refreshing this replica and reading the list must be one step so
-- every replica derives partition ownership from a consistent view (server/reaper/ownership.h).
--
-- KEYS[1]  the replica registry: sorted set, member = replica id, score = alive until (Unix ms)
-- ARGV replica   this replica's id
-- ARGV alive     alive for this long, ms >= 1 (renewed every reaper tick)
-- ARGV now       Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- REPLY now int      the instant used, Unix ms
-- REPLY ids... str   the live replicas, this one included, sorted by id
local now = now_ms(A.now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int_str(now))
redis.call('ZADD', KEYS[1], int_str(now + tonumber(A.alive)), A.replica)
local ids = redis.call('ZRANGE', KEYS[1], '0', '-1')
table.sort(ids)
table.insert(ids, 1, now)
return ids
