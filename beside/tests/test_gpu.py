"""rmm_rs's resources as RAPIDS RMM 26.10's current device resource on a GPU: RMM's DeviceBuffer,
RMM's CuPy, Numba and PyTorch allocators and Dask-CUDA allocate from our engine, and RMM's own
resources serve as the upstream of ours. Every test here needs a GPU (skipped in host mode).

Numba, PyTorch and Dask-CUDA fix their allocator once per process, so those tests run a script in a
fresh interpreter (the same sys.path) and read its lines."""

import os
import subprocess
import sys
import textwrap

import pytest

import rmm
import rmm.mr
import rmm_rs

pytestmark = pytest.mark.gpu

DASK_SITE = os.environ.get("RMM_TEST_DASK_SITE", "")


@pytest.fixture
def current():
    """Restores RMM's current device resource after the test."""
    previous = rmm.mr.get_current_device_resource()
    yield
    rmm.mr.set_current_device_resource(previous)


def pageable_memory_access():
    from cuda.bindings import runtime

    err, device = runtime.cudaGetDevice()
    err, value = runtime.cudaDeviceGetAttribute(runtime.cudaDeviceAttr.cudaDevAttrPageableMemoryAccess, device)
    return err == runtime.cudaError_t.cudaSuccess and value == 1


def run_script(script, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


# Every resource of ours, made on the GPU: (id, maker(tmp_path)).
def _cuda():
    return rmm_rs.CudaMemoryResource()


RESOURCES = [
    ("cuda", lambda tmp: rmm_rs.CudaMemoryResource()),
    ("managed", lambda tmp: rmm_rs.ManagedMemoryResource()),
    ("pinned_host", lambda tmp: rmm_rs.PinnedHostMemoryResource()),
    ("system", lambda tmp: rmm_rs.SystemMemoryResource()),
    ("sam_headroom", lambda tmp: rmm_rs.SamHeadroomMemoryResource(1 << 30)),
    ("cuda_async", lambda tmp: rmm_rs.CudaAsyncMemoryResource(initial_pool_size="64MiB")),
    ("cuda_async_managed", lambda tmp: rmm_rs.CudaAsyncManagedMemoryResource()),
    ("cuda_async_view", lambda tmp: _async_view()),
    ("callback", lambda tmp: _callback()),
    ("pool", lambda tmp: rmm_rs.PoolMemoryResource(_cuda(), "256MiB", "1GiB")),
    ("arena", lambda tmp: rmm_rs.ArenaMemoryResource(_cuda(), "256MiB")),
    ("fixed_size", lambda tmp: rmm_rs.FixedSizeMemoryResource(_cuda(), 1 << 20, 16)),
    ("binning", lambda tmp: rmm_rs.BinningMemoryResource(_cuda(), 8, 20)),
    ("limiting", lambda tmp: rmm_rs.LimitingResourceAdaptor(_cuda(), 1 << 30)),
    ("logging", lambda tmp: rmm_rs.LoggingResourceAdaptor(_cuda(), str(tmp / "log.csv"))),
    ("statistics", lambda tmp: rmm_rs.StatisticsResourceAdaptor(_cuda())),
    ("tracking", lambda tmp: rmm_rs.TrackingResourceAdaptor(_cuda())),
    ("failure_callback", lambda tmp: rmm_rs.FailureCallbackResourceAdaptor(_cuda(), lambda n: False)),
    ("prefetch", lambda tmp: rmm_rs.PrefetchResourceAdaptor(rmm_rs.ManagedMemoryResource())),
    ("aligned", lambda tmp: rmm_rs.AlignedResourceAdaptor(_cuda(), 4096, 0)),
    ("thread_safe", lambda tmp: rmm_rs.ThreadSafeResourceAdaptor(_cuda())),
]


def _async_view():
    from cuda.bindings import runtime

    err, device = runtime.cudaGetDevice()
    err, pool = runtime.cudaDeviceGetDefaultMemPool(device)
    assert err == runtime.cudaError_t.cudaSuccess
    return rmm_rs.CudaAsyncViewMemoryResource(pool)


def _callback():
    base = rmm_rs.CudaMemoryResource()
    return rmm_rs.CallbackMemoryResource(base.allocate, base.deallocate)


@pytest.mark.parametrize("make", [m for _, m in RESOURCES], ids=[i for i, _ in RESOURCES])
def test_every_resource_of_ours_as_rmms_current_device_resource(make, tmp_path, current, request):
    name = request.node.callspec.id
    if name in ("system", "sam_headroom") and not pageable_memory_access():
        pytest.skip("System memory not supported (no pageable memory access on this GPU), as RMM skips")
    mr = make(tmp_path)
    rmm.mr.set_current_device_resource(mr)
    assert rmm.mr.get_current_device_resource() is mr
    data = bytes(range(256)) * 4096  # 1 MiB
    for size in (1, 1000, 4096, 1 << 20):
        buf = rmm.DeviceBuffer.to_device(data[:size])  # RMM's DeviceBuffer from the current resource
        assert buf.size == size
        assert buf.tobytes() == data[:size]
        copy = buf.copy()
        assert copy.tobytes() == data[:size]
    empty = rmm.DeviceBuffer(size=0)
    assert empty.size == 0


def test_device_buffers_count_in_our_statistics_and_return_to_our_pool(current):
    pool = rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "64MiB")
    stats = rmm_rs.StatisticsResourceAdaptor(pool)
    rmm.mr.set_current_device_resource(stats)
    bufs = [rmm.DeviceBuffer(size=1 << 20) for _ in range(10)]
    assert stats.allocation_counts.current_bytes == 10 << 20
    assert pool.pool_size() >= 10 << 20
    del bufs
    assert stats.allocation_counts.current_bytes == 0
    assert stats.allocation_counts.total_count == 10


