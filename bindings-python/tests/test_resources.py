"""The resources and adaptors of rmm.mr as a Python user drives them: constructors and their
argument checking, the adaptors' own methods, errors a user sees. Built over the current resource
(host memory in host mode, CUDA memory on a GPU)."""

import gc

import pytest

import rmm
import rmm.mr

MIB = 1 << 20


@pytest.fixture(autouse=True)
def fresh_resource():
    rmm.reinitialize()
    yield
    rmm.reinitialize()


@pytest.fixture
def upstream():
    return rmm.mr.get_current_device_resource()


def round_trip(mr, nbytes=1000):
    ptr = mr.allocate(nbytes)
    assert ptr != 0 and ptr % 256 == 0
    mr.deallocate(ptr, nbytes)


def test_pool_sizes_and_growth_limit(upstream):
    pool = rmm.mr.PoolMemoryResource(upstream, initial_pool_size="1MiB", maximum_pool_size=4 * MIB)
    assert pool.pool_size() == MIB
    assert pool.upstream_mr is upstream and pool.get_upstream() is upstream
    round_trip(pool, 2 * MIB)
    with pytest.raises(MemoryError):
        pool.allocate(8 * MIB)


@pytest.mark.parametrize("bad", ["2k", "MiB", "kib", "KiB", "1 0 MiB", "1e3kb", "lots"])
def test_pool_size_strings_are_rmms_strict_grammar(upstream, bad):
    with pytest.raises(ValueError, match="Could not parse"):
        rmm.mr.PoolMemoryResource(upstream, initial_pool_size=bad)


def test_pool_arguments_are_checked(upstream):
    with pytest.raises(RuntimeError, match="Initial pool size exceeds the maximum pool size"):
        rmm.mr.PoolMemoryResource(upstream, initial_pool_size=2 * MIB, maximum_pool_size=MIB)
    with pytest.raises(TypeError):
        rmm.mr.PoolMemoryResource(None)
    with pytest.raises(TypeError):
        rmm.mr.PoolMemoryResource(upstream, initial_pool_size=1.5)


def test_arena(upstream):
    arena = rmm.mr.ArenaMemoryResource(upstream, arena_size="4MiB", dump_log_on_failure=False)
    round_trip(arena)
    assert arena.get_upstream() is upstream


def test_fixed_size(upstream):
    fixed = rmm.mr.FixedSizeMemoryResource(upstream, block_size=4096, blocks_to_preallocate=4)
    ptrs = [fixed.allocate(4096) for _ in range(10)]
    assert len(set(ptrs)) == 10
    for ptr in ptrs:
        fixed.deallocate(ptr, 4096)
    with pytest.raises((MemoryError, RuntimeError, ValueError)):
        fixed.allocate(8192)


def test_binning_bins_and_add_bin(upstream):
    binning = rmm.mr.BinningMemoryResource(upstream, min_size_exponent=10, max_size_exponent=12)
    # As in RMM, bin_mrs lists the resources given to add_bin (it keeps them alive), no others.
    assert binning.bin_mrs == []
    pool = rmm.mr.PoolMemoryResource(upstream, initial_pool_size=MIB)
    binning.add_bin(1 << 16, pool)
    binning.add_bin(1 << 14)
    assert binning.bin_mrs == [pool]
    del pool
    gc.collect()
    for nbytes in (100, 1024, 3000, 10000, 60000, 1 << 17):
        round_trip(binning, nbytes)
    empty = rmm.mr.BinningMemoryResource(upstream)
    assert empty.bin_mrs == []
    round_trip(empty)


def test_limiting(upstream):
    limiting = rmm.mr.LimitingResourceAdaptor(upstream, allocation_limit=4096)
    assert limiting.get_allocation_limit() == 4096
    ptr = limiting.allocate(1000)
    assert limiting.get_allocated_bytes() == 1024  # counted at 256-byte granularity
    with pytest.raises(MemoryError):
        limiting.allocate(4096)
    limiting.deallocate(ptr, 1000)
    assert limiting.get_allocated_bytes() == 0


def test_tracking_reports_outstanding_allocations(upstream):
    tracking = rmm.mr.TrackingResourceAdaptor(upstream, capture_stacks=True)
    assert tracking.get_allocated_bytes() == 0
    ptr = tracking.allocate(5000)
    assert tracking.get_allocated_bytes() == 5000
    report = tracking.get_outstanding_allocations_str()
    assert isinstance(report, str) and "5000" in report
    tracking.log_outstanding_allocations()
    tracking.deallocate(ptr, 5000)
    assert tracking.get_allocated_bytes() == 0


def test_callback_resource_calls_python(upstream):
    calls = []

    def allocate(size, stream):
        calls.append(("allocate", size))
        return upstream.allocate(size, stream)

    def deallocate(ptr, size, stream):
        calls.append(("deallocate", size))
        upstream.deallocate(ptr, size, stream)

    mr = rmm.mr.CallbackMemoryResource(allocate, deallocate)
    round_trip(mr, 256)
    assert calls == [("allocate", 256), ("deallocate", 256)]


@pytest.mark.parametrize(
    "raised, seen", [(MemoryError, MemoryError), (RuntimeError, RuntimeError), (Exception, RuntimeError), (KeyError, RuntimeError)]
)
def test_callback_errors_become_memory_or_runtime_errors(raised, seen):
    def allocate(size, stream):
        raise raised("my alloc error")

    mr = rmm.mr.CallbackMemoryResource(allocate, lambda ptr, size, stream: None)
    with pytest.raises(seen, match="my alloc error"):
        mr.allocate(256)


