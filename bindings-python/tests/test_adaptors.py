"""PoolMemoryResource, StatisticsResourceAdaptor and the current device resource, on host memory.

Every test here runs on any machine: over SystemMemoryResource, which is what host mode can use as
the device resource (GPU variants are in test_gpu.py).
"""

import pytest

import rmm
import rmm.mr
from rmm.statistics import Statistics

MIB = 1 << 20

host_only = pytest.mark.skipif(
    not rmm.is_host_mode(), reason="sets host memory as the device resource: host mode only"
)


@pytest.fixture
def system_mr():
    return rmm.mr.SystemMemoryResource()


@pytest.fixture
def restore_current():
    """Puts the current device resource back after the test, whatever the test set."""
    previous = rmm.mr.get_current_device_resource()
    yield previous
    rmm.mr.set_current_device_resource(previous)


def test_class_hierarchy():
    for cls in (rmm.mr.PoolMemoryResource, rmm.mr.StatisticsResourceAdaptor):
        assert issubclass(cls, rmm.mr.UpstreamResourceAdaptor)
        assert issubclass(cls, rmm.mr.DeviceMemoryResource)


def test_pool_sizes_and_upstream(system_mr):
    pool = rmm.mr.PoolMemoryResource(system_mr, initial_pool_size=MIB, maximum_pool_size=4 * MIB)
    assert pool.pool_size() == MIB
    assert pool.upstream_mr is system_mr and pool.get_upstream() is system_mr
    assert pool.name == "pool_memory_resource"
    ptr = pool.allocate(1000)
    assert ptr % 256 == 0
    pool.deallocate(ptr, 1000)


def test_pool_grows_on_demand_up_to_its_maximum(system_mr):
    pool = rmm.mr.PoolMemoryResource(system_mr, 0, 2 * MIB)
    assert pool.pool_size() == 0
    ptr = pool.allocate(MIB)
    assert MIB <= pool.pool_size() <= 2 * MIB
    with pytest.raises(MemoryError):
        pool.allocate(2 * MIB)
    pool.deallocate(ptr, MIB)


def test_pool_default_initial_size_in_host_mode_is_zero(system_mr):
    # RMM's default is half of the free device memory; over host memory the pool starts empty.
    assert rmm.mr.PoolMemoryResource(system_mr).pool_size() == 0


@pytest.mark.parametrize(
    "size, expected",
    [("1MiB", MIB), ("1 mib", MIB), ("512 B", 512), ("256", 256), ("0.5 KiB", 512), (2 * MIB, 2 * MIB)],
)
def test_pool_sizes_may_be_strings(system_mr, size, expected):
    pool = rmm.mr.PoolMemoryResource(system_mr, initial_pool_size=size)
    assert pool.pool_size() == expected


def test_pool_size_strings_that_do_not_parse_are_value_errors(system_mr):
    with pytest.raises(ValueError, match="Could not parse"):
        rmm.mr.PoolMemoryResource(system_mr, initial_pool_size="2k")
    with pytest.raises(ValueError, match="Could not parse"):
        rmm.mr.PoolMemoryResource(system_mr, maximum_pool_size="lots")


def test_pool_initial_above_maximum_is_runtime_error(system_mr):
    with pytest.raises(RuntimeError, match="Initial pool size exceeds the maximum pool size!"):
        rmm.mr.PoolMemoryResource(system_mr, initial_pool_size=2 * MIB, maximum_pool_size=MIB)


def test_pool_size_not_a_multiple_of_256_is_runtime_error(system_mr):
    with pytest.raises(RuntimeError, match="multiple of 256"):
        rmm.mr.PoolMemoryResource(system_mr, initial_pool_size=1000)


def test_pool_needs_a_resource():
    with pytest.raises(TypeError):
        rmm.mr.PoolMemoryResource(None)
    with pytest.raises(TypeError):
        rmm.mr.StatisticsResourceAdaptor("not a resource")


def test_statistics_count_allocations(system_mr):
    stats = rmm.mr.StatisticsResourceAdaptor(system_mr)
    assert stats.upstream_mr is system_mr
    assert stats.allocation_counts == Statistics(0, 0, 0, 0, 0, 0)
    a = stats.allocate(1000)
    b = stats.allocate(24)
    assert stats.allocation_counts == Statistics(
        current_bytes=1024, current_count=2, peak_bytes=1024, peak_count=2, total_bytes=1024, total_count=2
    )
    stats.deallocate(a, 1000)
    stats.deallocate(b, 24)
    counts = stats.allocation_counts
    assert (counts.current_bytes, counts.current_count) == (0, 0)
    assert (counts.peak_bytes, counts.total_count) == (1024, 2)


