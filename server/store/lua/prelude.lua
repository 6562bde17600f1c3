-- prelude.lua: helpers prepended to every OrderHold script when it is embedded at build time
-- (server/CMakeLists.txt), so each script stays one atomic EVALSHA body.

-- The instant to decide expiry against, Unix ms: `arg` when given (tests only), else the Redis
-- server clock (TIME), so every replica agrees.
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Slot migrations (Redis Cluster resharding). While a script's slot is MIGRATING, Redis refuses,
-- part-way through the script, any access to a key of that slot that is not on this node: one that
-- moved, one that never existed, and one that this very script emptied (Redis deletes an empty
-- key). It keeps the writes made before the refusal ("non local key"; cluster-spec.md, measured on
-- 7.0.15). Redis only starts a script on such a node when every key in KEYS exists there (else
-- TRYAGAIN or ASK). So every script reads all it needs before its first write, and never touches
-- a key again after a write that may have emptied it: a refusal can then only come before the
-- first write, and nothing is half done (tests/integration/script_migration_test.cc).

-- The due index, in two levels (keys.h): the user's bucket k.hd (user -> its earliest expiry)
-- and the partition's k.bdue (bucket -> the earliest score in its k.hd). k.hd's name ends in
-- ":hd:<bucket>"; the bucket is read from it.
-- Sets `user`'s score in k.hd to `earliest` (the earliest expiry among its holds, as read before
-- the call's writes), or removes the user when `earliest` is nil (no holds left), and lowers the
-- bucket's score in k.bdue to `earliest` when that is earlier (ZADD LT adds a missing bucket).
-- The bucket's score is never raised here: after a call that moves the bucket's earliest user
-- later (Pay, CancelHold, ExtendHold, ReleaseHolds), it is earlier than the truth until the
-- reaper visits the bucket at that score and sets it right (reap.lua). Early is harmless (one
-- visit that finds nothing due); late would delay expiries, and never happens. So no call reads
-- the bucket before writing it. The last touch of k.hd in a script: a ZREM may empty it ("Slot
-- migrations").
local function set_due(k, user, earliest)
  if earliest then
    redis.call('ZADD', k.hd, earliest, user)
    redis.call('ZADD', k.bdue, 'LT', earliest, string.match(k.hd, ':hd:(%d+)$'))
  else
    redis.call('ZREM', k.hd, user)
  end
end

-- Whether stream id a ("<ms>-<seq>") comes after stream id b, comparing both parts as numbers.
local function stream_id_after(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end

-- Hold details (format in server/store/hold_details_codec.h): "<expire>:<place>:<quantity>:<n>:
-- <scope>...", kept in the user's outcome records hash (k.outcomes) under the field DETAILS ..
-- order_id. DETAILS is a control character, which no order_id contains (ids refuse them), so a
-- details field never meets an outcome record (field = order_id). In that hash, not a key of their
-- own: every script that may need them already names it in KEYS, so a slot migration treats them
-- as it treats the records ("Slot migrations" below), and a user costs no extra key. Only a hold
-- with a scope, a quantity other than 1 or labels has details; a plain hold has none, and reads as
-- quantity 1, no scope. The value of a hold is the one whose <expire> is the hold's; any other (a
-- leftover of an earlier hold of the same order_id) is ignored the same way and not copied into
-- events.
local DETAILS = '\1'

-- A hold's life record (format in server/store/hold_details_codec.h): "<expire>:<place>:
-- <max_expire>:<extensions>:<n>:{<len>:<request id>}*", in the same hash under the field
-- LIFE .. order_id, for every hold placed by this release. Unlike the details it changes:
-- extend_hold.lua rewrites it (and the details' <expire>) whenever it moves the expiry. It is
-- self-checking by its <expire> as the details are (details_for), and kept and dropped with them.
local LIFE = '\2'

-- Returns `value` when it belongs to the hold expiring at `expire`, else nil.
local function details_for(value, expire)
  if not value then
    return nil
  end
  local e = string.match(value, '^(%d+):')
  if e and tonumber(e) == tonumber(expire) then
    return value
  end
  return nil
end

-- The quantity and scope of the hold expiring at `expire` whose details value is `value`
-- (nil or another hold's: 1, '').
local function quantity_scope(value, expire)
  value = details_for(value, expire)
  if not value then
    return 1, ''
  end
  local q, n, pos = string.match(value, '^%d+:%d+:(%d+):(%d+):()')
  return tonumber(q), string.sub(value, pos, pos + tonumber(n) - 1)
end

-- The details value of `order` (HGET: a read, before the script's first write), or false.
local function details_of_order(k, order)
  return redis.call('HGET', k.outcomes, DETAILS .. order) or false
end

-- The details and life values of `order` (reads, before the script's first write), each false
-- when absent. Two HGETs rather than one HMGET: the documented ACL (deploy/redis/orderhold.acl)
-- grants +hget, and a new command would make every deployment change its ACL before upgrading.
local function records_of_order(k, order)
  return redis.call('HGET', k.outcomes, DETAILS .. order) or false,
    redis.call('HGET', k.outcomes, LIFE .. order) or false
end

-- The details values of the holds in the flat array {order_1, expire_1, ...} (as due_holds
-- returns): {value_or_false_1, ...}, one per hold. A read: call it before the script's first write.
local function details_of(k, flat)
  local out = {}
  for i = 1, #flat, 2 do
    out[#out + 1] = details_of_order(k, flat[i])
  end
  return out
end

-- Hold outcomes, as numbers equal to the proto enum orderhold.v1.HoldOutcome.
local PAID, CANCELLED, EXPIRED = 1, 2, 3

-- Whether this script execution already published its nudge (see end_hold).
local nudged = false

-- Ends one hold (already removed from, or about to be removed from, the user's holds by the
-- caller): remembers its outcome and appends its event to the partition's stream, in the caller's
-- script, so there is never an end without an event nor an event without an end.
--   k        {holds=, hd=, bdue=, outcomes=, ended=, events=}: the user's keys and due-index
--            bucket, the partition's bucket index and stream (set_due)
--   outcome  PAID, CANCELLED or EXPIRED
--   expire   the hold's expire time; end_ms: when it ended (for EXPIRED: its expire time)
--   details  the hold's details value (details_of_order, read before the script's first write),
--            or nil/false; copied into the event when it is the hold's (details_for)
-- Outcome record: k.outcomes (hash) order -> "<outcome>:<end_ms>:<expire>", and k.ended (sorted
-- set) order -> end_ms, which trim_outcomes uses to drop old records. The details stay beside the
-- record as long as it is kept (trim_outcomes drops both).
-- Event: stream entry {u=user, o=order, x=outcome, e=expire, t=end_ms[, m=details]}, id = Redis
-- server time. Readers ignore fields they do not know, so older releases read these events too.
-- Nudge: the first end of a script execution also publishes an empty message on the partition's
-- nudge channel (sharded pub/sub, SPUBLISH), so the servers subscribed to it read the stream now
-- instead of at their next safety sweep (server/store/event_nudges.h). One per execution, not
-- per event: a reader reads the whole stream anyway, and subscribers see the message only once
-- the script has finished (Redis writes to other clients after the command), so every event of
-- the script is there to read.
--   The channel is the events key with its last word "events" replaced by "nudge"
--   (<prefix>:{<partition>}:events -> <prefix>:{<partition>}:nudge, KeySchema::NudgeChannel in
--   keys.h): derived here rather than passed in KEYS, because Redis Cluster counts every KEYS
--   entry as a key that must exist while the slot migrates, and a channel never exists as a key:
--   each script would be answered TRYAGAIN for the whole of a reshard (measured on 7.0.15,
--   tests/integration/script_migration_test.cc). A channel of the script's own slot, which the
--   shared hash tag guarantees, is what Redis Cluster lets a script publish; SPUBLISH itself is
--   served by the slot's owner until the migration ends.
--   redis.pcall, not redis.call: a publish refused (an ACL without the channel pattern or
--   +spublish) or failing for any other reason is ignored and never fails or rolls back the end
--   of a hold; watchers then rely on the safety sweep.
local function end_hold(k, user, order, outcome, expire, end_ms, details)
  redis.call('HSET', k.outcomes, order, outcome .. ':' .. end_ms .. ':' .. expire)
  redis.call('ZADD', k.ended, end_ms, order)
  details = details_for(details, expire)
  if details then
    redis.call('XADD', k.events, '*', 'u', user, 'o', order, 'x', outcome, 'e', expire, 't',
      end_ms, 'm', details)
  else
    redis.call('XADD', k.events, '*', 'u', user, 'o', order, 'x', outcome, 'e', expire, 't', end_ms)
  end
  if not nudged then
    nudged = true
    redis.pcall('SPUBLISH', string.sub(k.events, 1, -7) .. 'nudge', '')
  end
end

-- The holds in `holds_key` that are no longer live (score <= now): the flat array
-- {order_1, expire_1, ...}, earliest first.
local function due_holds(holds_key, now)
  return redis.call('ZRANGEBYSCORE', holds_key, '-inf', now, 'WITHSCORES')
end

-- The earliest live hold in `holds_key` (score > now): {order, expire}, or {} when none.
local function first_live(holds_key, now)
  return redis.call('ZRANGEBYSCORE', holds_key, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
end

-- Ends, as EXPIRED, every hold of the user that is no longer live (score <= now): `due` is
-- due_holds(k.holds, now) and `due_details` details_of(k, due), both read by the caller before its
-- first write. The holds key may be emptied (deleted) by this: the caller must not touch it
-- afterwards (see "Slot migrations").
local function expire_due(k, user, now, due, due_details)
  if #due > 0 then
    for i = 1, #due, 2 do
      end_hold(k, user, due[i], EXPIRED, due[i + 1], due[i + 1], due_details[(i + 1) / 2])
    end
    redis.call('ZREMRANGEBYSCORE', k.holds, '-inf', now)
  end
end

-- Drops the outcome records of the orders in `orders` (a list) and their details and life
-- records, except those of `keep` (an order this script has just placed again: its new ones).
-- HDEL, the last touch of k.outcomes in a script, since it may empty the hash ("Slot
-- migrations"); only its last chunk can.
local function drop_records(k, orders, keep)
  local fields = {}
  for _, order in ipairs(orders) do
    fields[#fields + 1] = order
    if order ~= keep then
      fields[#fields + 1] = DETAILS .. order
      fields[#fields + 1] = LIFE .. order
    end
  end
  -- In chunks (unpack's stack limit: ReleaseHolds may drop thousands); the last touch still.
  for i = 1, #fields, 999 do
    redis.call('HDEL', k.outcomes, unpack(fields, i, math.min(i + 998, #fields)))
  end
end

-- Bounds the user's outcome records after end_hold: drops records that ended at or before
-- now - retention_ms, then the oldest beyond max_records, with their details (except `keep`, see
-- drop_records). The records' keys expire retention_ms after the last end, and no earlier than a
-- live hold's details need (place_hold.lua), so a user who never comes back leaves nothing behind.
-- When every record is past the retention (a hold that expired longer than that ago, ended only
-- now), the ended set is deleted and, unless live holds' details remain, so is the hash (emptied);
-- neither is touched again (see "Slot migrations"): k.outcomes is touched last.
local function trim_outcomes(k, now, retention_ms, max_records, keep)
  local old = redis.call('ZRANGEBYSCORE', k.ended, '-inf', now - retention_ms)
  local left = redis.call('ZCARD', k.ended) - #old
  -- NX for a hash created by this end, GT so as never to shorten what a live hold's details need.
  redis.call('PEXPIRE', k.outcomes, retention_ms, 'NX')
  redis.call('PEXPIRE', k.outcomes, retention_ms, 'GT')
  if left == 0 then
    redis.call('DEL', k.ended)
    drop_records(k, old, keep)
    return
  end
  if #old > 0 then
    redis.call('ZREMRANGEBYSCORE', k.ended, '-inf', now - retention_ms)
  end
  if left > max_records then
    local popped = redis.call('ZPOPMIN', k.ended, left - max_records)
    for i = 1, #popped, 2 do
      old[#old + 1] = popped[i]
    end
  end
  redis.call('PEXPIRE', k.ended, retention_ms)
  drop_records(k, old, keep)
end

-- How `order` ended, as a script sees it once expire_due(k, user, now, due) has run: EXPIRED at
-- its expire time when it is in `due`, else its outcome record `record` (HGET of k.outcomes, read
-- before the script's first write: see "Slot migrations"). Returns outcome, end_ms, expire
-- (numbers), or nil when unknown or ended at or before now - retention_ms (a record not trimmed
-- yet is ignored the same way).
local function outcome_of(order, due, record, now, retention_ms)
  for i = 1, #due, 2 do
    if due[i] == order then
      record = EXPIRED .. ':' .. due[i + 1] .. ':' .. due[i + 1]
    end
  end
  if not record then
    return nil
  end
  local outcome, end_ms, expire = string.match(record, '^(%d+):(%-?%d+):(%-?%d+)$')
  if not outcome or tonumber(end_ms) <= now - retention_ms then
    return nil
  end
  return tonumber(outcome), tonumber(end_ms), tonumber(expire)
end

-- For a script about `order` that found no live hold of it (Pay, CancelHold, ExtendHold): ends the
-- user's holds that are no longer live as EXPIRED (lazy cleanup: expire_due, trim_outcomes and the
-- due index), then says how `order` ended, as outcome_of does. Reads all it needs before its first
-- write, and the caller must have written nothing before (see "Slot migrations"). Returns removed
-- (holds ended now), then outcome, end_ms, expire (nil when the order is unknown).
local function end_due_then_outcome(k, user, order, now, retention_ms, max_records)
  local due = due_holds(k.holds, now)
  local due_details = details_of(k, due)
  local next_live = first_live(k.holds, now)
  local record = redis.call('HGET', k.outcomes, order)
  local removed = #due / 2
  if removed > 0 then
    expire_due(k, user, now, due, due_details)
    trim_outcomes(k, now, retention_ms, max_records)
    set_due(k, user, next_live[2])
  end
  return removed, outcome_of(order, due, record, now, retention_ms)
end
