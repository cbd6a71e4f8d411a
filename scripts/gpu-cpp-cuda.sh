#!/usr/bin/env bash
# C++ suite with the CUDA (nvcc) tests, on the GPU machine: configures bindings-cpp against a
# PREBUILT librmm_rs.so (no cargo there) and a carried CCCL (>= 3.1) include dir, builds every test
# (test_cuda_thrust.cu with nvcc included), runs ctest and writes its output to OUT_DIR.
#
#   scripts/gpu-cpp-cuda.sh LIBRMM_SO CCCL_INCLUDE_DIR OUT_DIR
#
# LIBRMM_SO         librmm_rs.so built here (cargo build --release -p rmm-cpp; target/release/librmm_rs.so)
# CCCL_INCLUDE_DIR  the dir holding cuda/, cub/, thrust/ of CCCL >= 3.1 (e.g. the pip wheel's
#                   nvidia/cu13/include/cccl): the toolkit's CCCL 3.0.1 is too old for cuda::mr
# OUT_DIR           gets configure.log, build.log and ctest.log
#
# Environment: RMM_GOOGLETEST_SOURCE  googletest sources (as /usr/src/googletest), for a machine
#              where find_package(GTest) finds nothing; RMM_CPP_CUDA_BUILD_DIR  the build dir
#              (default: build/cpp-cuda); CUDA_HOME  the toolkit (default: nvcc's, or /usr/local/cuda).
# No network is needed. Exit status: ctest's, or the failing configure/build step's.
set -uo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 LIBRMM_SO CCCL_INCLUDE_DIR OUT_DIR" >&2
    exit 2
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
abs() { (cd "$(dirname "$1")" && echo "$PWD/$(basename "$1")"); }
LIBRMM=$(abs "$1")
CCCL=$(abs "$2")
OUT=$3
mkdir -p "$OUT" || exit 1
OUT=$(abs "$OUT")
BUILD=${RMM_CPP_CUDA_BUILD_DIR:-build/cpp-cuda}

[ -f "$LIBRMM" ] || { echo "no librmm_rs.so at $LIBRMM" | tee "$OUT/configure.log" >&2; exit 2; }
[ -f "$CCCL/cuda/__memory_resource/any_resource.h" ] ||
    { echo "$CCCL is not a CCCL >= 3.1 include dir (no cuda/__memory_resource/any_resource.h)" | tee "$OUT/configure.log" >&2; exit 2; }

NVCC=$(command -v nvcc || true)
if [ -z "$NVCC" ]; then
    for d in "${CUDA_HOME:-}" /usr/local/cuda; do
        [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && NVCC=$d/bin/nvcc && break
    done
fi
[ -n "$NVCC" ] || { echo "no nvcc found (PATH, CUDA_HOME, /usr/local/cuda)" | tee "$OUT/configure.log" >&2; exit 2; }
CUDA_ROOT=${CUDA_HOME:-$(cd "$(dirname "$NVCC")/.." && pwd)}
# The g++-compiled tests take the CUDA runtime headers from the toolkit, after the carried CCCL.
CUDA_INCLUDE=$CUDA_ROOT/include
[ -f "$CUDA_INCLUDE/cuda_runtime_api.h" ] ||
    { echo "no cuda_runtime_api.h in $CUDA_INCLUDE" | tee "$OUT/configure.log" >&2; exit 2; }

args=(-S bindings-cpp -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
      "-DRMM_PREBUILT_LIBRARY=$LIBRMM"
      "-DRMM_CCCL_INCLUDE_DIRS=$CCCL;$CUDA_INCLUDE"
      -DRMM_BUILD_CUDA_TESTS=ON "-DCMAKE_CUDA_COMPILER=$NVCC")
[ -n "${RMM_GOOGLETEST_SOURCE:-}" ] && args+=("-DRMM_GOOGLETEST_SOURCE=$RMM_GOOGLETEST_SOURCE")

echo "nvcc: $NVCC ($("$NVCC" --version | tail -1)); CCCL: $CCCL; librmm: $LIBRMM"
cmake "${args[@]}" >"$OUT/configure.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    tail -30 "$OUT/configure.log"
    echo "configure failed ($rc): see $OUT/configure.log"
    exit $rc
fi
cmake --build "$BUILD" -- -k 0 >"$OUT/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    grep -E "error|Error" "$OUT/build.log" | head -40
    echo "build failed ($rc): see $OUT/build.log"
    exit $rc
fi
ctest --test-dir "$BUILD" --output-on-failure >"$OUT/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Skipped|Failed|\*\*\*" "$OUT/ctest.log" | tail -30
echo "ctest exit status $rc: see $OUT/ctest.log"
exit $rc
