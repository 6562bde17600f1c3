-- trim_events.lua: trims one partition's event stream by age and by length and reports its
-- consumer groups.
--
-- Why Lua: counting what a trim drops unacked, trimming, and releasing the dropped ids from the
-- groups' pending lists must see the same stream, or a drop could go uncounted.
--
-- KEYS[1]  the partition's event stream
-- ARGV cutoff         Unix ms: entries with an id older than this (ms part < cutoff) are deleted
--                     (XTRIM MINID, exact)
-- ARGV bound          max ids counted per group and call (bounds the run time): with more unacked
--                     entries below the cutoff, this call trims only up to the bound and a later
--                     call does the rest
-- ARGV keep           length to keep: while the stream holds more, its oldest entries are trimmed
--                     too (up to LENGTH_STEP a call), counted as age trims are; 0 = by age only.
--                     The store passes 9/10 of --event_stream_max_len, so the appends' own
--                     MAXLEN ~ (which counts nothing) only bites when more than a tenth of the
--                     bound is appended between two trims
-- ARGV consumer_idle  consumer idle timeout, ms; 0 = none. A consumer idle (no read or claim)
--                     longer is removed from its group (XGROUP DELCONSUMER) after its pending
--                     entries are moved to the group's orphan consumer ORPHANS (XCLAIM ... JUSTID,
--                     keeping their idle time), where any consumer of the group claims them as it
--                     claims entries pending too long (read_events.lua); ORPHANS goes once it has
--                     nothing pending. At most IDLE_STEP entries moved per call.
-- REPLY trimmed int            entries trimmed
-- REPLY trimmed_unacked int    over all groups: trimmed entries that were pending (delivered, not
--                              acked; they are acked here so they stop being claimable) or not
--                              yet delivered to the group
-- REPLY consumers_removed int  idle consumers removed
-- REPLY groups... any          2 elements a group: {group, oldest_unacked}: after the trim, the
--                              id time (Unix ms) of its oldest pending or undelivered entry, -1
--                              when it has none
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0, 0}
end
local stream, cutoff, bound, keep = KEYS[1], tonumber(A.cutoff), tonumber(A.bound),
  tonumber(A.keep)
local LENGTH_STEP = 10000
local consumer_idle = tonumber(A.consumer_idle)
-- The orphan consumer: "\1" is a control character, which no consumer name a caller gives has
-- (domain::ValidateLocalId refuses them).
local ORPHANS, IDLE_STEP = '\1orphans', 1000
local groups = {}
for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  local g = {}
  for i = 1, #info, 2 do
    g[info[i]] = info[i + 1]
  end
  groups[#groups + 1] = g
end

-- Entries of group g below `limit` (exclusive): pending ones (XPENDING) and not yet delivered ones
-- (XRANGE after its last-delivered-id), each list at most `bound` long.
local function below(g, limit)
  local pending = redis.call('XPENDING', stream, g.name, '-', '(' .. limit, bound)
  local undelivered = redis.call('XRANGE', stream, '(' .. g['last-delivered-id'], '(' .. limit,
                                 'COUNT', bound)
  return pending, undelivered
end

-- Pass 1: where to trim. Ids below `cutoff` ms, but when a group has more than `bound` of them,
-- only up to its bound-th: the rest is counted and trimmed by a later call, never uncounted.
-- The stream's first and last entries: with nothing below the cutoff both passes and the XTRIM
-- are skipped, and a group with nothing pending and nothing after its last-delivered-id needs no
-- command of its own, so a trim of an idle stream costs the same whatever the number of groups.
local function ms(id)
  return tonumber(string.match(id, '^(%d+)-'))
end
local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]

local trim_to = cutoff .. '-0'
if keep > 0 and first then
  local excess = redis.call('XLEN', stream) - keep
  if excess > 0 then
    -- The first entry kept: the (n + 1)-th, n of the excess trimmed by this call.
    local n = math.min(excess, LENGTH_STEP)
    local upto = redis.call('XRANGE', stream, '-', '+', 'COUNT', n + 1)
    if #upto == n + 1 and stream_id_after(upto[n + 1][1], trim_to) then
      trim_to = upto[n + 1][1]
    end
  end
end
local trimmed, unacked = 0, 0
if first and ms(trim_to) > 0 and stream_id_after(trim_to, first[1]) then
  for _, g in ipairs(groups) do
    local pending, undelivered = below(g, trim_to)
    if #pending == bound then
      trim_to = pending[bound][1]
    end
    if #undelivered == bound and stream_id_after(trim_to, undelivered[bound][1]) then
      trim_to = undelivered[bound][1]
    end
  end
  -- Pass 2: count (and ack, so they stop being claimable) what this call trims.
  for _, g in ipairs(groups) do
    local pending, undelivered = below(g, trim_to)
    if #pending > 0 then
      local ids = {}
      for _, p in ipairs(pending) do
        ids[#ids + 1] = p[1]
      end
      redis.call('XACK', stream, g.name, unpack(ids))
    end
    unacked = unacked + #pending + #undelivered
  end
  trimmed = redis.call('XTRIM', stream, 'MINID', trim_to)
end

if trimmed > 0 then
  last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
end
-- Consumers gone quiet: their pending entries back to the group, the consumer out.
local removed, moved = 0, 0
if consumer_idle > 0 then
  for _, g in ipairs(groups) do
    if tonumber(g.consumers) > 0 then
      for _, info in ipairs(redis.call('XINFO', 'CONSUMERS', stream, g.name)) do
        local c = {}
        for i = 1, #info, 2 do
          c[info[i]] = info[i + 1]
        end
        local pending = tonumber(c.pending)
        if c.name == ORPHANS then
          if pending == 0 then
            redis.call('XGROUP', 'DELCONSUMER', stream, g.name, ORPHANS)
          end
        elseif tonumber(c.idle) > consumer_idle and moved + pending <= IDLE_STEP then
          if pending > 0 then
            local ids = {}
            for _, p in ipairs(redis.call('XPENDING', stream, g.name, '-', '+', pending, c.name)) do
              ids[#ids + 1] = p[1]
            end
            -- IDLE keeps them claimable at once, JUSTID their delivery counts.
            local args = {stream, g.name, ORPHANS, 0}
            for _, id in ipairs(ids) do
              args[#args + 1] = id
            end
            args[#args + 1] = 'IDLE'
            args[#args + 1] = c.idle
            args[#args + 1] = 'JUSTID'
            redis.call('XCLAIM', unpack(args))
            moved = moved + pending
          end
          redis.call('XGROUP', 'DELCONSUMER', stream, g.name, c.name)
          removed = removed + 1
        end
      end
    end
  end
end
local out = {trimmed, unacked, removed}
for _, g in ipairs(groups) do
  local oldest = -1
  -- XINFO's pending count is from before pass 2's acks: ask only when it was not 0.
  if tonumber(g.pending) > 0 then
    local summary = redis.call('XPENDING', stream, g.name)
    if summary[1] > 0 then
      oldest = ms(summary[2])
    end
  end
  if last and stream_id_after(last[1], g['last-delivered-id']) then
    local next = redis.call('XRANGE', stream, '(' .. g['last-delivered-id'], '+', 'COUNT', 1)
    if #next > 0 and (oldest < 0 or ms(next[1][1]) < oldest) then
      oldest = ms(next[1][1])
    end
  end
  out[#out + 1] = g.name
  out[#out + 1] = oldest
end
return out
