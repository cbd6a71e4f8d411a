"""Experimental memory resources (RMM's ``rmm.pylibrmm.memory_resource.experimental``); they may
change or be removed in future releases."""

from rmm._native import names

(CudaAsyncManagedMemoryResource,) = names("CudaAsyncManagedMemoryResource")

__all__ = ["CudaAsyncManagedMemoryResource"]
