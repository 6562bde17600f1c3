-- prelude/48_events.lua: appending a hold's event to its partition's stream (its bounds, its
-- nudge), for the ends (end_hold, prelude/50_ends.lua) and the returns (return_units.lua).

-- Whether this script execution already published its nudge (see add_event and end_hold).
local nudged = false

-- The prelude's only state that lives for one call: EVAL runs the whole prelude on every call,
-- but the Functions library (lua::kFunctionLibrary, server/CMakeLists.txt) runs it once per
-- FUNCTION LOAD, so each of its functions calls this first. State added here must be reset here.
local function begin_call()
  nudged = false
end

-- What an event costs Redis at most, bytes: its fields and values (u, o, x, e, t, m, r, n), half as
-- much again, and 128 (a stream entry's own bytes, its node's share and the allocator's rounding: a
-- maximal event, 2.7 KB of values, measured 3,742 B; tests/e2e/bounds_e2e_test.cc checks the
-- budget under a flood of them).
local function event_bytes(user, h, x, t, e, reference, returned)
  local values = #user + #h.order + #x + #e + #t + (h.details and #h.details or 0) + #reference +
    (returned and #returned or 0)
  return values + math.floor(values / 2) + 128
end

-- Appends one event about hold `h` of `user` to the partition's stream (see end_hold: fields,
-- bounds, nudge): outcome x, end time t and expire e as decimal strings, the payment reference
-- ('' = none), and for a RETURNED event the units the return gave back (`returned`, a decimal
-- string, the field n; nil for an end).
local function add_event(k, user, h, x, t, e, reference, returned)
  -- The stream's bounds beside the trimmer's age bound, as one MAXLEN ~ (which trims whole nodes
  -- only, so it costs nothing until a node is full): the length k.maxlen (--event_stream_max_len)
  -- and the bytes k.maxbytes (--event_stream_max_bytes), as a length: as many events as the
  -- budget holds of this one's size (event_bytes). A stream of like events stays within the
  -- budget; small events appended after large ones keep the large ones until the count reaches
  -- theirs, so a stream of mixed events holds at most twice it.
  local maxlen = k.maxlen or 0
  if (k.maxbytes or 0) > 0 then
    local bytes = event_bytes(user, h, x, t, e, reference, returned)
    local fit = math.max(1, math.floor(k.maxbytes / bytes))
    if maxlen == 0 or fit < maxlen then
      maxlen = fit
    end
  end
  local xadd
  if maxlen > 0 then
    xadd = {'XADD', k.events, 'MAXLEN', '~', int_str(maxlen), '*', 'u', user, 'o', h.order, 'x', x,
      'e', e, 't', t}
  else
    xadd = {'XADD', k.events, '*', 'u', user, 'o', h.order, 'x', x, 'e', e, 't', t}
  end
  if h.details then
    xadd[#xadd + 1], xadd[#xadd + 2] = 'm', h.details
  end
  if reference ~= '' then
    xadd[#xadd + 1], xadd[#xadd + 2] = 'r', reference
  end
  if returned then
    xadd[#xadd + 1], xadd[#xadd + 2] = 'n', returned
  end
  redis.call(unpack(xadd))
  if not nudged then
    nudged = true
    redis.pcall('SPUBLISH', string.sub(k.events, 1, -7) .. 'nudge', '')
  end
end
