//! `cuda_async_memory_resource`: stream-ordered device memory from a CUDA memory pool that the
//! resource creates and owns (`cudaMallocAsync` / `cudaFreeAsync` semantics).
//!
//! Stateful: the pool lives in shared state; clones share it, compare equal only to each other, and
//! the last one to drop destroys the pool (on the device it was made for).

use std::sync::Arc;

use crate::cuda::mempool::{self, PoolAttribute, PoolHandle};
use crate::cuda::{device::ensure_context, DeviceGuard, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::resource::{Access, MemoryResource};

/// The message RMM gives when a pool cannot export the requested handle type.
pub const HANDLE_TYPE_UNSUPPORTED: &str = "Requested IPC memory handle type not supported";

/// A kind of shareable handle the pool's memory can be exported as (RMM's
/// `allocation_handle_type`), for IPC between processes or nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExportHandleType {
    /// A POSIX file descriptor (`CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`, RMM's `enable_ipc`).
    PosixFileDescriptor,
    /// A fabric handle (`CU_MEM_HANDLE_TYPE_FABRIC`, RMM's `enable_fabric`), for multi-node NVLink.
    Fabric,
}

impl ExportHandleType {
    /// The driver's bit for this handle type (1 and 8, as RMM's enum values).
    pub const fn bits(self) -> u32 {
        match self {
            ExportHandleType::PosixFileDescriptor => 1,
            ExportHandleType::Fabric => 8,
        }
    }
}

/// Options of a [`CudaAsyncMemoryResource`] (RMM's constructor arguments). The defaults create an
/// unprimed pool that keeps all freed memory (`release_threshold` = `u64::MAX`) and exports nothing.
///
/// ```
/// use rmm_core::mr::{CudaAsyncOptions, ExportHandleType};
/// let options = CudaAsyncOptions::default()
///     .initial_pool_size(64 << 20)
///     .export_handle_type(ExportHandleType::PosixFileDescriptor);
/// assert_eq!(options.initial_pool_size, Some(64 << 20));
/// assert_eq!(options.release_threshold, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaAsyncOptions {
    /// Bytes to reserve up front: the pool is primed by allocating and freeing this much on the
    /// default stream, then synchronizing it. `None`: no priming.
    pub initial_pool_size: Option<usize>,
    /// Reserved memory above this many bytes goes back to the driver at synchronization points
    /// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`). `None` means `u64::MAX`: keep everything.
    pub release_threshold: Option<u64>,
    /// The shareable handle type the pool's memory can be exported as. `None`: not exportable.
    pub export_handle_type: Option<ExportHandleType>,
}

impl CudaAsyncOptions {
    /// Sets [`CudaAsyncOptions::initial_pool_size`].
    pub fn initial_pool_size(mut self, bytes: usize) -> Self {
        self.initial_pool_size = Some(bytes);
        self
    }

    /// Sets [`CudaAsyncOptions::release_threshold`].
    pub fn release_threshold(mut self, bytes: u64) -> Self {
        self.release_threshold = Some(bytes);
        self
    }

    /// Sets [`CudaAsyncOptions::export_handle_type`].
    pub fn export_handle_type(mut self, handle_type: ExportHandleType) -> Self {
        self.export_handle_type = Some(handle_type);
        self
    }
}

/// The owned pool; destroyed when the last resource sharing it drops.
#[derive(Debug)]
struct Inner {
    pool: PoolHandle,
    device: DeviceId,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.pool == 0 {
            return;
        }
        let _guard = match DeviceGuard::new(self.device) {
            Ok(guard) => guard,
            Err(e) => {
                tracing::error!(
                    "cannot destroy memory pool {:#x} of device {}: {e}",
                    self.pool,
                    self.device
                );
                return;
            }
        };
        // SAFETY: we created the pool and destroy it exactly once, here. Allocations still
        // outstanding keep their memory: the driver releases the pool once they are freed.
        if let Err(e) = unsafe { mempool::destroy(self.pool) } {
            tracing::error!("destroying memory pool {:#x}: {e}", self.pool);
        }
    }
}

