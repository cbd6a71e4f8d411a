#!/usr/bin/env bash
# RMM's own test suites (../shared/peer-tests, unmodified) against our packages.
# Usage: bash scripts/peer-tests.sh [python|cpp]...   (default: both)
# Each part prints `N passed, N failed, N skipped` for its suite; this script exits non-zero if any
# part failed. The parts live in scripts/peer/<part>.sh.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(python cpp)
rc=0
for part in "${parts[@]}"; do
    script="$ROOT/scripts/peer/$part.sh"
    if [ ! -f "$script" ]; then
        echo "peer-tests: no such part: $part ($script)"
        rc=1
        continue
    fi
    echo "######## peer tests: $part ########"
    bash "$script" || rc=1
done
exit "$rc"
