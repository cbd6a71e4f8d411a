//! Stream-ordered copies and fills, prefetch, pointer queries.
//!
//! With a GPU, copies go through `cuMemcpyAsync`, which infers the direction from unified addresses
//! (host pageable, pinned, managed or device memory alike). In host mode they are plain `memmove`s,
//! which is correct because only host memory exists there.

use super::device::{ensure_context, DeviceId};
use super::{check, is_host_mode, sys, Stream};
use crate::error::{Error, Result};

/// Copies `bytes` from `src` to `dst`, ordered on `stream`.
///
/// # Safety
/// `src` must be readable and `dst` writable for `bytes` bytes until the copy has completed on
/// `stream`, and both must be addresses the current device (or, in host mode, the CPU) can use.
///
/// # Errors
/// The driver's error (an invalid pointer is reported, not dereferenced, when a GPU is present).
pub unsafe fn copy_async(dst: *mut u8, src: *const u8, bytes: usize, stream: Stream) -> Result<()> {
    if bytes == 0 || std::ptr::eq(dst, src) {
        return Ok(());
    }
    if dst.is_null() || src.is_null() {
        return Err(Error::invalid("copy with a null pointer"));
    }
    if is_host_mode() {
        // SAFETY: the caller guarantees both ranges are valid host memory; ranges may overlap.
        unsafe { std::ptr::copy(src, dst, bytes) };
        return Ok(());
    }
    ensure_context()?;
    // SAFETY: caller contract; the context is current and unified addressing resolves the kinds.
    check(
        unsafe {
            sys::cuMemcpyAsync(
                dst as sys::CUdeviceptr,
                src as sys::CUdeviceptr,
                bytes,
                stream.as_cu(),
            )
        },
        "cuMemcpyAsync",
    )
}

/// [`copy_async`] followed by a synchronization of `stream`.
///
/// # Safety
/// As for [`copy_async`].
pub unsafe fn copy_sync(dst: *mut u8, src: *const u8, bytes: usize, stream: Stream) -> Result<()> {
    // SAFETY: forwarded caller contract.
    unsafe { copy_async(dst, src, bytes, stream)? };
    stream.synchronize()
}

/// Sets `bytes` bytes at `dst` to `value`, ordered on `stream`.
///
/// # Safety
/// `dst` must be writable for `bytes` bytes until the fill has completed on `stream`.
pub unsafe fn set_async(dst: *mut u8, value: u8, bytes: usize, stream: Stream) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    if dst.is_null() {
        return Err(Error::invalid("fill of a null pointer"));
    }
    if is_host_mode() {
        // SAFETY: the caller guarantees the range is valid host memory.
        unsafe { std::ptr::write_bytes(dst, value, bytes) };
        return Ok(());
    }
    ensure_context()?;
    if !is_known_to_driver(dst) {
        // Pageable host memory (malloc) cannot be filled by cuMemset on GPUs without HMM/ATS: wait
        // for the work queued before the fill, then fill from the host, which keeps stream order.
        stream.synchronize()?;
        // SAFETY: the caller guarantees the range is writable; unknown pointers are host memory.
        unsafe { std::ptr::write_bytes(dst, value, bytes) };
        return Ok(());
    }
    // SAFETY: caller contract; the context is current.
    check(
        unsafe { sys::cuMemsetD8Async(dst as sys::CUdeviceptr, value, bytes, stream.as_cu()) },
        "cuMemsetD8Async",
    )
}

