-- extend_hold.lua: moves a live hold's expiry later, up to its lifetime cap (ExtendHold).
--
-- Why Lua: "is it live?", the cap, the extension count, the new score, the due index and the
-- life record must change in one atomic step, or an extension could land on a hold that expired
-- (or was paid) a millisecond earlier, or two replicas could both spend the last extension.
--
-- New expiry = max(expire, min(now + ttl, cap)): never shorter (that is CancelHold), never past the
-- cap fixed when the hold was placed (its life record, LIFE in the prelude), so a repeat is safe.
-- Limits are not checked: an extension takes no new slot. It ends nothing, so no event either,
-- except for holds found no longer live (ended as EXPIRED, each with its event, as end_hold.lua).
--
-- KEYS[1..6]  as in place_hold.lua: the user's holds bucket, its due-index bucket, the user's
--             outcome records (hash) and ended orders (sorted set), the partition's event stream,
--             the partition's bucket index
-- ARGV[1]  user_id (the member of KEYS[2])
-- ARGV[2]  order_id
-- ARGV[3]  ttl, integer ms >= 1: the wanted time left from now
-- ARGV[4]  now, Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV[5]  outcome retention, ms >= 1
-- ARGV[6]  max outcome records per user, >= 1
-- ARGV[7]  max_extensions, integer >= 0: calls that moved the expiry, at most; 0 = no count limit
-- ARGV[8]  request_id; "" = none. A request_id among the last 4 the hold counted is a retry of
--          a call that moved the expiry: it changes nothing and answers the hold as it is (moved =
--          2), so a constant request_id cannot extend twice.
-- ARGV[9]  lifetime cap, ms >= 1, and
-- ARGV[10] default ttl, ms >= 1: for a hold without a life record (a migration's, the prelude),
--          whose cap becomes <place> + ARGV[9], <place> being its details' place time, else
--          <expire> - ARGV[10] (as if placed with the default ttl), and never before <expire>;
--          written at its first move.
-- ARGV[11] the partition's event stream length bound (--event_stream_max_len): each XADD trims the
--          stream to about this many entries (MAXLEN ~); 0 = no length bound
-- ARGV[12] the scope index's key start, "<prefix>:{" (the prelude "The scope index"): an ended
--          scoped hold's entry is dropped there, a moved hold's entry moves with it; "" = the
--          store keeps none
-- Returns  {result, now, expire, removed, outcome, end, details, life, moved, capped}
--          result  1 the hold is live: expire = its expiry after the call; moved 1 when this call
--                    moved it, 2 when it is a replay of a counted request_id (nothing changed);
--                    capped 1 when now + ttl was past the cap; details and life after the call
--                    (life as it would be written, for a hold without one)
--                  -1 refused, max_extensions used: nothing changed; expire, details, life as is
--                  2 the order's hold has ended: outcome (1 PAID, 2 CANCELLED, 3 EXPIRED), end
--                    (Unix ms) and expire describe that end (an EXPIRED end possibly made by this
--                    call's cleanup, which gives the same answer before and after the reaper)
--                  0 unknown order (never placed, or its record is older than the retention)
--          removed holds of the user found no longer live and ended as EXPIRED by this call
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(ARGV[4])
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6]}
k.maxlen = tonumber(ARGV[11])
k.index = ARGV[12] ~= '' and ARGV[12] or nil
local user, order = ARGV[1], ARGV[2]
local ttl, retention, max_records = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_extensions, request_id = tonumber(ARGV[7]), ARGV[8]
local MAX_REQUEST_IDS = 4

local holds = load_holds(k, user, true)
local hold
for _, h in ipairs(holds) do
  if h.order == order and h.expire > now then
    hold = h
  end
end
if hold then
  local expire, details, life = hold.expire, hold.details, hold.life
  local place, cap, count, ids
  if life then
    place, cap, count, ids = parse_life(life)
  else
    place = details and tonumber(string.match(details, '^%d+:(%d+):'))
    place = place or expire - tonumber(ARGV[10])
    cap, count, ids = math.max(expire, place + tonumber(ARGV[9])), 0, {}
  end
  local retry = false
  for _, id in ipairs(ids) do
    retry = retry or (request_id ~= '' and id == request_id)
  end
  local new = math.max(expire, math.min(now + ttl, cap))
  local capped = (now + ttl > cap) and 1 or 0
  if retry then
    return {1, now, expire, 0, 0, 0, details or '', format_life(expire, place, cap, count, ids), 2,
      capped}
  end
  if new == expire then
    return {1, now, expire, 0, 0, 0, details or '', format_life(expire, place, cap, count, ids), 0,
      capped}
  end
  if max_extensions > 0 and count >= max_extensions then
    return {-1, now, expire, 0, 0, 0, details or '', format_life(expire, place, cap, count, ids), 0,
      capped}
  end
  count = count + 1
  if request_id ~= '' then
    ids[#ids + 1] = request_id
    if #ids > MAX_REQUEST_IDS then
      table.remove(ids, 1)
    end
  end
  -- The hold moved, its details' expire and its life record with it; the due index follows the
  -- user's earliest expiry (due holds stay: the reaper ends them).
  local moved = {order = order, expire = new, life = format_life(new, place, cap, count, ids),
    details = details and (int_str(new) .. string.match(details, '^%d+(:.*)$'))}
  local after = {moved}
  for _, h in ipairs(holds) do
    if h.order ~= order then
      after[#after + 1] = h
    end
  end
  save_holds(k, user, true, after)  -- sorts them
  set_due(k, user, after[1].expire)
  -- Its place in its scope moves with it (its entry in the scope index, the prelude).
  if k.index and moved.details then
    local q, s = quantity_scope(moved.details, new)
    if s ~= '' then
      local live = scope_keys(k.index, s)
      redis.call('ZADD', live, 'XX', int_str(new), scope_member(user, order, q))
    end
  end
  return {1, now, new, 0, 0, 0, moved.details or '', moved.life, 1, capped}
end

local removed, ended, end_ms, expire = end_due_then_outcome(k, user, holds, order, now, retention,
  max_records)
if ended then
  return {2, now, expire, removed, ended, end_ms, '', '', 0, 0}
end
return {0, now, 0, removed, 0, 0, '', '', 0, 0}
