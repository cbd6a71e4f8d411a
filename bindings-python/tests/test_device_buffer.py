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


# ---- RMM's behaviour where RMM's own suite does not look (issue 30) -----------------------------


def test_pickles_name_rmms_to_device():
    buf = rmm.DeviceBuffer.to_device(DATA)
    func, args = buf.__reduce__()
    assert (func.__module__, func.__qualname__) == ("rmm.pylibrmm.device_buffer", "to_device")
    import importlib

    assert getattr(importlib.import_module(func.__module__), func.__qualname__) is func
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(buf, protocol=protocol)
        assert b"rmm.pylibrmm.device_buffer" in data and b"rmm._rmm" not in data
        assert pickle.loads(data).tobytes() == DATA


def test_a_pickle_as_rmm_writes_it_loads():
    # Protocol 3 as RMM 26.10 writes it: GLOBAL rmm.pylibrmm.device_buffer.to_device, one bytes
    # argument, REDUCE (RMM's argument is a NumPy array; the callable is what matters).
    data = b"\x80\x03crmm.pylibrmm.device_buffer\nto_device\nC\x03abc\x85R."
    back = pickle.loads(data)
    assert isinstance(back, rmm.DeviceBuffer) and back.tobytes() == b"abc"
    # Pickles that rmm-rs wrote before naming RMM's path still load.
    assert pickle.loads(b"\x80\x03crmm._rmm\nto_device\nC\x02hi\x85R.").tobytes() == b"hi"


class _Cai:
    """A device array described only by its CUDA Array Interface."""

    def __init__(self, buf, typestr, count, strides=None):
        self._buf = buf
        self.__cuda_array_interface__ = {
            "data": (buf.ptr, False),
            "shape": (count,),
            "strides": strides,
            "typestr": typestr,
            "version": 3,
        }


@pytest.mark.parametrize(
    "typestr, itemsize", [("<M8[ns]", 8), ("<m8[s]", 8), ("<f4", 4), ("|b1", 1), ("<U3", 12), ("<c16", 16)]
)
@pytest.mark.parametrize("with_numpy", [True, False])
def test_copy_from_device_reads_the_item_size_as_numpy_does(typestr, itemsize, with_numpy, monkeypatch):
    if with_numpy and np is None:
        pytest.skip("needs numpy")
    if not with_numpy:
        monkeypatch.setitem(__import__("sys").modules, "numpy", None)
    src = rmm.DeviceBuffer.to_device(DATA[: 4 * itemsize])
    dst = rmm.DeviceBuffer(size=4 * itemsize)
    dst.copy_from_device(_Cai(src, typestr, 4, strides=(itemsize,)))
    assert dst.tobytes() == DATA[: 4 * itemsize]
    with pytest.raises(ValueError, match="too large"):
        rmm.DeviceBuffer(size=4 * itemsize - 1).copy_from_device(_Cai(src, typestr, 4))
    with pytest.raises(ValueError, match="non-contiguous"):
        dst.copy_from_device(_Cai(src, typestr, 2, strides=(2 * itemsize,)))


def test_prefetch_to_the_cpu_device_id_is_accepted():
    cuda_cpu_device_id = -1  # cuda.bindings.runtime.cudaCpuDeviceId
    buf = rmm.DeviceBuffer.to_device(DATA)
    buf.prefetch(device=cuda_cpu_device_id)
    buf.prefetch(device=cuda_cpu_device_id, stream=DEFAULT_STREAM)
    assert buf.tobytes() == DATA


@pytest.mark.gpu
def test_prefetch_managed_memory_to_the_host_and_back():
    buf = rmm.DeviceBuffer.to_device(DATA, stream=DEFAULT_STREAM)
    managed = rmm.DeviceBuffer(size=len(DATA), mr=rmm.mr.ManagedMemoryResource())
    managed.copy_from_device(buf)
    managed.prefetch(device=-1)
    managed.prefetch()
    DEFAULT_STREAM.synchronize()
    assert managed.tobytes() == DATA


# -- exports: no resize or move of memory that a consumer still reads


