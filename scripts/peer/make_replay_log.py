#!/usr/bin/env python3
"""Writes an allocation log for RMM's replay benchmark (REPLAY_BENCH -f LOG), in the CSV format of
RMM's logging_resource_adaptor (`Thread,Time,Action,Pointer,Size,Stream`, as ours writes it too).

    make_replay_log.py LOG [EVENTS] [THREADS]

A fixed pseudo-random workload (seeded, so both libraries replay the same log): THREADS threads
(default 4) on the default stream take turns in log order; each allocates (sizes log-uniform, 70%
from 256 B to 64 KiB and 30% up to 16 MiB; at most 200 live per thread) or frees one of its own live
allocations at random; everything is freed at the end. EVENTS (default 20000) counts the allocations
and frees before that.
"""
import random
import sys


def main():
    path = sys.argv[1]
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    rng = random.Random(20261123)
    live = [dict() for _ in range(threads)]
    next_ptr = 0x7F0000000000
    rows = ["Thread,Time,Action,Pointer,Size,Stream"]
    tids = [140000000000000 + 4096 * t for t in range(threads)]

    def row(t, action, ptr, size):
        us = len(rows)
        rows.append(f"{tids[t]},{us // 3600000000:02d}:{us // 60000000 % 60:02d}:{us // 1000000 % 60:02d}."
                    f"{us % 1000000:06d},{action},{ptr:#x},{size},0x0")

    for _ in range(events):
        t = rng.randrange(threads)
        if live[t] and (len(live[t]) >= 200 or rng.random() < 0.45):
            ptr = rng.choice(list(live[t]))
            row(t, "free", ptr, live[t].pop(ptr))
        else:
            hi = 16 if rng.random() < 0.7 else 24
            size = int(2 ** rng.uniform(8, hi))
            ptr = next_ptr
            next_ptr += (size + 511) // 256 * 256
            live[t][ptr] = size
            row(t, "allocate", ptr, size)
    for t in range(threads):
        for ptr, size in list(live[t].items()):
            row(t, "free", ptr, size)
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"replay log: {path}: {len(rows) - 1} events on {threads} threads")


if __name__ == "__main__":
    main()
