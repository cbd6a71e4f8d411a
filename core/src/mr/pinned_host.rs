//! `pinned_host_memory_resource`: page-locked host memory from `cuMemHostAlloc` / `cuMemFreeHost`.
//!
//! Pinned memory is mapped into the device's address space (unified addressing), so kernels and
//! copies can use it directly: it is host- and device-accessible. Allocation is immediate, so the
//! stream argument orders nothing. Stateless: every instance is equal to every other.

use crate::cuda::DriverMemory;
use crate::mr::detail::driver::stateless_driver_resource;
use crate::resource::Access;

/// Pinned host memory (RMM's `pinned_host_memory_resource`).
///
/// Allocated with `CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP`: pinned for every context,
/// so it may be used and freed whichever device is current. Requests larger than the host's
/// physical memory are refused with [`crate::Error::OutOfMemory`] before the driver sees them.
///
/// ```no_run
/// use rmm_core::{mr::PinnedHostMemoryResource, MemoryResource, cuda::Stream};
/// let mr = PinnedHostMemoryResource::new();
/// let p = mr.allocate(Stream::DEFAULT, 4096, 256)?;
/// // SAFETY: pinned memory is host memory, valid for 4096 bytes.
/// unsafe { std::ptr::write_bytes(p, 0, 4096) };
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 4096, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedHostMemoryResource;

impl PinnedHostMemoryResource {
    /// The resource. Construction never fails; without a GPU, allocation returns
    /// [`crate::Error::NoDriver`] or [`crate::Error::NoDevice`].
    pub const fn new() -> Self {
        PinnedHostMemoryResource
    }
}

stateless_driver_resource!(
    PinnedHostMemoryResource,
    DriverMemory::PinnedHost,
    Access::HOST_DEVICE,
    "pinned_host_memory_resource"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{self, Stream};
    use crate::mr::{CudaMemoryResource, ManagedMemoryResource};
    use crate::resource::MemoryResource;
    use crate::{AnyResource, Error};

    #[test]
    fn host_and_device_accessible_and_stateless() {
        let mr = PinnedHostMemoryResource::new();
        assert_eq!(mr.access(), Access::HOST_DEVICE);
        assert_eq!(mr.name(), "pinned_host_memory_resource");
        assert!(mr.is_equal(&PinnedHostMemoryResource::new()));
        assert!(mr.is_equal(&AnyResource::new(PinnedHostMemoryResource::new())));
        assert!(!mr.is_equal(&CudaMemoryResource::new()));
        assert!(!mr.is_equal(&ManagedMemoryResource::new()));
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(&PinnedHostMemoryResource::new());
    }

    #[test]
    fn without_a_gpu_allocation_fails_cleanly() {
        if !cuda::is_host_mode() {
            return; // the GPU harness covers this path
        }
        let e = PinnedHostMemoryResource::new()
            .allocate(Stream::DEFAULT, 64, 256)
            .unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn pinned_memory_is_not_managed_and_round_trips_through_the_device() {
        crate::testing::require_gpu();
        let mr = PinnedHostMemoryResource::new();
        let host = mr.allocate(Stream::DEFAULT, 4096, 256).unwrap();
        assert!(!cuda::memory::is_managed(host));
        let dev = CudaMemoryResource::new()
            .allocate(Stream::DEFAULT, 4096, 256)
            .unwrap();
        // SAFETY: both buffers are valid for 4096 bytes; the copies are synchronized before reads.
        unsafe {
            std::ptr::write_bytes(host, 0x5a, 4096);
            cuda::copy_sync(dev, host, 4096, Stream::DEFAULT).unwrap();
            std::ptr::write_bytes(host, 0, 4096);
            cuda::copy_sync(host, dev, 4096, Stream::DEFAULT).unwrap();
            assert_eq!((*host, *host.add(4095)), (0x5a, 0x5a));
            CudaMemoryResource::new()
                .deallocate(Stream::DEFAULT, dev, 4096, 256)
                .unwrap();
            mr.deallocate(Stream::DEFAULT, host, 4096, 256).unwrap();
        }
    }
}