/// True when the driver knows `ptr`: device, managed or pinned/registered host memory. False for
/// pageable host memory from the system allocator.
pub fn is_known_to_driver(ptr: *const u8) -> bool {
    if ptr.is_null() || is_host_mode() || ensure_context().is_err() {
        return false;
    }
    let mut memory_type: u32 = 0;
    // SAFETY: the out-pointer is valid for the attribute's 4-byte result; unknown pointers only
    // produce an error code.
    let status = unsafe {
        sys::cuPointerGetAttribute(
            (&mut memory_type as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr as sys::CUdeviceptr,
        )
    };
    status == sys::CUresult::CUDA_SUCCESS && memory_type != 0
}

/// True when `ptr` is CUDA managed memory (always false in host mode or for unknown pointers).
pub fn is_managed(ptr: *const u8) -> bool {
    if ptr.is_null() || is_host_mode() || ensure_context().is_err() {
        return false;
    }
    let mut managed: u32 = 0;
    // SAFETY: the out-pointer is valid for the attribute's 4-byte result; unknown pointers only
    // produce an error code.
    let status = unsafe {
        sys::cuPointerGetAttribute(
            (&mut managed as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ptr as sys::CUdeviceptr,
        )
    };
    status == sys::CUresult::CUDA_SUCCESS && managed != 0
}

/// The device id that names the CPU in prefetches (`cudaCpuDeviceId`, `CU_DEVICE_CPU`).
pub const CPU_DEVICE_ID: DeviceId = -1;

/// Migrates managed memory to `device` ahead of use, ordered on `stream`; [`CPU_DEVICE_ID`] migrates
/// it to host memory. A no-op for memory that is not managed, and where the device current at the
/// first prefetch lacks concurrent managed access (WSL2, some virtualized GPUs), as RMM's `prefetch`.
///
/// # Errors
/// The driver's error for a prefetch it refuses (an invalid device, say).
pub fn prefetch(ptr: *const u8, bytes: usize, device: DeviceId, stream: Stream) -> Result<()> {
    if bytes == 0 || !concurrent_managed_access() || !is_managed(ptr) {
        return Ok(());
    }
    let type_ = if device == CPU_DEVICE_ID {
        sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST
    } else {
        sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE
    };
    let location = sys::CUmemLocation { type_, id: device };
    // SAFETY: `ptr` is managed memory (checked) of at least `bytes` bytes (caller's range); flags 0.
    check(
        unsafe {
            sys::cuMemPrefetchAsync_v2(ptr as sys::CUdeviceptr, bytes, location, 0, stream.as_cu())
        },
        "cuMemPrefetchAsync",
    )
}

/// Whether prefetching can work: the concurrent-managed-access attribute of the device current at
/// the first call, asked once per process (RMM's `concurrent_managed_access::is_supported`).
fn concurrent_managed_access() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        !is_host_mode()
            && super::device::current_device()
                .is_ok_and(super::device::supports_concurrent_managed_access)
    })
}

/// Waits for all work on the current device (`cudaDeviceSynchronize`). Trivial in host mode.
pub fn device_synchronize() -> Result<()> {
    if is_host_mode() {
        return Ok(());
    }
    ensure_context()?;
    // SAFETY: a context is current.
    check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_mode_copies_and_fills_host_memory() {
        if !is_host_mode() {
            return; // the GPU suite covers the device path
        }
        let src = [1u8, 2, 3, 4, 5];
        let mut dst = [0u8; 5];
        // SAFETY: both arrays are valid for 5 bytes.
        unsafe { copy_sync(dst.as_mut_ptr(), src.as_ptr(), 5, Stream::DEFAULT).unwrap() };
        assert_eq!(dst, src);
        // SAFETY: dst is valid for 3 bytes.
        unsafe { set_async(dst.as_mut_ptr(), 9, 3, Stream::DEFAULT).unwrap() };
        assert_eq!(dst, [9, 9, 9, 4, 5]);
        assert!(!is_managed(dst.as_ptr()));
        assert!(prefetch(dst.as_ptr(), 5, 0, Stream::DEFAULT).is_ok());
    }

    #[test]
    fn null_pointers_are_rejected_not_dereferenced() {
        let mut byte = 0u8;
        // SAFETY: the null pointer is rejected before any access.
        let e = unsafe { copy_async(&mut byte, std::ptr::null(), 1, Stream::DEFAULT) };
        assert!(matches!(e, Err(Error::InvalidArgument(_))));
        // SAFETY: as above.
        let e = unsafe { set_async(std::ptr::null_mut(), 0, 1, Stream::DEFAULT) };
        assert!(matches!(e, Err(Error::InvalidArgument(_))));
        // Zero bytes is always fine, even with null.
        assert!(
            // SAFETY: zero-length copies touch nothing.
            unsafe { copy_async(std::ptr::null_mut(), std::ptr::null(), 0, Stream::DEFAULT) }
                .is_ok()
        );
    }
}
