use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;
use crate::registry::process_registry_test_lock;
use crate::testing::Probe;

const DEFAULT: *mut c_void = std::ptr::null_mut();

fn probe(access: Access) -> AnyResource {
    AnyResource::new(Probe::new(access))
}

fn probe_of(r: &AnyResource) -> &Probe {
    r.downcast_ref::<Probe>().expect("a probe")
}

// --- a resource written "in C": a hand-made vtable over a refcounted state ----------------------

/// What the fake C resource reports to the test, shared so it outlives the resource.
#[derive(Default)]
struct Seen {
    allocations: AtomicUsize,
    deallocations: AtomicUsize,
    released: AtomicBool,
}

struct CState {
    refs: AtomicUsize,
    seen: Arc<Seen>,
    fail_with: c_int,
}

static FAKE_OWNER: u8 = 0;

unsafe extern "C" fn c_retain(this: *mut c_void) {
    // SAFETY: `this` is a live CState (the fake's handle contract).
    unsafe { &*(this as *const CState) }.refs.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn c_release(this: *mut c_void) {
    // SAFETY: `this` is a live CState; the last reference frees it.
    unsafe {
        if (&*(this as *const CState)).refs.fetch_sub(1, Ordering::SeqCst) == 1 {
            let state = Box::from_raw(this as *mut CState);
            state.seen.released.store(true, Ordering::SeqCst);
        }
    }
}

unsafe extern "C" fn c_allocate(
    this: *mut c_void,
    _stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: live CState; out-pointers valid or NULL per the ABI.
    unsafe { c_allocate_sync(this, bytes, alignment, out, err) }
}

unsafe extern "C" fn c_allocate_sync(
    this: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: live CState.
    let state = unsafe { &*(this as *const CState) };
    if state.fail_with != RMM_OK {
        // SAFETY: NULL or valid.
        if let Some(e) = unsafe { err.as_mut() } {
            *e = rmm_error::new();
            e.kind = state.fail_with;
            e.bytes = bytes as u64;
            e.set_message("the C resource says no");
        }
        return state.fail_with;
    }
    let mut p = std::ptr::null_mut();
    // SAFETY: valid out-pointer; alignment is a power of two multiple of the pointer size in tests.
    assert_eq!(unsafe { libc::posix_memalign(&mut p, alignment.max(8), bytes.max(1)) }, 0);
    state.seen.allocations.fetch_add(1, Ordering::SeqCst);
    // SAFETY: valid out-pointer (the caller checked).
    unsafe { *out = p };
    RMM_OK
}

unsafe extern "C" fn c_deallocate(
    this: *mut c_void,
    _stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { c_deallocate_sync(this, ptr, bytes, alignment, err) }
}

unsafe extern "C" fn c_deallocate_sync(
    this: *mut c_void,
    ptr: *mut c_void,
    _bytes: usize,
    _alignment: usize,
    _err: *mut rmm_error,
) -> c_int {
    // SAFETY: live CState; `ptr` came from posix_memalign.
    unsafe {
        (&*(this as *const CState)).seen.deallocations.fetch_add(1, Ordering::SeqCst);
        libc::free(ptr);
    }
    RMM_OK
}

unsafe extern "C" fn c_access(_this: *mut c_void) -> u32 {
    3
}

unsafe extern "C" fn c_name(_this: *mut c_void) -> *const c_char {
    c"c_resource".as_ptr()
}

unsafe extern "C" fn c_is_equal(this: *mut c_void, other: *mut c_void, _vt: *const rmm_resource_vtable) -> c_int {
    c_int::from(this == other)
}

static C_VTABLE: rmm_resource_vtable = rmm_resource_vtable {
    abi_version: RMM_ABI_VERSION,
    size: std::mem::size_of::<rmm_resource_vtable>() as u32,
    owner: &FAKE_OWNER as *const u8 as *const c_void,
    retain: Some(c_retain),
    release: Some(c_release),
    allocate: Some(c_allocate),
    deallocate: Some(c_deallocate),
    allocate_sync: Some(c_allocate_sync),
    deallocate_sync: Some(c_deallocate_sync),
    access: Some(c_access),
    name: Some(c_name),
    is_equal: Some(c_is_equal),
};

/// A new C resource: an owning handle (one reference) and what it reports.
fn c_resource(fail_with: c_int) -> (rmm_resource, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let state = Box::new(CState { refs: AtomicUsize::new(1), seen: seen.clone(), fail_with });
    (rmm_resource { self_: Box::into_raw(state).cast(), vtable: &C_VTABLE }, seen)
}

fn c_refs(handle: rmm_resource) -> usize {
    // SAFETY: only called while the test holds a reference.
    unsafe { &*(handle.self_ as *const CState) }.refs.load(Ordering::SeqCst)
}

// --- layout -------------------------------------------------------------------------------------

#[test]
fn layouts_match_rmm_c_h() {
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!(size_of::<rmm_error>(), 4 + 4 + 8 + 512);
    assert_eq!(offset_of!(rmm_error, bytes), 8);
    assert_eq!(offset_of!(rmm_error, message), 16);
    assert_eq!(size_of::<rmm_resource>(), 2 * size_of::<usize>());
    assert_eq!(size_of::<rmm_resource_vtable>(), 8 + 10 * size_of::<usize>());
    assert_eq!(offset_of!(rmm_resource_vtable, owner), 8);
    assert_eq!(offset_of!(rmm_resource_vtable, retain), 16);
    assert_eq!(offset_of!(rmm_resource_vtable, is_equal), 8 + 9 * size_of::<usize>());
    assert_eq!(align_of::<rmm_resource_vtable>(), align_of::<usize>());
    assert_eq!(offset_of!(RustVTable, c), 0, "the C part must come first");
}

#[test]
fn one_static_vtable_per_type_tagged_with_this_binary() {
    let a = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let b = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let h = a.borrow_handle();
    // SAFETY: a live handle's vtable.
    let v = unsafe { &*h.vtable };
    assert_eq!(v.abi_version, RMM_ABI_VERSION);
    assert_eq!(v.size as usize, std::mem::size_of::<rmm_resource_vtable>());
    assert_eq!(v.owner, owner_tag());
    assert_eq!(h.vtable, b.borrow_handle().vtable);
    assert_ne!(h.vtable, probe(Access::HOST).borrow_handle().vtable);
    // SAFETY: h is live.
    unsafe { check_handle(&h).unwrap() };
}

// --- ownership ----------------------------------------------------------------------------------

#[test]
fn handle_round_trip_keeps_one_arc() {
    let a = probe(Access::HOST);
    assert_eq!(a.owner_count(), 1);
    let h = a.to_handle();
    assert_eq!(a.owner_count(), 2, "the handle is one more owner of the same Arc");
    assert_eq!(h.self_ as *const (), Arc::as_ptr(a.as_arc()) as *const (), "self is the Arc's data pointer");
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
        assert_eq!(rmm_resource_is_equal(rmm_resource::NULL, rmm_resource::NULL), 0);
        let mut out = std::ptr::null_mut();
        let mut err = rmm_error::new();
        let status = rmm_resource_allocate(rmm_resource::NULL, DEFAULT, 8, 8, &mut out, &mut err);
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("NULL vtable"), "{err:?}");
    }
}

