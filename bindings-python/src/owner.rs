//! librmm's own accessors, for resources that librmm made.
//!
//! When `librmm.so` is loaded before `rmm` (C++ or ctypes in the same process), the registry of
//! this module's rmm-core routes to librmm (`rmm_core::registry`), and a resource that C++ made (a
//! `statistics_resource_adaptor`, a `pool_memory_resource`) reaches Python as a foreign handle:
//! allocation works through its vtable, but its type lives in librmm's copy of rmm-core, so
//! `downcast` here cannot see it. Its type-specific accessors are librmm's exported C functions
//! (`rmm_c.h`), looked up here by name in the already loaded librmm. Each of them checks that the
//! handle is one of librmm's resources of the named type (else `RMM_ERROR_INVALID_ARGUMENT`), which
//! is what `probe` relies on to find a handle's type.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use rmm_core::registry::owner::{rmm_counter, OWNER_SONAME};
use rmm_core::resource::status::{error_from_c, RMM_OK};
use rmm_core::resource::{rmm_error, rmm_resource};
use rmm_core::mr::statistics::Counter;
use rmm_core::{AnyResource, Error, Result};

type CounterFn = unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_error) -> c_int;
type CounterPairFn = unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_counter, *mut rmm_error) -> c_int;
type SizeFn = unsafe extern "C" fn(rmm_resource, *mut u64, *mut rmm_error) -> c_int;

/// The loaded registry owner as a `dlopen` handle (kept open forever), found the way
/// `rmm_core::registry::owner::find_loaded_owner` finds it: by SONAME, else the global scope.
fn owner_library() -> Option<usize> {
    static LIB: OnceLock<Option<usize>> = OnceLock::new();
    *LIB.get_or_init(|| {
        if !rmm_core::registry::routes_to_owner() {
            return None;
        }
        // SAFETY: RTLD_NOLOAD only looks up an already loaded object; the name is NUL-terminated.
        let lib = unsafe { libc::dlopen(OWNER_SONAME.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        Some(if lib.is_null() { libc::RTLD_DEFAULT as usize } else { lib as usize })
    })
}

/// The owner's exported function `name`, if there is an owner and it exports it.
///
/// # Safety
/// `F` is the function pointer type that `rmm_c.h` declares for `name`.
unsafe fn owner_fn<F: Copy>(name: &CStr) -> Option<F> {
    let lib = owner_library()?;
    // SAFETY: a valid dlopen handle (or RTLD_DEFAULT) and a NUL-terminated name.
    let sym = unsafe { libc::dlsym(lib as *mut c_void, name.as_ptr()) };
    if sym.is_null() {
        return None;
    }
    // SAFETY: caller contract: F is the declared type of this exported function.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&sym) })
}

fn missing(call: &str) -> Error {
    Error::Unsupported(format!("{call}: this resource belongs to librmm, but librmm does not export {call}"))
}

fn check(status: c_int, err: &rmm_error, call: &'static str) -> Result<()> {
    if status == RMM_OK {
        Ok(())
    } else {
        Err(error_from_c(status, err, "librmm", call))
    }
}

fn counter(c: rmm_counter) -> Counter {
    Counter { value: c.value, peak: c.peak, total: c.total }
}

/// A statistics adaptor or pool that librmm made, read through librmm's accessors.
#[derive(Clone, Debug)]
pub(crate) struct OwnerResource {
    resource: AnyResource,
}

impl OwnerResource {
    /// `resource` when librmm knows it as a `statistics_resource_adaptor` (probed with a read).
    pub(crate) fn statistics(resource: &AnyResource) -> Option<Self> {
        let owned = Self { resource: resource.clone() };
        owned.counters().ok().map(|_| owned)
    }

    /// `resource` when librmm knows it as a `pool_memory_resource`.
    pub(crate) fn pool(resource: &AnyResource) -> Option<Self> {
        let owned = Self { resource: resource.clone() };
        owned.pool_size().ok().map(|_| owned)
    }

    fn counter(&self, name: &'static CStr) -> Result<Counter> {
        let call = name.to_str().unwrap_or("?");
        // SAFETY: both getters are declared `int (rmm_resource, rmm_counter*, rmm_error*)`.
        let f: CounterFn = unsafe { owner_fn(name) }.ok_or_else(|| missing(call))?;
        let (mut out, mut err) = (rmm_counter::default(), rmm_error::new());
        // SAFETY: a borrowed handle kept alive by `self.resource`; valid out-pointers.
        let status = unsafe { f(self.resource.borrow_handle(), &mut out, &mut err) };
        check(status, &err, "rmm_statistics_resource_adaptor_get_*_counter")?;
        Ok(counter(out))
    }

    /// `(bytes, allocations)` of the current frame.
    pub(crate) fn counters(&self) -> Result<(Counter, Counter)> {
        Ok((
            self.counter(c"rmm_statistics_resource_adaptor_get_bytes_counter")?,
            self.counter(c"rmm_statistics_resource_adaptor_get_allocations_counter")?,
        ))
    }

    fn pair(&self, name: &'static CStr, call: &'static str) -> Result<(Counter, Counter)> {
        // SAFETY: push and pop are declared `int (rmm_resource, rmm_counter*, rmm_counter*, rmm_error*)`.
        let f: CounterPairFn = unsafe { owner_fn(name) }.ok_or_else(|| missing(call))?;
        let (mut bytes, mut count, mut err) = (rmm_counter::default(), rmm_counter::default(), rmm_error::new());
        // SAFETY: as in `counter`.
        let status = unsafe { f(self.resource.borrow_handle(), &mut bytes, &mut count, &mut err) };
        check(status, &err, call)?;
        Ok((counter(bytes), counter(count)))
    }

    /// RMM's `push_counters`: the counters from before the push.
    pub(crate) fn push_counters(&self) -> Result<(Counter, Counter)> {
        self.pair(c"rmm_statistics_resource_adaptor_push_counters", "rmm_statistics_resource_adaptor_push_counters")
    }

    /// RMM's `pop_counters`: the popped frame; `InvalidArgument` when only one frame is left.
    pub(crate) fn pop_counters(&self) -> Result<(Counter, Counter)> {
        self.pair(c"rmm_statistics_resource_adaptor_pop_counters", "rmm_statistics_resource_adaptor_pop_counters")
    }

    /// The bytes a pool holds from its upstream.
    pub(crate) fn pool_size(&self) -> Result<usize> {
        const CALL: &str = "rmm_pool_memory_resource_pool_size";
        // SAFETY: declared `int (rmm_resource, uint64_t*, rmm_error*)`.
        let f: SizeFn = unsafe { owner_fn(c"rmm_pool_memory_resource_pool_size") }.ok_or_else(|| missing(CALL))?;
        let (mut out, mut err) = (0u64, rmm_error::new());
        // SAFETY: as in `counter`.
        let status = unsafe { f(self.resource.borrow_handle(), &mut out, &mut err) };
        check(status, &err, CALL)?;
        usize::try_from(out).map_err(|_| Error::invalid(format!("pool size {out} does not fit in size_t")))
    }
}
