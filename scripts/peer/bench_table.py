#!/usr/bin/env python3
"""The table of RMM's C++ benchmarks, ours against RAPIDS RMM (scripts/peer/bench.sh).

    bench_table.py OUT [VARIANT ...]

Reads OUT/<variant>/<PROGRAM>.json (Google Benchmark's JSON, one per program and variant; a
program run several times, e.g. REPLAY_BENCH on several logs, has one file per run,
<PROGRAM>-<label>.json) and writes OUT/peer-bench.csv (program, benchmark, time unit, real time
per variant, ours/<each other variant>, the spread per variant) and OUT/peer-bench.md (the same as
a markdown table), and prints the markdown. With --benchmark_repetitions a cell is the median of
the repetitions, and its spread is (slowest - fastest) / median. A ratio above 1 means ours is
slower. A benchmark that reported an error (Google Benchmark's error_occurred) or did not run in one
variant shows why instead of a time. The summary gives the geometric mean over every benchmark and
over the allocator-bound programs (ALLOCATOR_BOUND), and lists the cells above 1.0 by more than
their spread. With several RMM versions it also gives the allocator-bound programs each against
the first version in VARIANT order that ran it (the newest, as the scripts order them: a program
that does not build against 26.10 counts against 26.08), with and without the cells that time the
driver rather than a sub-allocator (DRIVER_BOUND).
"""
import csv
import glob
import json
import os
import statistics
import sys

# The programs whose time is mostly allocation (issue 27's target: geometric mean <= 0.5 over them).
ALLOCATOR_BOUND = ("RANDOM_ALLOCATIONS_BENCH", "REPLAY_BENCH", "CUDA_STREAM_POOL_BENCH", "ASYNC_PRIMING_BENCH")
# Benchmarks of those programs that time the driver's own allocator, ours as RMM's (cudaMalloc,
# cudaMallocManaged, the driver's pool per call, or making and priming the driver's pool).
DRIVER_BOUND = ("cuda_mr/", "cuda_async_mr/", "CUDA Resource", "Managed Resource", "BM_AsyncConstructionTime")


def is_allocator_bound(row):
    """Whether the row's program (the part before a run's -<label>) is in ALLOCATOR_BOUND."""
    return row["program"].split("-")[0] in ALLOCATOR_BOUND


def newest_peer_ratios(rows, peers):
    """[(row, ratio)] of the allocator-bound rows, each against the first peer (in `peers` order)
    with a ratio for it."""
    out = []
    for r in rows:
        if not is_allocator_bound(r):
            continue
        ratio = next((r["ratio " + p] for p in peers if r["ratio " + p]), None)
        if ratio:
            out.append((r, ratio))
    return out


def load(out, variant):
    """{(program, benchmark): (median real_time, unit, error, spread)} for one variant."""
    results = {}
    for path in sorted(glob.glob(os.path.join(out, variant, "*.json"))):
        program = os.path.basename(path)[:-5]
        try:
            data = json.load(open(path))
        except (OSError, ValueError) as e:
            results[(program, "(all)")] = (None, "", f"no results: {e}", None)
            continue
        runs = {}
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            name = b.get("run_name", b["name"])
            error = b.get("error_message") if b.get("error_occurred") else None
            runs.setdefault(name, []).append((b.get("real_time"), b.get("time_unit", ""), error))
        for name, reps in runs.items():
            errors = [e for _, _, e in reps if e]
            times = [t for t, _, e in reps if not e and t is not None]
            if errors or not times:
                results[(program, name)] = (None, reps[0][1], errors[0] if errors else "no time", None)
                continue
            median = statistics.median(times)
            spread = (max(times) - min(times)) / median if len(times) > 1 and median else None
            results[(program, name)] = (median, reps[0][1], None, spread)
    return results


def fmt(value):
    return "" if value is None else (f"{value:.3g}" if value < 1000 else f"{value:.0f}")


