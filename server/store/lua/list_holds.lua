-- list_holds.lua: one page of the user's live holds, with the usage of every level. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock. Paging here (not in the server) keeps a reply to one page however many holds the user
-- has (AIP-158: ListHolds' page_size and page_token).
--
-- KEYS[1]  the user's holds bucket (as in place_hold.lua)
-- ARGV user          user_id (its field in KEYS[1])
-- ARGV now           Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV scope         only holds of this scope are listed ("" = all)
-- ARGV after_expire  the page starts after the hold (after_expire ms, after_order) in list order;
--                    "" = from the first
-- ARGV after_order   order_id of that hold (ignored when after_expire is "")
-- ARGV page_size     >= 1: holds listed at most
-- ARGV store         the store's constants, packed (store_of in the prelude)
-- REPLY now int            the instant used, Unix ms
-- REPLY page array         the page, 2 elements a hold: {order_id, expire}: live holds (score >
--                          now) of the scope, earliest expire first, ties by order_id, after the
--                          cursor; expire as Unix ms strings
-- REPLY details array      each listed hold's details, "" when it has none
-- REPLY lives array        each listed hold's life record, "" when it has none
-- REPLY user_holds int     all the user's live holds
-- REPLY user_units int     their units
-- REPLY scope_holds int    the live holds of the scope (0 without a scope)
-- REPLY scope_units int    their units
-- REPLY plain int          1 when no live hold has details (a scope, a quantity or labels)
-- REPLY more int           1 when holds of the scope follow the page
-- REPLY rule str           the scope's runtime rule, packed (prelude/45_scope_rules.lua), when it
--                          has one and the store keeps them (a scope index: not a Redis Cluster);
--                          else "": the limits a PlaceHold of the scope meets, read in this step
-- now_ms, load_holds, split_due: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local scope, after_expire, after_order = A.scope, tonumber(A.after_expire), A.after_order
local limit = tonumber(A.page_size)
local store = store_of(A.store)
local _, live = split_due(load_holds({hb = KEYS[1], store = store}, A.user, false), now)
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
local rule = ''
if scope ~= '' and store.index then
  local packed = redis.call('GET', scope_rule_key(store.index, scope))
  if scope_rule_of(packed, now) then
    rule = packed
  end
end
return {now, flat, details, lives, user_holds, user_units, scope_holds, scope_units, plain, more,
  rule}
