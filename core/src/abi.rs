//! The stable C ABI (`bindings-cpp/include/rmm/rmm_c.h`): how a resource crosses any boundary.
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
//! Errors cross as a status (`RMM_OK` or an `RMM_ERROR_*` kind) plus an optional [`rmm_error`]
//! out-parameter with the details. Every entry point catches panics ([`RMM_ERROR_PANIC`]) and checks
//! its out-pointers ([`RMM_ERROR_INVALID_ARGUMENT`] for NULL ones): nothing unwinds into C.
//!
//! The `rmm_*` functions here are plain `extern "C"` functions without `#[no_mangle]`: the crate
//! `rmm-cpp` (librmm.so, the process-wide owner) exports them under their C names with one-line
//! forwards. [`find_loaded_owner`] is the client side: it finds an already-loaded librmm's registry
//! entry points, so another binary can use the process's one registry (see [`crate::registry`]).

#![allow(non_camel_case_types)]

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use crate::cuda::{self, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::{CudaMemoryResource, SystemMemoryResource};
use crate::registry;
use crate::resource::{downcast, Access, AnyResource, MemoryResource};

/// The ABI's major version: handles and vtables of another major version are rejected.
/// Compatible additions append fields to [`rmm_resource_vtable`] and are detected through its `size`.
pub const RMM_ABI_VERSION: u32 = 1;

/// Success.
pub const RMM_OK: c_int = 0;
/// The resource could not provide the memory ([`Error::OutOfMemory`]).
pub const RMM_ERROR_OUT_OF_MEMORY: c_int = 1;
/// A CUDA call failed ([`Error::Cuda`]); `cuda_code` holds the `CUresult`.
pub const RMM_ERROR_CUDA: c_int = 2;
/// An argument was invalid, including NULL out-pointers and invalid handles ([`Error::InvalidArgument`]).
pub const RMM_ERROR_INVALID_ARGUMENT: c_int = 3;
/// No CUDA driver ([`Error::NoDriver`]).
pub const RMM_ERROR_NO_DRIVER: c_int = 4;
/// No (such) CUDA device ([`Error::NoDevice`]).
pub const RMM_ERROR_NO_DEVICE: c_int = 5;
/// Not supported ([`Error::Unsupported`]).
pub const RMM_ERROR_UNSUPPORTED: c_int = 6;
/// An internal failure: a Rust panic (or, from a C++ resource, an unexpected exception) was caught.
pub const RMM_ERROR_PANIC: c_int = 7;

/// Capacity of [`rmm_error::message`], NUL included.
pub const RMM_ERROR_MESSAGE_SIZE: usize = 512;

/// Details of a failed call (`rmm_error` in C). Every error out-parameter may be NULL.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rmm_error {
    /// `RMM_OK` or an `RMM_ERROR_*` kind (the same value the call returns).
    pub kind: i32,
    /// The `CUresult` for `RMM_ERROR_CUDA`, else 0.
    pub cuda_code: i32,
    /// The requested size for `RMM_ERROR_OUT_OF_MEMORY`, else 0.
    pub bytes: u64,
    /// The error's full message, UTF-8, NUL-terminated, truncated to fit.
    pub message: [c_char; RMM_ERROR_MESSAGE_SIZE],
}

impl rmm_error {
    /// A cleared error (`RMM_OK`, empty message).
    pub const fn new() -> Self {
        Self { kind: RMM_OK, cuda_code: 0, bytes: 0, message: [0; RMM_ERROR_MESSAGE_SIZE] }
    }