def _pool():
    return rmm.mr.PoolMemoryResource(rmm.mr.get_current_device_resource(), initial_pool_size=1 << 20)


def test_a_view_blocks_resize_so_no_use_after_free():
    pool = _pool()
    b = rmm.DeviceBuffer(size=4096, mr=pool)
    v = rmm.StridedMemoryView.from_dlpack(b)
    with pytest.raises(BufferError, match="exports"):
        b.resize(1 << 16)
    with pytest.raises(BufferError):
        b.reserve(1 << 16)
    with pytest.raises(BufferError):
        b._to_capsule()
    o = rmm.DeviceBuffer(size=4096, mr=pool)
    assert o.ptr != v.ptr and b.ptr == v.ptr and b.size == 4096
    v.release()
    b.resize(1 << 16)
    assert b.size == 1 << 16


@pytest.mark.parametrize(
    "export",
    [
        lambda b: b.__dlpack__(),
        lambda b: b.__dlpack__(max_version=(1, 0)),
        lambda b: rmm.StridedMemoryView.from_dlpack(b),
        lambda b: rmm.StridedMemoryView.from_object(b),
        lambda b: rmm.StridedMemoryView.from_cuda_array_interface(b),
    ],
    ids=["capsule", "versioned-capsule", "from_dlpack", "from_object", "from_cai"],
)
def test_every_live_export_blocks_resize_reserve_and_to_capsule(export):
    b = rmm.DeviceBuffer.to_device(DATA)
    e = export(b)
    for op in (lambda: b.resize(10), lambda: b.reserve(1 << 20), b._to_capsule):
        with pytest.raises(BufferError):
            op()
    assert b.tobytes() == DATA  # reading and writing in place stay allowed
    b.copy_from_host(b"xyz")
    del e
    import gc

    gc.collect()
    b.resize(10)
    assert b.tobytes() == b"xyz" + DATA[3:10]
    cap = b._to_capsule()
    assert b.size == 0 and cap is not None


def test_a_copied_dlpack_export_does_not_block_the_original():
    b = rmm.DeviceBuffer.to_device(DATA)
    cap = b.__dlpack__(copy=True)
    b.resize(10)
    assert rmm.StridedMemoryView.from_dlpack(cap).ptr != b.ptr
    del cap


def test_a_consumed_capsule_blocks_until_its_view_is_released():
    b = rmm.DeviceBuffer.to_device(DATA)
    v = rmm.StridedMemoryView.from_dlpack(b.__dlpack__())
    with pytest.raises(BufferError):
        b.resize(1)
    with v:
        pass
    b.resize(1)


# -- several threads on one buffer


def test_threads_share_one_buffer_without_borrow_errors():
    import threading

    buf = rmm.DeviceBuffer.to_device(DATA)
    errors = []
    start = threading.Barrier(6)

    def run(op):
        start.wait()
        try:
            for i in range(300):
                op(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ops = [
        lambda i: buf.copy_from_host(DATA[: 1 + i % 100]),
        lambda i: buf.resize(len(DATA) + i % 7),
        lambda i: buf.reserve(2 * len(DATA) + i),
        lambda i: (buf.tobytes(), buf.copy_to_host(bytearray(4 * len(DATA)))),
        lambda i: (buf.ptr, buf.size, len(buf), buf.capacity(), buf.__cuda_array_interface__),
        lambda i: buf.copy_from_device(rmm.DeviceBuffer.to_device(DATA[:64])),
    ]
    threads = [threading.Thread(target=run, args=(op,)) for op in ops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(DATA) <= buf.size < len(DATA) + 7
    assert buf.tobytes()[100:200] == DATA[100:200]


def test_a_resize_waits_for_a_thread_that_reads():
    import threading

    buf = rmm.DeviceBuffer.to_device(DATA * 100)
    stop = threading.Event()
    seen = []

    def read():
        while not stop.is_set():
            data = buf.tobytes()
            seen.append(data[:10] == DATA[:10])

    t = threading.Thread(target=read)
    t.start()
    for n in range(200):
        buf.resize(len(DATA) * (1 + n % 150))
    stop.set()
    t.join()
    assert seen and all(seen)
