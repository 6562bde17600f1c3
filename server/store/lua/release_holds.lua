-- release_holds.lua: ends every live hold of one user, or of one of its scopes, as CANCELLED
-- (ReleaseHolds: a logout, "start over").
--
-- Why Lua: one atomic step against a concurrent PlaceHold of the same user, whose script runs
-- wholly before or after this one: its hold is then released, or live afterwards and counted.
--
-- KEYS[1..6]  as in place_hold.lua: the user's holds bucket, its due-index bucket, the user's
--             outcome records (hash) and ended orders (sorted set), the partition's event stream,
--             the partition's bucket index
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  scope; "" = every live hold of the user
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[4]  outcome retention, ms >= 1
-- ARGV[5]  max outcome records per user, >= 1
-- ARGV[6]  the partition's event stream length bound (--event_stream_max_len): each XADD trims the
--          stream to about this many entries (MAXLEN ~); 0 = no length bound
-- ARGV[7]  the scope index's key start, "<prefix>:{" (the prelude "The scope index"): an ended
--          scoped hold's entry is dropped there; "" = the store keeps none
-- Returns  {now, removed, {order_1, expire_1, details_1, life_1, order_2, ...}}
--          removed  holds found no longer live and ended as EXPIRED (each with its event; not
--                   listed)
--          then the released holds, earliest expiry first: each ended CANCELLED at now with its
--          event; expire as Unix ms; details and life records "" when the hold has none
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(ARGV[3])
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6]}
k.maxlen = tonumber(ARGV[6])
k.index = ARGV[7] ~= '' and ARGV[7] or nil
local user, scope = ARGV[1], ARGV[2]
local retention, max_records = tonumber(ARGV[4]), tonumber(ARGV[5])

local holds = load_holds(k, user, true)
local due, released, stay = {}, {}, {}
for _, h in ipairs(holds) do
  if h.expire <= now then
    due[#due + 1] = h
  else
    local _, s = quantity_scope(h.details, h.expire)
    if scope == '' or s == scope then
      released[#released + 1] = h
    else
      stay[#stay + 1] = h
    end
  end
end

local out = {}
if #due + #released > 0 then
  save_holds(k, user, true, stay)
  for _, h in ipairs(due) do
    end_hold(k, user, h, EXPIRED, h.expire)
  end
  for _, h in ipairs(released) do
    end_hold(k, user, h, CANCELLED, now)
    out[#out + 1] = h.order
    out[#out + 1] = h.expire
    out[#out + 1] = h.details or ''
    out[#out + 1] = h.life or ''
  end
  trim_outcomes(k, now, retention, max_records)
  set_due(k, user, stay[1] and stay[1].expire)
end
return {now, #due, out}
