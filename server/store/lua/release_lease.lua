-- release_lease.lua: gives up a reaper lease if (and only if) this replica holds it, so the next
-- owner does not wait for it to expire.
--
-- Why Lua: the compare and the delete must be atomic (https://redis.io/commands/set/, "a simple
-- locking pattern").
--
-- KEYS[1]  the partition's reaper lease (see reap.lua)
-- ARGV replica   this replica's id
-- RETURN released int   1 when released, 0 when not held by this replica
if redis.call('GET', KEYS[1]) == A.replica then
  return redis.call('DEL', KEYS[1])
end
return 0
