#!/usr/bin/env bash
# Benchmarks, first half (runs HERE, where cargo and pip are). Stages in stage/bench/:
#   allocations        the Rust criterion benchmark (core/benches/allocations.rs), release
#   wheels/            RMM 26.10 (librmm-cu13, rapids-logger) and the CUDA 13.0 runtime/crt header wheels
#   cccl.tar.gz        CCCL 3.5 + CUDA runtime headers (bindings-cpp/cmake/fetch-cccl.sh): our C++ headers
#                      need CCCL >= 3.1 and the GPU machine's toolkit has 3.0.1
#   rmmrs/librmm_rs.so    our librmm (release), for the C++ side of the same workloads
#   gxx/               both C++ binaries built here with g++, as a check and as a fallback should nvcc fail,
#                      and stream_switch_pair (benchmarks/peer/stream_switch_pair.cpp, ours only)
# benchmarks/peer/rmm_peer_bench.cpp is written once against RMM 26.x's C++ API; bench-gpu-run.sh
# builds it there with nvcc twice: against RMM 26.10, and against our headers (<rmm/...>) + librmm_rs.so.
# Then, with the device tool:
#   bash scripts/bench-gpu-run.sh      (carry ["stage"])
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUTDIR=$ROOT/stage/bench
CACHE=${RMM_BENCH_CACHE:-$ROOT/target/bench-deps}
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/wheels" "$OUTDIR/rmmrs" "$OUTDIR/gxx" "$CACHE"

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

echo "==> ours: cargo build --release -p rmm-cpp (librmm_rs.so)"
cargo build --release --locked -q -p rmm-cpp
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys, json; print(json.load(sys.stdin)["target_directory"])')
cp "$target/release/librmm_rs.so" "$OUTDIR/rmmrs/librmm_rs.so"
strip --strip-debug "$OUTDIR/rmmrs/librmm_rs.so"

echo "==> CCCL 3.5 + CUDA runtime headers"
cccl_dirs=$(bash bindings-cpp/cmake/fetch-cccl.sh "$ROOT/build/cccl" | tail -n 1)
tar -C "$ROOT/build/cccl" -czf "$OUTDIR/cccl.tar.gz" nvidia

echo "==> peer: RMM 26.10 wheels and CUDA runtime headers into $CACHE"
pip_get() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$CACHE/wheels" "$@" </dev/null; }
ls "$CACHE"/wheels/librmm_cu13-26.10.* >/dev/null 2>&1 || pip_get 'librmm-cu13==26.10.*' 'rapids-logger==0.3.*'
ls "$CACHE"/wheels/nvidia_cuda_runtime-13.0.* >/dev/null 2>&1 || pip_get 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'
cp "$CACHE"/wheels/*.whl "$OUTDIR/wheels/"
rm -rf "$CACHE/unpacked" && mkdir -p "$CACHE/unpacked"
for w in "$CACHE"/wheels/*.whl; do (cd "$CACHE/unpacked" && python3 -m zipfile -e "$w" .); done
U=$CACHE/unpacked

echo "==> g++ check builds: the same source against RMM 26.10 and against rmm-rs"
g++ -std=c++20 -O2 -Wall \
    -I "$U/librmm/include/rapids" -I "$U/librmm/include" -I "$U/rapids_logger/include" -I "$U/nvidia/cu13/include" \
    benchmarks/peer/rmm_peer_bench.cpp -o "$OUTDIR/gxx/rmm_peer_bench" \
    -L "$U/librmm/lib64" -lrmm -L "$U/rapids_logger/lib64" -lrapids_logger \
    -L "$U/nvidia/cu13/lib" -l:libcudart.so.13 -lpthread
IFS=';' read -r -a inc <<<"$cccl_dirs"
g++ -std=c++20 -O2 -Wall -DRMM_BENCH_IMPL='"rmm-rs-cpp"' \
    -I bindings-cpp/include "${inc[@]/#/-I}" \
    -I "$U/nvidia/cu13/include" benchmarks/peer/rmm_peer_bench.cpp -o "$OUTDIR/gxx/rmmrs_cpp_bench" \
    -L "$OUTDIR/rmmrs" -lrmm_rs -L "$U/nvidia/cu13/lib" -l:libcudart.so.13 -lpthread
g++ -std=c++20 -O2 -Wall -I bindings-cpp/include "${inc[@]/#/-I}" -I "$U/nvidia/cu13/include" \
    benchmarks/peer/stream_switch_pair.cpp -o "$OUTDIR/gxx/stream_switch_pair" \
    -L "$OUTDIR/rmmrs" -lrmm_rs -L "$U/nvidia/cu13/lib" -l:libcudart.so.13 -lpthread
cp scripts/bench-table.py "$OUTDIR/"
du -sh "$OUTDIR"
echo "Staged. On the GPU machine (carry [\"stage\"]): bash scripts/bench-gpu-run.sh"
