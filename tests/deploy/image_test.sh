#!/usr/bin/env bash
# tests/deploy/image_test.sh: builds the container image from deploy/Dockerfile with podman and
# proves it works the way a platform team runs it:
#   1. the image builds as a user would build it (the debian:bookworm and :bookworm-slim base
#      images are made from Debian packages with mmdebstrap + podman import when missing: no
#      container registry is reachable here; they are kept for the next run);
#   2. the image against a private redis-server on the host (host network, free ports): health
#      SERVING on its gRPC port, the README story through `podman exec <ctr> orderhold-cli`,
#      /metrics counts the expired hold, the server process is not uid 0, and SIGTERM
#      (`podman stop -t 15`) stops it within the grace period, with exit status 0 and the drain in
#      its log (a shell-form entrypoint would swallow SIGTERM and be killed: 137);
#   2b. the Kubernetes kit's settings (its ConfigMap variables, mounts in their shapes and modes,
#      the ACL user): health on the plaintext health port, mutual TLS and the policy on the main
#      port, no start-up warning;
#   3. deploy/compose.yaml's redis, orderhold-1 and orderhold-2 services with that image
#      (docker-compose talking to podman's Docker API; Redis from Debian's redis-server package
#      instead of the official image): both replicas SERVING through their published ports, a
#      hold placed through one is listed through the other (one Redis), `down` stops them.
# Minutes long (the image build compiles the server): .ci/run calls it after tests/run.sh.
#
#   tests/deploy/image_test.sh        as root (rootful podman); packages: deploy/install-deps.sh
#
# Podman on these machines needs runc instead of crun and explicit ulimits: a private
# containers.conf (CONTAINERS_CONF) says so for podman and for its API service alike.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/bench/lib.sh
source "${REPO}/tests/bench/lib.sh"
"${REPO}/deploy/install-deps.sh"

IMAGE=localhost/orderhold:dev
REDIS_IMAGE=localhost/orderhold-test-redis:7.0
GRACE=15 # seconds podman stop waits before SIGKILL; the server drains for at most 10 s
T0=${SECONDS}
PASSED=0
log() { echo "image_test: [$((SECONDS - T0)) s] $*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
pass() {
  PASSED=$((PASSED + 1))
  log "ok: $*"
}

WORK="$(mktemp -d /tmp/orderhold-image-test.XXXXXX)"
export CONTAINERS_CONF="${WORK}/containers.conf"
cat >"${CONTAINERS_CONF}" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4000:4000"]
[engine]
runtime = "runc"
EOF
CTR="orderhold-image-test-$$"
PROJECT="ohimagetest$$"
REDIS_PORT=""
SERVICE_PID=""
COMPOSE=(timeout 180 docker-compose -f "${REPO}/deploy/compose.yaml")

# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  local status=$?
  set +e
  if ((status != 0)); then
    log "logs of ${CTR}:"
    podman logs "${CTR}" 2>&1 | tail -n 30 >&2
    [[ -n "${SERVICE_PID}" ]] && "${COMPOSE[@]}" logs --no-color --tail 30 >&2 2>&1
  fi
  podman rm -f -t 0 "${CTR}" >/dev/null 2>&1
  if [[ -n "${SERVICE_PID}" ]]; then
    "${COMPOSE[@]}" down -v -t 0 >/dev/null 2>&1
    kill "${SERVICE_PID}" 2>/dev/null
    wait "${SERVICE_PID}" 2>/dev/null
  fi
  [[ -n "${REDIS_PORT}" ]] && timeout 5 redis-cli -p "${REDIS_PORT}" shutdown nosave >/dev/null 2>&1
  # Each run re-tags ${IMAGE}: the builds it replaced are left untagged. Remove those (ours only,
  # by label), so runs do not pile up images; the tagged image and the layer cache stay.
  podman image prune -f --filter label=orderhold.test=image_test >/dev/null 2>&1
  rm -rf "${WORK}"
}
trap cleanup EXIT

