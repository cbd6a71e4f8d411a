"""rmm.mr on any machine: the system resource, and the CUDA resource's behaviour without a GPU."""

import ctypes

import pytest

import rmm
import rmm.mr

PIB = 1 << 50


@pytest.fixture
def system_mr():
    return rmm.mr.SystemMemoryResource()


def test_version_and_host_mode():
    assert isinstance(rmm.__version__, str) and rmm.__version__
    assert isinstance(rmm.is_host_mode(), bool)


def test_resources_share_the_base_class():
    assert issubclass(rmm.mr.SystemMemoryResource, rmm.mr.DeviceMemoryResource)
    assert issubclass(rmm.mr.CudaMemoryResource, rmm.mr.DeviceMemoryResource)
    assert rmm.mr.CudaMemoryResource().name == "cuda_memory_resource"
    assert "system_memory_resource" in repr(rmm.mr.SystemMemoryResource())


@pytest.mark.parametrize("nbytes", [1, 8, 255, 256, 1000, 1 << 20])
def test_system_allocate_deallocate_aligned(system_mr, nbytes):
    ptr = system_mr.allocate(nbytes)
    assert isinstance(ptr, int) and ptr != 0
    assert ptr % 256 == 0
    system_mr.deallocate(ptr, nbytes)


def test_system_stream_argument_is_a_stream(system_mr):
    from rmm.pylibrmm.stream import DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM

    ptr = system_mr.allocate(64, stream=DEFAULT_STREAM)
    system_mr.deallocate(ptr, 64, stream=PER_THREAD_DEFAULT_STREAM)
    # As in RMM, the stream is an rmm Stream: None and raw handles are TypeErrors.
    for bad in (None, 0):
        with pytest.raises(TypeError, match="stream"):
            system_mr.allocate(64, stream=bad)


def test_zero_bytes_is_null(system_mr):
    assert system_mr.allocate(0) == 0
    system_mr.deallocate(0, 0)


def test_one_pib_is_memory_error_and_resource_still_works(system_mr):
    with pytest.raises(MemoryError, match="system_memory_resource"):
        system_mr.allocate(PIB)
    ptr = system_mr.allocate(16)
    system_mr.deallocate(ptr, 16)


def test_host_pointer_is_writable_through_ctypes(system_mr):
    data = bytes(range(256)) * 16
    ptr = system_mr.allocate(len(data))
    try:
        ctypes.memmove(ptr, data, len(data))
        assert ctypes.string_at(ptr, len(data)) == data
    finally:
        system_mr.deallocate(ptr, len(data))


def test_negative_size_is_rejected(system_mr):
    with pytest.raises(OverflowError):
        system_mr.allocate(-1)


@pytest.mark.skipif(not rmm.is_host_mode(), reason="checks host mode; a GPU is present")
def test_cuda_allocate_in_host_mode_is_runtime_error():
    mr = rmm.mr.CudaMemoryResource()
    with pytest.raises(RuntimeError, match="driver"):
        mr.allocate(1024)
    # 0 bytes never touches the driver, as in RMM.
    assert mr.allocate(0) == 0


@pytest.mark.skipif(not rmm.is_host_mode(), reason="checks host mode; a GPU is present")
def test_available_device_memory_in_host_mode_is_runtime_error():
    with pytest.raises(RuntimeError):
        rmm.mr.available_device_memory()
