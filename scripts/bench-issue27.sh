#!/usr/bin/env bash
# Issue 27's GPU measurements in two device calls (runs THERE, from the repo root, with stage/ and
# .whl/ carried; stage them HERE with scripts/bench-issue27-stage.sh):
#
#   bash scripts/bench-issue27.sh record rmm-cpp   # call 1 (about 8-9 minutes)
#   bash scripts/bench-issue27.sh peer python      # call 2 (about 7-8 minutes)
#
# Parts:
#   record   real allocation logs for REPLAY_BENCH, recorded with rmm-rs's logging adaptor from a
#            short PyTorch training loop and a CuPy pipeline (benchmarks/python/record_replay_log.py):
#            $OUT/replay-torch.csv, $OUT/replay-cupy.csv
#   rmm-cpp  RMM's own C++ benchmarks (scripts/gpu-peer-bench.sh; split a sweep over calls with
#            RMM_PEER_BENCH_VARIANTS and RMM_PEER_BENCH_PROGRAMS, then merge the archives here with
#            scripts/peer/bench_table.py): ours, RMM 26.10, and RMM 26.08 for
#            the programs that do not build against 26.10; 3 repetitions of at least 0.2 s each (the
#            table gives each cell's median and spread); RANDOM_ALLOCATIONS_BENCH with 1000
#            allocations for every resource and 10,000 for pool, binning and arena (another set of
#            runs: RMM_PEER_RANDOM_RUNS, as scripts/peer/bench.sh reads it); REPLAY_BENCH on the
#            synthetic log and on the recorded ones. $OUT/peer-bench/peer-bench.{md,csv}
#   peer     benchmarks/peer/rmm_peer_bench.cpp, ours (C++ API) and RMM 26.10 built by nvcc in this
#            call: one thread, every stream kind (own, foreign, legacy, ptds): pool and binning
#            random churn (peer benchmark's `random`, and `rmmrandom`: RMM's -n 1000 -m 4 shape)
#            and pairs, the arena's 256-byte pair and churn, 5 runs of >= 100 ms each; the
#            multi-thread tables (4 and 16 threads: pairs, multistream, rmmrandom; random for
#            binning and the arena) in the same call; then the Rust side's one-thread churn.
#            $OUT/bench/bench.{md,csv}
#   peer-one the one-thread half of `peer` only, in RMM_ISSUE27_ROUNDS rounds (default 1) of
#            RMM 26.10 then ours, and no Rust side. $OUT/bench/bench.{md,csv}
#   peer-many the multi-thread half of `peer` only (no Rust side; RMM_ISSUE27_MANY_RESOURCES picks
#            some of "pool binning arena": one call does not fit all three). $OUT/bench/bench.{md,csv}
#   probes   benchmarks/probes/replay_floor.cu on REPLAY_BENCH's synthetic log and the recorded
#            ones (stage/bench/replay-*.csv): the harness's own time and the synchronizations'
#            floors. $OUT/probes/replay-floor.txt
#   cuda-async benchmarks/probes/async_floor.cu (the driver's pool through the runtime and the driver
#            API, with and without the decompression usage; then again with rmm-rs loaded, beside
#            rmm-rs's own cuda_async resource), then RANDOM_ALLOCATIONS_BENCH's
#            cuda_async cells at 1, 4, 64 MiB, RMM 26.08 and ours alternately, alone and after
#            pool, binning and arena as the program runs them, RMM_ISSUE27_ASYNC_ROUNDS (5) rounds,
#            where a `rmm-cpp` call on the same warm machine left the builds (RMM_ISSUE27_ASYNC_FLOOR=0:
#            RMM's program only). $OUT/cuda-async/
#   python-path  benchmarks/python/buffer_path.py, ours and RMM 26.10 alternately, twice each: a
#            DeviceBuffer with nothing allocated (the binding alone), with 256 bytes, and the
#            resource's own pair called from Python. $OUT/python/buffer-path.txt
#   python   benchmarks/python/end_to_end.py, rmm-rs and RMM 26.10 alternately, twice each (7 rounds
#            a process; RMM_ISSUE27_PY_ROUNDS processes each, RMM_ISSUE27_PY_PARTS a subset): DeviceBuffer create+drop (Pool, Arena, Binning, CudaAsync, the driver's
#            floor), a CuPy loop, a PyTorch training step. $OUT/python/end-to-end.md
# Environment: OUT (default /tmp/rmm-gpu-out).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
STAGE=$ROOT/stage
OUT=${OUT:-/tmp/rmm-gpu-out}
mkdir -p "$OUT"
PARTS=" ${*:-record rmm-cpp} "
want() { [[ $PARTS == *" $1 "* ]]; }
say() { echo "[bench-issue27 $(date +%T) ${SECONDS}s] $*" | tee -a "$OUT/issue27.txt"; }
nvidia-smi -L 2>/dev/null | tee -a "$OUT/issue27.txt"

