-- ensure_group.lua: creates a consumer group on one partition's event stream unless it exists.
--
-- Why Lua: XGROUP CREATE answers BUSYGROUP for an existing group; doing the check here keeps that
-- expected case from looking like a Redis error to the client (which counts and reports errors).
--
-- KEYS[1]  the partition's event stream (created empty if missing: MKSTREAM)
-- ARGV group   the group name
-- ARGV start   where a new group starts: "0" (the oldest retained event) or "$" (only new events)
-- RETURN created int   1 when the group was created, 0 when it already existed
-- Nudge    when it creates the group, one SPUBLISH of "group" on the partition's reaper channel
--          (the stream key with "events" replaced by "reaper": KeySchema::ReaperChannel), so
--          the reaper that trims the stream counts the new group at its next trim rather than
--          after its idle interval (server/reaper/event_trimmer.h); a refused publish is ignored.
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], A.group, A.start, 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.find(created.err, 'BUSYGROUP', 1, true) then
    return 0
  end
  return redis.error_reply(created.err)
end
redis.pcall('SPUBLISH', string.sub(KEYS[1], 1, -7) .. 'reaper', 'group')
return 1
