-- reap.lua: ends, as EXPIRED, the due holds of the users of one index partition, in a bounded
-- batch.
--
-- Why Lua: finding the due users, ending each due hold (outcome record + event) and fixing the
-- index must be atomic, so that several OrderHold replicas reaping at once end (and report, for
-- the expired counter, the lag histogram and the event log) each due hold exactly once.
--
-- Lease: with A.replica set, the script first takes or renews the partition's lease (KEYS[3]) for
-- it; when another replica holds it, it does nothing (result -1). Ownership is decided by
-- the reapers (server/reaper/ownership.h); the lease only fences two replicas that briefly
-- disagree.
-- Standby: with A.standby set instead, the lease is left alone and the script reaps only if the
-- partition's oldest due hold is at least that many ms overdue (its owner is late or dead).
--
-- Cluster note: the user keys, the buckets' due indexes and the holds buckets are built here from
-- A.prefix rather than passed in KEYS (they are only known after reading the indexes). They share
-- KEYS[1]'s hash tag, so every key this script touches is in KEYS[1]'s hash slot. While that slot
-- migrates (resharding), Redis refuses, part-way through the script, any access to one of them
-- that is not on this node, whether it moved or was never there ("non local key"), and keeps the
-- writes made before. So each user's keys are all read before any of them is written, and the
-- user's next expiry is read before its field is emptied (an emptied key is deleted, and then
-- refused): a refusal comes before the user's first write, each user is reaped whole or not at
-- all, and the next call after the migration reaps the rest, one event per hold
-- (tests/integration/script_migration_test.cc). A user without outcome records is refused too
-- while the slot migrates, so the partition's reaping waits for the migration to end. A bucket's
-- due index is read before the bucket's first write, and written once its users are reaped: a
-- refusal part-way leaves a reaped user's entry early, which is harmless (the next visit finds
-- nothing due and sets it right).
--
-- KEYS[1]  the partition's bucket index: sorted set, member = bucket, score = the earliest score in
--          the bucket's due index A.prefix .. "hd:" .. bucket (member = user_id, score = the user's
--          earliest expire time), or earlier (set_due in the prelude: this script sets it right)
-- KEYS[2]  the partition's event stream
-- KEYS[3]  the partition's reaper lease (string: owner id, with a PX expiry)
-- ARGV prefix    the key prefix of that partition, "<prefix>:{<partition>}:" (keys.h): a
--                bucket's due index is prefix .. "hd:" .. bucket, its holds prefix .. "h:" ..
--                bucket, a user's outcome records and hold details prefix .. "x:" .. user_id and
--                ended orders prefix .. "xt:" .. user_id
-- ARGV budget    max users to visit, integer >= 1 (bounds the script's run time; a bucket visited
--                that had no due user counts as one); 0: a peek, which takes the lease as a call
--                does (or answers -1), then returns {now, 0, oldest_due, oldest_due} and ends
--                nothing
-- ARGV now       Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV replica   the calling replica's id; "" = no lease
-- ARGV lease     lease duration, ms >= 1 (with replica)
-- ARGV standby   reap only when the oldest due hold is at least this many ms overdue; "" = no
-- ARGV store     the store's constants, packed (store_of in the prelude): the outcome retention
--                and record bound, the stream's length bound, and the scope index (an ended
--                scoped hold's entry is dropped there)
-- REPLY now int         the instant used, Unix ms
-- REPLY more int        1 when the batch was full (call again), 0 when done, -1 when another
--                       replica holds the lease or (standby) nothing is overdue enough (nothing
--                       done)
-- REPLY oldest_due int  the earliest score in the indexes before this call (Unix ms; a bucket's
--                       may be early, see KEYS[1]), or -1 when they were empty or another replica
--                       holds the lease (-1 does not mean "nothing due" then)
-- REPLY next_due int    the earliest score left after this call, or earlier: oldest_due when
--                       nothing was due (a peek's and a refusal's too), `now` when the call
--                       visited a bucket (the next look finds the true one: reading it here would
--                       mean scores formatted for every call, or a read after the writes, which
--                       "Slot migrations" forbids). The reaper sleeps on it until a nudge says a
--                       hold came due earlier (set_due in the prelude).
-- REPLY expires... int  one expire time (Unix ms) per hold ended
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local maxlen, index = store.maxlen, store.index
local prefix = A.prefix

