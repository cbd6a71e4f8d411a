//! A resource written "in C": a hand-made vtable over a refcounted state, for the tests of the
//! handle protocol (rmm-core) and of the C entry points (librmm).

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::resource::handle::{rmm_resource, rmm_resource_vtable, RMM_ABI_VERSION};
use crate::resource::status::{rmm_error, RMM_OK};

/// What the fake C resource reports to the test, shared so it outlives the resource.
#[derive(Default)]
pub struct Seen {
    pub allocations: AtomicUsize,
    pub deallocations: AtomicUsize,
    pub released: AtomicBool,
}

pub struct CState {
    pub refs: AtomicUsize,
    pub seen: Arc<Seen>,
    pub fail_with: c_int,
}

static FAKE_OWNER: u8 = 0;

pub unsafe extern "C" fn c_retain(this: *mut c_void) {
    // SAFETY: `this` is a live CState (the fake's handle contract).
    unsafe { &*(this as *const CState) }
        .refs
        .fetch_add(1, Ordering::SeqCst);
}

pub unsafe extern "C" fn c_release(this: *mut c_void) {
    // SAFETY: `this` is a live CState; the last reference frees it.
    unsafe {
        if (&*(this as *const CState))
            .refs
            .fetch_sub(1, Ordering::SeqCst)
            == 1
        {
            let state = Box::from_raw(this as *mut CState);
            state.seen.released.store(true, Ordering::SeqCst);
        }
    }
}

pub unsafe extern "C" fn c_allocate(
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

pub unsafe extern "C" fn c_allocate_sync(
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
    assert_eq!(
        // SAFETY: valid out-pointer; alignment is a power of two multiple of the pointer size in tests.
        unsafe { libc::posix_memalign(&mut p, alignment.max(8), bytes.max(1)) },
        0
    );
    state.seen.allocations.fetch_add(1, Ordering::SeqCst);
    // SAFETY: valid out-pointer (the caller checked).
    unsafe { *out = p };
    RMM_OK
}

pub unsafe extern "C" fn c_deallocate(
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

pub unsafe extern "C" fn c_deallocate_sync(
    this: *mut c_void,
    ptr: *mut c_void,
    _bytes: usize,
    _alignment: usize,
    _err: *mut rmm_error,
) -> c_int {
    // SAFETY: live CState; `ptr` came from posix_memalign.
    unsafe {
        (&*(this as *const CState))
            .seen
            .deallocations
            .fetch_add(1, Ordering::SeqCst);
        libc::free(ptr);
    }
    RMM_OK
}

pub unsafe extern "C" fn c_access(_this: *mut c_void) -> u32 {
    3
}

pub unsafe extern "C" fn c_name(_this: *mut c_void) -> *const c_char {
    c"c_resource".as_ptr()
}

pub unsafe extern "C" fn c_is_equal(
    this: *mut c_void,
    other: *mut c_void,
    _vt: *const rmm_resource_vtable,
) -> c_int {
    c_int::from(this == other)
}

/// The vtable of the C resource with `owner` as its owner tag (tests make broken copies of it).
pub const fn c_vtable(owner: *const c_void) -> rmm_resource_vtable {
    rmm_resource_vtable {
        abi_version: RMM_ABI_VERSION,
        size: std::mem::size_of::<rmm_resource_vtable>() as u32,
        owner,
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

static C_VTABLE: rmm_resource_vtable = c_vtable(&FAKE_OWNER as *const u8 as *const c_void);

/// A new C resource: an owning handle (one reference) and what it reports.
pub fn c_resource(fail_with: c_int) -> (rmm_resource, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let state = Box::new(CState {
        refs: AtomicUsize::new(1),
        seen: seen.clone(),
        fail_with,
    });
    (
        rmm_resource {
            self_: Box::into_raw(state).cast(),
            vtable: &C_VTABLE,
        },
        seen,
    )
}

pub fn c_refs(handle: rmm_resource) -> usize {
    // SAFETY: only called while the test holds a reference.
    unsafe { &*(handle.self_ as *const CState) }
        .refs
        .load(Ordering::SeqCst)
}
