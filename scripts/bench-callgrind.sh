#!/usr/bin/env bash
# Exact CPU cost per operation in host mode: instructions per 256-byte pair or per random-churn step
# of `core/examples/stream_kind_cost.rs`, counted by callgrind. Each row runs twice, with N1 and N2
# operations, and the report is the marginal count (Ir(N2) - Ir(N1)) / (1.1 * (N2 - N1)): setup,
# warm-up and teardown cancel out (the example runs OPS / 10 warm-up operations, then OPS).
#
#   bash scripts/bench-callgrind.sh [BINARY] [FILTER...]
#
# BINARY defaults to the release build of the example in this worktree (built first); pass another
# build's copy to compare two commits. FILTERs are row names ("pool pair.legacy"); default: all rows.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
bin="${1:-}"
if [[ -z "$bin" || "$bin" == "-" ]]; then
    cargo build --release -q -p rmm-core --example stream_kind_cost
    bin="$CARGO_TARGET_DIR/release/examples/stream_kind_cost"
fi
shift || true
rows=("$@")
if [[ ${#rows[@]} -eq 0 ]]; then
    for r in pool binning arena; do
        for s in pair.legacy pair.ptds pair.foreign multistream.legacy multistream.foreign \
            random.legacy random.ptds random.foreign rmmrandom.legacy rmmrandom.ptds \
            rmmrandom.foreign; do
            rows+=("$r $s")
        done
    done
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # ops filter -> total instructions
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$bin" 1 "$1" "$2" >/dev/null 2>"$tmp/err" ||
        { cat "$tmp/err" >&2; exit 1; }
    grep -E '^(summary|totals):' "$tmp/cg.out" | head -1 | awk '{print $2}'
}
echo "| row | instructions per op |"
echo "| --- | ---: |"
for row in "${rows[@]}"; do
    case "$row" in
        # Whole rounds of 2000 steps, warm-up (a tenth) included.
        *rmmrandom*) n1=20000 n2=60000 ;;
        *random*) n1=4000 n2=20000 ;;
        *) n1=20000 n2=100000 ;;
    esac
    a=$(ir $n1 "$row")
    b=$(ir $n2 "$row")
    echo "| $row | $(( (b - a) * 10 / (11 * (n2 - n1)) )) |"
done
