#!/usr/bin/env bash
# The README's test command: runs every suite (ci/rust.sh, ci/python.sh, ci/cpp.sh), all of them even
# when one fails, then prints one line per suite and `N passed, N failed` (N counts suites).
# Each suite runs its GPU part too when `nvidia-smi -L` succeeds.
# Usage: bash scripts/test.sh [suite...]     (default: rust python cpp)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(rust python cpp)

results=()
passed=0
failed=0
for suite in "${suites[@]}"; do
    script="ci/$suite.sh"
    printf '\n\033[1m######## suite %s (%s) ########\033[0m\n' "$suite" "$script"
    start=$SECONDS
    if [ ! -f "$script" ]; then
        echo "ERROR: no such suite script: $script"
        rc=127
    else
        bash "$script" </dev/null
        rc=$?
    fi
    took=$((SECONDS - start))
    if [ "$rc" -eq 0 ]; then
        results+=("PASS  $suite (${took}s)")
        passed=$((passed + 1))
    else
        results+=("FAIL  $suite (exit $rc, ${took}s)")
        failed=$((failed + 1))
    fi
done

echo
echo "======== suites ========"
for r in "${results[@]}"; do echo "  $r"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
