-- scope_settle.lua: the last step of a scoped PlaceHold or ExtendHold on Redis Cluster, and the
-- drop of an ended hold's entry: sets the hold's entry in its scope's index to what the user's
-- slot said, in the scope's slot.
--
-- Why Lua: the pending record's stamp decides whether this step still speaks for the entry (a
-- newer take since, or the sweep, own it then), and the entry, its units and the record change
-- together. The protocol: the prelude, "The scope protocol across slots".
--
-- KEYS[1..4]  as in scope_take.lua: the scope's index, its units, the partition's pending takes
--             and their ages
-- ARGV scope     the scope
-- ARGV member    the entry, "<quantity>:<user_id>\0<order_id>"
-- ARGV quantity  its units, integer >= 1
-- ARGV stamp     the take this step settles: it acts only while the entry's pending record holds
--                this stamp; "" = an end's drop, which acts whatever the record holds (a take in
--                flight for an ended hold can only be refused or answered "ended")
-- ARGV expire    the hold's expiry as the user's slot answered, Unix ms: the entry's score becomes
--                expire + margin; -1 = no live hold: the entry and its units are dropped
-- ARGV margin    ms >= 0: the clock margin between the scope's node and the user's
-- REPLY result int  1 acted (the pending record, if any, is gone), 0 another take owns the entry
-- REPLY now int     the Redis server clock, Unix ms
-- now_ms, int_str, scope_drop's keys, pending_field: see the prelude (prelude/*.lua).
local live, units_key, pending, ages = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local field = pending_field(A.scope, A.member)
local now = now_ms('')

-- Every read before the first write ("Slot migrations" in the prelude).
local record = redis.call('HGET', pending, field)
if A.stamp ~= '' and (not record or string.match(record, '^(%d+):') ~= A.stamp) then
  return {0, now}
end
local expire = tonumber(A.expire)
-- The record first: the pending hash keeps its counter, so it never empties; the ages and the
-- index may, and are not touched again after.
if record then
  redis.call('HDEL', pending, field)
  redis.call('ZREM', ages, field)
end
if expire >= 0 then
  redis.call('ZADD', live, 'XX', int_str(expire + tonumber(A.margin)), A.member)
elseif redis.call('ZREM', live, A.member) == 1 and
    redis.call('DECRBY', units_key, A.quantity) <= 0 then
  redis.call('DEL', units_key)
end
return {1, now}
