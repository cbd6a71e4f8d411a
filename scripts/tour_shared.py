"""The tour's shared stop: C++, Rust and Python allocate from ONE current device resource, in one process.

    python3 scripts/tour_shared.py LIBRMM_SO CPP_TOUR_SO RUST_TOUR_SO [CPP_BUFFERS_SO]   (scripts/tour.sh runs it)

librmm_rs.so (the C ABI, owner of the process's one registry) is loaded first; every other copy of the
rmm core in the process (the Rust library's, Python's rmm._rmm) finds it at its first registry use and
routes there. Then: C++ sets a pool under a statistics adaptor as the current device resource; Rust,
C++ and Python allocate from "the current device resource"; C++ and Python print the same counters;
everything is freed (counters back to 0 bytes). Then a buffer crosses languages (CPP_BUFFERS_SO,
built when the Python headers are there): a std::unique_ptr<rmm::device_buffer> made in C++ becomes a
Python rmm.DeviceBuffer with no copy, and goes back to C++, which frees it, the counters of both
languages agreeing at every step. Finally C++ restores the previous resource. Exits non-zero on any
failure.
"""

import ctypes
import gc
import sys


def as_float_matrix(buf):
    """The buffer through DLPack as a float32 128 x 128 matrix of the installed array library, with
    m[i][j] = 128 i + j, and whether it shares the buffer's memory; None when no library fits."""
    import rmm

    if rmm.is_host_mode():
        try:
            import numpy as np
        except ImportError:
            return None
        a = np.from_dlpack(buf)
        same = a.ctypes.data == buf.ptr
        m = a.view(np.float32).reshape(128, 128)
        m[...] = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
        return "numpy.from_dlpack", a, m, same
    try:
        import torch

        t = torch.from_dlpack(buf)
        m = t.view(torch.float32).reshape(128, 128)
        m.copy_(torch.arange(128 * 128, dtype=torch.float32, device=t.device).reshape(128, 128))
        torch.cuda.synchronize()
        return "torch.from_dlpack", t, m, t.data_ptr() == buf.ptr
    except ImportError:
        pass
    try:
        import cupy

        a = cupy.from_dlpack(buf)
        m = a.view(cupy.float32).reshape(128, 128)
        m[...] = cupy.arange(128 * 128, dtype=cupy.float32).reshape(128, 128)
        cupy.cuda.runtime.deviceSynchronize()
        return "cupy.from_dlpack", a, m, a.data.ptr == buf.ptr
    except ImportError:
        return None


def dlpack_and_views(buf, cpp_lib, rust):
    """The C++-made buffer as an array through DLPack (no copy), a strided view of it read from C and
    Rust; True when it wrote the buffer (False: skipped, no array library)."""
    import rmm

    made = as_float_matrix(buf)
    if made is None:
        print("  DLPack: skipped (no array library: NumPy in host mode, PyTorch or CuPy on a GPU)")
        return False
    how, array, m, same = made
    print(f"  [Python] {how}(DeviceBuffer) -> {type(array).__module__}.{type(array).__name__} at the same "
          f"address: {same}; filled as a float32 128 x 128 matrix, m[i][j] = 128 i + j")
    if not same:
        raise SystemExit("DLPack copied the buffer")
    sub = m[1::2, ::3]  # every other row from 1, every third column: not contiguous
    view = rmm.StridedMemoryView.from_object(sub)
    print(f"  [Python] StridedMemoryView(m[1::2, ::3]): shape {view.shape}, strides {view.strides} items, "
          f"format {view.format!r}, c_view_address {view.c_view_address:#x}")
    expected = float(128 * 3 + 3)  # sub[1][1] = m[3][3]
    from_c, from_rust = ctypes.c_float(), ctypes.c_float()
    cpp_lib.rmm_tour_cpp_read_view.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
    rust.rmm_tour_rust_read_view.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
    if cpp_lib.rmm_tour_cpp_read_view(view.c_view_address, ctypes.byref(from_c)) != 0:
        raise SystemExit("C could not read the view")
    if rust.rmm_tour_rust_read_view(view.c_view_address, ctypes.byref(from_rust)) != 0:
        raise SystemExit("Rust could not read the view")
    if (from_c.value, from_rust.value) != (expected, expected):
        raise SystemExit(f"C read {from_c.value}, Rust read {from_rust.value}, expected {expected}")
    print(f"  C and Rust read element [1][1] = {expected:g} from the struct Python acquired, with no Python call")
    view.release()
    del view, sub, m, array
    return True