# grpc.health.v1.Health/Check of the whole server ("") at HOST:PORT, by plain HTTP/2 with curl (no
# gRPC client needed): prints SERVING, NOT_SERVING or UNKNOWN(<answer in hex>). The request is an
# empty message (the 5-byte gRPC frame header alone); the answer's message is field 1, the status,
# as a varint: 08 01 = SERVING, 08 02 = NOT_SERVING.
health() {
  local hex
  hex="$(printf '\0\0\0\0\0' | curl -s --max-time 2 --http2-prior-knowledge \
    -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- \
    "http://$1/grpc.health.v1.Health/Check" | od -An -tx1 | tr -d ' \n')" || true
  case "${hex}" in
    00000000020801) echo SERVING ;;
    00000000020802) echo NOT_SERVING ;;
    *) echo "UNKNOWN(${hex})" ;;
  esac
}

# Waits up to 60 s for health SERVING at HOST:PORT.
wait_serving() {
  local deadline=$((SECONDS + 60)) state
  while state="$(health "$1")" && [[ "${state}" != SERVING ]]; do
    ((SECONDS < deadline)) || fail "health at $1 is ${state} after 60 s, not SERVING"
    sleep 0.5
  done
}

# Runs `orderhold-cli ARGS...` inside container $1 and checks its output contains $2 and its exit
# status is $3: expect CTR WANT STATUS ARGS...
expect() {
  local ctr="$1" want="$2" want_status="$3" out status=0
  shift 3
  out="$(timeout 20 podman exec "${ctr}" orderhold-cli "$@" 2>&1)" || status=$?
  [[ "${status}" == "${want_status}" && "${out}" == *"${want}"* ]] ||
    fail "orderhold-cli $* in ${ctr}: exit ${status}, output '${out}'; want exit ${want_status} and '${want}'"
  pass "orderhold-cli $* -> ${out%%$'\n'*}"
}

# --- 1. base images and the image ---------------------------------------------------------------
# debian:bookworm (minbase) and debian:bookworm-slim (minbase without docs, man pages and locales,
# also for packages installed later, as the official slim image), each made unless present.
SLIM_DPKGOPTS=(
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
)
base_images() {
  local tag dpkgopts
  for tag in bookworm bookworm-slim; do
    podman image exists "docker.io/library/debian:${tag}" && continue
    log "making debian:${tag} from Debian packages (mmdebstrap, then podman import)"
    dpkgopts=()
    [[ "${tag}" == bookworm-slim ]] && dpkgopts=("${SLIM_DPKGOPTS[@]}")
    # The official images carry bookworm, its updates and the security archive: the same here.
    mmdebstrap --quiet --variant=minbase --format=tar "${dpkgopts[@]}" bookworm "${WORK}/base.tar" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
    podman import --quiet --change 'CMD ["bash"]' "${WORK}/base.tar" \
      "docker.io/library/debian:${tag}" >/dev/null
    rm -f "${WORK}/base.tar"
  done
}
base_images
built_at=${SECONDS}
podman build --quiet --layers --label orderhold.test=image_test -f "${REPO}/deploy/Dockerfile" \
  -t "${IMAGE}" "${REPO}" >/dev/null
size_mb=$(($(podman image inspect --format '{{.Size}}' "${IMAGE}") / 1000000))
pass "built ${IMAGE} in $((SECONDS - built_at)) s (${size_mb} MB)"
[[ "$(podman image inspect --format '{{.Config.User}}' "${IMAGE}")" == 65532:65532 ]] ||
  fail "image user is not 65532:65532"

# --- 2. the image against Redis on the host -------------------------------------------------------
REDIS_PORT="$(free_port)"
redis-server --port "${REDIS_PORT}" --bind 127.0.0.1 --save "" --appendonly no \
  --daemonize yes --logfile "${WORK}/redis.log" --dir "${WORK}" >/dev/null
