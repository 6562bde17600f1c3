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
-- ARGV[1]  the group name
-- ARGV[2]  the caller, its principal ("" for a caller without one)
-- ARGV[3]  the most groups one owner may have (>= 1)
-- Returns  {1, caller, n}: the group was unknown and is now the caller's, n its groups now;
--          {0, owner, n}: the group is registered to `owner` (the caller or another), who has n;
--          {-1, caller, n}: the group is unknown and the caller already has n >= ARGV[3] groups:
--          nothing was written.
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then
  return {0, owner, tonumber(redis.call('HGET', KEYS[2], owner) or '0')}
end
local count = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if count >= tonumber(ARGV[3]) then
  return {-1, ARGV[2], count}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1, ARGV[2], redis.call('HINCRBY', KEYS[2], ARGV[2], 1)}
