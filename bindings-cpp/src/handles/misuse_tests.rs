//! Handles used wrongly through their C functions: released twice, used after the last release,
//! or never a handle at all (issue 12). Each is a typed error, never a crash or a hang.

use std::ffi::c_void;
use std::ptr::null_mut;

use crate::buffers::{rmm_device_buffer, rmm_device_buffer_free_checked, rmm_device_buffer_new};
use crate::tests::prelude::*;
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};
use rmm_core::testing::Probe;
use rmm_core::Access;

const DEFAULT: *mut c_void = null_mut();

/// A new pool over a new system resource (the system handle is released at once: the pool keeps
/// its own reference).
fn pool() -> rmm_resource {
    let (mut system, mut pool, mut err) =
        (rmm_resource::NULL, rmm_resource::NULL, rmm_error::new());
    // SAFETY: valid out-pointers; every handle is owned here.
    unsafe {
        assert_eq!(
            rmm_system_memory_resource_new(&mut system, &mut err),
            RMM_OK,
            "{err:?}"
        );
        let status =
            rmm_pool_memory_resource_new(system, 1 << 20, RMM_SIZE_NONE, &mut pool, &mut err);
        assert_eq!(status, RMM_OK, "{err:?}");
        rmm_resource_release(system);
    }
    pool
}

fn released_message(err: &rmm_error) -> bool {
    let m = err.message();
    m.contains("after its last release") || m.contains("released twice")
}

