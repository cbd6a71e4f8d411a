#!/usr/bin/env bash
# RMM's own C++ benchmarks (../shared/peer-tests/rmm-cpp-benchmarks, unmodified) built twice with
# bindings-cpp/peer/bench (RMM's own cpp/benchmarks/CMakeLists.txt): against our installed package
# (find_package(rmm)) and against RAPIDS RMM's librmm from the librmm-cu13 wheels, 26.10 (the release
# we compare with) and 26.08 (the line these sources come from: 26.10 changed cuda_stream_pool's
# get_stream() to return cuda::stream_ref, so two of them do not build against 26.10), then run with
# short times, one table of ours vs each RMM.
#
#   bash scripts/peer/bench.sh               # here: builds what g++ can (the .cpp benchmarks), no run
#   bash scripts/gpu-peer-bench.sh           # the GPU machine: nvcc too, and runs them (see there)
#
# Environment:
#   RMM_PEER_BENCH_DIR      RMM's benchmarks (default ../shared/peer-tests/rmm-cpp-benchmarks)
#   RMM_PEER_BUILD_DIR      build folder (default build/peer-bench); our package goes to its prefix/
#   RMM_PEER_OUT            logs, JSON results and the tables (default $RMM_PEER_BUILD_DIR/logs)
#   RMM_PEER_GBENCH_PREFIX  Google Benchmark >= 1.8 installed there (default build/gbench/prefix, as
#                           scripts/peer-bench-stage.sh builds it; else the system's, if any)
#   RMM_PEER_RMM_DIR        a folder with RMM's unpacked wheels as librmm-<version>/librmm (GPU: staged);
#                           else .whl/librmm_cu13-<version>*.whl, else pip download librmm-cu13==<version>
#   RMM_PEER_BENCH_RUN      1: run the benchmarks (default: 1 when a GPU is visible, else 0)
#   RMM_PEER_BENCH_MIN_TIME Google Benchmark's --benchmark_min_time (default 0.05s)
#   RMM_PEER_BENCH_REPETITIONS  --benchmark_repetitions (default 1); the table shows each cell's
#                           median and spread
#   RMM_PEER_RANDOM_RUNS    RANDOM_ALLOCATIONS_BENCH runs, ';'-separated LABEL=ARGS (default "=-n 1000":
#                           one run, 5 resources x 6 maximum sizes); a run with a label writes
#                           RANDOM_ALLOCATIONS_BENCH-LABEL.json
#   RMM_PEER_BENCH_FALLBACK_ONLY  variants (e.g. rmm-26.08) that run only the programs that did not
#                           build for any other RMM variant
#   RMM_PEER_REPLAY_LOGS    recorded logs for REPLAY_BENCH besides the synthetic one, space-separated
#                           LABEL=PATH (benchmarks/python/record_replay_log.py writes them); each writes
#                           REPLAY_BENCH-LABEL.json
#   RMM_PEER_BENCH_TIMEOUT  seconds per benchmark program (default 90)
#   RMM_PEER_BENCH_VARIANTS "ours rmm-26.10 rmm-26.08" (default), or some of them
#   RMM_PEER_BENCH_PROGRAMS  only these programs (names, space-separated; default all), so that one
#                           sweep can be split over several device calls
#   and those of scripts/peer/common.sh (RMM_PEER_PREBUILT_LIBRARY, RMM_PEER_CCCL_DIR, RMM_PEER_RAPIDS_LOGGER).
# Prints per variant which benchmarks built, then (when run) the table; writes $OUT/bench-<variant>.log,
# $OUT/<variant>/<BENCH>.json, $OUT/peer-bench.md and $OUT/peer-bench.csv. Exit status: 1 when a
# configure step fails or a benchmark that should build does not; 0 otherwise.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1

BENCH_DIR=${RMM_PEER_BENCH_DIR:-$ROOT/../shared/peer-tests/rmm-cpp-benchmarks}
BUILD=${RMM_PEER_BUILD_DIR:-$ROOT/build/peer-bench}
OUT=${RMM_PEER_OUT:-$BUILD/logs}
JOBS=${RMM_PEER_JOBS:-$(nproc)}
VARIANTS=${RMM_PEER_BENCH_VARIANTS:-ours rmm-26.10 rmm-26.08}
mkdir -p "$BUILD" "$OUT"
BUILD=$(cd "$BUILD" && pwd)
OUT=$(cd "$OUT" && pwd)
say() { printf '%s\n' "$*"; }
die() { say "peer bench: $*"; exit 1; }

