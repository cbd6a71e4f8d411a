"""rmm_rs's resources as RMM 26.10 DeviceMemoryResources, without a GPU: constructors with RMM's
arguments, allocation through RMM's own methods and C++ refs, RMM's exception types, our statistics,
tracking and checked frees, and RMM's resources on either side of ours."""

import gc
import os
import pathlib
import re

import pytest

import rmm
import rmm.mr
import rmm_rs

SYSTEM = rmm_rs.SystemMemoryResource


def pool(initial="1 MiB", maximum=None, upstream=None):
    return rmm_rs.PoolMemoryResource(upstream or SYSTEM(), initial_pool_size=initial, maximum_pool_size=maximum)


def fill_and_free(mr, sizes=(1, 256, 1000, 4096, 1 << 16)):
    """Allocates each size through RMM's DeviceMemoryResource.allocate, writes it when it is host
    memory, and frees it: what a user of the resource does."""
    ptrs = [(mr.allocate(n), n) for n in sizes]
    assert all(p != 0 for p, _ in ptrs)
    assert len({p for p, _ in ptrs}) == len(ptrs)
    if rmm_rs.is_host_mode():
        import ctypes

        for p, n in ptrs:
            ctypes.memset(p, 0x5A, n)
    for p, n in ptrs:
        mr.deallocate(p, n)


# ---- The classes are RMM's ---------------------------------------------------------------------

ALL_CLASSES = [name for name in rmm_rs.__all__ if name[0].isupper() and not name.startswith("Base")]


@pytest.mark.parametrize("name", ALL_CLASSES)
def test_every_class_is_an_rmm_device_memory_resource(name):
    cls = getattr(rmm_rs, name)
    assert issubclass(cls, rmm.mr.DeviceMemoryResource)
    if issubclass(cls, rmm_rs.BaseResourceAdaptor):
        assert issubclass(cls, rmm.mr.UpstreamResourceAdaptor)


def test_names_do_not_collide_with_rmm():
    assert rmm_rs.__name__ == "rmm_rs" and rmm.__name__ == "rmm"
    assert rmm_rs.PoolMemoryResource is not rmm.mr.PoolMemoryResource
    assert pathlib.Path(rmm_rs.get_library_dir(), "librmm_rs.so").is_file()
    assert pathlib.Path(rmm_rs.get_include(), "rmm_rs", "resource.hpp").is_file()
    assert not pathlib.Path(rmm_rs.get_include(), "rmm").exists(), "only RMM's <rmm/...> headers may exist"


def test_both_native_libraries_are_loaded_once_under_their_own_names():
    maps = pathlib.Path("/proc/self/maps").read_text()
    libs = {os.path.basename(line.split()[-1]) for line in maps.splitlines() if ".so" in line}
    assert "librmm.so" in libs  # RMM's, loaded by `import rmm`
    assert "librmm_rs.so" in libs  # ours, linked by rmm_rs._resources
    paths = {line.split()[-1] for line in maps.splitlines() if line.endswith("/librmm_rs.so")}
    assert len(paths) == 1, f"one engine per process: {paths}"


def test_version_is_the_workspace_version():
    cargo = pathlib.Path(__file__).resolve().parents[2] / "Cargo.toml"
    if not cargo.is_file():
        pytest.skip("not run from the repository (no Cargo.toml two levels up)")
    version = re.search(r'^version = "([^"]+)"', cargo.read_text(), re.M).group(1)
    assert rmm_rs.__version__ == version


# ---- Allocation through RMM's methods and RMM's C++ ref (get_mr) -----------------------------------


def test_pool_allocates_through_rmms_allocate_and_deallocate():
    mr = pool()
    fill_and_free(mr)
    assert mr.pool_size() >= 1 << 20


