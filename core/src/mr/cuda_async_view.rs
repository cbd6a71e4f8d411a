//! `cuda_async_view_memory_resource`: stream-ordered allocation from an existing CUDA memory pool
//! that the resource does not own (it never destroys the pool).
//!
//! Stateful: it holds the pool handle; two views are equal when they use the same pool.

use crate::cuda::mempool::{self, PoolHandle};
use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::mr::CudaAsyncMemoryResource;
use crate::resource::{Access, MemoryResource};

/// Stream-ordered device memory from a pool someone else owns (RMM's
/// `cuda_async_view_memory_resource`).
///
/// Make one from a [`CudaAsyncMemoryResource`] with `From` (the view then keeps that pool alive),
/// or from any raw `cudaMemPool_t` / `CUmemoryPool` with [`CudaAsyncViewMemoryResource::from_raw`].
///
/// ```no_run
/// use rmm_core::{mr::{CudaAsyncMemoryResource, CudaAsyncViewMemoryResource}, MemoryResource, cuda::Stream};
/// let owner = CudaAsyncMemoryResource::new()?;
/// let view = CudaAsyncViewMemoryResource::from(&owner);
/// assert_eq!(view.pool_handle(), owner.pool_handle());
/// drop(owner); // the view keeps the pool alive
/// let p = view.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: `p` came from `view` with these arguments.
/// unsafe { view.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CudaAsyncViewMemoryResource {
    pool: PoolHandle,
    /// The owner of the pool when the view was made from one: keeps the pool alive.
    owner: Option<CudaAsyncMemoryResource>,
}

impl CudaAsyncViewMemoryResource {
    /// A view of the pool `handle` (a `cudaMemPool_t` / `CUmemoryPool` value).
    ///
    /// # Safety
    /// `handle` must be a valid memory pool that stays alive (is not destroyed) for as long as this
    /// view, any clone of it, or any memory allocated through it is in use.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a null handle; [`Error::NoDriver`] / [`Error::NoDevice`]
    /// without a GPU.
    pub unsafe fn from_raw(handle: usize) -> Result<Self> {
        if handle == 0 {
            return Err(Error::invalid("Unexpected null pool handle."));
        }
        cuda::device::ensure_context()?;
        Ok(Self {
            pool: handle,
            owner: None,
        })
    }

    /// The viewed pool's handle as an integer.
    pub fn pool_handle(&self) -> usize {
        self.pool
    }

    /// The resource that owns the pool, when the view was made from one (the view keeps it alive).
    pub fn owner(&self) -> Option<&CudaAsyncMemoryResource> {
        self.owner.as_ref()
    }
}

impl From<&CudaAsyncMemoryResource> for CudaAsyncViewMemoryResource {
    /// A view of `owner`'s pool that shares ownership of it: the pool lives while the view does.
    fn from(owner: &CudaAsyncMemoryResource) -> Self {
        Self {
            pool: owner.pool_handle(),
            owner: Some(owner.clone()),
        }
    }
}

impl MemoryResource for CudaAsyncViewMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        mempool::allocate(self.pool, stream, bytes, alignment, self.name())
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

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // As RMM's view: free on stream 0, then wait for the free to happen.
        // SAFETY: forwarded caller contract.
        unsafe { self.deallocate(Stream::DEFAULT, ptr, bytes, alignment)? };
        if ptr.is_null() {
            return Ok(());
        }
        Stream::DEFAULT.synchronize()
    }

    fn access(&self) -> Access {
        Access::DEVICE
    }

    fn name(&self) -> &str {
        "cuda_async_view_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| o.pool == self.pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnyResource;

    fn fake(pool: usize) -> CudaAsyncViewMemoryResource {
        CudaAsyncViewMemoryResource { pool, owner: None }
    }

    #[test]
    fn null_handle_is_an_invalid_argument() {
        // SAFETY: a null handle is rejected before use.
        let e = unsafe { CudaAsyncViewMemoryResource::from_raw(0) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn without_a_gpu_construction_fails_cleanly() {
        if !cuda::is_host_mode() {
            return;
        }
        // SAFETY: in host mode the handle is never used.
        let e = unsafe { CudaAsyncViewMemoryResource::from_raw(0x1000) }.unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        let e = fake(0x1000).allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
    }

    #[test]
    fn equal_when_the_pool_is_the_same() {
        let a = fake(0x1000);
        assert_eq!(a.pool_handle(), 0x1000);
        assert_eq!(a.access(), Access::DEVICE);
        assert_eq!(a.name(), "cuda_async_view_memory_resource");
        assert!(a.is_equal(&fake(0x1000)));
        assert!(a.is_equal(&AnyResource::new(a.clone())));
        assert!(!a.is_equal(&fake(0x2000)));
        assert!(!a.is_equal(&crate::mr::CudaMemoryResource::new()));
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(&fake(0x1000));
    }

    #[test]
    fn a_view_of_an_owner_shares_its_pool() {
        let owner = CudaAsyncMemoryResource::null_for_tests();
        let view = CudaAsyncViewMemoryResource::from(&owner);
        assert_eq!(view.pool_handle(), owner.pool_handle());
        assert!(view.owner().is_some_and(|o| o.is_equal(&owner)));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn dropping_a_view_does_not_destroy_the_pool() {
        crate::testing::require_gpu();
        let owner = CudaAsyncMemoryResource::new().unwrap();
        // SAFETY: `owner` outlives the view and everything allocated through it.
        let view = unsafe { CudaAsyncViewMemoryResource::from_raw(owner.pool_handle()) }.unwrap();
        assert!(view.is_equal(&view.clone()));
        let p = view.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
        assert!(
            owner.used_bytes().unwrap() >= 1 << 20,
            "the view allocates from the owner's pool"
        );
        // SAFETY: from allocate above.
        unsafe { view.deallocate_sync(p, 1 << 20, 256).unwrap() };
        drop(view);
        let p = owner.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
        // SAFETY: from allocate above.
        unsafe { owner.deallocate_sync(p, 1 << 20, 256).unwrap() };
        assert!(owner.reserved_bytes().is_ok());
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_view_made_from_the_owner_keeps_the_pool_alive() {
        crate::testing::require_gpu();
        let owner = CudaAsyncMemoryResource::new().unwrap();
        let view = CudaAsyncViewMemoryResource::from(&owner);
        let handle = owner.pool_handle();
        drop(owner);
        let p = view.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
        assert_eq!(view.pool_handle(), handle);
        // SAFETY: from allocate above.
        unsafe { view.deallocate_sync(p, 1 << 20, 256).unwrap() };
        let kept = view.owner().unwrap();
        assert_eq!(kept.used_bytes().unwrap(), 0);
    }
}
