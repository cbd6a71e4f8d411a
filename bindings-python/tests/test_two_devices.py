"""Two GPUs (issue 13): per-device resources, buffers that stay on the device they were made on, and
Dask-CUDA with one worker per GPU. Every test here needs two devices: on one GPU each skips with
"needs 2 devices", in host mode with "needs a CUDA GPU" (conftest.py)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import rmm
import rmm.mr

DASK_SITE = os.environ.get("RMM_TEST_DASK_SITE", "")
MIB = 1 << 20


class _Gpu:
    """rmm._cuda.gpu, imported on first use (it needs cuda-python, which host-mode machines lack)."""

    def __getattr__(self, name):
        from rmm._cuda import gpu as module

        return getattr(module, name)


gpu = _Gpu()


@pytest.fixture
def two_devices():
    """Skips unless two devices are visible; restores the device and plain resources afterwards."""
    if gpu.getDeviceCount() < 2:
        pytest.skip("needs 2 devices")
    previous = gpu.getDevice()
    yield (0, 1)
    gpu.setDevice(previous)
    rmm.reinitialize(devices=[0, 1])
    gpu.setDevice(previous)


def _libcuda():
    import ctypes

    return ctypes, ctypes.CDLL("libcuda.so.1")


def device_of(ptr: int) -> int:
    """The device ordinal the driver says owns `ptr` (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)."""
    ctypes, cuda = _libcuda()
    ordinal = ctypes.c_int(-1)
    result = cuda.cuPointerGetAttribute(ctypes.byref(ordinal), 9, ctypes.c_uint64(ptr))
    assert result == 0, f"cuPointerGetAttribute: CUresult {result}"
    return ordinal.value


def context_device() -> int:
    """The device of the driver's current context on this thread (what rmm-rs allocates on)."""
    ctypes, cuda = _libcuda()
    device = ctypes.c_int(-1)
    result = cuda.cuCtxGetDevice(ctypes.byref(device))
    assert result == 0, f"cuCtxGetDevice: CUresult {result}"
    return device.value


@pytest.mark.gpu
def test_per_device_resources_differ_and_follow_the_current_device(two_devices):
    gpu.setDevice(0)
    pool0 = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size="16MiB")
    gpu.setDevice(1)
    pool1 = rmm.mr.ArenaMemoryResource(rmm.mr.CudaMemoryResource(), arena_size="16MiB")
    rmm.mr.set_per_device_resource(0, pool0)
    rmm.mr.set_per_device_resource(1, pool1)
    assert rmm.mr.get_per_device_resource(0) is pool0
    assert rmm.mr.get_per_device_resource(1) is pool1
    gpu.setDevice(0)
    assert rmm.mr.get_current_device_resource() is pool0
    gpu.setDevice(1)
    assert rmm.mr.get_current_device_resource() is pool1
    assert context_device() == 1, "cudaSetDevice(1) made device 1's context current"
    buf = rmm.DeviceBuffer(size=MIB)
    assert device_of(buf.ptr) == 1, f"current context's device {context_device()}"


@pytest.mark.gpu
def test_reinitialize_puts_a_pool_on_both_devices(two_devices):
    rmm.reinitialize(pool_allocator=True, initial_pool_size="32MiB", devices=[0, 1])
    for device in (0, 1):
        mr = rmm.mr.get_per_device_resource(device)
        assert isinstance(mr, rmm.mr.PoolMemoryResource)
        gpu.setDevice(device)
        buf = rmm.DeviceBuffer(size=MIB)
        assert device_of(buf.ptr) == device, f"current context's device {context_device()}"
        del buf
        assert mr.pool_size() >= 32 * MIB


@pytest.mark.gpu
def test_a_buffer_made_on_device_1_stays_there_with_device_0_current(two_devices):
    gpu.setDevice(1)
    mr1 = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size="16MiB")
    data = np.arange(MIB, dtype=np.uint8)
    buf = rmm.DeviceBuffer(size=MIB, mr=mr1)
    buf.copy_from_host(data)
    gpu.setDevice(0)
    assert device_of(buf.ptr) == 1
    buf.resize(2 * MIB)
    assert device_of(buf.ptr) == 1, "growth reallocates on the buffer's device"
    assert gpu.getDevice() == 0, "the current device is restored"
    assert np.array_equal(np.frombuffer(buf.tobytes()[:MIB], dtype=np.uint8), data)
    copy = buf.copy()
    assert device_of(copy.ptr) == 1
    del buf, copy
    assert gpu.getDevice() == 0, "freeing restores the current device"


