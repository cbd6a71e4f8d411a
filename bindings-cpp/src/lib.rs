//! librmm: the C++ binding and the process-wide owner of the registry and the C ABI.
//!
//! This crate exports the C ABI of `include/rmm/rmm_c.h` under its C names. Each export is a
//! one-line forward to `rmm_core::abi`, where the logic, the panic catching and the tests live.
//! Because librmm links its own copy of rmm-core, the registry static of that copy is the
//! process's one registry (see `rmm_core::registry`).
//!
//! The C++ headers (`<rmm/...>`) are built on this ABI in the C++ binding issue.

use std::ffi::{c_char, c_int, c_void};

use rmm_core::abi::{self, rmm_error, rmm_resource};

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
