-- end_hold.lua: ends one live hold as PAID (Pay) or CANCELLED (CancelHold), idempotently.
--
-- Why Lua: "is it live?", the ZREM, the outcome record and the event must be one atomic step, or
-- a hold could be paid in the millisecond after it expired, paid twice by two replicas, or end
-- without its event.
--
-- KEYS[1..6]  as in place_hold.lua: the user's holds bucket, its due-index bucket, the user's
--             outcome records (hash) and ended orders (sorted set), the partition's event stream,
--             the partition's bucket index
-- ARGV user     user_id (the member of KEYS[2])
-- ARGV order    order_id
-- ARGV outcome  the outcome to end with: 1 PAID or 2 CANCELLED
-- ARGV now      Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV store    the store's constants, packed (store_of in the prelude): the outcome retention
--               and record bound, the stream's length bound, and the scope index (an ended
--               scoped hold's entry is dropped there)
-- ARGV reference  PAID only: the payment reference to keep with the outcome and put in the event
--               (REF in the prelude); "" = none
-- REPLY result int    1 this call ended the live hold (expire = its expire time; outcome =
--                     A.outcome); 2 the order had already ended: outcome, end and expire describe
--                     that end, nothing changed by this call except the lazy cleanup below;
--                     0 unknown order (never placed, or its record is older than the retention)
-- REPLY now int       the instant used, Unix ms
-- REPLY expire int    the hold's expire time, Unix ms (0 for result 0)
-- REPLY removed int   holds of the user found no longer live and ended as EXPIRED by this call
--                     (lazy cleanup, each with its event; the order itself may be one of them, so
--                     the answer is the same before and after the reaper has run)
-- REPLY outcome int   1 PAID, 2 CANCELLED, 3 EXPIRED (0 for result 0)
-- REPLY end int       the end, Unix ms (0 for result 0)
-- REPLY details str   the hold's details (the prelude) for results 1 and 2 while they are kept,
--                     else "" (none)
-- REPLY life str      the hold's life record (LIFE in the prelude) for results 1 and 2 while it
--                     is kept, else ""
-- REPLY reference str  the payment reference of a PAID end: A.reference for result 1, the one kept
--                     for result 2 (the caller compares); "" for none, another outcome or result 0
-- Nudge    when the call ends at least one hold, one SPUBLISH on the partition's nudge channel
--          (derived from the events key; see end_hold in the prelude); one of "due" on its
--          reaper channel when it moves the partition's earliest due time earlier (set_due)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6], maxlen = store.maxlen, maxbytes = store.maxbytes, index = store.index,
           store = store}
local user, order, outcome = A.user, A.order, tonumber(A.outcome)
local retention, max_records = store.retention, store.records

local holds = load_holds(k, user, true)
local hold, due  -- the order's hold when live, or when no longer live (ended below)
local stay = {}  -- the user's other holds, due ones included (the reaper ends those)
for _, h in ipairs(holds) do
  if h.order == order and h.expire > now then
    hold = h
  else
    stay[#stay + 1] = h
    if h.order == order then
      due = h
    end
  end
end
if hold then
  save_holds(k, user, true, stay)
  local reference = outcome == PAID and A.reference or ''
  end_hold(k, user, hold, outcome, now, reference)
  trim_outcomes(k, now, retention, max_records)
  set_due(k, user, stay[1] and stay[1].expire)
  return {1, now, hold.expire, 0, outcome, now, hold.details or '', hold.life or '', reference}
end

-- An ended hold's details and life record: its own when found due (they reach k.outcomes only as
-- this call ends it), else in k.outcomes (read before end_due_then_outcome's writes).
local details, life, ref
if due then
  details, life = due.details, due.life
else
  details, life = records_of_order(k, order)
  ref = redis.call('HGET', k.outcomes, REF .. order)
end
local removed, ended, end_ms, expire = end_due_then_outcome(k, user, holds, order, now, retention,
  max_records)
if ended then
  return {2, now, expire, removed, ended, end_ms, details_for(details, expire) or '',
    details_for(life, expire) or '', ended == PAID and reference_for(ref, expire) or ''}
end
return {0, now, 0, removed, 0, 0, '', '', ''}
