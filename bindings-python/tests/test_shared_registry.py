"""One registry per process: with librmm_rs.so (the C ABI, what C++ links) loaded before ``import rmm``,
Python's current device resource is librmm's, in both directions.

Each check runs in a fresh interpreter (the registry is chosen at its first use, so the order of
loading matters) and drives librmm through its C ABI with ctypes, as C++ code would through it.
Skipped when librmm_rs.so has not been built (``cargo build --release -p rmm-cpp``; ci/python.sh does).
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import rmm
from rmm._paths import NATIVE_LIBRARY

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _librmm():
    explicit = os.environ.get("RMM_LIBRMM")
    if explicit:
        return pathlib.Path(explicit)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / NATIVE_LIBRARY


LIBRMM = _librmm()

pytestmark = pytest.mark.skipif(
    not LIBRMM.is_file(),
    reason=f"{LIBRMM} is not built (cargo build --release -p rmm-cpp, or set RMM_LIBRMM)",
)

# The C ABI of rmm_c.h through ctypes; the C side of every scenario below.
PRELUDE = """
import ctypes, sys
from ctypes import POINTER, byref, c_char, c_int, c_int32, c_int64, c_size_t, c_uint64, c_void_p

lib = ctypes.CDLL(sys.argv[1])  # first: librmm owns the process's registry

class Resource(ctypes.Structure):
    _fields_ = [("self", c_void_p), ("vtable", c_void_p)]

class Error(ctypes.Structure):
    _fields_ = [("kind", c_int32), ("cuda_code", c_int32), ("bytes", c_uint64), ("message", c_char * 512)]

class Counter(ctypes.Structure):
    _fields_ = [("value", c_int64), ("peak", c_int64), ("total", c_int64)]

def check(status, err):
    assert status == 0, err.message.decode()

def c_new(fn, *args):
    out, err = Resource(), Error()
    check(fn(*args, byref(out), byref(err)), err)
    return out

def c_bytes(stats):
    c, err = Counter(), Error()
    check(lib.rmm_statistics_resource_adaptor_get_bytes_counter(stats, byref(c), byref(err)), err)
    return c.value