@pytest.mark.gpu
def test_peer_copy_between_devices(two_devices):
    data = np.random.default_rng(7).integers(0, 255, MIB, dtype=np.uint8)
    gpu.setDevice(0)
    src = rmm.DeviceBuffer.to_device(data.tobytes())
    gpu.setDevice(1)
    dst = rmm.DeviceBuffer(size=MIB)
    assert (device_of(src.ptr), device_of(dst.ptr)) == (0, 1), f"current context's device {context_device()}"
    dst.copy_from_device(src)
    assert np.array_equal(np.frombuffer(dst.tobytes(), dtype=np.uint8), data)


@pytest.mark.gpu
def test_sixteen_threads_on_both_devices_return_to_zero(two_devices):
    trackers = {}
    for device in (0, 1):
        gpu.setDevice(device)
        upstream = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size="64MiB")
        trackers[device] = rmm.mr.StatisticsResourceAdaptor(upstream)
    errors = []

    def work(index):
        try:
            device = index % 2
            gpu.setDevice(device)
            rng = np.random.default_rng(index)
            live = []
            for _ in range(2000):
                if live and rng.random() < 0.5:
                    live.pop(int(rng.integers(len(live))))
                else:
                    live.append(rmm.DeviceBuffer(size=int(rng.integers(1, 64 * 1024)), mr=trackers[device]))
            live.clear()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for device, mr in trackers.items():
        assert mr.allocation_counts.current_bytes == 0, device


DASK_SCRIPT = """
import cupy
from dask_cuda import LocalCUDACluster
from distributed import Client


def reduce_on_worker(seed):
    import cupy, rmm
    from rmm.allocators.cupy import rmm_cupy_allocator

    cupy.cuda.set_allocator(rmm_cupy_allocator)
    a = cupy.arange(1 << 22, dtype=cupy.float32) * (seed + 1)
    total = float((a * 2).sum())
    del a
    mr = rmm.mr.get_current_device_resource()
    return cupy.cuda.runtime.getDevice(), total > 0, mr.get_allocated_bytes()


with LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,1", rmm_pool_size="256MiB", rmm_track_allocations=True,
                      dashboard_address=None, protocol="tcp") as cluster:
    with Client(cluster) as client:
        workers = list(client.scheduler_info()["workers"])
        print("workers", len(workers))
        futures = [client.submit(reduce_on_worker, i, workers=[w], pure=False) for i, w in enumerate(workers)]
        results = client.gather(futures)
        print("devices", sorted({r[0] for r in results}))
        print("sums", all(r[1] for r in results))
        print("tracked", [r[2] for r in results])
"""


