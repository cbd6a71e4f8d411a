"""CUDA runtime and driver queries through cuda-python (RMM's ``rmm._cuda.gpu``).

Each function raises :class:`CUDARuntimeError` (or :class:`CUDADriverError`) carrying the CUDA
status when the call fails. Importing this module needs cuda-python (``cuda.bindings``).
"""

from __future__ import annotations

from cuda.bindings import driver, runtime


class CUDARuntimeError(RuntimeError):
    """A failed CUDA runtime call; ``status`` is the ``cudaError_t``."""

    def __init__(self, status: runtime.cudaError_t) -> None:
        self.status = status
        _, name = runtime.cudaGetErrorName(status)
        _, msg = runtime.cudaGetErrorString(status)
        super().__init__(f"{name.decode()}: {msg.decode()}")

    def __reduce__(self) -> tuple[type[CUDARuntimeError], tuple[runtime.cudaError_t]]:
        return (type(self), (self.status,))


class CUDADriverError(RuntimeError):
    """A failed CUDA driver call; ``status`` is the ``CUresult``."""

    def __init__(self, status: driver.CUresult) -> None:
        self.status = status
        _, name = driver.cuGetErrorName(status)
        _, msg = driver.cuGetErrorString(status)
        super().__init__(f"{name.decode()}: {msg.decode()}")

    def __reduce__(self) -> tuple[type[CUDADriverError], tuple[driver.CUresult]]:
        return (type(self), (self.status,))


def _runtime(result: tuple):  # type: ignore[no-untyped-def, type-arg]
    """The value of a ``(status, value)`` runtime result, or CUDARuntimeError."""
    status, *value = result
    if status != runtime.cudaError_t.cudaSuccess:
        raise CUDARuntimeError(status)
    return value[0] if value else None


def driverGetVersion() -> int:
    """The newest CUDA version the driver supports, as ``1000 * major + 10 * minor`` (0 when no
    driver is installed)."""
    return _runtime(runtime.cudaDriverGetVersion())


def getDevice() -> int:
    """The current CUDA device."""
    return _runtime(runtime.cudaGetDevice())


def setDevice(device: int) -> None:
    """Makes ``device`` the current CUDA device."""
    _runtime(runtime.cudaSetDevice(device))


def runtimeGetVersion() -> int:
    """The version of the CUDA runtime that cuda-python links, as ``1000 * major + 10 * minor``."""
    return _runtime(runtime.getLocalRuntimeVersion())


def getDeviceCount() -> int:
    """The number of CUDA devices."""
    return _runtime(runtime.cudaGetDeviceCount())


def getDeviceAttribute(attr: runtime.cudaDeviceAttr, device: int) -> int:
    """The value of device attribute ``attr`` of ``device``."""
    return _runtime(runtime.cudaDeviceGetAttribute(attr, device))


def getDeviceProperties(device: int) -> runtime.cudaDeviceProp:
    """The ``cudaDeviceProp`` of ``device``."""
    return _runtime(runtime.cudaGetDeviceProperties(device))


def deviceGetName(device: int) -> str:
    """The name of ``device`` (raises CUDADriverError on failure)."""
    status, name = driver.cuDeviceGetName(256, driver.CUdevice(device))
    if status != driver.CUresult.CUDA_SUCCESS:
        raise CUDADriverError(status)
    return name.decode()


__all__ = [
    "CUDADriverError",
    "CUDARuntimeError",
    "deviceGetName",
    "driverGetVersion",
    "getDevice",
    "getDeviceAttribute",
    "getDeviceCount",
    "getDeviceProperties",
    "runtimeGetVersion",
    "setDevice",
]
