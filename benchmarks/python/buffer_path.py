"""Where a Python `rmm.DeviceBuffer` create+drop spends its time, for rmm-rs or RMM (whichever `rmm`
is on the path): the buffer with nothing allocated (`size=0`: the binding alone), with 256 bytes
(from the current device resource, and from `mr=` named), and the resource's own
`allocate`/`deallocate` pair called from Python, for Pool, Arena and Binning over the device (host
memory in host mode). Best of 5 rounds, ns per create+drop or per pair.

    python3 benchmarks/python/buffer_path.py [--calls N] [--json OUT]
"""

import argparse
import json
import time

import rmm
import rmm.mr


def best_ns(fn, calls):
    for _ in range(calls // 10):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e9)
    return round(best, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--json")
    args = parser.parse_args()
    host_mode = getattr(rmm, "is_host_mode", lambda: False)()
    upstream = rmm.mr.SystemMemoryResource if host_mode else rmm.mr.CudaMemoryResource
    makers = {
        "Pool": lambda: rmm.mr.PoolMemoryResource(upstream(), initial_pool_size=1 << 30),
        "Arena": lambda: rmm.mr.ArenaMemoryResource(upstream(), arena_size=1 << 30),
        "Binning": lambda: rmm.mr.BinningMemoryResource(rmm.mr.PoolMemoryResource(upstream(), 1 << 30), 18, 22),
    }
    rows = []
    previous = rmm.mr.get_current_device_resource()
    for name, make in makers.items():
        mr = make()
        rmm.mr.set_current_device_resource(mr)

        def pair():
            mr.deallocate(mr.allocate(256), 256)

        row = {
            "resource": name,
            "DeviceBuffer(size=0)": best_ns(lambda: rmm.DeviceBuffer(size=0), args.calls),
            "DeviceBuffer(size=256)": best_ns(lambda: rmm.DeviceBuffer(size=256), args.calls),
            "DeviceBuffer(size=256, mr=mr)": best_ns(lambda: rmm.DeviceBuffer(size=256, mr=mr), args.calls),
            "mr.allocate+deallocate(256)": best_ns(pair, args.calls),
        }
        rows.append(row)
        print(f"{rmm.__file__}: " + ", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    rmm.mr.set_current_device_resource(previous)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rmm": rmm.__file__, "host_mode": host_mode, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
