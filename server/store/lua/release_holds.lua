-- release_holds.lua: ends every live hold of one user, or of one of its scopes, as CANCELLED
-- (ReleaseHolds: a logout, "start over").
--
-- Why Lua: one atomic step against a concurrent PlaceHold of the same user, whose script runs
-- wholly before or after this one: its hold is then released, or live afterwards and counted.
--
-- KEYS[1..6]  as in place_hold.lua: the user's holds bucket, its due-index bucket, the user's
--             outcome records (hash) and ended orders (sorted set), the partition's event stream,
--             the partition's bucket index
-- ARGV user     user_id (the member of KEYS[2])
-- ARGV scope    "" = every live hold of the user
-- ARGV now      Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV store    the store's constants, packed (store_of in the prelude): the outcome retention
--               and record bound, the stream's length bound, and the scope index (an ended scoped
--               hold's entry is dropped there)
-- REPLY now int         the instant used, Unix ms
-- REPLY removed int     holds found no longer live and ended as EXPIRED (each with its event; not
--                       listed)
-- REPLY released array  the released holds, earliest expiry first, 4 elements each: {order,
--                       expire, details, life}: each ended CANCELLED at now with its event; expire
--                       as Unix ms; details and life records "" when the hold has none
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6], maxlen = store.maxlen, maxbytes = store.maxbytes, index = store.index,
           store = store}
local user, scope = A.user, A.scope
local retention, max_records = store.retention, store.records

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
