//! The entry points every registry owner exports (`rmm_c.h`), as plain `extern "C"` functions
//! without `#[no_mangle]`: librmm (crate `rmm-cpp`) exports each under its C name, and
//! [`OwnerTable::local`] names them. Any other binary linking rmm-core exports none of them.

use std::ffi::{c_int, c_void};

use crate::cuda::DeviceId;
use crate::resource::guard::{hand_back, hand_out};
use crate::resource::handle::{owner_tag, rmm_resource, RMM_ABI_VERSION};
use crate::resource::status::rmm_error;
use crate::resource::AnyResource;

/// `RMM_ABI_VERSION` of this library.
pub extern "C" fn rmm_abi_version() -> u32 {
    RMM_ABI_VERSION
}

/// The owner tag of this library's handles (compare with `vtable->owner`).
pub extern "C" fn rmm_abi_owner() -> *const c_void {
    owner_tag()
}

/// The resource of `device` (an owning handle in `*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_get_per_device_resource(
    device: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        hand_out(out, err, || {
            crate::registry::per_device_resource(device as DeviceId)
        })
    }
}

/// Sets the resource of `device` (retains the borrowed `resource`); the previous one goes to
/// `*previous_out` (owning) or is released when `previous_out` is NULL.
///
/// # Safety
/// `resource` is a live handle (or invalid, which is reported); `previous_out` and `err` are NULL
/// or valid for writes.
pub unsafe extern "C" fn rmm_set_per_device_resource(
    device: c_int,
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract; the borrowed handle is retained by the new owner.
    unsafe {
        hand_back(previous_out, err, || {
            crate::registry::set_per_device_resource(
                device as DeviceId,
                AnyResource::from_borrowed_handle(resource)?,
            )
        })
    }
}

/// The registry's generation: changes whenever a device's resource is set or reset; 0 when it
/// cannot be told (this binary routes to an owner that does not export one).
pub extern "C" fn rmm_registry_generation() -> u64 {
    crate::registry::generation().unwrap_or(0)
}

/// Resets `device` to its initial resource; the previous one goes to `*previous_out` (owning) or is
/// released when `previous_out` is NULL.
///
/// # Safety
/// `previous_out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_reset_per_device_resource(
    device: c_int,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_back(previous_out, err, || {
            crate::registry::reset_per_device_resource(device as DeviceId)
        })
    }
}
