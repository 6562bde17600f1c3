-- claim_group.lua: gives a consumer group an owner, or says whose it is, within a bound on the
-- groups one owner may have.
--
-- Why Lua: reading the owner, counting the owner's groups and recording the new group are one
-- step, so two callers can neither both own a group nor together pass the bound.
-- A group that exists on the streams but is not registered here (created by a release before the
-- registry) is claimed by its next watcher like a new one.
--
-- KEYS[1]  the group registry (hash: group -> owner; KeySchema::GroupOwnersKey)
-- KEYS[2]  the owners' counts (hash: owner -> groups it owns; KeySchema::GroupCountsKey), in
--          KEYS[1]'s slot
-- ARGV group        the group name
-- ARGV caller       the caller, its principal ("" for a caller without one)
-- ARGV max_groups   the most groups one owner may have (>= 1)
-- REPLY result int  1: the group was unknown and is now the caller's; 0: the group is registered
--                   to `owner` (the caller or another); -1: the group is unknown and the caller
--                   already has max_groups groups or more: nothing was written
-- REPLY owner str   the caller (results 1 and -1), or the group's owner (result 0)
-- REPLY groups int  the groups `owner` has after the call
local owner = redis.call('HGET', KEYS[1], A.group)
if owner then
  return {0, owner, tonumber(redis.call('HGET', KEYS[2], owner) or '0')}
end
local count = tonumber(redis.call('HGET', KEYS[2], A.caller) or '0')
if count >= tonumber(A.max_groups) then
  return {-1, A.caller, count}
end
redis.call('HSET', KEYS[1], A.group, A.caller)
return {1, A.caller, redis.call('HINCRBY', KEYS[2], A.caller, 1)}
