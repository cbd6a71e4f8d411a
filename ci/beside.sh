#!/usr/bin/env bash
# Beside-RMM suite: rmm-rs next to RAPIDS RMM 26.10's own packages (rmm-cu13, librmm-cu13,
# rapids-logger) in one process (docs/beside-rmm.md).
#   - RMM's wheels: .whl/ (scripts/gpu-stage.sh downloads them there too), else pip download.
#   - scripts/build-beside-wheel.sh: the rmm-rs-cu13 wheel (Cython against RMM's wheels, librmm_rs.so
#     linked for glibc 2.28, auditwheel) and the cuDF-style test extension; its site folder
#     ($RMM_BESIDE_BUILD/site: RMM 26.10, Cython, the CUDA runtime, pytest) gets our wheel installed.
#   - C++: beside/tests/cpp/run.sh builds each test with g++ against RMM's wheel and our
#     librmm_rs.so and runs it; Python: pytest beside/tests; a smoke run of benchmarks/beside; the
#     GPU probes of benchmarks/probes compiled with g++ against the site's CUDA headers.
# GPU tests skip themselves in host mode (and run when `nvidia-smi -L` succeeds). Without RMM's
# wheels (no network) or with a Python older than 3.11 (RMM 26.10 needs 3.11) the suite's steps
# skip, naming the reason.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

BUILD=${RMM_BESIDE_BUILD:-$RMM_ROOT/build/beside}
export RMM_BESIDE_BUILD=$BUILD
SITE=$BUILD/site
WHEELS=$BUILD/wheels
RMM_WHEELS=('rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*')

rmm_wheels() {
    mkdir -p .whl
    ls .whl/rmm_cu13-26.10.*.whl .whl/librmm_cu13-26.10.*.whl .whl/rapids_logger-0.3.*.whl >/dev/null 2>&1 ||
        python3 -m pip download -q --no-deps --only-binary=:all: -d .whl "${RMM_WHEELS[@]}" </dev/null
}

# Builds the wheel (and the test extension) and installs it into the site folder.
build_and_install() {
    local wheel
    wheel=$(bash scripts/build-beside-wheel.sh "$WHEELS" | tail -1) || return 1
    [ -f "$wheel" ] || return 1
    echo "built $wheel"
    python3 -m pip install -q --no-deps --no-compile --upgrade --target "$SITE" "$wheel" </dev/null
}

run_pytest() {
    # From the repository root, so that the source folder beside/rmm_rs (no compiled module) is not
    # what `import rmm_rs` finds: the installed wheel in $SITE is.
    PYTHONPATH="$SITE" RMM_RS_TEST_EXT_DIR="$WHEELS/test-ext" \
        python3 -m pytest beside/tests -c beside/pyproject.toml -p no:cacheprovider
}

bench_smoke() {
    PYTHONPATH="$SITE" python3 benchmarks/beside/bench.py --ext-dir "$WHEELS/test-ext" --pairs 2000 \
        --thread-pairs 500 --buffers 100 --repeats 1 --pool-size $((64 << 20))
}

# The GPU probes (benchmarks/probes/*.cu: host code over the CUDA runtime and driver APIs, built
# with nvcc on the GPU machine) compiled here with g++ against the CUDA 13 headers of the site, so
# that they do not rot between GPU sessions.
probes_compile() {
    local probe status=0
    for probe in benchmarks/probes/*.cu; do
        g++ -std=c++20 -fsyntax-only -Wall -Werror -x c++ -I "$SITE/nvidia/cu13/include" -I bindings-cpp/include \
            "$probe" || { echo "does not compile: $probe"; status=1; }
    done
    return "$status"
}

need_python || fail "python3 could not be installed"
python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || fail "pip could not be installed"
apt_install g++ binutils || fail "g++ could not be installed"

ready=0
if [ "$RMM_FAILED" -eq 0 ]; then
    if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        note "beside: $(python3 --version) is older than RMM 26.10's 3.11: every beside step skipped"
    elif ! rmm_wheels; then
        note "beside: RMM 26.10's wheels are not in .whl/ and pip download failed: every beside step skipped"
    else
        ready=1
    fi
fi
if [ "$ready" = 1 ]; then
    step "beside wheel: scripts/build-beside-wheel.sh (+ the cuDF-style test extension)" build_and_install
fi
if [ "$ready" = 1 ] && [ "$RMM_FAILED" -eq 0 ]; then
    if has_gpu; then scope="cpu+gpu"; else scope="cpu (gpu tests skip)"; fi
    step "beside cpp $scope: beside/tests/cpp/run.sh (g++ against RMM 26.10's wheel + librmm_rs.so)" \
        bash beside/tests/cpp/run.sh "$SITE" "$SITE/rmm_rs/lib" "$SITE/nvidia/cu13/include" "$BUILD/cpp" \
        "$SITE/nvidia/cu13/lib"
    step "beside python $scope: pytest beside/tests (RMM 26.10 and rmm_rs in one process)" run_pytest
    step "beside bench: benchmarks/beside/bench.py, a short run" bench_smoke
    step "probes compile: benchmarks/probes/*.cu (g++ -fsyntax-only against the site's CUDA headers)" probes_compile
fi

finish beside
