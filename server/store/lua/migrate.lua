-- migrate.lua: one bounded step of the background sweep that moves one partition's data written
-- by earlier releases into today's layout (the prelude), for the users no call touches.
--
-- Why Lua: each user is moved in one atomic step, against the calls of every replica (which move
-- a user they touch themselves, in their own script: load_holds in the prelude), so a user's
-- holds are counted, listed and ended exactly once wherever they are.
-- What is moved, and how, is each migration's (lua/migrations/*.lua, registered in
-- migrations.partitions: the prelude); with none registered a step finds nothing left.
--
-- KEYS[1]  the partition's bucket index (as in reap.lua)
-- KEYS[2]  the partition's event stream
-- KEYS[3]  the partition's reaper lease (string: owner id, with a PX expiry; as in reap.lua)
-- ARGV prefix    the key prefix of that partition, "<prefix>:{<partition>}:" (keys.h)
-- ARGV replica   the calling replica's id: the step runs only while that replica holds the lease
--                (taken by its reap.lua calls); "" = no lease (tests, single replica tools)
-- ARGV budget    max users to check in this step, integer >= 1 (bounds the script's run time)
-- ARGV cursor    the sweep's cursor: "" to start, else what the previous step returned
-- ARGV store     the store's constants, packed (store_of in the prelude): the life records of the
--                holds it moves without one
-- REPLY left int     users of the partition the sweep has still to check (an upper bound of those
--                    still in an older shape; 0 once done), -1 when another replica holds the
--                    lease or none does (nothing done: try again later)
-- REPLY cursor str   the next step's cursor, "" once the sweep is done
-- REPLY moved int    users this step moved
if A.replica ~= '' and redis.call('GET', KEYS[3]) ~= A.replica then
  return {-1, A.cursor, 0}
end
local partition = {prefix = A.prefix, bdue = KEYS[1], events = KEYS[2],
                   store = store_of(A.store)}
local moved = 0
for i, step in ipairs(migrations.partitions) do
  -- The migrations run one after the other: a cursor "<i>:<theirs>" is the i-th one's.
  local at, theirs = string.match(A.cursor, '^(%d+):(.*)$')
  at = tonumber(at) or 1
  if i >= at then
    local n, next_cursor, m = step(partition, tonumber(A.budget), i == at and theirs or '')
    moved = moved + m
    if next_cursor ~= '' then
      return {n, int_str(i) .. ':' .. next_cursor, moved}
    end
  end
end
return {0, '', moved}