@pytest.mark.parametrize(
    "make",
    [
        lambda up: rmm_rs.PoolMemoryResource(up, 1 << 20),
        lambda up: rmm_rs.ArenaMemoryResource(up, arena_size=8 << 20),
        lambda up: rmm_rs.FixedSizeMemoryResource(up, block_size=1 << 16, blocks_to_preallocate=4),
        lambda up: rmm_rs.BinningMemoryResource(up, 8, 14),
        lambda up: rmm_rs.LimitingResourceAdaptor(up, 1 << 30),
        lambda up: rmm_rs.StatisticsResourceAdaptor(up),
        lambda up: rmm_rs.TrackingResourceAdaptor(up),
        lambda up: rmm_rs.PrefetchResourceAdaptor(up),
        lambda up: rmm_rs.AlignedResourceAdaptor(up, 4096, 0),
        lambda up: rmm_rs.ThreadSafeResourceAdaptor(up),
        lambda up: rmm_rs.FailureCallbackResourceAdaptor(up, lambda n: False),
    ],
    ids=["pool", "arena", "fixed_size", "binning", "limiting", "statistics", "tracking", "prefetch", "aligned",
         "thread_safe", "failure_callback"],
)
def test_every_sub_allocator_and_adaptor_serves_allocations_over_system_memory(make):
    up = SYSTEM()
    mr = make(up)
    assert mr.upstream_mr is up and mr.get_upstream() is up
    sizes = (1, 256, 1000, 4096, 1 << 16)
    fill_and_free(mr, sizes)


def test_aligned_adaptor_aligns():
    mr = rmm_rs.AlignedResourceAdaptor(SYSTEM(), alignment=4096, alignment_threshold=0)
    p = mr.allocate(100)
    assert p % 4096 == 0
    mr.deallocate(p, 100)


def test_simulated_memory_resource_hands_out_addresses_without_memory():
    sim = rmm_rs.SimulatedMemoryResource(1 << 40)
    big = rmm_rs.PoolMemoryResource(sim, initial_pool_size=1 << 38)
    p = big.allocate(1 << 37)
    assert p != 0
    big.deallocate(p, 1 << 37)


def test_rmm_device_buffer_allocates_from_our_pool_without_a_gpu():
    stats = rmm_rs.StatisticsResourceAdaptor(pool())
    buf = rmm.DeviceBuffer(size=1000, mr=stats)
    assert buf.size == 1000 and buf.ptr != 0
    assert stats.allocation_counts.current_bytes == 1000
    del buf
    assert stats.allocation_counts.current_bytes == 0
    assert stats.allocation_counts.total_count == 1


def test_callback_memory_resource_calls_python_with_rmms_stream():
    base = SYSTEM()
    calls = []

    def allocate(nbytes, stream):
        calls.append(("allocate", nbytes, type(stream).__name__))
        return base.allocate(nbytes, stream)

    def deallocate(ptr, nbytes, stream):
        calls.append(("deallocate", nbytes, type(stream).__name__))
        base.deallocate(ptr, nbytes, stream)

    mr = rmm_rs.CallbackMemoryResource(allocate, deallocate)
    p = mr.allocate(300)
    mr.deallocate(p, 300)
    assert calls == [("allocate", 300, "Stream"), ("deallocate", 300, "Stream")]


def test_callback_errors_are_rmms_exception_types():
    def oom(nbytes, stream):
        raise MemoryError("no memory for you")

    def broken(nbytes, stream):
        raise KeyError("bug")

    with pytest.raises(MemoryError, match="no memory for you"):
        rmm_rs.CallbackMemoryResource(oom, lambda *a: None).allocate(10)
    with pytest.raises(RuntimeError, match="KeyError"):
        rmm_rs.CallbackMemoryResource(broken, lambda *a: None).allocate(10)


# ---- RMM's exception types ---------------------------------------------------------------------


def test_out_of_memory_is_memory_error():
    mr = pool(initial=1 << 20, maximum=1 << 20)
    with pytest.raises(MemoryError, match="out of memory"):
        mr.allocate(1 << 24)
    limited = rmm_rs.LimitingResourceAdaptor(SYSTEM(), 1000)
    with pytest.raises(MemoryError):
        limited.allocate(2000)
    assert limited.get_allocation_limit() == 1000
    assert limited.get_allocated_bytes() == 0


@pytest.mark.skipif(not rmm_rs.is_host_mode(), reason="host mode only: CUDA resources fail without a driver")
def test_cuda_resources_without_a_driver_fail_as_rmm_does():
    for cls in (rmm_rs.CudaMemoryResource, rmm_rs.ManagedMemoryResource, rmm_rs.PinnedHostMemoryResource):
        with pytest.raises(MemoryError):  # RMM: RMM_CUDA_TRY_ALLOC -> rmm::bad_alloc
            cls().allocate(256)
    with pytest.raises(RuntimeError):  # RMM: a cuda_error from the constructor
        rmm_rs.CudaAsyncMemoryResource()


