"""rmm.DeviceBuffer and the copy functions of rmm.pylibrmm.device_buffer: sizes, copies, pickling,
argument checking. On host memory in host mode, on device memory on a GPU (same assertions)."""

import copy
import pickle

import pytest

import rmm
import rmm.mr
from rmm.pylibrmm.device_buffer import copy_device_to_ptr, copy_host_to_ptr, copy_ptr_to_host, to_device
from rmm.pylibrmm.stream import DEFAULT_STREAM

try:
    import numpy as np
except ImportError:
    np = None
needs_numpy = pytest.mark.skipif(np is None, reason="needs numpy")

DATA = bytes(range(256)) * 5


@pytest.fixture(autouse=True)
def fresh_resource():
    rmm.reinitialize()
    yield
    rmm.reinitialize()


@pytest.mark.parametrize("size", [0, 1, 10, 1000, 1 << 20])
def test_sizes(size):
    buf = rmm.DeviceBuffer(size=size)
    assert buf.size == buf.nbytes == len(buf) == buf.__sizeof__() == size
    assert buf.capacity() >= size
    assert isinstance(buf.ptr, int)
    assert (buf.ptr == 0) == (size == 0)


def test_default_is_empty():
    buf = rmm.DeviceBuffer()
    assert buf.size == 0 and buf.ptr == 0
    assert buf.tobytes() == b""


def test_constructor_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        rmm.DeviceBuffer(10)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None])
def test_bad_sizes(bad):
    with pytest.raises((TypeError, OverflowError)):
        rmm.DeviceBuffer(size=bad)


def test_to_device_and_back():
    buf = rmm.DeviceBuffer.to_device(DATA)
    assert buf.size == len(DATA)
    assert buf.tobytes() == DATA
    assert bytes(buf) == DATA
    assert to_device(DATA).tobytes() == DATA
    assert to_device(bytearray(DATA)).tobytes() == DATA
    assert to_device(memoryview(DATA)).tobytes() == DATA


def test_to_device_rejects_non_contiguous_and_none():
    with pytest.raises((ValueError, TypeError)):
        to_device(memoryview(DATA)[::2])
    with pytest.raises(TypeError):
        to_device(None)
    with pytest.raises((ValueError, TypeError)):
        to_device("text")


def test_copy_from_a_pointer_at_construction():
    src = rmm.DeviceBuffer.to_device(DATA)
    buf = rmm.DeviceBuffer(ptr=src.ptr, size=src.size)
    assert buf.ptr != src.ptr
    assert buf.tobytes() == DATA


def test_copy_from_host_and_into_a_host_buffer():
    buf = rmm.DeviceBuffer(size=len(DATA))
    buf.copy_from_host(DATA)
    assert buf.tobytes() == DATA
    out = bytearray(len(DATA))
    buf.copy_to_host(out)
    assert bytes(out) == DATA


def test_copy_from_host_larger_than_the_buffer_is_a_value_error():
    buf = rmm.DeviceBuffer(size=4)
    with pytest.raises(ValueError):
        buf.copy_from_host(b"12345")


def test_copy_to_a_too_small_host_buffer_is_a_value_error():
    buf = rmm.DeviceBuffer.to_device(DATA)
    with pytest.raises(ValueError):
        buf.copy_to_host(bytearray(len(DATA) - 1))


@needs_numpy
def test_copy_to_host_returns_a_uint8_array():
    out = rmm.DeviceBuffer.to_device(DATA).copy_to_host()
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8
    assert out.tobytes() == DATA


def test_copy_from_device():
    src = rmm.DeviceBuffer.to_device(DATA)
    dst = rmm.DeviceBuffer(size=len(DATA))
    dst.copy_from_device(src)
    assert dst.tobytes() == DATA


def test_copy_from_device_needs_the_cuda_array_interface():
    with pytest.raises((ValueError, TypeError, AttributeError)):
        rmm.DeviceBuffer(size=4).copy_from_device(b"1234")


