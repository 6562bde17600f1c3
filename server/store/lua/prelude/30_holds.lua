-- prelude/30_holds.lua: a user's holds, packed in one field of its holds bucket: the migrations'
-- hooks, pack and unpack, load and save.

-- A user's live holds (and its due ones the reaper has not ended yet): one field of the user's
-- holds bucket k.hb (a hash, <prefix>:{<partition>}:h:<bucket>, the bucket of the due index k.hd:
-- keys.h), field = user_id, value = every hold of the user packed with `struct` (pack_holds). No
-- key of the user's own until its first end, which creates k.outcomes and k.ended and copies the
-- ended hold's details and life record there (end_hold), where GetHold and every later call look
-- for an ended hold's. Every script works on them as a list of holds h = {order=, expire= (Unix
-- ms, a number), details= (its details value, or false), life= (its life record, or false)},
-- earliest first, then by order_id, read once by load_holds and written once by save_holds.

-- Migrations of data that earlier releases wrote in other shapes (lua/migrations/*.lua, prepended
-- after this prelude by server/CMakeLists.txt, so that deleting such a file removes its migration
-- and nothing else) register here:
--   users       function(k, user, holds, writes) -> holds: called by load_holds with the user's
--               holds as read from k.hb; returns them with those the older shapes still keep
--               added. With `writes` (a script that may write) it moves them into k.hb first.
--               Not called once the migration is declared over (k.store.migrating false).
--   partitions  function(p, budget, cursor, now, retention, max_records) -> left, cursor: one
--               bounded step of the background sweep of one partition (migrate.lua).
local migrations = {users = {}, partitions = {}}

-- One hold packed: order_id (1-byte length), expire, place and cap (doubles: Unix ms, exact below
-- 2^53), the extension count (4 bytes: unlimited by default, --max_extensions=0), the request ids
-- (a 1-byte count, each with a 1-byte length) and the details after "<expire>:<place>:" (2-byte
-- length, empty for a plain hold). Lengths fit: ids are at most 128 bytes, request ids 64,
-- details a few KB (server/domain/hold.h). Every hold has a life record (the layout migration
-- makes one for a hold of an older shape that had none).
local HOLD_FORMAT = '>Bc0dddI4B'

-- One hold packed (pack_holds), from its fields; `tail`: its details after "<expire>:<place>:"
-- ('' for a plain hold). place_hold.lua packs the hold it creates with it directly.
local function pack_hold(order, expire, place, cap, count, ids, tail)
  local packed = struct.pack(HOLD_FORMAT, #order, order, expire, place, cap, count, #ids)
  for _, id in ipairs(ids) do
    packed = packed .. struct.pack('>Bc0', #id, id)
  end
  return packed .. struct.pack('>Hc0', #tail, tail)
end

local NO_IDS = {}

-- Packs every hold of `holds`, in their order. A hold read by unpack_holds is copied as its bytes
-- were (its table is never changed: a hold that changes is a new table, as extend_hold.lua
-- builds); one with `packed` (place_hold.lua's new hold) is that; any other is packed from its
-- order, expire, details and life record (which it must have).
local function pack_holds(holds)
  local parts = {}
  for i, h in ipairs(holds) do
    local src = rawget(h, 'src')
    if src then
      parts[i] = string.sub(src, h.first, h.last)
    elseif h.packed then
      parts[i] = h.packed
    else
      local place, cap, count, ids = parse_life(h.life)
      parts[i] = pack_hold(h.order, h.expire, place, cap, count, ids,
        h.details and string.match(h.details, '^%d+:%d+:(.*)$') or '')
    end
  end
  return table.concat(parts)
end

-- A hold read by unpack_holds formats its life record only when something reads h.life (most
-- calls never do: counting, a retry, saving it back unchanged).
-- (its place, cap, count and request ids are read again from its bytes then).
local LAZY_LIFE = {__index = function(h, key)
  if key ~= 'life' then
    return nil
  end
  local _, _, place, cap, count, n, pos = struct.unpack(HOLD_FORMAT, h.src, h.first)
  local ids = NO_IDS
  if n > 0 then
    ids = {}
    for i = 1, n do
      ids[i], pos = struct.unpack('>Bc0', h.src, pos)
    end
  end
  local life = format_life(h.expire, place, cap, count, ids)
  rawset(h, 'life', life)
  return life
end}

-- The holds packed by pack_holds, in the order they were packed: {order=, expire=, details=,
-- life= (formatted when read)}, each keeping where its bytes are (src, first, last) for
-- pack_holds and its life record.
local function unpack_holds(value)
  local holds, pos = {}, 1
  while pos <= #value do
    local first, order, expire, place, n, tail, _ = pos
    order, expire, place, _, _, n, pos = struct.unpack(HOLD_FORMAT, value, pos)
    for _ = 1, n do  -- the request ids: read by LAZY_LIFE when needed
      _, pos = struct.unpack('>Bc0', value, pos)
    end
    tail, pos = struct.unpack('>Hc0', value, pos)
    holds[#holds + 1] = setmetatable({order = order, expire = expire,
      details = tail ~= '' and (string.format('%d:%d:', expire, place) .. tail),
      src = value, first = first, last = pos - 1}, LAZY_LIFE)
  end
  return holds
end

-- Whether string a sorts before string b byte by byte, as a sorted set orders members (Lua's `<`
-- follows the locale's collation, which Redis sets from the environment).
local function bytes_before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- Earliest first, then by order_id.
local function hold_before(a, b)
  if a.expire ~= b.expire then
    return a.expire < b.expire
  end
  return bytes_before(a.order, b.order)
end

-- Sorts holds earliest first, then by order_id.
local function sort_holds(holds)
  if #holds > 1 then
    table.sort(holds, hold_before)
  end
end

-- The user's holds, earliest first (reads only, unless a migration moves older data: call it
-- before the script's first write). `writes`: the script may write (a migration may then move the
-- user's data; read-only scripts pass false). k.store: the store's constants (store_of): whether
-- to look for older shapes at all (migrating: once the operator declares the migration over, a
-- user without a field costs no lookup) and the life records a migration gives the holds it
-- finds. `packed`: the user's field when the caller read it already (reap.lua), false for none,
-- nil to read it here.
local function load_holds(k, user, writes, packed)
  if packed == nil then
    packed = redis.call('HGET', k.hb, user)
  end
  local holds = packed and unpack_holds(packed) or {}
  if not k.store.migrating then
    return holds
  end
  for _, migrate in ipairs(migrations.users) do
    holds = migrate(k, user, holds, writes)
  end
  return holds
end

-- Splits `holds` (earliest first) at `now`: those no longer live (expire <= now) and the live
-- ones, both earliest first.
local function split_due(holds, now)
  local due, live = {}, {}
  for _, h in ipairs(holds) do
    if h.expire <= now then
      due[#due + 1] = h
    else
      live[#live + 1] = h
    end
  end
  return due, live
end

-- Writes `holds`, the user's whole list of holds once the call is done (any order): the user's
-- field (HSET), or HDEL when no hold stays and `had` (the user had holds before the call): the
-- last touch of k.hb, which it may empty (see "Slot migrations"). Holds that end are not written
-- anywhere else: end_hold records their ends.
local function save_holds(k, user, had, holds)
  if #holds > 0 then
    sort_holds(holds)
    redis.call('HSET', k.hb, user, pack_holds(holds))
  elseif had then
    redis.call('HDEL', k.hb, user)
  end
end

-- The levels place_hold.lua checks a new hold at, one row each, in the order of its `limit` and
-- `used` arrays (1 the user's holds, 2 its units, 3 its holds in the scope, 4 its units there,
-- 5 the scope's holds across users, 6 their units, 7 their units plus the units sold, 8 the
-- user's holds in the scope plus its purchases there, 9 their units): its bit in
-- the reply's `violations`
-- (store::LimitViolation in hold_store.h), whether the hold adds its quantity there (units) or 1
-- (holds), and which earliest live expiry tells when it could fit again (place_hold's `first`: 1
-- the user's, 2 the scope's, 3 across users). A new limit kind is one row here, its limit and
-- usage in place_hold.lua, and one row in C++ (domain/hold_errors.cc's kLevels). Built once per
-- library load.
local LEVELS = {
  {bit = 1, units = false, first = 1},
  {bit = 2, units = true, first = 1},
  {bit = 4, units = false, first = 2},
  {bit = 8, units = true, first = 2},
  {bit = 16, units = false, first = 3},
  {bit = 32, units = true, first = 3},
  {bit = 64, units = true, first = 3},
  {bit = 128, units = false, first = 2},
  {bit = 256, units = true, first = 2},
}

-- place_hold.lua's A.limits, "<max_holds>:<max_units>:<total_max_holds>:<total_max_units>[:
-- <capacity_units>]", as {max_holds, max_units, total_max_holds, total_max_units, capacity_units}
-- (numbers; an absent capacity is 0); the last one parsed is kept, by its string, as store_of
-- keeps the store's constants (most calls send the same limits). Read only. Raises an error on
-- any other shape.
local limits_packed, limits_parsed
local function limits_of(packed)
  if packed ~= limits_packed then
    local max_holds, max_units, total_holds, total_units, capacity =
      string.match(packed, '^(%d+):(%d+):(%d+):(%d+):?(%d*)$')
    if not max_holds then
      error('OrderHold: malformed limits')
    end
    limits_parsed = {tonumber(max_holds), tonumber(max_units), tonumber(total_holds),
                     tonumber(total_units), tonumber(capacity) or 0}
    limits_packed = packed
  end
  return limits_parsed
end
