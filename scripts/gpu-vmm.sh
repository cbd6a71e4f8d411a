#!/usr/bin/env bash
# The virtual-memory layer of the expandable pool (issue 28) on the GPU in one short call: its
# tests (CPU and GPU ones, the two-process export/import and the two-device test included) and
# its benchmark (the cost of growing by a granule and of giving one back). Two halves:
#
#   bash scripts/gpu-vmm.sh stage    HERE: release builds of rmm-core's library tests and of
#                                    benches/virtual_range.rs into stage/vmm/ (about 10 MiB)
#   bash scripts/gpu-vmm.sh run      THERE, with carry ["stage/vmm"]: the tests whose names contain
#                                    virtual_range or cuda::vmm, with --include-ignored, one at a
#                                    time, then the benchmark; logs in $OUT (vmm-tests.log,
#                                    vmm-bench.log)
#
# The full runner (gpu-stage.sh + gpu-run.sh rust) runs the same tests among all the others.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
built() { # cargo's JSON on stdin -> the last executable of kind $1 ("lib" or "bench")
    python3 -c 'import json, sys
kind = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and kind in m["target"]["kind"]:
        print(m["executable"])' "$1" | tail -1
}
case "${1:-}" in
stage)
    tests=$(cargo test -p rmm-core --lib --release --locked --no-run --message-format=json 2>/dev/null | built lib)
    bench=$(cargo bench -p rmm-core --bench virtual_range --locked --no-run --message-format=json 2>/dev/null | built bench)
    [ -x "$tests" ] && [ -x "$bench" ] || { echo "the test or bench executable was not built" >&2; exit 1; }
    rm -rf stage/vmm && mkdir -p stage/vmm
    cp "$tests" stage/vmm/rmm_core_tests
    cp "$bench" stage/vmm/virtual_range
    strip stage/vmm/rmm_core_tests stage/vmm/virtual_range
    du -sh stage/vmm
    echo "staged stage/vmm; there (carry [\"stage/vmm\"]): bash scripts/gpu-vmm.sh run"
    ;;
run)
    OUT=${OUT:-/tmp/rmm-vmm-out}
    mkdir -p "$OUT"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export RMM_TEST_SKIP_LOG=$OUT/vmm-skips.txt
    : >"$RMM_TEST_SKIP_LOG"
    nvidia-smi -L || true
    status=0
    stage/vmm/rmm_core_tests --include-ignored --test-threads=1 --nocapture virtual_range cuda::vmm \
        >"$OUT/vmm-tests.log" 2>&1 || status=1
    grep -E '^test .*(ok|FAILED|ignored)$|^test result|^SKIPPED|^device |out of memory' "$OUT/vmm-tests.log" || true
    echo "skipped at run time: $(wc -l <"$RMM_TEST_SKIP_LOG")"; cat "$RMM_TEST_SKIP_LOG"
    CRITERION_HOME=/tmp/criterion stage/vmm/virtual_range --bench >"$OUT/vmm-bench.log" 2>&1 || status=1
    grep -E '^(grow|release|mapped_check)/|time:|^device ' "$OUT/vmm-bench.log" || true
    exit $status
    ;;
*)
    echo "usage: $0 stage | run" >&2
    exit 2
    ;;
esac
