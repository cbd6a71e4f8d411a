//! What every C entry point needs, for the binaries that export them (librmm, crate `rmm-cpp`):
//! panic catching and error reporting ([`guarded`]), out-pointer checks ([`put`], [`clear_out`],
//! [`give_previous`]), and the checked vtable of a borrowed handle ([`with_vtable`]).
//!
//! Every entry point catches panics ([`RMM_ERROR_PANIC`]) and checks its out-pointers
//! ([`RMM_ERROR_INVALID_ARGUMENT`](super::status::RMM_ERROR_INVALID_ARGUMENT) for NULL ones):
//! nothing unwinds into C.

use std::any::Any;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::foreign::{checked_fns, Fns};
use super::handle::{owner_tag, rmm_resource, rmm_resource_vtable, RMM_ABI_VERSION};
use super::status::{error_kind, rmm_error, RMM_ERROR_PANIC, RMM_OK};
use super::AnyResource;
use crate::error::{Error, Result};

/// Runs `f`, turning its error or panic into a status and `err`'s details (cleared on success).
///
/// # Safety
/// `err` is NULL or valid for writes.
pub unsafe fn guarded(err: *mut rmm_error, f: impl FnOnce() -> Result<()>) -> c_int {
    // Boxed inside the closure: what crosses `catch_unwind` is one word, not an `Error` (every
    // allocation and free of the C API passes here).
    match catch_unwind(AssertUnwindSafe(|| f().map_err(Box::new))) {
        Ok(Ok(())) => {
            // SAFETY: caller contract: NULL or valid for writes.
            if let Some(d) = unsafe { err.as_mut() } {
                d.clear();
            }
            RMM_OK
        }
        // SAFETY: caller contract.
        Ok(Err(e)) => unsafe { report(err, &e) },
        // SAFETY: caller contract.
        Err(payload) => unsafe { report_panic(err, payload.as_ref()) },
    }
}

/// Writes `error` to `err` (if any) and returns its kind.
///
/// # Safety
/// `err` is NULL or valid for writes.
pub unsafe fn report(err: *mut rmm_error, error: &Error) -> c_int {
    // SAFETY: caller contract.
    if let Some(d) = unsafe { err.as_mut() } {
        d.set(error);
    }
    error_kind(error)
}

/// Writes a caught panic to `err` (if any) and returns [`RMM_ERROR_PANIC`].
///
/// # Safety
/// `err` is NULL or valid for writes.
pub unsafe fn report_panic(err: *mut rmm_error, payload: &(dyn Any + Send)) -> c_int {
    // SAFETY: caller contract.
    if let Some(d) = unsafe { err.as_mut() } {
        *d = rmm_error::new();
        d.kind = RMM_ERROR_PANIC;
        d.set_message(&format!(
            "rmm internal error (panic): {}",
            panic_text(payload)
        ));
    }
    RMM_ERROR_PANIC
}

/// The text of a caught panic's payload (its `&str` or `String`, else a placeholder).
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// The error for a NULL out-pointer named `what`.
pub fn null_out(what: &str) -> Error {
    Error::invalid(format!("{what} must not be NULL"))
}

/// Writes `value` to a non-NULL out-pointer, or fails.
///
/// # Safety
/// `out` is NULL or valid for writes.
pub unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<()> {
    // SAFETY: caller contract.
    match unsafe { out.as_mut() } {
        Some(slot) => {
            *slot = value;
            Ok(())
        }
        None => Err(null_out(what)),
    }
}

/// Writes the pointer `f` makes to `*out` (the caller's to give back), catching errors and panics;
/// `*out` is NULL on failure, and a NULL `out` is an invalid argument (`f` is then not called).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe fn hand_out_ptr<T>(
    out: *mut *mut T,
    err: *mut rmm_error,
    f: impl FnOnce() -> Result<*mut T>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        if let Some(slot) = out.as_mut() {
            *slot = std::ptr::null_mut();
        }
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            put(out, f()?, "out")
        })
    }
}

/// Clears a handle out-pointer (if any) so it holds `{NULL, NULL}` on failure.
///
/// # Safety
/// `out` is NULL or valid for writes.
pub unsafe fn clear_out(out: *mut rmm_resource) {
    // SAFETY: caller contract.
    if let Some(slot) = unsafe { out.as_mut() } {
        *slot = rmm_resource::NULL;
    }
}

/// Hands `previous` to an optional out-pointer, or drops it (releasing its reference).
///
/// # Safety
/// `previous_out` is NULL or valid for writes.
pub unsafe fn give_previous(previous_out: *mut rmm_resource, previous: AnyResource) {
    // SAFETY: caller contract.
    if let Some(slot) = unsafe { previous_out.as_mut() } {
        *slot = previous.into_handle();
    }
}

/// The vtable of a handle made by this copy of rmm-core: complete by construction, so the hot
/// calls (allocate, deallocate) skip [`checked_fns`] for it.
///
/// # Safety
/// `resource.vtable` is NULL or points to a vtable (at least its version, size and owner fields).
pub unsafe fn own_vtable(resource: &rmm_resource) -> Option<&'static rmm_resource_vtable> {
    let v = resource.vtable;
    if v.is_null() {
        return None;
    }
    // SAFETY: non-NULL; every vtable starts with its version, size and owner (read as raw fields,
    // without assuming the rest is there).
    let (version, owner) = unsafe {
        (
            std::ptr::addr_of!((*v).abi_version).read(),
            std::ptr::addr_of!((*v).owner).read(),
        )
    };
    // SAFETY: our owner tag means one of our static RustVTables, complete and 'static.
    (version == RMM_ABI_VERSION && owner == owner_tag()).then(|| unsafe { &*v })
}

/// Checks a borrowed handle and runs `f` (a vtable call that reports into `err` itself), catching
/// panics.
///
/// # Safety
/// `resource` is live or fails the check; `err` is NULL or valid.
pub unsafe fn with_vtable(
    resource: rmm_resource,
    err: *mut rmm_error,
    f: impl FnOnce(Fns) -> c_int,
) -> c_int {
    // SAFETY: caller contract.
    let fns = match unsafe { checked_fns(&resource) } {
        Ok(fns) => fns,
        // SAFETY: caller contract.
        Err(e) => return unsafe { report(err, &e) },
    };
    match catch_unwind(AssertUnwindSafe(|| f(fns))) {
        Ok(status) => status,
        // SAFETY: caller contract.
        Err(payload) => unsafe { report_panic(err, payload.as_ref()) },
    }
}

/// Writes the resource `f` makes to `*out` (OWNING), catching errors and panics; `*out` is
/// `{NULL, NULL}` on failure, and a NULL `out` is an invalid argument (`f` is then not called).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe fn hand_out(
    out: *mut rmm_resource,
    err: *mut rmm_error,
    f: impl FnOnce() -> Result<AnyResource>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(out);
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            put(out, f()?.into_handle(), "out")
        })
    }
}

/// Runs `f` (a registry change that returns the previous resource), catching errors and panics, and
/// hands the previous resource to `*previous_out` (OWNING) or releases it when `previous_out` is
/// NULL; `*previous_out` is `{NULL, NULL}` on failure.
///
/// # Safety
/// `previous_out` and `err` are NULL or valid for writes.
pub unsafe fn hand_back(
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
    f: impl FnOnce() -> Result<AnyResource>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(previous_out);
        guarded(err, || {
            give_previous(previous_out, f()?);
            Ok(())
        })
    }
}
