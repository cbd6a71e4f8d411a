# The parts of librmm_rs.so's C ABI (<rmm_rs/rmm_c.h>) and of the adapter <rmm_rs/resource.hpp>
# that the module uses. The headers are the reference: the generated C++ calls what they declare,
# so a declaration here that drifts from them fails to compile.

from libc.stddef cimport size_t
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libcpp cimport bool

from rmm.librmm.memory_resource cimport any_resource, device_accessible, device_async_resource_ref


cdef extern from "rmm_rs/rmm_c.h" nogil:
    enum:
        RMM_OK
        RMM_ERROR_OUT_OF_MEMORY
        RMM_ERROR_CUDA
        RMM_ERROR_INVALID_ARGUMENT
        RMM_ERROR_NO_DRIVER
        RMM_ERROR_NO_DEVICE
        RMM_ERROR_UNSUPPORTED
        RMM_ERROR_PANIC
        RMM_ERROR_MESSAGE_SIZE
        RMM_ACCESS_DEVICE
        RMM_ACCESS_HOST
        RMM_ALLOCATION_HANDLE_TYPE_NONE
        RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        RMM_ALLOCATION_HANDLE_TYPE_FABRIC

    const uint64_t RMM_SIZE_NONE

    ctypedef struct rmm_error:
        int32_t kind
        int32_t cuda_code
        uint64_t bytes
        char message[512]

    ctypedef struct rmm_resource_vtable:
        int (*allocate)(void* self, void* stream, size_t bytes, size_t alignment, void** out,
                        rmm_error* err) noexcept nogil
        int (*deallocate)(void* self, void* stream, void* ptr, size_t bytes, size_t alignment,
                          rmm_error* err) noexcept nogil

    ctypedef struct rmm_resource:
        void* self
        const rmm_resource_vtable* vtable

    ctypedef struct rmm_counter:
        int64_t value
        int64_t peak
        int64_t total

    ctypedef int (*rmm_allocate_callback)(size_t bytes, void* stream, void* context, void** out,
                                          rmm_error* err) noexcept nogil
    ctypedef int (*rmm_deallocate_callback)(void* ptr, size_t bytes, void* stream, void* context,
                                            rmm_error* err) noexcept nogil
    ctypedef void (*rmm_callback_release)(void* context) noexcept nogil
    ctypedef int (*rmm_failure_callback)(size_t bytes, void* context) noexcept nogil
    ctypedef void (*rmm_failure_callback_release)(void* context) noexcept nogil

    const char* rmm_error_kind_name(int kind)
    int rmm_is_host_mode()

    void rmm_resource_retain(rmm_resource resource)
    void rmm_resource_release(rmm_resource resource)
    int rmm_resource_allocate(rmm_resource resource, void* stream, size_t bytes, size_t alignment, void** out,
                              rmm_error* err)
    int rmm_resource_deallocate(rmm_resource resource, void* stream, void* ptr, size_t bytes, size_t alignment,
                                rmm_error* err)
    const char* rmm_resource_name(rmm_resource resource)
    int rmm_resource_kind(rmm_resource resource, int* kind_out, rmm_resource* upstream_out, rmm_error* err)

    int rmm_cuda_memory_resource_new(rmm_resource* out, rmm_error* err)
    int rmm_system_memory_resource_new(rmm_resource* out, rmm_error* err)
    int rmm_managed_memory_resource_new(rmm_resource* out, rmm_error* err)
    int rmm_pinned_host_memory_resource_new(rmm_resource* out, rmm_error* err)
    int rmm_sam_headroom_memory_resource_new(uint64_t headroom, rmm_resource* out, rmm_error* err)
    int rmm_cuda_async_memory_resource_new(uint64_t initial_pool_size, uint64_t release_threshold,
                                           int32_t export_handle_type, rmm_resource* out, rmm_error* err)
    int rmm_cuda_async_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err)
    int rmm_cuda_async_view_memory_resource_new(void* pool_handle, rmm_resource* out, rmm_error* err)
    int rmm_cuda_async_view_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err)
    int rmm_cuda_async_managed_memory_resource_new(rmm_resource* out, rmm_error* err)
    int rmm_cuda_async_managed_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err)
    int rmm_simulated_memory_resource_new(uint64_t capacity, rmm_resource* out, rmm_error* err)
    int rmm_callback_memory_resource_new(rmm_allocate_callback allocate, rmm_deallocate_callback deallocate,
                                         void* context, rmm_callback_release release_context, uint32_t access,
                                         rmm_resource* out, rmm_error* err)

    int rmm_pool_memory_resource_new(rmm_resource upstream, uint64_t initial_pool_size,
                                     uint64_t maximum_pool_size, rmm_resource* out, rmm_error* err)
    int rmm_pool_memory_resource_pool_size(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_pool_memory_resource_maximum_pool_size(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_arena_memory_resource_new(rmm_resource upstream, uint64_t arena_size, int dump_log_on_failure,
                                      rmm_resource* out, rmm_error* err)
    int rmm_fixed_size_memory_resource_new(rmm_resource upstream, uint64_t block_size,
                                           uint64_t blocks_to_preallocate, rmm_resource* out, rmm_error* err)
    int rmm_fixed_size_memory_resource_get_block_size(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_binning_memory_resource_new(rmm_resource upstream, rmm_resource* out, rmm_error* err)
    int rmm_binning_memory_resource_new_with_exponents(rmm_resource upstream, int min_size_exponent,
                                                       int max_size_exponent, rmm_resource* out, rmm_error* err)
    int rmm_binning_memory_resource_add_bin(rmm_resource resource, uint64_t allocation_size,
                                            rmm_resource bin_resource, rmm_error* err)

    int rmm_statistics_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err)
    int rmm_statistics_resource_adaptor_get_bytes_counter(rmm_resource resource, rmm_counter* out, rmm_error* err)
    int rmm_statistics_resource_adaptor_get_allocations_counter(rmm_resource resource, rmm_counter* out,
                                                                rmm_error* err)
    int rmm_statistics_resource_adaptor_push_counters(rmm_resource resource, rmm_counter* bytes_out,
                                                      rmm_counter* allocations_out, rmm_error* err)
    int rmm_statistics_resource_adaptor_pop_counters(rmm_resource resource, rmm_counter* bytes_out,
                                                     rmm_counter* allocations_out, rmm_error* err)
    int rmm_limiting_resource_adaptor_new(rmm_resource upstream, uint64_t allocation_limit, uint64_t alignment,
                                          rmm_resource* out, rmm_error* err)
    int rmm_limiting_resource_adaptor_get_allocated_bytes(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_limiting_resource_adaptor_get_allocation_limit(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_tracking_resource_adaptor_new(rmm_resource upstream, int capture_stacks, rmm_resource* out,
                                          rmm_error* err)
    int rmm_tracking_resource_adaptor_get_allocated_bytes(rmm_resource resource, uint64_t* out, rmm_error* err)
    int rmm_tracking_resource_adaptor_get_outstanding_allocations_str(rmm_resource resource, char* buf,
                                                                      size_t capacity, size_t* length_out,
                                                                      rmm_error* err)
    int rmm_aligned_resource_adaptor_new(rmm_resource upstream, uint64_t alignment, uint64_t alignment_threshold,
                                         rmm_resource* out, rmm_error* err)
    int rmm_logging_resource_adaptor_new(rmm_resource upstream, const char* filename, int auto_flush,
                                         rmm_resource* out, rmm_error* err)
    int rmm_logging_resource_adaptor_flush(rmm_resource resource, rmm_error* err)
    int rmm_logging_resource_adaptor_get_file_name(rmm_resource resource, char* buf, size_t capacity,
                                                   size_t* length_out, rmm_error* err)
    int rmm_prefetch_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err)
    int rmm_thread_safe_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err)
    int rmm_failure_callback_resource_adaptor_new(rmm_resource upstream, rmm_failure_callback callback,
                                                  void* context, rmm_failure_callback_release release_context,
                                                  rmm_resource* out, rmm_error* err)

    int rmm_device_get_current(int* out, rmm_error* err)


cdef extern from "rmm_rs/resource.hpp" namespace "rmm_rs" nogil:
    cdef cppclass resource:
        resource(const resource&)
        @staticmethod
        resource adopt(rmm_resource handle)
        rmm_resource handle()

    rmm_resource to_handle(device_async_resource_ref ref, void* keeper,
                           void (*release_keeper)(void*) noexcept nogil) except +
    bool is_foreign(rmm_resource handle)
