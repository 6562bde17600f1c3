#!/usr/bin/env bash
# tests/deploy/k8s_test.sh: proves the Kubernetes manifests in deploy/k8s render with kustomize
# (`kubectl kustomize`, Debian's kubernetes-client; no cluster is contacted) and have the
# properties the README promises, checked on the rendered objects by k8s_check.py. Closed by
# default: mutual TLS on the gRPC port from a Secret in cert-manager's format mounted whole
# (ORDERHOLD_TLS_* pointing into it), the authorization policy as a ConfigMap mounted whole and
# equal to deploy/authz_policy.example.json (regenerate with deploy/k8s/sync-rules.sh),
# reflection off, a NetworkPolicy letting only labelled client pods reach the gRPC port and only
# Prometheus the metrics port, and the pods reach only Redis' ports and DNS, Services exposing the gRPC port only, no credential in a variable
# (the Redis URL names the user; the password is a mounted Secret file). And: native gRPC
# liveness/readiness probes on the plaintext health port for a service name the server reports; a
# non-root, read-only, capability-less securityContext (deploy/Dockerfile's numeric USER,
# RuntimeDefault seccomp); resources; terminationGracePeriodSeconds > preStop sleep + the server's
# SIGTERM drain (read from server/config.cc); settings from a ConfigMap holding only real
# ORDERHOLD_* variables; a PDB with minAvailable 1; a PodMonitor scraping the pods' metrics port
# under the job the alert rules select; a PrometheusRule whose groups equal
# deploy/prometheus/alerts.yaml's (regenerate with deploy/k8s/sync-rules.sh). It also renders
# deploy/k8s-example, the example overlay (image, Secret, settings, a cert-manager Certificate for
# the mounted TLS Secret), when the kubectl has kustomize >= 4 (kubectl >= 1.21; Debian 12's
# kubectl 1.20 has v2.0.3, which renders the base but not that overlay: then it says so).
# Run: bash tests/deploy/k8s_test.sh (ctest -L deploy runs it); KUBECTL=/path/to/kubectl picks
# another kubectl. Takes about a second.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/deploy/server_facts.sh
source "${repo}/tests/deploy/server_facts.sh"
python=/usr/bin/python3  # Debian's, which python3-yaml belongs to (a python3 on PATH may not)

kubectl="${KUBECTL:-kubectl}"
fail() { echo "k8s_test: FAIL: $*" >&2; exit 1; }
command -v "${kubectl}" >/dev/null || fail "kubectl missing (deploy/install-deps.sh)"
"${python}" -c 'import yaml' || fail "python3-yaml missing (deploy/install-deps.sh)"
alerts="${repo}/deploy/prometheus/alerts.yaml"
[[ -f "${alerts}" ]] || fail "${alerts} missing: the PrometheusRule is generated from it"
policy="${repo}/deploy/authz_policy.example.json"
[[ -f "${policy}" ]] || fail "${policy} missing: the authz policy ConfigMap is generated from it"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

"${kubectl}" kustomize "${repo}/deploy/k8s" >"${tmp}/base.yaml"
# The overlay reads redis.env, which users create and keep out of git, and redis-ca.crt: render a
# copy with the example's.
overlay="${tmp}/k8s-example"
cp -r "${repo}/deploy/k8s" "${repo}/deploy/k8s-example" "${tmp}/"
cp "${overlay}/redis.env.example" "${overlay}/redis.env"
# and redis-ca.crt, the PEM of the CA of Redis' certificate (any CA will do for a rendering).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=redis-ca \
  -keyout "${tmp}/redis-ca.key" -out "${overlay}/redis-ca.crt" 2>/dev/null
minor="$("${kubectl}" version --client -o json | "${python}" -c '
import json, re, sys
print(re.match(r"\d+", json.load(sys.stdin)["clientVersion"]["minor"])[0])  # "32+" on some builds
')"
if ((minor >= 21)); then
  "${kubectl}" kustomize "${overlay}" >"${tmp}/overlay.yaml"
else
  echo "k8s_test: kubectl 1.${minor} (kustomize < 4): deploy/k8s-example NOT rendered" >&2
  : >"${tmp}/overlay.yaml"
fi

server_flags "${repo}" >"${tmp}/flags"
health_service="$(grep -oP 'kServiceName\[\] = "\K[^"]+' "${repo}/server/grpc/health_reporter.h")"
liveness_service="$(grep -oP 'kLivenessServiceName\[\] = "\K[^"]+' \
  "${repo}/server/grpc/health_reporter.h")"
drain_s="$(server_drain_seconds "${repo}")"
[[ -f "${repo}/deploy/Dockerfile" ]] || fail "deploy/Dockerfile missing: runAsUser must be its USER"
image_uid="$(grep -oP '^USER\s+\K[0-9]+' "${repo}/deploy/Dockerfile")" ||
  fail "deploy/Dockerfile has no numeric USER"
"${python}" "${repo}/tests/deploy/k8s_check.py" "${tmp}/base.yaml" "${tmp}/overlay.yaml" \
  "${overlay}/redis.env" "${alerts}" "${tmp}/flags" "${health_service}" "${drain_s}" \
  "${image_uid}" "${liveness_service}" "${policy}"
