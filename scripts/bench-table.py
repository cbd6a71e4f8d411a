#!/usr/bin/env python3
"""Joins the Rust criterion results and the C++ benchmark CSV (RMM 26.10 and rmm-rs through its C++
headers) into one table.

usage: bench-table.py CRITERION_DIR CPP_CSV OUT_CSV OUT_MD

Criterion stores each benchmark under <dir>/<group>/<resource>.<stream>/<threads>/new/ with estimates.json
(times per iteration, ns) and benchmark.json (throughput: operations per iteration). ns per op is the
median time per iteration over the operations of one iteration: the inverse of the aggregate
throughput, the same unit as the C++ CSV's ns_per_op column. <stream> is the kind of stream the threads used (own,
foreign, legacy, ptds); results without one (older runs) are on our own streams.

OUT_MD gets the table of every run, then for the rmm-rs columns each stream kind's time over the
same implementation's time on its own streams (the "within 1.25x" target of issue 10).
"""
import csv
import json
import pathlib
import statistics
import sys

PEER = "rmm-26.10"
IMPLS = [("rmm-rs", "rmm-rs (Rust)"), ("rmm-rs-cpp", "rmm-rs (C++ API)"), (PEER, "RMM 26.10")]


def rust_rows(criterion_dir):
    root = pathlib.Path(criterion_dir)
    for estimates in sorted(root.glob("*/*/*/new/estimates.json")):
        bench = json.loads((estimates.parent / "benchmark.json").read_text())
        median_ns = json.loads(estimates.read_text())["median"]["point_estimate"]
        elements = (bench.get("throughput") or {}).get("Elements") or 1
        group, resource, threads = estimates.parts[-5], estimates.parts[-4], estimates.parts[-3]
        resource, _, stream = resource.partition(".")
        yield {
            "impl": "rmm-rs",
            "resource": resource,
            "stream": stream or "own",
            "workload": group,
            "threads": int(threads),
            "ns_per_op": median_ns / elements,
        }


def cpp_rows(cpp_csv):
    with open(cpp_csv, newline="") as f:
        for row in csv.DictReader(f):
            yield {
                "impl": row["impl"],
                "resource": row["resource"],
                "stream": row.get("stream") or "own",
                "workload": "pair256" if row["workload"] == "empty" else row["workload"],
                "threads": int(row["threads"]),
                "ns_per_op": float(row["ns_per_op"]),
            }


STREAMS = ["own", "foreign", "legacy", "ptds"]


def stream_rank(stream):
    return STREAMS.index(stream) if stream in STREAMS else len(STREAMS)


def main(criterion_dir, cpp_csv, out_csv, out_md):
    rows = list(rust_rows(criterion_dir)) + list(cpp_rows(cpp_csv))
    with open(out_csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["impl", "resource", "workload", "stream", "threads", "ns_per_op"])
        writer.writeheader()
        writer.writerows(rows)
    # Several rows of one cell (process runs of one call, `RMM_ISSUE27_ROUNDS`): their median, and
    # their range in the table.
    runs = {}
    for r in rows:
        key = (r["workload"], r["resource"], r["stream"], r["threads"])
        runs.setdefault(key, {}).setdefault(r["impl"], []).append(r["ns_per_op"])
    table = {key: {impl: statistics.median(v) for impl, v in by.items()} for key, by in runs.items()}
    spread = {key: {impl: (min(v), max(v), len(v)) for impl, v in by.items()} for key, by in runs.items()}
    order = lambda k: (k[0], k[1], stream_rank(k[2]), k[3])
    header = ["workload", "resource", "stream", "threads"] + [f"{label} ns/op" for _, label in IMPLS]
    header += [f"{label} ÷ RMM" for impl, label in IMPLS if impl != PEER]
    lines = ["| " + " | ".join(header) + " |", "| --- | --- | --- |" + " ---: |" * (len(header) - 3)]
    fmt = lambda v: f"{v:,.1f}" if v is not None else "–"
    for key in sorted(table, key=order):
        workload, resource, stream, threads = key
        by_impl = table[key]
        peer = by_impl.get(PEER)
        def shown(impl):
            lo, hi, n = spread[key].get(impl, (0, 0, 0))
            value = fmt(by_impl.get(impl))
            return f"{value} ({lo:,.1f}-{hi:,.1f}, n={n})" if n > 1 else value

        cells = [workload, resource, stream, str(threads)] + [shown(impl) for impl, _ in IMPLS]
        for impl, _ in IMPLS:
            if impl != PEER:
                ours = by_impl.get(impl)
                cells.append(f"{ours / peer:.2f}" if ours and peer else "–")
        lines.append("| " + " | ".join(cells) + " |")
    # Each stream kind against our own streams, per implementation of ours.
    ours = [(impl, label) for impl, label in IMPLS if impl != PEER]
    kinds = [s for s in STREAMS[1:] if any(k[2] == s for k in table)]
    if kinds:
        lines += ["", "Time on each kind of stream over the time on our own streams (same implementation):", ""]
        header = ["workload", "resource", "threads"] + [f"{label}: {s} ÷ own" for _, label in ours for s in kinds]
        lines += ["| " + " | ".join(header) + " |", "| --- | --- |" + " ---: |" * (len(header) - 2)]
        seen = sorted({(k[0], k[1], k[3]) for k in table})
        for workload, resource, threads in seen:
            cells = [workload, resource, str(threads)]
            for impl, _ in ours:
                own = table.get((workload, resource, "own", threads), {}).get(impl)
                for s in kinds:
                    v = table.get((workload, resource, s, threads), {}).get(impl)
                    cells.append(f"{v / own:.2f}" if v and own else "–")
            lines.append("| " + " | ".join(cells) + " |")
    pathlib.Path(out_md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
