-- place_hold.lua: places one hold for one user, enforcing the per-user limit.
--
-- Why Lua and not MULTI/EXEC: the decision (already held? ended? at the limit?) depends on what
-- is read in the same step; a script runs atomically, so concurrent PlaceHolds from any number of
-- OrderHold replicas can never both take the last slot, and a hold that expired is ended (outcome
-- record + EXPIRED event) exactly once whoever notices it first.
--
-- KEYS[1]  the user's holds: sorted set, member = order_id, score = expire time (Unix ms)
-- KEYS[2]  the due index of the user's partition: sorted set, member = user_id, score = the user's
--          earliest expire time (Unix ms)
-- KEYS[3]  the user's outcome records (hash, see end_hold in prelude.lua)
-- KEYS[4]  the user's ended orders by end time (sorted set, see end_hold)
-- KEYS[5]  the partition's event stream
--          All five share the user's hash tag.
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  order_id
-- ARGV[3]  ttl, integer ms >= 1
-- ARGV[4]  max_holds, integer >= 1
-- ARGV[5]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[6]  outcome retention, ms >= 1
-- ARGV[7]  max outcome records per user, >= 1
-- Returns  {result, now, expire, active, removed, ended_outcome, ended_at}
--          result  1 created (expire = now + ttl), 0 already held (expire = the existing hold's,
--                  not extended), -1 limit reached (expire = the earliest live hold's),
--                  -2 the order's hold already ended (expire = that hold's; ended_outcome =
--                  1 PAID, 2 CANCELLED, 3 EXPIRED; ended_at = its end, Unix ms): nothing placed
--          now     the instant used, Unix ms
--          active  live holds after the call
--          removed holds found no longer live and ended as EXPIRED (each with its event)
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in prelude.lua)
-- A hold is live while its score > now.
-- Helpers (now_ms, due_holds, first_live, set_due, expire_due, end_hold, trim_outcomes,
-- outcome_of): see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[5])
local k = {holds = KEYS[1], due = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5]}
local user, order = ARGV[1], ARGV[2]
local retention, max_records = tonumber(ARGV[6]), tonumber(ARGV[7])

-- Every read before the first write (see "Slot migrations" in prelude.lua).
local due = due_holds(k.holds, now)
local removed = #due / 2
local active = redis.call('ZCARD', k.holds) - removed
local existing = redis.call('ZSCORE', k.holds, order)
local live = first_live(k.holds, now)
if existing and tonumber(existing) <= now then
  existing = nil  -- in `due`: ended as EXPIRED below
end
local record = not existing and redis.call('HGET', k.outcomes, order)

local result, expire
local ended_outcome, ended_at = 0, 0
if existing then
  result, expire = 0, tonumber(existing)
else
  local outcome, end_ms, ended_expire = outcome_of(order, due, record, now, retention)
  if outcome then
    result, expire, ended_outcome, ended_at = -2, ended_expire, outcome, end_ms
  elseif active >= tonumber(ARGV[4]) then
    result, expire = -1, tonumber(live[2])
  else
    result, expire = 1, now + tonumber(ARGV[3])
    -- Before the expired holds are removed, so the holds key is never emptied on the way.
    redis.call('ZADD', k.holds, expire, order)
    active = active + 1
  end
end

if removed > 0 then
  expire_due(k, user, now, due)
  trim_outcomes(k, now, retention, max_records)
end
-- Keep the due index at the user's earliest expiry so the reaper finds the user when it is due.
if removed > 0 or result == 1 then
  local earliest = live[2]
  if result == 1 and (not earliest or expire < tonumber(earliest)) then
    earliest = expire
  end
  set_due(k.due, user, earliest)
end
return {result, now, expire, active, removed, ended_outcome, ended_at}
