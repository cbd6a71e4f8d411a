//! Handles made elsewhere (C, C++, another binary's rmm-core): their checks ([`check_handle`]) and
//! the [`ForeignResource`] that holds one.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use super::handle::{
    owner_tag, rmm_resource, rmm_resource_vtable, AccessFn, AllocateFn, AllocateSyncFn,
    DeallocateFn, DeallocateSyncFn, IsEqualFn, NameFn, RetainFn, RustVTable, RMM_ABI_VERSION,
};
use super::status::{error_from_c, rmm_error, ErrorOut, RMM_OK};
use super::{downcast, Access, MemoryResource};
use crate::cuda::Stream;
use crate::error::{Error, Result};

/// Calls `f` with the resource behind a borrowed `handle` (ours: the object itself; foreign: a
/// temporary [`ForeignResource`] holding its own reference).
///
/// # Safety
/// `handle` is live for the duration of the call.
pub unsafe fn with_borrowed<T>(
    handle: rmm_resource,
    f: impl FnOnce(&dyn MemoryResource) -> T,
) -> Result<T> {
    // SAFETY: caller contract.
    let fns = unsafe { checked_fns(&handle)? };
    // SAFETY: checked non-NULL; live (caller contract).
    let vtable = unsafe { &*handle.vtable };
    if vtable.owner == owner_tag() {
        // SAFETY: our owner tag means this is a RustVTable and `self_` a live object of its type.
        let rust = unsafe { &*(handle.vtable as *const RustVTable) };
        // SAFETY: as above; the object outlives this call.
        Ok(f(unsafe { &*(rust.as_dyn)(handle.self_)? }))
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
    Fns::of(v).ok_or_else(|| Error::invalid("resource vtable has a NULL function pointer"))?;
    // SAFETY: caller contract.
    unsafe { check_own_self(handle) }
}

/// For a handle of this copy of rmm-core: its `self` is a live handle cell (not released).
///
/// # Safety
/// `handle.vtable` is non-NULL and complete (checked); a handle of ours has a `self` made here.
unsafe fn check_own_self(handle: &rmm_resource) -> Result<()> {
    // SAFETY: caller contract.
    if unsafe { (*handle.vtable).owner } == owner_tag() {
        // SAFETY: our vtable, so `self` is one of our cell tokens (maybe stale).
        unsafe { super::cell::resolve(handle.self_)? };
    }
    Ok(())
}

/// The entries of a handle that passes [`check_handle`].
///
/// # Safety
/// As for [`check_handle`].
pub unsafe fn checked_fns(handle: &rmm_resource) -> Result<Fns> {
    if !handle.vtable.is_null() {
        // SAFETY: non-NULL; the first 8 bytes (version and size) are always present.
        let (version, size) = unsafe { ((*handle.vtable).abi_version, (*handle.vtable).size) };
        if version == RMM_ABI_VERSION && size as usize >= std::mem::size_of::<rmm_resource_vtable>()
        {
            // SAFETY: the vtable claims (and the caller guarantees) the full size. On every call
            // through the C ABI: one pass over the entries, no formatting unless one is missing.
            if let Some(fns) = Fns::of(unsafe { &*handle.vtable }) {
                // SAFETY: caller contract.
                unsafe { check_own_self(handle)? };
                return Ok(fns);
            }
        }
    }
    // SAFETY: caller contract. Only reached for a bad handle: says what is wrong with it.
    unsafe { check_handle(handle)? };
    Err(Error::invalid(
        "resource vtable has a NULL function pointer",
    ))
}

/// The entries of a checked foreign vtable.
#[derive(Clone, Copy)]
pub struct Fns {
    /// Adds a reference.
    pub retain: RetainFn,
    /// Drops a reference.
    pub release: RetainFn,
    /// Stream-ordered allocation.
    pub allocate: AllocateFn,
    /// Stream-ordered deallocation.
    pub deallocate: DeallocateFn,
    /// Synchronous allocation.
    pub allocate_sync: AllocateSyncFn,
    /// Synchronous deallocation.
    pub deallocate_sync: DeallocateSyncFn,
    /// Access bits.
    pub access: AccessFn,
    /// The name.
    pub name: NameFn,
    /// Equality.
    pub is_equal: IsEqualFn,
}

impl Fns {
    pub(crate) fn of(v: &rmm_resource_vtable) -> Option<Fns> {
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
    pub(crate) handle: rmm_resource,
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
    pub(crate) unsafe fn adopt(handle: rmm_resource, fns: Fns) -> Self {
        // SAFETY: live handle.
        let bits = unsafe { (fns.access)(handle.self_) };
        Self {
            handle,
            fns,
            access: Access::from_bits(bits as u8),
            name: OnceLock::new(),
        }
    }

    /// Retains a borrowed, checked handle and adopts the new reference.
    ///
    /// # Safety
    /// `handle` is live; `fns` are its entries.
    pub(crate) unsafe fn retained(handle: rmm_resource, fns: Fns) -> Self {
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

    pub(crate) fn retain(&self) {
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
        write!(
            f,
            "ForeignResource({}, {}, {:?})",
            self.name(),
            self.access,
            self.handle.self_
        )
    }
}

impl MemoryResource for ForeignResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let mut err = ErrorOut::new();
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle; valid out-pointers.
        let status = unsafe {
            (self.fns.allocate)(
                self.handle.self_,
                stream.as_raw() as *mut c_void,
                bytes,
                alignment,
                &mut out,
                err.as_mut_ptr(),
            )
        };
        if status == RMM_OK {
            Ok(out.cast())
        } else {
            // SAFETY: the vtable's contract (rmm_c.h): a NUL-terminated message or none.
            Err(self.fail(
                status,
                &unsafe { err.read() },
                "rmm_resource_vtable.allocate",
            ))
        }
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        let mut err = ErrorOut::new();
        // SAFETY: live handle; the caller's contract on `ptr` is forwarded.
        let status = unsafe {
            (self.fns.deallocate)(
                self.handle.self_,
                stream.as_raw() as *mut c_void,
                ptr.cast(),
                bytes,
                alignment,
                err.as_mut_ptr(),
            )
        };
        if status == RMM_OK {
            Ok(())
        } else {
            // SAFETY: the vtable's contract (rmm_c.h): a NUL-terminated message or none.
            Err(self.fail(
                status,
                &unsafe { err.read() },
                "rmm_resource_vtable.deallocate",
            ))
        }
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let mut err = rmm_error::new();
        let mut out = std::ptr::null_mut();
        // SAFETY: live handle; valid out-pointers.
        let status = unsafe {
            (self.fns.allocate_sync)(self.handle.self_, bytes, alignment, &mut out, &mut err)
        };
        if status == RMM_OK {
            Ok(out.cast())
        } else {
            Err(self.fail(status, &err, "rmm_resource_vtable.allocate_sync"))
        }
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        let mut err = rmm_error::new();
        // SAFETY: live handle; the caller's contract on `ptr` is forwarded.
        let status = unsafe {
            (self.fns.deallocate_sync)(self.handle.self_, ptr.cast(), bytes, alignment, &mut err)
        };
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
        unsafe {
            (self.fns.is_equal)(self.handle.self_, other.handle.self_, other.handle.vtable) != 0
        }
    }
}