// --- foreign handles ----------------------------------------------------------------------------

#[test]
fn foreign_handle_is_wrapped_used_and_released_on_drop() {
    let (h, seen) = c_resource(RMM_OK);
    // SAFETY: an owning handle with a complete vtable.
    let any = unsafe { AnyResource::try_from_handle(h) }.unwrap();
    assert!(any.downcast_ref::<ForeignResource>().is_some(), "not ours: wrapped");
    assert_eq!(any.name(), "c_resource");
    assert_eq!(any.access(), Access::HOST_DEVICE);
    assert_eq!(c_refs(h), 1, "wrapping took over the reference, it did not add one");
    let p = any.allocate(Stream::DEFAULT, 100, 64).unwrap();
    assert_eq!(p as usize % 64, 0);
    // SAFETY: from `any` with these arguments.
    unsafe { any.deallocate(Stream::DEFAULT, p, 100, 64).unwrap() };
    let q = any.allocate_sync(10, 8).unwrap();
    // SAFETY: as above.
    unsafe { any.deallocate_sync(q, 10, 8).unwrap() };
    assert_eq!(seen.allocations.load(Ordering::SeqCst), 2);
    assert_eq!(seen.deallocations.load(Ordering::SeqCst), 2);
    let clone = any.clone();
    drop(any);
    assert!(!seen.released.load(Ordering::SeqCst), "a clone still holds it");
    drop(clone);
    assert!(seen.released.load(Ordering::SeqCst), "the last Rust owner released the C resource");
}

