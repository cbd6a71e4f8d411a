# cython: language_level=3
"""rmm-rs's resources for processes that use RAPIDS RMM 26.10 itself (``rmm-cu13``): every class is a
Cython subclass of RMM's ``DeviceMemoryResource`` (``UpstreamResourceAdaptor`` when it has an
upstream) whose ``get_mr()`` is a ``device_async_resource_ref`` to rmm-rs's engine (librmm_rs.so)
through the C++ adapter ``rmm_rs::resource``. Constructors take RMM's arguments; failures raise what
RMM raises (MemoryError, RuntimeError, ValueError, IndexError)."""

import atexit
import os

from cython.operator cimport dereference as deref
from libc.stddef cimport size_t
from libc.stdint cimport int8_t, int32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, realloc
from libc.string cimport strncpy
from libcpp cimport bool
from libcpp.optional cimport optional
from libcpp.string cimport string

from cuda.bindings.cyruntime cimport cudaStream_t

from rmm.librmm._logger cimport level_enum
from rmm.librmm.memory_resource cimport device_async_resource_ref
from rmm.pylibrmm.helper cimport parse_bytes
from rmm.pylibrmm.memory_resource cimport DeviceMemoryResource, UpstreamResourceAdaptor
from rmm.pylibrmm.stream cimport Stream
from rmm.pylibrmm.utils cimport as_stream

from rmm.pylibrmm.stream import DEFAULT_STREAM
from rmm.statistics import Statistics

from rmm_rs._c cimport *


cdef extern from *:
    # RMM's template (rmm/librmm/memory_resource.pxd) for our adapter type.
    optional[device_async_resource_ref] ref_to "make_device_async_resource_ref"(resource&) except +


cdef extern from "Python.h":
    ctypedef struct PyObject
    void Py_IncRef(PyObject*)
    void Py_DecRef(PyObject*)


cdef extern from "rmm/logger.hpp" nogil:
    # rmm.librmm._logger declares this logger without its log(level, message).
    cdef cppclass rapids_log "rapids_logger::logger":
        void log(level_enum lvl, const string& message) except +
    rapids_log& rmm_default_logger "rmm::default_logger"() except +


# Set by an atexit hook: after it, references that C++ drops on other threads are left to the OS
# (taking the GIL in a finalizing interpreter would crash).
cdef bint _exiting = False


def _mark_exiting():
    global _exiting
    _exiting = True


atexit.register(_mark_exiting)


cdef void _release_object(void* obj) noexcept nogil:
    """Drops the reference a handle of ours held on a Python object, from whatever thread."""
    if _exiting:
        return
    with gil:
        Py_DecRef(<PyObject*>obj)


cdef str _message(const rmm_error& err):
    return (<const char*>err.message).decode("utf-8", "replace")


cdef int check(int status, const rmm_error& err) except -1:
    """Raises what RMM raises for the failure of one of our C calls: MemoryError when out of memory,
    RuntimeError for the rest (RMM's logic_error and cuda_error through Cython's ``except +``)."""
    if status == RMM_OK:
        return 0
    message = f"{rmm_error_kind_name(status).decode()}: {_message(err)}"
    if status == RMM_ERROR_OUT_OF_MEMORY:
        raise MemoryError(message)
    raise RuntimeError(message)


cdef int _fill_error(rmm_error* err, int kind, size_t nbytes, str message) noexcept:
    cdef bytes text
    if err != NULL:
        text = message.encode("utf-8", "replace")[:RMM_ERROR_MESSAGE_SIZE - 1]
        err.kind = kind
        err.cuda_code = 0
        err.bytes = nbytes if kind == RMM_ERROR_OUT_OF_MEMORY else 0
        strncpy(err.message, text, RMM_ERROR_MESSAGE_SIZE - 1)
        err.message[RMM_ERROR_MESSAGE_SIZE - 1] = 0
    return kind


