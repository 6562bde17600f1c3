-- migrations/v1_layout.lua: moves the holds that releases before the one-layout release kept in
-- their older shapes into today's layout (the user's field of its holds bucket: the prelude),
-- online, user by user. The only code that knows those shapes; server/CMakeLists.txt prepends it,
-- after the prelude, to every script. Deleting this file (and its test,
-- tests/integration/layout_migration_test.cc) removes the migration and nothing else: when that
-- is safe is in server/README.md ("Upgrading").
--
-- The older shapes (under the same partition prefix "<prefix>:{<partition>}:", keys.h):
--   u:<user_id>  sorted set, member = order_id, score = expire (Unix ms): the user's live holds
--                (and due ones not ended yet), "layout v1". Each hold's details and life record
--                are the fields DETAILS .. order_id and LIFE .. order_id (the prelude) of the
--                user's outcome records hash x:<user_id>; a hold placed before details or life
--                records existed has none (it gets its life record as it moves: v1_life).
--                Every release before this one wrote it by default.
--   due          sorted set, member = user_id, score = the user's earliest expiry: the
--                partition's due index before the buckets (hd:<bucket> and bdue). Its users'
--                holds are in u:<user_id>; they may have no hd:<bucket> entry.
-- A user is moved by the first call that touches it (load_holds, in that call's script, before
-- the call decides: its old holds count from that call on), and by the reaper when one of its
-- holds comes due (reap.lua reads users through load_holds too); the users nobody touches by the
-- sweep (migrate.lua), bucket by bucket.
--
-- Redis Cluster: these keys are not in any script's KEYS (a key that does not exist, as these
-- will not once moved, would have Redis answer TRYAGAIN to every call for the whole of a slot
-- migration). They are read as reap.lua reads its users' keys: together with a key the script
-- declared, in one EXISTS, so that while the slot migrates a key not on this node is refused
-- rather than read as empty (a one-key read of a missing key is served by the importing node),
-- and before the user's first write. While a slot migrates, a call for a user without live holds
-- is then refused until the migration ends (its u: key is missing there, as in the releases that
-- named it in KEYS); this ends with this file.

-- FNV-1a-32 of a user id (the prelude's fnv1a32, KeySchema's hash): for the due index of before
-- the buckets, whose entries do not name their bucket.

-- Whether `key` (of the script's slot, not in KEYS) exists, asked with `guard` (another key the
-- script may read) so that a slot migration refuses rather than answers (see above): EXISTS counts
-- `key` once and `guard` twice.
local function v1_exists(key, guard)
  return redis.call('EXISTS', key, guard, guard) % 2 == 1
end

-- The life record of a hold placed before life records existed (LIFE in the prelude): placed at
-- its details' place time, else as if with the default ttl (expire - default_ttl), never extended,
-- its cap that place + the lifetime (--max_hold_lifetime) and never before its expiry; `store`:
-- the store's constants (store_of). Written with the hold when it moves, so that no hold of
-- today's layout is without one.
local function v1_life(expire, details, store)
  local place = details and tonumber(string.match(details, '^%d+:(%d+):'))
  place = place or expire - store.default_ttl
  return format_life(expire, place, math.max(expire, place + store.lifetime), 0, NO_IDS)
end

-- `holds` (the user's, as read from k.hb) with the holds of u:<user> added (an order in both is
-- kept once, as in k.hb), each with its details and life record from x:<user>; with `writes`,
-- they are written to k.hb, the user is filed in its due-index bucket (set_due: a user of the old
-- due index has no entry there), and u:<user> is deleted. The details and life fields stay in
-- x:<user>, which outlives them by the outcome retention (end_hold writes them there again;
-- trim_outcomes drops them with the record).
local function v1_merge(k, user, holds, writes)
  local at = string.find(k.hb, '}:h:', 1, true)  -- a plain find: no pattern on the hot path
  if not at then
    return holds  -- not a holds bucket of keys.h (a tool calling a script by hand): no old shape
  end
  local prefix = string.sub(k.hb, 1, at + 1)
  local v1 = prefix .. 'u:' .. user
  local guard = k.hd or k.hb
  if not v1_exists(v1, guard) then
    return holds
  end
  -- k.outcomes is set by the scripts that declare x:<user> in KEYS (present on this node when the
  -- script runs); the others read it guarded.
  local outcomes = k.outcomes or prefix .. 'x:' .. user
  local has_records = k.outcomes ~= nil or v1_exists(outcomes, guard)
  local known = {}
  for _, h in ipairs(holds) do
    known[h.order] = true
  end
  local flat = redis.call('ZRANGE', v1, '0', '-1', 'WITHSCORES')
  for i = 1, #flat, 2 do
    local order, expire = flat[i], tonumber(flat[i + 1])
    if not known[order] then
      local details, life = false, false
      if has_records then
        details = details_for(redis.call('HGET', outcomes, DETAILS .. order), expire) or false
        life = details_for(redis.call('HGET', outcomes, LIFE .. order), expire) or false
      end
      holds[#holds + 1] = {order = order, expire = expire, details = details,
        life = life or v1_life(expire, details, k.store)}
    end
  end
  sort_holds(holds)
  if writes then
    save_holds(k, user, false, holds)
    if holds[1] then
      set_due(k, user, holds[1].expire)
    end
    redis.call('DEL', v1)
  end
  return holds
