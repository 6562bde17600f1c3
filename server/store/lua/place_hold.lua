-- place_hold.lua: places one hold for one user, enforcing every limit that applies to it.
--
-- Why Lua and not MULTI/EXEC: the decision (already held? ended? over a limit?) depends on what
-- is read in the same step; a script runs atomically, so concurrent PlaceHolds from any number of
-- OrderHold replicas can never both take the last slot, and a hold that expired is ended (outcome
-- record + EXPIRED event) exactly once whoever notices it first.
--
-- Limits: every level a new hold is checked at is one row of LEVELS (the prelude; its bit in
-- `violations`, what it counts, where its limit comes from): the user's live holds and units, the
-- user's live holds and units in the hold's scope (A.details), and the scope's totals across
-- users. The user's levels are sums over the user's live holds, checked before anything is
-- written: all pass and the hold is recorded, or nothing is. No counters: usage is always what the
-- live holds say, so nothing drifts or needs repair. A scope's totals are checked against the
-- scope index (the prelude "The scope index"), in the same step: every hold with a scope is
-- entered there when the store keeps an index (A.store), with or without a total, so a total
-- added later counts the holds already live. Its units are a counter beside the entries, kept
-- exact by every script that adds or drops an entry. A capacity without a total is checked
-- against that counter first (it counts entries not yet dropped: at least the live units), and
-- the entries are counted only when the hold may not fit it: the same answers, fewer calls.
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
-- ARGV user      user_id (the member of KEYS[2])
-- ARGV order     order_id
-- ARGV ttl       integer ms >= 1
-- ARGV now       Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV limits    "<max_holds>:<max_units>:<total_max_holds>:<total_max_units>:<capacity_units>",
--                integers: the user's live holds (>= 1) and units, the scope's live holds and
--                units across every user, and the scope's live units plus its units sold
--                (scope_sold_key in the prelude), at most; 0 = none (the last three need a scope
--                and the scope index; the capacity may be left out: 0)
-- ARGV lifetime  the hold's lifetime cap, ms >= 1 (--max_hold_lifetime): its life record (LIFE
--                in the prelude) is "<expire>:<now>:<max(expire, now + lifetime)>:0:0:" (a ttl
--                longer than the lifetime makes the expiry the cap)
-- ARGV details   the hold's details from the quantity on (hold_details_codec.h), stored as
--                "<expire>:<now>:" .. details; it gives the quantity, the scope and the scope's
--                max_holds and max_units (details_levels in the prelude). "" for a plain hold (no
--                scope, quantity 1, no labels): no details are stored (only its life record)
-- ARGV store     the store's constants, packed (store_of in the prelude)
-- ARGV take      "" = no take (standalone, Sentinel, an unscoped hold); on Redis Cluster the
--                scope's take for this hold, "<stamp>:<take ms>:<window ms>" (scope_take.lua; the
--                prelude, "The scope protocol across slots"): a new hold is refused (result -3)
--                when the take is stale (take_stale); else the order's fence is raised to the
--                take's stamp (fence_take), whatever the call answers
-- ARGV asked     what the request asks of a runtime rule (below): "" = nothing; else
--                "<limits>" or "<limits>|<class>|<caller>". <limits>: the scope limits it carried,
--                "" = none, "c:<max_holds>:<max_units>" a ceiling on the rule's, "r:..." in place
--                of them (--request_scope_limits=replace); asked_limits in the prelude. (The
--                file's rules come merged with them in A.details and A.limits.) <class>: the limit
--                class of the rule asked (PlaceHoldRequest.limit_class, [A-Za-z0-9_.-]): the rule
--                must have it (scope_rule_class in the prelude) and list one of <caller>'s
--                identities, "{<length>:<typed identity>}*" (class_admits), or nothing at all is
--                written (result -7); its limits and purchase caps then replace the rule's
--                per-person ones (<limits> still applies to them)
-- REPLY result int        1 created (expire = now + ttl), 0 already held (expire = the existing
--                         hold's, not extended), -1 a limit would be exceeded (expire = the
--                         earliest instant at which every exceeded level has had its earliest
--                         live hold expire), -2 the order's hold already ended (expire = that
--                         hold's), -3 the take is stale (expire = 0), -4 the scope's runtime
--                         rule is closed, -5 it is not open yet (expire = when it opens, 0 when
--                         no open_time is set), -6 the quantity is above a unit limit of the
--                         scope (violations = those levels' bits: it can never fit; nothing
--                         at all is written, as for a request refused before the call), -7 the
--                         limit class asked is not the caller's to use (A.asked; nothing at all
--                         is written either): nothing placed
-- REPLY now int           the instant used, Unix ms
-- REPLY expire int        Unix ms, as result says
-- REPLY active int        the user's live holds after the call
-- REPLY removed int       holds found no longer live and ended as EXPIRED (each with its event)
-- REPLY ended_outcome int result -2: 1 PAID, 2 CANCELLED, 3 EXPIRED; else 0
-- REPLY ended_at int      result -2: the end, Unix ms; else 0
-- REPLY units int         the user's live units after the call
-- REPLY scope_holds int   the user's live holds in the scope after the call (0 when unscoped)
-- REPLY scope_units int   their units
-- REPLY violations int    result -1: the exceeded levels, bits (LEVELS in the prelude): 1 user holds, 2 user
--                         units, 4 scope holds, 8 scope units, 16 the scope's total holds, 32 its
--                         total units (for those two, expire counts the scope's earliest live hold
--                         across users), 64 its capacity, 128 the user's holds in the scope plus
--                         its purchases there (the runtime rule's max_purchased_holds), 256 their
--                         units (max_purchased_units)
-- REPLY details str       result 1: the new hold's details ("" for a plain hold); 0: the existing
--                         hold's ("" when it has none); else ""
-- REPLY life str          results 1 and 0: the hold's life record; else ""
-- REPLY total_holds int   the scope's live holds across every user after the call, when it has a
--                         total and a new hold was decided (results 1 and -1), or a capacity
--                         whose check counted them (always when the capacity refused: violation
--                         64; scope_room in the prelude); else 0
-- REPLY total_units int   their units, likewise
-- REPLY sold int          the scope's units sold, when it has a capacity and a new hold was decided
--                         (results 1 and -1); else 0
-- REPLY applied str       when the scope has a runtime rule (a store with a scope index):
--                         "<version>:<max_holds>:<max_units>:<total_max_holds>:
--                         <total_max_units>:<capacity_units>:<max_purchased_units>:
--                         <max_purchased_holds>", the rule's etag and the limits applied (the
--                         scope's per-user ones after A.asked); else ""
-- REPLY bought_units int  the units the user bought in the scope under its runtime rule, when it
--                         caps purchases and a new hold was decided (results 1 and -1); else 0
-- REPLY bought_holds int  the holds (payments) of them, likewise
-- Runtime rule: a scope's rule put at runtime (PutScopeRule; the prelude, "A scope's runtime
--          rule"), read here on a store that keeps a scope index, replaces the file's rule that
--          came in A.details and A.limits: its limits, totals, capacity and state decide.
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- A hold is live while its score > now.
-- Helpers (now_ms, store_of, details_levels, LEVELS, limits_of, load_holds, split_due, save_holds,
-- quantity_scope, set_due, expire_due, trim_outcomes, outcome_of, take_of, take_stale, fence_take,
-- scope_usage, scope_room, scope_sold_key, scope_rule_key, scope_rule_of, scope_rule_state,
-- asked_limits, details_with_limits, purchased, scope_rule_class, class_admits):
-- see the prelude
-- (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6], maxlen = store.maxlen, maxbytes = store.maxbytes, index = store.index,
           store = store}
