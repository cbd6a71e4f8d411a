//! The object model: [`MemoryResource`], [`Access`], [`AnyResource`] and [`ResourceRef`].
//!
//! It mirrors CCCL's `cuda::mr`:
//! - a *resource* hands out memory with stream-ordered `allocate(stream, bytes, alignment)` /
//!   `deallocate(...)` and synchronous `allocate_sync` / `deallocate_sync`;
//! - its *access* says who may touch the memory (device, host, or both);
//! - [`AnyResource`] is the owning, type-erased handle (`cuda::mr::any_resource`): cloning shares
//!   ownership, so an adaptor or a buffer keeps its resource alive for as long as it needs it;
//! - [`ResourceRef`] is the borrowed one (`cuda::mr::resource_ref`).
//!
//! Invariants every implementation keeps:
//! - errors are values: bad input and exhaustion return [`Error`], never panic;
//! - `bytes == 0` is legal and returns a null pointer; deallocating null is a no-op;
//! - alignment must be a power of two ([`Error::InvalidArgument`] otherwise); the default is 256;
//! - stateless resources compare equal to every instance of their type; stateful ones share their
//!   state between clones and compare equal only to clones of themselves.
//!
//! How a resource crosses into C, C++ and other binaries (the handle protocol of `rmm_c.h`) lives
//! here too, one room each: [`handle`] (the handle, its vtables, and [`AnyResource`]'s conversions),
//! `cell` (the handle cells behind our handles' `self`, which make a released handle an error),
//! [`foreign`] (handles made elsewhere), [`status`] (status codes and error details) and [`guard`]
//! (what every exported C entry point needs). The entry points themselves are librmm's
//! (`bindings-cpp/src/`).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::cuda::Stream;
use crate::error::{Error, Result};

pub use crate::aligned::DEFAULT_ALIGNMENT;

pub(crate) mod cell;
pub mod foreign;
pub mod guard;
pub mod handle;
pub mod status;

pub use foreign::ForeignResource;
pub use handle::{rmm_resource, rmm_resource_vtable};
pub use status::rmm_error;

#[cfg(test)]
mod protocol_tests;

/// Who can access a resource's memory (CCCL's `device_accessible` / `host_accessible` properties).
///
/// ```
/// use rmm_core::Access;
/// assert!(Access::HOST_DEVICE.contains(Access::DEVICE));
/// assert!(!Access::HOST.contains(Access::DEVICE));
/// assert_eq!(Access::HOST_DEVICE.to_string(), "host+device");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u8);

impl Access {
    /// Accessible by nobody (only useful as an empty requirement).
    pub const NONE: Access = Access(0);
    /// Device-accessible.
    pub const DEVICE: Access = Access(1);
    /// Host-accessible.
    pub const HOST: Access = Access(2);
    /// Host- and device-accessible.
    pub const HOST_DEVICE: Access = Access(3);

    /// True when device code may access the memory.
    pub const fn device(self) -> bool {
        self.0 & Self::DEVICE.0 != 0
    }

    /// True when host code may access the memory.
    pub const fn host(self) -> bool {
        self.0 & Self::HOST.0 != 0
    }

    /// True when every property in `required` is present.
    pub const fn contains(self, required: Access) -> bool {
        self.0 & required.0 == required.0
    }

    /// Both sets of properties.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    /// The bit set (bit 0 device, bit 1 host), as the C ABI carries it.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The inverse of [`Access::bits`]; unknown bits are dropped.
    pub const fn from_bits(bits: u8) -> Access {
        Access(bits & 3)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.host(), self.device()) {
            (true, true) => "host+device",
            (false, true) => "device",
            (true, false) => "host",
            (false, false) => "none",
        })
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Access({self})")
    }
}

/// A stream-ordered memory resource.
///
/// Implementations are `Send + Sync`: one resource serves every thread and stream.
///
/// # Stream ordering
/// Memory from `allocate(stream, ..)` may be used by work on `stream` right away; other streams must
/// synchronize with `stream` first. `deallocate(stream, ..)` may reuse the memory for work ordered
/// after the work already queued on `stream`.
pub trait MemoryResource: Any + Send + Sync {
    /// Allocates `bytes` bytes aligned to `alignment`, usable on `stream`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the resource is exhausted, [`Error::InvalidArgument`] for an
    /// alignment that is not a power of two (or unsupported by this resource), driver errors.
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8>;

    /// Returns memory to the resource, ordered on `stream`.
    ///
    /// # Safety
    /// `ptr` must come from `allocate` (or `allocate_sync`) of this resource, or of one equal to it,
    /// with the same `bytes` and `alignment`, and must not be used after the work queued on `stream`.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()>;