#[test]
fn re_exporting_a_foreign_resource_gives_back_the_original_handle() {
    let (h, seen) = c_resource(RMM_OK);
    // SAFETY: owning, complete.
    let any = unsafe { AnyResource::from_handle(h) };
    let again = any.to_handle();
    assert_eq!(again, h, "no Rust wrapper around the C resource");
    assert_eq!(c_refs(h), 2);
    assert_eq!(any.borrow_handle(), h);
    // Coming back once more is a new wrapper of the same C object, equal to the first.
    // SAFETY: owning.
    let other = unsafe { AnyResource::from_handle(again) };
    assert_eq!(any, other);
    drop((any, other));
    assert!(seen.released.load(Ordering::SeqCst));
}

#[test]
fn foreign_errors_come_back_as_values() {
    for (kind, check) in [
        (RMM_ERROR_OUT_OF_MEMORY, (|e: &Error| matches!(e, Error::OutOfMemory { bytes: 4096, .. })) as fn(&Error) -> bool),
        (RMM_ERROR_INVALID_ARGUMENT, |e| matches!(e, Error::InvalidArgument(m) if m == "the C resource says no")),
        (RMM_ERROR_UNSUPPORTED, |e| matches!(e, Error::Unsupported(_))),
        (RMM_ERROR_PANIC, |e| matches!(e, Error::Unsupported(m) if m.contains("failed internally"))),
    ] {
        let (h, seen) = c_resource(kind);
        // SAFETY: owning, complete.
        let any = unsafe { AnyResource::from_handle(h) };
        let err = any.allocate(Stream::DEFAULT, 4096, 256).unwrap_err();
        assert!(check(&err), "kind {kind}: {err:?}");
        assert!(err.to_string().contains("c_resource") || err.to_string().contains("says no"), "{err}");
        drop(any);
        assert!(seen.released.load(Ordering::SeqCst));
    }
}

#[test]
fn incomplete_or_foreign_version_vtables_are_rejected() {
    static BAD_VERSION: rmm_resource_vtable = rmm_resource_vtable { abi_version: 99, ..copy_of_c_vtable() };
    static MISSING: rmm_resource_vtable = rmm_resource_vtable { allocate: None, ..copy_of_c_vtable() };
    static SHORT: rmm_resource_vtable = rmm_resource_vtable { size: 16, ..copy_of_c_vtable() };
    for (vtable, needle) in [(&BAD_VERSION, "ABI version 99"), (&MISSING, "NULL function"), (&SHORT, "16 bytes")] {
        let h = rmm_resource { self_: std::ptr::null_mut(), vtable };
        // SAFETY: the vtables are complete in memory; only their contents are wrong.
        let err = unsafe { AnyResource::try_from_handle(h) }.unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
        let mut e = rmm_error::new();
        // SAFETY: as above; nothing is retained for a rejected handle.
        let status = unsafe { rmm_set_per_device_resource(0, h, std::ptr::null_mut(), &mut e) };
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(e.message().contains(needle), "{e:?}");
    }
}

const fn copy_of_c_vtable() -> rmm_resource_vtable {
    rmm_resource_vtable {
        abi_version: RMM_ABI_VERSION,
        size: std::mem::size_of::<rmm_resource_vtable>() as u32,
        owner: std::ptr::null(),
        retain: Some(c_retain),
        release: Some(c_release),
        allocate: Some(c_allocate),
        deallocate: Some(c_deallocate),
        allocate_sync: Some(c_allocate_sync),
        deallocate_sync: Some(c_deallocate_sync),
        access: Some(c_access),
        name: Some(c_name),
        is_equal: Some(c_is_equal),
    }
}