local user, order = A.user, A.order
local quantity, scope, scope_max_holds, scope_max_units = details_levels(A.details)

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
-- A step of the scope protocol: refused when stale (unless the hold exists: it answers as is),
-- else it raises the order's fence to its stamp first, whatever it then answers (the prelude,
-- fence_take).
local take = take_of(A.take)
local stale, fence = false, false
if take then
  stale, fence = take_stale(k, order, scope, take, now)
  stale = stale and not existing
  if not stale then
    fence_take(k, order, scope, take, fence)
  end
end
local earliest = live[1] and live[1].expire  -- the user's earliest expiry after the call

local result, expire
local ended_outcome, ended_at, violations, details, life = 0, 0, 0, '', ''
local total_holds, total_units, sold, applied = 0, 0, 0, ''
local bought_units, bought_holds = 0, 0  -- under the scope's runtime rule (purchased)
local tail = A.details  -- the new hold's details tail, with the limits it is placed under
-- Each level's limit, in LEVELS' order (the prelude); 0 = no limit.
local lim = limits_of(A.limits)
local scoped, totals = scope ~= '', scope ~= '' and k.index ~= nil
-- The scope's runtime rule, when it has one, in place of the file's.
local rule = totals and scope_rule_of(redis.call('GET', scope_rule_key(k.index, scope)), now)
local state, opens = 1, 0
-- The per-person levels: the rule's, or those of the limit class asked (which the rule must have
-- and which must admit the caller: else `denied`).
local asked, class_name, caller = string.match(A.asked, '^([^|]*)|([^|]*)|(.*)$')
if not asked then
  asked, class_name, caller = A.asked, '', ''
end
local person = rule
local denied = false
if class_name ~= '' then
  person = rule and scope_rule_class(rule, class_name)
  denied = not (person and class_admits(person, caller))
end
if rule and not denied then
  state, opens = scope_rule_state(rule, now)
  scope_max_holds, scope_max_units = asked_limits(person.max_holds, person.max_units, asked)
  lim = {lim[1], lim[2], rule.total_holds, rule.total_units, rule.capacity}
  tail = details_with_limits(A.details, scope_max_holds, scope_max_units)
  applied = string.format('%d:%d:%d:%d:%d:%d:%d:%d', rule.version, scope_max_holds,
                          scope_max_units, rule.total_holds, rule.total_units, rule.capacity,
                          person.purchased_units, person.purchased_holds)
