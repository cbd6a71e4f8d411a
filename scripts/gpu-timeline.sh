#!/usr/bin/env bash
# Issue 29's GPU acceptance (runs THERE, on the GPU machine, from the repo root with stage/ carried):
# one Python process where PyTorch (on rmm's torch allocator), CuPy, the tour's C++ library and its
# Rust library allocate while the memory timeline records; one snapshot must show all four with their
# languages' stacks, and PyTorch's own readers (torch.cuda._memory_viz) must read it; then the cost
# per event with the recorder off and on. See scripts/gpu_timeline.py.
#
# Stage HERE first: bash scripts/gpu-stage.sh (the wheel, stage/cpp/librmm_rs.so and the tour's
# libraries stage/tour/*.so). Needs python3 with torch (CUDA) and cupy THERE.
#
# Output: $OUT/timeline.log (the checks, one PASS/FAIL line each, ending in ALL PASS), and in
# $OUT/timeline/: timeline.pickle (drop into https://pytorch.org/memory_viz), .json, .csv,
# trace_plot.html and segment_plot.html (torch's viewers over our file). Exit status 1 on a failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
STAGE=$PWD/stage
OUT=${OUT:-/tmp/rmm-gpu-out}
mkdir -p "$OUT/timeline"
LOG=$OUT/timeline.log
: >"$LOG"

missing=()
for f in "$STAGE/cpp/librmm_rs.so" "$STAGE/tour/librmm_tour_cpp.so" "$STAGE/tour/libtour_shared.so"; do
    [ -f "$f" ] || missing+=("$f")
done
wheel=$(ls "$STAGE"/wheels/*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || missing+=("$STAGE/wheels/*.whl")
if [ ${#missing[@]} -gt 0 ]; then
    echo "ERROR: not staged (run bash scripts/gpu-stage.sh here first): ${missing[*]}" | tee -a "$LOG"
    exit 1
fi
if [ ! -d /tmp/site/rmm ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$wheel" >>"$LOG" 2>&1 ||
        { echo "ERROR: pip install of $wheel failed" | tee -a "$LOG"; exit 1; }
fi
for module in torch cupy; do
    python3 -c "import $module" 2>/dev/null || { echo "ERROR: python3 cannot import $module here" | tee -a "$LOG"; exit 1; }
done

PYTHONPATH=/tmp/site timeout 500 python3 -u scripts/gpu_timeline.py "$STAGE/cpp/librmm_rs.so" \
    "$STAGE/tour/librmm_tour_cpp.so" "$STAGE/tour/libtour_shared.so" "$OUT/timeline" 2>&1 | tee -a "$LOG"
status=${PIPESTATUS[0]}
echo "gpu-timeline: exit $status (log: $LOG; snapshot: $OUT/timeline/timeline.pickle)"
exit "$status"
