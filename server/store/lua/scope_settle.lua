-- scope_settle.lua: the last step of scoped PlaceHolds and ExtendHolds on Redis Cluster, and the
-- drop of ended holds' entries: sets each hold's entry in its scope's index to what the user's
-- slot said, in the scope's slot. One call settles a batch of one scope's entries (the store
-- queues the settles of a scope while one of its calls is in flight: redis_hold_store.h
-- "Settles").
--
-- Why Lua: each pending record's stamp decides whether its settle still speaks for the entry (a
-- newer take since, or the sweep, own it then), and the entry, its units and the record change
-- together. The protocol: the prelude, "The scope protocol across slots".
--
-- KEYS[1..4]  as in scope_take.lua: the scope's index, its units, the partition's pending takes
--             and their ages
-- ARGV scope       the scope
-- ARGV margin      ms >= 0: the clock margin between the scope's node and the user's
-- ARGV settles...  4 elements a settle, applied in order as if one call each:
--                  member    the entry, "<quantity>:<user_id>\0<order_id>"
--                  quantity  its units, integer >= 1
--                  stamp     the take it settles: it acts only while the entry's pending record
--                            holds this stamp; "" = an end's drop, which acts whatever the record
--                            holds (a take in flight for an ended hold can only be refused or
--                            answered "ended")
--                  expire    the hold's expiry as the user's slot answered, Unix ms: the entry's
--                            score becomes expire + margin (when the entry is there); -1 = no
--                            live hold: the entry and its units are dropped
-- REPLY now int          the Redis server clock, Unix ms
-- REPLY results... int   one per settle, in order: 1 acted (the pending record, if any, is
--                        gone), 0 another take owns the entry
-- now_ms, int_str, pending_field: see the prelude (prelude/*.lua).
local live, units_key, pending, ages = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local margin = tonumber(A.margin)
local now = now_ms('')
local settles = A.settles
if #settles % 4 ~= 0 then
  error('OrderHold: settles come 4 elements each')
end

-- Every read before the first write ("Slot migrations" in the prelude): each settle's pending
-- record and whether its entry is in the index.
local records, present = {}, {}
for i = 1, #settles, 4 do
  local member = settles[i]
  local field = pending_field(A.scope, member)
  if records[field] == nil then
    records[field] = redis.call('HGET', pending, field) or false
  end
  if present[member] == nil then
    present[member] = redis.call('ZSCORE', live, member) ~= false
  end
end

-- The batch decided in order on what was read, as single calls would have acted.
local results, cleared, moved, dropped, units_dropped = {}, {}, {}, {}, 0
for i = 1, #settles, 4 do
  local member, quantity, stamp, expire = settles[i], tonumber(settles[i + 1]), settles[i + 2],
    tonumber(settles[i + 3])
  local field = pending_field(A.scope, member)
  local record = records[field]
  if stamp ~= '' and (not record or string.match(record, '^(%d+):') ~= stamp) then
    results[#results + 1] = 0
  else
    if record then
      records[field] = false
      cleared[field] = true
    end
    if expire >= 0 then
      if present[member] then
        moved[member] = expire + margin
      end
    elseif present[member] then
      present[member], moved[member], dropped[member] = false, nil, true
      units_dropped = units_dropped + quantity
    end
    results[#results + 1] = 1
  end
end

-- Writes, each key once, those that may empty it last: the pending hash keeps its counter, so it
-- never empties; the ages and the index may, and are not touched after.
local fields, scored, gone = {}, {}, {}
for field in pairs(cleared) do
  fields[#fields + 1] = field
end
for member, score in pairs(moved) do
  scored[#scored + 1] = int_str(score)
  scored[#scored + 1] = member
end
for member in pairs(dropped) do
  gone[#gone + 1] = member
end
if #fields > 0 then
  redis.call('HDEL', pending, unpack(fields))
  redis.call('ZREM', ages, unpack(fields))
end
if #scored > 0 then
  redis.call('ZADD', live, 'XX', unpack(scored))
end
if #gone > 0 then
  redis.call('ZREM', live, unpack(gone))
  if redis.call('DECRBY', units_key, int_str(units_dropped)) <= 0 then
    redis.call('DEL', units_key)
  end
end
local reply = {now}
for _, r in ipairs(results) do
  reply[#reply + 1] = r
end
return reply
