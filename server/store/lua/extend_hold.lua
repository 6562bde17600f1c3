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
-- ARGV user            user_id (the member of KEYS[2])
-- ARGV order           order_id
-- ARGV ttl             integer ms >= 1: the wanted time left from now
-- ARGV now             Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV max_extensions  integer >= 0: calls that moved the expiry, at most; 0 = no count limit
-- ARGV request_id      "" = none. A request_id among the last 4 the hold counted is a retry of a
--                      call that moved the expiry: it changes nothing and answers the hold as it
--                      is (moved = 2), so a constant request_id cannot extend twice.
-- ARGV store           the store's constants, packed (store_of in the prelude): the outcome
--                      retention and record bound, the stream's length bound, and the scope index
--                      (an ended scoped hold's entry is dropped there, a moved hold's entry moves
--                      with it)
-- ARGV take           "" = no take (standalone, Sentinel); on Redis Cluster "-" before the
--                      scope's take (a scoped hold is then answered -4, unchanged) and
--                      "<stamp>:<take ms>:<window ms>" after it (scope_take.lua; the prelude, "The
--                      scope protocol across slots"): a scoped hold is not moved (-3) when the
--                      take is stale (take_stale); else the order's fence is raised to the
--                      take's stamp first (fence_take)
-- REPLY result int     1 the hold is live: expire = its expiry after the call; details and life
--                      after the call; -3 (a stale take) and -4 (a take is needed first): live,
--                      nothing changed, expire, details and life as is;
--                      -1 refused, max_extensions used: nothing changed; expire, details, life as
--                      is; 2 the order's hold has ended: outcome, end and expire describe that
--                      end (an EXPIRED end possibly made by this call's cleanup, which gives the
--                      same answer before and after the reaper); 0 unknown order (never placed,
--                      or its record is older than the retention)
-- REPLY now int        the instant used, Unix ms
-- REPLY expire int     Unix ms, as result says
-- REPLY removed int    holds of the user found no longer live and ended as EXPIRED by this call
-- REPLY outcome int    result 2: 1 PAID, 2 CANCELLED, 3 EXPIRED; else 0
-- REPLY end int        result 2: the end, Unix ms; else 0
-- REPLY details str    results 1 and -1: the hold's details ("" when it has none); else ""
-- REPLY life str       results 1 and -1: its life record; else ""
-- REPLY moved int      result 1: 1 when this call moved the expiry, 2 when it is a replay of a
--                      counted request_id (nothing changed); else 0
-- REPLY capped int     result 1: 1 when now + ttl was past the cap; else 0
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6], maxlen = store.maxlen, maxbytes = store.maxbytes, index = store.index,
           store = store}
local user, order = A.user, A.order
local ttl, retention, max_records = tonumber(A.ttl), store.retention, store.records
local max_extensions, request_id = tonumber(A.max_extensions), A.request_id
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
  local _, scope = quantity_scope(details, expire)
  if scope ~= '' and A.take ~= '' then
    local take = take_of(A.take)
    if not take then
      return {-4, now, expire, 0, 0, 0, details or '', life, 0, 0}
    end
    local stale, fence = take_stale(k, order, scope, take, now)
    if stale then
      return {-3, now, expire, 0, 0, 0, details or '', life, 0, 0}
    end
    fence_take(k, order, scope, take, fence)
  end
  -- Every hold has a life record (place_hold.lua writes it; the layout migration makes one for a
  -- hold that had none as it moves it).
  local place, cap, count, ids = parse_life(life)
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
