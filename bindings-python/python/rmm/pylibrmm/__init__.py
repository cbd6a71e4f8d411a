"""RMM's ``rmm.pylibrmm``: buffers, streams, stream pools, memory resources and the logger."""

from rmm.pylibrmm import memory_resource

from .cuda_stream_pool import CudaStreamPool
from .device_buffer import DeviceBuffer
from .stream import CudaStreamFlags

__all__ = [
    "CudaStreamPool",
    "CudaStreamFlags",
    "DeviceBuffer",
    "memory_resource",
]
