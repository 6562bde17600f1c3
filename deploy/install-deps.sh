#!/usr/bin/env bash
# install-deps.sh: installs the Debian 12 packages OrderHold needs to build, test and run, when
# missing. Used by tests/run.sh, deploy/run.sh and deploy/Dockerfile. Needs root only when
# something is missing.
#
#   deploy/install-deps.sh           everything: build, tests (podman, Prometheus, ... included)
#   deploy/install-deps.sh --run     building the binaries and running them with a local Redis
#                                    (deploy/run.sh): no test tools
#   deploy/install-deps.sh --build   only what building the binaries needs (deploy/Dockerfile)
set -euo pipefail

BUILD_PACKAGES=(
  g++ cmake ninja-build pkg-config                      # toolchain
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libhiredis-dev libabsl-dev prometheus-cpp-dev libssl-dev libyaml-cpp-dev nlohmann-json3-dev  # libraries
)
RUN_PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  redis-server redis-tools curl                         # running, tests, the README story
)
PACKAGES=(
  "${RUN_PACKAGES[@]}"
  openssl                                               # tests: certificates for TLS to Redis
  libgtest-dev libgmock-dev                             # tests
  librapidcheck-dev                                     # tests/property (RapidCheck)
  clang libclang-rt-14-dev                              # tests/fuzz (libFuzzer)
  nftables iproute2                                     # tests/e2e/network_faults_e2e_test.cc
  jq python3                                             # tests/bench/run.sh, tests/soak/ (run.sh, oracle.py)
  nghttp2-client                                        # tests/bench/cpu.sh, callgrind.sh: h2load
  valgrind                                              # tests/bench/callgrind.sh
  prometheus yq                                         # tests/deploy: promtool, Prometheus, YAML as JSON
  podman runc mmdebstrap docker-compose golang-github-containernetworking-plugin-dnsname  # tests/deploy (image, compose)
  python3-yaml systemd                                  # tests/deploy/k8s_test.sh, systemd_test.sh
  python3-grpcio python3-protobuf                       # tests/examples: client/examples/checkout.py
)
# kubectl (tests/deploy/k8s_test.sh: kubectl kustomize) is Debian's kubernetes-client unless one is
# installed: Google's `kubectl` package owns the same /usr/bin/kubectl, which dpkg will not
# overwrite.
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
case "${1:-}" in
  "") ;;
  --run) PACKAGES=("${RUN_PACKAGES[@]}") ;;
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  *) echo "usage: install-deps.sh [--run | --build]" >&2; exit 64 ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  # The state, not the exit code: a removed package whose config files remain is still known.
  # One field and no pipe: `dpkg -s | grep -q` under pipefail failed now and then (grep's early
  # exit cut dpkg's output: SIGPIPE) and reinstalled what was there.
  [[ "$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null)" == "install ok installed" ]] ||
    missing+=("${pkg}")
done
((${#missing[@]} == 0)) && exit 0

SUDO=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-deps.sh: run as root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=(sudo)
fi
echo "install-deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
