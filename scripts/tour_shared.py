"""The tour's shared stop: C++, Rust and Python allocate from ONE current device resource, in one process.

    python3 scripts/tour_shared.py LIBRMM_SO CPP_TOUR_SO RUST_TOUR_SO [CPP_BUFFERS_SO]   (scripts/tour.sh runs it)

librmm.so (the C ABI, owner of the process's one registry) is loaded first; every other copy of the
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
import sys


def buffers_stop(buffers_path, mr, cpp_counters):
    """A buffer made in C++ becomes a Python rmm.DeviceBuffer (no copy) and goes back to C++."""
    print("\nA buffer crosses languages with no copy (C++ -> Python -> C++):")
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
    address, size, first = lib.rmm_tour_cpp_buffer_from_python(buf)
    if (address, size, first, buf.size) != (ptr, 1 << 16, 7, 0):
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

    buffers_stop(buffers_path, mr, cpp_counters)

    print("\nC++ restores the previous resource:")
    del mr  # Python's reference to the adaptor: C++ drops its own at teardown
    call("C++", cpp.rmm_tour_cpp_teardown)
    restored = rmm.mr.get_current_device_resource()
    print(f"  [Python] rmm.mr.get_current_device_resource() -> {type(restored).__name__} ({restored.name})")
    if isinstance(restored, rmm.mr.StatisticsResourceAdaptor):
        raise SystemExit("the previous resource was not restored")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__.strip().splitlines()[2])
    main(*sys.argv[1:])
