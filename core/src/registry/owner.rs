//! The registry owner (librmm) as seen from the C ABI: the served side (the entry points every
//! registry owner exports, [`serve`]) and the one client of a loaded owner ([`find_loaded_owner`]),
//! the only place in rmm that looks librmm up with `dlopen`/`dlsym`.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_void, CStr};

use crate::mr::statistics::Counter;

use crate::resource::handle::{owner_tag, rmm_resource, RMM_ABI_VERSION};
use crate::resource::status::rmm_error;

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
        Counter { value: c.value, peak: c.peak, total: c.total }
    }
}

/// The entry points every registry owner exports (`rmm_c.h`), as plain `extern "C"` functions
/// without `#[no_mangle]`: librmm (crate `rmm-cpp`) exports each under its C name, and
/// [`OwnerTable::local`] names them. Any other binary linking rmm-core exports none of them.
pub mod serve {
    use std::ffi::{c_int, c_void};

    use crate::cuda::DeviceId;
    use crate::resource::guard::{clear_out, give_previous, guarded, null_out, put};
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
            clear_out(out);
            guarded(err, || {
                if out.is_null() {
                    return Err(null_out("out"));
                }
                let r = crate::registry::per_device_resource(device as DeviceId)?;
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
                let previous = crate::registry::set_per_device_resource(device as DeviceId, r)?;
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
                let previous = crate::registry::reset_per_device_resource(device as DeviceId)?;
                give_previous(previous_out, previous);
                Ok(())
            })
        }
    }
}

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
            get_per_device_resource: serve::rmm_get_per_device_resource,
            set_per_device_resource: serve::rmm_set_per_device_resource,
            reset_per_device_resource: serve::rmm_reset_per_device_resource,
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
