//! `cuda_async_managed_memory_resource`: stream-ordered managed memory from the device's default
//! managed memory pool (CUDA 13+, `cudaMemGetDefaultMemPool(.., cudaMemAllocationTypeManaged)`).
//!
//! The default pool belongs to the driver: the resource never destroys it. Two resources are equal
//! when they use the same pool (the same device).

use crate::cuda::mempool::{self, PoolHandle};
use crate::cuda::{self, device::ensure_context, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::size_guard::check_managed_size;
use crate::resource::{Access, MemoryResource};

/// Stream-ordered managed memory from the current device's default managed pool (RMM's
/// `rmm.mr.experimental.CudaAsyncManagedMemoryResource`).
///
/// Requests larger than the current device's total memory plus the host's physical memory are
/// refused with [`Error::OutOfMemory`] before the driver sees them (such a request can hang the GPU).
///
/// ```no_run
/// use rmm_core::{mr::CudaAsyncManagedMemoryResource, MemoryResource, cuda::Stream};
/// let mr = CudaAsyncManagedMemoryResource::new()?;
/// let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CudaAsyncManagedMemoryResource {
    pool: PoolHandle,
    device: DeviceId,
}

impl CudaAsyncManagedMemoryResource {
    /// The resource for the current device's default managed pool.
    ///
    /// # Errors
    /// [`Error::NoDriver`] / [`Error::NoDevice`] without a GPU; [`Error::Unsupported`] on drivers
    /// older than CUDA 13 or devices without memory pools or concurrent managed access.
    pub fn new() -> Result<Self> {
        let device = ensure_context()?;
        if !cuda::has_entry_point("cuMemGetDefaultMemPool") {
            return Err(Error::Unsupported(
                "cuda_async_managed_memory_resource requires CUDA 13.0 or higher (no cuMemGetDefaultMemPool)".into(),
            ));
        }
        mempool::require_pools(device)?;
        if !cuda::device::supports_concurrent_managed_access(device) {
            return Err(Error::Unsupported(format!(
                "cuda_async_managed_memory_resource requires concurrent managed access, which device {device} lacks"
            )));
        }
        let pool = mempool::default_managed_pool(device)?;
        Ok(Self { pool, device })
    }

    /// True when [`CudaAsyncManagedMemoryResource::new`] can work on `device`: a CUDA 13+ driver,
    /// memory pools and concurrent managed access.
    pub fn is_supported_on(device: DeviceId) -> bool {
        cuda::has_entry_point("cuMemGetDefaultMemPool")
            && mempool::require_pools(device).is_ok()
            && cuda::device::supports_concurrent_managed_access(device)
    }

    /// The default managed pool's handle as an integer.
    pub fn pool_handle(&self) -> usize {
        self.pool
    }

    /// The device whose default managed pool this is.
    pub fn device(&self) -> DeviceId {
        self.device
    }
}

impl MemoryResource for CudaAsyncManagedMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let device = self.device;
        mempool::allocate_checked(self.pool, stream, bytes, alignment, self.name(), |_| {
            check_managed_size(bytes, device, "cuda_async_managed_memory_resource")
        })
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        _bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract (`ptr` came from this pool).
        unsafe { mempool::deallocate(stream, ptr) }
    }

    fn access(&self) -> Access {
        Access::HOST_DEVICE
    }

    fn name(&self) -> &str {
        "cuda_async_managed_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| o.pool == self.pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnyResource;

    fn fake(pool: usize) -> CudaAsyncManagedMemoryResource {
        CudaAsyncManagedMemoryResource { pool, device: 0 }
    }

    #[test]
    fn without_a_gpu_construction_fails_cleanly() {
        if !cuda::is_host_mode() {
            return;
        }
        let e = CudaAsyncManagedMemoryResource::new().unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        assert!(!CudaAsyncManagedMemoryResource::is_supported_on(0));
        let e = fake(0x1000).allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
    }

    #[test]
    fn host_device_accessible_and_equal_per_pool() {
        let a = fake(0x1000);
        assert_eq!(a.access(), Access::HOST_DEVICE);
        assert_eq!(a.name(), "cuda_async_managed_memory_resource");
        assert_eq!(a.pool_handle(), 0x1000);
        assert!(a.is_equal(&fake(0x1000)));
        assert!(a.is_equal(&AnyResource::new(a)));
        assert!(!a.is_equal(&fake(0x2000)));
        assert!(!a.is_equal(&crate::mr::ManagedMemoryResource::new()));
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(&fake(0x1000));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn memory_is_managed_and_from_the_default_pool() {
        crate::testing::require_gpu();
        let device = cuda::current_device().unwrap();
        if !CudaAsyncManagedMemoryResource::is_supported_on(device) {
            crate::testing::skip(
                "cuda_async_managed::memory_is_managed",
                "managed memory pools not supported",
            );
            return;
        }
        let mr = CudaAsyncManagedMemoryResource::new().unwrap();
        assert_ne!(mr.pool_handle(), 0);
        assert_eq!(mr.device(), device);
        assert!(
            mr.is_equal(&CudaAsyncManagedMemoryResource::new().unwrap()),
            "one default pool per device"
        );
        let p = mr.allocate_sync(4096, 256).unwrap();
        assert!(cuda::memory::is_managed(p));
        // SAFETY: managed memory, host-accessible, valid for 4096 bytes; nothing queued uses it.
        unsafe {
            std::ptr::write_bytes(p, 3, 4096);
            assert_eq!(*p.add(4095), 3);
            mr.deallocate_sync(p, 4096, 256).unwrap();
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn unsupported_configurations_are_refused_with_a_reason() {
        crate::testing::require_gpu();
        let device = cuda::current_device().unwrap();
        match CudaAsyncManagedMemoryResource::new() {
            Ok(_) => assert!(CudaAsyncManagedMemoryResource::is_supported_on(device)),
            Err(Error::Unsupported(msg)) => {
                assert!(
                    !CudaAsyncManagedMemoryResource::is_supported_on(device),
                    "{msg}"
                );
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}
