//! `aligned_resource_adaptor`: larger alignments than the upstream guarantees, by over-allocating.
//!
//! Glossary:
//! - *adaptor alignment*: the alignment given at construction (raised to 256 when smaller, as RMM
//!   does); it applies to requests of at least the *threshold* bytes;
//! - *target*: the alignment one request gets: the larger of the call's `alignment` argument and,
//!   for requests at or above the threshold, the adaptor alignment;
//! - *over-allocation*: a request whose target exceeds the 256 bytes every upstream guarantees is
//!   served from a larger upstream block; the adaptor remembers the block behind each aligned pointer.
//!
//! Invariants:
//! - every over-allocated pointer is in the map until it is freed, and only those are;
//! - a request whose target is at most 256 goes straight through, with no lock and no map entry.

use foldhash::{HashMap, HashMapExt};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::resource::{AnyResource, MemoryResource};

/// The upstream block behind one over-allocated pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    /// The pointer the upstream returned.
    upstream_ptr: usize,
    /// The size requested from the upstream.
    upstream_bytes: usize,
    /// The size the caller requested (checked again at deallocation).
    bytes: usize,
}

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    alignment: usize,
    threshold: usize,
    /// Aligned pointer → upstream block, for over-allocated requests only.
    blocks: Mutex<HashMap<usize, Block>>,
}

/// Aligns allocations to more than the 256 bytes an upstream guarantees (RMM's
/// `aligned_resource_adaptor`), e.g. 4 KiB for GPUDirect Storage.
///
/// # Alignment
/// Requests of at least `alignment_threshold` bytes (default 0: all of them) are aligned to the
/// adaptor's `alignment`. Unlike RMM, which ignores the per-call `alignment` argument, the call's
/// alignment is honoured too, for every size: a request gets the larger of the two where the
/// threshold applies, and the call's alignment otherwise. So an `AlignedResourceAdaptor` is also the
/// way to get a one-off alignment above 256 bytes from a base resource, which would reject it.
///
/// # Over-allocation
/// A request whose alignment exceeds 256 bytes is served by asking the upstream for
/// `align_up(bytes, alignment) + alignment - 256` bytes (256-aligned) and returning the first
/// aligned address inside; as in RMM, the whole rounded-up size `align_up(bytes, alignment)` from
/// the returned pointer lies in the block, so I/O in whole alignment units stays in bounds. The
/// upstream block is remembered under a lock and freed, with its original pointer and size, when
/// the aligned pointer is. Requests aligned to 256 bytes or less go straight through.
///
/// # Errors
/// Freeing a pointer that needed over-allocation but is not a live allocation of this adaptor (a
/// double free, or memory from elsewhere) is an [`Error::InvalidArgument`] and reaches no upstream.
///
/// # Sharing
/// Clones share the pointer map and compare equal only to each other. Access is the upstream's.
///
/// ```
/// use rmm_core::{mr::{AlignedResourceAdaptor, SystemMemoryResource}, MemoryResource, cuda::Stream};
/// let mr = AlignedResourceAdaptor::new(SystemMemoryResource::new(), 4096)?;
/// let p = mr.allocate(Stream::DEFAULT, 10_000, 256)?;
/// assert_eq!(p as usize % 4096, 0);
/// // SAFETY: host memory, valid for 10 000 bytes.
/// unsafe { p.write_bytes(7, 10_000) };
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 10_000, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct AlignedResourceAdaptor {
    inner: Arc<Inner>,
}

impl AlignedResourceAdaptor {
    /// RMM's default threshold: 0, every request is aligned.
    pub const DEFAULT_ALIGNMENT_THRESHOLD: usize = 0;

    /// Aligns every allocation from `upstream` to `alignment` bytes (raised to 256 when smaller).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `alignment` is not a power of two.
    pub fn new<R: MemoryResource>(upstream: R, alignment: usize) -> Result<Self> {
        Self::with_threshold(upstream, alignment, Self::DEFAULT_ALIGNMENT_THRESHOLD)
    }