    /// Allocates memory that is usable on every stream as soon as this returns.
    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let ptr = self.allocate(Stream::DEFAULT, bytes, alignment)?;
        if let Err(e) = Stream::DEFAULT.synchronize() {
            // SAFETY: `ptr` was just allocated with these arguments and never handed out.
            let _ = unsafe { self.deallocate(Stream::DEFAULT, ptr, bytes, alignment) };
            return Err(e);
        }
        Ok(ptr)
    }

    /// Returns memory that no queued work uses any more.
    ///
    /// # Safety
    /// As for [`MemoryResource::deallocate`], and no pending work may still use the memory.
    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // SAFETY: forwarded caller contract; with nothing pending, default-stream order is immediate.
        unsafe { self.deallocate(Stream::DEFAULT, ptr, bytes, alignment) }
    }

    /// Who can access the memory this resource hands out.
    fn access(&self) -> Access;

    /// RMM's name for the resource, e.g. `"cuda_memory_resource"`.
    fn name(&self) -> &str;

    /// True when memory from `self` may be returned to `other` and vice versa.
    fn is_equal(&self, other: &dyn MemoryResource) -> bool;

    /// The resource this one allocates from (RMM's `get_upstream_resource`) when it is an adaptor
    /// or a sub-allocator; `None` for a resource without one (the default).
    ///
    /// ```
    /// use rmm_core::{AnyResource, MemoryResource, mr::{StatisticsResourceAdaptor, SystemMemoryResource}};
    /// let system = AnyResource::new(SystemMemoryResource::new());
    /// let stats = AnyResource::new(StatisticsResourceAdaptor::new(system.clone()));
    /// assert!(MemoryResource::upstream(&stats).is_some_and(|up| up.ptr_eq(&system)));
    /// assert!(MemoryResource::upstream(&system).is_none());
    /// ```
    fn upstream(&self) -> Option<&AnyResource> {
        None
    }

    /// Whether `ptr` is a live allocation of this resource that a free with `bytes` and
    /// `alignment` would name: `Some(true)` when it is (sizes compared as `deallocate` compares
    /// them), `Some(false)` when it is not, `None` when the resource keeps no record of what it
    /// handed out (the default). An importer of a buffer described by another binary asks it
    /// before adopting `(data, capacity)`.
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Option<bool> {
        let _ = (ptr, bytes, alignment);
        None
    }
}

/// `other` as an `R`, looking through [`AnyResource`] wrappers (CCCL's `resource_cast`).
///
/// ```
/// use rmm_core::{downcast, AnyResource, mr::SystemMemoryResource};
/// let any = AnyResource::new(SystemMemoryResource::new());
/// assert!(downcast::<SystemMemoryResource>(&any).is_some());
/// ```
pub fn downcast<R: MemoryResource>(resource: &dyn MemoryResource) -> Option<&R> {
    let mut current = resource;
    loop {
        if let Some(r) = (current as &dyn Any).downcast_ref::<R>() {
            return Some(r);
        }
        match (current as &dyn Any).downcast_ref::<AnyResource>() {
            Some(any) => current = any.inner.as_ref(),
            None => return None,
        }
    }
}

/// The owning, type-erased, cheaply cloned resource handle (CCCL's `any_resource`).
///
/// Cloning shares ownership: the resource lives until the last clone (in any language) is dropped.
///
/// It also carries the C ABI vtable of its concrete type (see [`handle`]), so it can cross into
/// C, C++ or another binary as an `rmm_resource` handle without a copy or a second wrapper
/// ([`AnyResource::into_handle`], [`AnyResource::from_handle`]).
///
/// ```
/// use rmm_core::{AnyResource, MemoryResource, cuda::Stream, mr::SystemMemoryResource};
/// let mr = AnyResource::new(SystemMemoryResource::new());
/// let p = mr.allocate(Stream::DEFAULT, 1024, 256).unwrap();
/// assert_eq!(p as usize % 256, 0);
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1024, 256).unwrap() };
/// assert!(mr.access().host());
/// ```
#[derive(Clone)]
pub struct AnyResource {
    pub(crate) inner: Arc<dyn MemoryResource>,
    /// The C ABI vtable of the concrete type behind `inner` (one static per type).
    pub(crate) vtable: &'static handle::RustVTable,
}

