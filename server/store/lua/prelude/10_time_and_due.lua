-- prelude/10_time_and_due.lua: the first part of the prelude, the helpers prepended to every
-- OrderHold script when it is embedded at build time (server/CMakeLists.txt: the files of prelude/
-- in name order, then migrations/), so each script stays one atomic EVALSHA body; in the Functions
-- library (lua::kFunctionLibrary) they are the library's top level, run once per FUNCTION LOAD.
-- This part: the call's time, number formatting, key lifetimes, slot migrations, the due index.

-- The instant to decide expiry against, Unix ms: `arg` when given (tests only), else the Redis
-- server clock (TIME), so every replica agrees.
local function now_ms(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The store's constants, sent packed in one argument (A.store; RedisHoldStore formats it once at
-- start): "<outcome retention ms>:<max outcome records per user>:<stream length bound>:<stream
-- byte bound>:<lifetime ms>:<default ttl ms>:<migrating>:<scope index key start>". The retention
-- and the record bound are >= 1; the stream bounds (--event_stream_max_len,
-- --event_stream_max_bytes) make each XADD trim the stream (MAXLEN ~: end_hold), 0 = none; the
-- lifetime (--max_hold_lifetime) and default ttl (--default_ttl), >= 1, give a hold the layout
-- migration moves without a life record its life record (migrations/); migrating is 1 while calls
-- look for a user's holds in older shapes (the migrations' user hooks), 0 once the operator has
-- declared the migration over (--layout_migration_done); the index start is "<prefix>:{" (the
-- prelude "The scope index"; it is last, so it may hold ':'), "" = the store keeps none (Redis
-- Cluster). Returns {retention, records, maxlen, maxbytes, lifetime, default_ttl, migrating,
-- index}, migrating a boolean, index nil for none; raises an error on any other shape.
-- The last constants parsed, by their packed string: in the Functions library, the one value kept
-- between calls (a replica sends the same string on every call, and Lua interns strings, so the
-- test is one pointer comparison); EVAL runs the prelude anew each call, where it is empty. Read
-- only: no script changes the table it returns.
local store_packed, store_parsed
local function store_of(packed)
  if packed == store_packed then
    return store_parsed
  end
  local retention, records, maxlen, maxbytes, lifetime, default_ttl, migrating, index =
    string.match(packed, '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):([01]):(.*)$')
  if not retention then
    error('OrderHold: malformed store constants')
  end
  store_parsed = {retention = tonumber(retention), records = tonumber(records),
                  maxlen = tonumber(maxlen), maxbytes = tonumber(maxbytes),
                  lifetime = tonumber(lifetime), default_ttl = tonumber(default_ttl),
                  migrating = migrating == '1', index = index ~= '' and index or nil}
  store_packed = packed
  return store_parsed
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

