//! `limiting_resource_adaptor`: a hard cap on the bytes allocated through it.
//!
//! Invariant: `allocated_bytes() <= allocation_limit()` at every instant, also while many threads
//! allocate at once. Each request first *reserves* its rounded size with a compare-and-swap that
//! never takes the counter past the limit; only then is the upstream asked, and the reservation is
//! released if the upstream fails. (RMM adds first and subtracts on overshoot, so the counter may
//! briefly exceed the limit and make a concurrent request that would have fitted fail.)
//!
//! Only what the adaptor handed out gives room back: each allocation is recorded; a free with a
//! size that does not round up to the same multiple of 256 as the allocation's is refused with
//! [`Error::InvalidArgument`], and a free of a pointer it did not hand out is forwarded without
//! giving room back when the upstream knows it as a live allocation, refused otherwise. (RMM
//! subtracts any free's size, so freeing through it what was allocated beside it lets more than
//! the limit live: docs/design/checked-frees.md.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{no_room, Freed, LiveSet, NoRoom, Sizes};
use crate::resource::{AnyResource, MemoryResource};

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    limit: usize,
    alignment: usize,
    allocated: AtomicUsize,
    /// What this adaptor handed out and has not seen freed, with the bytes asked for.
    live: Arc<LiveSet>,
}

/// Refuses allocations that would take the bytes allocated through it past a limit (RMM's
/// `limiting_resource_adaptor`).
///
/// Sizes are counted rounded up to the adaptor's `alignment` (256 by default). A request that would
/// exceed the limit fails with [`Error::OutOfMemory`] without calling the upstream; a request that
/// fits is forwarded unchanged (with the call's alignment), and the upstream's own errors pass
/// through. Freeing gives the room back.
///
/// Clones share the counter and compare equal only to each other. Access is the upstream's.
///
/// ```
/// use rmm_core::{mr::{LimitingResourceAdaptor, SystemMemoryResource}, MemoryResource, cuda::Stream};
/// let mr = LimitingResourceAdaptor::new(SystemMemoryResource::new(), 1 << 20);
/// let p = mr.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(mr.allocated_bytes(), 1024);
/// assert!(mr.allocate(Stream::DEFAULT, 1 << 20, 256).unwrap_err().is_out_of_memory());
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// assert_eq!(mr.allocated_bytes(), 0);
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LimitingResourceAdaptor {
    inner: Arc<Inner>,
}

impl LimitingResourceAdaptor {
    /// Caps the bytes allocated from `upstream` through this adaptor at `allocation_limit`,
    /// counting sizes rounded up to 256 bytes.
    pub fn new<R: MemoryResource>(upstream: R, allocation_limit: usize) -> Self {
        Self::build(
            AnyResource::new(upstream),
            allocation_limit,
            DEFAULT_ALIGNMENT,
        )
    }

    /// As [`LimitingResourceAdaptor::new`], counting sizes rounded up to `alignment`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `alignment` is not a power of two.
    pub fn with_alignment<R: MemoryResource>(
        upstream: R,
        allocation_limit: usize,
        alignment: usize,
    ) -> Result<Self> {
        check_alignment(alignment)?;
        Ok(Self::build(
            AnyResource::new(upstream),
            allocation_limit,
            alignment,
        ))
    }

