"""What `rmm.DeviceBuffer(size=256)` costs, by who set the current device resource.

    python3 scripts/bench-python-setter.py [--librmm PATH] [--rust-lib PATH] [--calls N] [--rounds R]
                                           [--json OUT] [--check]

One process, four setters of the current device resource, measured in interleaved rounds:
  - python:  rmm.mr.set_current_device_resource(PoolMemoryResource(upstream, 64 MiB));
  - c++:     the same pool made and set through librmm's C entry points (what <rmm/...> calls);
  - rust:    the same pool made by a Rust library with its own rmm-core (bindings-rust/examples/
             bench_setter.rs, `cargo build --release -p rmm --example bench_setter`), set through
             librmm's registry;
  - nobody:  librmm's initial resource (rmm_reset_current_device_resource), compared with the same
             kind of resource set from Python ("python (initial kind)").
The upstream is a CudaMemoryResource with a GPU, a SystemMemoryResource in host mode (as the initial
resource). Each figure is the median over the rounds of the mean time of N create+drop pairs (and
of N `get_current_device_resource()` calls); the fastest round is printed too (on a busy machine
the median moves with the load, the fastest round less). The target: every setter within 10 % of
Python's, by the medians. `--check` makes the exit status non-zero when a setter misses it.

The C++ case calls the native library the module runs with (`rmm._rmm._librmm_path()`); --librmm
(or $RMM_LIBRMM) loads another one (RTLD_GLOBAL) before `import rmm`, which the module then binds to.
"""

import argparse
import ctypes
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MIB = 1 << 20
POOL_BYTES = 64 * MIB
RMM_SIZE_NONE = (1 << 64) - 1


class Handle(ctypes.Structure):
    _fields_ = [("self_", ctypes.c_void_p), ("vtable", ctypes.c_void_p)]


class Error(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("cuda_code", ctypes.c_int32), ("bytes", ctypes.c_uint64),
                ("message", ctypes.c_char * 512)]


