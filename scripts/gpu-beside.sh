#!/usr/bin/env bash
# GPU acceptance of rmm-rs beside RAPIDS RMM (issue 25; docs/beside-rmm.md). Runs THERE, on the GPU
# machine, from the repository root with stage/ and .whl/ carried (scripts/gpu-stage.sh stages
# stage/beside/: our rmm-rs-cu13 wheel and the cuDF-style test extension). No cargo, no network.
#
# Installs RMM 26.10's own wheels (.whl/: rmm-cu13, librmm-cu13, rapids-logger; unmodified) and our
# wheel into /tmp/beside-site, then runs the parts:
#   pytest   beside/tests with the GPU tests (every resource of ours as RMM's current device resource,
#            DeviceBuffer, CuPy, Numba and PyTorch allocators, an RMM resource under our pool,
#            Dask-CUDA with two workers on our resources (.whl/dask/), the cuDF-style extension)
#   cpp      beside/tests/cpp/run.sh: the C++ tests built here with g++ against RMM's wheel
#   peer-py  RMM's own Python suite (stage/peer/rmm-python) against RMM itself, with rmm_rs imported
#            (pytest -p rmm_rs)
#   bench    benchmarks/beside/bench.py: ours and RMM side by side (the table: bench.txt)
#
#   bash scripts/gpu-beside.sh [PART...]     (default: pytest cpp peer-py bench)
#
# Output in $OUT (default /tmp/rmm-beside-out): beside-summary.txt, beside-pytest.log,
# beside-cpp.log, beside-peer-python.log, bench.txt, bench.json; the last line printed is
#   beside: pytest P/F/S, cpp P/F/S, peer-py P/F/S, bench targets M/N
# (passed/failed/skipped). Exit status 1 when anything failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
PARTS=" ${*:-pytest cpp peer-py bench} "
want() { [[ $PARTS == *" $1 "* ]]; }
OUT=${OUT:-/tmp/rmm-beside-out}
mkdir -p "$OUT"
STAGE=$ROOT/stage/beside
SITE=/tmp/beside-site
SUMMARY=$OUT/beside-summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
num() { grep -oE "[0-9]+ $1" <<<"$2" | head -1 | grep -oE '^[0-9]+' || echo 0; }
status=0
line_parts=()

say "rmm-rs beside RMM, GPU run at $(date -u +%FT%TZ): $(nvidia-smi -L 2>/dev/null | head -2 | tr '\n' ';' || echo 'no GPU')"

# ---- Install ------------------------------------------------------------------------------------
wheel=$(ls "$STAGE"/rmm_rs_cu13-*.whl 2>/dev/null | head -1)
rmm_wheels=$(ls .whl/rmm_cu13-26.10.*.whl .whl/librmm_cu13-26.10.*.whl .whl/rapids_logger-*.whl 2>/dev/null)
if [ -z "$wheel" ] || [ "$(wc -w <<<"$rmm_wheels")" -ne 3 ]; then
    say "install: missing stage/beside/rmm_rs_cu13-*.whl or RMM's three wheels in .whl/ (run scripts/gpu-stage.sh here)"
    say "beside: not run"
    exit 1
fi
rm -rf "$SITE"
# shellcheck disable=SC2086
if ! python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" $rmm_wheels "$wheel" >"$OUT/beside-install.log" 2>&1; then
    cat "$OUT/beside-install.log"
    say "install: pip install failed (beside-install.log)"
    exit 1
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import rmm, rmm_rs; print("rmm", rmm.__version__, rmm.__file__); print("rmm_rs", rmm_rs.__version__, rmm_rs.__file__, "host mode:", rmm_rs.is_host_mode())' \
    2>&1 | tee -a "$SUMMARY"
