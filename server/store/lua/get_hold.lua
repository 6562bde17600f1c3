-- get_hold.lua: one hold, live or ended (GetHold). Read-only.
--
-- Why Lua: the answer depends on the Redis server clock (TIME): a hold past its expiry that the
-- reaper has not removed yet must read as EXPIRED at its expire time, exactly as it will once
-- reaped, so the answer is the same before and after the reaper on every replica.
--
-- KEYS[1]  the user's holds (see place_hold.lua)
-- KEYS[2]  the user's outcome records, hold details and life records (hash, see prelude.lua)
-- ARGV[1]  order_id
-- ARGV[2]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[3]  outcome retention, ms >= 1: an end at or before now - retention is forgotten
-- Returns  {state, now, expire, outcome, end, details, life}
--          state   1 live (expire = its expiry; outcome, end = 0)
--                  2 ended: outcome (1 PAID, 2 CANCELLED, 3 EXPIRED), end (Unix ms; for EXPIRED
--                    the expire time) and expire; a hold in KEYS[1] with expire <= now is EXPIRED
--                  0 unknown (never placed, or ended longer ago than the retention)
--          details, life  the hold's (prelude.lua), "" when it has none
-- Helpers: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[2])
local k = {outcomes = KEYS[2]}
local order, retention = ARGV[1], tonumber(ARGV[3])
local score = redis.call('ZSCORE', KEYS[1], order)
local details, life = records_of_order(k, order)
if score and tonumber(score) > now then
  return {1, now, tonumber(score), 0, 0, details_for(details, score) or '',
    details_for(life, score) or ''}
end
local due = {}
if score then
  due = {order, score}
end
local outcome, end_ms, expire = outcome_of(order, due, not score and
  redis.call('HGET', k.outcomes, order), now, retention)
if outcome then
  return {2, now, expire, outcome, end_ms, details_for(details, expire) or '',
    details_for(life, expire) or ''}
end
return {0, now, 0, 0, 0, '', ''}