def test_rmm_cupy_allocator_over_our_pool(current):
    cupy = pytest.importorskip("cupy")
    from rmm.allocators.cupy import rmm_cupy_allocator

    stats = rmm_rs.StatisticsResourceAdaptor(rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "256MiB"))
    rmm.mr.set_current_device_resource(stats)
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        a = cupy.arange(1 << 20, dtype=cupy.float64)
        b = (a * 2).sum()
        assert float(b) == float((1 << 20) * ((1 << 20) - 1))
        assert stats.allocation_counts.current_count >= 2
        assert type(a.data.mem._owner).__name__ == "DeviceBuffer"
        del a, b
    finally:
        cupy.cuda.set_allocator(previous)
    assert stats.allocation_counts.current_bytes == 0


def test_an_rmm_resource_under_our_pool(current):
    rmm_async = rmm.mr.StatisticsResourceAdaptor(rmm.mr.CudaAsyncMemoryResource())
    ours = rmm_rs.StatisticsResourceAdaptor(rmm_rs.PoolMemoryResource(rmm_async, "64MiB"))
    assert rmm_async.allocation_counts.current_bytes == 64 << 20  # the pool's initial block, from RMM
    rmm.mr.set_current_device_resource(ours)
    bufs = [rmm.DeviceBuffer(size=8 << 20) for _ in range(16)]  # grows the pool through RMM's resource
    assert ours.allocation_counts.current_bytes == 128 << 20
    assert rmm_async.allocation_counts.current_bytes >= 128 << 20
    del bufs
    assert ours.allocation_counts.current_bytes == 0


NUMBA = """
import numpy as np
from numba import cuda
import rmm, rmm_rs
from rmm.allocators.numba import RMMNumbaManager

stats = rmm_rs.StatisticsResourceAdaptor(rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "64MiB"))
rmm.mr.set_current_device_resource(stats)
cuda.set_memory_manager(RMMNumbaManager)

# Allocation, copies and a device-to-device copy only: the memory manager is what is under test,
# and compiling a kernel needs a Numba whose NumPy support matches the machine's NumPy.
host = np.arange(1 << 16, dtype=np.float64)
dev = cuda.to_device(host)
other = cuda.device_array_like(dev)
other.copy_to_device(dev)
ok = bool((other.copy_to_host() == host).all())
print("numba", ok, stats.allocation_counts.current_count >= 2)
del dev, other
import gc
gc.collect()
cuda.current_context().deallocations.clear()
cuda.synchronize()
print("after", stats.allocation_counts.current_bytes)
"""


def test_rmm_numba_manager_over_our_pool():
    pytest.importorskip("numba.cuda")
    out = run_script(NUMBA)
    assert "numba True True" in out, out
    assert "after 0" in out, out


TORCH = """
import gc
import torch
import rmm, rmm_rs
from rmm.allocators.torch import rmm_torch_allocator

stats = rmm_rs.StatisticsResourceAdaptor(rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "256MiB"))
rmm.mr.set_current_device_resource(stats)
torch.cuda.memory.change_current_allocator(rmm_torch_allocator)

torch.manual_seed(0)
x = torch.randn(4096, 64, device="cuda")
y = (x @ torch.randn(64, 1, device="cuda")).tanh()
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
first = None
for step in range(200):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    first = first if first is not None else loss.item()
last = loss.item()
print("loss", first, last, last < first / 4)
print("counted", stats.allocation_counts.total_count > 100, stats.allocation_counts.current_bytes > 0)
del x, y, model, opt, loss
gc.collect()
torch.cuda.synchronize()
if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):  # cuBLAS keeps a workspace from the allocator
    torch._C._cuda_clearCublasWorkspaces()
torch.cuda.synchronize()
print("after", stats.allocation_counts.current_bytes, stats.allocation_counts.current_count)
"""


