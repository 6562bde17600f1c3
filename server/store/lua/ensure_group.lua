-- ensure_group.lua: creates a consumer group on one partition's event stream unless it exists.
--
-- Why Lua: XGROUP CREATE answers BUSYGROUP for an existing group; doing the check here keeps that
-- expected case from looking like a Redis error to the client (which counts and reports errors).
--
-- KEYS[1]  the partition's event stream (created empty if missing: MKSTREAM)
-- ARGV[1]  the group name
-- ARGV[2]  where a new group starts: "0" (the oldest retained event) or "$" (only new events)
-- Returns  1 when the group was created, 0 when it already existed.
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.find(created.err, 'BUSYGROUP', 1, true) then
    return 0
  end
  return redis.error_reply(created.err)
end
return 1
