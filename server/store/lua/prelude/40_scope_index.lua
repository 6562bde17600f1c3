-- prelude/40_scope_index.lua: every live hold of a scope across users, for the scope's totals.

-- The scope index: every live hold of a scope, across users, so that a scope's totals
-- (total_max_holds, total_max_units of the limits file) are decided in the same script as the
-- user's levels. Two keys per scope, in the scope's partition (keys.h: FNV-1a-32 of the scope mod
-- 64, as a user's): "<prefix>:{<p>}:s:<scope>", a sorted set, member = scope_member(user, order,
-- quantity), score = the hold's expire (Unix ms; an entry is live while its score > now, as its
-- hold is), and "<prefix>:{<p>}:su:<scope>", a string: the sum of the quantities of the set's
-- entries (live or not yet pruned). Both go when the set empties. k.index is the keys' common
-- start "<prefix>:{" ('' or nil: the store keeps no index, as in Redis Cluster mode, where the
-- scope's slot is not the user's). The keys are derived here, not passed in KEYS: the scripts
-- that end holds learn a hold's scope from its details, inside the script. A standalone or
-- Sentinel-managed Redis lets a script touch keys it did not declare; a Cluster node would refuse
-- them, hence no index there. Every end of a scoped hold (end_hold) drops its entry,
-- extend_hold.lua moves it, place_hold.lua adds it and checks the totals.

-- FNV-1a-32 of `s` (KeySchema::PartitionOf's hash: a scope's partition here, a user's bucket in
-- the layout migration), on doubles: the prime 16777619 is 2^24 + 403, so h * prime mod 2^32 =
-- h * 403 + (h mod 2^8) * 2^24, exact below 2^53; bit.bxor works on 32 bits and answers signed,
-- which % 2^32 makes unsigned again.
local function fnv1a32(s)
  local h = 2166136261
  for i = 1, #s do
    h = bit.bxor(h, string.byte(s, i)) % 4294967296
    h = (h * 403 + (h % 256) * 16777216) % 4294967296
  end
  return h
end

-- "<index><p>}:", the start of every key of `scope`'s partition (p = FNV-1a-32 of the scope mod
-- 64). The last scope's is kept, as limits_of keeps the last limits: a placement under a runtime
-- rule with a capacity names four keys of one scope (rule, index, units, sold), and an on-sale
-- sends one scope over and over; the hash costs about as much as a GET from a script.
local tag_index, tag_scope, tag_of
local function scope_tag(index, scope)
  if scope ~= tag_scope or index ~= tag_index then
    tag_of = index .. int_str(fnv1a32(scope) % 64) .. '}:'
    tag_index, tag_scope = index, scope
  end
  return tag_of
end

local function scope_keys(index, scope)
  local tagged = scope_tag(index, scope)
  return tagged .. 's:' .. scope, tagged .. 'su:' .. scope
end

-- The scope's units sold: "<prefix>:{<p>}:ss:<scope>", a string, the sum of the quantities of the
-- scope's holds ended PAID (end_hold adds each, in the step that pays it; keys.h ScopeSoldKey).
-- Kept without expiry, one per scope ever sold from: a capacity (place_hold.lua) is checked
-- against the live holds' units plus these. Like the index, only where a script may touch the
-- scope's partition (not a Redis Cluster).
local function scope_sold_key(index, scope)
  return scope_tag(index, scope) .. 'ss:' .. scope
end

-- An index member: "<quantity>:<user>\0<order>" (ids have no control characters).
local function scope_member(user, order, quantity)
  return int_str(quantity) .. ':' .. user .. '\0' .. order
end

-- Reads only: the scope's entries no longer live (score <= now), then its live holds, their
-- units and the earliest live score (nil when none). scope_holds.lua answers from it as it is.
local function scope_read(live, units_key, now)
  -- The earliest entry first: when it is live (ends drop their entries and the reaper ends due
  -- holds, so it nearly always is), none is gone and it is the earliest live one: one call where
  -- the general case takes two.
  local head = redis.call('ZRANGE', live, '0', '0', 'WITHSCORES')
  local gone, first = {}, head[2] and tonumber(head[2])
  if first and first <= now then
    local bound = int_str(now)
    gone = redis.call('ZRANGEBYSCORE', live, '-inf', bound)
    local after = redis.call('ZRANGE', live, '(' .. bound, '+inf', 'BYSCORE', 'LIMIT', '0', '1',
      'WITHSCORES')
    first = after[2] and tonumber(after[2])
  end
  local units = tonumber(redis.call('GET', units_key) or '0')
  for _, m in ipairs(gone) do
    units = units - tonumber(string.match(m, '^(%d+):'))
  end
  return gone, redis.call('ZCARD', live) - #gone, units, first
end