def test_rmm_torch_allocator_over_our_pool_trains_and_gives_everything_back():
    pytest.importorskip("torch")
    out = run_script(TORCH)
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert lines["loss"].endswith("True"), out
    assert lines["counted"] == "True True", out
    assert lines["after"] == "0 0", out


DASK = """
import rmm_rs  # noqa: F401 (importable on the workers: they share this sys.path)
from dask_cuda import LocalCUDACluster
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin


class OurPool(WorkerPlugin):
    def setup(self, worker):
        import cupy, rmm, rmm_rs
        from rmm.allocators.cupy import rmm_cupy_allocator

        pool = rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "256MiB")
        rmm.mr.set_current_device_resource(rmm_rs.StatisticsResourceAdaptor(pool))
        cupy.cuda.set_allocator(rmm_cupy_allocator)


def work(n):
    import cupy, rmm
    a = cupy.arange(n, dtype=cupy.float64)
    total = float(a.sum())
    mr = rmm.mr.get_current_device_resource()
    return type(mr).__module__, type(mr).__name__, total == n * (n - 1) / 2, mr.allocation_counts.total_count


def idle():
    import rmm
    return rmm.mr.get_current_device_resource().allocation_counts.current_bytes


def run(client):
    client.register_plugin(OurPool())
    workers = list(client.scheduler_info()["workers"])
    print("workers", len(workers))
    results = [client.submit(work, 1 << 20, workers=[w], pure=False).result() for w in workers]
    for module, name, ok, count in results:
        print("result", module, name, ok, count > 0)
    print("idle", sorted(client.run(idle).values()))


import os, subprocess, sys
import cupy
from distributed import LocalCluster

if cupy.cuda.runtime.getDeviceCount() >= 2:
    with LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES=[0, 1], dashboard_address=None, protocol="tcp") as cluster:
        with Client(cluster) as client:
            run(client)
else:
    # LocalCUDACluster puts one worker on each visible device, so on one GPU two Dask-CUDA workers
    # are two `dask cuda worker` processes (CUDAWorker) joined to one scheduler; run as a module,
    # dask_cuda.cli is that worker command itself (no `worker` subcommand word).
    with LocalCluster(n_workers=0, dashboard_address=None, protocol="tcp") as cluster:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
        workers = [
            subprocess.Popen(
                [sys.executable, "-m", "dask_cuda.cli", cluster.scheduler_address,
                 "--nthreads", "1", "--name", f"ours-{i}", "--no-dashboard"],
                env=env,
            )
            for i in range(2)
        ]
        try:
            with Client(cluster) as client:
                client.wait_for_workers(2, timeout=240)
                run(client)
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(timeout=60)
"""


def test_dask_cuda_two_workers_on_our_resources():
    if not DASK_SITE or not os.path.isdir(DASK_SITE):
        pytest.skip("Dask-CUDA not carried (RMM_TEST_DASK_SITE unset; see scripts/gpu-stage.sh)")
    pytest.importorskip("cupy")
    sys.path.append(DASK_SITE)
    try:
        out = run_script(DASK, timeout=540)
    finally:
        sys.path.remove(DASK_SITE)
    assert "workers 2" in out, out
    results = [line for line in out.splitlines() if line.startswith("result")]
    assert results == ["result rmm_rs._resources StatisticsResourceAdaptor True True"] * 2, out
    assert "idle [0, 0]" in out, out


def test_rmm_rs_statistics_helpers_see_our_adaptor(current):
    import rmm_rs.statistics

    rmm.mr.set_current_device_resource(rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), "64MiB"))
    assert rmm_rs.statistics.get_statistics() is None
    with rmm_rs.statistics.statistics():
        mr = rmm.mr.get_current_device_resource()
        assert isinstance(mr, rmm_rs.StatisticsResourceAdaptor)
        buf = rmm.DeviceBuffer(size=1000)
        assert rmm_rs.statistics.get_statistics().current_bytes == 1000
        with rmm_rs.statistics.statistics():  # nested: a new frame on the same adaptor
            more = rmm.DeviceBuffer(size=500)
            assert rmm_rs.statistics.get_statistics().current_bytes == 500
            del more
        del buf
        assert rmm_rs.statistics.get_statistics().peak_bytes == 1500
    assert isinstance(rmm.mr.get_current_device_resource(), rmm_rs.PoolMemoryResource)
