#!/usr/bin/env python3
"""Poor man's stack dump of a live process, for machines without gdb.

Usage: stackscan.py PID [WORDS]

For each thread: its kernel wait channel, the futex address it waits on (from
/proc/PID/task/TID/syscall, when it is in futex()), the symbol that address falls in (a static
Mutex/Once shows by name), and the candidate return addresses found by scanning WORDS 8-byte
words of its user stack (/proc/PID/mem from the stack pointer): every word that points into an
executable mapping of a file, symbolized with addr2line. A scan is not an unwinder (stale frames
show up too), but the innermost rmm frames above a futex wait name the lock being waited for.
Needs ptrace access to PID (same user or root) and binutils' addr2line.
"""
import collections
import os
import re
import subprocess
import sys

FUTEX_SYSCALL = 202  # x86-64


def mappings(pid):
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            maps.append((lo, hi, parts[1], int(parts[2], 16), path))
    bases = {}
    for lo, _hi, _perms, off, path in maps:
        if path.startswith("/") and path not in bases:
            bases[path] = lo - off
    return maps, bases


def find(maps, addr):
    for lo, hi, perms, off, path in maps:
        if lo <= addr < hi:
            return lo, hi, perms, off, path
    return None


def symbolize(requests):
    """requests: {path: set(vaddr)} -> {(path, vaddr): 'func (file:line)'}"""
    out = {}
    for path, addrs in requests.items():
        addrs = sorted(addrs)
        if not addrs:
            continue
        try:
            r = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", path] + [hex(a) for a in addrs],
                               capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            for a in addrs:
                out[(path, a)] = f"? ({e})"
            continue
        lines = r.stdout.splitlines()
        # -i may print several (func, file) pairs per address: re-run one by one when counts differ.
        if len(lines) != 2 * len(addrs):
            for a in addrs:
                r1 = subprocess.run(["addr2line", "-f", "-C", "-e", path, hex(a)],
                                    capture_output=True, text=True, timeout=30)
                l1 = r1.stdout.splitlines()
                out[(path, a)] = f"{l1[0] if l1 else '?'} ({l1[1] if len(l1) > 1 else '?'})"
        else:
            for i, a in enumerate(addrs):
                out[(path, a)] = f"{lines[2 * i]} ({lines[2 * i + 1]})"
    return out


def data_symbol(path, vaddr):
    try:
        r = subprocess.run(["nm", "-C", "--defined-only", path], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    best = None
    for line in r.stdout.splitlines():
        m = re.match(r"([0-9a-f]+) [bBdDrR] (.*)", line)
        if m:
            a = int(m.group(1), 16)
            if a <= vaddr and (best is None or a > best[0]):
                best = (a, m.group(2))
    return f"{best[1]}+{vaddr - best[0]:#x}" if best and vaddr - best[0] < 4096 else None


def main():
    pid = int(sys.argv[1])
    words = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    maps, bases = mappings(pid)
    threads = []
    mem = open(f"/proc/{pid}/mem", "rb")
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        t = f"/proc/{pid}/task/{tid}"
        comm = open(f"{t}/comm").read().strip()
        wchan = open(f"{t}/wchan").read().strip()
        sc = open(f"{t}/syscall").read().split()
        futex = None
        frames = []
        if sc and sc[0] not in ("running", "-1") and len(sc) >= 9:
            sp = int(sc[-2], 16)
            if int(sc[0]) == FUTEX_SYSCALL:
                futex = int(sc[1], 16)
            try:
                mem.seek(sp)
                raw = mem.read(8 * words)
            except OSError:
                raw = b""
            for i in range(0, len(raw) - 7, 8):
                w = int.from_bytes(raw[i:i + 8], "little")
                m = find(maps, w)
                if m and "x" in m[2] and m[4].startswith("/"):
                    frames.append((m[4], w - bases[m[4]]))
        threads.append((tid, comm, wchan, futex, frames))
    requests = collections.defaultdict(set)
    for *_rest, frames in threads:
        for path, v in frames:
            requests[path].add(v)
    names = symbolize(requests)
    futexes = collections.Counter(f for _t, _c, _w, f, _fr in threads if f)
    print(f"pid {pid}: {len(threads)} threads; futex words waited on: "
          + ", ".join(f"{a:#x} x{n}" for a, n in futexes.most_common()))
    for addr, _n in futexes.most_common():
        m = find(maps, addr)
        if m and m[4].startswith("/"):
            print(f"  {addr:#x} in {m[4]}: {data_symbol(m[4], addr - bases[m[4]]) or '(no data symbol)'}")
        elif m:
            print(f"  {addr:#x} in {m[4] or 'anonymous memory (heap or a thread stack)'}")
    for tid, comm, wchan, futex, frames in threads:
        print(f"\n=== tid {tid} '{comm}' wchan={wchan}" + (f" futex={futex:#x}" if futex else ""))
        shown = 0
        last = None
        for path, v in frames:
            n = names.get((path, v), "?")
            if n.startswith("??") or n == last:
                continue
            last = n
            print(f"  {os.path.basename(path)}+{v:#x} {n}")
            shown += 1
            if shown >= 40:
                break


if __name__ == "__main__":
    main()
