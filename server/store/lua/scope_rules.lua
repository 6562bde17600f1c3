-- scope_rules.lua: reads one scope's runtime rule (GetScopeRule), or one page of a partition's
-- rules (ListScopeRules), on the Redis clock. Drops from the partition's list the scopes whose
-- rule has expired (expire_time: its key is gone).
--
-- KEYS[1]  the partition's rules, "<prefix>:{<p>}:sr" (sorted set, score 0, member = scope; the
--          prelude, "A scope's runtime rule"); each rule's key is KEYS[1] .. ":" .. scope
-- ARGV scope   a scope of the partition: its rule only; "" = a page of the list
-- ARGV after   a page starts after this scope (bytes order); "" = at the first
-- ARGV count   a page's scopes at most, >= 1
-- ARGV now     Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- REPLY now int      the instant used, Unix ms
-- REPLY last str     a page: the last scope it looked at, where the next page starts ("" when it
--                    looked at none); else ""
-- REPLY more int     a page: 1 when scopes follow `last` in the list; else 0
-- REPLY rules array  {scope, rule} pairs, rule packed as the prelude says (expired ones left out)
-- now_ms, scope_rule_of: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local out = {}
if A.scope ~= '' then
  local packed = redis.call('GET', KEYS[1] .. ':' .. A.scope)
  if scope_rule_of(packed, now) then
    out = {A.scope, packed}
  end
  return {now, '', 0, out}
end
local count = tonumber(A.count)
local from = A.after == '' and '-' or '(' .. A.after
local scopes = redis.call('ZRANGE', KEYS[1], from, '+', 'BYLEX', 'LIMIT', 0, count + 1)
local last, gone = '', {}
for i = 1, math.min(count, #scopes) do
  local scope = scopes[i]
  local packed = redis.call('GET', KEYS[1] .. ':' .. scope)
  if scope_rule_of(packed, now) then
    out[#out + 1] = scope
    out[#out + 1] = packed
  elseif not packed then
    gone[#gone + 1] = scope
  end
  last = scope
end
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
end
return {now, last, #scopes > count and 1 or 0, out}
