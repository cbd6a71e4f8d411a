//! `system_memory_resource`: `malloc`/`free` memory.
//!
//! Host-accessible always; device-accessible too when the current device can access pageable
//! memory (HMM or ATS). It is also the resource of host mode: with no GPU it is plain host memory.
//! Allocation is immediate, so the stream is ignored; deallocation synchronizes the stream first
//! (with a GPU), since `free` cannot wait for queued work that still uses the memory.

use crate::aligned::check_alignment;
use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::resource::{Access, MemoryResource};

/// Memory from the system allocator (RMM's `system_memory_resource`).
///
/// ```
/// use rmm_core::{mr::SystemMemoryResource, MemoryResource, cuda::Stream};
/// let mr = SystemMemoryResource::new();
/// let p = mr.allocate(Stream::DEFAULT, 4096, 4096).unwrap();
/// assert_eq!(p as usize % 4096, 0);
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 4096, 4096).unwrap() };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemMemoryResource {
    access: Access,
}

impl SystemMemoryResource {
    /// A system resource; device-accessible when the current device supports pageable memory access.
    pub fn new() -> Self {
        let device_ok = cuda::current_device()
            .map(cuda::device::supports_pageable_memory_access)
            .unwrap_or(false);
        Self {
            access: if device_ok {
                Access::HOST_DEVICE
            } else {
                Access::HOST
            },
        }
    }

    /// True when `device` can access system memory (RMM's `is_system_memory_supported`).
    pub fn is_supported_on(device: cuda::DeviceId) -> bool {
        cuda::device::supports_pageable_memory_access(device)
    }
}

impl Default for SystemMemoryResource {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryResource for SystemMemoryResource {
    fn allocate(&self, _stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let alignment = alignment.max(std::mem::size_of::<*const u8>());
        let mut ptr: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the alignment is a power of two and a multiple of the
        // pointer size, as posix_memalign requires.
        let status = unsafe { libc::posix_memalign(&mut ptr, alignment, bytes) };
        match status {
            0 => Ok(ptr.cast()),
            libc::ENOMEM => Err(Error::out_of_memory(bytes, self.name())),
            other => Err(Error::invalid(format!(
                "posix_memalign failed with errno {other}"
            ))),
        }
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        _bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // `free` is immediate, unlike a stream-ordered free: wait for the work queued on `stream`
        // that may still use the memory (as RMM does). The memory is freed even if that fails.
        let synced = if cuda::is_available() {
            stream.synchronize()
        } else {
            Ok(())
        };
        // SAFETY: the caller guarantees `ptr` came from posix_memalign above.
        unsafe { libc::free(ptr.cast()) };
        synced
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.allocate(Stream::DEFAULT, bytes, alignment)
    }

    fn access(&self) -> Access {
        self.access
    }

    fn name(&self) -> &str {
        "system_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_writable_and_aligned() {
        let mr = SystemMemoryResource::new();
        assert!(mr.access().host());
        for (bytes, align) in [
            (1usize, 1usize),
            (4, 4),
            (1024, 256),
            (1 << 20, 4096),
            (3 << 20, 1 << 16),
        ] {
            let p = mr.allocate(Stream::DEFAULT, bytes, align).unwrap();
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0);
            // SAFETY: p is valid for `bytes` bytes of host memory.
            unsafe {
                std::ptr::write_bytes(p, 0xab, bytes);
                assert_eq!(*p.add(bytes - 1), 0xab);
                mr.deallocate(Stream::DEFAULT, p, bytes, align).unwrap();
            }
        }
    }

    #[test]
    fn zero_bytes_is_null_and_freeing_null_is_fine() {
        let mr = SystemMemoryResource::new();
        let p = mr.allocate(Stream::DEFAULT, 0, 256).unwrap();
        assert!(p.is_null());
        // SAFETY: freeing null is a no-op.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 0, 256).unwrap() };
    }

    #[test]
    fn bad_alignment_is_an_error() {
        let mr = SystemMemoryResource::new();
        for align in [0usize, 3, 48, 1000] {
            assert!(matches!(
                mr.allocate(Stream::DEFAULT, 64, align),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn impossible_size_is_out_of_memory_and_resource_still_works() {
        let mr = SystemMemoryResource::new();
        let err = mr.allocate(Stream::DEFAULT, 1 << 50, 256).unwrap_err();
        assert!(err.is_out_of_memory(), "{err}");
        let err = mr
            .allocate(Stream::DEFAULT, usize::MAX - 100, 256)
            .unwrap_err();
        assert!(err.is_out_of_memory(), "{err}");
        let p = mr.allocate(Stream::DEFAULT, 4, 256).unwrap();
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 4, 256).unwrap() };
    }

    #[test]
    fn all_system_resources_are_equal() {
        let a = SystemMemoryResource::new();
        assert!(a.is_equal(&SystemMemoryResource::new()));
    }
}
