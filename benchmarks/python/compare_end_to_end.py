"""The table of end_to_end.py's results, rmm-rs against RAPIDS RMM.

    python3 benchmarks/python/compare_end_to_end.py OURS.json... -- RMM.json...

Prints a markdown table: per measurement, each side's median over every round of every process that
measured it, with its fastest and slowest round,
and the ratio of the medians (ours / RMM; below 1: ours is faster), with a note where the two
sides' ranges overlap (the difference is within the run-to-run spread).
"""

import json
import statistics
import sys


def load(paths):
    """{(bench, resource): row}, the rounds of every process that measured it pooled."""
    rows = {}
    for path in paths:
        try:
            for row in json.load(open(path)):
                key = (row["bench"], row["resource"])
                if key in rows:
                    rows[key]["rounds"] += row["rounds"]
                else:
                    rows[key] = dict(row)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
    for row in rows.values():
        row["median"] = statistics.median(row["rounds"])
        row["min"], row["max"] = min(row["rounds"]), max(row["rounds"])
    return rows


def main():
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else len(args)
    ours, rmm = load(args[:split]), load(args[split + 1:])
    print("| measurement | resource | unit | rmm-rs median (min-max) | RMM 26.10 median (min-max) | ours/RMM |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for key in sorted(set(ours) | set(rmm)):
        a, b = ours.get(key), rmm.get(key)
        cell = lambda r: f"{r['median']:.3g} ({r['min']:.3g}-{r['max']:.3g})" if r else "-"
        ratio = ""
        if a and b and b["median"]:
            ratio = f"{a['median'] / b['median']:.2f}"
            if a["min"] <= b["max"] and b["min"] <= a["max"]:
                ratio += " (ranges overlap)"
        unit = (a or b)["unit"]
        print(f"| {key[0]} | {key[1]} | {unit} | {cell(a)} | {cell(b)} | {ratio} |")


if __name__ == "__main__":
    main()
