#!/usr/bin/env bash
# Benchmarks, first half (runs HERE, where cargo and pip are): builds the Rust criterion benchmark
# (core/benches/allocations.rs) and RMM 26.10's side of the same workloads
# (benchmarks/peer/rmm_peer_bench.cpp, compiled with g++ against the librmm-cu13 wheel's headers and
# library, and CUDA's runtime headers from the nvidia-cuda-runtime/-crt wheels), and stages both in
# stage/bench/ with the shared libraries they need. Then, with the device tool:
#   bash scripts/bench-gpu-run.sh      (carry ["stage"])
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUTDIR=$ROOT/stage/bench
CACHE=${RMM_BENCH_CACHE:-$ROOT/target/bench-deps}
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/lib" "$CACHE"

echo "==> rust: cargo bench --no-run (release)"
exe=$(cargo bench -p rmm-core --bench allocations --no-run --message-format=json 2>/dev/null |
    python3 -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["executable"])' | tail -1)
[ -n "$exe" ] || { echo "could not find the benchmark executable" >&2; exit 1; }
cp "$exe" "$OUTDIR/allocations"
strip "$OUTDIR/allocations"

echo "==> peer: RMM 26.10 wheels and CUDA runtime headers into $CACHE"
pip_get() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$CACHE/wheels" "$@" </dev/null; }
ls "$CACHE"/wheels/librmm_cu13-26.10.* >/dev/null 2>&1 || pip_get 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*'
ls "$CACHE"/wheels/nvidia_cuda_runtime-13.0.* >/dev/null 2>&1 || pip_get 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'
rm -rf "$CACHE/unpacked" && mkdir -p "$CACHE/unpacked"
for w in "$CACHE"/wheels/*.whl; do (cd "$CACHE/unpacked" && python3 -m zipfile -e "$w" .); done
U=$CACHE/unpacked

echo "==> peer: g++ benchmarks/peer/rmm_peer_bench.cpp against RMM 26.10"
g++ -std=c++20 -O2 -Wall \
    -I "$U/librmm/include/rapids" -I "$U/librmm/include" -I "$U/rapids_logger/include" -I "$U/nvidia/cu13/include" \
    benchmarks/peer/rmm_peer_bench.cpp -o "$OUTDIR/rmm_peer_bench" \
    -L "$U/librmm/lib64" -lrmm -L "$U/rapids_logger/lib64" -lrapids_logger \
    -L "$U/nvidia/cu13/lib" -l:libcudart.so.13 -lpthread -Wl,-rpath,'$ORIGIN/lib'
cp "$U/librmm/lib64/librmm.so" "$U/rapids_logger/lib64/librapids_logger.so" "$OUTDIR/lib/"
cp scripts/bench-table.py "$OUTDIR/"
du -sh "$OUTDIR"
echo "Staged. On the GPU machine (carry [\"stage\"]): bash scripts/bench-gpu-run.sh"