def test_failure_callback_retries_while_it_returns_true():
    attempts, asked = [], []

    def allocate(size, stream):
        attempts.append(size)
        raise MemoryError("full")

    def callback(nbytes):
        asked.append(nbytes)
        return len(asked) < 3

    failing = rmm.mr.CallbackMemoryResource(allocate, lambda ptr, size, stream: None)
    mr = rmm.mr.FailureCallbackResourceAdaptor(failing, callback)
    with pytest.raises(MemoryError):
        mr.allocate(512)
    assert asked == [512, 512, 512]
    assert len(attempts) == 3


def test_failure_callback_errors_reach_the_caller():
    def callback(nbytes):
        raise RuntimeError("MyError")

    def allocate(size, stream):
        raise MemoryError("full")

    failing = rmm.mr.CallbackMemoryResource(allocate, lambda ptr, size, stream: None)
    mr = rmm.mr.FailureCallbackResourceAdaptor(failing, callback)
    with pytest.raises(RuntimeError, match="MyError"):
        mr.allocate(512)


def test_prefetch_adaptor_passes_allocations_through(upstream):
    round_trip(rmm.mr.PrefetchResourceAdaptor(upstream))


def test_adaptors_keep_their_upstream_alive(upstream):
    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.PoolMemoryResource(upstream, initial_pool_size=MIB))
    gc.collect()
    assert isinstance(stats.get_upstream(), rmm.mr.PoolMemoryResource)
    round_trip(stats)


def test_statistics_adaptor_counter_stack(upstream):
    stats = rmm.mr.StatisticsResourceAdaptor(upstream)
    ptr = stats.allocate(100)
    assert stats.allocation_counts == rmm.statistics.Statistics(100, 1, 100, 1, 100, 1)
    assert stats.push_counters().current_bytes == 100
    stats.deallocate(ptr, 100)
    popped = stats.pop_counters()
    assert (popped.current_bytes, popped.current_count) == (-100, -1)
    with pytest.raises(IndexError):
        stats.pop_counters()


def test_set_current_and_per_device(upstream):
    stats = rmm.mr.StatisticsResourceAdaptor(upstream)
    rmm.mr.set_current_device_resource(stats)
    assert rmm.mr.get_current_device_resource() is stats
    assert rmm.mr.get_per_device_resource(0) is stats
    assert rmm.is_initialized()
    with pytest.raises(TypeError):
        rmm.mr.set_current_device_resource(None)
    with pytest.raises(TypeError):
        rmm.mr.set_current_device_resource("pool")


def test_host_mode_refuses_device_only_resources():
    if not rmm.is_host_mode():
        pytest.skip("host mode only")
    with pytest.raises(ValueError):
        rmm.mr.set_current_device_resource(rmm.mr.CudaMemoryResource())
    with pytest.raises(RuntimeError):
        rmm.mr.available_device_memory()


# ---- cycle collection (issue 30): resources and buffers in reference cycles are collected --------


def test_a_cycle_through_a_failure_callback_returns_the_pool_memory():
    import weakref

    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.get_current_device_resource())
    pool = rmm.mr.PoolMemoryResource(stats, initial_pool_size=1 << 20)
    assert stats.allocation_counts.current_bytes >= 1 << 20
    holder = {}

    def on_failure(nbytes):
        return holder.get("retry", False)

    mr = rmm.mr.FailureCallbackResourceAdaptor(pool, on_failure)
    holder["mr"] = mr
    holder["buf"] = rmm.DeviceBuffer(size=1000, mr=mr)  # buffer -> mr -> callback -> holder -> buffer
    alive = weakref.ref(mr)
    del mr, pool, holder, on_failure
    gc.collect()
    assert alive() is None
    assert stats.allocation_counts.current_bytes == 0


def test_a_cycle_through_upstream_mr_and_a_buffer_is_collected():
    import weakref

    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.get_current_device_resource())
    pool = rmm.mr.PoolMemoryResource(stats, initial_pool_size=1 << 20)
    holder = []
    guarded = rmm.mr.FailureCallbackResourceAdaptor(pool, lambda n: bool(holder) and False)
    top = rmm.mr.LimitingResourceAdaptor(guarded, allocation_limit=1 << 30)
    # top -> upstream_mr guarded -> callback -> holder -> top, and holder -> buffer -> top
    holder.extend([top, rmm.DeviceBuffer(size=100, mr=top)])
    alive = weakref.ref(top)
    del pool, guarded, top, holder
    gc.collect()
    assert alive() is None
    assert stats.allocation_counts.current_bytes == 0


def test_a_cycle_through_callback_resource_functions_is_collected():
    import weakref

    base = rmm.mr.get_current_device_resource()
    box = []

    def allocate(nbytes, stream):
        return base.allocate(nbytes, stream)

    def deallocate(ptr, nbytes, stream):
        box  # the functions refer to the resource through the list
        base.deallocate(ptr, nbytes, stream)

    mr = rmm.mr.CallbackMemoryResource(allocate, deallocate)
    box.append(mr)
    alive = weakref.ref(mr)
    del mr, allocate, deallocate, box
    gc.collect()
    assert alive() is None

