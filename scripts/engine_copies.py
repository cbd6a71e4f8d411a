"""Which loaded objects of this process carry rmm-core, and which carry its engine.

    python3 scripts/engine_copies.py [--check] [LIBRARY...]

Imports `rmm` (which loads the native library, librmm), then loads each LIBRARY with ctypes (say the
C++ tour library, build/tour/cpp/librmm_tour_cpp.so), and reads /proc/self/maps: for every mapped
shared object, `nm --demangle --defined-only` counts the functions and data it defines of rmm-core
(`rmm_core::...`), of the engine (`rmm_core::mr::...`: every resource, the pool's `Core` among
them) and of the pool's `Core` alone. The target: one object carries the engine. `--check` makes the
exit status non-zero when more than one does (or none: the counts need unstripped objects, as cargo
builds them; a stripped one is reported as such).

Also importable: `engine_copies.count(path)` and `engine_copies.loaded_objects()` (the Python
suite's tests/test_one_engine.py uses them).
"""

import argparse
import ctypes
import re
import subprocess
import sys

ENGINE = re.compile(r"^<?rmm_core::mr::")
# Core's own items, and those of its impl blocks in stream_ordered's rooms (allocate, free, growth,
# ...), which demangle as `stream_ordered::<room>::<impl [Trait for ]...::Core>::<name>`.
POOL_CORE = re.compile(
    r"^<?rmm_core::mr::detail::stream_ordered::"
    r"(?:Core\b|\w+::<impl (?:[^<>]* for )?rmm_core::mr::detail::stream_ordered::Core>)"
)
CORE = re.compile(r"^<?rmm_core::")
TINY_FUNCTION_BYTES = 16


def loaded_objects():
    """The shared objects mapped into this process, in load order."""
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and ".so" in parts[5] and parts[5].strip() not in seen:
                seen.append(parts[5].strip())
    return seen


def count(path):
    """{"core": n, "engine": n, "pool_core": n, "stripped": bool} for one object."""
    result = subprocess.run(["nm", "--demangle", "--defined-only", "--print-size", path], capture_output=True, text=True)
    if result.returncode != 0 and "no symbols" in result.stderr:
        return {"core": 0, "engine": 0, "pool_core": 0, "stripped": True}
    counts = {"core": 0, "engine": 0, "pool_core": 0, "stripped": False}
    for line in result.stdout.splitlines():
        # "<address> [<size>] <type> <name>"; the name may contain spaces.
        fields = line.split(" ", 3)
        if len(fields) == 4 and len(fields[2]) == 1:
            size, name = int(fields[1], 16), fields[3]
        else:
            fields = line.split(" ", 2)
            if len(fields) < 3:
                continue
            size, name = None, fields[2]
        counts["core"] += bool(CORE.match(name))
        # A function of a few bytes (`return true`) is folded by the linker with every identical
        # function under one of their names: its name does not say whose code it is.
        if size is not None and size <= TINY_FUNCTION_BYTES:
            continue
        counts["engine"] += bool(ENGINE.match(name))
        counts["pool_core"] += bool(POOL_CORE.match(name))
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="*")
    parser.add_argument("--check", action="store_true", help="exit non-zero unless exactly one object carries the engine")
    args = parser.parse_args()
    import rmm

    for library in args.libraries:
        ctypes.CDLL(library)
    rows = [(path, count(path)) for path in loaded_objects()]
    ours = [(p, c) for p, c in rows if c["core"] or c["stripped"] and ("rmm" in p)]
    print(f"rmm {rmm.__version__}: objects of this process that define rmm-core symbols")
    print(f"{'rmm_core::*':>12} {'engine (mr::*)':>15} {'pool Core':>10}  object")
    for path, c in ours:
        note = "  (stripped: no symbol table)" if c["stripped"] else ""
        print(f"{c['core']:>12} {c['engine']:>15} {c['pool_core']:>10}  {path}{note}")
    engines = [p for p, c in rows if c["engine"]]
    print(f"objects with the engine: {len(engines)}" + (f" ({', '.join(engines)})" if engines else ""))
    return 1 if args.check and len(engines) != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
