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
