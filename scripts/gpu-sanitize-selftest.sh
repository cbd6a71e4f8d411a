#!/usr/bin/env bash
# CPU check of scripts/gpu-sanitize.sh's summary (issue 30: a GPU run counted "1 with errors" that no
# line named): runs it on a fake stage with a fake compute-sanitizer, where one program has a
# sanitizer error, one fails a test with none, one crashes, one is clean and one is missing, and
# checks that every run counted with errors has its "sanitize finding:" line naming what went
# wrong, and that the counts add up. No GPU, no CUDA; a few seconds.
#
#   bash scripts/gpu-sanitize-selftest.sh        (last line: "gpu-sanitize self-test: passed")
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rmm-sanitize-selftest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The fake sanitizer: runs the program after its options; a program that prints "FAKE: invalid
# read" gets a sanitizer error under memcheck, reported as compute-sanitizer reports one.
cat >"$WORK/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "fake compute-sanitizer 0"; exit 0; }
tool=
while [ $# -gt 0 ]; do
    case $1 in
        --tool) tool=$2; shift 2 ;;
        --leak-check | --report-api-errors | --error-exitcode | --print-limit | --target-processes) shift 2 ;;
        *) break ;;
    esac
done
output=$("$@" 2>&1)
rc=$?
echo "$output"
if [[ $output == *"FAKE: invalid read"* ]] && [ "$tool" = memcheck ]; then
    echo "========= Invalid __global__ read of size 4 bytes"
    echo "=========     at kernel+0x40"
    echo "========= ERROR SUMMARY: 1 error"
    exit 99
fi
echo "========= ERROR SUMMARY: 0 errors"
exit "$rc"
EOF
chmod +x "$WORK/compute-sanitizer"

# The fake stage: rmm-core's test executable (clean) and three C++ test programs: one fails a test,
# one crashes, one reads out of bounds (under memcheck).
mkdir -p "$WORK/stage/rust" "$WORK/stage/cpp/bin"
printf '#!/bin/sh\necho "test result: ok. 3 passed"\n' >"$WORK/stage/rust/rmm-core__rmm_core"
printf '#!/bin/sh\necho "[  FAILED  ] Pool.AllocatesTwice"\necho "[  FAILED  ] 1 test, listed below:"\nexit 1\n' \
    >"$WORK/stage/cpp/bin/test_c_abi"
printf '#!/bin/sh\nkill -SEGV $$\n' >"$WORK/stage/cpp/bin/test_cpp_containers"
printf '#!/bin/sh\necho "FAKE: invalid read"\n' >"$WORK/stage/cpp/bin/test_cpp_resources"
chmod +x "$WORK"/stage/rust/* "$WORK"/stage/cpp/bin/*

out=$(OUT="$WORK/out" RMM_STAGE="$WORK/stage" RMM_SANITIZE_CPP_BUILD="$WORK/no-nvcc-build" \
    RMM_COMPUTE_SANITIZER="$WORK/compute-sanitizer" RMM_SANITIZE_PARTS="rust cpp python" \
    bash "$ROOT/scripts/gpu-sanitize.sh" 2>&1)
rc=$?
echo "$out"
echo "---- checks"
failed=0
check() { # DESCRIPTION PATTERN
    if grep -qE -- "$2" <<<"$out"; then
        echo "ok: $1"
    else
        echo "FAILED: $1 (no line matches: $2)"
        failed=1
    fi
}
check "the clean Rust runs are clean" '^  rust/memcheck: clean$'
check "a failing test is named" '^sanitize finding: cpp:test_c_abi/memcheck: exit 1, 0 sanitizer errors: \[  FAILED  \] Pool.AllocatesTwice$'
check "a crash is named" '^sanitize finding: cpp:test_cpp_containers/racecheck: exit 139, 0 sanitizer errors: killed by signal 11 '
check "a sanitizer error is named" '^sanitize finding: cpp:test_cpp_resources/memcheck: exit 99, 1 sanitizer errors: Invalid __global__ read of size 4 bytes$'
check "the Python part that is not staged is named" '^sanitize not run: python: '
check "the counts add up" '^sanitize: 4 clean, 5 with errors, 1 not run in '
findings=$(grep -c '^sanitize finding: ' <<<"$out")
dirty=$(grep -oE '^sanitize: [0-9]+ clean, [0-9]+ with errors' <<<"$out" | grep -oE '[0-9]+ with' | grep -oE '[0-9]+')
if [ "$findings" != "$dirty" ]; then
    echo "FAILED: $dirty runs with errors but $findings finding lines"
    failed=1
fi
[ "$rc" -ne 0 ] || { echo "FAILED: gpu-sanitize.sh exited 0 with findings"; failed=1; }
if [ "$failed" -eq 0 ]; then
    echo "gpu-sanitize self-test: passed"
else
    echo "gpu-sanitize self-test: FAILED"
fi
exit "$failed"
