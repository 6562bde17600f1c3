-- scope_check.lua: the sweep's question to a user's slot about a take whose settle never came
-- (Redis Cluster; the prelude, "The scope protocol across slots"): is the order's hold live in
-- that scope with that quantity, and from now on no place or extend step with this stamp or an
-- older one passes (the fence).
--
-- Why Lua: the answer and the fence must be one step, or a place step could land between the
-- sweep's look and its fence, and its hold would outlive the entry the sweep then drops.
--
-- KEYS[1]  the user's holds bucket (as place_hold.lua's KEYS[1])
-- KEYS[2]  the user's outcome records (hash; the fence is its field FENCE .. order .. "\0" ..
--          scope, the prelude)
-- ARGV user      user_id
-- ARGV order     order_id
-- ARGV scope     the entry's scope
-- ARGV quantity  the entry's units
-- ARGV stamp     the pending take's stamp: the fence becomes at least this
-- ARGV window    ms >= 1: the fence lasts at least this (the outcome hash's time to live), longer
--                than any step carrying the stamp may still arrive (place_hold.lua refuses one
--                past its take's window)
-- ARGV now       Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV store     the store's constants, packed (store_of in the prelude)
-- REPLY now int     the instant used, Unix ms
-- REPLY expire int  the hold's expiry when it is live in that scope with that quantity; else -1
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], outcomes = KEYS[2], store = store}
local stamp = tonumber(A.stamp)
local fence_field = FENCE .. A.order .. '\0' .. A.scope

-- Every read before the first write ("Slot migrations" in the prelude).
local holds = load_holds(k, A.user, false)
local fence = redis.call('HGET', k.outcomes, fence_field)
local expire = -1
for _, h in ipairs(holds) do
  if h.order == A.order and h.expire > now then
    local q, s = quantity_scope(h.details, h.expire)
    if s == A.scope and q == tonumber(A.quantity) then
      expire = h.expire
    end
  end
end
if not fence or tonumber(fence) < stamp then
  redis.call('HSET', k.outcomes, fence_field, int_str(stamp))
end
keep_for(k.outcomes, A.window)
return {now, expire}
