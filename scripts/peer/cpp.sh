#!/usr/bin/env bash
# RMM's own C++ tests (../shared/peer-tests/rmm-cpp, unmodified) built against our installed CMake
# package with bindings-cpp/peer (find_package(rmm) + RMM's own cpp/tests/CMakeLists.txt), then run.
# Called by scripts/peer-tests.sh (`bash scripts/peer-tests.sh cpp`).
#
# Here (no nvcc): cargo builds librmm through bindings-cpp's CMake project, which is installed into
# $BUILD/prefix; g++ compiles every source (.cu ones as C++: those with device code fail); the
# programs run in host mode (no GPU: most RMM tests need one and fail or skip).
# On the GPU machine (scripts/gpu-run.sh): RMM_PEER_PREBUILT_LIBRARY=<librmm_rs.so> (no cargo there),
# RMM_PEER_CCCL_DIR=<CCCL >= 3.1 include dir>, nvcc compiles the .cu sources, and the toolkit gives
# the CUDA runtime. No network is needed there when RMM_PEER_RAPIDS_LOGGER (an unpacked
# rapids-logger wheel or its .whl) and RMM_PEER_TESTS_DIR are given.
#
# Prints one line per source (`compiled`/`COMPILE FAILED`, `linked`/`NOT LINKED`), the counts of
# sources compiled out of those RMM's CMakeLists.txt builds, and `N passed, N failed, N skipped`
# (GoogleTest cases, from each program's GoogleTest XML; ctest runs one test per program, as RMM's
# CMake registers them). Exit status: 1 when the configure step fails or a test fails.
#
# Environment: RMM_PEER_TESTS_DIR (default ../shared/peer-tests/rmm-cpp), RMM_PEER_BUILD_DIR
# (default build/peer-cpp), RMM_PEER_JOBS (build parallelism), RMM_PEER_PTDS=1 (also RMM's
# per-thread-default-stream builds), RMM_PEER_TARGETS (build and run only these programs, e.g.
# "TRACKING_TEST LOGGER_TEST"), RMM_PEER_CTEST_ARGS (extra ctest arguments),
# RMM_PEER_OUT (a folder for the logs, junit.xml and gtest-xml/), RMM_PEER_CTEST_TIMEOUT (seconds per
# program, default 300), RMM_GOOGLETEST_SOURCE.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 1

TESTS_DIR=${RMM_PEER_TESTS_DIR:-$ROOT/../shared/peer-tests/rmm-cpp}
BUILD=${RMM_PEER_BUILD_DIR:-$ROOT/build/peer-cpp}
OUT=${RMM_PEER_OUT:-$BUILD/logs}
JOBS=${RMM_PEER_JOBS:-$(nproc)}
mkdir -p "$BUILD" "$OUT"
BUILD=$(cd "$BUILD" && pwd)
OUT=$(cd "$OUT" && pwd)
say() { printf '%s\n' "$*"; }
die() { say "peer cpp: $*"; say "0 passed, 1 failed, 0 skipped"; exit 1; }

[ -f "$TESTS_DIR/CMakeLists.txt" ] || die "no RMM C++ tests at $TESTS_DIR (set RMM_PEER_TESTS_DIR)"
TESTS_DIR=$(cd "$TESTS_DIR" && pwd)
for tool in cmake ninja g++; do command -v "$tool" >/dev/null || die "$tool is missing"; done

# shellcheck source=scripts/peer/common.sh
. "$ROOT/scripts/peer/common.sh"

# ---- 1. our package: librmm + headers + CMake config, installed into $BUILD/prefix ---------------
peer_install_package

# ---- 2. what RMM's tests need besides us: the CUDA runtime (no toolkit here) and rapids-logger -----
peer_args=()
cudart=$(peer_cudart) || die "could not get the CUDA runtime ($CUDART_WHEEL)"
[ -n "$cudart" ] && peer_args+=("-DRMM_PEER_CUDART=$cudart" -DRMM_PEER_CUDA=OFF)
logger_prefix=$(peer_rapids_logger)
[ -f "$logger_prefix/include/rapids_logger/logger.hpp" ] || say "peer cpp: no rapids-logger: the logger tests will not compile"
[ -n "${RMM_PEER_PTDS:-}" ] && peer_args+=(-DRMM_PEER_PTDS=ON)
[ -n "${RMM_GOOGLETEST_SOURCE:-}" ] && peer_args+=("-DRMM_GOOGLETEST_SOURCE=$RMM_GOOGLETEST_SOURCE")
[ -n "${RMM_PEER_CUDA_ARCHITECTURES:-}" ] && peer_args+=("-DCMAKE_CUDA_ARCHITECTURES=$RMM_PEER_CUDA_ARCHITECTURES")

# ---- 3. configure and build RMM's tests ----------------------------------------------------------
B=$BUILD/build
say "peer cpp: configuring bindings-cpp/peer over $TESTS_DIR"
if ! cmake -S bindings-cpp/peer -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        "-DCMAKE_PREFIX_PATH=$PREFIX" "-DRMM_PEER_RAPIDS_LOGGER_ROOT=$logger_prefix" "-DRMM_PEER_TESTS_DIR=$TESTS_DIR" \
        "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_DIRS" "${peer_args[@]}" >"$OUT/configure.log" 2>&1; then
    tail -30 "$OUT/configure.log"
    die "configure failed (see $OUT/configure.log)"
