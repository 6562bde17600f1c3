# shellcheck shell=bash
# tests/bench/lib.sh: helpers shared by the benchmark scripts (sourced, not run).
#   free_port         prints a TCP port nothing listens on (127.0.0.1), below the ephemeral range
#   wait_port PORT    waits until something listens on PORT (10 s), else fails
#   now_s             Unix time in seconds with nanoseconds
#   stop_pids_and_work  kills and reaps the processes in the caller's PIDS array, then removes the
#                     caller's ${WORK} directory: the EXIT trap of a test that starts servers
#   scrape PORT       prints the server's /metrics (Prometheus text) from 127.0.0.1:PORT (10 s max)
#   hist_stats A B M  histogram M between two scrape files A (earlier) and B (later):
#                     "count p50 p99 p99.9 max_le" (quantiles in the metric's unit, interpolated
#                     within buckets as PromQL's histogram_quantile does; "-" when empty)
#   hist_mean A B M   histogram M between two scrape files: "mean count"
#   counter FILE M    value of the unlabelled counter or gauge M in a scrape file
#   make_tls_certs DIR  writes DIR/ca.crt (a throwaway CA) and DIR/server.{crt,key} (signed by it,
#                     for localhost and 127.0.0.1), EC P-256 keys, valid 2 days (openssl CLI)
#   wait_replica_up PORT  waits until the replica on PORT has synced (master_link_status:up, 10 s),
#                     else fails
#   start_redis       a redis-server on a free port, no persistence, logging to ${WORK}/redis.log:
#                     sets REDIS_PORT and REDIS_PID (also appended to the caller's PIDS), waits
#                     until it listens
#   bench_redis       a benchmark's start: a scratch ${WORK} and an empty PIDS (both removed at exit:
#                     stop_pids_and_work), then start_redis, and rcli ARGS... (redis-cli to it)
#   proc_cpu_s PID    CPU seconds (user + system) process PID has used so far
#   children_cpu_s    CPU seconds (user + system) of the children the script's main shell ($$)
#                     has waited for (cutime + cstime of /proc/$$/stat): read before and after a
#                     command the main shell runs in the foreground, the difference is that
#                     command's CPU (plus a few ms of the reads themselves); from a subshell or a
#                     pipeline, what it waits for is not counted
#   redis_cpu_s ARGS...  CPU seconds (user + system) the redis-server that `redis-cli ARGS...`
#                     reaches has used so far (INFO cpu; main thread and its helpers)
#   h2load_place PORT OUT OPTIONS...  h2load against 127.0.0.1:PORT with OPTIONS (-D/-n, -c, -m),
#                     every request PlaceHold{user_id "u1", order_id "o1"} (gRPC-framed; after the
#                     first call the "already held" path, which runs the whole script); its output
#                     to OUT, the request file in ${WORK}; fails as h2load does
#   start_cluster DIR N  starts N redis-servers in cluster mode on free ports (data and bus port
#                     each; no persistence; data in DIR/<port>), makes them one Redis Cluster of N
#                     primaries and no replicas with `redis-cli --cluster create` (its even split of
#                     the 16384 slots; N >= 3, redis-cli's minimum) and waits until every node says
#                     cluster_state:ok (15 s), else fails. Sets CLUSTER_PORTS (data ports),
#                     CLUSTER_PIDS (the caller stops them) and CLUSTER_URL
#                     (redis://127.0.0.1:<p1>,127.0.0.1:<p2>,...: the seed list for
#                     --redis_mode=cluster).

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

stop_pids_and_work() {
  local pid
  for pid in "${PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "${pid}" 2>/dev/null || true; done
  rm -rf "${WORK}"
}

# Bounded: a server saturated by a phase may answer slowly, but a scrape must not hang the run.
scrape() { curl -sf --max-time 10 "http://127.0.0.1:$1/metrics"; }

hist_stats() {
  awk -v m="$3" '
    FNR == 1 { f++ }
    $1 ~ "^" m "_bucket" {
      match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5)
      if (f == 1) a[le] = $2; else { b[le] = $2; if (!(le in seen)) { seen[le] = 1; order[n++] = le } }
    }
    END {
      total = b["+Inf"] - a["+Inf"]
      if (total <= 0) { print "0 - - - -"; exit }
      split("0.5 0.99 0.999", qs, " ")
      out = total
      for (qi = 1; qi <= 3; qi++) {
        q = qs[qi] * total; prev_le = 0; prev_c = 0; v = "-"
        for (i = 0; i < n; i++) {
          le = order[i]; c = b[le] - a[le]
          if (c >= q) {
            if (le == "+Inf") { v = ">" prev_le } else if (c == prev_c) { v = le }
            else { v = sprintf("%.3f", prev_le + (le - prev_le) * (q - prev_c) / (c - prev_c)) }
            break
          }
          prev_le = le; prev_c = c
        }
        out = out " " v
      }
      maxle = "-"
      for (i = 0; i < n; i++) { le = order[i]; if (b[le] - a[le] >= total) { maxle = le; break } }
      print out " " maxle
    }' "$1" "$2"
}
hist_mean() {
  awk -v m="$3" '
    FNR == 1 { f++ }
    $1 == m "_sum" { s[f] = $2 } $1 == m "_count" { c[f] = $2 }
    END { n = c[2] - c[1]; if (n > 0) printf "%.4f %d\n", (s[2] - s[1]) / n, n; else print "- 0" }' "$1" "$2"
}
counter() { awk -v m="$2" '$1 == m { print $2 }' "$1"; }

