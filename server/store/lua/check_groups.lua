-- check_groups.lua: which of the given consumer groups have work on one partition's event stream:
-- events not yet delivered to the group, or events pending (delivered, not acked) long enough to
-- be claimed. The safety sweep of event delivery (server/domain/event_dispatcher.h) asks this of
-- every partition every 1-2 s, so an idle partition costs one call per sweep whatever the number
-- of groups and watchers, instead of one read per group.
--
-- Why Lua: the stream's last id and every group's position must be compared in one step (an
-- event appended between two separate calls would be missed until the next sweep), in one round
-- trip per partition.
-- Undelivered: the stream's last entry id is above the group's last-delivered-id (XINFO GROUPS,
-- https://redis.io/commands/xinfo-groups/); this holds after trims too, unlike the `lag` field,
-- which Redis cannot always compute.
--
-- KEYS[1]   the partition's event stream (entries written by end_hold in the prelude)
-- ARGV claim_ms    claim threshold, ms: a group with an event pending at least this long is
--                  reported claimable; "" = do not look at pending events
-- ARGV groups...   the groups to check; a group that does not exist on the stream is left out
-- REPLY work... any  2 elements a group, for the groups that have work only: {group, flags},
--                    flags = 1 (undelivered events) + 2 (claimable pending events)
local stream = KEYS[1]
local claim_ms = A.claim_ms

local infos = redis.pcall('XINFO', 'GROUPS', stream)
if type(infos) ~= 'table' or infos.err then
  return {}  -- no stream yet: no group, nothing to read
end
local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
local last_id = last[1] and last[1][1]

local wanted = {}
for _, group in ipairs(A.groups) do
  wanted[group] = true
end
local out = {}
for _, info in ipairs(infos) do
  local g = {}
  for i = 1, #info, 2 do
    g[info[i]] = info[i + 1]
  end
  if wanted[g['name']] then
    local flags = 0
    if last_id and stream_id_after(last_id, g['last-delivered-id']) then
      flags = flags + 1
    end
    if claim_ms ~= '' and tonumber(g['pending']) > 0 then
      local idle = redis.call('XPENDING', stream, g['name'], 'IDLE', tonumber(claim_ms), '-', '+', 1)
      if #idle > 0 then
        flags = flags + 2
      end
    end
    if flags > 0 then
      out[#out + 1] = g['name']
      out[#out + 1] = flags
    end
  end
end
return out
