#!/usr/bin/env bash
# compute-sanitizer pass of the GPU runner (runs THERE, on the GPU machine, from the repo root with
# stage/ carried, AFTER the parts of scripts/gpu-run.sh that build what it uses: it reuses the
# unpacked Rust test executables, the wheel installed in /tmp/site and the nvcc-built C++ tests in
# /tmp/rmm-cpp-cuda/build). `bash scripts/gpu-run.sh cpp sanitize` runs both in one command.
#
#   bash scripts/gpu-sanitize.sh            (writes $OUT/sanitize.log, one line per run to stdout)
#
# A representative subset, not everything (the whole suite under racecheck would take hours):
# - Rust (rmm-core's test executable, --include-ignored --test-threads=1, one run per tool with all
#   the filters: the pool, arena, binning, fixed-size and cuda_async GPU tests and the device
#   buffer) under memcheck, racecheck and synccheck;
# - C++: the nvcc-built Thrust/CCCL test programs (test_cuda_thrust, test_cuda_cccl) and the C ABI
#   test (test_c_abi) under memcheck and racecheck;
# - Python: pytest's GPU tests (-m gpu) of the staged wheel under memcheck.
# memcheck runs with --leak-check full; API errors are not reported (--report-api-errors no): the
# tests make allocations fail on purpose (out-of-memory paths). A run counts as clean when the
# program passes and the sanitizer's ERROR SUMMARY is 0.
# Parts: RMM_SANITIZE_PARTS (default "rust cpp python xlang") picks among the four groups below;
# xlang is issue 11's cross-language group (test_capsules.py and the two example crates).
# Time budget: RMM_SANITIZE_BUDGET seconds in all (default 240); each run gets what is left, and the
# runs that no longer fit are reported as not run.
# Per run that is not clean, one line "sanitize finding: NAME/TOOL: exit RC, N sanitizer errors: WHAT"
# (WHAT: the sanitizer's first error, or the program's first failure, or how it ended); per run the
# budget left out, "sanitize not run: NAME/TOOL: ...". Per tool: "sanitize memcheck: N errors in K
# runs"; the last line is "sanitize: N clean, N with errors, N not run" (scripts/gpu-run.sh copies
# every line starting with "sanitize" into summary.txt). Every run counted with errors has its
# finding line: the script checks that before it ends.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
STAGE=${RMM_STAGE:-$ROOT/stage}
# Where scripts/gpu-run.sh's part cpp built the nvcc tests.
CPP_BUILD=${RMM_SANITIZE_CPP_BUILD:-/tmp/rmm-cpp-cuda/build}
OUT=${OUT:-/tmp/rmm-gpu-out}
LOG=$OUT/sanitize.log
mkdir -p "$OUT"
: >"$LOG"

CS=${RMM_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)}
clean=0 dirty=0 missing=0 named=0
BUDGET=${RMM_SANITIZE_BUDGET:-240}
START=$(date +%s)
declare -A tool_errors=() tool_runs=()
if [ -z "$CS" ]; then
    echo "sanitize: compute-sanitizer not found (no CUDA toolkit here?)" | tee -a "$LOG"
    echo "sanitize: 0 clean, 0 with errors, 1 not run"
    exit 0
fi
echo "compute-sanitizer: $CS ($("$CS" --version | tail -1))" >>"$LOG"

# What a run that is not clean found, in one line: the sanitizer's first error, else the program's
# first failure (libtest, GoogleTest, pytest), else how it ended.
what_went_wrong() { # FILE RC
    local first
    first=$(grep -m1 -E '^========= +(Invalid|Error|Program hit|Race|Barrier|Leaked|Uninitialized|Potential|Warning)' "$1" |
        sed -E 's/^========= +//')
    [ -z "$first" ] && first=$(grep -m1 -E "^test .* FAILED$|^\[  FAILED  \] [^0-9]|^FAILED |panicked at|Segmentation fault|Aborted" "$1")
    [ -z "$first" ] && case $2 in
        137) first="killed: out of budget" ;;
        0) first="the sanitizer reported errors (sanitize.log)" ;;
        129 | 1[3-9][0-9] | 2[0-5][0-9]) first="killed by signal $(($2 - 128)) (sanitize.log)" ;;
        *) first="the program exited with status $2 (sanitize.log)" ;;
    esac
    printf '%s' "$first" | cut -c1-200
}

