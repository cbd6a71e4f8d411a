"""Allocation statistics and the memory profiler (RMM's ``rmm.statistics``).

Statistics are kept by a :class:`rmm.mr.StatisticsResourceAdaptor` that is the current device
resource: :func:`enable_statistics` puts one there, :func:`statistics` does so for a block,
:func:`get_statistics` / :func:`push_statistics` / :func:`pop_statistics` read its counter stack,
and :func:`profiler` records what a function or block allocated into :class:`ProfilerRecords`.
Every function is a no-op returning ``None`` when statistics are not enabled.
"""

from __future__ import annotations

import inspect
import threading
from collections import defaultdict
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from types import TracebackType
from typing import Any, Literal, TypeVar

import rmm.mr

T = TypeVar("T")


@dataclass
class Statistics:
    """Counters of a ``StatisticsResourceAdaptor`` (returned by ``{get,push,pop}_statistics()``).

    Values may be negative in a popped frame: memory allocated before the push and freed after it.

    Attributes
    ----------
    current_bytes
        Bytes allocated now.
    current_count
        Allocations live now.
    peak_bytes
        Most bytes allocated at once.
    peak_count
        Most allocations live at once.
    total_bytes
        Bytes allocated in all.
    total_count
        Allocations made in all.
    """

    current_bytes: int
    current_count: int
    peak_bytes: int
    peak_count: int
    total_bytes: int
    total_count: int


def _statistics_mr() -> Any:
    """The current device resource if it is a statistics adaptor, else None."""
    mr = rmm.mr.get_current_device_resource()
    return mr if isinstance(mr, rmm.mr.StatisticsResourceAdaptor) else None


def enable_statistics() -> None:
    """Enable allocation statistics: a ``StatisticsResourceAdaptor`` over the current device
    resource becomes the current one. A no-op when the current resource already is one.

    The adaptor must stay the topmost resource while statistics are gathered.
    """
    mr = rmm.mr.get_current_device_resource()
    if not isinstance(mr, rmm.mr.StatisticsResourceAdaptor):
        rmm.mr.set_current_device_resource(rmm.mr.StatisticsResourceAdaptor(mr))


def get_statistics() -> Statistics | None:
    """The counters of the current statistics frame, or None when statistics are disabled."""
    mr = _statistics_mr()
    return None if mr is None else mr.allocation_counts


def push_statistics() -> Statistics | None:
    """Push a new frame of zero counters and return the counters of the frame below it (before the
    push); None (and nothing pushed) when statistics are disabled."""
    mr = _statistics_mr()
    return None if mr is None else mr.push_counters()


def pop_statistics() -> Statistics | None:
    """Pop the current frame and return its counters (which are also added into the frame below);
    None when statistics are disabled."""
    mr = _statistics_mr()
    return None if mr is None else mr.pop_counters()


@contextmanager
def statistics() -> Generator[None, None, None]:
    """Allocation statistics for the ``with`` block.

    If statistics are enabled, a new frame of counters is pushed on entry and popped on exit;
    otherwise a new ``StatisticsResourceAdaptor`` is current for the block and the previous
    resource comes back on exit.

    Raises
    ------
    ValueError
        If the current device resource was changed inside the block.
    """
    prior_non_stats_mr = None
    if push_statistics() is None:
        prior_non_stats_mr = rmm.mr.get_current_device_resource()
        enable_statistics()
    try:
        current_mr = rmm.mr.get_current_device_resource()
        yield
    finally:
        if current_mr is not rmm.mr.get_current_device_resource():
            raise ValueError("RMM memory source stack was changed while in the statistics context")
        if prior_non_stats_mr is None:
            pop_statistics()
        else:
            rmm.mr.set_current_device_resource(prior_non_stats_mr)


