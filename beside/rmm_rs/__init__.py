"""rmm-rs beside RAPIDS RMM: rmm-rs's memory resources (one Rust engine, librmm_rs.so) as subclasses
of RMM 26.10's ``rmm.mr.DeviceMemoryResource``, for processes that use RMM itself (cuDF, cuML,
Dask-CUDA, PyTorch through RMM's allocator...).

    import rmm, rmm_rs
    pool = rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), initial_pool_size="1 GiB")
    rmm.mr.set_current_device_resource(pool)   # RMM's DeviceBuffer, cuDF, ... now use our pool

See docs/beside-rmm.md for when to use this module and when rmm-rs's drop-in ``rmm``.
"""

import os

# RMM first: it loads librmm.so (and rapids_logger), which our extension links by SONAME.
import rmm  # noqa: F401
import rmm.mr  # noqa: F401

from rmm_rs._resources import (
    AlignedResourceAdaptor,
    ArenaMemoryResource,
    BaseMemoryResource,
    BaseResourceAdaptor,
    BinningMemoryResource,
    CallbackMemoryResource,
    CudaAsyncManagedMemoryResource,
    CudaAsyncMemoryResource,
    CudaAsyncViewMemoryResource,
    CudaMemoryResource,
    FailureCallbackResourceAdaptor,
    FixedSizeMemoryResource,
    LimitingResourceAdaptor,
    LoggingResourceAdaptor,
    ManagedMemoryResource,
    PinnedHostMemoryResource,
    PoolMemoryResource,
    PrefetchResourceAdaptor,
    SamHeadroomMemoryResource,
    SimulatedMemoryResource,
    StatisticsResourceAdaptor,
    SystemMemoryResource,
    ThreadSafeResourceAdaptor,
    TrackingResourceAdaptor,
    is_host_mode,
)
from rmm_rs._version import __version__


def get_include() -> str:
    """The folder with our C and C++ headers (``rmm_rs/rmm_c.h``, ``rmm_rs/resource.hpp``), to put
    next to RMM's (``librmm``'s include folder) when building C++ or Cython against both."""
    return os.path.join(os.path.dirname(__file__), "include")


def get_library_dir() -> str:
    """The folder with ``librmm_rs.so``."""
    return os.path.join(os.path.dirname(__file__), "lib")


__all__ = [
    "AlignedResourceAdaptor",
    "ArenaMemoryResource",
    "BaseMemoryResource",
    "BaseResourceAdaptor",
    "BinningMemoryResource",
    "CallbackMemoryResource",
    "CudaAsyncManagedMemoryResource",
    "CudaAsyncMemoryResource",
    "CudaAsyncViewMemoryResource",
    "CudaMemoryResource",
    "FailureCallbackResourceAdaptor",
    "FixedSizeMemoryResource",
    "LimitingResourceAdaptor",
    "LoggingResourceAdaptor",
    "ManagedMemoryResource",
    "PinnedHostMemoryResource",
    "PoolMemoryResource",
    "PrefetchResourceAdaptor",
    "SamHeadroomMemoryResource",
    "SimulatedMemoryResource",
    "StatisticsResourceAdaptor",
    "SystemMemoryResource",
    "ThreadSafeResourceAdaptor",
    "TrackingResourceAdaptor",
    "get_include",
    "get_library_dir",
    "is_host_mode",
]
