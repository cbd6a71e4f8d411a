"""rmm.statistics: the statistics context and counter stack, and the memory profiler (host memory
in host mode; the same code runs over CUDA memory on a GPU)."""

import dataclasses
import re

import pytest

import rmm
import rmm.mr
from rmm.statistics import (
    ProfilerRecords,
    Statistics,
    _get_descriptive_name_of_object,
    enable_statistics,
    get_statistics,
    pop_statistics,
    profiler,
    push_statistics,
    statistics,
)


@pytest.fixture(autouse=True)
def fresh_resource():
    rmm.reinitialize()
    yield
    rmm.reinitialize()


class Allocations:
    """Allocations from the current resource, freed on request (DeviceBuffer-free)."""

    def __init__(self):
        self.live = []

    def new(self, nbytes):
        mr = rmm.mr.get_current_device_resource()
        self.live.append((mr, mr.allocate(nbytes), nbytes))

    def free_all(self):
        for mr, ptr, nbytes in reversed(self.live):
            mr.deallocate(ptr, nbytes)
        self.live.clear()


@pytest.fixture
def allocs():
    a = Allocations()
    yield a
    a.free_all()


def stats(current_bytes, current_count, peak_bytes, peak_count, total_bytes, total_count):
    return Statistics(current_bytes, current_count, peak_bytes, peak_count, total_bytes, total_count)


def test_statistics_is_a_dataclass_with_rmms_fields():
    assert [f.name for f in dataclasses.fields(Statistics)] == [
        "current_bytes", "current_count", "peak_bytes", "peak_count", "total_bytes", "total_count",
    ]  # fmt: skip


def test_disabled_statistics_are_none():
    assert get_statistics() is None
    assert push_statistics() is None
    assert pop_statistics() is None
    assert not isinstance(rmm.mr.get_current_device_resource(), rmm.mr.StatisticsResourceAdaptor)


def test_enable_statistics_is_idempotent():
    base = rmm.mr.get_current_device_resource()
    enable_statistics()
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.StatisticsResourceAdaptor)
    assert mr.get_upstream() is base
    enable_statistics()
    assert rmm.mr.get_current_device_resource() is mr
    assert get_statistics() == stats(0, 0, 0, 0, 0, 0)


def test_context_counts_and_nests(allocs):
    mr0 = rmm.mr.get_current_device_resource()
    with statistics():
        mr1 = rmm.mr.get_current_device_resource()
        assert isinstance(mr1, rmm.mr.StatisticsResourceAdaptor)
        allocs.new(20)
        assert get_statistics() == stats(20, 1, 20, 1, 20, 1)
        with statistics():
            assert rmm.mr.get_current_device_resource() is mr1
            allocs.new(10)
            assert get_statistics() == stats(10, 1, 10, 1, 10, 1)
        assert get_statistics() == stats(30, 2, 30, 2, 30, 2)
        allocs.free_all()
        assert get_statistics() == stats(0, 0, 30, 2, 30, 2)
    assert rmm.mr.get_current_device_resource() is mr0


def test_changing_the_resource_inside_the_context_is_a_value_error():
    mr0 = rmm.mr.get_current_device_resource()
    with pytest.raises(ValueError, match="stack was changed"):
        with statistics():
            rmm.mr.set_current_device_resource(rmm.mr.SystemMemoryResource())
    rmm.mr.set_current_device_resource(mr0)


def test_push_and_pop_return_rmms_frames(allocs):
    enable_statistics()
    for _ in range(10):
        allocs.new(10)
    assert push_statistics() == stats(100, 10, 100, 10, 100, 10)
    allocs.new(10)
    assert push_statistics() == stats(10, 1, 10, 1, 10, 1)
    mr, ptr, nbytes = allocs.live.pop()
    mr.deallocate(ptr, nbytes)
    # A popped frame may be negative: freed there, allocated before.
    assert pop_statistics() == stats(-10, -1, 0, 0, 0, 0)
    assert pop_statistics() == stats(0, 0, 10, 1, 10, 1)
    assert get_statistics() == stats(100, 10, 110, 11, 110, 11)
    with pytest.raises(IndexError):
        pop_statistics()


def test_profiler_as_decorator_and_context(allocs):
    records = ProfilerRecords()

    @profiler(records=records)
    def f(n):
        allocs.new(n)
        return n

    enable_statistics()
    assert f(100) == 100
    assert f(300) == 300
    with profiler(records=records, name="block"):
        allocs.new(50)
        allocs.new(50)
    name = _get_descriptive_name_of_object(f)
    assert re.fullmatch(re.escape(__file__) + r":\d+\(test_profiler_as_decorator_and_context\.<locals>\.f\)", name)
    assert set(records.records) == {name, "block"}
    assert records.records[name] == ProfilerRecords.MemoryRecord(num_calls=2, memory_total=400, memory_peak=300)
    assert records.records["block"] == ProfilerRecords.MemoryRecord(num_calls=1, memory_total=100, memory_peak=100)


def test_profiler_is_a_no_op_without_statistics():
    records = ProfilerRecords()

    @profiler(records=records, name="named")
    def f():
        return 1

    assert f() == 1
    with profiler(records=records, name="block"):
        pass
    assert records.records == {}


def test_profiler_context_needs_a_name():
    with pytest.raises(ValueError, match="a name must be provided"):
        with profiler():
            pass


def test_profiler_keeps_the_function_and_records_on_exceptions(allocs):
    records = ProfilerRecords()

    @profiler(records=records, name="raises")
    def g():
        """doc"""
        allocs.new(8)
        raise KeyError

    assert g.__doc__ == "doc" and g.__name__ == "g"
    enable_statistics()
    with pytest.raises(KeyError):
        g()
    assert records.records["raises"].num_calls == 1


def test_report_orders_and_formats():
    records = ProfilerRecords()
    assert records.report() == "Memory Profiling\n================\n\nNo data, maybe profiling wasn't enabled?"
    records.add("a", stats(0, 0, 10, 1, 5000, 2))
    records.add("b", stats(0, 0, 2000, 1, 2000, 1))
    records.add("b", stats(0, 0, 1000, 1, 1000, 1))
    text = records.report()
    lines = text.splitlines()
    assert lines[:3] == ["Memory Profiling", "================", ""]
    assert "Ordered by: memory_peak" in lines
    assert lines[-3] == "ncalls     memory_peak    memory_total  filename:lineno(function)"
    assert lines[-2] == "     2           2,000           3,000  b"
    assert lines[-1] == "     1              10           5,000  a"
    assert records.report(ordered_by="memory_total").splitlines()[-1].endswith("  b")
    assert records.report(ordered_by="num_calls").splitlines()[-2].endswith("  b")
    assert str(records) == text
    assert repr(records).startswith("ProfilerRecords({'a': ProfilerRecords.MemoryRecord(num_calls=1")