host = lib.rmm_is_host_mode() != 0
"""


def run(body):
    script = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pathlib.Path(rmm.__file__).parents[1]), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", script, str(LIBRMM)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def test_python_sees_and_allocates_from_a_resource_set_through_the_c_abi():
    out = run(
        """
        base = c_new(lib.rmm_system_memory_resource_new if host else lib.rmm_cuda_memory_resource_new)
        stats = c_new(lib.rmm_statistics_resource_adaptor_new, base)
        previous, err = Resource(), Error()
        check(lib.rmm_set_current_device_resource(stats, byref(previous), byref(err)), err)

        import rmm, rmm.mr
        assert rmm._rmm._registry_routes_to_librmm()
        mr = rmm.mr.get_current_device_resource()
        # librmm's adaptor, recognised: its counters are readable from Python.
        assert type(mr) is rmm.mr.StatisticsResourceAdaptor, type(mr)
        # Made in C, its upstream too: librmm names both (one kind query each).
        assert type(mr.upstream_mr) is (rmm.mr.SystemMemoryResource if host else rmm.mr.CudaMemoryResource)
        assert mr is rmm.mr.get_current_device_resource()  # one object while it is current
        ptr = mr.allocate(1000)
        assert c_bytes(stats) == 1000  # C counts Python's allocation ...
        counts = mr.allocation_counts  # ... and Python reads the same counters
        assert (counts.current_bytes, counts.current_count, counts.total_count) == (1000, 1, 1)
        mr.push_counters()
        assert c_bytes(stats) == 0
        mr.deallocate(ptr, 1000)
        assert mr.pop_counters().current_bytes == -1000
        assert c_bytes(stats) == 0

        held = id(mr)
        del mr
        assert id(rmm.mr.get_current_device_resource()) == held  # even when nobody holds it
        mr = rmm.mr.get_current_device_resource()
        # rmm.statistics sees C's adaptor as the current statistics adaptor (an identity check).
        import rmm.statistics
        with rmm.statistics.statistics():
            b = rmm.DeviceBuffer(size=100)
            assert rmm.statistics.get_statistics().current_bytes == 100
            del b
        assert rmm.mr.get_current_device_resource() is mr
        # Restored from C: Python follows.
        check(lib.rmm_set_current_device_resource(previous, None, byref(err)), err)
        assert type(rmm.mr.get_current_device_resource()) is not rmm.mr.StatisticsResourceAdaptor
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_c_sees_and_allocates_from_a_resource_set_by_python():
    out = run(
        """
        import rmm, rmm.mr
        base = rmm.mr.SystemMemoryResource() if host else rmm.mr.CudaMemoryResource()
        pool = rmm.mr.PoolMemoryResource(base, 1 << 20)
        stats = rmm.mr.StatisticsResourceAdaptor(pool)
        previous = rmm.mr.get_current_device_resource()
        rmm.mr.set_current_device_resource(stats)

        current, err = Resource(), Error()
        check(lib.rmm_get_current_device_resource(byref(current), byref(err)), err)
        lib.rmm_resource_name.restype = ctypes.c_char_p
        assert lib.rmm_resource_name(current) == b"statistics_resource_adaptor"
        ptr = c_void_p()
        check(lib.rmm_resource_allocate_sync(current, c_size_t(512), c_size_t(256), byref(ptr), byref(err)), err)
        assert stats.allocation_counts.current_bytes == 512  # Python counts C's allocation
        check(lib.rmm_resource_deallocate_sync(current, ptr, c_size_t(512), c_size_t(256), byref(err)), err)
        lib.rmm_resource_release(current)
        assert stats.allocation_counts.current_bytes == 0
        assert stats.allocation_counts.total_count == 1
        assert rmm.mr.get_current_device_resource() is stats  # still Python's own object

        # Replaced from C: Python does not hand out its stale object.
        other = c_new(lib.rmm_system_memory_resource_new if host else lib.rmm_cuda_memory_resource_new)
        check(lib.rmm_set_current_device_resource(other, None, byref(err)), err)
        assert rmm.mr.get_current_device_resource() is not stats
        rmm.mr.set_current_device_resource(previous)
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_buffers_follow_every_change_of_the_current_resource_from_either_side():
    # DeviceBuffer's default resource comes from a cache keyed on librmm's registry generation
    # (rmm_registry_generation): every set from C must be seen by the next buffer.
    out = run(
        """
        import rmm, rmm.mr
        lib.rmm_registry_generation.restype = c_uint64
        start = lib.rmm_registry_generation()
        assert start != 0

        base = rmm.mr.SystemMemoryResource() if host else rmm.mr.CudaMemoryResource()
        mine = rmm.mr.StatisticsResourceAdaptor(base)
        previous = rmm.mr.get_current_device_resource()
        rmm.mr.set_current_device_resource(mine)
        after_python_set = lib.rmm_registry_generation()
        assert after_python_set != start  # a set from Python is a set of librmm's registry
        bufs = [rmm.DeviceBuffer(size=1000) for _ in range(3)]  # the 2nd and 3rd hit the cache
        assert mine.allocation_counts.current_count == 3
        assert lib.rmm_registry_generation() == after_python_set  # reads change nothing

        # Replaced from C: the next buffer comes from C's resource, not the cached object.
        theirs = c_new(lib.rmm_statistics_resource_adaptor_new, c_new(
            lib.rmm_system_memory_resource_new if host else lib.rmm_cuda_memory_resource_new))
        mine_handle, err = Resource(), Error()
        check(lib.rmm_set_current_device_resource(theirs, byref(mine_handle), byref(err)), err)
        assert lib.rmm_registry_generation() != after_python_set
        buf = rmm.DeviceBuffer(size=500)
        assert c_bytes(theirs) == 500
        assert mine.allocation_counts.current_count == 3
        assert rmm.mr.get_current_device_resource() is not mine

        # Python's own resource put back from C: Python's object again, and buffers use it.
        check(lib.rmm_set_current_device_resource(mine_handle, None, byref(err)), err)
        lib.rmm_resource_release(mine_handle)
        assert rmm.mr.get_current_device_resource() is mine
        more = rmm.DeviceBuffer(size=1000)
        assert mine.allocation_counts.current_count == 4
        del bufs, buf, more
        assert c_bytes(theirs) == 0 and mine.allocation_counts.current_count == 0
        rmm.mr.set_current_device_resource(previous)
        lib.rmm_resource_release(theirs)
        print("ok")
        """
    )
    assert out.strip() == "ok"
