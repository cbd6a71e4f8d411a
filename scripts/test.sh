#!/usr/bin/env bash
# The README's test command: runs every suite (ci/rust.sh, ci/python.sh, ci/cpp.sh, ci/beside.sh,
# ci/reliability.sh), all of them even when one fails, then prints one line per suite and `N passed,
# N failed` (N counts suites). ci/reliability.sh: the sanitizer summary's self-test and every fuzz
# target for a bounded time (RMM_CI_FUZZ_SECONDS, 20 s each; skipped with the reason when no nightly
# toolchain can be had).
# Each suite runs its GPU part too when `nvidia-smi -L` succeeds.
# By default, after those five, the valgrind part of ci/sanitize.sh (memcheck on the C ABI and C++
# test programs and on core's C ABI tests: 0 errors required) runs as the suite `valgrind` when
# valgrind is installed (ci/cpp.sh installs it with apt-get); ThreadSanitizer stays in ci/sanitize.sh.
# Usage: bash scripts/test.sh [suite...]     (default: rust python cpp beside reliability, then valgrind if installed)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

suites=("$@")
# "valgrind?": the valgrind suite if valgrind is installed by then (ci/cpp.sh installs it).
[ ${#suites[@]} -eq 0 ] && suites=(rust python cpp beside reliability "valgrind?")

results=()
passed=0
failed=0
for suite in "${suites[@]}"; do
    if [ "$suite" = "valgrind?" ]; then
        if ! command -v valgrind >/dev/null 2>&1; then
            results+=("SKIP  valgrind (not installed)")
            continue
        fi
        suite=valgrind
    fi
    script="ci/$suite.sh"
    [ "$suite" = valgrind ] && script="ci/sanitize.sh"
    printf '\n\033[1m######## suite %s (%s) ########\033[0m\n' "$suite" "$script"
    start=$SECONDS
    if [ ! -f "$script" ]; then
        echo "ERROR: no such suite script: $script"
        rc=127
    else
        # The valgrind suite is ci/sanitize.sh without its ThreadSanitizer part.
        RMM_SANITIZE_TSAN=0 bash "$script" </dev/null
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
