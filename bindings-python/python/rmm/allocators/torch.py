"""RMM as PyTorch's CUDA allocator (RMM's ``rmm.allocators.torch``).

``rmm_torch_allocator`` is a ``torch.cuda.memory.CUDAPluggableAllocator`` over the C functions
``rmm_torch_allocate`` / ``rmm_torch_deallocate`` of rmm-rs's ``librmm.so``, which allocate from
the current resource of the tensor's device in the process's one registry (the one Python sets).
It is ``None`` when PyTorch is missing or built without CUDA, as in RMM.

Use ``torch.cuda.memory.change_current_allocator(rmm_torch_allocator)`` before PyTorch allocates.
"""

from __future__ import annotations

import os
import pathlib

rmm_torch_allocator = None


def _librmm_path() -> pathlib.Path:
    """The ``librmm.so`` to give PyTorch: the one already loaded in this process (the registry
    Python uses), else one shipped in the package, else ``$RMM_LIBRMM``."""
    import rmm._rmm

    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(path).startswith("librmm.so"):
                    return pathlib.Path(path)
    except OSError:
        pass
    package = pathlib.Path(rmm._rmm.__file__).resolve().parent
    for candidate in (package / "librmm.so", package / "lib" / "librmm.so", package / "lib64" / "librmm.so"):
        if candidate.is_file():
            return candidate
    if os.environ.get("RMM_LIBRMM"):
        return pathlib.Path(os.environ["RMM_LIBRMM"])
    raise FileNotFoundError(
        "rmm.allocators.torch: librmm.so (which exports rmm_torch_allocate) is neither loaded nor "
        f"installed next to {package}; set RMM_LIBRMM to its path"
    )


try:
    from torch.cuda.memory import CUDAPluggableAllocator
except ImportError:
    pass
else:
    from torch.cuda import is_available

    if is_available():
        rmm_torch_allocator = CUDAPluggableAllocator(
            str(_librmm_path()),
            alloc_fn_name="rmm_torch_allocate",
            free_fn_name="rmm_torch_deallocate",
        )
    del is_available

__all__ = ["rmm_torch_allocator"]
