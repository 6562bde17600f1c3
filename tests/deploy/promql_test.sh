#!/usr/bin/env bash
# tests/deploy/promql_test.sh: proves every PromQL expression we ship works on what the server
# really exports. A real Prometheus (Debian's, private port and storage, 1 s scrapes) runs the
# Compose scrape config (deploy/prometheus/prometheus.yml, pointed at a private server) with the
# alert rules; a real orderhold-server on a private redis-server gets a short load through
# orderhold-cli (place, quota rejection, invalid argument, pay, cancel, a 1 s hold that expires,
# a consumer group watching and acking). Then, through Prometheus' HTTP API:
#   - the rule file loaded and every rule evaluates with health "ok";
#   - every expression of the dashboard (deploy/grafana/orderhold.json, Grafana's $__ variables
#     substituted) is valid and returns at least one series with a number (not NaN);
#   - every alert expression (deploy/prometheus/alerts.yaml) is valid, returns nothing on this
#     healthy server (no false alarm), and each metric selector in it returns series, so a
#     misspelt metric or label value cannot hide behind an alert that is "just not firing".
# Run: bash tests/deploy/promql_test.sh SERVER_BINARY CLI_BINARY (ctest -L deploy passes the
# build's). Needs prometheus, yq, jq, curl, redis-server (deploy/install-deps.sh). ~20 s.
set -euo pipefail

SERVER="${1:?usage: promql_test.sh SERVER_BINARY CLI_BINARY}"
CLI="${2:?usage: promql_test.sh SERVER_BINARY CLI_BINARY}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DASHBOARD="${ROOT}/deploy/grafana/orderhold.json"
RULES="${ROOT}/deploy/prometheus/alerts.yaml"
# shellcheck source=tests/bench/lib.sh
source "${ROOT}/tests/bench/lib.sh"
for tool in prometheus yq jq curl redis-server; do
  command -v "${tool}" >/dev/null || {
    echo "promql_test: ${tool} missing (deploy/install-deps.sh installs it)" >&2
    exit 1
  }
done

# The dashboard's shape, before anything runs: Grafana's Prometheus datasource uid
# `prometheus` (deploy/grafana/provisioning/datasources) on every panel and query, reaper lag first.
jq -e '[.. | objects | select(has("datasource")) | .datasource.uid] | unique == ["prometheus"]' \
  "${DASHBOARD}" >/dev/null || { echo "promql_test: a datasource uid is not prometheus" >&2; exit 1; }
jq -e '[.panels[] | select(.type != "row")][0].targets[0].expr
  | contains("orderhold_reaper_lag_seconds_bucket")' "${DASHBOARD}" >/dev/null ||
  { echo "promql_test: the first panel is not the reaper lag" >&2; exit 1; }

WORK="$(mktemp -d)"
PIDS=()
trap stop_pids_and_work EXIT

REDIS_PORT="$(free_port)"
redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "${WORK}" --logfile "${WORK}/redis.log" &
PIDS+=($!)
wait_port "${REDIS_PORT}"

GRPC_PORT="$(free_port)"
METRICS_PORT="$(free_port)"
"${SERVER}" --grpc_address="127.0.0.1:${GRPC_PORT}" --metrics_address="127.0.0.1:${METRICS_PORT}" \
  --redis_url="redis://127.0.0.1:${REDIS_PORT}" --reap_interval=200ms \
  >"${WORK}/server.log" 2>&1 &
PIDS+=($!)
wait_port "${GRPC_PORT}"
wait_port "${METRICS_PORT}"

# The Compose config with its orderhold job aimed at our server, 1 s scrapes and rule evaluation,
# the rules from the repository; other jobs dropped.
PROM_PORT="$(free_port)"
# shellcheck disable=SC2016  # jq's $target and $rules, not the shell's
yq -y --arg target "127.0.0.1:${METRICS_PORT}" --arg rules "${RULES}" '
  .global.scrape_interval = "1s" | .global.evaluation_interval = "1s" | .rule_files = [$rules]
  | .scrape_configs |= map(select(.job_name == "orderhold")
                           | .static_configs = [{targets: [$target]}])' \
  "${ROOT}/deploy/prometheus/prometheus.yml" >"${WORK}/prometheus.yml"
