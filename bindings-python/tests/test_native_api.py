"""rmm._rmm directly (the native half of rmm): DeviceBuffer, streams, logger, resources and their
argument checking, with RMM's exceptions. Runs in host mode (over SystemMemoryResource) and on a GPU
(over the device's default resource)."""

import copy
import os
import pickle

import pytest

from rmm import _rmm as R


@pytest.fixture(autouse=True)
def current_mr():
    """The current device resource for the test: host memory in host mode, the default on a GPU."""
    previous = R.get_current_device_resource()
    mr = R.SystemMemoryResource() if R.is_host_mode() else R.CudaMemoryResource()
    R.set_current_device_resource(mr)
    yield mr
    R.set_current_device_resource(previous)


def test_classes_live_at_rmms_module_paths():
    assert R.DeviceBuffer.__module__ == "rmm.pylibrmm.device_buffer"
    assert R.Stream.__module__ == "rmm.pylibrmm.stream"
    assert R.CudaStreamFlags.__module__ == "rmm.pylibrmm.stream"
    assert R.CudaStreamPool.__module__ == "rmm.pylibrmm.cuda_stream_pool"
    assert R.level_enum.__module__ == "rmm.pylibrmm.logger"
    assert R.CudaAsyncManagedMemoryResource.__module__ == "rmm.pylibrmm.memory_resource.experimental"
    for name in ("DeviceMemoryResource", "PoolMemoryResource", "LoggingResourceAdaptor", "BinningMemoryResource"):
        assert getattr(R, name).__module__ == "rmm.pylibrmm.memory_resource"


def test_device_buffer_basics():
    b = R.DeviceBuffer(size=10)
    assert (len(b), b.size, b.nbytes, b.__sizeof__(), b.capacity()) == (10, 10, 10, 10, 10)
    assert b.ptr != 0
    assert b.__cuda_array_interface__ == {
        "data": (b.ptr, False),
        "shape": (10,),
        "strides": None,
        "typestr": "|u1",
        "version": 0,
    }
    empty = R.DeviceBuffer()
    assert (empty.size, empty.ptr) == (0, 0)


@pytest.mark.parametrize("hb", [b"abc", bytearray(b"abc"), memoryview(b"abc"), b""])
def test_to_device_round_trips(hb):
    db = R.DeviceBuffer.to_device(hb)
    assert db.tobytes() == bytes(hb) == bytes(db)
    out = bytearray(len(hb))
    assert db.copy_to_host(out) is out and out == hb
    assert bytes(R.to_device(hb).copy_to_host()) == bytes(hb)


@pytest.mark.parametrize("bad,exc", [(None, TypeError), ("abc", TypeError), (123, TypeError)])
def test_to_device_rejects_what_rmm_rejects(bad, exc):
    with pytest.raises(exc):
        R.DeviceBuffer.to_device(bad)


def test_to_device_rejects_wrong_item_types_with_value_error():
    import array

    with pytest.raises(ValueError, match="dtype mismatch"):
        R.to_device(array.array("H", [1, 2]))
    with pytest.raises(ValueError, match="dimensions"):
        R.to_device(memoryview(b"abcd").cast("B", (2, 2)))


def test_copies_and_size_checks():
    db = R.DeviceBuffer.to_device(bytes(10))
    db.copy_from_host(b"abc")
    assert db.tobytes() == b"abc" + bytes(7)
    with pytest.raises(ValueError, match="too large"):
        db.copy_from_host(bytes(11))
    with pytest.raises(ValueError, match="too small"):
        db.copy_to_host(bytearray(5))
    other = R.DeviceBuffer(size=5)
    other.copy_from_device(R.DeviceBuffer.to_device(b"xyz"))
    assert other.tobytes()[:3] == b"xyz"
    with pytest.raises(ValueError, match="__cuda_array_interface__"):
        other.copy_from_device(b"abc")
    host = bytearray(3)
    R.copy_ptr_to_host(db.ptr, host)
    assert host == b"abc"
    R.copy_host_to_ptr(b"ABC", db.ptr)
    R.copy_device_to_ptr(db.ptr, other.ptr, 3)
    assert other.tobytes()[:3] == b"ABC"


