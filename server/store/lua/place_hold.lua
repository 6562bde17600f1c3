-- place_hold.lua: places one hold for one user, enforcing every limit that applies to it.
--
-- Why Lua and not MULTI/EXEC: the decision (already held? ended? over a limit?) depends on what
-- is read in the same step; a script runs atomically, so concurrent PlaceHolds from any number of
-- OrderHold replicas can never both take the last slot, and a hold that expired is ended (outcome
-- record + EXPIRED event) exactly once whoever notices it first.
--
-- Limits: the user's live holds (ARGV[4]) and units (ARGV[8]) and, for a scope (ARGV[9]), the
-- user's live holds and units in that scope (ARGV[11], ARGV[12]) are all checked against sums over
-- the user's live holds before anything is written: all pass and the hold is recorded, or nothing
-- is. No counters: usage is always what the live holds say, so nothing drifts or needs repair.
-- A scope's totals across users (ARGV[17], ARGV[18]) are checked against the scope index
-- (the prelude "The scope index"), in the same step: every hold with a scope is entered there
-- when the store keeps an index (ARGV[16]), with or without a total, so a total added later counts
-- the holds already live. Its units are a counter beside the entries, kept exact by every script
-- that adds or drops an entry.
--
-- KEYS[1]  the user's holds bucket (<prefix>:{<partition>}:h:<bucket>, keys.h): hash, field =
--          user_id, value = its live holds, packed (see pack_holds in the prelude)
-- KEYS[2]  the due index of the user's bucket (<prefix>:{<partition>}:hd:<bucket>, keys.h): sorted
--          set, member = user_id, score = the user's earliest expire time (Unix ms)
-- KEYS[3]  the user's outcome records (hash, see end_hold in the prelude), with its ended holds'
--          details and life records
-- KEYS[4]  the user's ended orders by end time (sorted set, see end_hold)
-- KEYS[5]  the partition's event stream
-- KEYS[6]  the partition's bucket index: sorted set, member = bucket, score = the earliest score in
--          that bucket's due index, or earlier (set_due in the prelude)
--          All six share the user's hash tag.
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  order_id
-- ARGV[3]  ttl, integer ms >= 1
-- ARGV[4]  max_holds, integer >= 1: the user's live holds, at most
-- ARGV[5]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[6]  outcome retention, ms >= 1
-- ARGV[7]  max outcome records per user, >= 1
-- ARGV[8]  max_units, integer >= 0: the user's live units (sum of quantities), at most; 0 = none
-- ARGV[9]  scope; "" = unscoped (ARGV[11] and ARGV[12] are then ignored)
-- ARGV[10] quantity, integer >= 1
-- ARGV[11] the scope's max_holds, integer >= 0; 0 = none
-- ARGV[12] the scope's max_units, integer >= 0; 0 = none
-- ARGV[13] the hold's details from the quantity on (hold_details_codec.h), stored as
--          "<expire>:<now>:" .. ARGV[13]; "" for a plain hold (no scope, quantity 1, no labels):
--          no details are stored (only its life record, ARGV[14])
-- ARGV[14] the hold's lifetime cap, ms >= 1 (--max_hold_lifetime): its life record (LIFE in
--          the prelude) is "<expire>:<now>:<max(expire, now + ARGV[14])>:0:0:" (a ttl longer than
--          the lifetime makes the expiry the cap)
-- ARGV[15] the partition's event stream length bound (--event_stream_max_len): each XADD trims the
--          stream to about this many entries (MAXLEN ~); 0 = no length bound
-- ARGV[16] the scope index's key start, "<prefix>:{" (the prelude "The scope index"); "" = the
--          store keeps none (Redis Cluster): ARGV[17] and ARGV[18] must then be 0
-- ARGV[17] the scope's total_max_holds, integer >= 0: its live holds across every user, at most;
--          0 = none
-- ARGV[18] the scope's total_max_units, integer >= 0: their units, at most; 0 = none
-- Returns  {result, now, expire, active, removed, ended_outcome, ended_at, units, scope_holds,
--           scope_units, violations, details, life, total_holds, total_units}
--          result  1 created (expire = now + ttl), 0 already held (expire = the existing hold's,
--                  not extended), -1 a limit would be exceeded (expire = the earliest instant at
--                  which every exceeded level has had its earliest live hold expire),
--                  -2 the order's hold already ended (expire = that hold's; ended_outcome =
--                  1 PAID, 2 CANCELLED, 3 EXPIRED; ended_at = its end, Unix ms): nothing placed
--          now     the instant used, Unix ms
--          active  live holds after the call
--          removed holds found no longer live and ended as EXPIRED (each with its event)
--          units, scope_holds, scope_units: the user's live units, and its live holds and units in
--                  the scope (0 when unscoped), after the call
--          violations (result -1): the exceeded levels, bits: 1 user holds, 2 user units,
--                  4 scope holds, 8 scope units, 16 the scope's total holds, 32 its total units
--                  (for those two, expire counts the scope's earliest live hold across users)
--          details result 1: the new hold's details ("" for a plain hold); 0: the existing hold's
--                  ("" when it has none); else ""
--          life    results 1 and 0: the hold's life record; else ""
--          total_holds, total_units: the scope's live holds and units across every user after
--                  the call, when it has a total (ARGV[17] or ARGV[18] > 0) and a new hold was
--                  decided (results 1 and -1); else 0
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- A hold is live while its score > now.
-- Helpers (now_ms, load_holds, split_due, save_holds, quantity_scope, set_due, expire_due,
-- trim_outcomes, outcome_of): see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(ARGV[5])
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6]}
k.maxlen = tonumber(ARGV[15])
k.index = ARGV[16] ~= '' and ARGV[16] or nil
local user, order = ARGV[1], ARGV[2]
local scope = ARGV[9]
-- The other numbers of ARGV are parsed (tonumber: strtod, ~0.1 µs each) on the paths that use
-- them: the limits only to decide a new hold, the retention only when something is written or an
-- ended order is looked up. An "already held" answer that ends no other hold (a client's retry)
-- parses none of them.

-- Every read before the first write (see "Slot migrations" in the prelude).
local holds = load_holds(k, user, true)
local due, live = split_due(holds, now)
local removed, active = #due, #live
local units, scope_holds, scope_units = 0, 0, 0
local scope_first  -- the earliest expiry among the scope's live holds
local existing
for _, h in ipairs(live) do
  local q, s = quantity_scope(h.details, h.expire)
  units = units + q
  if scope ~= '' and s == scope then
    scope_holds, scope_units = scope_holds + 1, scope_units + q
    scope_first = scope_first or h.expire
  end
  if h.order == order then
    existing = h
  end
end
local record = not existing and redis.call('HGET', k.outcomes, order)
local retention = (removed > 0 or not existing) and tonumber(ARGV[6])  -- else unused
local earliest = live[1] and live[1].expire  -- the user's earliest expiry after the call

local result, expire
local ended_outcome, ended_at, violations, details, life = 0, 0, 0, '', ''
local total_holds, total_units = 0, 0
if existing then
  result, expire, details, life = 0, existing.expire, existing.details or '', existing.life or ''
else
  local outcome, end_ms, ended_expire = outcome_of(order, due, record, now, retention)
  if outcome then
    result, expire, ended_outcome, ended_at = -2, ended_expire, outcome, end_ms
  else
    local max_holds, max_units = tonumber(ARGV[4]), tonumber(ARGV[8])
    local quantity = tonumber(ARGV[10])
    local scope_max_holds = scope ~= '' and tonumber(ARGV[11]) or 0
    local scope_max_units = scope ~= '' and tonumber(ARGV[12]) or 0
    if active + 1 > max_holds then
      violations = violations + 1
    end
    if max_units > 0 and units + quantity > max_units then
      violations = violations + 2
    end
    if scope_max_holds > 0 and scope_holds + 1 > scope_max_holds then
      violations = violations + 4
    end
    if scope_max_units > 0 and scope_units + quantity > scope_max_units then
      violations = violations + 8
    end
    -- The scope's totals, across users, from its index (pruned here: the prune and the add below
    -- are the only writes to it before the decision is made, and neither changes what is live).
    local total_max_holds = scope ~= '' and k.index and tonumber(ARGV[17]) or 0
    local total_max_units = scope ~= '' and k.index and tonumber(ARGV[18]) or 0
    local total_first
    if total_max_holds > 0 or total_max_units > 0 then
      total_holds, total_units, total_first = scope_usage(k.index, scope, now)
      if total_max_holds > 0 and total_holds + 1 > total_max_holds then
        violations = violations + 16
      end
      if total_max_units > 0 and total_units + quantity > total_max_units then
        violations = violations + 32
      end
    end
    if violations > 0 then
      result, expire = -1, 0
      if violations % 4 > 0 then
        expire = earliest or now
      end
      if violations % 16 >= 4 then
        expire = math.max(expire, scope_first or now)
      end
      if violations >= 16 then
        expire = math.max(expire, total_first or now)
      end
    else
      result, expire = 1, now + tonumber(ARGV[3])
      local cap = math.max(expire, now + tonumber(ARGV[14]))
      life = string.format('%d:%d:%d:0:0:', expire, now, cap)
      if ARGV[13] ~= '' then
        details = string.format('%d:%d:', expire, now) .. ARGV[13]
      end
      -- Packed here from its numbers (pack_holds would parse the life record just formatted).
      live[#live + 1] = {order = order, expire = expire, details = details ~= '' and details,
        life = life, packed = pack_hold(order, expire, now, cap, 0, NO_IDS, ARGV[13])}
      earliest = math.min(earliest or expire, expire)
      active, units = active + 1, units + quantity
      if scope ~= '' then
        scope_holds, scope_units = scope_holds + 1, scope_units + quantity
        if k.index then
          scope_add(k.index, scope, user, order, quantity, expire)
          if total_max_holds > 0 or total_max_units > 0 then
            total_holds, total_units = total_holds + 1, total_units + quantity
          end
        end
      end
    end
  end
end

-- The holds that stay: the new one, if any, with the live ones.
if removed > 0 then
  expire_due(k, user, due, live)
elseif result == 1 then
  save_holds(k, user, #holds > 0, live)
end
-- A new hold of an order whose old record is past the retention: that record goes now.
if removed > 0 or (result == 1 and record) then
  trim_outcomes(k, now, retention, tonumber(ARGV[7]))
end
-- Keep the due index at the user's earliest expiry so the reaper finds the user when it is due.
-- When no hold ended and the new one does not expire first, that is the earliest it had before
-- the call: k.hd has it already (every script that writes a user's field files its earliest
-- there: set_due) and k.bdue is at or below it, so both ZADDs would change nothing.
if removed > 0 or (result == 1 and earliest ~= (holds[1] and holds[1].expire)) then
  set_due(k, user, earliest)
end
return {result, now, expire, active, removed, ended_outcome, ended_at, units, scope_holds,
        scope_units, violations, details, life, total_holds, total_units}
