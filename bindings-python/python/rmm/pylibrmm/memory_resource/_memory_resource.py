"""Memory resources and the per-device resource functions (RMM's
``rmm.pylibrmm.memory_resource._memory_resource``).

The resource classes and the registry functions are native (``rmm._rmm``); the per-device resource
is the process's one registry, shared with C++ and Rust. What RMM writes in Python on top of them is
Python here too: ``_initialize`` (behind :func:`rmm.reinitialize`), :func:`enable_logging`,
:func:`disable_logging`, :func:`get_log_filenames`.

Which devices "RMM uses": RMM keeps a dict of the resources Python set, which the logging functions
walk. The native ``_per_device_resources()`` is that dict here: the objects Python set that are still
their device's resource in the shared registry.

Host mode (no GPU, an rmm-rs extension): ``_initialize`` builds on :class:`SystemMemoryResource`
instead of CUDA or managed memory, on device 0 (the only one).

rmm-rs extras, outside ``__all__`` (RMM's names): :class:`AlignedResourceAdaptor`,
:class:`ThreadSafeResourceAdaptor` and :class:`SimulatedMemoryResource`, the classes of the C++
resources of those kinds (``rmm::mr::aligned_resource_adaptor``, ...), so that every resource a C++
library sets as the current device resource comes back as the object of its class.
"""

from __future__ import annotations

import os

from rmm import _device
from rmm._rmm import (
    AlignedResourceAdaptor,
    ArenaMemoryResource,
    BinningMemoryResource,
    CallbackMemoryResource,
    CudaAsyncMemoryResource,
    CudaAsyncViewMemoryResource,
    CudaMemoryResource,
    DeviceMemoryResource,
    FailureCallbackResourceAdaptor,
    FixedSizeMemoryResource,
    LimitingResourceAdaptor,
    LoggingResourceAdaptor,
    ManagedMemoryResource,
    PinnedHostMemoryResource,
    PoolMemoryResource,
    PrefetchResourceAdaptor,
    SamHeadroomMemoryResource,
    SimulatedMemoryResource,
    StatisticsResourceAdaptor,
    SystemMemoryResource,
    ThreadSafeResourceAdaptor,
    TrackingResourceAdaptor,
    UpstreamResourceAdaptor,
    available_device_memory,
    get_current_device_resource,
    get_per_device_resource,
    is_initialized,
    set_current_device_resource,
    set_per_device_resource,
    _flush_logs,
    is_host_mode as _is_host_mode,
    get_device_count as _get_device_count,
    _per_device_resources,
)


def _append_id(filename: str, id: int) -> str:
    """``filename`` with ``.dev<id>`` inserted before its extension: ``_append_id("a.txt", 1)`` is
    ``"a.dev1.txt"`` (the name each device's log file gets)."""
    name, ext = os.path.splitext(filename)
    return f"{name}.dev{id}{ext}"


def _all_devices() -> list[int]:
    """Every device of the process (device 0 alone in host mode)."""
    if _is_host_mode():
        return [0]
    return list(range(_get_device_count()))


