-- prelude/50_ends.lua: ending holds (the outcome record, then the event: prelude/48_events.lua),
-- expiring due holds, and the outcomes remembered after an end.

-- Hold outcomes, as numbers equal to the proto enum orderhold.v1.HoldOutcome. RETURNED is not an
-- end: the outcome of an event about a PAID hold some of whose units were returned (return_units).
local PAID, CANCELLED, EXPIRED, RETURNED = 1, 2, 3, 4

-- Ends one hold (no longer in the list the caller saves with save_holds): remembers its outcome
-- and appends its event to the partition's stream, in the caller's script, so there is never an
-- end without an event nor an event without an end.
--   k        {holds=, hb=, hd=, bdue=, outcomes=, ended=, events=, maxlen=, maxbytes=, index=}:
--            the user's keys, holds and due-index buckets, the partition's bucket index and
--            stream (set_due), the stream's length and byte bounds (0 or nil: none), and the
--            scope index's key start (nil: none)
--   h        the hold (load_holds); its details are copied into the event, and its details and
--            life record, which were in its packed value, are written beside its outcome record
--   outcome  PAID, CANCELLED or EXPIRED; end_ms: when it ended (for EXPIRED: its expire time)
--   reference  PAID only: the payment reference (nil or '': none)
-- Outcome record: k.outcomes (hash) order -> "<outcome>:<end_ms>:<expire>", and k.ended (sorted
-- set) order -> end_ms, which trim_outcomes uses to drop old records. The details, life record and
-- payment reference (REF) stay beside the record as long as it is kept (trim_outcomes drops them
-- all).
-- Event: stream entry {u=user, o=order, x=outcome, e=expire, t=end_ms[, m=details][, r=reference]},
-- id = Redis server time. Readers ignore fields they do not know, so older releases read these
-- events too.
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
local function end_hold(k, user, h, outcome, end_ms, reference)
  local x, t, e = int_str(outcome), int_str(end_ms), int_str(h.expire)
  reference = reference or ''
  local fields = {h.order, x .. ':' .. t .. ':' .. e}
  -- Redis Cluster's scope protocol: the order's fence for its scope goes with the hold (a step of
  -- an older take for an ended order is refused as ended). Standalone stores write none.
  local fence_field
  if not k.index and h.details then
    local _, s = quantity_scope(h.details, h.expire)
    if s ~= '' then
      fence_field = FENCE .. h.order .. '\0' .. s
    end
  end
  if h.details then
    fields[#fields + 1] = DETAILS .. h.order
    fields[#fields + 1] = h.details
  end
  if h.life then
    fields[#fields + 1] = LIFE .. h.order
    fields[#fields + 1] = h.life
  end
  if reference ~= '' then
    fields[#fields + 1] = REF .. h.order
    fields[#fields + 1] = e .. ':' .. reference
  end
  -- A payment in a scope with a runtime rule counts under the rule (record_purchase, below); the
  -- rule's id goes with the outcome (RETURNS), so a later return gives the units back to that
  -- rule's count only.
  local q, s, rule = 1, '', nil
  if k.index and h.details then
    q, s = quantity_scope(h.details, h.expire)
    if s ~= '' and outcome == PAID then
      rule = scope_rule_id_of(redis.call('GET', scope_rule_key(k.index, s)), end_ms)
    end
  end
  if rule then
    fields[#fields + 1] = RETURNS .. h.order
    fields[#fields + 1] = e .. ':' .. int_str(rule.id) .. ':0:'
  end
  redis.call('HSET', k.outcomes, unpack(fields))
  if fence_field then
    redis.call('HDEL', k.outcomes, fence_field)
  end
  redis.call('ZADD', k.ended, t, h.order)
  add_event(k, user, h, x, t, e, reference)
  -- The end gives the hold's place in its scope back (the scope index, above); a payment moves
  -- its units to the scope's sold count in the same step (a capacity counts both), and to the
  -- buyer's purchases under the scope's runtime rule (record_purchase).
  if s ~= '' then
    scope_drop(k.index, s, user, h.order, q)
    if outcome == PAID then
      redis.call('INCRBY', scope_sold_key(k.index, s), int_str(q))
      if rule then
        record_purchase(k, user, s, q, rule)
      end
    end
  end
end

-- Ends, as EXPIRED, the holds in `due` (split_due's first list) of a user, whose other holds
-- `live` stay: saves `live` (save_holds), then records each end (end_hold). The user's field may
-- be emptied by this: the caller must not touch k.hb afterwards ("Slot migrations").
local function expire_due(k, user, due, live)
  save_holds(k, user, true, live)
  for _, h in ipairs(due) do
    end_hold(k, user, h, EXPIRED, h.expire)
  end
end

-- Drops the outcome records of the orders in `orders` (a list) with their details, life
-- records, payment references and returns. HDEL, the last touch of k.outcomes in a script, since it may empty the hash ("Slot
-- migrations"); only its last chunk can.
local function drop_records(k, orders)
  local fields = {}
  for _, order in ipairs(orders) do
    fields[#fields + 1] = order
    fields[#fields + 1] = DETAILS .. order
    fields[#fields + 1] = LIFE .. order
    fields[#fields + 1] = REF .. order
    fields[#fields + 1] = RETURNS .. order
  end
  -- In chunks (unpack's stack limit: ReleaseHolds may drop thousands); the last touch still.
  for i = 1, #fields, 996 do
    redis.call('HDEL', k.outcomes, unpack(fields, i, math.min(i + 995, #fields)))
  end
end

-- Bounds the user's outcome records after end_hold: drops records that ended at or before
-- now - retention_ms, then the oldest beyond max_records, with their details and life records
-- (drop_records). Both keys expire retention_ms after the last end (never sooner than they were
-- set to), so a user who never comes back leaves nothing behind. When every record is past the
-- retention (a hold that expired longer than that ago, ended only now), the ended set is deleted
-- and the hash emptied; neither is touched again (see "Slot migrations"): k.outcomes is touched
-- last.
local function trim_outcomes(k, now, retention_ms, max_records)
  local bound, ttl = int_str(now - retention_ms), int_str(retention_ms)
  local old = redis.call('ZRANGEBYSCORE', k.ended, '-inf', bound)
  local left = redis.call('ZCARD', k.ended) - #old
  keep_for(k.outcomes, ttl)
  if left == 0 then
    redis.call('DEL', k.ended)
    drop_records(k, old)
    return
  end
  if #old > 0 then
    redis.call('ZREMRANGEBYSCORE', k.ended, '-inf', bound)
  end
  if left > max_records then
    local popped = redis.call('ZPOPMIN', k.ended, int_str(left - max_records))
    for i = 1, #popped, 2 do
      old[#old + 1] = popped[i]
    end
  end
  redis.call('PEXPIRE', k.ended, ttl)
  drop_records(k, old)
end

-- How `order` ended, as a script sees it once the holds in `due` (split_due) have ended: EXPIRED
-- at its expire time when it is in `due`, else its outcome record `record` (HGET of k.outcomes,
-- read before the script's first write: see "Slot migrations"). Returns outcome, end_ms, expire
-- (numbers), or nil when unknown or ended at or before now - retention_ms (a record not trimmed
-- yet is ignored the same way).
local function outcome_of(order, due, record, now, retention_ms)
  for _, h in ipairs(due) do
    if h.order == order then
      record = string.format('%d:%d:%d', EXPIRED, h.expire, h.expire)
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
-- due index), then says how `order` ended, as outcome_of does. `holds` is the user's holds
-- (load_holds); reads the rest it needs before its first write, and the caller must have written
-- nothing before (see "Slot migrations"). Returns removed (holds ended now), then outcome,
-- end_ms, expire (nil when the order is unknown).
local function end_due_then_outcome(k, user, holds, order, now, retention_ms, max_records)
  local due, live = split_due(holds, now)
  local record = redis.call('HGET', k.outcomes, order)
  if #due > 0 then
    expire_due(k, user, due, live)
    trim_outcomes(k, now, retention_ms, max_records)
    set_due(k, user, live[1] and live[1].expire)
  end
  return #due, outcome_of(order, due, record, now, retention_ms)
end
