"""Buffers and resources across languages with no copy: a small C++ extension module
(``capsule_ext/rmm_capsule_test.cpp``, built here with g++ against librmm_rs.so and the Python headers)
makes buffers in C++ and hands them to Python as ``rmm.DeviceBuffer``, takes them back, holds them,
and passes memory resources both ways, through the versioned capsules of ``<rmm/python.hpp>``.

What a user would notice is asserted: the same address on both sides (no copy), the contents, the
reference counts, and a statistics adaptor showing every allocation freed exactly once, after the
last owner (in either language) let go, through the resource that made it even when another one is
current by then. Each scenario runs in a fresh interpreter that loads the extension (and so
librmm_rs.so) before ``import rmm``, so C++ and Python share one registry.

Skipped when librmm_rs.so is not built (``cargo build --release -p rmm-cpp``; ci/python.sh does) or
g++ is missing. The ``std::unique_ptr<rmm::device_buffer>`` tests also need the CCCL headers
(``RMM_CCCL_INCLUDE_DIRS``, ``;``-separated, as ci/cpp.sh fetches them) and skip without them.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import rmm
from rmm._paths import NATIVE_LIBRARY

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = pathlib.Path(__file__).resolve().parent / "capsule_ext" / "rmm_capsule_test.cpp"


PACKAGE = pathlib.Path(rmm.__file__).resolve().parent


def _librmm():
    """RMM_LIBRMM, else the workspace's release build, else the one the installed wheel carries."""
    explicit = os.environ.get("RMM_LIBRMM")
    if explicit:
        return pathlib.Path(explicit)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    built = target / "release" / NATIVE_LIBRARY
    carried = PACKAGE / "lib" / NATIVE_LIBRARY
    return built if built.is_file() or not carried.is_file() else carried


def _include():
    """The headers of the checkout, else those the installed wheel carries (rmm.get_include())."""
    checkout = ROOT / "bindings-cpp" / "include"
    return checkout if checkout.is_dir() else PACKAGE / "include"


LIBRMM = _librmm()
INCLUDE = _include()
CCCL = [d for d in os.environ.get("RMM_CCCL_INCLUDE_DIRS", "").split(";") if d]
CXX_REASON = "the C++ API needs the CCCL headers: set RMM_CCCL_INCLUDE_DIRS (ci/python.sh fetches them)"

pytestmark = [
    pytest.mark.skipif(not LIBRMM.is_file(), reason=f"{LIBRMM} is not built (cargo build --release -p rmm-cpp)"),
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
    pytest.mark.skipif(not (pathlib.Path(sysconfig.get_paths()["include"]) / "Python.h").is_file(),
                       reason="the Python headers (Python.h) are not installed"),
]


