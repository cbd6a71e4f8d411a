"""RMM as CuPy's allocator (RMM's ``rmm.allocators.cupy``)."""

from __future__ import annotations

from typing import Any

from rmm.pylibrmm.device_buffer import DeviceBuffer
from rmm.pylibrmm.stream import Stream

try:
    import cupy
except ImportError:
    cupy = None


def rmm_cupy_allocator(nbytes: int) -> Any:
    """Allocate ``nbytes`` for CuPy from the current RMM device resource, on CuPy's current
    stream. Returns a ``cupy.cuda.MemoryPointer`` whose memory is owned by a
    :class:`rmm.DeviceBuffer` (freed when CuPy drops it).

    Raises ModuleNotFoundError when CuPy is not installed.

    Examples
    --------
    >>> from rmm.allocators.cupy import rmm_cupy_allocator
    >>> import cupy
    >>> cupy.cuda.set_allocator(rmm_cupy_allocator)
    """
    if cupy is None:
        raise ModuleNotFoundError("No module named 'cupy'")
    stream = Stream(obj=cupy.cuda.get_current_stream())
    buf = DeviceBuffer(size=nbytes, stream=stream)
    dev_id = -1 if buf.ptr else cupy.cuda.device.get_device_id()
    mem = cupy.cuda.UnownedMemory(ptr=buf.ptr, size=buf.size, owner=buf, device_id=dev_id)
    return cupy.cuda.memory.MemoryPointer(mem, 0)


__all__ = ["rmm_cupy_allocator"]
