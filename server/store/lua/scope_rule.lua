-- scope_rule.lua: writes one scope's runtime rule (PutScopeRule, DeleteScopeRule, CloseScope):
-- the rule every placing script of the scope reads (place_hold.lua), so all replicas apply one
-- version from the step on.
--
-- Why Lua: the etag check and the write are one step (AIP-154: a write with a stale etag changes
-- nothing, https://google.aip.dev/154), and the rule, its place in its partition's list and its
-- version counter change together.
--
-- KEYS[1]  the scope's rule, "<prefix>:{<p>}:sr:<scope>" (string; the prelude, "A scope's
--          runtime rule"; p = the scope's partition, keys.h)
-- KEYS[2]  the partition's rules, "<prefix>:{<p>}:sr" (sorted set, score 0, member = scope)
-- KEYS[3]  the partition's rule versions, "<prefix>:{<p>}:srv" (string: the last version given)
-- ARGV scope   the scope (KEYS[2]'s member)
-- ARGV op      "put": write the rule A.rule; "delete": remove it; "close": set its state CLOSED
--              (a scope without a rule gets one, CLOSED, with no limits of its own)
-- ARGV etag    put, delete: "" = whatever the rule is now; else the version the rule must have
--              (its etag), or the call changes nothing (result -1)
-- ARGV rule    put: the rule from its state on, "<state>:<open ms>:<close ms>:<expire ms>:
--              <max_holds>:<max_units>:<total_max_holds>:<total_max_units>:<capacity_units>:
--              <max_purchased_units>:<max_purchased_holds>:" (the prelude's format without the
--              version and the id, which this script gives: the id of the rule it replaces, else
--              the new version); else ""
-- ARGV now     Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV classes put: the rule's limit classes as the prelude packs them after the id ("" = none);
--              else "" (a close keeps the rule's)
-- REPLY result int  1 written (or removed), 0 no rule (delete; nothing changed), -1 the etag is
--                   not the rule's (nothing changed), -2 the rule's expire_time is not after now
--                   (nothing changed)
-- REPLY now int     the instant used, Unix ms
-- REPLY rule str    1: the rule as written ("" for a delete); -1: the rule as it is ("" when
--                   none); else ""
-- now_ms, int_str, scope_rule_of: see the prelude (prelude/*.lua), prepended when the script is
-- embedded.
local now = now_ms(A.now)
local current = scope_rule_of(redis.call('GET', KEYS[1]), now)
if A.etag ~= '' and (not current or int_str(current.version) ~= A.etag) then
  return {-1, now, current and redis.call('GET', KEYS[1]) or ''}
end
if A.op == 'delete' then
  if not current then
    return {0, now, ''}
  end
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], A.scope)
  return {1, now, ''}
end
local body, classes = A.rule, A.classes
if A.op == 'close' then
  classes = current and current.classes or ''
  if current then
    body = string.format('3:%d:%d:%d:%d:%d:%d:%d:%d:%d:%d:', current.open, current.close,
                         current.expire, current.max_holds, current.max_units,
                         current.total_holds, current.total_units, current.capacity,
                         current.purchased_units, current.purchased_holds)
  else
    body = '3:0:0:0:0:0:0:0:0:0:0:'
  end
end
local expire = tonumber(string.match(body, '^%d+:%d+:%d+:(%d+):'))
if not expire then
  error('OrderHold: malformed scope rule')
end
if expire > 0 and expire <= now then
  return {-2, now, ''}
end
local version = int_str(redis.call('INCRBY', KEYS[3], 1))
local rule = version .. ':' .. body .. (current and int_str(current.id) or version) .. ':' ..
             classes
if expire > 0 then
  redis.call('SET', KEYS[1], rule, 'PXAT', int_str(expire))
else
  redis.call('SET', KEYS[1], rule)
end
redis.call('ZADD', KEYS[2], 0, A.scope)
return {1, now, rule}