    /// Aligns allocations of at least `alignment_threshold` bytes to `alignment` (raised to 256
    /// when smaller); smaller ones keep the alignment of the call.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `alignment` is not a power of two.
    pub fn with_threshold<R: MemoryResource>(
        upstream: R,
        alignment: usize,
        alignment_threshold: usize,
    ) -> Result<Self> {
        check_alignment(alignment)?;
        Ok(Self {
            inner: Arc::new(Inner {
                upstream: AnyResource::new(upstream),
                alignment: alignment.max(DEFAULT_ALIGNMENT),
                threshold: alignment_threshold,
                blocks: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The upstream resource (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }

    /// The alignment of requests at or above the threshold (at least 256).
    pub fn alignment(&self) -> usize {
        self.inner.alignment
    }

    /// Requests of at least this many bytes get the adaptor's alignment.
    pub fn alignment_threshold(&self) -> usize {
        self.inner.threshold
    }

    /// The number of live allocations that were over-allocated (for diagnostics and tests).
    pub fn over_allocated_count(&self) -> usize {
        self.blocks().len()
    }

    /// The alignment a request of `bytes` bytes with the call's `alignment` gets.
    fn target(&self, bytes: usize, alignment: usize) -> usize {
        if bytes >= self.inner.threshold {
            alignment.max(self.inner.alignment)
        } else {
            alignment
        }
    }

    fn blocks(&self) -> MutexGuard<'_, HashMap<usize, Block>> {
        self.inner
            .blocks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryResource for AlignedResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let target = self.target(bytes, alignment);
        let upstream = &self.inner.upstream;
        if target <= DEFAULT_ALIGNMENT {
            return upstream.allocate(stream, bytes, target);
        }
        let oom = || Error::out_of_memory(bytes, self.name());
        let upstream_bytes = align_up(bytes, target)
            .and_then(|rounded| rounded.checked_add(target - DEFAULT_ALIGNMENT))
            .ok_or_else(oom)?;
        let ptr = upstream.allocate(stream, upstream_bytes, DEFAULT_ALIGNMENT)?;
        let start = ptr as usize;
        // With a 256-aligned start, the aligned address is at most `target - 256` bytes in, so the
        // rounded-up range fits the block.
        let slack = target - DEFAULT_ALIGNMENT;
        let aligned = align_up(start, target).filter(|&a| a - start <= slack);
        let Some(aligned) = aligned else {
            // The upstream ignored the 256-byte alignment it was asked for and the aligned range
            // would not fit the block: give it back rather than hand out memory past its end.
            // SAFETY: `ptr` was just allocated with these arguments and never handed out.
            let _ = unsafe { upstream.deallocate(stream, ptr, upstream_bytes, DEFAULT_ALIGNMENT) };
            return Err(Error::invalid(format!(
                "{}: upstream {} returned {ptr:p}, which is not {DEFAULT_ALIGNMENT}-byte aligned, so \
                 the {target}-byte-aligned range does not fit its block",
                self.name(),
                upstream.name()
            )));
        };
        let block = Block {
            upstream_ptr: start,
            upstream_bytes,
            bytes,
        };
        if let Some(stale) = self.blocks().insert(aligned, block) {
            // Two live blocks cannot share an aligned address; an entry left here means the upstream
            // reused memory we never returned. Keep the new block and report the old one.
            tracing::error!(
                "{}: {aligned:#x} was still tracked ({stale:?}) when allocated again",
                self.name()
            );
        }
        Ok(aligned as *mut u8)
    }

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
        let block = {
            let mut blocks = self.blocks();
            match blocks.get(&(ptr as usize)) {
                Some(block) if block.bytes != bytes => {
                    return Err(Error::invalid(format!(
                        "{}: {ptr:p} was allocated with {} bytes but freed with {bytes}",
                        self.name(),
                        block.bytes
                    )));
                }
                Some(_) => blocks.remove(&(ptr as usize)),
                None => None,
            }
        };
        match block {
            // SAFETY: the block came from the upstream with these arguments (recorded at allocation)
            // and the caller gives up the aligned pointer inside it.
            Some(block) => unsafe {
                self.inner.upstream.deallocate(
                    stream,
                    block.upstream_ptr as *mut u8,
                    block.upstream_bytes,
                    DEFAULT_ALIGNMENT,
                )
            },
            None => {
                let target = self.target(bytes, alignment);
                if target > DEFAULT_ALIGNMENT {
                    return Err(Error::invalid(format!(
                        "{}: {ptr:p} is not a live {target}-byte-aligned allocation of this adaptor",
                        self.name()
                    )));
                }
                // SAFETY: a request with this target went straight to the upstream with these
                // arguments (caller contract: same bytes and alignment as at allocation).
                unsafe { self.inner.upstream.deallocate(stream, ptr, bytes, target) }
            }
        }
    }

    forward_to_upstream! {
        name: "aligned_resource_adaptor",
        upstream: upstream,
        identity: inner,
        forward: access
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
    use crate::resource::Access;
    use crate::testing::Probe;

    const KIB: usize = 1 << 10;

    fn sim() -> SimulatedMemoryResource {
        SimulatedMemoryResource::new(1 << 30).unwrap()
    }

    #[test]
    fn alignment_must_be_a_power_of_two_and_is_at_least_256() {
        for bad in [0usize, 3, 1000] {
            let e = AlignedResourceAdaptor::new(sim(), bad).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        let mr = AlignedResourceAdaptor::new(sim(), 64).unwrap();
        assert_eq!(mr.alignment(), 256, "raised to 256 as RMM does");
        assert_eq!(mr.alignment_threshold(), 0);
        let mr = AlignedResourceAdaptor::with_threshold(sim(), 4096, 64 * KIB).unwrap();
        assert_eq!((mr.alignment(), mr.alignment_threshold()), (4096, 64 * KIB));
        assert!(matches!(
            mr.allocate(Stream::DEFAULT, 8, 3),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn above_the_threshold_pointers_are_aligned_and_originals_freed() {
        let gpu = sim();
        let mr = AlignedResourceAdaptor::with_threshold(gpu.clone(), 4096, 64 * KIB).unwrap();
        // Skew the simulated device so the next block is not 4 KiB aligned by chance.
        let skew = gpu.allocate(Stream::DEFAULT, 256, 256).unwrap();
        let mut live = Vec::new();
        for bytes in [64 * KIB, 64 * KIB + 1, 100 * KIB, 1 << 20] {
            let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
            assert_eq!(p as usize % 4096, 0, "{bytes} bytes at {p:p}");
            live.push((p, bytes));
        }
        assert_eq!(mr.over_allocated_count(), 4);
        let expected: usize = live
            .iter()
            .map(|&(_, b)| align_up(b, 4096).unwrap() + 4096 - 256)
            .sum();
        assert_eq!(
            gpu.usage().allocated_bytes,
            expected + 256,
            "each block is rounded up and padded"
        );
        for (p, bytes) in live {
            // SAFETY: from allocate above with these arguments.
            unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
        }
        assert_eq!(mr.over_allocated_count(), 0);
        // SAFETY: from allocate above.
        unsafe { gpu.deallocate(Stream::DEFAULT, skew, 256, 256).unwrap() };
        let usage = gpu.usage();
        assert_eq!(
            (usage.allocated_bytes, usage.live_allocations),
            (0, 0),
            "the original blocks went back"
        );
    }

    #[test]
    fn below_the_threshold_requests_go_straight_through() {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = AlignedResourceAdaptor::with_threshold(probe.clone(), 4096, 64 * KIB).unwrap();
        let p = mr.allocate(Stream::DEFAULT, 1000, 256).unwrap();
        assert_eq!(p as usize % 256, 0);
        assert_eq!(
            mr.over_allocated_count(),
            0,
            "no over-allocation below the threshold"
        );
        // SAFETY: host memory valid for 1000 bytes.
        unsafe { p.write_bytes(1, 1000) };
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256).unwrap() };
        let probe = probe.downcast_ref::<Probe>().unwrap();
        assert_eq!(probe.allocations(), 1);
        assert_eq!(probe.live.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
        // SAFETY: freeing null is a no-op.
        unsafe {
            mr.deallocate(Stream::DEFAULT, std::ptr::null_mut(), 0, 256)
                .unwrap()
        };
    }

    #[test]
    fn the_call_alignment_is_honoured_below_the_threshold_too() {
        let gpu = sim();
        let mr = AlignedResourceAdaptor::with_threshold(gpu.clone(), 4096, 1 << 20).unwrap();
        let _skew = gpu.allocate(Stream::DEFAULT, 256, 256).unwrap();
        let p = mr.allocate(Stream::DEFAULT, 100, 1 << 16).unwrap();
        assert_eq!(p as usize % (1 << 16), 0);
        assert_eq!(mr.over_allocated_count(), 1);
        // Above the threshold the larger of the two wins.
        let q = mr.allocate(Stream::DEFAULT, 1 << 20, 1 << 13).unwrap();
        assert_eq!(q as usize % (1 << 13), 0);
        let r = mr.allocate(Stream::DEFAULT, 1 << 20, 64).unwrap();
        assert_eq!(r as usize % 4096, 0);
        // SAFETY: from allocate above with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, p, 100, 1 << 16).unwrap();
            mr.deallocate(Stream::DEFAULT, q, 1 << 20, 1 << 13).unwrap();
            mr.deallocate(Stream::DEFAULT, r, 1 << 20, 64).unwrap();
        }
        assert_eq!(
            gpu.usage().live_allocations,
            1,
            "only the skew block is left"
        );
    }

    #[test]
    fn host_memory_is_aligned_and_writable_end_to_end() {
        let mr = AlignedResourceAdaptor::new(SystemMemoryResource::new(), 1 << 16).unwrap();
        for bytes in [1usize, 4096, 100_000, 1 << 20] {
            let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
            assert_eq!(p as usize % (1 << 16), 0);
            let rounded = align_up(bytes, 1 << 16).unwrap();
            // SAFETY: the whole rounded-up size lies in the upstream block.
            unsafe {
                p.write_bytes(0x5a, rounded);
                assert_eq!(*p.add(rounded - 1), 0x5a);
                mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap();
            }
        }
    }

    #[test]
    fn bad_frees_are_errors_and_reach_no_upstream() {
        let gpu = sim();
        let mr = AlignedResourceAdaptor::new(gpu.clone(), 4096).unwrap();
        let p = mr.allocate(Stream::DEFAULT, 5000, 256).unwrap();
        // SAFETY: the simulated device is never dereferenced; bad frees are reported.
        unsafe {
            let e = mr.deallocate(Stream::DEFAULT, p, 4999, 256).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            mr.deallocate(Stream::DEFAULT, p, 5000, 256).unwrap();
            let e = mr.deallocate(Stream::DEFAULT, p, 5000, 256).unwrap_err();
            assert!(e.to_string().contains("not a live"), "{e}");
        }
        assert_eq!(gpu.usage().allocated_bytes, 0);
    }

    #[test]
    fn huge_requests_are_out_of_memory_not_overflow() {
        let mr = AlignedResourceAdaptor::new(sim(), 1 << 20).unwrap();
        let e = mr
            .allocate(Stream::DEFAULT, usize::MAX - 10, 256)
            .unwrap_err();
        assert!(e.is_out_of_memory(), "{e}");
        let e = mr.allocate(Stream::DEFAULT, 2 << 30, 256).unwrap_err();
        assert!(
            e.is_out_of_memory(),
            "the upstream's error passes through: {e}"
        );
    }

    #[test]
    fn clones_share_state_and_access_is_forwarded() {
        let a = AlignedResourceAdaptor::new(Probe::new(Access::HOST_DEVICE), 4096).unwrap();
        let b = a.clone();
        let p = a.allocate(Stream::DEFAULT, 300, 256).unwrap();
        // SAFETY: a clone shares the map, so it may free what `a` allocated.
        unsafe { b.deallocate(Stream::DEFAULT, p, 300, 256).unwrap() };
        assert!(a.is_equal(&b) && a.is_equal(&AnyResource::new(b.clone())));
        assert!(!a.is_equal(&AlignedResourceAdaptor::new(a.upstream().clone(), 4096).unwrap()));
        assert_eq!(a.access(), Access::HOST_DEVICE);
        assert_eq!(a.name(), "aligned_resource_adaptor");
    }

    /// A resource that ignores the alignment it is asked for.
    struct Misaligned(SimulatedMemoryResource);

    impl MemoryResource for Misaligned {
        fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
            let p = self.0.allocate(stream, bytes + 256, alignment)?;
            // SAFETY: simulated addresses are never dereferenced; the offset stays in the block.
            Ok(unsafe { p.add(8) })
        }
        unsafe fn deallocate(
            &self,
            stream: Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            // SAFETY: undoes the offset of allocate.
            unsafe {
                self.0
                    .deallocate(stream, ptr.sub(8), bytes + 256, alignment)
            }
        }
        fn access(&self) -> Access {
            Access::DEVICE
        }
        fn name(&self) -> &str {
            "misaligned"
        }
        fn is_equal(&self, _other: &dyn MemoryResource) -> bool {
            false
        }
    }

    #[test]
    fn an_upstream_that_breaks_its_alignment_is_reported_not_trusted() {
        let gpu = sim();
        let mr = AlignedResourceAdaptor::new(Misaligned(gpu.clone()), 4096).unwrap();
        let e = mr.allocate(Stream::DEFAULT, 4096, 256).unwrap_err();
        assert!(e.to_string().contains("not 256-byte aligned"), "{e}");
        assert_eq!(gpu.usage().allocated_bytes, 0, "the block was given back");
    }

    type Factory = fn() -> Result<AnyResource>;

    fn gpu_upstreams() -> [(&'static str, Factory); 3] {
        [
            ("cuda", || {
                Ok(AnyResource::new(crate::mr::CudaMemoryResource::new()))
            }),
            ("managed", || {
                Ok(AnyResource::new(crate::mr::ManagedMemoryResource::new()))
            }),
            ("cuda_async", || {
                crate::mr::CudaAsyncMemoryResource::new().map(AnyResource::new)
            }),
        ]
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_pointers_are_4096_aligned_and_usable() {
        crate::testing::require_gpu();
        for (name, upstream) in gpu_upstreams() {
            let mr =
                AnyResource::new(AlignedResourceAdaptor::new(upstream().unwrap(), 4096).unwrap());
            let mut live = Vec::new();
            for bytes in [1usize, 300, 4096, 5000, 1 << 20, (3 << 20) + 7] {
                let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
                assert_eq!(p as usize % 4096, 0, "{name}: {bytes} bytes at {p:p}");
                crate::mr::test_harness::check_usable(
                    &mr,
                    p,
                    align_up(bytes, 4096).unwrap(),
                    0x3c,
                    Stream::DEFAULT,
                );
                live.push((p, bytes));
            }
            for (p, bytes) in live {
                // SAFETY: from allocate above; check_usable synchronized its work.
                unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
            }
            assert_eq!(
                mr.downcast_ref::<AlignedResourceAdaptor>()
                    .unwrap()
                    .over_allocated_count(),
                0
            );
        }
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        AlignedResourceAdaptor::new(crate::mr::CudaMemoryResource::new(), 4096)
            .map(AnyResource::new)
    });
    crate::mr::test_harness::resource_tests!(over_managed, || {
        AlignedResourceAdaptor::new(crate::mr::ManagedMemoryResource::new(), 4096)
            .map(AnyResource::new)
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        AlignedResourceAdaptor::new(crate::mr::CudaAsyncMemoryResource::new()?, 4096)
            .map(AnyResource::new)
    });
}