def test_statistics_failed_allocations_are_not_counted(system_mr):
    stats = rmm.mr.StatisticsResourceAdaptor(system_mr)
    with pytest.raises(MemoryError):
        stats.allocate(1 << 50)
    assert stats.allocation_counts.total_count == 0


def test_statistics_push_and_pop_frames(system_mr):
    stats = rmm.mr.StatisticsResourceAdaptor(system_mr)
    outer = stats.allocate(100)
    before = stats.push_counters()
    assert before.current_bytes == 100 and before.total_count == 1
    assert stats.allocation_counts.current_bytes == 0
    inner = stats.allocate(50)
    stats.deallocate(outer, 100)
    popped = stats.pop_counters()
    # The frame freed memory allocated before it: negative values, as in RMM.
    assert (popped.current_bytes, popped.peak_bytes, popped.total_bytes) == (-50, 50, 50)
    assert (popped.current_count, popped.total_count) == (0, 1)
    after = stats.allocation_counts
    assert (after.current_bytes, after.peak_bytes, after.total_bytes) == (50, 150, 150)
    stats.deallocate(inner, 50)


def test_statistics_pop_of_the_last_frame_is_index_error(system_mr):
    stats = rmm.mr.StatisticsResourceAdaptor(system_mr)
    with pytest.raises(IndexError, match="cannot pop the last counter pair"):
        stats.pop_counters()
    stats.push_counters()
    stats.pop_counters()
    with pytest.raises(IndexError):
        stats.pop_counters()


def test_statistics_over_a_pool(system_mr):
    pool = rmm.mr.PoolMemoryResource(system_mr, MIB)
    stats = rmm.mr.StatisticsResourceAdaptor(pool)
    ptrs = [stats.allocate(n) for n in (256, 4096, 1000)]
    assert stats.allocation_counts.current_count == 3
    for p, n in zip(ptrs, (256, 4096, 1000)):
        stats.deallocate(p, n)
    assert stats.allocation_counts.current_bytes == 0
    assert pool.pool_size() == MIB


def test_initial_current_resource():
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.DeviceMemoryResource)
    if rmm.is_host_mode():
        assert type(mr) is rmm.mr.SystemMemoryResource
    else:
        assert type(mr) is rmm.mr.CudaMemoryResource


@host_only
def test_set_current_returns_the_same_object(restore_current, system_mr):
    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.PoolMemoryResource(system_mr, MIB))
    assert rmm.mr.set_current_device_resource(stats) is None
    assert rmm.mr.get_current_device_resource() is stats
    assert rmm.mr.get_per_device_resource(0) is stats
    ptr = rmm.mr.get_current_device_resource().allocate(512)
    assert stats.allocation_counts.current_bytes == 512
    stats.deallocate(ptr, 512)


@host_only
def test_previous_resource_can_be_restored(restore_current, system_mr):
    previous = restore_current
    rmm.mr.set_current_device_resource(rmm.mr.StatisticsResourceAdaptor(system_mr))
    rmm.mr.set_current_device_resource(previous)
    assert rmm.mr.get_current_device_resource() is previous


@host_only
def test_a_missing_device_is_a_runtime_error_as_cudas_invalid_device_in_rmm(system_mr):
    for device in (1, 99, -7):
        with pytest.raises(RuntimeError, match=f"device {device} does not exist"):
            rmm.mr.set_per_device_resource(device, system_mr)
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            rmm.mr.get_per_device_resource(device)


@host_only
def test_device_only_memory_cannot_be_the_resource_in_host_mode(restore_current):
    before = rmm.mr.get_current_device_resource()
    with pytest.raises(ValueError, match="host mode"):
        rmm.mr.set_current_device_resource(rmm.mr.CudaMemoryResource())
    assert rmm.mr.get_current_device_resource() is before


def test_set_current_needs_a_resource():
    with pytest.raises(TypeError):
        rmm.mr.set_current_device_resource(None)


def test_error_texts_carry_rmms_prefixes(system_mr):
    # cudf-polars and others look for RMM's words ("RMM failure", "out_of_memory") in messages.
    limited = rmm.mr.LimitingResourceAdaptor(system_mr, allocation_limit=100)
    with pytest.raises(MemoryError, match=r"^std::bad_alloc: out_of_memory: RMM failure at: "):
        limited.allocate(1000)
    with pytest.raises(ValueError, match=r"^RMM failure at: "):
        rmm.mr.PoolMemoryResource(system_mr, initial_pool_size="not a size")
