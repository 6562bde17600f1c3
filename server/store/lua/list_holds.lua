-- list_holds.lua: the user's live holds. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock.
--
-- KEYS[1]  the user's holds (see place_hold.lua)
-- KEYS[2]  the user's outcome records and hold details (hash, see place_hold.lua)
-- ARGV[1]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {now, {order_id_1, expire_1, order_id_2, expire_2, ...}, {details_1, details_2, ...},
--           {life_1, life_2, ...}}:
--          live holds (score > now), earliest expire first, ties by order_id; expire as Unix ms
--          strings; each hold's details ("" when it has none: placed by a release without them)
--          and life record ("" when it has none: placed by a release before life records).
-- now_ms, details_for, records_of_order: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[1])
local live = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf', 'WITHSCORES')
local k = {outcomes = KEYS[2]}
local details, lives = {}, {}
for i = 1, #live, 2 do
  local d, l = records_of_order(k, live[i])
  details[#details + 1] = details_for(d, live[i + 1]) or ''
  lives[#lives + 1] = details_for(l, live[i + 1]) or ''
end
return {now, live, details, lives}
