#!/usr/bin/env bash
# tests/proto/buf_check.sh: `buf lint` of proto/, then `buf breaking` of proto/ against the proto/
# of an earlier commit, so a change that would break a client's generated stubs (a renamed field,
# a changed number or type, a deleted rpc, a moved message, ...) fails CI. Rules: proto/buf.yaml.
# Non-zero when either check fails.
#
#   tests/proto/buf_check.sh                 against HEAD~1: what the last commit changed (CI runs
#                                            a clean clone, so the work tree is HEAD), plus any
#                                            uncommitted edit of proto/ in a developer's tree
#   tests/proto/buf_check.sh --against REF   against any git revision: the last release's tag or
#                                            commit, origin/main, ... (also BUF_AGAINST=REF)
#
# Installs what is missing: curl, ca-certificates, git and openssl with apt (root only then), and buf itself:
# the linux-x64 binary of the npm package @bufbuild/buf (its platform package
# @bufbuild/buf-linux-x64, which the @bufbuild/buf launcher runs), pinned below with the registry's
# sha512, fetched from the npm registry with curl into ${XDG_CACHE_HOME:-~/.cache}/orderhold/ (kept
# across clones and builds; never global). No Node.js: on a fresh Debian 12 `apt install npm` alone
# took about 3 minutes, the binary takes seconds. The proto of REF is read with `git archive`, so any
# revision git resolves works. With the default REF, a missing HEAD~1 (first commit, shallow
# clone) or a HEAD~1 without proto/ skips the breaking check with a message saying why; a REF
# given explicitly must exist.
set -euo pipefail

# Pinned: a new buf may add lint rules; move this on purpose (and fix or except what it finds).
# The integrity is the registry's dist.integrity of @bufbuild/buf-linux-x64@<version>
# (https://registry.npmjs.org/@bufbuild/buf-linux-x64/<version>).
BUF_VERSION=1.75.0
BUF_SHA512=YGGJAx0lpMCE7aMWjNOJcfoEaG/e+iYHnTC4SZ0P5eS4IffMryA9Z4/bb1m1wNXAEJ8ATFMEZOAk/5x9VE47ig==

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
AGAINST="${BUF_AGAINST:-}"
case "${1:-}" in
  "") ;;
  --against) [[ -n "${2:-}" ]] || { echo "usage: buf_check.sh [--against REF]" >&2; exit 64; }
             AGAINST="$2" ;;
  *) echo "usage: buf_check.sh [--against REF]" >&2; exit 64 ;;
esac
EXPLICIT_AGAINST=true
[[ -n "${AGAINST}" ]] || { AGAINST=HEAD~1; EXPLICIT_AGAINST=false; }
say() { echo "buf_check.sh: $*"; }
fail() { echo "buf_check.sh: FAILED: $*" >&2; exit 1; }
start=$(date +%s)

# --- curl, git and openssl (Debian packages), only the missing ones ---
missing=()
command -v curl >/dev/null || missing+=(curl ca-certificates)
command -v git >/dev/null || missing+=(git)
command -v openssl >/dev/null || missing+=(openssl)  # the sha512 check
if ((${#missing[@]} > 0)); then
  SUDO=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || fail "run as root to install: ${missing[*]}"
    SUDO=(sudo)
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- buf, from the npm registry, into a per-version directory of the user's cache ---
[[ "$(uname -s)/$(uname -m)" == Linux/x86_64 ]] || fail "only linux-x64 is set up here (see BUF_SHA512)"
BUF_DIR="${XDG_CACHE_HOME:-${HOME}/.cache}/orderhold/buf-${BUF_VERSION}"
BUF="${BUF_DIR}/package/bin/buf"
if [[ "$("${BUF}" --version 2>/dev/null || true)" != "${BUF_VERSION}" ]]; then
  say "installing buf ${BUF_VERSION} (@bufbuild/buf-linux-x64 from registry.npmjs.org) into ${BUF_DIR}"
  rm -rf "${BUF_DIR}"
  mkdir -p "${BUF_DIR}"
  tgz="${BUF_DIR}/buf.tgz"
  curl -fsSL --retry 3 -o "${tgz}" \
    "https://registry.npmjs.org/@bufbuild/buf-linux-x64/-/buf-linux-x64-${BUF_VERSION}.tgz"
  [[ "$(openssl dgst -sha512 -binary "${tgz}" | base64 -w0)" == "${BUF_SHA512}" ]] ||
    fail "buf-linux-x64-${BUF_VERSION}.tgz does not match its pinned sha512"
  tar -xzf "${tgz}" -C "${BUF_DIR}" package/bin/buf
  rm -f "${tgz}"
  [[ "$("${BUF}" --version)" == "${BUF_VERSION}" ]] || fail "buf ${BUF_VERSION} did not install"
fi

# buf resolves modules from the working directory: run it from the repository root (no buf.yaml
# there), so messages name files as proto/orderhold/v1/... .
cd "${REPO}"
say "buf ${BUF_VERSION}: lint proto/"
"${BUF}" lint proto || fail "buf lint (rules and exceptions: proto/buf.yaml)"

# --- breaking, against the proto/ of AGAINST ---
# Why the check cannot run, or empty when it can.
why_not=""
if ! git -C "${REPO}" rev-parse --git-dir >/dev/null 2>&1; then
  why_not="${REPO} is not a git checkout"
elif ! git -C "${REPO}" rev-parse --verify -q "${AGAINST}^{commit}" >/dev/null; then
  if [[ "$(git -C "${REPO}" rev-parse --is-shallow-repository)" == true ]]; then
    why_not="${AGAINST} is not in this shallow clone (git fetch --deepen=1, or --unshallow)"
  elif ! ${EXPLICIT_AGAINST} && [[ "$(git -C "${REPO}" rev-list --count HEAD)" == 1 ]]; then
    why_not="HEAD is the first commit"
  else
    why_not="${AGAINST} does not name a commit of this repository"
  fi
elif ! git -C "${REPO}" cat-file -e "${AGAINST}:proto" 2>/dev/null; then
  why_not="${AGAINST} has no proto/ directory"
fi
if [[ -n "${why_not}" ]]; then
  ${EXPLICIT_AGAINST} && fail "cannot run buf breaking against ${AGAINST}: ${why_not}"
  say "SKIPPED buf breaking: ${why_not} (nothing to compare with; lint passed)"
  echo "buf_check.sh: lint passed, breaking skipped, $(($(date +%s) - start)) s"
  exit 0
fi

AGAINST_DIR="$(mktemp -d)"
trap 'rm -rf "${AGAINST_DIR}"' EXIT
git -C "${REPO}" archive --format=tar "${AGAINST}" proto | tar -x -C "${AGAINST_DIR}"
against_desc="$(git -C "${REPO}" log -1 --format='%h %s' "${AGAINST}" | cut -c1-80)"
say "buf breaking proto/ against ${AGAINST} (${against_desc})"
"${BUF}" breaking proto --against "${AGAINST_DIR}/proto" ||
  fail "buf breaking against ${AGAINST}: the change above breaks clients' generated code (rules:
  FILE, proto/buf.yaml). Keep v1 additive: add fields and rpcs under new numbers and names, and
  mark a field that must go [deprecated = true] instead of deleting or renaming it."
echo "buf_check.sh: lint and breaking (against ${AGAINST}) passed, $(($(date +%s) - start)) s"
