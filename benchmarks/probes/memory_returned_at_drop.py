# Probe for issue 27's RANDOM_ALLOCATIONS `cuda_async_mr` cells: RMM's program runs pool, binning
# and arena before cuda_async in one process, so memory those resources kept (or gave back late)
# would leave the driver's pool less room. Makes each resource as that program does (pool: half the
# free memory; binning 2^18..2^22 over such a pool; arena: all free memory but 64 MiB), three times,
# fills it with 500 buffers of 1 B-4 MiB, drops it, and prints what it held while alive and what
# `available_device_memory()` still misses after the drop (0.0 MiB: everything came back).
#
#   PYTHONPATH=<our wheel's site> python3 benchmarks/probes/memory_returned_at_drop.py
import gc
import random

import rmm
import rmm.mr as mr


def free():
    return mr.available_device_memory()[0]


def pool():
    return mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size=(free() // 2) // 256 * 256)


def binning():
    return mr.BinningMemoryResource(pool(), 18, 22)


def arena():
    return mr.ArenaMemoryResource(mr.CudaMemoryResource(), arena_size=(free() - (64 << 20)) // 256 * 256)


def main():
    base = free()
    print(f"free at start {base / 2**30:.2f} GiB")
    for name, make in [("pool", pool), ("binning", binning), ("arena", arena)]:
        for round_ in range(3):
            resource = make()
            buffers = [rmm.DeviceBuffer(size=random.randint(1, 4 << 20), mr=resource) for _ in range(500)]
            del buffers
            during = free()
            del resource
            gc.collect()
            print(
                f"{name} {round_}: held while alive {(base - during) / 2**30:.2f} GiB, "
                f"not returned after the drop {(base - free()) / 2**20:.1f} MiB"
            )


if __name__ == "__main__":
    main()
