"""Experimental memory resource features that may change or be removed in future releases."""

from rmm.pylibrmm.memory_resource.experimental import CudaAsyncManagedMemoryResource

__all__ = ["CudaAsyncManagedMemoryResource"]
