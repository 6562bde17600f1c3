-- drop_group.lua: takes a consumer group out of the group registry (claim_group.lua), giving its
-- owner's place back. The streams' groups are destroyed partition by partition after it
-- (destroy_group.lua).
--
-- KEYS[1]  the group registry (hash: group -> owner)
-- KEYS[2]  the owners' counts (hash: owner -> groups it owns)
-- ARGV group   the group name
-- REPLY owner... str   {owner} when the group was registered, {} when it was not
local owner = redis.call('HGET', KEYS[1], A.group)
if not owner then
  return {}
end
redis.call('HDEL', KEYS[1], A.group)
if redis.call('HINCRBY', KEYS[2], owner, -1) <= 0 then
  redis.call('HDEL', KEYS[2], owner)
end
return {owner}
