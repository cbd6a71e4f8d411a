#!/usr/bin/env bash
# Runs each cargo-fuzz target of fuzz/ for a given time, one after the other, each as one libFuzzer
# process (one core; no -jobs/-workers, which would fork and log to fuzz-N.log); nightly toolchain.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s, every target)
#
# Targets: replay_log (the replay tool's log parser), pool_ops (the stream-ordered engine),
# arena_ops, adaptor_stack_ops (statistics/limiting/tracking/logging over binning over a pool).
# The seed corpus is fuzz/corpus/<target> (read only); what a run adds goes to fuzz/work/<target>
# and crashing inputs to fuzz/artifacts/<target> (both ignored by git). Every input under
# fuzz/regressions/<target> (crashes found before, fixed since) is replayed first. Runs in host
# mode only (the targets use fake stream handles): never on a GPU machine.
# The last line is "N passed, N failed" (targets).
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(replay_log pool_ops arena_ops adaptor_stack_ops)

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz.sh: the nightly Rust toolchain is not installed (rustup toolchain list shows none);"
    echo "fuzz.sh: cargo-fuzz needs it: rustup toolchain install nightly. Nothing was fuzzed."
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked || { echo "fuzz.sh: cargo-fuzz could not be installed; nothing was fuzzed."; exit 2; }
fi
if nvidia-smi -L >/dev/null 2>&1; then
    echo "fuzz.sh: a GPU is present; the targets use fake stream handles and run in host mode only."
    exit 2
fi

passed=0
failed=0
for target in "${TARGETS[@]}"; do
    mkdir -p "fuzz/work/$target" "fuzz/artifacts/$target"
    echo "== $target: building"
    if ! (cd fuzz && cargo +nightly fuzz build -O "$target"); then
        echo "== $target: FAILED to build"
        failed=$((failed + 1))
        continue
    fi
    binary="fuzz/target/x86_64-unknown-linux-gnu/release/$target"
    if [ -d "fuzz/regressions/$target" ] && [ -n "$(ls -A "fuzz/regressions/$target")" ]; then
        echo "== $target: replaying fuzz/regressions/$target"
        if ! "$binary" fuzz/regressions/"$target"/*; then
            echo "== $target: FAILED on a regression input"
            failed=$((failed + 1))
            continue
        fi
    fi
    echo "== $target: fuzzing for ${SECONDS_PER_TARGET}s on one core"
    log="fuzz/work/$target.log"
    if "$binary" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 \
        -artifact_prefix="fuzz/artifacts/$target/" "fuzz/work/$target" "fuzz/corpus/$target" >"$log" 2>&1; then
        grep -E '^Done [0-9]+ runs' "$log" | tail -1
        echo "== $target: passed ($(grep -cE 'NEW|REDUCE' "$log") new coverage events; corpus $(ls "fuzz/work/$target" | wc -l) inputs)"
        passed=$((passed + 1))
    else
        tail -40 "$log"
        echo "== $target: FAILED; crashing inputs in fuzz/artifacts/$target (keep a fixed one in fuzz/regressions/$target)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
