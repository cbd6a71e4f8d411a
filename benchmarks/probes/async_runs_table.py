"""Table of RANDOM_ALLOCATIONS_BENCH's cuda_async cells over many runs (scripts/bench-issue27.sh
part `cuda-async`): for each shape (`alone`: -r cuda_async; `program`: after pool, binning and arena
as the full program runs them) and maximum size, each variant's median and range over the runs
(each run a new process, its own median of 3 repetitions), the ratio of the medians, and the range
of the ratio of runs made back to back. A ratio of two single runs means something only where it
lies outside the range one variant shows against itself.

    python3 async_runs_table.py random-allocations.txt
"""

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(
    r"^(?P<variant>\S+) (?P<shape>alone|program) round (?P<round>\d+): "
    r"BM_RandomAllocations/cuda_async_mr/1000/(?P<size>\d+)_median\s+(?P<ms>[\d.]+) ms"
)


def main(path: str) -> None:
    # runs[(shape, size)][variant][round] = ms
    runs: dict = defaultdict(lambda: defaultdict(dict))
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                runs[(m["shape"], int(m["size"]))][m["variant"]][int(m["round"])] = float(m["ms"])
    print("| shape | max MiB | RMM 26.08 median (range), ms | ours median (range), ms "
          "| ratio of medians | ratio per round (min-max) | 26.08 max/min |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (shape, size), by_variant in sorted(runs.items()):
        peer, ours = by_variant.get("rmm-26.08", {}), by_variant.get("ours", {})
        if not peer or not ours:
            continue
        pm, om = statistics.median(peer.values()), statistics.median(ours.values())
        pairs = [ours[r] / peer[r] for r in ours if r in peer]
        print(
            f"| {shape} | {size} | {pm:.2f} ({min(peer.values()):.2f}-{max(peer.values()):.2f}) "
            f"| {om:.2f} ({min(ours.values()):.2f}-{max(ours.values()):.2f}) | {om / pm:.2f} "
            f"| {min(pairs):.2f}-{max(pairs):.2f} "
            f"| {max(peer.values()) / min(peer.values()):.2f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
