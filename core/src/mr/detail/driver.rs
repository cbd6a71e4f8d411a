//! The one implementation of the stateless driver resources (`cuda_memory_resource`,
//! `managed_memory_resource`, `pinned_host_memory_resource`): argument checks, the size guards,
//! and the driver's immediate allocator of each ([`DriverMemory`]).

use crate::aligned::check_base_alignment;
use crate::cuda::device::ensure_context;
use crate::cuda::DriverMemory;
use crate::error::Result;
use crate::mr::detail::size_guard::{check_managed_size, check_pinned_size};

/// Allocates `bytes` of `memory` for `resource`: the alignment is checked, 0 bytes gives null, a
/// context is made current, and requests that can never be satisfied are refused before the driver
/// sees them (managed: more than device plus host memory; pinned: more than host memory).
pub(crate) fn allocate(
    memory: DriverMemory,
    bytes: usize,
    alignment: usize,
    resource: &str,
) -> Result<*mut u8> {
    check_base_alignment(alignment, resource)?;
    if bytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    let device = ensure_context()?;
    match memory {
        DriverMemory::Device => {}
        DriverMemory::Managed => check_managed_size(bytes, device, resource)?,
        DriverMemory::PinnedHost => check_pinned_size(bytes, resource)?,
    }
    memory.allocate(bytes, resource)
}

/// Frees `ptr` (null is a no-op).
///
/// # Safety
/// `ptr` came from [`allocate`] with the same `memory` and is freed once.
pub(crate) unsafe fn deallocate(memory: DriverMemory, ptr: *mut u8) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    ensure_context()?;
    // SAFETY: caller contract.
    unsafe { memory.free(ptr) }
}

/// `impl MemoryResource` for a stateless driver resource: `$ty` allocates `$memory`
/// ([`DriverMemory`]) with the given access and name. The memory is usable on every stream as soon
/// as the driver returns it, so the stream argument orders nothing and `allocate_sync` is
/// `allocate`; every instance is equal to every other.
macro_rules! stateless_driver_resource {
    ($ty:ty, $memory:expr, $access:expr, $name:literal) => {
        impl $crate::resource::MemoryResource for $ty {
            fn allocate(
                &self,
                _stream: $crate::cuda::Stream,
                bytes: usize,
                alignment: usize,
            ) -> $crate::error::Result<*mut u8> {
                $crate::mr::detail::driver::allocate($memory, bytes, alignment, $name)
            }

            unsafe fn deallocate(
                &self,
                _stream: $crate::cuda::Stream,
                ptr: *mut u8,
                _bytes: usize,
                _alignment: usize,
            ) -> $crate::error::Result<()> {
                // SAFETY: the caller guarantees `ptr` came from `allocate` above and is freed once.
                unsafe { $crate::mr::detail::driver::deallocate($memory, ptr) }
            }

            fn allocate_sync(
                &self,
                bytes: usize,
                alignment: usize,
            ) -> $crate::error::Result<*mut u8> {
                $crate::mr::detail::driver::allocate($memory, bytes, alignment, $name)
            }

            fn access(&self) -> $crate::resource::Access {
                $access
            }

            fn name(&self) -> &str {
                $name
            }

            fn is_equal(&self, other: &dyn $crate::resource::MemoryResource) -> bool {
                $crate::resource::downcast::<Self>(other).is_some()
            }
        }
    };
}
pub(crate) use stateless_driver_resource;
