-- scope_take.lua: the first step of a scoped PlaceHold or ExtendHold on Redis Cluster: takes (or
-- moves) the hold's entry in its scope's index, in the scope's slot, under the scope's totals.
--
-- Why Lua: the totals' check and the entry must be one atomic step across every replica's calls,
-- as place_hold.lua's are on a single Redis. The protocol (the prelude, "The scope protocol across
-- slots"; server/README.md "Scope totals"): take here, then place (or extend) in the user's slot
-- carrying the take's stamp, then settle here (scope_settle.lua) with what the user's slot did.
-- The entry is a lease scored `lease` ms past the take (the hold's ttl + the take's window + the
-- clock margin), so it outlives any hold the user's step can make with this stamp; the pending
-- record lets the sweep settle a take whose settle never came.
--
-- KEYS[1]  the scope's index, "<prefix>:{<p>}:s:<scope>" (sorted set: member
--          "<quantity>:<user_id>\0<order_id>" -> the entry's lease end, Unix ms)
-- KEYS[2]  the scope's units, "<prefix>:{<p>}:su:<scope>" (string: the sum of KEYS[1]'s
--          quantities)
-- KEYS[3]  the partition's pending takes, "<prefix>:{<p>}:sp" (hash: field "n" -> the stamp
--          counter; "<scope>\0<member>" -> "<stamp>:<take ms>"); p = the scope's partition
-- KEYS[4]  their ages, "<prefix>:{<p>}:spt" (sorted set: "<scope>\0<member>" -> take ms), which
--          the sweep reads by age (scope_pending.lua)
-- KEYS[5]  the partition's scopes, "<prefix>:{<p>}:sx" (sorted set: scope -> its latest lease
--          end, Unix ms), which the audit after a failover walks (scope_audit.lua)
-- ARGV scope     the scope
-- ARGV member    the entry, "<quantity>:<user_id>\0<order_id>"
-- ARGV quantity  its units, integer >= 1
-- ARGV lease     ms >= 1: the entry's score is now + lease
-- ARGV now       Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV totals    "<total_max_holds>:<total_max_units>", 0 = no limit at that level
-- ARGV mode      "place": a new entry passes the totals (an entry already live is a retry: moved,
--                not counted again); "extend": the entry moves later, never earlier (added when
--                missing, unchecked: its hold is live and must be counted)
-- REPLY result int      1 taken (stamp and pending record written), -1 refused by a total
--                       (nothing written but the prune of entries no longer live)
-- REPLY now int         the instant used, Unix ms
-- REPLY stamp int       result 1: the take's stamp; else 0
-- REPLY holds int       the scope's live entries after the call
-- REPLY units int       their units
-- REPLY first int       the earliest live entry's score, Unix ms; -1 when none
-- REPLY violations int  result -1: 16 the total of holds, 32 the total of units (place_hold.lua's
--                       bits); else 0
-- now_ms, int_str, scope_read, scope_member, pending_field: see the prelude (prelude/*.lua).
local now = now_ms(A.now)
local live, units_key, pending, ages, scopes = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quantity, lease = tonumber(A.quantity), tonumber(A.lease)
local max_holds, max_units = string.match(A.totals, '^(%d+):(%d+)$')
max_holds, max_units = tonumber(max_holds), tonumber(max_units)

-- Every read before the first write ("Slot migrations" in the prelude).
local gone, holds, units, first = scope_read(live, units_key, now)
local score = redis.call('ZSCORE', live, A.member)
local present = score and tonumber(score) > now

local violations = 0
if A.mode == 'place' and not present then
  if max_holds > 0 and holds + 1 > max_holds then
    violations = violations + 16
  end
  if max_units > 0 and units + quantity > max_units then
    violations = violations + 32
  end
end
-- Writes. A refusal prunes and returns; a take adds or moves its entry first, so that the prune
-- cannot empty the index it still touches ("Slot migrations"), then writes the units once.
if violations > 0 then
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', live, '-inf', int_str(now))
    if holds == 0 then
      redis.call('DEL', units_key)
    else
      redis.call('SET', units_key, int_str(units))
    end
  end
  return {-1, now, 0, holds, units, first or -1, violations}
end
redis.call('ZADD', live, 'GT', int_str(now + lease), A.member)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', live, '-inf', int_str(now))
end
if not present then
  holds, units = holds + 1, units + quantity
end
redis.call('SET', units_key, int_str(units))
first = math.min(first or (now + lease), now + lease)
local stamp = redis.call('HINCRBY', pending, 'n', 1)
local field = pending_field(A.scope, A.member)
redis.call('HSET', pending, field, int_str(stamp) .. ':' .. int_str(now))
redis.call('ZADD', ages, int_str(now), field)
redis.call('ZADD', scopes, 'GT', int_str(now + lease), A.scope)
return {1, now, stamp, holds, units, first, 0}
