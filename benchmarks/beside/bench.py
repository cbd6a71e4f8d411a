"""rmm-rs beside RAPIDS RMM 26.10, side by side in one process: what a cuDF-style extension pays per
allocation through `mr.get_mr()` (tests/ext/cudf_style.pyx and its libcudf-shaped C++), RMM's own
resources against ours, and RMM's `DeviceBuffer(size=1 MiB)` through each pool.

Rows (each the median of --repeats runs):
  temporaries  C++ loop of 1-2.5 KiB allocate/free pairs on `mr.get_mr()`, default stream: ns/pair
  ..., no ref  the same loop on our handle's C vtable directly (ours only): the ref's cost is the
               difference
  threads N    N C++ threads at once, 256 B pairs on `mr.get_mr()`, a stream of their own each:
               wall ns per pair over all threads (the inverse of the aggregate throughput)
  DeviceBuffer Python `rmm.DeviceBuffer(size=1 MiB)` created and dropped with the pool as RMM's
               current device resource: us per buffer

    python benchmarks/beside/bench.py --ext-dir DIR [--json FILE] [--pairs N] [--repeats N]

Prints one table (RMM, ours, ours/RMM) and the issue's targets with PASS/MISS. Needs a GPU for
RMM's resources; in host mode only ours run (over host memory), as a smoke test of the script.
"""

import argparse
import gc
import json
import os
import statistics as stats_mod
import sys
import time


def load_extension(ext_dir):
    sys.path.insert(0, ext_dir)
    import cudf_style

    return cudf_style


