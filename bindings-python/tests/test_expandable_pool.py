"""rmm.mr.experimental.ExpandablePoolMemoryResource (issue 28): growth in place, trim between live
blocks, out of memory naming mapped and free bytes, the release threshold, DeviceBuffer and the
CuPy/Numba/PyTorch allocators on it, and an export that another process imports. Host mode runs on
host memory standing in for the device; tests marked ``gpu`` skip there."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

import rmm
from rmm.mr.experimental import ExpandablePoolMemoryResource, ImportedAllocation

MiB = 1 << 20


def filled(mr, size, value):
    """A DeviceBuffer of `size` bytes from `mr`, every byte `value`."""
    buf = rmm.DeviceBuffer(size=size, mr=mr)
    buf.copy_from_host(bytes([value]) * size)
    return buf


def read(ptr, size):
    """The `size` bytes at device (host-mode: host) address `ptr`."""
    host = bytearray(size)
    rmm.pylibrmm.device_buffer.copy_ptr_to_host(ptr, host)
    return bytes(host)


def test_it_lives_in_the_experimental_modules_not_among_rmms_names():
    import rmm.pylibrmm.memory_resource.experimental as pexp

    assert pexp.ExpandablePoolMemoryResource is ExpandablePoolMemoryResource
    assert ExpandablePoolMemoryResource.__module__ == "rmm.pylibrmm.memory_resource.experimental"
    assert not hasattr(rmm.mr, "ExpandablePoolMemoryResource")
    assert issubclass(ExpandablePoolMemoryResource, rmm.mr.DeviceMemoryResource)


def test_grows_in_place_and_trim_gives_back_between_live_blocks():
    mr = ExpandablePoolMemoryResource(maximum_size=256 * MiB)
    stats = mr.statistics()
    granule = stats["granularity"]
    assert stats["reserved_bytes"] == 256 * MiB
    assert mr.mapped_bytes() == 0
    ptrs = [mr.allocate(granule) for _ in range(8)]
    assert ptrs[1] == ptrs[0] + granule, "the range grows in place"
    assert mr.mapped_bytes() == 8 * granule
    assert mr.used_bytes() == 8 * granule
    for p in ptrs[1::2]:
        mr.deallocate(p, granule)
    assert mr.statistics()["releasable_bytes"] == 4 * granule
    assert mr.trim() == 4 * granule
    assert mr.mapped_bytes() == 4 * granule, "the live blocks' granules stay"
    for p in ptrs[0::2]:
        mr.deallocate(p, granule)
    mr.trim()
    assert mr.mapped_bytes() == 0
    assert mr.statistics()["granules_released"] == 8


def test_out_of_memory_names_mapped_and_free_bytes():
    mr = ExpandablePoolMemoryResource(maximum_size="8 MiB")
    live = mr.allocate(4 * MiB)
    with pytest.raises(MemoryError, match="mapped") as info:
        mr.allocate(16 * MiB)
    assert "free" in str(info.value) and "expandable_pool_memory_resource" in str(info.value)
    mr.deallocate(live, 4 * MiB)


def test_initial_size_and_release_threshold():
    mr = ExpandablePoolMemoryResource(initial_size=16 * MiB, maximum_size=256 * MiB)
    assert mr.mapped_bytes() >= 16 * MiB
    assert mr.used_bytes() == 0
    assert mr.release_threshold() is None
    mr.set_release_threshold(0)
    assert mr.release_threshold() == 0
    mr.set_release_threshold(None)
    assert mr.release_threshold() is None
    with pytest.raises(OverflowError):  # a size_t argument, as RMM's
        ExpandablePoolMemoryResource(maximum_size=-1)


def test_device_buffer_and_the_registry():
    mr = ExpandablePoolMemoryResource(maximum_size=256 * MiB)
    previous = rmm.mr.get_current_device_resource()
    rmm.mr.set_current_device_resource(mr)
    try:
        assert rmm.mr.get_current_device_resource() is mr
        buf = rmm.DeviceBuffer.to_device(bytes(range(256)) * 4096)
        assert mr.used_bytes() == buf.size, "the buffer came from the pool"
        assert bytes(buf.copy_to_host()) == bytes(range(256)) * 4096
        del buf
        assert mr.used_bytes() == 0
    finally:
        rmm.mr.set_current_device_resource(previous)


def test_a_statistics_adaptor_over_it_counts():
    mr = rmm.mr.StatisticsResourceAdaptor(ExpandablePoolMemoryResource(maximum_size=64 * MiB))
    p = mr.allocate(1000)
    assert mr.allocation_counts.current_bytes == 1000
    mr.deallocate(p, 1000)
    assert isinstance(mr.get_upstream(), ExpandablePoolMemoryResource)


def test_an_export_is_imported_in_this_process_at_other_addresses():
    mr = ExpandablePoolMemoryResource(maximum_size=64 * MiB)
    buf = filled(mr, 3 * MiB + 100, 0x5A)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        mr.export_allocation(buf.ptr, buf.size, ours)
        imported = ImportedAllocation.receive(theirs)
        assert imported.size == buf.size
        assert imported.ptr != buf.ptr
        assert read(imported.ptr, imported.size) == b"\x5a" * imported.size
        imported.close()
        imported.close()
        assert imported.ptr == 0
    ours, theirs = socket.socketpair()
    with ours, theirs, pytest.raises(ValueError):
        mr.export_allocation(buf.ptr + 256, 256, ours.fileno())


CHILD = textwrap.dedent(
    """
    import sys, socket
    import rmm
    from rmm.mr.experimental import ImportedAllocation
    sock = socket.socket(fileno=int(sys.argv[1]))
    imported = ImportedAllocation.receive(sock)
    host = bytearray(imported.size)
    rmm.pylibrmm.device_buffer.copy_ptr_to_host(imported.ptr, host)
    ok = bytes(host) == bytes([0xA5]) * imported.size
    imported.close()
    sock.sendall(b"1" if ok else b"0")
    """
)


def two_process_round_trip():
    mr = ExpandablePoolMemoryResource(maximum_size=256 * MiB)
    before = mr.allocate(4096)  # the shared block does not start a granule
    buf = filled(mr, 3 * MiB + 100, 0xA5)
    ours, theirs = socket.socketpair()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(theirs.fileno())], pass_fds=[theirs.fileno()], env=os.environ
    )
    theirs.close()
    with ours:
        mr.export_allocation(buf.ptr, buf.size, ours)
        answer = ours.recv(1)
    assert child.wait(timeout=120) == 0
    assert answer == b"1", "the other process read other bytes"
    del buf
    mr.deallocate(before, 4096)


def test_another_process_imports_a_sub_allocation_and_reads_its_bytes():
    two_process_round_trip()


@pytest.mark.gpu
def test_on_a_gpu_another_process_imports_device_memory():
    two_process_round_trip()


def test_the_cupy_allocator_on_it():
    cupy = pytest.importorskip("cupy")
    if rmm.is_host_mode():
        pytest.skip("needs a CUDA GPU (CuPy arrays are device memory)")
    from rmm.allocators.cupy import rmm_cupy_allocator

    mr = ExpandablePoolMemoryResource()
    rmm.mr.set_current_device_resource(mr)
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        a = cupy.arange(1 << 20, dtype=cupy.float32)
        assert mr.used_bytes() >= a.nbytes
        assert float(a.sum()) == float((1 << 20) * ((1 << 20) - 1) / 2)
        del a
    finally:
        cupy.cuda.set_allocator()
        rmm.mr.set_current_device_resource(rmm.mr.CudaMemoryResource())


def run_python(code):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.gpu
def test_the_numba_memory_manager_on_it():
    pytest.importorskip("numba.cuda")
    out = run_python(
        """
        import numpy as np
        from numba import cuda
        import rmm
        from rmm.allocators.numba import RMMNumbaManager
        from rmm.mr.experimental import ExpandablePoolMemoryResource
        cuda.set_memory_manager(RMMNumbaManager)
        mr = ExpandablePoolMemoryResource()
        rmm.mr.set_current_device_resource(mr)
        d = cuda.to_device(np.arange(1000, dtype=np.int64))
        assert mr.used_bytes() >= 8000
        assert (d.copy_to_host() == np.arange(1000)).all()
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


