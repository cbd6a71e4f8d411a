//! Owning exports of buffers and resources (`rmm_buffer_export`, `rmm_resource_export` in
//! `rmm_c.h`): what a versioned capsule carries between C++, Python and Rust with no copy.
//!
//! The structs and their protocol are rmm-core's (`rmm_core::export`); these entry points turn
//! librmm's own handles (`rmm_device_buffer*`, `rmm_resource`) into exports and back. Any binary can
//! read an export made by any other: each carries the deleter of the binary that made it.

use std::ffi::c_int;

use crate::buffers::{self, rmm_device_buffer};
use rmm_core::error::Error;
use rmm_core::export::{self, rmm_buffer_export, rmm_resource_export};
use rmm_core::resource::guard::{hand_out, hand_out_ptr};
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};

/// Moves the memory of `buf` into a new export (no copy). On success `buf` is CONSUMED (freed
/// without freeing its memory) and `*out` is OWNING: give it to a consumer or to
/// [`rmm_buffer_export_free`].
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `out`, or a NULL, freed or foreign `buf`; `buf` is then
/// untouched.
///
/// # Safety
/// `buf` is NULL or a live OWNING buffer that no other thread uses; `out` and `err` are NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_export(
    buf: *mut rmm_device_buffer,
    out: *mut *mut rmm_buffer_export,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            // SAFETY: NULL, freed and foreign pointers are refused; a live owning buffer (caller
            // contract) is consumed here.
            let buffer = buffers::take(buf)?;
            Ok(export::export_buffer(buffer))
        })
    }
}

/// Adopts an export (made by any binary) as a new OWNING `rmm_device_buffer*` in `*out` (no copy):
/// the memory is freed once, by `rmm_device_buffer_free`, on the export's stream and device,
/// through the export's resource. On success the export is CONSUMED.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `export` or `out`, another export version, a missing
/// deleter or resource, an invalid resource handle, a bad alignment or inconsistent sizes; the
/// export is then not consumed (its owner still frees it).
///
/// # Safety
/// `export` is NULL or a live export that nothing else uses during the call; `out` and `err` are
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_import(
    export: *mut rmm_buffer_export,
    out: *mut *mut rmm_device_buffer,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            let buffer = export::import_buffer(export)?;
            Ok(buffers::into_raw(buffer))
        })
    }
}

/// Gives an export back through its own deleter (the memory is freed on its stream and device if
/// nobody adopted it). NULL, or an export without a deleter, is a no-op.
///
/// # Safety
/// `export` is NULL or a live OWNING export, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rmm_buffer_export_free(export: *mut rmm_buffer_export) {
    // SAFETY: caller contract.
    unsafe { export::free_buffer_export(export) }
}

/// A new OWNING export of `resource` (BORROWED; the export holds its own reference).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for an invalid or empty handle or a NULL `out`.
///
/// # Safety
/// `resource` is live or fails the check; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_export_new(
    resource: rmm_resource,
    out: *mut *mut rmm_resource_export,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            if resource.is_null() {
                return Err(Error::invalid("the resource handle must not be empty"));
            }
            let mr = AnyResource::from_borrowed_handle(resource)?;
            Ok(export::export_resource(mr))
        })
    }
}

/// The export's resource as a new OWNING handle in `*out` (one more reference; the export is
/// unchanged and can be imported again).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `export` or `out`, another export version, a missing
/// deleter or an invalid resource handle.
///
/// # Safety
/// `export` is NULL or a live export; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_import(
    export: *const rmm_resource_export,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { hand_out(out, err, || export::import_resource(export)) }
}

/// Gives an export's reference back through its own deleter. NULL is a no-op.
///
/// # Safety
/// `export` is NULL or a live OWNING export, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_export_free(export: *mut rmm_resource_export) {
    // SAFETY: caller contract.
    unsafe { export::free_resource_export(export) }
}

#[cfg(test)]
mod tests;