def test_resize_reserve_keep_contents():
    db = R.DeviceBuffer.to_device(b"hello")
    db.resize(2)
    assert (db.tobytes(), db.capacity()) == (b"he", 5)
    db.reserve(64)
    assert (db.size, db.capacity(), db.tobytes()) == (2, 64, b"he")
    db.resize(8)
    assert db.tobytes()[:2] == b"he"


def test_pickle_and_copies():
    db = R.DeviceBuffer.to_device(b"pickled")
    assert pickle.loads(pickle.dumps(db)).tobytes() == b"pickled"
    buffers = []
    data = pickle.dumps(db, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert pickle.loads(data, buffers=buffers).tobytes() == b"pickled"
    for c in (copy.copy(db), copy.deepcopy(db), db.copy()):
        assert c.tobytes() == b"pickled" and c.ptr != db.ptr


@pytest.mark.parametrize(
    "call",
    [
        lambda: R.DeviceBuffer(size=1, stream=None),
        lambda: R.DeviceBuffer.to_device(b"abc", stream=None),
        lambda: R.to_device(b"abc", stream=None),
        lambda: R.DeviceBuffer(size=3).copy_to_host(stream=None),
        lambda: R.DeviceBuffer(size=3).copy_from_host(b"a", stream=None),
        lambda: R.DeviceBuffer(size=3).tobytes(stream=None),
        lambda: R.DeviceBuffer(size=3).resize(1, stream=None),
        lambda: R.DeviceBuffer(size=3).reserve(9, stream=None),
        lambda: R.copy_ptr_to_host(0, bytearray(1), stream=None),
        lambda: R.copy_host_to_ptr(b"a", 0, stream=None),
        lambda: R.copy_device_to_ptr(0, 0, 0, stream=None),
        lambda: R.get_current_device_resource().allocate(8, stream=None),
        lambda: R.get_current_device_resource().deallocate(0, 8, stream=None),
    ],
)
def test_stream_none_is_a_type_error(call):
    with pytest.raises(TypeError, match="stream argument cannot be None"):
        call()


def test_explicit_default_stream_works():
    db = R.DeviceBuffer(size=4, stream=R.DEFAULT_STREAM)
    mr = R.get_current_device_resource()
    p = mr.allocate(64, R.DEFAULT_STREAM)
    mr.deallocate(p, 64, stream=R.DEFAULT_STREAM)
    assert db.size == 4


def test_default_streams_and_stream_protocol():
    assert R.DEFAULT_STREAM.is_default() and R.DEFAULT_STREAM.__cuda_stream__() == (0, 0)
    assert not R.PER_THREAD_DEFAULT_STREAM.is_default() or R.PER_THREAD_DEFAULT_STREAM == R.DEFAULT_STREAM
    assert R.Stream(R.DEFAULT_STREAM) == R.DEFAULT_STREAM
    assert hash(R.Stream(R.DEFAULT_STREAM)) == hash(R.DEFAULT_STREAM)
    R.DEFAULT_STREAM.synchronize()

    class V0:
        def __cuda_stream__(self):
            return (0, 0)

    class V1:
        def __cuda_stream__(self):
            return (1, 2)

    assert R.Stream(V0()) == R.DEFAULT_STREAM
    with pytest.raises(NotImplementedError, match="version: '1'"):
        R.Stream(V1())
    with pytest.raises(TypeError, match="Cannot create stream"):
        R.Stream(object())
    with pytest.raises(ValueError, match="flags may only be specified when obj is None"):
        R.Stream(R.DEFAULT_STREAM, flags=R.CudaStreamFlags.NON_BLOCKING)
    assert int(R.CudaStreamFlags.NON_BLOCKING) == 1 and int(R.CudaStreamFlags.SYNC_DEFAULT) == 0


def test_level_enum_and_logger_functions():
    assert [m.name for m in R.level_enum] == ["trace", "debug", "info", "warn", "error", "critical", "off", "n_levels"]
    before = R.get_logging_level()
    try:
        for level in R.level_enum:
            R.set_logging_level(level)
            assert R.get_logging_level() == level
            R.set_flush_level(level)
            assert R.get_flush_level() == level
            assert isinstance(R.should_log(level), bool)
        R.set_logging_level(R.level_enum.warn)
        assert R.should_log(R.level_enum.error) and not R.should_log(R.level_enum.info)
    finally:
        R.set_logging_level(before)
        R.set_flush_level(R.level_enum.info)
    for bad in ["INFO", 3, None, 1.5]:
        for f in (R.set_logging_level, R.set_flush_level, R.should_log):
            with pytest.raises(TypeError):
                f(bad)
    R.flush_logger()


def test_size_strings_follow_rmms_pattern():
    upstream = R.SystemMemoryResource()
    assert R.PoolMemoryResource(upstream, "1MiB", "4 MiB").pool_size() == 1 << 20
    for bad in ["MiB", "1e3kb", "1 0 MiB", "-1"]:
        with pytest.raises(ValueError, match="Could not parse"):
            R.PoolMemoryResource(upstream, bad)


def test_adaptors_on_host_memory(tmp_path):
    upstream = R.SystemMemoryResource()
    lim = R.LimitingResourceAdaptor(upstream, 1000)
    assert lim.get_allocation_limit() == 1000 and lim.upstream_mr is upstream
    with pytest.raises(MemoryError):
        R.DeviceBuffer(size=2000, mr=lim)
    b = R.DeviceBuffer(size=100, mr=lim)
    assert lim.get_allocated_bytes() >= 100
    del b
    tracking = R.TrackingResourceAdaptor(upstream, capture_stacks=False)
    kept = R.DeviceBuffer(size=7, mr=tracking)
    assert tracking.get_allocated_bytes() == 7
    assert "7" in tracking.get_outstanding_allocations_str()
    tracking.log_outstanding_allocations()
    del kept
    assert tracking.get_allocated_bytes() == 0
    binning = R.BinningMemoryResource(upstream, 10, 12)
    fixed = R.FixedSizeMemoryResource(upstream, 1 << 14, 2)
    binning.add_bin(1 << 14, fixed)
    assert binning.bin_mrs == [fixed]
    assert R.DeviceBuffer(size=3000, mr=binning).size == 3000
    assert R.DeviceBuffer(size=10, mr=R.PrefetchResourceAdaptor(upstream)).size == 10
    assert R.DeviceBuffer(size=10, mr=R.ArenaMemoryResource(upstream, 1 << 22)).size == 10


def test_logging_adaptor_file_naming(tmp_path, monkeypatch):
    upstream = R.SystemMemoryResource()
    log = R.LoggingResourceAdaptor(upstream, str(tmp_path / "log.csv"))
    assert log.get_file_name() == str(tmp_path / "log.dev0.csv")  # device 0 is current in the suite
    R.DeviceBuffer(size=100, mr=log)
    log.flush()
    assert "Time,Action,Pointer,Size,Stream" in open(log.get_file_name()).read()
    monkeypatch.setenv("RMM_LOG_FILE", str(tmp_path / "env.txt"))
    assert R.LoggingResourceAdaptor(upstream).get_file_name().endswith("env.dev0.txt")
    monkeypatch.delenv("RMM_LOG_FILE")
    with pytest.raises(ValueError, match="RMM_LOG_FILE"):
        R.LoggingResourceAdaptor(upstream)


def test_flush_logs_flushes_the_current_logging_adaptor(tmp_path):
    log = R.LoggingResourceAdaptor(R.get_current_device_resource(), str(tmp_path / "cur.csv"))
    R.set_current_device_resource(log)
    buf = R.DeviceBuffer(size=64)
    R._flush_logs()
    assert ",allocate," in open(log.get_file_name()).read()
    del buf
    assert R.is_initialized()
    assert R._per_device_resources() == {0: log}


def test_callback_resource_errors_are_raised_as_rmm_raises_them(current_mr):
    calls = []

    def allocate(nbytes, stream):
        calls.append(("allocate", nbytes, stream.is_default()))
        return current_mr.allocate(nbytes, stream)

    def deallocate(ptr, nbytes, stream):
        calls.append(("deallocate", nbytes))
        current_mr.deallocate(ptr, nbytes, stream)

    buf = R.DeviceBuffer(size=256, mr=R.CallbackMemoryResource(allocate, deallocate))
    del buf
    assert calls == [("allocate", 256, True), ("deallocate", 256)]

    for raised, caught in [(MemoryError, MemoryError), (RuntimeError, RuntimeError), (Exception, RuntimeError)]:

        def failing(nbytes, stream, raised=raised):
            raise raised("My alloc error")

        with pytest.raises(caught, match="My alloc error"):
            R.DeviceBuffer(size=256, mr=R.CallbackMemoryResource(failing, deallocate))


def test_failure_callback_retries_and_propagates():
    def oom(nbytes, stream):
        raise MemoryError("Intentional allocation failure")

    def noop(ptr, nbytes, stream):
        pass

    tries = []

    def retry_twice(nbytes):
        tries.append(nbytes)
        return len(tries) < 3

    mr = R.FailureCallbackResourceAdaptor(R.CallbackMemoryResource(oom, noop), retry_twice)
    with pytest.raises(MemoryError):
        R.DeviceBuffer(size=256, mr=mr)
    assert tries == [256, 256, 256]

    def broken(nbytes):
        raise RuntimeError("MyError")

    mr = R.FailureCallbackResourceAdaptor(R.CallbackMemoryResource(oom, noop), broken)
    with pytest.raises(RuntimeError, match="MyError"):
        R.DeviceBuffer(size=256, mr=mr)


def test_async_view_needs_a_cuda_python_pool_handle():
    with pytest.raises(ValueError, match="cudaMemPool_t or CUmemoryPool"):
        R.CudaAsyncViewMemoryResource(1234)


@pytest.mark.gpu
def test_streams_and_pool_on_the_gpu():
    a, b = R.Stream(), R.Stream(flags=R.CudaStreamFlags.NON_BLOCKING)
    assert a != b and len({a, b}) == 2 and not a.is_default()
    pool = R.CudaStreamPool(pool_size=4, flags=R.CudaStreamFlags.NON_BLOCKING)
    streams = [pool.get_stream() for _ in range(4)]
    assert pool.get_pool_size() == 4 and len(set(streams)) == 4
    assert streams[1] == pool.get_stream(1)
    db = R.DeviceBuffer.to_device(b"on a stream", stream=a)
    a.synchronize()
    assert db.tobytes(stream=a) == b"on a stream"
    db.prefetch()


@pytest.mark.gpu
def test_gpu_resources_construct_and_allocate():
    cuda = R.CudaMemoryResource()
    for mr in (
        R.ManagedMemoryResource(),
        R.PinnedHostMemoryResource(),
        R.CudaAsyncMemoryResource(initial_pool_size="1MiB", release_threshold=1 << 20),
        R.PoolMemoryResource(cuda, "1MiB"),
        R.ArenaMemoryResource(cuda, "4MiB"),
        R.FixedSizeMemoryResource(cuda),
        R.BinningMemoryResource(cuda, 10, 20),
        R.StatisticsResourceAdaptor(cuda),
    ):
        db = R.DeviceBuffer.to_device(b"x" * 1000, stream=R.DEFAULT_STREAM)
        db2 = R.DeviceBuffer(size=1000, mr=mr)
        db2.copy_from_device(db)
        assert db2.tobytes() == b"x" * 1000