    /// The message as a string (up to the first NUL; invalid UTF-8 replaced).
    pub fn message(&self) -> String {
        let bytes: Vec<u8> = self.message.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Fills `self` from `error`.
    pub fn set(&mut self, error: &Error) {
        self.kind = error_kind(error);
        self.cuda_code = match error {
            Error::Cuda { code, .. } => *code,
            _ => 0,
        };
        self.bytes = match error {
            Error::OutOfMemory { bytes, .. } => *bytes as u64,
            _ => 0,
        };
        self.set_message(&error.to_string());
    }

    fn set_message(&mut self, text: &str) {
        let mut end = text.len().min(RMM_ERROR_MESSAGE_SIZE - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        for (dst, &src) in self.message.iter_mut().zip(&text.as_bytes()[..end]) {
            *dst = src as c_char;
        }
        self.message[end] = 0;
    }

    fn clear(&mut self) {
        self.kind = RMM_OK;
        self.cuda_code = 0;
        self.bytes = 0;
        self.message[0] = 0;
    }
}

impl Default for rmm_error {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for rmm_error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("rmm_error")
            .field("kind", &self.kind)
            .field("cuda_code", &self.cuda_code)
            .field("bytes", &self.bytes)
            .field("message", &self.message())
            .finish()
    }
}

/// The `RMM_ERROR_*` kind of `error`.
pub fn error_kind(error: &Error) -> c_int {
    match error {
        Error::OutOfMemory { .. } => RMM_ERROR_OUT_OF_MEMORY,
        Error::Cuda { .. } => RMM_ERROR_CUDA,
        Error::InvalidArgument(_) => RMM_ERROR_INVALID_ARGUMENT,
        Error::NoDriver(_) => RMM_ERROR_NO_DRIVER,
        Error::NoDevice(_) => RMM_ERROR_NO_DEVICE,
        Error::Unsupported(_) => RMM_ERROR_UNSUPPORTED,
    }
}

/// Rebuilds an [`Error`] from a failed call's `status` and details.
///
/// `resource` names the callee (for out-of-memory and internal errors), `call` the vtable entry or
/// function that failed (for CUDA errors). Messages written by rmm-core round-trip without the
/// variant's prefix being repeated. [`RMM_ERROR_PANIC`] and unknown kinds become
/// [`Error::Unsupported`] saying that the callee failed internally (`Error` has no internal variant).
pub fn error_from_c(status: c_int, details: &rmm_error, resource: &str, call: &'static str) -> Error {
    let message = details.message();
    let strip = |prefix: &str| -> String {
        let rest = message.strip_prefix(prefix).unwrap_or(&message);
        if rest.is_empty() {
            format!("{resource}: {call} failed without a message")
        } else {
            rest.to_owned()
        }
    };
    match status {
        RMM_ERROR_OUT_OF_MEMORY => {
            let plain = Error::out_of_memory(details.bytes as usize, resource);
            let detail = if message.is_empty() || message == plain.to_string() { String::new() } else { message };
            Error::OutOfMemory { bytes: details.bytes as usize, resource: resource.to_owned(), detail }
        }
        RMM_ERROR_CUDA => {
            let code = details.cuda_code;
            // rmm-core writes "CUDA error {code} ({name}) in {call}: {message}".
            let parsed = message
                .strip_prefix(&format!("CUDA error {code} ("))
                .and_then(|rest| rest.split_once(") in "))
                .and_then(|(name, rest)| rest.split_once(": ").map(|(orig, msg)| (name, orig, msg)));
            match parsed {
                Some((name, orig, msg)) => Error::Cuda {
                    code,
                    name: name.to_owned(),
                    message: format!("{msg} (in {orig})"),
                    call,
                },
                None => Error::Cuda { code, name: format!("CUresult {code}"), message, call },
            }
        }
        RMM_ERROR_INVALID_ARGUMENT => Error::InvalidArgument(strip("invalid argument: ")),
        RMM_ERROR_NO_DRIVER => Error::NoDriver(strip("no CUDA driver: ")),
        RMM_ERROR_NO_DEVICE => Error::NoDevice(strip("no CUDA device: ")),
        RMM_ERROR_UNSUPPORTED => Error::Unsupported(strip("unsupported: ")),
        other => Error::Unsupported(format!(
            "{resource} failed internally in {call} (status {other}): {}",
            if message.is_empty() { "no message" } else { &message }
        )),
    }
}

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
    pub const NULL: rmm_resource = rmm_resource { self_: std::ptr::null_mut(), vtable: std::ptr::null() };

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
pub type IsEqualFn =
    unsafe extern "C" fn(this: *mut c_void, other_self: *mut c_void, other_vtable: *const rmm_resource_vtable) -> c_int;

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
    /// Takes one reference (an `Arc<R>` data pointer) and returns it as a trait-object `Arc`.
    into_arc: unsafe fn(*mut c_void) -> Arc<dyn MemoryResource>,
    /// Borrows the object behind a data pointer as a trait object.
    as_dyn: unsafe fn(*mut c_void) -> *const dyn MemoryResource,
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
    };
}

/// The static vtable of resource type `R`.
pub(crate) fn vtable_for<R: MemoryResource>() -> &'static RustVTable {
    &Thunks::<R>::VTABLE
}

