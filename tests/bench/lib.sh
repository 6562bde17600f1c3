# shellcheck shell=bash
# tests/bench/lib.sh: helpers shared by the benchmark scripts (sourced, not run).
#   free_port         prints a TCP port nothing listens on (127.0.0.1), below the ephemeral range
#   wait_port PORT    waits until something listens on PORT (10 s), else fails
#   now_s             Unix time in seconds with nanoseconds
#   scrape PORT       prints the server's /metrics (Prometheus text) from 127.0.0.1:PORT
#   hist_stats A B M  histogram M between two scrape files A (earlier) and B (later):
#                     "count p50 p99 p99.9 max_le" (quantiles in the metric's unit, interpolated
#                     within buckets as PromQL's histogram_quantile does; "-" when empty)
#   hist_mean A B M   histogram M between two scrape files: "mean count"
#   counter FILE M    value of the unlabelled counter or gauge M in a scrape file

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

scrape() { curl -sf "http://127.0.0.1:$1/metrics"; }

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
