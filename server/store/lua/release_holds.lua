-- release_holds.lua: ends every live hold of one user, or of one of its scopes, as CANCELLED
-- (ReleaseHolds: a logout, "start over").
--
-- Why Lua: one atomic step against a concurrent PlaceHold of the same user, whose script runs
-- wholly before or after this one: its hold is then released, or live afterwards and counted.
--
-- KEYS[1..6]  as in place_hold.lua: the user's holds, its due-index bucket, the user's outcome
--             records, hold details and life records (hash) and ended orders (sorted set), the
--             partition's event stream, the partition's bucket index
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  scope; "" = every live hold of the user
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[4]  outcome retention, ms >= 1
-- ARGV[5]  max outcome records per user, >= 1
-- Returns  {now, removed, {order_1, expire_1, details_1, life_1, order_2, ...}}
--          removed  holds found no longer live and ended as EXPIRED (each with its event; not
--                   listed)
--          then the released holds, earliest expiry first: each ended CANCELLED at now with its
--          event; expire as Unix ms; details and life records "" when the hold has none
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in prelude.lua)
-- Helpers: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[3])
local k = {holds = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6]}
local user, scope = ARGV[1], ARGV[2]
local retention, max_records = tonumber(ARGV[4]), tonumber(ARGV[5])

-- Every read before the first write (see "Slot migrations" in prelude.lua).
local all = redis.call('ZRANGE', k.holds, 0, -1, 'WITHSCORES')
local due, released, ended = {}, {}, {}  -- {order, expire, details} each; ended: both orders
local earliest  -- the earliest expiry among the holds that stay
for i = 1, #all, 2 do
  local order, expire = all[i], all[i + 1]
  local details = details_of_order(k, order)
  if tonumber(expire) <= now then
    due[#due + 1] = {order, expire, details}
    ended[#ended + 1] = order
  else
    local _, s = quantity_scope(details, expire)
    if scope == '' or s == scope then
      released[#released + 1] = {order, expire, details, details_for(
        redis.call('HGET', k.outcomes, LIFE .. order), expire) or ''}
      ended[#ended + 1] = order
    else
      earliest = earliest or expire
    end
  end
end

local out = {}
for _, h in ipairs(due) do
  end_hold(k, user, h[1], EXPIRED, h[2], h[2], h[3])
end
for _, h in ipairs(released) do
  end_hold(k, user, h[1], CANCELLED, h[2], now, h[3])
  out[#out + 1] = h[1]
  out[#out + 1] = h[2]
  out[#out + 1] = details_for(h[3], h[2]) or ''
  out[#out + 1] = h[4]
end
if #ended > 0 then
  -- In chunks (unpack's stack limit); only the last can empty the key, and nothing touches it
  -- afterwards ("Slot migrations").
  for i = 1, #ended, 1000 do
    redis.call('ZREM', k.holds, unpack(ended, i, math.min(i + 999, #ended)))
  end
  trim_outcomes(k, now, retention, max_records)
  set_due(k, user, earliest)
end
return {now, #due, out}
