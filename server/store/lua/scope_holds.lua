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
-- ARGV[1]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[2]  the page starts after the entry (ARGV[2] expire ms, ARGV[3] member) in index order
--          (expire, then member bytes); "" = from the first
-- ARGV[3]  that entry's member (ignored when ARGV[2] is "")
-- ARGV[4]  page size, >= 0: entries listed at most; 0 = the usage only
-- Returns  {now, holds, units, first, more, {member_1, expire_1, member_2, expire_2, ...}}:
--          holds and units: the scope's live entries and the sum of their quantities; first: the
--          earliest live expire (Unix ms), -1 when none; more: 1 when live entries follow the
--          page; then the page, expire as Unix ms strings.
-- now_ms, int_str, bytes_before, scope_read: see the prelude (prelude/*.lua), prepended when the script is
-- embedded.
local now = now_ms(ARGV[1])
local after_expire, after_member = tonumber(ARGV[2]), ARGV[3]
local limit = tonumber(ARGV[4])
local bound = int_str(now)

local _, holds, units, first = scope_read(KEYS[1], KEYS[2], now)
local out = {now, holds, units, first or -1, 0, {}}
if limit == 0 or holds == 0 then
  return out
end

-- The page: from the cursor's expire on (its ties up to the cursor skipped: the set orders equal
-- scores by member bytes), read in chunks until limit + 1 entries are found.
local min, skip_ties = '(' .. bound, false
if after_expire and after_expire > now then
  min, skip_ties = int_str(after_expire), true
end
local page, offset, chunk = out[6], 0, limit + 1
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
        out[5] = 1
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