/// Runs `f`, turning its error or panic into a status and `err`'s details (cleared on success).
///
/// # Safety
/// `err` is NULL or valid for writes.
unsafe fn guarded(err: *mut rmm_error, f: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
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
unsafe fn report(err: *mut rmm_error, error: &Error) -> c_int {
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
unsafe fn report_panic(err: *mut rmm_error, payload: &(dyn Any + Send)) -> c_int {
    // SAFETY: caller contract.
    if let Some(d) = unsafe { err.as_mut() } {
        *d = rmm_error::new();
        d.kind = RMM_ERROR_PANIC;
        d.set_message(&format!("rmm internal error (panic): {}", panic_text(payload)));
    }
    RMM_ERROR_PANIC
}

fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

fn null_out(what: &str) -> Error {
    Error::invalid(format!("{what} must not be NULL"))
}

/// A NUL-terminated copy of `name` that lives for the rest of the process (one per distinct name).
fn intern(name: &str) -> *const c_char {
    static NAMES: OnceLock<RwLock<HashMap<String, &'static CStr>>> = OnceLock::new();
    let names = NAMES.get_or_init(Default::default);
    if let Some(c) = names.read().unwrap_or_else(PoisonError::into_inner).get(name) {
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

// --- thunks: the vtable of a Rust resource type R. `this` is always the data pointer of a live
// Arc<R> made by AnyResource (the handle contract), never NULL.

unsafe extern "C" fn retain_thunk<R: MemoryResource>(this: *mut c_void) {
    // SAFETY: `this` is the data pointer of a live Arc<R> (handle contract); increments cannot panic.
    unsafe { Arc::increment_strong_count(this as *const R) }
}

unsafe extern "C" fn release_thunk<R: MemoryResource>(this: *mut c_void) {
    // SAFETY: `this` is the data pointer of a live Arc<R> whose reference the caller gives up.
    let dropped = catch_unwind(|| unsafe { Arc::decrement_strong_count(this as *const R) });
    if dropped.is_err() {
        tracing::error!("a resource panicked while being dropped through rmm_resource_release");
    }
}

unsafe extern "C" fn allocate_thunk<R: MemoryResource>(
    this: *mut c_void,
    stream: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: `err` is NULL or valid (ABI contract).
    unsafe {
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("allocate's out pointer"));
            }
            // SAFETY: `this` points to a live R (handle contract).
            let r = &*(this as *const R);
            // SAFETY: the caller vouches for the stream handle (ABI contract).
            let p = r.allocate(Stream::from_raw(stream as usize), bytes, alignment)?;
            // SAFETY: checked non-NULL; the caller provides a writable pointer.
            *out = p.cast();
            Ok(())
        })
    }
}

unsafe extern "C" fn deallocate_thunk<R: MemoryResource>(
    this: *mut c_void,
    stream: *mut c_void,
    ptr: *mut c_void,
    bytes: usize,
    alignment: usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: `err` is NULL or valid (ABI contract).
    unsafe {
        guarded(err, || {
            // SAFETY: `this` points to a live R; the caller vouches for the stream and for `ptr`
            // coming from this resource with these arguments (ABI contract).
            let r = &*(this as *const R);
            r.deallocate(Stream::from_raw(stream as usize), ptr.cast(), bytes, alignment)
        })
    }
}

unsafe extern "C" fn allocate_sync_thunk<R: MemoryResource>(
    this: *mut c_void,
    bytes: usize,
    alignment: usize,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: `err` is NULL or valid (ABI contract).
    unsafe {
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("allocate_sync's out pointer"));
            }
            // SAFETY: `this` points to a live R (handle contract).
            let r = &*(this as *const R);
            let p = r.allocate_sync(bytes, alignment)?;
            // SAFETY: checked non-NULL; the caller provides a writable pointer.
            *out = p.cast();
            Ok(())
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
    // SAFETY: `err` is NULL or valid (ABI contract).
    unsafe {
        guarded(err, || {
            // SAFETY: `this` points to a live R; `ptr` came from it with these arguments (ABI contract).
            let r = &*(this as *const R);
            r.deallocate_sync(ptr.cast(), bytes, alignment)
        })
    }
}

unsafe extern "C" fn access_thunk<R: MemoryResource>(this: *mut c_void) -> u32 {
    // SAFETY: `this` points to a live R (handle contract).
    let r = unsafe { &*(this as *const R) };
    catch_unwind(AssertUnwindSafe(|| r.access().bits() as u32)).unwrap_or(0)
}

unsafe extern "C" fn name_thunk<R: MemoryResource>(this: *mut c_void) -> *const c_char {
    // SAFETY: `this` points to a live R (handle contract).
    let r = unsafe { &*(this as *const R) };
    catch_unwind(AssertUnwindSafe(|| intern(r.name()))).unwrap_or(c"<name panicked>".as_ptr())
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
        // SAFETY: `this` points to a live R (handle contract).
        let r = unsafe { &*(this as *const R) };
        let other = rmm_resource { self_: other_self, vtable: other_vtable };
        // SAFETY: the caller passes a live handle (ABI contract); borrowing it for this call.
        unsafe { with_borrowed(other, |o| r.is_equal(o)) }.unwrap_or(false)
    };
    catch_unwind(AssertUnwindSafe(compare)).map(c_int::from).unwrap_or(0)
}

unsafe fn into_arc_thunk<R: MemoryResource>(this: *mut c_void) -> Arc<dyn MemoryResource> {
    // SAFETY: `this` came from Arc::<R>::into_raw (handle contract); the caller gives up one reference.
    unsafe { Arc::<R>::from_raw(this as *const R) }
}

unsafe fn as_dyn_thunk<R: MemoryResource>(this: *mut c_void) -> *const dyn MemoryResource {
    this as *const R as *const dyn MemoryResource
}

