//! librmm: the C++ binding and the process-wide owner of the registry and the C ABI.
//!
//! This crate exports the C ABI of `include/rmm/rmm_c.h` under its C names. Each export is a
//! forward to `rmm_core::abi`, where the logic, the panic catching and the tests live, generated
//! from the one-line signature tables below. Because librmm links its own copy of rmm-core, the
//! registry static of that copy is the process's one registry (see `rmm_core::registry`).
//!
//! The header-only C++ API (`include/rmm/**`, RMM 26.x names) is built on this ABI.

mod torch_allocator;
mod process_exit;
mod tracking_report;

use std::ffi::{c_char, c_int, c_void};

use rmm_core::abi::{
    self, rmm_counter, rmm_device_buffer, rmm_error, rmm_failure_callback, rmm_failure_callback_release, rmm_resource,
};

/// Forwards C functions that are safe to call to `rmm_core::abi`, exported under their C names.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("See `", stringify!($name), "` in rmm_c.h.")]
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> $ret {
            abi::$name($($arg),*)
        }
    )*};
}

/// Forwards unsafe C functions to `rmm_core::abi`, exported under their C names; the contract of
/// each is the one of the function it forwards to.
macro_rules! forward_unsafe {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
        #[doc = concat!("See `", stringify!($name), "` in rmm_c.h.\n\n# Safety\nAs for [`abi::", stringify!($name), "`].")]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)] // the C signatures are what they are
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: forwarded contract.
            unsafe { abi::$name($($arg),*) }
        }
    )*};
}

forward! {
    rmm_abi_version() -> u32;
    rmm_abi_owner() -> *const c_void;
    rmm_is_host_mode() -> c_int;
    rmm_error_kind_name(kind: c_int) -> *const c_char;
}

