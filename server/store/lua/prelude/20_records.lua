-- prelude/20_records.lua: a hold's details and life record, as one string each (their format:
-- server/store/hold_details_codec.h).

-- Hold details (format in server/store/hold_details_codec.h): "<expire>:<place>:<quantity>:<n>:
-- <scope>...". A live hold's are in its packed value (pack_holds); an ended hold's are kept beside
-- its outcome record, in the user's outcome records hash (k.outcomes), under the field DETAILS ..
-- order_id. DETAILS is a control character, which no order_id contains (ids refuse them), so a
-- details field never meets an outcome record (field = order_id). Only a hold with a scope, a
-- quantity other than 1 or labels has details; a plain hold has none, and reads as quantity 1, no
-- scope. The value of a hold is the one whose <expire> is the hold's; any other (a leftover of an
-- earlier hold of the same order_id) is ignored the same way and not copied into events.
local DETAILS = '\1'

-- A hold's life record (format in server/store/hold_details_codec.h): "<expire>:<place>:
-- <max_expire>:<extensions>:<n>:{<len>:<request id>}*", for every hold: in its packed value while
-- it is live, then beside its outcome record under the field LIFE .. order_id. Unlike the details
-- it changes: extend_hold.lua rewrites it (and the details' <expire>) whenever it moves the
-- expiry. It is self-checking by its <expire> as the details are (details_for), and kept and
-- dropped with them.
local LIFE = '\2'

-- A paid hold's payment reference (PayRequest.payment_reference), "<expire>:<reference>", beside its
-- outcome record under the field REF .. order_id while that is kept: written by the end that paid
-- it with a reference (end_hold), self-checking by <expire> as the details are (reference_for),
-- and dropped with them (drop_records). A hold paid without one has none.
local REF = '\4'  -- (FENCE, prelude/40_scope_index.lua, is '\3')

-- A paid hold's returns (ReturnUnits), "<expire>:<units returned in all>:{<units>:<len>:<request
-- id>}*", beside its outcome record under the field RETURNS .. order_id while that is kept:
-- written by return_units.lua, one entry per return (its request id makes a retry idempotent; at
-- most as many entries as the hold has units, and at most MAX_RETURNS), self-checking by <expire>
-- as the details are, and dropped with them (drop_records).
local RETURNS = '\5'
local MAX_RETURNS = 100

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

-- A new hold's details from the quantity on (place_hold.lua's A.details: hold_details_codec.h's
-- tail, "<quantity>:<n>:<scope><scope max_holds>:<scope max_units>:..."), read: its quantity, its
-- scope ('' = none) and the scope's max_holds and max_units (0 = none), numbers but the scope. A
-- plain hold's '' is quantity 1, no scope.
local function details_levels(tail)
  if tail == '' then
    return 1, '', 0, 0
  end
  local q, n, pos = string.match(tail, '^(%d+):(%d+):()')
  local stop = pos + tonumber(n)
  local max_holds, max_units = string.match(tail, '^(%d+):(%d+):', stop)
  return tonumber(q), string.sub(tail, pos, stop - 1), tonumber(max_holds), tonumber(max_units)
end

-- The payment reference in a REF value `value` (nil or another hold's: '') of the hold expiring at
-- `expire`.
local function reference_for(value, expire)
  value = details_for(value, expire)
  if not value then
    return ''
  end
  return string.match(value, '^%d+:(.*)$')
end

-- The details and life values of `order` (reads, before the script's first write), each false
-- when absent. Two HGETs rather than one HMGET: the documented ACL (deploy/redis/orderhold.acl)
-- grants +hget, and a new command would make every deployment change its ACL before upgrading.
local function records_of_order(k, order)
  return redis.call('HGET', k.outcomes, DETAILS .. order) or false,
    redis.call('HGET', k.outcomes, LIFE .. order) or false
end

-- A hold's life record parsed: place (Unix ms), cap (max expire, Unix ms), count (extensions
-- made) as numbers, and ids (the last request ids, a list of strings).
local function parse_life(value)
  local place, cap, count, n, pos = string.match(value, '^%d+:(%d+):(%d+):(%d+):(%d+):()')
  local ids = {}
  for _ = 1, tonumber(n) do
    local len, start = string.match(value, '^(%d+):()', pos)
    ids[#ids + 1] = string.sub(value, start, start + tonumber(len) - 1)
    pos = start + tonumber(len)
  end
  return tonumber(place), tonumber(cap), tonumber(count), ids
end

-- The life record of a hold expiring at `expire` (LIFE above; parse_life's values).
local function format_life(expire, place, cap, count, ids)
  if #ids == 0 then  -- most holds: never extended with a request id
    return string.format('%d:%d:%d:%d:0:', expire, place, cap, count)
  end
  local parts = {string.format('%d:%d:%d:%d:%d:', expire, place, cap, count, #ids)}
  for _, id in ipairs(ids) do
    parts[#parts + 1] = int_str(#id) .. ':' .. id
  end
  return table.concat(parts)
end