class ProfilerRecords:
    """The memory statistics a profiler recorded, by name (thread-safe)."""

    @dataclass
    class MemoryRecord:
        """Memory statistics of one function or code block.

        Attributes
        ----------
        num_calls
            Times it ran.
        memory_total
            Bytes it allocated in all.
        memory_peak
            Most bytes it had allocated at once, over all its runs.
        """

        num_calls: int = 0
        memory_total: int = 0
        memory_peak: int = 0

        def add(self, memory_total: int, memory_peak: int) -> None:
            """Count one more run that allocated ``memory_total`` bytes, ``memory_peak`` at most."""
            self.num_calls += 1
            self.memory_total += memory_total
            self.memory_peak = max(self.memory_peak, memory_peak)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, ProfilerRecords.MemoryRecord] = defaultdict(ProfilerRecords.MemoryRecord)

    def add(self, name: str, data: Statistics) -> None:
        """Add one run's statistics ``data`` to the record ``name``."""
        with self._lock:
            self._records[name].add(memory_total=data.total_bytes, memory_peak=data.peak_bytes)

    @property
    def records(self) -> dict[str, MemoryRecord]:
        """A copy of the records: name to :class:`MemoryRecord`."""
        with self._lock:
            return dict(self._records)

    def report(self, ordered_by: Literal["num_calls", "memory_peak", "memory_total"] = "memory_peak") -> str:
        """The records as a table, largest ``ordered_by`` first (RMM's format)."""
        records = sorted(self.records.items(), key=lambda item: getattr(item[1], ordered_by), reverse=True)
        ret = "Memory Profiling\n================\n\n"
        if not records:
            return ret + "No data, maybe profiling wasn't enabled?"
        ret += (
            "Legends:\n"
            "  ncalls       - number of times the function or code block was called\n"
            "  memory_peak  - peak memory allocated in function or code block (in bytes)\n"
            "  memory_total - total memory allocated in function or code block (in bytes)\n"
        )
        ret += f"\nOrdered by: {ordered_by}\n"
        ret += "\nncalls     memory_peak    memory_total  filename:lineno(function)\n"
        for name, data in records:
            ret += f"{data.num_calls:6,d} {data.memory_peak:15,d} {data.memory_total:15,d}  {name}\n"
        return ret[:-1]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.records})"

    def __str__(self) -> str:
        return self.report()


def _get_descriptive_name_of_object(obj: object) -> str:
    """``"<file>:<line>(<qualified name>)"`` of a function (decorators unwrapped)."""
    unwrapped: Any = inspect.unwrap(obj)  # type: ignore[arg-type]
    _, linenumber = inspect.getsourcelines(unwrapped)
    filepath = inspect.getfile(unwrapped)
    return f"{filepath}:{linenumber}({unwrapped.__qualname__})"


default_profiler_records = ProfilerRecords()


class ProfilerContext:
    """Records what a function (as a decorator) or a ``with`` block (as a context manager)
    allocates into ``records`` under ``name``; a no-op when statistics are disabled.

    ``name`` is required as a context manager; as a decorator it defaults to the function's
    ``file:line(name)``.
    """

    def __init__(self, records: ProfilerRecords, name: str) -> None:
        self._records = records
        self._name = name

    def __call__(self, func: Callable[..., T]) -> Callable[..., T]:
        name = self._name or _get_descriptive_name_of_object(func)

        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            push_statistics()
            try:
                return func(*args, **kwargs)
            finally:
                if (stats := pop_statistics()) is not None:
                    self._records.add(name=name, data=stats)

        return wrapper

    def __enter__(self) -> ProfilerContext:
        if not self._name:
            raise ValueError("When profiler is used as a context manager, a name must be provided")
        push_statistics()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if (stats := pop_statistics()) is not None:
            self._records.add(name=self._name, data=stats)


def profiler(*, records: ProfilerRecords = default_profiler_records, name: str = "") -> ProfilerContext:
    """A decorator and context manager that records memory statistics of a function or block.

    Parameters
    ----------
    records
        Where the statistics go (:data:`default_profiler_records` by default).
    name
        The record's name; required as a context manager, and by default ``file:line(function)``
        as a decorator.
    """
    return ProfilerContext(records, name)


__all__ = [
    "ProfilerContext",
    "ProfilerRecords",
    "Statistics",
    "default_profiler_records",
    "enable_statistics",
    "get_statistics",
    "pop_statistics",
    "profiler",
    "push_statistics",
    "statistics",
]
