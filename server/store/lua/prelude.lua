-- prelude.lua: helpers prepended to every OrderHold script when it is embedded at build time
-- (server/CMakeLists.txt), so each script stays one atomic EVALSHA body; in the Functions library
-- (lua::kFunctionLibrary) they are the library's top level, run once per FUNCTION LOAD.

-- The instant to decide expiry against, Unix ms: `arg` when given (tests only), else the Redis
-- server clock (TIME), so every replica agrees.
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An integer (Unix ms, a duration in ms, a count: exact below 2^53) as its decimal string. Lua
-- formats a number as a float: `..` and table.concat with '%.14g' (exact to 14 digits only), and
-- redis.call converts a number argument with '%.17g', both through glibc's floating-point
-- formatter (~0.3 µs a number); '%d' takes the integer path (Lua 5.1 casts to a C long: 64 bits
-- on the 64-bit builds Redis runs on). Used for the numbers the per-call scripts and the reaper
-- send to Redis or write into records (a created hold formatted 8 to 10: tests/bench/README.md
-- "Numbers in the scripts"); the event scripts keep plain numbers.
local function int_str(x)
  return string.format('%d', x)
end

-- Makes `key` live at least `ttl_ms` more (a decimal string), never shortening its time to live:
-- PEXPIRE NX for a key without one (a hash this call created), else PEXPIRE GT (GT alone would
-- leave such a key persistent: Redis treats no expiry as an infinite one). One command when NX
-- applies, as for a new user's first hold.
local function keep_for(key, ttl_ms)
  if redis.call('PEXPIRE', key, ttl_ms, 'NX') == 0 then
    redis.call('PEXPIRE', key, ttl_ms, 'GT')
  end
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
-- Due nudge: when the bucket's score was added or lowered (ZADD CH) and the bucket is now the
-- partition's first, the partition's earliest due time moved earlier, and the reapers that sleep
-- until the old one (server/reaper/reaper.h) must look again: one SPUBLISH of "due" on the
-- partition's reaper channel "<prefix>:{<p>}:reaper" (KeySchema::ReaperChannel; derived from
-- k.bdue, "<prefix>:{<p>}:bdue", which every caller has; by redis.pcall, as end_hold's nudge).
-- Rare: a hold with the usual ttl expires after the ones already held, so
-- only the first hold of an empty partition, or a shorter ttl, publishes. k.bdue is read after
-- its ZADD, which cannot have emptied it.
local function set_due(k, user, earliest)
  if earliest then
    local score = int_str(earliest)
    local bucket = string.sub(k.hd, (string.find(k.hd, '}:hd:', 1, true)) + 5)
    redis.call('ZADD', k.hd, score, user)
    if redis.call('ZADD', k.bdue, 'LT', 'CH', score, bucket) == 1 and
        redis.call('ZRANGE', k.bdue, '0', '0')[1] == bucket then
      redis.pcall('SPUBLISH', string.sub(k.bdue, 1, -5) .. 'reaper', 'due')
    end
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
--   partitions  function(p, budget, cursor, now, retention, max_records) -> left, cursor: one
--               bounded step of the background sweep of one partition (migrate.lua).
local migrations = {users = {}, partitions = {}}

-- One hold packed: order_id (1-byte length), expire, place and cap (doubles: Unix ms, exact below
-- 2^53), the extension count (4 bytes: unlimited by default, --max_extensions=0), the request ids
-- (a 1-byte count, each with a 1-byte length) and the details after "<expire>:<place>:" (2-byte
-- length, empty for a plain hold). Lengths fit: ids are at most 128 bytes, request ids 64,
-- details a few KB (server/domain/hold.h). A hold without a life record (one a migration moved
-- from a shape that had none) is packed with cap 0, read back as life = false, and its place time
-- from its details (0 without).
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
-- order, expire, details and life record.
local function pack_holds(holds)
  local parts = {}
  for i, h in ipairs(holds) do
    local src = rawget(h, 'src')
    if src then
      parts[i] = string.sub(src, h.first, h.last)
    elseif h.packed then
      parts[i] = h.packed
    else
      local place, cap, count, ids = 0, 0, 0, NO_IDS
      if h.life then
        place, cap, count, ids = parse_life(h.life)
      elseif h.details then
        place = tonumber(string.match(h.details, '^%d+:(%d+):'))
      end
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
  local life = false
  if cap > 0 then
    local ids = NO_IDS
    if n > 0 then
      ids = {}
      for i = 1, n do
        ids[i], pos = struct.unpack('>Bc0', h.src, pos)
      end
    end
    life = format_life(h.expire, place, cap, count, ids)
  end
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
-- user's data; read-only scripts pass false). `packed`: the user's field when the caller read it
-- already (reap.lua), false for none, nil to read it here.
local function load_holds(k, user, writes, packed)
  if packed == nil then
    packed = redis.call('HGET', k.hb, user)
  end
  local holds = packed and unpack_holds(packed) or {}
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

