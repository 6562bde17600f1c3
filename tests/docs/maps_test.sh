#!/usr/bin/env bash
# tests/docs/maps_test.sh: the maps match the tree.
#   1. server/README.md names every file under server/: its own name ("hold_store.h",
#      "place_hold.lua") or its stem with ".*" ("hold_service.*" for .h and .cc).
# Exit 1 naming what is missing or too long; run by ctest (docs_maps).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
failed=0
while IFS= read -r file; do
  name="$(basename "${file}")"
  stem="${name%%.*}"
  if ! grep -q -F -e "${stem}.*" -e "${name}" "${REPO}/server/README.md"; then
    echo "server/README.md does not name server/${file}" >&2
    failed=1
  fi
done < <(cd "${REPO}/server" && find . -type f | sed 's|^\./||' | sort)
while IFS= read -r doc; do
  if ! awk -v doc="${doc#"${REPO}"/}" '
      /^ *```/ { fenced = !fenced; next }
      !fenced && length($0) > 400 {
        printf "%s:%d: %d characters (at most 400)\n", doc, FNR, length($0); bad = 1 }
      END { exit bad }' "${doc}" >&2; then
    failed=1
  fi
done < <(find "${REPO}" -name '*.md' -not -path "${REPO}/build*" -not -path '*/.git/*' | sort)
exit "${failed}"