    fn build(upstream: AnyResource, limit: usize, alignment: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                upstream,
                limit,
                alignment,
                allocated: AtomicUsize::new(0),
                live: LiveSet::new(Sizes::Granular),
            }),
        }
    }

    /// The upstream resource (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }

    /// Bytes currently allocated through the adaptor, each allocation rounded up to
    /// [`LimitingResourceAdaptor::alignment`] (RMM's `get_allocated_bytes`).
    pub fn allocated_bytes(&self) -> usize {
        self.inner.allocated.load(Ordering::Acquire)
    }

    /// The limit in bytes (RMM's `get_allocation_limit`).
    pub fn allocation_limit(&self) -> usize {
        self.inner.limit
    }

    /// The granularity sizes are counted in.
    pub fn alignment(&self) -> usize {
        self.inner.alignment
    }

    /// Reserves `rounded` bytes, or explains why they do not fit.
    fn reserve(&self, bytes: usize, rounded: usize) -> Result<()> {
        let limit = self.inner.limit;
        self.inner
            .allocated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                current.checked_add(rounded).filter(|&total| total <= limit)
            })
            .map(drop)
            .map_err(|current| Error::OutOfMemory {
                bytes,
                resource: self.name().to_owned(),
                detail: format!(
                    "exceeded memory limit: {current} of {limit} bytes allocated, {rounded} more requested"
                ),
            })
    }

    /// Gives `rounded` bytes of room back (never below zero, even after a caller's double free).
    fn release(&self, rounded: usize) {
        let _ = self
            .inner
            .allocated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |current| {
                Some(current.saturating_sub(rounded))
            });
    }

    fn rounded(&self, bytes: usize) -> Option<usize> {
        align_up(bytes, self.inner.alignment)
    }
}

