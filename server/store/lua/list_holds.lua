-- list_holds.lua: one page of the user's live holds, with the usage of every level. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock. Paging here (not in the server) keeps a reply to one page however many holds the user
-- has (AIP-158: ListHolds' page_size and page_token).
--
-- KEYS[1]  the user's holds bucket (as in place_hold.lua)
-- ARGV[1]  user_id (its field in KEYS[1])
-- ARGV[2]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[3]  scope: only holds of this scope are listed ("" = all)
-- ARGV[4]  the page starts after the hold (ARGV[4] expire ms, ARGV[5] order_id) in list order;
--          "" = from the first
-- ARGV[5]  order_id of that hold (ignored when ARGV[4] is "")
-- ARGV[6]  page size, >= 1: holds listed at most
-- Returns  {now, {order_id_1, expire_1, order_id_2, expire_2, ...}, {details_1, details_2, ...},
--           {life_1, life_2, ...}, {user_holds, user_units, scope_holds, scope_units, plain,
--           more}}:
--          the page: live holds (score > now) of the scope, earliest expire first, ties by
--          order_id, after the cursor; expire as Unix ms strings; each hold's details and life
--          record ("" when it has none). Then the usage: all the user's live holds and units,
--          those of ARGV[3] (0 without a scope), plain = 1 when no live hold has details (a scope,
--          a quantity or labels), more = 1 when holds of the scope follow the page.
-- now_ms, load_holds, split_due: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(ARGV[2])
local scope, after_expire, after_order = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local limit = tonumber(ARGV[6])
local _, live = split_due(load_holds({hb = KEYS[1]}, ARGV[1], false), now)
local flat, details, lives = {}, {}, {}
local user_holds, user_units, scope_holds, scope_units, plain, more = 0, 0, 0, 0, 1, 0
local cursor = after_expire and {expire = after_expire, order = after_order}
for _, h in ipairs(live) do
  local quantity, hold_scope = quantity_scope(h.details, h.expire)
  user_holds = user_holds + 1
  user_units = user_units + quantity
  if h.details then
    plain = 0
  end
  if scope == '' or hold_scope == scope then
    if scope ~= '' then
      scope_holds = scope_holds + 1
      scope_units = scope_units + quantity
    end
    if not cursor or hold_before(cursor, h) then
      if #lives < limit then
        flat[#flat + 1] = h.order
        flat[#flat + 1] = int_str(h.expire)
        details[#details + 1] = h.details or ''
        lives[#lives + 1] = h.life or ''
      else
        more = 1
      end
    end
  end
end
return {now, flat, details, lives,
        {user_holds, user_units, scope_holds, scope_units, plain, more}}
