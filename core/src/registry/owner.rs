//! The registry owner (librmm) as seen from the C ABI: the served side (the entry points every
//! registry owner exports, [`serve`]) and the one client of a loaded owner ([`find_loaded_owner`]),
//! the only place in rmm that looks librmm up with `dlopen`/`dlsym`.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::error::{Error, Result};
use crate::mr::kind::{upstream_of, ResourceKind};
use crate::mr::statistics::Counter;
use crate::mr::{PoolMemoryResource, StatisticsResourceAdaptor};
use crate::resource::status::{error_from_c, RMM_OK};
use crate::resource::{AnyResource, ForeignResource, MemoryResource};

use crate::resource::guard::{guarded, null_out, put};
use crate::resource::handle::{owner_tag, rmm_resource, RMM_ABI_VERSION};
use crate::resource::status::rmm_error;
use crate::view::strided::{check_alive, rmm_strided_view};

/// A statistics counter (`rmm_counter` in C; RMM's `statistics_resource_adaptor::counter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmm_counter {
    /// The current amount.
    pub value: i64,
    /// The highest `value` reached.
    pub peak: i64,
    /// Everything ever added.
    pub total: i64,
}

impl From<Counter> for rmm_counter {
    fn from(c: Counter) -> Self {
        Self {
            value: c.value,
            peak: c.peak,
            total: c.total,
        }
    }
}

impl From<rmm_counter> for Counter {
    fn from(c: rmm_counter) -> Self {
        Counter {
            value: c.value,
            peak: c.peak,
            total: c.total,
        }
    }
}

/// The entry points every registry owner exports (`rmm_c.h`), as plain `extern "C"` functions
/// without `#[no_mangle]`: librmm (crate `rmm-cpp`) exports each under its C name, and
/// [`OwnerTable::local`] names them. Any other binary linking rmm-core exports none of them.
pub mod serve {
    use std::ffi::{c_int, c_void};

    use crate::cuda::DeviceId;
    use crate::resource::guard::{hand_back, hand_out};
    use crate::resource::handle::{owner_tag, rmm_resource, RMM_ABI_VERSION};
    use crate::resource::status::rmm_error;
    use crate::resource::AnyResource;

    /// `RMM_ABI_VERSION` of this library.
    pub extern "C" fn rmm_abi_version() -> u32 {
        RMM_ABI_VERSION
    }

    /// The owner tag of this library's handles (compare with `vtable->owner`).
    pub extern "C" fn rmm_abi_owner() -> *const c_void {
        owner_tag()
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
            hand_out(out, err, || {
                crate::registry::per_device_resource(device as DeviceId)
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
        // SAFETY: caller contract; the borrowed handle is retained by the new owner.
        unsafe {
            hand_back(previous_out, err, || {
                crate::registry::set_per_device_resource(
                    device as DeviceId,
                    AnyResource::from_borrowed_handle(resource)?,
                )
            })
        }
    }

    /// The registry's generation: changes whenever a device's resource is set or reset; 0 when it
    /// cannot be told (this binary routes to an owner that does not export one).
    pub extern "C" fn rmm_registry_generation() -> u64 {
        crate::registry::generation().unwrap_or(0)
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
            hand_back(previous_out, err, || {
                crate::registry::reset_per_device_resource(device as DeviceId)
            })
        }
    }
}

/// `int rmm_get_per_device_resource(int, rmm_resource*, rmm_error*)`.
pub type GetPerDeviceFn = unsafe extern "C" fn(c_int, *mut rmm_resource, *mut rmm_error) -> c_int;

/// `int rmm_set_per_device_resource(int, rmm_resource, rmm_resource*, rmm_error*)`.
pub type SetPerDeviceFn =
    unsafe extern "C" fn(c_int, rmm_resource, *mut rmm_resource, *mut rmm_error) -> c_int;

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
    /// Where the entry points were found (a `dlopen` handle, or `RTLD_DEFAULT`), as an address;
    /// 0 for [`OwnerTable::local`]. Its other entry points are looked up there
    /// ([`OwnerTable::symbol`]).
    pub library: usize,
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
            get_per_device_resource: serve::rmm_get_per_device_resource,
            set_per_device_resource: serve::rmm_set_per_device_resource,
            reset_per_device_resource: serve::rmm_reset_per_device_resource,
            library: 0,
        }
    }

    /// The owner's exported function `name`, if it exports it (always `None` for
    /// [`OwnerTable::local`]).
    ///
    /// # Safety
    /// `F` is the function pointer type that `rmm_c.h` declares for `name`.
    pub unsafe fn symbol<F: Copy>(&self, name: &CStr) -> Option<F> {
        if self.library == 0 {
            return None;
        }
        // SAFETY: `library` is a dlopen handle kept open forever or RTLD_DEFAULT (see
        // `find_loaded_owner`); the name is NUL-terminated.
        let sym = unsafe { libc::dlsym(self.library as *mut c_void, name.as_ptr()) };
        if sym.is_null() {
            return None;
        }
        // SAFETY: caller contract: `F` is the declared type of this exported function, a function
        // pointer of the same size as the symbol's address.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&sym) })
    }

    /// True when these are this copy of rmm-core's own entry points (then routing to them would loop).
    pub fn is_local(&self) -> bool {
        self.owner == owner_tag()
    }
}