def test_bad_constructor_arguments_raise_runtime_error_as_rmm_expects_does():
    with pytest.raises(RuntimeError):
        rmm_rs.PoolMemoryResource(SYSTEM(), initial_pool_size=1 << 21, maximum_pool_size=1 << 20)
    with pytest.raises(RuntimeError):
        rmm_rs.PoolMemoryResource(SYSTEM(), initial_pool_size=1000)  # not a multiple of 256
    with pytest.raises(ValueError):
        rmm_rs.PoolMemoryResource(SYSTEM(), initial_pool_size="lots")  # RMM's parse_bytes
    with pytest.raises(Exception, match="must not be None"):  # RMM's UpstreamResourceAdaptor says so
        rmm_rs.PoolMemoryResource(None)
    with pytest.raises(ValueError):
        rmm_rs.CudaAsyncMemoryResource(enable_ipc=True, enable_fabric=True)


def test_sizes_may_be_strings_as_in_rmm():
    mr = rmm_rs.PoolMemoryResource(SYSTEM(), initial_pool_size="2 MiB", maximum_pool_size="4MiB")
    assert mr.pool_size() == 2 << 20


# ---- Checked frees, statistics, tracking, logging ---------------------------------------------


@pytest.mark.parametrize(
    "make",
    [pool, lambda: rmm_rs.ArenaMemoryResource(SYSTEM(), 8 << 20), lambda: rmm_rs.TrackingResourceAdaptor(SYSTEM())],
    ids=["pool", "arena", "tracking"],
)
def test_a_free_the_resource_refuses_is_value_error_and_harms_nothing(make):
    mr = make()
    p = mr.allocate(1024)
    with pytest.raises(ValueError):
        mr.deallocate(p + 8, 1024)  # a pointer into the allocation
    mr.deallocate(p, 1024)
    with pytest.raises(ValueError):
        mr.deallocate(p, 1024)  # twice
    fill_and_free(mr)


def test_statistics_count_frames_as_rmm_does():
    stats = rmm_rs.StatisticsResourceAdaptor(pool())
    a = stats.allocate(1000)
    before = stats.push_counters()
    assert (before.current_bytes, before.current_count) == (1000, 1)
    b = stats.allocate(3000)
    counts = stats.allocation_counts
    assert isinstance(counts, rmm.statistics.Statistics)
    assert (counts.current_bytes, counts.current_count, counts.peak_bytes) == (3000, 1, 3000)
    stats.deallocate(b, 3000)
    popped = stats.pop_counters()
    assert (popped.current_bytes, popped.total_bytes) == (0, 3000)
    merged = stats.allocation_counts
    assert (merged.current_bytes, merged.peak_bytes, merged.total_bytes, merged.total_count) == (1000, 4000, 4000, 2)
    stats.deallocate(a, 1000)
    with pytest.raises(IndexError):
        stats.pop_counters()


def test_tracking_reports_outstanding_allocations():
    tracking = rmm_rs.TrackingResourceAdaptor(SYSTEM(), capture_stacks=True)
    p = tracking.allocate(777)
    assert tracking.get_allocated_bytes() == 777
    text = tracking.get_outstanding_allocations_str()
    assert f"{p:#x}".lower() in text.lower() and "777" in text
    tracking.log_outstanding_allocations()  # to RMM's debug log; must not raise
    tracking.deallocate(p, 777)
    assert tracking.get_allocated_bytes() == 0
    assert tracking.get_outstanding_allocations_str() == ""


def test_logging_adaptor_writes_rmms_csv_to_the_device_suffixed_file(tmp_path):
    log = rmm_rs.LoggingResourceAdaptor(SYSTEM(), log_file_name=str(tmp_path / "log.csv"))
    assert log.get_file_name() == str(tmp_path / "log.dev0.csv")
    p = log.allocate(512)
    log.deallocate(p, 512)
    log.flush()
    lines = pathlib.Path(log.get_file_name()).read_text().splitlines()
    assert lines[0] == "Thread,Time,Action,Pointer,Size,Stream"
    assert [line.split(",")[2] for line in lines[1:]] == ["allocate", "free"]


def test_logging_adaptor_needs_a_file_name(monkeypatch):
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError, match="RMM_LOG_FILE"):
        rmm_rs.LoggingResourceAdaptor(SYSTEM())


