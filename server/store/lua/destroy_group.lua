-- destroy_group.lua: destroys a consumer group on one partition's event stream, with its
-- consumers and its pending entries (XGROUP DESTROY). The events stay for the other groups.
--
-- Why Lua: XGROUP DESTROY answers an error for a stream that does not exist; a partition where
-- nothing was ever appended nor any group created is the expected case, not a Redis error.
--
-- KEYS[1]  the partition's event stream
-- ARGV group   the group name
-- RETURN destroyed int   1 when the group existed there, else 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
return redis.call('XGROUP', 'DESTROY', KEYS[1], A.group)