/// The SONAME of the registry owner.
pub const OWNER_SONAME: &CStr = c"librmm_rs.so";

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
            library: lib as usize,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Asking the owner about its resources: what a resource is, its upstream, and the state of the
// types a binding shows (statistics counters, pool size). A resource of this copy of rmm-core is
// answered here; one the owner made (a `ForeignResource` whose handle carries the owner's tag)
// is answered by the owner's exported functions.
// ---------------------------------------------------------------------------------------------

/// `int rmm_resource_kind(rmm_resource, int*, rmm_resource*, rmm_error*)`.
type KindFn =
    unsafe extern "C" fn(rmm_resource, *mut c_int, *mut rmm_resource, *mut rmm_error) -> c_int;
/// `int (rmm_resource, rmm_counter*, rmm_error*)`: a statistics counter getter.
type CounterFn = unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_error) -> c_int;
/// `int (rmm_resource, rmm_counter*, rmm_counter*, rmm_error*)`: push or pop of the counters.
type CounterPairFn =
    unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_counter, *mut rmm_error) -> c_int;
/// `int (rmm_resource, uint64_t*, rmm_error*)`: a size getter.
type SizeFn = unsafe extern "C" fn(rmm_resource, *mut u64, *mut rmm_error) -> c_int;

/// The loaded owner's table and the handle of `resource`, when the owner made it.
fn owned_by_loaded_owner(resource: &AnyResource) -> Option<(&'static OwnerTable, rmm_resource)> {
    let foreign = resource.downcast_ref::<ForeignResource>()?;
    let table = super::owner_table()?;
    let handle = foreign.handle();
    // SAFETY: a ForeignResource holds a checked, live handle, whose vtable is readable.
    (unsafe { (*handle.vtable).owner } == table.owner).then_some((table, handle))
}

/// Calls the owner's accessor `name` on `handle` through `call`, turning its status into a result.
///
/// # Safety
/// `F` is the type `rmm_c.h` declares for `name`.
unsafe fn ask<F: Copy>(
    table: &OwnerTable,
    name: &'static CStr,
    call: impl FnOnce(F, *mut rmm_error) -> c_int,
) -> Result<()> {
    let what = name.to_str().unwrap_or("rmm_?");
    // SAFETY: caller contract.
    let f: F = unsafe { table.symbol(name) }.ok_or_else(|| {
        Error::Unsupported(format!(
            "{what}: this resource belongs to librmm, but librmm does not export {what}"
        ))
    })?;
    let mut err = rmm_error::new();
    let status = call(f, &mut err);
    if status == RMM_OK {
        Ok(())
    } else {
        Err(error_from_c(status, &err, "librmm", what))
    }
}

