-- drop_group.lua: takes a consumer group out of the group registry (claim_group.lua), giving its
-- owner's place back, when the caller may: the streams' groups are destroyed partition by
-- partition after it (destroy_group.lua).
--
-- Why Lua: reading the owner, comparing it and dropping the group are one step, so a group
-- deleted and claimed again by another caller between a check and a drop is never dropped.
--
-- KEYS[1]  the group registry (hash: group -> owner)
-- KEYS[2]  the owners' counts (hash: owner -> groups it owns)
-- ARGV group       the group name
-- ARGV owners...   the spellings of the caller as an owner (domain/group_owner.h OwnerSpellings):
--                  the group is dropped only when registered to one of them; none: whoever owns
--                  it (no owners enforced, or an operator)
-- REPLY result int   1: dropped; 0: the group was not registered (nothing written); -1: it is
--                    registered to another owner (nothing written)
-- REPLY owner str    result 1: its former owner; else ""
local owner = redis.call('HGET', KEYS[1], A.group)
if not owner then
  return {0, ''}
end
if #A.owners > 0 then
  local mine = false
  for _, spelling in ipairs(A.owners) do
    mine = mine or spelling == owner
  end
  if not mine then
    return {-1, ''}
  end
end
redis.call('HDEL', KEYS[1], A.group)
if redis.call('HINCRBY', KEYS[2], owner, -1) <= 0 then
  redis.call('HDEL', KEYS[2], owner)
end
return {1, owner}
