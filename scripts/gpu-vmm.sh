#!/usr/bin/env bash
# The expandable pool (issue 28) on the GPU in one call: the GPU tests of all three languages, its
# speed beside our pool, and the memory benchmark (recorded traces replayed on every allocator,
# PyTorch's caching allocator on the same loop, trim after the peak). Two halves:
#
#   bash scripts/gpu-vmm.sh stage          HERE (cargo, cmake, network): release builds into
#                                          stage/vmm/ (see the list under `stage)`), checked to fit
#                                          one carry (64 MiB)
#   bash scripts/gpu-vmm.sh run [PART...]  THERE, with carry ["stage/vmm"]; parts (default all):
#       tests   rmm-core's tests of virtual_range, cuda::vmm and expandable_pool (GPU ones included:
#               growth, trim with live blocks, out of memory, export to a second process, two
#               devices), the rmm crate's, the C++ test program (a second process imports an
#               export and reads its bytes; peers), and bindings-python/tests/test_expandable_pool.py
#               (DeviceBuffer, CuPy/Numba/PyTorch allocators, the two-process import)
#       bench   pair256 and random churn, pool vs expandable_pool, every stream kind, 1/4/16 threads
#               (core/benches/allocations.rs), and the cost of one granule growth and of a trim
#               (core/benches/virtual_range.rs: pool_grow, pool_trim, grow, release)
#       memory  traces recorded through the logging adaptor (a PyTorch transformer trained on two
#               streams with varying batch and sequence sizes; a CuPy pipeline with large
#               temporaries on two streams), replayed by rmm-replay on the GPU on pool_on_demand,
#               expandable_pool and cuda_async, and on RAPIDS RMM 26.10's pool (its own wheel);
#               PyTorch's caching allocator with and without expandable_segments on the same loop
#               (max_memory_reserved); the loop on the expandable pool, then trim with the model
#               and optimizer live (benchmarks/python/vmm_memory.py)
#
# Output in $OUT (default /tmp/rmm-vmm-out): vmm-summary.txt (what the last lines print) and
# vmm-out.tgz, which holds everything else: the logs of
# each step, bench.csv (criterion medians), memory/summary.csv, memory/figure-<trace>.png,
# memory/series-<trace>-<allocator>.csv, memory/<trace>-<allocator>.json. Every step has a time
# limit and the whole run a budget (RMM_VMM_BUDGET seconds, default 570: one device call); a step
# that no longer fits is reported "not run: out of time". Exit status 1 when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
S=$ROOT/stage/vmm

built() { # cargo's JSON on stdin -> the last executable of target kind $1 ("lib", "test", "bench")
    python3 -c 'import json, sys
kind = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and kind in m["target"]["kind"]:
        print(m["executable"])' "$1" | tail -1
}

