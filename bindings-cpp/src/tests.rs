//! Tests of the handle entry points (reference counting, allocation, the registry, errors) through
//! their C signatures.

use std::sync::atomic::Ordering;

use std::ffi::{c_void, CStr};

use prelude::*;
use rmm_core::cuda::Stream;
use rmm_core::registry::process_registry_test_lock;
use rmm_core::testing::c_resource::{c_refs, c_resource};
use rmm_core::testing::Probe;
use rmm_core::{Access, AnyResource, MemoryResource, Result};

/// Every entry point and C type, for the tests of each area.
pub(crate) mod prelude {
    pub(crate) use crate::abi::*;
    pub(crate) use crate::handles::*;
    pub(crate) use crate::registry::*;
    pub(crate) use crate::resources::*;
    pub(crate) use crate::streams::*;
    pub(crate) use rmm_core::resource::handle::*;
    pub(crate) use rmm_core::resource::status::*;
}

const DEFAULT: *mut c_void = std::ptr::null_mut();

fn probe(access: Access) -> AnyResource {
    AnyResource::new(Probe::new(access))
}

fn probe_of(r: &AnyResource) -> &Probe {
    r.downcast_ref::<Probe>().expect("a probe")
}

// --- layout -------------------------------------------------------------------------------------

#[test]
fn handle_round_trip_keeps_one_arc() {
    let a = probe(Access::HOST);
    assert_eq!(a.owner_count(), 1);
    let h = a.to_handle();
    assert_eq!(
        a.owner_count(),
        2,
        "the handle is one more owner of the same Arc"
    );
    assert_eq!(
        h.self_,
        a.borrow_handle().self_,
        "every handle of one resource has the same self"
    );
    // SAFETY: an owning handle from to_handle.
    let b = unsafe { AnyResource::from_handle(h) };
    assert!(b.ptr_eq(&a), "our own handle is unwrapped, not wrapped");
    assert!(b.downcast_ref::<Probe>().is_some());
    assert_eq!(a.owner_count(), 2);
    drop(b);
    assert_eq!(a.owner_count(), 1);
    // into_handle moves the reference: the count does not change.
    let c = a.clone();
    let h = c.into_handle();
    assert_eq!(a.owner_count(), 2);
    // SAFETY: owning handle.
    unsafe { rmm_resource_release(h) };
    assert_eq!(a.owner_count(), 1);
}

#[test]
fn retain_and_release_move_the_arc_count() {
    let a = probe(Access::HOST);
    let h = a.borrow_handle();
    // SAFETY: `a` keeps `h` live throughout.
    unsafe {
        rmm_resource_retain(h);
        rmm_resource_retain(h);
        assert_eq!(a.owner_count(), 3);
        rmm_resource_release(h);
        assert_eq!(a.owner_count(), 2);
        rmm_resource_release(h);
    }
    assert_eq!(a.owner_count(), 1);
}

#[test]
fn the_last_release_from_c_drops_the_resource() {
    let p = Probe::new(Access::HOST);
    let dropped = p.dropped.clone();
    let h = AnyResource::new(p).into_handle();
    assert!(!dropped.load(Ordering::SeqCst));
    // SAFETY: the only reference.
    unsafe { rmm_resource_release(h) };
    assert!(dropped.load(Ordering::SeqCst));
}

#[test]
fn empty_handles_are_ignored_or_rejected() {
    // SAFETY: the empty handle is explicitly allowed.
    unsafe {
        rmm_resource_retain(rmm_resource::NULL);
        rmm_resource_release(rmm_resource::NULL);
        assert_eq!(rmm_resource_access(rmm_resource::NULL), 0);
        assert!(rmm_resource_name(rmm_resource::NULL).is_null());
        assert_eq!(
            rmm_resource_is_equal(rmm_resource::NULL, rmm_resource::NULL),
            0
        );
        let mut out = std::ptr::null_mut();
        let mut err = rmm_error::new();
        let status = rmm_resource_allocate(rmm_resource::NULL, DEFAULT, 8, 8, &mut out, &mut err);
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("NULL vtable"), "{err:?}");
    }
}