GRPC_PORT="$(free_port)"
METRICS_PORT="$(free_port)"
podman run -d --name "${CTR}" --network host \
  -e ORDERHOLD_REDIS_URL="redis://127.0.0.1:${REDIS_PORT}" \
  -e ORDERHOLD_GRPC_ADDRESS="127.0.0.1:${GRPC_PORT}" \
  -e ORDERHOLD_METRICS_ADDRESS="127.0.0.1:${METRICS_PORT}" \
  "${IMAGE}" >/dev/null
wait_serving "127.0.0.1:${GRPC_PORT}"
pass "health SERVING on 127.0.0.1:${GRPC_PORT}"

pid="$(podman inspect --format '{{.State.Pid}}' "${CTR}")"
uid="$(awk '/^Uid:/ {print $2}' "/proc/${pid}/status")"
[[ "$(cat "/proc/${pid}/comm")" == orderhold-serve* ]] || fail "PID ${pid} is not the server"
((uid == 65532)) || fail "the server runs as uid ${uid}, not 65532"
pass "the server is PID 1 of the container and runs as uid ${uid}"

# The README story (train tickets), through the CLI inside the container.
T=(--target "127.0.0.1:${GRPC_PORT}")
expect "${CTR}" "SERVING" 0 "${T[@]}" health                # the probe inside the image
expect "${CTR}" "placed train-1 for alice: expires in 30m (1/3 active)" 0 "${T[@]}" place alice train-1
expect "${CTR}" "(2/3 active)" 0 "${T[@]}" place alice train-2
expect "${CTR}" "(3/3 active)" 0 "${T[@]}" place alice train-3
expect "${CTR}" "RESOURCE_EXHAUSTED" 8 "${T[@]}" place alice train-4
expect "${CTR}" "paid train-2 for alice" 0 "${T[@]}" pay alice train-2
expect "${CTR}" "placed train-4 for alice" 0 "${T[@]}" place alice train-4
expect "${CTR}" "placed concert-1 for bob: expires in 1s" 0 "${T[@]}" place bob concert-1 --ttl 1s
deadline=$((SECONDS + 15))
until [[ "$(timeout 20 podman exec "${CTR}" orderhold-cli "${T[@]}" list bob)" == "bob: 0/3 holds" ]]; do
  ((SECONDS < deadline)) || fail "bob's 1s hold still listed after 15 s"
  sleep 0.5
done
pass "bob's 1s hold expired"
# ListHolds only hides it; the reaper (1 s ticks) ends it as EXPIRED and counts it.
deadline=$((SECONDS + 15))
until [[ "$(scrape "${METRICS_PORT}" | awk '$1 == "orderhold_holds_expired_total" {print $2}')" == 1 ]]; do
  ((SECONDS < deadline)) || fail "orderhold_holds_expired_total is not 1 after 15 s"
  sleep 0.5
done
pass "/metrics: orderhold_holds_expired_total 1"
expect "${CTR}" "cancelled train-1 for alice" 0 "${T[@]}" cancel alice train-1
expect "${CTR}" "FAILED_PRECONDITION" 9 "${T[@]}" pay alice train-1
expect "${CTR}" "alice: 2/3 holds" 0 "${T[@]}" list alice

stop_at=${SECONDS}
podman stop -t "${GRACE}" "${CTR}" >/dev/null
stop_s=$((SECONDS - stop_at))
exit_code="$(podman inspect --format '{{.State.ExitCode}}' "${CTR}")"
((exit_code == 0)) || fail "after SIGTERM the server exited ${exit_code} (137: killed after ${GRACE} s)"
((stop_s < GRACE)) || fail "podman stop took ${stop_s} s (grace ${GRACE} s)"
# Captured first: with pipefail, `cmd | grep -q` fails when grep exits at its match while cmd is
# still writing (SIGPIPE).
server_log="$(podman logs "${CTR}" 2>&1)"
grep -q 'NOT_SERVING, finishing in-flight calls' <<<"${server_log}" ||
  fail "no drain in the server's log"
grep -q 'stopped' <<<"${server_log}" || fail "no 'stopped' in the server's log"
pass "SIGTERM: drained and exited 0 in ${stop_s} s (grace ${GRACE} s)"
podman rm "${CTR}" >/dev/null