/// What `resource` is: for a resource of this copy of rmm-core, its type; for one the loaded owner
/// (librmm) made, the owner's answer (`rmm_resource_kind`). `None` for any other foreign resource
/// (C, C++ or another binary), and for an owner that cannot answer (an older librmm).
pub fn resource_kind(resource: &AnyResource) -> Option<ResourceKind> {
    kind_and_upstream(resource).map(|(kind, _)| kind)
}

/// The upstream of an adaptor or sub-allocator, asked the same way as [`resource_kind`]; `None`
/// when it has none or nobody can tell.
pub fn resource_upstream(resource: &AnyResource) -> Option<AnyResource> {
    kind_and_upstream(resource).and_then(|(_, upstream)| upstream)
}

fn kind_and_upstream(resource: &AnyResource) -> Option<(ResourceKind, Option<AnyResource>)> {
    let Some((table, handle)) = owned_by_loaded_owner(resource) else {
        if resource.downcast_ref::<ForeignResource>().is_some() {
            return None;
        }
        return Some((ResourceKind::of(resource), upstream_of(resource)));
    };
    let (mut code, mut upstream) = (0 as c_int, rmm_resource::NULL);
    // SAFETY: the declared type of rmm_resource_kind; a live borrowed handle; valid out-pointers.
    unsafe {
        ask::<KindFn>(table, c"rmm_resource_kind", |f, err| {
            f(handle, &mut code, &mut upstream, err)
        })
    }
    .ok()?;
    // SAFETY: on success the owner wrote an owning handle or {NULL, NULL} (rmm_c.h).
    let upstream = (!upstream.is_null())
        .then(|| unsafe { AnyResource::try_from_handle(upstream) }.ok())
        .flatten();
    Some((
        ResourceKind::from_code(code).unwrap_or(ResourceKind::Other),
        upstream,
    ))
}

/// A statistics adaptor's counters (bytes, allocations) of the current frame, wherever it was made.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor.
pub fn statistics_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return Ok(stats.counters());
    }
    let (table, handle) = owned_by_loaded_owner(resource)
        .ok_or_else(|| not_a(resource, "statistics_resource_adaptor"))?;
    let counter = |name: &'static CStr| -> Result<Counter> {
        let mut out = rmm_counter::default();
        // SAFETY: the getters are declared `int (rmm_resource, rmm_counter*, rmm_error*)`; a live
        // borrowed handle; valid out-pointers.
        unsafe { ask::<CounterFn>(table, name, |f, err| f(handle, &mut out, err))? };
        Ok(out.into())
    };
    Ok((
        counter(c"rmm_statistics_resource_adaptor_get_bytes_counter")?,
        counter(c"rmm_statistics_resource_adaptor_get_allocations_counter")?,
    ))
}

/// RMM's `push_counters` on a statistics adaptor, wherever it was made: the counters from before
/// the push.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor.
pub fn push_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return Ok(stats.push_counters());
    }
    counter_pair(resource, c"rmm_statistics_resource_adaptor_push_counters")
}

/// RMM's `pop_counters` on a statistics adaptor, wherever it was made: the popped frame.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor or only one frame is left.
pub fn pop_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return stats.pop_counters();
    }
    counter_pair(resource, c"rmm_statistics_resource_adaptor_pop_counters")
}

fn counter_pair(resource: &AnyResource, name: &'static CStr) -> Result<(Counter, Counter)> {
    let (table, handle) = owned_by_loaded_owner(resource)
        .ok_or_else(|| not_a(resource, "statistics_resource_adaptor"))?;
    let (mut bytes, mut count) = (rmm_counter::default(), rmm_counter::default());
    // SAFETY: push and pop are declared `int (rmm_resource, rmm_counter*, rmm_counter*, rmm_error*)`;
    // a live borrowed handle; valid out-pointers.
    unsafe { ask::<CounterPairFn>(table, name, |f, err| f(handle, &mut bytes, &mut count, err))? };
    Ok((bytes.into(), count.into()))
}

