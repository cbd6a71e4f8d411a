#!/usr/bin/env bash
# Python suite: builds rmm._rmm and the native library it links (librmm_rs.so, in rmm/lib/ as the wheel
# has it), runs pytest on bindings-python/tests, checks the type stubs against the module (mypy's
# stubtest) and builds the sdist. Tests marked `gpu` skip with "needs a CUDA GPU" in host mode and
# run when a GPU is present.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

need_python || fail "python3 could not be installed"
pip_install_if_missing pytest pytest || fail "pytest could not be installed"
# numpy: DeviceBuffer.copy_to_host returns an array and pickling protocol 5 goes through one (the
# tests that need it skip without it, naming it).
pip_install_if_missing numpy numpy || echo "numpy could not be installed: its tests skip"

# mypy's stubtest compares bindings-python/python/rmm/_rmm.pyi with the built module; pinned, since
# what it checks grows from release to release.
MYPY_VERSION=2.4.1
if ! python3 -c "import mypy.version, sys; sys.exit(mypy.version.__version__ != '$MYPY_VERSION')" 2>/dev/null; then
    python3 -m pip install -q "mypy==$MYPY_VERSION" </dev/null || python3 -m pip install -q --break-system-packages "mypy==$MYPY_VERSION" </dev/null ||
        echo "mypy $MYPY_VERSION could not be installed: the stub check fails"
fi

if [ "$RMM_FAILED" -eq 0 ]; then
    step "python build: cargo build --release -p rmm-cpp -p rmm-python (module + $RMM_NATIVE_LIBRARY in rmm/lib)" build_python_ext
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
        RMM_LIBRMM="$(target_dir)/release/$RMM_NATIVE_LIBRARY" \
        python3 -m pytest bindings-python/tests -p no:cacheprovider
fi
# The stub: every class, function and signature of _rmm.pyi as the module has it.
stubtest() {
    (cd "$RMM_ROOT/bindings-python/python" &&
        python3 -m mypy.stubtest rmm._rmm --mypy-config-file "$RMM_ROOT/bindings-python/stubtest.ini")
}
if [ "$RMM_FAILED" -eq 0 ]; then
    step "python stubs: mypy.stubtest rmm._rmm (bindings-python/python/rmm/_rmm.pyi)" stubtest
fi
# The source distribution: built and checked (no build outputs inside, the sources a build needs).
step "python sdist: bash bindings-python/build-sdist.sh" bash bindings-python/build-sdist.sh

finish python