# Python sites: ours from stage/wheels, RMM 26.10 from .whl/ (both packages are named `rmm`).
sites() {
    [ -d /tmp/site/rmm ] || python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
        --target /tmp/site "$(ls "$STAGE"/wheels/*.whl | head -1)" || say "our wheel did not install"
    [ -d /tmp/peer-site/rmm ] || python3 -m pip install -q --no-index --no-deps --no-compile --upgrade \
        --target /tmp/peer-site .whl/*.whl || say "RMM 26.10's wheels did not install"
}

if want record; then
    sites
    for w in torch cupy; do
        PYTHONPATH=/tmp/site timeout 180 python3 benchmarks/python/record_replay_log.py "$w" "$OUT/replay-$w.csv" \
            >>"$OUT/record.log" 2>&1 && say "recorded: $(tail -1 "$OUT/record.log")" ||
            say "recording the $w log failed (record.log)"
    done
fi

if want rmm-cpp; then
    logs=""
    for w in torch cupy; do [ -s "$OUT/replay-$w.csv" ] && logs="$logs $w=$OUT/replay-$w.csv"; done
    RMM_PEER_OUT=$OUT/peer-bench \
        RMM_PEER_BENCH_VARIANTS=${RMM_PEER_BENCH_VARIANTS:-ours rmm-26.10 rmm-26.08} \
        RMM_PEER_BENCH_FALLBACK_ONLY=rmm-26.08 \
        RMM_PEER_BENCH_MIN_TIME=${RMM_PEER_BENCH_MIN_TIME:-0.2s} \
        RMM_PEER_BENCH_REPETITIONS=${RMM_PEER_BENCH_REPETITIONS:-3} \
        RMM_PEER_BENCH_TIMEOUT=${RMM_PEER_BENCH_TIMEOUT:-150} \
        RMM_PEER_RANDOM_RUNS=${RMM_PEER_RANDOM_RUNS:-"=-n 1000;pool-n10000=-r pool -n 10000;binning-n10000=-r binning -n 10000;arena-n10000=-r arena -n 10000"} \
        RMM_PEER_REPLAY_LOGS="$logs" \
        bash scripts/gpu-peer-bench.sh >"$OUT/rmm-cpp.log" 2>&1
    say "rmm-cpp: exit $? (rmm-cpp.log); $(grep -E '^ours against' "$OUT/peer-bench/peer-bench.md" 2>/dev/null | tr '\n' ' ')"
    # The device tool brings back a bounded number of files: one archive of the JSON, the table beside.
    cp "$OUT"/peer-bench/peer-bench.{md,csv} "$OUT"/ 2>/dev/null
    tar -C "$OUT" -czf "$OUT/peer-bench.tgz" peer-bench && rm -rf "$OUT/peer-bench"
fi

if want peer || want peer-one || want peer-many; then
    B=$STAGE/bench
    W=/tmp/rmm-issue27-peer
    rm -rf "$W" && mkdir -p "$W/peer" "$W/cccl" "$W/bin" "$OUT/bench"
    for w in "$B"/wheels/*.whl; do (cd "$W/peer" && python3 -m zipfile -e "$w" .); done
    tar -C "$W/cccl" -xzf "$B/cccl.tar.gz"
    U=$W/peer
    CUDA_LIB=/usr/local/cuda/lib64
    PEER_LIBS=$U/librmm/lib64:$U/rapids_logger/lib64:$CUDA_LIB
    OUR_LIBS=$B/rmmrs:$CUDA_LIB
    build() {  # name, then the compile command; the g++ build staged HERE is the fallback
        local name=$1; shift
        "$@" >>"$OUT/bench/build.log" 2>&1 && say "$name: nvcc build" ||
            { cp "$B/gxx/$name" "$W/bin/$name"; say "$name: nvcc build FAILED, using the g++ build"; }
    }
    build rmm_peer_bench nvcc -std=c++20 -O2 -cudart shared \
        -I "$U/librmm/include/rapids" -I "$U/librmm/include" -I "$U/rapids_logger/include" \
        benchmarks/peer/rmm_peer_bench.cpp -o "$W/bin/rmm_peer_bench" \
        -L "$U/librmm/lib64" -lrmm -L "$U/rapids_logger/lib64" -lrapids_logger
    build rmmrs_cpp_bench nvcc -std=c++20 -O2 -cudart shared -DRMM_BENCH_IMPL='"rmm-rs-cpp"' \
        -I "$W/cccl/nvidia/cu13/include/cccl" -I bindings-cpp/include \
        benchmarks/peer/rmm_peer_bench.cpp -o "$W/bin/rmmrs_cpp_bench" -L "$B/rmmrs" -lrmm_rs
    csv=$OUT/bench/peer.csv
    echo "impl,resource,workload,threads,ops,seconds,ns_per_op,stream" >"$csv"
    # One-thread cells on one CPU: a 1-thread cell moved by up to 2x when the scheduler moved it.
    pin=(); command -v taskset >/dev/null && pin=(taskset -c 2)
    run() {  # resource workloads threads repeat min-ms iters: both implementations
        local on=(); [ "$3" = 1 ] && on=("${pin[@]}")
        for impl in rmm_peer_bench:$PEER_LIBS rmmrs_cpp_bench:$OUR_LIBS; do
            LD_LIBRARY_PATH=${impl#*:} timeout 240 "${on[@]}" "$W/bin/${impl%%:*}" --resource "$1" --workload "$2" \
                --stream own,foreign,legacy,ptds --threads "$3" --repeat "$4" --min-ms "$5" --iters "$6" \
                >>"$csv" 2>>"$OUT/bench/peer.log" || say "${impl%%:*} $1 $2 $3: exit $? (peer.log)"
        done
    }
    # Which halves run: `peer` both and the Rust side, `peer-one` the one-thread cells only,
    # `peer-many` the multi-thread tables only.
    one_thread=1 many_threads=1 rust_side=1
    want peer-one && many_threads=0 rust_side=0
    want peer-many && one_thread=0 rust_side=0
    # One thread: the targets (pool and binning churn, the arena's pair), in ROUNDS rounds, RMM and
    # ours alternating within each: a cell's rows are then process runs spread over the call, and
    # the table gives their median and range.
    [ "$one_thread" = 1 ] && for round in $(seq "${RMM_ISSUE27_ROUNDS:-1}"); do
        for r in pool binning; do run "$r" random,rmmrandom,pair256 1 5 100 20000; done
        run arena pair256,rmmrandom 1 5 100 20000
        say "peer: one thread, round $round done"
    done
    # Many threads: the tables that must not fall behind (RMM_ISSUE27_MANY_RESOURCES: a subset).
    if [ "$many_threads" = 1 ]; then
        many=" ${RMM_ISSUE27_MANY_RESOURCES:-pool binning arena} "
        for r in pool binning arena; do
            [[ $many == *" $r "* ]] && run "$r" pair256,multistream,rmmrandom 4,16 3 50 200000
        done
        for r in binning arena; do [[ $many == *" $r "* ]] && run "$r" random 4,16 3 0 200000; done
        say "peer: many threads done"
    fi
    # The Rust side: one-thread churn and pairs, every kind of stream (criterion, quick times).
    criterion=/nonexistent
    if [ "$rust_side" = 1 ]; then
        export CRITERION_HOME=/tmp/criterion-issue27 && rm -rf "$CRITERION_HOME"
        RMM_BENCH_WORKLOADS=random,rmmrandom,pair256 RMM_BENCH_RESOURCES=pool,binning,arena \
            LD_LIBRARY_PATH=$CUDA_LIB timeout 200 "$B/allocations" --bench --warm-up-time 0.2 --measurement-time 0.5 \
            '/(pool|binning|arena)\.[a-z]+/1$' >"$OUT/bench/rust.log" 2>&1 || say "rust benchmark: exit $? (rust.log)"
        criterion=$CRITERION_HOME
    fi
    python3 "$B/bench-table.py" "$criterion" "$csv" "$OUT/bench/bench.csv" "$OUT/bench/bench.md" >/dev/null
    say "peer: done ($OUT/bench/bench.md)"
fi

if want probes; then
    P=$OUT/probes
    mkdir -p "$P"
    if nvcc -std=c++20 -O2 benchmarks/probes/replay_floor.cu -o "$P/replay_floor" >"$P/build.log" 2>&1; then
        python3 scripts/peer/make_replay_log.py "$P/replay-synthetic.csv" >>"$P/build.log" 2>&1
        for log in "$P/replay-synthetic.csv" archive/gpu-runs/data/2026-11-27-h200-replay-cupy.csv \
            archive/gpu-runs/data/2026-11-27-h200-replay-torch.csv; do
            timeout 120 "$P/replay_floor" "$log" 20 | tee -a "$P/replay-floor.txt" || say "replay_floor $log: exit $?"
        done
        say "probes: done ($P/replay-floor.txt)"
    else
        say "probes: nvcc build of replay_floor.cu FAILED ($P/build.log)"
    fi
fi

if want cuda-async; then
    # RANDOM_ALLOCATIONS' cuda_async cells: the driver's pool through the runtime and the driver API,
    # with and without the decompression usage, in one process (benchmarks/probes/async_floor.cu);
    # then RMM's program itself, ours and 26.08 alternately, where a `rmm-cpp` call on this warm
    # machine left its builds.
    P=$OUT/cuda-async
    mkdir -p "$P"
    if [ "${RMM_ISSUE27_ASYNC_FLOOR:-1}" = 0 ]; then
        say "cuda-async: async_floor.cu not run (RMM_ISSUE27_ASYNC_FLOOR=0)"
    elif nvcc -std=c++20 -O2 -I bindings-cpp/include benchmarks/probes/async_floor.cu -o "$P/async_floor" \
        -lcuda -ldl >"$P/build.log" 2>&1; then
        RMM_RS_LIBRARY=$STAGE/cpp/librmm_rs.so timeout 200 "$P/async_floor" 7 1 4 64 |
            tee -a "$P/async-floor.txt" || say "async_floor: exit $?"
    else
        say "cuda-async: nvcc build of async_floor.cu FAILED ($P/build.log)"
    fi
    # RMM's program itself, each run a new process, RMM 26.08 and ours alternately: `alone` runs
    # the cuda_async cells only (-r cuda_async); `program` runs them after pool, binning and arena
    # at the same sizes, as the full program orders them. Each run's median of 3 repetitions; the
    # spread between runs of one variant is what a ratio of two single runs must be read against.
    G=$ROOT/build/peer-bench-gpu
    rounds=${RMM_ISSUE27_ASYNC_ROUNDS:-5}
    for round in $(seq "$rounds"); do
        for variant in rmm-26.08 ours; do
            exe=$G/$variant/gbenchmarks/RANDOM_ALLOCATIONS_BENCH
            [ -x "$exe" ] || { [ "$round" = 1 ] && say "cuda-async: no $variant build of RANDOM_ALLOCATIONS_BENCH here"; continue; }
            # As scripts/peer/bench.sh runs them: each build finds its libraries by its run path.
            for shape in alone program; do
                if [ $shape = alone ]; then args=(-r cuda_async); filter='cuda_async_mr/1000/(1|4|64)$'
                else args=(); filter='(pool_mr|binning_mr|arena_mr|cuda_async_mr)/1000/(1|4|64)$'; fi
                timeout 120 "$exe" "${args[@]}" -n 1000 "--benchmark_filter=$filter" \
                    --benchmark_min_time=0.2s --benchmark_repetitions=3 \
                    --benchmark_report_aggregates_only=true 2>&1 |
                    sed "s/^/$variant $shape round $round: /" | grep -E 'cuda_async.*median|rror' |
                    tee -a "$P/random-allocations.txt"
            done
        done
    done
    # No file when neither build was here (a `rmm-cpp` call leaves them on a warm machine).
    [ -s "$P/random-allocations.txt" ] &&
        python3 benchmarks/probes/async_runs_table.py "$P/random-allocations.txt" | tee "$P/runs-table.md"
    rm -f "$P/async_floor"
    # One file back instead of several (the device tool returns a few files a call).
    tar -C "$OUT" -czf "$OUT/cuda-async.tgz" cuda-async && rm -rf "$P"
    say "cuda-async: done ($OUT/cuda-async.tgz)"
fi

if want python-path; then
    sites
    mkdir -p "$OUT/python"
    for round in 1 2; do
        for side in ours:/tmp/site rmm:/tmp/peer-site; do
            PYTHONPATH=${side#*:} timeout 120 python3 benchmarks/python/buffer_path.py --calls 50000 \
                --json "$OUT/python/path-${side%%:*}-$round.json" >>"$OUT/python/buffer-path.txt" 2>&1 ||
                say "buffer_path (${side%%:*}): exit $?"
        done
    done
    say "python-path: done ($OUT/python/buffer-path.txt)"
fi

if want python; then
    sites
    mkdir -p "$OUT/python"
    ours=() rmm=()
    for round in $(seq "${RMM_ISSUE27_PY_ROUNDS:-2}"); do
        for part in ${RMM_ISSUE27_PY_PARTS:-buffers cupy torch}; do
            for side in ours:/tmp/site rmm:/tmp/peer-site; do
                json=$OUT/python/${side%%:*}-$part-$round.json
                PYTHONPATH=${side#*:} timeout 150 python3 benchmarks/python/end_to_end.py "$part" --rounds 7 \
                    --json "$json" >>"$OUT/python/end-to-end.log" 2>&1 || say "end_to_end $part (${side%%:*}): exit $?"
                [ "${side%%:*}" = ours ] && ours+=("$json") || rmm+=("$json")
            done
        done
    done
    python3 benchmarks/python/compare_end_to_end.py "${ours[@]}" -- "${rmm[@]}" | tee "$OUT/python/end-to-end.md"
    say "python: done"
fi
say "parts done:$PARTS"