prometheus --config.file="${WORK}/prometheus.yml" --storage.tsdb.path="${WORK}/tsdb" \
  --web.listen-address="127.0.0.1:${PROM_PORT}" --log.level=warn >"${WORK}/prometheus.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:${PROM_PORT}/-/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:${PROM_PORT}/-/ready" >/dev/null || {
  echo "promql_test: prometheus not ready within 10 s:" >&2
  tail -5 "${WORK}/prometheus.log" >&2
  exit 1
}

# api PATH [curl args...]: Prometheus' JSON answer (an invalid query is a 400 with JSON too).
api() { curl -sS -G "http://127.0.0.1:${PROM_PORT}$1" "${@:2}"; }
query() { api /api/v1/query --data-urlencode "query=$1"; }

# The load must come after the first scrape, or rates see no increase.
for _ in $(seq 100); do
  [[ "$(query 'up{job="orderhold"} == 1' | jq '.data.result | length')" == 1 ]] && break
  sleep 0.1
done
[[ "$(query 'up{job="orderhold"} == 1' | jq '.data.result | length')" == 1 ]] || {
  echo "promql_test: prometheus did not scrape the server within 10 s" >&2
  exit 1
}

# The load. Exit statuses are the gRPC codes (client/README.md, "Client library and CLI").
cli() { "${CLI}" --target "127.0.0.1:${GRPC_PORT}" --timeout 5s "$@" >/dev/null; }
expect_exit() {
  local want="$1" got=0
  shift
  cli "$@" 2>/dev/null || got=$?
  ((got == want)) || { echo "promql_test: orderhold-cli $* exited ${got}, want ${want}" >&2; exit 1; }
}
cli place alice train-1
cli place alice train-2
cli place alice train-3
expect_exit 8 place alice train-4  # RESOURCE_EXHAUSTED: rejected, quota_exceeded
expect_exit 3 place alice ''       # INVALID_ARGUMENT: rejected, invalid_argument
cli pay alice train-1
cli cancel alice train-2
cli place bob concert-1 --ttl 1s   # expires; the reaper ends it (lag observed)
cli list alice
# PAID, CANCELLED, then EXPIRED once the reaper ended concert-1: delivered and acked. Creates the
# group, whose oldest-unacked gauge the reaper refreshes every 10 s.
timeout 15 "${CLI}" --target "127.0.0.1:${GRPC_PORT}" watch --group inventory --ack \
  --max_events 3 >"${WORK}/events.jsonl"
[[ "$(wc -l <"${WORK}/events.jsonl")" == 3 ]] || { echo "promql_test: watch got no 3 events" >&2; exit 1; }

# Grafana's interval variables become fixed ranges that cover the whole run (1 s scrapes).
# shellcheck disable=SC2016  # Grafana's variables, literally
grafana_expr() { sed -e 's/\$__rate_interval/1m/g; s/\$__interval/1s/g; s/\$__range/1m/g' <<<"$1"; }

# One line per expression: kind, a name for messages, the expression (base64: one line each).
{
  jq -r '.. | objects | select(has("targets")) | .title as $t | .targets[]
    | ["panel", "\($t) [\(.refId)]", (.expr | @base64)] | @tsv' "${DASHBOARD}"
  yq -r '.groups[].rules[] | ["alert", (.alert // .record), (.expr | @base64)] | @tsv' "${RULES}"
} >"${WORK}/exprs.tsv"
rule_count="$(yq '[.groups[].rules[]] | length' "${RULES}")"
[[ -s "${WORK}/exprs.tsv" ]] || { echo "promql_test: no expressions found" >&2; exit 1; }

