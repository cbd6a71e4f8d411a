//! PyTorch's pluggable allocator over the process's one registry: `rmm_torch_allocate` and
//! `rmm_torch_deallocate` (declared in `rmm_c.h`), the functions that RMM ships in
//! `_torch_allocator.so` under the names `allocate` / `deallocate`. Python's
//! `rmm.allocators.torch` builds `torch.cuda.memory.CUDAPluggableAllocator(<librmm_rs.so>,
//! "rmm_torch_allocate", "rmm_torch_deallocate")` from them.
//!
//! Both use the per-device resource of `device` (set from Python, C++ or Rust), with `device` made
//! current for the call, as RMM's do. PyTorch's C signatures have no error channel: a failed
//! allocation returns null (PyTorch raises its out-of-memory error for it); a failed free is
//! reported on the debug log. Nothing unwinds into the caller.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rmm_core::cuda::{self, DeviceGuard, Stream};
use rmm_core::{registry, Error, MemoryResource, Result, DEFAULT_ALIGNMENT};

/// Runs `f` with `device` current (nothing to switch in host mode), catching panics.
fn on_device<T>(device: c_int, call: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(|| {
        let _guard = if cuda::is_host_mode() {
            None
        } else {
            Some(DeviceGuard::new(device)?)
        };
        f()
    }))
    .unwrap_or_else(|_| Err(Error::Unsupported(format!("{call} panicked"))))
}

/// Allocates `size` bytes from the per-device resource of `device`, ordered on `stream` (a
/// `cudaStream_t`). Returns null on failure (out of memory, a bad device).
///
/// # Safety
/// `stream` is a valid stream of `device` (or a default stream handle), as PyTorch passes it.
#[no_mangle]
pub unsafe extern "C" fn rmm_torch_allocate(
    size: usize,
    device: c_int,
    stream: *mut c_void,
) -> *mut c_void {
    // SAFETY: the caller's contract: a valid stream handle, only passed to the driver.
    let stream = unsafe { Stream::from_raw(stream as usize) };
    let allocated = on_device(device, "rmm_torch_allocate", || {
        registry::per_device_resource(device)?.allocate(stream, size, DEFAULT_ALIGNMENT)
    });
    match allocated {
        Ok(ptr) => ptr.cast(),
        Err(e) => {
            tracing::debug!("rmm_torch_allocate({size}, device {device}): {e}");
            std::ptr::null_mut()
        }
    }
}

/// Returns `ptr` (from `rmm_torch_allocate(size, device, ...)`) to the per-device resource of
/// `device`, ordered on `stream`.
///
/// # Safety
/// `ptr` came from `rmm_torch_allocate` with this `size` and `device`, while the same resource was
/// the device's resource, and is freed once; `stream` as for `rmm_torch_allocate`.
#[no_mangle]
pub unsafe extern "C" fn rmm_torch_deallocate(
    ptr: *mut c_void,
    size: usize,
    device: c_int,
    stream: *mut c_void,
) {
    // SAFETY: as in `rmm_torch_allocate`.
    let stream = unsafe { Stream::from_raw(stream as usize) };
    let freed = on_device(device, "rmm_torch_deallocate", || {
        let mr = registry::per_device_resource(device)?;
        // SAFETY: the caller's contract: `ptr` came from this resource with `size` bytes.
        unsafe { mr.deallocate(stream, ptr.cast(), size, DEFAULT_ALIGNMENT) }
    });
    if let Err(e) = freed {
        tracing::error!("rmm_torch_deallocate({ptr:?}, {size}, device {device}): {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::mr::SystemMemoryResource;
    use rmm_core::AnyResource;

    #[test]
    fn allocates_from_the_registry_and_returns_null_for_what_it_cannot_give() {
        if !cuda::is_host_mode() {
            return; // the registry's device resource is the GPU's there; covered by the GPU Python test
        }
        let previous =
            registry::set_per_device_resource(0, AnyResource::new(SystemMemoryResource::new()))
                .unwrap();
        // SAFETY: host mode, default stream; the pointer is freed with the same arguments.
        unsafe {
            let p = rmm_torch_allocate(1000, 0, std::ptr::null_mut());
            assert!(!p.is_null());
            p.cast::<u8>().write_bytes(7, 1000);
            rmm_torch_deallocate(p, 1000, 0, std::ptr::null_mut());
            assert!(rmm_torch_allocate(usize::MAX / 2, 0, std::ptr::null_mut()).is_null());
            assert!(rmm_torch_allocate(16, 5, std::ptr::null_mut()).is_null());
        }
        registry::set_per_device_resource(0, previous).unwrap();
    }
}