def _compile(out_dir, cxx_api):
    ext = out_dir / ("rmm_capsule_test" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = ["g++", "-std=c++17", "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
           "-I", sysconfig.get_paths()["include"], "-I", str(INCLUDE)]
    if cxx_api:
        cmd += ["-DRMM_TEST_CXX_API"] + [arg for d in CCCL for arg in ("-isystem", d)]
    cmd += [str(SOURCE), "-o", str(ext), str(LIBRMM), f"-Wl,-rpath,{LIBRMM.parent}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out_dir


@pytest.fixture(scope="module")
def ext_dir(tmp_path_factory):
    """The extension built with the C++ API when CCCL is there, else with the C-level API only."""
    out = tmp_path_factory.mktemp("capsule_ext")
    try:
        return _compile(out, cxx_api=bool(CCCL))
    except subprocess.CalledProcessError as e:
        pytest.fail(f"building the test extension failed:\n{' '.join(e.cmd)}\n{e.stderr}")


# Loads the extension (and with it librmm_rs.so) first, then rmm: one registry. `stats` is a
# statistics adaptor made current in Python; C++ allocates through it as the current resource.
PRELUDE = """
import gc, sys, weakref
sys.path.insert(0, sys.argv[1])
import rmm_capsule_test as ext
import rmm

upstream = rmm.mr.SystemMemoryResource() if rmm.is_host_mode() else rmm.mr.CudaMemoryResource()
stats = rmm.mr.StatisticsResourceAdaptor(upstream)
previous = rmm.mr.get_current_device_resource()
rmm.mr.set_current_device_resource(stats)

def counts(mr=None):
    c = (mr or stats).allocation_counts
    return (c.current_bytes, c.current_count, c.total_count)
"""


def run(ext_dir, body):
    script = PRELUDE + textwrap.dedent(body) + "\nprint('OK')\n"
    proc = subprocess.run([sys.executable, "-c", script, str(ext_dir)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stdout + proc.stderr


def test_a_buffer_made_in_cpp_becomes_a_python_device_buffer(ext_dir):
    run(ext_dir, """
        buf = ext.make_buffer(100, 7)
        assert type(buf) is rmm.DeviceBuffer
        assert buf.size == 100 and buf.tobytes() == bytes([7]) * 100
        assert counts() == (100, 1, 1), counts()          # C++ allocated through Python's adaptor
        assert sys.getrefcount(buf) == 2                  # Python is the only owner
        dead = weakref.ref(buf)
        del buf
        gc.collect()
        assert dead() is None
        assert counts() == (0, 0, 1), counts()            # freed once, when Python let go
    """)


def test_the_free_goes_to_the_resource_that_made_it_after_the_current_one_changed(ext_dir):
    run(ext_dir, """
        buf = ext.make_buffer(64, 1)
        other = rmm.mr.StatisticsResourceAdaptor(upstream)
        rmm.mr.set_current_device_resource(other)
        del buf
        assert counts() == (0, 0, 1), counts()
        assert counts(other) == (0, 0, 0), counts(other)  # nothing went through the new current one
        rmm.mr.set_current_device_resource(previous)
    """)


def test_a_python_buffer_moves_to_cpp_and_is_freed_by_cpp_last(ext_dir):
    run(ext_dir, """
        buf = rmm.DeviceBuffer.to_device(b"hello world")
        ptr = buf.ptr
        assert ext.hold(buf) == 1
        assert buf.size == 0 and buf.ptr == 0             # moved out, as RMM's c_release
        assert counts() == (11, 1, 1)
        del buf
        gc.collect()
        assert counts() == (11, 1, 1), counts()           # C++ still owns the memory
        back = ext.give_back()                            # and hands it back: the same memory
        assert back.ptr == ptr and back.tobytes() == b"hello world"
        assert ext.hold(back) == 1
        assert ext.drop_held() == 1
        assert counts() == (0, 0, 1), counts()            # freed once, by C++
    """)


def test_cpp_takes_a_buffer_without_a_copy(ext_dir):
    run(ext_dir, """
        buf = rmm.DeviceBuffer.to_device(bytes(range(32)))
        ptr = buf.ptr
        addr, data = ext.take(buf)
        assert addr == ptr and data == bytes(range(32))
        assert counts() == (0, 0, 1), counts()
        with_capsule = rmm.DeviceBuffer.to_device(b"abc")._to_capsule()
        assert ext.take(with_capsule)[1] == b"abc"
        assert counts() == (0, 0, 2), counts()
    """)


def test_a_capsule_nobody_adopts_frees_its_memory(ext_dir):
    run(ext_dir, """
        cap = ext.make_capsule(48, 3)
        assert counts() == (48, 1, 1)
        del cap
        assert counts() == (0, 0, 1), counts()
        cap = rmm.DeviceBuffer.to_device(b"xyz")._to_capsule()
        del cap
        assert counts() == (0, 0, 2), counts()
    """)


def test_wrong_foreign_and_used_capsules_are_clear_errors(ext_dir):
    run(ext_dir, """
        import ctypes
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype = ctypes.py_object
        new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        anchor = ctypes.c_int(0)

        def expect(exc, words, fn, *args):
            try:
                fn(*args)
            except exc as e:
                assert all(w in str(e) for w in words), (exc, words, str(e))
            else:
                raise AssertionError(f"{fn} did not raise {exc.__name__}")

        expect(TypeError, ["rmm.device_buffer.v1", "int"], rmm.DeviceBuffer._from_capsule, 42)
        foreign = new_capsule(ctypes.addressof(anchor), b"dltensor", None)
        expect(TypeError, ["dltensor"], rmm.DeviceBuffer._from_capsule, foreign)
        expect(TypeError, ["rmm.memory_resource.v1"], rmm.DeviceBuffer._from_capsule, stats._to_capsule())
        expect(TypeError, ["rmm.memory_resource.v1"], rmm.mr.DeviceMemoryResource._from_capsule,
               rmm.DeviceBuffer.to_device(b"a")._to_capsule())
        newer = new_capsule(ctypes.addressof(anchor), b"rmm.device_buffer.v2", None)
        expect(ValueError, ["v2", "version"], rmm.DeviceBuffer._from_capsule, newer)
        expect(ValueError, ["v2", "version"], ext.take, newer)
        expect(TypeError, ["dltensor"], ext.take, foreign)

        cap = ext.make_capsule(8, 0)
        buf = rmm.DeviceBuffer._from_capsule(cap)
        expect(ValueError, ["already consumed"], rmm.DeviceBuffer._from_capsule, cap)
        expect(ValueError, ["already consumed"], ext.take, cap)
        expect(TypeError, ["rmm.DeviceBuffer", "str"], ext.take, "not a buffer")
        expect(TypeError, ["memory resource", "int"], ext.allocate_through, 3, 8)

        # An export whose fields do not hold together (another struct version) is refused and not
        # consumed: the capsule can still be adopted once the field is right.
        class Export(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32)]
        cap = ext.make_capsule(16, 5)
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        export = Export.from_address(get_pointer(cap, b"rmm.device_buffer.v1"))
        export.version = 7
        expect(ValueError, ["version 7"], rmm.DeviceBuffer._from_capsule, cap)
        expect(ValueError, ["version 7"], ext.take, cap)
        export.version = 1
        assert rmm.DeviceBuffer._from_capsule(cap).tobytes() == bytes([5]) * 16
        del buf, cap
        gc.collect()
        assert counts()[:2] == (0, 0), counts()
    """)


def test_resources_cross_both_ways_as_the_same_object(ext_dir):
    run(ext_dir, """
        cap = stats._to_capsule()
        again = rmm.mr.DeviceMemoryResource._from_capsule(cap)
        also = rmm.mr.DeviceMemoryResource._from_capsule(cap)  # a resource capsule is not used up
        assert isinstance(again, rmm.mr.StatisticsResourceAdaptor)
        back = ext.resource_roundtrip(stats)                   # Python -> C -> Python
        assert isinstance(back, rmm.mr.StatisticsResourceAdaptor)
        b = again.allocate(1000)
        assert counts(back)[:2] == counts()[:2] == (1000, 1)   # one adaptor, seen three ways
        again.deallocate(b, 1000)
        ext.allocate_through(stats, 4096)                      # C allocates through Python's resource
        assert counts() == (0, 0, 2), counts()
        del cap, again, also, back
        gc.collect()
    """)


def test_unique_ptr_device_buffers_cross_both_ways(ext_dir):
    if not CCCL:
        pytest.skip(CXX_REASON)
    run(ext_dir, """
        assert ext.HAS_CXX_API == 1
        buf = ext.cxx_make(256)                     # std::unique_ptr<rmm::device_buffer> -> rmm.DeviceBuffer
        assert type(buf) is rmm.DeviceBuffer and buf.size == 256
        assert counts() == (256, 1, 1)
        buf.copy_from_host(b"from python")
        size, data, mr = ext.cxx_take(buf)          # rmm::from_python -> std::unique_ptr<rmm::device_buffer>
        assert size == 256 and data[:11] == b"from python"
        assert isinstance(mr, rmm.mr.StatisticsResourceAdaptor)
        assert counts() == (0, 0, 1), counts()

        # A Python resource as the C++ buffer's resource (device_async_resource_ref), not the current one.
        mine = rmm.mr.StatisticsResourceAdaptor(upstream)
        rmm.mr.set_current_device_resource(previous)
        buf = ext.cxx_make(128, mine)
        assert counts(mine) == (128, 1, 1) and counts() == (0, 0, 1)
        del buf
        assert counts(mine) == (0, 0, 1), counts(mine)
    """)
