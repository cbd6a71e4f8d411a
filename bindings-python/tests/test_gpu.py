"""rmm.mr on a CUDA GPU (skipped with "needs a CUDA GPU" in host mode)."""

import pytest

import rmm
import rmm.mr

pytestmark = pytest.mark.gpu

MIB = 1 << 20


def test_cuda_allocate_one_mib():
    mr = rmm.mr.CudaMemoryResource()
    ptr = mr.allocate(MIB)
    assert ptr != 0 and ptr % 256 == 0
    mr.deallocate(ptr, MIB)


def test_available_device_memory():
    free, total = rmm.mr.available_device_memory()
    assert 0 < free <= total


def test_cuda_out_of_memory_is_memory_error():
    mr = rmm.mr.CudaMemoryResource()
    with pytest.raises(MemoryError):
        mr.allocate(1 << 50)


def test_cupy_reads_and_writes_our_device_memory():
    cupy = pytest.importorskip("cupy")
    mr = rmm.mr.CudaMemoryResource()
    n = MIB
    ptr = mr.allocate(n)
    try:
        mem = cupy.cuda.UnownedMemory(ptr, n, owner=mr)
        arr = cupy.ndarray((n,), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(mem, 0))
        arr[:] = cupy.arange(n, dtype=cupy.uint8)
        cupy.cuda.Device().synchronize()
        expected = cupy.arange(n, dtype=cupy.uint8).get()
        assert (arr.get() == expected).all()
    finally:
        mr.deallocate(ptr, n)


def test_pool_over_cuda_memory():
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size="16 MiB", maximum_pool_size=64 * MIB)
    assert pool.pool_size() == 16 * MIB
    ptrs = [pool.allocate(n) for n in (1, 1000, MIB)]
    assert all(p != 0 and p % 256 == 0 for p in ptrs)
    for p, n in zip(ptrs, (1, 1000, MIB)):
        pool.deallocate(p, n)
    with pytest.raises(MemoryError):
        pool.allocate(128 * MIB)


def test_pool_default_initial_size_is_half_the_free_memory():
    free, _ = rmm.mr.available_device_memory()
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource())
    # Other processes may allocate meanwhile: within 10% of half the free memory, 256-aligned.
    assert pool.pool_size() % 256 == 0
    assert abs(pool.pool_size() - free // 2) <= free // 10


def test_statistics_pool_as_current_device_resource():
    previous = rmm.mr.get_current_device_resource()
    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), 16 * MIB))
    rmm.mr.set_current_device_resource(stats)
    try:
        assert rmm.mr.get_current_device_resource() is stats
        ptr = rmm.mr.get_current_device_resource().allocate(MIB)
        assert stats.allocation_counts.current_bytes == MIB
        stats.deallocate(ptr, MIB)
        assert stats.allocation_counts.current_bytes == 0
    finally:
        rmm.mr.set_current_device_resource(previous)
    assert rmm.mr.get_current_device_resource() is previous
