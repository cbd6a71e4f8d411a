//! `cuda_memory_resource`: device memory from `cuMemAlloc` / `cuMemFree`.
//!
//! Not stream-ordered underneath: `cuMemAlloc` returns memory usable everywhere and `cuMemFree`
//! synchronizes the device, so the stream argument only orders nothing. Stateless: every instance is
//! equal to every other.


use crate::aligned::check_base_alignment;
use crate::cuda::{self, device::ensure_context, sys, Stream};
use crate::error::Result;
use crate::resource::{Access, MemoryResource};

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

impl MemoryResource for CudaMemoryResource {
    fn allocate(&self, _stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_base_alignment(alignment, self.name())?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        ensure_context()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: a context is current; `ptr` is a valid out-pointer.
        let status = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) };
        cuda::check_alloc(status, "cuMemAlloc", bytes, self.name())?;
        Ok(ptr as *mut u8)
    }

    unsafe fn deallocate(&self, _stream: Stream, ptr: *mut u8, _bytes: usize, _alignment: usize) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        ensure_context()?;
        // SAFETY: the caller guarantees `ptr` came from cuMemAlloc above and is freed once.
        cuda::check(unsafe { sys::cuMemFree_v2(ptr as sys::CUdeviceptr) }, "cuMemFree")
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        // cuMemAlloc memory is usable on every stream at once.
        self.allocate(Stream::DEFAULT, bytes, alignment)
    }

    fn access(&self) -> Access {
        Access::DEVICE
    }

    fn name(&self) -> &str {
        "cuda_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some()
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn without_a_gpu_allocation_fails_cleanly() {
        let mr = CudaMemoryResource::new();
        assert_eq!(mr.access(), Access::DEVICE);
        assert!(mr.is_equal(&CudaMemoryResource::new()));
        assert!(matches!(mr.allocate(Stream::DEFAULT, 64, 3), Err(Error::InvalidArgument(_))));
        assert!(matches!(mr.allocate(Stream::DEFAULT, 64, 512), Err(Error::InvalidArgument(_))));
        assert!(mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
        if cuda::is_host_mode() {
            let e = mr.allocate(Stream::DEFAULT, 64, 256).unwrap_err();
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
        }
    }
}
