#!/usr/bin/env bash
# RMM's own C++ tests on the GPU machine (from the repo root, with stage/ carried; see
# scripts/gpu-stage.sh): unpacks what gpu-stage.sh staged (RMM's tests, CCCL 3.5, googletest,
# rapids-logger) and runs scripts/peer/cpp.sh against the staged librmm_rs.so, nvcc compiling the .cu
# sources. No cargo and no network are needed.
#
#   bash scripts/gpu-peer-cpp.sh        # build (nvcc + g++) and run; logs in $OUT (or $RMM_PEER_OUT)
#
# Logs: summary.txt (per-source results, per-program counts, the final `N passed, N failed, N
# skipped`), package.log, configure.log, build.log, ctest.log, junit.xml, results.txt (each case).
#
# The build dir is build/peer-cpp-gpu (inside the repo, so it survives between calls on a warm
# machine): if one call runs out of time during the tests, a second one only runs them.
# Environment: OUT (default /tmp/rmm-gpu-out), RMM_PEER_CTEST_JOBS (default 1: several of RMM's
# tests compare cudaMemGetInfo and want the GPU to themselves), RMM_PEER_CTEST_ARGS, RMM_PEER_JOBS.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
STAGE=$ROOT/stage
OUT=${OUT:-/tmp/rmm-gpu-out}
W=$ROOT/build/peer-cpp-gpu
LOGS=${RMM_PEER_OUT:-$OUT}
mkdir -p "$LOGS" "$W/src"
for f in librmm_rs.so cccl.tar.gz googletest.tar.gz peer-tests.tar.gz; do
    [ -f "$STAGE/cpp/$f" ] || { echo "peer-cpp: stage/cpp/$f is missing (run scripts/gpu-stage.sh here first)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
done
logger=$(ls "$STAGE"/cpp/rapids_logger-*.whl 2>/dev/null | head -1)
if [ ! -f "$W/src/.unpacked" ]; then
    tar -C "$W/src" -xzf "$STAGE/cpp/cccl.tar.gz" &&
        tar -C "$W/src" -xzf "$STAGE/cpp/googletest.tar.gz" &&
        tar -C "$W/src" -xzf "$STAGE/cpp/peer-tests.tar.gz" && touch "$W/src/.unpacked" ||
        { echo "peer-cpp: unpacking stage/cpp failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
fi
export RMM_PEER_PREBUILT_LIBRARY=$STAGE/cpp/librmm_rs.so
export RMM_PEER_CCCL_DIR=$W/src/nvidia/cu13/include/cccl
export RMM_PEER_TESTS_DIR=$W/src/rmm-cpp
export RMM_GOOGLETEST_SOURCE=$W/src/googletest
export RMM_PEER_BUILD_DIR=$W
export RMM_PEER_OUT=$LOGS
[ -n "$logger" ] && export RMM_PEER_RAPIDS_LOGGER=$logger
export RMM_PEER_CTEST_JOBS=${RMM_PEER_CTEST_JOBS:-1}
if ! command -v nvcc >/dev/null; then
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && export PATH=$d/bin:$PATH && export CUDA_HOME=$d && break
    done
fi
bash scripts/peer/cpp.sh 2>&1 | tee "$LOGS/summary.txt"
exit "${PIPESTATUS[0]}"