def median_of(repeats, fn):
    return stats_mod.median(fn() for _ in range(repeats))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ext-dir", default=os.environ.get("RMM_RS_TEST_EXT_DIR", ""))
    parser.add_argument("--json", default="")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--thread-pairs", type=int, default=200_000, help="pairs per thread")
    parser.add_argument("--buffers", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=1 << 30)
    args = parser.parse_args()
    if not args.ext_dir:
        parser.error("--ext-dir (or RMM_RS_TEST_EXT_DIR): the folder with the built cudf_style extension")

    import rmm
    import rmm.mr
    import rmm_rs

    ext = load_extension(args.ext_dir)
    host = rmm_rs.is_host_mode()
    size = args.pool_size

    # What each row compares: (label, RMM's resource or None, ours).
    def resources():
        if host:
            sys_mr = rmm_rs.SystemMemoryResource()
            ours_pool = rmm_rs.PoolMemoryResource(sys_mr, size)
            yield "pool", None, ours_pool
            yield "statistics over pool", None, rmm_rs.StatisticsResourceAdaptor(ours_pool)
            yield "binning", None, rmm_rs.BinningMemoryResource(sys_mr, 10, 12)
            yield "arena", None, rmm_rs.ArenaMemoryResource(sys_mr, size)
            return
        rmm_pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), size)
        ours_pool = rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), size)
        yield "pool", rmm_pool, ours_pool
        yield "statistics over pool", rmm.mr.StatisticsResourceAdaptor(rmm_pool), rmm_rs.StatisticsResourceAdaptor(
            ours_pool
        )
        del rmm_pool, ours_pool
        gc.collect()
        yield "binning", rmm.mr.BinningMemoryResource(rmm.mr.CudaMemoryResource(), 10, 12), rmm_rs.BinningMemoryResource(
            rmm_rs.CudaMemoryResource(), 10, 12
        )
        gc.collect()
        yield "arena", rmm.mr.ArenaMemoryResource(rmm.mr.CudaMemoryResource(), size), rmm_rs.ArenaMemoryResource(
            rmm_rs.CudaMemoryResource(), size
        )
        gc.collect()
        yield "cuda_async", rmm.mr.CudaAsyncMemoryResource(), rmm_rs.CudaAsyncMemoryResource()

    rows = []  # (measurement, resource, rmm, ours, unit)

    def measure(label, resource, rmm_mr, ours_mr, fn, unit):
        rmm_v = median_of(args.repeats, lambda: fn(rmm_mr)) if rmm_mr is not None else None
        ours_v = median_of(args.repeats, lambda: fn(ours_mr))
        rows.append((label, resource, rmm_v, ours_v, unit))
        print(f"bench: {label} {resource}: RMM {rmm_v} ours {ours_v} {unit}", file=sys.stderr, flush=True)

    for resource, rmm_mr, ours_mr in resources():
        measure("temporaries", resource, rmm_mr, ours_mr, lambda mr: ext.temporaries_ns_per_pair(mr, args.pairs), "ns/pair")
        if resource in ("pool", "statistics over pool"):
            # The same loop on our handle's vtable, without RMM's ref: what the ref adds.
            measure(
                "temporaries, no ref",
                resource,
                None,
                ours_mr,
                lambda mr: rmm_rs._resources._c_abi_temporaries_ns_per_pair(mr, args.pairs),
                "ns/pair",
            )
        if resource == "pool":
            for threads in (4, 16):
                measure(
                    f"threads {threads}",
                    resource,
                    rmm_mr,
                    ours_mr,
                    lambda mr, t=threads: ext.threaded_pairs_ns_per_pair(mr, t, args.thread_pairs, not host),
                    "ns/pair",
                )
            if not host:
                previous = rmm.mr.get_current_device_resource()

                def buffers(mr):
                    rmm.mr.set_current_device_resource(mr)
                    try:
                        for _ in range(1000):
                            rmm.DeviceBuffer(size=1 << 20)
                        start = time.perf_counter()
                        for _ in range(args.buffers):
                            rmm.DeviceBuffer(size=1 << 20)
                        return (time.perf_counter() - start) / args.buffers * 1e6
                    finally:
                        rmm.mr.set_current_device_resource(previous)

                measure("DeviceBuffer 1 MiB", resource, rmm_mr, ours_mr, buffers, "us/buffer")
        del rmm_mr, ours_mr
        gc.collect()

    # ---- The table ----------------------------------------------------------------------------
    def fmt(v):
        return "n/a" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:,.2f}")

    header = ("measurement", "resource", "RMM 26.10", "rmm_rs", "ours/RMM", "unit")
    lines = [header]
    for label, resource, rmm_v, ours_v, unit in rows:
        ratio = f"{ours_v / rmm_v:.3f}" if rmm_v else "-"
        lines.append((label, resource, fmt(rmm_v), fmt(ours_v), ratio, unit))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if n == 0:
            print("  ".join("-" * w for w in widths))

    # ---- The targets ------------------------------------------------------------------
    value = {(label, resource): (rmm_v, ours_v) for label, resource, rmm_v, ours_v, _ in rows}
    targets = []
    if not host:
        rmm_pool, ours_pool = value[("temporaries", "pool")]
        targets.append(("our pool's temporaries <= 1/10 of RMM's pool", ours_pool <= rmm_pool / 10))
        _, ours_stats = value[("temporaries", "statistics over pool")]
        targets.append((f"our statistics adaptor adds <= ~20 ns (adds {ours_stats - ours_pool:.1f})", ours_stats - ours_pool <= 20))
        rmm_buf, ours_buf = value[("DeviceBuffer 1 MiB", "pool")]
        targets.append(("DeviceBuffer(1 MiB) through our pool <= 1/2 of RMM's pool", ours_buf <= rmm_buf / 2))
        for threads in (4, 16):
            rmm_t, ours_t = value[(f"threads {threads}", "pool")]
            targets.append((f"pool pair at {threads} threads through the ref: ours < RMM's", ours_t < rmm_t))
    for resource in ("pool", "statistics over pool"):
        _, through_ref = value[("temporaries", resource)]
        _, direct = value[("temporaries, no ref", resource)]
        print(f"info: RMM's ref adds {through_ref - direct:.1f} ns to our {resource}'s pair ({direct:.1f} ns without it)")
    for text, ok in targets:
        print(f"target: {'PASS' if ok else 'MISS'}  {text}")
    met = sum(ok for _, ok in targets)
    print(f"bench-beside: {len(rows)} measurements, targets {met}/{len(targets)} met" + (" (host mode: ours only)" if host else ""))

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "rows": [
                        {"measurement": m, "resource": r, "rmm": a, "ours": b, "unit": u} for m, r, a, b, u in rows
                    ],
                    "targets": [{"target": t, "met": ok} for t, ok in targets],
                    "host_mode": host,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
