#!/usr/bin/env bash
# RMM's own C++ tests (../shared/peer-tests/rmm-cpp, unmodified) built against our installed CMake
# package with bindings-cpp/peer (find_package(rmm) + RMM's own cpp/tests/CMakeLists.txt), then run.
# Called by scripts/peer-tests.sh (`bash scripts/peer-tests.sh cpp`).
#
# Here (no nvcc): cargo builds librmm through bindings-cpp's CMake project, which is installed into
# $BUILD/prefix; g++ compiles every source (.cu ones as C++: those with device code fail); the
# programs run in host mode (no GPU: most RMM tests need one and fail or skip).
# On the GPU machine (scripts/gpu-run.sh): RMM_PEER_PREBUILT_LIBRARY=<librmm.so> (no cargo there),
# RMM_PEER_CCCL_DIR=<CCCL >= 3.1 include dir>, nvcc compiles the .cu sources, and the toolkit gives
# the CUDA runtime. No network is needed there when RMM_PEER_RAPIDS_LOGGER (an unpacked
# rapids-logger wheel or its .whl) and RMM_PEER_TESTS_DIR are given.
#
# Prints one line per source (`compiled`/`COMPILE FAILED`, `linked`/`NOT LINKED`), the counts of
# sources compiled out of those RMM's CMakeLists.txt builds, and `N passed, N failed, N skipped`
# (GoogleTest cases, from ctest). Exit status: 1 when the configure step fails or a test fails.
#
# Environment: RMM_PEER_TESTS_DIR (default ../shared/peer-tests/rmm-cpp), RMM_PEER_BUILD_DIR
# (default build/peer-cpp), RMM_PEER_JOBS (build parallelism), RMM_PEER_PTDS=1 (also RMM's
# per-thread-default-stream builds), RMM_PEER_TARGETS (build and run only these programs, e.g.
# "TRACKING_TEST LOGGER_TEST"), RMM_PEER_CTEST_ARGS (extra ctest arguments),
# RMM_PEER_OUT (a folder for the logs and junit.xml), RMM_GOOGLETEST_SOURCE.
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
CUDART_WHEEL=${RMM_CUDA_RUNTIME_WHEEL:-nvidia-cuda-runtime==13.0.96}
RAPIDS_LOGGER_WHEEL=${RMM_RAPIDS_LOGGER_WHEEL:-rapids-logger==0.3.0}

say() { printf '%s\n' "$*"; }
die() { say "peer cpp: $*"; say "0 passed, 1 failed, 0 skipped"; exit 1; }

[ -f "$TESTS_DIR/CMakeLists.txt" ] || die "no RMM C++ tests at $TESTS_DIR (set RMM_PEER_TESTS_DIR)"
TESTS_DIR=$(cd "$TESTS_DIR" && pwd)
for tool in cmake ninja g++; do command -v "$tool" >/dev/null || die "$tool is missing"; done