cdef rmm_resource borrow_handle(DeviceMemoryResource mr) except *:
    if isinstance(mr, BaseMemoryResource):
        return deref((<BaseMemoryResource>mr).c_obj).handle()
    if isinstance(mr, BaseResourceAdaptor):
        return deref((<BaseResourceAdaptor>mr).c_obj).handle()
    raise TypeError(f"{type(mr).__name__} is not an rmm_rs resource")


cdef rmm_resource upstream_handle(DeviceMemoryResource mr) except *:
    cdef rmm_resource handle
    if mr is None:
        raise TypeError("upstream_mr must be a DeviceMemoryResource, not None")
    if isinstance(mr, (BaseMemoryResource, BaseResourceAdaptor)):
        handle = borrow_handle(mr)
        rmm_resource_retain(handle)
        return handle
    if not mr.c_ref.has_value():
        raise ValueError(f"{type(mr).__name__} has no C++ resource (c_ref is empty)")
    Py_IncRef(<PyObject*>mr)
    try:
        return to_handle(mr.get_mr(), <void*>mr, _release_object)
    except BaseException:
        Py_DecRef(<PyObject*>mr)
        raise


cdef _checked_deallocate(rmm_resource handle, uintptr_t ptr, size_t nbytes, Stream stream):
    """Frees through our handle so that a refused free (a pointer or size the resource did not hand
    out: pool, arena and tracking check them) is a ValueError here, not a line on stderr."""
    cdef rmm_error err
    cdef int status
    cdef cudaStream_t s = as_stream(stream)._cuda_stream
    with nogil:
        status = rmm_resource_deallocate(handle, <void*>s, <void*>ptr, nbytes, 256, &err)
    if status == RMM_ERROR_INVALID_ARGUMENT:
        raise ValueError(_message(err))
    check(status, err)


cdef class BaseMemoryResource(DeviceMemoryResource):
    """Base of rmm-rs's resources without an upstream: ``get_mr()`` refers to our engine."""

    cdef _adopt(self, rmm_resource handle):
        self.c_obj.reset(new resource(resource.adopt(handle)))
        self.c_ref = ref_to(deref(self.c_obj))

    def deallocate(self, uintptr_t ptr, size_t nbytes, Stream stream=DEFAULT_STREAM):
        """Deallocate ``ptr`` of ``nbytes`` bytes (RMM's signature). A free the resource refuses
        raises ValueError."""
        _checked_deallocate(deref(self.c_obj).handle(), ptr, nbytes, stream)

    @property
    def name(self):
        """rmm-rs's name of the resource ("pool_memory_resource", ...)."""
        return rmm_resource_name(deref(self.c_obj).handle()).decode()

    def __repr__(self):
        return f"<rmm_rs.{type(self).__name__} ({self.name})>"


cdef class BaseResourceAdaptor(UpstreamResourceAdaptor):
    """Base of rmm-rs's sub-allocators and adaptors: ``upstream_mr`` is kept as in RMM, and
    ``get_mr()`` refers to our engine. Its members do what BaseMemoryResource's do (a Cython class
    has one base, and RMM's two differ)."""

    cdef _adopt(self, rmm_resource handle):
        self.c_obj.reset(new resource(resource.adopt(handle)))
        self.c_ref = ref_to(deref(self.c_obj))

    cdef _made(self, int status, rmm_resource upstream, rmm_resource* handle, rmm_error* err):
        """Takes over the new resource of a C constructor that returned `status`, and releases the
        caller's reference to `upstream` (the new resource holds its own)."""
        rmm_resource_release(upstream)
        check(status, err[0])
        self._adopt(handle[0])

    def deallocate(self, uintptr_t ptr, size_t nbytes, Stream stream=DEFAULT_STREAM):
        """As BaseMemoryResource.deallocate."""
        _checked_deallocate(deref(self.c_obj).handle(), ptr, nbytes, stream)

    @property
    def name(self):
        """As BaseMemoryResource.name."""
        return rmm_resource_name(deref(self.c_obj).handle()).decode()

    def __repr__(self):
        return f"<rmm_rs.{type(self).__name__} ({self.name}) over {self.upstream_mr!r}>"