class Librmm:
    """The C entry points the c++ and nobody cases need (what the C++ headers call)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        for name in ("rmm_system_memory_resource_new", "rmm_cuda_memory_resource_new"):
            getattr(self.lib, name).argtypes = [ctypes.POINTER(Handle), ctypes.POINTER(Error)]
        self.lib.rmm_pool_memory_resource_new.argtypes = [
            Handle, ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(Handle), ctypes.POINTER(Error)]
        self.lib.rmm_set_current_device_resource.argtypes = [Handle, ctypes.POINTER(Handle), ctypes.POINTER(Error)]
        self.lib.rmm_reset_current_device_resource.argtypes = [ctypes.POINTER(Handle), ctypes.POINTER(Error)]
        self.lib.rmm_resource_release.argtypes = [Handle]
        self.lib.rmm_is_host_mode.restype = ctypes.c_int

    def check(self, status, err, what):
        if status != 0:
            raise RuntimeError(f"{what}: {err.message.decode(errors='replace')}")

    def host_mode(self):
        return bool(self.lib.rmm_is_host_mode())

    def set_pool(self):
        """The c++ case: upstream and pool made and set through the C ABI, as <rmm/...> does."""
        err, upstream, pool = Error(), Handle(), Handle()
        new_upstream = self.lib.rmm_system_memory_resource_new if self.host_mode() else self.lib.rmm_cuda_memory_resource_new
        self.check(new_upstream(ctypes.byref(upstream), ctypes.byref(err)), err, "upstream")
        status = self.lib.rmm_pool_memory_resource_new(upstream, POOL_BYTES, RMM_SIZE_NONE, ctypes.byref(pool), ctypes.byref(err))
        self.lib.rmm_resource_release(upstream)
        self.check(status, err, "rmm_pool_memory_resource_new")
        status = self.lib.rmm_set_current_device_resource(pool, None, ctypes.byref(err))
        self.lib.rmm_resource_release(pool)  # the registry keeps its own reference
        self.check(status, err, "rmm_set_current_device_resource")

    def reset(self):
        err = Error()
        self.check(self.lib.rmm_reset_current_device_resource(None, ctypes.byref(err)), err, "reset")


def mean_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--librmm")
    parser.add_argument("--rust-lib", help="libbench_setter.so (default: the cargo target dir's release/examples)")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json")
    parser.add_argument("--check", action="store_true", help="exit non-zero when a setter is more than 10 %% slower")
    args = parser.parse_args()

    given = args.librmm or os.environ.get("RMM_LIBRMM")
    preloaded = ctypes.CDLL(given, mode=ctypes.RTLD_GLOBAL) if given else None
    import rmm
    import rmm.mr

    librmm = Librmm(given or rmm._rmm._librmm_path())
    del preloaded  # the library stays loaded; Librmm holds its own handle

    host = rmm.is_host_mode()
    upstream = rmm.mr.SystemMemoryResource if host else rmm.mr.CudaMemoryResource
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    rust_path = pathlib.Path(args.rust_lib) if args.rust_lib else target / "release" / "examples" / "libbench_setter.so"
    rust = ctypes.CDLL(str(rust_path)) if rust_path.is_file() else None
    if rust is not None:
        rust.rmm_bench_rust_set_pool.argtypes = [ctypes.c_uint64]

    def set_rust():
        if rust.rmm_bench_rust_set_pool(POOL_BYTES) != 0:
            raise RuntimeError("rmm_bench_rust_set_pool failed")

    # (name, setter, the case it is compared with)
    cases = [
        ("python", lambda: rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(upstream(), initial_pool_size=POOL_BYTES)), None),
        ("c++", librmm.set_pool, "python"),
        ("rust", set_rust if rust else None, "python"),
        ("python (initial kind)", lambda: rmm.mr.set_current_device_resource(upstream()), None),
        ("nobody", librmm.reset, "python (initial kind)"),
    ]
    if rust is None:
        print(f"rust: skipped ({rust_path} not built: cargo build --release -p rmm --example bench_setter)")
    cases = [c for c in cases if c[1] is not None]
    create = {name: [] for name, _, _ in cases}
    get = {name: [] for name, _, _ in cases}
    names = {}
    for _ in range(args.rounds):
        for name, setter, _ in cases:
            setter()
            mr = rmm.mr.get_current_device_resource()
            names[name] = f"{type(mr).__name__} ({mr.name})" if hasattr(mr, "name") else type(mr).__name__
            del mr
            mean_us(lambda: rmm.DeviceBuffer(size=256), min(args.calls, 2000))  # warm-up
            create[name].append(mean_us(lambda: rmm.DeviceBuffer(size=256), args.calls))
            get[name].append(mean_us(rmm.mr.get_current_device_resource, args.calls))
    librmm.reset()

    print(f"rmm {rmm.__version__} from {pathlib.Path(rmm.__file__).parent}, host mode: {host}, "
          f"{args.rounds} rounds x {args.calls} calls")
    print(f"{'set by':<22} {'current resource (Python class)':<52} {'DeviceBuffer(256) us':>21} {'vs':>6} "
          f"{'fastest':>8} {'vs':>6} {'get_current us':>15}")
    rows, missed = [], []
    for name, _, baseline in cases:
        us, get_us, fastest = statistics.median(create[name]), statistics.median(get[name]), min(create[name])
        ratio = us / statistics.median(create[baseline]) if baseline else 1.0
        fastest_ratio = fastest / min(create[baseline]) if baseline else 1.0
        if ratio > 1.10:
            missed.append(name)
        vs, fastest_vs = (f"{ratio:.2f}", f"{fastest_ratio:.2f}") if baseline else ("base", "base")
        print(f"{name:<22} {names[name]:<52} {us:>21.3f} {vs:>6} {fastest:>8.3f} {fastest_vs:>6} {get_us:>15.3f}")
        rows.append({"set_by": name, "resource": names[name], "device_buffer_256_us": round(us, 4),
                     "compared_with": baseline, "ratio": round(ratio, 3), "fastest_us": round(fastest, 4),
                     "fastest_ratio": round(fastest_ratio, 3), "get_current_us": round(get_us, 4),
                     "rounds_us": [round(x, 4) for x in create[name]], "host_mode": host})
    print("target (every setter within 10 % of Python's):", "met" if not missed else f"missed by {', '.join(missed)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
