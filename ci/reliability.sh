#!/usr/bin/env bash
# Reliability suite (issue 30): the checks that belong to no one language's suite, on CPU.
# - scripts/gpu-sanitize-selftest.sh: the GPU sanitizer pass names every run it counts with errors
#   (a fake compute-sanitizer on a fake stage; seconds);
# - scripts/fuzz.sh: every libFuzzer target of fuzz/ for RMM_CI_FUZZ_SECONDS (default 20) seconds
#   each, one after the other, with the seed corpora of fuzz/corpus; it reports each target's
#   coverage growth. It needs the nightly toolchain, which it installs with rustup when missing;
#   when that cannot be done (or on a GPU machine, where the targets' fake streams do not belong)
#   the fuzz step is reported as skipped with the reason, and the suite does not fail for it.
#   The first build of the targets (AddressSanitizer, release) takes a few minutes on 2 cores;
#   RMM_CI_FUZZ=0 skips fuzzing.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

step "sanitizer summary: scripts/gpu-sanitize-selftest.sh" bash scripts/gpu-sanitize-selftest.sh

if [ "${RMM_CI_FUZZ:-1}" = 0 ]; then
    note "fuzz: RMM_CI_FUZZ=0"
else
    seconds=${RMM_CI_FUZZ_SECONDS:-20}
    log "fuzz: scripts/fuzz.sh $seconds"
    out=$(mktemp)
    bash scripts/fuzz.sh "$seconds" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    case $rc in
        0) RMM_STEPS+=("PASS  fuzz: $(grep -cE '^== .*: passed' "$out") targets, $seconds s each") ;;
        3) note "fuzz: $(grep -m1 'SKIPPED' "$out" | sed 's/^fuzz.sh: //')" ;;
        *)
            RMM_STEPS+=("FAIL  fuzz (exit $rc): $(grep -E '^== .*FAILED' "$out" | tr '\n' ' ')")
            RMM_FAILED=1
            ;;
    esac
    rm -f "$out"
fi

finish reliability
