-- read_events.lua: the next events of one partition's stream for one consumer of a group, at most
-- A.budget of them: first this consumer's own pending events when it resumes (A.resume), then events
-- other consumers left pending longer than the ack timeout (claims), then new ones.
--
-- Why Lua: reading the pending list, claiming and reading new entries must agree on the delivery
-- counts they report, and the whole read is one round trip per partition.
-- Claims follow https://redis.io/commands/xclaim/ and the cursor of XAUTOCLAIM
-- (https://redis.io/commands/xautoclaim/): the scan of the pending list starts after A.claim_after and
-- answers where to go on, so every pending entry gets its turn however long the list is (a scan
-- from the start every time re-takes the same oldest entries forever). Entries of this consumer
-- are never claimed by it: they are in its hands (its watch is open) or it resumes them (A.resume),
-- so a consumer that never acks holds what it was sent and the rest waits in Redis for another
-- consumer of the group, without being sent to it again and again.
--
-- KEYS[1]  the partition's event stream (entries written by end_hold in the prelude)
-- ARGV group         the consumer group
-- ARGV consumer      the consumer
-- ARGV budget        max events to return, >= 1
-- ARGV claim_ms      claim events other consumers have had pending for at least this many ms;
--                    "" = claim nothing
-- ARGV claim_after   claim cursor: scan the pending list after this stream id; "" = from its start
-- ARGV resume        "" = do not resume; else a stream id ("0-0" at first): take back this
--                    consumer's own pending events after it, whatever their idle time (a consumer
--                    that reconnects under the same name resumes where it was)
-- REPLY claim_next str  where the next claim scan starts ("" = the scan reached the end of the
--                       list: start over at the next sweep)
-- REPLY own_next str    where the resume goes on ("" = done)
-- REPLY events... any   10 elements an event: {id, delivery_count, user, order, outcome, expire,
--                       end, details, reference, returned} (outcome 1 PAID, 2 CANCELLED, 3
--                       EXPIRED, 4 RETURNED; expire and end Unix ms; details as in the prelude, ""
--                       for an event without them; reference: a PAID or RETURNED event's payment
--                       reference, "" for none; returned: a RETURNED event's units given back,
--                       0 for the others)
local stream, group, consumer = KEYS[1], A.group, A.consumer
local budget = tonumber(A.budget)
-- At most this many pending entries are looked at by one call's claim scan: a long run of this
-- consumer's own entries is skipped in bounded steps (the cursor goes on at the next call).
local scan_limit = 512
local out = {'', ''}

local function add(entry, count)
  local f = {}
  for i = 1, #entry[2], 2 do
    f[entry[2][i]] = entry[2][i + 1]
  end
  for _, v in ipairs({entry[1], count, f.u, f.o, f.x, f.e, f.t, f.m or '', f.r or '',
                      tonumber(f.n or '0')}) do
    out[#out + 1] = v
  end
  budget = budget - 1
end

-- XCLAIM of `ids` (counts: their delivery counts so far); entries trimmed meanwhile are dropped
-- from the pending list by XCLAIM and not returned.
local function claim_ids(min_idle, ids, counts)
  if #ids == 0 then
    return
  end
  local claimed = redis.call('XCLAIM', stream, group, consumer, min_idle, unpack(ids))
  for _, entry in ipairs(claimed) do
    if entry and entry[2] then
      add(entry, counts[entry[1]] + 1)
    end
  end
end

local function start_after(cursor)
  if cursor == '' then
    return '-'
  end
  return '(' .. cursor
end

-- This consumer's own pending entries after `cursor`; the cursor to go on from, '' when done.
local function resume(cursor)
  if budget <= 0 then
    return cursor
  end
  local want = budget
  local pending = redis.call('XPENDING', stream, group, start_after(cursor), '+', want, consumer)
  local ids, counts = {}, {}
  for _, p in ipairs(pending) do
    ids[#ids + 1] = p[1]
    counts[p[1]] = p[4]
  end
  claim_ids(0, ids, counts)
  if #pending < want then
    return ''
  end
  return pending[#pending][1]
end

-- Other consumers' entries pending >= min_idle, scanning after `cursor`; the cursor to go on from,
-- '' when the scan reached the end of the list.
local function claim(min_idle, cursor)
  if budget <= 0 then
    -- The resume took the whole budget: nothing scanned, go on from here next time ("0-0": from
    -- the start, which '' would not say: '' means the end was reached).
    return cursor ~= '' and cursor or '0-0'
  end
  local looked = 0
  while budget > 0 and looked < scan_limit do
    local want = scan_limit - looked
    local pending = redis.call('XPENDING', stream, group, 'IDLE', min_idle, start_after(cursor),
                               '+', want)
    local ids, counts = {}, {}
    for _, p in ipairs(pending) do
      looked = looked + 1
      cursor = p[1]
      if p[2] ~= consumer then
        ids[#ids + 1] = p[1]
        counts[p[1]] = p[4]
        if #ids >= budget then
          break
        end
      end
    end
    local stopped_early = #ids >= budget and cursor ~= (pending[#pending] or {})[1]
    claim_ids(min_idle, ids, counts)
    if #pending < want and not stopped_early then
      return ''
    end
  end
  return cursor
end

if A.resume ~= '' then
  out[2] = resume(A.resume)
end
if A.claim_ms ~= '' then
  out[1] = claim(tonumber(A.claim_ms), A.claim_after)
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
