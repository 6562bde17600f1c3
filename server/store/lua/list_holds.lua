-- list_holds.lua: the user's live holds. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock.
--
-- KEYS[1]  the user's holds bucket (as in place_hold.lua)
-- ARGV[1]  user_id (its field in KEYS[1])
-- ARGV[2]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {now, {order_id_1, expire_1, order_id_2, expire_2, ...}, {details_1, details_2, ...},
--           {life_1, life_2, ...}}:
--          live holds (score > now), earliest expire first, ties by order_id; expire as Unix ms
--          strings; each hold's details and life record ("" when it has none).
-- now_ms, load_holds, split_due: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[2])
local _, live = split_due(load_holds({hb = KEYS[1]}, ARGV[1], false), now)
local flat, details, lives = {}, {}, {}
for _, h in ipairs(live) do
  flat[#flat + 1] = h.order
  flat[#flat + 1] = int_str(h.expire)
  details[#details + 1] = h.details or ''
  lives[#lives + 1] = h.life or ''
end
return {now, flat, details, lives}
