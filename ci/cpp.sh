#!/usr/bin/env bash
# C++ suite: configures bindings-cpp with CMake (which builds librmm.so through cargo), builds the
# GoogleTest tests and runs them with ctest. GPU tests skip themselves in host mode.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

BUILD_DIR=${RMM_CPP_BUILD_DIR:-build/cpp}

if [ ! -f bindings-cpp/CMakeLists.txt ]; then
    fail "bindings-cpp/CMakeLists.txt is missing: the C++ CMake project and its GoogleTest tests do not exist yet"
    finish cpp
    exit
fi

apt_install cmake ninja-build g++ libgtest-dev || fail "could not install cmake ninja-build g++ libgtest-dev"

if [ "$RMM_FAILED" -eq 0 ]; then
    # shellcheck disable=SC2086  # RMM_CPP_CMAKE_ARGS is a list of extra -D options
    step "cpp configure: cmake -S bindings-cpp -B $BUILD_DIR -G Ninja" \
        cmake -S bindings-cpp -B "$BUILD_DIR" -G Ninja ${RMM_CPP_CMAKE_ARGS:-}
fi
[ "$RMM_FAILED" -eq 0 ] && step "cpp build: cmake --build $BUILD_DIR" cmake --build "$BUILD_DIR"
if [ "$RMM_FAILED" -eq 0 ]; then
    if has_gpu; then label="cpp cpu+gpu: ctest"; else label="cpp cpu: ctest (gpu tests skip)"; fi
    step "$label" ctest --test-dir "$BUILD_DIR" --output-on-failure
fi

finish cpp