#[test]
fn a_released_pool_is_refused_by_every_entry_point_instead_of_hanging() {
    let h = pool();
    let mut err = rmm_error::new();
    let mut p = null_mut();
    // SAFETY: `h` is owned, then released once; every later call gets the stale copy on purpose.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 256, 256, &mut p, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(
            rmm_resource_deallocate(h, DEFAULT, p, 256, 256, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(rmm_resource_release_checked(h, &mut err), RMM_OK, "{err:?}");

        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 256, 256, &mut p, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(released_message(&err), "{err:?}");
        assert_eq!(
            rmm_resource_allocate_sync(h, 256, 256, &mut p, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_resource_deallocate(h, DEFAULT, p, 256, 256, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_resource_deallocate_sync(h, p, 256, 256, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        let mut size = 0u64;
        assert_eq!(
            rmm_pool_memory_resource_pool_size(h, &mut size, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        let mut kind = 0;
        assert_eq!(
            rmm_resource_kind(h, &mut kind, null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(rmm_resource_access(h), 0);
        assert!(rmm_resource_name(h).is_null());
        assert_eq!(rmm_resource_is_equal(h, h), 0);
        // As an upstream, and as the current resource: refused, nothing retained.
        let mut out = rmm_resource::NULL;
        let status = rmm_pool_memory_resource_new(h, 1 << 20, RMM_SIZE_NONE, &mut out, &mut err);
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(out.is_null());
        // The vtable's own entries check too.
        let v = &*h.vtable;
        assert_eq!(
            v.allocate.unwrap()(h.self_, DEFAULT, 8, 8, &mut p, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(v.access.unwrap()(h.self_), 0);
        // Retain and release of the stale handle are logged no-ops.
        rmm_resource_retain(h);
        rmm_resource_release(h);
    }
}

#[test]
fn releasing_a_handle_twice_is_an_error_the_second_time() {
    let h = pool();
    let mut err = rmm_error::new();
    // SAFETY: the second release of `h` is the misuse under test.
    unsafe {
        assert_eq!(rmm_resource_release_checked(h, &mut err), RMM_OK, "{err:?}");
        assert_eq!(
            rmm_resource_release_checked(h, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(released_message(&err), "{err:?}");
        // The void form does not crash either (valgrind used to see an invalid read here).
        rmm_resource_release(h);
        // The empty handle is still a no-op.
        assert_eq!(
            rmm_resource_release_checked(rmm_resource::NULL, &mut err),
            RMM_OK
        );
    }
}

#[test]
fn an_extra_release_never_takes_a_rust_owners_reference() {
    let a = AnyResource::new(Probe::new(Access::HOST));
    let h = a.to_handle();
    assert_eq!(a.owner_count(), 2);
    let mut err = rmm_error::new();
    // SAFETY: `h` is owned once; the second release is the misuse under test.
    unsafe {
        assert_eq!(rmm_resource_release_checked(h, &mut err), RMM_OK, "{err:?}");
        assert_eq!(a.owner_count(), 1);
        assert_eq!(
            rmm_resource_release_checked(h, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("released twice"), "{err:?}");
    }
    assert_eq!(a.owner_count(), 1, "the Rust owner keeps its reference");
    // A borrowed handle of the living resource still works, and the same handle comes back.
    let b = a.borrow_handle();
    assert_eq!(b.self_, h.self_);
    let mut p = null_mut();
    // SAFETY: `a` keeps `b` live.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(b, DEFAULT, 64, 8, &mut p, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(
            rmm_resource_deallocate(b, DEFAULT, p, 64, 8, &mut err),
            RMM_OK,
            "{err:?}"
        );
    }
}

#[test]
fn a_handle_whose_rust_owner_dropped_the_resource_is_refused() {
    let a = AnyResource::new(Probe::new(Access::HOST));
    let h = a.borrow_handle();
    drop(a);
    let mut err = rmm_error::new();
    let mut p = null_mut();
    // SAFETY: a stale borrowed handle on purpose.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 64, 8, &mut p, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_resource_release_checked(h, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
    }
}

#[test]
fn a_self_that_is_no_cell_of_ours_is_refused_when_recognisable() {
    let a = AnyResource::new(Probe::new(Access::HOST));
    let vtable = a.borrow_handle().vtable;
    let mut err = rmm_error::new();
    let mut p = null_mut();
    for bogus in [null_mut(), 0x1001 as *mut c_void] {
        let h = rmm_resource {
            self_: bogus,
            vtable,
        };
        // SAFETY: NULL and misaligned selves are detected before any read.
        unsafe {
            assert_eq!(
                rmm_resource_allocate(h, DEFAULT, 64, 8, &mut p, &mut err),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                rmm_resource_release_checked(h, &mut err),
                RMM_ERROR_INVALID_ARGUMENT
            );
        }
    }
}

#[test]
fn a_buffer_freed_twice_or_used_after_its_free_is_refused() {
    let h = pool();
    let mut err = rmm_error::new();
    let mut buf: *mut rmm_device_buffer = null_mut();
    // SAFETY: valid out-pointers; the second free and the later uses are the misuse under test.
    unsafe {
        assert_eq!(
            rmm_device_buffer_new(1024, 256, DEFAULT, h, &mut buf, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(crate::buffers::rmm_device_buffer_size(buf), 1024);
        assert_eq!(
            rmm_device_buffer_free_checked(buf, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(
            rmm_device_buffer_free_checked(buf, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("already freed"), "{err:?}");
        crate::buffers::rmm_device_buffer_free(buf);
        assert_eq!(crate::buffers::rmm_device_buffer_size(buf), 0);
        assert!(crate::buffers::rmm_device_buffer_data(buf).is_null());
        let status = crate::buffers::rmm_device_buffer_resize(buf, 2048, DEFAULT, &mut err);
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        let mut copy = null_mut();
        let status = crate::buffers::rmm_device_buffer_copy(buf, DEFAULT, h, &mut copy, &mut err);
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(copy.is_null());
        assert_eq!(
            rmm_device_buffer_free_checked(null_mut(), &mut err),
            RMM_OK,
            "NULL stays a no-op"
        );
        // The pool got its memory back once, and is released once.
        assert_eq!(rmm_resource_release_checked(h, &mut err), RMM_OK, "{err:?}");
    }
}
