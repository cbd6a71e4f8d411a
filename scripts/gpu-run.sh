#!/usr/bin/env bash
# GPU runner, second half (runs THERE, on the GPU machine, from the repo root with stage/ carried;
# see scripts/gpu-stage.sh). No cargo and no network are needed.
#
# Runs every staged suite: Rust test executables with --include-ignored, the Python wheel's pytest
# suite, the prebuilt C++ GoogleTest executables. Missing pieces (no GPU, no python3, no pytest, a
# suite that was not staged) are reported, never crash the run.
#
# Output: logs in $OUT (flat, at most 8 files): summary.txt rust.log python.log cpp.log skips.txt
# tour.log peer.log peer-python.log; a per-suite count line each, and the final line
# `N passed, N failed, N skipped` (tests, summed over suites, RMM's own Python suite `peer-py`
# included). Exit status 1 when any test failed or nothing ran.
#
# Usage: bash scripts/gpu-run.sh [PART...]   PARTs: rust python peer-py cpp peer-cpp extras (default: all);
# issue 12's, only when named: hang-repro parallel3 nvtx-bounds stress sanitize (see their sections below).
# Running a few parts per command keeps each under the device tool's 10 minutes when all would not.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PARTS=" ${*:-rust python peer-py cpp peer-cpp extras} "
want() { [[ $PARTS == *" $1 "* ]]; }
ROOT=$PWD
STAGE=$ROOT/stage
OUT=${OUT:-/tmp/rmm-gpu-out}
mkdir -p "$OUT"
export RMM_TEST_SKIP_LOG=$OUT/skips.txt
: >"$RMM_TEST_SKIP_LOG"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
# The staged owner_routing test loads this librmm_rs.so (there is no cargo here to build one).
export RMM_LIBRMM_PATH=$STAGE/cpp/lib/librmm_rs.so
# ... and the Python shared-registry tests load this one first.
export RMM_LIBRMM=$STAGE/cpp/librmm_rs.so

say() { echo "$*" | tee -a "$SUMMARY"; }
total_pass=0 total_fail=0 total_skip=0
suite_line() { # name pass fail skip note
    say "$(printf '%-7s %4d passed, %4d failed, %4d skipped%s' "$1:" "$2" "$3" "$4" "${5:+  ($5)}")"
    total_pass=$((total_pass + $2)) total_fail=$((total_fail + $3)) total_skip=$((total_skip + $4))
}
num() { grep -oE "[0-9]+ $1" <<<"$2" | head -1 | grep -oE '^[0-9]+' || echo 0; }

say "rmm-rs GPU run on $(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null) at $(date -u +%FT%TZ)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    say "GPU: $(nvidia-smi -L | head -4 | tr '\n' ';')"
else
    say "GPU: none found (nvidia-smi -L failed): GPU tests will fail or skip"
fi
[ -f "$STAGE/MANIFEST.txt" ] || say "WARNING: no stage/MANIFEST.txt: was scripts/gpu-stage.sh run and stage/ carried?"

