#!/usr/bin/env bash
# Stages what scripts/gpu-peer-bench.sh needs on the GPU machine (no network, no cargo there) besides
# scripts/gpu-stage.sh's stage/cpp (our librmm_rs.so, CCCL, RMM's tests and benchmarks, rapids-logger):
#
#   stage/peerbench/gbench.tar.gz        Google Benchmark 1.9.5, built here (static, -fPIC, Release):
#                                        include/, lib/libbenchmark*.a, lib/cmake/benchmark
#   stage/peerbench/librmm-26.10.tar.gz  RAPIDS RMM 26.10's librmm from the librmm-cu13 wheel:
#                                        librmm/lib64/librmm.so, librmm/include/{rmm,nvtx3}, VERSION, and
#                                        rapids_logger/ (0.3, as it requires; its CCCL 3.5 is stage/cpp's)
#   stage/peerbench/librmm-26.08.tar.gz  the same of RMM 26.08 (the line the benchmark sources come from),
#                                        with its CCCL 3.4.3 (librmm/include/rapids) and rapids-logger 0.2
#
#   bash scripts/peer-bench-stage.sh     # after scripts/gpu-stage.sh; about 4 MiB
#
# Google Benchmark: RMM_PEER_GBENCH_PREFIX (an installed one), else built from RMM_PEER_GBENCH_SOURCE
# (a source tree), else from the git repository RMM_PEER_GBENCH_GIT at tag v1.9.5 (default: the mirror
# of github:google/benchmark that the session's fetch tool makes, /work/.mirror/google+benchmark/repo).
# Debian's libbenchmark-dev (1.7.1) is too old: random_allocations needs >= 1.8.
# RMM's wheels: .whl/librmm_cu13-<version>*.whl (gpu-stage.sh downloads 26.10 there), else pip
# download librmm-cu13==<version>.*.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD
S=$ROOT/stage/peerbench
G=$ROOT/build/gbench
mkdir -p "$S" "$G"
say() { printf 'peer-bench-stage: %s\n' "$*"; }

# ---- Google Benchmark ---------------------------------------------------------------------------------
prefix=${RMM_PEER_GBENCH_PREFIX:-$G/prefix}
if [ ! -f "$prefix/include/benchmark/benchmark.h" ]; then
    src=${RMM_PEER_GBENCH_SOURCE:-$G/source}
    if [ ! -f "$src/CMakeLists.txt" ]; then
        git_dir=${RMM_PEER_GBENCH_GIT:-/work/.mirror/google+benchmark/repo}
        mkdir -p "$src" && git -C "$git_dir" archive v1.9.5 | tar -x -C "$src" ||
            { say "no Google Benchmark source (set RMM_PEER_GBENCH_SOURCE or RMM_PEER_GBENCH_GIT)"; exit 1; }
    fi
    say "building Google Benchmark from $src (g++, static, Release)"
    { cmake -S "$src" -B "$G/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBENCHMARK_ENABLE_TESTING=OFF \
          -DBENCHMARK_ENABLE_GTEST_TESTS=OFF -DBENCHMARK_ENABLE_WERROR=OFF -DBENCHMARK_INSTALL_DOCS=OFF \
          -DBENCHMARK_ENABLE_LIBPFM=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
      cmake --build "$G/b" && cmake --install "$G/b" --prefix "$prefix"; } >"$G/build.log" 2>&1 ||
        { tail -20 "$G/build.log"; say "building Google Benchmark failed ($G/build.log)"; exit 1; }
fi
tar -C "$prefix" -czf "$S/gbench.tar.gz" . || exit 1
say "gbench.tar.gz ($(du -k "$S/gbench.tar.gz" | cut -f1) KiB) from $prefix"

# ---- RAPIDS RMM's librmm: 26.10 (the release we compare with) and 26.08 (the line of the sources) ----
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage_rmm() {  # $1: version as RAPIDS writes it (26.10, 26.08); $2: also its CCCL (include/rapids)
    local v=$1 with_cccl=$2 pyv=${1/.0/.} wheel
    wheel=$(ls "$ROOT"/.whl/librmm_cu13-"$pyv".*.whl 2>/dev/null | head -1)
    if [ -z "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp/whl-$v" "librmm-cu13==$pyv.*" ||
            { say "could not download librmm-cu13==$pyv.*"; return 1; }
        wheel=$(ls "$tmp/whl-$v"/*.whl | head -1)
    fi
    local parts=(librmm/lib64/librmm.so librmm/include/rmm librmm/include/nvtx3 librmm/VERSION rapids_logger)
    [ "$with_cccl" = 1 ] && parts+=(librmm/include/rapids)
    local unzip='import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])'
    python3 -c "$unzip" "$wheel" "$tmp/x-$v" || { say "unpacking $wheel failed"; return 1; }
    # The rapids-logger it was built with (26.08: 0.2, 26.10: 0.3), beside librmm/.
    local req
    req=$(grep -h '^Requires-Dist: rapids-logger' "$tmp/x-$v"/librmm_cu13-*.dist-info/METADATA | sed 's/^Requires-Dist: //; s/ //g')
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp/logger-$v" "$req" &&
        python3 -c "$unzip" "$(ls "$tmp/logger-$v"/*.whl | head -1)" "$tmp/x-$v" ||
        { say "could not get $req for librmm $v"; return 1; }
    tar -C "$tmp/x-$v" -czf "$S/librmm-$v.tar.gz" "${parts[@]}" || return 1
    say "librmm-$v.tar.gz ($(du -k "$S/librmm-$v.tar.gz" | cut -f1) KiB) from $(basename "$wheel")"
}
stage_rmm 26.10 0 || exit 1  # its CCCL is 3.5.0, stage/cpp's
stage_rmm 26.08 1 || exit 1  # built with CCCL 3.4.3: its own headers come along
say "stage/peerbench: $(du -sk "$S" | cut -f1) KiB"