impl AnyResource {
    /// Wraps `resource`. Wrapping an `AnyResource` returns a clone of it, not a second layer.
    pub fn new<R: MemoryResource>(resource: R) -> Self {
        if let Some(any) = (&resource as &dyn Any).downcast_ref::<AnyResource>() {
            return any.clone();
        }
        crate::debug_log::init_from_env();
        Self {
            inner: Arc::new(resource),
            vtable: handle::vtable_for::<R>(),
        }
    }

    /// Wraps an already shared resource without copying it.
    pub fn from_arc<R: MemoryResource>(resource: Arc<R>) -> Self {
        crate::debug_log::init_from_env();
        Self {
            inner: resource,
            vtable: handle::vtable_for::<R>(),
        }
    }

    /// Wraps `resource` after checking it provides `required` access
    /// (a host-only resource cannot become a device-accessible `AnyResource`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the resource and the missing property.
    pub fn with_access<R: MemoryResource>(resource: R, required: Access) -> Result<Self> {
        let any = Self::new(resource);
        any.require(required)?;
        Ok(any)
    }

    /// Checks that this resource provides `required` access.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the resource and the missing property.
    pub fn require(&self, required: Access) -> Result<()> {
        let access = self.access();
        if access.contains(required) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{} is {access}-accessible, but {required}-accessible memory is required",
                self.name()
            )))
        }
    }

    /// The resource as `R`, if it is one (CCCL's `resource_cast`).
    pub fn downcast_ref<R: MemoryResource>(&self) -> Option<&R> {
        downcast::<R>(self.inner.as_ref())
    }

    /// A borrowed reference.
    pub fn as_resource_ref(&self) -> ResourceRef<'_> {
        ResourceRef {
            inner: self.inner.as_ref(),
        }
    }

    /// True when both handles share one resource object.
    pub fn ptr_eq(&self, other: &AnyResource) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The number of owners, in every language (for tests and diagnostics).
    pub fn owner_count(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The shared inner resource.
    pub fn as_arc(&self) -> &Arc<dyn MemoryResource> {
        &self.inner
    }
}

impl fmt::Debug for AnyResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "AnyResource({}, {})",
            self.inner.name(),
            self.inner.access()
        )
    }
}

impl PartialEq for AnyResource {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.inner.is_equal(other.inner.as_ref())
    }
}

impl MemoryResource for AnyResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.inner.allocate(stream, bytes, alignment)
    }
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate(stream, ptr, bytes, alignment) }
    }
    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.inner.allocate_sync(bytes, alignment)
    }
    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate_sync(ptr, bytes, alignment) }
    }
    fn access(&self) -> Access {
        self.inner.access()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        let other = match (other as &dyn Any).downcast_ref::<AnyResource>() {
            Some(any) => any.inner.as_ref(),
            None => other,
        };
        self.inner.is_equal(other)
    }
    fn upstream(&self) -> Option<&AnyResource> {
        self.inner.upstream()
    }

    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Option<bool> {
        self.inner.is_live_allocation(ptr, bytes, alignment)
    }
}

/// A borrowed, type-erased resource (CCCL's `resource_ref`). `Copy`; cannot outlive the resource.
#[derive(Clone, Copy)]
pub struct ResourceRef<'a> {
    inner: &'a dyn MemoryResource,
}

impl<'a> ResourceRef<'a> {
    /// Borrows `resource`.
    pub fn new<R: MemoryResource>(resource: &'a R) -> Self {
        Self { inner: resource }
    }

    /// Borrows `resource` after checking it provides `required` access.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the missing property.
    pub fn with_access<R: MemoryResource>(resource: &'a R, required: Access) -> Result<Self> {
        let r = Self::new(resource);
        if !r.access().contains(required) {
            return Err(Error::invalid(format!(
                "{} is {}-accessible, but {required}-accessible memory is required",
                r.name(),
                r.access()
            )));
        }
        Ok(r)
    }

    /// The referenced resource as a trait object.
    pub fn get(self) -> &'a dyn MemoryResource {
        self.inner
    }

    /// The resource as `R`, if it is one.
    pub fn downcast_ref<R: MemoryResource>(self) -> Option<&'a R> {
        downcast::<R>(self.inner)
    }
}

impl std::ops::Deref for ResourceRef<'_> {
    type Target = dyn MemoryResource;
    fn deref(&self) -> &Self::Target {
        self.inner
    }
}

impl fmt::Debug for ResourceRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourceRef({}, {})",
            self.inner.name(),
            self.inner.access()
        )
    }
}

impl PartialEq for ResourceRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.inner.is_equal(other.inner)
    }
}