end
local limit = {lim[1], lim[2], scoped and scope_max_holds or 0, scoped and scope_max_units or 0,
               totals and lim[3] or 0, totals and lim[4] or 0, totals and lim[5] or 0,
               person and person.purchased_holds or 0, person and person.purchased_units or 0}
-- A quantity above a unit limit of the scope can never fit: refused first, as the C++ refuses
-- it before the call where it knows the limits (a store without runtime rules).
local never = 0
for i, level in ipairs(LEVELS) do
  if i >= 3 and level.units and limit[i] > 0 and quantity > limit[i] then
    never = never + level.bit
  end
end
if denied then
  -- Nothing is written, not even the user's due holds' ends: as a request refused before the call.
  result, expire, removed = -7, 0, 0
elseif never > 0 then
  -- Malformed as asked: nothing is written, not even the user's due holds' ends.
  result, expire, violations, removed = -6, 0, never, 0
elseif existing then
  result, expire, details, life = 0, existing.expire, existing.details or '', existing.life or ''
else
  local retention = store.retention
  local outcome, end_ms, ended_expire = outcome_of(order, due, record, now, retention)
  if outcome then
    result, expire, ended_outcome, ended_at = -2, ended_expire, outcome, end_ms
  elseif stale then
    result, expire = -3, 0
  else
    -- The scope's totals, across users, from its index (pruned here: the prune and the add below
    -- are the only writes to it before the decision is made, and neither changes what is live).
    -- A capacity alone is checked against the index's units counter first: it counts every
    -- entry not yet dropped, live or not, so a hold that fits it fits the live units too, and
    -- the index is read (and pruned) only when it may not (scope_room in the prelude).
    local total_first, counted
    if state ~= 1 then
      limit = {}  -- refused before any level is counted
    elseif limit[5] > 0 or limit[6] > 0 then
      total_holds, total_units, total_first = scope_usage(k.index, scope, now)
      counted = true
      if limit[7] > 0 then
        sold = tonumber(redis.call('GET', scope_sold_key(k.index, scope)) or '0')
      end
    elseif limit[7] > 0 then
      local fits
      sold, fits = scope_room(k.index, scope, quantity, limit[7])
      if not fits then
        total_holds, total_units, total_first = scope_usage(k.index, scope, now)
        counted = true
      end
    end
    if (limit[8] or 0) > 0 or (limit[9] or 0) > 0 then
      bought_units, bought_holds = purchased(k, user, scope, rule)
    end
    local used = {active, units, scope_holds, scope_units, total_holds, total_units,
                  total_units + sold, scope_holds + bought_holds, scope_units + bought_units}
    local first = {earliest or now, scope_first or now, total_first or now}
    expire = 0
    for i, level in ipairs(LEVELS) do
      if (limit[i] or 0) > 0 and used[i] + (level.units and quantity or 1) > limit[i] then
        violations = violations + level.bit
        expire = math.max(expire, first[level.first])
      end
    end
    if state ~= 1 then
      result, expire = state == 3 and -4 or -5, opens
    elseif violations > 0 then
      result = -1
    else
      result, expire = 1, now + tonumber(A.ttl)
      local cap = math.max(expire, now + tonumber(A.lifetime))
      life = string.format('%d:%d:%d:0:0:', expire, now, cap)
      if tail ~= '' then
        details = string.format('%d:%d:', expire, now) .. tail
      end
      -- Packed here from its numbers (pack_holds would parse the life record just formatted).
      live[#live + 1] = {order = order, expire = expire, details = details ~= '' and details,
        life = life, packed = pack_hold(order, expire, now, cap, 0, NO_IDS, tail)}
      earliest = math.min(earliest or expire, expire)
      active, units = active + 1, units + quantity
      if scope ~= '' then
        scope_holds, scope_units = scope_holds + 1, scope_units + quantity
        if k.index then
          scope_add(k.index, scope, user, order, quantity, expire)
          if counted then
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
  trim_outcomes(k, now, store.retention, store.records)
end
-- Keep the due index at the user's earliest expiry so the reaper finds the user when it is due.
-- When no hold ended and the new one does not expire first, that is the earliest it had before
-- the call: k.hd has it already (every script that writes a user's field files its earliest
-- there: set_due) and k.bdue is at or below it, so both ZADDs would change nothing.
if removed > 0 or (result == 1 and earliest ~= (holds[1] and holds[1].expire)) then
  set_due(k, user, earliest)
end
return {result, now, expire, active, removed, ended_outcome, ended_at, units, scope_holds,
        scope_units, violations, details, life, total_holds, total_units, sold, applied,
        bought_units, bought_holds}