# --- 2b. the Kubernetes kit's container settings --------------------------------------------------
# deploy/k8s's ConfigMap variables as they are (kustomization.yaml's literals: mutual TLS, the
# policy, the health port, reflection off, the ACL user and its password file), its mounts filled
# in their shapes (cert-manager's tls.crt, tls.key and ca.crt; the policy file; the password file),
# root:65532 0440 as the kubelet mounts Secrets with the pod's fsGroup; Redis with the ACL user of
# deploy/redis/orderhold.acl, over TLS (the Secret's ca.crt). Only the listen ports and the Redis
# host:port differ (host network, free ports). Health SERVING on the plaintext health port; the main port speaks mutual TLS only:
# the operator's certificate places and lists a hold, a certificate the policy does not name is
# PERMISSION_DENIED, a plaintext probe gets no answer; and the kit earns no start-up warning.
KIT="${WORK}/kit"
mkdir -p "${KIT}/tls" "${KIT}/authz" "${KIT}/redis" "${KIT}/client"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj /CN=orderhold-image-test-ca -keyout "${KIT}/ca.key" -out "${KIT}/tls/ca.crt" 2>/dev/null
# kit_cert DIR NAME SAN: NAME.key and NAME.crt in DIR, signed by the test CA.
kit_cert() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$1/$2.key" -out "${KIT}/$2.csr" 2>/dev/null
  openssl x509 -req -in "${KIT}/$2.csr" -CA "${KIT}/tls/ca.crt" -CAkey "${KIT}/ca.key" \
    -CAcreateserial -days 1 -extfile <(printf 'subjectAltName=%s' "$3") -out "$1/$2.crt" 2>/dev/null
}
kit_cert "${KIT}/tls" tls "DNS:localhost,IP:127.0.0.1"
for role in operator stranger; do
  kit_cert "${KIT}/client" "${role}" "URI:spiffe://orderhold.example/${role}"
done
cp "${KIT}/tls/ca.crt" "${KIT}/client/ca.crt"
cp "${REPO}/deploy/authz_policy.example.json" "${KIT}/authz/authz_policy.json"
KIT_PASSWORD="image-test-$$"
printf '%s' "${KIT_PASSWORD}" >"${KIT}/redis/password"
# The kit speaks TLS to Redis: Redis gets a TLS port with a certificate of the test CA, which the
# kit's Secret carries as ca.crt.
kit_cert "${KIT}" redis-server "DNS:localhost,IP:127.0.0.1"
cp "${KIT}/tls/ca.crt" "${KIT}/redis/ca.crt"
REDIS_TLS_PORT="$(free_port)"
[[ "$(redis-cli -p "${REDIS_PORT}" CONFIG SET tls-cert-file "${KIT}/redis-server.crt" \
  tls-key-file "${KIT}/redis-server.key" tls-ca-cert-file "${KIT}/tls/ca.crt" \
  tls-auth-clients no tls-port "${REDIS_TLS_PORT}")" == OK ]] || fail "Redis: no TLS port"