[ -f "$BENCH_DIR/CMakeLists.txt" ] || die "no RMM C++ benchmarks at $BENCH_DIR (set RMM_PEER_BENCH_DIR)"
BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
for tool in cmake ninja g++ python3; do command -v "$tool" >/dev/null || die "$tool is missing"; done
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
RUN=${RMM_PEER_BENCH_RUN:-$gpu}

# shellcheck source=scripts/peer/common.sh
. "$ROOT/scripts/peer/common.sh"

# ---- 1. what both builds need ----------------------------------------------------------------------
peer_install_package  # PREFIX, CCCL_DIRS
cudart=$(peer_cudart) || die "could not get the CUDA runtime ($CUDART_WHEEL)"
logger_prefix=$(peer_rapids_logger)
[ -f "$logger_prefix/lib64/librapids_logger.so" ] || die "no rapids-logger"
gbench=${RMM_PEER_GBENCH_PREFIX:-$ROOT/build/gbench/prefix}
# RAPIDS RMM's unpacked librmm for the variant rmm-<version> (prints its librmm/ folder).
rmm_root_of() {
    local v=${1#rmm-}
    local pyv=${v/.0/.}  # 26.08 -> 26.8 (the wheel's version)
    if [ -n "${RMM_PEER_RMM_DIR:-}" ] && [ -f "$RMM_PEER_RMM_DIR/librmm-$v/librmm/lib64/librmm.so" ]; then
        printf '%s\n' "$RMM_PEER_RMM_DIR/librmm-$v/librmm"
        return
    fi
    local root=$BUILD/librmm-$v/librmm
    if [ ! -f "$root/lib64/librmm.so" ]; then
        local wheel
        wheel=$(ls "$ROOT"/.whl/librmm_cu13-"$pyv".*.whl 2>/dev/null | head -1)
        unpack_wheel "${wheel:-librmm-cu13==$pyv.*}" "$BUILD/librmm-$v" >&2 || return 1
    fi
    # The rapids-logger this librmm was built with (26.08: 0.2, 26.10: 0.3), beside it.
    if [ ! -f "$root/../rapids_logger/lib64/librapids_logger.so" ]; then
        local req
        req=$(grep -h '^Requires-Dist: rapids-logger' "$root"/../librmm_cu13-*.dist-info/METADATA | sed 's/^Requires-Dist: //; s/ //g')
        [ -n "$req" ] && unpack_wheel "$req" "$BUILD/librmm-$v/logger" >&2 &&
            mv "$BUILD/librmm-$v/logger/rapids_logger" "$root/../rapids_logger" || return 1
    fi
    printf '%s\n' "$root"
}

# ---- 2. configure and build each variant -------------------------------------------------------------
build_rc=0
for variant in $VARIANTS; do
    B=$BUILD/$variant
    rmm_root=""
    if [ "$variant" != ours ]; then
        rmm_root=$(rmm_root_of "$variant") || die "could not get RMM's librmm for $variant (set RMM_PEER_RMM_DIR)"
    fi
    variant_logger=$logger_prefix
    [ -n "$rmm_root" ] && variant_logger=$(cd "$rmm_root/../rapids_logger" && pwd)
    args=(-DRMM_PEER_BENCH_VARIANT="${variant%%-*}" "-DRMM_PEER_BENCHMARKS_DIR=$BENCH_DIR"
          "-DCMAKE_PREFIX_PATH=$PREFIX;$gbench" "-DRMM_PEER_RAPIDS_LOGGER_ROOT=$variant_logger"
          "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_DIRS" "-DRMM_PEER_RMM_ROOT=$rmm_root")
    [ -n "$cudart" ] && args+=("-DRMM_PEER_CUDART=$cudart")
    [ -n "${RMM_PEER_CUDA_ARCHITECTURES:-}" ] && args+=("-DCMAKE_CUDA_ARCHITECTURES=$RMM_PEER_CUDA_ARCHITECTURES")
    say "peer bench: $variant: configuring and building (log: $OUT/bench-$variant.log)"
    if ! cmake -S bindings-cpp/peer/bench -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" >"$OUT/bench-$variant.log" 2>&1; then
        tail -20 "$OUT/bench-$variant.log"
        die "$variant: configure failed"
    fi
    grep -E "Google Benchmark|peer benchmarks against" "$OUT/bench-$variant.log" | sed 's/^/  /'
    cmake --build "$B" -j "$JOBS" -- -k 0 >>"$OUT/bench-$variant.log" 2>&1 || build_rc=1
    while read -r target state; do
        if [ "$state" = needs-nvcc ]; then
            printf '  %-34s %s\n' "$target" "not built (a .cu source: needs nvcc)"
        elif [ -x "$B/gbenchmarks/$target" ]; then
            printf '  %-34s %s\n' "$target" "built"
        else
            key=$(echo "$target" | tr 'A-Z' 'a-z' | sed 's/_bench$//; s/^uvector$/device_uvector/')
            reason=$(grep -E "error:" "$OUT/bench-$variant.log" | grep -m1 -F "$key" | sed "s|$BENCH_DIR/||" | cut -c1-200)
            printf '  %-34s %s %s\n' "$target" "BUILD FAILED" "$reason"
        fi
    done <"$B/peer-benchmarks.txt"
done
[ "$build_rc" = 0 ] || say "peer bench: some benchmarks did not build (see the logs)"
[ "$RUN" = 1 ] || { say "peer bench: not run (no GPU; RMM_PEER_BENCH_RUN=1 runs them)"; exit "$build_rc"; }

# ---- 3. run: each program of each variant, short times ----------------------------------------------
log_csv=$BUILD/replay-log.csv
python3 "$ROOT/scripts/peer/make_replay_log.py" "$log_csv" || die "could not write the replay log"
min_time=${RMM_PEER_BENCH_MIN_TIME:-0.05s}
repetitions=${RMM_PEER_BENCH_REPETITIONS:-1}
limit=${RMM_PEER_BENCH_TIMEOUT:-90}
# Runs per program, one "LABEL=ARGS" a line (an empty label: the program's own name): the sizes
# RMM's defaults would sweep are cut down to fit one device call.
bench_runs() {
    case $1 in
        # 5 resources x 6 maximum sizes (1 MiB to 4 GiB), 1000 allocations, unless told otherwise.
        RANDOM_ALLOCATIONS_BENCH) tr ';' '\n' <<<"${RMM_PEER_RANDOM_RUNS:-=-n 1000}" ;;
        # 5 resources (pool, arena, binning, cuda, managed) on the synthetic log, then on each recorded one.
        REPLAY_BENCH)
            echo "=-f $log_csv"
            for entry in ${RMM_PEER_REPLAY_LOGS:-}; do
                [ -s "${entry#*=}" ] && echo "${entry%%=*}=-f ${entry#*=}" || echo "peer bench: no replay log ${entry#*=}" >&2
            done ;;
        *) echo "=" ;;
    esac
}
for variant in $VARIANTS; do
    mkdir -p "$OUT/$variant"
    for exe in "$BUILD/$variant"/gbenchmarks/*; do
        [ -x "$exe" ] || continue
        name=$(basename "$exe")
        if [ -n "${RMM_PEER_BENCH_PROGRAMS:-}" ] && [[ " $RMM_PEER_BENCH_PROGRAMS " != *" $name "* ]]; then
            continue
        fi
        if [[ " ${RMM_PEER_BENCH_FALLBACK_ONLY:-} " == *" $variant "* ]]; then
            built_elsewhere=0
            for other in $VARIANTS; do
                [ "$other" != ours ] && [ "$other" != "$variant" ] && [ -x "$BUILD/$other/gbenchmarks/$name" ] && built_elsewhere=1
            done
            [ "$built_elsewhere" = 1 ] && continue
        fi
        while IFS= read -r run; do
            label=${run%%=*} args=${run#*=}
            file=$name${label:+-$label}
            start=$(date +%s.%N)
            # shellcheck disable=SC2086  # args is a word list
            timeout "$limit" "$exe" $args "--benchmark_min_time=$min_time" "--benchmark_repetitions=$repetitions" \
                "--benchmark_out=$OUT/$variant/$file.json" --benchmark_out_format=json >"$OUT/$variant/$file.txt" 2>&1
            rc=$?
            printf '  %-5s %-40s exit %3s  %6.1f s\n' "$variant" "$file" "$rc" "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')"
        done < <(bench_runs "$name")
    done
done
# shellcheck disable=SC2086  # VARIANTS is a list
python3 "$ROOT/scripts/peer/bench_table.py" "$OUT" $VARIANTS
exit "$build_rc"
