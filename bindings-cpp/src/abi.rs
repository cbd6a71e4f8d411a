//! The ABI's own entry points: its version and owner tag, host mode, and the names of the status
//! codes.
//!
//! `rmm_abi_version` and `rmm_abi_owner` are part of the registry owner protocol, served by
//! rmm-core (`rmm_core::registry::owner::serve`, so its own tests can route to them); they are
//! exported here under their C names.

use std::ffi::{c_char, c_int, c_void};
use std::panic::catch_unwind;

use rmm_core::cuda;
use rmm_core::registry::owner::serve;
use rmm_core::resource::status::status_name;

/// `RMM_ABI_VERSION` of this library.
#[no_mangle]
pub extern "C" fn rmm_abi_version() -> u32 {
    serve::rmm_abi_version()
}

/// The owner tag of this library's handles (compare with `vtable->owner`).
#[no_mangle]
pub extern "C" fn rmm_abi_owner() -> *const c_void {
    serve::rmm_abi_owner()
}

/// 1 in host mode (no CUDA driver or no device), else 0.
#[no_mangle]
pub extern "C" fn rmm_is_host_mode() -> c_int {
    catch_unwind(cuda::is_host_mode)
        .map(c_int::from)
        .unwrap_or(1)
}

/// A static string naming an `RMM_*` status, e.g. `"RMM_ERROR_OUT_OF_MEMORY"`.
#[no_mangle]
pub extern "C" fn rmm_error_kind_name(kind: c_int) -> *const c_char {
    status_name(kind).as_ptr()
}
