//! The CUDA driver layer: the only module that calls CUDA.
//!
//! Built on cudarc's raw driver bindings, loaded at run time: rmm builds and its CPU tests run where
//! no CUDA is installed. [`driver`] loads and initialises the driver once and turns its absence
//! into [`Error::NoDriver`] / [`Error::NoDevice`] instead of cudarc's panic.
//!
//! Three tiers, in cudarc's shape:
//! - `sys` (cudarc's raw bindings): private to this module, so no file outside `cuda/` can make a
//!   driver call;
//! - thin `Result` wrappers, one per driver call or small group ([`check`] turns a `CUresult` into
//!   an [`Error`]): [`alloc`] (the immediate allocators and placement advice), [`mempool`]
//!   (memory pools and stream-ordered allocation from them), [`memory`] (copies, fills, pointer
//!   queries), [`device`], [`vmm`] (virtual memory: reservations, physical granules, mappings,
//!   access, shareable handles);
//! - safe types: [`Stream`], [`OwnedStream`], [`StreamPool`], [`Event`], [`DeviceGuard`].
//!
//! Glossary:
//! - *primary context*: the one context per device that the CUDA runtime API uses. We use it too,
//!   so pointers and streams are shared with CuPy, PyTorch and Numba.
//! - *host mode*: no usable driver or no device. Only host-memory resources work; containers copy
//!   with `memcpy` and the default streams synchronize trivially.

pub mod alloc;
pub mod device;
pub mod event;
pub mod memory;
pub(crate) mod mempool;
pub mod stream;
pub mod vmm;

use std::ffi::CStr;
use std::sync::OnceLock;

use cudarc::driver::sys;

/// The raw driver API for tests that must act behind rmm's back as other libraries do (make and
/// destroy streams, capture graphs); code outside `cuda/` never sees it otherwise.
#[cfg(test)]
pub(crate) use cudarc::driver::sys as raw_for_tests;

use crate::error::{Error, Result};

pub use alloc::DriverMemory;
pub use device::{
    current_device, device_count, mem_info, set_current_device, DeviceGuard, DeviceId,
};
pub use event::{Event, EventFlags};
pub use memory::{copy_async, copy_sync, set_async};
pub use stream::{OwnedStream, Stream, StreamFlags, StreamPool};

/// Loads and initialises the CUDA driver once per process.
///
/// # Errors
/// [`Error::NoDriver`] when libcuda cannot be loaded, [`Error::NoDevice`] when it reports no
/// device, [`Error::Cuda`] when `cuInit` fails otherwise. The answer is cached.
pub fn driver() -> Result<()> {
    static DRIVER: OnceLock<Result<()>> = OnceLock::new();
    DRIVER.get_or_init(init_driver).clone()
}

fn init_driver() -> Result<()> {
    // SAFETY: is_culib_present only tries to dlopen candidate names; it never panics.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoDriver(
            "libcuda.so could not be loaded (no NVIDIA driver on this machine)".into(),
        ));
    }
    // SAFETY: the library is present (checked above), so loading cuInit cannot panic; flags must be 0.
    let status = unsafe { sys::cuInit(0) };
    match status {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        sys::CUresult::CUDA_ERROR_NO_DEVICE => {
            Err(Error::NoDevice("the CUDA driver reports no device".into()))
        }
        other => Err(cuda_error(other, "cuInit")),
    }
}

/// True when a CUDA driver and at least one device are usable.
///
/// The answer is cached: the driver and the devices it shows are fixed at `cuInit`, and this is
/// asked on hot paths (every buffer, every host-mode check), where a `cuDeviceGetCount` per call
/// (or, in host mode, a clone of the cached error) would be measurable.
pub fn is_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| driver().is_ok() && device_count().map(|n| n > 0).unwrap_or(false))
}

/// True when the library is in host mode: no driver or no device, host memory only.
pub fn is_host_mode() -> bool {
    !is_available()
}

/// True when `name` is exported by the loaded driver (newer entry points may be missing on old drivers;
/// cudarc panics when asked for a missing one, so check first).
pub(crate) fn has_entry_point(name: &str) -> bool {
    if driver().is_err() {
        return false;
    }
    let symbol = format!("{name}\0");
    // SAFETY: the driver is loaded (checked above); we only look the symbol up, never call it here.
    unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(symbol.as_bytes())
            .is_ok()
    }
}

/// Driver calls made by the calling thread, counted in test builds only (every wrapper's status
/// goes through [`check`], [`check_alloc`] or [`counted`]), so that tests can pin how many driver
/// calls a hot path makes per operation on each kind of stream.
#[cfg(test)]
pub(crate) mod calls {
    use std::cell::{Cell, RefCell};
    use std::collections::BTreeMap;