@pytest.mark.gpu
def test_dask_cuda_with_two_workers(two_devices):
    if not DASK_SITE or not os.path.isdir(DASK_SITE):
        pytest.skip("Dask-CUDA not carried (RMM_TEST_DASK_SITE unset; see scripts/gpu-stage.sh)")
    pytest.importorskip("cupy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*sys.path, DASK_SITE]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DASK_SCRIPT)], env=env, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split("\n")
    assert "workers 2" in lines
    assert "sums True" in lines
    assert "tracked [0, 0]" in lines, done.stdout


# The driver calls of CUDA's stream-ordered IPC (what UCX does for Dask between workers), through
# ctypes so the test depends on libcuda's C signatures only.
IPC_DRIVER = """
import ctypes

cuda = ctypes.CDLL("libcuda.so.1")
POSIX_FD, MEMPOOL_HANDLE, LOCATION_DEVICE, READWRITE = 1, 17, 1, 3


class ExportData(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int), ("flags", ctypes.c_int)]


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what}: CUresult {result}")
"""

IPC_CHILD = """
import os, sys
import numpy as np
import rmm
from rmm._cuda import gpu

fd, size, device = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
data = ExportData.from_buffer_copy(bytes.fromhex(sys.argv[4]))
expected = np.arange(size, dtype=np.uint64).astype(np.uint8)

gpu.setDevice(device)
pool = ctypes.c_void_p()
check(cuda.cuMemPoolImportFromShareableHandle(ctypes.byref(pool), ctypes.c_void_p(fd), POSIX_FD, ctypes.c_ulonglong(0)), "import pool")
if device != 0:
    # The imported pool lives on device 0; the device this process works on must be granted access.
    access = AccessDesc(LOCATION_DEVICE, device, READWRITE)
    check(cuda.cuMemPoolSetAccess(pool, ctypes.byref(access), ctypes.c_size_t(1)), "pool access")
ptr = ctypes.c_uint64()
check(cuda.cuMemPoolImportPointer(ctypes.byref(ptr), pool, ctypes.byref(data)), "import pointer")

host = np.empty(size, dtype=np.uint8)
check(cuda.cuMemcpyDtoH_v2(host.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr.value), ctypes.c_size_t(size)), "read")
assert np.array_equal(host, expected), "bytes read through the import differ"

local = rmm.DeviceBuffer(size=size)  # on `device`, from this process's own resource
check(cuda.cuMemcpyDtoD_v2(ctypes.c_uint64(local.ptr), ctypes.c_uint64(ptr.value), ctypes.c_size_t(size)), "copy")
assert np.array_equal(np.frombuffer(local.tobytes(), dtype=np.uint8), expected), "device copy differs"
check(cuda.cuMemFree_v2(ctypes.c_uint64(ptr.value)), "free import")
print("ipc ok on device", device)
"""


@pytest.mark.gpu
def test_cuda_async_ipc_export_to_another_process():
    """`CudaAsyncMemoryResource(enable_ipc=True)` on device 0: a buffer's pool and pointer are exported
    (POSIX file descriptor + pointer export data) and imported by a second process, which reads the
    bytes and copies them into its own rmm buffer on device 1 (device 0 when only one GPU is
    visible). The exporter's tracked bytes return to 0 after the buffer is freed."""
    if gpu.getDeviceCount() < 1:
        pytest.skip("needs a CUDA GPU")
    exec_globals = {}
    exec(IPC_DRIVER, exec_globals)
    cuda, check = exec_globals["cuda"], exec_globals["check"]
    ExportData = exec_globals["ExportData"]
    previous = gpu.getDevice()
    gpu.setDevice(0)
    try:
        try:
            pool_mr = rmm.mr.CudaAsyncMemoryResource(enable_ipc=True)
        except RuntimeError as e:
            pytest.skip(f"IPC handles unsupported here: {e}")
        mr = rmm.mr.TrackingResourceAdaptor(pool_mr)
        size = 3 * MIB + 17
        expected = np.arange(size, dtype=np.uint64).astype(np.uint8)
        buf = rmm.DeviceBuffer(size=size, mr=mr)
        buf.copy_from_host(expected)
        import ctypes

        check(cuda.cuCtxSynchronize(), "synchronize")  # the allocation and copy done before export

        pool = ctypes.c_void_p()
        check(cuda.cuPointerGetAttribute(ctypes.byref(pool), 17, ctypes.c_uint64(buf.ptr)), "pool of pointer")
        fd = ctypes.c_int(-1)
        check(cuda.cuMemPoolExportToShareableHandle(ctypes.byref(fd), pool, 1, ctypes.c_ulonglong(0)), "export pool")
        data = ExportData()
        check(cuda.cuMemPoolExportPointer(ctypes.byref(data), ctypes.c_uint64(buf.ptr)), "export pointer")
        device = 1 if gpu.getDeviceCount() >= 2 else 0
        try:
            done = subprocess.run(
                [sys.executable, "-c", IPC_DRIVER + textwrap.dedent(IPC_CHILD), str(fd.value), str(size), str(device),
                 bytes(data).hex()],
                pass_fds=(fd.value,), capture_output=True, text=True, timeout=120,
                env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
            )
        finally:
            os.close(fd.value)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"ipc ok on device {device}" in done.stdout
        assert mr.get_allocated_bytes() == size
        del buf
        assert mr.get_allocated_bytes() == 0
    finally:
        gpu.setDevice(previous)
