"""Memory resources (RMM's ``rmm.mr``).

Every resource derives from :class:`DeviceMemoryResource` and offers
``allocate(nbytes, stream=None) -> int`` and ``deallocate(ptr, nbytes, stream=None)``.
``stream`` is ``None`` (the default stream) or a raw ``cudaStream_t`` as an int.
"""

from rmm._rmm import (
    CudaMemoryResource,
    DeviceMemoryResource,
    SystemMemoryResource,
    available_device_memory,
)

__all__ = [
    "CudaMemoryResource",
    "DeviceMemoryResource",
    "SystemMemoryResource",
    "available_device_memory",
]