def _initialize(
    pool_allocator: bool = False,
    managed_memory: bool = False,
    initial_pool_size: int | str | None = None,
    maximum_pool_size: int | str | None = None,
    devices: int | list[int] | None = 0,
    logging: bool = False,
    log_file_name: str | None = None,
) -> None:
    """Sets a new resource on each of ``devices``: CUDA (or managed) memory, under a pool when
    ``pool_allocator``, under a logging adaptor when ``logging``. Each is built with its device
    current; the caller's current device is restored afterwards. See :func:`rmm.reinitialize`."""
    host_mode = _is_host_mode()
    if host_mode:
        upstream = SystemMemoryResource
    elif managed_memory:
        upstream = ManagedMemoryResource
    else:
        upstream = CudaMemoryResource

    def make() -> DeviceMemoryResource:
        if not pool_allocator:
            return upstream()
        # Sizes as int or str ("1GiB"): the native constructor parses them with RMM's grammar.
        return PoolMemoryResource(upstream(), initial_pool_size=initial_pool_size, maximum_pool_size=maximum_pool_size)

    if devices is None:
        devices = [0]
    elif isinstance(devices, int):
        devices = [devices]
    devices = list(devices)
    # Checked before anything changes, so that a bad list leaves every device as it was.
    known = _all_devices()
    for device in devices:
        if device not in known:
            # RMM's setDevice raises CUDARuntimeError (a RuntimeError) with CUDA's words.
            raise RuntimeError(
                f"cudaErrorInvalidDevice: invalid device ordinal: device {device} does not exist (devices: {known})"
            )

    # Each resource is built with its device current; the caller's device comes back afterwards.
    original = current = 0 if host_mode else _device.get_device()

    def use(device: int) -> None:
        nonlocal current
        if device != current:
            _device.set_device(device)
            current = device

    try:
        # As RMM forgets the resources that Python set on devices this call does not set up, those
        # devices get a plain CUDA resource back (which frees what their pool held).
        for device in _per_device_resources():
            if device not in devices:
                use(device)
                set_per_device_resource(device, CudaMemoryResource())
        for device in devices:
            use(device)
            mr = make()
            if logging:
                mr = LoggingResourceAdaptor(mr, log_file_name)
            set_per_device_resource(device, mr)
    finally:
        use(original)


def enable_logging(log_file_name: str | None = None) -> None:
    """Enable logging of run-time events (allocations and frees) for all devices in use (those
    whose resource was set from Python; device 0 when none was).

    Each device's resource is wrapped in a :class:`LoggingResourceAdaptor` (unless it already is
    one) writing to ``log_file_name`` with ``.dev<N>`` inserted before its extension.

    Parameters
    ----------
    log_file_name : str, optional
        Name of the log file. If not given, the environment variable ``RMM_LOG_FILE`` is used; a
        :class:`ValueError` is raised if neither is available.
    """
    for device in _per_device_resources() or [0]:
        mr = get_per_device_resource(device)
        if not isinstance(mr, LoggingResourceAdaptor):
            set_per_device_resource(device, LoggingResourceAdaptor(mr, log_file_name))


def disable_logging() -> None:
    """Disable logging enabled by :func:`rmm.reinitialize` or :func:`enable_logging`: each device
    whose resource is a :class:`LoggingResourceAdaptor` gets its upstream back."""
    for device, mr in _per_device_resources().items():
        if isinstance(mr, LoggingResourceAdaptor):
            set_per_device_resource(device, mr.get_upstream())


def get_log_filenames() -> dict[int, str | None]:
    """The log file name of each device in use, or ``None`` for a device that does not log.

    Examples
    --------
    >>> rmm.reinitialize(devices=[0, 1], logging=True, log_file_name="rmm.log")
    >>> rmm.get_log_filenames()
    {0: '/home/user/rmm.dev0.log', 1: '/home/user/rmm.dev1.log'}
    """
    return {
        device: mr.get_file_name() if isinstance(mr, LoggingResourceAdaptor) else None
        for device, mr in _per_device_resources().items()
    }


__all__ = [
    "ArenaMemoryResource",
    "BinningMemoryResource",
    "CallbackMemoryResource",
    "CudaAsyncMemoryResource",
    "CudaAsyncViewMemoryResource",
    "CudaMemoryResource",
    "DeviceMemoryResource",
    "FailureCallbackResourceAdaptor",
    "FixedSizeMemoryResource",
    "LimitingResourceAdaptor",
    "LoggingResourceAdaptor",
    "ManagedMemoryResource",
    "PinnedHostMemoryResource",
    "PoolMemoryResource",
    "PrefetchResourceAdaptor",
    "SamHeadroomMemoryResource",
    "StatisticsResourceAdaptor",
    "SystemMemoryResource",
    "TrackingResourceAdaptor",
    "UpstreamResourceAdaptor",
    "available_device_memory",
    "disable_logging",
    "enable_logging",
    "get_current_device_resource",
    "get_log_filenames",
    "get_per_device_resource",
    "is_initialized",
    "set_current_device_resource",
    "set_per_device_resource",
]