/// Calls `f` with the resource behind a borrowed `handle` (ours: the object itself; foreign: a
/// temporary [`ForeignResource`] holding its own reference).
///
/// # Safety
/// `handle` is live for the duration of the call.
unsafe fn with_borrowed<T>(handle: rmm_resource, f: impl FnOnce(&dyn MemoryResource) -> T) -> Result<T> {
    // SAFETY: caller contract.
    let fns = unsafe { checked_fns(&handle)? };
    // SAFETY: checked non-NULL; live (caller contract).
    let vtable = unsafe { &*handle.vtable };
    if vtable.owner == owner_tag() {
        // SAFETY: our owner tag means this is a RustVTable and `self_` a live object of its type.
        let rust = unsafe { &*(handle.vtable as *const RustVTable) };
        // SAFETY: as above; the object outlives this call.
        Ok(f(unsafe { &*(rust.as_dyn)(handle.self_) }))
    } else {
        // SAFETY: checked and live; ForeignResource takes (and on drop gives back) its own reference.
        let foreign = unsafe { ForeignResource::retained(handle, fns) };
        Ok(f(&foreign))
    }
}

/// Checks that `handle` has a vtable of this ABI version with every entry present.
///
/// # Errors
/// [`Error::InvalidArgument`] describing what is wrong.
///
/// # Safety
/// A non-NULL `vtable` must point to readable memory of at least the size it claims, up to
/// `size_of::<rmm_resource_vtable>()`.
pub unsafe fn check_handle(handle: &rmm_resource) -> Result<()> {
    if handle.vtable.is_null() {
        return Err(Error::invalid("resource handle has a NULL vtable"));
    }
    // SAFETY: non-NULL; the first 8 bytes (version and size) are always present.
    let (version, size) = unsafe { ((*handle.vtable).abi_version, (*handle.vtable).size) };
    if version != RMM_ABI_VERSION {
        return Err(Error::invalid(format!(
            "resource handle has ABI version {version}, this library speaks {RMM_ABI_VERSION}"
        )));
    }
    if (size as usize) < std::mem::size_of::<rmm_resource_vtable>() {
        return Err(Error::invalid(format!(
            "resource vtable is {size} bytes, at least {} are required",
            std::mem::size_of::<rmm_resource_vtable>()
        )));
    }
    // SAFETY: the vtable claims (and the caller guarantees) the full size.
    let v = unsafe { &*handle.vtable };
    Fns::of(v).map(|_| ()).ok_or_else(|| Error::invalid("resource vtable has a NULL function pointer"))
}

/// The entries of a handle that passes [`check_handle`].
///
/// # Safety
/// As for [`check_handle`].
unsafe fn checked_fns(handle: &rmm_resource) -> Result<Fns> {
    if !handle.vtable.is_null() {
        // SAFETY: non-NULL; the first 8 bytes (version and size) are always present.
        let (version, size) = unsafe { ((*handle.vtable).abi_version, (*handle.vtable).size) };
        if version == RMM_ABI_VERSION && size as usize >= std::mem::size_of::<rmm_resource_vtable>() {
            // SAFETY: the vtable claims (and the caller guarantees) the full size. On every call
            // through the C ABI: one pass over the entries, no formatting unless one is missing.
            if let Some(fns) = Fns::of(unsafe { &*handle.vtable }) {
                return Ok(fns);
            }
        }
    }
    // SAFETY: caller contract. Only reached for a bad handle: says what is wrong with it.
    unsafe { check_handle(handle)? };
    Err(Error::invalid("resource vtable has a NULL function pointer"))
}

/// The entries of a checked foreign vtable.
#[derive(Clone, Copy)]
struct Fns {
    retain: RetainFn,
    release: RetainFn,
    allocate: AllocateFn,
    deallocate: DeallocateFn,
    allocate_sync: AllocateSyncFn,
    deallocate_sync: DeallocateSyncFn,
    access: AccessFn,
    name: NameFn,
    is_equal: IsEqualFn,
}

impl Fns {
    fn of(v: &rmm_resource_vtable) -> Option<Fns> {
        Some(Fns {
            retain: v.retain?,
            release: v.release?,
            allocate: v.allocate?,
            deallocate: v.deallocate?,
            allocate_sync: v.allocate_sync?,
            deallocate_sync: v.deallocate_sync?,
            access: v.access?,
            name: v.name?,
            is_equal: v.is_equal?,
        })
    }
}

/// A resource implemented elsewhere (C, C++, another binary's rmm-core), held through its handle.
///
/// Holds one reference, released on drop. Every operation calls through the vtable; errors come
/// back as [`Error`] values ([`error_from_c`]). It compares equal to foreign resources its vtable's
/// `is_equal` accepts, and to nothing native to this binary (a native resource cannot be a foreign
/// one's alias: handles of this binary are always unwrapped, never wrapped).
pub struct ForeignResource {
    handle: rmm_resource,
    fns: Fns,
    access: Access,
    name: OnceLock<String>,
}