stage() {
    set -e
    rm -rf "$S" && mkdir -p "$S/bin" "$S/py" "$S/rmmwhl"
    local tests crate vr al
    tests=$(cargo test -p rmm-core --lib --release --locked --no-run --message-format=json 2>/dev/null | built lib)
    crate=$(cargo test -p rmm --test expandable_pool --release --locked --no-run --message-format=json 2>/dev/null | built test)
    vr=$(cargo bench -p rmm-core --bench virtual_range --locked --no-run --message-format=json 2>/dev/null | built bench)
    al=$(cargo bench -p rmm-core --bench allocations --locked --no-run --message-format=json 2>/dev/null | built bench)
    cargo build --release --locked -p rmm-replay -p rmm-cpp -p rmm-python
    local target
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    cp "$tests" "$S/bin/rmm_core_tests"
    cp "$crate" "$S/bin/rmm_expandable_pool"
    cp "$vr" "$S/bin/virtual_range"
    cp "$al" "$S/bin/allocations"
    cp "$target/release/rmm-replay" "$S/bin/rmm-replay"
    # Python: the package as the wheel lays it out (rmm/_rmm.abi3.so, rmm/lib/librmm_rs.so); the
    # C++ test program finds librmm_rs.so there too (LD_LIBRARY_PATH).
    cp -r bindings-python/python/rmm "$S/py/rmm"
    find "$S/py" -name __pycache__ -prune -exec rm -rf {} +
    mkdir -p "$S/py/rmm/lib"
    cp "$target/release/librmm_python.so" "$S/py/rmm/_rmm.abi3.so"
    cp "$target/release/librmm_rs.so" "$S/py/rmm/lib/librmm_rs.so"
    # C++: test_cpp_expandable_pool, configured as ci/cpp.sh does (CCCL headers from their wheels).
    local cccl
    cccl=$(bash bindings-cpp/cmake/fetch-cccl.sh "$ROOT/build/cccl" | tail -n 1)
    cmake -S bindings-cpp -B build/cpp -G Ninja "-DRMM_CCCL_INCLUDE_DIRS=$cccl" >/dev/null
    cmake --build build/cpp --target test_cpp_expandable_pool test_cpp_two_devices >/dev/null
    cp build/cpp/tests/test_cpp_expandable_pool build/cpp/tests/test_cpp_two_devices "$S/bin/"
    # RAPIDS RMM 26.10's wheels (rmm-cu13, librmm-cu13, rapids-logger), for its pool.
    local whl
    whl=$(ls -d .whl 2>/dev/null || echo /work/main/.whl)
    cp "$whl"/rmm_cu13-26.10*.whl "$whl"/librmm_cu13-26.10*.whl "$whl"/rapids_logger-*.whl "$S/rmmwhl/"
    strip "$S"/bin/* "$S/py/rmm/_rmm.abi3.so" "$S/py/rmm/lib/librmm_rs.so"
    git rev-parse HEAD >"$S/COMMIT"
    set +e
    local mib
    mib=$(du -sm "$S" | cut -f1)
    echo "staged $S: ${mib} MiB (carry limit 64 MiB)"
    [ "$mib" -lt 64 ] || { echo "stage/vmm is over the carry limit" >&2; return 1; }
    echo "there (carry [\"stage/vmm\"]): bash scripts/gpu-vmm.sh run"
}

# ---- run: helpers ---------------------------------------------------------------------------------
OUT=${OUT:-/tmp/rmm-vmm-out}
BUDGET=${RMM_VMM_BUDGET:-570}
SUMMARY=$OUT/vmm-summary.txt
status=0
say() { echo "[gpu-vmm ${SECONDS}s] $*" | tee -a "$SUMMARY"; }
# limited SECONDS CMD...: CMD with the smaller of SECONDS and what is left of the budget; 124 and a
# note when nothing is left.
limited() {
    local want=$1 left=$((BUDGET - SECONDS))
    shift
    if [ "$left" -lt 15 ]; then
        say "not run: out of time: $*"
        return 124
    fi
    [ "$want" -lt "$left" ] || want=$left
    timeout --kill-after=5 "$want" "$@"
}
num() { grep -oE "[0-9]+ $1" <<<"$2" | tail -1 | grep -oE '^[0-9]+' || echo 0; }

run_tests() {
    local log rc result
    log=$OUT/tests-rust.log
    RMM_TEST_SKIP_LOG=$OUT/skips.txt limited 200 "$S/bin/rmm_core_tests" --include-ignored --test-threads=1 \
        virtual_range cuda::vmm expandable_pool two_devices >"$log" 2>&1
    rc=$?
    result=$(grep -E '^test result' "$log" | tail -1)
    grep -E '^test .* FAILED$|panicked' "$log" | head -20 | tee -a "$SUMMARY"
    say "rust rmm-core: ${result:-no result} (exit $rc; tests-rust.log)"
    [ "$rc" -eq 0 ] || status=1
    limited 60 "$S/bin/rmm_expandable_pool" --include-ignored --test-threads=1 >>"$log" 2>&1
    rc=$?
    say "rust rmm crate: $(grep -E '^test result' "$log" | tail -1) (exit $rc)"
    [ "$rc" -eq 0 ] || status=1

    log=$OUT/tests-cpp.log
    : >"$log"
    for t in test_cpp_expandable_pool:150 test_cpp_two_devices:60; do
        local one=$OUT/tests-cpp.one
        LD_LIBRARY_PATH=$S/py/rmm/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            limited "${t#*:}" "$S/bin/${t%%:*}" >"$one" 2>&1
        rc=$?
        cat "$one" >>"$log"
        grep -E '^\[  (FAILED|SKIPPED) \]|Failure' "$one" | head -20 | tee -a "$SUMMARY"
        # The last PASSED line is the program's own (an IPC child's output comes before it).
        say "cpp ${t%%:*}: $(grep -E '^\[  PASSED  \]' "$one" | tail -1) $(grep -cE '^\[  FAILED  \] [A-Z]' "$one") failed (exit $rc; tests-cpp.log)"
        [ "$rc" -eq 0 ] || status=1
    done
    rm -f "$OUT/tests-cpp.one"

    log=$OUT/tests-python.log
    PYTHONPATH=$S/py limited 200 python3 -m pytest bindings-python/tests/test_expandable_pool.py bindings-python/tests/test_two_devices.py \
        -p no:cacheprovider -rs >"$log" 2>&1
    rc=$?
    result=$(grep -E '(passed|failed|skipped|error).* in [0-9.]+s' "$log" | tail -1)
    grep -E '^(FAILED|ERROR|SKIPPED)' "$log" | tee -a "$SUMMARY"
    say "python: ${result:-no result} (exit $rc; tests-python.log)"
    [ "$rc" -eq 0 ] || status=1
}

run_bench() {
    local log=$OUT/bench-vmm.log
    CRITERION_HOME=/tmp/criterion limited 120 "$S/bin/virtual_range" --bench >"$log" 2>&1 || status=1
    grep -E '^(grow|release|mapped_check|pool_grow|pool_trim)/|time:' "$log" | grep -v '%' | tee -a "$SUMMARY"
    log=$OUT/bench-churn.log
    RMM_BENCH_RESOURCES=pool,expandable_pool RMM_BENCH_WORKLOADS=pair256,random CRITERION_HOME=/tmp/criterion \
        limited 300 "$S/bin/allocations" --bench --warm-up-time 0.3 --measurement-time 1 >"$log" 2>&1 || status=1
    # name,median_ns,low_ns,high_ns of every criterion line in both logs, and expandable/pool ratios.
    python3 - "$OUT/bench-vmm.log" "$log" "$OUT/bench.csv" <<'EOF' | tee -a "$SUMMARY"
import csv, re, sys
unit = {"ps": 1e-3, "ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
rows, name = [], None
for path in sys.argv[1:3]:
    for line in open(path, errors="replace"):
        m = re.match(r"^(\S+/\S+)", line)
        if m and "time:" not in line.split()[0]:
            name = m.group(1)
        t = re.search(r"time:\s+\[([\d.]+) (\S+) ([\d.]+) (\S+) ([\d.]+) (\S+)\]", line)
        if t and name:
            v = [float(t.group(i)) * unit[t.group(i + 1)] for i in (1, 3, 5)]
            rows.append({"name": name, "median_ns": v[1], "low_ns": v[0], "high_ns": v[2]})
            name = None
with open(sys.argv[3], "w", newline="") as f:
    w = csv.DictWriter(f, ["name", "median_ns", "low_ns", "high_ns"], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
by = {r["name"]: r["median_ns"] for r in rows}
worst = 0.0
for n, v in sorted(by.items()):
    if ".pool." in "." + n.split("/")[1] + "." and n.split("/")[0] in ("pair256", "random"):
        e = n.replace("/pool.", "/expandable_pool.")
        if e in by:
            worst = max(worst, by[e] / v)
            print(f"{e}: {by[e]:.1f} ns vs pool {v:.1f} ns: x{by[e] / v:.2f}")
print(f"bench: {len(rows)} results in bench.csv; worst expandable/pool ratio x{worst:.2f} (target <= 1.25)")
EOF
}

run_memory() {
    local M=$OUT/memory rc
    mkdir -p "$M"
    local ours=$S/py rmm_site=/tmp/rmm-26.10-site
    [ -d "$rmm_site/rmm" ] || python3 -m pip install -q --no-index --no-deps --no-compile --target "$rmm_site" \
        "$S"/rmmwhl/*.whl >"$M/rmm-install.log" 2>&1 || say "RMM 26.10's wheels did not install (rmm-install.log)"
    local bench=$ROOT/benchmarks/python/vmm_memory.py
    for trace in torch cupy; do
        PYTHONPATH=$ours limited 150 python3 "$bench" record "$trace" "$M/trace-$trace.csv" >"$M/record-$trace.log" 2>&1
        rc=$?
        say "record $trace: exit $rc: $(tail -1 "$M/record-$trace.log")"
        [ -s "$M/trace-$trace.csv" ] || { status=1; continue; }
        for r in pool_on_demand expandable_pool cuda_async; do
            LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} limited 120 "$S/bin/rmm-replay" \
                "$M/trace-$trace.csv" --resource "$r" --quiet --json "$M/$trace-$r.json" \
                --series "$M/series-$trace-$r.csv" --plot "$M/plot-$trace-$r.png" --x-axis index >"$M/replay-$trace-$r.txt" 2>&1
            rc=$?
            say "replay $trace on $r: exit $rc; $(grep -E 'peak reserved' "$M/replay-$trace-$r.txt" | tr -s ' ')"
            [ "$rc" -eq 0 ] || status=1
        done
        PYTHONPATH=$rmm_site limited 150 python3 "$bench" replay-rmm "$M/trace-$trace.csv" \
            "$M/series-$trace-rmm_26.10_pool.csv" >"$M/replay-$trace-rmm.log" 2>&1
        rc=$?
        tail -1 "$M/replay-$trace-rmm.log" >"$M/$trace-rmm_26.10_pool.json"
        say "replay $trace on RMM 26.10's pool: exit $rc: $(tail -1 "$M/replay-$trace-rmm.log")"
        [ "$rc" -eq 0 ] || status=1
    done
    for mode in "" --expandable; do
        local name=torch_caching${mode:+_expandable}
        limited 150 python3 "$bench" torch-caching $mode >"$M/$name.log" 2>&1
        rc=$?
        tail -1 "$M/$name.log" >"$M/torch-$name.json"
        say "PyTorch's allocator ${mode:-(default)}: exit $rc: $(tail -1 "$M/$name.log")"
        [ "$rc" -eq 0 ] || status=1
    done
    PYTHONPATH=$ours limited 150 python3 "$bench" trim >"$M/trim.log" 2>&1
    rc=$?
    tail -1 "$M/trim.log" >"$M/torch-expandable_pool_in_process.json"
    say "trim after the loop: exit $rc: $(tail -1 "$M/trim.log")"
    [ "$rc" -eq 0 ] || status=1
    python3 "$bench" summarize "$M" 2>&1 | tee -a "$SUMMARY"
}

case "${1:-}" in
stage)
    stage
    ;;
run)
    shift
    PARTS=" ${*:-tests bench memory} "
    mkdir -p "$OUT"
    : >"$SUMMARY"
    [ -x "$S/bin/rmm_core_tests" ] || { echo "stage/vmm is not here: carry [\"stage/vmm\"] (stage it with: bash scripts/gpu-vmm.sh stage)"; exit 1; }
    say "expandable pool on the GPU at $(date -u +%FT%TZ), commit $(cat "$S/COMMIT" 2>/dev/null): $(nvidia-smi -L 2>/dev/null | tr '\n' ';')"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    [[ $PARTS == *" tests "* ]] && run_tests
    [[ $PARTS == *" bench "* ]] && run_bench
    [[ $PARTS == *" memory "* ]] && run_memory
    say "gpu-vmm: $([ "$status" -eq 0 ] && echo ok || echo FAILED) (parts:$PARTS; $OUT/vmm-summary.txt)"
    # The device tool returns a few files per call: everything else travels in one archive.
    # (Written beside $OUT first: tar fails on a folder that changes while it reads it.)
    tar czf "$OUT.tgz" -C "$OUT" --exclude vmm-summary.txt . &&
        find "$OUT" -mindepth 1 ! -name vmm-summary.txt -delete && mv "$OUT.tgz" "$OUT/vmm-out.tgz"
    exit "$status"
    ;;
*)
    echo "usage: $0 stage | run [tests] [bench] [memory]" >&2
    exit 2
    ;;
esac
