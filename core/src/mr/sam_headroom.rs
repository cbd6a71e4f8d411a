//! `sam_headroom_memory_resource`: system memory (SAM/HMM) that leaves GPU memory free.
//!
//! Memory comes from the system allocator, which the GPU can access on systems with pageable
//! memory access (HMM or ATS). After each allocation the resource looks at the current device's
//! free memory and advises the driver: the first part of the allocation, up to
//! `free - headroom` bytes, prefers to live on the device; the rest prefers the host. So `headroom`
//! bytes of device memory stay available to allocations that cannot use system memory.
//!
//! Stateful in RMM (it holds the headroom): clones are equal, and two resources are equal when they
//! keep the same headroom.

use crate::aligned::{align_down, check_base_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::alloc::{advise_preferred_location, Location};
use crate::cuda::{self, device::ensure_context, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::SystemMemoryResource;
use crate::resource::{Access, MemoryResource};

/// System memory that keeps `headroom` bytes of GPU memory free (RMM's
/// `sam_headroom_memory_resource`).
///
/// Deallocation synchronizes the stream before freeing, because `free` is immediate while work
/// queued on the stream may still use the memory (as RMM's `system_memory_resource` does).
///
/// ```no_run
/// use rmm_core::{mr::SamHeadroomMemoryResource, MemoryResource, cuda::Stream};
/// let mr = SamHeadroomMemoryResource::new(1 << 30)?; // keep 1 GiB of GPU memory free
/// let p = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1 << 20, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SamHeadroomMemoryResource {
    system: SystemMemoryResource,
    headroom: usize,
}

impl SamHeadroomMemoryResource {
    /// A resource that keeps `headroom` bytes of the current device's memory free.
    ///
    /// # Errors
    /// [`Error::NoDriver`] / [`Error::NoDevice`] without a GPU; [`Error::Unsupported`] when the
    /// current device cannot access system memory or the driver lacks `cuMemAdvise_v2`.
    pub fn new(headroom: usize) -> Result<Self> {
        let device = ensure_context()?;
        if !SystemMemoryResource::is_supported_on(device) {
            return Err(Error::Unsupported(format!(
                "System memory allocator is not supported with this hardware/software version \
                 (device {device} cannot access pageable memory)"
            )));
        }
        if !cuda::has_entry_point("cuMemAdvise_v2") {
            return Err(Error::Unsupported(
                "sam_headroom_memory_resource needs cuMemAdvise_v2 (CUDA 12.2+)".into(),
            ));
        }
        Ok(Self {
            system: SystemMemoryResource::new(),
            headroom,
        })
    }

    /// The number of bytes of GPU memory this resource keeps free.
    pub fn headroom(&self) -> usize {
        self.headroom
    }

    /// Advises the driver where the parts of a fresh allocation should live.
    fn advise(&self, ptr: *mut u8, bytes: usize, device: DeviceId) -> Result<()> {
        let (free, _) = cuda::mem_info(device)?;
        let (gpu, cpu) = split(bytes, free, self.headroom);
        if gpu != 0 {
            // SAFETY: [ptr, ptr + gpu) lies inside the allocation just made; the entry point exists
            // (checked by the constructor).
            unsafe { advise_preferred_location(ptr, gpu, Location::Device(device))? };
        }
        if cpu != 0 {
            // SAFETY: [ptr + gpu, ptr + bytes) lies inside the allocation; as above.
            unsafe { advise_preferred_location(ptr.wrapping_add(gpu), cpu, Location::Host)? };
        }
        Ok(())
    }
}

/// Splits `bytes` into the part preferred on the device (at most `free - headroom`, rounded down to
/// 256 bytes as RMM does) and the part preferred on the host.
fn split(bytes: usize, free: usize, headroom: usize) -> (usize, usize) {
    let allocatable = free.saturating_sub(headroom);
    let gpu = align_down(bytes.min(allocatable), DEFAULT_ALIGNMENT);
    (gpu, bytes - gpu)
}

impl MemoryResource for SamHeadroomMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_base_alignment(alignment, self.name())?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let device = ensure_context()?;
        let ptr = self
            .system
            .allocate(stream, bytes, DEFAULT_ALIGNMENT)
            .map_err(|e| match e {
                Error::OutOfMemory { bytes, detail, .. } => Error::OutOfMemory {
                    bytes,
                    resource: self.name().to_owned(),
                    detail,
                },
                other => other,
            })?;
        if let Err(e) = self.advise(ptr, bytes, device) {
            // SAFETY: `ptr` was just allocated by the system resource with these arguments and
            // never handed out.
            let _ = unsafe {
                self.system
                    .deallocate(stream, ptr, bytes, DEFAULT_ALIGNMENT)
            };
            return Err(e);
        }
        Ok(ptr)
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        // The system resource synchronizes `stream` before its immediate `free`.
        // SAFETY: the caller guarantees `ptr` came from `allocate` above (the system resource).
        unsafe {
            self.system
                .deallocate(stream, ptr, bytes, DEFAULT_ALIGNMENT)
        }
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        // System memory is usable on every stream as soon as it is allocated.
        self.allocate(Stream::DEFAULT, bytes, alignment)
    }

    fn access(&self) -> Access {
        Access::HOST_DEVICE
    }

    fn name(&self) -> &str {
        "sam_headroom_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| o.headroom == self.headroom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnyResource;

    /// A resource built without the constructor's device checks (for host-mode tests only).
    fn unchecked(headroom: usize) -> SamHeadroomMemoryResource {
        SamHeadroomMemoryResource {
            system: SystemMemoryResource::new(),
            headroom,
        }
    }

    #[test]
    fn without_a_gpu_construction_fails_cleanly() {
        if !cuda::is_host_mode() {
            return;
        }
        let e = SamHeadroomMemoryResource::new(1 << 30).unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        let e = unchecked(0).allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
    }

    #[test]
    fn equal_when_the_headroom_is_equal() {
        let a = unchecked(1 << 30);
        assert_eq!(a.headroom(), 1 << 30);
        assert_eq!(a.access(), Access::HOST_DEVICE);
        assert_eq!(a.name(), "sam_headroom_memory_resource");
        assert!(a.is_equal(&a.clone()));
        assert!(a.is_equal(&unchecked(1 << 30)));
        assert!(a.is_equal(&AnyResource::new(unchecked(1 << 30))));
        assert!(!a.is_equal(&unchecked(1 << 20)));
        assert!(!a.is_equal(&SystemMemoryResource::new()));
    }

    #[test]
    fn arguments_are_checked_before_the_driver() {
        crate::testing::assert_arguments_checked_before_the_driver(&unchecked(0));
    }

    #[test]
    fn split_keeps_the_headroom_free() {
        const MIB: usize = 1 << 20;
        // Plenty of room: everything prefers the device.
        assert_eq!(split(10 * MIB, 100 * MIB, 10 * MIB), (10 * MIB, 0));
        // Only 5 MiB above the headroom: the rest prefers the host.
        assert_eq!(split(10 * MIB, 15 * MIB, 10 * MIB), (5 * MIB, 5 * MIB));
        // Less free than the headroom: everything prefers the host.
        assert_eq!(split(10 * MIB, 5 * MIB, 10 * MIB), (0, 10 * MIB));
        // The device part is rounded down to 256 bytes.
        assert_eq!(split(1000, 1 << 40, 0), (768, 232));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn headroom_larger_than_the_device_puts_everything_on_the_host() {
        crate::testing::require_gpu();
        let device = cuda::current_device().unwrap();
        if !SystemMemoryResource::is_supported_on(device) {
            crate::testing::skip(
                "sam_headroom::headroom_larger_than_the_device",
                "System memory not supported",
            );
            return;
        }
        let (_, total) = cuda::mem_info(device).unwrap();
        let mr = SamHeadroomMemoryResource::new(total).unwrap();
        let p = mr.allocate(Stream::DEFAULT, 4 << 20, 256).unwrap();
        // SAFETY: system memory, valid for 4 MiB.
        unsafe {
            std::ptr::write_bytes(p, 1, 4 << 20);
            mr.deallocate(Stream::DEFAULT, p, 4 << 20, 256).unwrap();
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn unsupported_devices_are_refused_with_a_reason() {
        crate::testing::require_gpu();
        let device = cuda::current_device().unwrap();
        match SamHeadroomMemoryResource::new(0) {
            Ok(_) => assert!(SystemMemoryResource::is_supported_on(device)),
            Err(Error::Unsupported(msg)) => {
                assert!(
                    !SystemMemoryResource::is_supported_on(device)
                        || !cuda::has_entry_point("cuMemAdvise_v2")
                );
                assert!(
                    msg.contains("not supported") || msg.contains("cuMemAdvise_v2"),
                    "{msg}"
                );
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}
