//! The per-device current resource (RMM's `per_device_resource.hpp`).
//!
//! Every device has a current resource. An unset device lazily gets the *initial* resource: a
//! shared [`CudaMemoryResource`] when a GPU is present; in host mode (no driver or no device) only
//! device 0 exists and its initial resource is a [`SystemMemoryResource`]. Setting a resource
//! requires device access when a GPU is present and host access in host mode; setters and
//! [`reset_per_device_resource`] return the previous resource, owning, so it stays alive as long
//! as the caller keeps it.
//!
//! # One registry per process
//! The process-wide owner of this state is `librmm_rs.so` (crate `rmm-cpp`), which exports it through
//! the C ABI ([`crate::resource::handle`]). The free functions here use [`process_registry`], chosen once, at
//! first use:
//! - if another binary's registry owner is already loaded ([`owner::find_loaded_owner`]:
//!   librmm by SONAME, or `rmm_*` entry points in the global scope), an [`OwnerRegistry`] routes
//!   every call to it through the C ABI, so this binary shares the process's one registry;
//! - otherwise (librmm itself, or a Rust binary with no librmm loaded) it is a [`LocalRegistry`]:
//!   a static in *this copy* of rmm-core. Every Rust binary that links rmm-core directly has its own
//!   copy of that static; they only agree if the owner is loaded before their first registry call.
//!
//! Reads are hot (every buffer constructor asks for the current resource): a local read is one
//! uncontended `RwLock` read and one `Arc` clone.
//!
//! # Generation
//! [`generation`] changes whenever any device's resource is set or reset, in whichever language: a
//! binding that caches what it made of the current resource (Python's resource object) revalidates
//! the cache with one atomic load instead of a lookup. Through an owner it is the owner's counter
//! (`rmm_registry_generation`); an owner that does not export one (an older librmm) gives `None`,
//! and a cache must then not be trusted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use crate::cuda::{self, DeviceId};
use crate::error::{Error, Result};
use crate::mr::{CudaMemoryResource, SystemMemoryResource};
use crate::resource::handle::rmm_resource;
use crate::resource::status::{error_from_c, rmm_error, RMM_OK};
use crate::resource::{Access, AnyResource, MemoryResource};

/// Per-device current resources: the operations both the local registry and a route to the
/// process's owner provide.
pub trait Registry: Send + Sync {
    /// The current resource of `device` (lazily the initial resource).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a device that does not exist.
    fn get(&self, device: DeviceId) -> Result<AnyResource>;

    /// Makes `resource` the current resource of `device` and returns the previous one.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a device that does not exist, or for a resource without the
    /// required access (device access with a GPU, host access in host mode).
    fn set(&self, device: DeviceId, resource: AnyResource) -> Result<AnyResource>;

    /// Puts the initial resource back and returns the previous one.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a device that does not exist.
    fn reset(&self, device: DeviceId) -> Result<AnyResource>;

    /// A number that changes (after the new resource is in place) whenever [`Registry::set`] or
    /// [`Registry::reset`] succeeds for any device; `None` when this registry cannot tell, and a
    /// cache keyed on it must not be trusted.
    fn generation(&self) -> Option<u64> {
        None
    }
}

/// The registry state of this copy of rmm-core.
///
/// ```
/// use rmm_core::registry::{LocalRegistry, Registry};
/// let registry = LocalRegistry::new();
/// let initial = registry.get(0).unwrap();
/// let previous = registry.reset(0).unwrap();
/// assert!(previous.ptr_eq(&initial));
/// ```
pub struct LocalRegistry {
    layout: OnceLock<Layout>,
    forced: Option<(bool, usize)>,
    /// Bumped after every successful set or reset ([`Registry::generation`]); starts at 1, so 0
    /// can mean "unknown" in the C ABI.
    generation: AtomicU64,
}

struct Layout {
    host_mode: bool,
    required: Access,
    initial: AnyResource,
    slots: Vec<RwLock<Option<AnyResource>>>,
}