# ---- Base resources --------------------------------------------------------------------------------


cdef class CudaMemoryResource(BaseMemoryResource):
    """Device memory from ``cuMemAlloc``/``cuMemFree`` (RMM's ``CudaMemoryResource``)."""

    def __cinit__(self):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_cuda_memory_resource_new(&h, &err), err)
        self._adopt(h)


cdef class ManagedMemoryResource(BaseMemoryResource):
    """Managed (unified) memory (RMM's ``ManagedMemoryResource``)."""

    def __cinit__(self):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_managed_memory_resource_new(&h, &err), err)
        self._adopt(h)


cdef class SystemMemoryResource(BaseMemoryResource):
    """Host memory from the system allocator, device-accessible with HMM/ATS; the memory of host
    mode (RMM's ``SystemMemoryResource``)."""

    def __cinit__(self):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_system_memory_resource_new(&h, &err), err)
        self._adopt(h)


cdef class PinnedHostMemoryResource(BaseMemoryResource):
    """Page-locked host memory (RMM's ``PinnedHostMemoryResource``)."""

    def __cinit__(self):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_pinned_host_memory_resource_new(&h, &err), err)
        self._adopt(h)


cdef class SamHeadroomMemoryResource(BaseMemoryResource):
    """System memory placed on the GPU while ``headroom`` bytes of it stay free (RMM's
    ``SamHeadroomMemoryResource``)."""

    def __cinit__(self, size_t headroom):
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_sam_headroom_memory_resource_new(headroom, &h, &err)
        check(status, err)
        self._adopt(h)

    def __init__(self, size_t headroom):
        pass


cdef class CudaAsyncMemoryResource(BaseMemoryResource):
    """Stream-ordered memory from a CUDA memory pool of its own (RMM's ``CudaAsyncMemoryResource``,
    same arguments). ``enable_ipc`` and ``enable_fabric`` together raise ValueError."""

    def __cinit__(self, initial_pool_size=None, release_threshold=None, enable_ipc=False, enable_fabric=False):
        cdef uint64_t initial = RMM_SIZE_NONE if initial_pool_size is None else parse_bytes(initial_pool_size)
        cdef uint64_t threshold = RMM_SIZE_NONE if release_threshold is None else <size_t>release_threshold
        cdef int32_t handle_type = RMM_ALLOCATION_HANDLE_TYPE_NONE
        if enable_ipc and enable_fabric:
            raise ValueError("enable_ipc and enable_fabric cannot both be set")
        if enable_ipc:
            handle_type = RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        elif enable_fabric:
            handle_type = RMM_ALLOCATION_HANDLE_TYPE_FABRIC
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_cuda_async_memory_resource_new(initial, threshold, handle_type, &h, &err)
        check(status, err)
        self._adopt(h)

    def __init__(self, initial_pool_size=None, release_threshold=None, enable_ipc=False, enable_fabric=False):
        pass

    def pool_handle(self):
        """The CUDA memory pool (its address)."""
        cdef void* pool = NULL
        cdef rmm_error err
        check(rmm_cuda_async_memory_resource_pool_handle(deref(self.c_obj).handle(), &pool, &err), err)
        return <uintptr_t>pool


def _pool_address(pool_handle):
    from cuda.bindings import driver, runtime

    if not isinstance(pool_handle, (runtime.cudaMemPool_t, driver.CUmemoryPool)):
        raise ValueError("pool_handle must be a cudaMemPool_t or CUmemoryPool")
    return int(pool_handle)


cdef class CudaAsyncViewMemoryResource(BaseMemoryResource):
    """Stream-ordered memory from an existing CUDA memory pool, which the caller keeps alive (RMM's
    ``CudaAsyncViewMemoryResource``)."""

    def __cinit__(self, pool_handle):
        cdef uintptr_t pool = _pool_address(pool_handle)
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_cuda_async_view_memory_resource_new(<void*>pool, &h, &err), err)
        self._adopt(h)

    def __init__(self, pool_handle):
        pass

    def pool_handle(self):
        """The CUDA memory pool (its address)."""
        cdef void* pool = NULL
        cdef rmm_error err
        check(rmm_cuda_async_view_memory_resource_pool_handle(deref(self.c_obj).handle(), &pool, &err), err)
        return <uintptr_t>pool