def test_failure_callback_retries_while_it_returns_true():
    limited = rmm_rs.LimitingResourceAdaptor(SYSTEM(), 4096)
    held = limited.allocate(4096)
    seen = []

    def free_and_retry(nbytes):
        seen.append(nbytes)
        if len(seen) == 1:
            limited.deallocate(held, 4096)
            return True
        return False

    mr = rmm_rs.FailureCallbackResourceAdaptor(limited, free_and_retry)
    assert mr.callback is free_and_retry
    p = mr.allocate(2048)
    assert seen == [2048]
    with pytest.raises(MemoryError):
        mr.allocate(4096)
    assert seen == [2048, 4096]
    mr.deallocate(p, 2048)


def test_binning_add_bin_keeps_the_bin_resources():
    up = SYSTEM()
    binning = rmm_rs.BinningMemoryResource(up)
    fixed = rmm_rs.FixedSizeMemoryResource(up, block_size=1024, blocks_to_preallocate=2)
    binning.add_bin(1024, fixed)
    binning.add_bin(1 << 16)
    assert binning.bin_mrs == [fixed]
    fill_and_free(binning, (10, 1000, 5000, 1 << 20))


# ---- RMM's resources on either side of ours ----------------------------------------------------


def test_rmm_adaptors_over_our_pool():
    ours = pool()
    rmm_stats = rmm.mr.StatisticsResourceAdaptor(ours)
    rmm_limit = rmm.mr.LimitingResourceAdaptor(rmm_stats, 1 << 20)
    p = rmm_limit.allocate(5000)
    assert rmm_stats.allocation_counts.current_bytes == 5000
    assert rmm_limit.get_allocated_bytes() == 5120  # RMM counts the size rounded up to 256
    rmm_limit.deallocate(p, 5000)
    assert rmm_stats.allocation_counts.current_count == 0


def test_an_rmm_resource_as_the_upstream_of_ours():
    # RMM's statistics adaptor (host code) over our system memory, under our tracking and
    # statistics adaptors: stream-ordered calls through RMM's C++ ref in both directions. (Under our
    # pool it needs a GPU: the pool grows with allocate_sync, which RMM's resources synchronize;
    # tests/test_gpu.py.)
    rmm_stats = rmm.mr.StatisticsResourceAdaptor(SYSTEM())
    ours = rmm_rs.StatisticsResourceAdaptor(rmm_rs.TrackingResourceAdaptor(rmm_stats))
    p = ours.allocate(3000)
    assert ours.allocation_counts.current_bytes == 3000
    assert rmm_stats.allocation_counts.current_bytes == 3000
    ours.deallocate(p, 3000)
    assert rmm_stats.allocation_counts.current_count == 0
    assert rmm_stats.allocation_counts.total_count == 1


def test_our_resources_chain_without_a_cpp_hop():
    # An upstream of ours is passed as our own handle: its name is its own, not a foreign wrapper.
    inner = pool()
    outer = rmm_rs.StatisticsResourceAdaptor(inner)
    assert outer.upstream_mr is inner
    assert rmm_rs._resources._upstream_is_foreign(outer) is False
    over_rmm = rmm_rs.StatisticsResourceAdaptor(rmm.mr.StatisticsResourceAdaptor(SYSTEM()))
    assert rmm_rs._resources._upstream_is_foreign(over_rmm) is True


def test_an_rmm_upstream_lives_as_long_as_our_resource_needs_it():
    released = []

    class Watched(rmm.mr.StatisticsResourceAdaptor):
        def __del__(self):
            released.append(True)

    ours = rmm_rs.TrackingResourceAdaptor(Watched(SYSTEM()))
    p = ours.allocate(100)
    gc.collect()
    assert released == []
    ours.deallocate(p, 100)
    del ours, p
    gc.collect()
    assert released == [True]


def test_the_last_release_of_an_rmm_upstream_may_happen_on_another_thread():
    # Our engine may drop its reference to an RMM upstream on any thread (here one that does not
    # hold the GIL while it releases): the Python object is released under the GIL, no deadlock.
    import threading

    released = []

    class Watched(rmm.mr.StatisticsResourceAdaptor):
        def __del__(self):
            released.append(threading.current_thread().name)

    ours = rmm_rs.StatisticsResourceAdaptor(Watched(SYSTEM()))
    handle = rmm_rs._resources._retain_handle(ours)
    del ours
    gc.collect()
    assert released == []
    worker = threading.Thread(target=rmm_rs._resources._release_handle_without_gil, args=(handle,), name="releaser")
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert released == ["releaser"]
