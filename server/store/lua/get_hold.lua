-- get_hold.lua: one hold, live or ended (GetHold). Read-only.
--
-- Why Lua: the answer depends on the Redis server clock (TIME): a hold past its expiry that the
-- reaper has not removed yet must read as EXPIRED at its expire time, exactly as it will once
-- reaped, so the answer is the same before and after the reaper on every replica.
--
-- KEYS[1]  the user's holds bucket (as in place_hold.lua)
-- KEYS[2]  the user's outcome records, with its ended holds' details and life records (hash, see
--          the prelude)
-- ARGV user       user_id (its field in KEYS[1])
-- ARGV order      order_id
-- ARGV now        Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV store      the store's constants, packed (store_of in the prelude): an end at or before
--                 now - its outcome retention is forgotten
-- REPLY state int     1 live (expire = its expiry; outcome, end = 0); 2 ended: outcome, end and
--                     expire; a hold of the user with expire <= now is EXPIRED; 0 unknown (never
--                     placed, or ended longer ago than the retention)
-- REPLY now int       the instant used, Unix ms
-- REPLY expire int    the hold's expiry, Unix ms (0 when unknown)
-- REPLY outcome int   state 2: 1 PAID, 2 CANCELLED, 3 EXPIRED; else 0
-- REPLY end int       state 2: the end, Unix ms (for EXPIRED the expire time); else 0
-- REPLY details str   the hold's details (the prelude), "" when it has none
-- REPLY life str      the hold's life record, "" when it has none
-- REPLY reference str  state 2, PAID with a payment reference: that reference; else ""
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], outcomes = KEYS[2], store = store}
local order, retention = A.order, store.retention
local due = {}  -- the order's hold, when it is no longer live (EXPIRED at its expire time)
for _, h in ipairs(load_holds(k, A.user, false)) do
  if h.order == order then
    if h.expire > now then
      return {1, now, h.expire, 0, 0, h.details or '', h.life or '', ''}
    end
    due = {h}
  end
end
local details, life, ref  -- an ended hold's: its own when due, else its records in k.outcomes
if due[1] then
  details, life = due[1].details, due[1].life
else
  details, life = records_of_order(k, order)
  ref = redis.call('HGET', k.outcomes, REF .. order)
end
local outcome, end_ms, expire = outcome_of(order, due, not due[1] and
  redis.call('HGET', k.outcomes, order), now, retention)
if outcome then
  return {2, now, expire, outcome, end_ms, details_for(details, expire) or '',
    details_for(life, expire) or '', outcome == PAID and reference_for(ref, expire) or ''}
end
return {0, now, 0, 0, 0, '', '', ''}
