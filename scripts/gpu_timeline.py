"""Issue 29's GPU acceptance: one Python process, four libraries, one memory timeline.

    python3 scripts/gpu_timeline.py LIBRMM_SO CPP_TOUR_SO RUST_TOUR_SO OUT_DIR   (scripts/gpu-timeline.sh runs it)

librmm_rs.so is loaded first (the process's registry and recorder), then the tour's C++ and Rust
libraries. The recorder starts (Python frames where the allocating thread holds the GIL or allocates
through rmm; native frames otherwise), and then, all from the current device resource:
  - PyTorch runs a small model on rmm's torch allocator (rmm_torch_allocator);
  - CuPy makes an array on rmm's CuPy allocator;
  - the C++ tour library makes rmm::device_buffers and a device_uvector (native C++ frames);
  - the Rust tour library makes a DeviceBuffer and a DeviceVector<u32> (native Rust frames).
One snapshot must show all four, each with its language's stack; it is written as OUT_DIR/timeline.pickle
(.json, .csv beside it) and read by PyTorch's own readers (torch.cuda._memory_viz: segsum, trace,
trace_plot, and its command line). Then the cost per event: allocate + free pairs with the recorder
off, on (Python frames) and on with native stacks.

Prints one PASS/FAIL line per check and exits non-zero on any failure.
"""

import ctypes
import os
import pickle
import subprocess
import sys
import time

failures = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        failures.append(name)


def blocks(snap):
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                yield seg, b


def frame_names(b):
    return [f["name"] for f in b["frames"]]


def torch_part(torch):
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    x = torch.randn(256, 1024, device="cuda")
    y = model(x)
    torch.cuda.synchronize()
    return model, x, y