# Prints selector $1, then for each of its regex matchers over plain values (code=~"A|B") the
# selector with one value each (code="A"), so each value must exist, not just one of them; and
# for each negative matcher (method!="X") the selector with method="X", so X is a real value.
selectors_of() {
  local matcher label value
  echo "$1"
  while IFS= read -r matcher; do
    echo "${1/"${matcher}"/${matcher/!=/=}}"
  done < <(grep -oE '[a-z_]+!="[^"]*"' <<<"$1")
  while IFS= read -r matcher; do
    label="${matcher%%=~*}"
    value="${matcher#*=~\"}"
    value="${value%\"}"
    for value in ${value//|/ }; do echo "${1/"${matcher}"/${label}=\"${value}\"}"; done
  done < <(grep -oE '[a-z_]+=~"[A-Za-z0-9_|]+"' <<<"$1")
}

# Checks everything once; prints what fails. Exit status 2: an invalid expression (no point in
# waiting), 1: something is still empty or unhealthy.
check_all() {
  local kind name b64 expr answer status failed=0 selector
  answer="$(api /api/v1/rules)"
  if [[ "$(jq '[.data.groups[].rules[] | select(.health == "ok")] | length' <<<"${answer}")" \
        != "${rule_count}" ]]; then
    echo "rules: not all ${rule_count} rules loaded and healthy:" \
      "$(jq -c '[.data.groups[].rules[] | {name, health, lastError}]' <<<"${answer}")"
    failed=1
  fi
  while IFS=$'\t' read -r kind name b64; do
    expr="$(base64 -d <<<"${b64}")"
    [[ "${kind}" == panel ]] && expr="$(grafana_expr "${expr}")"
    answer="$(query "${expr}")"
    status="$(jq -r .status <<<"${answer}")"
    if [[ "${status}" != success ]]; then
      echo "${kind} ${name}: invalid: $(jq -r .error <<<"${answer}"): ${expr}"
      return 2
    fi
    if [[ "${kind}" == panel ]]; then
      if [[ "$(jq '[.data.result[] | select(.value[1] != "NaN")] | length' <<<"${answer}")" == 0 ]]; then
        echo "panel ${name}: no series with a value: ${expr}"
        failed=1
      fi
      continue
    fi
    if [[ "$(jq '.data.result | length' <<<"${answer}")" != 0 ]]; then
      echo "alert ${name}: fires on a healthy server: $(jq -c .data.result <<<"${answer}")"
      failed=1
    fi
    # Each metric selector (name and label matchers) on its own must find series.
    while IFS= read -r selector; do
      answer="$(query "${selector}")"
      if [[ "$(jq -r .status <<<"${answer}")" != success ]]; then
        echo "alert ${name}: selector invalid: ${selector}: $(jq -r .error <<<"${answer}")"
        return 2
      fi
      if [[ "$(jq '.data.result | length' <<<"${answer}")" == 0 ]]; then
        echo "alert ${name}: selector matches no series: ${selector}"
        failed=1
      fi
    done < <(grep -oE '(^|[^a-zA-Z0-9_:])(orderhold_[a-z_]+|up)(\{[^}]*\})?' <<<"${expr}" |
               sed -E 's/^[^a-z]//' | sort -u | while IFS= read -r s; do selectors_of "${s}"; done)
  done <"${WORK}/exprs.tsv"
  return "${failed}"
}

# Series appear over the first scrapes and the unacked-age gauge within 10 s of the group:
# retry until everything passes, for at most 30 s.
deadline=$((SECONDS + 30))
while :; do
  result=0
  check_all >"${WORK}/check.txt" || result=$?
  ((result == 0)) && break
  if ((result == 2 || SECONDS >= deadline)); then
    echo "promql_test: FAILED" >&2
    cat "${WORK}/check.txt" >&2
    exit 1
  fi
  sleep 1
done
echo "promql_test: $(grep -c '^panel' "${WORK}/exprs.tsv") dashboard and $(grep -c '^alert' \
  "${WORK}/exprs.tsv") rule expressions checked against a real scrape"
