# tests/bench/lib.sh: helpers shared by the benchmark scripts (sourced, not run).
#   free_port         prints a TCP port nothing listens on (127.0.0.1), below the ephemeral range
#   wait_port PORT    waits until something listens on PORT (10 s), else fails
#   now_s             Unix time in seconds with nanoseconds

free_port() {
  # Below Linux's ephemeral range (32768-60999 by default): a port some client connection is
  # using (or left in TIME_WAIT) as its local port could not be listened on.
  local port
  while :; do
    port=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null || { echo "${port}"; return; }
  done
}

wait_port() {
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "bench: nothing listens on port $1" >&2
  return 1
}

now_s() { date +%s.%N; }
