"""``rmm.statistics``'s functions for a current device resource that is rmm_rs's
``StatisticsResourceAdaptor`` as well as RMM's (RMM's own functions see only RMM's class, and would
put RMM's adaptor on top of ours). Counters are ``rmm.statistics.Statistics``."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

import rmm.mr
from rmm.statistics import Statistics

from rmm_rs._resources import StatisticsResourceAdaptor

_ADAPTORS = (StatisticsResourceAdaptor, rmm.mr.StatisticsResourceAdaptor)


def _current_adaptor():
    mr = rmm.mr.get_current_device_resource()
    return mr if isinstance(mr, _ADAPTORS) else None


def enable_statistics() -> None:
    """Puts rmm_rs's StatisticsResourceAdaptor over the current device resource, unless a statistics
    adaptor (ours or RMM's) is already the current one."""
    mr = rmm.mr.get_current_device_resource()
    if not isinstance(mr, _ADAPTORS):
        rmm.mr.set_current_device_resource(StatisticsResourceAdaptor(mr))


def get_statistics() -> Statistics | None:
    """The current adaptor's counters, or None when the current resource is no statistics adaptor."""
    mr = _current_adaptor()
    return None if mr is None else mr.allocation_counts


def push_statistics() -> Statistics | None:
    """Pushes zero counters and returns those before, or None without a statistics adaptor."""
    mr = _current_adaptor()
    return None if mr is None else mr.push_counters()


def pop_statistics() -> Statistics | None:
    """Pops the current counters and returns them, or None without a statistics adaptor."""
    mr = _current_adaptor()
    return None if mr is None else mr.pop_counters()


@contextmanager
def statistics() -> Generator[None, None, None]:
    """``rmm.statistics.statistics()`` with rmm_rs's adaptor: pushes counters on the current
    statistics adaptor (ours or RMM's) and pops them on exit, or sets our adaptor over the current
    resource for the block. ValueError when the current resource changed inside."""
    prior = None
    if push_statistics() is None:
        prior = rmm.mr.get_current_device_resource()
        enable_statistics()
    current = rmm.mr.get_current_device_resource()
    try:
        yield
    finally:
        if current is not rmm.mr.get_current_device_resource():
            raise ValueError("RMM memory source stack was changed while in the statistics context")
        if prior is None:
            pop_statistics()
        else:
            rmm.mr.set_current_device_resource(prior)


__all__ = ["enable_statistics", "get_statistics", "pop_statistics", "push_statistics", "statistics"]
