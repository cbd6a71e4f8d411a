"""The calling thread's current CUDA device, for :func:`rmm.reinitialize` (private).

RMM switches devices with ``cudaGetDevice`` / ``cudaSetDevice`` from cuda-python. rmm-rs does not
require cuda-python (nor a CUDA runtime library), so the same two operations are made on the driver
(``libcuda``) through ctypes, the way rmm-rs's core does them: the device of the current context,
and making a device's primary context current (which is what ``cudaSetDevice`` does, so the runtime,
CuPy, Numba and PyTorch agree with it).
"""

from __future__ import annotations

import ctypes
import functools


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: CUresult {status}")


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    _check(lib.cuInit(0), "cuInit")
    return lib


def get_device() -> int:
    """The current device of the calling thread (0 when no context is current)."""
    lib = _driver()
    ctx = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        return 0
    device = ctypes.c_int()
    _check(lib.cuCtxGetDevice(ctypes.byref(device)), "cuCtxGetDevice")
    return device.value


# Each device's primary context, retained once for the life of the process (as rmm-rs's core does).
_primary: dict[int, ctypes.c_void_p] = {}


def set_device(device: int) -> None:
    """Makes ``device``'s primary context current on the calling thread (``cudaSetDevice``)."""
    lib = _driver()
    ctx = _primary.get(device)
    if ctx is None:
        handle = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(handle), ctypes.c_int(device)), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), handle), "cuDevicePrimaryCtxRetain")
        ctx = _primary.setdefault(device, ctx)
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
