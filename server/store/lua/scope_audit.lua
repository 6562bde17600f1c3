-- scope_audit.lua: one page of the audit of a scope's index after a failover (Redis Cluster; the
-- prelude, "The scope protocol across slots"; server/README.md "Scope totals", "The audit"):
-- hands the page's live entries to the sweep as pending takes, so that the sweep asks each
-- entry's user slot whether its hold is live there (scope_check.lua, which also fences) and
-- settles it: an entry whose hold a failover lost (a ghost, holding a place nobody has) is
-- dropped, one whose hold is live is re-scored to it.
--
-- Why Lua: an entry is handed over only when no take is pending for it (a take in flight owns
-- its entry), and the stamp is drawn from the same counter as the takes', so a take that comes
-- later owns the entry again (the audit's settle then acts on nothing).
--
-- KEYS[1]  the scope's index, "<prefix>:{<p>}:s:<scope>" (scope_take.lua's KEYS[1])
-- KEYS[2]  the partition's scopes, "<prefix>:{<p>}:sx" (scope_take.lua's KEYS[5])
-- KEYS[3]  the partition's pending takes, "<prefix>:{<p>}:sp" (scope_take.lua's KEYS[3])
-- KEYS[4]  their ages, "<prefix>:{<p>}:spt" (scope_take.lua's KEYS[4])
-- ARGV scope  the scope
-- ARGV start  rank >= 0 in the index (by score) of the page's first entry
-- ARGV limit  entries in the page, >= 1
-- ARGV age    ms >= 0: the records are dated now - age, so the sweep's next step takes them
-- ARGV now    Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- REPLY now int     the instant used, Unix ms
-- REPLY marked int  entries handed to the sweep (live, no take pending for them)
-- REPLY next int    the next page's start; -1 when this page was the index's last
-- now_ms, int_str, pending_field: see the prelude (prelude/*.lua).
local live, scopes, pending, ages = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = now_ms(A.now)
local start, limit = tonumber(A.start), tonumber(A.limit)

-- Every read before the first write ("Slot migrations" in the prelude).
local page = redis.call('ZRANGE', live, int_str(start), int_str(start + limit - 1), 'WITHSCORES')
local fields = {}
for i = 1, #page, 2 do
  if tonumber(page[i + 1]) > now then
    local field = pending_field(A.scope, page[i])
    if not redis.call('HGET', pending, field) then
      fields[#fields + 1] = field
    end
  end
end
local next_start = -1
if #page / 2 >= limit then
  next_start = start + limit
end

-- Writes: the records (the pending hash keeps its counter, so it never empties), then a scope
-- whose index is gone leaves the partition's scopes (which that may empty: the last touch).
local dated = int_str(now - tonumber(A.age))
for _, field in ipairs(fields) do
  local stamp = redis.call('HINCRBY', pending, 'n', 1)
  redis.call('HSET', pending, field, int_str(stamp) .. ':' .. dated .. ':audit')
  redis.call('ZADD', ages, dated, field)
end
if start == 0 and #page == 0 then
  redis.call('ZREM', scopes, A.scope)
end
return {now, #fields, next_start}