# finding NAME TOOL RC ERRORS WHAT: counts a run that is not clean and names it.
finding() {
    dirty=$((dirty + 1)) named=$((named + 1))
    echo "sanitize finding: $1/$2: exit $3, $4 sanitizer errors: $5" | tee -a "$LOG"
}

# run NAME TOOL CMD...: one program under one tool.
run() {
    local name=$1 tool=$2
    shift 2
    local extra=()
    # Leaks are checked for the Rust and C++ programs, which free what they made before exiting;
    # an interpreter exits with module-level pools, PyTorch's caching allocators and CuPy's still
    # holding memory by design (the first Python run: 55 "leaks", 0 invalid accesses).
    [ "$tool" = memcheck ] && [[ $name != python* ]] && extra=(--leak-check full)
    local left=$((BUDGET - ($(date +%s) - START)))
    if [ "$left" -lt 10 ]; then
        missing=$((missing + 1))
        echo "sanitize not run: $name/$tool: the ${BUDGET} s budget is spent" | tee -a "$LOG"
        return
    fi
    echo "######## $name under $tool (at most $left s): $*" >>"$LOG"
    timeout -s KILL "$left" "$CS" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 99 \
        --print-limit 50 --target-processes all "$@" >"$OUT/sanitize.one" 2>&1
    local rc=$?
    cat "$OUT/sanitize.one" >>"$LOG"
    local errors
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$OUT/sanitize.one" | tail -1 | grep -oE '[0-9]+$')
    tool_runs[$tool]=$((${tool_runs[$tool]:-0} + 1))
    tool_errors[$tool]=$((${tool_errors[$tool]:-0} + ${errors:-0}))
    if [ "$rc" -eq 0 ] && [ "${errors:-0}" = 0 ]; then
        clean=$((clean + 1))
        echo "  $name/$tool: clean" | tee -a "$LOG"
    else
        finding "$name" "$tool" "$rc" "${errors:-?}" "$(what_went_wrong "$OUT/sanitize.one" "$rc")"
    fi
    rm -f "$OUT/sanitize.one"
}

PARTS=" ${RMM_SANITIZE_PARTS:-rust cpp python xlang} "
part() { [[ $PARTS == *" $1 "* ]]; }

# Rust.
if part rust; then
core=$STAGE/rust/rmm-core__rmm_core
[ -f "$core" ] || { [ -f "$core.gz" ] && gunzip -f "$core.gz"; }
[ -f "$core" ] || core=
if [ -n "$core" ]; then
    chmod +x "$core"
    # libtest runs the tests that match any of the filters; the host-only suites (composition,
    # adversary, checked frees) make no CUDA call worth checking and are left out for time.
    filters=(mr::pool::tests::gpu mr::pool::stream_kind_tests mr::arena::tests::gpu mr::binning mr::fixed_size
        mr::cuda_async:: buffer::device_buffer)
    for tool in memcheck racecheck synccheck; do
        run "rust" "$tool" "$core" --include-ignored --test-threads=1 "${filters[@]}"
    done
else
    missing=$((missing + 1))
    echo "sanitize not run: rust: rmm-core's test executable is not staged" | tee -a "$LOG"
fi
fi

