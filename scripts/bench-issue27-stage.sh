#!/usr/bin/env bash
# Stages what scripts/bench-issue27.sh needs on the GPU machine (runs HERE, where cargo, pip and the
# network are), then drops what its two calls do not use, so that stage/ and .whl/ fit one carry:
#
#   stage/wheels/     our Python wheel                      (scripts/gpu-stage.sh)
#   stage/cpp/        our librmm_rs.so, CCCL 3.5, RMM's C++ benchmark sources, rapids-logger
#   .whl/             RMM 26.10's wheels (rmm-cu13, librmm-cu13, rapids-logger)
#   stage/peerbench/  Google Benchmark, RMM 26.10's and 26.08's librmm (gpu-stage.sh runs
#                     scripts/peer-bench-stage.sh)
#   stage/bench/      the Rust criterion benchmark, our librmm_rs.so, RMM's wheels and CUDA headers,
#                     g++ builds of benchmarks/peer/rmm_peer_bench.cpp (scripts/bench-stage.sh)
#
#   bash scripts/bench-issue27-stage.sh
# Then with the device tool, carry ["stage", ".whl"]:
#   call 1: bash scripts/bench-issue27.sh record rmm-cpp
#   call 2: bash scripts/bench-issue27.sh peer python
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
status=0
RMM_STAGE_DASK=0 bash scripts/gpu-stage.sh || { echo "gpu-stage.sh: exit $? (see stage/MANIFEST.txt)"; status=1; }
[ -f stage/peerbench/gbench.tar.gz ] || bash scripts/peer-bench-stage.sh || { echo "peer-bench-stage.sh failed"; status=1; }
bash scripts/bench-stage.sh || { echo "bench-stage.sh failed"; status=1; }
# Not used by the two calls: the test suites and the tour.
rm -rf stage/rust stage/python stage/peer stage/tour stage/bin stage/cpp/bin stage/cpp/lib \
    stage/cpp/googletest.tar.gz .whl/dask
for need in stage/wheels stage/cpp/librmm_rs.so stage/cpp/cccl.tar.gz stage/cpp/peer-tests.tar.gz \
    stage/peerbench/gbench.tar.gz stage/bench/allocations stage/bench/rmmrs/librmm_rs.so; do
    ls $need >/dev/null 2>&1 || { echo "missing: $need"; status=1; }
done
ls .whl/rmm_cu13-26.10*.whl >/dev/null 2>&1 || { echo "missing: .whl/rmm_cu13-26.10*.whl"; status=1; }
du -shc stage .whl | tail -1
exit "$status"
