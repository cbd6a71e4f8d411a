"""Python end to end, for rmm-rs and RAPIDS RMM alike (only RMM's public API).

    python3 benchmarks/python/end_to_end.py buffers|cupy|torch [--rounds 7] [--json OUT]

Run each part in its own process (PyTorch's allocator is chosen once per process), once with
rmm-rs on the path and once with RAPIDS RMM's wheels, on one machine in one call;
`compare_end_to_end.py` puts the two side by side. Every number is the median over `--rounds`
rounds (default 7), with the fastest and slowest round beside it:
  - buffers: `rmm.DeviceBuffer(size=256)` create+drop, µs per call (50,000 calls a round), with the
    current device resource set to Pool, Arena, Binning (bins of 256 KiB to 4 MiB over a pool, as
    RMM's benchmarks build it) and CudaAsync; and the driver's floor for CudaAsync: one
    cuMemAllocAsync + cuMemFreeAsync of 256 bytes on the legacy stream called straight from Python
    (ctypes), with the cost of two ctypes calls of a trivial driver entry point beside it;
  - cupy: `(a * 2 + 1).sum()` on 1 MiB of float32 with `rmm_cupy_allocator` over a pool, µs per
    iteration (2,000 iterations a round, then a device synchronization);
  - torch: one training step (forward, backward, Adam) of a small convolutional network on a batch
    of 64 random 64x64 images with `rmm_torch_allocator` over a pool, ms per step (30 steps a
    round, then a synchronization).
Prints one JSON object per measurement (and writes them all to OUT with --json).
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

import rmm
import rmm.mr
from workloads import conv_net

MIB = 1 << 20


def pool():
    return rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=1 << 30)


def rounds_of(fn, per_round, rounds, sync=lambda: None, scale=1e6):
    """Per-call times (µs by default) of `rounds` rounds of `per_round` calls, after a warm-up."""
    for _ in range(max(1, per_round // 10)):
        fn()
    sync()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(per_round):
            fn()
        sync()
        times.append((time.perf_counter() - start) / per_round * scale)
    return times


def buffers(report, rounds):
    resources = {
        "Pool": pool,
        "Arena": lambda: rmm.mr.ArenaMemoryResource(rmm.mr.CudaMemoryResource(), arena_size=1 << 30),
        "Binning": lambda: rmm.mr.BinningMemoryResource(pool(), 18, 22),
        "CudaAsync": rmm.mr.CudaAsyncMemoryResource,
    }
    previous = rmm.mr.get_current_device_resource()
    for name, make in resources.items():
        rmm.mr.set_current_device_resource(make())
        times = rounds_of(lambda: rmm.DeviceBuffer(size=256), 50000, rounds)
        report("DeviceBuffer(size=256) create+drop", name, "us", times)
    rmm.mr.set_current_device_resource(previous)
    # The driver's floor. A DeviceBuffer made the device's primary context current on this thread.
    rmm.DeviceBuffer(size=256)
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"no CUDA driver ({e}): no driver floor", file=sys.stderr)
        return
    ptr = ctypes.c_uint64()
    size = ctypes.c_size_t(256)
    legacy = ctypes.c_void_p(1)  # CU_STREAM_LEGACY

    def pair():
        cuda.cuMemAllocAsync(ctypes.byref(ptr), size, legacy)
        cuda.cuMemFreeAsync(ptr, legacy)

    if cuda.cuMemAllocAsync(ctypes.byref(ptr), size, legacy) != 0:
        print("cuMemAllocAsync failed: no driver floor", file=sys.stderr)
        return
    cuda.cuMemFreeAsync(ptr, legacy)
    cuda.cuStreamSynchronize(legacy)
    report("cuMemAllocAsync+cuMemFreeAsync 256 B (ctypes)", "driver", "us",
           rounds_of(pair, 20000, rounds, sync=lambda: cuda.cuStreamSynchronize(legacy)))
    version = ctypes.c_int()
    report("two ctypes calls of cuDriverGetVersion", "driver", "us",
           rounds_of(lambda: (cuda.cuDriverGetVersion(ctypes.byref(version)),
                              cuda.cuDriverGetVersion(ctypes.byref(version))), 20000, rounds))


def cupy_loop(report, rounds):
    import cupy

    from rmm.allocators.cupy import rmm_cupy_allocator

    rmm.mr.set_current_device_resource(pool())
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    a = cupy.ones(MIB // 4, dtype=cupy.float32)
    times = rounds_of(lambda: (a * 2 + 1).sum(), 2000, rounds, sync=cupy.cuda.runtime.deviceSynchronize)
    report("cupy (a*2+1).sum() on 1MiB, rmm_cupy_allocator", "Pool", "us", times)
    cupy.cuda.set_allocator(None)


def torch_step(report, rounds):
    import torch

    from rmm.allocators.torch import rmm_torch_allocator

    rmm.mr.set_current_device_resource(pool())
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    model, optimizer, loss_fn = conv_net(torch)
    x = torch.randn(64, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    times = rounds_of(step, 30, rounds, sync=torch.cuda.synchronize, scale=1e3)
    report("torch training step (conv net, batch 64), rmm_torch_allocator", "Pool", "ms", times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=["buffers", "cupy", "torch"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args()
    impl = "rmm-rs" if hasattr(rmm, "is_host_mode") else "rmm"
    results = []

    def report(bench, resource, unit, times):
        row = {
            "impl": impl,
            "version": rmm.__version__,
            "bench": bench,
            "resource": resource,
            "unit": unit,
            "median": round(statistics.median(times), 4),
            "min": round(min(times), 4),
            "max": round(max(times), 4),
            "rounds": [round(t, 4) for t in times],
        }
        results.append(row)
        print(json.dumps(row), flush=True)

    {"buffers": buffers, "cupy": cupy_loop, "torch": torch_step}[args.part](report, max(5, args.rounds))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