// --- calls through the C entry points -----------------------------------------------------------

#[test]
fn allocate_through_the_c_entry_points_gives_usable_memory() {
    let a = probe(Access::HOST);
    let h = a.borrow_handle();
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `a` keeps `h` live; valid out-pointers.
    unsafe {
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 256, 64, &mut p, &mut err), RMM_OK);
        assert_eq!(p as usize % 64, 0);
        std::ptr::write_bytes(p.cast::<u8>(), 0x5a, 256);
        assert_eq!(*p.cast::<u8>().add(255), 0x5a);
        assert_eq!(probe_of(&a).live.load(Ordering::SeqCst), 1);
        assert_eq!(rmm_resource_deallocate(h, DEFAULT, p, 256, 64, std::ptr::null_mut()), RMM_OK);
        assert_eq!(rmm_resource_allocate_sync(h, 32, 8, &mut p, &mut err), RMM_OK);
        assert_eq!(rmm_resource_deallocate_sync(h, p, 32, 8, &mut err), RMM_OK);
        assert_eq!(err.kind, RMM_OK);
        assert_eq!(rmm_resource_access(h), Access::HOST.bits() as u32);
        assert_eq!(CStr::from_ptr(rmm_resource_name(h)).to_str().unwrap(), "probe");
    }
    assert_eq!(probe_of(&a).live.load(Ordering::SeqCst), 0);
    assert_eq!(probe_of(&a).allocations(), 2);
}

#[test]
fn errors_map_to_kinds_with_messages() {
    let sys = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let h = sys.borrow_handle();
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `sys` keeps `h` live; valid out-pointers.
    unsafe {
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 64, 3, &mut p, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(err.kind, RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("power of two"), "{err:?}");
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 1 << 50, 256, &mut p, &mut err), RMM_ERROR_OUT_OF_MEMORY);
        assert_eq!(err.bytes, 1 << 50);
        assert!(err.message().contains("system_memory_resource"), "{err:?}");
        // A NULL error out-parameter is fine: only the status comes back.
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 64, 3, &mut p, std::ptr::null_mut()), RMM_ERROR_INVALID_ARGUMENT);
        // Success clears stale details.
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 0, 256, &mut p, &mut err), RMM_OK);
        assert_eq!((err.kind, err.bytes, err.message().as_str()), (RMM_OK, 0, ""));
        assert!(p.is_null(), "0 bytes gives NULL");
    }
}

#[test]
fn every_error_variant_has_its_kind_and_round_trips() {
    let cases = [
        (Error::out_of_memory(12, "x"), RMM_ERROR_OUT_OF_MEMORY),
        (
            Error::Cuda { code: 2, name: "CUDA_ERROR_OUT_OF_MEMORY".into(), message: "oom".into(), call: "cuMemAlloc" },
            RMM_ERROR_CUDA,
        ),
        (Error::invalid("bad"), RMM_ERROR_INVALID_ARGUMENT),
        (Error::NoDriver("none".into()), RMM_ERROR_NO_DRIVER),
        (Error::NoDevice("none".into()), RMM_ERROR_NO_DEVICE),
        (Error::Unsupported("nope".into()), RMM_ERROR_UNSUPPORTED),
    ];
    for (error, kind) in cases {
        assert_eq!(error_kind(&error), kind);
        let mut details = rmm_error::new();
        details.set(&error);
        assert_eq!(details.kind, kind);
        assert_eq!(details.message(), error.to_string());
        let back = error_from_c(kind, &details, "x", "call");
        match (&error, &back) {
            (Error::Cuda { code, name, .. }, Error::Cuda { code: c2, name: n2, message, .. }) => {
                assert_eq!((code, name), (c2, n2));
                assert!(message.contains("oom") && message.contains("cuMemAlloc"), "{message}");
                assert_eq!(details.cuda_code, 2);
            }
            _ => assert_eq!(back, error, "kind {kind}"),
        }
    }
    let unknown = error_from_c(42, &rmm_error::new(), "thing", "call");
    assert!(matches!(&unknown, Error::Unsupported(m) if m.contains("thing") && m.contains("42")), "{unknown}");
}

