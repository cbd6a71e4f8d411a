#!/usr/bin/env bash
# C++ suite: configures bindings-cpp with CMake (which builds librmm_rs.so through cargo), builds the
# GoogleTest tests and runs them with ctest. GPU tests skip themselves in host mode. Then installs the
# CMake package into a temporary prefix, moves it (it must be relocatable), and builds and runs the
# downstream example bindings-cpp/examples against it with find_package(rmm), linking librmm_rs.so and
# then librmm_rs.a.
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
# For scripts/test.sh's valgrind suite (ci/sanitize.sh), which runs after this one when valgrind is there.
apt_install valgrind >/dev/null 2>&1 || note "valgrind could not be installed: scripts/test.sh skips its valgrind suite"

[ "$RMM_FAILED" -eq 0 ] && step "cpp cccl headers: fetch-cccl.sh $CCCL_DIR" fetch_cccl
if [ "$RMM_FAILED" -eq 0 ]; then
    # shellcheck disable=SC2086  # RMM_CPP_CMAKE_ARGS is a list of extra -D options
    step "cpp configure: cmake -S bindings-cpp -B $BUILD_DIR -G Ninja" \
        cmake -S bindings-cpp -B "$BUILD_DIR" -G Ninja "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_INCLUDE_DIRS" ${RMM_CPP_CMAKE_ARGS:-}
fi
[ "$RMM_FAILED" -eq 0 ] && step "cpp build: cmake --build $BUILD_DIR" cmake --build "$BUILD_DIR"
built=$((1 - RMM_FAILED))
if [ "$RMM_FAILED" -eq 0 ]; then
    if has_gpu; then label="cpp cpu+gpu: ctest"; else label="cpp cpu: ctest (gpu tests skip)"; fi
    step "$label" ctest --test-dir "$BUILD_DIR" --output-on-failure
fi

PKG_TMP=
PREFIX=

# Installs into $PKG_TMP/installed, then moves the tree to $PREFIX: a config that remembered where it
# was installed (or the build tree) would break there. Also rejects build-tree paths in the config.
install_package() {
    cmake --install "$BUILD_DIR" --prefix "$PKG_TMP/installed" || return 1
    mv "$PKG_TMP/installed" "$PREFIX" || return 1
    local f
    for f in lib/librmm_rs.so lib/librmm_rs.a include/rmm/rmm_c.h include/rmm_rs/rmm_c.h include/rmm/mr/pool_memory_resource.hpp \
        lib/cmake/rmm/rmm-config.cmake lib/cmake/rmm/rmm-config-version.cmake lib/cmake/rmm/fetch-cccl.sh; do
        [ -f "$PREFIX/$f" ] || { echo "ERROR: $f is not installed" >&2; return 1; }
    done
    if grep -rn -e "$RMM_ROOT" -e "$PKG_TMP/installed" "$PREFIX/lib/cmake/rmm"; then
        echo "ERROR: the installed CMake package names build or install paths (above)" >&2
        return 1
    fi
}

# Configures (fresh build dir), builds and runs the example against $PREFIX; extra args go to cmake.
# CCCL comes through the environment variable, as a user's shell would set it.
build_and_run_example() {
    local dir=$1
    shift
    rm -rf "$dir"
    RMM_CCCL_INCLUDE_DIRS="$CCCL_INCLUDE_DIRS" cmake -S bindings-cpp/examples -B "$dir" -G Ninja \
        "-DCMAKE_PREFIX_PATH=$PREFIX" "$@" || return 1
    cmake --build "$dir" || return 1
    "$dir/example"
}

# Configures and builds the tour's C++ library (a shared library, run by scripts/tour.sh) against $PREFIX.
build_tour_library() {
    local dir=$1
    rm -rf "$dir"
    RMM_CCCL_INCLUDE_DIRS="$CCCL_INCLUDE_DIRS" cmake -S bindings-cpp/examples/tour -B "$dir" -G Ninja \
        "-DCMAKE_PREFIX_PATH=$PREFIX" || return 1
    cmake --build "$dir" || return 1
    [ -f "$dir/librmm_tour_cpp.so" ]
}

if [ "$built" -eq 1 ]; then
    PKG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rmm-cpp-package.XXXXXX")
    trap 'rm -rf "$PKG_TMP"' EXIT
    PREFIX=$PKG_TMP/prefix
    step "cpp install: cmake --install $BUILD_DIR, relocated to $PREFIX" install_package
    if [ "$RMM_FAILED" -eq 0 ] || [ -f "$PREFIX/lib/cmake/rmm/rmm-config.cmake" ]; then
        step "cpp example: find_package(rmm) + rmm::rmm (librmm_rs.so)" build_and_run_example "$PKG_TMP/example"
        step "cpp example: find_package(rmm) + rmm::rmm_static (librmm_rs.a)" \
            build_and_run_example "$PKG_TMP/example-static" -DRMM_EXAMPLE_STATIC=ON
        step "cpp tour library: find_package(rmm) + rmm::rmm (bindings-cpp/examples/tour)" \
            build_tour_library "$PKG_TMP/tour"
    fi
fi

# RMM's own C++ tests (../shared/peer-tests/rmm-cpp, unmodified) against our package, host mode:
# scripts/peer/cpp.sh builds a set of RMM's test programs with g++ (RMM's flags, -Werror, C++20) and
# runs them; a failure that only lacks a GPU (CUDA missing) is expected here, any other fails the
# suite. The set (RMM_CI_PEER_TARGETS) keeps the build to minutes; the full list runs on the GPU
# machine (scripts/gpu-peer-cpp.sh). Skipped when the peer tests are not beside the repository.
CI_PEER_TARGETS=${RMM_CI_PEER_TARGETS:-"PROCESS_IS_EXITING_TEST PROCESS_IS_EXITING_SHUTDOWN_TEST ERROR_MACROS_TEST FAILURE_CALLBACK_TEST TRACKING_TEST LOGGER_TEST DEFAULT_MR_REF_TEST LIMITING_TEST STATISTICS_TEST ALIGNED_TEST"}
if [ "$built" -eq 1 ] && [ -f "${RMM_PEER_TESTS_DIR:-$RMM_ROOT/../shared/peer-tests/rmm-cpp}/CMakeLists.txt" ]; then
    step "cpp peer: RMM's own C++ tests, host mode (scripts/peer/cpp.sh)" \
        env RMM_PEER_TARGETS="$CI_PEER_TARGETS" RMM_PEER_HOST_MODE_OK=1 bash scripts/peer/cpp.sh
else
    note "cpp peer: RMM's C++ tests not found beside the repository (../shared/peer-tests/rmm-cpp)"
fi

finish cpp
