//! `tracking_resource_adaptor`: remembers every outstanding allocation (pointer, size and,
//! on request, the stack that made it), to find leaks.
//!
//! Zero-byte allocations are not tracked (as in RMM). Freeing a pointer the adaptor does not
//! track is forwarded, changing no count, when the upstream knows it as a live allocation (it was
//! allocated beside this adaptor), and refused with [`Error::InvalidArgument`] otherwise (RMM
//! forwards it whatever it is, and subtracts the bytes anyway, so its count can wrap around and a
//! system upstream aborts the process). Freeing a tracked pointer with a size that does not round up to the same multiple of
//! 256 as the allocation's is refused the same way (RMM logs an error and frees anyway); the
//! allocation stays tracked. A size in the same multiple is the checked sub-allocators' rule and is
//! accepted: the tracked size is what leaves the count (docs/design/checked-frees.md). A free that
//! the upstream rejects leaves the allocation tracked. When the host has no memory to track an
//! allocation, it is given back and the allocation fails with [`Error::OutOfMemory`].

use foldhash::{HashMap, HashMapExt};
use std::backtrace::Backtrace;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{granule, no_room, not_handed_out};
use crate::resource::{AnyResource, MemoryResource};

/// One outstanding allocation (RMM's `allocation_info`, with its pointer).
#[derive(Clone, Debug)]
pub struct OutstandingAllocation {
    /// The address returned by the allocation.
    pub address: usize,
    /// The bytes requested.
    pub bytes: usize,
    /// The stack of the allocating call, when the adaptor captures stacks.
    pub stack: Option<Arc<Backtrace>>,
}

impl OutstandingAllocation {
    /// The address as the pointer the allocation returned.
    pub fn ptr(&self) -> *mut u8 {
        self.address as *mut u8
    }
}

#[derive(Debug)]
struct Entry {
    bytes: usize,
    stack: Option<Arc<Backtrace>>,
}

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    capture_stacks: bool,
    allocations: Mutex<HashMap<usize, Entry>>,
    /// The sum of the tracked sizes; changed under the `allocations` lock, read without it.
    allocated_bytes: AtomicUsize,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Entry>> {
        self.allocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Tracks an allocation; when the host has no memory to track it, `give_back` frees it and
    /// the allocation fails with [`Error::OutOfMemory`].
    fn track(
        &self,
        result: Result<*mut u8>,
        bytes: usize,
        give_back: impl FnOnce(*mut u8),
    ) -> Result<*mut u8> {
        let ptr = result?;
        if bytes == 0 {
            return Ok(ptr);
        }
        let stack = self
            .capture_stacks
            .then(|| Arc::new(Backtrace::force_capture()));
        let mut allocations = self.lock();
        if allocations.try_reserve(1).is_err() {
            drop(allocations);
            give_back(ptr);
            return Err(no_room("tracking_resource_adaptor", bytes));
        }
        if let Some(stale) = allocations.insert(ptr as usize, Entry { bytes, stack }) {
            // The upstream handed out a live pointer again: it was freed behind this adaptor's back.
            tracing::warn!(
                "tracking_resource_adaptor: {ptr:p} [{bytes}B] was already tracked [{}B]; it must have been \
                 freed without this adaptor",
                stale.bytes
            );
            self.allocated_bytes
                .fetch_sub(stale.bytes, Ordering::Relaxed);
        }
        self.allocated_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(ptr)
    }

    /// Untracks `ptr` if it is tracked with a size in the same multiple of 256 as `bytes`, calls
    /// `free`, and tracks it again if that fails; refuses (without calling `free`) a size in
    /// another multiple. An untracked pointer is forwarded when the upstream knows it as a live
    /// allocation of that size (allocated beside this adaptor), or when the free has zero bytes (a
    /// zero-byte allocation, which is not tracked); refused otherwise.
    fn untrack(
        &self,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
        free: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let (entry, tracked) = {
            let mut allocations = self.lock();
            match allocations.get(&(ptr as usize)).map(|e| e.bytes) {
                Some(tracked) if granule(tracked, None) == granule(bytes, None) => {
                    let entry = allocations.remove(&(ptr as usize));
                    self.allocated_bytes.fetch_sub(tracked, Ordering::Relaxed);
                    (entry, tracked)
                }
                Some(tracked) => {
                    return Err(Error::invalid(format!(
                        "tracking_resource_adaptor: {ptr:p} was allocated with {tracked} bytes but freed with {bytes} \
                         (sizes rounded up to 256); nothing was freed"
                    )));
                }
                None => {
                    drop(allocations);
                    if bytes == 0
                        || self.upstream.is_live_allocation(ptr, bytes, alignment) == Some(true)
                    {
                        return free();
                    }
                    return Err(not_handed_out("tracking_resource_adaptor", ptr as usize));
                }
            }
        };
        let result = free();
        if result.is_err() {
            if let Some(entry) = entry {
                let mut allocations = self.lock();
                // The entry's slot was freed above; only a concurrent growth could have taken it.
                if allocations.try_reserve(1).is_ok() {
                    allocations.insert(ptr as usize, entry);
                    self.allocated_bytes.fetch_add(tracked, Ordering::Relaxed);
                } else {
                    tracing::error!(
                        "tracking_resource_adaptor: {ptr:p} [{tracked}B] stays allocated, but the host has no memory to \
                         track it again: its free will be refused"
                    );
                }
            }
        }
        result
    }
}