#[test]
fn long_messages_are_truncated_on_a_character_boundary() {
    let mut details = rmm_error::new();
    details.set(&Error::invalid("é".repeat(400)));
    let message = details.message();
    assert!(message.len() < RMM_ERROR_MESSAGE_SIZE);
    assert!(message.starts_with("invalid argument: éé"));
    assert!(!message.contains('\u{fffd}'), "no split character");
    assert!(details.message.contains(&0));
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
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 8, 8, &mut p, &mut err), RMM_ERROR_PANIC);
        assert_eq!(err.kind, RMM_ERROR_PANIC);
        assert!(err.message().contains("boom in allocate"), "{err:?}");
        assert_eq!(rmm_resource_allocate_sync(h, 8, 8, &mut p, &mut err), RMM_ERROR_PANIC);
        assert_eq!(rmm_resource_deallocate(h, DEFAULT, p, 8, 8, &mut err), RMM_ERROR_PANIC);
        assert!(err.message().contains("boom in deallocate"), "{err:?}");
        let other = AnyResource::new(Panicky);
        assert_eq!(rmm_resource_is_equal(h, other.borrow_handle()), 0, "a panicking is_equal is 'not equal'");
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
        assert_eq!(rmm_get_per_device_resource(0, null_handle, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("NULL"), "{err:?}");
        assert_eq!(rmm_get_current_device_resource(null_handle, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(rmm_cuda_memory_resource_new(null_handle, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(rmm_system_memory_resource_new(null_handle, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 8, 8, null_ptr, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(rmm_resource_allocate_sync(h, 8, 8, null_ptr, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        // The vtable entries themselves check too.
        let v = &*h.vtable;
        assert_eq!(v.allocate.unwrap()(h.self_, DEFAULT, 8, 8, null_ptr, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert_eq!(a.owner_count(), 1, "nothing leaked a reference");
        // previous_out is optional: NULL releases the previous resource.
        let before = a.owner_count();
        assert_eq!(rmm_set_per_device_resource(0, h, null_handle, &mut err), RMM_OK);
        assert_eq!(a.owner_count(), before + 1, "the registry retained the borrowed handle");
        assert_eq!(rmm_reset_per_device_resource(0, null_handle, &mut err), RMM_OK);
        assert_eq!(a.owner_count(), before, "reset with NULL previous_out released it");
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
        assert_eq!(rmm_reset_current_device_resource(std::ptr::null_mut(), &mut err), RMM_OK);
        assert_eq!(rmm_set_current_device_resource(mine.borrow_handle(), &mut previous, &mut err), RMM_OK);
        let previous = AnyResource::from_handle(previous);
        let initial = if crate::cuda::is_host_mode() { "system_memory_resource" } else { "cuda_memory_resource" };
        assert_eq!(previous.name(), initial);
        assert_eq!(rmm_get_current_device_resource(&mut out, &mut err), RMM_OK);
        assert_eq!(out.self_, mine.borrow_handle().self_, "the registry stored our Arc, not a wrapper");
        assert_eq!(mine.owner_count(), 3, "mine, the registry, and `out`");
        rmm_resource_release(out);
        let device = crate::registry::current_device_or_host().unwrap();
        assert_eq!(rmm_get_per_device_resource(device, &mut out, &mut err), RMM_OK);
        assert!(AnyResource::from_handle(out).ptr_eq(&mine));
        let mut back = rmm_resource::NULL;
        assert_eq!(rmm_reset_per_device_resource(device, &mut back, &mut err), RMM_OK);
        assert!(AnyResource::from_handle(back).ptr_eq(&mine));
        assert_eq!(mine.owner_count(), 1);
        assert_eq!(rmm_get_current_device_resource(&mut out, &mut err), RMM_OK);
        let current = AnyResource::from_handle(out);
        assert!(current.ptr_eq(&previous), "reset restores the one initial resource");
        // Out-of-range devices are invalid and leave `out` empty.
        assert_eq!(rmm_get_per_device_resource(4096, &mut out, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert!(out.is_null());
        assert!(err.message().contains("4096"), "{err:?}");
    }
}

#[test]
fn host_mode_entry_points() {
    if !crate::cuda::is_host_mode() {
        crate::testing::skip("host_mode_entry_points", "a GPU is present");
        return;
    }
    let _lock = process_registry_test_lock();
    assert_eq!(rmm_is_host_mode(), 1);
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; owning handles are released.
    unsafe {
        assert_eq!(rmm_get_per_device_resource(1, &mut out, &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("host mode"), "{err:?}");
        // A device-only resource cannot become the host-mode default.
        assert_eq!(rmm_cuda_memory_resource_new(&mut out, &mut err), RMM_OK);
        assert_eq!(rmm_set_current_device_resource(out, std::ptr::null_mut(), &mut err), RMM_ERROR_INVALID_ARGUMENT);
        assert!(err.message().contains("cuda_memory_resource"), "{err:?}");
        let mut p = std::ptr::null_mut();
        let status = rmm_resource_allocate(out, DEFAULT, 64, 256, &mut p, &mut err);
        assert!(status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE, "{err:?}");
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
        assert_eq!(rmm_set_current_device_resource(h, std::ptr::null_mut(), &mut err), RMM_OK, "{err:?}");
        assert_eq!(c_refs(h), 2);
        rmm_resource_release(h);
    }
    let current = crate::registry::current_resource().unwrap();
    assert_eq!(current.name(), "c_resource");
    let p = current.allocate(Stream::DEFAULT, 64, 16).unwrap();
    // SAFETY: from `current` with these arguments.
    unsafe { current.deallocate(Stream::DEFAULT, p, 64, 16).unwrap() };
    assert_eq!(seen.allocations.load(Ordering::SeqCst), 1, "the allocation ran the C code");
    drop(current);
    assert!(!seen.released.load(Ordering::SeqCst));
    drop(crate::registry::reset_current_resource().unwrap());
    assert!(seen.released.load(Ordering::SeqCst), "replacing it gave back the last reference");
}

#[test]
fn is_equal_across_the_abi() {
    let s1 = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let s2 = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let p1 = probe(Access::HOST);
    let p2 = probe(Access::HOST);
    let (c, _seen) = c_resource(RMM_OK);
    // SAFETY: all handles are live for the block.
    unsafe {
        assert_eq!(rmm_resource_is_equal(s1.borrow_handle(), s2.borrow_handle()), 1, "stateless: equal");
        assert_eq!(rmm_resource_is_equal(p1.borrow_handle(), p1.borrow_handle()), 1);
        assert_eq!(rmm_resource_is_equal(p1.borrow_handle(), p2.borrow_handle()), 0);
        assert_eq!(rmm_resource_is_equal(s1.borrow_handle(), c), 0, "a Rust resource is not a C one");
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
        unsafe { CStr::from_ptr(rmm_error_kind_name(RMM_ERROR_OUT_OF_MEMORY)) }.to_str().unwrap(),
        "RMM_ERROR_OUT_OF_MEMORY"
    );
}

#[test]
fn no_owner_is_loaded_in_the_core_test_binary() {
    assert!(find_loaded_owner().is_none());
    assert!(OwnerTable::local().is_local());
    assert_eq!(rmm_abi_version(), RMM_ABI_VERSION);
    assert_eq!(rmm_abi_owner(), owner_tag());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_resource_through_the_c_abi() {
    crate::testing::require_gpu();
    let mut h = rmm_resource::NULL;
    let mut p = std::ptr::null_mut();
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; the handle is released at the end.
    unsafe {
        assert_eq!(rmm_cuda_memory_resource_new(&mut h, &mut err), RMM_OK);
        assert_eq!(rmm_resource_access(h), 1);
        assert_eq!(rmm_resource_allocate(h, DEFAULT, 1 << 20, 256, &mut p, &mut err), RMM_OK, "{err:?}");
        assert!(!p.is_null());
        assert_eq!(rmm_resource_deallocate(h, DEFAULT, p, 1 << 20, 256, &mut err), RMM_OK);
        let status = rmm_resource_allocate(h, DEFAULT, 1 << 50, 256, &mut p, &mut err);
        assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY, "{err:?}");
        assert_eq!(err.bytes, 1 << 50);
        rmm_resource_release(h);
    }
}