impl<'a> From<&'a AnyResource> for ResourceRef<'a> {
    fn from(any: &'a AnyResource) -> Self {
        any.as_resource_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::SystemMemoryResource;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A host resource that counts calls and claims whatever access it is told to.
    struct Probe {
        access: Access,
        live: AtomicUsize,
    }

    impl MemoryResource for Probe {
        fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
            let p = SystemMemoryResource::new().allocate(stream, bytes, alignment)?;
            self.live.fetch_add(1, Ordering::SeqCst);
            Ok(p)
        }
        unsafe fn deallocate(
            &self,
            stream: Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            self.live.fetch_sub(1, Ordering::SeqCst);
            // SAFETY: forwarded; Probe allocates from the system resource.
            unsafe { SystemMemoryResource::new().deallocate(stream, ptr, bytes, alignment) }
        }
        fn access(&self) -> Access {
            self.access
        }
        fn name(&self) -> &str {
            "probe"
        }
        fn is_equal(&self, other: &dyn MemoryResource) -> bool {
            std::ptr::eq(
                self as *const Self as *const u8,
                other as *const dyn MemoryResource as *const u8,
            )
        }
    }

    fn probe(access: Access) -> Probe {
        Probe {
            access,
            live: AtomicUsize::new(0),
        }
    }

    #[test]
    fn access_algebra() {
        assert_eq!(Access::HOST.union(Access::DEVICE), Access::HOST_DEVICE);
        assert!(Access::HOST_DEVICE.contains(Access::HOST));
        assert!(Access::DEVICE.contains(Access::NONE));
        assert!(!Access::DEVICE.contains(Access::HOST));
        assert_eq!(Access::from_bits(Access::DEVICE.bits()), Access::DEVICE);
        assert_eq!(Access::from_bits(0xff), Access::HOST_DEVICE);
        assert_eq!(Access::NONE.to_string(), "none");
    }

    #[test]
    fn host_only_resource_cannot_become_device_accessible() {
        let err = AnyResource::with_access(probe(Access::HOST), Access::DEVICE).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidArgument(_)));
        assert!(text.contains("probe") && text.contains("device"), "{text}");
        let host = probe(Access::HOST);
        assert!(ResourceRef::with_access(&host, Access::DEVICE).is_err());
        assert!(ResourceRef::with_access(&host, Access::HOST).is_ok());
        assert!(AnyResource::with_access(probe(Access::HOST_DEVICE), Access::DEVICE).is_ok());
    }

    #[test]
    fn clones_share_one_resource() {
        let a = AnyResource::new(probe(Access::HOST));
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        assert_eq!(a, b);
        assert_eq!(a.owner_count(), 2);
        let p = b.allocate(Stream::DEFAULT, 64, 64).unwrap();
        assert_eq!(
            a.downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            1
        );
        // SAFETY: p came from the same shared resource with these arguments.
        unsafe { a.deallocate(Stream::DEFAULT, p, 64, 64).unwrap() };
        assert_eq!(
            b.downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
        drop(b);
        assert_eq!(a.owner_count(), 1);
    }

    #[test]
    fn wrapping_an_any_resource_does_not_nest() {
        let a = AnyResource::new(probe(Access::HOST));
        let b = AnyResource::new(a.clone());
        assert!(a.ptr_eq(&b));
        assert!(b.downcast_ref::<Probe>().is_some());
    }

    #[test]
    fn distinct_stateful_resources_are_unequal() {
        let a = AnyResource::new(probe(Access::HOST));
        let b = AnyResource::new(probe(Access::HOST));
        assert_ne!(a, b);
        assert!(a.is_equal(&a.clone()));
        assert!(!a.is_equal(&b));
    }

    #[test]
    fn resource_ref_borrows_and_compares() {
        let sys = SystemMemoryResource::new();
        let r = ResourceRef::new(&sys);
        let any = AnyResource::new(SystemMemoryResource::new());
        assert_eq!(
            r,
            ResourceRef::from(&any),
            "stateless resources of one type are equal"
        );
        assert_eq!(r.name(), "system_memory_resource");
        assert!(r.downcast_ref::<SystemMemoryResource>().is_some());
        assert!(r.downcast_ref::<Probe>().is_none());
        assert!(format!("{r:?}").contains("system_memory_resource"));
    }

    #[test]
    fn allocate_sync_round_trips() {
        let any = AnyResource::new(probe(Access::HOST));
        let p = any.allocate_sync(100, 8).unwrap();
        assert!(!p.is_null());
        // SAFETY: from allocate_sync with these arguments; no pending work.
        unsafe { any.deallocate_sync(p, 100, 8).unwrap() };
        assert_eq!(
            any.downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
    }
}
