#!/usr/bin/env bash
# Builds the rmm-rs source distribution (maturin sdist: the Python package and the workspace crates
# the extension needs) and checks it: no build outputs inside (no librmm_rs.so, no compiled module), and
# the sources a build needs present.
#
#   bash bindings-python/build-sdist.sh [OUT_DIR]      (default: <cargo target dir>/sdist)
#
# `pip install rmm_rs-*.tar.gz` builds the extension module standalone (cargo and a network for
# maturin are needed): the Python API works; the process's registry is then the module's own until
# a librmm_rs.so is loaded (rmm_core::registry). The binary wheel (build-wheel.sh) is what carries
# librmm_rs.so, the C++ headers and the CMake package.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/sdist}"
python3 -m maturin --version >/dev/null 2>&1 || python3 -m pip install -q maturin >&2
rm -rf "$OUT" && mkdir -p "$OUT"
python3 -m maturin sdist -m bindings-python/Cargo.toml -o "$OUT" >&2
sdist=$(ls "$OUT"/rmm_rs-*.tar.gz)
listing=$(tar tzf "$sdist")
bad=$(grep -E '\.so$|/lib/cmake/|/target/' <<<"$listing" || true)
if [ -n "$bad" ]; then
    echo "build-sdist: build outputs in $sdist:" >&2
    echo "$bad" >&2
    exit 1
fi
for need in pyproject.toml Cargo.lock bindings-python/Cargo.toml core/Cargo.toml bindings-rust/Cargo.toml \
    python/rmm/__init__.py python/rmm/_rmm.pyi; do
    grep -q "^rmm_rs-[^/]*/$need\$" <<<"$listing" || { echo "build-sdist: $need missing from $sdist" >&2; exit 1; }
done
echo "build-sdist: $sdist ($(wc -l <<<"$listing") files, no build outputs)"
