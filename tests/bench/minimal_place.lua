#!lua name=orderhold_minimal
-- minimal_place.lua: the minimal design a PlaceHold is measured against (tests/bench/redis_cost.sh):
-- the design card's sorted set per user, made exact. One registered function, minimal_place.
--
-- KEYS[1]  the user's holds: sorted set, member = order id, score = expire time (Unix ms)
-- ARGV[1]  order id
-- ARGV[2]  ttl, ms >= 1
-- ARGV[3]  max live holds, >= 1
-- Returns  1 placed (or already placed: ZADD NX adds nothing), -1 over the limit
-- It counts live holds (score > now) with ZCOUNT, adds with ZADD NX and keeps the key no longer
-- than its last hold (PEXPIRE): no outcome memory, no events, no details, no due index.
redis.register_function('minimal_place', function(keys, argv)
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  if redis.call('ZCOUNT', keys[1], '(' .. now, '+inf') >= tonumber(argv[3]) then
    return -1
  end
  redis.call('ZADD', keys[1], 'NX', now + tonumber(argv[2]), argv[1])
  redis.call('PEXPIRE', keys[1], argv[2])
  return 1
end)