impl LocalRegistry {
    /// An empty registry; the device layout (host mode or how many GPUs) is read at first use.
    pub const fn new() -> Self {
        Self {
            layout: OnceLock::new(),
            forced: None,
            generation: AtomicU64::new(1),
        }
    }

    /// A registry with a fixed layout, whatever the machine has (to test GPU-mode rules on CPU).
    #[cfg(test)]
    pub(crate) fn with_layout(host_mode: bool, devices: usize) -> Self {
        Self {
            layout: OnceLock::new(),
            forced: Some((host_mode, devices)),
            generation: AtomicU64::new(1),
        }
    }

    fn layout(&self) -> &Layout {
        self.layout.get_or_init(|| {
            let (host_mode, devices) = self.forced.unwrap_or_else(|| {
                if cuda::is_host_mode() {
                    (true, 1)
                } else {
                    (false, cuda::device_count().unwrap_or(1).max(1) as usize)
                }
            });
            let (required, initial) = if host_mode {
                (Access::HOST, AnyResource::new(SystemMemoryResource::new()))
            } else {
                (Access::DEVICE, AnyResource::new(CudaMemoryResource::new()))
            };
            Layout {
                host_mode,
                required,
                initial,
                slots: (0..devices).map(|_| RwLock::new(None)).collect(),
            }
        })
    }

    /// True when this registry runs in host mode (device 0 only, host memory).
    pub fn is_host_mode(&self) -> bool {
        self.layout().host_mode
    }

    /// The initial resource every device starts with (and goes back to on reset).
    pub fn initial_resource(&self) -> AnyResource {
        self.layout().initial.clone()
    }
}

impl Default for LocalRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl Layout {
    fn slot(&self, device: DeviceId) -> Result<&RwLock<Option<AnyResource>>> {
        usize::try_from(device).ok().and_then(|d| self.slots.get(d)).ok_or_else(|| {
            Error::invalid(if self.host_mode {
                format!("device {device} does not exist: host mode (no CUDA driver or device) has only device 0")
            } else {
                format!("device {device} does not exist ({} device(s) present)", self.slots.len())
            })
        })
    }
}

impl Registry for LocalRegistry {
    fn get(&self, device: DeviceId) -> Result<AnyResource> {
        let layout = self.layout();
        let slot = layout.slot(device)?;
        if let Some(current) = slot.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
            return Ok(current.clone());
        }
        let mut slot = slot.write().unwrap_or_else(PoisonError::into_inner);
        Ok(slot.get_or_insert_with(|| layout.initial.clone()).clone())
    }

    fn set(&self, device: DeviceId, resource: AnyResource) -> Result<AnyResource> {
        let layout = self.layout();
        let slot = layout.slot(device)?;
        if !resource.access().contains(layout.required) {
            return Err(Error::invalid(format!(
                "cannot make {} the resource of device {device}: it is {}-accessible, but {}-accessible \
                 memory is required{}",
                resource.name(),
                resource.access(),
                layout.required,
                if layout.host_mode { " in host mode (no CUDA driver or device)" } else { "" }
            )));
        }
        // The previous resource is returned, never dropped under the lock (its drop may call
        // foreign code that comes back here).
        let previous = slot
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(resource);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(previous.unwrap_or_else(|| layout.initial.clone()))
    }

    fn reset(&self, device: DeviceId) -> Result<AnyResource> {
        let layout = self.layout();
        let slot = layout.slot(device)?;
        let previous = slot
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(layout.initial.clone());
        self.generation.fetch_add(1, Ordering::Release);
        Ok(previous.unwrap_or_else(|| layout.initial.clone()))
    }

    fn generation(&self) -> Option<u64> {
        Some(self.generation.load(Ordering::Acquire))
    }
}