def buffers_stop(buffers_path, mr, cpp_counters, rust):
    """A buffer made in C++ becomes a Python rmm.DeviceBuffer (no copy) and goes back to C++."""
    print("\nA buffer crosses languages with no copy (C++ -> Python -> DLPack, views read from C and Rust -> C++):")
    if buffers_path is None:
        print("  skipped: the Python headers were not found, so the C++ buffer library was not built")
        return
    lib = ctypes.PyDLL(buffers_path)  # PyDLL: the GIL stays held, as <rmm/python.hpp> needs
    lib.rmm_tour_cpp_buffer_to_python.restype = ctypes.py_object
    lib.rmm_tour_cpp_buffer_to_python.argtypes = [ctypes.c_size_t, ctypes.c_int]
    lib.rmm_tour_cpp_buffer_from_python.restype = ctypes.py_object
    lib.rmm_tour_cpp_buffer_from_python.argtypes = [ctypes.py_object]
    import rmm

    before = cpp_counters()
    buf = lib.rmm_tour_cpp_buffer_to_python(1 << 16, 7)
    if type(buf) is not rmm.DeviceBuffer:
        raise SystemExit(f"C++ did not hand over an rmm.DeviceBuffer but {type(buf)}")
    ptr = buf.ptr
    print(f"  [Python] got {buf!r}; Python is its only owner (sys.getrefcount - 1 = {sys.getrefcount(buf) - 1})")
    if buf.tobytes()[:4] != bytes([7] * 4):
        raise SystemExit("the Python buffer does not hold what C++ wrote")
    counts = mr.allocation_counts
    live = cpp_counters()
    if (counts.current_bytes, live[0], live[5] - before[5]) != (1 << 16, 1 << 16, 1):
        raise SystemExit(f"the counters do not show one 64 KiB allocation: Python {counts}, C++ {live}")
    print(f"  [Python] allocation_counts: {counts.current_count} live ({counts.current_bytes} bytes); "
          "C++ reads the same")
    wrote = dlpack_and_views(buf, lib, rust)
    first_byte = 0 if wrote else 7  # m[0][0] = 0.0 once the array library filled the matrix
    gc.collect()
    if (mr.allocation_counts.current_count, cpp_counters()[3]) != (1, 1):
        raise SystemExit("the array and view libraries should not have allocated from our resource")
    address, size, first = lib.rmm_tour_cpp_buffer_from_python(buf)
    if (address, size, first, buf.size) != (ptr, 1 << 16, first_byte, 0):
        raise SystemExit(f"the buffer did not move back to C++ unchanged: {(address, size, first)}, {buf!r}")
    print(f"  [Python] the DeviceBuffer is empty now ({buf!r}); C++ got the same memory back ({address:#x})")
    counts = mr.allocation_counts
    if (counts.current_bytes, cpp_counters()[0], counts.total_count - before[5]) != (0, 0, 1):
        raise SystemExit(f"the buffer was not freed exactly once: {counts}")
    print(f"  freed once, by C++, through the resource that made it: {counts.current_bytes} bytes live, "
          f"{counts.total_count - before[5]} allocation for the whole trip")


