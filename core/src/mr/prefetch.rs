//! `prefetch_resource_adaptor`: managed memory is migrated to the current device as it is
//! allocated, so the first kernel that touches it does not page-fault it over.

use std::sync::Arc;

use crate::cuda::{self, Stream};
use crate::error::Result;
use crate::mr::detail::forward::forward_to_upstream;
use crate::resource::{AnyResource, MemoryResource};

/// Prefetches every allocation to the current device on the allocation's stream (RMM's
/// `prefetch_resource_adaptor`).
///
/// The prefetch is [`cuda::memory::prefetch`]: a no-op for memory that is not managed, and in host
/// mode. Memory from an upstream that is not host-accessible cannot be managed memory, so it is not
/// even queried: over `cuda_memory_resource` or `cuda_async_memory_resource` the adaptor costs no
/// driver call (RMM asks the driver about every pointer). An upstream that declares device-only
/// access but returns managed memory therefore gets no prefetch.
///
/// # Errors
/// The upstream's errors; a failed prefetch frees the allocation and returns the driver's error
/// (RMM throws and leaks the memory).
///
/// Stateless apart from its upstream: two adaptors are equal when their upstreams are. Access is
/// the upstream's.
///
/// ```
/// use rmm_core::{mr::{PrefetchResourceAdaptor, SystemMemoryResource}, MemoryResource, cuda::Stream};
/// let mr = PrefetchResourceAdaptor::new(SystemMemoryResource::new());
/// let p = mr.allocate(Stream::DEFAULT, 4096, 256)?; // host memory: nothing to prefetch
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 4096, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PrefetchResourceAdaptor {
    upstream: AnyResource,
    /// Shared by clones: as in RMM (a `shared_resource`), copies compare equal and two adaptors
    /// made separately do not, even over the same upstream.
    identity: Arc<()>,
}

impl PrefetchResourceAdaptor {
    /// Prefetches the managed memory `upstream` hands out.
    pub fn new<R: MemoryResource>(upstream: R) -> Self {
        Self {
            upstream: AnyResource::new(upstream),
            identity: Arc::new(()),
        }
    }

    /// The upstream resource (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.upstream
    }

    fn prefetch(&self, ptr: *mut u8, bytes: usize, stream: Stream) -> Result<()> {
        if ptr.is_null() || !self.upstream.access().host() || cuda::is_host_mode() {
            return Ok(());
        }
        let device = cuda::current_device()?;
        cuda::memory::prefetch(ptr, bytes, device, stream)
    }
}

impl MemoryResource for PrefetchResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let ptr = self.upstream.allocate(stream, bytes, alignment)?;
        if let Err(e) = self.prefetch(ptr, bytes, stream) {
            // SAFETY: `ptr` was just allocated with these arguments and never handed out.
            let _ = unsafe { self.upstream.deallocate(stream, ptr, bytes, alignment) };
            return Err(e);
        }
        Ok(ptr)
    }

    forward_to_upstream! {
        name: "prefetch_resource_adaptor",
        upstream: upstream,
        identity: identity,
        forward: access, deallocate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{ManagedMemoryResource, SimulatedMemoryResource, SystemMemoryResource};
    use crate::resource::Access;
    use crate::testing::Probe;
    use std::sync::atomic::Ordering;

    #[test]
    fn host_memory_is_handed_out_untouched() {
        // In host mode the prefetch is a no-op; with a GPU, malloc memory is not managed, so it is
        // a no-op there too.
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = PrefetchResourceAdaptor::new(probe.clone());
        for bytes in [0usize, 1, 4096, 1 << 20] {
            let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
            assert_eq!(p.is_null(), bytes == 0);
            if bytes > 0 {
                // SAFETY: host memory valid for `bytes` bytes.
                unsafe { p.write_bytes(9, bytes) };
            }
            // SAFETY: from allocate above.
            unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
        }
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
        let sync = mr.allocate_sync(100, 256).unwrap();
        // SAFETY: from allocate_sync above.
        unsafe { mr.deallocate_sync(sync, 100, 256).unwrap() };
    }

    #[test]
    fn device_only_memory_is_not_queried() {
        // Simulated addresses are fake: they must never reach the driver, even on a GPU machine.
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let mr = PrefetchResourceAdaptor::new(gpu.clone());
        let p = mr.allocate(Stream::DEFAULT, 1000, 256).unwrap();
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256).unwrap() };
        assert_eq!(gpu.usage().allocated_bytes, 0);
        assert!(mr
            .allocate(Stream::DEFAULT, 2 << 20, 256)
            .unwrap_err()
            .is_out_of_memory());
    }

    #[test]
    fn copies_are_equal_and_separate_adaptors_are_not() {
        let a = PrefetchResourceAdaptor::new(SystemMemoryResource::new());
        assert!(a.is_equal(&a.clone()));
        assert!(!a.is_equal(&PrefetchResourceAdaptor::new(SystemMemoryResource::new())));
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let b = PrefetchResourceAdaptor::new(gpu.clone());
        assert!(b.is_equal(&b.clone()) && !b.is_equal(&PrefetchResourceAdaptor::new(gpu)));
        assert!(!a.is_equal(&b));
        assert_eq!(b.access(), Access::DEVICE);
        assert_eq!(a.name(), "prefetch_resource_adaptor");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_managed_memory_is_prefetched() {
        crate::testing::require_gpu();
        let mr = AnyResource::new(PrefetchResourceAdaptor::new(ManagedMemoryResource::new()));
        for stream in [Stream::DEFAULT, Stream::PER_THREAD] {
            let p = mr.allocate(stream, 4 << 20, 256).unwrap();
            assert!(
                cuda::memory::is_managed(p),
                "the adaptor hands out the upstream's managed memory"
            );
            // The prefetch call succeeded (allocate returned Ok) and was queued on `stream`; the
            // memory is usable from device and host afterwards.
            crate::mr::test_harness::check_usable(&mr, p, 4 << 20, 0x5e, stream);
            // SAFETY: from allocate above; the check synchronized its work.
            unsafe { mr.deallocate(stream, p, 4 << 20, 256).unwrap() };
        }
        // The same prefetch on memory that is not managed is a successful no-op.
        let cuda = AnyResource::new(PrefetchResourceAdaptor::new(
            crate::mr::PinnedHostMemoryResource::new(),
        ));
        let p = cuda.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap();
        assert!(!cuda::memory::is_managed(p));
        // SAFETY: from allocate above.
        unsafe { cuda.deallocate(Stream::DEFAULT, p, 1 << 20, 256).unwrap() };
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(PrefetchResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_managed, || {
        Ok(AnyResource::new(PrefetchResourceAdaptor::new(
            crate::mr::ManagedMemoryResource::new(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(PrefetchResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
        )))
    });
}