def main():
    out = sys.argv[1]
    variants = sys.argv[2:] or ["ours", "rmm-26.10", "rmm-26.08"]
    peers = [v for v in variants if v != "ours"]
    data = {v: load(out, v) for v in variants}
    keys = sorted(set().union(*(d.keys() for d in data.values())))
    rows = []
    for program, name in keys:
        row = {"program": program, "benchmark": name, "unit": ""}
        for v in variants:
            t, unit, error, spread = data[v].get((program, name), (None, "", "not run", None))
            row[v] = t if error is None else None
            row[v + "_error"] = error or ""
            row[v + "_spread"] = spread
            row["unit"] = row["unit"] or unit
        for p in peers:
            ok = "ours" in variants and row.get("ours") and row[p]
            row["ratio " + p] = row["ours"] / row[p] if ok else None
        rows.append(row)
    with open(os.path.join(out, "peer-bench.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["program", "benchmark", "unit"] + variants + [f"ours/{p}" for p in peers] +
                   [f"spread {v}" for v in variants])
        for r in rows:
            w.writerow([r["program"], r["benchmark"], r["unit"]] +
                       [fmt(r[v]) if r[v] is not None else r[v + "_error"] for v in variants] +
                       [f"{r['ratio ' + p]:.2f}" if r["ratio " + p] else "" for p in peers] +
                       [f"{r[v + '_spread']:.3f}" if r[v + "_spread"] is not None else "" for v in variants])
    lines = ["| program | benchmark | unit | " + " | ".join(variants) + " | " +
             " | ".join(f"ours/{p}" for p in peers) + " |",
             "| --- | --- | --- | " + " | ".join("---:" for _ in variants + peers) + " |"]
    for r in rows:
        cells = [fmt(r[v]) if r[v] is not None else f"({r[v + '_error'][:60]})" for v in variants]
        cells += [f"{r['ratio ' + p]:.2f}" if r["ratio " + p] else "" for p in peers]
        lines.append(f"| {r['program']} | `{r['benchmark']}` | {r['unit']} | " + " | ".join(cells) + " |")
    lines.append("")
    def geomean(ratios):
        geo = 1.0
        for x in ratios:
            geo *= x
        return geo ** (1 / len(ratios))

    for p in peers:
        ratios = [r["ratio " + p] for r in rows if r["ratio " + p]]
        if not ratios:
            lines.append(f"ours against {p}: no benchmark ran in both")
            continue
        lines.append(f"ours against {p}: {len(ratios)} benchmarks in both; geometric mean of the time ratio "
                     f"{geomean(ratios):.2f} (ours faster in {sum(1 for x in ratios if x < 1)}, slower in "
                     f"{sum(1 for x in ratios if x > 1)})")
        bound = [r["ratio " + p] for r in rows if r["ratio " + p] and is_allocator_bound(r)]
        if bound:
            lines.append(f"ours against {p}, allocator-bound programs ({', '.join(ALLOCATOR_BOUND)}): "
                         f"{len(bound)} benchmarks, geometric mean {geomean(bound):.2f}")
        # Slower beyond the spread: the ratio's excess over 1 exceeds both sides' spreads.
        over = [r for r in rows if r["ratio " + p] and r["ratio " + p] > 1 +
                max(r.get("ours_spread") or 0, r[p + "_spread"] or 0)]
        for r in over:
            lines.append(f"  slower than {p} beyond the spread: {r['program']} `{r['benchmark']}` "
                         f"{r['ratio ' + p]:.2f}")
    if len(peers) > 1:
        newest = newest_peer_ratios(rows, peers)
        if newest:
            lines.append(f"ours against the first of {', '.join(peers)} that ran each allocator-bound benchmark: "
                         f"{len(newest)} benchmarks, geometric mean {geomean([x for _, x in newest]):.3f}")
            allocator = [x for r, x in newest if not any(d in r["benchmark"] for d in DRIVER_BOUND)]
            if allocator:
                lines.append(f"  the same without the cells that time the driver ({', '.join(DRIVER_BOUND)}): "
                             f"{len(allocator)} benchmarks, geometric mean {geomean(allocator):.3f}")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "peer-bench.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
