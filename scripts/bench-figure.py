#!/usr/bin/env python3
"""Draws docs/benchmarks.md's figure from a bench.csv written by bench-table.py.

usage: bench-figure.py BENCH_CSV OUT_PNG        (needs matplotlib: pip install matplotlib)

One panel per workload and kind of stream (rows: workloads; columns: own, foreign, legacy, ptds; a
CSV without a stream column counts as own streams); for each resource and thread count, rmm-rs from Rust, rmm-rs through its C++
headers and RMM 26.10 side by side, in aggregate nanoseconds per operation on a log scale (lower is
better). An implementation missing from the CSV is left out of the legend.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESOURCES = ["pool", "arena", "binning", "cuda_async", "cuda", "empty"]
SHORT = {"cuda_async": "async"}
IMPLS = [
    ("rmm-rs", "rmm-rs (Rust)", "#1f77b4"),
    ("rmm-rs-cpp", "rmm-rs (C++ API)", "#2ca02c"),
    ("rmm-26.10", "RMM 26.10", "#ff7f0e"),
]


STREAMS = ["own", "foreign", "legacy", "ptds"]
WORKLOADS = [
    ("pair256", "256 B allocate + free"),
    ("random", "RMM's random allocations"),
    ("multistream", "allocate on one stream, free on another"),
]


def main(bench_csv, out_png):
    values = {}
    with open(bench_csv, newline="") as f:
        for row in csv.DictReader(f):
            stream = row.get("stream") or "own"
            key = (row["workload"], stream, row["resource"], int(row["threads"]), row["impl"])
            values[key] = float(row["ns_per_op"])
    impls = [i for i in IMPLS if any(k[4] == i[0] for k in values)]
    workloads = [w for w in WORKLOADS if any(k[0] == w[0] for k in values)]
    streams = [s for s in STREAMS if any(k[1] == s for k in values)]
    fig, axes = plt.subplots(
        len(workloads), len(streams), figsize=(6 * len(streams), 4.5 * len(workloads)), squeeze=False
    )
    for row, (workload, title) in enumerate(workloads):
        for col, stream in enumerate(streams):
            ax = axes[row][col]
            groups = [
                (r, t)
                for r in RESOURCES
                for t in (1, 4, 16)
                if any((workload, stream, r, t, i) in values for i, _, _ in impls)
            ]
            width = 0.8 / max(1, len(impls))
            for k, (impl, label, color) in enumerate(impls):
                xs = [g + (k - (len(impls) - 1) / 2) * width for g in range(len(groups))]
                ys = [values.get((workload, stream, r, t, impl), 0) for r, t in groups]
                ax.bar(xs, ys, width, label=label, color=color)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{SHORT.get(r, r)}\n{t} thr" for r, t in groups], fontsize=7)
            ax.set_yscale("log")
            if col == 0:
                ax.set_ylabel("ns per op, all threads (log, lower is better)")
            ax.set_title(f"{title}: {stream} streams", fontsize=10)
            ax.grid(axis="y", which="both", alpha=0.3)
            if row == 0 and col == 0:
                ax.legend()
    fig.suptitle("rmm-rs vs RMM 26.10 on one NVIDIA GPU, by kind of stream")
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
