"""RMM as Numba-CUDA's memory manager (RMM's ``rmm.allocators.numba``).

Use ``numba.cuda.set_memory_manager(RMMNumbaManager)``, or set the environment variable
``NUMBA_CUDA_MEMORY_MANAGER=rmm.allocators.numba`` before Numba starts (it loads
``_numba_memory_manager`` from this module). Needs numba-cuda and cuda-python.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from cuda.bindings.driver import CUdeviceptr, cuIpcGetMemHandle
from numba import cuda
from numba.cuda import HostOnlyCUDAMemoryManager, IpcHandle, MemoryPointer

from rmm.pylibrmm.device_buffer import DeviceBuffer


def _make_emm_plugin_finalizer(handle: int, allocations: dict[int, Any]) -> Callable[[], None]:
    """The finalizer of one allocation: it forgets the allocation's buffer, which frees it."""

    def finalizer() -> None:
        # At exit, a context reset may have cleared `allocations` before weakref finalizers run;
        # only an empty dict is tolerated (a missing handle in a non-empty one is a real error).
        if allocations:
            del allocations[handle]

    return finalizer


class RMMNumbaManager(HostOnlyCUDAMemoryManager):
    """Numba-CUDA External Memory Management plugin: device allocations come from the current RMM
    device resource (host allocations stay Numba's)."""

    def initialize(self) -> None:
        """Nothing to set up: RMM needs no per-context initialization."""

    def memalloc(self, size: int) -> MemoryPointer:
        """Allocate ``size`` bytes of device memory as a :class:`rmm.DeviceBuffer`, kept alive by
        this manager until Numba frees the pointer."""
        buf = DeviceBuffer(size=size)
        ptr = CUdeviceptr(int(buf.ptr))
        finalizer = _make_emm_plugin_finalizer(int(buf.ptr), self.allocations)
        # `self.allocations` belongs to HostOnlyCUDAMemoryManager and is cleared on context reset.
        self.allocations[int(buf.ptr)] = buf
        return MemoryPointer(self.context, ptr, size, finalizer=finalizer)

    def get_ipc_handle(self, memory: MemoryPointer) -> IpcHandle:
        """An IPC handle for ``memory``: the handle of the driver allocation that contains it (a
        pool's block) with the offset of ``memory`` inside it."""
        start, _ = cuda.cudadrv.driver.device_extents(memory)
        _, ipc_handle = cuIpcGetMemHandle(start)
        offset = int(memory.handle) - int(start)
        source_info = cuda.current_context().device.get_device_identity()
        return IpcHandle(memory, ipc_handle, memory.size, source_info, offset=offset)

    def get_memory_info(self) -> tuple[int, int]:
        """Not available: allocations come from RMM's current resource (perhaps a pool), whose free
        memory the device's numbers would not describe. Raises NotImplementedError."""
        raise NotImplementedError()

    @property
    def interface_version(self) -> int:
        """The EMM plugin interface version implemented (1)."""
        return 1


# The parent's docstrings name classes without their module; qualify them (as RMM does).
for _, _method in inspect.getmembers(RMMNumbaManager, inspect.isfunction):
    if _method.__doc__ is not None:
        _method.__doc__ = _method.__doc__.replace(
            ":class:`BaseCUDAMemoryManager`", ":class:`numba.cuda.BaseCUDAMemoryManager`"
        )

# What NUMBA_CUDA_MEMORY_MANAGER=rmm.allocators.numba loads.
_numba_memory_manager = RMMNumbaManager

__all__ = ["RMMNumbaManager"]
