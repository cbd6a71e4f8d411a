#!/usr/bin/env bash
# Builds and runs the C++ tests of rmm-rs beside RAPIDS RMM (beside/tests/cpp/test_*.cpp): each is
# compiled with g++ against RMM 26.10's wheel (its headers, its CCCL, librmm.so, librapids_logger.so)
# and our <rmm_rs/...> headers, and linked with our librmm_rs.so too.
#
#   bash beside/tests/cpp/run.sh RMM_SITE LIBRMM_RS_DIR CUDA_INCLUDE BUILD_DIR [CUDART_DIR]
#
# RMM_SITE       a folder holding RMM's unpacked wheels: librmm/ and rapids_logger/ (site-packages, or
#                the wheels unzipped into one folder)
# LIBRMM_RS_DIR  the folder with our librmm_rs.so
# CUDA_INCLUDE   the CUDA runtime headers (cuda_runtime_api.h, crt/): a toolkit's include/ or the
#                nvidia-cuda-runtime + nvidia-cuda-crt wheels' nvidia/cu13/include
# BUILD_DIR      where the executables go
# CUDART_DIR     the folder with libcudart.so.13, linked when it is there (RMM's inline code, such as
#                its pool's, calls the CUDA runtime, as RMM's users do): default CUDA_INCLUDE/../lib
#                (the nvidia-cuda-runtime wheel's layout)
# Prints each test's lines and, last, `N passed, N failed, N skipped` summed over the executables;
# exits 1 when a test failed or an executable could not be built.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
RMM_SITE=${1:?usage: run.sh RMM_SITE LIBRMM_RS_DIR CUDA_INCLUDE BUILD_DIR}
OURS=${2:?}
CUDA_INCLUDE=${3:?}
BUILD=${4:?}
CUDART=${5:-$CUDA_INCLUDE/../lib}
CXX=${CXX:-g++}

for f in "$RMM_SITE/librmm/lib64/librmm.so" "$RMM_SITE/rapids_logger/lib64/librapids_logger.so" \
    "$OURS/librmm_rs.so" "$CUDA_INCLUDE/cuda_runtime_api.h"; do
    [ -f "$f" ] || { echo "run.sh: $f is missing" >&2; exit 2; }
done
mkdir -p "$BUILD/include"
# Our headers without our <rmm/...> drop-in ones: only RMM's rmm/ is on the path.
ln -sfn "$REPO/bindings-cpp/include/rmm_rs" "$BUILD/include/rmm_rs"

L=$RMM_SITE/librmm
R=$RMM_SITE/rapids_logger
flags=(-std=c++20 -O2 -g -Wall -Wextra -Wno-unused-parameter
    -I"$L/include/rapids" -I"$L/include" -I"$R/include" -isystem "$CUDA_INCLUDE" -I"$BUILD/include")
# rapids_logger first and not as-needed: librmm.so needs it and finds it by SONAME only.
libs=(-Wl,--no-as-needed -L"$R/lib64" -lrapids_logger -L"$L/lib64" -lrmm -L"$OURS" -lrmm_rs -Wl,--as-needed
    -lpthread -ldl -Wl,-rpath,"$R/lib64:$L/lib64:$OURS")
if [ -f "$CUDART/libcudart.so.13" ]; then
    libs+=(-L"$CUDART" -l:libcudart.so.13 -Wl,-rpath,"$CUDART")
else
    echo "run.sh: no libcudart.so.13 in $CUDART: tests that need the CUDA runtime will not link"
fi

pass=0 fail=0 skip=0 broken=0
for src in "$HERE"/test_*.cpp; do
    name=$(basename "$src" .cpp)
    echo "######## $name"
    if ! "$CXX" "${flags[@]}" "$src" -o "$BUILD/$name" "${libs[@]}"; then
        echo "$name: BUILD FAILED"
        broken=$((broken + 1))
        continue
    fi
    "$BUILD/$name" | tee "$BUILD/$name.log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$BUILD/$name.log" | tail -1)
    if [ -z "$line" ]; then
        echo "$name: no summary line (crashed?)"
        broken=$((broken + 1))
        continue
    fi
    read -r p _ f _ s _ <<<"$line"
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
fail=$((fail + broken))
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
