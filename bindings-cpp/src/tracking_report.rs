//! The outstanding allocations of a `tracking_resource_adaptor` as records, for RMM's
//! `tracking_resource_adaptor::get_outstanding_allocations()` (a `std::map<void*, allocation_info>`
//! in `<rmm/mr/tracking_resource_adaptor.hpp>`), and the stack of one of them.

use std::ffi::{c_char, c_int, c_void};

use rmm_core::mr::tracking::{OutstandingAllocation, TrackingResourceAdaptor};
use rmm_core::resource::guard::guarded;
use rmm_core::resource::handle::rmm_resource;
use rmm_core::resource::status::rmm_error;
use rmm_core::{Error, Result};

use crate::resources::{string_out, with_resource};

/// One outstanding allocation (`rmm_allocation_record` in rmm_c.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)] // the C name
pub struct rmm_allocation_record {
    /// The pointer the allocation returned.
    pub ptr: *mut c_void,
    /// Its size in bytes.
    pub bytes: usize,
    /// 1 when its stack was captured (the adaptor was made with capture_stacks), else 0.
    pub has_stack: c_int,
}

/// The outstanding allocations of the tracking adaptor behind the BORROWED `resource`.
///
/// # Safety
/// `resource` is live or fails the handle check.
unsafe fn outstanding(resource: rmm_resource) -> Result<Vec<OutstandingAllocation>> {
    // SAFETY: caller contract.
    unsafe {
        with_resource(
            resource,
            "tracking_resource_adaptor",
            |t: &TrackingResourceAdaptor| Ok(t.outstanding_allocations()),
        )
    }
}

/// Writes up to `capacity` records of the outstanding allocations (by address) to `out` and their
/// total number to `*count_out` (call with `capacity` 0 to ask for the number).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` when `resource` is not a tracking_resource_adaptor, `count_out` is
/// NULL, or `out` is NULL with a non-zero `capacity`.
///
/// # Safety
/// `resource` is live; `out` is valid for `capacity` records (or NULL with `capacity` 0);
/// `count_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_outstanding_allocations(
    resource: rmm_resource,
    out: *mut rmm_allocation_record,
    capacity: usize,
    count_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on every pointer.
    unsafe {
        guarded(err, || {
            if count_out.is_null() || (out.is_null() && capacity != 0) {
                return Err(Error::invalid(
                    "count_out is NULL, or out is NULL with a capacity".to_string(),
                ));
            }
            let all = outstanding(resource)?;
            for (i, a) in all.iter().take(capacity).enumerate() {
                // SAFETY: i < capacity, and `out` is valid for `capacity` records.
                *out.add(i) = rmm_allocation_record {
                    ptr: a.ptr().cast(),
                    bytes: a.bytes,
                    has_stack: c_int::from(a.stack.is_some()),
                };
            }
            *count_out = all.len();
            Ok(())
        })
    }
}

/// Copies the stack captured for the outstanding allocation at `ptr` (text, not NUL-terminated
/// beyond what fits) into `buf`: at most `capacity - 1` bytes and a NUL; `*length_out` gets the full
/// length. An allocation without a stack gives "".
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` when `resource` is not a tracking_resource_adaptor, `ptr` is not
/// outstanding through it, or `length_out` is NULL.
///
/// # Safety
/// `resource` is live; `buf` is valid for `capacity` bytes (or NULL with `capacity` 0);
/// `length_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_allocation_stack(
    resource: rmm_resource,
    ptr: *const c_void,
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on every pointer.
    unsafe {
        guarded(err, || {
            let all = outstanding(resource)?;
            let Some(a) = all.iter().find(|a| a.address == ptr as usize) else {
                return Err(Error::invalid(format!(
                    "{ptr:p} is not outstanding through this tracking_resource_adaptor"
                )));
            };
            let text = a.stack.as_ref().map(|s| s.to_string()).unwrap_or_default();
            string_out(text.as_bytes(), buf, capacity, length_out)
        })
    }
}

/// Writes the outstanding allocations of a tracking_resource_adaptor to the debug log (RMM's
/// `log_outstanding_allocations`, at debug level, as `rmm_debug_log_*` configures the log).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` when `resource` is not a tracking_resource_adaptor.
///
/// # Safety
/// `resource` is live or fails the handle check; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_log_outstanding_allocations(
    resource: rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both.
    unsafe {
        guarded(err, || {
            with_resource(
                resource,
                "tracking_resource_adaptor",
                |t: &TrackingResourceAdaptor| {
                    t.log_outstanding_allocations();
                    Ok(())
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::mr::SystemMemoryResource;
    use rmm_core::resource::status::RMM_OK;
    use rmm_core::{AnyResource, MemoryResource};

    #[test]
    fn lists_outstanding_allocations_and_rejects_other_resources() {
        let tracking = TrackingResourceAdaptor::new(SystemMemoryResource::new(), true);
        let p = tracking.allocate_sync(1000, 256).unwrap();
        let handle = AnyResource::new(tracking.clone()).into_handle();
        let mut count = 0usize;
        let mut err = rmm_error::new();
        // SAFETY: live handle, valid out-pointers, capacity 0 with NULL out.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_outstanding_allocations(
                handle,
                std::ptr::null_mut(),
                0,
                &mut count,
                &mut err,
            )
        };
        assert_eq!((status, count), (RMM_OK, 1));
        let mut records = [rmm_allocation_record {
            ptr: std::ptr::null_mut(),
            bytes: 0,
            has_stack: 0,
        }; 2];
        // SAFETY: as above, `records` holds 2.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_outstanding_allocations(
                handle,
                records.as_mut_ptr(),
                2,
                &mut count,
                &mut err,
            )
        };
        assert_eq!((status, count), (RMM_OK, 1));
        assert_eq!(
            (
                records[0].ptr.cast::<u8>(),
                records[0].bytes,
                records[0].has_stack
            ),
            (p, 1000, 1)
        );
        let mut len = 0usize;
        // SAFETY: NULL buf with capacity 0; valid out-pointers.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_allocation_stack(
                handle,
                p.cast(),
                std::ptr::null_mut(),
                0,
                &mut len,
                &mut err,
            )
        };
        assert_eq!(status, RMM_OK);
        assert!(len > 0, "a captured stack is not empty");

        assert_eq!(
            // SAFETY: live handle, valid error.
            unsafe { rmm_tracking_resource_adaptor_log_outstanding_allocations(handle, &mut err) },
            RMM_OK
        );

        // A resource of another kind is a typed error, not a crash.
        let other = AnyResource::new(SystemMemoryResource::new()).into_handle();
        // SAFETY: live handle, valid out-pointers.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_outstanding_allocations(
                other,
                std::ptr::null_mut(),
                0,
                &mut count,
                &mut err,
            )
        };
        assert_eq!(
            status,
            rmm_core::resource::status::RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("not a tracking_resource_adaptor"));
        // SAFETY: live handle, valid error.
        let status =
            unsafe { rmm_tracking_resource_adaptor_log_outstanding_allocations(other, &mut err) };
        assert_eq!(
            status,
            rmm_core::resource::status::RMM_ERROR_INVALID_ARGUMENT
        );

        // SAFETY: `p` came from this adaptor with this size and alignment; both handles are owned
        // here and released once.
        unsafe {
            tracking.deallocate_sync(p, 1000, 256).unwrap();
            crate::handles::rmm_resource_release(handle);
            crate::handles::rmm_resource_release(other);
        }
    }
}