def cupy_part(cupy):
    a = cupy.arange(1 << 20, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    return a


def cost_per_event(rmm, n=20000):
    """ns per event (an allocate or a free) of rmm.DeviceBuffer(size=256) pairs, recorder off vs on."""
    def run():
        t = time.perf_counter_ns()
        for _ in range(n):
            rmm.DeviceBuffer(size=256)
        return (time.perf_counter_ns() - t) / (2 * n)

    rmm.timeline.stop()
    run()
    off = min(run() for _ in range(3))
    rmm.timeline.start(max_entries=1000, clear=True)
    py = min(run() for _ in range(3))
    rmm.timeline.start(max_entries=1000, python_stacks=False, native_stacks=True, clear=True)
    native = min(run() for _ in range(3))
    rmm.timeline.start(max_entries=1000, python_stacks=False, native_stacks=False, clear=True)
    bare = min(run() for _ in range(3))
    rmm.timeline.stop()
    return off, bare, py, native


def main(librmm_path, cpp_path, rust_path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    ctypes.CDLL(librmm_path)  # first: the registry and recorder every other copy routes to
    cpp = ctypes.CDLL(cpp_path)
    rust = ctypes.CDLL(rust_path)
    import cupy
    import torch

    import rmm
    import rmm.allocators.cupy
    import rmm.allocators.torch
    import rmm.timeline

    check("GPU present (not host mode)", not rmm.is_host_mode())
    check("rmm_torch_allocator exists", rmm.allocators.torch.rmm_torch_allocator is not None)
    torch.cuda.memory.change_current_allocator(rmm.allocators.torch.rmm_torch_allocator)
    cupy.cuda.set_allocator(rmm.allocators.cupy.rmm_cupy_allocator)

    if cpp.rmm_tour_cpp_setup() != 0:  # a pool under a statistics adaptor: the current resource
        raise SystemExit("the C++ tour setup failed")
    rmm.timeline.start(clear=True, python_stacks=True, native_stacks=True,
                       dump_on_oom=os.path.join(out_dir, "oom.pickle"))
    check("current resource is recorded",
          type(rmm.mr.get_current_device_resource()).__name__ == "RecordingResourceAdaptor")

    kept = [torch_part(torch), cupy_part(cupy)]
    if cpp.rmm_tour_cpp_allocate() != 0:
        raise SystemExit("the C++ tour allocation failed")
    if rust.rmm_tour_rust_allocate() != 0:
        raise SystemExit("the Rust tour allocation failed")

    snap = rmm.timeline.snapshot()
    path = os.path.join(out_dir, "timeline.pickle")
    for name in ("timeline.pickle", "timeline.json", "timeline.csv"):
        rmm.timeline.dump_snapshot(os.path.join(out_dir, name))
    live = list(blocks(snap))
    print(f"snapshot: {len(snap['segments'])} segments, {len(live)} live blocks, "
          f"{sum(len(t) for t in snap['device_traces'])} trace entries", flush=True)

    def find(pred):
        return [b for _, b in live if pred(b)]

    torch_blocks = find(lambda b: "torch_part" in frame_names(b))
    check("PyTorch allocations carry Python frames (torch_part)", len(torch_blocks) >= 3,
          f"{len(torch_blocks)} blocks")
    cupy_blocks = find(lambda b: "cupy_part" in frame_names(b))
    check("the CuPy array carries Python frames (cupy_part)",
          any(b["requested_size"] == 4 << 20 for b in cupy_blocks), f"{len(cupy_blocks)} blocks")
    cpp_blocks = find(lambda b: any("rmm_tour_cpp_allocate" in n for n in frame_names(b)))
    check("the C++ buffers carry native C++ frames (rmm_tour_cpp_allocate)", len(cpp_blocks) >= 3,
          f"{len(cpp_blocks)} blocks; sizes {sorted(b['requested_size'] for b in cpp_blocks)}")
    rust_blocks = find(lambda b: any("rmm_tour_rust_allocate" in n or "tour_shared" in n for n in frame_names(b)))
    check("the Rust DeviceBuffer and DeviceVector carry native Rust frames (rmm_tour_rust_allocate)",
          any(b["requested_size"] == 4000 for b in rust_blocks),
          f"{len(rust_blocks)} blocks; sizes {sorted(b['requested_size'] for b in rust_blocks)}")
    pool_segments = [s for s in snap["segments"] if s["resource"] == "pool_memory_resource"]
    check("the C++ pool's segments hold the blocks", bool(pool_segments) and
          all(sum(b["size"] for b in s["blocks"]) == s["total_size"] for s in pool_segments))
    for b in (torch_blocks[:1] + cupy_blocks[:1] + cpp_blocks[:1] + rust_blocks[:1]):
        print(f"  block {b['requested_size']} B via {b['resource']}: "
              + " <- ".join(f"{f['name']}" for f in b["frames"][:6]))

    from torch.cuda import _memory_viz

    with open(path, "rb") as f:
        loaded = pickle.load(f)
    try:
        summary = _memory_viz.segsum(loaded)
        check("torch.cuda._memory_viz.segsum reads our file", f"segments: {len(loaded['segments'])}" in summary)
        print(summary[:1500])
    except Exception as e:  # noqa: BLE001 (reported as a failure)
        check("torch.cuda._memory_viz.segsum reads our file", False, repr(e))
    try:
        text = _memory_viz.trace(loaded)
        check("torch.cuda._memory_viz.trace reads our file", "entries" in text)
    except Exception as e:  # noqa: BLE001
        check("torch.cuda._memory_viz.trace reads our file", False, repr(e))
    for plot in ("trace_plot", "segment_plot"):
        fn = getattr(_memory_viz, plot, None)
        if fn is None:
            print(f"SKIP  _memory_viz.{plot}: not in this torch")
            continue
        try:
            html = fn(loaded)
            with open(os.path.join(out_dir, f"{plot}.html"), "w") as f:
                f.write(html)
            check(f"torch.cuda._memory_viz.{plot} renders our file", len(html) > 1000)
        except Exception as e:  # noqa: BLE001
            check(f"torch.cuda._memory_viz.{plot} renders our file", False, repr(e))
    cli = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace", path],
                         capture_output=True, text=True)
    check("python -m torch.cuda._memory_viz trace FILE reads our file", cli.returncode == 0,
          cli.stderr.strip().splitlines()[-1] if cli.returncode else "")
    rmm.timeline.stop()

    off, bare, py, native = cost_per_event(rmm)
    print(f"cost per event (rmm.DeviceBuffer(size=256) pairs, ns per allocate or free): "
          f"recorder off {off:.0f}, on without stacks {bare:.0f} (+{bare - off:.0f}), "
          f"on with Python frames {py:.0f} (+{py - off:.0f}), on with native stacks {native:.0f} "
          f"(+{native - off:.0f})", flush=True)

    del kept
    if rust.rmm_tour_rust_free() != 0 or cpp.rmm_tour_cpp_free() != 0:
        check("the tour parts free", False)
    torch.cuda.synchronize()
    print(f"{len(failures)} failed" if failures else "ALL PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    sys.exit(main(*sys.argv[1:]))
