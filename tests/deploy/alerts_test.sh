#!/usr/bin/env bash
# tests/deploy/alerts_test.sh: proves the Prometheus files of deploy/prometheus/ are sound.
#   - prometheus.yml (the Compose scrape config) parses (promtool check config --syntax-only);
#   - alerts.yaml passes promtool check rules;
#   - alerts_test.yaml passes promtool test rules: each alert fires on series that should fire it
#     and stays quiet on series that should not, labels and rendered annotations exact;
#   - every alert has such a test (one case expecting it, one expecting silence), a severity of
#     warning or critical, a summary, a description, and a `runbook` pointing at the heading
#     "### <AlertName>" of deploy/README.md, which exists.
# Run: bash tests/deploy/alerts_test.sh (ctest -L deploy). Needs promtool (Debian package
# prometheus) and yq (Debian package yq), both installed by deploy/install-deps.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${ROOT}/deploy/prometheus"
for tool in promtool yq; do
  command -v "${tool}" >/dev/null || {
    echo "alerts_test: ${tool} missing (deploy/install-deps.sh installs it)" >&2
    exit 1
  }
done

promtool check config --syntax-only "${DIR}/prometheus.yml"
promtool check rules "${DIR}/alerts.yaml"
(cd "${DIR}" && promtool test rules alerts_test.yaml)

failures=0
fail() {
  echo "alerts_test: $*" >&2
  failures=$((failures + 1))
}

# One JSON object per alert: name, severity, and which annotations it has.
alerts="$(yq -c '.groups[].rules[] | select(has("alert"))
  | {name: .alert, severity: .labels.severity, summary: .annotations.summary,
     description: .annotations.description, runbook: .annotations.runbook}' "${DIR}/alerts.yaml")"
[[ -n "${alerts}" ]] || fail "no alert in alerts.yaml"
# Alert names with a case expecting them to fire, and with a case expecting none.
fired="$(yq -r '.tests[].alert_rule_test[] | select((.exp_alerts // []) | length > 0)
  | .alertname' "${DIR}/alerts_test.yaml" | sort -u)"
quiet="$(yq -r '.tests[].alert_rule_test[] | select((.exp_alerts // []) | length == 0)
  | .alertname' "${DIR}/alerts_test.yaml" | sort -u)"

while IFS= read -r alert; do
  name="$(jq -r .name <<<"${alert}")"
  severity="$(jq -r .severity <<<"${alert}")"
  [[ "${severity}" == warning || "${severity}" == critical ]] ||
    fail "${name}: severity '${severity}' (want warning or critical)"
  for field in summary description; do
    [[ "$(jq -r ".${field} // \"\"" <<<"${alert}")" != "" ]] || fail "${name}: no ${field}"
  done
  anchor="$(tr '[:upper:]' '[:lower:]' <<<"${name}")"
  [[ "$(jq -r .runbook <<<"${alert}")" == "deploy/README.md#${anchor}" ]] ||
    fail "${name}: runbook is not deploy/README.md#${anchor}"
  grep -qx "### ${name}" "${ROOT}/deploy/README.md" ||
    fail "${name}: deploy/README.md has no runbook heading '### ${name}'"
  grep -qx "${name}" <<<"${fired}" || fail "${name}: no test case in which it fires"
  grep -qx "${name}" <<<"${quiet}" || fail "${name}: no test case in which it stays quiet"
done <<<"${alerts}"

((failures == 0)) || exit 1
echo "alerts_test: $(wc -l <<<"${alerts}") alerts checked, each tested firing and quiet"
