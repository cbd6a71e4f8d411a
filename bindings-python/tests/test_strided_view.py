"""rmm.StridedMemoryView and DLPack 1.x (issue 11): views of DLPack, CUDA Array Interface and
buffer-protocol producers, their C struct, acquire/release semantics, DeviceBuffer.__dlpack__.

CPU tests use NumPy and host mode (DeviceBuffer memory is host memory, exported as kDLCPU); the GPU
tests (marked ``gpu``) use CuPy and PyTorch when installed."""

import array
import ctypes
import gc
import subprocess
import sys
import textwrap

import pytest

import rmm
import rmm.mr
from rmm import StridedMemoryView
from rmm._paths import NATIVE_LIBRARY

np = pytest.importorskip("numpy")

# ---- the C struct, read with ctypes (the layout of rmm_strided_view in rmm_c.h) ------------------


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class CView(ctypes.Structure):
    pass


CView._fields_ = [
    ("ptr", ctypes.c_size_t),
    ("ndim", ctypes.c_int),
    ("shape", ctypes.POINTER(ctypes.c_int64)),
    ("strides", ctypes.POINTER(ctypes.c_int64)),
    ("byte_strides", ctypes.POINTER(ctypes.c_int64)),
    ("itemsize", ctypes.c_int64),
    ("dtype", DLDataType),
    ("format", ctypes.c_char_p),
    ("device_type", ctypes.c_int),
    ("device_id", ctypes.c_int),
    ("device_accessible", ctypes.c_bool),
    ("readonly", ctypes.c_bool),
    ("owner", ctypes.c_void_p),
    ("device_copy", ctypes.POINTER(CView)),
    ("generation", ctypes.c_uint64),
]


def c_struct(view):
    return CView.from_address(view.c_view_address)


# ---- DLPack capsules made by hand (every DLPack dtype, wrong names) --------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("major", ctypes.c_uint32),
    ("minor", ctypes.c_uint32),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_keep = {}  # hand-made tensors and their data, by serial number (manager_ctx), until deleted
deleted = []  # serial numbers of the tensors whose deleter ran


@DELETER
def _deleter(t):
    serial = t.contents.manager_ctx
    deleted.append(serial)
    _keep.pop(serial, None)


