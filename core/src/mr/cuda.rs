//! `cuda_memory_resource`: device memory from `cuMemAlloc` / `cuMemFree`.
//!
//! Not stream-ordered underneath: `cuMemAlloc` returns memory usable everywhere and `cuMemFree`
//! synchronizes the device, so the stream argument only orders nothing. Stateless: every instance is
//! equal to every other.

use crate::cuda::DriverMemory;
use crate::mr::detail::driver::stateless_driver_resource;
use crate::resource::Access;

/// Device memory from `cuMemAlloc` (RMM's `cuda_memory_resource`).
///
/// ```no_run
/// use rmm_core::{mr::CudaMemoryResource, MemoryResource, cuda::Stream};
/// let mr = CudaMemoryResource::new();
/// let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaMemoryResource;

impl CudaMemoryResource {
    /// The resource. Construction never fails; without a GPU, allocation returns
    /// [`crate::Error::NoDriver`] or [`crate::Error::NoDevice`].
    pub const fn new() -> Self {
        CudaMemoryResource
    }
}

stateless_driver_resource!(
    CudaMemoryResource,
    DriverMemory::Device,
    Access::DEVICE,
    "cuda_memory_resource"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{self, Stream};
    use crate::resource::MemoryResource;
    use crate::Error;

    #[test]
    fn without_a_gpu_allocation_fails_cleanly() {
        let mr = CudaMemoryResource::new();
        assert_eq!(mr.access(), Access::DEVICE);
        assert!(mr.is_equal(&CudaMemoryResource::new()));
        assert!(matches!(
            mr.allocate(Stream::DEFAULT, 64, 3),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            mr.allocate(Stream::DEFAULT, 64, 512),
            Err(Error::InvalidArgument(_))
        ));
        assert!(mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
        if cuda::is_host_mode() {
            let e = mr.allocate(Stream::DEFAULT, 64, 256).unwrap_err();
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        }
    }
}