impl MemoryResource for LimitingResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let rounded = self
            .rounded(bytes)
            .ok_or_else(|| Error::out_of_memory(bytes, self.name()))?;
        self.reserve(bytes, rounded)?;
        let upstream = &self.inner.upstream;
        let ptr = upstream
            .allocate(stream, bytes, alignment)
            .inspect_err(|_| self.release(rounded))?;
        match self.inner.live.insert(ptr as usize, bytes) {
            Ok(None) => {}
            Ok(Some(stale)) => {
                tracing::warn!(
                    "limiting_resource_adaptor: {ptr:p} was handed out again while recorded as live [{stale}B]: it was \
                     freed without this adaptor"
                );
                self.release(self.rounded(stale).unwrap_or(usize::MAX));
            }
            Err(NoRoom) => {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate(stream, ptr, bytes, alignment) };
                self.release(rounded);
                return Err(no_room(self.name(), bytes));
            }
        }
        Ok(ptr)
    }

    /// Forwards to the upstream and gives the room back, unless the upstream rejected the free as
    /// an invalid argument (then nothing was freed and the bytes stay counted).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `ptr` is neither a live allocation of this adaptor whose
    /// size rounds up to the same multiple of 256 as `bytes`, nor one its upstream knows (nothing
    /// is forwarded then); otherwise the upstream's errors. A pointer the upstream knows but this
    /// adaptor did not hand out is forwarded and gives no room back.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let upstream = &self.inner.upstream;
        let freed =
            self.inner
                .live
                .take_for_adaptor(self.name(), upstream, ptr, bytes, alignment)?;
        // SAFETY: forwarded caller contract; the memory came from the upstream (through this
        // adaptor, or beside it as the upstream says).
        let result = unsafe { upstream.deallocate(stream, ptr, bytes, alignment) };
        let Freed::Recorded(recorded) = freed else {
            return result;
        };
        if matches!(result, Err(Error::InvalidArgument(_))) {
            self.inner.live.restore(self.name(), ptr as usize, recorded);
        } else {
            self.release(self.rounded(recorded).unwrap_or(usize::MAX));
        }
        result
    }

    /// From the adaptor's own record of what it handed out.
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        Some(self.inner.live.contains(ptr as usize, bytes))
    }

    forward_to_upstream! {
        name: "limiting_resource_adaptor",
        upstream: upstream,
        identity: inner,
        forward: access
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{CudaMemoryResource, SimulatedMemoryResource, SystemMemoryResource};
    use crate::resource::Access;
    use crate::testing::Probe;

    const MIB: usize = 1 << 20;

    #[test]
    fn refuses_past_the_limit_without_calling_the_upstream() {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = LimitingResourceAdaptor::new(probe.clone(), 4096);
        let calls = || probe.downcast_ref::<Probe>().unwrap().allocations();
        let a = mr.allocate(Stream::DEFAULT, 3000, 256).unwrap();
        assert_eq!(mr.allocated_bytes(), 3072, "counted rounded up to 256");
        let e = mr.allocate(Stream::DEFAULT, 1025, 256).unwrap_err();
        assert!(e.is_out_of_memory(), "{e}");
        assert!(
            e.to_string().contains("limiting_resource_adaptor") && e.to_string().contains("limit"),
            "{e}"
        );
        assert_eq!(calls(), 1, "the refused request never reached the upstream");
        assert_eq!(mr.allocated_bytes(), 3072, "a refusal reserves nothing");
        let b = mr.allocate(Stream::DEFAULT, 1024, 256).unwrap();
        assert_eq!(mr.allocated_bytes(), 4096, "exactly the limit is allowed");
        // SAFETY: from allocate above with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, a, 3000, 256).unwrap() };
        assert_eq!(mr.allocated_bytes(), 1024, "freeing gives the room back");
        let c = mr.allocate(Stream::DEFAULT, 3072, 256).unwrap();
        // SAFETY: from allocate above with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, b, 1024, 256).unwrap();
            mr.deallocate(Stream::DEFAULT, c, 3072, 256).unwrap();
        }
        assert_eq!(mr.allocated_bytes(), 0);
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
    }

    #[test]
    fn upstream_failure_releases_the_reservation() {
        let gpu = SimulatedMemoryResource::new(MIB).unwrap();
        let mr = LimitingResourceAdaptor::new(gpu.clone(), 8 * MIB);
        let e = mr.allocate(Stream::DEFAULT, 2 * MIB, 256).unwrap_err();
        assert!(
            e.to_string().contains("simulated_memory_resource"),
            "the upstream's error: {e}"
        );
        assert_eq!(mr.allocated_bytes(), 0);
        let e = mr.allocate(Stream::DEFAULT, 64, 3).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        assert_eq!(mr.allocated_bytes(), 0);
    }

    #[test]
    fn a_rejected_free_keeps_the_bytes_counted() {
        let gpu = SimulatedMemoryResource::new(MIB).unwrap();
        let mr = LimitingResourceAdaptor::new(gpu, MIB);
        let p = mr.allocate(Stream::DEFAULT, 1000, 256).unwrap();
        // SAFETY: the simulated device is never dereferenced; the wrong size is rejected.
        unsafe {
            assert!(mr.deallocate(Stream::DEFAULT, p, 999, 256).is_err());
            assert_eq!(mr.allocated_bytes(), 1024);
            mr.deallocate(Stream::DEFAULT, p, 1000, 256).unwrap();
        }
        assert_eq!(mr.allocated_bytes(), 0);
    }

    #[test]
    fn custom_alignment_sets_the_counting_granularity() {
        assert!(
            LimitingResourceAdaptor::with_alignment(SystemMemoryResource::new(), 1, 48).is_err()
        );
        let mr = LimitingResourceAdaptor::with_alignment(SystemMemoryResource::new(), 8192, 4096)
            .unwrap();
        assert_eq!((mr.allocation_limit(), mr.alignment()), (8192, 4096));
        let p = mr.allocate(Stream::DEFAULT, 1, 8).unwrap();
        assert_eq!(mr.allocated_bytes(), 4096);
        let q = mr.allocate(Stream::DEFAULT, 4097, 8);
        assert!(q.unwrap_err().is_out_of_memory(), "4097 counts as 8192");
        assert!(mr.allocate(Stream::DEFAULT, 0, 8).unwrap().is_null());
        assert!(mr
            .allocate(Stream::DEFAULT, usize::MAX, 8)
            .unwrap_err()
            .is_out_of_memory());
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 1, 8).unwrap() };
    }

    #[test]
    fn a_petabyte_is_refused_before_the_device_is_touched() {
        // In host mode the cuda resource would answer NoDriver: an OutOfMemory naming the limiting
        // adaptor proves the upstream was never asked. With a GPU, no memory is requested either.
        let mr = LimitingResourceAdaptor::new(CudaMemoryResource::new(), 1 << 30);
        let e = mr.allocate(Stream::DEFAULT, 1 << 50, 256).unwrap_err();
        assert!(
            matches!(&e, Error::OutOfMemory { resource, .. } if resource == "limiting_resource_adaptor"),
            "{e}"
        );
    }

    #[test]
    fn sixteen_threads_never_exceed_the_limit() {
        const LIMIT: usize = 16 * 1024;
        let gpu = SimulatedMemoryResource::new(16 * MIB).unwrap();
        let mr = LimitingResourceAdaptor::new(gpu.clone(), LIMIT);
        let refused = AtomicUsize::new(0);
        let start = std::sync::Barrier::new(16);
        std::thread::scope(|scope| {
            for t in 0..16usize {
                let (mr, refused, start) = (&mr, &refused, &start);
                scope.spawn(move || {
                    start.wait();
                    let mut live = Vec::new();
                    for k in 0..400usize {
                        // 256 B .. 4 KiB; one thread holding 8 of them may alone reach the limit.
                        let bytes = 256 * (1 + (t * 7 + k * 13) % 16);
                        match mr.allocate(Stream::DEFAULT, bytes, 256) {
                            Ok(p) => live.push((p, bytes)),
                            Err(e) => {
                                assert!(e.is_out_of_memory(), "{e}");
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        assert!(mr.allocated_bytes() <= LIMIT);
                        if k % 8 == 7 {
                            for (p, bytes) in live.drain(..) {
                                // SAFETY: from allocate above with these arguments.
                                unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
                            }
                        }
                    }
                    for (p, bytes) in live {
                        // SAFETY: from allocate above with these arguments.
                        unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
                    }
                });
            }
        });
        let usage = gpu.usage();
        // The simulated device counts in 256-byte units, as the adaptor does: its peak is the most
        // the adaptor ever let through at once.
        assert!(
            usage.peak_bytes <= LIMIT,
            "peak {} > limit {LIMIT}",
            usage.peak_bytes
        );
        assert!(
            refused.load(Ordering::Relaxed) > 0,
            "the test must push against the limit"
        );
        assert_eq!((mr.allocated_bytes(), usage.allocated_bytes), (0, 0));
    }

    #[test]
    fn clones_share_the_counter() {
        let a = LimitingResourceAdaptor::new(Probe::new(Access::HOST_DEVICE), MIB);
        let b = a.clone();
        let p = b.allocate(Stream::DEFAULT, 10, 256).unwrap();
        assert_eq!(a.allocated_bytes(), 256);
        // SAFETY: from allocate above.
        unsafe { a.deallocate(Stream::DEFAULT, p, 10, 256).unwrap() };
        assert!(a.is_equal(&b));
        assert!(!a.is_equal(&LimitingResourceAdaptor::new(a.upstream().clone(), MIB)));
        assert_eq!(a.access(), Access::HOST_DEVICE);
        assert_eq!(a.name(), "limiting_resource_adaptor");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_a_petabyte_is_refused_without_touching_the_device() {
        crate::testing::require_gpu();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = {
            let calls = calls.clone();
            let cuda = CudaMemoryResource::new();
            crate::mr::CallbackMemoryResource::new(
                Arc::new(move |bytes, stream| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    cuda.allocate(stream, bytes, 256)
                }),
                Arc::new(move |ptr, bytes, stream| {
                    // SAFETY: the callback resource only frees what the allocate callback returned.
                    unsafe { CudaMemoryResource::new().deallocate(stream, ptr, bytes, 256) }
                }),
            )
        };
        let mr = AnyResource::new(LimitingResourceAdaptor::new(counted, 8 << 30));
        let e = mr.allocate(Stream::DEFAULT, 1 << 50, 256).unwrap_err();
        assert!(
            matches!(&e, Error::OutOfMemory { resource, .. } if resource == "limiting_resource_adaptor"),
            "{e}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            0,
            "the device was never asked"
        );
        let p = mr.allocate(Stream::DEFAULT, MIB, 256).unwrap();
        crate::mr::test_harness::check_usable(&mr, p, MIB, 0x21, Stream::DEFAULT);
        // SAFETY: from allocate above; the check synchronized its work.
        unsafe { mr.deallocate(Stream::DEFAULT, p, MIB, 256).unwrap() };
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(LimitingResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
            8 << 30,
        )))
    });
    crate::mr::test_harness::resource_tests!(over_managed, || {
        Ok(AnyResource::new(LimitingResourceAdaptor::new(
            crate::mr::ManagedMemoryResource::new(),
            8 << 30,
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(LimitingResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
            8 << 30,
        )))
    });
}
