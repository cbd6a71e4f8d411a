//! librmm: the C++ binding and the process-wide owner of the registry and the C ABI.
//!
//! This crate exports the C ABI of `include/rmm/rmm_c.h` under its C names. Each export is a
//! one-line forward to `rmm_core::abi`, where the logic, the panic catching and the tests live.
//! Because librmm links its own copy of rmm-core, the registry static of that copy is the
//! process's one registry (see `rmm_core::registry`).
//!
//! The C++ headers (`<rmm/...>`) are built on this ABI in the C++ binding issue.

use std::ffi::{c_char, c_int, c_void};

use rmm_core::abi::{
    self, rmm_counter, rmm_device_buffer, rmm_error, rmm_failure_callback, rmm_failure_callback_release, rmm_resource,
};

/// See `rmm_abi_version` in rmm_c.h.
#[no_mangle]
pub extern "C" fn rmm_abi_version() -> u32 {
    abi::rmm_abi_version()
}

/// See `rmm_abi_owner` in rmm_c.h.
#[no_mangle]
pub extern "C" fn rmm_abi_owner() -> *const c_void {
    abi::rmm_abi_owner()
}

/// See `rmm_is_host_mode` in rmm_c.h.
#[no_mangle]
pub extern "C" fn rmm_is_host_mode() -> c_int {
    abi::rmm_is_host_mode()
}

/// See `rmm_error_kind_name` in rmm_c.h.
#[no_mangle]
pub extern "C" fn rmm_error_kind_name(kind: c_int) -> *const c_char {
    abi::rmm_error_kind_name(kind)
}

/// See `rmm_get_per_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_get_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_get_per_device_resource(device: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_get_per_device_resource(device, out, err) }
}

/// See `rmm_set_per_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_set_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_set_per_device_resource(
    device: c_int,
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_set_per_device_resource(device, resource, previous_out, err) }
}

/// See `rmm_reset_per_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_reset_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_reset_per_device_resource(
    device: c_int,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_reset_per_device_resource(device, previous_out, err) }
}

/// See `rmm_get_current_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_get_current_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_get_current_device_resource(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_get_current_device_resource(out, err) }
}

/// See `rmm_set_current_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_set_current_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_set_current_device_resource(
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_set_current_device_resource(resource, previous_out, err) }
}

/// See `rmm_reset_current_device_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_reset_current_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_reset_current_device_resource(previous_out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_reset_current_device_resource(previous_out, err) }
}

/// See `rmm_resource_retain` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_retain`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_retain(resource: rmm_resource) {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_retain(resource) }
}

/// See `rmm_resource_release` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_release`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_release(resource: rmm_resource) {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_release(resource) }
}

/// See `rmm_resource_allocate` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_allocate`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_allocate(
    resource: rmm_resource,
    stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_allocate(resource, stream, bytes, alignment, out, err) }
}

/// See `rmm_resource_deallocate` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_deallocate`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_deallocate(
    resource: rmm_resource,
    stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_deallocate(resource, stream, ptr, bytes, alignment, err) }
}

/// See `rmm_resource_allocate_sync` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_allocate_sync`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_allocate_sync(
    resource: rmm_resource,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_allocate_sync(resource, bytes, alignment, out, err) }
}

/// See `rmm_resource_deallocate_sync` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_deallocate_sync`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_deallocate_sync(
    resource: rmm_resource,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_deallocate_sync(resource, ptr, bytes, alignment, err) }
}

/// See `rmm_resource_access` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_access`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_access(resource: rmm_resource) -> u32 {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_access(resource) }
}

/// See `rmm_resource_name` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_name`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_name(resource: rmm_resource) -> *const c_char {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_name(resource) }
}

/// See `rmm_resource_is_equal` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_resource_is_equal`].
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_is_equal(a: rmm_resource, b: rmm_resource) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_resource_is_equal(a, b) }
}

/// See `rmm_cuda_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_memory_resource_new(out, err) }
}

/// See `rmm_system_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_system_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_system_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_system_memory_resource_new(out, err) }
}

/// See `rmm_pool_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_pool_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_new(
    upstream: rmm_resource,
    initial_pool_size: u64,
    maximum_pool_size: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_pool_memory_resource_new(upstream, initial_pool_size, maximum_pool_size, out, err) }
}

/// See `rmm_pool_memory_resource_pool_size` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_pool_memory_resource_pool_size`].
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_pool_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_pool_memory_resource_pool_size(resource, out, err) }
}

