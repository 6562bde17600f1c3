-- prelude/45_scope_rules.lua: an exact scope's runtime rule (PutScopeRule), as the scripts read it.

-- A scope's runtime rule: "<prefix>:{<p>}:sr:<scope>", a string in the scope's partition (keys.h
-- ScopeRuleKey; p as for the scope index), written by scope_rule.lua only:
--   <version>:<state>:<open ms>:<close ms>:<expire ms>:<max_holds>:<max_units>:
--   <total_max_holds>:<total_max_units>:<capacity_units>:<max_purchased_units>:
--   <max_purchased_holds>:<id>:
-- all decimal integers: version the rule's etag (a counter of its partition, never reused), state
-- 1 OPEN, 2 PAUSED, 3 CLOSED, a time 0 = unset, id the version it was created with (kept by its
-- edits: its buyers' purchases count under it, below); the key expires at <expire ms> (SET PXAT)
-- when one is set. A later release appends its fields after the last ':': readers ignore what
-- follows. What follows here, when the rule has limit classes (ScopeRule.classes), is
--   <n>:{<name length>:<name><max_holds>:<max_units>:<max_purchased_units>:
--   <max_purchased_holds>:<np>:{<principal length>:<principal>}*np}*n
-- (names in byte order, principals typed: "uri:...", "dns:...", "subject:..."); scope_rule_class
-- reads it.
-- The partition's rules are listed in "<prefix>:{<p>}:sr" (sorted set, score 0, member = the
-- scope; ZRANGE BYLEX pages) and numbered by "<prefix>:{<p>}:srv" (string, INCRBY).
-- Only where a script may touch the scope's partition (not a Redis Cluster), as the index.
local RULE_PATTERN =
  '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):()'

local function scope_rule_key(index, scope)
  return scope_tag(index, scope) .. 'sr:' .. scope
end

-- A packed rule as {version, state, open, close, expire, max_holds, max_units, total_holds,
-- total_units, capacity, purchased_units, purchased_holds, id} (numbers) and classes (the packed
-- classes, "" for none: scope_rule_class reads them); nil when `packed` is
-- false (no rule) or the rule's expire_time has passed at `now` (its key may not have expired yet
-- when a test sets now). Raises an error on any other shape. The last rule parsed is kept, by
-- its string, as limits_of keeps the last limits (an on-sale places in one scope over and over;
-- the parse costs about two GETs from a script): the table answered is shared, read only.
local rule_packed, rule_parsed
local function scope_rule_of(packed, now)
  if not packed then
    return nil
  end
  local r = rule_parsed
  if packed ~= rule_packed then
    local v, st, op, cl, ex, mh, mu, th, tu, cap, pu, ph, id, tail =
      string.match(packed, RULE_PATTERN)
    if not v then
      error('OrderHold: malformed scope rule')
    end
    r = {version = tonumber(v), state = tonumber(st), open = tonumber(op), close = tonumber(cl),
         expire = tonumber(ex), max_holds = tonumber(mh), max_units = tonumber(mu),
         total_holds = tonumber(th), total_units = tonumber(tu), capacity = tonumber(cap),
         purchased_units = tonumber(pu), purchased_holds = tonumber(ph), id = tonumber(id),
         classes = string.sub(packed, tail)}
    rule_packed, rule_parsed = packed, r
  end
  if r.expire > 0 and now >= r.expire then
    return nil
  end
  return r
end

-- What a payment needs of a packed rule (end_hold, record_purchase): {id, expire} (numbers); nil
-- as scope_rule_of answers nil. One match of two captures instead of scope_rule_of's fourteen and
-- its table of every field: a Pay under a rule reads only these.
local RULE_ID_PATTERN = '^%d+:%d+:%d+:%d+:(%d+):%d+:%d+:%d+:%d+:%d+:%d+:%d+:(%d+):'
local function scope_rule_id_of(packed, now)
  if not packed then
    return nil
  end
  local ex, id = string.match(packed, RULE_ID_PATTERN)
  if not ex then
    error('OrderHold: malformed scope rule')
  end
  ex = tonumber(ex)
  if ex > 0 and now >= ex then
    return nil
  end
  return {id = tonumber(id), expire = ex}
end

-- The limit class `name` of rule `r` (scope_rule_of), as {max_holds, max_units, purchased_units,
-- purchased_holds, principals = {[principal] = true}}; nil when the rule has no such class.
-- Raises an error on a malformed tail. Reads the classes until it meets `name` (at most 16
-- classes, 64 principals: what PutScopeRule lets a rule have).
local function scope_rule_class(r, name)
  local tail = r.classes
  if tail == '' then
    return nil
  end
  local function field(pattern, at)
    local a, b, c, d, e, f = string.match(tail, pattern, at)
    if not a then
      error('OrderHold: malformed scope rule classes')
    end
    return a, b, c, d, e, f
  end
  local n, pos = field('^(%d+):()', 1)
  for _ = 1, tonumber(n) do
    local len, at = field('^(%d+):()', pos)
    local class_name = string.sub(tail, at, at + tonumber(len) - 1)
    local mh, mu, pu, ph, np, next_at = field('^(%d+):(%d+):(%d+):(%d+):(%d+):()',
                                              at + tonumber(len))
    local principals = {}
    pos = next_at
    for _ = 1, tonumber(np) do
      local plen, pat = field('^(%d+):()', pos)
      principals[string.sub(tail, pat, pat + tonumber(plen) - 1)] = true
      pos = pat + tonumber(plen)
    end
    if class_name == name then
      return {max_holds = tonumber(mh), max_units = tonumber(mu), purchased_units = tonumber(pu),
              purchased_holds = tonumber(ph), principals = principals}
    end
  end
  return nil
