#!/usr/bin/env bash
# Python suite: builds rmm._rmm and librmm_rs.so, runs pytest on bindings-python/tests. Tests marked `gpu`
# skip with "needs a CUDA GPU" in host mode and run when a GPU is present.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

need_python || fail "python3 could not be installed"
pip_install_if_missing pytest pytest || fail "pytest could not be installed"
# numpy: DeviceBuffer.copy_to_host returns an array and pickling protocol 5 goes through one (the
# tests that need it skip without it, naming it).
pip_install_if_missing numpy numpy || echo "numpy could not be installed: its tests skip"

if [ "$RMM_FAILED" -eq 0 ]; then
    step "python build: cargo build --release -p rmm-python" build_python_ext
fi
# librmm_rs.so (the C ABI that C++ links) for the tests that share one registry between it and Python.
if [ "$RMM_FAILED" -eq 0 ]; then
    step "python build: cargo build --release -p rmm-cpp (librmm_rs.so)" cargo build --release --locked -p rmm-cpp
fi
# The CCCL headers, for the C++ test extension of test_capsules.py (std::unique_ptr<rmm::device_buffer>
# to and from Python); without them those tests skip, naming the reason.
if [ -z "${RMM_CCCL_INCLUDE_DIRS:-}" ]; then
    if cccl_out=$(bash bindings-cpp/cmake/fetch-cccl.sh "${RMM_CCCL_DIR:-$RMM_ROOT/build/cccl}" 2>/dev/null); then
        export RMM_CCCL_INCLUDE_DIRS="$(printf '%s\n' "$cccl_out" | tail -n 1)"
    else
        echo "CCCL headers could not be fetched: the C++-API capsule tests skip"
    fi
fi
if [ "$RMM_FAILED" -eq 0 ]; then
    if has_gpu; then
        label="python cpu+gpu: pytest bindings-python/tests"
    else
        label="python cpu: pytest bindings-python/tests (gpu tests skip)"
    fi
    step "$label" env PYTHONPATH="$RMM_ROOT/bindings-python/python${PYTHONPATH:+:$PYTHONPATH}" \
        RMM_LIBRMM="$(target_dir)/release/librmm_rs.so" \
        python3 -m pytest bindings-python/tests -p no:cacheprovider
fi
# The source distribution: built and checked (no build outputs inside, the sources a build needs).
step "python sdist: bash bindings-python/build-sdist.sh" bash bindings-python/build-sdist.sh

finish python
