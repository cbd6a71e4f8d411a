#!/usr/bin/env bash
# GPU runner, first half (runs HERE, where cargo is): builds and stages what the GPU machine needs
# into stage/ (git-ignored), since that machine has no cargo and no network.
#
#   stage/rust/<package>__<target>.gz   Rust test executables (debug info stripped, gzipped)
#   stage/bin/tour                   the Rust tour example (run there for show, not counted)
#   stage/tour/*.so                  the C++ and Rust libraries of the tour's shared stop (scripts/tour_shared.py)
#                                    and the Rust setter of scripts/bench-python-setter.py
#   stage/wheels/*.whl               the rmm-rs Python wheel (bindings-python/build-wheel.sh: abi3,
#                                    manylinux_2_28, librmm_rs.so + headers + CMake package inside)
#   stage/python/                    the pytest suite and its config (pyproject.toml)
#   stage/beside/                    the rmm-rs-cu13 wheel (import rmm_rs, beside RMM 26.10) and the
#                                    cuDF-style test extension (test-ext/), for scripts/gpu-beside.sh
#   stage/peer/rmm-python/           RMM's own Python suite (../shared/peer-tests, unmodified; run by
#                                    scripts/peer/python.sh there, since ../shared does not travel)
#   stage/cpp/bin, stage/cpp/lib     prebuilt C++ test executables + the shared libraries they need
#   stage/cpp/librmm_rs.so, cccl.tar.gz, googletest.tar.gz   for the nvcc rebuild there (gpu-cpp-cuda.sh)
#   stage/cpp/peer-tests.tar.gz, rapids_logger-*.whl   RMM's own C++ tests, for scripts/gpu-peer-cpp.sh
#   stage/peerbench/                 Google Benchmark + RMM 26.10's librmm, for scripts/gpu-peer-bench.sh
#   stage/MANIFEST.txt               what was staged, and what was not and why
#   .whl/                            optional: RMM 26.10 peer wheels (rmm-cu13, librmm-cu13, rapids-logger)
#   .whl/dask/                       optional: Dask-CUDA 26.10 and its pure dependencies (RMM_STAGE_DASK=0
#                                    skips; dropped again when stage/ + .whl/ would pass 64 MiB)
#
# Then, with the device tool: run `bash scripts/gpu-run.sh` with carry ["stage"] (add ".whl" for the
# peer), and `bash scripts/gpu-beside.sh` with carry ["stage", ".whl"]. Options: RMM_STAGE_PEER=0
# skips the peer download.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../ci/lib.sh"
cd "$RMM_ROOT" || exit 1

STAGE=$RMM_ROOT/stage
MANIFEST=$STAGE/MANIFEST.txt
LIMIT_MIB=60
rm -rf "$STAGE"
mkdir -p "$STAGE"/{rust,wheels,python,cpp}
manifest() { echo "$*" | tee -a "$MANIFEST"; }
status=0

command -v strip >/dev/null 2>&1 || apt_install binutils
need_python

# ---- Rust: test executables -------------------------------------------------------------------
log "rust: cargo test --workspace --no-run"
if cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$STAGE/cargo.json"; then
    python3 - "$STAGE/cargo.json" "$STAGE/rust" <<'PY' || status=1
import json, os, re, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
seen = set()
for line in open(src):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    if not msg.get("profile", {}).get("test"):
        continue
    pkg = re.split(r"[#@]", msg["package_id"].rstrip("/"))
    # package_id: "path+file:///.../core#rmm-core@0.1.0" or "...#0.1.0" (name = last path part)
    name = pkg[1] if len(pkg) > 2 else os.path.basename(pkg[0].split("#")[0])
    kinds = msg["target"]["kind"]
    lib = any(k in ("lib", "rlib", "cdylib", "staticlib", "dylib", "proc-macro") for k in kinds)
    base = f"{name}__{msg['target']['name']}" + ("" if lib else f"__{kinds[0]}")
    if base in seen:
        continue
    seen.add(base)
    shutil.copy2(msg["executable"], os.path.join(dst, base))
    print(f"  staged {base}")