#[test]
fn allocate_through_the_c_entry_points_gives_usable_memory() {
    let a = probe(Access::HOST);
    let h = a.borrow_handle();
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `a` keeps `h` live; valid out-pointers.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 256, 64, &mut p, &mut err),
            RMM_OK
        );
        assert_eq!(p as usize % 64, 0);
        std::ptr::write_bytes(p.cast::<u8>(), 0x5a, 256);
        assert_eq!(*p.cast::<u8>().add(255), 0x5a);
        assert_eq!(probe_of(&a).live.load(Ordering::SeqCst), 1);
        assert_eq!(
            rmm_resource_deallocate(h, DEFAULT, p, 256, 64, std::ptr::null_mut()),
            RMM_OK
        );
        assert_eq!(
            rmm_resource_allocate_sync(h, 32, 8, &mut p, &mut err),
            RMM_OK
        );
        assert_eq!(rmm_resource_deallocate_sync(h, p, 32, 8, &mut err), RMM_OK);
        assert_eq!(err.kind, RMM_OK);
        assert_eq!(rmm_resource_access(h), Access::HOST.bits() as u32);
        assert_eq!(
            CStr::from_ptr(rmm_resource_name(h)).to_str().unwrap(),
            "probe"
        );
    }
    assert_eq!(probe_of(&a).live.load(Ordering::SeqCst), 0);
    assert_eq!(probe_of(&a).allocations(), 2);
}

#[test]
fn errors_map_to_kinds_with_messages() {
    let sys = AnyResource::new(rmm_core::mr::SystemMemoryResource::new());
    let h = sys.borrow_handle();
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `sys` keeps `h` live; valid out-pointers.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 64, 3, &mut p, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(err.kind, RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("power of two"), "{err:?}");
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 1 << 50, 256, &mut p, &mut err),
            RMM_ERROR_OUT_OF_MEMORY
        );
        assert_eq!(err.bytes, 1 << 50);
        assert!(err.message().contains("system_memory_resource"), "{err:?}");
        // A NULL error out-parameter is fine: only the status comes back.
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 64, 3, &mut p, std::ptr::null_mut()),
            RMM_ERROR_INVALID_ARGUMENT
        );
        // Success clears stale details.
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 0, 256, &mut p, &mut err),
            RMM_OK
        );
        assert_eq!(
            (err.kind, err.bytes, err.message().as_str()),
            (RMM_OK, 0, "")
        );
        assert!(p.is_null(), "0 bytes gives NULL");
    }
}

/// A resource that panics when asked for memory.
struct Panicky;

impl MemoryResource for Panicky {
    fn allocate(&self, _: Stream, _: usize, _: usize) -> Result<*mut u8> {
        panic!("boom in allocate")
    }
    unsafe fn deallocate(&self, _: Stream, _: *mut u8, _: usize, _: usize) -> Result<()> {
        panic!("boom in deallocate")
    }
    fn access(&self) -> Access {
        Access::HOST
    }
    fn name(&self) -> &str {
        "panicky"
    }
    fn is_equal(&self, _: &dyn MemoryResource) -> bool {
        panic!("boom in is_equal")
    }
}

#[test]
fn panics_inside_a_resource_are_reported_not_unwound() {
    let r = AnyResource::new(Panicky);
    let h = r.borrow_handle();
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `r` keeps `h` live; valid out-pointers.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 8, 8, &mut p, &mut err),
            RMM_ERROR_PANIC
        );
        assert_eq!(err.kind, RMM_ERROR_PANIC);
        assert!(err.message().contains("boom in allocate"), "{err:?}");
        assert_eq!(
            rmm_resource_allocate_sync(h, 8, 8, &mut p, &mut err),
            RMM_ERROR_PANIC
        );
        assert_eq!(
            rmm_resource_deallocate(h, DEFAULT, p, 8, 8, &mut err),
            RMM_ERROR_PANIC
        );
        assert!(err.message().contains("boom in deallocate"), "{err:?}");
        let other = AnyResource::new(Panicky);
        assert_eq!(
            rmm_resource_is_equal(h, other.borrow_handle()),
            0,
            "a panicking is_equal is 'not equal'"
        );
    }
}