// SAFETY: the ABI requires resources to be usable from any thread (rmm_c.h, rmm_resource_vtable).
unsafe impl Send for ForeignResource {}
// SAFETY: as above: every entry may be called concurrently.
unsafe impl Sync for ForeignResource {}

impl ForeignResource {
    /// Takes ownership of one reference of `handle`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid handle, which is then not consumed.
    ///
    /// # Safety
    /// `handle` is an owning, live handle (or fails [`check_handle`]) whose vtable outlives it.
    pub unsafe fn from_handle(handle: rmm_resource) -> Result<Self> {
        // SAFETY: caller contract.
        let fns = unsafe { checked_fns(&handle)? };
        // SAFETY: checked just above; ownership passes to the new value.
        Ok(unsafe { Self::adopt(handle, fns) })
    }

    /// Adopts a checked, owning handle.
    ///
    /// # Safety
    /// `handle` is owning and live; `fns` are its entries.
    unsafe fn adopt(handle: rmm_resource, fns: Fns) -> Self {
        // SAFETY: live handle.
        let bits = unsafe { (fns.access)(handle.self_) };
        Self { handle, fns, access: Access::from_bits(bits as u8), name: OnceLock::new() }
    }

    /// Retains a borrowed, checked handle and adopts the new reference.
    ///
    /// # Safety
    /// `handle` is live; `fns` are its entries.
    unsafe fn retained(handle: rmm_resource, fns: Fns) -> Self {
        // SAFETY: live handle; the new reference is adopted.
        unsafe {
            (fns.retain)(handle.self_);
            Self::adopt(handle, fns)
        }
    }

    /// The wrapped handle, borrowed: valid while `self` lives; do not release it.
    pub fn handle(&self) -> rmm_resource {
        self.handle
    }

    fn retain(&self) {
        // SAFETY: we hold a reference, so the handle is live.
        unsafe { (self.fns.retain)(self.handle.self_) }
    }

    fn fail(&self, status: c_int, err: &rmm_error, call: &'static str) -> Error {
        error_from_c(status, err, self.name(), call)
    }
}

impl Drop for ForeignResource {
    fn drop(&mut self) {
        // SAFETY: we own one reference and give it back exactly once.
        unsafe { (self.fns.release)(self.handle.self_) }
    }
}

impl std::fmt::Debug for ForeignResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ForeignResource({}, {}, {:?})", self.name(), self.access, self.handle.self_)
    }
}

impl MemoryResource for ForeignResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let mut err = rmm_error::new();
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle; valid out-pointers.
        let status = unsafe {
            (self.fns.allocate)(self.handle.self_, stream.as_raw() as *mut c_void, bytes, alignment, &mut out, &mut err)
        };
        if status == RMM_OK {
            Ok(out.cast())
        } else {
            Err(self.fail(status, &err, "rmm_resource_vtable.allocate"))
        }
    }

    unsafe fn deallocate(&self, stream: Stream, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        let mut err = rmm_error::new();
        // SAFETY: live handle; the caller's contract on `ptr` is forwarded.
        let status = unsafe {
            (self.fns.deallocate)(
                self.handle.self_,
                stream.as_raw() as *mut c_void,
                ptr.cast(),
                bytes,
                alignment,
                &mut err,
            )
        };
        if status == RMM_OK {
            Ok(())
        } else {
            Err(self.fail(status, &err, "rmm_resource_vtable.deallocate"))
        }
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let mut err = rmm_error::new();
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle; valid out-pointers.
        let status = unsafe { (self.fns.allocate_sync)(self.handle.self_, bytes, alignment, &mut out, &mut err) };
        if status == RMM_OK {
            Ok(out.cast())
        } else {
            Err(self.fail(status, &err, "rmm_resource_vtable.allocate_sync"))
        }
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        let mut err = rmm_error::new();
        // SAFETY: live handle; the caller's contract on `ptr` is forwarded.
        let status =
            unsafe { (self.fns.deallocate_sync)(self.handle.self_, ptr.cast(), bytes, alignment, &mut err) };
        if status == RMM_OK {
            Ok(())
        } else {
            Err(self.fail(status, &err, "rmm_resource_vtable.deallocate_sync"))
        }
    }

    fn access(&self) -> Access {
        self.access
    }

    fn name(&self) -> &str {
        self.name.get_or_init(|| {
            // SAFETY: live handle; the name is valid while the resource lives, and copied here.
            let p = unsafe { (self.fns.name)(self.handle.self_) };
            if p.is_null() {
                "<unnamed foreign resource>".to_owned()
            } else {
                // SAFETY: non-NULL NUL-terminated string (ABI contract).
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        })
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        let Some(other) = downcast::<ForeignResource>(other) else {
            return false;
        };
        if self.handle == other.handle {
            return true;
        }
        // SAFETY: both handles are live while we hold them.
        unsafe { (self.fns.is_equal)(self.handle.self_, other.handle.self_, other.handle.vtable) != 0 }
    }

}