end

-- The user hook (load_holds): v1_merge for a user with no field in k.hb. A user with a field is
-- not looked up: every release that reads fields places the holds of a user that has some where
-- they are (server/README.md "Upgrading"), so it has no u:<user>; and no key outside KEYS is
-- touched then, so its calls go on while its slot migrates. (The sweep merges such a user too.)
migrations.users[#migrations.users + 1] = function(k, user, holds, writes)
  if #holds > 0 then
    return holds
  end
  return v1_merge(k, user, holds, writes)
end

-- Due-index buckets per partition (KeySchema::kDueBucketCount, keys.h).
local V1_BUCKETS = 256

-- Moves `user`, filed in `bucket` ({hb=, hd=}), when it has holds in u:<user> (v1_merge); `p`: the partition (migrate.lua). Every key it may touch is checked
-- present on this node before its first write, the bucket's keys included (see "Slot migrations"
-- in the prelude): a write creating a key the importing node does not have yet would make the
-- migration of that key fail.
local function v1_move_user(p, bucket, user)
  if not v1_exists(p.prefix .. 'u:' .. user, p.bdue) then
    return 0
  end
  redis.call('EXISTS', bucket.hb, bucket.hd, p.bdue)
  local packed = redis.call('HGET', bucket.hb, user)
  -- No k.outcomes: x:<user> is not in migrate.lua's KEYS, so v1_merge reads it guarded (while the
  -- slot migrates, this step may run on the importing node, where a one-key read of a key still
  -- on the source answers empty and the holds would lose their details and life records).
  v1_merge({hb = bucket.hb, hd = bucket.hd, bdue = p.bdue, store = p.store}, user,
    packed and unpack_holds(packed) or {}, true)
  return 1
end

-- The users left to check: those of the old due index and of the buckets from `from` on.
local function v1_left(p, from)
  local left = redis.call('ZCARD', p.prefix .. 'due')
  for b = from, V1_BUCKETS - 1 do
    left = left + redis.call('ZCARD', p.prefix .. 'hd:' .. int_str(b))
  end
  return left
end

-- The partition hook (migrate.lua): checks at least `budget` users (whole buckets) and moves those
-- in an older shape. First the old due index, earliest first, each user then dropped from it
-- (moved or not: one moved by a call has its bucket entry already); then bucket by bucket, from
-- `cursor` ("" = the start, "due" = the old index, "b<n>" = bucket n). A bucket is checked whole
-- in one step: its members' order changes between steps (scores move, users come and go), so an
-- offset could skip a user. Returns the users left to check, the next cursor ("" when done) and
-- the users moved by this step.
migrations.partitions[#migrations.partitions + 1] = function(p, budget, cursor)
  local old = p.prefix .. 'due'
  local checked, moved = 0, 0
  local at = tonumber(string.match(cursor, '^b(%d+)$'))
  if not at then
    if v1_exists(old, p.bdue) then
      local users = redis.call('ZRANGE', old, '0', int_str(budget - 1))
      for _, user in ipairs(users) do
        local b = int_str(math.floor(fnv1a32(user) / 64) % V1_BUCKETS)
        moved = moved + v1_move_user(p, {hb = p.prefix .. 'h:' .. b, hd = p.prefix .. 'hd:' .. b},
          user)
        redis.call('ZREM', old, user)
      end
      if #users >= budget then
        return v1_left(p, 0), 'due', moved
      end
      checked = #users
    end
    at = 0
  end
  while at < V1_BUCKETS do
    local b = int_str(at)
    local bucket = {hb = p.prefix .. 'h:' .. b, hd = p.prefix .. 'hd:' .. b}
    if v1_exists(bucket.hd, p.bdue) then
      local users = redis.call('ZRANGE', bucket.hd, '0', '-1')
      for _, user in ipairs(users) do
        moved = moved + v1_move_user(p, bucket, user)
      end
      checked = checked + #users
    end
    at = at + 1
    if checked >= budget and at < V1_BUCKETS then
      return v1_left(p, at), 'b' .. int_str(at), moved
    end
  end
  return 0, '', moved
end