PY
    rm -f "$STAGE/cargo.json"
    # Stripped and gzipped: the debug test executables are ~12 MB each and the carry limit is 64 MiB.
    for f in "$STAGE"/rust/*; do [ -f "$f" ] && strip --strip-debug "$f" && gzip -9 "$f"; done
    manifest "rust: $(find "$STAGE/rust" -type f | wc -l) test executables (doc-tests need rustc: not staged)"
    # The tour, to see it on a GPU (run by gpu-run.sh, not counted as a test).
    if cargo build --release --locked -q -p rmm --example tour 2>/dev/null; then
        mkdir -p "$STAGE/bin"
        cp "$(target_dir)/release/examples/tour" "$STAGE/bin/tour" && strip --strip-debug "$STAGE/bin/tour"
        manifest "tour: stage/bin/tour"
    fi
else
    manifest "rust: NOT STAGED (cargo test --no-run failed)"
    status=1
fi

# ---- Python: wheel + tests ----------------------------------------------------------------------
log "python: bash bindings-python/build-wheel.sh (maturin, manylinux_2_28, librmm_rs.so inside)"
# rmm.__git_commit__ (RMM reads it from the package's GIT_COMMIT file), only while the wheel builds.
git rev-parse HEAD >bindings-python/python/rmm/GIT_COMMIT 2>/dev/null || rm -f bindings-python/python/rmm/GIT_COMMIT
if bash bindings-python/build-wheel.sh "$STAGE/wheels" >"$STAGE/wheel-build.log" 2>&1; then
    cp bindings-python/pyproject.toml "$STAGE/python/"
    cp -r bindings-python/tests "$STAGE/python/tests"
    find "$STAGE/python" -name __pycache__ -prune -exec rm -rf {} +
    rm -f "$STAGE/wheel-build.log"
    manifest "python: $(cd "$STAGE/wheels" && ls *.whl) ($(du -k "$STAGE"/wheels/*.whl | cut -f1 | head -1) KiB) + $(ls "$STAGE"/python/tests/test_*.py | wc -l) test files"
else
    tail -20 "$STAGE/wheel-build.log"
    manifest "python: NOT STAGED (bindings-python/build-wheel.sh failed: stage/wheel-build.log)"
    status=1
fi
rm -f bindings-python/python/rmm/GIT_COMMIT

# ---- Beside RMM (issue 25): the rmm-rs-cu13 wheel and the cuDF-style test extension ---------------
# For scripts/gpu-beside.sh there, with RMM 26.10's own wheels from .whl/ (docs/beside-rmm.md).
log "beside: bash scripts/build-beside-wheel.sh stage/beside (Cython over RMM 26.10's wheels)"
if bash scripts/build-beside-wheel.sh "$STAGE/beside" >"$STAGE/beside-build.log" 2>&1; then
    rm -f "$STAGE/beside-build.log"
    manifest "beside: $(cd "$STAGE/beside" && ls rmm_rs_cu13-*.whl) ($(du -k "$STAGE"/beside/rmm_rs_cu13-*.whl | cut -f1) KiB), test-ext/$(cd "$STAGE/beside/test-ext" && ls)"
else
    tail -20 "$STAGE/beside-build.log"
    manifest "beside: NOT STAGED (scripts/build-beside-wheel.sh failed: stage/beside-build.log)"
    status=1
fi

# ---- Peer: RMM's own Python suite (run against our wheel there) ---------------------------------
peer_suite=$RMM_ROOT/../shared/peer-tests/rmm-python
if [ -f "$peer_suite/conftest.py" ]; then
    mkdir -p "$STAGE/peer"
    cp -r "$peer_suite" "$STAGE/peer/rmm-python"
    find "$STAGE/peer" -name __pycache__ -prune -exec rm -rf {} +
    manifest "peer python: stage/peer/rmm-python ($(ls "$STAGE"/peer/rmm-python/test_*.py | wc -l) test files, unmodified)"
else
    manifest "peer python: NOT STAGED ($peer_suite not found)"
fi

# ---- C++: prebuilt gtest executables (+ sources) -------------------------------------------------
log "cpp: build the GoogleTest executables here"
if [ ! -f bindings-cpp/CMakeLists.txt ]; then
    manifest "cpp: NOT STAGED (bindings-cpp/CMakeLists.txt does not exist yet)"
else
    apt_install cmake ninja-build g++ libgtest-dev >/dev/null || true
    build=build/cpp-stage
    # shellcheck disable=SC2086
    if cmake -S bindings-cpp -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${RMM_CPP_CMAKE_ARGS:-} >/dev/null &&
        cmake --build "$build"; then
        mkdir -p "$STAGE/cpp/bin" "$STAGE/cpp/lib"
        # Every executable ctest would run (first word of each test command), staged once.
        ctest --test-dir "$build" --show-only=json-v1 >"$STAGE/ctest.json" 2>/dev/null
        python3 - "$STAGE/ctest.json" "$STAGE/cpp" <<'PY' || status=1
import json, os, shutil, subprocess, sys
info = json.load(open(sys.argv[1]))
out = sys.argv[2]
exes = []
for t in info.get("tests", []):
    cmd = t.get("command") or []
    if cmd and os.path.isfile(cmd[0]) and os.access(cmd[0], os.X_OK) and cmd[0] not in exes:
        exes.append(cmd[0])
system = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
          "libgcc_s.so", "libstdc++.so", "libcuda.so", "libnvidia")
libs = set()
for exe in exes:
    shutil.copy2(exe, os.path.join(out, "bin", os.path.basename(exe)))
    print(f"  staged {os.path.basename(exe)}")
    ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    for line in ldd.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            path = parts[1].split("(")[0].strip()
            if not any(os.path.basename(path).startswith(s) for s in system):
                libs.add(path)
for lib in sorted(libs):
    shutil.copy2(lib, os.path.join(out, "lib", os.path.basename(lib)))
    print(f"  staged lib {os.path.basename(lib)}")
if not exes:
    print("  no test executables found in ctest's list")
    sys.exit(1)
PY
        rm -f "$STAGE/ctest.json"
        for f in "$STAGE"/cpp/bin/* "$STAGE"/cpp/lib/*; do [ -f "$f" ] && strip --strip-debug "$f"; done
        manifest "cpp: $(ls "$STAGE/cpp/bin" | wc -l) test executables, $(ls "$STAGE/cpp/lib" | wc -l) libraries"
    else
        manifest "cpp: NOT STAGED (cmake configure/build of bindings-cpp failed)"
        status=1
    fi
    # For the rebuild there with nvcc (scripts/gpu-cpp-cuda.sh; the sources travel with the working
    # tree): our librmm_rs.so, the CCCL >= 3.1 headers (the toolkit there has 3.0.1) and googletest's
    # sources (that machine may have no GTest package).
    so="$(target_dir)/release/librmm_rs.so"
    if [ -f "$so" ] && cccl_dirs=$(bash bindings-cpp/cmake/fetch-cccl.sh "$RMM_ROOT/build/cccl" | tail -n 1); then
        cp "$so" "$STAGE/cpp/librmm_rs.so" && strip --strip-debug "$STAGE/cpp/librmm_rs.so"
        tar -C "$RMM_ROOT/build/cccl" -czf "$STAGE/cpp/cccl.tar.gz" nvidia/cu13/include/cccl
        gtest_src=${RMM_GOOGLETEST_SOURCE:-/usr/src/googletest}
        [ -d "$gtest_src" ] && tar -C "$(dirname "$gtest_src")" -czf "$STAGE/cpp/googletest.tar.gz" "$(basename "$gtest_src")"
        manifest "cpp nvcc rebuild: librmm_rs.so, cccl.tar.gz ($(du -k "$STAGE/cpp/cccl.tar.gz" | cut -f1) KiB), googletest.tar.gz"
    else
        manifest "cpp nvcc rebuild: NOT STAGED (no release librmm_rs.so or no CCCL headers)"
    fi
fi

# ---- C++ peer: RMM's own C++ tests, run there by scripts/gpu-peer-cpp.sh --------------------------
# (The cpp helper's block.) RMM's cpp/tests and cpp/benchmarks from ../shared/peer-tests (not part of
# the repo, so staged) and the rapids-logger wheel; librmm_rs.so, CCCL and googletest are staged above.
peer_src=${RMM_PEER_TESTS_DIR:-$RMM_ROOT/../shared/peer-tests/rmm-cpp}
if [ -f "$peer_src/CMakeLists.txt" ] && [ -f "$STAGE/cpp/librmm_rs.so" ]; then
    peer_parent=$(cd "$peer_src/.." && pwd)
    tar -C "$peer_parent" -czf "$STAGE/cpp/peer-tests.tar.gz" "$(basename "$peer_src")" rmm-cpp-benchmarks &&
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/cpp" "${RMM_RAPIDS_LOGGER_WHEEL:-rapids-logger==0.3.0}" </dev/null &&
        manifest "cpp peer: peer-tests.tar.gz (RMM's C++ tests and benchmarks), $(cd "$STAGE/cpp" && ls rapids_logger-*.whl)" ||
        manifest "cpp peer: NOT STAGED (tar or pip download of rapids-logger failed)"
else
    manifest "cpp peer: NOT STAGED (no $peer_src/CMakeLists.txt or no release librmm_rs.so)"
fi

# ---- The tour's shared stop (C++, Rust and Python in one process), to run there too -------------
log "tour: bash scripts/tour.sh here (builds the C++ and Rust tour libraries)"
if bash scripts/tour.sh >"$STAGE/tour-here.log" 2>&1; then
    mkdir -p "$STAGE/tour"
    cp build/tour/cpp/librmm_tour_cpp.so "$(target_dir)/release/examples/libtour_shared.so" "$STAGE/tour/"
    # The Rust setter of scripts/bench-python-setter.py (a pool made by a Rust library's own rmm-core).
    cargo build --release --locked -q -p rmm --example bench_setter &&
        cp "$(target_dir)/release/examples/libbench_setter.so" "$STAGE/tour/"
    # The buffer stop's C++ library (<rmm/python.hpp>), built when the Python headers were found.
    [ -f build/tour/cpp/librmm_tour_buffers.so ] && cp build/tour/cpp/librmm_tour_buffers.so "$STAGE/tour/"
    strip --strip-debug "$STAGE"/tour/*.so
    manifest "tour: stage/tour/librmm_tour_cpp.so, libtour_shared.so (shared stop; the tour ran here: tour-here.log)"
else
    manifest "tour: NOT STAGED (scripts/tour.sh failed here: stage/tour-here.log)"
    status=1
fi

# ---- Peer: RMM 26.10 wheels (optional) ----------------------------------------------------------
if [ "${RMM_STAGE_PEER:-1}" != 0 ]; then
    log "peer: pip download rmm-cu13 26.10 into .whl/"
    if ls .whl/rmm_cu13-26.10.* .whl/librmm_cu13-26.10.* .whl/rapids_logger-* >/dev/null 2>&1; then
        manifest "peer: already in .whl/: $(cd .whl && ls | tr '\n' ' ')"
    elif python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
        'rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*' </dev/null; then
        manifest "peer: downloaded to .whl/: $(cd .whl && ls | tr '\n' ' ')"
    else
        manifest "peer: not downloaded (pip download failed; the peer is optional)"
    fi
fi

# ---- C++ peer benchmarks: Google Benchmark and RMM 26.10's librmm (scripts/peer-bench-stage.sh) ------
# (The cpp helper's block.) For scripts/gpu-peer-bench.sh there; RMM_STAGE_PEER_BENCH=0 skips it.
if [ "${RMM_STAGE_PEER_BENCH:-1}" != 0 ] && [ -f "$STAGE/cpp/peer-tests.tar.gz" ]; then
    if bash scripts/peer-bench-stage.sh >"$STAGE/peer-bench-stage.log" 2>&1; then
        manifest "cpp peer bench: $(tail -1 "$STAGE/peer-bench-stage.log")"
    else
        manifest "cpp peer bench: NOT STAGED (see stage/peer-bench-stage.log)"
    fi
fi

# ---- Dask-CUDA 26.10 and its pure dependencies (optional; for bindings-python/tests/test_dask_cuda.py)
# --no-deps: the GPU machine has numpy, CuPy and cuda.core already; pandas and bokeh (which
# Dask-CUDA's metadata asks for) are not needed to run a LocalCUDACluster and are too big to carry.
DASK_WHEELS=('dask-cuda==26.10.*' 'dask>=2026.7.1,<2026.7.2' 'distributed>=2026.7.1,<2026.7.2' 'nvidia-ml-py>=12'
    click cloudpickle fsspec jinja2 markupsafe locket msgpack partd psutil pyyaml sortedcontainers
    'tblib!=3.2.0,!=3.2.1' toolz tornado zict importlib_metadata zipp lazy_importer)
if [ "${RMM_STAGE_DASK:-1}" != 0 ]; then
    log "dask: pip download Dask-CUDA 26.10 into .whl/dask/"
    if ls .whl/dask/dask_cuda-26.10.* >/dev/null 2>&1; then
        manifest "dask: already in .whl/dask/ ($(ls .whl/dask | wc -l) wheels)"
    elif python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
        --platform manylinux1_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
        -d .whl/dask "${DASK_WHEELS[@]}" </dev/null; then
        manifest "dask: downloaded $(ls .whl/dask | wc -l) wheels to .whl/dask/ ($(du -sk .whl/dask | cut -f1) KiB)"
    else
        rm -rf .whl/dask
        manifest "dask: not downloaded (pip download failed; the Dask-CUDA test will skip)"
    fi
fi

# ---- Size check ---------------------------------------------------------------------------------
size_kib=$(du -sk "$STAGE" | cut -f1)
peer_kib=$( [ -d .whl ] && du -sk .whl | cut -f1 || echo 0)
manifest "size: stage/ $((size_kib / 1024)) MiB, .whl/ $((peer_kib / 1024)) MiB (limit ${LIMIT_MIB} MiB for stage/; the device tool carries 64 MiB in all)"
if [ "$size_kib" -gt $((LIMIT_MIB * 1024)) ]; then
    echo "ERROR: stage/ is larger than ${LIMIT_MIB} MiB" >&2
    status=1
fi
if [ $((size_kib + peer_kib)) -gt $((64 * 1024)) ] && [ -d .whl/dask ]; then
    dask_kib=$(du -sk .whl/dask | cut -f1)
    rm -rf .whl/dask
    peer_kib=$( [ -d .whl ] && du -sk .whl | cut -f1 || echo 0)
    manifest "dask: .whl/dask/ ($((dask_kib / 1024)) MiB) removed again: stage/ and .whl/ would not fit in 64 MiB (the Dask-CUDA test will skip)"
fi
if [ $((size_kib + peer_kib)) -gt $((64 * 1024)) ]; then
    echo "ERROR: stage/ and .whl/ together are larger than the 64 MiB the device tool carries" >&2
    status=1
fi
echo
echo "Staged into stage/ (see stage/MANIFEST.txt). On the GPU machine, with carry [\"stage\", \".whl\"]:"
echo "  bash scripts/gpu-run.sh"
echo "  bash scripts/gpu-beside.sh      (rmm-rs beside RMM 26.10: needs .whl/ carried)"
exit "$status"