/// See `rmm_statistics_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_statistics_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_statistics_resource_adaptor_new(upstream, out, err) }
}

/// See `rmm_statistics_resource_adaptor_get_bytes_counter` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_statistics_resource_adaptor_get_bytes_counter`].
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_get_bytes_counter(
    resource: rmm_resource,
    out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_statistics_resource_adaptor_get_bytes_counter(resource, out, err) }
}

/// See `rmm_statistics_resource_adaptor_get_allocations_counter` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_statistics_resource_adaptor_get_allocations_counter`].
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_get_allocations_counter(
    resource: rmm_resource,
    out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_statistics_resource_adaptor_get_allocations_counter(resource, out, err) }
}

/// See `rmm_statistics_resource_adaptor_push_counters` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_statistics_resource_adaptor_push_counters`].
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_push_counters(
    resource: rmm_resource,
    bytes_out: *mut rmm_counter,
    allocations_out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_statistics_resource_adaptor_push_counters(resource, bytes_out, allocations_out, err) }
}

/// See `rmm_statistics_resource_adaptor_pop_counters` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_statistics_resource_adaptor_pop_counters`].
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_pop_counters(
    resource: rmm_resource,
    bytes_out: *mut rmm_counter,
    allocations_out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_statistics_resource_adaptor_pop_counters(resource, bytes_out, allocations_out, err) }
}

/// See `rmm_limiting_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_limiting_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_new(
    upstream: rmm_resource,
    allocation_limit: u64,
    alignment: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_limiting_resource_adaptor_new(upstream, allocation_limit, alignment, out, err) }
}

/// See `rmm_limiting_resource_adaptor_get_allocated_bytes` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_limiting_resource_adaptor_get_allocated_bytes`].
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_get_allocated_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_limiting_resource_adaptor_get_allocated_bytes(resource, out, err) }
}

/// See `rmm_limiting_resource_adaptor_get_allocation_limit` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_limiting_resource_adaptor_get_allocation_limit`].
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_get_allocation_limit(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_limiting_resource_adaptor_get_allocation_limit(resource, out, err) }
}

/// See `rmm_tracking_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_tracking_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_new(
    upstream: rmm_resource,
    capture_stacks: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_tracking_resource_adaptor_new(upstream, capture_stacks, out, err) }
}

/// See `rmm_tracking_resource_adaptor_get_allocated_bytes` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_tracking_resource_adaptor_get_allocated_bytes`].
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_allocated_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_tracking_resource_adaptor_get_allocated_bytes(resource, out, err) }
}

/// See `rmm_aligned_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_aligned_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_aligned_resource_adaptor_new(
    upstream: rmm_resource,
    alignment: u64,
    alignment_threshold: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_aligned_resource_adaptor_new(upstream, alignment, alignment_threshold, out, err) }
}

/// See `rmm_arena_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_arena_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_arena_memory_resource_new(
    upstream: rmm_resource,
    arena_size: u64,
    dump_log_on_failure: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_arena_memory_resource_new(upstream, arena_size, dump_log_on_failure, out, err) }
}

/// See `rmm_fixed_size_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_fixed_size_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_fixed_size_memory_resource_new(
    upstream: rmm_resource,
    block_size: u64,
    blocks_to_preallocate: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_fixed_size_memory_resource_new(upstream, block_size, blocks_to_preallocate, out, err) }
}

/// See `rmm_fixed_size_memory_resource_get_block_size` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_fixed_size_memory_resource_get_block_size`].
#[no_mangle]
pub unsafe extern "C" fn rmm_fixed_size_memory_resource_get_block_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_fixed_size_memory_resource_get_block_size(resource, out, err) }
}

/// See `rmm_binning_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_binning_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_binning_memory_resource_new(upstream, out, err) }
}

/// See `rmm_binning_memory_resource_new_with_exponents` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_binning_memory_resource_new_with_exponents`].
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_new_with_exponents(
    upstream: rmm_resource,
    min_size_exponent: c_int,
    max_size_exponent: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_binning_memory_resource_new_with_exponents(upstream, min_size_exponent, max_size_exponent, out, err) }
}

/// See `rmm_binning_memory_resource_add_bin` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_binning_memory_resource_add_bin`].
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_add_bin(
    resource: rmm_resource,
    allocation_size: u64,
    bin_resource: rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_binning_memory_resource_add_bin(resource, allocation_size, bin_resource, err) }
}