#[test]
fn null_out_pointers_are_invalid_arguments() {
    let _lock = process_registry_test_lock();
    let a = probe(Access::HOST_DEVICE);
    let h = a.borrow_handle();
    let mut err = rmm_error::new();
    // SAFETY: NULL out-pointers are exactly what is being tested; `a` keeps `h` live.
    unsafe {
        let null_handle = std::ptr::null_mut();
        let null_ptr = std::ptr::null_mut();
        assert_eq!(
            rmm_get_per_device_resource(0, null_handle, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("NULL"), "{err:?}");
        assert_eq!(
            rmm_get_current_device_resource(null_handle, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_cuda_memory_resource_new(null_handle, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_system_memory_resource_new(null_handle, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 8, 8, null_ptr, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_resource_allocate_sync(h, 8, 8, null_ptr, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        // The vtable entries themselves check too.
        let v = &*h.vtable;
        assert_eq!(
            v.allocate.unwrap()(h.self_, DEFAULT, 8, 8, null_ptr, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(a.owner_count(), 1, "nothing leaked a reference");
        // previous_out is optional: NULL releases the previous resource.
        let before = a.owner_count();
        assert_eq!(
            rmm_set_per_device_resource(0, h, null_handle, &mut err),
            RMM_OK
        );
        assert_eq!(
            a.owner_count(),
            before + 1,
            "the registry retained the borrowed handle"
        );
        assert_eq!(
            rmm_reset_per_device_resource(0, null_handle, &mut err),
            RMM_OK
        );
        assert_eq!(
            a.owner_count(),
            before,
            "reset with NULL previous_out released it"
        );
    }
    assert_eq!(probe_of(&a).allocations(), 0);
}

#[test]
fn registry_entry_points_set_get_and_reset() {
    let _lock = process_registry_test_lock();
    let mine = probe(Access::HOST_DEVICE);
    let mut out = rmm_resource::NULL;
    let mut previous = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; every owning handle received is released or adopted.
    unsafe {
        assert_eq!(
            rmm_reset_current_device_resource(std::ptr::null_mut(), &mut err),
            RMM_OK
        );
        assert_eq!(
            rmm_set_current_device_resource(mine.borrow_handle(), &mut previous, &mut err),
            RMM_OK
        );
        let previous = AnyResource::from_handle(previous);
        let initial = if rmm_core::cuda::is_host_mode() {
            "system_memory_resource"
        } else {
            "cuda_memory_resource"
        };
        assert_eq!(previous.name(), initial);
        assert_eq!(rmm_get_current_device_resource(&mut out, &mut err), RMM_OK);
        assert_eq!(
            out.self_,
            mine.borrow_handle().self_,
            "the registry stored our Arc, not a wrapper"
        );
        assert_eq!(mine.owner_count(), 3, "mine, the registry, and `out`");
        rmm_resource_release(out);
        let device = rmm_core::registry::current_device_or_host().unwrap();
        assert_eq!(
            rmm_get_per_device_resource(device, &mut out, &mut err),
            RMM_OK
        );
        assert!(AnyResource::from_handle(out).ptr_eq(&mine));
        let mut back = rmm_resource::NULL;
        assert_eq!(
            rmm_reset_per_device_resource(device, &mut back, &mut err),
            RMM_OK
        );
        assert!(AnyResource::from_handle(back).ptr_eq(&mine));
        assert_eq!(mine.owner_count(), 1);
        assert_eq!(rmm_get_current_device_resource(&mut out, &mut err), RMM_OK);
        let current = AnyResource::from_handle(out);
        assert!(
            current.ptr_eq(&previous),
            "reset restores the one initial resource"
        );
        // Out-of-range devices are invalid and leave `out` empty.
        assert_eq!(
            rmm_get_per_device_resource(4096, &mut out, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(out.is_null());
        assert!(err.message().contains("4096"), "{err:?}");
    }
}

#[test]
fn host_mode_entry_points() {
    if !rmm_core::cuda::is_host_mode() {
        rmm_core::testing::skip("host_mode_entry_points", "a GPU is present");
        return;
    }
    let _lock = process_registry_test_lock();
    assert_eq!(rmm_is_host_mode(), 1);
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; owning handles are released.
    unsafe {
        assert_eq!(
            rmm_get_per_device_resource(1, &mut out, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("host mode"), "{err:?}");
        // A device-only resource cannot become the host-mode default.
        assert_eq!(rmm_cuda_memory_resource_new(&mut out, &mut err), RMM_OK);
        assert_eq!(
            rmm_set_current_device_resource(out, std::ptr::null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("cuda_memory_resource"), "{err:?}");
        let mut p = std::ptr::null_mut();
        let status = rmm_resource_allocate(out, DEFAULT, 64, 256, &mut p, &mut err);
        assert!(
            status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
            "{err:?}"
        );
        rmm_resource_release(out);
        assert_eq!(rmm_system_memory_resource_new(&mut out, &mut err), RMM_OK);
        assert_eq!(rmm_resource_access(out) & 2, 2);
        rmm_resource_release(out);
    }
}

#[test]
fn a_c_resource_set_in_the_registry_is_used_and_released_when_replaced() {
    let _lock = process_registry_test_lock();
    let (h, seen) = c_resource(RMM_OK);
    let mut err = rmm_error::new();
    // SAFETY: `h` is owned here until released below.
    unsafe {
        assert_eq!(
            rmm_set_current_device_resource(h, std::ptr::null_mut(), &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(c_refs(h), 2);
        rmm_resource_release(h);
    }
    let current = rmm_core::registry::current_resource().unwrap();
    assert_eq!(current.name(), "c_resource");
    let p = current.allocate(Stream::DEFAULT, 64, 16).unwrap();
    // SAFETY: from `current` with these arguments.
    unsafe { current.deallocate(Stream::DEFAULT, p, 64, 16).unwrap() };
    assert_eq!(
        seen.allocations.load(Ordering::SeqCst),
        1,
        "the allocation ran the C code"
    );
    drop(current);
    assert!(!seen.released.load(Ordering::SeqCst));
    drop(rmm_core::registry::reset_current_resource().unwrap());
    assert!(
        seen.released.load(Ordering::SeqCst),
        "replacing it gave back the last reference"
    );
}

#[test]
fn is_equal_across_the_abi() {
    let s1 = AnyResource::new(rmm_core::mr::SystemMemoryResource::new());
    let s2 = AnyResource::new(rmm_core::mr::SystemMemoryResource::new());
    let p1 = probe(Access::HOST);
    let p2 = probe(Access::HOST);
    let (c, _seen) = c_resource(RMM_OK);
    // SAFETY: all handles are live for the block.
    unsafe {
        assert_eq!(
            rmm_resource_is_equal(s1.borrow_handle(), s2.borrow_handle()),
            1,
            "stateless: equal"
        );
        assert_eq!(
            rmm_resource_is_equal(p1.borrow_handle(), p1.borrow_handle()),
            1
        );
        assert_eq!(
            rmm_resource_is_equal(p1.borrow_handle(), p2.borrow_handle()),
            0
        );
        assert_eq!(
            rmm_resource_is_equal(s1.borrow_handle(), c),
            0,
            "a Rust resource is not a C one"
        );
        assert_eq!(rmm_resource_is_equal(c, c), 1);
        assert_eq!(c_refs(c), 1, "comparing did not leak references");
        rmm_resource_release(c);
    }
}

#[test]
fn names_are_interned_and_nul_terminated() {
    let a = probe(Access::HOST);
    let b = probe(Access::HOST);
    // SAFETY: live handles; names live for the process.
    unsafe {
        let na = rmm_resource_name(a.borrow_handle());
        assert_eq!(na, rmm_resource_name(b.borrow_handle()));
        assert_eq!(CStr::from_ptr(na).to_bytes(), b"probe");
    }
    assert_eq!(
        // SAFETY: a static string.
        unsafe { CStr::from_ptr(rmm_error_kind_name(RMM_ERROR_OUT_OF_MEMORY)) }
            .to_str()
            .unwrap(),
        "RMM_ERROR_OUT_OF_MEMORY"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_resource_through_the_c_abi() {
    rmm_core::testing::require_gpu();
    let mut h = rmm_resource::NULL;
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; the handle is released at the end.
    unsafe {
        assert_eq!(rmm_cuda_memory_resource_new(&mut h, &mut err), RMM_OK);
        assert_eq!(rmm_resource_access(h), 1);
        assert_eq!(
            rmm_resource_allocate(h, DEFAULT, 1 << 20, 256, &mut p, &mut err),
            RMM_OK,
            "{err:?}"
        );
        assert!(!p.is_null());
        assert_eq!(
            rmm_resource_deallocate(h, DEFAULT, p, 1 << 20, 256, &mut err),
            RMM_OK
        );
        let status = rmm_resource_allocate(h, DEFAULT, 1 << 50, 256, &mut p, &mut err);
        assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY, "{err:?}");
        assert_eq!(err.bytes, 1 << 50);
        rmm_resource_release(h);
    }
}
