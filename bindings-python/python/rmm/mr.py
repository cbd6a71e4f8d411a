"""Memory resources (RMM's ``rmm.mr``).

Every resource derives from :class:`DeviceMemoryResource` and offers
``allocate(nbytes, stream=None) -> int`` and ``deallocate(ptr, nbytes, stream=None)``.
``stream`` is ``None`` (the default stream) or a raw ``cudaStream_t`` as an int.

The current device resource is the process's one: when ``librmm.so`` (the C++ library) is loaded
before ``rmm``, :func:`get_current_device_resource` sees what C++ or Rust set, and they see what
:func:`set_current_device_resource` sets.
"""

from rmm._rmm import (
    CudaMemoryResource,
    DeviceMemoryResource,
    PoolMemoryResource,
    StatisticsResourceAdaptor,
    SystemMemoryResource,
    UpstreamResourceAdaptor,
    available_device_memory,
    get_current_device_resource,
    get_per_device_resource,
    set_current_device_resource,
    set_per_device_resource,
)

__all__ = [
    "CudaMemoryResource",
    "DeviceMemoryResource",
    "PoolMemoryResource",
    "StatisticsResourceAdaptor",
    "SystemMemoryResource",
    "UpstreamResourceAdaptor",
    "available_device_memory",
    "get_current_device_resource",
    "get_per_device_resource",
    "set_current_device_resource",
    "set_per_device_resource",
]
