-- return_units.lua: gives back some units of a PAID hold (ReturnUnits, a refund), idempotently
-- per request id: to its scope's sold count (a capacity counts them as available again), to the
-- buyer's purchases under the scope's runtime rule (a purchase cap counts them no more), with one
-- event of outcome RETURNED; never more units than the hold had.
--
-- Why Lua: "was it paid, how much is already returned, was this request seen", the counts given
-- back and the event must be one atomic step, or two retries of one refund on two replicas could
-- both give the units back, or a return could be counted without its event.
--
-- KEYS[1..6]  as in end_hold.lua: the user's holds bucket, its due-index bucket, the user's
--             outcome records (hash) and ended orders (sorted set), the partition's event stream,
--             the partition's bucket index
-- ARGV user     user_id (the member of KEYS[2])
-- ARGV order    order_id
-- ARGV units    the units to give back, >= 1
-- ARGV request  the request id (1-128 bytes, no control characters): a return already made with
--               it is answered again (result 2) and changes nothing
-- ARGV now      Unix ms; "" = the Redis server clock (TIME). Only tests pass a value.
-- ARGV store    the store's constants, packed (store_of in the prelude): the outcome retention,
--               the stream's bounds, the scope index (nil on a Redis Cluster: there are no sold
--               counts nor purchases there, and a return only records and emits its event)
-- REPLY result int    1 returned now; 2 already returned by this request id (units = its units);
--                     3 the hold is live (not paid); 4 it ended otherwise (outcome, end); 5 more
--                     units than are left (quantity, total: returned before); 6 the order has
--                     MAX_RETURNS returns already; 0 unknown order (never placed, or its record
--                     is older than the retention)
-- REPLY now int       the instant used, Unix ms
-- REPLY expire int    the hold's expire time, Unix ms (0 for result 0)
-- REPLY outcome int   how the hold ended: 1 PAID, 2 CANCELLED, 3 EXPIRED (0 for results 0 and 3)
-- REPLY end int       the end, Unix ms (0 for results 0 and 3)
-- REPLY quantity int  the hold's units (results 1, 2, 5, 6; else 0)
-- REPLY units int     the units this request returned (results 1 and 2; else 0)
-- REPLY total int     the units of the hold returned in all, this request included (results 1,
--                     2, 5, 6; else 0)
-- REPLY capped int    1 when the scope has a runtime rule (the four below are its purchase-cap
--                     level); 0 none (results 1 and 2 only; else 0)
-- REPLY holds int     the user's live holds in the scope plus the holds it bought there
-- REPLY held int      the units of those: live units plus bought units
-- REPLY max_holds int the rule's max_purchased_holds (0 = none)
-- REPLY max_units int the rule's max_purchased_units (0 = none)
-- REPLY details str   the hold's details (the prelude) while kept, else ""
-- REPLY reference str the payment reference the hold was paid with, "" for none
-- Nudge    result 1: one SPUBLISH on the partition's nudge channel (add_event in the prelude)
-- Helpers: see the prelude (prelude/*.lua), prepended when the script is embedded.
local now = now_ms(A.now)
local store = store_of(A.store)
local k = {hb = KEYS[1], hd = KEYS[2], outcomes = KEYS[3], ended = KEYS[4], events = KEYS[5],
           bdue = KEYS[6], maxlen = store.maxlen, maxbytes = store.maxbytes, index = store.index,
           store = store}
local user, order, units, request = A.user, A.order, tonumber(A.units), A.request

-- Reads first (see "Slot migrations" in the prelude): the hold, its record, its returns.
local holds = load_holds(k, user, false)
local due = {}
for _, h in ipairs(holds) do
  if h.order == order then
    if h.expire > now then
      return {3, now, h.expire, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '', ''}
    end
    due = {h}
  end
end
local outcome, end_ms, expire = outcome_of(order, due, redis.call('HGET', k.outcomes, order), now,
  store.retention)
if not outcome then
  return {0, now, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '', ''}
end
if outcome ~= PAID then
  return {4, now, expire, outcome, end_ms, 0, 0, 0, 0, 0, 0, 0, 0, '', ''}
end
local details = details_for(redis.call('HGET', k.outcomes, DETAILS .. order) or false, expire)
local quantity, scope = quantity_scope(details, expire)
local reference = reference_for(redis.call('HGET', k.outcomes, REF .. order) or false, expire) or
  ''
-- Returns so far: RETURNS in the prelude, written at payment under a rule (its id) and here.
local rule_id, total, entries = 0, 0, {}
local packed = details_for(redis.call('HGET', k.outcomes, RETURNS .. order) or false, expire)
if packed then
  local id, sum, pos = string.match(packed, '^%d+:(%d+):(%d+):()')
  rule_id, total = tonumber(id), tonumber(sum)
  while pos <= #packed do
    local n, len, at = string.match(packed, '^(%d+):(%d+):()', pos)
    entries[#entries + 1] = {units = tonumber(n), request = string.sub(packed, at,
      at + tonumber(len) - 1)}
    pos = at + tonumber(len)
  end
end

-- The user's purchase-cap level in the scope after this call: live holds there plus purchases.
local r, bought_units, bought_holds
if k.index and scope ~= '' then
  r = scope_rule_of(redis.call('GET', scope_rule_key(k.index, scope)), now)
  if r then
    bought_units, bought_holds = purchased(k, user, scope, r)
  end
end
local function usage(left_units, left_holds)
  if not r then
    return 0, 0, 0, 0, 0
  end
  local live_holds, live_units = 0, 0
  for _, h in ipairs(holds) do
    local q, s = quantity_scope(h.details, h.expire)
    if h.expire > now and s == scope then
      live_holds, live_units = live_holds + 1, live_units + q
    end
  end
  return 1, live_holds + left_holds, live_units + left_units, r.purchased_holds, r.purchased_units
end

for _, entry in ipairs(entries) do
  if entry.request == request then
    local capped, uh, uu, mh, mu = usage(bought_units or 0, bought_holds or 0)
    return {2, now, expire, PAID, end_ms, quantity, entry.units, total, capped, uh, uu, mh, mu,
      details or '', reference}
  end
end
if total + units > quantity then
  return {5, now, expire, PAID, end_ms, quantity, 0, total, 0, 0, 0, 0, 0, '', ''}
end
if #entries >= MAX_RETURNS then
  return {6, now, expire, PAID, end_ms, quantity, 0, total, 0, 0, 0, 0, 0, '', ''}
end

-- Writes.
local parts = {int_str(expire), ':', int_str(rule_id), ':', int_str(total + units), ':'}
for _, entry in ipairs(entries) do
  parts[#parts + 1] = int_str(entry.units) .. ':' .. int_str(#entry.request) .. ':' .. entry.request
end
parts[#parts + 1] = int_str(units) .. ':' .. int_str(#request) .. ':' .. request
redis.call('HSET', k.outcomes, RETURNS .. order, table.concat(parts))
if k.index and scope ~= '' then
  local sold = scope_sold_key(k.index, scope)
  if redis.call('DECRBY', sold, int_str(units)) <= 0 then
    redis.call('DEL', sold)
  end
  -- The purchase was counted under the rule created as rule_id (end_hold): given back only to
  -- that rule's count, never to another's (a rule deleted and put again starts from zero).
  if r and rule_id == r.id and (bought_units > 0 or bought_holds > 0) then
    bought_units = math.max(0, bought_units - units)
    if total + units == quantity then
      bought_holds = math.max(0, bought_holds - 1)
    end
    local key = purchases_key(k, user, scope)
    if bought_units == 0 and bought_holds == 0 then
      redis.call('DEL', key)
    elseif r.expire > 0 then
      redis.call('SET', key, string.format('%d:%d:%d', r.id, bought_units, bought_holds), 'PXAT',
        int_str(r.expire))
    else
      redis.call('SET', key, string.format('%d:%d:%d', r.id, bought_units, bought_holds))
    end
  end
end
add_event(k, user, {order = order, details = details or nil}, int_str(RETURNED), int_str(now),
  int_str(expire), reference, int_str(units))
local capped, uh, uu, mh, mu = usage(bought_units or 0, bought_holds or 0)
return {1, now, expire, PAID, end_ms, quantity, units, total + units, capped, uh, uu, mh, mu,
  details or '', reference}