-- scope_read, then the entries no longer live dropped with their units (the counter deleted
-- when no entry is left): the scope's live holds, units and earliest live score. Writes.
local function scope_usage(index, scope, now)
  local live, units_key = scope_keys(index, scope)
  local gone, holds, units, first = scope_read(live, units_key, now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', live, '-inf', int_str(now))
  end
  if holds == 0 and (units ~= 0 or #gone > 0) then
    redis.call('DEL', units_key)
    units = 0
  elseif #gone > 0 then
    redis.call('SET', units_key, int_str(units))
  end
  return holds, units, first
end

-- Reads only. The scope's units sold, and whether `quantity` more units surely fit `capacity`:
-- the index's units counter (every entry not yet dropped, live or not: at least the live units)
-- plus the units sold leave room for them. Two GETs (not one MGET: deploy/redis/orderhold.acl
-- does not grant it) where scope_usage's exact count and the sold count take four
-- calls or more; when this answers false, only that count can say whether they fit.
local function scope_room(index, scope, quantity, capacity)
  local _, units_key = scope_keys(index, scope)
  local held = tonumber(redis.call('GET', units_key) or '0')
  local sold = tonumber(redis.call('GET', scope_sold_key(index, scope)) or '0')
  return sold, held + sold + quantity <= capacity
end

-- Adds the new hold's entry to its scope's index.
local function scope_add(index, scope, user, order, quantity, expire)
  local live, units_key = scope_keys(index, scope)
  redis.call('ZADD', live, int_str(expire), scope_member(user, order, quantity))
  redis.call('INCRBY', units_key, int_str(quantity))
end

-- Drops an ended hold's entry from its scope's index, with its units when it was there (an entry
-- pruned as no longer live took its units with it).
local function scope_drop(index, scope, user, order, quantity)
  local live, units_key = scope_keys(index, scope)
  if redis.call('ZREM', live, scope_member(user, order, quantity)) == 1 and
      redis.call('DECRBY', units_key, int_str(quantity)) <= 0 then
    redis.call('DEL', units_key)
  end
end


-- The scope protocol across slots (Redis Cluster, where a user's keys and a scope's keys are in
-- different slots and no script sees both; server/README.md "Scope totals"). The scope's entries
-- are leases kept by scripts of the scope's slot (scope_take.lua, scope_settle.lua), the holds by
-- the user's (place_hold.lua, extend_hold.lua, scope_check.lua); a stamp ties them: every take
-- draws a fresh one from its partition's counter, and a place or extend step carries it. The
-- user's side refuses a step whose take is stale: older than its window on the user node's clock
-- (so a step delayed past the window never outlives its entry), or at or below the fence the sweep
-- wrote for that order and scope (scope_check.lua: a high-water mark, so a second fence never
-- lowers the first). The fence is a field of the user's outcome records hash:
-- FENCE .. order .. "\0" .. scope -> the highest stamp fenced (a control character, as DETAILS).
local FENCE = '\3'

-- A step's take (place_hold.lua's and extend_hold.lua's A.take) parsed: nil for '' (no protocol:
-- standalone, Sentinel, an unscoped hold) and for '-' (extend_hold.lua: the protocol applies but
-- the store has taken nothing yet), else {stamp=, at= (the take's instant on the scope node, Unix
-- ms), window= (ms)} from "<stamp>:<at>:<window>".
local function take_of(arg)
  if arg == '' or arg == '-' then
    return nil
  end
  local stamp, at, window = string.match(arg, '^(%d+):(%d+):(%d+)$')
  if not stamp then
    error('OrderHold: malformed take')
  end
  return {stamp = tonumber(stamp), at = tonumber(at), window = tonumber(window)}
end

-- Reads only. Whether a step with take `t` for `order` in `scope` must be refused: `now` is past
-- the take's window, or the sweep or a newer take's step fenced a stamp at or above the take's.
-- Also returns the fence as read (false for none), for fence_take.
local function take_stale(k, order, scope, t, now)
  local fence = redis.call('HGET', k.outcomes, FENCE .. order .. '\0' .. scope)
  return now > t.at + t.window or (fence and tonumber(fence) >= t.stamp) or false, fence
end

-- After a step with take `t` for `order` in `scope` was decided (whatever it answered): raises the
-- order's fence to the take's stamp, so that an older take's step arriving later is refused (a
-- newer take's settle may already have set the entry for what this step did). The fence lasts the
-- window past this write (keep_for: never shortened), beyond which the window check refuses.
-- `fence` is take_stale's. The caller's first write after its reads: it writes k.outcomes (HSET,
-- which cannot empty it) before anything else of the script may empty it ("Slot migrations").
local function fence_take(k, order, scope, t, fence)
  if not fence or tonumber(fence) < t.stamp then
    redis.call('HSET', k.outcomes, FENCE .. order .. '\0' .. scope, int_str(t.stamp))
  end
  keep_for(k.outcomes, int_str(2 * t.window))
end

-- The pending record of an entry in the scope partition's hash (scope_take.lua): its field.
local function pending_field(scope, member)
  return scope .. '\0' .. member
end