# ---- Rust -------------------------------------------------------------------------------------
if want rust; then
rp=0 rf=0 rs=0 n=0 note=""
: >"$OUT/rust.log"
for gz in "$STAGE"/rust/*.gz; do
    [ -f "$gz" ] && gunzip -f "$gz"
done
for exe in "$STAGE"/rust/*; do
    [ -f "$exe" ] || continue
    n=$((n + 1))
    name=$(basename "$exe")
    before=$(wc -l <"$RMM_TEST_SKIP_LOG")
    echo "######## $name --include-ignored" >>"$OUT/rust.log"
    chmod +x "$exe"
    # One test at a time, as RMM's gtest binaries run: the multi-thread tests start their own
    # threads. With libtest's default parallelism, unrelated GPU tests interleaving thousands of
    # legacy-stream synchronizations and stream creations hung inside libcuda (driver 580, H200,
    # 2026-11-21; every thread parked on a driver lock) in 2 of 3 runs: see docs/testing.md.
    # RMM_RUST_TEST_THREADS: libtest's --test-threads (default 1); 0 = libtest's default parallelism
    # (the switch for dropping --test-threads=1 once the part parallel3 has passed on the GPU).
    threads_arg=(--test-threads="${RMM_RUST_TEST_THREADS:-1}")
    [ "${RMM_RUST_TEST_THREADS:-1}" = 0 ] && threads_arg=()
    "$exe" --include-ignored "${threads_arg[@]}" >"$OUT/rust.one" 2>&1
    rc=$?
    cat "$OUT/rust.one" >>"$OUT/rust.log"
    result=$(grep -E '^test result:' "$OUT/rust.one" | tail -1)
    skipped=$(($(wc -l <"$RMM_TEST_SKIP_LOG") - before))
    if [ -z "$result" ]; then
        echo "  $name: no 'test result' line (exit $rc): counted as 1 failed" | tee -a "$OUT/rust.log" "$SUMMARY"
        rf=$((rf + 1))
        continue
    fi
    p=$(num passed "$result") f=$(num failed "$result") i=$(num ignored "$result")
    # Tests that skipped themselves at run time (RMM_TEST_SKIP_LOG) ended as "ok": count them skipped.
    rp=$((rp + p - skipped)) rf=$((rf + f)) rs=$((rs + i + skipped))
    say "  $name: $result ($skipped skipped at run time)"
done
rm -f "$OUT/rust.one"
[ "$n" -eq 0 ] && note="not staged"
[ "$n" -gt 0 ] && note="$n executables"
suite_line rust "$rp" "$rf" "$rs" "$note"

fi

# ---- Python -----------------------------------------------------------------------------------
# Our wheel, installed once into /tmp/site for our pytest suite and RMM's.
wheel=$(ls "$STAGE"/wheels/*.whl 2>/dev/null | head -1)
wheel_installed=0
if [ -n "$wheel" ] && command -v python3 >/dev/null 2>&1 && { want python || want peer-py || want extras || want sanitize; } &&
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$wheel" >/dev/null 2>&1; then
    wheel_installed=1
fi
if want python; then
# Dask-CUDA for test_dask_cuda.py, when gpu-stage.sh carried it (it skips otherwise).
if ls .whl/dask/*.whl >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1 &&
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/dask-site .whl/dask/*.whl \
        >/dev/null 2>&1; then
    export RMM_TEST_DASK_SITE=/tmp/dask-site
fi
pp=0 pf=0 ps=0 note=""
{
    if [ -z "$wheel" ]; then
        note="not staged"
    elif ! command -v python3 >/dev/null 2>&1; then
        note="python3 missing"; pf=1
    elif ! python3 -c 'import pytest' 2>/dev/null; then
        note="pytest missing"; pf=1
    elif [ "$wheel_installed" != 1 ]; then
        note="pip install of $(basename "$wheel") failed"; pf=1
    else
        (
            cd "$STAGE/python" || exit 1
            export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
            # CCCL >= 3.1 (carried) and the toolkit's runtime headers, for test_capsules.py's C++ API part.
            cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
            if [ -f "$STAGE/cpp/cccl.tar.gz" ] && [ -f "$cuda_inc/cuda_runtime_api.h" ]; then
                mkdir -p /tmp/rmm-py-cccl && tar -C /tmp/rmm-py-cccl -xzf "$STAGE/cpp/cccl.tar.gz" &&
                    export RMM_CCCL_INCLUDE_DIRS="/tmp/rmm-py-cccl/nvidia/cu13/include/cccl;$cuda_inc"
            fi
            python3 -c 'import rmm; print("rmm", rmm.__version__, "from", rmm.__file__, "host mode:", rmm.is_host_mode())'
            python3 -m pytest tests -p no:cacheprovider -rs
        ) >"$OUT/python.one" 2>&1
        rc=$?
        cat "$OUT/python.one"
        result=$(grep -E '(passed|failed|skipped|error|no tests ran).* in [0-9.]+s' "$OUT/python.one" | tail -1)
        rm -f "$OUT/python.one"
        if [ -z "$result" ]; then
            note="no pytest summary (exit $rc)"; pf=1
        else
            pp=$(num passed "$result") ps=$(num skipped "$result")
            pf=$(($(num failed "$result") + $(num 'errors?' "$result")))
            [ "$rc" -ne 0 ] && [ "$pf" -eq 0 ] && { note="pytest exit $rc"; pf=1; }
            note=${note:-$(basename "$wheel")}
        fi
    fi
    echo "python: $note"
} >"$OUT/python.log" 2>&1
suite_line python "$pp" "$pf" "$ps" "$note"
fi

# ---- RMM's own Python suite against our wheel (stage/peer/rmm-python, scripts/peer/python.sh) ----
if ! want peer-py; then
    :
elif [ -f "$STAGE/peer/rmm-python/conftest.py" ] && [ "$wheel_installed" = 1 ]; then
    RMM_PEER_PYTHON_DIR=$STAGE/peer/rmm-python RMM_PYTHONPATH=/tmp/site RMM_PEER_INSTALL=0 \
        bash scripts/peer/python.sh >"$OUT/peer-python.log" 2>&1
    result=$(tail -1 "$OUT/peer-python.log")
    if grep -qE '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' <<<"$result"; then
        suite_line peer-py "$(num passed "$result")" "$(num failed "$result")" "$(num skipped "$result")" \
            "RMM's Python suite, unmodified; RMM 26.10: 1211 passed, 392 skipped"
    else
        suite_line peer-py 0 1 0 "no count line (peer-python.log)"
    fi
else
    suite_line peer-py 0 1 0 "not run: stage/peer/rmm-python or our wheel missing"
fi

# ---- C++ --------------------------------------------------------------------------------------
if want cpp; then
# First choice: rebuild every C++ test here with nvcc (the Thrust tests need it) against the staged
# librmm_rs.so and CCCL headers, and run them with ctest (scripts/gpu-cpp-cuda.sh). If that cannot be
# built, the g++-built executables from stage/cpp/bin run instead, and the failed build counts as one
# failure.
cp_=0 cf=0 cs=0 n=0 note=""
: >"$OUT/cpp.log"
export LD_LIBRARY_PATH=$STAGE/cpp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_prebuilt_cpp() {
    for exe in "$STAGE"/cpp/bin/*; do
        [ -f "$exe" ] || continue
        n=$((n + 1))
        name=$(basename "$exe")
        echo "######## $name" >>"$OUT/cpp.log"
        chmod +x "$exe"
        "$exe" >"$OUT/cpp.one" 2>&1
        rc=$?
        cat "$OUT/cpp.one" >>"$OUT/cpp.log"
        if grep -q '^\[==========\] .* ran\.' "$OUT/cpp.one"; then
            p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$OUT/cpp.one" | grep -oE '[0-9]+$' | tail -1)
            s=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?, listed below' "$OUT/cpp.one" | grep -oE '[0-9]+' | tail -1)
            f=$(grep -oE '^\[  FAILED  \] [0-9]+ tests?, listed below' "$OUT/cpp.one" | grep -oE '[0-9]+' | tail -1)
            p=${p:-0} s=${s:-0} f=${f:-0}
            [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
            cp_=$((cp_ + p)) cs=$((cs + s)) cf=$((cf + f))
            say "  $name: $p passed, $f failed, $s skipped (gtest, exit $rc)"
        elif grep -q '^\[==========\]' "$OUT/cpp.one"; then
            echo "  $name: gtest did not finish (exit $rc): counted as 1 failed" | tee -a "$OUT/cpp.log" "$SUMMARY"
            cf=$((cf + 1))
        elif [ "$rc" -eq 0 ]; then
            cp_=$((cp_ + 1))   # a plain test program: one test, judged by its exit status
        else
            echo "  $name: exit $rc: counted as 1 failed" | tee -a "$OUT/cpp.log" "$SUMMARY"
            cf=$((cf + 1))
        fi
    done
    rm -f "$OUT/cpp.one"
}
nvcc_built=0
if [ "${RMM_CPP_PREBUILT:-0}" = 1 ]; then
    # Asked for: only the g++-built executables (no nvcc rebuild; the Thrust/CCCL .cu tests are left
    # out), when device time is short.
    say "  cpp: RMM_CPP_PREBUILT=1: the g++-built executables only (the nvcc-only .cu tests not run)"
elif [ -f "$STAGE/cpp/librmm_rs.so" ] && [ -f "$STAGE/cpp/cccl.tar.gz" ]; then
    W=/tmp/rmm-cpp-cuda
    rm -rf "$W" && mkdir -p "$W"
    tar -C "$W" -xzf "$STAGE/cpp/cccl.tar.gz"
    [ -f "$STAGE/cpp/googletest.tar.gz" ] && tar -C "$W" -xzf "$STAGE/cpp/googletest.tar.gz" &&
        export RMM_GOOGLETEST_SOURCE=$W/googletest
    RMM_CPP_CUDA_BUILD_DIR=$W/build bash scripts/gpu-cpp-cuda.sh "$STAGE/cpp/librmm_rs.so" \
        "$W/nvidia/cu13/include/cccl" "$W/logs" >>"$OUT/cpp.log" 2>&1
    rc=$?
    for f in configure build ctest; do
        [ -f "$W/logs/$f.log" ] && { echo "######## $f.log"; cat "$W/logs/$f.log"; } >>"$OUT/cpp.log"
    done
    ctest_log=$W/logs/ctest.log
    # ctest ends with "100% tests passed out of N" or "K% tests passed, M tests failed out of N";
    # each test has one result line, "***Skipped" for a GTEST_SKIP.
    if [ -f "$ctest_log" ] && grep -qE 'tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$ctest_log"; then
        nvcc_built=1
        total=$(grep -oE 'out of [0-9]+' "$ctest_log" | tail -1 | grep -oE '[0-9]+')
        cf=$(grep -oE '[0-9]+ tests? failed out of' "$ctest_log" | tail -1 | grep -oE '^[0-9]+' || true)
        cf=${cf:-0}
        cs=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$ctest_log")
        cp_=$((total - cf - cs))
        n=$(grep -cE '^ *(add_executable|rmm_cpp_test|rmm_cuda_test)\((test|c_abi)' bindings-cpp/tests/CMakeLists.txt)
        note="built here with nvcc, ctest"
        grep -q 'ThrustAllocator\.' "$ctest_log" && note="$note; the .cu tests (Thrust, CCCL upstreams) included"
        say "  cpp: nvcc build + ctest: exit $rc"
        grep -E 'Test +#[0-9]+: .*\*\*\*Skipped' "$ctest_log" | sed 's/^/  skipped: /' >>"$OUT/skips.txt"
    else
        say "  cpp: the nvcc build of the C++ tests failed (exit $rc, cpp.log): counted as 1 failed; running the g++ builds"
        cf=1
    fi
fi
[ "$nvcc_built" = 1 ] || run_prebuilt_cpp
if [ "$n" -eq 0 ]; then
    note=$(grep -E '^cpp:' "$STAGE/MANIFEST.txt" 2>/dev/null || echo "not staged")
    note=${note#cpp: }
elif [ -z "$note" ]; then
    note="$n g++-built executables"
fi
suite_line cpp "$cp_" "$cf" "$cs" "$note"

fi

# ---- C++ peer: RMM's own C++ tests built with nvcc against our package (scripts/gpu-peer-cpp.sh) ----
if want peer-cpp; then
    RMM_PEER_OUT=/tmp/rmm-peer-cpp-logs bash scripts/gpu-peer-cpp.sh >"$OUT/peer-cpp.log" 2>&1
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$OUT/peer-cpp.log" | tail -1)
    read -r pp _ pf _ ps _ <<<"${line:-0 passed, 1 failed, 0 skipped}"
    suite_line peer-cpp "$pp" "$pf" "$ps" "RMM's C++ tests, unmodified; peer-cpp.log"
fi

# ---- Extras (not counted): the tour, the RMM 26.10 peer ------------------------------------------
if want extras; then
if [ -x "$STAGE/bin/tour" ]; then
    "$STAGE/bin/tour" >"$OUT/tour.log" 2>&1 && say "tour:   ran (tour.log)" || say "tour:   exit $? (tour.log)"
fi
if [ -f "$STAGE/tour/librmm_tour_cpp.so" ] && [ -d /tmp/site/rmm ]; then
    # The shared stop: C++ sets a pool + statistics as the current resource, Rust, C++ and Python
    # allocate from it in one process (librmm_rs.so from stage/cpp, the owner of the one registry).
    tour_buffers=()
    [ -f "$STAGE/tour/librmm_tour_buffers.so" ] && tour_buffers=("$STAGE/tour/librmm_tour_buffers.so")
    PYTHONPATH=/tmp/site python3 -u scripts/tour_shared.py "$STAGE/cpp/librmm_rs.so" \
        "$STAGE/tour/librmm_tour_cpp.so" "$STAGE/tour/libtour_shared.so" "${tour_buffers[@]}" >>"$OUT/tour.log" 2>&1 &&
        say "tour:   shared stop ran (tour.log)" || say "tour:   shared stop exit $? (tour.log)"
fi
# One engine per process (issue 26): DeviceBuffer(size=256) by who set the current resource, and
# which loaded objects carry the engine with the tour's C++ library loaded (not tests: never counted).
if [ -d /tmp/site/rmm ]; then
    rust_setter=()
    [ -f "$STAGE/tour/libbench_setter.so" ] && rust_setter=(--rust-lib "$STAGE/tour/libbench_setter.so")
    PYTHONPATH=/tmp/site timeout 300 python3 scripts/bench-python-setter.py "${rust_setter[@]}" \
        --json "$OUT/bench-python-setter.json" >"$OUT/bench-python-setter.log" 2>&1
    say "setter: $(tail -1 "$OUT/bench-python-setter.log") (bench-python-setter.log)"
    tour_cpp=()
    [ -f "$STAGE/tour/librmm_tour_cpp.so" ] && tour_cpp=("$STAGE/tour/librmm_tour_cpp.so")
    PYTHONPATH=/tmp/site python3 scripts/engine_copies.py --check "${tour_cpp[@]}" >>"$OUT/bench-python-setter.log" 2>&1
    say "engine: $(tail -1 "$OUT/bench-python-setter.log") (bench-python-setter.log)"
fi
if ls .whl/rmm_cu13-*.whl >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
    {
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/peer-site .whl/*.whl &&
            PYTHONPATH=/tmp/peer-site python3 -c '
import rmm
mr = rmm.mr.CudaMemoryResource()
buf = rmm.DeviceBuffer(size=1 << 20, mr=mr)
print("peer rmm", rmm.__version__, "from", rmm.__file__, "DeviceBuffer of", buf.size, "bytes OK")'
    } >"$OUT/peer.log" 2>&1 && say "peer:   $(tail -1 "$OUT/peer.log")" || say "peer:   not usable here (peer.log)"
fi
# Issue 9's Python speed benchmark (bindings-python/benchmarks/device_buffer.py), ours then RMM 26.10's
# in the same run; the rows go to peer.log, a comparison to summary.txt (not tests: never counted).
bench=bindings-python/benchmarks/device_buffer.py
if [ -f "$bench" ] && [ -d /tmp/site/rmm ] && [ -d /tmp/peer-site/rmm ]; then
    for side in ours:/tmp/site rmm:/tmp/peer-site; do
        echo "######## $bench (${side%%:*})" >>"$OUT/peer.log"
        PYTHONPATH=${side#*:} timeout 240 python3 "$bench" --json "/tmp/pybench-${side%%:*}.json" >>"$OUT/peer.log" 2>&1 ||
            echo "pybench ${side%%:*}: exit $?" >>"$OUT/peer.log"
    done
    python3 - /tmp/pybench-ours.json /tmp/pybench-rmm.json <<'PY' | while IFS= read -r line; do say "$line"; done
import json, sys
def load(path):
    try:
        return {(r["bench"], r.get("resource", "")): r for r in json.load(open(path))}
    except (OSError, ValueError):
        return {}
ours, rmm = load(sys.argv[1]), load(sys.argv[2])
for key in sorted(set(ours) | set(rmm)):
    def value(rows):
        row = rows.get(key, {})
        return row.get("us", row.get("gib_per_s"))
    unit = "GiB/s" if "gib_per_s" in ours.get(key, rmm.get(key, {})) else "us"
    a, b = value(ours), value(rmm)
    ratio = f"  ours/RMM {a / b:.2f}" if a is not None and b else ""
    label = f"{key[0]} {key[1]}".strip()
    print(f"pybench: {label}: ours {a} {unit}, RMM {b} {unit}{ratio}")
PY
fi
# Where the create+drop time goes (bindings-python/benchmarks/python_path.py: size=0, mr=, stream=,
# the getter, floors), ours then RMM 26.10's; rows to peer.log, "pypath:" comparisons to summary.txt.
bench=bindings-python/benchmarks/python_path.py
if [ -f "$bench" ] && [ -d /tmp/site/rmm ] && [ -d /tmp/peer-site/rmm ]; then
    for side in ours:/tmp/site rmm:/tmp/peer-site; do
        echo "######## $bench (${side%%:*})" >>"$OUT/peer.log"
        PYTHONPATH=${side#*:} timeout 240 python3 "$bench" --calls 20000 --json "/tmp/pypath-${side%%:*}.json" >>"$OUT/peer.log" 2>&1 ||
            echo "pypath ${side%%:*}: exit $?" >>"$OUT/peer.log"
    done
    python3 - /tmp/pypath-ours.json /tmp/pypath-rmm.json <<'PY' | while IFS= read -r line; do say "$line"; done
import json, sys
def load(path):
    try:
        return {(r["bench"], r.get("resource", "")): r["us"] for r in json.load(open(path))}
    except (OSError, ValueError, KeyError):
        return {}
ours, rmm = load(sys.argv[1]), load(sys.argv[2])
for key in sorted(set(ours) | set(rmm), key=lambda k: (k[1], k[0])):
    a, b = ours.get(key), rmm.get(key)
    ratio = f"  ours/RMM {a / b:.2f}" if a is not None and b else ""
    print(f"pypath: {key[1] or '-'} {key[0]}: ours {a} us, RMM {b} us{ratio}")
PY
fi

fi

# ---- Issue 12: the hang (not in the default parts; each counts as one test) ----------------------
# hang-repro: tools/hang/driver_hang_repro.c (driver API only, no rmm code) built here with gcc
#   against the toolkit's cuda.h; 16 threads over legacy-stream synchronizations, stream
#   create/destroy, cuMemFree, pageable copies and memsets, stream-ordered pools and short-lived
#   threads for RMM_HANG_SECONDS (60) s (RMM_HANG_OPS picks the operations, see the source); prints
#   "no hang" or "hung" (no progress for 20 s); three runs.
# parallel3: core's library test executable (stage/rust/rmm-core__rmm_core) with --include-ignored
#   under libtest's DEFAULT parallelism, three times, each under a time limit (RMM_PARALLEL_LIMIT,
#   150 s): "passed", "failed" or "hung (time limit)" per run.
cuda_root() {
    local nvcc
    nvcc=$(command -v nvcc || true)
    if [ -n "$nvcc" ]; then (cd "$(dirname "$nvcc")/.." && pwd); else echo "${CUDA_HOME:-/usr/local/cuda}"; fi
}
if want hang-repro; then
    CUDA_ROOT=$(cuda_root)
    repro=/tmp/rmm-driver-hang-repro
    : >"$OUT/hang.log"
    if gcc -O2 -pthread -I"$CUDA_ROOT/include" tools/hang/driver_hang_repro.c -o "$repro" \
        -L"$CUDA_ROOT/lib64/stubs" -L"$CUDA_ROOT/lib64" -lcuda >>"$OUT/hang.log" 2>&1; then
        hp=0 hf=0
        for i in 1 2 3; do
            timeout -s KILL $((${RMM_HANG_SECONDS:-60} + 40)) "$repro" 16 "${RMM_HANG_SECONDS:-60}" 20 "${RMM_HANG_OPS:-1,2,3,4,5,6,7,8,9}" >"$OUT/hang.one" 2>&1
            rc=$?
            cat "$OUT/hang.one" >>"$OUT/hang.log"
            line=$(grep -E '^(no hang|hung)' "$OUT/hang.one" | head -1)
            [ "$rc" -eq 137 ] && line="hung (killed by the time limit)"
            say "  hang-repro run $i: ${line:-exit $rc, no verdict} (exit $rc)"
            if [ "$rc" -eq 0 ]; then hp=$((hp + 1)); else hf=$((hf + 1)); fi
        done
        rm -f "$OUT/hang.one"
        suite_line hang "$hp" "$hf" 0 "driver-only reproducer, 3 runs x 16 threads; hang.log"
    else
        suite_line hang 0 1 0 "gcc build of tools/hang/driver_hang_repro.c failed (hang.log)"
    fi
fi
if want parallel3; then
    exe=$STAGE/rust/rmm-core__rmm_core
    [ -f "$exe.gz" ] && gunzip -f "$exe.gz"
    : >"$OUT/parallel.log"
    if [ -f "$exe" ]; then
        chmod +x "$exe"
        pp=0 pf=0
        # RMM_PARALLEL_RUNS (3): how many runs; RMM_PARALLEL_FILTER: a libtest name filter (all).
        for i in $(seq 1 "${RMM_PARALLEL_RUNS:-3}"); do
            echo "######## run $i: $(basename "$exe") --include-ignored ${RMM_PARALLEL_FILTER:-} (default parallelism)" >>"$OUT/parallel.log"
            "$exe" --include-ignored ${RMM_PARALLEL_FILTER:+"$RMM_PARALLEL_FILTER"} >"$OUT/parallel.one" 2>&1 &
            pid=$! waited=0
            while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "${RMM_PARALLEL_LIMIT:-150}" ]; do
                sleep 1; waited=$((waited + 1))
            done
            if kill -0 "$pid" 2>/dev/null; then
                # Hung: every thread's stack before the kill (gdb when the machine has it, else each
                # thread's kernel wait channel), for the root cause.
                if command -v gdb >/dev/null 2>&1; then
                    timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt 25' >"$OUT/parallel-stacks-$i.log" 2>&1
                elif command -v python3 >/dev/null 2>&1 && command -v addr2line >/dev/null 2>&1; then
                    # No gdb there (2026-11-23): scan each thread's user stack for return addresses.
                    timeout 120 python3 tools/hang/stackscan.py "$pid" >"$OUT/parallel-stacks-$i.log" 2>&1
                else
                    for t in /proc/"$pid"/task/*; do
                        echo "$(basename "$t") $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
                        cat "$t/stack" 2>/dev/null | head -8
                    done >"$OUT/parallel-stacks-$i.log"
                fi
                kill -KILL "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
                rc=137
            else
                wait "$pid"
                rc=$?
            fi
            cat "$OUT/parallel.one" >>"$OUT/parallel.log"
            result=$(grep -E '^test result:' "$OUT/parallel.one" | tail -1)
            if [ "$rc" -eq 137 ]; then
                verdict="hung (killed after ${RMM_PARALLEL_LIMIT:-150} s; running: $(grep -cE ' \.\.\. $' "$OUT/parallel.one") tests without a result)"
            else
                verdict=${result:-"no test result line (exit $rc)"}
            fi
            say "  parallel run $i: $verdict"
            if [ "$rc" -eq 0 ]; then pp=$((pp + 1)); else pf=$((pf + 1)); fi
        done
        rm -f "$OUT/parallel.one"
        suite_line par3 "$pp" "$pf" 0 "core GPU tests, default parallelism, 3 runs; parallel.log"
    else
        suite_line par3 0 1 0 "not staged: $exe"
    fi
fi

# ---- Issue 12: bounds checking inside pools (NVTX), only when named --------------------------------
# nvtx-bounds: core's probes (mr::detail::nvtx_bounds::tests::gpu: a kernel reads one byte past a
#   pool/arena allocation, or one byte of a freed pool/arena block) under
#   `compute-sanitizer --tool memcheck`, with the option on (RMM_NVTX_PROBE=on: memcheck must report
#   an error) and off (=off: the access is to the pool's own memory, memcheck must report none).
#   Each of the 8 cases counts as one test; logs in nvtx.log.
sanitizer_bin() {
    local cs
    cs=$(command -v compute-sanitizer || true)
    [ -n "$cs" ] || cs=$(cuda_root)/bin/compute-sanitizer
    [ -x "$cs" ] && echo "$cs"
}
errors_of() { grep -oE 'ERROR SUMMARY: [0-9]+ error' "$1" | tail -1 | grep -oE '[0-9]+' || echo "none"; }
if want nvtx-bounds; then
    exe=$STAGE/rust/rmm-core__rmm_core
    [ -f "$exe.gz" ] && gunzip -f "$exe.gz"
    CS=$(sanitizer_bin)
    : >"$OUT/nvtx.log"
    if [ -z "$CS" ]; then
        suite_line nvtx 0 1 0 "compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
    elif [ ! -f "$exe" ]; then
        suite_line nvtx 0 1 0 "not staged: $exe"
    else
        chmod +x "$exe"
        np=0 nf=0
        for probe in pool_overrun pool_use_after_free arena_overrun arena_use_after_free; do
            for mode in on off; do
                echo "######## $probe, bounds $mode" >>"$OUT/nvtx.log"
                RMM_NVTX_PROBE=$mode timeout -s KILL 120 "$CS" --tool memcheck --nvtx yes "$exe" --include-ignored \
                    --exact "mr::detail::nvtx_bounds::tests::gpu::${probe}_probe" --nocapture >"$OUT/nvtx.one" 2>&1
                cat "$OUT/nvtx.one" >>"$OUT/nvtx.log"
                n=$(errors_of "$OUT/nvtx.one")
                if ! grep -qE "^test .*::${probe}_probe " "$OUT/nvtx.one"; then
                    verdict="FAILED (the probe did not run)"; nf=$((nf + 1))
                elif [ "$n" = none ]; then
                    verdict="FAILED (no ERROR SUMMARY)"; nf=$((nf + 1))
                elif grep -q "SKIPPED" "$OUT/nvtx.one"; then
                    verdict="FAILED (the probe skipped)"; nf=$((nf + 1))
                elif { [ "$mode" = on ] && [ "$n" -gt 0 ]; } || { [ "$mode" = off ] && [ "$n" -eq 0 ]; }; then
                    verdict="ok"; np=$((np + 1))
                else
                    verdict="FAILED"; nf=$((nf + 1))
                fi
                say "  nvtx-bounds $probe, option $mode: memcheck $n errors: $verdict"
            done
        done
        rm -f "$OUT/nvtx.one"
        suite_line nvtx "$np" "$nf" 0 "memcheck catches with NVTX bounds on, misses off; nvtx.log"
    fi
    # Diagnostic, not counted: the same NVTX calls from a plain CUDA program (scripts/nvtx/nvtx_probe.cu),
    # built with the vendored NVTX headers and with the toolkit's, so a failure above can be placed.
    if [ -n "$CS" ] && command -v nvcc >/dev/null 2>&1; then
        : >"$OUT/nvtx-c.log"
        for headers in vendored toolkit; do
            inc=(-I"$(cuda_root)/include"); [ "$headers" = vendored ] && inc=(-I"$ROOT/core/third_party" "${inc[@]}")
            bin=/tmp/nvtx_probe_$headers
            if ! nvcc -std=c++17 "${inc[@]}" -o "$bin" scripts/nvtx/nvtx_probe.cu -lcuda >>"$OUT/nvtx-c.log" 2>&1; then
                say "  nvtx C probe ($headers headers): build failed (nvtx-c.log)"; continue
            fi
            for alloc in runtime driver; do
                for case in "on overrun" "on freed" "on inside" "off overrun"; do
                    # shellcheck disable=SC2086
                    timeout -s KILL 60 "$CS" --tool memcheck --nvtx yes "$bin" $alloc $case >"$OUT/nvtx.one" 2>&1
                    { echo "######## $headers $alloc $case"; cat "$OUT/nvtx.one"; } >>"$OUT/nvtx-c.log"
                    say "  nvtx C probe ($headers headers, $alloc, $case): memcheck $(errors_of "$OUT/nvtx.one") errors"
                done
            done
        done
        rm -f "$OUT/nvtx.one"
    fi
fi

# ---- Issue 12: the GPU stress run, only when named ------------------------------------------------
# stress: core/tests/stress.rs (16 threads x 16 streams, own and foreign, on pool, arena, binning and
#   cuda_async under statistics) with RMM_STRESS_OPS=100000 operations per thread and a budget of
#   RMM_STRESS_SECONDS=20 s per resource (80 s in all; a resource cut by it says so); one test.
if want stress; then
    exe=$STAGE/rust/rmm-core__stress__test
    [ -f "$exe.gz" ] && gunzip -f "$exe.gz"
    if [ -f "$exe" ]; then
        chmod +x "$exe"
        RMM_STRESS_OPS=${RMM_STRESS_OPS:-100000} RMM_STRESS_SECONDS=${RMM_STRESS_SECONDS:-20} timeout -s KILL 150 \
            "$exe" --include-ignored --nocapture >"$OUT/stress.log" 2>&1
        rc=$?
        grep -E '^stress ' "$OUT/stress.log" | while IFS= read -r line; do say "  $line"; done
        if [ "$rc" -eq 0 ]; then
            suite_line stress 1 0 0 "16 threads x 16 streams x RMM_STRESS_OPS; stress.log"
        else
            [ "$rc" -eq 137 ] && say "  stress: killed after 150 s (hung?)"
            suite_line stress 0 1 0 "exit $rc; stress.log"
        fi
    else
        suite_line stress 0 1 0 "not staged: $exe"
    fi
fi

# ---- Issue 12: compute-sanitizer, only when named ------------------------------------------------
# sanitize: scripts/gpu-sanitize.sh (memcheck, racecheck, synccheck on a subset of the Rust GPU tests,
#   the nvcc-built C++ tests and the Python GPU tests) within RMM_SANITIZE_BUDGET (240) s; name the
#   part cpp before it in the same command so the nvcc-built tests exist. Counted: runs clean /
#   with errors (a run the budget left out is a skip); per tool "N errors" in summary.txt, and one
#   "sanitize finding:" line per run with errors naming it and what went wrong ("sanitize not
#   run:" lines for the rest; scripts/gpu-sanitize-selftest.sh checks that on CPU).
if want sanitize; then
    RMM_SANITIZE_BUDGET=${RMM_SANITIZE_BUDGET:-240} bash scripts/gpu-sanitize.sh >"$OUT/sanitize.out" 2>&1
    grep -E '^sanitize ' "$OUT/sanitize.out" | while IFS= read -r line; do say "  $line"; done
    line=$(grep -E '^sanitize: [0-9]+ clean' "$OUT/sanitize.out" | tail -1)
    if [ -n "$line" ]; then
        suite_line sanit "$(num clean "$line")" "$(num 'with errors' "$line" | head -1)" "$(num 'not run' "$line")" \
            "compute-sanitizer runs; sanitize.log"
    else
        suite_line sanit 0 1 0 "gpu-sanitize.sh gave no summary (sanitize.out)"
    fi
    rm -f "$OUT/sanitize.out"
fi

say ""
say "parts run:$PARTS"
say "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ] && [ $((total_pass + total_skip)) -gt 0 ]