/// Tracks outstanding allocations (RMM's `tracking_resource_adaptor`).
///
/// Clones share the record. With `capture_stacks`, each allocation captures a
/// [`std::backtrace::Backtrace`] (whatever `RUST_BACKTRACE` says); that costs microseconds per
/// allocation, so it is meant for hunting leaks.
///
/// ```
/// use rmm_core::{cuda::Stream, mr::{SystemMemoryResource, TrackingResourceAdaptor}, MemoryResource};
/// let mr = TrackingResourceAdaptor::new(SystemMemoryResource::new(), false);
/// let p = mr.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(mr.allocated_bytes(), 1000);
/// assert_eq!(mr.outstanding_allocations()[0].ptr(), p);
/// assert_eq!(mr.outstanding_allocations_str(), format!("{:#x}: 1000 B\n", p as usize));
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// assert!(mr.outstanding_allocations().is_empty());
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct TrackingResourceAdaptor {
    inner: Arc<Inner>,
}

impl TrackingResourceAdaptor {
    /// Tracks what `upstream` hands out through this adaptor; with `capture_stacks`, also where.
    pub fn new<R: MemoryResource>(upstream: R, capture_stacks: bool) -> Self {
        let inner = Inner {
            upstream: AnyResource::new(upstream),
            capture_stacks,
            allocations: Mutex::new(HashMap::new()),
            allocated_bytes: AtomicUsize::new(0),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// True when each allocation records its stack.
    pub fn capture_stacks(&self) -> bool {
        self.inner.capture_stacks
    }

    /// The bytes outstanding (RMM's `get_allocated_bytes`).
    pub fn allocated_bytes(&self) -> usize {
        self.inner.allocated_bytes.load(Ordering::Relaxed)
    }

    /// A snapshot of the outstanding allocations, by address (RMM's
    /// `get_outstanding_allocations`, which hands out its live map without a lock).
    pub fn outstanding_allocations(&self) -> Vec<OutstandingAllocation> {
        let mut all: Vec<OutstandingAllocation> = self
            .inner
            .lock()
            .iter()
            .map(|(&address, e)| OutstandingAllocation {
                address,
                bytes: e.bytes,
                stack: e.stack.clone(),
            })
            .collect();
        all.sort_unstable_by_key(|a| a.address);
        all
    }

    /// One line per outstanding allocation, by address: `0x…: <bytes> B`, followed by
    /// ` : callstack:` and the stack when one was captured (RMM's
    /// `get_outstanding_allocations_str`).
    pub fn outstanding_allocations_str(&self) -> String {
        let mut report = String::new();
        for a in self.outstanding_allocations() {
            // Writing into a String cannot fail.
            let _ = write!(report, "{:#x}: {} B", a.address, a.bytes);
            if let Some(stack) = &a.stack {
                let _ = write!(report, " : callstack:\n{stack}");
            }
            report.push('\n');
        }
        report
    }

    /// Logs [`outstanding_allocations_str`] at debug level through `tracing` (RMM's
    /// `log_outstanding_allocations`); builds nothing when debug is off.
    ///
    /// [`outstanding_allocations_str`]: TrackingResourceAdaptor::outstanding_allocations_str
    pub fn log_outstanding_allocations(&self) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(
                "Outstanding Allocations: {}",
                self.outstanding_allocations_str()
            );
        }
    }

