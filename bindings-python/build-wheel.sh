#!/usr/bin/env bash
# Builds the rmm-rs wheel: abi3 (CPython >= 3.10), tagged manylinux_2_28 x86-64 (maturin with zig as
# the linker, so glibc 2.28 is enough: RHEL 8, Ubuntu 20.04), carrying
#   rmm/_rmm.abi3.so            the extension module, linked against lib/librmm_rs.so (RUNPATH $ORIGIN/lib)
#   rmm/lib/librmm_rs.so        the C ABI and the process's one registry, once
#   rmm/include/rmm/...         the C++ headers             (rmm.get_include())
#   rmm/lib/cmake/rmm/...       the CMake package `rmm`     (rmm.get_cmake_dir())
# and checks that it does (the module's NEEDED and RUNPATH, one librmm_rs.so in the wheel).
#
#   bash bindings-python/build-wheel.sh [OUT_DIR]      (default: <cargo target dir>/wheels)
#
# Needs cargo, python3 (installs maturin and ziglang with pip when missing) and, for the CMake
# package, cmake (its configure step fetches the CCCL headers once, see bindings-cpp/CMakeLists.txt;
# without cmake the wheel is built without lib/cmake and says so).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
OUT="${1:-$TARGET/wheels}"
PKG="$ROOT/bindings-python/python/rmm"
log() { echo "== build-wheel: $*" >&2; }

python3 -m maturin --version >/dev/null 2>&1 || python3 -m pip install -q maturin >&2
python3 -m ziglang version >/dev/null 2>&1 || python3 -m pip install -q ziglang >&2

log "cargo build --release -p rmm-cpp (librmm_rs.so)"
cargo build --release --locked -p rmm-cpp >&2

# Package data, rebuilt from scratch every time (a stale librmm_rs.so must never be carried).
rm -rf "$PKG/lib" "$PKG/include"
mkdir -p "$PKG/lib"
cp "$TARGET/release/librmm_rs.so" "$PKG/lib/librmm_rs.so"
strip --strip-debug "$PKG/lib/librmm_rs.so" 2>/dev/null || true
cp -r bindings-cpp/include "$PKG/include"

cmake_build="$TARGET/wheel-cmake"
if command -v cmake >/dev/null 2>&1 &&
    cmake -S bindings-cpp -B "$cmake_build" -DRMM_BUILD_TESTS=OFF \
        -DRMM_PREBUILT_LIBRARY="$PKG/lib/librmm_rs.so" >"$cmake_build.log" 2>&1 &&
    cmake --install "$cmake_build" --prefix "$cmake_build/prefix" >>"$cmake_build.log" 2>&1; then
    mkdir -p "$PKG/lib/cmake"
    cp -r "$cmake_build/prefix/lib/cmake/rmm" "$PKG/lib/cmake/rmm"
else
    log "WARNING: no CMake package in the wheel (cmake missing or failed: $cmake_build.log)"
fi

log "maturin build --release --zig --compatibility manylinux_2_28"
mkdir -p "$OUT"
before="$(ls "$OUT"/*.whl 2>/dev/null || true)"
RMM_PYTHON_LINK_LIBRMM="$PKG/lib" python3 -m maturin build --release --locked --zig \
    --compatibility manylinux_2_28 -m bindings-python/Cargo.toml -o "$OUT" >&2
wheel="$(ls -t "$OUT"/rmm_rs-*.whl | head -1)"
[ -n "$wheel" ] && [ "$wheel" != "$before" ] || { echo "no wheel was built" >&2; exit 1; }

# The checks: one librmm_rs.so, headers, and a module that needs it through $ORIGIN/lib.
python3 - "$wheel" <<'PY'
import subprocess, sys, tempfile, zipfile
wheel = sys.argv[1]
names = zipfile.ZipFile(wheel).namelist()
libs = [n for n in names if n.endswith("librmm_rs.so") or "librmm" in n.rsplit("/", 1)[-1]]
assert libs == ["rmm/lib/librmm_rs.so"], f"librmm in the wheel: {libs}"
assert {"rmm/include/rmm/rmm_c.h", "rmm/include/rmm_rs/rmm_c.h"} <= set(names), "no headers"
assert "rmm/_rmm.abi3.so" in names, "no extension module"
assert "-cp310-abi3-manylinux_2_28_x86_64" in wheel, f"tag: {wheel}"
with tempfile.TemporaryDirectory() as d:
    zipfile.ZipFile(wheel).extract("rmm/_rmm.abi3.so", d)
    dyn = subprocess.run(["readelf", "-d", f"{d}/rmm/_rmm.abi3.so"], capture_output=True, text=True).stdout
assert "Shared library: [librmm_rs.so]" in dyn, "the module does not link librmm_rs.so"
assert "$ORIGIN/lib" in dyn, "no RUNPATH $ORIGIN/lib"
cmake = "rmm/lib/cmake/rmm/rmm-config.cmake" in names
print(f"build-wheel: {wheel}: librmm_rs.so once, headers, CMake package: {'yes' if cmake else 'NO'}", file=sys.stderr)
PY
echo "$wheel"