/// See `rmm_simulated_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_simulated_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_simulated_memory_resource_new(
    capacity: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_simulated_memory_resource_new(capacity, out, err) }
}

/// See `rmm_managed_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_managed_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_managed_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_managed_memory_resource_new(out, err) }
}

/// See `rmm_pinned_host_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_pinned_host_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_pinned_host_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_pinned_host_memory_resource_new(out, err) }
}

/// See `rmm_cuda_async_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_memory_resource_new(
    initial_pool_size: u64,
    release_threshold: u64,
    export_handle_type: i32,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_memory_resource_new(initial_pool_size, release_threshold, export_handle_type, out, err) }
}

/// See `rmm_cuda_async_memory_resource_pool_handle` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_memory_resource_pool_handle`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_memory_resource_pool_handle(resource, out, err) }
}

/// See `rmm_sam_headroom_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_sam_headroom_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_sam_headroom_memory_resource_new(
    headroom: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_sam_headroom_memory_resource_new(headroom, out, err) }
}

/// See `rmm_logging_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_logging_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_new(
    upstream: rmm_resource,
    filename: *const c_char,
    auto_flush: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_logging_resource_adaptor_new(upstream, filename, auto_flush, out, err) }
}

/// See `rmm_logging_resource_adaptor_flush` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_logging_resource_adaptor_flush`].
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_flush(resource: rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_logging_resource_adaptor_flush(resource, err) }
}

/// See `rmm_logging_resource_adaptor_get_file_name` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_logging_resource_adaptor_get_file_name`].
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_get_file_name(
    resource: rmm_resource,
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_logging_resource_adaptor_get_file_name(resource, buf, capacity, length_out, err) }
}

/// See `rmm_prefetch_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_prefetch_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_prefetch_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_prefetch_resource_adaptor_new(upstream, out, err) }
}

/// See `rmm_thread_safe_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_thread_safe_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_thread_safe_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_thread_safe_resource_adaptor_new(upstream, out, err) }
}

/// See `rmm_failure_callback_resource_adaptor_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_failure_callback_resource_adaptor_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_failure_callback_resource_adaptor_new(
    upstream: rmm_resource,
    callback: rmm_failure_callback,
    context: *mut c_void,
    release_context: rmm_failure_callback_release,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_failure_callback_resource_adaptor_new(upstream, callback, context, release_context, out, err) }
}

/// See `rmm_pool_memory_resource_maximum_pool_size` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_pool_memory_resource_maximum_pool_size`].
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_maximum_pool_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_pool_memory_resource_maximum_pool_size(resource, out, err) }
}

/// See `rmm_tracking_resource_adaptor_get_outstanding_allocations_str` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_tracking_resource_adaptor_get_outstanding_allocations_str`].
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
    resource: rmm_resource,
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_tracking_resource_adaptor_get_outstanding_allocations_str(resource, buf, capacity, length_out, err) }
}

/// See `rmm_stream_create` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_stream_create`].
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_create(flags: c_int, out: *mut *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_stream_create(flags, out, err) }
}

/// See `rmm_stream_destroy` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_stream_destroy`].
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_destroy(stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_stream_destroy(stream, err) }
}

/// See `rmm_stream_synchronize` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_stream_synchronize`].
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_synchronize(stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_stream_synchronize(stream, err) }
}

/// See `rmm_stream_query` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_stream_query`].
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_query(stream: *mut c_void, idle_out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_stream_query(stream, idle_out, err) }
}

/// See `rmm_memcpy_async` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_memcpy_async`].
#[no_mangle]
pub unsafe extern "C" fn rmm_memcpy_async(dst: *mut c_void, src: *const c_void, bytes: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_memcpy_async(dst, src, bytes, stream, err) }
}

/// See `rmm_memset_async` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_memset_async`].
#[no_mangle]
pub unsafe extern "C" fn rmm_memset_async(ptr: *mut c_void, value: c_int, bytes: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_memset_async(ptr, value, bytes, stream, err) }
}

/// See `rmm_prefetch` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_prefetch`].
#[no_mangle]
pub unsafe extern "C" fn rmm_prefetch(ptr: *const c_void, bytes: usize, device: c_int, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_prefetch(ptr, bytes, device, stream, err) }
}

/// See `rmm_device_buffer_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_new(size: usize, alignment: usize, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_new(size, alignment, stream, resource, out, err) }
}