def test_cuda_array_interface():
    buf = rmm.DeviceBuffer.to_device(DATA)
    cai = buf.__cuda_array_interface__
    assert cai["data"] == (buf.ptr, False)
    assert cai["shape"] == (len(DATA),)
    assert cai["typestr"] == "|u1"
    assert cai["strides"] is None
    assert cai["version"] in (0, 3)


def test_resize_keeps_the_bytes_and_reserve_only_grows_capacity():
    buf = rmm.DeviceBuffer.to_device(DATA)
    buf.reserve(4 * len(DATA))
    assert buf.capacity() >= 4 * len(DATA)
    assert buf.size == len(DATA)
    assert buf.tobytes() == DATA
    buf.resize(10)
    assert buf.size == 10 and buf.tobytes() == DATA[:10]
    buf.resize(len(DATA) * 2)
    assert buf.size == len(DATA) * 2 and buf.tobytes()[:10] == DATA[:10]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(protocol):
    buf = rmm.DeviceBuffer.to_device(DATA)
    back = pickle.loads(pickle.dumps(buf, protocol=protocol))
    assert isinstance(back, rmm.DeviceBuffer)
    assert back.ptr != buf.ptr
    assert back.tobytes() == DATA


@needs_numpy
def test_pickle_protocol_5_out_of_band():
    buf = rmm.DeviceBuffer.to_device(DATA)
    buffers = []
    data = pickle.dumps(buf, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert pickle.loads(data, buffers=buffers).tobytes() == DATA


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, lambda b: b.copy()])
def test_copies_are_independent(how):
    buf = rmm.DeviceBuffer.to_device(DATA)
    dup = how(buf)
    assert isinstance(dup, rmm.DeviceBuffer)
    assert dup.ptr != buf.ptr and dup.tobytes() == DATA
    buf.copy_from_host(b"\xff" * len(DATA))
    assert dup.tobytes() == DATA


def test_the_buffer_uses_the_given_resource_and_frees_into_it():
    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.get_current_device_resource())
    buf = rmm.DeviceBuffer(size=1000, mr=stats)
    assert stats.allocation_counts.current_bytes == 1000
    del buf
    assert stats.allocation_counts.current_bytes == 0


def test_the_buffer_uses_the_current_resource_by_default():
    with rmm.statistics.statistics():
        buf = rmm.DeviceBuffer(size=100)
        assert rmm.statistics.get_statistics().current_bytes == 100
        del buf
        assert rmm.statistics.get_statistics().current_bytes == 0


def test_stream_none_is_a_type_error_everywhere():
    buf = rmm.DeviceBuffer.to_device(DATA)
    out = bytearray(len(DATA))
    calls = [
        lambda: rmm.DeviceBuffer(size=10, stream=None),
        lambda: to_device(DATA, stream=None),
        lambda: buf.copy_to_host(stream=None),
        lambda: buf.copy_from_host(DATA, stream=None),
        lambda: buf.copy_from_device(buf, stream=None),
        lambda: buf.tobytes(stream=None),
        lambda: buf.reserve(10, stream=None),
        lambda: buf.resize(10, stream=None),
        lambda: copy_ptr_to_host(buf.ptr, out, stream=None),
        lambda: copy_host_to_ptr(DATA, buf.ptr, stream=None),
        lambda: copy_device_to_ptr(buf.ptr, buf.ptr, 0, stream=None),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()


def test_pointer_copy_functions():
    src = rmm.DeviceBuffer.to_device(DATA)
    dst = rmm.DeviceBuffer(size=len(DATA))
    copy_device_to_ptr(src.ptr, dst.ptr, len(DATA))
    out = bytearray(len(DATA))
    copy_ptr_to_host(dst.ptr, out)
    assert bytes(out) == DATA
    copy_host_to_ptr(b"abc", dst.ptr, stream=DEFAULT_STREAM)
    assert dst.tobytes()[:3] == b"abc"


def test_prefetch_is_a_no_op_for_memory_that_is_not_managed():
    buf = rmm.DeviceBuffer.to_device(DATA)
    if rmm.is_host_mode():
        buf.prefetch(device=0)
    else:
        buf.prefetch()
    assert buf.tobytes() == DATA