make_tls_certs() {
  local dir="$1" key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  mkdir -p "${dir}"
  # A config with nothing but what `openssl req` insists on, so the system's openssl.cnf adds no
  # extensions; OpenSSL 3 adds the key identifiers itself, and `req -x509 -CA` signs directly.
  printf '[req]\ndistinguished_name = dn\n[dn]\n' >"${dir}/openssl.cnf"
  openssl req -x509 -config "${dir}/openssl.cnf" "${key[@]}" -days 2 \
    -subj "/CN=OrderHold bench CA" -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "${dir}/ca.key" -out "${dir}/ca.crt" 2>/dev/null
  openssl req -x509 -config "${dir}/openssl.cnf" "${key[@]}" -days 2 -subj /CN=localhost \
    -CA "${dir}/ca.crt" -CAkey "${dir}/ca.key" -addext basicConstraints=critical,CA:FALSE \
    -addext keyUsage=critical,digitalSignature -addext extendedKeyUsage=serverAuth \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "${dir}/server.key" -out "${dir}/server.crt" 2>/dev/null
}

wait_replica_up() {
  for _ in $(seq 200); do
    redis-cli -p "$1" INFO replication | tr -d '\r' | grep -qx 'master_link_status:up' && return 0
    sleep 0.05
  done
  echo "bench: the replica on port $1 did not sync with its primary" >&2
  return 1
}

start_redis() {
  REDIS_PORT="$(free_port)"
  redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "${WORK}" --logfile "${WORK}/redis.log" &
  REDIS_PID=$!
  PIDS+=("${REDIS_PID}")
  wait_port "${REDIS_PORT}"
}

bench_redis() {
  WORK="$(mktemp -d)"
  PIDS=()
  trap stop_pids_and_work EXIT
  start_redis
  rcli() { redis-cli -p "${REDIS_PORT}" "$@"; }
}

# Seconds in fields N and N+1 of a /proc/<pid>/stat file (clock ticks); the command name (field 2)
# is cut off first, as it may contain spaces.
stat_cpu_s() {  # stat file, N
  local ticks
  ticks="$(getconf CLK_TCK)"
  sed 's/^.*) //' "$1" | awk -v hz="${ticks}" -v i="$(($2 - 2))" '{ printf "%.3f\n", ($i + $(i + 1)) / hz }'
}

proc_cpu_s() { stat_cpu_s "/proc/$1/stat" 14; }  # utime, stime
children_cpu_s() { stat_cpu_s "/proc/$$/stat" 16; }  # cutime, cstime

redis_cpu_s() {
  redis-cli "$@" INFO cpu | tr -d '\r' | awk -F: '
    $1 == "used_cpu_user" || $1 == "used_cpu_sys" { s += $2 } END { printf "%.3f\n", s }'
}

h2load_place() {
  local port="$1" out="$2"
  shift 2
  # PlaceHoldRequest{user_id: "u1", order_id: "o1"} in a gRPC frame (uncompressed, 8 bytes).
  printf '\x00\x00\x00\x00\x08\x0a\x02u1\x12\x02o1' >"${WORK}/place.bin"
  h2load "$@" -H 'content-type: application/grpc' -H 'te: trailers' -d "${WORK}/place.bin" \
    "http://127.0.0.1:${port}/orderhold.v1.OrderHold/PlaceHold" >"${out}" 2>&1
}

start_cluster() {
  local dir="$1" n="$2" i port bus addrs=() state
  CLUSTER_PORTS=() CLUSTER_PIDS=()
  for ((i = 0; i < n; i++)); do
    port="$(free_port)"
    bus="$(free_port)"
    while [[ "${bus}" == "${port}" ]]; do bus="$(free_port)"; done
    mkdir -p "${dir}/${port}"
    # cluster-port set, so port + 10000 (the default bus port) need not be free.
    redis-server --port "${port}" --cluster-port "${bus}" --bind 127.0.0.1 --save '' \
      --appendonly no --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 5000 --dir "${dir}/${port}" --logfile "${dir}/${port}/redis.log" &
    CLUSTER_PIDS+=($!)
    CLUSTER_PORTS+=("${port}")
    wait_port "${port}" || return 1
    addrs+=("127.0.0.1:${port}")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-yes >"${dir}/create.log" 2>&1 || {
    echo "bench: redis-cli --cluster create failed:" >&2
    tail -5 "${dir}/create.log" >&2
    return 1
  }
  for _ in $(seq 300); do
    state=0
    for port in "${CLUSTER_PORTS[@]}"; do
      redis-cli -p "${port}" CLUSTER INFO | tr -d '\r' | grep -qx 'cluster_state:ok' && ((++state))
    done
    if ((state == n)); then
      # shellcheck disable=SC2034  # for the caller
      CLUSTER_URL="redis://$(IFS=,; echo "${addrs[*]}")"
      return 0
    fi
    sleep 0.05
  done
  echo "bench: the cluster on ports ${CLUSTER_PORTS[*]} did not reach cluster_state:ok" >&2
  return 1
}
