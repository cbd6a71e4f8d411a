//! The resource handle of the C ABI (`bindings-cpp/include/rmm_rs/rmm_c.h`): how a resource crosses
//! any boundary.
//!
//! A resource crosses as an [`rmm_resource`] handle, `{ void* self; const rmm_resource_vtable* vtable; }`:
//! - for a Rust resource `self` is the data pointer of its `Arc` and the vtable's `retain`/`release`
//!   are the `Arc`'s own strong count, so handing a resource to C++, Python or another binary copies
//!   nothing and keeps it alive while anyone holds it;
//! - there is one static vtable per concrete resource type (generic thunks monomorphised per type),
//!   stored in every [`AnyResource`] at construction;
//! - the vtable's `owner` tag is the address of a static of *this copy* of rmm-core: a handle whose
//!   tag is ours is unwrapped back to the original `Arc` ([`AnyResource::from_handle`]); any other
//!   handle (C, C++, another binary's rmm-core) becomes a [`ForeignResource`] that calls through its
//!   vtable and releases its reference on drop. Re-exporting a `ForeignResource` hands back the
//!   original handle, so round trips never stack wrappers.
//!
//! Every thunk catches panics ([`RMM_ERROR_PANIC`](super::status::RMM_ERROR_PANIC)): nothing unwinds
//! into C.

#![allow(non_camel_case_types)]

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use super::cell;
use super::foreign::{check_handle, checked_fns, with_borrowed, Fns, ForeignResource};
use super::guard::{guarded, null_out, put, report};
use super::status::rmm_error;
use super::{AnyResource, MemoryResource};
use crate::cuda::Stream;
use crate::error::Result;

/// The ABI's major version: handles and vtables of another major version are rejected.
/// Compatible additions append fields to [`rmm_resource_vtable`] and are detected through its `size`.
pub const RMM_ABI_VERSION: u32 = 1;

/// A resource handle (`rmm_resource` in C). `self_` is `self` in C.
///
/// Owning or borrowed depending on where it came from (each function says); an owning handle is
/// given back with `vtable->release(self)` ([`rmm_resource_release`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct rmm_resource {
    /// The object (for Rust resources: the `Arc`'s data pointer). May be NULL for a C resource
    /// without state.
    pub self_: *mut c_void,
    /// The operations; NULL only in the empty handle.
    pub vtable: *const rmm_resource_vtable,
}

impl rmm_resource {
    /// The empty handle (`{NULL, NULL}`); releasing it is a no-op.
    pub const NULL: rmm_resource = rmm_resource {
        self_: std::ptr::null_mut(),
        vtable: std::ptr::null(),
    };

    /// True for the empty handle.
    pub fn is_null(&self) -> bool {
        self.vtable.is_null()
    }
}

/// `void (*)(void* self)`.
pub type RetainFn = unsafe extern "C" fn(this: *mut c_void);

