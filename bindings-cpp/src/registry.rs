//! The per-device resource registry (`rmm_c.h`): librmm owns the process's one registry.
//!
//! The per-device entry points are the registry owner protocol, served by rmm-core
//! (`rmm_core::registry::owner::serve`, the functions another binary's rmm-core finds with `dlsym`
//! and its tests route to); they are exported here under their C names. The current-device ones
//! are librmm's own.

use std::ffi::c_int;

use rmm_core::registry;
use rmm_core::registry::owner::serve;
use rmm_core::resource::guard::{hand_back, hand_out};
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};

/// The resource of `device` (an owning handle in `*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_get_per_device_resource(
    device: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (the same as the served function's).
    unsafe { serve::rmm_get_per_device_resource(device, out, err) }
}

/// Sets the resource of `device` (retains the borrowed `resource`); the previous one goes to
/// `*previous_out` (owning) or is released when `previous_out` is NULL.
///
/// # Safety
/// `resource` is a live handle (or invalid, which is reported); `previous_out` and `err` are NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_set_per_device_resource(
    device: c_int,
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (the same as the served function's).
    unsafe { serve::rmm_set_per_device_resource(device, resource, previous_out, err) }
}

/// Resets `device` to its initial resource; the previous one goes to `*previous_out` (owning) or is
/// released when `previous_out` is NULL.
///
/// # Safety
/// `previous_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_reset_per_device_resource(
    device: c_int,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (the same as the served function's).
    unsafe { serve::rmm_reset_per_device_resource(device, previous_out, err) }
}

/// A number that changes whenever any device's resource is set or reset (from any language); 0
/// when it cannot be told. Bindings revalidate what they cached of the current resource with it.
#[no_mangle]
pub extern "C" fn rmm_registry_generation() -> u64 {
    serve::rmm_registry_generation()
}

/// [`rmm_get_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_get_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_get_current_device_resource(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { hand_out(out, err, registry::current_resource) }
}

/// [`rmm_set_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_set_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_set_current_device_resource(
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract; the borrowed handle is retained by the new owner.
    unsafe {
        hand_back(previous_out, err, || {
            registry::set_current_resource(AnyResource::from_borrowed_handle(resource)?)
        })
    }
}

/// [`rmm_reset_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_reset_per_device_resource`].
#[no_mangle]
pub unsafe extern "C" fn rmm_reset_current_device_resource(
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { hand_back(previous_out, err, registry::reset_current_resource) }
}
