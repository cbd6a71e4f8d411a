#!/usr/bin/env bash
# Sanitizer suite on CPU (issue 12), three parts:
#
# 1. valgrind memcheck on every C ABI and C++ test program of the C++ suite (the programs of
#    ctest's list, each run once under valgrind; GPU tests skip themselves in host mode). Uses the C++ build
#    of ci/cpp.sh when it exists ($RMM_CPP_BUILD_DIR, default build/cpp), else configures and
#    builds it the same way. 0 errors and 0 definite leaks, or the step fails.
# 2. valgrind memcheck on the C entry points' own tests (rmm-cpp's library tests in bindings-cpp/src,
#    all of them), the same criteria, and at least one test must have run.
# 3. ThreadSanitizer on core's multi-thread tests with the nightly toolchain (-Zsanitizer=thread).
#    Advisory: without the rust-src component std cannot be rebuilt instrumented (-Zbuild-std), and
#    TSan then reports races inside std's uninstrumented locks; the step says which case it is.
#
# scripts/test.sh (and so CI) runs parts 1 and 2 as its `valgrind` suite when valgrind is installed
# (RMM_SANITIZE_TSAN=0). Tunables:
# RMM_SANITIZE_TIMEOUT (seconds per program, default 1200), RMM_SANITIZE_TSAN=0 to skip part 3.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$RMM_ROOT" || exit 1

BUILD_DIR=${RMM_CPP_BUILD_DIR:-build/cpp}
CCCL_DIR=${RMM_CCCL_DIR:-$RMM_ROOT/build/cccl}
TIMEOUT=${RMM_SANITIZE_TIMEOUT:-1200}
OUT_DIR=${RMM_SANITIZE_OUT:-build/sanitize}
mkdir -p "$OUT_DIR"

apt_install valgrind || fail "could not install valgrind"

VALGRIND=(valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite
    --errors-for-leak-kinds=definite --num-callers=30 --suppressions="$RMM_ROOT/ci/valgrind.supp")

# Runs one program under valgrind, its log in $OUT_DIR/<name>.valgrind.log; prints the error count.
memcheck_one() {
    local name=$1
    shift
    local log="$OUT_DIR/$name.valgrind.log"
    timeout "$TIMEOUT" "${VALGRIND[@]}" --log-file="$log" "$@" >"$OUT_DIR/$name.out" 2>&1
    local rc=$?
    local errors
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$')
    echo "  $name: exit $rc, ${errors:-?} valgrind errors ($log)"
    [ "$rc" -eq 0 ] && [ "${errors:-1}" -eq 0 ]
}

