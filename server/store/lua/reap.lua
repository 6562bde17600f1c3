-- reap.lua: ends, as EXPIRED, the due holds of the users of one index partition, in a bounded
-- batch.
--
-- Why Lua: finding the due users, ending each due hold (outcome record + event) and fixing the
-- index must be atomic, so that several OrderHold replicas reaping at once end (and report, for
-- the expired counter, the lag histogram and the event log) each due hold exactly once.
--
-- Lease: with ARGV[6] set, the script first takes or renews the partition's lease (KEYS[3]) for
-- ARGV[6]; when another replica holds it, it does nothing (result -1). Ownership is decided by
-- the reapers (server/reaper/ownership.h); the lease only fences two replicas that briefly
-- disagree.
-- Standby: with ARGV[8] set instead, the lease is left alone and the script reaps only if the
-- partition's oldest due hold is at least ARGV[8] ms overdue (its owner is late or dead).
--
-- Cluster note: the user keys are built here from ARGV[1] rather than passed in KEYS (they are
-- only known after reading the index). They share KEYS[1]'s hash tag, so every key this script
-- touches is in KEYS[1]'s hash slot. While that slot migrates (resharding), Redis refuses, part-way
-- through the script, any access to one of them that is not on this node, whether it moved or was
-- never there ("non local key"), and keeps the writes made before. So each user's keys are all
-- read before any of them is written, and the user's next expiry is read before its holds key is
-- emptied (an emptied key is deleted, and then refused): a refusal comes before the user's first
-- write, each user is reaped whole or not at all, and the next call after the migration reaps the
-- rest, one event per hold (tests/integration/script_migration_test.cc). A user without outcome
-- records is refused too while the slot migrates, so the partition's reaping waits for the
-- migration to end.
--
-- KEYS[1]  the due index of one partition: sorted set, member = user_id, score = the user's
--          earliest expire time (Unix ms)
-- KEYS[2]  the partition's event stream
-- KEYS[3]  the partition's reaper lease (string: owner id, with a PX expiry)
-- ARGV[1]  the key prefix of that partition; a user's holds are ARGV[1] .. "u:" .. user_id, its
--          outcome records and hold details ARGV[1] .. "x:" .. user_id and ended orders
--          ARGV[1] .. "xt:" .. user_id
-- ARGV[2]  max users to visit, integer >= 1 (bounds the script's run time)
-- ARGV[3]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[4]  outcome retention, ms >= 1
-- ARGV[5]  max outcome records per user, >= 1
-- ARGV[6]  the calling replica's id; "" = no lease
-- ARGV[7]  lease duration, ms >= 1 (with ARGV[6])
-- ARGV[8]  standby: reap only when the oldest due hold is at least this many ms overdue; "" = no
-- Returns  {now, more, oldest_due, expire_1, expire_2, ...}: one expire time (Unix ms) per hold
--          ended; more = 1 when the batch was full (call again), 0 when done, -1 when another
--          replica holds the lease or (standby) nothing is overdue enough (nothing done);
--          oldest_due = the earliest score in the index before this call (Unix ms), or -1 when
--          the index was empty or another replica holds the lease (the index is not read then:
--          -1 does not mean "nothing due").
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in prelude.lua)
-- Helpers: see prelude.lua, prepended when the script is embedded.
local now = now_ms(ARGV[3])

local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if ARGV[8] ~= '' then
  if not first[2] or tonumber(first[2]) > now - tonumber(ARGV[8]) then
    return {now, -1, tonumber(first[2] or -1)}
  end
elseif ARGV[6] ~= '' then
  local holder = redis.call('GET', KEYS[3])
  if holder and holder ~= ARGV[6] then
    return {now, -1, -1}
  end
  redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[7])
end

local limit = tonumber(ARGV[2])
local retention, max_records = tonumber(ARGV[4]), tonumber(ARGV[5])
local users = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local out = {now, 0, tonumber(first[2] or -1)}
if #users == limit then
  out[2] = 1
end
for _, user in ipairs(users) do
  local k = {holds = ARGV[1] .. 'u:' .. user, due = KEYS[1], outcomes = ARGV[1] .. 'x:' .. user,
             ended = ARGV[1] .. 'xt:' .. user, events = KEYS[2]}
  -- Reads first (see the cluster note): every key of the user, its earliest live hold, its due
  -- holds and their details.
  redis.call('EXISTS', k.holds, k.outcomes, k.ended)
  local next_live = first_live(k.holds, now)
  local due = due_holds(k.holds, now)
  local due_details = details_of(k, due)
  expire_due(k, user, now, due, due_details)
  if #due > 0 then
    for i = 2, #due, 2 do
      out[#out + 1] = tonumber(due[i])
    end
    trim_outcomes(k, now, retention, max_records)
  end
  if next_live[2] then
    redis.call('ZADD', KEYS[1], next_live[2], user)
  else
    redis.call('ZREM', KEYS[1], user)
  end
end
return out
