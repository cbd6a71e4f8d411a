"""The calling thread's current CUDA device, for :func:`rmm.reinitialize` (private).

RMM switches devices with ``cudaGetDevice`` / ``cudaSetDevice`` from cuda-python
(:mod:`rmm._cuda.gpu`). rmm-rs does not require cuda-python, so without it the same two calls are
made on the driver (``libcuda``) through ctypes: the current context's device, and making a
device's primary context current, which is what ``cudaSetDevice`` does and what rmm-rs's core uses.
"""

from __future__ import annotations

import ctypes
import functools


class _Driver:
    """The four driver calls needed, loaded once."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed: CUresult {status}")

    def get_device(self) -> int:
        ctx = ctypes.c_void_p()
        self._check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            return 0
        dev = ctypes.c_int()
        self._check(self.lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        return dev.value

    def set_device(self, device: int) -> None:
        handle = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(handle), ctypes.c_int(device)), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        # The primary context is retained for the life of the process, as rmm-rs's core does.
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), handle), "cuDevicePrimaryCtxRetain")
        self._check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


@functools.lru_cache(maxsize=1)
def _backend():  # type: ignore[no-untyped-def]
    try:
        from rmm._cuda import gpu
    except ImportError:
        return _Driver()
    return gpu


def get_device() -> int:
    """The current device of the calling thread (0 when none was made current)."""
    backend = _backend()
    return backend.get_device() if isinstance(backend, _Driver) else backend.getDevice()


def set_device(device: int) -> None:
    """Makes ``device`` current on the calling thread (``cudaSetDevice``)."""
    backend = _backend()
    if isinstance(backend, _Driver):
        backend.set_device(device)
    else:
        backend.setDevice(device)