forward_unsafe! {
    rmm_get_per_device_resource(device: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_set_per_device_resource(device: c_int, resource: rmm_resource, previous_out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_reset_per_device_resource(device: c_int, previous_out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_get_current_device_resource(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_set_current_device_resource(resource: rmm_resource, previous_out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_reset_current_device_resource(previous_out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_resource_retain(resource: rmm_resource) -> ();
    rmm_resource_release(resource: rmm_resource) -> ();
    rmm_resource_allocate(resource: rmm_resource, stream: *mut c_void, bytes: usize, alignment: usize, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_resource_deallocate(resource: rmm_resource, stream: *mut c_void, ptr: *mut c_void, bytes: usize, alignment: usize, err: *mut rmm_error) -> c_int;
    rmm_resource_allocate_sync(resource: rmm_resource, bytes: usize, alignment: usize, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_resource_deallocate_sync(resource: rmm_resource, ptr: *mut c_void, bytes: usize, alignment: usize, err: *mut rmm_error) -> c_int;
    rmm_resource_access(resource: rmm_resource) -> u32;
    rmm_resource_name(resource: rmm_resource) -> *const c_char;
    rmm_resource_is_equal(a: rmm_resource, b: rmm_resource) -> c_int;
    rmm_cuda_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_system_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_pool_memory_resource_new(upstream: rmm_resource, initial_pool_size: u64, maximum_pool_size: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_pool_memory_resource_pool_size(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_statistics_resource_adaptor_new(upstream: rmm_resource, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_statistics_resource_adaptor_get_bytes_counter(resource: rmm_resource, out: *mut rmm_counter, err: *mut rmm_error) -> c_int;
    rmm_statistics_resource_adaptor_get_allocations_counter(resource: rmm_resource, out: *mut rmm_counter, err: *mut rmm_error) -> c_int;
    rmm_statistics_resource_adaptor_push_counters(resource: rmm_resource, bytes_out: *mut rmm_counter, allocations_out: *mut rmm_counter, err: *mut rmm_error) -> c_int;
    rmm_statistics_resource_adaptor_pop_counters(resource: rmm_resource, bytes_out: *mut rmm_counter, allocations_out: *mut rmm_counter, err: *mut rmm_error) -> c_int;
    rmm_limiting_resource_adaptor_new(upstream: rmm_resource, allocation_limit: u64, alignment: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_limiting_resource_adaptor_get_allocated_bytes(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_limiting_resource_adaptor_get_allocation_limit(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_tracking_resource_adaptor_new(upstream: rmm_resource, capture_stacks: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_tracking_resource_adaptor_get_allocated_bytes(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_aligned_resource_adaptor_new(upstream: rmm_resource, alignment: u64, alignment_threshold: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_arena_memory_resource_new(upstream: rmm_resource, arena_size: u64, dump_log_on_failure: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_fixed_size_memory_resource_new(upstream: rmm_resource, block_size: u64, blocks_to_preallocate: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_fixed_size_memory_resource_get_block_size(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_binning_memory_resource_new(upstream: rmm_resource, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_binning_memory_resource_new_with_exponents(upstream: rmm_resource, min_size_exponent: c_int, max_size_exponent: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_binning_memory_resource_add_bin(resource: rmm_resource, allocation_size: u64, bin_resource: rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_simulated_memory_resource_new(capacity: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_managed_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_pinned_host_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_memory_resource_new(initial_pool_size: u64, release_threshold: u64, export_handle_type: i32, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_memory_resource_pool_handle(resource: rmm_resource, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_sam_headroom_memory_resource_new(headroom: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_logging_resource_adaptor_new(upstream: rmm_resource, filename: *const c_char, auto_flush: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_logging_resource_adaptor_flush(resource: rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_logging_resource_adaptor_get_file_name(resource: rmm_resource, buf: *mut c_char, capacity: usize, length_out: *mut usize, err: *mut rmm_error) -> c_int;
    rmm_prefetch_resource_adaptor_new(upstream: rmm_resource, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_thread_safe_resource_adaptor_new(upstream: rmm_resource, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_failure_callback_resource_adaptor_new(upstream: rmm_resource, callback: rmm_failure_callback, context: *mut c_void, release_context: rmm_failure_callback_release, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_pool_memory_resource_maximum_pool_size(resource: rmm_resource, out: *mut u64, err: *mut rmm_error) -> c_int;
    rmm_tracking_resource_adaptor_get_outstanding_allocations_str(resource: rmm_resource, buf: *mut c_char, capacity: usize, length_out: *mut usize, err: *mut rmm_error) -> c_int;
    rmm_stream_create(flags: c_int, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_stream_destroy(stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_stream_synchronize(stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_stream_query(stream: *mut c_void, idle_out: *mut c_int, err: *mut rmm_error) -> c_int;
    rmm_memcpy_async(dst: *mut c_void, src: *const c_void, bytes: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_memset_async(ptr: *mut c_void, value: c_int, bytes: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_prefetch(ptr: *const c_void, bytes: usize, device: c_int, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_new(size: usize, alignment: usize, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_new_copy(src: *const c_void, size: usize, alignment: usize, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_copy(other: *const rmm_device_buffer, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_free(buf: *mut rmm_device_buffer) -> ();
    rmm_device_buffer_data(buf: *const rmm_device_buffer) -> *mut c_void;
    rmm_device_buffer_size(buf: *const rmm_device_buffer) -> usize;
    rmm_device_buffer_capacity(buf: *const rmm_device_buffer) -> usize;
    rmm_device_buffer_alignment(buf: *const rmm_device_buffer) -> usize;
    rmm_device_buffer_stream(buf: *const rmm_device_buffer) -> *mut c_void;
    rmm_device_buffer_set_stream(buf: *mut rmm_device_buffer, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_reserve(buf: *mut rmm_device_buffer, new_capacity: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_resize(buf: *mut rmm_device_buffer, new_size: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_shrink_to_fit(buf: *mut rmm_device_buffer, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_memory_resource(buf: *const rmm_device_buffer, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_device_buffer_device(buf: *const rmm_device_buffer, out: *mut c_int, err: *mut rmm_error) -> c_int;
    rmm_device_count(out: *mut c_int, err: *mut rmm_error) -> c_int;
    rmm_device_get_current(out: *mut c_int, err: *mut rmm_error) -> c_int;
    rmm_device_set_current(device: c_int, err: *mut rmm_error) -> c_int;
    rmm_available_device_memory(free_out: *mut usize, total_out: *mut usize, err: *mut rmm_error) -> c_int;
    rmm_callback_memory_resource_new(allocate: abi::rmm_allocate_callback, deallocate: abi::rmm_deallocate_callback, context: *mut c_void, release_context: abi::rmm_callback_release, access: u32, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_view_memory_resource_new(pool_handle: *mut c_void, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_view_memory_resource_pool_handle(resource: rmm_resource, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_managed_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    rmm_cuda_async_managed_memory_resource_pool_handle(resource: rmm_resource, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    rmm_logging_resource_adaptor_new_with_sink(upstream: rmm_resource, write: abi::rmm_log_write, flush: abi::rmm_log_flush, context: *mut c_void, release_context: abi::rmm_log_release, auto_flush: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
}
