"""The package layout is RMM's: module paths, the names each exports, what `import rmm` reaches."""

import importlib
import pathlib
import subprocess
import sys

import pytest

import rmm

# RMM 26.x's public names per module (its `__all__`s, rapidsai/rmm python/rmm/rmm at 5d50a37).
MR_NAMES = [
    "ArenaMemoryResource", "BinningMemoryResource", "CallbackMemoryResource", "CudaAsyncMemoryResource",
    "CudaAsyncViewMemoryResource", "CudaMemoryResource", "DeviceMemoryResource",
    "FailureCallbackResourceAdaptor", "FixedSizeMemoryResource", "LimitingResourceAdaptor",
    "LoggingResourceAdaptor", "ManagedMemoryResource", "PinnedHostMemoryResource", "PoolMemoryResource",
    "PrefetchResourceAdaptor", "SamHeadroomMemoryResource", "StatisticsResourceAdaptor",
    "SystemMemoryResource", "TrackingResourceAdaptor", "UpstreamResourceAdaptor",
    "available_device_memory", "disable_logging", "enable_logging", "experimental",
    "get_current_device_resource", "get_log_filenames", "get_per_device_resource", "is_initialized",
    "set_current_device_resource", "set_per_device_resource",
]  # fmt: skip
RMM_NAMES = [
    "DeviceBuffer", "disable_logging", "RMMError", "enable_logging", "flush_logger", "get_flush_level",
    "get_log_filenames", "get_logging_level", "is_initialized", "level_enum", "mr",
    "register_reinitialize_hook", "reinitialize", "set_flush_level", "set_logging_level", "should_log",
    "unregister_reinitialize_hook",
]  # fmt: skip
MODULES = {
    "rmm.mr": MR_NAMES,
    "rmm.pylibrmm.memory_resource": MR_NAMES,
    "rmm.mr.experimental": ["CudaAsyncManagedMemoryResource", "ExpandablePoolMemoryResource", "ImportedAllocation"],
    "rmm.pylibrmm.memory_resource.experimental": [
        "CudaAsyncManagedMemoryResource", "ExpandablePoolMemoryResource", "ImportedAllocation",
    ],
    "rmm.pylibrmm": ["CudaStreamPool", "CudaStreamFlags", "DeviceBuffer", "memory_resource"],
    "rmm.pylibrmm.device_buffer": [
        "DeviceBuffer", "to_device", "copy_ptr_to_host", "copy_host_to_ptr", "copy_device_to_ptr",
    ],
    "rmm.pylibrmm.stream": [
        "Stream", "CudaStreamFlags", "DEFAULT_STREAM", "LEGACY_DEFAULT_STREAM", "PER_THREAD_DEFAULT_STREAM",
    ],
    "rmm.pylibrmm.cuda_stream_pool": ["CudaStreamPool"],
    "rmm.pylibrmm.logger": [
        "level_enum", "should_log", "set_logging_level", "get_logging_level", "flush_logger",
        "set_flush_level", "get_flush_level",
    ],
    "rmm.pylibrmm.memory_resource._memory_resource": MR_NAMES[:-11] + ["_initialize", "_flush_logs", "_append_id"],
    "rmm.librmm._logger": ["level_enum"],
    "rmm.statistics": [
        "Statistics", "enable_statistics", "get_statistics", "push_statistics", "pop_statistics", "statistics",
        "ProfilerRecords", "ProfilerContext", "profiler", "default_profiler_records",
        "_get_descriptive_name_of_object",
    ],
    "rmm.allocators.cupy": ["rmm_cupy_allocator"],
    "rmm.allocators.torch": ["rmm_torch_allocator"],
    "rmm.rmm": ["RMMError", "reinitialize", "is_initialized", "register_reinitialize_hook",
                "unregister_reinitialize_hook"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_exports_rmms_names(module):
    mod = importlib.import_module(module)
    missing = [name for name in MODULES[module] if not hasattr(mod, name)]
    assert missing == []


def test_rmm_top_level_names():
    assert [name for name in RMM_NAMES if not hasattr(rmm, name)] == []
    assert set(RMM_NAMES) <= set(rmm.__all__)


@pytest.mark.parametrize("module", ["rmm.mr", "rmm.pylibrmm.memory_resource"])
def test_mr_all_is_rmms(module):
    assert sorted(importlib.import_module(module).__all__) == sorted(MR_NAMES)


def test_mr_package_and_pylibrmm_share_the_objects():
    import rmm.pylibrmm.memory_resource as pmr

    for name in MR_NAMES:
        if name != "experimental":  # two modules, as in RMM
            assert getattr(rmm.mr, name) is getattr(pmr, name)
    assert rmm.mr.experimental.CudaAsyncManagedMemoryResource is pmr.experimental.CudaAsyncManagedMemoryResource
    assert rmm.mr.experimental.__name__ == "rmm.mr.experimental"
    assert pmr.experimental.__name__ == "rmm.pylibrmm.memory_resource.experimental"
    assert rmm.DeviceBuffer is rmm.pylibrmm.device_buffer.DeviceBuffer is rmm.pylibrmm.DeviceBuffer


def test_import_rmm_reaches_what_rmm_reaches():
    # RMM's tests use these after a bare `import rmm` (test_lifecycle, conftest).
    code = "import rmm; rmm.pylibrmm.stream.Stream; rmm.statistics.statistics; rmm.mr.experimental"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version_and_git_commit():
    # The RMM release rmm-rs stands in for, as RMM's VERSION file spells it; rmm-rs's own beside it.
    assert rmm.__version__ == "26.10.00"
    assert rmm._version.__rmm_rs_version__ == rmm._rmm.__version__
    assert isinstance(rmm.__version__, str) and rmm.__version__
    assert isinstance(rmm.__git_commit__, str)
    git_commit = pathlib.Path(rmm.__file__).parent / "GIT_COMMIT"
    if git_commit.exists():
        assert rmm.__git_commit__ == git_commit.read_text().strip()
    else:
        assert rmm.__git_commit__ == ""


def test_rmm_error_carries_its_code():
    err = rmm.RMMError(7, "out of luck")
    assert isinstance(err, Exception)
    assert err.errcode == 7
    assert str(err) == "out of luck"


def test_get_include_and_cmake_dir_are_directories_or_raise():
    for get in (rmm.get_include, rmm.get_cmake_dir):
        try:
            path = get()
        except FileNotFoundError as e:
            assert "does not exist" in str(e)
        else:
            assert pathlib.Path(path).is_dir()


def test_cupy_allocator_without_cupy_raises_module_not_found():
    from rmm.allocators import cupy as rmm_cupy

    if rmm_cupy.cupy is not None:
        pytest.skip("CuPy is installed")
    with pytest.raises(ModuleNotFoundError, match="cupy"):
        rmm_cupy.rmm_cupy_allocator(8)


def test_torch_allocator_is_none_without_a_cuda_torch():
    from rmm.allocators.torch import rmm_torch_allocator

    try:
        import torch
    except ImportError:
        assert rmm_torch_allocator is None
        return
    assert (rmm_torch_allocator is None) == (not torch.cuda.is_available())


def test_numba_allocator_module_needs_numba():
    try:
        import numba.cuda  # noqa: F401
        import cuda.bindings  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            importlib.import_module("rmm.allocators.numba")
        return
    from rmm.allocators.numba import RMMNumbaManager, _numba_memory_manager

    assert _numba_memory_manager is RMMNumbaManager


def test_torch_allocator_library_is_the_loaded_librmm_or_rmm_librmm(monkeypatch, tmp_path):
    from rmm.allocators.torch import _librmm_path

    loaded = rmm._rmm._librmm_path()
    if loaded is not None:  # the wheel (or a test that loaded librmm_rs.so first)
        assert _librmm_path() == str(pathlib.Path(loaded).absolute())
        return
    monkeypatch.delenv("RMM_LIBRMM", raising=False)
    with pytest.raises(FileNotFoundError, match="RMM_LIBRMM"):
        _librmm_path()
    monkeypatch.setenv("RMM_LIBRMM", str(tmp_path / "librmm_rs.so"))
    assert _librmm_path() == str(tmp_path / "librmm_rs.so")