impl AnyResource {
    /// A borrowed handle: valid while `self` (or a clone) lives; the callee must retain it to keep it.
    /// For a [`ForeignResource`] this is the original handle.
    pub fn borrow_handle(&self) -> rmm_resource {
        if let Some(foreign) = (self.inner.as_ref() as &dyn Any).downcast_ref::<ForeignResource>() {
            return foreign.handle;
        }
        rmm_resource { self_: Arc::as_ptr(&self.inner) as *const () as *mut c_void, vtable: &self.vtable.c }
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
        rmm_resource { self_: Arc::into_raw(self.inner) as *const () as *mut c_void, vtable }
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
            let inner = unsafe { (rust.into_arc)(handle.self_) };
            AnyResource { inner, vtable: rust }
        } else {
            // SAFETY: valid (caller contract), so every entry is present.
            let fns = Fns::of(vtable).expect("AnyResource::from_handle: invalid handle (see its # Safety)");
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

// ---------------------------------------------------------------------------------------------
// The C entry points. librmm (crate rmm-cpp) exports each under its own name.
// ---------------------------------------------------------------------------------------------

/// Writes `value` to a non-NULL out-pointer, or fails.
///
/// # Safety
/// `out` is NULL or valid for writes.
unsafe fn put<T>(out: *mut T, value: T, what: &str) -> Result<()> {
    // SAFETY: caller contract.
    match unsafe { out.as_mut() } {
        Some(slot) => {
            *slot = value;
            Ok(())
        }
        None => Err(null_out(what)),
    }
}

/// Clears a handle out-pointer (if any) so it holds `{NULL, NULL}` on failure.
///
/// # Safety
/// `out` is NULL or valid for writes.
unsafe fn clear_out(out: *mut rmm_resource) {
    // SAFETY: caller contract.
    if let Some(slot) = unsafe { out.as_mut() } {
        *slot = rmm_resource::NULL;
    }
}

/// Hands `previous` to an optional out-pointer, or drops it (releasing its reference).
///
/// # Safety
/// `previous_out` is NULL or valid for writes.
unsafe fn give_previous(previous_out: *mut rmm_resource, previous: AnyResource) {
    // SAFETY: caller contract.
    if let Some(slot) = unsafe { previous_out.as_mut() } {
        *slot = previous.into_handle();
    }
}

/// `RMM_ABI_VERSION` of this library.
pub extern "C" fn rmm_abi_version() -> u32 {
    RMM_ABI_VERSION
}

/// The owner tag of this library's handles (compare with `vtable->owner`).
pub extern "C" fn rmm_abi_owner() -> *const c_void {
    owner_tag()
}

/// 1 in host mode (no CUDA driver or no device), else 0.
pub extern "C" fn rmm_is_host_mode() -> c_int {
    catch_unwind(cuda::is_host_mode).map(c_int::from).unwrap_or(1)
}

/// A static string naming an `RMM_*` status, e.g. `"RMM_ERROR_OUT_OF_MEMORY"`.
pub extern "C" fn rmm_error_kind_name(kind: c_int) -> *const c_char {
    match kind {
        RMM_OK => c"RMM_OK",
        RMM_ERROR_OUT_OF_MEMORY => c"RMM_ERROR_OUT_OF_MEMORY",
        RMM_ERROR_CUDA => c"RMM_ERROR_CUDA",
        RMM_ERROR_INVALID_ARGUMENT => c"RMM_ERROR_INVALID_ARGUMENT",
        RMM_ERROR_NO_DRIVER => c"RMM_ERROR_NO_DRIVER",
        RMM_ERROR_NO_DEVICE => c"RMM_ERROR_NO_DEVICE",
        RMM_ERROR_UNSUPPORTED => c"RMM_ERROR_UNSUPPORTED",
        RMM_ERROR_PANIC => c"RMM_ERROR_PANIC",
        _ => c"RMM_ERROR_UNKNOWN",
    }
    .as_ptr()
}

/// The resource of `device` (an owning handle in `*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_get_per_device_resource(
    device: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        clear_out(out);
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            let r = registry::per_device_resource(device as DeviceId)?;
            put(out, r.into_handle(), "out")
        })
    }
}

/// Sets the resource of `device` (retains the borrowed `resource`); the previous one goes to
/// `*previous_out` (owning) or is released when `previous_out` is NULL.
///
/// # Safety
/// `resource` is a live handle (or invalid, which is reported); `previous_out` and `err` are NULL
/// or valid for writes.
pub unsafe extern "C" fn rmm_set_per_device_resource(
    device: c_int,
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(previous_out);
        guarded(err, || {
            let r = AnyResource::from_borrowed_handle(resource)?;
            let previous = registry::set_per_device_resource(device as DeviceId, r)?;
            give_previous(previous_out, previous);
            Ok(())
        })
    }
}

