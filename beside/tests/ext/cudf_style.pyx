# cython: language_level=3
"""A Cython extension written the way cuDF's are: it cimports RAPIDS RMM's .pxd files, takes a
DeviceMemoryResource and a Stream, calls C++ with `mr.get_mr()` and `stream.view()`, and hands the
C++ device_buffer to Python with DeviceBuffer.c_from_unique_ptr. Nothing in it knows rmm_rs: whatever
resource the caller passes (RMM's or ours) serves it."""

from libcpp cimport bool
from libcpp.memory cimport unique_ptr
from libcpp.utility cimport move

from rmm.librmm.cuda_stream_ref cimport stream_ref
from rmm.librmm.device_buffer cimport device_buffer
from rmm.librmm.memory_resource cimport device_async_resource_ref
from rmm.pylibrmm.device_buffer cimport DeviceBuffer
from rmm.pylibrmm.memory_resource cimport DeviceMemoryResource, get_current_device_resource
from rmm.pylibrmm.stream cimport Stream

from rmm.pylibrmm.stream import DEFAULT_STREAM


cdef extern from "cudf_style.hpp" namespace "cudf_style" nogil:
    unique_ptr[device_buffer] cpp_make_buffer "cudf_style::make_buffer"(
        size_t size, stream_ref stream, device_async_resource_ref mr) except +
    double cpp_temporaries "cudf_style::temporaries_ns_per_pair"(
        device_async_resource_ref mr, size_t pairs) except +
    double cpp_threaded_pairs "cudf_style::threaded_pairs_ns_per_pair"(
        device_async_resource_ref mr, int threads, size_t pairs_per_thread, bool own_streams) except +


def make_buffer(size_t size, Stream stream=DEFAULT_STREAM, DeviceMemoryResource mr=None):
    """A DeviceBuffer of ``size`` bytes made in C++ from ``mr`` (default: RMM's current device
    resource), as a pylibcudf function returns a column's data."""
    if mr is None:
        mr = get_current_device_resource()
    cdef unique_ptr[device_buffer] c_buf
    with nogil:
        c_buf = cpp_make_buffer(size, stream.view(), mr.get_mr())
    return DeviceBuffer.c_from_unique_ptr(move(c_buf), stream, mr)


def temporaries_ns_per_pair(DeviceMemoryResource mr, size_t pairs=100000):
    """Nanoseconds per allocate/free pair of 1-2.5 KiB temporaries on ``mr.get_mr()``, default
    stream (a libcudf function's scratch allocations)."""
    cdef double ns
    with nogil:
        ns = cpp_temporaries(mr.get_mr(), pairs)
    return ns


def threaded_pairs_ns_per_pair(DeviceMemoryResource mr, int threads, size_t pairs_per_thread=100000,
                               bool own_streams=True):
    """Nanoseconds per 256 B allocate/free pair, aggregate over ``threads`` C++ threads calling
    ``mr.get_mr()`` at once, each on a stream of its own (the default stream when not own_streams)."""
    cdef double ns
    with nogil:
        ns = cpp_threaded_pairs(mr.get_mr(), threads, pairs_per_thread, own_streams)
    return ns
