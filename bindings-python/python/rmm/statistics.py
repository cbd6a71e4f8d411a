"""Allocation statistics (RMM's ``rmm.statistics``).

For now only the record type that ``StatisticsResourceAdaptor`` returns; RMM's helpers built on it
(``enable_statistics``, ``statistics()``, the profiler) are not provided yet.
"""

from dataclasses import dataclass


@dataclass
class Statistics:
    """The counters of a ``StatisticsResourceAdaptor`` frame (values may be negative in a popped
    frame: memory allocated before the push and freed after it)."""

    current_bytes: int
    current_count: int
    peak_bytes: int
    peak_count: int
    total_bytes: int
    total_count: int


__all__ = ["Statistics"]