/// `int (*)(void* self, void* stream, size_t bytes, size_t alignment, void** out, rmm_error* err)`.
pub type AllocateFn = unsafe extern "C" fn(
    this: *mut c_void,
    stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int;

/// `int (*)(void* self, void* stream, void* ptr, size_t bytes, size_t alignment, rmm_error* err)`.
pub type DeallocateFn = unsafe extern "C" fn(
    this: *mut c_void,
    stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int;

/// `int (*)(void* self, size_t bytes, size_t alignment, void** out, rmm_error* err)`.
pub type AllocateSyncFn = unsafe extern "C" fn(
    this: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int;

/// `int (*)(void* self, void* ptr, size_t bytes, size_t alignment, rmm_error* err)`.
pub type DeallocateSyncFn = unsafe extern "C" fn(
    this: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int;

/// `uint32_t (*)(void* self)`: bit 0 device, bit 1 host.
pub type AccessFn = unsafe extern "C" fn(this: *mut c_void) -> u32;

/// `const char* (*)(void* self)`: valid while the resource lives.
pub type NameFn = unsafe extern "C" fn(this: *mut c_void) -> *const c_char;

/// `int (*)(void* self, void* other_self, const rmm_resource_vtable* other_vtable)`: non-zero if equal.
pub type IsEqualFn = unsafe extern "C" fn(
    this: *mut c_void,
    other_self: *mut c_void,
    other_vtable: *const rmm_resource_vtable,
) -> c_int;

/// The operations of a resource (`rmm_resource_vtable` in C). Every function pointer is required.
///
/// Implementations must be thread-safe (any thread may call any entry at any time while it holds a
/// reference), must not unwind or throw out of an entry, and must accept a NULL `err`.
#[repr(C)]
pub struct rmm_resource_vtable {
    /// Must be [`RMM_ABI_VERSION`].
    pub abi_version: u32,
    /// `sizeof(rmm_resource_vtable)` as the producer knew it (at least this struct's size).
    pub size: u32,
    /// Identifies the binary whose handles these are; compared by address only, never read.
    pub owner: *const c_void,
    /// Adds a reference.
    pub retain: Option<RetainFn>,
    /// Drops a reference; the last one frees the resource.
    pub release: Option<RetainFn>,
    /// Stream-ordered allocation; 0 bytes gives NULL.
    pub allocate: Option<AllocateFn>,
    /// Stream-ordered deallocation; NULL is a no-op.
    pub deallocate: Option<DeallocateFn>,
    /// Allocation usable on every stream when it returns.
    pub allocate_sync: Option<AllocateSyncFn>,
    /// Deallocation of memory no pending work uses.
    pub deallocate_sync: Option<DeallocateSyncFn>,
    /// Who can access the memory (bit 0 device, bit 1 host).
    pub access: Option<AccessFn>,
    /// The resource's name.
    pub name: Option<NameFn>,
    /// True (non-zero) when memory from one may be freed by the other.
    pub is_equal: Option<IsEqualFn>,
}

// SAFETY: a vtable is immutable after construction: function pointers and an owner tag that is only
// compared by address, never dereferenced.
unsafe impl Sync for rmm_resource_vtable {}

// SAFETY: as above.
unsafe impl Send for rmm_resource_vtable {}

/// One byte per copy of rmm-core: its address is the `owner` tag of the vtables this copy makes.
static OWNER_TAG: [u8; 16] = *b"rmm-core owner\0\0";

/// The `owner` tag of this copy of rmm-core (one per binary that links it).
pub fn owner_tag() -> *const c_void {
    OWNER_TAG.as_ptr().cast()
}

/// The vtable of a Rust resource type: the C part first, then what only this copy of rmm-core uses
/// to unwrap its own handles. Only vtables whose `owner` is [`owner_tag`] are `RustVTable`s.
#[repr(C)]
pub struct RustVTable {
    /// The part C sees.
    pub(crate) c: rmm_resource_vtable,
    /// Takes one handle reference (a handle's `self`) over as a trait-object `Arc`.
    pub(crate) into_arc: unsafe fn(*mut c_void) -> Result<Arc<dyn MemoryResource>>,
    /// Borrows the object behind a handle's `self` as a trait object.
    pub(crate) as_dyn: unsafe fn(*mut c_void) -> Result<*const dyn MemoryResource>,
    /// `release` that reports a refused release (a handle released twice) instead of logging it.
    pub(crate) release_checked: unsafe fn(*mut c_void) -> Result<()>,
}

impl std::fmt::Debug for RustVTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RustVTable")
    }
}

struct Thunks<R>(PhantomData<R>);

impl<R: MemoryResource> Thunks<R> {
    const VTABLE: RustVTable = RustVTable {
        c: rmm_resource_vtable {
            abi_version: RMM_ABI_VERSION,
            size: std::mem::size_of::<rmm_resource_vtable>() as u32,
            owner: &OWNER_TAG as *const [u8; 16] as *const c_void,
            retain: Some(retain_thunk::<R>),
            release: Some(release_thunk::<R>),
            allocate: Some(allocate_thunk::<R>),
            deallocate: Some(deallocate_thunk::<R>),
            allocate_sync: Some(allocate_sync_thunk::<R>),
            deallocate_sync: Some(deallocate_sync_thunk::<R>),
            access: Some(access_thunk::<R>),
            name: Some(name_thunk::<R>),
            is_equal: Some(is_equal_thunk::<R>),
        },
        into_arc: into_arc_thunk::<R>,
        as_dyn: as_dyn_thunk::<R>,
        release_checked: release_checked_thunk::<R>,
    };
}

/// The static vtable of resource type `R`.
pub(crate) fn vtable_for<R: MemoryResource>() -> &'static RustVTable {
    &Thunks::<R>::VTABLE
}

/// A NUL-terminated copy of `name` that lives for the rest of the process (one per distinct name).
pub fn intern(name: &str) -> *const c_char {
    static NAMES: OnceLock<RwLock<HashMap<String, &'static CStr>>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    if let Some(c) = names
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
    {
        return c.as_ptr();
    }
    let mut map = names.write().unwrap_or_else(PoisonError::into_inner);
    let c = *map.entry(name.to_owned()).or_insert_with(|| {
        let text = name.split('\0').next().unwrap_or_default();
        let owned = CString::new(text).unwrap_or_default();
        Box::leak(owned.into_boxed_c_str())
    });
    c.as_ptr()
}

// `this` is a handle's `self`: a cell token ([`cell`]) of an `Arc<R>` made by AnyResource; every
// thunk resolves it first, so a released handle is an error, not a read of freed memory.

/// The `R` behind a handle's `self`.
///
/// # Safety
/// `this` is the `self` of a handle of vtable `vtable_for::<R>()` (maybe released).
unsafe fn this_ref<'a, R: MemoryResource>(this: *mut c_void) -> Result<&'a R> {
    // SAFETY: caller contract; a live cell's data is the data pointer of a live Arc<R>.
    unsafe { Ok(&*(cell::resolve(this)?.data() as *const R)) }
}

/// Runs `f` on the `R` behind `this`, reporting into `err` (panics caught).
///
/// # Safety
/// As for [`this_ref`]; `err` is NULL or valid (ABI contract).
unsafe fn on<R: MemoryResource>(
    this: *mut c_void,
    err: *mut rmm_error,
    f: impl FnOnce(&R) -> Result<()>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || f(this_ref::<R>(this)?)) }
}

