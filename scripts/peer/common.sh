# Shared by scripts/peer/cpp.sh (RMM's C++ tests) and scripts/peer/bench.sh (RMM's C++ benchmarks):
# sourced, with ROOT (the repo root), BUILD (a build folder), OUT (a log folder) set and `say`/`die`
# defined. Defines:
#   unpack_wheel WHEEL DEST        unpacks a .whl (or a requirement pip downloads) into DEST
#   peer_install_package           our package (librmm + headers + CMake config) into $BUILD/prefix;
#                                  sets PREFIX and CCCL_DIRS (the CCCL include dir first)
#   peer_cudart                    prints libcudart.so.13 from the nvidia-cuda-runtime wheel when there
#                                  is no CUDA toolkit (nothing otherwise)
#   peer_rapids_logger             prints the rapids_logger/ prefix (include/, lib64/), unpacked from
#                                  RMM_PEER_RAPIDS_LOGGER (a folder or .whl) or downloaded
# Environment: RMM_PEER_PREBUILT_LIBRARY + RMM_PEER_CCCL_DIR (GPU machine: no cargo there),
# RMM_PEER_PREFIX (an installed package of ours to use instead of installing one),
# RMM_CUDA_RUNTIME_WHEEL, RMM_RAPIDS_LOGGER_WHEEL, RMM_PEER_RAPIDS_LOGGER.

CUDART_WHEEL=${RMM_CUDA_RUNTIME_WHEEL:-nvidia-cuda-runtime==13.0.96}
RAPIDS_LOGGER_WHEEL=${RMM_RAPIDS_LOGGER_WHEEL:-rapids-logger==0.3.0}

# Unpacks the wheel $1 (a .whl path, or a requirement pip downloads) into $2; prints nothing.
unpack_wheel() {
    local wheel=$1 dest=$2
    rm -rf "$dest" && mkdir -p "$dest" || return 1
    if [ ! -f "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest/whl" "$wheel" >&2 || return 1
        wheel=$(ls "$dest"/whl/*.whl | head -1)
    fi
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$dest"
}

# Our package: librmm + headers + CMake config, installed into $BUILD/prefix (log: $OUT/package.log).
peer_install_package() {
    PREFIX=$BUILD/prefix
    local pkg_args
    if [ -n "${RMM_PEER_PREBUILT_LIBRARY:-}" ]; then
        [ -n "${RMM_PEER_CCCL_DIR:-}" ] || die "RMM_PEER_PREBUILT_LIBRARY needs RMM_PEER_CCCL_DIR"
        local cuda_root=${CUDA_HOME:-}
        if [ -z "$cuda_root" ] && command -v nvcc >/dev/null; then cuda_root=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd); fi
        CCCL_DIRS="$RMM_PEER_CCCL_DIR;${cuda_root:-/usr/local/cuda}/include"
        pkg_args=("-DRMM_PREBUILT_LIBRARY=$RMM_PEER_PREBUILT_LIBRARY")
    else
        CCCL_DIRS=$(bash "$ROOT/bindings-cpp/cmake/fetch-cccl.sh" "$ROOT/build/cccl" | tail -n 1) || die "fetching CCCL failed"
        pkg_args=(-DRMM_CARGO_RELEASE=OFF)  # debug librmm here: the release build takes long on a small machine
    fi
    if [ -n "${RMM_PEER_PREFIX:-}" ]; then  # an installed package to reuse (e.g. scripts/peer/cpp.sh's)
        [ -f "$RMM_PEER_PREFIX/lib/cmake/rmm/rmm-config.cmake" ] || die "RMM_PEER_PREFIX=$RMM_PEER_PREFIX: no rmm package there"
        PREFIX=$RMM_PEER_PREFIX
        say "peer: our package from $PREFIX"
        return
    fi
    say "peer: installing our package into $PREFIX"
    if ! { cmake -S "$ROOT/bindings-cpp" -B "$BUILD/rmm" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMM_BUILD_TESTS=OFF \
            "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_DIRS" "${pkg_args[@]}" &&
           cmake --build "$BUILD/rmm" && cmake --install "$BUILD/rmm" --prefix "$PREFIX"; } >"$OUT/package.log" 2>&1; then
        tail -20 "$OUT/package.log"
        die "building/installing our package failed (see $OUT/package.log)"
    fi
}

# libcudart.so.13 from the nvidia-cuda-runtime wheel, when there is neither a prebuilt library (GPU
# machine) nor nvcc; prints its path, or nothing when the toolkit's is used.
peer_cudart() {
    if [ -z "${RMM_PEER_PREBUILT_LIBRARY:-}" ] && ! command -v nvcc >/dev/null; then
        local cudart=$BUILD/cudart/nvidia/cu13/lib/libcudart.so.13
        [ -f "$cudart" ] || unpack_wheel "$CUDART_WHEEL" "$BUILD/cudart" || die "could not get $CUDART_WHEEL"
        printf '%s\n' "$cudart"
    fi
}

# The rapids_logger/ prefix (include/, lib64/); prints its path (it may lack the library when neither
# a wheel nor the download worked: the caller checks).
peer_rapids_logger() {
    local logger_src=${RMM_PEER_RAPIDS_LOGGER:-$RAPIDS_LOGGER_WHEEL}
    if [ -d "$logger_src/rapids_logger" ]; then
        printf '%s\n' "$logger_src/rapids_logger"
        return
    fi
    local logger_prefix=$BUILD/rapids-logger/rapids_logger
    [ -f "$logger_prefix/include/rapids_logger/logger.hpp" ] ||
        unpack_wheel "$logger_src" "$BUILD/rapids-logger" >&2 || say "peer: no rapids-logger ($logger_src)" >&2
    printf '%s\n' "$logger_prefix"
}
