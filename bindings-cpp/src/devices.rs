//! C functions for devices (`rmm_device_*`, `rmm_available_device_memory` in `rmm_c.h`): what
//! `<rmm/cuda_device.hpp>` needs without the CUDA runtime.
//!
//! Host mode has no devices, but the registry keeps host memory in device 0's slot, so the current
//! device is 0 there (as `get_current_device_resource_ref()` sees it); counting devices or asking
//! for their memory is an error, as it is in Python.

use std::ffi::c_int;

use rmm_core::cuda;
use rmm_core::resource::guard::{guarded, null_out, put};
use rmm_core::resource::rmm_error;

/// Writes the number of CUDA devices to `*out`.
///
/// # Errors
/// `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE` in host mode; `RMM_ERROR_INVALID_ARGUMENT` for a
/// NULL `out`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_count(out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe { guarded(err, || put(out, cuda::device_count()?, "out")) }
}

/// Writes the calling thread's current device to `*out`: the device of its current context, 0 when
/// it has none, and 0 in host mode (the registry's host-memory slot).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `out`; the driver's error.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_get_current(out: *mut c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        guarded(err, || {
            let device = if cuda::is_host_mode() {
                0
            } else {
                cuda::current_device()?
            };
            put(out, device, "out")
        })
    }
}

/// Makes `device` current on the calling thread (its primary context, as `cudaSetDevice` does).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a device that does not exist; `RMM_ERROR_NO_DRIVER` /
/// `RMM_ERROR_NO_DEVICE` in host mode.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_set_current(device: c_int, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || cuda::set_current_device(device)) }
}

/// Writes the free and total bytes of the current device's memory to `*free_out` and `*total_out`.
///
/// # Errors
/// `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE` in host mode; `RMM_ERROR_INVALID_ARGUMENT` for a
/// NULL out-pointer.
///
/// # Safety
/// `free_out`, `total_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_available_device_memory(
    free_out: *mut usize,
    total_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on every pointer.
    unsafe {
        guarded(err, || {
            if free_out.is_null() || total_out.is_null() {
                return Err(null_out(if free_out.is_null() {
                    "free_out"
                } else {
                    "total_out"
                }));
            }
            let (free, total) = cuda::mem_info(cuda::current_device()?)?;
            put(free_out, free, "free_out")?;
            put(total_out, total, "total_out")
        })
    }
}

#[cfg(test)]
mod tests;
