#!/usr/bin/env bash
# Runs each libFuzzer target of fuzz/ for a given time, one after the other, each as one libFuzzer
# process (one core; no -jobs/-workers, which would fork and log to fuzz-N.log), and reports how
# far each one's coverage grew.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Targets (fuzz/fuzz_targets/):
#   replay_log         the replay tool's log parser
#   pool_ops           operation sequences on the stream-ordered engine (a pool)
#   arena_ops          the arena
#   adaptor_stack_ops  statistics/limiting/tracking/logging over binning over a pool
#   threads_ops        several threads at once on one pool, arena or binning resource, against a model
#   dlpack_view        DLPack tensors from bytes imported as strided views (core's parser)
#   c_abi_ops          the C ABI (rmm_c.h): handles, buffers and their exports, views from bytes
#
# Built like `cargo fuzz build -O` (the flags cargo-fuzz passes: SanitizerCoverage, AddressSanitizer,
# debug assertions), with the nightly toolchain and without cargo-fuzz itself. The seed corpus is
# fuzz/corpus/<target> (kept in the repository, small); what a run adds goes to fuzz/work/<target>
# and crashing inputs to fuzz/artifacts/<target> (both ignored by git). Every input under
# fuzz/regressions/<target> (crashes found before, fixed since) is replayed first. Runs in host mode
# only (the targets use fake stream handles): never on a GPU machine.
#
# Per target: "== T: coverage N -> M edges (+K), features A -> B, corpus X -> Y inputs, R runs".
# The last line is "N passed, N failed" (targets). Exit status: 0 all passed, 1 a target failed or did
# not build, 3 nothing was fuzzed (no nightly toolchain and none could be installed, or a GPU is
# present; the first line says why). RMM_FUZZ_INSTALL=0 never installs the nightly toolchain.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(replay_log pool_ops arena_ops adaptor_stack_ops threads_ops dlpack_view c_abi_ops)

skip() {
    echo "fuzz.sh: SKIPPED, nothing was fuzzed: $*"
    exit 3
}

if nvidia-smi -L >/dev/null 2>&1; then
    skip "a GPU is present; the targets use fake stream handles and run in host mode only"
fi
command -v rustup >/dev/null 2>&1 || skip "rustup is not installed (the nightly toolchain is needed)"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    if [ "${RMM_FUZZ_INSTALL:-1}" = 1 ]; then
        echo "fuzz.sh: installing the nightly toolchain (rustup toolchain install nightly --profile minimal)"
        timeout 600 rustup toolchain install nightly --profile minimal ||
            skip "the nightly Rust toolchain (needed for -Zsanitizer and SanitizerCoverage) could not be installed"
    else
        skip "the nightly Rust toolchain is not installed (rustup toolchain install nightly)"
    fi
fi

# What `cargo fuzz build -O` passes (cargo-fuzz 0.12): coverage counters, comparison tracing and
# the PC table for libFuzzer, AddressSanitizer, debug assertions; --cfg fuzzing for the targets.
TRIPLE=x86_64-unknown-linux-gnu
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Zsanitizer=address -Cdebug-assertions \
-Coverflow-checks -Cforce-frame-pointers"
# The fuzz workspace's own target dir, never the main one (other flags, another toolchain).
export CARGO_TARGET_DIR=$PWD/fuzz/target
bins=()
for target in "${TARGETS[@]}"; do bins+=(--bin "$target"); done
echo "== building ${TARGETS[*]} (cargo +nightly build --release, sanitizers on)"
if ! cargo +nightly build --manifest-path fuzz/Cargo.toml --locked --release --target "$TRIPLE" "${bins[@]}"; then
    echo "fuzz.sh: the targets did not build"
    echo "0 passed, ${#TARGETS[@]} failed"
    exit 1
fi

# "N" of the first "cov: N" / "ft: N" after WORD (INITED or DONE) in a libFuzzer log, or "?".
stat() { # LOG WORD FIELD
    grep -E "^#[0-9]+[[:space:]]+$2 " "$1" | head -1 | grep -oE "$3: [0-9]+" | grep -oE '[0-9]+' || echo "?"
}

passed=0
failed=0
for target in "${TARGETS[@]}"; do
    binary="$CARGO_TARGET_DIR/$TRIPLE/release/$target"
    mkdir -p "fuzz/work/$target" "fuzz/artifacts/$target" "fuzz/corpus/$target"
    if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls -A "fuzz/regressions/$target")" ]; then
        echo "== $target: replaying fuzz/regressions/$target"
        if ! "$binary" fuzz/regressions/"$target"/*; then
            echo "== $target: FAILED on a regression input"
            failed=$((failed + 1))
            continue
        fi
    fi
    before=$(find "fuzz/work/$target" "fuzz/corpus/$target" -type f | wc -l)
    echo "== $target: fuzzing for ${SECONDS_PER_TARGET}s on one core"
    log="fuzz/work/$target.log"
    if "$binary" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -timeout=60 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$target/" "fuzz/work/$target" "fuzz/corpus/$target" >"$log" 2>&1; then
        after=$(find "fuzz/work/$target" "fuzz/corpus/$target" -type f | wc -l)
        cov0=$(stat "$log" INITED cov) cov1=$(stat "$log" DONE cov)
        ft0=$(stat "$log" INITED ft) ft1=$(stat "$log" DONE ft)
        runs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
        growth="?"
        [[ $cov0 =~ ^[0-9]+$ && $cov1 =~ ^[0-9]+$ ]] && growth="+$((cov1 - cov0))"
        echo "== $target: passed: coverage $cov0 -> $cov1 edges ($growth), features $ft0 -> $ft1," \
            "corpus $before -> $after inputs, $runs runs"
        passed=$((passed + 1))
    else
        tail -40 "$log"
        echo "== $target: FAILED; crashing inputs in fuzz/artifacts/$target (keep a fixed one in fuzz/regressions/$target)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
