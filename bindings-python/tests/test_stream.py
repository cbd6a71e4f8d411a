"""rmm.pylibrmm.stream and cuda_stream_pool: the default streams, wrapping foreign streams through
`__cuda_stream__`, flags, equality; creating streams needs a GPU."""

import enum

import pytest

import rmm
from rmm.pylibrmm.cuda_stream_pool import CudaStreamPool
from rmm.pylibrmm.stream import (
    DEFAULT_STREAM,
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    CudaStreamFlags,
    Stream,
)


class Foreign:
    """Any object with the CUDA stream protocol."""

    def __init__(self, handle, version=0):
        self.handle, self.version = handle, version

    def __cuda_stream__(self):
        return (self.version, self.handle)


def test_flags_are_an_int_enum():
    assert issubclass(CudaStreamFlags, enum.IntEnum)
    assert int(CudaStreamFlags.SYNC_DEFAULT) == 0
    assert int(CudaStreamFlags.NON_BLOCKING) == 1


def test_default_streams():
    assert DEFAULT_STREAM.__cuda_stream__() == (0, 0)
    assert LEGACY_DEFAULT_STREAM.__cuda_stream__() == (0, 1)
    assert PER_THREAD_DEFAULT_STREAM.__cuda_stream__() == (0, 2)
    assert DEFAULT_STREAM.is_default()
    assert isinstance(DEFAULT_STREAM, Stream)


def test_a_stream_of_a_stream_is_the_same_stream():
    s = Stream(DEFAULT_STREAM)
    assert s == DEFAULT_STREAM and hash(s) == hash(DEFAULT_STREAM)
    assert s != LEGACY_DEFAULT_STREAM


def test_foreign_streams_through_the_protocol():
    s = Stream(Foreign(0x1234))
    assert s.__cuda_stream__() == (0, 0x1234)
    assert not s.is_default()
    assert s == Stream(Foreign(0x1234))
    assert {s, Stream(Foreign(0x1234))} == {s}


def test_other_protocol_versions_are_not_implemented():
    with pytest.raises(NotImplementedError):
        Stream(Foreign(0x1234, version=1))


def test_flags_with_an_object_is_a_value_error():
    with pytest.raises(ValueError):
        Stream(DEFAULT_STREAM, flags=CudaStreamFlags.NON_BLOCKING)


@pytest.mark.parametrize("bad", [42, "stream", 1.5, object()])
def test_an_object_that_is_no_stream_is_rejected(bad):
    with pytest.raises((TypeError, ValueError)):
        Stream(bad)


def test_allocate_and_deallocate_take_streams_not_none():
    mr = rmm.mr.get_current_device_resource()
    ptr = mr.allocate(64, DEFAULT_STREAM)
    mr.deallocate(ptr, 64, stream=DEFAULT_STREAM)
    with pytest.raises(TypeError, match="stream"):
        mr.allocate(64, stream=None)
    ptr = mr.allocate(64)
    with pytest.raises(TypeError, match="stream"):
        mr.deallocate(ptr, 64, stream=None)
    mr.deallocate(ptr, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [None, "SYNC_DEFAULT", "NON_BLOCKING"])
def test_new_streams(flags):
    s = Stream() if flags is None else Stream(flags=CudaStreamFlags[flags])
    assert not s.is_default()
    assert s.__cuda_stream__()[1] not in (0, 1, 2)
    s.synchronize()
    buf = rmm.DeviceBuffer(size=100, stream=s)
    assert buf.size == 100
    assert Stream(s) == s


@pytest.mark.gpu
def test_stream_pool_round_robin_and_keeps_itself_alive():
    pool = CudaStreamPool(pool_size=3, flags=CudaStreamFlags.NON_BLOCKING)
    assert pool.get_pool_size() == 3
    streams = [pool.get_stream() for _ in range(6)]
    assert streams[:3] == streams[3:]
    assert len(set(streams[:3])) == 3
    assert pool.get_stream(1) == pool.get_stream(4)
    del pool
    streams[0].synchronize()


def test_stream_pool_of_size_zero_is_rmms_runtime_error():
    with pytest.raises(RuntimeError, match="RMM failure at: .*Stream pool size must be greater than zero"):
        CudaStreamPool(pool_size=0)
    with pytest.raises(OverflowError):
        CudaStreamPool(pool_size=-1)
