#!/usr/bin/env bash
# Benchmarks, second half (runs THERE, on the GPU machine, with stage/ carried; see bench-stage.sh).
# Builds benchmarks/peer/rmm_peer_bench.cpp with nvcc twice (against RMM 26.10's wheel, and against
# our <rmm/...> headers + librmm_rs.so; g++-built copies from stage/bench/gxx are the fallback), then runs
# RMM 26.10, our C++ build and the Rust criterion benchmark on the same workloads in one go. Writes
# $OUT/bench.csv (every number), $OUT/bench.md (the tables for docs/benchmarks.md) and the logs.
# Every workload runs on four kinds of stream (own, foreign, legacy, ptds: see rmm_peer_bench.cpp).
# Subsets: RMM_BENCH_RESOURCES (C++; default pool binning arena cuda_async), RMM_BENCH_RUST_RESOURCES
# (Rust; default pool,binning: the engine issue 10 changed; the arena is compared through the C++
# API), RMM_BENCH_KINDS and RMM_BENCH_WORKLOADS (comma lists), RMM_BENCH_FILTER (Rust, a regex such
# as "pair256/pool\\."). RMM_BENCH_RUST=0 skips the Rust side, RMM_BENCH_CPP=0 the C++ one (to
# split the run over two calls); RMM_BENCH_FULL=1 gives criterion its usual measurement times,
# RMM_BENCH_TIMES other criterion options (default "--warm-up-time 0.2 --measurement-time 0.5"),
# RMM_BENCH_ITERS the C++ operations per run (default 200000), RMM_BENCH_REPEAT the C++ timed runs
# per configuration whose median is printed (default 3; before 2026-11-25 one run), RMM_BENCH_MIN_MS
# about how long a C++ pair/multistream run lasts, in ms (iterations scaled up to it; default 0), RMM_BENCH_PEER=0
# skips RMM 26.10, RMM_BENCH_CPP_WORKLOADS narrows the C++ side's workloads (the second half of an A/B, see RMM_BENCH_OURS below). The
# default run should take about 5 minutes on an H200 (estimated, not yet timed).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
B=$ROOT/stage/bench
# Ours from another staging (an A/B of two builds in one call): a folder with `allocations` and
# `rmmrs/librmm_rs.so`, as `scripts/bench-stage.sh` leaves them; RMM and the headers stay from $B.
OURS=${RMM_BENCH_OURS:-$B}
W=/tmp/rmm-bench-work
OUT=${OUT:-/tmp/rmm-bench-out}
mkdir -p "$OUT"
rm -rf "$W" && mkdir -p "$W/peer" "$W/cccl" "$W/bin"
export CRITERION_HOME=/tmp/criterion
rm -rf "$CRITERION_HOME"
nvidia-smi -L | tee "$OUT/machine.txt"
CUDA_LIB=/usr/local/cuda/lib64

