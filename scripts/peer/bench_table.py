#!/usr/bin/env python3
"""The table of RMM's C++ benchmarks, ours against RAPIDS RMM (scripts/peer/bench.sh).

    bench_table.py OUT [VARIANT ...]

Reads OUT/<variant>/<PROGRAM>.json (Google Benchmark's JSON, one per program and variant) and writes
OUT/peer-bench.csv (program, benchmark, time unit, real time per variant, ours/<each other variant>)
and OUT/peer-bench.md (the same as a markdown table), and prints the markdown. A ratio above 1
means ours is slower. A benchmark that reported an error (Google
Benchmark's error_occurred) or did not run in one variant shows why instead of a time.
"""
import csv
import glob
import json
import os
import sys


def load(out, variant):
    """{(program, benchmark): (real_time, unit, error)} for one variant."""
    results = {}
    for path in sorted(glob.glob(os.path.join(out, variant, "*.json"))):
        program = os.path.basename(path)[:-5]
        try:
            data = json.load(open(path))
        except (OSError, ValueError) as e:
            results[(program, "(all)")] = (None, "", f"no results: {e}")
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            error = b.get("error_message") if b.get("error_occurred") else None
            results[(program, b["name"])] = (b.get("real_time"), b.get("time_unit", ""), error)
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
            t, unit, error = data[v].get((program, name), (None, "", "not run"))
            row[v] = t if error is None else None
            row[v + "_error"] = error or ""
            row["unit"] = row["unit"] or unit
        for p in peers:
            ok = "ours" in variants and row.get("ours") and row[p]
            row["ratio " + p] = row["ours"] / row[p] if ok else None
        rows.append(row)
    with open(os.path.join(out, "peer-bench.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["program", "benchmark", "unit"] + variants + [f"ours/{p}" for p in peers])
        for r in rows:
            w.writerow([r["program"], r["benchmark"], r["unit"]] +
                       [fmt(r[v]) if r[v] is not None else r[v + "_error"] for v in variants] +
                       [f"{r['ratio ' + p]:.2f}" if r["ratio " + p] else "" for p in peers])
    lines = ["| program | benchmark | unit | " + " | ".join(variants) + " | " +
             " | ".join(f"ours/{p}" for p in peers) + " |",
             "| --- | --- | --- | " + " | ".join("---:" for _ in variants + peers) + " |"]
    for r in rows:
        cells = [fmt(r[v]) if r[v] is not None else f"({r[v + '_error'][:60]})" for v in variants]
        cells += [f"{r['ratio ' + p]:.2f}" if r["ratio " + p] else "" for p in peers]
        lines.append(f"| {r['program']} | `{r['benchmark']}` | {r['unit']} | " + " | ".join(cells) + " |")
    lines.append("")
    for p in peers:
        ratios = [r["ratio " + p] for r in rows if r["ratio " + p]]
        if not ratios:
            lines.append(f"ours against {p}: no benchmark ran in both")
            continue
        geo = 1.0
        for x in ratios:
            geo *= x
        geo **= 1 / len(ratios)
        lines.append(f"ours against {p}: {len(ratios)} benchmarks in both; geometric mean of the time ratio "
                     f"{geo:.2f} (ours faster in {sum(1 for x in ratios if x < 1)}, slower in "
                     f"{sum(1 for x in ratios if x > 1)})")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "peer-bench.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