end

-- Whether one of `caller`'s identities ("{<length>:<typed identity>}*", place_hold.lua's
-- A.caller) is among class `c`'s principals (scope_rule_class).
local function class_admits(c, caller)
  local pos = 1
  while pos <= #caller do
    local len, at = string.match(caller, '^(%d+):()', pos)
    if not len then
      error('OrderHold: malformed caller identities')
    end
    if c.principals[string.sub(caller, at, at + tonumber(len) - 1)] then
      return true
    end
    pos = at + tonumber(len)
  end
  return false
end

-- Whether a rule lets a hold be placed at `now`: 1 open; 2 not open yet, with the instant it
-- opens (0: none set, a PAUSED rule without open_time); 3 closed. CLOSED, or close_time reached,
-- closes; before open_time it is not open yet, whatever its state; PAUSED opens at open_time.
local function scope_rule_state(r, now)
  if r.state == 3 or (r.close > 0 and now >= r.close) then
    return 3, 0
  end
  if r.open > 0 and now < r.open then
    return 2, r.open
  end
  if r.state == 2 and r.open == 0 then
    return 2, 0
  end
  return 1, 0
end

-- The scope limits a hold is placed under when the rule sets (max_holds, max_units) and the
-- request asked `asked`: "" = none of its own (the rule's); "c:<h>:<u>" a ceiling (per field the
-- smaller non-zero of the two: a request's 0 leaves the rule's, a rule's 0 takes the request's);
-- "r:<h>:<u>" the request's as they are (--request_scope_limits=replace). domain/scope_limits.h
-- ApplyRequestLimits is the same rule for the file's rules.
local function asked_limits(max_holds, max_units, asked)
  if asked == '' then
    return max_holds, max_units
  end
  local mode, h, u = string.match(asked, '^([cr]):(%d+):(%d+)$')
  if not mode then
    error('OrderHold: malformed asked limits')
  end
  h, u = tonumber(h), tonumber(u)
  if mode == 'r' then
    return h, u
  end
  local function lower(rule, req)
    if req == 0 or (rule ~= 0 and rule < req) then
      return rule
    end
    return req
  end
  return lower(max_holds, h), lower(max_units, u)
end

-- A details tail (hold_details_codec.h, from the quantity on) with the scope's max_holds and
-- max_units replaced: what the hold records it was placed under. `tail` has a scope.
local function details_with_limits(tail, max_holds, max_units)
  local n, pos = string.match(tail, '^%d+:(%d+):()')
  local stop = pos + tonumber(n)
  local rest = string.match(tail, '^%d+:%d+:()', stop)
  return string.sub(tail, 1, stop - 1) .. int_str(max_holds) .. ':' .. int_str(max_units) .. ':' ..
         string.sub(tail, rest)
end

-- A buyer's purchases in a scope with a runtime rule: "<prefix>:{<p>}:pb:<user>\0<scope>", a
-- string in the user's partition (keys.h PurchasesKey; ids have no control characters, so the
-- name is injective), "<rule id>:<units>:<holds>": the units and holds the user paid for in the
-- scope under the rule created as <rule id>. Written by end_hold at each payment of a scoped hold
-- whose scope has a runtime rule; it expires with the rule (SET PXAT its expire_time), and a
-- count under another rule id (the rule was deleted and put again) reads as none. A rule's
-- max_purchased_units / max_purchased_holds (place_hold.lua's LEVELS 8 and 9) cap the user's live
-- holds in the scope plus these.
local function purchases_key(k, user, scope)
  return string.sub(k.outcomes, 1, #k.outcomes - #user - 2) .. 'pb:' .. user .. '\0' .. scope
end

-- The units and holds `user` bought in `scope` under rule `r` (0, 0 when none).
local function purchased(k, user, scope, r)
  local v = redis.call('GET', purchases_key(k, user, scope))
  if v then
    local id, units, holds = string.match(v, '^(%d+):(%d+):(%d+)$')
    if id and tonumber(id) == r.id then
      return tonumber(units), tonumber(holds)
    end
  end
  return 0, 0
end

-- Counts a payment of `quantity` units in `scope` by `user` (end_hold) under the scope's runtime
-- rule `r` (scope_rule_of at the payment).
local function record_purchase(k, user, scope, quantity, r)
  local units, holds = purchased(k, user, scope, r)
  local value = string.format('%d:%d:%d', r.id, units + quantity, holds + 1)
  if r.expire > 0 then
    redis.call('SET', purchases_key(k, user, scope), value, 'PXAT', int_str(r.expire))
  else
    redis.call('SET', purchases_key(k, user, scope), value)
  end
end
