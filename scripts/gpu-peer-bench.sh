#!/usr/bin/env bash
# RMM's own C++ benchmarks on the GPU machine, ours against RAPIDS RMM 26.10 (from the repo root,
# with stage/ carried: scripts/gpu-stage.sh, then scripts/peer-bench-stage.sh). No cargo, no network.
#
#   bash scripts/gpu-peer-bench.sh      # build both variants (nvcc + g++), run, table; logs in $OUT
#
# Unpacks stage/cpp (our librmm_rs.so, CCCL 3.5, RMM's benchmark sources, rapids-logger) and
# stage/peerbench (Google Benchmark, RMM's librmm), then runs scripts/peer/bench.sh, which builds
# RMM's cpp/benchmarks unmodified three times (find_package(rmm) of ours; RMM 26.10's librmm; RMM
# 26.08's, the line of the sources) and runs each program with --benchmark_min_time=0.05s. Results:
# $OUT/peer-bench/peer-bench.md and .csv (ours vs each RMM, ratios), the JSON of each program and variant, summary.txt. The build dir,
# build/peer-bench-gpu, stays on a warm machine: a second call only runs.
# Environment: OUT (default /tmp/rmm-gpu-out), RMM_PEER_BENCH_MIN_TIME, RMM_PEER_BENCH_TIMEOUT,
# RMM_PEER_BENCH_VARIANTS, RMM_PEER_JOBS, and scripts/peer/bench.sh's RMM_PEER_BENCH_REPETITIONS,
# RMM_PEER_BENCH_FALLBACK_ONLY, RMM_PEER_RANDOM_RUNS, RMM_PEER_REPLAY_LOGS (scripts/bench-issue27.sh
# sets them all).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
STAGE=$ROOT/stage
OUT=${OUT:-/tmp/rmm-gpu-out}
W=$ROOT/build/peer-bench-gpu
LOGS=${RMM_PEER_OUT:-$OUT/peer-bench}
mkdir -p "$LOGS" "$W/src"
for f in cpp/librmm_rs.so cpp/cccl.tar.gz cpp/peer-tests.tar.gz peerbench/gbench.tar.gz peerbench/librmm-26.10.tar.gz \
    peerbench/librmm-26.08.tar.gz; do
    [ -f "$STAGE/$f" ] || { echo "peer-bench: stage/$f is missing (run scripts/gpu-stage.sh and scripts/peer-bench-stage.sh here first)"; exit 1; }
done
logger=$(ls "$STAGE"/cpp/rapids_logger-*.whl 2>/dev/null | head -1)
[ -n "$logger" ] || { echo "peer-bench: no stage/cpp/rapids_logger-*.whl"; exit 1; }
if [ ! -f "$W/src/.unpacked" ]; then
    mkdir -p "$W/src/gbench" "$W/src/librmm-26.10" "$W/src/librmm-26.08" &&
        tar -C "$W/src" -xzf "$STAGE/cpp/cccl.tar.gz" &&
        tar -C "$W/src" -xzf "$STAGE/cpp/peer-tests.tar.gz" &&
        tar -C "$W/src/gbench" -xzf "$STAGE/peerbench/gbench.tar.gz" &&
        tar -C "$W/src/librmm-26.10" -xzf "$STAGE/peerbench/librmm-26.10.tar.gz" &&
        tar -C "$W/src/librmm-26.08" -xzf "$STAGE/peerbench/librmm-26.08.tar.gz" && touch "$W/src/.unpacked" ||
        { echo "peer-bench: unpacking the stage failed"; exit 1; }
fi
export RMM_PEER_PREBUILT_LIBRARY=$STAGE/cpp/librmm_rs.so
export RMM_PEER_CCCL_DIR=$W/src/nvidia/cu13/include/cccl
export RMM_PEER_BENCH_DIR=$W/src/rmm-cpp-benchmarks
export RMM_PEER_GBENCH_PREFIX=$W/src/gbench
export RMM_PEER_RMM_DIR=$W/src
export RMM_PEER_RAPIDS_LOGGER=$logger
export RMM_PEER_BUILD_DIR=$W
export RMM_PEER_OUT=$LOGS
if ! command -v nvcc >/dev/null; then
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && export PATH=$d/bin:$PATH && export CUDA_HOME=$d && break
    done
fi
bash scripts/peer/bench.sh 2>&1 | tee "$LOGS/summary.txt"
exit "${PIPESTATUS[0]}"
