#!/usr/bin/env bash
# The README's tour command: builds everything, runs the Rust tour, then the shared stop: one Python
# process where C++, Rust and Python allocate from ONE current device resource (librmm's registry)
# and read the same statistics. Works with or without a GPU (host mode says so in one line per part).
# Installs what it needs on Debian/Ubuntu (cmake, ninja, g++, pip; the CCCL headers from PyPI).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../ci/lib.sh"
cd "$RMM_ROOT"

if ! command -v cargo >/dev/null 2>&1; then
    echo "ERROR: cargo not found: install Rust (https://rustup.rs) first" >&2
    exit 1
fi
need_python
# g++ for librmm's C++ half (cxx) and the C++ part, cmake + ninja for the C++ part, pip for the CCCL
# headers (fetch-cccl.sh downloads them as wheels).
for tool in cmake:cmake ninja:ninja-build g++:g++; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || apt_install "${tool#*:}"
done
python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip

# Runs a build step with its output kept in build/tour/logs/NAME.log, shown only if the step fails.
quietly() {
    local name=$1
    shift
    mkdir -p "$RMM_ROOT/build/tour/logs"
    local log_file="$RMM_ROOT/build/tour/logs/$name.log"
    if ! "$@" >"$log_file" 2>&1; then
        cat "$log_file" >&2
        echo "ERROR: '$*' failed (log: $log_file)" >&2
        return 1
    fi
}

log "build: cargo build --release --workspace"
cargo build --release --locked --workspace

log "Rust: cargo run --release -p rmm --example tour"
cargo run --release --locked -q -p rmm --example tour

log "build: the shared stop (rmm._rmm, the Rust and C++ tour libraries; logs in build/tour/logs)"
TARGET=$(target_dir)
build_python_ext
cargo build --release --locked -q -p rmm --example tour_shared
CCCL_INCLUDE_DIRS=$(bash bindings-cpp/cmake/fetch-cccl.sh "$RMM_ROOT/build/cccl" | tail -n 1)
PREFIX=$RMM_ROOT/build/tour/prefix
# The installed rmm package (librmm_rs.so as cargo just built it, headers, CMake config), then the C++
# part against it with find_package(rmm), as any downstream project builds.
quietly configure-rmm cmake -S bindings-cpp -B build/tour/rmm -G Ninja -DRMM_BUILD_TESTS=OFF \
    "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_INCLUDE_DIRS" "-DRMM_PREBUILT_LIBRARY=$TARGET/release/librmm_rs.so"
quietly build-rmm cmake --build build/tour/rmm
rm -rf "$PREFIX"
quietly install-rmm cmake --install build/tour/rmm --prefix "$PREFIX"
quietly configure-cpp env RMM_CCCL_INCLUDE_DIRS="$CCCL_INCLUDE_DIRS" \
    cmake -S bindings-cpp/examples/tour -B build/tour/cpp -G Ninja "-DCMAKE_PREFIX_PATH=$PREFIX"
quietly build-cpp cmake --build build/tour/cpp
echo "built: $PREFIX/lib/librmm_rs.so, build/tour/cpp/librmm_tour_cpp.so, $TARGET/release/examples/libtour_shared.so"

log "C++, Rust and Python share one resource (python3 scripts/tour_shared.py)"
buffers_lib=()
[ -f build/tour/cpp/librmm_tour_buffers.so ] && buffers_lib=(build/tour/cpp/librmm_tour_buffers.so)
PYTHONPATH="$RMM_ROOT/bindings-python/python" python3 -u scripts/tour_shared.py \
    "$PREFIX/lib/librmm_rs.so" build/tour/cpp/librmm_tour_cpp.so "$TARGET/release/examples/libtour_shared.so" \
    "${buffers_lib[@]}"

echo
echo "Tour done: one Rust core served Rust, C++ and Python, sharing one resource in one process."
echo "Run 'bash scripts/test.sh' for the test suites."
