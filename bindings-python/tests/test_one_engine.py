"""One engine per process: Python is a client of the native library (librmm), as C++ is.

Every resource Python makes is librmm's, Python reads their state through librmm's C entry points,
and a resource of any kind that reaches Python from elsewhere comes back as the object of its class:
the kind list of ``rmm_c.h`` (``RMM_RESOURCE_KIND_*``, rmm-core's ``ResourceKind``) and the Python
classes agree, one class per kind. The loaded objects hold the engine (rmm-core's resources) once.
"""

import ctypes
import pathlib
import re
import sys

import pytest

import rmm
import rmm.mr
from rmm._paths import NATIVE_LIBRARY

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = pathlib.Path(rmm.__file__).resolve().parent


def _header():
    """rmm_c.h (``rmm_rs/rmm_c.h``; ``<rmm/rmm_c.h>`` only includes it) of the checkout, else the one
    the installed wheel carries."""
    for include in (ROOT / "bindings-cpp" / "include", PACKAGE / "include"):
        if (include / "rmm_rs" / "rmm_c.h").is_file():
            return include / "rmm_rs" / "rmm_c.h"
    return None


HEADER = _header()


def header_kinds():
    """{code: "NAME"} of the RMM_RESOURCE_KIND_* defines."""
    text = HEADER.read_text()
    return {int(code): name for name, code in re.findall(r"#define RMM_RESOURCE_KIND_(\w+) (\d+)", text)}


@pytest.mark.skipif(HEADER is None, reason="rmm_c.h is neither in the checkout nor in the installed package")
def test_every_kind_of_the_kind_list_has_its_own_class():
    kinds = header_kinds()
    classes = rmm._rmm._resource_classes()
    assert sorted(classes) == sorted(kinds), "rmm_c.h's RMM_RESOURCE_KIND_* and rmm-core's ResourceKind differ"
    assert classes[0] is rmm.mr.DeviceMemoryResource  # OTHER: a resource librmm cannot name
    named = {code: cls for code, cls in classes.items() if code != 0}
    assert len(set(named.values())) == len(named), "two kinds share a class"
    for code, cls in named.items():
        camel = "".join(word.capitalize() for word in kinds[code].split("_"))
        assert cls.__name__ in (camel + "MemoryResource", camel + "ResourceAdaptor"), (kinds[code], cls)
        assert issubclass(cls, rmm.mr.DeviceMemoryResource) and cls is not rmm.mr.DeviceMemoryResource


class Handle(ctypes.Structure):
    _fields_ = [("self", ctypes.c_void_p), ("vtable", ctypes.c_void_p)]


class Error(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("cuda_code", ctypes.c_int32), ("bytes", ctypes.c_uint64),
                ("message", ctypes.c_char * 512)]


@pytest.fixture
def librmm():
    """The native library the module runs with, for calls as C++ makes them."""
    lib = ctypes.CDLL(rmm._rmm._librmm_path())
    previous = rmm.mr.get_current_device_resource()
    yield lib
    rmm.mr.set_current_device_resource(previous)


def c_new(lib, fn, *args):
    out, err = Handle(), Error()
    assert getattr(lib, fn)(*args, ctypes.byref(out), ctypes.byref(err)) == 0, err.message.decode()
    return out


def test_an_adaptor_made_in_c_comes_back_as_its_class_with_its_upstream(librmm):
    base = c_new(librmm, "rmm_system_memory_resource_new" if rmm.is_host_mode() else "rmm_cuda_memory_resource_new")
    limiting = c_new(librmm, "rmm_limiting_resource_adaptor_new", base, ctypes.c_uint64(1 << 20), ctypes.c_uint64(256))
    err = Error()
    assert librmm.rmm_set_current_device_resource(limiting, None, ctypes.byref(err)) == 0, err.message.decode()
    librmm.rmm_resource_release.argtypes = [Handle]
    librmm.rmm_resource_release(limiting)
    librmm.rmm_resource_release(base)
    mr = rmm.mr.get_current_device_resource()
    assert type(mr) is rmm.mr.LimitingResourceAdaptor
    assert mr.get_allocation_limit() == 1 << 20
    buf = rmm.DeviceBuffer(size=1000)
    assert mr.get_allocated_bytes() == 1024
    del buf
    assert mr.get_allocated_bytes() == 0
    assert type(mr.upstream_mr) in (rmm.mr.SystemMemoryResource, rmm.mr.CudaMemoryResource)
    # One object per resource while it lives: asked again, or met again as an upstream.
    assert rmm.mr.get_current_device_resource() is mr
    stats = rmm.mr.StatisticsResourceAdaptor(mr)
    assert rmm.mr.PoolMemoryResource._from_capsule(stats._to_capsule()).upstream_mr is mr


def test_what_python_makes_is_the_native_librarys(librmm):
    pool = rmm.mr.PoolMemoryResource(rmm.mr.get_current_device_resource(), initial_pool_size=1 << 20)
    librmm.rmm_resource_kind.argtypes = [Handle, ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(Error)]
    rmm.mr.set_current_device_resource(pool)
    current = Handle()
    err = Error()
    assert librmm.rmm_get_current_device_resource(ctypes.byref(current), ctypes.byref(err)) == 0
    kind = ctypes.c_int(-1)
    # rmm_resource_kind answers only for librmm's own resources.
    assert librmm.rmm_resource_kind(current, ctypes.byref(kind), None, ctypes.byref(err)) == 0, err.message.decode()
    assert kind.value == 9  # RMM_RESOURCE_KIND_POOL
    size = ctypes.c_uint64()
    assert librmm.rmm_pool_memory_resource_pool_size(current, ctypes.byref(size), ctypes.byref(err)) == 0
    assert size.value == pool.pool_size() == 1 << 20
    librmm.rmm_resource_release.argtypes = [Handle]
    librmm.rmm_resource_release(current)


def test_the_module_links_the_native_library():
    assert pathlib.Path(rmm._rmm._librmm_path()).name == NATIVE_LIBRARY
    assert rmm._rmm._registry_routes_to_librmm()


def test_the_loaded_objects_hold_the_engine_once():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import engine_copies
    except ImportError:
        pytest.skip("scripts/engine_copies.py is not there (an installed package without the checkout)")
    finally:
        sys.path.pop(0)
    native = str(pathlib.Path(rmm._rmm._librmm_path()).resolve())
    counts = {str(pathlib.Path(p).resolve()): engine_copies.count(p) for p in engine_copies.loaded_objects()}
    if counts[native]["stripped"]:
        pytest.skip(f"{native} is stripped: no symbols to count")
    with_engine = [p for p, c in counts.items() if c["engine"]]
    assert with_engine == [native], counts
    assert counts[native]["pool_core"] > 0