/// Resets `device` to its initial resource; the previous one goes to `*previous_out` (owning) or is
/// released when `previous_out` is NULL.
///
/// # Safety
/// `previous_out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_reset_per_device_resource(
    device: c_int,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(previous_out);
        guarded(err, || {
            let previous = registry::reset_per_device_resource(device as DeviceId)?;
            give_previous(previous_out, previous);
            Ok(())
        })
    }
}

/// [`rmm_get_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_get_per_device_resource`].
pub unsafe extern "C" fn rmm_get_current_device_resource(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(out);
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            put(out, registry::current_resource()?.into_handle(), "out")
        })
    }
}

/// [`rmm_set_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_set_per_device_resource`].
pub unsafe extern "C" fn rmm_set_current_device_resource(
    resource: rmm_resource,
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(previous_out);
        guarded(err, || {
            let r = AnyResource::from_borrowed_handle(resource)?;
            give_previous(previous_out, registry::set_current_resource(r)?);
            Ok(())
        })
    }
}

/// [`rmm_reset_per_device_resource`] on the current device (device 0 in host mode).
///
/// # Safety
/// As for [`rmm_reset_per_device_resource`].
pub unsafe extern "C" fn rmm_reset_current_device_resource(
    previous_out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(previous_out);
        guarded(err, || {
            give_previous(previous_out, registry::reset_current_resource()?);
            Ok(())
        })
    }
}

/// Adds a reference to `resource`; no-op for the empty handle.
///
/// # Safety
/// `resource` is live (or empty).
pub unsafe extern "C" fn rmm_resource_retain(resource: rmm_resource) {
    // SAFETY: caller contract; an empty or malformed handle is ignored.
    unsafe {
        if let Ok(fns) = checked_fns(&resource) {
            let _ = catch_unwind(|| (fns.retain)(resource.self_));
        }
    }
}

/// Drops a reference to `resource`; the last one frees it. No-op for the empty handle.
///
/// # Safety
/// The caller owns the reference it gives back.
pub unsafe extern "C" fn rmm_resource_release(resource: rmm_resource) {
    // SAFETY: caller contract; an empty or malformed handle is ignored.
    unsafe {
        if let Ok(fns) = checked_fns(&resource) {
            let _ = catch_unwind(|| (fns.release)(resource.self_));
        }
    }
}

/// Checks a borrowed handle and runs `f` (a vtable call that reports into `err` itself), catching
/// panics.
///
/// # Safety
/// `resource` is live or fails the check; `err` is NULL or valid.
/// The vtable of a handle made by this copy of rmm-core: complete by construction, so the hot
/// calls (allocate, deallocate) skip [`checked_fns`] for it.
///
/// # Safety
/// `resource.vtable` is NULL or points to a vtable (at least its version, size and owner fields).
unsafe fn own_vtable(resource: &rmm_resource) -> Option<&'static rmm_resource_vtable> {
    let v = resource.vtable;
    if v.is_null() {
        return None;
    }
    // SAFETY: non-NULL; every vtable starts with its version, size and owner (read as raw fields,
    // without assuming the rest is there).
    let (version, owner) =
        unsafe { (std::ptr::addr_of!((*v).abi_version).read(), std::ptr::addr_of!((*v).owner).read()) };
    // SAFETY: our owner tag means one of our static RustVTables, complete and 'static.
    (version == RMM_ABI_VERSION && owner == owner_tag()).then(|| unsafe { &*v })
}

unsafe fn with_vtable(
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

/// Allocates `bytes` from `resource` on `stream` (`cudaStream_t`, NULL = default stream) into `*out`.
///
/// # Safety
/// `resource` is live; `stream` is a valid stream; `out` and `err` are NULL or valid for writes.
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
pub unsafe extern "C" fn rmm_resource_is_equal(a: rmm_resource, b: rmm_resource) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        let (Ok(fns), Ok(_)) = (checked_fns(&a), check_handle(&b)) else {
            return 0;
        };
        if a == b {
            return 1;
        }
        catch_unwind(|| (fns.is_equal)(a.self_, b.self_, b.vtable)).map(|v| c_int::from(v != 0)).unwrap_or(0)
    }
}

/// A new `cuda_memory_resource` (owning handle in `*out`). Succeeds in host mode too; allocating
/// from it there fails with `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_cuda_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(out);
        guarded(err, || put(out, AnyResource::new(CudaMemoryResource::new()).into_handle(), "out"))
    }
}

/// A new `system_memory_resource` (owning handle in `*out`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_system_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        clear_out(out);
        guarded(err, || put(out, AnyResource::new(SystemMemoryResource::new()).into_handle(), "out"))
    }
}

// ---------------------------------------------------------------------------------------------
// The client side: another binary's registry entry points.
// ---------------------------------------------------------------------------------------------

