"""Experimental memory resources (RMM's ``rmm.pylibrmm.memory_resource.experimental``); they may
change or be removed in future releases."""

from rmm._rmm import (
    CudaAsyncManagedMemoryResource,
)

__all__ = ["CudaAsyncManagedMemoryResource"]
