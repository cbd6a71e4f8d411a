//! `managed_memory_resource`: unified (managed) memory from `cuMemAllocManaged` / `cuMemFree`.
//!
//! Managed memory migrates on demand between host and device, so it is host- and
//! device-accessible. Not stream-ordered underneath (`cuMemFree` synchronizes), so the stream
//! argument orders nothing. Stateless: every instance is equal to every other.

use crate::cuda::DriverMemory;
use crate::mr::detail::driver::stateless_driver_resource;
use crate::resource::Access;

/// Managed memory from `cuMemAllocManaged(.., CU_MEM_ATTACH_GLOBAL)` (RMM's
/// `managed_memory_resource`).
///
/// # Size guard
/// A request larger than the current device's total memory plus the host's physical memory can
/// never be satisfied, and asking the driver for one can hang the GPU instead of failing. Such a
/// request is refused with [`crate::Error::OutOfMemory`] (its detail says why) before the driver
/// sees it.
///
/// ```no_run
/// use rmm_core::{mr::ManagedMemoryResource, MemoryResource, cuda::Stream};
/// let mr = ManagedMemoryResource::new();
/// let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: managed memory is host-accessible and `p` is valid for 1 MiB.
/// unsafe { p.write(42) };
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManagedMemoryResource;

impl ManagedMemoryResource {
    /// The resource. Construction never fails; without a GPU, allocation returns
    /// [`crate::Error::NoDriver`] or [`crate::Error::NoDevice`].
    pub const fn new() -> Self {
        ManagedMemoryResource
    }
}

stateless_driver_resource!(
    ManagedMemoryResource,
    DriverMemory::Managed,
    Access::HOST_DEVICE,
    "managed_memory_resource"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::{self, Stream};
    use crate::mr::{CudaMemoryResource, SystemMemoryResource};
    use crate::resource::MemoryResource;
    use crate::{AnyResource, Error};

    #[test]
    fn host_and_device_accessible_and_stateless() {
        let mr = ManagedMemoryResource::new();
        assert_eq!(mr.access(), Access::HOST_DEVICE);
        assert_eq!(mr.name(), "managed_memory_resource");
        assert!(mr.is_equal(&ManagedMemoryResource::new()));
        assert!(mr.is_equal(&AnyResource::new(ManagedMemoryResource::new())));
        assert!(!mr.is_equal(&CudaMemoryResource::new()));
        assert!(!mr.is_equal(&SystemMemoryResource::new()));
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(&ManagedMemoryResource::new());
    }

    #[test]
    fn without_a_gpu_allocation_fails_cleanly() {
        if !cuda::is_host_mode() {
            return; // the GPU harness covers this path
        }
        let mr = ManagedMemoryResource::new();
        for bytes in [64usize, 1 << 50] {
            let e = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap_err();
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
            let e = mr.allocate_sync(bytes, 256).unwrap_err();
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn memory_is_managed_and_host_writable() {
        crate::testing::require_gpu();
        let mr = ManagedMemoryResource::new();
        let p = mr.allocate(Stream::DEFAULT, 4096, 256).unwrap();
        assert!(cuda::memory::is_managed(p));
        // SAFETY: managed memory is host-accessible and valid for 4096 bytes.
        unsafe {
            std::ptr::write_bytes(p, 7, 4096);
            assert_eq!(*p.add(4095), 7);
            mr.deallocate(Stream::DEFAULT, p, 4096, 256).unwrap();
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn more_than_can_exist_is_refused_before_the_driver() {
        crate::testing::require_gpu();
        let mr = ManagedMemoryResource::new();
        let device = cuda::current_device().unwrap();
        let (_, total) = cuda::mem_info(device).unwrap();
        let too_much = total + crate::mr::detail::size_guard::host_physical_memory() + 1;
        let err = mr.allocate(Stream::DEFAULT, too_much, 256).unwrap_err();
        assert!(err.is_out_of_memory(), "{err}");
        assert!(
            err.to_string().contains("refused before asking the driver"),
            "{err}"
        );
    }
}