/// `int rmm_get_per_device_resource(int, rmm_resource*, rmm_error*)`.
pub type GetPerDeviceFn = unsafe extern "C" fn(c_int, *mut rmm_resource, *mut rmm_error) -> c_int;
/// `int rmm_set_per_device_resource(int, rmm_resource, rmm_resource*, rmm_error*)`.
pub type SetPerDeviceFn = unsafe extern "C" fn(c_int, rmm_resource, *mut rmm_resource, *mut rmm_error) -> c_int;
/// `int rmm_reset_per_device_resource(int, rmm_resource*, rmm_error*)`.
pub type ResetPerDeviceFn = unsafe extern "C" fn(c_int, *mut rmm_resource, *mut rmm_error) -> c_int;

/// The registry entry points of a registry owner (librmm), as function pointers.
#[derive(Clone, Copy, Debug)]
pub struct OwnerTable {
    /// The owner's `rmm_abi_owner()`: the tag of its handles.
    pub owner: *const c_void,
    /// `rmm_get_per_device_resource`.
    pub get_per_device_resource: GetPerDeviceFn,
    /// `rmm_set_per_device_resource`.
    pub set_per_device_resource: SetPerDeviceFn,
    /// `rmm_reset_per_device_resource`.
    pub reset_per_device_resource: ResetPerDeviceFn,
}

// SAFETY: function pointers and a tag compared by address only; the entry points are thread-safe.
unsafe impl Send for OwnerTable {}
// SAFETY: as above.
unsafe impl Sync for OwnerTable {}

impl OwnerTable {
    /// This binary's own entry points (what librmm would export if this binary were librmm).
    pub fn local() -> Self {
        Self {
            owner: owner_tag(),
            get_per_device_resource: rmm_get_per_device_resource,
            set_per_device_resource: rmm_set_per_device_resource,
            reset_per_device_resource: rmm_reset_per_device_resource,
        }
    }

    /// True when these are this copy of rmm-core's own entry points (then routing to them would loop).
    pub fn is_local(&self) -> bool {
        self.owner == owner_tag()
    }
}

/// The SONAME of the registry owner.
pub const OWNER_SONAME: &CStr = c"librmm.so";

/// Finds an already-loaded registry owner other than this binary: first the library loaded under
/// [`OWNER_SONAME`] (found even when it was loaded `RTLD_LOCAL`, e.g. as a Python extension's
/// dependency), then any `rmm_*` entry points in the global scope (`dlsym(RTLD_DEFAULT)`).
///
/// Returns `None` when none is loaded, when the one found is this binary itself, or when its
/// `rmm_abi_version()` differs from ours. Never loads anything: a library found this way stays
/// loaded for the rest of the process (its handle is never closed).
pub fn find_loaded_owner() -> Option<OwnerTable> {
    // SAFETY: RTLD_NOLOAD only looks up an already-loaded object; the name is NUL-terminated.
    let lib = unsafe { libc::dlopen(OWNER_SONAME.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if !lib.is_null() {
        // SAFETY: `lib` is a valid handle, kept open forever.
        match unsafe { owner_table_from(lib) } {
            Some(table) if table.is_local() => return None,
            Some(table) => return Some(table),
            None => {}
        }
    }
    // SAFETY: RTLD_DEFAULT searches the global scope.
    match unsafe { owner_table_from(libc::RTLD_DEFAULT) } {
        Some(table) if !table.is_local() => Some(table),
        _ => None,
    }
}

/// The owner table exported by `lib`, if complete and of our ABI version.
///
/// # Safety
/// `lib` is a valid `dlopen` handle or a pseudo-handle such as `RTLD_DEFAULT`.
unsafe fn owner_table_from(lib: *mut c_void) -> Option<OwnerTable> {
    // SAFETY: dlsym with NUL-terminated names; a non-NULL result is the exported function of that
    // name, whose signature rmm_c.h fixes.
    unsafe {
        let sym = |name: &CStr| {
            let p = libc::dlsym(lib, name.as_ptr());
            (!p.is_null()).then_some(p)
        };
        let version: extern "C" fn() -> u32 = std::mem::transmute(sym(c"rmm_abi_version")?);
        if version() != RMM_ABI_VERSION {
            return None;
        }
        let owner: extern "C" fn() -> *const c_void = std::mem::transmute(sym(c"rmm_abi_owner")?);
        Some(OwnerTable {
            owner: owner(),
            get_per_device_resource: std::mem::transmute::<*mut c_void, GetPerDeviceFn>(sym(
                c"rmm_get_per_device_resource",
            )?),
            set_per_device_resource: std::mem::transmute::<*mut c_void, SetPerDeviceFn>(sym(
                c"rmm_set_per_device_resource",
            )?),
            reset_per_device_resource: std::mem::transmute::<*mut c_void, ResetPerDeviceFn>(sym(
                c"rmm_reset_per_device_resource",
            )?),
        })
    }
}

mod resources;
pub use resources::*;
mod stream;
pub use stream::*;
mod buffer;
pub use buffer::*;
mod device;
pub use device::*;

#[cfg(test)]
mod tests;