# Unpacks the wheel $1 (a .whl path, or a requirement pip downloads) into $2; prints nothing.
unpack_wheel() {
    local wheel=$1 dest=$2
    rm -rf "$dest" && mkdir -p "$dest" || return 1
    if [ ! -f "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest/whl" "$wheel" >&2 || return 1
        wheel=$(ls "$dest"/whl/*.whl | head -1)
    fi
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$dest"
}

# ---- 1. our package: librmm + headers + CMake config, installed into $BUILD/prefix ---------------
PREFIX=$BUILD/prefix
if [ -n "${RMM_PEER_PREBUILT_LIBRARY:-}" ]; then
    [ -n "${RMM_PEER_CCCL_DIR:-}" ] || die "RMM_PEER_PREBUILT_LIBRARY needs RMM_PEER_CCCL_DIR"
    cuda_root=${CUDA_HOME:-}
    if [ -z "$cuda_root" ] && command -v nvcc >/dev/null; then cuda_root=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd); fi
    CUDA_INCLUDE=${cuda_root:-/usr/local/cuda}/include
    CCCL_DIRS="$RMM_PEER_CCCL_DIR;$CUDA_INCLUDE"
    pkg_args=("-DRMM_PREBUILT_LIBRARY=$RMM_PEER_PREBUILT_LIBRARY")
else
    CCCL_DIRS=$(bash bindings-cpp/cmake/fetch-cccl.sh "$ROOT/build/cccl" | tail -n 1) || die "fetching CCCL failed"
    pkg_args=(-DRMM_CARGO_RELEASE=OFF)  # debug librmm here: the release build takes long on a small machine
fi
say "peer cpp: installing our package into $PREFIX"
if ! { cmake -S bindings-cpp -B "$BUILD/rmm" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMM_BUILD_TESTS=OFF \
        "-DRMM_CCCL_INCLUDE_DIRS=$CCCL_DIRS" "${pkg_args[@]}" &&
       cmake --build "$BUILD/rmm" && cmake --install "$BUILD/rmm" --prefix "$PREFIX"; } >"$OUT/package.log" 2>&1; then
    tail -20 "$OUT/package.log"
    die "building/installing our package failed (see $OUT/package.log)"
fi

# ---- 2. what RMM's tests need besides us: the CUDA runtime (no toolkit here) and rapids-logger -----
peer_args=()
if [ -z "${RMM_PEER_PREBUILT_LIBRARY:-}" ] && ! command -v nvcc >/dev/null; then
    cudart=$BUILD/cudart/nvidia/cu13/lib/libcudart.so.13
    [ -f "$cudart" ] || unpack_wheel "$CUDART_WHEEL" "$BUILD/cudart" || die "could not get $CUDART_WHEEL"
    peer_args+=("-DRMM_PEER_CUDART=$cudart" -DRMM_PEER_CUDA=OFF)
fi
logger_src=${RMM_PEER_RAPIDS_LOGGER:-$RAPIDS_LOGGER_WHEEL}
if [ -d "$logger_src/rapids_logger" ]; then
    logger_prefix=$logger_src/rapids_logger
else
    logger_prefix=$BUILD/rapids-logger/rapids_logger
    [ -f "$logger_prefix/include/rapids_logger/logger.hpp" ] ||
        unpack_wheel "$logger_src" "$BUILD/rapids-logger" || say "peer cpp: no rapids-logger ($logger_src): the logger tests will not compile"
fi
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
ctest_select=()
if [ -n "${RMM_PEER_TARGETS:-}" ]; then
    read -r -a targets <<<"$RMM_PEER_TARGETS"
    ctest_select=(-R "^($(IFS='|'; echo "${targets[*]}"))(\\.|$)")
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

# ---- 5. run -------------------------------------------------------------------------------------------
say "peer cpp: ctest"
# shellcheck disable=SC2086  # RMM_PEER_CTEST_ARGS is a list
ctest --test-dir "$B" --output-on-failure --timeout 300 -j "${RMM_PEER_CTEST_JOBS:-1}" \
    --output-junit "$OUT/junit.xml" "${ctest_select[@]}" ${RMM_PEER_CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
host_mode=1
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && host_mode=0
python3 - "$OUT/junit.xml" "$OUT/results.txt" "$host_mode" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except (OSError, ET.ParseError) as e:
    print(f"peer cpp: no ctest results ({e})"); print("0 passed, 1 failed, 0 skipped"); sys.exit()
# A failure whose output shows that CUDA is missing (host mode: no driver, no device) is one that
# needs a GPU; RMM's tests do not skip without one.
NO_GPU = ("RMM_ERROR_NO_DRIVER", "RMM_ERROR_NO_DEVICE", "cudaErrorInsufficientDriver", "cudaErrorNoDevice",
          "CUDA driver version is insufficient", "no CUDA-capable device", "is_device_accessible_memory",
          "host-accessible memory is required in host mode")
# Tests whose output cannot show it: Adaptor.STDOUT captures stdout, where GoogleTest reports the
# exception (an allocation from cuda_memory_resource in host mode), so its output ends at [ RUN ].
NO_GPU_SILENT = {"LOGGER_TEST.Adaptor.STDOUT"}
# Deliberate differences (docs/testing.md, "Deliberate differences"): our tracking adaptor refuses a
# free it never tracked or whose size is wrong (checked frees, issue 12), where RMM's forwards it.
DELIBERATE = {"TRACKING_TEST.TrackingTest.DeallocWrongBytes", "TRACKING_TEST.TrackingTest.NegativeInnerTracking",
              "TRACKING_TEST.TrackingTest.UntrackedDeallocationDoesNotUnderflowAllocatedBytes"}
host_mode = sys.argv[3] == "1"
counts = {"passed": 0, "failed": 0, "skipped": 0}
no_gpu = 0
differs = 0
lines = []
for c in cases:
    status = c.get("status", "")
    out = c.find("system-out")
    text = (out.text or "") if out is not None else ""
    if c.find("skipped") is not None or status in ("notrun", "disabled") or "[  SKIPPED ]" in text:
        kind = "skipped"
    elif c.find("failure") is not None or c.find("error") is not None or status == "fail":
        kind = "failed"
    else:
        kind = "passed"
    counts[kind] += 1
    tag = kind.upper()
    if kind == "failed" and (any(m in text for m in NO_GPU) or (host_mode and c.get("name") in NO_GPU_SILENT)):
        no_gpu += 1
        tag = "FAILED-NO-GPU"
    elif kind == "failed" and c.get("name") in DELIBERATE:
        differs += 1
        tag = "FAILED-DIFFERS"
    lines.append(f"{tag:14} {c.get('name')}")
open(sys.argv[2], "w").write("\n".join(sorted(lines)) + "\n")
by_program = {}
for l in lines:
    kind, name = l.split(None, 1)
    prog = name.split(".", 1)[0]
    c = by_program.setdefault(prog, {"PASSED": 0, "FAILED": 0, "SKIPPED": 0, "FAILED-NO-GPU": 0, "FAILED-DIFFERS": 0})
    c[kind] += 1
for prog, c in sorted(by_program.items()):
    f = c["FAILED"] + c["FAILED-NO-GPU"] + c["FAILED-DIFFERS"]
    notes = [f"{c['FAILED-NO-GPU']} for lack of a GPU"] if c["FAILED-NO-GPU"] else []
    notes += [f"{c['FAILED-DIFFERS']} deliberate differences"] if c["FAILED-DIFFERS"] else []
    note = f" ({', '.join(notes)})" if notes else ""
    print(f"  {prog:36} {c['PASSED']:4} passed {f:4} failed {c['SKIPPED']:4} skipped{note}")
for l in sorted(lines):
    if l.startswith("FAILED ") or l.startswith("FAILED-DIFFERS "):
        print(f"  failed: {l.split(None, 1)[1]}{' (deliberate difference)' if l.startswith('FAILED-DIFFERS') else ''}")
others = counts["failed"] - no_gpu - differs
print(f"peer cpp: of the {counts['failed']} failed, {no_gpu} failed for lack of a GPU (CUDA missing: host mode), {differs} are deliberate differences and {others} otherwise")
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(3 if others else (2 if counts["failed"] else 0))
PY
rc=$?
[ "$build_rc" = 0 ] || exit 1  # a selected program that does not build is a failure
# Exit status: 0 all passed; in host mode (no GPU), failures that only lack a GPU are expected and
# give 0 too with RMM_PEER_HOST_MODE_OK=1 (CI), as do the deliberate differences (DELIBERATE above,
# documented in docs/testing.md); otherwise 1.
if [ "$rc" = 2 ] && [ "${RMM_PEER_HOST_MODE_OK:-0}" = 1 ]; then exit 0; fi
[ "$rc" = 0 ] && exit 0
exit 1