local oldest = tonumber(redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')[2])
if A.standby ~= '' then
  if not oldest or oldest > now - tonumber(A.standby) then
    return {now, -1, oldest or -1, oldest or -1}
  end
elseif A.replica ~= '' then
  local holder = redis.call('GET', KEYS[3])
  if holder and holder ~= A.replica then
    return {now, -1, -1, -1}
  end
  redis.call('SET', KEYS[3], A.replica, 'PX', A.lease)
end

local budget = tonumber(A.budget)
if budget == 0 then
  return {now, 0, oldest or -1, oldest or -1}
end
local retention, max_records = store.retention, store.records
local out = {now, 0, oldest or -1, oldest or -1}

-- Ends the user's due holds (each with its outcome record and event; their expire times go to
-- `out`) and returns the user's next expiry (a number), or nil when it has no hold left. Reads
-- every key of the user first (see the cluster note), then writes; its field of the holds bucket
-- may be emptied. `bucket`: the user's holds bucket and due index ({hb=, hd=}); `packed`: its
-- field there, read by the caller (false: none).
local function reap_user(user, bucket, packed)
  local k = {hb = bucket.hb, hd = bucket.hd, bdue = KEYS[1], outcomes = prefix .. 'x:' .. user,
             ended = prefix .. 'xt:' .. user, events = KEYS[2], maxlen = maxlen,
             maxbytes = store.maxbytes, index = index, store = store}
  redis.call('EXISTS', k.outcomes, k.ended)
  local due, live = split_due(load_holds(k, user, true, packed), now)
  if #due > 0 then
    expire_due(k, user, due, live)
    for _, h in ipairs(due) do
      out[#out + 1] = h.expire
    end
    trim_outcomes(k, now, retention, max_records)
  end
  return live[1] and live[1].expire
end

-- The buckets due: in each, the due users among its lowest `budget` + 1 (all read before the
-- bucket's first write), each reaped; then the bucket's index entries, and its score set to its
-- true earliest (the reaped users' next expiries and the first user not reaped). ZADDs before the
-- ZREM, which alone may empty the bucket's key, and is its last touch ("Slot migrations").
local buckets = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', int_str(now), 'LIMIT', '0',
  int_str(budget))
if #buckets > 0 then
  out[4] = now
end
for _, bucket in ipairs(buckets) do
  if budget <= 0 then
    break
  end
  local keys = {hd = prefix .. 'hd:' .. bucket, hb = prefix .. 'h:' .. bucket}
  -- Three keys, so that while the slot migrates a bucket key not on this node is refused rather
  -- than read as empty: a one-key command on a missing key is served by the importing node (this
  -- script runs there after an ASK once the declared keys have moved), and an empty read would
  -- drop the bucket, and its users, from the bucket index. Like the users' EXISTS in reap_user.
  redis.call('EXISTS', keys.hd, KEYS[1], keys.hb)
  local lowest = redis.call('ZRANGE', keys.hd, '0', int_str(budget), 'WITHSCORES')
  -- Its due users (at most `budget`) and their fields in the holds bucket, all read before the
  -- first write of any of them: one user's HDEL may empty the bucket ("Slot migrations"; no later
  -- user then has a field).
  local users, packed = {}, {}
  for i = 1, #lowest - 1, 2 do
    if tonumber(lowest[i + 1]) > now or #users >= budget then
      break
    end
    users[#users + 1] = lowest[i]
    packed[lowest[i]] = redis.call('HGET', keys.hb, lowest[i])
  end
  local moved, gone, earliest = {}, {}, nil
  for _, user in ipairs(users) do
    local next_live = reap_user(user, keys, packed[user])
    if next_live then
      moved[#moved + 1] = int_str(next_live)
      moved[#moved + 1] = user
      earliest = math.min(earliest or next_live, next_live)
    else
      gone[#gone + 1] = user
    end
  end
  budget = budget - math.max(1, #users)
  local first_left = lowest[2 * #users + 2]  -- the score of the first user not reaped
  if first_left then
    earliest = math.min(earliest or tonumber(first_left), tonumber(first_left))
  end
  if #moved > 0 then
    redis.call('ZADD', keys.hd, unpack(moved))
  end
  if #gone > 0 then
    redis.call('ZREM', keys.hd, unpack(gone))
  end
  if earliest then
    redis.call('ZADD', KEYS[1], int_str(earliest), bucket)
  else
    redis.call('ZREM', KEYS[1], bucket)
  end
end
if budget <= 0 then
  out[2] = 1
end
return out
