"""RMM as PyTorch's CUDA allocator (RMM's ``rmm.allocators.torch``).

``rmm_torch_allocator`` is a ``torch.cuda.memory.CUDAPluggableAllocator`` over the C functions
``rmm_torch_allocate`` / ``rmm_torch_deallocate`` of rmm-rs's native library (``librmm_rs.so``),
which allocate from the current resource of the tensor's device in the process's one registry (the
one Python sets).
It is ``None`` when PyTorch is missing or built without CUDA, as in RMM.

Use ``torch.cuda.memory.change_current_allocator(rmm_torch_allocator)`` before PyTorch allocates.
"""

from __future__ import annotations

import os
import pathlib

rmm_torch_allocator = None


def _librmm_path() -> str:
    """The native library of this process (the one the module links, whose registry Python uses;
    in the wheel ``rmm/lib/librmm_rs.so``), else ``$RMM_LIBRMM``."""
    from rmm._paths import NATIVE_LIBRARY
    from rmm._rmm import _librmm_path as loaded

    path = loaded() or os.environ.get("RMM_LIBRMM")
    if not path:
        raise FileNotFoundError(
            f"rmm.allocators.torch: no {NATIVE_LIBRARY} (which exports rmm_torch_allocate) is loaded; "
            f"install the rmm-rs wheel, or set RMM_LIBRMM to a {NATIVE_LIBRARY}"
        )
    return str(pathlib.Path(path).absolute())


try:
    from torch.cuda.memory import CUDAPluggableAllocator
except ImportError:
    pass
else:
    from torch.cuda import is_available

    if is_available():
        rmm_torch_allocator = CUDAPluggableAllocator(
            _librmm_path(),
            alloc_fn_name="rmm_torch_allocate",
            free_fn_name="rmm_torch_deallocate",
        )
    del is_available

__all__ = ["rmm_torch_allocator"]