    /// The resource the calls are forwarded to (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }
}

impl MemoryResource for TrackingResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner
            .track(upstream.allocate(stream, bytes, alignment), bytes, |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate(stream, ptr, bytes, alignment) };
            })
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        self.inner.untrack(ptr, bytes, alignment, || {
            // SAFETY: forwarded caller contract; `ptr` is an outstanding allocation of `bytes`.
            unsafe {
                self.inner
                    .upstream
                    .deallocate(stream, ptr, bytes, alignment)
            }
        })
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner
            .track(upstream.allocate_sync(bytes, alignment), bytes, |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate_sync(ptr, bytes, alignment) };
            })
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        self.inner.untrack(ptr, bytes, alignment, || {
            // SAFETY: as in `deallocate`.
            unsafe { self.inner.upstream.deallocate_sync(ptr, bytes, alignment) }
        })
    }

    /// From the adaptor's record of outstanding allocations.
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        let tracked = self.inner.lock().get(&(ptr as usize)).map(|e| e.bytes);
        Some(tracked.is_some_and(|t| t != 0 && granule(t, None) == granule(bytes, None)))
    }

    forward_to_upstream! {
        name: "tracking_resource_adaptor",
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

    #[test]
    fn tracks_and_reports_outstanding_allocations_over_host_memory() {
        let mr = TrackingResourceAdaptor::new(Probe::new(Access::HOST), false);
        assert!(!mr.capture_stacks());
        let a = mr.allocate(Stream::DEFAULT, 100, 256).unwrap();
        let b = mr.allocate_sync(3000, 64).unwrap();
        let zero = mr.allocate(Stream::DEFAULT, 0, 256).unwrap();
        assert_eq!(mr.allocated_bytes(), 3100);
        let outstanding = mr.outstanding_allocations();
        let mut expected = vec![(a as usize, 100), (b as usize, 3000)];
        expected.sort_unstable();
        assert_eq!(
            outstanding
                .iter()
                .map(|o| (o.address, o.bytes))
                .collect::<Vec<_>>(),
            expected
        );
        assert!(outstanding.iter().all(|o| o.stack.is_none()));
        let report = mr.outstanding_allocations_str();
        let lines: Vec<String> = expected
            .iter()
            .map(|(p, n)| format!("{p:#x}: {n} B"))
            .collect();
        assert_eq!(report, format!("{}\n", lines.join("\n")));
        mr.log_outstanding_allocations();
        // SAFETY: each pointer came from `mr` with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, a, 100, 256).unwrap();
            mr.deallocate_sync(b, 3000, 64).unwrap();
            mr.deallocate(Stream::DEFAULT, zero, 0, 256).unwrap();
        }
        assert_eq!(
            (mr.allocated_bytes(), mr.outstanding_allocations_str()),
            (0, String::new())
        );
        assert_eq!(
            mr.upstream()
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
    }

    #[inline(never)]
    fn allocate_here(mr: &TrackingResourceAdaptor) -> *mut u8 {
        mr.allocate(Stream::DEFAULT, 512, 256).unwrap()
    }

    #[test]
    fn stacks_are_captured_on_request() {
        let mr = TrackingResourceAdaptor::new(SystemMemoryResource::new(), true);
        assert!(mr.capture_stacks());
        let p = allocate_here(&mr);
        let outstanding = mr.outstanding_allocations();
        let stack = outstanding[0].stack.as_ref().expect("a stack was captured");
        assert_eq!(stack.status(), std::backtrace::BacktraceStatus::Captured);
        let report = mr.outstanding_allocations_str();
        let head = format!("{:#x}: 512 B : callstack:\n", p as usize);
        assert!(report.starts_with(&head), "{report}");
        assert!(
            report.contains("allocate_here"),
            "the stack names the allocating function: {report}"
        );
        // SAFETY: from allocate_here.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 512, 256).unwrap() };
        assert_eq!(mr.outstanding_allocations_str(), "");
    }

    #[test]
    fn untracked_frees_are_refused_and_change_nothing() {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = TrackingResourceAdaptor::new(probe.clone(), false);
        let tracked = mr.allocate(Stream::DEFAULT, 64, 256).unwrap();
        let behind = probe.allocate(Stream::DEFAULT, 128, 256).unwrap();
        // SAFETY: deliberately wrong: `behind` was not allocated through the adaptor; refused.
        let r = unsafe { mr.deallocate(Stream::DEFAULT, behind, 128, 256) };
        assert!(
            matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("not a live allocation of this adaptor")),
            "{r:?}"
        );
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            2,
            "not forwarded"
        );
        assert_eq!(mr.allocated_bytes(), 64, "no underflow, no change");
        assert_eq!(mr.outstanding_allocations().len(), 1);
        // SAFETY: from allocate above; then a double free, refused.
        unsafe {
            mr.deallocate(Stream::DEFAULT, tracked, 64, 256).unwrap();
            assert!(matches!(
                mr.deallocate(Stream::DEFAULT, tracked, 64, 256),
                Err(Error::InvalidArgument(_))
            ));
            probe.deallocate(Stream::DEFAULT, behind, 128, 256).unwrap();
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
    fn a_wrong_size_is_refused_and_failed_frees_stay_tracked() {
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let mr = TrackingResourceAdaptor::new(gpu.clone(), false);
        let p = mr.allocate(Stream::DEFAULT, 1000, 256).unwrap();
        // SAFETY: a wrong size: refused, nothing reaches the device.
        let r = unsafe { mr.deallocate(Stream::DEFAULT, p, 999, 256) };
        assert!(
            matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("allocated with 1000 bytes but freed with 999"))
        );
        assert_eq!(
            (mr.allocated_bytes(), gpu.usage().live_allocations),
            (1000, 1)
        );
        // SAFETY: the right size.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256).unwrap() };
        assert_eq!((mr.allocated_bytes(), gpu.usage().live_allocations), (0, 0));
        let q = mr.allocate(Stream::DEFAULT, 700, 256).unwrap();
        // SAFETY: `q` was never allocated by the device directly; freeing it there first makes the
        // adaptor's free fail without touching memory (simulated addresses are never dereferenced).
        unsafe {
            gpu.deallocate(Stream::DEFAULT, q, 700, 256).unwrap();
            assert!(matches!(
                mr.deallocate(Stream::DEFAULT, q, 700, 256),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert_eq!(
            mr.allocated_bytes(),
            700,
            "a rejected free leaves the allocation tracked"
        );
        assert_eq!(mr.outstanding_allocations()[0].address, q as usize);
        // The device reuses the address: the stale entry is replaced, not double counted.
        let r = mr.allocate(Stream::DEFAULT, 300, 256).unwrap();
        assert_eq!(r, q);
        assert_eq!(
            (mr.allocated_bytes(), mr.outstanding_allocations().len()),
            (300, 1)
        );
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, r, 300, 256).unwrap() };
        assert_eq!(mr.allocated_bytes(), 0);
        assert!(mr.allocate(Stream::DEFAULT, 2 << 20, 256).is_err());
        assert_eq!(
            mr.allocated_bytes(),
            0,
            "failed allocations are not tracked"
        );
    }

    #[test]
    fn threads_track_exactly() {
        let mr = TrackingResourceAdaptor::new(SystemMemoryResource::new(), false);
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|scope| {
            for t in 0..8usize {
                let (mr, barrier) = (&mr, &barrier);
                scope.spawn(move || {
                    let held: Vec<usize> = (0..50)
                        .map(|k| mr.allocate(Stream::DEFAULT, 1 + t + k, 256).unwrap() as usize)
                        .collect();
                    barrier.wait();
                    assert_eq!(mr.outstanding_allocations().len(), 8 * 50);
                    barrier.wait();
                    for (k, p) in held.into_iter().enumerate() {
                        // SAFETY: from allocate above with these arguments.
                        unsafe {
                            mr.deallocate(Stream::DEFAULT, p as *mut u8, 1 + t + k, 256)
                                .unwrap()
                        };
                    }
                });
            }
        });
        assert_eq!(
            (mr.allocated_bytes(), mr.outstanding_allocations().len()),
            (0, 0)
        );
    }

    #[test]
    fn clones_share_the_record() {
        let a = TrackingResourceAdaptor::new(SystemMemoryResource::new(), false);
        let b = a.clone();
        let p = b.allocate(Stream::DEFAULT, 10, 256).unwrap();
        assert_eq!(a.allocated_bytes(), 10);
        assert!(
            a.is_equal(&b)
                && !a.is_equal(&TrackingResourceAdaptor::new(
                    SystemMemoryResource::new(),
                    false
                ))
        );
        assert_eq!(a.name(), "tracking_resource_adaptor");
        // SAFETY: from allocate above.
        unsafe { a.deallocate(Stream::DEFAULT, p, 10, 256).unwrap() };
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(TrackingResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
            false,
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(TrackingResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
            true,
        )))
    });
}