/// See `rmm_device_buffer_new_copy` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_new_copy`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_new_copy(src: *const c_void, size: usize, alignment: usize, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_new_copy(src, size, alignment, stream, resource, out, err) }
}

/// See `rmm_device_buffer_copy` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_copy`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_copy(other: *const rmm_device_buffer, stream: *mut c_void, resource: rmm_resource, out: *mut *mut rmm_device_buffer, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_copy(other, stream, resource, out, err) }
}

/// See `rmm_device_buffer_free` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_free`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_free(buf: *mut rmm_device_buffer) {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_free(buf) }
}

/// See `rmm_device_buffer_data` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_data`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_data(buf: *const rmm_device_buffer) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_data(buf) }
}

/// See `rmm_device_buffer_size` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_size`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_size(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_size(buf) }
}

/// See `rmm_device_buffer_capacity` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_capacity`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_capacity(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_capacity(buf) }
}

/// See `rmm_device_buffer_alignment` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_alignment`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_alignment(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_alignment(buf) }
}

/// See `rmm_device_buffer_stream` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_stream`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_stream(buf: *const rmm_device_buffer) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_stream(buf) }
}

/// See `rmm_device_buffer_set_stream` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_set_stream`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_set_stream(buf: *mut rmm_device_buffer, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_set_stream(buf, stream, err) }
}

/// See `rmm_device_buffer_reserve` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_reserve`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_reserve(buf: *mut rmm_device_buffer, new_capacity: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_reserve(buf, new_capacity, stream, err) }
}

/// See `rmm_device_buffer_resize` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_resize`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_resize(buf: *mut rmm_device_buffer, new_size: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_resize(buf, new_size, stream, err) }
}

/// See `rmm_device_buffer_shrink_to_fit` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_shrink_to_fit`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_shrink_to_fit(buf: *mut rmm_device_buffer, stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_shrink_to_fit(buf, stream, err) }
}

/// See `rmm_device_buffer_memory_resource` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_memory_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_memory_resource(buf: *const rmm_device_buffer, out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_memory_resource(buf, out, err) }
}

/// See `rmm_device_buffer_device` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_buffer_device`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_device(buf: *const rmm_device_buffer, out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_buffer_device(buf, out, err) }
}

/// See `rmm_device_count` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_count`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_count(out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_count(out, err) }
}

/// See `rmm_device_get_current` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_get_current`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_get_current(out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_get_current(out, err) }
}

/// See `rmm_device_set_current` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_device_set_current`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_set_current(device: c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_device_set_current(device, err) }
}

/// See `rmm_available_device_memory` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_available_device_memory`].
#[no_mangle]
pub unsafe extern "C" fn rmm_available_device_memory(free_out: *mut usize, total_out: *mut usize, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_available_device_memory(free_out, total_out, err) }
}

/// See `rmm_callback_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_callback_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_callback_memory_resource_new(
    allocate: abi::rmm_allocate_callback,
    deallocate: abi::rmm_deallocate_callback,
    context: *mut c_void,
    release_context: abi::rmm_callback_release,
    access: u32,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_callback_memory_resource_new(allocate, deallocate, context, release_context, access, out, err) }
}

/// See `rmm_cuda_async_view_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_view_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_view_memory_resource_new(
    pool_handle: *mut c_void,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_view_memory_resource_new(pool_handle, out, err) }
}

/// See `rmm_cuda_async_view_memory_resource_pool_handle` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_view_memory_resource_pool_handle`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_view_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_view_memory_resource_pool_handle(resource, out, err) }
}

/// See `rmm_cuda_async_managed_memory_resource_new` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_managed_memory_resource_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_managed_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_managed_memory_resource_new(out, err) }
}

/// See `rmm_cuda_async_managed_memory_resource_pool_handle` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_cuda_async_managed_memory_resource_pool_handle`].
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_managed_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { abi::rmm_cuda_async_managed_memory_resource_pool_handle(resource, out, err) }
}

/// See `rmm_logging_resource_adaptor_new_with_sink` in rmm_c.h.
///
/// # Safety
/// As for [`abi::rmm_logging_resource_adaptor_new_with_sink`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_new_with_sink(
    upstream: rmm_resource,
    write: abi::rmm_log_write,
    flush: abi::rmm_log_flush,
    context: *mut c_void,
    release_context: abi::rmm_log_release,
    auto_flush: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        abi::rmm_logging_resource_adaptor_new_with_sink(upstream, write, flush, context, release_context, auto_flush, out, err)
    }
}