/// The bytes a pool holds from its upstream, wherever it was made.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a pool.
pub fn pool_size(resource: &AnyResource) -> Result<usize> {
    if let Some(pool) = resource.downcast_ref::<PoolMemoryResource>() {
        return Ok(pool.pool_size());
    }
    let (table, handle) =
        owned_by_loaded_owner(resource).ok_or_else(|| not_a(resource, "pool_memory_resource"))?;
    let mut out = 0u64;
    // SAFETY: declared `int (rmm_resource, uint64_t*, rmm_error*)`; a live borrowed handle; a valid
    // out-pointer.
    unsafe {
        ask::<SizeFn>(table, c"rmm_pool_memory_resource_pool_size", |f, err| {
            f(handle, &mut out, err)
        })?
    };
    usize::try_from(out)
        .map_err(|_| Error::invalid(format!("pool size {out} does not fit in size_t")))
}

fn not_a(resource: &AnyResource, what: &str) -> Error {
    Error::invalid(format!(
        "{} is not a {what} (of this binary or of the loaded librmm)",
        resource.name()
    ))
}

// ---------------------------------------------------------------------------------------------
// Strided views acquired by another copy of rmm-core in the process (a Python extension module
// links its own). A view's generation names the copy that acquired it (its view domain, the bits
// above VIEW_DOMAIN_SHIFT): 0 for the registry owner and for a binary with its own registry, 1.. for
// the copies that route to an owner, numbered by the owner when they acquire their first view. A
// check of a view is asked of the copy that acquired it: the owner calls the check function each
// copy registered; a copy asks the owner about any view not its own.
// ---------------------------------------------------------------------------------------------

/// The bits of a view's generation above this shift are its view domain (see above).
pub const VIEW_DOMAIN_SHIFT: u32 = 48;

/// The most view domains an owner hands out.
const MAX_VIEW_DOMAINS: usize = 0xFFFF;

/// `int (const rmm_strided_view*, rmm_error*)`: one copy's check of a view it acquired
/// (`rmm_strided_view_check`'s type; `rmm_strided_view_check_fn` in C).
pub type ViewCheckFn = unsafe extern "C" fn(*const rmm_strided_view, *mut rmm_error) -> c_int;

/// `int rmm_strided_view_register_domain(rmm_strided_view_check_fn, uint32_t*, rmm_error*)`.
type RegisterViewDomainFn =
    unsafe extern "C" fn(Option<ViewCheckFn>, *mut u32, *mut rmm_error) -> c_int;

/// The check functions of the copies this owner numbered: domain `i + 1` is entry `i`.
fn view_checkers() -> &'static Mutex<Vec<ViewCheckFn>> {
    static CHECKERS: OnceLock<Mutex<Vec<ViewCheckFn>>> = OnceLock::new();
    CHECKERS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Served by the registry owner: numbers the calling copy of rmm-core (a new view domain in
/// `*domain_out`, 1..) and keeps its `check` for the views of that domain.
///
/// # Safety
/// `check` is NULL (refused) or a function that stays callable for the rest of the process;
/// `domain_out` and `err` are NULL or valid for writes.
pub unsafe extern "C" fn rmm_strided_view_register_domain(
    check: Option<ViewCheckFn>,
    domain_out: *mut u32,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        guarded(err, || {
            let check =
                check.ok_or_else(|| Error::invalid("the view check function must not be NULL"))?;
            if domain_out.is_null() {
                return Err(null_out("domain"));
            }
            let mut checkers = view_checkers()
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if checkers.len() >= MAX_VIEW_DOMAINS {
                return Err(Error::invalid(
                    "no view domain left for another copy of rmm-core",
                ));
            }
            checkers.push(check);
            put(domain_out, checkers.len() as u32, "domain")
        })
    }
}

