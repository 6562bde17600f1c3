-- read_events.lua: the next events of one partition's stream for one consumer of a group, at most
-- ARGV[3] of them: first pending events this consumer may take over (claims), then new ones.
--
-- Why Lua: reading the pending list, claiming and reading new entries must agree on the delivery
-- counts they report, and the whole read is one round trip per partition.
-- Claims follow https://redis.io/commands/xclaim/: an event pending longer than the ack timeout
-- (for any consumer, this one included) moves to this consumer and its delivery count grows by 1.
--
-- KEYS[1]  the partition's event stream (entries written by end_hold in prelude.lua)
-- ARGV[1]  group; ARGV[2] consumer
-- ARGV[3]  max events to return, >= 1
-- ARGV[4]  claim events pending for at least this many ms; "" = claim nothing
-- ARGV[5]  "1" = first take back this consumer's own pending events, whatever their idle time
--          (a consumer that reconnects under the same name resumes where it was)
-- Returns  flat {id, delivery_count, user, order, outcome, expire, end, details, ...}, 8 per
--          event (outcome 1 PAID, 2 CANCELLED, 3 EXPIRED; expire and end Unix ms; details as in
--          prelude.lua, "" for an event without them).
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local budget = tonumber(ARGV[3])
local out = {}

local function add(entry, count)
  local f = {}
  for i = 1, #entry[2], 2 do
    f[entry[2][i]] = entry[2][i + 1]
  end
  for _, v in ipairs({entry[1], count, f.u, f.o, f.x, f.e, f.t, f.m or ''}) do
    out[#out + 1] = v
  end
  budget = budget - 1
end

-- XPENDING extended form -> XCLAIM of those ids; entries trimmed meanwhile are not returned.
local function claim(min_idle, owner)
  if budget <= 0 then
    return
  end
  local pending
  if owner then
    pending = redis.call('XPENDING', stream, group, 'IDLE', min_idle, '-', '+', budget, owner)
  else
    pending = redis.call('XPENDING', stream, group, 'IDLE', min_idle, '-', '+', budget)
  end
  if #pending == 0 then
    return
  end
  local counts, ids = {}, {}
  for _, p in ipairs(pending) do
    counts[p[1]] = p[4]
    ids[#ids + 1] = p[1]
  end
  local claimed = redis.call('XCLAIM', stream, group, consumer, min_idle, unpack(ids))
  for _, entry in ipairs(claimed) do
    if entry and entry[2] then
      add(entry, counts[entry[1]] + 1)
    end
  end
end

if ARGV[5] == '1' then
  claim(0, consumer)
end
if ARGV[4] ~= '' then
  claim(tonumber(ARGV[4]), nil)
end
if budget > 0 then
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', budget, 'STREAMS',
                          stream, '>')
  if read then
    for _, entry in ipairs(read[1][2]) do
      add(entry, 1)
    end
  end
end
return out
