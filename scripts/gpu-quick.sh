#!/usr/bin/env bash
# A few rmm-core library tests on the GPU in one short call, for measurements between full runs
# (the full runner, gpu-stage.sh + gpu-run.sh, takes about 7 minutes of device time; this about
# one). Two halves:
#
#   bash scripts/gpu-quick.sh stage            HERE: release build of rmm-core's library tests into
#                                              stage/quick/rmm_core_tests (about 5 MiB)
#   bash scripts/gpu-quick.sh run FILTER...    THERE, with carry ["stage/quick"]: runs the ignored
#                                              (GPU) tests whose names contain a FILTER, one at a
#                                              time, with their output (--nocapture)
#
# Example (the driver calls by name of the random churn, archive/benchmarks-history.md, sixth session):
#   bash scripts/gpu-quick.sh run driver_calls_of_binning
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
stage)
    exe=$(cargo test -p rmm-core --lib --release --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])' | tail -1)
    [ -x "$exe" ] || { echo "the test executable was not built" >&2; exit 1; }
    mkdir -p stage/quick
    cp "$exe" stage/quick/rmm_core_tests
    strip stage/quick/rmm_core_tests
    echo "staged stage/quick/rmm_core_tests; there: bash scripts/gpu-quick.sh run FILTER..."
    ;;
run)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 run FILTER..." >&2; exit 2; }
    LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        stage/quick/rmm_core_tests --ignored --test-threads=1 --nocapture "$@"
    ;;
*)
    echo "usage: $0 stage | run FILTER..." >&2
    exit 2
    ;;
esac