cdef class CudaAsyncManagedMemoryResource(BaseMemoryResource):
    """Stream-ordered managed memory from the device's default managed memory pool (RMM's
    ``rmm.mr.experimental.CudaAsyncManagedMemoryResource``)."""

    def __cinit__(self):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_cuda_async_managed_memory_resource_new(&h, &err), err)
        self._adopt(h)

    def pool_handle(self):
        """The CUDA memory pool (its address)."""
        cdef void* pool = NULL
        cdef rmm_error err
        check(rmm_cuda_async_managed_memory_resource_pool_handle(deref(self.c_obj).handle(), &pool, &err), err)
        return <uintptr_t>pool


cdef class SimulatedMemoryResource(BaseMemoryResource):
    """A simulated device of ``memory_size_bytes`` bytes: fake addresses that must never be
    dereferenced, to exercise sub-allocators without a GPU (RMM's C++ ``simulated_memory_resource``)."""

    def __cinit__(self, size_t memory_size_bytes):
        cdef rmm_resource h
        cdef rmm_error err
        check(rmm_simulated_memory_resource_new(memory_size_bytes, &h, &err), err)
        self._adopt(h)

    def __init__(self, size_t memory_size_bytes):
        pass


cdef int _callback_allocate(size_t nbytes, void* stream, void* context, void** out, rmm_error* err) noexcept nogil:
    with gil:
        try:
            out[0] = <void*><uintptr_t>((<object>context)[0](nbytes, Stream._from_cudaStream_t(<cudaStream_t>stream)))
            return RMM_OK
        except MemoryError as e:
            return _fill_error(err, RMM_ERROR_OUT_OF_MEMORY, nbytes, str(e))
        except BaseException as e:
            return _fill_error(err, RMM_ERROR_PANIC, nbytes, f"{type(e).__name__}: {e}")


cdef int _callback_deallocate(void* ptr, size_t nbytes, void* stream, void* context, rmm_error* err) noexcept nogil:
    with gil:
        try:
            (<object>context)[1](<uintptr_t>ptr, nbytes, Stream._from_cudaStream_t(<cudaStream_t>stream))
            return RMM_OK
        except BaseException as e:
            return _fill_error(err, RMM_ERROR_PANIC, nbytes, f"{type(e).__name__}: {e}")


cdef class CallbackMemoryResource(BaseMemoryResource):
    """Memory from two Python callables (RMM's ``CallbackMemoryResource``): ``allocate_func(nbytes,
    stream) -> int`` and ``deallocate_func(ptr, nbytes, stream)``. A MemoryError from
    ``allocate_func`` stays a MemoryError; any other exception becomes a RuntimeError, as in RMM."""

    cdef object _allocate_func
    cdef object _deallocate_func

    def __cinit__(self, allocate_func, deallocate_func):
        self._allocate_func = allocate_func
        self._deallocate_func = deallocate_func
        funcs = (allocate_func, deallocate_func)
        cdef rmm_resource h
        cdef rmm_error err
        # The handle keeps the callables alive (it may outlive this object inside a pool of ours);
        # the reference is dropped with the handle's last reference, under the GIL.
        Py_IncRef(<PyObject*>funcs)
        check(rmm_callback_memory_resource_new(_callback_allocate, _callback_deallocate, <void*>funcs,
                                               _release_object, RMM_ACCESS_DEVICE, &h, &err), err)
        self._adopt(h)

    def __init__(self, allocate_func, deallocate_func):
        pass


# ---- Sub-allocators --------------------------------------------------------------------------------


