#!/usr/bin/env bash
# C++ suite: configures bindings-cpp with CMake (which builds librmm.so through cargo), builds the
# GoogleTest tests and runs them with ctest. GPU tests skip themselves in host mode.
# CCCL (>= 3.1) and the CUDA runtime headers come from PyPI wheels (bindings-cpp/cmake/fetch-cccl.sh,
# into $RMM_CCCL_DIR): no nvcc or CUDA toolkit is needed.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

BUILD_DIR=${RMM_CPP_BUILD_DIR:-build/cpp}
CCCL_DIR=${RMM_CCCL_DIR:-$RMM_ROOT/build/cccl}
CCCL_INCLUDE_DIRS=

# Fetches the CCCL and CUDA runtime headers (pip download of the wheels) and sets CCCL_INCLUDE_DIRS.
fetch_cccl() {
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3 python3-pip || return 1
    fi
    local out
    out=$(bash bindings-cpp/cmake/fetch-cccl.sh "$CCCL_DIR") || return 1
    CCCL_INCLUDE_DIRS=$(printf '%s\n' "$out" | tail -n 1)
    echo "CCCL and CUDA runtime headers: $CCCL_INCLUDE_DIRS"
}

if [ ! -f bindings-cpp/CMakeLists.txt ]; then
    fail "bindings-cpp/CMakeLists.txt is missing: the C++ CMake project and its GoogleTest tests do not exist yet"
    finish cpp
    exit
fi

apt_install cmake ninja-build g++ libgtest-dev || fail "could not install cmake ninja-build g++ libgtest-dev"

[ "$RMM_FAILED" -eq 0 ] && step "cpp cccl headers: fetch-cccl.sh $CCCL_DIR" fetch_cccl
if [ "$RMM_FAILED" -eq 0 ]; then
    # shellcheck disable=SC2086  # RMM_CPP_CMAKE_ARGS is a list of extra -D options
    step "cpp configure: cmake -S bindings-cpp -B $BUILD_DIR -G Ninja" \
        cmake -S bindings-cpp -B "$BUILD_DIR" -G Ninja "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_INCLUDE_DIRS" ${RMM_CPP_CMAKE_ARGS:-}
fi
[ "$RMM_FAILED" -eq 0 ] && step "cpp build: cmake --build $BUILD_DIR" cmake --build "$BUILD_DIR"
if [ "$RMM_FAILED" -eq 0 ]; then
    if has_gpu; then label="cpp cpu+gpu: ctest"; else label="cpp cpu: ctest (gpu tests skip)"; fi
    step "$label" ctest --test-dir "$BUILD_DIR" --output-on-failure
fi

finish cpp
