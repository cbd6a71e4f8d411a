#!/usr/bin/env bash
# Builds the rmm-rs source distribution (maturin sdist: the Python package and the workspace crates
# the extension needs) and checks it: no build outputs inside (no librmm_rs.so, no compiled module), and
# the sources a build needs present.
#
#   bash bindings-python/build-sdist.sh [OUT_DIR]      (default: <cargo target dir>/sdist)
#
# The extension module is a client of the native library (librmm_rs, crate rmm-cpp), which the binary
# wheel carries (build-wheel.sh). An sdist carries no binaries, so its build links librmm_rs's C entry
# points into the module itself: this script adds their sources (bindings-cpp/src, the `rmm-c-abi`
# crate's) to what maturin packs and turns on the module's `bundled-native` feature in the sdist's
# pyproject.toml. `pip install rmm_rs-*.tar.gz` then builds a module that is the process's native
# library (cargo and a network for maturin are needed); the C++ headers and CMake package come with
# the wheel only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/sdist}"
python3 -m maturin --version >/dev/null 2>&1 || python3 -m pip install -q maturin >&2
rm -rf "$OUT" && mkdir -p "$OUT"
python3 -m maturin sdist -m bindings-python/Cargo.toml -o "$OUT" >&2
sdist=$(ls "$OUT"/rmm_rs-*.tar.gz)

# The bundled build: librmm_rs's sources beside rmm-c-abi's manifest, and the feature turned on.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$sdist"
top=$(ls "$work")
mkdir -p "$work/$top/bindings-cpp/rlib"
cp -r bindings-cpp/src "$work/$top/bindings-cpp/src"
# maturin drops the [lib] section whose path leaves the crate's folder: the manifest as written.
cp bindings-cpp/rlib/Cargo.toml "$work/$top/bindings-cpp/rlib/Cargo.toml"
python3 - "$work/$top/pyproject.toml" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
assert "features" not in text.split("[tool.maturin]", 1)[1].split("\n[", 1)[0], "pyproject.toml sets features already"
text = text.replace("[tool.maturin]\n", "[tool.maturin]\n# The sdist's module carries librmm_rs's C entry points (bindings-python/build-sdist.sh).\nfeatures = [\"bundled-native\"]\n", 1)
open(path, "w").write(text)
PY
tar -C "$work" -czf "$sdist" "$top"

listing=$(tar tzf "$sdist")
bad=$(grep -E '\.so$|/lib/cmake/|/target/' <<<"$listing" || true)
if [ -n "$bad" ]; then
    echo "build-sdist: build outputs in $sdist:" >&2
    echo "$bad" >&2
    exit 1
fi
for need in pyproject.toml Cargo.lock bindings-python/Cargo.toml core/Cargo.toml bindings-rust/Cargo.toml \
    bindings-cpp/rlib/Cargo.toml bindings-cpp/src/lib.rs python/rmm/__init__.py python/rmm/_rmm.pyi; do
    grep -q "^rmm_rs-[^/]*/$need\$" <<<"$listing" || { echo "build-sdist: $need missing from $sdist" >&2; exit 1; }
done
tar xzf "$sdist" -O "$top/pyproject.toml" | grep -q '^features = \["bundled-native"\]' ||
    { echo "build-sdist: the sdist's pyproject.toml does not turn on bundled-native" >&2; exit 1; }
echo "build-sdist: $sdist ($(wc -l <<<"$listing") files, no build outputs, the native library bundled)"