ensure_cpp_build() {
    if [ -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
        cmake --build "$BUILD_DIR" && return 0
    fi
    apt_install cmake ninja-build g++ libgtest-dev python3-pip || return 1
    local include
    include=$(bash bindings-cpp/cmake/fetch-cccl.sh "$CCCL_DIR" | tail -n 1) || return 1
    cmake -S bindings-cpp -B "$BUILD_DIR" -G Ninja "-DRMM_CCCL_INCLUDE_DIRS=$include" || return 1
    cmake --build "$BUILD_DIR"
}

# Every test program of ctest's list under valgrind, once each with all its tests (ctest lists one
# entry per GoogleTest case; one valgrind start per case would take hours), with the environment
# ctest would give it.
memcheck_cpp() {
    local programs
    programs=$(ctest --test-dir "$BUILD_DIR" --show-only=json-v1 | python3 -c '
import json, shlex, sys
seen = {}
for t in json.load(sys.stdin)["tests"]:
    exe = t["command"][0]
    if exe in seen:
        continue
    env = [p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"]
    env = [e for v in env for e in (v if isinstance(v, list) else [v])]
    # GoogleTest programs run whole; other programs (a C smoke test) with their arguments.
    args = [] if any(a.startswith("--gtest_filter") for a in t["command"][1:]) else t["command"][1:]
    seen[exe] = (env, args)
for exe, (env, args) in seen.items():
    name = exe.rsplit("/", 1)[-1]
    print(shlex.quote(name), " ".join(shlex.quote(e) for e in env), "--", shlex.quote(exe), " ".join(shlex.quote(a) for a in args))
') || return 1
    [ -n "$programs" ] || { echo "no C++ tests found in $BUILD_DIR"; return 1; }
    local ok=0 bad=0 line name
    while IFS= read -r line; do
        eval "set -- $line"
        name=$1
        shift
        local envs=()
        while [ "$1" != "--" ]; do envs+=("$1"); shift; done
        shift
        # shellcheck disable=SC2163  # each entry is NAME=value
        if (for e in "${envs[@]}"; do export "$e"; done; memcheck_one "$name" "$@"); then
            ok=$((ok + 1))
        else
            bad=$((bad + 1))
        fi
    done <<<"$programs"
    echo "valgrind on the C ABI and C++ test programs: $ok clean, $bad with errors or failures"
    [ "$bad" -eq 0 ]
}

# The C entry points' own tests (rmm-cpp's library tests, bindings-cpp/src: the C ABI moved there
# from rmm-core's abi module), all of them, under valgrind. A run that tests nothing fails.
memcheck_c_entry_points() {
    local exe
    exe=$(cargo test -p rmm-cpp --lib --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rmm_rs":
        print(m["executable"])
' | tail -1)
    [ -n "$exe" ] || { echo "rmm-cpp's test binary was not built"; return 1; }
    memcheck_one c-entry-points "$exe" --test-threads=1 || return 1
    local ran
    ran=$(grep -oE 'test result: ok\. [0-9]+ passed' "$OUT_DIR/c-entry-points.out" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    echo "  c-entry-points: ${ran:-0} tests passed under valgrind"
    [ "${ran:-0}" -gt 0 ]
}

# ThreadSanitizer on core's multi-thread tests (nightly), std rebuilt instrumented (-Zbuild-std,
# which needs the nightly's rust-src: added here when missing and reachable). The tests: every
# library test whose name speaks of threads (listed from the instrumented binary, so new ones join
# by their names); the GPU ones among them stay ignored on a CPU machine.
TSAN_TEST_PATTERN='thread|concurren|parallel|hammer|race'
tsan_core() {
    if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        echo "no nightly toolchain: ThreadSanitizer needs -Zsanitizer=thread"
        return 1
    fi
    local build_std=() flags="-Zsanitizer=thread"
    if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
        rustup component add rust-src --toolchain nightly >/dev/null 2>&1 ||
            echo "note: could not add rust-src to the nightly toolchain"
    fi
    if rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
        build_std=(-Zbuild-std)
    else
        # Without rust-src std cannot be rebuilt instrumented; recent nightlies refuse to link an
        # uninstrumented std unless told to.
        flags="$flags -Cunsafe-allow-abi-mismatch=sanitizer"
        echo "note: nightly has no rust-src, so std is not instrumented; races reported inside std's locks are false positives"
    fi
    local exe tests
    exe=$(RUSTFLAGS="$flags" RUSTDOCFLAGS="$flags" CARGO_TARGET_DIR=target/tsan cargo +nightly test "${build_std[@]}" \
        --target x86_64-unknown-linux-gnu -p rmm-core --lib --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rmm_core":
        print(m["executable"])' | tail -1)
    [ -x "$exe" ] || { echo "the instrumented test binary was not built"; return 1; }
    tests=$("$exe" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E "$TSAN_TEST_PATTERN")
    echo "TSan: $(wc -w <<<"$tests") tests matching /$TSAN_TEST_PATTERN/ (GPU ones stay ignored here)"
    # shellcheck disable=SC2086
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$exe" --exact --test-threads=1 $tests
}

step "sanitize: build the C++ tests ($BUILD_DIR)" ensure_cpp_build
[ "$RMM_FAILED" -eq 0 ] && step "sanitize: valgrind memcheck on the C ABI and C++ tests" memcheck_cpp
step "sanitize: valgrind memcheck on the C entry points' own tests (rmm-cpp)" memcheck_c_entry_points
if [ "${RMM_SANITIZE_TSAN:-1}" = 1 ]; then
    advisory "sanitize: ThreadSanitizer on core's multi-thread tests (nightly)" tsan_core
else
    note "ThreadSanitizer (RMM_SANITIZE_TSAN=0)"
fi
finish sanitize
