-- scope_pending.lua: the sweep's look at a scope partition's pending takes (Redis Cluster; the
-- prelude, "The scope protocol across slots"): those older than `age`, whose settle has not come.
--
-- Why Lua: the age is measured on the scope node's clock, the one the takes were stamped with,
-- and each record's stamp is read at the same instant. Read-only.
--
-- KEYS[1]  the partition's pending takes, "<prefix>:{<p>}:sp" (scope_take.lua's KEYS[3])
-- KEYS[2]  their ages, "<prefix>:{<p>}:spt" (scope_take.lua's KEYS[4])
-- ARGV age    ms >= 0: records taken at or before now - age are listed
-- ARGV now    Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV limit  records listed at most, >= 1
-- REPLY now int     the instant used, Unix ms
-- REPLY total int   the partition's pending records, old or not
-- REPLY oldest int  the oldest record's take, Unix ms; -1 when none
-- REPLY page array  2 elements a record: its field "<scope>\0<member>" and "<stamp>:<take ms>"
-- now_ms, int_str: see the prelude (prelude/*.lua).
local now = now_ms(A.now)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', int_str(now - tonumber(A.age)), 'LIMIT',
  '0', A.limit)
local page = {}
for _, field in ipairs(old) do
  local record = redis.call('HGET', KEYS[1], field)
  if record then
    page[#page + 1] = field
    page[#page + 1] = record
  end
end
local first = redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')
return {now, redis.call('ZCARD', KEYS[2]), first[2] and tonumber(first[2]) or -1, page}
