//! Finding the registry owner (librmm) loaded in the process: [`find_loaded_owner`] and the
//! [`OwnerTable`] of its registry entry points, the only `dlopen`/`dlsym` of librmm in rmm.

use std::ffi::{c_int, c_void, CStr};

use super::serve;
use crate::resource::handle::{owner_tag, rmm_resource, RMM_ABI_VERSION};
use crate::resource::status::rmm_error;

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
