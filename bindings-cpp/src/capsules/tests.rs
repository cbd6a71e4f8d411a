//! The export entry points through their C signatures: buffers moved out of and into librmm's
//! handles with no copy, freed once through the resource that made them; bad exports refused.

use std::ptr::null_mut;
use std::sync::atomic::Ordering;

use super::*;
use crate::buffers::{
    rmm_device_buffer_data, rmm_device_buffer_free, rmm_device_buffer_new, rmm_device_buffer_size,
};
use crate::tests::prelude::{
    rmm_resource_release, rmm_set_current_device_resource, RMM_ERROR_INVALID_ARGUMENT, RMM_OK,
};
use rmm_core::registry::process_registry_test_lock;
use rmm_core::testing::Probe;
use rmm_core::Access;

fn probe() -> AnyResource {
    AnyResource::new(Probe::new(Access::HOST_DEVICE))
}

fn live(r: &AnyResource) -> isize {
    r.downcast_ref::<Probe>()
        .expect("a probe")
        .live
        .load(Ordering::SeqCst)
}

fn new_buffer(size: usize, mr: &AnyResource) -> *mut rmm_device_buffer {
    let (mut buf, mut err) = (null_mut(), rmm_error::new());
    // SAFETY: valid out-pointers; the handle is borrowed for the call.
    let status = unsafe {
        rmm_device_buffer_new(
            size,
            256,
            null_mut(),
            mr.borrow_handle(),
            &mut buf,
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    buf
}

#[test]
fn a_buffer_leaves_librmm_and_comes_back_without_a_copy() {
    let mr = probe();
    let buf = new_buffer(100, &mr);
    // SAFETY: live buffer.
    let data = unsafe { rmm_device_buffer_data(buf) };
    let (mut export, mut err) = (null_mut(), rmm_error::new());
    assert_eq!(
        // SAFETY: live owning buffer, consumed on success.
        unsafe { rmm_device_buffer_export(buf, &mut export, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    let mut again = null_mut();
    assert_eq!(
        // SAFETY: a consumed buffer (in librmm's quarantine) is refused, not exported twice.
        unsafe { rmm_device_buffer_export(buf, &mut again, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(again.is_null());
    // SAFETY: fresh export.
    let e = unsafe { &*export };
    assert_eq!((e.data, e.size, e.capacity, e.version), (data, 100, 100, 1));
    assert_eq!(live(&mr), 1);
    let mut back = null_mut();
    assert_eq!(
        // SAFETY: live export, consumed on success.
        unsafe { rmm_device_buffer_import(export, &mut back, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert_eq!(
        // SAFETY: live buffer.
        unsafe { (rmm_device_buffer_data(back), rmm_device_buffer_size(back)) },
        (data, 100)
    );
    assert_eq!(live(&mr), 1, "nothing freed or allocated on the way");
    // SAFETY: owning buffer.
    unsafe { rmm_device_buffer_free(back) };
    assert_eq!(live(&mr), 0, "freed once");
    assert_eq!(
        mr.downcast_ref::<Probe>()
            .unwrap()
            .allocations
            .load(Ordering::SeqCst),
        1
    );
}

#[test]
fn the_memory_goes_back_to_its_resource_after_the_current_one_changed() {
    let _lock = process_registry_test_lock();
    let maker = probe();
    let (mut previous, mut err) = (rmm_resource::NULL, rmm_error::new());
    assert_eq!(
        // SAFETY: borrowed handle; previous is owning.
        unsafe { rmm_set_current_device_resource(maker.borrow_handle(), &mut previous, &mut err) },
        RMM_OK
    );
    let (mut buf, mut export) = (null_mut(), null_mut());
    assert_eq!(
        // SAFETY: the empty handle means the current resource.
        unsafe {
            rmm_device_buffer_new(64, 256, null_mut(), rmm_resource::NULL, &mut buf, &mut err)
        },
        RMM_OK
    );
    assert_eq!(
        // SAFETY: live owning buffer.
        unsafe { rmm_device_buffer_export(buf, &mut export, &mut err) },
        RMM_OK
    );
    let other = probe();
    let mut replaced = rmm_resource::NULL;
    // SAFETY: as above; then give the previous resource back.
    unsafe {
        assert_eq!(
            rmm_set_current_device_resource(other.borrow_handle(), &mut replaced, &mut err),
            RMM_OK
        );
        rmm_resource_release(replaced);
    }
    assert_eq!(live(&maker), 1);
    // SAFETY: nobody adopted the export: its deleter frees the memory.
    unsafe { rmm_buffer_export_free(export) };
    assert_eq!(
        (live(&maker), live(&other)),
        (0, 0),
        "freed through the resource that made it"
    );
    // SAFETY: restore the registry.
    unsafe {
        assert_eq!(
            rmm_set_current_device_resource(previous, &mut replaced, &mut err),
            RMM_OK
        );
        rmm_resource_release(replaced);
        rmm_resource_release(previous);
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let mut err = rmm_error::new();
    let mut export = std::ptr::dangling_mut::<rmm_buffer_export>();
    assert_eq!(
        // SAFETY: NULL buffer: refused, out cleared.
        unsafe { rmm_device_buffer_export(null_mut(), &mut export, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(export.is_null());
    let mut buf = std::ptr::dangling_mut::<rmm_device_buffer>();
    assert_eq!(
        // SAFETY: NULL export: refused.
        unsafe { rmm_device_buffer_import(null_mut(), &mut buf, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(buf.is_null());
    let mr = probe();
    let b = new_buffer(8, &mr);
    assert_eq!(
        // SAFETY: NULL out: refused, the buffer untouched.
        unsafe { rmm_device_buffer_export(b, null_mut(), &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        // SAFETY: still a live buffer.
        unsafe { rmm_device_buffer_export(b, &mut export, &mut err) },
        RMM_OK
    );
    // SAFETY: a newer version is refused and not consumed; then the export is freed.
    unsafe {
        (*export).version = 2;
        assert_eq!(
            rmm_device_buffer_import(export, &mut buf, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        let msg = std::ffi::CStr::from_ptr(err.message.as_ptr())
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("version 2"), "{msg}");
        (*export).version = 1;
        rmm_buffer_export_free(export);
        rmm_buffer_export_free(null_mut());
    }
    assert_eq!(live(&mr), 0);
    let mut rexport = std::ptr::dangling_mut::<rmm_resource_export>();
    assert_eq!(
        // SAFETY: the empty handle is refused.
        unsafe { rmm_resource_export_new(rmm_resource::NULL, &mut rexport, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(rexport.is_null());
    let mut out = rmm_resource::NULL;
    assert_eq!(
        // SAFETY: NULL export refused.
        unsafe { rmm_resource_import(std::ptr::null(), &mut out, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
}

#[test]
fn resource_exports_share_the_resource() {
    let mr = probe();
    let (mut export, mut err) = (null_mut(), rmm_error::new());
    assert_eq!(
        // SAFETY: borrowed handle.
        unsafe { rmm_resource_export_new(mr.borrow_handle(), &mut export, &mut err) },
        RMM_OK
    );
    let before = mr.owner_count();
    let mut out = rmm_resource::NULL;
    assert_eq!(
        // SAFETY: live export; the owning handle is adopted below.
        unsafe { rmm_resource_import(export, &mut out, &mut err) },
        RMM_OK
    );
    // SAFETY: owning handle made by this binary.
    let back = unsafe { AnyResource::from_handle(out) };
    assert!(back.ptr_eq(&mr), "the same resource, no wrapper");
    assert_eq!(mr.owner_count(), before + 1);
    drop(back);
    // SAFETY: owning export, freed once.
    unsafe { rmm_resource_export_free(export) };
    assert_eq!(mr.owner_count(), before - 1);
}