cdef class PoolMemoryResource(BaseResourceAdaptor):
    """A coalescing best-fit pool over ``upstream_mr`` (RMM's ``PoolMemoryResource``, same
    arguments). ``initial_pool_size=None`` takes half of the device's free memory (0 over a host-only
    upstream and in host mode, growing on demand); sizes are ints or strings such as "1 GiB"."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, initial_pool_size=None, maximum_pool_size=None):
        cdef uint64_t initial = RMM_SIZE_NONE if initial_pool_size is None else parse_bytes(initial_pool_size)
        cdef uint64_t maximum = RMM_SIZE_NONE if maximum_pool_size is None else parse_bytes(maximum_pool_size)
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_pool_memory_resource_new(up, initial, maximum, &h, &err)
        self._made(status, up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, initial_pool_size=None, maximum_pool_size=None):
        pass

    def pool_size(self):
        """Bytes the pool holds from its upstream."""
        cdef uint64_t size = 0
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_pool_memory_resource_pool_size(deref(self.c_obj).handle(), &size, &err)
        check(status, err)
        return size


cdef class ArenaMemoryResource(BaseResourceAdaptor):
    """Per-thread arenas over a global arena (RMM's ``ArenaMemoryResource``, same arguments)."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, arena_size=None, bool dump_log_on_failure=False):
        cdef uint64_t size = RMM_SIZE_NONE if arena_size is None else parse_bytes(arena_size)
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_arena_memory_resource_new(up, size, dump_log_on_failure, &h, &err)
        self._made(status, up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, arena_size=None, bool dump_log_on_failure=False):
        pass


cdef class FixedSizeMemoryResource(BaseResourceAdaptor):
    """Blocks of one size (RMM's ``FixedSizeMemoryResource``, same arguments); larger requests raise
    MemoryError."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, size_t block_size=1 << 20,
                  size_t blocks_to_preallocate=128):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_fixed_size_memory_resource_new(up, block_size, blocks_to_preallocate, &h, &err)
        self._made(status, up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, size_t block_size=1 << 20,
                 size_t blocks_to_preallocate=128):
        pass


cdef class BinningMemoryResource(BaseResourceAdaptor):
    """Routes each request to the smallest bin that fits, else to ``upstream_mr`` (RMM's
    ``BinningMemoryResource``, same arguments); ``add_bin`` adds bins, ``bin_mrs`` lists the
    resources given to it."""

    cdef readonly list _bin_mrs

    def __cinit__(self, DeviceMemoryResource upstream_mr, int8_t min_size_exponent=-1,
                  int8_t max_size_exponent=-1):
        self._bin_mrs = []
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        cdef int status
        with nogil:
            if min_size_exponent == -1 or max_size_exponent == -1:
                status = rmm_binning_memory_resource_new(up, &h, &err)
            else:
                status = rmm_binning_memory_resource_new_with_exponents(up, min_size_exponent, max_size_exponent,
                                                                        &h, &err)
        self._made(status, up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, int8_t min_size_exponent=-1,
                 int8_t max_size_exponent=-1):
        pass

    def add_bin(self, size_t allocation_size, DeviceMemoryResource bin_resource=None):
        """Adds a bin for requests up to ``allocation_size`` bytes, served by ``bin_resource``
        (default: a fixed-size resource over the upstream)."""
        cdef rmm_resource bin_handle
        bin_handle.self = NULL
        bin_handle.vtable = NULL
        if bin_resource is not None:
            bin_handle = upstream_handle(bin_resource)
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_binning_memory_resource_add_bin(deref(self.c_obj).handle(), allocation_size, bin_handle, &err)
            rmm_resource_release(bin_handle)
        check(status, err)
        if bin_resource is not None:
            self._bin_mrs.append(bin_resource)

    @property
    def bin_mrs(self) -> list:
        """The resources given to ``add_bin``, in order."""
        return self._bin_mrs


# ---- Adaptors --------------------------------------------------------------------------------------


cdef class LimitingResourceAdaptor(BaseResourceAdaptor):
    """Fails allocations past ``allocation_limit`` bytes with MemoryError (RMM's
    ``LimitingResourceAdaptor``)."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, size_t allocation_limit):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_limiting_resource_adaptor_new(up, allocation_limit, 256, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, size_t allocation_limit):
        pass

    def get_allocated_bytes(self):
        """Bytes allocated through the adaptor and not yet freed."""
        cdef uint64_t value = 0
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_limiting_resource_adaptor_get_allocated_bytes(deref(self.c_obj).handle(), &value, &err)
        check(status, err)
        return value

    def get_allocation_limit(self):
        """The limit in bytes."""
        cdef uint64_t value = 0
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_limiting_resource_adaptor_get_allocation_limit(deref(self.c_obj).handle(), &value, &err)
        check(status, err)
        return value


def _append_id(filename, id):
    """``hello.txt`` -> ``hello.dev<id>.txt`` (RMM's ``_append_id``)."""
    name, ext = os.path.splitext(filename)
    return f"{name}.dev{id}{ext}"


cdef class LoggingResourceAdaptor(BaseResourceAdaptor):
    """Logs every allocation and free as a CSV line (RMM's ``LoggingResourceAdaptor``): to
    ``log_file_name`` or ``$RMM_LOG_FILE`` (neither: ValueError), with ``.dev<N>`` for the current
    device N before the extension, made absolute."""

    cdef object _log_file_name

    def __cinit__(self, DeviceMemoryResource upstream_mr, object log_file_name=None):
        if log_file_name is None:
            log_file_name = os.getenv("RMM_LOG_FILE")
            if not log_file_name:
                raise ValueError(
                    "RMM log file must be specified either using log_file_name= argument or "
                    "RMM_LOG_FILE environment variable"
                )
        cdef int device = 0
        cdef rmm_error err
        check(rmm_device_get_current(&device, &err), err)
        self._log_file_name = os.path.abspath(_append_id(os.fspath(log_file_name), device))
        cdef bytes path = os.fsencode(self._log_file_name)
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        self._made(rmm_logging_resource_adaptor_new(up, path, 0, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, object log_file_name=None):
        pass

    def flush(self):
        """Writes out the buffered lines."""
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_logging_resource_adaptor_flush(deref(self.c_obj).handle(), &err)
        check(status, err)

    def get_file_name(self):
        """The absolute path of the log file."""
        return self._log_file_name


cdef object _statistics(const rmm_counter& nbytes, const rmm_counter& count):
    return Statistics(
        current_bytes=nbytes.value,
        current_count=count.value,
        peak_bytes=nbytes.peak,
        peak_count=count.peak,
        total_bytes=nbytes.total,
        total_count=count.total,
    )


cdef class StatisticsResourceAdaptor(BaseResourceAdaptor):
    """Counts the bytes and allocations that pass through it, in nestable frames (RMM's
    ``StatisticsResourceAdaptor``); counters come as ``rmm.statistics.Statistics``."""

    def __cinit__(self, DeviceMemoryResource upstream_mr):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_statistics_resource_adaptor_new(up, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr):
        pass

    @property
    def allocation_counts(self) -> Statistics:
        """The current, peak and total bytes and allocations of the current frame."""
        cdef rmm_counter nbytes, count
        cdef rmm_error err
        cdef rmm_resource h = deref(self.c_obj).handle()
        cdef int status
        with nogil:
            status = rmm_statistics_resource_adaptor_get_bytes_counter(h, &nbytes, &err)
            if status == RMM_OK:
                status = rmm_statistics_resource_adaptor_get_allocations_counter(h, &count, &err)
        check(status, err)
        return _statistics(nbytes, count)

    def push_counters(self) -> Statistics:
        """Starts a new frame of zero counters; returns the counters from before."""
        cdef rmm_counter nbytes, count
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_statistics_resource_adaptor_push_counters(deref(self.c_obj).handle(), &nbytes, &count, &err)
        check(status, err)
        return _statistics(nbytes, count)

    def pop_counters(self) -> Statistics:
        """Ends the current frame, folding it into its parent; returns its counters. IndexError
        when no frame was pushed (RMM's std::out_of_range)."""
        cdef rmm_counter nbytes, count
        cdef rmm_error err
        cdef rmm_resource h = deref(self.c_obj).handle()
        cdef int status
        with nogil:
            status = rmm_statistics_resource_adaptor_pop_counters(h, &nbytes, &count, &err)
        if status == RMM_ERROR_INVALID_ARGUMENT:
            raise IndexError(_message(err))
        check(status, err)
        return _statistics(nbytes, count)


cdef class TrackingResourceAdaptor(BaseResourceAdaptor):
    """Tracks every outstanding allocation, with its stack when ``capture_stacks`` (RMM's
    ``TrackingResourceAdaptor``); frees of pointers it did not hand out raise ValueError."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, bool capture_stacks=False):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_tracking_resource_adaptor_new(up, capture_stacks, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, bool capture_stacks=False):
        pass

    def get_allocated_bytes(self):
        """Bytes outstanding through the adaptor."""
        cdef uint64_t value = 0
        cdef rmm_error err
        cdef int status
        with nogil:
            status = rmm_tracking_resource_adaptor_get_allocated_bytes(deref(self.c_obj).handle(), &value, &err)
        check(status, err)
        return value

    def get_outstanding_allocations_str(self) -> str:
        """The outstanding allocations, one line each (with their stacks when captured)."""
        cdef size_t length = 0
        cdef size_t full = 0
        cdef rmm_error err
        cdef rmm_resource h = deref(self.c_obj).handle()
        cdef char* text = NULL
        cdef int status
        with nogil:
            status = rmm_tracking_resource_adaptor_get_outstanding_allocations_str(h, NULL, 0, &length, &err)
        check(status, err)
        try:
            while True:
                text = <char*>realloc(text, length + 1)
                if text == NULL:
                    raise MemoryError()
                with nogil:
                    status = rmm_tracking_resource_adaptor_get_outstanding_allocations_str(h, text, length + 1,
                                                                                           &full, &err)
                check(status, err)
                if full <= length:
                    return text[:full].decode("utf-8", "replace")
                length = full
        finally:
            free(text)

    def log_outstanding_allocations(self):
        """Writes :meth:`get_outstanding_allocations_str` to RMM's debug log (level debug), as RMM
        does."""
        cdef string message = ("Outstanding Allocations: " + self.get_outstanding_allocations_str()).encode()
        rmm_default_logger().log(level_enum.debug, message)


cdef int _failure_callback(size_t nbytes, void* context) noexcept nogil:
    with gil:
        return _call_failure_callback(<object>context, nbytes)


cdef int _call_failure_callback(object callback, size_t nbytes) noexcept:
    # An exception cannot cross our C ABI: it is reported as unraisable and the request gives up
    # (MemoryError), where RMM would rethrow it from the allocation.
    return 1 if callback(nbytes) else 0


cdef class FailureCallbackResourceAdaptor(BaseResourceAdaptor):
    """Calls ``callback(nbytes)`` when the upstream runs out of memory and retries while it returns
    True (RMM's ``FailureCallbackResourceAdaptor``)."""

    cdef object _callback

    def __cinit__(self, DeviceMemoryResource upstream_mr, object callback):
        self._callback = callback
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        Py_IncRef(<PyObject*>callback)
        self._made(rmm_failure_callback_resource_adaptor_new(up, _failure_callback, <void*>callback,
                                                                    _release_object, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, object callback):
        pass

    @property
    def callback(self):
        """The failure callback."""
        return self._callback


cdef class PrefetchResourceAdaptor(BaseResourceAdaptor):
    """Prefetches each allocation to the current device on its stream (RMM's
    ``PrefetchResourceAdaptor``)."""

    def __cinit__(self, DeviceMemoryResource upstream_mr):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_prefetch_resource_adaptor_new(up, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr):
        pass


cdef class AlignedResourceAdaptor(BaseResourceAdaptor):
    """Aligns allocations of at least ``alignment_threshold`` bytes to ``alignment`` (RMM's C++
    ``aligned_resource_adaptor``; RMM has no Python class for it)."""

    def __cinit__(self, DeviceMemoryResource upstream_mr, size_t alignment=256, size_t alignment_threshold=65536):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_aligned_resource_adaptor_new(up, alignment, alignment_threshold, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr, size_t alignment=256, size_t alignment_threshold=65536):
        pass


cdef class ThreadSafeResourceAdaptor(BaseResourceAdaptor):
    """One lock around every upstream call (RMM's C++ ``thread_safe_resource_adaptor``; RMM has no
    Python class for it)."""

    def __cinit__(self, DeviceMemoryResource upstream_mr):
        cdef rmm_resource up = upstream_handle(upstream_mr)
        cdef rmm_resource h
        cdef rmm_error err
        self._made(rmm_thread_safe_resource_adaptor_new(up, &h, &err), up, &h, &err)

    def __init__(self, DeviceMemoryResource upstream_mr):
        pass


def is_host_mode():
    """True when librmm_rs.so runs without a CUDA driver or device (host memory only)."""
    return rmm_is_host_mode() != 0


# ---- Diagnostics for the tests and benchmarks/beside ---------------------------------------------


cdef extern from "<chrono>" namespace "std::chrono" nogil:
    cdef cppclass steady_clock_time_point "std::chrono::steady_clock::time_point":
        pass
    steady_clock_time_point steady_now "std::chrono::steady_clock::now"()


cdef extern from * nogil:
    """
    static double rmm_rs_elapsed_ns(std::chrono::steady_clock::time_point a,
                                    std::chrono::steady_clock::time_point b)
    {
      return std::chrono::duration<double, std::nano>(b - a).count();
    }
    """
    double elapsed_ns "rmm_rs_elapsed_ns"(steady_clock_time_point a, steady_clock_time_point b)


def _c_abi_temporaries_ns_per_pair(DeviceMemoryResource mr, size_t pairs=100000):
    """tests/ext/cudf_style.pyx's temporaries loop (1-2.5 KiB pairs, default stream) straight on our
    handle's vtable, without RMM's ref: what the ref adds is the difference."""
    cdef rmm_resource h = borrow_handle(mr)
    cdef size_t sizes[4]
    sizes[:] = [1024, 1536, 2048, 2560]
    cdef size_t i, n
    cdef void* p = NULL
    cdef rmm_error err
    cdef int status = RMM_OK
    cdef steady_clock_time_point start, stop
    with nogil:
        for i in range(1000 + pairs):
            if i == 1000:  # after the warm-up
                start = steady_now()
            n = sizes[i % 4]
            status = h.vtable.allocate(h.self, NULL, n, 256, &p, &err)
            if status != RMM_OK:
                break
            status = h.vtable.deallocate(h.self, NULL, p, n, 256, &err)
            if status != RMM_OK:
                break
        stop = steady_now()
    check(status, err)
    return elapsed_ns(start, stop) / pairs


def _upstream_is_foreign(BaseResourceAdaptor mr):
    """True when our engine holds ``mr``'s upstream as a foreign handle (a C++ hop through
    get_mr()), False when it holds our own resource directly."""
    cdef int kind = 0
    cdef rmm_resource up
    cdef rmm_error err
    check(rmm_resource_kind(deref(mr.c_obj).handle(), &kind, &up, &err), err)
    foreign = is_foreign(up)
    rmm_resource_release(up)
    return foreign


def _retain_handle(DeviceMemoryResource mr):
    """One more reference to ``mr``'s handle, as (self, vtable) addresses."""
    cdef rmm_resource h = borrow_handle(mr)
    rmm_resource_retain(h)
    return (<uintptr_t>h.self, <uintptr_t>h.vtable)


def _release_handle_without_gil(handle):
    """Releases a reference from :func:`_retain_handle` with the GIL released."""
    cdef rmm_resource h
    h.self = <void*><uintptr_t>handle[0]
    h.vtable = <const rmm_resource_vtable*><uintptr_t>handle[1]
    with nogil:
        rmm_resource_release(h)
