"""Where the time of `DeviceBuffer(size=1 MiB)` create+drop goes on the Python path (issue 9).

    python3 bindings-python/benchmarks/python_path.py [--calls N] [--json OUT]

Runs anywhere (host mode included): the resources are sub-allocators over `SystemMemoryResource`
in host mode and over `CudaMemoryResource` on a GPU, plus CudaAsync on a GPU. Per resource it
times, in µs per call (median of 7 rounds):
  - `DeviceBuffer(size=1MiB)` with the resource current (the benchmark of issue 9),
  - the same with `mr=` and with `stream=DEFAULT_STREAM` passed explicitly,
  - `DeviceBuffer(size=0)` (no allocation: the binding's own cost),
  - `get_current_device_resource()` alone,
and, as floors, `object()` and a `Stream(DEFAULT_STREAM)` (a small PyO3 object of the same module).
Only RMM's public API is used, so it also runs over RAPIDS RMM's wheel.
"""

import argparse
import json
import statistics
import time

import rmm
import rmm.mr
from rmm.pylibrmm.stream import DEFAULT_STREAM, Stream

MIB = 1 << 20


CLOCK = time.perf_counter


def median_us(fn, calls, rounds=7):
    for _ in range(min(calls, 1000)):
        fn()
    times = []
    for _ in range(rounds):
        start = CLOCK()
        for _ in range(calls):
            fn()
        times.append((CLOCK() - start) / calls * 1e6)
    return statistics.median(times)


def resources(host_mode):
    upstream = rmm.mr.SystemMemoryResource if host_mode else rmm.mr.CudaMemoryResource
    yield "Pool", lambda: rmm.mr.PoolMemoryResource(upstream(), initial_pool_size=1 << 28)
    yield "Arena", lambda: rmm.mr.ArenaMemoryResource(upstream(), arena_size=1 << 28)
    if not host_mode:
        yield "CudaAsync", rmm.mr.CudaAsyncMemoryResource


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time with the process's CPU time instead of the wall clock (steadier on a loaded machine)",
    )
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    impl = "rmm-rs" if hasattr(rmm, "is_host_mode") else "rmm"
    host_mode = impl == "rmm-rs" and rmm.is_host_mode()
    results = []
    calls = args.calls

    def report(**row):
        row = {"impl": impl, "host_mode": host_mode, **row}
        results.append(row)
        print(json.dumps(row), flush=True)

    report(bench="object()", us=round(median_us(object, calls), 3))
    report(bench="Stream(DEFAULT_STREAM)", us=round(median_us(lambda: Stream(DEFAULT_STREAM), calls), 3))
    previous = rmm.mr.get_current_device_resource()
    for name, make in resources(host_mode):
        mr = make()
        rmm.mr.set_current_device_resource(mr)
        DeviceBuffer = rmm.DeviceBuffer
        get = rmm.mr.get_current_device_resource
        variants = {
            "DeviceBuffer(size=1MiB)": lambda: DeviceBuffer(size=MIB),
            "DeviceBuffer(size=1MiB, mr=mr)": lambda: DeviceBuffer(size=MIB, mr=mr),
            "DeviceBuffer(size=1MiB, stream=DEFAULT_STREAM)": lambda: DeviceBuffer(size=MIB, stream=DEFAULT_STREAM),
            "DeviceBuffer(size=0)": lambda: DeviceBuffer(size=0),
            "get_current_device_resource()": get,
        }
        for bench, fn in variants.items():
            report(bench=bench, resource=name, us=round(median_us(fn, calls), 3))
        rmm.mr.set_current_device_resource(previous)
        del mr
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