/// Stream-ordered device memory from a CUDA memory pool owned by the resource (RMM's
/// `cuda_async_memory_resource`).
///
/// The pool is created with `cuMemPoolCreate` on the device current at construction (pinned
/// device memory). Allocation is `cuMemAllocFromPoolAsync` and deallocation `cuMemFreeAsync`, both
/// ordered on the given stream, which may belong to another device.
///
/// ```no_run
/// use rmm_core::{mr::{CudaAsyncMemoryResource, CudaAsyncOptions}, MemoryResource, cuda::Stream};
/// let mr = CudaAsyncMemoryResource::with_options(CudaAsyncOptions::default().initial_pool_size(1 << 30))?;
/// assert!(mr.reserved_bytes()? >= 1 << 30);
/// let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CudaAsyncMemoryResource {
    inner: Arc<Inner>,
}

impl CudaAsyncMemoryResource {
    /// A resource with a fresh, unprimed pool on the current device that keeps freed memory.
    ///
    /// # Errors
    /// As [`CudaAsyncMemoryResource::with_options`].
    pub fn new() -> Result<Self> {
        Self::with_options(CudaAsyncOptions::default())
    }

    /// A resource with a fresh pool on the current device, configured by `options`.
    ///
    /// # Errors
    /// [`Error::NoDriver`] / [`Error::NoDevice`] without a GPU; [`Error::Unsupported`] when the
    /// device has no memory pools or cannot export the requested handle type (message
    /// `"Requested IPC memory handle type not supported"`); [`Error::OutOfMemory`] when priming
    /// fails; other driver errors.
    pub fn with_options(options: CudaAsyncOptions) -> Result<Self> {
        let device = ensure_context()?;
        mempool::require_pools(device)?;
        let handle_types = match options.export_handle_type {
            None => 0,
            Some(kind) => {
                // A driver that cannot answer supports none (RMM treats the error the same way).
                if mempool::supported_handle_types(device) & kind.bits() != kind.bits() {
                    return Err(Error::Unsupported(HANDLE_TYPE_UNSUPPORTED.into()));
                }
                kind.bits()
            }
        };
        let pool = match mempool::create(device, handle_types) {
            Ok(pool) => pool,
            // The attribute said yes but the system cannot (e.g. fabric handles without IMEX).
            Err(mempool::CreateError::HandleTypes(cause)) => {
                return Err(Error::Unsupported(format!(
                    "{HANDLE_TYPE_UNSUPPORTED} ({cause})"
                )));
            }
            Err(mempool::CreateError::Other(e)) => return Err(e),
        };
        // From here on, dropping `mr` (also on error) destroys the pool.
        let mr = Self {
            inner: Arc::new(Inner { pool, device }),
        };
        mempool::set_u64(
            mr.pool_handle(),
            PoolAttribute::ReleaseThreshold,
            options.release_threshold.unwrap_or(u64::MAX),
        )?;
        if let Some(bytes) = options.initial_pool_size {
            let ptr = mr.allocate(Stream::DEFAULT, bytes, crate::DEFAULT_ALIGNMENT)?;
            // SAFETY: `ptr` was just allocated with these arguments and never handed out.
            unsafe { mr.deallocate(Stream::DEFAULT, ptr, bytes, crate::DEFAULT_ALIGNMENT)? };
            Stream::DEFAULT.synchronize()?;
        }
        Ok(mr)
    }

    /// The pool's handle (`cudaMemPool_t` / `CUmemoryPool`) as an integer. It stays valid while this
    /// resource or a clone of it is alive.
    pub fn pool_handle(&self) -> usize {
        self.inner.pool
    }

    /// The device the pool allocates on.
    pub fn device(&self) -> DeviceId {
        self.inner.device
    }

