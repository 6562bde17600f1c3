-- prelude.lua: helpers prepended to every OrderHold script when it is embedded at build time
-- (server/CMakeLists.txt), so each script stays one atomic EVALSHA body.

-- The instant to decide expiry against, Unix ms: `arg` when given (tests only), else the Redis
-- server clock (TIME), so every replica agrees.
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Keeps `user`'s score in the due index `due_key` at the earliest expiry in `holds_key`, or
-- removes the user from the index when no holds remain. The reaper relies on this index.
local function set_earliest(holds_key, due_key, user)
  local first = redis.call('ZRANGE', holds_key, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', due_key, first[2], user)
  else
    redis.call('ZREM', due_key, user)
  end
end