/// Writes the pointer `f` allocates from the `R` behind `this` to `*out` (required).
///
/// # Safety
/// As for [`on`]; `out` is NULL or valid for writes.
unsafe fn allocate_into<R: MemoryResource>(
    this: *mut c_void,
    out: *mut *mut c_void,
    err: *mut rmm_error,
    f: impl FnOnce(&R) -> Result<*mut u8>,
) -> c_int {
    if out.is_null() {
        // SAFETY: caller contract.
        return unsafe { report(err, &null_out("the allocation's out pointer")) };
    }
    // SAFETY: caller contract; `out` is non-NULL and writable.
    unsafe {
        on::<R>(this, err, |r| {
            put(out, f(r)?.cast(), "the allocation's out pointer")
        })
    }
}

/// Counts one more reference of the handle `this` (one more handle reference and `Arc` count).
///
/// # Safety
/// As for [`this_ref`].
unsafe fn retain_checked<R: MemoryResource>(this: *mut c_void) -> Result<()> {
    // SAFETY: caller contract.
    let cell = unsafe { cell::resolve(this)? };
    cell.add_ref();
    // SAFETY: a live cell's data is the data pointer of a live Arc<R>; increments cannot panic.
    unsafe { Arc::increment_strong_count(cell.data() as *const R) };
    Ok(())
}

/// Gives back one reference of the handle `this`; the last one of the `Arc` retires the cell and
/// drops the resource.
///
/// # Safety
/// As for [`this_ref`]; the caller gives up the reference it owns.
unsafe fn release_checked<R: MemoryResource>(this: *mut c_void) -> Result<()> {
    // SAFETY: caller contract.
    let arc = unsafe { take_reference::<R>(this, "release")? };
    if let Some(resource) = Arc::into_inner(arc) {
        // SAFETY: the token resolved just above, and no other reference is left.
        cell::retire(unsafe { cell::resolve(this)? });
        if catch_unwind(AssertUnwindSafe(move || drop(resource))).is_err() {
            tracing::error!("a resource panicked while being dropped through rmm_resource_release");
        }
    }
    Ok(())
}

/// Takes one handle reference of `this` over as an `Arc<R>`.
///
/// # Safety
/// As for [`this_ref`]; the caller gives up the reference it owns.
unsafe fn take_reference<R: MemoryResource>(this: *mut c_void, what: &str) -> Result<Arc<R>> {
    // SAFETY: caller contract.
    let cell = unsafe { cell::resolve(this)? };
    cell.drop_ref(what)?;
    // SAFETY: the handle reference just counted off was one strong count of this live Arc<R>.
    Ok(unsafe { Arc::from_raw(cell.data() as *const R) })
}

/// Logs a refused `retain` / `release` (their C signatures cannot report it).
fn log_refused(what: &str, result: Result<()>) {
    if let Err(e) = result {
        tracing::error!("rmm_resource {what} refused: {e}");
    }
}

unsafe extern "C" fn retain_thunk<R: MemoryResource>(this: *mut c_void) {
    // SAFETY: handle contract.
    log_refused("retain", unsafe { retain_checked::<R>(this) });
}

unsafe extern "C" fn release_thunk<R: MemoryResource>(this: *mut c_void) {
    // SAFETY: handle contract; the caller gives up its reference.
    log_refused("release", unsafe { release_checked::<R>(this) });
}

