# shellcheck shell=bash
# tests/deploy/server_facts.sh: facts about orderhold-server read from its source, so deployment
# artifacts are checked against the code rather than against a copy (sourced, not run).
#   server_flags REPO          prints the server's flag names, one a line (server/config.cc); the
#                              environment variable of each is ORDERHOLD_<NAME_UPPERCASE>
#   server_drain_seconds REPO  prints how many seconds the server lets in-flight calls finish
#                              after SIGTERM by default (--shutdown_grace, server/config.cc);
#                              fails when it cannot tell

server_flags() {
  grep -ohP '^ABSL_FLAG\([^,]+,\s*\K[a-z0-9_]+' "$1"/server/config.cc
}

server_drain_seconds() {
  local seconds
  seconds="$(grep -ozP 'ABSL_FLAG\(absl::Duration, shutdown_grace, absl::Seconds\(\K[0-9]+(?=\))' \
    "$1/server/config.cc" | tr -d '\0' || true)"
  if [[ -z "${seconds}" ]]; then
    echo "server_drain_seconds: no ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(N)) in" \
      "server/config.cc: the drain changed, update this function and the artifacts that match it" >&2
    return 1
  fi
  echo "${seconds}"
}
