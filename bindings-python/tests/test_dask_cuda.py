"""Dask-CUDA on our package, unchanged: LocalCUDACluster's RMM options set up each worker's
resource through rmm.reinitialize / rmm.mr / rmm.enable_logging, and CuPy work on the workers
allocates through rmm_cupy_allocator.

Dask-CUDA and its pure dependencies are not on the GPU machine: scripts/gpu-stage.sh carries them
as wheels (.whl/dask/) when they fit in the carry limit, and scripts/gpu-run.sh installs them into
the directory named by RMM_TEST_DASK_SITE. Without it (or without CuPy) the test skips.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

DASK_SITE = os.environ.get("RMM_TEST_DASK_SITE", "")

# Runs in a fresh interpreter with Dask-CUDA importable; prints one line per check.
SCRIPT = """
import os, sys, tempfile
import cupy
from dask_cuda import LocalCUDACluster
from distributed import Client


def resource_stack():
    import rmm

    names = []
    mr = rmm.mr.get_current_device_resource()
    while mr is not None:
        names.append(type(mr).__name__)
        mr = mr.get_upstream() if isinstance(mr, rmm.mr.UpstreamResourceAdaptor) else None
    return names


def cupy_on_worker():
    import cupy, rmm

    a = cupy.arange(1 << 20, dtype=cupy.float32)
    return int(a.sum()) == (1 << 20) * ((1 << 20) - 1) // 2, type(a.data.mem._owner).__name__


def log_names():
    import rmm

    return rmm.get_log_filenames()


def run(**options):
    with LocalCUDACluster(n_workers=1, dashboard_address=None, protocol="tcp", **options) as cluster:
        with Client(cluster) as client:
            (stack,) = client.run(resource_stack).values()
            print("stack", "->".join(stack))
            if options.get("rmm_allocator_external_lib_list"):
                ok, owner = client.submit(cupy_on_worker, pure=False).result()
                print("cupy", ok, owner)
            if options.get("rmm_log_directory"):
                (names,) = client.run(log_names).values()
                print("log", all(n and n.startswith(options["rmm_log_directory"]) for n in names.values()))


for opts in (
    dict(rmm_pool_size="256MiB", rmm_allocator_external_lib_list=["cupy"]),
    dict(rmm_pool_size="256MiB", rmm_maximum_pool_size="512MiB", rmm_track_allocations=True),
    dict(rmm_async=True, rmm_pool_size="256MiB", rmm_release_threshold="512MiB"),
    dict(rmm_managed_memory=True),
    dict(rmm_pool_size="256MiB", rmm_log_directory=tempfile.mkdtemp()),
):
    run(**opts)
"""


def test_local_cuda_cluster_with_rmm_options():
    if not DASK_SITE or not os.path.isdir(DASK_SITE):
        pytest.skip("Dask-CUDA not carried (RMM_TEST_DASK_SITE unset; see scripts/gpu-stage.sh)")
    pytest.importorskip("cupy")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*sys.path, DASK_SITE]))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.split("\n")
    assert "stack PoolMemoryResource->CudaMemoryResource" in lines
    assert "cupy True DeviceBuffer" in lines
    assert "stack TrackingResourceAdaptor->PoolMemoryResource->CudaMemoryResource" in lines
    assert "stack CudaAsyncMemoryResource" in lines
    assert "stack ManagedMemoryResource" in lines
    assert "stack LoggingResourceAdaptor->PoolMemoryResource->CudaMemoryResource" in lines
    assert "log True" in lines