unsafe extern "C" fn allocate_thunk<R: MemoryResource>(
    this: *mut c_void,
    stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: ABI contract: the caller vouches that `stream` is a live stream handle.
    let stream = unsafe { Stream::from_raw(stream as usize) };
    // SAFETY: handle and ABI contract (the caller vouches for the stream).
    unsafe { allocate_into::<R>(this, out, err, |r| r.allocate(stream, bytes, alignment)) }
}

unsafe extern "C" fn allocate_sync_thunk<R: MemoryResource>(
    this: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: handle and ABI contract.
    unsafe { allocate_into::<R>(this, out, err, |r| r.allocate_sync(bytes, alignment)) }
}

unsafe extern "C" fn deallocate_thunk<R: MemoryResource>(
    this: *mut c_void,
    stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: ABI contract: the caller vouches that `stream` is a live stream handle.
    let stream = unsafe { Stream::from_raw(stream as usize) };
    // SAFETY: handle and ABI contract: `ptr` came from this resource with these arguments.
    unsafe {
        on::<R>(this, err, |r| {
            r.deallocate(stream, ptr.cast(), bytes, alignment)
        })
    }
}

unsafe extern "C" fn deallocate_sync_thunk<R: MemoryResource>(
    this: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: handle and ABI contract: `ptr` came from this resource with these arguments.
    unsafe {
        on::<R>(this, err, |r| {
            r.deallocate_sync(ptr.cast(), bytes, alignment)
        })
    }
}

unsafe extern "C" fn access_thunk<R: MemoryResource>(this: *mut c_void) -> u32 {
    // SAFETY: handle contract (a released handle: no access).
    let access = || unsafe { this_ref::<R>(this) }.map_or(0, |r| r.access().bits() as u32);
    catch_unwind(access).unwrap_or(0)
}

unsafe extern "C" fn name_thunk<R: MemoryResource>(this: *mut c_void) -> *const c_char {
    let name = || {
        // SAFETY: handle contract.
        unsafe { this_ref::<R>(this) }
            .map_or(c"<released resource handle>".as_ptr(), |r| intern(r.name()))
    };
    catch_unwind(name).unwrap_or(c"<name panicked>".as_ptr())
}

unsafe extern "C" fn is_equal_thunk<R: MemoryResource>(
    this: *mut c_void,
    other_self: *mut c_void,
    other_vtable: *const rmm_resource_vtable,
) -> c_int {
    let compare = || -> bool {
        if other_vtable.is_null() {
            return false;
        }
        // SAFETY: handle contract.
        let Ok(r) = (unsafe { this_ref::<R>(this) }) else {
            return false;
        };
        let other = rmm_resource {
            self_: other_self,
            vtable: other_vtable,
        };
        // SAFETY: the caller passes a live handle (ABI contract); borrowing it for this call.
        unsafe { with_borrowed(other, |o| r.is_equal(o)) }.unwrap_or(false)
    };
    catch_unwind(AssertUnwindSafe(compare))
        .map(c_int::from)
        .unwrap_or(0)
}

unsafe fn into_arc_thunk<R: MemoryResource>(this: *mut c_void) -> Result<Arc<dyn MemoryResource>> {
    // SAFETY: handle contract; the caller gives up one reference.
    Ok(unsafe { take_reference::<R>(this, "AnyResource::from_handle")? })
}

unsafe fn as_dyn_thunk<R: MemoryResource>(this: *mut c_void) -> Result<*const dyn MemoryResource> {
    // SAFETY: handle contract.
    Ok(unsafe { this_ref::<R>(this)? } as *const R as *const dyn MemoryResource)
}

unsafe fn release_checked_thunk<R: MemoryResource>(this: *mut c_void) -> Result<()> {
    // SAFETY: handle contract; the caller gives up its reference.
    unsafe { release_checked::<R>(this) }
}

/// Gives back the reference an owning `handle` carries (the empty handle: nothing to do).
///
/// # Errors
/// [`Error::InvalidArgument`](crate::error::Error::InvalidArgument) for a malformed handle, and for
/// a handle of this library that was already released (its last reference is gone, or it holds no
/// reference any more). A foreign handle's own `release` cannot report; it is called as it is.
///
/// # Safety
/// `handle` is empty, owning, or a handle of this library that was released; its vtable is valid.
pub unsafe fn release_handle(handle: rmm_resource) -> Result<()> {
    if handle.is_null() {
        return Ok(());
    }
    // SAFETY: caller contract.
    let fns = unsafe { checked_fns(&handle)? };
    // SAFETY: checked complete; only our vtables carry our owner tag.
    if unsafe { (*handle.vtable).owner } == owner_tag() {
        let rust = handle.vtable as *const RustVTable;
        // SAFETY: our RustVTable; `self` one of our tokens, checked just above.
        return unsafe { ((*rust).release_checked)(handle.self_) };
    }
    // SAFETY: a checked foreign handle whose reference the caller gives back.
    catch_unwind(|| unsafe { (fns.release)(handle.self_) })
        .map_err(|_| crate::error::Error::invalid("a foreign resource's release panicked"))
}