    /// Bytes the pool currently holds from the driver, in use or not
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`).
    pub fn reserved_bytes(&self) -> Result<u64> {
        mempool::get_u64(self.inner.pool, PoolAttribute::ReservedMemCurrent)
    }

    /// Bytes currently allocated from the pool (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`).
    pub fn used_bytes(&self) -> Result<u64> {
        mempool::get_u64(self.inner.pool, PoolAttribute::UsedMemCurrent)
    }

    /// The pool's release threshold in bytes (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`).
    pub fn release_threshold(&self) -> Result<u64> {
        mempool::get_u64(self.inner.pool, PoolAttribute::ReleaseThreshold)
    }

    /// A resource around a null pool, for host-mode tests of the shared-state semantics.
    #[cfg(test)]
    pub(crate) fn null_for_tests() -> Self {
        Self {
            inner: Arc::new(Inner { pool: 0, device: 0 }),
        }
    }
}

impl MemoryResource for CudaAsyncMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        mempool::allocate(self.inner.pool, stream, bytes, alignment, self.name())
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
        Access::DEVICE
    }

    fn name(&self) -> &str {
        "cuda_async_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.inner, &o.inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda;
    use crate::AnyResource;

    #[test]
    fn without_a_gpu_construction_fails_cleanly() {
        if !cuda::is_host_mode() {
            return;
        }
        for options in [
            CudaAsyncOptions::default(),
            CudaAsyncOptions::default()
                .initial_pool_size(1 << 20)
                .release_threshold(0),
            CudaAsyncOptions::default().export_handle_type(ExportHandleType::Fabric),
        ] {
            let e = CudaAsyncMemoryResource::with_options(options).unwrap_err();
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        }
        let e = CudaAsyncMemoryResource::new().unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
    }

    #[test]
    fn options_default_to_rmm_defaults() {
        let o = CudaAsyncOptions::default();
        assert_eq!(
            (
                o.initial_pool_size,
                o.release_threshold,
                o.export_handle_type
            ),
            (None, None, None)
        );
        let o = o.release_threshold(5).initial_pool_size(7);
        assert_eq!(
            (o.initial_pool_size, o.release_threshold),
            (Some(7), Some(5))
        );
        assert_eq!(ExportHandleType::PosixFileDescriptor.bits(), 1);
        assert_eq!(ExportHandleType::Fabric.bits(), 8);
    }

    #[test]
    fn clones_share_the_pool_and_only_they_are_equal() {
        let a = CudaAsyncMemoryResource::null_for_tests();
        let b = a.clone();
        assert!(a.is_equal(&b));
        assert!(a.is_equal(&AnyResource::new(b.clone())));
        assert!(!a.is_equal(&CudaAsyncMemoryResource::null_for_tests()));
        assert!(!a.is_equal(&crate::mr::CudaMemoryResource::new()));
        assert_eq!(a.access(), Access::DEVICE);
        assert_eq!(a.name(), "cuda_async_memory_resource");
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(
            &CudaAsyncMemoryResource::null_for_tests(),
        );
    }

    fn gpu_test_lock() -> std::sync::RwLockWriteGuard<'static, ()> {
        crate::mr::test_harness::DEVICE_MEMORY
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn priming_reserves_the_initial_size() {
        crate::testing::require_gpu();
        let initial = 64usize << 20;
        let mr = CudaAsyncMemoryResource::with_options(
            CudaAsyncOptions::default().initial_pool_size(initial),
        )
        .unwrap();
        assert!(mr.reserved_bytes().unwrap() >= initial as u64);
        assert_eq!(mr.used_bytes().unwrap(), 0);
        assert_eq!(mr.release_threshold().unwrap(), u64::MAX);
        assert_eq!(mr.device(), cuda::current_device().unwrap());
        let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
        assert!(mr.used_bytes().unwrap() >= 1 << 20);
        // SAFETY: from allocate above.
        unsafe { mr.deallocate_sync(p, 1 << 20, 256).unwrap() };
        Stream::DEFAULT.synchronize().unwrap();
        assert_eq!(mr.used_bytes().unwrap(), 0);
        assert!(
            mr.reserved_bytes().unwrap() >= initial as u64,
            "the default threshold keeps memory"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn threads_without_a_current_context_allocate_and_free() {
        // A new thread has no current context: the optimistic driver call is refused and retried
        // once device 0's primary context is current, for the allocation and for the free alike.
        crate::testing::require_gpu();
        let mr = CudaAsyncMemoryResource::new().unwrap();
        let allocated = std::thread::scope(|s| {
            s.spawn(|| {
                let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
                assert!(!p.is_null());
                p as usize
            })
            .join()
            .unwrap()
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: from allocate above; nothing uses it.
                unsafe {
                    mr.deallocate(Stream::DEFAULT, allocated as *mut u8, 1 << 20, 256)
                        .unwrap()
                };
                Stream::DEFAULT.synchronize().unwrap();
            });
        });
        assert_eq!(mr.used_bytes().unwrap(), 0);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn zero_release_threshold_returns_memory_at_synchronization() {
        crate::testing::require_gpu();
        let mr =
            CudaAsyncMemoryResource::with_options(CudaAsyncOptions::default().release_threshold(0))
                .unwrap();
        assert_eq!(mr.release_threshold().unwrap(), 0);
        let p = mr.allocate(Stream::DEFAULT, 64 << 20, 256).unwrap();
        assert!(mr.reserved_bytes().unwrap() >= 64 << 20);
        // SAFETY: from allocate above; nothing uses it.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 64 << 20, 256).unwrap() };
        Stream::DEFAULT.synchronize().unwrap();
        let reserved = mr.reserved_bytes().unwrap();
        assert!(
            reserved < 64 << 20,
            "a zero threshold gives memory back at synchronization ({reserved} kept)"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn dropping_the_last_clone_releases_the_pool() {
        crate::testing::require_gpu();
        let _exclusive = gpu_test_lock();
        let device = cuda::current_device().unwrap();
        let initial = 4usize << 30;
        let (free_before, _) = cuda::mem_info(device).unwrap();
        let mr = CudaAsyncMemoryResource::with_options(
            CudaAsyncOptions::default().initial_pool_size(initial),
        )
        .unwrap();
        let clone = mr.clone();
        let (free_primed, _) = cuda::mem_info(device).unwrap();
        assert!(
            free_primed + initial / 2 <= free_before,
            "priming took device memory"
        );
        drop(mr);
        let (free_one_left, _) = cuda::mem_info(device).unwrap();
        assert!(
            free_one_left + initial / 2 <= free_before,
            "a clone still holds the pool"
        );
        drop(clone);
        let (free_after, _) = cuda::mem_info(device).unwrap();
        assert!(
            free_after >= free_primed + initial / 2,
            "the pool was destroyed: {free_after} vs {free_primed}"
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn export_handle_types_work_or_are_unsupported() {
        crate::testing::require_gpu();
        for kind in [
            ExportHandleType::PosixFileDescriptor,
            ExportHandleType::Fabric,
        ] {
            match CudaAsyncMemoryResource::with_options(
                CudaAsyncOptions::default().export_handle_type(kind),
            ) {
                Ok(mr) => {
                    let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
                    // SAFETY: from allocate above.
                    unsafe { mr.deallocate_sync(p, 1 << 20, 256).unwrap() };
                }
                Err(Error::Unsupported(msg)) => {
                    assert!(msg.starts_with(HANDLE_TYPE_UNSUPPORTED), "{kind:?}: {msg}");
                    eprintln!("{kind:?}: {msg}");
                }
                Err(e) => panic!("{kind:?}: unexpected error {e}"),
            }
        }
    }
}