fi
grep -E "rapids-logger|CUDA" "$OUT/configure.log" | sed 's/^/  /'
targets=()
if [ -n "${RMM_PEER_TARGETS:-}" ]; then
    read -r -a targets <<<"$RMM_PEER_TARGETS"
    say "peer cpp: building only: ${targets[*]}"
    targets=(--target "${targets[@]}")
fi
say "peer cpp: building ($JOBS jobs; failures do not stop the others)"
cmake --build "$B" -j "$JOBS" "${targets[@]}" -- -k 0 >"$OUT/build.log" 2>&1
build_rc=$?

# ---- 4. per-source results -------------------------------------------------------------------------
compiled=0 total=0 linked_targets=0 ntargets=0 unbuilt=0
declare -A seen_target
while read -r target src; do
    [ -n "$target" ] || continue
    if [ -n "${RMM_PEER_TARGETS:-}" ] && [[ " $RMM_PEER_TARGETS " != *" $target "* ]]; then
        unbuilt=$((unbuilt + 1))
        continue
    fi
    total=$((total + 1))
    obj="$B/rmm-tests/CMakeFiles/$target.dir/$src.o"
    exe="$B/gtests/$target"
    if [ -f "$obj" ]; then c="compiled"; compiled=$((compiled + 1)); else c="COMPILE FAILED"; fi
    if [ -f "$exe" ]; then l="linked"; else l="NOT LINKED"; fi
    if [ -z "${seen_target[$target]:-}" ]; then
        seen_target[$target]=1
        ntargets=$((ntargets + 1))
        [ -f "$exe" ] && linked_targets=$((linked_targets + 1))
    fi
    reason=""
    if [ "$c" = "COMPILE FAILED" ]; then
        # The first error of this object's compile step in the build log.
        reason=$(awk -v obj="$target.dir/$src.o" 'index($0, "FAILED: ") == 1 { on = index($0, obj) > 0; next }
                 /^\[[0-9]+\/[0-9]+\] / { on = 0 } on && /error/ { print; exit }' "$OUT/build.log" |
                 sed "s|$TESTS_DIR/||g; s|$ROOT/||g" | cut -c1-220)
        [ -n "$reason" ] || reason="(not attempted: see build.log)"
    fi
    printf '  %-40s %-16s %-11s %s\n' "$src" "$c" "$l" "$reason"
done < <(sort -k2 -u "$B/peer-sources.txt" | sort -k2)
say "peer cpp: $compiled of $total sources compiled (RMM's CMakeLists.txt list), $linked_targets of $ntargets test programs linked (build exit status $build_rc)"
[ "$unbuilt" -gt 0 ] && say "peer cpp: $unbuilt sources not built (RMM_PEER_TARGETS selects the programs)"
say "peer cpp: not in RMM's list (not built by RMM either): $(cd "$TESTS_DIR" && comm -23 <(find . -name '*.cpp' -o -name '*.cu' | sed 's|^\./||' | sort) <(cut -d' ' -f2 "$B/peer-sources.txt" | sort -u) | tr '\n' ' ')"

# ---- 5. run ----------------------------------------------------------------------------------------
# One ctest test per program, as RMM registers them (bindings-cpp/peer/cmake/rapids-test.cmake); each
# GoogleTest program writes its cases to gtest-xml/<PROGRAM>.xml, which cpp_results.py counts (a
# program that crashes or times out is run again case by case, so every case is accounted for).
say "peer cpp: ctest (one test per program)"
rm -rf "$B/gtest-xml" && mkdir -p "$B/gtest-xml"
ctest_select=()
if [ -n "${RMM_PEER_TARGETS:-}" ]; then
    read -r -a _sel <<<"$RMM_PEER_TARGETS"
    ctest_select=(-R "^($(IFS='|'; echo "${_sel[*]}"))$")
fi
ctest_start=$(date +%s)
# shellcheck disable=SC2086  # RMM_PEER_CTEST_ARGS is a list
ctest --test-dir "$B" --output-on-failure --timeout "${RMM_PEER_CTEST_TIMEOUT:-300}" -j "${RMM_PEER_CTEST_JOBS:-1}" \
    --output-junit "$OUT/junit.xml" "${ctest_select[@]}" ${RMM_PEER_CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
say "peer cpp: ctest took $(( $(date +%s) - ctest_start )) s"
host_mode=1
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && host_mode=0
python3 "$ROOT/scripts/peer/cpp_results.py" "$OUT/junit.xml" "$B/gtest-xml" "$B/gtest-programs.txt" "$B/gtests" \
    "$OUT/results.txt" "$host_mode"
rc=$?
rm -rf "$OUT/gtest-xml" && cp -r "$B/gtest-xml" "$OUT/gtest-xml" 2>/dev/null
[ "$build_rc" = 0 ] || exit 1  # a selected program that does not build is a failure
# Exit status: 0 all passed; in host mode (no GPU), failures that only lack a GPU are expected and
# give 0 too with RMM_PEER_HOST_MODE_OK=1 (CI), as do the deliberate differences (DELIBERATE in cpp_results.py,
# documented in docs/testing.md); otherwise 1.
if [ "$rc" = 2 ] && [ "${RMM_PEER_HOST_MODE_OK:-0}" = 1 ]; then exit 0; fi
[ "$rc" = 0 ] && exit 0
exit 1