def hand_made_capsule(code, bits, shape=(2, 3), flags=0, major=1, name=b"dltensor_versioned"):
    n = 1
    for s in shape:
        n *= s
    data = (ctypes.c_uint8 * max(1, n * max(1, bits // 8)))()
    shp = (ctypes.c_int64 * len(shape))(*shape)
    t = DLManagedTensorVersioned()
    serial = len(_keep) + len(deleted) + 1
    t.major, t.minor, t.deleter, t.flags, t.manager_ctx = major, 1, _deleter, flags, serial
    t.dl_tensor.data = ctypes.addressof(data)
    t.dl_tensor.device = DLDevice(1, 0)
    t.dl_tensor.ndim = len(shape)
    t.dl_tensor.dtype = DLDataType(code, bits, 1)
    t.dl_tensor.shape = shp
    _keep[serial] = (t, data, shp)
    # No capsule destructor: the tests consume the capsules (the view then calls the deleter).
    return _capsule_new(ctypes.addressof(t), name, None), serial, ctypes.addressof(data)


# ---- NumPy views -------------------------------------------------------------------------------

BASE = np.arange(6 * 8, dtype=np.float64).reshape(6, 8)

ARRAYS = {
    "contiguous": BASE,
    "odd strides": BASE[::3, 1::2],
    "negative strides": BASE[::-1, ::-2],
    "transposed": BASE.T,
    "0-d": np.array(3.5),
    "empty": np.zeros((3, 0)),
    "broadcast (stride 0)": np.broadcast_to(np.arange(3.0), (4, 3)),
}


def addr(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("how", ["from_object", "from_buffer"])
@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_numpy_views_have_numpys_geometry(name, how):
    a = ARRAYS[name]
    v = getattr(StridedMemoryView, how)(a)
    assert v.ptr == addr(a)
    assert v.ndim == a.ndim
    assert v.shape == a.shape
    if a.size == 0:  # strides of an empty array mean nothing; exporters differ (NumPy's buffer: (0, 8))
        a = np.lib.stride_tricks.as_strided(a, strides=v.byte_strides)
    assert v.byte_strides == a.strides
    assert v.strides == tuple(s // a.itemsize for s in a.strides)
    assert v.itemsize == a.itemsize == 8
    assert v.format == "<f8" and v.dtype == a.dtype and v.dl_dtype == (2, 64, 1)
    assert (v.device_type, v.device_id, v.is_device_accessible) == (1, 0, False)
    assert v.readonly == (not a.flags.writeable)
    assert v.size == a.size
    assert v.is_c_contiguous == a.flags.c_contiguous
    assert v.is_f_contiguous == a.flags.f_contiguous
    assert v.exporting_obj is ARRAYS[name]
    assert v.shape_memoryview.tolist() == list(a.shape)
    assert v.strides_memoryview.tolist() == list(v.strides)
    assert v.byte_strides_memoryview.tolist() == list(a.strides)
    # The C struct says the same, with no Python call.
    c = c_struct(v)
    assert (c.ptr, c.ndim, c.itemsize, c.format) == (addr(a), a.ndim, 8, b"<f8")
    assert [c.shape[i] for i in range(a.ndim)] == list(a.shape)
    assert [c.byte_strides[i] for i in range(a.ndim)] == list(a.strides)
    assert c.generation == v.generation != 0


DTYPES = [
    ("bool", "|b1", (6, 8)),
    ("int8", "|i1", (0, 8)),
    ("int16", "<i2", (0, 16)),
    ("int32", "<i4", (0, 32)),
    ("int64", "<i8", (0, 64)),
    ("uint8", "|u1", (1, 8)),
    ("uint16", "<u2", (1, 16)),
    ("uint32", "<u4", (1, 32)),
    ("uint64", "<u8", (1, 64)),
    ("float16", "<f2", (2, 16)),
    ("float32", "<f4", (2, 32)),
    ("float64", "<f8", (2, 64)),
    ("complex64", "<c8", (5, 64)),
    ("complex128", "<c16", (5, 128)),
]


@pytest.mark.parametrize("how", ["from_object", "from_buffer"])
@pytest.mark.parametrize("dtype,fmt,dl", DTYPES)
def test_every_numpy_dtype(dtype, fmt, dl, how):
    a = np.zeros((3, 5), dtype=dtype)[:, ::2]
    v = getattr(StridedMemoryView, how)(a)
    assert (v.format, v.dl_dtype[:2], v.itemsize) == (fmt, dl, a.itemsize)
    assert v.dtype == a.dtype
    assert v.byte_strides == a.strides


# Every DLPack type code 0..17 (bits as DLPack defines them), through hand-made capsules.
ALL_DLPACK = [
    ((0, 8), "|i1"), ((1, 16), "<u2"), ((2, 16), "<f2"), ((3, 8), "|V1"), ((4, 16), "bfloat16"),
    ((5, 32), "<c4"), ((5, 128), "<c16"), ((6, 8), "|b1"), ((7, 8), "float8_e3m4"), ((8, 8), "float8_e4m3"),
    ((9, 8), "float8_e4m3b11fnuz"), ((10, 8), "float8_e4m3fn"), ((11, 8), "float8_e4m3fnuz"),
    ((12, 8), "float8_e5m2"), ((13, 8), "float8_e5m2fnuz"), ((14, 8), "float8_e8m0fnu"),
    ((15, 6), "float6_e2m3fn"), ((16, 6), "float6_e3m2fn"), ((17, 4), "float4_e2m1fn"),
]


@pytest.mark.parametrize("dl,fmt", ALL_DLPACK)
def test_every_dlpack_dtype_has_a_format(dl, fmt):
    padded = 4 if dl[1] < 8 else 0  # DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
    cap, t, data = hand_made_capsule(*dl, flags=padded)
    v = StridedMemoryView.from_dlpack(cap)
    assert _capsule_name(cap) == b"used_dltensor_versioned"
    assert (v.format, v.dl_dtype, v.ptr) == (fmt, (dl[0], dl[1], 1), data)
    assert v.itemsize == max(1, dl[1] // 8)
    assert c_struct(v).format == fmt.encode()
    v.release()
    assert t in deleted, "release ran the producer's deleter"


def test_packed_sub_byte_items_and_other_majors_are_refused_and_not_consumed():
    cap, t, _ = hand_made_capsule(17, 4, flags=0)
    with pytest.raises(RuntimeError, match="sub-byte"):
        StridedMemoryView.from_dlpack(cap)
    assert _capsule_name(cap) == b"dltensor_versioned"
    cap, t, _ = hand_made_capsule(2, 32, major=2)
    with pytest.raises(RuntimeError, match="major version"):
        StridedMemoryView.from_dlpack(cap)
    assert _capsule_name(cap) == b"dltensor_versioned"
    assert t not in deleted


def test_buffer_protocol_producers_without_dlpack():
    b = bytearray(b"abcdef")
    v = StridedMemoryView(b)
    assert (v.shape, v.format, v.readonly, v.ptr) == ((6,), "|u1", False, ctypes.addressof(ctypes.c_char.from_buffer(b)))
    ro = StridedMemoryView(b"xyz")
    assert ro.readonly and ro.shape == (3,)
    arr = array.array("d", [1.0, 2.0, 3.0])
    v = StridedMemoryView(memoryview(arr)[::-1])
    assert (v.format, v.strides, v.byte_strides) == ("<f8", (-1,), (-8,))
    q = StridedMemoryView(memoryview(array.array("q", range(6))).cast("B").cast("q", (2, 3)))
    assert (q.shape, q.format) == ((2, 3), "<i8")
    with pytest.raises(TypeError, match="cannot view"):
        StridedMemoryView(object())


# ---- acquire / release -----------------------------------------------------------------------------


def test_release_lets_go_and_use_after_release_is_a_value_error():
    import weakref

    a = np.arange(10.0)
    alive = weakref.ref(a)
    v = StridedMemoryView(a)
    shape_mv = v.shape_memoryview
    c = c_struct(v)
    del a
    gc.collect()
    assert alive() is not None, "the view keeps its producer alive"
    assert ctypes.c_double.from_address(v.ptr + 8 * 9).value == 9.0
    v.release()
    gc.collect()
    assert alive() is None, "release let go of the producer"
    assert v.released and v.generation == 0
    assert c.generation == 0 and not c.shape, "the C struct is cleared: NULL pointers, generation 0"
    for attr in ["ptr", "shape", "strides", "format", "readonly", "shape_memoryview", "dtype"]:
        with pytest.raises(ValueError, match="released"):
            getattr(v, attr)
    with pytest.raises(ValueError, match="already released"):
        v.release()
    with pytest.raises(ValueError, match="released"):
        v.__dlpack__()
    assert shape_mv.tolist() == [10], "memoryviews taken before stay valid (they share the storage)"
    assert "released" in repr(v)


def test_context_manager_releases():
    with StridedMemoryView(np.ones(3)) as v:
        assert v.shape == (3,)
    assert v.released


def test_memoryviews_are_zero_copy_and_read_only():
    a = np.zeros((4, 5, 6))[::2, :, ::3]
    v = StridedMemoryView(a)
    c = c_struct(v)
    for mv, ptr, want in [
        (v.shape_memoryview, c.shape, a.shape),
        (v.strides_memoryview, c.strides, v.strides),
        (v.byte_strides_memoryview, c.byte_strides, a.strides),
    ]:
        assert (mv.format, mv.itemsize, mv.readonly, mv.tolist()) == ("q", 8, True, list(want))
        # Same memory as the C struct's pointer: the memoryview's first item is at that address.
        first = np.frombuffer(mv, dtype=np.int64)
        assert first.__array_interface__["data"][0] == ctypes.cast(ptr, ctypes.c_void_p).value
    z = StridedMemoryView(np.array(1.0))
    assert z.shape_memoryview.tolist() == [] and z.shape == () and not c_struct(z).shape


# ---- DLPack: capsules, errors, legacy, export --------------------------------------------------------


def test_capsule_errors():
    cap = np.arange(3.0).__dlpack__(max_version=(1, 0))
    StridedMemoryView.from_dlpack(cap)
    with pytest.raises(ValueError, match="already consumed"):
        StridedMemoryView.from_dlpack(cap)
    wrong, _, _ = hand_made_capsule(2, 32, name=b"not_dltensor")
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        StridedMemoryView.from_dlpack(wrong)
    with pytest.raises(TypeError):
        StridedMemoryView.from_dlpack(42)
    with pytest.raises(TypeError, match="stream"):
        StridedMemoryView(np.ones(2), stream="not a stream")
    assert StridedMemoryView(np.ones(2), stream=-1).shape == (2,)


def test_legacy_producer_fallback():
    a = np.arange(6.0).reshape(2, 3)

    class Legacy:  # a DLPack 0.x producer: no max_version, unversioned capsules
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    v = StridedMemoryView(Legacy())
    assert (v.shape, v.ptr, v.readonly) == ((2, 3), addr(a), False)


def test_a_views_dlpack_export_is_zero_copy_with_its_strides():
    a = np.arange(24.0).reshape(4, 6)[::-1, 1::2]
    v = StridedMemoryView(a)
    b = np.from_dlpack(v)
    assert addr(b) == addr(a) and b.strides == a.strides
    np.testing.assert_array_equal(a, b)
    v.release()
    del a
    gc.collect()
    np.testing.assert_array_equal(b[0], [19.0, 21.0, 23.0])  # the export keeps the producer alive
    with pytest.raises(BufferError):
        StridedMemoryView(np.ones(2)).__dlpack__(copy=True)
    with pytest.raises(BufferError):
        StridedMemoryView(np.ones(2)).__dlpack__(dl_device=(2, 0))
    legacy = StridedMemoryView(np.ones(2)).__dlpack__()
    assert _capsule_name(legacy) == b"dltensor"


# ---- DeviceBuffer's DLPack ---------------------------------------------------------------------------


@pytest.fixture
def stats():
    return rmm.mr.StatisticsResourceAdaptor(rmm.mr.get_current_device_resource())


@pytest.mark.skipif(not rmm.is_host_mode(), reason="host mode: DeviceBuffer memory is host memory")
def test_host_mode_device_buffer_is_kdlcpu_and_numpy_reads_it_without_a_copy(stats):
    buf = rmm.DeviceBuffer(size=4, mr=stats)
    buf.copy_from_host(np.array([1, 2, 3, 4], dtype=np.uint8))
    assert buf.__dlpack_device__() == (1, 0)
    x = np.from_dlpack(buf)
    assert (x.dtype, x.shape, addr(x)) == (np.uint8, (4,), buf.ptr)
    x[0] = 9
    assert buf.tobytes() == b"\x09\x02\x03\x04", "zero-copy: a write through NumPy is seen by the buffer"
    del buf
    gc.collect()
    assert stats.allocation_counts.current_bytes == 4, "the capsule keeps the buffer alive"
    assert x.tolist() == [9, 2, 3, 4]
    del x
    gc.collect()
    assert stats.allocation_counts.current_bytes == 0, "freed when the consumer lets go"


def test_device_buffer_dlpack_options(stats):
    buf = rmm.DeviceBuffer(size=8, mr=stats)
    dev = buf.__dlpack_device__()
    legacy = buf.__dlpack__()
    assert _capsule_name(legacy) == b"dltensor"
    versioned = buf.__dlpack__(max_version=(1, 0))
    assert _capsule_name(versioned) == b"dltensor_versioned"
    t = DLManagedTensorVersioned.from_address(_capsule_pointer(versioned, b"dltensor_versioned"))
    assert (t.major, t.minor, t.flags) == (1, 0, 0), "minor capped at the consumer's"
    assert (t.dl_tensor.ndim, t.dl_tensor.shape[0], t.dl_tensor.dtype.code, t.dl_tensor.dtype.bits) == (1, 8, 1, 8)
    assert t.dl_tensor.data == buf.ptr
    newer = buf.__dlpack__(max_version=(1, 7))
    t = DLManagedTensorVersioned.from_address(_capsule_pointer(newer, b"dltensor_versioned"))
    assert (t.major, t.minor) == (1, 1)
    copied = buf.__dlpack__(max_version=(1, 1), copy=True)
    t = DLManagedTensorVersioned.from_address(_capsule_pointer(copied, b"dltensor_versioned"))
    assert t.flags & 2 and t.dl_tensor.data != buf.ptr, "copy=True: a new buffer, flagged IS_COPIED"
    assert stats.allocation_counts.current_count == 2
    del copied, t
    gc.collect()
    assert stats.allocation_counts.current_count == 1, "an unconsumed capsule deletes its tensor"
    buf.__dlpack__(max_version=(1, 1), copy=False)
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(dev[0] + 1, 0))
    with pytest.raises(TypeError):
        buf.__dlpack__(max_version=3)
    v = StridedMemoryView(buf)
    assert (v.shape, v.format, v.ptr, v.exporting_obj) == ((8,), "|u1", buf.ptr, buf)


def test_cuda_array_interface_producers():
    buf = rmm.DeviceBuffer(size=12)
    v = StridedMemoryView.from_cuda_array_interface(buf)
    assert (v.ptr, v.shape, v.format, v.readonly) == (buf.ptr, (12,), "|u1", False)
    a = np.arange(12, dtype=np.int32).reshape(3, 4)

    class CAI:
        def __init__(self, **extra):
            self.__cuda_array_interface__ = {
                "data": (addr(a), True), "shape": (3, 2), "typestr": "<i4", "strides": (16, 8),
                "version": 3, **extra,
            }

    v = StridedMemoryView(CAI(stream=None))
    assert (v.shape, v.strides, v.byte_strides, v.readonly) == ((3, 2), (4, 2), (16, 8), True)
    with pytest.raises(ValueError, match="stream 0"):
        StridedMemoryView(CAI(stream=0))
    with pytest.raises(BufferError, match="masked"):
        StridedMemoryView(CAI(mask=object()))
    bad = CAI()
    bad.__cuda_array_interface__["strides"] = (16, 6)
    with pytest.raises(ValueError, match="multiple of the item size"):
        StridedMemoryView(bad)
    for version in (99, 4, -1, "3", 2.5):
        with pytest.raises(ValueError, match="unsupported __cuda_array_interface__ version"):
            StridedMemoryView.from_cuda_array_interface(CAI(version=version))
    for version in (0, 1, 2, 3):
        assert StridedMemoryView.from_cuda_array_interface(CAI(version=version)).shape == (3, 2)


def test_to_device_copies_the_struct_into_the_resources_memory():
    a = np.zeros((5, 7), dtype=np.complex64)[::-2, ::3]
    v = StridedMemoryView(a)
    d = v.to_device()
    assert d.shape == v.shape and d.device_copy_address != 0
    assert d.strides_memoryview.tolist() == list(v.strides), "host-side metadata shared with memoryviews"
    if rmm.is_host_mode():
        c = CView.from_address(d.device_copy_address)
        assert (c.ndim, c.itemsize, c.format, c.generation) == (2, 8, b"<c8", d.generation)
        assert [c.shape[i] for i in range(2)] == list(a.shape)
        assert [c.strides[i] for i in range(2)] == list(v.strides)
        assert ctypes.addressof(c.device_copy.contents) == d.device_copy_address
    d.release()
    with pytest.raises(ValueError):
        d.device_copy_address


def test_the_pxd_is_shipped_and_cython_can_read_the_struct(tmp_path):
    import pathlib

    pxd = pathlib.Path(rmm.__file__).parent / "librmm" / "strided_view.pxd"
    assert pxd.is_file()
    pytest.importorskip("Cython")
    pyximport = pytest.importorskip("pyximport")
    src = tmp_path / "read_view.pyx"
    src.write_text(textwrap.dedent("""
        from libc.stdint cimport uintptr_t
        from rmm.librmm.strided_view cimport rmm_strided_view

        def read(view):
            cdef const rmm_strided_view* v = <const rmm_strided_view*><uintptr_t>view.c_view_address
            return (v.ptr, v.ndim, [v.shape[i] for i in range(v.ndim)], [v.strides[i] for i in range(v.ndim)],
                    v.itemsize, v.format.decode(), v.device_type, bool(v.readonly), v.dtype.code, v.generation)
    """))
    code = textwrap.dedent(f"""
        import sys, numpy as np, pyximport
        pyximport.install(build_dir={str(tmp_path / "build")!r}, language_level=3)
        sys.path.insert(0, {str(tmp_path)!r})
        import rmm, read_view
        a = np.arange(12.0).reshape(3, 4)[:, ::-2]
        v = rmm.StridedMemoryView(a)
        print(read_view.read(v) == (v.ptr, 2, [3, 2], [4, -2], 8, "<f8", 1, False, 2, v.generation))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if "error: command" in out.stderr and "not found" in out.stderr:
        pytest.skip("no C compiler")
    assert out.stdout.strip() == "True", out.stderr[-3000:]


# ---- GPU: PyTorch and CuPy ------------------------------------------------------------------------


@pytest.mark.gpu
def test_torch_from_dlpack_of_a_device_buffer_is_zero_copy_and_keeps_it_alive(stats):
    torch = pytest.importorskip("torch")
    buf = rmm.DeviceBuffer(size=64, mr=stats)
    assert buf.__dlpack_device__()[0] == 2
    t = torch.from_dlpack(buf)
    assert (t.data_ptr(), t.dtype, t.shape, t.device.type) == (buf.ptr, torch.uint8, (64,), "cuda")
    t.fill_(7)
    torch.cuda.synchronize()
    assert buf.tobytes() == b"\x07" * 64
    del buf
    gc.collect()
    assert stats.allocation_counts.current_bytes == 64
    assert int(t.sum()) == 7 * 64
    del t
    gc.collect()
    assert stats.allocation_counts.current_bytes == 0


@pytest.mark.gpu
def test_cupy_from_dlpack_of_a_device_buffer_is_zero_copy_and_keeps_it_alive(stats):
    cupy = pytest.importorskip("cupy")
    buf = rmm.DeviceBuffer(size=32, mr=stats)
    x = cupy.from_dlpack(buf)
    assert (x.data.ptr, x.dtype, x.shape) == (buf.ptr, cupy.uint8, (32,))
    x[:] = 3
    cupy.cuda.Device().synchronize()
    assert buf.tobytes() == b"\x03" * 32
    del buf
    gc.collect()
    assert stats.allocation_counts.current_bytes == 32
    assert int(x.sum()) == 96
    del x
    gc.collect()
    assert stats.allocation_counts.current_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["transposed", "step", "negative", "broadcast", "0-d", "empty"])
@pytest.mark.parametrize("how", ["from_object", "from_cuda_array_interface", "from_dlpack"])
def test_views_of_non_contiguous_cupy_arrays(kind, how):
    cupy = pytest.importorskip("cupy")
    base = cupy.arange(6 * 8, dtype=cupy.float32).reshape(6, 8)
    a = {
        "transposed": base.T,
        "step": base[::2, 1::3],
        "negative": base[::-1, ::-2],
        "broadcast": cupy.broadcast_to(cupy.arange(3.0), (4, 3)),
        "0-d": cupy.array(2.5),
        "empty": cupy.zeros((3, 0)),
    }[kind]
    stream = cupy.cuda.Stream(non_blocking=True)
    if how == "from_dlpack" and kind == "negative":
        # CuPy 14 divides negative byte strides by its unsigned itemsize when it exports DLPack:
        # the tensor it hands over claims strides near 2**62, which the view refuses, clearly.
        with pytest.raises(ValueError, match="overflows"):
            StridedMemoryView.from_dlpack(a, stream=stream.ptr)
        return
    v = getattr(StridedMemoryView, how)(a, stream=stream.ptr)
    assert v.ptr == a.data.ptr
    assert v.shape == a.shape
    if a.size:  # the strides of an empty array mean nothing (CuPy reports (0, 0) for (3, 0))
        assert v.byte_strides == a.strides
    assert (v.device_type, v.is_device_accessible) == (2, True)
    assert v.format == a.dtype.str


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["transposed", "step", "narrow"])
def test_views_of_non_contiguous_torch_tensors(kind):
    torch = pytest.importorskip("torch")
    base = torch.arange(48, dtype=torch.float32, device="cuda").reshape(6, 8)
    a = {"transposed": base.t(), "step": base[::2, 1::3], "narrow": base[:, 2:5]}[kind]
    s = torch.cuda.Stream()
    v = StridedMemoryView(a, stream=s)
    assert (v.ptr, v.shape, v.strides) == (a.data_ptr(), tuple(a.shape), tuple(a.stride()))
    assert (v.format, v.device_type, v.device_id) == ("<f4", 2, a.device.index)
    b = torch.from_dlpack(v)
    assert b.data_ptr() == a.data_ptr() and b.stride() == a.stride()


@pytest.mark.gpu
def test_stream_handshake_orders_the_consumer_after_the_producer():
    cupy = pytest.importorskip("cupy")
    producer = cupy.cuda.Stream(non_blocking=True)
    consumer = cupy.cuda.Stream(non_blocking=True)
    with producer:
        a = cupy.zeros(1 << 24, dtype=cupy.float32)
        a += 1
    v = StridedMemoryView.from_dlpack(a, stream=consumer.ptr)
    with consumer:
        b = cupy.from_dlpack(v)
        total = float(b.sum())
    assert total == float(1 << 24)
    buf = rmm.DeviceBuffer(size=1 << 20)
    with consumer:
        x = cupy.from_dlpack(buf)  # CuPy passes its current stream: we make it wait for buf.stream
        x[:] = 1
    consumer.synchronize()
    assert buf.__dlpack__(stream=0, max_version=(1, 1)) is not None  # older PyTorch: the legacy stream
    assert StridedMemoryView.from_dlpack(a, stream=-1).shape == a.shape  # -1: no synchronization
    assert buf.__dlpack__(stream=-1, max_version=(1, 1)) is not None


@pytest.mark.gpu
def test_to_device_puts_the_struct_in_device_memory():
    cupy = pytest.importorskip("cupy")
    from rmm.pylibrmm.device_buffer import copy_ptr_to_host

    a = cupy.zeros((5, 6), dtype=cupy.float64)[::-1, ::2]
    v = StridedMemoryView(a)
    d = v.to_device()
    host = bytearray(ctypes.sizeof(CView))
    copy_ptr_to_host(d.device_copy_address, host)
    c = CView.from_buffer(host)
    assert (c.ndim, c.itemsize, c.ptr, c.generation) == (2, 8, a.data.ptr, d.generation)
    words = bytearray(48)
    copy_ptr_to_host(ctypes.cast(c.shape, ctypes.c_void_p).value, words)
    assert np.frombuffer(words, dtype=np.int64).tolist() == [5, 3, -6, 2, -48, 16]


# ---- C reads a Python capsule: rmm_strided_view_from_dlpack_capsule (librmm, through ctypes) -----

C_CAPSULE = """
import ctypes, sys
import numpy as np
lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL stays held during the calls, as the entry point needs
sys.path.insert(0, sys.argv[2])
from test_strided_view import CView

class Error(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("cuda_code", ctypes.c_int32), ("bytes", ctypes.c_uint64),
                ("message", ctypes.c_char * 512)]

lib.rmm_strided_view_from_dlpack_capsule.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p]
a = np.arange(24, dtype=np.int16).reshape(4, 6)[::-1, ::3]
cap = a.__dlpack__(max_version=(1, 1))
v, err = CView(), Error()
assert lib.rmm_strided_view_from_dlpack_capsule(cap, ctypes.byref(v), ctypes.byref(err)) == 0, err.message
assert (v.ptr, v.ndim, v.itemsize, v.format) == (a.__array_interface__["data"][0], 2, 2, b"<i2")
assert [v.shape[i] for i in range(2)] == [4, 2] and [v.strides[i] for i in range(2)] == [-6, 3]
assert lib.rmm_strided_view_from_dlpack_capsule(cap, ctypes.byref(CView()), ctypes.byref(err)) == 3
assert b"already consumed" in err.message
assert lib.rmm_strided_view_from_dlpack_capsule(object(), ctypes.byref(CView()), ctypes.byref(err)) == 3
assert b"not a DLPack capsule" in err.message
legacy = CView()
assert lib.rmm_strided_view_from_dlpack_capsule(a.__dlpack__(), ctypes.byref(legacy), ctypes.byref(err)) == 0
assert lib.rmm_strided_view_release(ctypes.byref(legacy), None) == 0
assert lib.rmm_strided_view_live_count() == 1
assert lib.rmm_strided_view_release(ctypes.byref(v), None) == 0
assert lib.rmm_strided_view_release(ctypes.byref(v), ctypes.byref(err)) == 3 and v.generation == 0
assert lib.rmm_strided_view_live_count() == 0
print("ok")
"""


def _librmm_or_skip():
    import os
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    librmm = pathlib.Path(
        os.environ.get("RMM_LIBRMM")
        or pathlib.Path(os.environ.get("CARGO_TARGET_DIR", root / "target")) / "release" / NATIVE_LIBRARY
    )
    if not librmm.is_file():
        pytest.skip(f"{librmm} is not built (cargo build --release -p rmm-cpp, or set RMM_LIBRMM)")
    return librmm


def _run_with_librmm(script):
    import pathlib

    out = subprocess.run(
        [sys.executable, "-c", script, str(_librmm_or_skip()), str(pathlib.Path(__file__).parent)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.stdout.strip().endswith("ok"), out.stdout[-3000:] + out.stderr[-3000:]


def test_c_reads_a_python_dlpack_capsule():
    _run_with_librmm(C_CAPSULE)


# ---- librmm's rmm_strided_view_check on views that Python's copy of the core acquired ------------

C_CHECK = """
import ctypes, sys
from ctypes import byref, c_bool, c_char_p, c_int, c_int64, c_void_p, POINTER
lib = ctypes.CDLL(sys.argv[1])  # first: librmm owns the registry, Python's module routes to it
sys.path.insert(0, sys.argv[2])
import numpy as np
import rmm
from test_strided_view import CView

class Error(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("cuda_code", ctypes.c_int32), ("bytes", ctypes.c_uint64),
                ("message", ctypes.c_char * 512)]

lib.rmm_strided_view_check.argtypes = [c_void_p, c_void_p]
lib.rmm_strided_view_release.argtypes = [c_void_p, c_void_p]
lib.rmm_strided_view_from_parts.argtypes = [c_void_p, c_int, POINTER(c_int64), POINTER(c_int64), c_char_p,
                                            c_int, c_int, c_bool, c_void_p, c_void_p]
err = Error()
a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
v = rmm.StridedMemoryView.from_object(a)
w = rmm.StridedMemoryView.from_object(np.ones(3))
address, w_address = v.c_view_address, w.c_view_address
stale = CView.from_buffer_copy(CView.from_address(address))
assert v.generation >> 48 >= 1, f"Python's copy of the core was not numbered by librmm: {v.generation:#x}"
assert lib.rmm_strided_view_check(address, byref(err)) == 0, err.message
assert lib.rmm_strided_view_check(w_address, byref(err)) == 0, err.message

v.release()
assert lib.rmm_strided_view_check(address, byref(err)) == 3, "the released struct (generation 0)"
assert b"released" in err.message, err.message
assert lib.rmm_strided_view_check(ctypes.addressof(stale), byref(err)) == 3, "a copy taken while it was live"
assert b"not live" in err.message, err.message
assert lib.rmm_strided_view_check(None, byref(err)) == 3
assert lib.rmm_strided_view_check(w_address, byref(err)) == 0, "the other view is still live"

# librmm's own views are still its own to check.
own, data, shape = CView(), (ctypes.c_float * 4)(), (c_int64 * 1)(4)
assert lib.rmm_strided_view_from_parts(data, 1, shape, None, b"<f4", 1, 0, False, byref(own), byref(err)) == 0
assert own.generation >> 48 == 0 and own.generation != w.generation
assert lib.rmm_strided_view_check(byref(own), byref(err)) == 0, err.message
assert lib.rmm_strided_view_release(byref(own), None) == 0
assert lib.rmm_strided_view_check(byref(own), byref(err)) == 3
w.release()
assert lib.rmm_strided_view_check(w_address, byref(err)) == 3
print("ok")
"""


def test_librmm_checks_views_that_pythons_copy_of_the_core_acquired():
    _run_with_librmm(C_CHECK)


def test_a_cycle_through_a_view_and_its_producer_is_collected():
    import gc
    import weakref

    stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.get_current_device_resource())

    class Producer:
        def __init__(self, buf):
            self.buf = buf
            self.__cuda_array_interface__ = buf.__cuda_array_interface__

    p = Producer(rmm.DeviceBuffer(size=1000, mr=stats))
    v = StridedMemoryView.from_cuda_array_interface(p)
    p.view = v  # view -> producer (exporting_obj and owner) -> view
    b = rmm.DeviceBuffer(size=500, mr=stats)
    w = StridedMemoryView.from_cuda_array_interface(b)  # not a cycle: freed with the rest
    alive = weakref.ref(p)
    del p, v, b, w
    gc.collect()
    assert alive() is None
    assert stats.allocation_counts.current_bytes == 0
