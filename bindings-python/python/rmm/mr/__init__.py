"""Memory resources (RMM's ``rmm.mr``): every resource and adaptor, the per-device resource
functions and the logging switches.

Every resource derives from :class:`DeviceMemoryResource` and offers
``allocate(nbytes, stream=DEFAULT_STREAM) -> int`` and ``deallocate(ptr, nbytes,
stream=DEFAULT_STREAM)``. The current device resource is the process's one: C++ and Rust code in
the same process (through ``librmm.so``) see what :func:`set_current_device_resource` sets, and
:func:`get_current_device_resource` sees what they set.
"""

from rmm.mr import experimental
from rmm.pylibrmm.memory_resource import (
    ArenaMemoryResource,
    BinningMemoryResource,
    CallbackMemoryResource,
    CudaAsyncMemoryResource,
    CudaAsyncViewMemoryResource,
    CudaMemoryResource,
    DeviceMemoryResource,
    FailureCallbackResourceAdaptor,
    FixedSizeMemoryResource,
    LimitingResourceAdaptor,
    LoggingResourceAdaptor,
    ManagedMemoryResource,
    PinnedHostMemoryResource,
    PoolMemoryResource,
    PrefetchResourceAdaptor,
    SamHeadroomMemoryResource,
    StatisticsResourceAdaptor,
    SystemMemoryResource,
    TrackingResourceAdaptor,
    UpstreamResourceAdaptor,
    available_device_memory,
    disable_logging,
    enable_logging,
    get_current_device_resource,
    get_log_filenames,
    get_per_device_resource,
    is_initialized,
    set_current_device_resource,
    set_per_device_resource,
)

__all__ = [
    "ArenaMemoryResource",
    "BinningMemoryResource",
    "CallbackMemoryResource",
    "CudaAsyncMemoryResource",
    "CudaAsyncViewMemoryResource",
    "CudaMemoryResource",
    "DeviceMemoryResource",
    "FailureCallbackResourceAdaptor",
    "FixedSizeMemoryResource",
    "LimitingResourceAdaptor",
    "LoggingResourceAdaptor",
    "ManagedMemoryResource",
    "PinnedHostMemoryResource",
    "PoolMemoryResource",
    "PrefetchResourceAdaptor",
    "SamHeadroomMemoryResource",
    "StatisticsResourceAdaptor",
    "SystemMemoryResource",
    "TrackingResourceAdaptor",
    "UpstreamResourceAdaptor",
    "available_device_memory",
    "disable_logging",
    "enable_logging",
    "experimental",
    "get_current_device_resource",
    "get_log_filenames",
    "get_per_device_resource",
    "is_initialized",
    "set_current_device_resource",
    "set_per_device_resource",
]