    thread_local! {
        static COUNT: Cell<u64> = const { Cell::new(0) };
        static BY_NAME: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    }

    /// Counts one driver call of the calling thread. Driver calls also run in thread-exit
    /// destructors (an arena's or a front's), after the map may be gone: those are not counted by
    /// name (a panic there would abort the process).
    pub(crate) fn bump(call: &'static str) {
        COUNT.with(|c| c.set(c.get() + 1));
        let _ = BY_NAME.try_with(|m| *m.borrow_mut().entry(call).or_default() += 1);
    }

    /// The driver calls the calling thread made so far, by name.
    pub(crate) fn by_name() -> BTreeMap<&'static str, u64> {
        BY_NAME.try_with(|m| m.borrow().clone()).unwrap_or_default()
    }

    /// The driver calls the calling thread made so far.
    pub(crate) fn count() -> u64 {
        COUNT.with(Cell::get)
    }

    /// The driver calls the calling thread makes while running `f`.
    pub(crate) fn during<T>(f: impl FnOnce() -> T) -> (T, u64) {
        let before = count();
        let out = f();
        (out, count() - before)
    }
}

/// The status of a driver call whose caller matches on it itself (counted in test builds).
#[inline]
fn counted(status: sys::CUresult, call: &'static str) -> sys::CUresult {
    #[cfg(test)]
    calls::bump(call);
    #[cfg(not(test))]
    let _ = call;
    status
}

/// Turns a `CUresult` into `Ok(())` or the matching [`Error`].
fn check(status: sys::CUresult, call: &'static str) -> Result<()> {
    #[cfg(test)]
    calls::bump(call);
    if status == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(status, call))
    }
}

/// Like [`check`], but maps `CUDA_ERROR_OUT_OF_MEMORY` to [`Error::OutOfMemory`] for `resource`.
fn check_alloc(
    status: sys::CUresult,
    call: &'static str,
    bytes: usize,
    resource: &str,
) -> Result<()> {
    #[cfg(test)]
    calls::bump(call);
    match status {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory {
            bytes,
            resource: resource.to_owned(),
            detail: call.to_owned(),
        }),
        other => Err(cuda_error(other, call)),
    }
}

/// The [`Error`] of a failed `call`.
fn cuda_error(status: sys::CUresult, call: &'static str) -> Error {
    let mut name_ptr: *const std::ffi::c_char = std::ptr::null();
    let mut text_ptr: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: a non-success CUresult implies the driver is loaded; both calls only write the
    // out-pointers, which point to static strings owned by the driver (or stay null).
    unsafe {
        sys::cuGetErrorName(status, &mut name_ptr);
        sys::cuGetErrorString(status, &mut text_ptr);
    }
    let read = |p: *const std::ffi::c_char, fallback: &str| {
        if p.is_null() {
            fallback.to_owned()
        } else {
            // SAFETY: non-null pointers from cuGetError* are NUL-terminated static strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    Error::Cuda {
        code: status as i32,
        name: read(name_ptr, &format!("{status:?}")),
        message: read(text_ptr, "unknown CUDA error"),
        call,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_answer_is_clean_either_way() {
        // SAFETY: only probes for the library.
        let present = unsafe { sys::is_culib_present() };
        match driver() {
            Ok(()) => assert!(present, "driver() succeeded without a loadable libcuda"),
            Err(Error::NoDriver(msg)) => {
                assert!(!present);
                assert!(msg.contains("libcuda"), "{msg}");
            }
            Err(Error::NoDevice(_)) => assert!(present),
            Err(other) => panic!("unexpected driver error {other}"),
        }
        assert_eq!(is_host_mode(), !is_available());
    }

    #[test]
    fn missing_driver_makes_every_entry_point_fail_cleanly() {
        if driver().is_ok() {
            // With a driver, entry points must work (covered by the GPU tests).
            assert!(device_count().is_ok());
            return;
        }
        assert!(matches!(
            device_count(),
            Err(Error::NoDriver(_) | Error::NoDevice(_))
        ));
        assert!(matches!(
            current_device(),
            Err(Error::NoDriver(_) | Error::NoDevice(_))
        ));
        assert!(set_current_device(0).is_err());
        assert!(mem_info(0).is_err());
        assert!(OwnedStream::new(StreamFlags::NonBlocking).is_err());
        assert!(StreamPool::new(4, StreamFlags::SyncDefault).is_err());
        assert!(Event::new(EventFlags::DisableTiming).is_err());
        assert!(!has_entry_point("cuMemAlloc_v2"));
        // Default streams have nothing queued in host mode: synchronizing them succeeds.
        assert!(Stream::DEFAULT.synchronize().is_ok());
        assert!(Stream::PER_THREAD.synchronize().is_ok());
    }
}