/// A registry that lives in another binary (librmm), reached through its C ABI entry points.
///
/// Resources of this binary cross as handles and come back unwrapped (the same `Arc`); the owner's
/// own resources come back as [`ForeignResource`](crate::resource::ForeignResource)s.
#[derive(Debug)]
pub struct OwnerRegistry {
    table: OwnerTable,
    /// The owner's `rmm_registry_generation`, looked up at first use (`None` inside: not exported).
    generation: OnceLock<Option<GenerationFn>>,
}

/// `uint64_t rmm_registry_generation(void)`.
type GenerationFn = unsafe extern "C" fn() -> u64;

impl OwnerRegistry {
    /// Routes to the owner whose entry points are `table`.
    ///
    /// # Safety
    /// The functions in `table` are the registry entry points of `rmm_c.h` (of [`RMM_ABI_VERSION`](crate::resource::handle::RMM_ABI_VERSION))
    /// and stay loaded for as long as this value is used.
    pub unsafe fn new(table: OwnerTable) -> Self {
        Self {
            table,
            generation: OnceLock::new(),
        }
    }

    fn answer(
        &self,
        status: std::ffi::c_int,
        err: &rmm_error,
        handle: rmm_resource,
        call: &'static str,
    ) -> Result<AnyResource> {
        if status != RMM_OK {
            return Err(error_from_c(
                status,
                err,
                "the process's resource registry (librmm)",
                call,
            ));
        }
        // SAFETY: on success the owner handed us an owning handle (rmm_c.h), checked here.
        unsafe { AnyResource::try_from_handle(handle) }
    }
}

impl Registry for OwnerRegistry {
    fn get(&self, device: DeviceId) -> Result<AnyResource> {
        let (mut out, mut err) = (rmm_resource::NULL, rmm_error::new());
        // SAFETY: an entry point of the owner (constructor contract); valid out-pointers.
        let status = unsafe { (self.table.get_per_device_resource)(device, &mut out, &mut err) };
        self.answer(status, &err, out, "rmm_get_per_device_resource")
    }

    fn set(&self, device: DeviceId, resource: AnyResource) -> Result<AnyResource> {
        let (mut previous, mut err) = (rmm_resource::NULL, rmm_error::new());
        // SAFETY: the owner retains the borrowed handle, which `resource` keeps alive during the call.
        let status = unsafe {
            (self.table.set_per_device_resource)(
                device,
                resource.borrow_handle(),
                &mut previous,
                &mut err,
            )
        };
        self.answer(status, &err, previous, "rmm_set_per_device_resource")
    }

    fn reset(&self, device: DeviceId) -> Result<AnyResource> {
        let (mut previous, mut err) = (rmm_resource::NULL, rmm_error::new());
        // SAFETY: an entry point of the owner; valid out-pointers.
        let status =
            unsafe { (self.table.reset_per_device_resource)(device, &mut previous, &mut err) };
        self.answer(status, &err, previous, "rmm_reset_per_device_resource")
    }

    fn generation(&self) -> Option<u64> {
        // SAFETY: rmm_c.h declares rmm_registry_generation as GenerationFn.
        let f = (*self.generation.get_or_init(|| unsafe {
            self.table
                .symbol::<GenerationFn>(c"rmm_registry_generation")
        }))?;
        // SAFETY: an entry point of the owner, which stays loaded (constructor contract); no arguments.
        let generation = unsafe { f() };
        // 0: the owner cannot tell either.
        (generation != 0).then_some(generation)
    }
}

enum ProcessRegistry {
    Local(LocalRegistry),
    Owner(OwnerRegistry),
}

fn process() -> &'static ProcessRegistry {
    static PROCESS: OnceLock<ProcessRegistry> = OnceLock::new();
    PROCESS.get_or_init(|| match owner::find_loaded_owner() {
        // SAFETY: find_loaded_owner returns complete tables of our ABI version from a library it
        // keeps loaded forever.
        Some(table) => ProcessRegistry::Owner(unsafe { OwnerRegistry::new(table) }),
        None => ProcessRegistry::Local(LocalRegistry::new()),
    })
}