def main(librmm_path, cpp_path, rust_path, buffers_path=None):
    # First: librmm, so that it owns the registry that everything loaded after it shares.
    librmm = ctypes.CDLL(librmm_path)
    cpp = ctypes.CDLL(cpp_path)
    rust = ctypes.CDLL(rust_path)
    cpp.rmm_tour_cpp_print_statistics.argtypes = [ctypes.c_char_p]
    cpp.rmm_tour_cpp_statistics.argtypes = [ctypes.POINTER(ctypes.c_int64)]

    if librmm.rmm_is_host_mode():
        print("No CUDA GPU found: C++, Rust and Python share host memory.")
    print(f"one process: {librmm_path} loaded first (the registry owner), then the C++ and Rust parts")

    def call(part, fn, *args):
        if fn(*args) != 0:
            raise SystemExit(f"the {part} part failed (see above)")

    def cpp_counters():
        out = (ctypes.c_int64 * 6)()
        call("C++", cpp.rmm_tour_cpp_statistics, out)
        return tuple(out)

    print("\nC++ sets the current device resource:")
    call("C++", cpp.rmm_tour_cpp_setup)

    print("\nRust allocates from the current device resource:")
    call("Rust", rust.rmm_tour_rust_allocate)

    print("\nC++ allocates from the current device resource:")
    call("C++", cpp.rmm_tour_cpp_allocate)

    print("\nPython allocates from the current device resource:")
    import rmm
    import rmm.mr

    mr = rmm.mr.get_current_device_resource()
    print(f"  [Python] rmm.mr.get_current_device_resource() -> {type(mr).__name__} ({mr.name})")
    if not isinstance(mr, rmm.mr.StatisticsResourceAdaptor):
        raise SystemExit("Python does not see the statistics adaptor that C++ set")
    sizes = [4096, 1 << 20]
    ptrs = [mr.allocate(n) for n in sizes]
    for n, p in zip(sizes, ptrs):
        print(f"  [Python] mr.allocate({n}) -> {p:#x}")

    print("\nThe statistics count the allocations of all three languages (2 Rust + 3 C++ + 2 Python):")
    call("C++", cpp.rmm_tour_cpp_print_statistics, b"with every part's memory live")
    counts = mr.allocation_counts
    print(f"  [Python] allocation_counts: {counts}")
    live = cpp_counters()
    python_view = (counts.current_bytes, counts.peak_bytes, counts.total_bytes,
                   counts.current_count, counts.peak_count, counts.total_count)
    if python_view != live:
        raise SystemExit(f"C++ and Python disagree: {live} vs {python_view}")
    if counts.current_count != 7:
        raise SystemExit(f"expected 7 live allocations (2 Rust, 3 C++, 2 Python), got {counts.current_count}")
    print("  C++ and Python read the same counters: 7 live allocations from 3 languages")

    print("\nEveryone frees:")
    for n, p in zip(sizes, ptrs):
        mr.deallocate(p, n)
    print(f"  [Python] freed {len(ptrs)} allocations ({sum(sizes)} bytes)")
    call("Rust", rust.rmm_tour_rust_free)
    call("C++", cpp.rmm_tour_cpp_free)
    call("C++", cpp.rmm_tour_cpp_print_statistics, b"after every part freed")
    counts = mr.allocation_counts
    print(f"  [Python] allocation_counts: {counts}")
    if (counts.current_bytes, counts.current_count) != (0, 0) or cpp_counters()[0] != 0:
        raise SystemExit("memory is still counted as live after every part freed")
    print(f"  back to 0 bytes live; peak {counts.peak_bytes} bytes, {counts.total_count} allocations in total")

    buffers_stop(buffers_path, mr, cpp_counters, rust)

    print("\nC++ restores the previous resource:")
    del mr  # Python's reference to the adaptor: C++ drops its own at teardown
    call("C++", cpp.rmm_tour_cpp_teardown)
    restored = rmm.mr.get_current_device_resource()
    print(f"  [Python] rmm.mr.get_current_device_resource() -> {type(restored).__name__} ({restored.name})")
    if isinstance(restored, rmm.mr.StatisticsResourceAdaptor):
        raise SystemExit("the previous resource was not restored")

    engine_table(librmm_path)


def engine_table(librmm_path):
    """Where the engine (rmm-core's resources) is in this process: librmm, whose client Python's
    module and the C++ library are; the Rust library links rmm-core itself (scripts/engine_copies.py)."""
    import pathlib

    import engine_copies
    import rmm

    print("\nWhere rmm-core is (symbols each loaded object defines):")
    native = pathlib.Path(rmm._rmm._librmm_path()).resolve()
    if native != pathlib.Path(librmm_path).resolve():
        raise SystemExit(f"Python runs with {native}, not the librmm loaded first ({librmm_path})")
    for path in engine_copies.loaded_objects():
        c = engine_copies.count(path)
        if c["core"] or "rmm" in pathlib.Path(path).name:
            stripped = " (stripped)" if c["stripped"] else ""
            print(f"  {c['engine']:>4} of the engine (pool Core: {c['pool_core']:>2}), {c['core']:>4} of rmm-core: {path}{stripped}")
    python_module = pathlib.Path(rmm._rmm.__file__).resolve()
    if engine_copies.count(str(python_module))["engine"]:
        raise SystemExit(f"{python_module} carries its own engine")
    print("  Python and C++ use librmm's engine; the Rust library links rmm-core itself, and routes to librmm")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__.strip().splitlines()[2])
    main(*sys.argv[1:])
