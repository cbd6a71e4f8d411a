#!/usr/bin/env python3
"""Draws docs/benchmarks.md's figure from a bench.csv written by bench-table.py.

usage: bench-figure.py BENCH_CSV OUT_PNG        (needs matplotlib: pip install matplotlib)

One panel per workload; for each resource and thread count, rmm-rs from Rust, rmm-rs through its C++
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


def main(bench_csv, out_png):
    values = {}
    with open(bench_csv, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["workload"], row["resource"], int(row["threads"]), row["impl"])
            values[key] = float(row["ns_per_op"])
    impls = [i for i in IMPLS if any(k[3] == i[0] for k in values)]
    workloads = [("pair256", "256 B allocate + free"), ("random", "RMM's random allocations")]
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5))
    for ax, (workload, title) in zip(axes, workloads):
        groups = [
            (r, t)
            for r in RESOURCES
            for t in (1, 4, 16)
            if any((workload, r, t, i) in values for i, _, _ in impls)
        ]
        width = 0.8 / len(impls)
        for k, (impl, label, color) in enumerate(impls):
            xs = [g + (k - (len(impls) - 1) / 2) * width for g in range(len(groups))]
            ys = [values.get((workload, r, t, impl), 0) for r, t in groups]
            ax.bar(xs, ys, width, label=label, color=color)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{SHORT.get(r, r)}\n{t} thr" for r, t in groups], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("ns per operation, all threads (log scale, lower is better)")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("rmm-rs vs RMM 26.10 on one NVIDIA H200 (each thread on its own stream)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
