"""rmm.allocators on a GPU: CuPy, Numba (both the set_memory_manager and the
NUMBA_CUDA_MEMORY_MANAGER forms) and PyTorch allocate through the current RMM resource, so a
statistics adaptor set from Python sees their memory. Each skips without its package."""

import os
import subprocess
import sys
import textwrap

import pytest

import rmm

pytestmark = pytest.mark.gpu


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (allocators must be chosen before the library's first
    allocation) with this rmm importable; returns its stdout."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cupy_allocations_are_rmm_device_buffers():
    cupy = pytest.importorskip("cupy")
    from rmm.allocators.cupy import rmm_cupy_allocator

    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        with rmm.statistics.statistics():
            a = cupy.arange(1000, dtype=cupy.float64)
            assert isinstance(a.data.mem._owner, rmm.DeviceBuffer)
            assert rmm.statistics.get_statistics().current_bytes >= 8000
            assert int((a * 2).sum()) == 999000
            del a
        m = rmm_cupy_allocator(0)
        assert m.mem.size == 0 and m.mem.ptr == 0
        with cupy.cuda.Stream() as stream:
            m = rmm_cupy_allocator(42)
            assert m.mem.size == 42 and m.mem.ptr != 0
            stream.synchronize()
    finally:
        cupy.cuda.set_allocator(previous)


def test_numba_memory_manager_through_the_environment_variable():
    pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda.bindings")
    out = run_python(
        """
        import numpy as np
        from numba import cuda
        import rmm, rmm.statistics
        from rmm.allocators.numba import RMMNumbaManager
        with rmm.statistics.statistics():
            d = cuda.to_device(np.arange(1000, dtype=np.int64))
            print(type(cuda.current_context().memory_manager).__name__)
            print(rmm.statistics.get_statistics().current_bytes >= 8000)
            assert (d.copy_to_host() == np.arange(1000)).all()
            del d
        """,
        NUMBA_CUDA_MEMORY_MANAGER="rmm.allocators.numba",
    )
    assert out.split() == ["RMMNumbaManager", "True"]


def test_numba_memory_manager_set_in_code():
    pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda.bindings")
    out = run_python(
        """
        import numpy as np
        from numba import cuda
        import rmm, rmm.statistics
        from rmm.allocators.numba import RMMNumbaManager
        cuda.set_memory_manager(RMMNumbaManager)
        with rmm.statistics.statistics():
            d = cuda.device_array(1000, dtype=np.int32)
            print(rmm.statistics.get_statistics().current_bytes)
            del d
            import gc; gc.collect()
            print(rmm.statistics.get_statistics().current_bytes)
        try:
            cuda.current_context().get_memory_info()
        except NotImplementedError:
            print("no memory info")
        """
    )
    assert out.split() == ["4000", "0", "no", "memory", "info"]


def test_torch_allocations_go_through_the_current_resource():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    out = run_python(
        """
        import gc
        import torch
        from torch.cuda.memory import change_current_allocator
        import rmm, rmm.statistics
        from rmm.allocators.torch import rmm_torch_allocator
        change_current_allocator(rmm_torch_allocator)
        with rmm.statistics.statistics():
            x = torch.arange(1000, device="cuda")
            print(rmm.statistics.get_statistics().current_bytes >= 8000)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                y = torch.ones(500, device="cuda")
            torch.cuda.current_stream().wait_stream(s)
            print(int(x.sum()) + int(y.sum()))
            del x, y
            gc.collect()
            torch.cuda.synchronize()
            print(rmm.statistics.get_statistics().current_bytes)
        """
    )
    assert out.split() == ["True", str(499500 + 500), "0"]


def test_importing_the_torch_allocator_never_raises_without_a_native_library(monkeypatch):
    # A stand-in PyTorch with CUDA, and no native library to name: RMM's module imports (its
    # allocator is built from a file in its package); ours leaves rmm_torch_allocator None.
    import importlib
    import sys
    import types

    made = []
    torch = types.ModuleType("torch")
    torch.cuda = types.ModuleType("torch.cuda")
    torch.cuda.is_available = lambda: True
    torch.cuda.memory = types.ModuleType("torch.cuda.memory")
    torch.cuda.memory.CUDAPluggableAllocator = lambda *a, **k: made.append((a, k)) or object()
    for name, module in [("torch", torch), ("torch.cuda", torch.cuda), ("torch.cuda.memory", torch.cuda.memory)]:
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "rmm.allocators.torch", raising=False)
    monkeypatch.delenv("RMM_LIBRMM", raising=False)
    monkeypatch.setattr(rmm._rmm, "_librmm_path", lambda: None)
    module = importlib.import_module("rmm.allocators.torch")
    assert module.rmm_torch_allocator is None and made == []

    monkeypatch.setenv("RMM_LIBRMM", "/somewhere/librmm_rs.so")
    module = importlib.reload(module)
    assert module.rmm_torch_allocator is not None
    assert made[0][0] == ("/somewhere/librmm_rs.so",)
    monkeypatch.delitem(sys.modules, "rmm.allocators.torch", raising=False)