@pytest.mark.gpu
def test_the_torch_allocator_on_it():
    pytest.importorskip("torch")
    out = run_python(
        """
        import torch
        from torch.cuda.memory import change_current_allocator
        import rmm
        from rmm.allocators.torch import rmm_torch_allocator
        from rmm.mr.experimental import ExpandablePoolMemoryResource
        mr = ExpandablePoolMemoryResource()
        rmm.mr.set_current_device_resource(mr)
        change_current_allocator(rmm_torch_allocator)
        x = torch.ones((1024, 1024), device="cuda")
        assert mr.used_bytes() >= 4 << 20
        assert float(x.sum()) == 1024 * 1024
        del x
        torch.cuda.synchronize()
        assert mr.trim() >= 0
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


def _device_of(ptr):
    """The device ordinal the driver says owns `ptr` (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    ordinal = ctypes.c_int(-1)
    assert cuda.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ctypes.c_uint64(ptr)) == 0
    return ordinal.value


@pytest.mark.gpu
def test_on_two_gpus_one_pool_per_device_and_a_peer_reads_device_0s_pool():
    from rmm._cuda import gpu

    if gpu.getDeviceCount() < 2:
        pytest.skip("needs 2 devices")
    previous = gpu.getDevice()
    gpu.setDevice(0)
    pool0 = ExpandablePoolMemoryResource(maximum_size="1 GiB", peer_devices=[1])
    gpu.setDevice(1)
    pool1 = ExpandablePoolMemoryResource(maximum_size="1 GiB")
    old = [rmm.mr.get_per_device_resource(d) for d in (0, 1)]
    rmm.mr.set_per_device_resource(0, pool0)
    rmm.mr.set_per_device_resource(1, pool1)
    try:
        data = bytes(range(256)) * 4096
        gpu.setDevice(0)
        src = rmm.DeviceBuffer.to_device(data)
        assert pool0.used_bytes() == len(data) and _device_of(src.ptr) == 0
        gpu.setDevice(1)
        dst = rmm.DeviceBuffer(size=len(data))
        assert pool1.used_bytes() == len(data) and _device_of(dst.ptr) == 1
        dst.copy_from_device(src)
        assert bytes(dst.copy_to_host()) == data, "device 1 read device 0's pool"
        gpu.setDevice(0)
        del src, dst
        assert (pool0.used_bytes(), pool1.used_bytes()) == (0, 0)
    finally:
        for d in (0, 1):
            rmm.mr.set_per_device_resource(d, old[d])
        gpu.setDevice(previous)