impl AnyResource {
    /// A borrowed handle: valid while `self` (or a clone) lives; the callee must retain it to keep it.
    /// For a [`ForeignResource`] this is the original handle.
    pub fn borrow_handle(&self) -> rmm_resource {
        if let Some(foreign) = (self.inner.as_ref() as &dyn Any).downcast_ref::<ForeignResource>() {
            return foreign.handle;
        }
        let data = Arc::as_ptr(&self.inner) as *const () as *const c_void;
        rmm_resource {
            self_: cell::handle_self(data, 0),
            vtable: &self.vtable.c,
        }
    }

    /// An owning handle to the same resource (one more reference; nothing is copied).
    pub fn to_handle(&self) -> rmm_resource {
        self.clone().into_handle()
    }

    /// Turns this owner into an owning handle (the reference count is unchanged; nothing is copied).
    /// The receiver gives the reference back with `release`.
    pub fn into_handle(self) -> rmm_resource {
        if let Some(foreign) = (self.inner.as_ref() as &dyn Any).downcast_ref::<ForeignResource>() {
            foreign.retain();
            return foreign.handle;
        }
        let vtable = &self.vtable.c;
        // The reference moves into the handle: this owner is not dropped.
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again: its `Arc` is moved out exactly once.
        let inner = unsafe { std::ptr::read(&this.inner) };
        let data = Arc::into_raw(inner) as *const () as *const c_void;
        rmm_resource {
            self_: cell::handle_self(data, 1),
            vtable,
        }
    }

    /// Takes ownership of one reference of `handle`.
    ///
    /// A handle made by this binary's rmm-core is unwrapped to the original `Arc` (no wrapper; the
    /// result is [`AnyResource::ptr_eq`] to the resource it came from); any other becomes a
    /// [`ForeignResource`].
    ///
    /// # Safety
    /// `handle` is owning, live and valid ([`check_handle`] passes); its vtable outlives it.
    pub unsafe fn from_handle(handle: rmm_resource) -> AnyResource {
        // SAFETY: valid handle (caller contract).
        let vtable = unsafe { &*handle.vtable };
        if vtable.owner == owner_tag() {
            // SAFETY: our owner tag means this is one of our RustVTables, 'static, and `self_` an
            // `Arc` data pointer of its type whose reference we take over.
            let rust: &'static RustVTable = unsafe { &*(handle.vtable as *const RustVTable) };
            // SAFETY: as above.
            let inner = unsafe { (rust.into_arc)(handle.self_) }
                .unwrap_or_else(|e| panic!("AnyResource::from_handle: {e} (see its # Safety)"));
            AnyResource {
                inner,
                vtable: rust,
            }
        } else {
            // SAFETY: valid (caller contract), so every entry is present.
            let fns = Fns::of(vtable)
                .expect("AnyResource::from_handle: invalid handle (see its # Safety)");
            // SAFETY: valid and owning (caller contract).
            AnyResource::new(unsafe { ForeignResource::adopt(handle, fns) })
        }
    }

    /// [`AnyResource::from_handle`] after [`check_handle`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid handle, which is then not consumed.
    ///
    /// # Safety
    /// `handle` is owning and live, or fails the check; its vtable outlives it.
    pub unsafe fn try_from_handle(handle: rmm_resource) -> Result<AnyResource> {
        // SAFETY: caller contract.
        unsafe {
            check_handle(&handle)?;
            Ok(Self::from_handle(handle))
        }
    }

    /// A new owner of a borrowed `handle` (retains it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid handle.
    ///
    /// # Safety
    /// `handle` is live, or fails the check; its vtable outlives every reference.
    pub unsafe fn from_borrowed_handle(handle: rmm_resource) -> Result<AnyResource> {
        // SAFETY: caller contract; retain then adopt the new reference.
        unsafe {
            let fns = checked_fns(&handle)?;
            (fns.retain)(handle.self_);
            Ok(Self::from_handle(handle))
        }
    }
}

impl Drop for AnyResource {
    /// The last owner of a resource that was handed out as a handle retires its handle cell, so
    /// that a stale copy of the handle is refused instead of reaching freed memory.
    fn drop(&mut self) {
        if Arc::strong_count(&self.inner) == 1 {
            cell::forget(Arc::as_ptr(&self.inner) as *const () as *const c_void);
        }
    }
}