if ls .whl/dask/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/dask-site .whl/dask/*.whl \
        >/dev/null 2>&1 && export RMM_TEST_DASK_SITE=/tmp/dask-site
fi
export RMM_RS_TEST_EXT_DIR=$STAGE/test-ext

# ---- pytest -------------------------------------------------------------------------------------
if want pytest; then
    # From the repository root: the source folder beside/rmm_rs (no compiled module) is not on sys.path.
    timeout 540 python3 -m pytest beside/tests -c beside/pyproject.toml -p no:cacheprovider -rs >"$OUT/beside-pytest.log" 2>&1
    rc=$?
    result=$(grep -E '(passed|failed|skipped|error|no tests ran).* in [0-9.]+s' "$OUT/beside-pytest.log" | tail -1)
    p=$(num passed "$result") f=$(($(num failed "$result") + $(num 'errors?' "$result"))) s=$(num skipped "$result")
    [ -z "$result" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; } && f=$((f + 1))
    grep -E '^(FAILED|ERROR|SKIPPED)' "$OUT/beside-pytest.log" | tee -a "$SUMMARY"
    say "pytest: $p passed, $f failed, $s skipped (exit $rc; beside-pytest.log)"
    line_parts+=("pytest $p/$f/$s")
    [ "$f" -eq 0 ] || status=1
fi

# ---- C++ ----------------------------------------------------------------------------------------
if want cpp; then
    cuda_home=${CUDA_HOME:-/usr/local/cuda}
    bash beside/tests/cpp/run.sh "$SITE" "$SITE/rmm_rs/lib" "$cuda_home/include" /tmp/beside-cpp "$cuda_home/lib64" \
        >"$OUT/beside-cpp.log" 2>&1
    rc=$?
    result=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$OUT/beside-cpp.log" | tail -1)
    p=$(num passed "$result") f=$(num failed "$result") s=$(num skipped "$result")
    [ -z "$result" ] && f=1
    grep -E '^\[ (FAIL|SKIP) \]|BUILD FAILED' "$OUT/beside-cpp.log" | tee -a "$SUMMARY"
    say "cpp: $p passed, $f failed, $s skipped (exit $rc; beside-cpp.log)"
    line_parts+=("cpp $p/$f/$s")
    [ "$f" -eq 0 ] && [ "$rc" -eq 0 ] || status=1
fi

# ---- RMM's own Python suite with rmm_rs imported --------------------------------------------------
# `-p rmm_rs` imports our module as a pytest plugin before the suite (pytest stops with an error if
# it cannot): librmm_rs.so, our extension and RMM's own modules all loaded in the one process.
if want peer-py; then
    if [ -f stage/peer/rmm-python/conftest.py ]; then
        RMM_PEER_PYTHON_DIR=$ROOT/stage/peer/rmm-python RMM_PYTHONPATH=$SITE RMM_PEER_INSTALL=0 \
            RMM_PEER_PYTEST_ARGS="-p rmm_rs" timeout 540 bash scripts/peer/python.sh >"$OUT/beside-peer-python.log" 2>&1
        result=$(tail -1 "$OUT/beside-peer-python.log")
        if grep -qE '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' <<<"$result"; then
            p=$(num passed "$result") f=$(num failed "$result") s=$(num skipped "$result")
        else
            p=0 f=1 s=0
        fi
        say "peer-py: $p passed, $f failed, $s skipped (RMM 26.10's suite on RMM 26.10 with -p rmm_rs; RMM alone: 1211 passed, 392 skipped)"
    else
        p=0 f=1 s=0
        say "peer-py: stage/peer/rmm-python not staged"
    fi
    line_parts+=("peer-py $p/$f/$s")
    [ "$f" -eq 0 ] || status=1
fi

# ---- Benchmark ----------------------------------------------------------------------------------
if want bench; then
    timeout 480 python3 benchmarks/beside/bench.py --ext-dir "$RMM_RS_TEST_EXT_DIR" --json "$OUT/bench.json" \
        >"$OUT/bench.txt" 2>"$OUT/bench.err"
    rc=$?
    cat "$OUT/bench.txt" | tee -a "$SUMMARY"
    result=$(grep -E '^bench-beside:' "$OUT/bench.txt" | tail -1)
    if [ "$rc" -ne 0 ] || [ -z "$result" ]; then
        tail -20 "$OUT/bench.err"
        say "bench: exit $rc (bench.err)"
        line_parts+=("bench failed")
        status=1
    else
        line_parts+=("bench targets $(grep -oE '[0-9]+/[0-9]+ met' <<<"$result" | cut -d' ' -f1)")
    fi
fi

joined=$(IFS=','; echo "${line_parts[*]}" | sed 's/,/, /g')
say "beside: $joined"
exit "$status"