-- The scope index: every live hold of a scope, across users, so that a scope's totals
-- (total_max_holds, total_max_units of the limits file) are decided in the same script as the
-- user's levels. Two keys per scope, in the scope's partition (keys.h: FNV-1a-32 of the scope mod
-- 64, as a user's): "<prefix>:{<p>}:s:<scope>", a sorted set, member = scope_member(user, order,
-- quantity), score = the hold's expire (Unix ms; an entry is live while its score > now, as its
-- hold is), and "<prefix>:{<p>}:su:<scope>", a string: the sum of the quantities of the set's
-- entries (live or not yet pruned). Both go when the set empties. k.index is the keys' common
-- start "<prefix>:{" ('' or nil: the store keeps no index, as in Redis Cluster mode, where the
-- scope's slot is not the user's). The keys are derived here, not passed in KEYS: the scripts
-- that end holds learn a hold's scope from its details, inside the script. A standalone or
-- Sentinel-managed Redis lets a script touch keys it did not declare; a Cluster node would refuse
-- them, hence no index there. Every end of a scoped hold (end_hold) drops its entry,
-- extend_hold.lua moves it, place_hold.lua adds it and checks the totals.

-- FNV-1a-32 of `s` (KeySchema::PartitionOf's hash: a scope's partition here, a user's bucket in
-- the layout migration), on doubles: the prime 16777619 is 2^24 + 403, so h * prime mod 2^32 =
-- h * 403 + (h mod 2^8) * 2^24, exact below 2^53; bit.bxor works on 32 bits and answers signed,
-- which % 2^32 makes unsigned again.
local function fnv1a32(s)
  local h = 2166136261
  for i = 1, #s do
    h = bit.bxor(h, string.byte(s, i)) % 4294967296
    h = (h * 403 + (h % 256) * 16777216) % 4294967296
  end
  return h
end

local function scope_keys(index, scope)
  local tagged = index .. int_str(fnv1a32(scope) % 64) .. '}:'
  return tagged .. 's:' .. scope, tagged .. 'su:' .. scope
end

-- An index member: "<quantity>:<user>\0<order>" (ids have no control characters).
local function scope_member(user, order, quantity)
  return int_str(quantity) .. ':' .. user .. '\0' .. order
end

-- Reads only: the scope's entries no longer live (score <= now), then its live holds, their
-- units and the earliest live score (nil when none). scope_holds.lua answers from it as it is.
local function scope_read(live, units_key, now)
  local bound = int_str(now)
  local gone = redis.call('ZRANGEBYSCORE', live, '-inf', bound)
  local units = tonumber(redis.call('GET', units_key) or '0')
  for _, m in ipairs(gone) do
    units = units - tonumber(string.match(m, '^(%d+):'))
  end
  local first = redis.call('ZRANGE', live, '(' .. bound, '+inf', 'BYSCORE', 'LIMIT', '0', '1',
    'WITHSCORES')
  return gone, redis.call('ZCARD', live) - #gone, units, first[2] and tonumber(first[2])
end