chown -R root:65532 "${KIT}/tls" "${KIT}/authz" "${KIT}/redis" "${KIT}/client"
find "${KIT}/tls" "${KIT}/authz" "${KIT}/redis" "${KIT}/client" -type f -exec chmod 0440 {} +
chmod 0755 "${KIT}" "${KIT}"/*/
# The ACL user, with the test's password for the file's placeholder.
read -r -a acl_rules <<<"$(sed -n 's/^user //p' "${REPO}/deploy/redis/orderhold.acl" |
  sed "s/>CHANGE-ME/>${KIT_PASSWORD}/")"
redis-cli -p "${REDIS_PORT}" FLUSHALL >/dev/null
[[ "$(redis-cli -p "${REDIS_PORT}" ACL SETUSER "${acl_rules[@]}")" == OK ]] ||
  fail "ACL SETUSER with deploy/redis/orderhold.acl's rules"
KIT_GRPC_PORT="$(free_port)"
KIT_METRICS_PORT="$(free_port)"
KIT_HEALTH_PORT="$(free_port)"
sed -n 's/^ *- \(ORDERHOLD_[A-Z_]*=.*\)$/\1/p' "${REPO}/deploy/k8s/kustomization.yaml" |
  grep -v -E '^ORDERHOLD_(GRPC_ADDRESS|METRICS_ADDRESS|HEALTH_ADDRESS)=' |
  sed "s|^ORDERHOLD_REDIS_URL=rediss://\([^@]*\)@redis:6380$|ORDERHOLD_REDIS_URL=rediss://\1@127.0.0.1:${REDIS_TLS_PORT}|" \
    >"${KIT}/kit.env"
grep -q "^ORDERHOLD_REDIS_URL=rediss://orderhold@127.0.0.1:${REDIS_TLS_PORT}$" "${KIT}/kit.env" ||
  fail "the kit's Redis URL is not rediss://orderhold@redis:6380: $(grep REDIS_URL "${KIT}/kit.env")"
grep -q "^ORDERHOLD_REDIS_TLS_CA_FILE=/etc/orderhold/redis/ca.crt$" "${KIT}/kit.env" ||
  fail "the kit sets no ORDERHOLD_REDIS_TLS_CA_FILE in its Secret's mount"
{
  echo "ORDERHOLD_GRPC_ADDRESS=127.0.0.1:${KIT_GRPC_PORT}"
  echo "ORDERHOLD_METRICS_ADDRESS=127.0.0.1:${KIT_METRICS_PORT}"
  echo "ORDERHOLD_HEALTH_ADDRESS=127.0.0.1:${KIT_HEALTH_PORT}"
} >>"${KIT}/kit.env"
podman run -d --name "${CTR}" --network host --env-file "${KIT}/kit.env" \
  -v "${KIT}/tls:/etc/orderhold/tls:ro" -v "${KIT}/authz:/etc/orderhold/authz:ro" \
  -v "${KIT}/redis:/etc/orderhold/redis:ro" -v "${KIT}/client:/client:ro" "${IMAGE}" >/dev/null
wait_serving "127.0.0.1:${KIT_HEALTH_PORT}"
pass "kit: health SERVING on the plaintext health port ${KIT_HEALTH_PORT}"
[[ "$(health "127.0.0.1:${KIT_GRPC_PORT}")" == UNKNOWN* ]] ||
  fail "kit: the main port answered a plaintext health check"
pass "kit: the main port answers no plaintext call"
MTLS=(--target "127.0.0.1:${KIT_GRPC_PORT}" --tls_ca_file /client/ca.crt --tls_server_name localhost)
OPERATOR=(--tls_cert_file /client/operator.crt --tls_key_file /client/operator.key)
STRANGER=(--tls_cert_file /client/stranger.crt --tls_key_file /client/stranger.key)
expect "${CTR}" "placed train-1 for dave" 0 "${MTLS[@]}" "${OPERATOR[@]}" place dave train-1
expect "${CTR}" "dave: 1/3 holds" 0 "${MTLS[@]}" "${OPERATOR[@]}" list dave
expect "${CTR}" "PERMISSION_DENIED" 7 "${MTLS[@]}" "${STRANGER[@]}" list dave
[[ -n "$(redis-cli -p "${REDIS_PORT}" --scan --pattern 'orderhold:*' | head -n 1)" ]] ||
  fail "kit: no key under the kit's prefix in Redis"
# Every connection of the kit's user on Redis' TLS port: none in cleartext.
kit_clients="$(redis-cli -p "${REDIS_PORT}" CLIENT LIST | grep ' user=orderhold ')" ||
  fail "kit: no connection of the kit's Redis user"
if grep -v " laddr=127.0.0.1:${REDIS_TLS_PORT} " <<<"${kit_clients}"; then
  fail "kit: a connection to Redis in cleartext"
fi
pass "kit: every Redis connection on the TLS port ${REDIS_TLS_PORT}"
grep -q '^orderhold_calls_denied_total{method="ListHolds"} 1' <<<"$(scrape "${KIT_METRICS_PORT}")" ||
  fail "kit: /metrics on ${KIT_METRICS_PORT} does not count the refused call"
pass "kit: /metrics on its port counts the refused call"
kit_log="$(podman logs "${CTR}" 2>&1)"
# A warning line in either log format (text: "<time> W ...", json: "level":"warning").
if grep -E '^[0-9T:.Z-]+ W |"level":"warning"' <<<"${kit_log}"; then
  fail "kit: the server warned at start"
fi
pass "kit: mutual TLS, the policy and the ACL user as the kit sets them; no start-up warning"
podman stop -t "${GRACE}" "${CTR}" >/dev/null
podman rm "${CTR}" >/dev/null

# --- 3. deploy/compose.yaml: redis + orderhold-1 + orderhold-2 ------------------------------------
compose_at=${SECONDS}
if ! podman image exists "${REDIS_IMAGE}"; then
  # Stands in for the official redis image (no registry here): Debian's redis-server 7.0, same
  # /data working directory, non-root like the official image's redis user.
  mkdir "${WORK}/redis-image"
  cat >"${WORK}/redis-image/Containerfile" <<'EOF'
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir /data && chown redis:redis /data
USER redis
WORKDIR /data
EOF
  podman build --quiet -t "${REDIS_IMAGE}" "${WORK}/redis-image" >/dev/null
fi
podman system service --time=0 "unix://${WORK}/podman.sock" &
SERVICE_PID=$!
export DOCKER_HOST="unix://${WORK}/podman.sock"
deadline=$((SECONDS + 20))
until curl -sf --unix-socket "${WORK}/podman.sock" http://podman/_ping >/dev/null 2>&1; do
  ((SECONDS < deadline)) || fail "podman system service did not answer in 20 s"
  sleep 0.2
done
export COMPOSE_PROJECT_NAME="${PROJECT}" REDIS_IMAGE
export ORDERHOLD_1_GRPC_PORT ORDERHOLD_1_METRICS_PORT ORDERHOLD_2_GRPC_PORT ORDERHOLD_2_METRICS_PORT
ORDERHOLD_1_GRPC_PORT="$(free_port)"
ORDERHOLD_1_METRICS_PORT="$(free_port)"
ORDERHOLD_2_GRPC_PORT="$(free_port)"
ORDERHOLD_2_METRICS_PORT="$(free_port)"
"${COMPOSE[@]}" up -d --no-build redis orderhold-1 orderhold-2 >"${WORK}/compose-up.log" 2>&1 ||
  fail "docker-compose up: $(tail -n 20 "${WORK}/compose-up.log")"
wait_serving "127.0.0.1:${ORDERHOLD_1_GRPC_PORT}"
wait_serving "127.0.0.1:${ORDERHOLD_2_GRPC_PORT}"
pass "compose: orderhold-1 and orderhold-2 SERVING through published ports ${ORDERHOLD_1_GRPC_PORT}, ${ORDERHOLD_2_GRPC_PORT}"
one="$("${COMPOSE[@]}" ps -q orderhold-1)"
two="$("${COMPOSE[@]}" ps -q orderhold-2)"
expect "${one}" "placed train-1 for carol" 0 place carol train-1
expect "${two}" "carol: 1/3 holds" 0 list carol
grep -q '^orderhold_holds_placed_total' <<<"$(scrape "${ORDERHOLD_2_METRICS_PORT}")" ||
  fail "compose: orderhold-2's /metrics not reachable through port ${ORDERHOLD_2_METRICS_PORT}"
pass "compose: orderhold-2's /metrics through its published port"
"${COMPOSE[@]}" down -v -t "${GRACE}" >>"${WORK}/compose-up.log" 2>&1 || fail "docker-compose down"
[[ -z "$(podman ps -a -q --filter "label=com.docker.compose.project=${PROJECT}")" ]] ||
  fail "compose: containers left after down"
pass "compose: up, cross-replica hold and down in $((SECONDS - compose_at)) s"

log "${PASSED} passed, 0 failed in $((SECONDS - T0)) s"
echo "${PASSED} passed, 0 failed"
