"""Issue 9's Python speed benchmark, for rmm-rs and RAPIDS RMM alike (only RMM's public API).

    python3 bindings-python/benchmarks/device_buffer.py [--json OUT]

Run it once with rmm-rs installed and once with RMM's wheels (same machine, same run) and compare:
  - create+drop of DeviceBuffer(size=1 MiB) per call, with the current device resource set to Cuda,
    CudaAsync, Pool, Arena and Managed (median of 7 rounds of 20,000 calls, in µs);
  - to_device of 64 MiB of host bytes + tobytes back (GiB/s of the round trip, median of 7);
  - a CuPy elementwise loop on rmm_cupy_allocator (µs per `a * 2 + 1` on 1 MiB floats), when CuPy
    is installed.
Prints one JSON object per measurement (and writes them all to OUT with --json).
"""

import argparse
import json
import statistics
import sys
import time

import rmm
import rmm.mr

MIB = 1 << 20


def median_us(fn, calls, rounds=7):
    for _ in range(min(calls, 1000)):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def resources():
    yield "Cuda", rmm.mr.CudaMemoryResource
    yield "CudaAsync", rmm.mr.CudaAsyncMemoryResource
    yield "Pool", lambda: rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 30)
    yield "Arena", lambda: rmm.mr.ArenaMemoryResource(rmm.mr.CudaMemoryResource(), arena_size=1 << 30)
    yield "Managed", rmm.mr.ManagedMemoryResource


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    impl = "rmm-rs" if hasattr(rmm, "is_host_mode") else "rmm"
    results = []

    def report(**row):
        row = {"impl": impl, "version": rmm.__version__, **row}
        results.append(row)
        print(json.dumps(row), flush=True)

    previous = rmm.mr.get_current_device_resource()
    for name, make in resources():
        rmm.mr.set_current_device_resource(make())
        us = median_us(lambda: rmm.DeviceBuffer(size=MIB), args.calls)
        report(bench="DeviceBuffer(size=1MiB) create+drop", resource=name, us=round(us, 3))
    rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 30))
    host = bytes(64 * MIB)
    us = median_us(lambda: rmm.DeviceBuffer.to_device(host).tobytes(), 20)
    report(bench="to_device+tobytes 64MiB (Pool)", gib_per_s=round(2 * len(host) / (us * 1e-6) / (1 << 30), 2))
    try:
        import cupy

        from rmm.allocators.cupy import rmm_cupy_allocator
    except ImportError as e:
        print(f"cupy loop skipped: {e}", file=sys.stderr)
    else:
        cupy.cuda.set_allocator(rmm_cupy_allocator)
        a = cupy.ones(MIB // 4, dtype=cupy.float32)

        def step():
            (a * 2 + 1).sum()

        us = median_us(step, 2000)
        cupy.cuda.runtime.deviceSynchronize()
        report(bench="cupy a*2+1 .sum() on 1MiB, rmm_cupy_allocator (Pool)", us=round(us, 3))
        cupy.cuda.set_allocator(None)
    rmm.mr.set_current_device_resource(previous)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
