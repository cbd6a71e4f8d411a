//! The operations on any handle (`rmm_resource_*` in `rmm_c.h`): reference counting, allocation,
//! properties, what a resource of this library is (`rmm_resource_kind`), and the two base
//! resources every program starts from.
//!
//! The hot calls (allocate, deallocate) on a handle of this library skip the full vtable check
//! (`own_vtable`); every other handle is checked first.

use std::ffi::{c_char, c_int, c_void};
use std::panic::catch_unwind;

use rmm_core::error::Error;
use rmm_core::mr::kind::ResourceKind;
use rmm_core::mr::{CudaMemoryResource, SystemMemoryResource};
use rmm_core::resource::foreign::{check_handle, checked_fns, with_borrowed};
use rmm_core::resource::guard::{
    clear_out, guarded, hand_out, null_out, own_vtable, put, report, with_vtable,
};
use rmm_core::resource::handle::{owner_tag, release_handle};
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};

/// Adds a reference to `resource`; no-op for the empty handle.
///
/// # Safety
/// `resource` is live (or empty).
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_retain(resource: rmm_resource) {
    // SAFETY: caller contract; an empty or malformed handle is ignored.
    unsafe {
        if let Ok(fns) = checked_fns(&resource) {
            let _ = catch_unwind(|| (fns.retain)(resource.self_));
        }
    }
}

/// Drops a reference to `resource`; the last one frees it. No-op for the empty handle. A handle of
/// this library released twice (or used after its last release) is refused and logged
/// ([`rmm_resource_release_checked`] reports it).
///
/// # Safety
/// The caller owns the reference it gives back.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_release(resource: rmm_resource) {
    // SAFETY: caller contract.
    if let Err(e) = unsafe { release_handle(resource) } {
        tracing::error!("rmm_resource_release: {e}");
    }
}

/// [`rmm_resource_release`] that reports: `RMM_ERROR_INVALID_ARGUMENT` for a malformed handle or a
/// handle of this library that was already released.
///
/// # Safety
/// `resource` is empty, owning, or a released handle of this library; `err` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_release_checked(
    resource: rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || release_handle(resource)) }
}

/// Allocates `bytes` from `resource` on `stream` (`cudaStream_t`, NULL = default stream) into `*out`.
///
/// # Safety
/// `resource` is live; `stream` is a valid stream; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_allocate(
    resource: rmm_resource,
    stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (a live handle).
    if let Some(allocate) = unsafe { own_vtable(&resource) }.and_then(|v| v.allocate) {
        // SAFETY: our own thunk, on our own object; it checks `out` and catches panics itself.
        return unsafe { allocate(resource.self_, stream, bytes, alignment, out, err) };
    }
    // SAFETY: caller contract; the vtable entry gets our (checked) arguments.
    unsafe {
        with_vtable(resource, err, |v| {
            if out.is_null() {
                return report(err, &null_out("out"));
            }
            (v.allocate)(resource.self_, stream, bytes, alignment, out, err)
        })
    }
}

/// Returns `ptr` (from `allocate` with the same `bytes` and `alignment`) to `resource` on `stream`.
///
/// # Safety
/// `resource` is live; `ptr` came from it with these arguments; `err` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_deallocate(
    resource: rmm_resource,
    stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (a live handle).
    if let Some(deallocate) = unsafe { own_vtable(&resource) }.and_then(|v| v.deallocate) {
        // SAFETY: our own thunk, on our own object; it catches panics itself.
        return unsafe { deallocate(resource.self_, stream, ptr, bytes, alignment, err) };
    }
    // SAFETY: caller contract.
    unsafe {
        with_vtable(resource, err, |v| {
            (v.deallocate)(resource.self_, stream, ptr, bytes, alignment, err)
        })
    }
}

/// Allocates memory usable on every stream as soon as this returns.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_allocate_sync(
    resource: rmm_resource,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        with_vtable(resource, err, |v| {
            if out.is_null() {
                return report(err, &null_out("out"));
            }
            (v.allocate_sync)(resource.self_, bytes, alignment, out, err)
        })
    }
}

/// Returns memory that no pending work uses.
///
/// # Safety
/// `resource` is live; `ptr` came from it with these arguments; `err` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_deallocate_sync(
    resource: rmm_resource,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        with_vtable(resource, err, |v| {
            (v.deallocate_sync)(resource.self_, ptr, bytes, alignment, err)
        })
    }
}

/// Access bits of `resource` (bit 0 device, bit 1 host); 0 for an invalid handle.
///
/// # Safety
/// `resource` is live or empty.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_access(resource: rmm_resource) -> u32 {
    // SAFETY: caller contract.
    unsafe {
        match checked_fns(&resource) {
            Ok(fns) => catch_unwind(|| (fns.access)(resource.self_)).unwrap_or(0),
            Err(_) => 0,
        }
    }
}

/// The name of `resource`, valid while it lives; NULL for an invalid handle.
///
/// # Safety
/// `resource` is live or empty.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_name(resource: rmm_resource) -> *const c_char {
    // SAFETY: caller contract.
    unsafe {
        match checked_fns(&resource) {
            Ok(fns) => catch_unwind(|| (fns.name)(resource.self_)).unwrap_or(std::ptr::null()),
            Err(_) => std::ptr::null(),
        }
    }
}

/// 1 when memory from `a` may be returned to `b` (same object, or `a`'s `is_equal` says so), else 0.
///
/// # Safety
/// Both handles are live or empty.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_is_equal(a: rmm_resource, b: rmm_resource) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        let (Ok(fns), Ok(_)) = (checked_fns(&a), check_handle(&b)) else {
            return 0;
        };
        if a == b {
            return 1;
        }
        catch_unwind(|| (fns.is_equal)(a.self_, b.self_, b.vtable))
            .map(|v| c_int::from(v != 0))
            .unwrap_or(0)
    }
}

/// A new `cuda_memory_resource` (owning handle in `*out`). Succeeds in host mode too; allocating
/// from it there fails with `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_memory_resource_new(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { hand_out(out, err, || Ok(AnyResource::new(CudaMemoryResource::new()))) }
}

/// A new `system_memory_resource` (owning handle in `*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_system_memory_resource_new(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(SystemMemoryResource::new()))
        })
    }
}

/// The kind of a resource of this library (`RMM_RESOURCE_KIND_*`) in `*kind_out` and, when
/// `upstream_out` is not NULL, its upstream (owning; `{NULL, NULL}` when it has none).
///
/// # Safety
/// `resource` is live or fails the check; `kind_out`, `upstream_out` and `err` are NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_resource_kind(
    resource: rmm_resource,
    kind_out: *mut c_int,
    upstream_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(upstream_out);
        guarded(err, || {
            if kind_out.is_null() {
                return Err(null_out("kind_out"));
            }
            check_handle(&resource)?;
            if (*resource.vtable).owner != owner_tag() {
                return Err(Error::invalid(
                    "rmm_resource_kind: the handle is not a resource of this library",
                ));
            }
            with_borrowed(resource, |r| {
                put(kind_out, ResourceKind::of(r).code(), "kind_out")?;
                if let (Some(slot), Some(upstream)) = (upstream_out.as_mut(), r.upstream()) {
                    *slot = upstream.clone().into_handle();
                }
                Ok(())
            })?
        })
    }
}

#[cfg(test)]
mod misuse_tests;
