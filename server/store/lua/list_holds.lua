-- list_holds.lua: the user's live holds. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock.
--
-- KEYS[1]  the user's holds in layout v1 (see place_hold.lua)
-- KEYS[2]  the user's outcome records and hold details (hash, see place_hold.lua)
-- KEYS[3]  the user's holds bucket (layout v2, as in place_hold.lua); KEYS[1] again when
--          ARGV[2] is 0
-- ARGV[1]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[2]  hold layout mode, as place_hold.lua's last argument
-- ARGV[3]  user_id (its field in KEYS[3])
-- Returns  {now, {order_id_1, expire_1, order_id_2, expire_2, ...}, {details_1, details_2, ...},
--           {life_1, life_2, ...}}:
--          live holds (score > now), earliest expire first, ties by order_id; expire as Unix ms
--          strings; each hold's details ("" when it has none: placed by a release without them)
--          and life record ("" when it has none: placed by a release before life records).
-- now_ms, load_holds, split_due: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[1])
local k = {holds = KEYS[1], outcomes = KEYS[2], hb = KEYS[3]}
local u = load_holds(k, ARGV[3], tonumber(ARGV[2]), {life = true, details = true})
local _, live = split_due(u.holds, now)
local flat, details, lives = {}, {}, {}
for _, h in ipairs(live) do
  flat[#flat + 1] = h.order
  flat[#flat + 1] = int_str(h.expire)
  details[#details + 1] = h.details or ''
  lives[#lives + 1] = h.life or ''
end
return {now, flat, details, lives}
