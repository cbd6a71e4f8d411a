#!/usr/bin/env bash
# The 1-thread 256-byte pair per stream kind, measured long (runs THERE, on the GPU machine, with
# stage/bench carried; see bench-stage.sh). The 1-thread cells of bench-gpu-run.sh move by 30-50 %
# between calls (3 x 60,000 pairs in fresh threads); this runs each cell for about
# RMM_BENCH_MIN_MS (default 200) ms, RMM_BENCH_REPEAT (default 5) times, for RMM 26.10 and our C++
# build (benchmarks/peer/rmm_peer_bench.cpp, the g++ builds from stage/bench/gxx), and the Rust
# criterion benchmark's 1-thread pairs. Resources: RMM_BENCH_RESOURCES (default "pool binning");
# RMM_BENCH_PEER=0 skips RMM 26.10; RMM_BENCH_OURS another staging of ours (as in bench-gpu-run.sh),
# RMM_BENCH_LABEL a suffix for our impl names (an A/B in one call).
# Then benchmarks/peer/stream_switch_pair.cpp: one thread moving from stream kind to stream kind.
# Writes $OUT/one-thread.csv (impl,resource,workload,stream,threads,ns_per_op),
# $OUT/stream-switch.txt and the logs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
B=$PWD/stage/bench
OURS=${RMM_BENCH_OURS:-$B}
OUT=${OUT:-/tmp/rmm-bench-out}
W=/tmp/rmm-one-thread
mkdir -p "$OUT" && rm -rf "$W" && mkdir -p "$W/peer"
for w in "$B"/wheels/librmm*.whl "$B"/wheels/rapids_logger*.whl; do (cd "$W/peer" && python3 -m zipfile -e "$w" .); done
CUDA_LIB=/usr/local/cuda/lib64
PEER_LIBS=$W/peer/librmm/lib64:$W/peer/rapids_logger/lib64:$CUDA_LIB
OUR_LIBS=$OURS/rmmrs:$CUDA_LIB
nvidia-smi -L >"$OUT/one-thread-machine.txt"
# One CPU for every run (RMM_BENCH_CPU, default 2): a 1-thread cell moved by up to 2x between runs
# whose thread the scheduler placed anew.
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${RMM_BENCH_CPU:-2}")
echo "pinned: ${pin[*]:-no (taskset missing)}" >>"$OUT/one-thread-machine.txt"
label=${RMM_BENCH_LABEL:-}
csv=$OUT/one-thread${label:+-$label}.csv
echo "impl,resource,workload,stream,threads,ns_per_op" >"$csv"
args=(--workload pair256 --stream own,foreign,legacy,ptds --threads 1 --iters 200000
      --repeat "${RMM_BENCH_REPEAT:-5}" --min-ms "${RMM_BENCH_MIN_MS:-200}")
for r in ${RMM_BENCH_RESOURCES:-pool binning}; do
    # The C++ rows: impl,resource,workload,threads,ops,seconds,ns_per_op,stream
    impls="rmm_peer_bench rmmrs_cpp_bench"; [ "${RMM_BENCH_PEER:-1}" = 0 ] && impls=rmmrs_cpp_bench
    for impl in $impls; do
        libs=$PEER_LIBS; suffix=""; [ $impl = rmmrs_cpp_bench ] && libs=$OUR_LIBS && suffix=$label
        LD_LIBRARY_PATH=$libs "${pin[@]}" "$B/gxx/$impl" --resource "$r" "${args[@]}" 2>>"$OUT/one-thread.log" |
            tee -a "$OUT/one-thread.log" |
            awk -F, -v s="${suffix:+-$suffix}" 'NF==8 {print $1 s","$2","$3","$8","$4","$7}' >>"$csv"
    done
done
# Rust: criterion's 1-thread pairs (time per element = ns per pair).
filter="pair256/($(echo ${RMM_BENCH_RESOURCES:-pool binning} | tr ' ' '|'))\\.[a-z]+/1\$"
RMM_BENCH_WORKLOADS=pair256 RMM_BENCH_RESOURCES=$(echo ${RMM_BENCH_RESOURCES:-pool binning} | tr ' ' ,) \
    LD_LIBRARY_PATH=$CUDA_LIB "${pin[@]}" "$OURS/allocations" --bench \
    --warm-up-time 0.5 --measurement-time 2 "$filter" >"$OUT/one-thread-rust${label:+-$label}.log" 2>&1
python3 - "$OUT/one-thread-rust${label:+-$label}.log" "${label:+-$label}" >>"$csv" <<'PY'
import re, sys
name = None
units = {"ps": 1e-3, "ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"^(pair256/\S+)", line)
    if m:
        name = m.group(1)
    t = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
    if name and t:
        _, rest = name.split("/", 1)
        res_kind, threads = rest.rsplit("/", 1)
        res, kind = res_kind.rsplit(".", 1)
        print(f"rmm-rs{sys.argv[2]},{res},pair256,{kind},{threads},{float(t.group(1)) * units[t.group(2)]:.2f}")
        name = None
PY
# One thread moving from stream kind to stream kind on one resource (ours; RMM_BENCH_OURS's librmm_rs.so).
for r in ${RMM_BENCH_RESOURCES:-pool binning}; do
    LD_LIBRARY_PATH=$OUR_LIBS "${pin[@]}" "$B/gxx/stream_switch_pair" 2000000 "$r"
done >"$OUT/stream-switch${label:+-$label}.txt" 2>&1
cat "$csv" "$OUT/stream-switch${label:+-$label}.txt"
