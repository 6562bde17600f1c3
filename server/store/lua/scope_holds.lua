-- scope_holds.lua: the usage of one scope across every user, and one page of its live holds, from
-- the scope index (the prelude "The scope index"). Read-only: entries no longer live (score <=
-- now) are skipped and their units taken off the answer, not pruned.
--
-- Why Lua: what is live is decided by the Redis server clock (TIME), as place_hold.lua decides it,
-- and the usage and the page come from one instant.
--
-- KEYS[1]  the scope's index, "<prefix>:{<p>}:s:<scope>" (sorted set: member
--          "<quantity>:<user_id>\0<order_id>", score = the hold's expire, Unix ms)
-- KEYS[2]  the scope's units, "<prefix>:{<p>}:su:<scope>" (string: the sum of KEYS[1]'s
--          quantities); p = the scope's partition (keys.h)
-- KEYS[3]  the scope's units sold, "<prefix>:{<p>}:ss:<scope>" (string; scope_sold_key in the
--          prelude); KEYS[2] again where no sales are counted (a Redis Cluster, whose migrating
--          slot would refuse a declared key that never exists): 0 sold
-- KEYS[4]  the scope's runtime rule, "<prefix>:{<p>}:sr:<scope>" (the prelude, "A scope's runtime
--          rule"), read in this step so that the usage and the rule in force come from one
--          instant; KEYS[2] again where no rules are kept (a Redis Cluster, as for KEYS[3])
-- ARGV now           Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV after_expire  the page starts after the entry (after_expire ms, after_member) in index
--                    order (expire, then member bytes); "" = from the first
-- ARGV after_member  that entry's member (ignored when after_expire is "")
-- ARGV page_size     >= 0: entries listed at most; 0 = the usage only
-- REPLY now int      the instant used, Unix ms
-- REPLY holds int    the scope's live entries
-- REPLY units int    the sum of their quantities
-- REPLY first int    the earliest live expire (Unix ms), -1 when none
-- REPLY sold int     the scope's units sold (KEYS[3]; 0 when absent)
-- REPLY more int     1 when live entries follow the page
-- REPLY page array   the page, 2 elements an entry: {member, expire}, expire as Unix ms strings
-- REPLY rule str     the scope's runtime rule as stored, when it has one not expired at now
--                    (scope_rule_of); else ""
-- now_ms, int_str, bytes_before, scope_read, scope_rule_of: see the prelude (prelude/*.lua),
-- prepended when the script is embedded.
local now = now_ms(A.now)
local after_expire, after_member = tonumber(A.after_expire), A.after_member
local limit = tonumber(A.page_size)
local bound = int_str(now)

local _, holds, units, first = scope_read(KEYS[1], KEYS[2], now)
local sold = KEYS[3] ~= KEYS[2] and tonumber(redis.call('GET', KEYS[3]) or '0') or 0
local rule = ''
if KEYS[4] ~= KEYS[2] then
  local packed = redis.call('GET', KEYS[4])
  rule = scope_rule_of(packed, now) and packed or ''
end
local out = {now, holds, units, first or -1, sold, 0, {}, rule}
if limit == 0 or holds == 0 then
  return out
end

-- The page: from the cursor's expire on (its ties up to the cursor skipped: the set orders equal
-- scores by member bytes), read in chunks until limit + 1 entries are found.
local min, skip_ties = '(' .. bound, false
if after_expire and after_expire > now then
  min, skip_ties = int_str(after_expire), true
end
local page, offset, chunk = out[7], 0, limit + 1
while true do
  local got = redis.call('ZRANGE', KEYS[1], min, '+inf', 'BYSCORE', 'LIMIT', int_str(offset),
    int_str(chunk), 'WITHSCORES')
  for i = 1, #got - 1, 2 do
    local member, score = got[i], got[i + 1]
    if skip_ties and tonumber(score) == after_expire and not bytes_before(after_member, member) then
      -- at or before the cursor
    else
      skip_ties = false
      if #page >= 2 * limit then
        out[6] = 1
        return out
      end
      page[#page + 1] = member
      page[#page + 1] = score
    end
  end
  if #got < 2 * chunk then
    return out
  end
  offset = offset + chunk
end
