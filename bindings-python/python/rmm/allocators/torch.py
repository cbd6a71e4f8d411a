"""RMM as PyTorch's CUDA allocator (RMM's ``rmm.allocators.torch``).

``rmm_torch_allocator`` is a ``torch.cuda.memory.CUDAPluggableAllocator`` over the C functions
``rmm_torch_allocate`` / ``rmm_torch_deallocate`` of rmm-rs's native library (``librmm_rs.so``),
which allocate from the current resource of the tensor's device in the process's one registry (the
one Python sets).
It is ``None`` when PyTorch is missing or built without CUDA, as in RMM, and when no native
library can be named (neither loaded nor given by ``$RMM_LIBRMM``): importing this module never
raises; using ``None`` as an allocator fails where it is used.

Use ``torch.cuda.memory.change_current_allocator(rmm_torch_allocator)`` before PyTorch allocates.
"""

from __future__ import annotations

import os
import pathlib

rmm_torch_allocator = None


def _librmm_path() -> str | None:
    """The native library of this process (the one the module links, whose registry Python uses;
    in the wheel ``rmm/lib/librmm_rs.so``), else ``$RMM_LIBRMM``, else None."""
    from rmm._rmm import _librmm_path as loaded

    path = loaded() or os.environ.get("RMM_LIBRMM")
    return str(pathlib.Path(path).absolute()) if path else None


try:
    from torch.cuda.memory import CUDAPluggableAllocator
except ImportError:
    pass
else:
    from torch.cuda import is_available

    _path = _librmm_path()
    if is_available() and _path is not None:
        rmm_torch_allocator = CUDAPluggableAllocator(
            _path,
            alloc_fn_name="rmm_torch_allocate",
            free_fn_name="rmm_torch_deallocate",
        )
    del is_available, _path

__all__ = ["rmm_torch_allocator"]
