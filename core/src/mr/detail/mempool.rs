//! Stream-ordered allocation from a CUDA memory pool, shared by `cuda_async_memory_resource`,
//! `cuda_async_view_memory_resource` and `cuda_async_managed_memory_resource`
//! (RMM's resources all delegate to the view for this).

use crate::aligned::check_base_alignment;
use crate::cuda::{self, device::ensure_context, sys, DeviceId, Stream};
use crate::error::{Error, Result};

/// A pool handle as an integer (`cudaMemPool_t` / `CUmemoryPool`).
pub(crate) type PoolHandle = usize;

pub(crate) fn as_pool(handle: PoolHandle) -> sys::CUmemoryPool {
    handle as sys::CUmemoryPool
}

/// `Unsupported` unless `device` supports stream-ordered memory pools (`cudaMallocAsync`).
pub(crate) fn require_pools(device: DeviceId) -> Result<()> {
    let supported = cuda::device::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
    )?;
    if supported == 0 {
        return Err(Error::Unsupported(format!(
            "cudaMallocAsync (memory pools) is not supported on device {device} with this driver"
        )));
    }
    Ok(())
}

/// `cuMemAllocFromPoolAsync` of `bytes` on `stream`; 0 bytes gives null.
///
/// `check_size` runs after the argument checks and once a context is current, before the driver is
/// asked for memory (managed pools use it for the managed-size guard).
pub(crate) fn allocate(
    pool: PoolHandle,
    stream: Stream,
    bytes: usize,
    alignment: usize,
    resource: &str,
    check_size: impl FnOnce(DeviceId) -> Result<()>,
) -> Result<*mut u8> {
    check_base_alignment(alignment, resource)?;
    if bytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    let device = ensure_context()?;
    check_size(device)?;
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: a context is current; `ptr` is a valid out-pointer; the pool handle is alive (the
    // owning resource or the view's constructor contract guarantees it); the stream is valid by
    // `Stream`'s contract. The pool may belong to another device than the stream.
    let status = unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, as_pool(pool), stream.as_cu()) };
    cuda::check_alloc(status, "cuMemAllocFromPoolAsync", bytes, resource)?;
    Ok(ptr as *mut u8)
}

/// `cuMemFreeAsync` of `ptr` on `stream`; null is a no-op.
///
/// # Safety
/// `ptr` must come from a pool allocation and must not be used after the work queued on `stream`.
pub(crate) unsafe fn deallocate(stream: Stream, ptr: *mut u8) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    ensure_context()?;
    // SAFETY: caller contract; a context is current and the stream is valid by `Stream`'s contract.
    cuda::check(unsafe { sys::cuMemFreeAsync(ptr as sys::CUdeviceptr, stream.as_cu()) }, "cuMemFreeAsync")
}

/// A 64-bit pool attribute (reserved / used memory, release threshold).
pub(crate) fn get_u64(pool: PoolHandle, attribute: sys::CUmemPool_attribute) -> Result<u64> {
    ensure_context()?;
    let mut value: u64 = 0;
    // SAFETY: the pool is alive (callers own or borrow it); the attributes read here are 64-bit
    // (cuuint64_t), so `value` is a valid out-pointer of the right size.
    let status = unsafe { sys::cuMemPoolGetAttribute(as_pool(pool), attribute, (&mut value as *mut u64).cast()) };
    cuda::check(status, "cuMemPoolGetAttribute")?;
    Ok(value)
}

/// Sets a 64-bit pool attribute.
pub(crate) fn set_u64(pool: PoolHandle, attribute: sys::CUmemPool_attribute, mut value: u64) -> Result<()> {
    ensure_context()?;
    // SAFETY: the pool is alive (callers own it); the attributes written here are 64-bit
    // (cuuint64_t), so `value` is a valid pointer of the right size, read during the call only.
    let status = unsafe { sys::cuMemPoolSetAttribute(as_pool(pool), attribute, (&mut value as *mut u64).cast()) };
    cuda::check(status, "cuMemPoolSetAttribute")
}