/// This copy's own view check, registered with the owner.
unsafe extern "C" fn check_own_view(view: *const rmm_strided_view, err: *mut rmm_error) -> c_int {
    // SAFETY: the owner passes the caller's pointers through (NULL or valid).
    unsafe {
        guarded(err, || {
            check_alive(
                view.as_ref()
                    .ok_or_else(|| Error::invalid("the view must not be NULL"))?,
            )
        })
    }
}

/// The view domain of this copy's views, as generation bits: 0 unless this copy routes to a
/// registry owner, which numbered it at its first view. An owner that cannot number it (an older
/// librmm) leaves it 0: then the owner cannot check this copy's views.
pub fn view_domain_bits() -> u64 {
    static BITS: OnceLock<u64> = OnceLock::new();
    *BITS.get_or_init(|| {
        let Some(table) = super::owner_table() else {
            return 0;
        };
        // SAFETY: rmm_c.h declares rmm_strided_view_register_domain as RegisterViewDomainFn.
        let Some(register) =
            (unsafe { table.symbol::<RegisterViewDomainFn>(c"rmm_strided_view_register_domain") })
        else {
            return 0;
        };
        let (mut domain, mut err) = (0u32, rmm_error::new());
        // SAFETY: an entry point of the owner, which stays loaded; `check_own_view` is a function of
        // this copy, which is never unloaded while the owner is (both stay for the process).
        let status = unsafe { register(Some(check_own_view), &mut domain, &mut err) };
        if status == RMM_OK && (1..=MAX_VIEW_DOMAINS as u32).contains(&domain) {
            u64::from(domain) << VIEW_DOMAIN_SHIFT
        } else {
            0
        }
    })
}