# The Rust side alone (RMM_BENCH_CPP=0) needs only $OURS/allocations and bench-table.py: no wheels,
# no CCCL, no builds (a smaller carry, next to the test suites' staging).
cpp_side=${RMM_BENCH_CPP:-1}
[ "$cpp_side" != 0 ] && for w in "$B"/wheels/*.whl; do (cd "$W/peer" && python3 -m zipfile -e "$w" .); done
[ "$cpp_side" != 0 ] && tar -C "$W/cccl" -xzf "$B/cccl.tar.gz"
U=$W/peer
PEER_LIBS=$U/librmm/lib64:$U/rapids_logger/lib64:$CUDA_LIB
OUR_LIBS=$OURS/rmmrs:$CUDA_LIB

build() { # name, then the compile command
    local name=$1; shift
    if "$@" >>"$OUT/build.log" 2>&1; then
        echo "$name: built with nvcc ($(nvcc --version | tail -1))" | tee -a "$OUT/machine.txt"
    else
        cp "$B/gxx/$name" "$W/bin/$name"
        echo "$name: nvcc build FAILED (build.log): using the g++ build from stage/bench/gxx" | tee -a "$OUT/machine.txt"
    fi
}
# RMM 26.10 bundles its CCCL under include/rapids; the CUDA runtime from the toolkit.
[ "$cpp_side" != 0 ] && build rmm_peer_bench nvcc -std=c++20 -O2 -cudart shared \
    -I "$U/librmm/include/rapids" -I "$U/librmm/include" -I "$U/rapids_logger/include" \
    benchmarks/peer/rmm_peer_bench.cpp -o "$W/bin/rmm_peer_bench" \
    -L "$U/librmm/lib64" -lrmm -L "$U/rapids_logger/lib64" -lrapids_logger
# Ours: CCCL 3.5 first (the toolkit's CCCL 3.0.1 has no any_resource), then our headers.
[ "$cpp_side" != 0 ] && build rmmrs_cpp_bench nvcc -std=c++20 -O2 -cudart shared -DRMM_BENCH_IMPL='"rmm-rs-cpp"' \
    -I "$W/cccl/nvidia/cu13/include/cccl" -I bindings-cpp/include \
    benchmarks/peer/rmm_peer_bench.cpp -o "$W/bin/rmmrs_cpp_bench" -L "$B/rmmrs" -lrmm_rs

# One process per implementation and resource; it runs every workload x stream kind x thread count,
# each on a fresh resource. --iters is the total of pair/multistream operations over all threads.
resources=${RMM_BENCH_RESOURCES:-"pool binning arena cuda_async"}
kinds=${RMM_BENCH_KINDS:-own,foreign,legacy,ptds}
workloads=${RMM_BENCH_WORKLOADS:-pair256,random,multistream}
peer=$OUT/peer.csv
echo "impl,resource,workload,threads,ops,seconds,ns_per_op,stream" >"$peer"
cxx_run() { # binary, library path, args...
    local bin=$1 libs=$2; shift 2
    LD_LIBRARY_PATH=$libs "$W/bin/$bin" "$@" >>"$peer" 2>>"$OUT/bench-cpp.log" ||
        echo "$bin $* failed (bench-cpp.log)" | tee -a "$OUT/bench-cpp.log"
}
[ "${RMM_BENCH_CPP:-1}" = 0 ] && resources=""
for r in $resources; do
    iters=${RMM_BENCH_ITERS:-200000}; [ "$r" = cuda ] && iters=2000
    args=(--resource "$r" --workload "${RMM_BENCH_CPP_WORKLOADS:-$workloads}" --stream "$kinds" --threads 1,4,16 --iters "$iters" --repeat "${RMM_BENCH_REPEAT:-3}" --min-ms "${RMM_BENCH_MIN_MS:-0}")
    [ "${RMM_BENCH_PEER:-1}" != 0 ] && cxx_run rmm_peer_bench "$PEER_LIBS" "${args[@]}"
    cxx_run rmmrs_cpp_bench "$OUR_LIBS" "${args[@]}"
done
if [ "${RMM_BENCH_CPP:-1}" != 0 ]; then
    cxx_run rmm_peer_bench "$PEER_LIBS" --workload empty --stream own --threads 1,4,16 --iters 2000000
    cxx_run rmmrs_cpp_bench "$OUR_LIBS" --workload empty --stream own --threads 1,4,16 --iters 2000000
fi
echo "C++ side done after ${SECONDS}s" | tee -a "$OUT/machine.txt"

if [ "${RMM_BENCH_RUST:-1}" != 0 ]; then
    # Quick criterion times by default (the stream axis makes 100+ benchmarks); RMM_BENCH_FULL=1 for
    # criterion's usual 1 s warm-up and 3 s measurement.
    times=${RMM_BENCH_TIMES:-"--warm-up-time 0.2 --measurement-time 0.5"}
    [ "${RMM_BENCH_FULL:-0}" = 1 ] && times="--warm-up-time 1 --measurement-time 3"
    # shellcheck disable=SC2086
    RMM_BENCH_KINDS=$kinds RMM_BENCH_RESOURCES=${RMM_BENCH_RUST_RESOURCES:-pool,binning} \
        LD_LIBRARY_PATH=$CUDA_LIB "$OURS/allocations" --bench $times ${RMM_BENCH_FILTER:+"$RMM_BENCH_FILTER"} \
        >"$OUT/bench-rust.log" 2>&1 || echo "rust benchmark exit $? (bench-rust.log)"
    echo "Rust side done after ${SECONDS}s" | tee -a "$OUT/machine.txt"
fi

python3 "$B/bench-table.py" "$CRITERION_HOME" "$peer" "$OUT/bench.csv" "$OUT/bench.md"
cat "$OUT/bench.md"