# C++ (built by gpu-run.sh with nvcc).
export LD_LIBRARY_PATH=$STAGE/cpp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Without the nvcc build (RMM_CPP_PREBUILT=1), the staged g++ builds of the C ABI, container and
# resource tests stand in (the Thrust/CCCL .cu tests exist only as nvcc builds).
cpp_tests=(test_cuda_thrust test_cuda_cccl test_c_abi)
[ -d "$CPP_BUILD" ] || cpp_tests=(test_c_abi test_cpp_containers test_cpp_resources)
part cpp && for t in "${cpp_tests[@]}"; do
    exe=$(find "$CPP_BUILD" -type f -name "$t" -perm -u+x 2>/dev/null | head -1)
    [ -z "$exe" ] && [ ! -d "$CPP_BUILD" ] && [ -f "$STAGE/cpp/bin/$t" ] && exe=$STAGE/cpp/bin/$t && chmod +x "$exe"
    if [ -z "$exe" ]; then
        missing=$((missing + 1))
        echo "sanitize not run: cpp:$t: not built (run scripts/gpu-run.sh first)" | tee -a "$LOG"
        continue
    fi
    for tool in memcheck racecheck; do
        run "cpp:$t" "$tool" "$exe"
    done
done

# Python (the wheel gpu-run.sh installed into /tmp/site).
if ! part python; then
    :
elif [ -d /tmp/site/rmm ] && [ -d "$STAGE/python/tests" ]; then
    saved_path=${PYTHONPATH:-}
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    pushd "$STAGE/python" >/dev/null || exit 1
    run "python:-m gpu" memcheck python3 -m pytest tests -m gpu -q -p no:cacheprovider
    popd >/dev/null || exit 1
    export PYTHONPATH=$saved_path
else
    missing=$((missing + 1))
    echo "sanitize not run: python: the wheel is not installed in /tmp/site (run scripts/gpu-run.sh first)" | tee -a "$LOG"
fi

# Cross-language (issue 11): buffers and resources between C++, Python and Rust (test_capsules.py,
# its C++ extension and subprocesses: --target-processes all), the cxx bridge and the cudarc kernel.
if ! part xlang; then
    :
elif [ -d /tmp/site/rmm ] && [ -f "$STAGE/python/tests/test_capsules.py" ]; then
    cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
    if [ -f "$STAGE/cpp/cccl.tar.gz" ] && [ -f "$cuda_inc/cuda_runtime_api.h" ]; then
        mkdir -p /tmp/rmm-py-cccl && tar -C /tmp/rmm-py-cccl -xzf "$STAGE/cpp/cccl.tar.gz" &&
            export RMM_CCCL_INCLUDE_DIRS="/tmp/rmm-py-cccl/nvidia/cu13/include/cccl;$cuda_inc"
    fi
    # In this shell (not a subshell), so that the run's counts are kept.
    saved_path=${PYTHONPATH:-}
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    pushd "$STAGE/python" >/dev/null || exit 1
    run "python:test_capsules" memcheck python3 -m pytest tests/test_capsules.py -q -p no:cacheprovider
    popd >/dev/null || exit 1
    export PYTHONPATH=$saved_path
else
    missing=$((missing + 1))
    echo "sanitize not run: python:test_capsules: not staged or the wheel is not installed" | tee -a "$LOG"
fi
part xlang && for exe in rmm-example-cxx__bridge__test rmm-example-cudarc__kernel__test; do
    f=$STAGE/rust/$exe
    [ -f "$f" ] || { [ -f "$f.gz" ] && gunzip -f "$f.gz"; }
    if [ -f "$f" ]; then
        chmod +x "$f"
        run "rust:$exe" memcheck "$f" --include-ignored --test-threads=1
    else
        missing=$((missing + 1))
        echo "sanitize not run: rust:$exe: not staged" | tee -a "$LOG"
    fi
done

for tool in memcheck racecheck synccheck; do
    echo "sanitize $tool: ${tool_errors[$tool]:-0} errors in ${tool_runs[$tool]:-0} runs" | tee -a "$LOG"
done
echo "sanitize: $clean clean, $dirty with errors, $missing not run in $(($(date +%s) - START)) s" | tee -a "$LOG"
if [ "$named" -ne "$dirty" ]; then
    echo "sanitize: BUG in gpu-sanitize.sh: $dirty runs with errors but $named finding lines" | tee -a "$LOG"
    exit 1
fi
[ "$dirty" -eq 0 ]