/// RMM_OK-or-error of `rmm_strided_view_check` for any view in the process: asked of the copy of
/// rmm-core that acquired it (this one, the owner, or another copy the owner numbered).
///
/// # Errors
/// [`Error::InvalidArgument`] for NULL, or a view that is not live (released, a stale copy, never
/// acquired, or of a copy nobody here knows).
///
/// # Safety
/// `view` is NULL or valid for reads.
pub unsafe fn check_view(view: *const rmm_strided_view) -> Result<()> {
    // SAFETY: caller contract.
    let Some(raw) = (unsafe { view.as_ref() }) else {
        return Err(Error::invalid("the view must not be NULL"));
    };
    let own = view_domain_bits() >> VIEW_DOMAIN_SHIFT;
    let domain = raw.generation >> VIEW_DOMAIN_SHIFT;
    let ask: Option<(ViewCheckFn, &str)> = if raw.generation == 0 || domain == own {
        None
    } else if own == 0 {
        // This copy is the owner: the copy that registered `domain`, if any.
        let checkers = view_checkers()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        checkers
            .get(domain as usize - 1)
            .map(|f| (*f, "the copy of rmm-core that acquired it"))
    } else {
        super::owner_table()
            .and_then(|table| {
                // SAFETY: rmm_c.h declares rmm_strided_view_check as ViewCheckFn.
                unsafe { table.symbol::<ViewCheckFn>(c"rmm_strided_view_check") }
            })
            .map(|f| (f, "librmm"))
    };
    let Some((check, who)) = ask else {
        return check_alive(raw);
    };
    let mut err = rmm_error::new();
    // SAFETY: a check function of a loaded copy; `view` is readable (caller contract).
    let status = unsafe { check(view, &mut err) };
    if status == RMM_OK {
        Ok(())
    } else {
        Err(error_from_c(status, &err, who, "rmm_strided_view_check"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::SystemMemoryResource;

    /// A copy's check that knows one view: generation 7 of its domain.
    unsafe extern "C" fn knows_seven(view: *const rmm_strided_view, err: *mut rmm_error) -> c_int {
        // SAFETY: check_view passes a readable view and a writable error.
        unsafe {
            guarded(err, || {
                match (*view).generation & ((1 << VIEW_DOMAIN_SHIFT) - 1) {
                    7 => Ok(()),
                    g => Err(Error::invalid(format!(
                        "generation {g} is not live over there"
                    ))),
                }
            })
        }
    }

    #[test]
    fn the_owner_asks_the_copy_that_acquired_a_view() {
        assert_eq!(
            view_domain_bits(),
            0,
            "the process's own registry: this copy is domain 0"
        );
        let (mut domain, mut err) = (0u32, rmm_error::new());
        // SAFETY: a function of this binary; valid out-pointers.
        let status =
            unsafe { rmm_strided_view_register_domain(Some(knows_seven), &mut domain, &mut err) };
        assert_eq!(status, RMM_OK);
        assert!(domain >= 1);
        let mut raw = rmm_strided_view::EMPTY;
        raw.generation = (u64::from(domain) << VIEW_DOMAIN_SHIFT) | 7;
        // SAFETY: a readable struct.
        let live = unsafe { check_view(&raw) };
        assert!(live.is_ok(), "the other copy says it is live");
        raw.generation += 1;
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(e.to_string().contains("not live over there"), "{e}");
        raw.generation = (0xFFFF << VIEW_DOMAIN_SHIFT) | 7;
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(
            e.to_string().contains("not live"),
            "a domain nobody registered: {e}"
        );
        // SAFETY: a NULL view and a NULL check are refused, not dereferenced.
        unsafe {
            assert!(check_view(std::ptr::null()).is_err());
            assert_ne!(
                rmm_strided_view_register_domain(None, &mut domain, &mut err),
                RMM_OK
            );
            assert_ne!(
                rmm_strided_view_register_domain(Some(knows_seven), std::ptr::null_mut(), &mut err),
                RMM_OK
            );
        }
    }

    #[test]
    fn views_of_this_copy_are_checked_here() {
        let released = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let view = crate::view::live::tests::view(&released);
        let raw = *view.as_raw();
        // SAFETY: a readable struct.
        assert!(unsafe { check_view(&raw) }.is_ok());
        drop(view);
        // SAFETY: as above.
        let e = unsafe { check_view(&raw) }.unwrap_err();
        assert!(e.to_string().contains("not live"), "{e}");
    }

    #[test]
    fn local_resources_are_answered_here() {
        let system = AnyResource::new(SystemMemoryResource::new());
        let stats = AnyResource::new(StatisticsResourceAdaptor::new(system.clone()));
        assert_eq!(resource_kind(&system), Some(ResourceKind::System));
        assert_eq!(resource_kind(&stats), Some(ResourceKind::Statistics));
        assert_eq!(
            resource_upstream(&stats).map(|u| resource_kind(&u)),
            Some(Some(ResourceKind::System))
        );
        assert!(resource_upstream(&system).is_none());
        let (bytes, allocations) = statistics_counters(&stats).unwrap();
        assert_eq!((bytes.value, allocations.value), (0, 0));
        assert_eq!(push_counters(&stats).unwrap().0.value, 0);
        assert!(pop_counters(&stats).is_ok());
        assert!(matches!(
            pop_counters(&stats),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            statistics_counters(&system),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(pool_size(&stats), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn a_foreign_resource_of_no_owner_is_not_recognised() {
        let (handle, _seen) = crate::testing::c_resource::c_resource(RMM_OK);
        // SAFETY: an owning, valid handle of the fake C resource.
        let foreign = unsafe { AnyResource::try_from_handle(handle) }.unwrap();
        assert_eq!(resource_kind(&foreign), None);
        assert!(resource_upstream(&foreign).is_none());
        assert!(matches!(
            statistics_counters(&foreign),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            pool_size(&foreign),
            Err(Error::InvalidArgument(_))
        ));
    }
}
