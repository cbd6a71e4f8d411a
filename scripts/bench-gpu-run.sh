#!/usr/bin/env bash
# Benchmarks, second half (runs THERE, on the GPU machine, with stage/ carried; see bench-stage.sh).
# Runs the Rust criterion benchmark and RMM 26.10's peer binary on the same workloads in one go, and
# writes $OUT/bench.csv (every number), $OUT/bench.md (the table for docs/benchmarks.md) and the logs.
# RMM_BENCH_QUICK=1 shortens criterion's measurement for a smoke run; RMM_BENCH_RESOURCES (peer) and
# RMM_BENCH_FILTER (Rust, a regex such as "/pool/") run a subset.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$PWD/stage/bench
OUT=${OUT:-/tmp/rmm-bench-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CRITERION_HOME=/tmp/criterion
rm -rf "$CRITERION_HOME"
nvidia-smi -L | tee "$OUT/machine.txt"

resources=${RMM_BENCH_RESOURCES:-"pool arena binning cuda_async cuda"}
peer=$OUT/peer.csv
echo "impl,resource,workload,threads,ops,seconds,ns_per_op" >"$peer"
for workload in pair256 random; do
    for r in $resources; do
        for t in 1 4 16; do
            iters=200000; [ "$r" = cuda ] && iters=2000
            "$B/rmm_peer_bench" --resource "$r" --workload "$workload" --threads "$t" --iters "$iters" \
                >>"$peer" 2>>"$OUT/bench-peer.log" || echo "peer $r $workload $t failed (bench-peer.log)" | tee -a "$OUT/bench-peer.log"
        done
    done
done
for t in 1 4 16; do
    "$B/rmm_peer_bench" --workload empty --threads "$t" --iters 2000000 >>"$peer" 2>>"$OUT/bench-peer.log"
done

times="--warm-up-time 1 --measurement-time 3"
[ "${RMM_BENCH_QUICK:-0}" = 1 ] && times="--warm-up-time 0.2 --measurement-time 0.5"
# RMM_BENCH_FILTER narrows the Rust side the way RMM_BENCH_RESOURCES narrows the peer (a regex).
# shellcheck disable=SC2086
"$B/allocations" --bench $times ${RMM_BENCH_FILTER:+"$RMM_BENCH_FILTER"} >"$OUT/bench-rust.log" 2>&1 ||
    echo "rust benchmark exit $? (bench-rust.log)"

python3 "$B/bench-table.py" "$CRITERION_HOME" "$peer" "$OUT/bench.csv" "$OUT/bench.md"
cat "$OUT/bench.md"
