-- list_holds.lua: the user's live holds. Read-only.
--
-- Why Lua: the read must use the Redis server clock (TIME) to decide what is live, so every
-- replica agrees with place_hold.lua and end_hold.lua; a plain ZRANGEBYSCORE would need the host
-- clock.
--
-- KEYS[1]  the user's holds (see place_hold.lua)
-- ARGV[1]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- Returns  {now, {order_id_1, expire_1, order_id_2, expire_2, ...}}: live holds (score > now),
--          earliest expire first, ties by order_id; expire as Unix ms strings.
-- now_ms: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[1])
return {now, redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf', 'WITHSCORES')}