/// The adaptors stacked: statistics over tracking over logging over a simulated device. Every
/// layer's account of the same random workload agrees with the others and with the device.
#[cfg(test)]
mod composition_tests {
    use proptest::prelude::*;

    use crate::cuda::Stream;
    use crate::mr::{
        LoggingResourceAdaptor, SimulatedMemoryResource, StatisticsResourceAdaptor,
        TrackingResourceAdaptor,
    };
    use crate::testing::SharedBuffer;
    use crate::MemoryResource;

    const CAPACITY: usize = 1 << 20;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testing::proptest_cases(64)))]
        #[test]
        fn statistics_over_tracking_over_logging_agree(
            ops in proptest::collection::vec((0usize..48, any::<bool>(), any::<u16>()), 1..300)
        ) {
            let gpu = SimulatedMemoryResource::new(CAPACITY).unwrap();
            let out = SharedBuffer::default();
            let logging = LoggingResourceAdaptor::with_writer(gpu.clone(), out.clone()).unwrap();
            let tracking = TrackingResourceAdaptor::new(logging.clone(), false);
            let stats = StatisticsResourceAdaptor::new(tracking.clone());
            prop_assert_eq!(stats.access(), gpu.access(), "access passes through every layer");
            let mut live: Vec<(usize, usize)> = Vec::new();
            let (mut allocations, mut frees, mut failures) = (0i64, 0usize, 0usize);
            for (blocks, free_one, pick) in ops {
                if free_one && !live.is_empty() {
                    let (p, bytes) = live.swap_remove(usize::from(pick) % live.len());
                    // SAFETY: from `stats` with these arguments; simulated memory is never touched.
                    unsafe { stats.deallocate(Stream::DEFAULT, p as *mut u8, bytes, 256).unwrap() };
                    frees += 1;
                } else {
                    // Multiples of 256, so the device reserves exactly what was asked; now and then
                    // more than the device has.
                    let bytes = if pick % 29 == 0 { 2 * CAPACITY } else { blocks * 256 };
                    match stats.allocate(Stream::DEFAULT, bytes, 256) {
                        Ok(p) => {
                            live.push((p as usize, bytes));
                            allocations += 1;
                        }
                        Err(e) => {
                            prop_assert!(e.is_out_of_memory());
                            failures += 1;
                        }
                    }
                }
                let held: usize = live.iter().map(|&(_, b)| b).sum();
                let nonzero = live.iter().filter(|&&(_, b)| b > 0).count();
                let (bytes, count) = stats.counters();
                let usage = gpu.usage();
                prop_assert_eq!(bytes.value, held as i64);
                prop_assert_eq!(tracking.allocated_bytes(), held);
                prop_assert_eq!(usage.allocated_bytes, held);
                prop_assert_eq!(bytes.peak, usage.peak_bytes as i64);
                prop_assert_eq!(count.value, live.len() as i64, "zero-byte allocations count too");
                prop_assert_eq!(tracking.outstanding_allocations().len(), nonzero, "but are not tracked");
                prop_assert_eq!(usage.live_allocations, nonzero);
            }
            let mut tracked: Vec<(usize, usize)> =
                tracking.outstanding_allocations().iter().map(|a| (a.address, a.bytes)).collect();
            let mut expected: Vec<(usize, usize)> = live.iter().copied().filter(|&(_, b)| b > 0).collect();
            tracked.sort_unstable();
            expected.sort_unstable();
            prop_assert_eq!(tracked, expected);
            prop_assert_eq!(stats.allocations_counter().total, allocations);
            logging.flush().unwrap();
            let text = out.text();
            let mut log = csv::Reader::from_reader(text.as_bytes());
            let actions: Vec<String> = log.records().map(|r| r.unwrap()[2].to_string()).collect();
            let count = |action: &str| actions.iter().filter(|a| *a == action).count();
            prop_assert_eq!(count("allocate"), allocations as usize);
            prop_assert_eq!(count("free"), frees);
            prop_assert_eq!(count("allocate failure"), failures);
        }
    }
}