/// The registry this binary uses: the loaded owner's, or this copy's own (see the module docs).
/// Chosen once, at first use.
pub fn process_registry() -> &'static dyn Registry {
    match process() {
        ProcessRegistry::Local(local) => local,
        ProcessRegistry::Owner(owner) => owner,
    }
}

/// The loaded owner's entry points when [`process_registry`] routes to it.
pub(crate) fn owner_table() -> Option<&'static OwnerTable> {
    match process() {
        ProcessRegistry::Local(_) => None,
        ProcessRegistry::Owner(owner) => Some(&owner.table),
    }
}

/// True when [`process_registry`] routes to another binary's registry (librmm) through the C ABI.
pub fn routes_to_owner() -> bool {
    matches!(process(), ProcessRegistry::Owner(_))
}

/// The resource of `device` (lazily the initial resource).
///
/// ```
/// let mr = rmm_core::registry::per_device_resource(0).unwrap();
/// if rmm_core::cuda::is_host_mode() {
///     assert_eq!(mr.name(), "system_memory_resource");
/// }
/// # use rmm_core::MemoryResource;
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for a device that does not exist (in host mode: any but 0).
pub fn per_device_resource(device: DeviceId) -> Result<AnyResource> {
    process_registry().get(device)
}

/// Makes `resource` the resource of `device`; returns the previous one (owning).
///
/// # Errors
/// [`Error::InvalidArgument`] for a device that does not exist, or a resource without device access
/// when a GPU is present (host access in host mode).
pub fn set_per_device_resource(device: DeviceId, resource: AnyResource) -> Result<AnyResource> {
    process_registry().set(device, resource)
}

/// Puts the initial resource of `device` back; returns the previous one (owning).
///
/// # Errors
/// [`Error::InvalidArgument`] for a device that does not exist.
pub fn reset_per_device_resource(device: DeviceId) -> Result<AnyResource> {
    process_registry().reset(device)
}

/// The process registry's [`Registry::generation`]: changes whenever a device's resource is set or
/// reset from any language; `None` when the owner cannot tell (then nothing keyed on it may be
/// trusted).
///
/// ```
/// let before = rmm_core::registry::generation();
/// let _ = rmm_core::registry::current_resource().unwrap();
/// assert_eq!(rmm_core::registry::generation(), before); // reading changes nothing
/// ```
pub fn generation() -> Option<u64> {
    process_registry().generation()
}

/// The device the `current_*` functions use: the calling thread's current device, 0 in host mode.
///
/// # Errors
/// Driver errors from asking for the current device.
pub fn current_device_or_host() -> Result<DeviceId> {
    // Host mode cannot change while the process runs (the driver's answer is cached), and this is
    // on the hot path of every `current_resource()`: ask once.
    static HOST_MODE: OnceLock<bool> = OnceLock::new();
    if *HOST_MODE.get_or_init(cuda::is_host_mode) {
        Ok(0)
    } else {
        cuda::current_device()
    }
}

/// The resource of the current device (RMM's `get_current_device_resource_ref`).
///
/// # Errors
/// As for [`per_device_resource`] and [`current_device_or_host`].
pub fn current_resource() -> Result<AnyResource> {
    per_device_resource(current_device_or_host()?)
}

/// Makes `resource` the resource of the current device; returns the previous one.
///
/// # Errors
/// As for [`set_per_device_resource`] and [`current_device_or_host`].
pub fn set_current_resource(resource: AnyResource) -> Result<AnyResource> {
    set_per_device_resource(current_device_or_host()?, resource)
}

/// Puts the initial resource of the current device back; returns the previous one.
///
/// # Errors
/// As for [`reset_per_device_resource`] and [`current_device_or_host`].
pub fn reset_current_resource() -> Result<AnyResource> {
    reset_per_device_resource(current_device_or_host()?)
}

/// Serialises the tests that use the process registry (they share one static).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn process_registry_test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

pub mod owner;
pub mod recording;

pub use owner::OwnerTable;

#[cfg(test)]
mod tests;
