#!/usr/bin/env bash
# Beside-RMM suite: rmm-rs next to RAPIDS RMM 26.10's own packages (rmm-cu13, librmm-cu13,
# rapids-logger) in one process (docs/beside-rmm.md).
#   - RMM's wheels: .whl/ (scripts/gpu-stage.sh downloads them there), else pip download into .whl/;
#     unpacked into $RMM_BESIDE_BUILD/rmm-site. Without them (no network) the suite's steps skip,
#     naming the reason.
#   - C++: beside/tests/cpp/run.sh builds each test with g++ against RMM's wheel and our
#     librmm_rs.so and runs it (GPU tests skip themselves in host mode).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

BUILD=${RMM_BESIDE_BUILD:-$RMM_ROOT/build/beside}
CCCL_DIR=${RMM_CCCL_DIR:-$RMM_ROOT/build/cccl}
RMM_SITE=$BUILD/rmm-site
RMM_WHEELS=('rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*')

# RMM 26.10's wheels into .whl/ (kept there for scripts/gpu-stage.sh), unpacked into $RMM_SITE.
rmm_wheels() {
    mkdir -p .whl
    if ! ls .whl/rmm_cu13-26.10.*.whl .whl/librmm_cu13-26.10.*.whl .whl/rapids_logger-0.3.*.whl >/dev/null 2>&1; then
        python3 -m pip download -q --no-deps --only-binary=:all: -d .whl "${RMM_WHEELS[@]}" </dev/null || return 1
    fi
    rm -rf "$RMM_SITE" && mkdir -p "$RMM_SITE"
    local w
    for w in .whl/rmm_cu13-26.10.*.whl .whl/librmm_cu13-26.10.*.whl .whl/rapids_logger-0.3.*.whl; do
        python3 -m zipfile -e "$w" "$RMM_SITE" || return 1
    done
    [ -f "$RMM_SITE/librmm/lib64/librmm.so" ]
}

# The CUDA runtime headers (and CCCL, unused here: RMM's wheel brings its own) from PyPI wheels,
# and libcudart.so.13 (RMM's inline code calls the runtime, as RMM's users do).
CUDA_INCLUDE=
CUDART_DIR=$BUILD/cudart/nvidia/cu13/lib
cuda_headers() {
    local out
    out=$(bash bindings-cpp/cmake/fetch-cccl.sh "$CCCL_DIR") || return 1
    CUDA_INCLUDE=$(printf '%s\n' "$out" | tail -n 1 | cut -d';' -f2)
    [ -f "$CUDA_INCLUDE/cuda_runtime_api.h" ] || return 1
    [ -f "$CUDART_DIR/libcudart.so.13" ] ||
        python3 -m pip install -q --no-deps --target "$BUILD/cudart" 'nvidia-cuda-runtime==13.0.96' </dev/null
}

need_python || fail "python3 could not be installed"
python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || fail "pip could not be installed"
apt_install g++ || fail "g++ could not be installed"

have_rmm=0
if [ "$RMM_FAILED" -eq 0 ]; then
    if rmm_wheels; then
        have_rmm=1
        echo "RMM 26.10's wheels unpacked into $RMM_SITE"
    else
        note "beside: RMM 26.10's wheels are not in .whl/ and pip download failed: every beside test skipped"
    fi
fi
if [ "$have_rmm" = 1 ]; then
    step "beside cuda headers: fetch-cccl.sh $CCCL_DIR, libcudart" cuda_headers
    step "beside build: cargo build --release -p rmm-cpp (librmm_rs.so)" cargo build --release --locked -p rmm-cpp
fi
if [ "$have_rmm" = 1 ] && [ "$RMM_FAILED" -eq 0 ]; then
    step "beside cpp: beside/tests/cpp/run.sh (g++ against RMM 26.10's wheel + librmm_rs.so)" \
        bash beside/tests/cpp/run.sh "$RMM_SITE" "$(target_dir)/release" "$CUDA_INCLUDE" "$BUILD/cpp" "$CUDART_DIR"
fi

finish beside