-- scope_read, then the entries no longer live dropped with their units (the counter deleted
-- when no entry is left): the scope's live holds, units and earliest live score. Writes.
local function scope_usage(index, scope, now)
  local live, units_key = scope_keys(index, scope)
  local gone, holds, units, first = scope_read(live, units_key, now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', live, '-inf', int_str(now))
  end
  if holds == 0 and (units ~= 0 or #gone > 0) then
    redis.call('DEL', units_key)
    units = 0
  elseif #gone > 0 then
    redis.call('SET', units_key, int_str(units))
  end
  return holds, units, first
end

-- Adds the new hold's entry to its scope's index.
local function scope_add(index, scope, user, order, quantity, expire)
  local live, units_key = scope_keys(index, scope)
  redis.call('ZADD', live, int_str(expire), scope_member(user, order, quantity))
  redis.call('INCRBY', units_key, int_str(quantity))
end

-- Drops an ended hold's entry from its scope's index, with its units when it was there (an entry
-- pruned as no longer live took its units with it).
local function scope_drop(index, scope, user, order, quantity)
  local live, units_key = scope_keys(index, scope)
  if redis.call('ZREM', live, scope_member(user, order, quantity)) == 1 and
      redis.call('DECRBY', units_key, int_str(quantity)) <= 0 then
    redis.call('DEL', units_key)
  end
end

-- Hold outcomes, as numbers equal to the proto enum orderhold.v1.HoldOutcome.
local PAID, CANCELLED, EXPIRED = 1, 2, 3

-- Whether this script execution already published its nudge (see end_hold).
local nudged = false

-- The prelude's only state that lives for one call: EVAL runs the whole prelude on every call,
-- but the Functions library (lua::kFunctionLibrary, server/CMakeLists.txt) runs it once per
-- FUNCTION LOAD, so each of its functions calls this first. State added here must be reset here.
local function begin_call()
  nudged = false
end

-- Ends one hold (no longer in the list the caller saves with save_holds): remembers its outcome
-- and appends its event to the partition's stream, in the caller's script, so there is never an
-- end without an event nor an event without an end.
--   k        {holds=, hb=, hd=, bdue=, outcomes=, ended=, events=, maxlen=, index=}: the user's
--            keys, holds and due-index buckets, the partition's bucket index and stream (set_due),
--            the stream's length bound, and the scope index's key start (nil: none)
--   h        the hold (load_holds); its details are copied into the event, and its details and
--            life record, which were in its packed value, are written beside its outcome record
--   outcome  PAID, CANCELLED or EXPIRED; end_ms: when it ended (for EXPIRED: its expire time)
-- Outcome record: k.outcomes (hash) order -> "<outcome>:<end_ms>:<expire>", and k.ended (sorted
-- set) order -> end_ms, which trim_outcomes uses to drop old records. The details and life record
-- stay beside the record as long as it is kept (trim_outcomes drops them all).
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
local function end_hold(k, user, h, outcome, end_ms)
  local x, t, e = int_str(outcome), int_str(end_ms), int_str(h.expire)
  local fields = {h.order, x .. ':' .. t .. ':' .. e}
  if h.details then
    fields[#fields + 1] = DETAILS .. h.order
    fields[#fields + 1] = h.details
  end
  if h.life then
    fields[#fields + 1] = LIFE .. h.order
    fields[#fields + 1] = h.life
  end
  redis.call('HSET', k.outcomes, unpack(fields))
  redis.call('ZADD', k.ended, t, h.order)
  -- The stream's length bound (k.maxlen: --event_stream_max_len) beside the trimmer's age bound:
  -- MAXLEN ~ trims whole nodes only, so it costs nothing until a node is full.
  local maxlen = k.maxlen or 0
  if maxlen > 0 then
    if h.details then
      redis.call('XADD', k.events, 'MAXLEN', '~', maxlen, '*', 'u', user, 'o', h.order, 'x', x,
        'e', e, 't', t, 'm', h.details)
    else
      redis.call('XADD', k.events, 'MAXLEN', '~', maxlen, '*', 'u', user, 'o', h.order, 'x', x,
        'e', e, 't', t)
    end
  elseif h.details then
    redis.call('XADD', k.events, '*', 'u', user, 'o', h.order, 'x', x, 'e', e, 't', t, 'm',
      h.details)
  else
    redis.call('XADD', k.events, '*', 'u', user, 'o', h.order, 'x', x, 'e', e, 't', t)
  end
  if not nudged then
    nudged = true
    redis.pcall('SPUBLISH', string.sub(k.events, 1, -7) .. 'nudge', '')
  end
  -- The end gives the hold's place in its scope back (the scope index, above).
  if k.index and h.details then
    local q, s = quantity_scope(h.details, h.expire)
    if s ~= '' then
      scope_drop(k.index, s, user, h.order, q)
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

-- Drops the outcome records of the orders in `orders` (a list) with their details and life
-- records. HDEL, the last touch of k.outcomes in a script, since it may empty the hash ("Slot
-- migrations"); only its last chunk can.
local function drop_records(k, orders)
  local fields = {}
  for _, order in ipairs(orders) do
    fields[#fields + 1] = order
    fields[#fields + 1] = DETAILS .. order
    fields[#fields + 1] = LIFE .. order
  end
  -- In chunks (unpack's stack limit: ReleaseHolds may drop thousands); the last touch still.
  for i = 1, #fields, 999 do
    redis.call('HDEL', k.outcomes, unpack(fields, i, math.min(i + 998, #fields)))
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
