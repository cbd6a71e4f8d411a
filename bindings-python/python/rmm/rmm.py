"""RMM's ``rmm.rmm``: :class:`RMMError`, :func:`reinitialize` and its hooks, :func:`is_initialized`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmm import mr
from rmm.pylibrmm.memory_resource._memory_resource import _initialize


class RMMError(Exception):
    """An error reported by RMM, with its error code in ``errcode``."""

    def __init__(self, errcode: int, msg: str) -> None:
        self.errcode = errcode
        super().__init__(msg)


_reinitialize_hooks: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []


def reinitialize(
    pool_allocator: bool = False,
    managed_memory: bool = False,
    initial_pool_size: int | str | None = None,
    maximum_pool_size: int | str | None = None,
    devices: int | list[int] = 0,
    logging: bool = False,
    log_file_name: str | None = None,
) -> None:
    """Finalizes and then initializes RMM with the options given. Using memory from a previous
    initialization afterwards is undefined behaviour.

    The hooks registered with :func:`register_reinitialize_hook` run first, last registered first.
    Then each of ``devices`` gets a new current resource, built with that device current.

    Parameters
    ----------
    pool_allocator : bool, default False
        Put a :class:`rmm.mr.PoolMemoryResource` over the device memory.
    managed_memory : bool, default False
        Use managed (unified) memory instead of device memory.
    initial_pool_size : int | str, default None
        With ``pool_allocator``, the pool's initial size in bytes (a string such as ``"1GiB"`` is
        parsed); by default half of the device's free memory. Ignored without ``pool_allocator``.
    maximum_pool_size : int | str, default None
        With ``pool_allocator``, the most the pool may grow to; by default all of the device's
        memory. Ignored without ``pool_allocator``.
    devices : int or list[int], default 0
        The devices to initialize.
    logging : bool, default False
        Log every allocation and free to a CSV file per device (slow).
    log_file_name : str
        The log file's name; ``.dev<N>`` is inserted before its extension for device N. Without it
        the environment variable ``RMM_LOG_FILE`` is used, and a ``ValueError`` raised if neither
        is given. :func:`rmm.get_log_filenames` tells each device's file.

    Raises
    ------
    ValueError
        A size string that is not a byte specification, or logging without a file name.
    RuntimeError
        ``initial_pool_size`` larger than ``maximum_pool_size``, or a device that does not exist
        (as RMM's ``setDevice`` raises CUDA's invalid device ordinal); nothing changes then.

    Notes
    -----
    In host mode (no GPU; an rmm-rs extension) the resource is built on
    :class:`rmm.mr.SystemMemoryResource`, on device 0 only.
    """
    for func, args, kwargs in reversed(_reinitialize_hooks):
        func(*args, **kwargs)

    _initialize(
        pool_allocator=pool_allocator,
        managed_memory=managed_memory,
        initial_pool_size=initial_pool_size,
        maximum_pool_size=maximum_pool_size,
        devices=devices,
        logging=logging,
        log_file_name=log_file_name,
    )


def is_initialized() -> bool:
    """True when every device's resource is usable (RMM's ``rmm.is_initialized``)."""
    return mr.is_initialized()


def register_reinitialize_hook(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
    """Call ``func(*args, **kwargs)`` at the start of every :func:`reinitialize`, e.g. to drop
    cached device memory before the resource it came from goes away. Hooks run in the reverse
    order of their registration. Returns ``func`` (so it can be used as a decorator)."""
    _reinitialize_hooks.append((func, args, kwargs))
    return func


def unregister_reinitialize_hook(func: Callable[..., Any]) -> None:
    """Remove every registration of ``func`` from the reinitialize hooks."""
    global _reinitialize_hooks
    _reinitialize_hooks = [hook for hook in _reinitialize_hooks if hook[0] != func]


__all__ = [
    "RMMError",
    "is_initialized",
    "register_reinitialize_hook",
    "reinitialize",
    "unregister_reinitialize_hook",
]
