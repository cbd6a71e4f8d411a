"""Experimental memory resources (RMM's ``rmm.pylibrmm.memory_resource.experimental``); they may
change or be removed in future releases. ``ExpandablePoolMemoryResource`` and
``ImportedAllocation`` are rmm-rs's own (not RMM types)."""

from rmm._rmm import (
    CudaAsyncManagedMemoryResource,
    ExpandablePoolMemoryResource,
    ImportedAllocation,
)

__all__ = [
    "CudaAsyncManagedMemoryResource",
    "ExpandablePoolMemoryResource",
    "ImportedAllocation",
]
