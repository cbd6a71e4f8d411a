"""The memory timeline (an rmm-rs extra, beside ``rmm.statistics``): what the whole process allocated,
from every language, viewable in PyTorch's memory_viz.

One recorder per process, in the native library that Python, C++ and Rust share, off by default.
:func:`start` turns it on and puts a :class:`rmm.mr.RecordingResourceAdaptor` over each device's
resource, so every allocation made from the current device resource is recorded - by ``rmm`` itself,
CuPy and Numba on rmm's allocators, PyTorch on ``rmm_torch_allocator``, C++ code on
``rmm::mr::get_current_device_resource_ref()`` and Rust code on the ``rmm`` crate - with its size,
stream, device, time, thread, resource stack and the caller's stack: the Python frames of the
allocating thread, and with ``native_stacks=True`` the native frames of C++ and Rust code before them. Pool and arena segment growth and
trim, and out-of-memory failures, are recorded too.

:func:`snapshot` returns the data of ``torch.cuda.memory._snapshot()`` (``segments`` with their
``blocks``, ``device_traces``), so ``torch.cuda._memory_viz`` reads it and
https://pytorch.org/memory_viz shows the file :func:`dump_snapshot` writes (``.pickle``; ``.json``
and RMM's CSV log ``.csv``, which ``rmm-replay`` replays, too). :func:`load_snapshot` reads a file back
with clear errors for truncated or corrupt files.

Example::

    import rmm.timeline
    rmm.timeline.start()
    buf = rmm.DeviceBuffer(size=1 << 20)
    rmm.timeline.dump_snapshot("snapshot.pickle")   # drop into https://pytorch.org/memory_viz
    rmm.timeline.stop()
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from rmm import _rmm

_FORMATS = {".pickle": 0, ".pkl": 0, ".json": 1, ".csv": 2}


def start(
    max_entries: int = 100_000,
    *,
    python_stacks: bool = True,
    native_stacks: bool = False,
    clear: bool = False,
    dump_on_oom: str | os.PathLike[str] | None = None,
) -> None:
    """Turns the process's recorder on (or changes its options while on).

    Parameters
    ----------
    max_entries
        How many events the trace keeps (the oldest are dropped; their count is in the
        snapshot's ``rmm.dropped_events``). Live allocations are always kept.
    python_stacks
        Record the Python frames of the allocating thread.
    native_stacks
        Record native (C++, Rust) frames too, before the Python frames (as PyTorch's
        ``stacks="all"``; costly: microseconds per allocation).
    clear
        Forget what was recorded before.
    dump_on_oom
        A file (``.pickle``, ``.json`` or ``.csv``) the snapshot is written to when an allocation
        first fails for lack of memory.

    Raises
    ------
    ValueError
        ``max_entries`` below 1.
    """
    if max_entries < 1:
        raise ValueError(f"max_entries must be at least 1, not {max_entries}")
    path = None if dump_on_oom is None else os.fspath(dump_on_oom)
    _rmm._timeline_start(max_entries, native_stacks, python_stacks, clear, path)


def stop() -> None:
    """Turns the recorder off and puts back the resources :func:`start` wrapped (where they are still
    the current ones). What was recorded stays for :func:`snapshot`."""
    _rmm._timeline_stop()


def is_recording() -> bool:
    """True while the recorder is on."""
    return _rmm._timeline_is_recording()


def clear() -> None:
    """Forgets every recorded event, live allocation and segment."""
    _rmm._timeline_clear()


@contextmanager
def recording(max_entries: int = 100_000, **options: Any) -> Generator[None, None, None]:
    """Records for the duration of a ``with`` block (:func:`start` with these options, then
    :func:`stop`)."""
    start(max_entries, **options)
    try:
        yield
    finally:
        stop()


def snapshot() -> dict[str, Any]:
    """The recorder's contents, as ``torch.cuda.memory._snapshot()`` gives PyTorch's: ``segments``
    (each with ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``,
    ``requested_size``, ``stream``, ``segment_type``, ``blocks`` of ``address``, ``size``,
    ``requested_size``, ``state``, ``frames``) and ``device_traces`` (per device, entries of
    ``action``, ``addr``, ``size``, ``stream``, ``time_us``, ``frames``); rmm-rs adds ``resource``
    (the resource stack) to segments, blocks and entries, ``thread`` and ``message`` to entries, and
    ``rmm`` (``dropped_events``)."""
    data: dict[str, Any] = pickle.loads(_rmm._timeline_snapshot(0))
    return data


def dump_snapshot(path: str | os.PathLike[str]) -> None:
    """Writes :func:`snapshot` to ``path``: ``.pickle``/``.pkl`` (PyTorch's format: memory_viz and
    ``torch.cuda._memory_viz`` read it), ``.json``, or ``.csv`` (RMM's allocation log for
    ``rmm-replay``).

    Raises
    ------
    ValueError
        An unknown extension.
    OSError
        The file cannot be written.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in _FORMATS:
        raise ValueError(f"{path}: unknown snapshot format {ext!r} (use .pickle, .json or .csv)")
    data = _rmm._timeline_snapshot(_FORMATS[ext])
    with open(path, "wb") as f:
        f.write(data)


def load_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads a snapshot file (ours or PyTorch's ``_dump_snapshot`` file; pickle or JSON).

    The file is checked by rmm's own reader first, which loads only data (a pickle that names
    classes or calls code is refused, so loading never runs code).

    Raises
    ------
    ValueError
        A truncated or corrupt file, or one that is not a memory snapshot; the message says where
        (byte offset, or field such as ``segments[2].blocks[0].size``) and why.
    OSError
        The file cannot be read.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        kind = _rmm._timeline_check(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    loaded: dict[str, Any] = pickle.loads(data) if kind == "pickle" else json.loads(data)
    return loaded


def to_html(data: dict[str, Any] | None = None, title: str = "rmm memory snapshot") -> str:
    """A self-contained HTML page of a snapshot's ``data`` (default: :func:`snapshot` now): a bar per segment
    with its blocks, allocated bytes over time per device, and the largest live allocations with
    their frames. It needs no network (PyTorch's memory_viz at https://pytorch.org/memory_viz shows
    the ``.pickle`` file of :func:`dump_snapshot` in more depth)."""
    from rmm._timeline_html import render

    return render(data if data is not None else snapshot(), title)


def dump_html(path: str | os.PathLike[str], data: dict[str, Any] | None = None) -> None:
    """Writes :func:`to_html` of ``data`` (default: :func:`snapshot` now) to ``path``."""
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(to_html(data))


__all__ = [
    "clear",
    "dump_html",
    "dump_snapshot",
    "is_recording",
    "load_snapshot",
    "recording",
    "snapshot",
    "start",
    "stop",
    "to_html",
]
