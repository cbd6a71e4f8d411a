//! `statistics_resource_adaptor`: counts the bytes and allocations that pass through it, in
//! nestable frames.
//!
//! Glossary:
//! - a *counter* is `{ value, peak, total }`: the current amount, the highest value reached and
//!   the sum of everything ever added (frees lower `value` only);
//! - a *frame* is a pair of counters (bytes, allocations). The adaptor keeps a stack of frames
//!   and counts into the top one; [`push_counters`] starts a new frame, [`pop_counters`] ends it
//!   and folds it into its parent with RMM's rule: `peak = max(parent.value + child.peak,
//!   parent.peak)`, `value` and `total` add. A frame's values can be negative (memory allocated
//!   before the push and freed after it).
//!
//! Allocations that fail are not counted. Frees are counted before they are forwarded (as RMM
//! does), so memory that another thread gets back at once is never counted twice in a peak.
//!
//! Only what the adaptor handed out is counted, at the size it was allocated with: each
//! allocation is recorded (as the checked sub-allocators record theirs). A free with a size that
//! does not round up to the same multiple of 256 as the allocation's is refused with
//! [`Error::InvalidArgument`]; a free of a pointer the adaptor did not hand out is forwarded
//! without being counted when the upstream knows it as a live allocation, and refused otherwise.
//! RMM counts every free, so its counters drift (docs/design/checked-frees.md).
//!
//! Unlike RMM, which takes a write lock on every allocation, the top frame's counters are atomics
//! updated under a *shared* lock: allocations on many threads do not wait for one another; only
//! push and pop take the lock exclusively.
//!
//! [`push_counters`]: StatisticsResourceAdaptor::push_counters
//! [`pop_counters`]: StatisticsResourceAdaptor::pop_counters

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{no_room, Freed, LiveSet, NoRoom, Sizes};
use crate::resource::{AnyResource, MemoryResource};

/// A counter (RMM's `statistics_resource_adaptor::counter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counter {
    /// The current amount.
    pub value: i64,
    /// The highest `value` reached.
    pub peak: i64,
    /// Everything ever added.
    pub total: i64,
}

impl Counter {
    /// Folds a finished child frame's counter into this one (RMM's
    /// `add_counters_from_tracked_sub_block`): the child's peak is reached on top of this value.
    ///
    /// ```
    /// use rmm_core::mr::statistics::Counter;
    /// let mut parent = Counter { value: 100, peak: 100, total: 100 };
    /// parent.add_sub_block(&Counter { value: -70, peak: 80, total: 80 });
    /// assert_eq!(parent, Counter { value: 30, peak: 180, total: 180 });
    /// ```
    pub fn add_sub_block(&mut self, child: &Counter) {
        self.peak = self.peak.max(self.value + child.peak);
        self.value += child.value;
        self.total += child.total;
    }
}

/// A counter that many threads update at once.
#[derive(Debug, Default)]
struct AtomicCounter {
    value: AtomicI64,
    peak: AtomicI64,
    total: AtomicI64,
}

impl AtomicCounter {
    fn add(&self, n: i64) {
        let value = self.value.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(value, Ordering::Relaxed);
        self.total.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(&self, n: i64) {
        self.value.fetch_sub(n, Ordering::Relaxed);
    }

    /// Undoes [`AtomicCounter::sub`] after a free that failed (the total is unchanged).
    fn restore(&self, n: i64) {
        let value = self.value.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(value, Ordering::Relaxed);
    }

    /// The counter now. The peak is raised to the value: an update may have added to the value
    /// and not yet to the peak.
    fn load(&self) -> Counter {
        let value = self.value.load(Ordering::Relaxed);
        let peak = self.peak.load(Ordering::Relaxed).max(value);
        Counter {
            value,
            peak,
            total: self.total.load(Ordering::Relaxed),
        }
    }

    fn store(&self, counter: Counter) {
        self.value.store(counter.value, Ordering::Relaxed);
        self.peak.store(counter.peak, Ordering::Relaxed);
        self.total.store(counter.total, Ordering::Relaxed);
    }
}

/// Bytes and allocations of one frame.
#[derive(Debug, Default)]
struct Frame {
    bytes: AtomicCounter,
    allocations: AtomicCounter,
}

impl Frame {
    fn load(&self) -> (Counter, Counter) {
        (self.bytes.load(), self.allocations.load())
    }
}

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    /// Never empty: the bottom frame cannot be popped.
    frames: RwLock<Vec<Frame>>,
    /// What this adaptor handed out and has not seen freed, with the bytes asked for.
    live: Arc<LiveSet>,
}

impl Inner {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Frame>> {
        self.frames.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Frame>> {
        self.frames.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `f` to the top frame, under the shared lock.
    fn with_top(&self, f: impl FnOnce(&Frame)) {
        if let Some(top) = self.read().last() {
            f(top);
        }
    }

    /// Counts an allocation and records it; when the host has no memory to record it,
    /// `give_back` frees it and the allocation fails with [`Error::OutOfMemory`].
    fn counted_allocation(
        &self,
        result: Result<*mut u8>,
        bytes: usize,
        give_back: impl FnOnce(*mut u8),
    ) -> Result<*mut u8> {
        let ptr = result?;
        if !ptr.is_null() {
            match self.live.insert(ptr as usize, bytes) {
                Ok(None) => {}
                Ok(Some(stale)) => self.forget_freed_behind_our_back(ptr, stale),
                Err(NoRoom) => {
                    give_back(ptr);
                    return Err(no_room(NAME, bytes));
                }
            }
        }
        self.with_top(|top| {
            top.bytes.add(as_i64(bytes));
            top.allocations.add(1);
        });
        Ok(ptr)
    }

    /// The upstream handed out `ptr` again while it was recorded here: it was freed without this
    /// adaptor (directly through the upstream), so its old record stops counting.
    #[cold]
    fn forget_freed_behind_our_back(&self, ptr: *mut u8, stale: usize) {
        tracing::warn!(
            "{NAME}: {ptr:p} was handed out again while recorded as live [{stale}B]: it was freed without this adaptor"
        );
        self.with_top(|top| {
            top.bytes.sub(as_i64(stale));
            top.allocations.sub(1);
        });
    }

    /// Checks a free against what this adaptor handed out, counts it at the recorded size and
    /// runs `free`; a failed `free` is counted back. A pointer it did not hand out is forwarded
    /// uncounted when the upstream knows it, refused otherwise (docs/design/checked-frees.md). A
    /// null pointer is no allocation unless it came from a zero-byte request: it is forwarded,
    /// counted only then.
    fn counted_free(
        &self,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
        free: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let recorded = if ptr.is_null() {
            if bytes != 0 {
                return free();
            }
            0
        } else {
            match self.live.take_for_adaptor(NAME, &self.upstream, ptr, bytes, alignment)? {
                Freed::Recorded(recorded) => recorded,
                Freed::Upstream => return free(),
            }
        };
        self.with_top(|top| {
            top.bytes.sub(as_i64(recorded));
            top.allocations.sub(1);
        });
        let result = free();
        if result.is_err() {
            if !ptr.is_null() {
                self.live.restore(NAME, ptr as usize, recorded);
            }
            self.with_top(|top| {
                top.bytes.restore(as_i64(recorded));
                top.allocations.restore(1);
            });
        }
        result
    }
}

/// RMM's name of the adaptor.
const NAME: &str = "statistics_resource_adaptor";

fn as_i64(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// Counts bytes and allocations in nestable frames (RMM's `statistics_resource_adaptor`).
///
/// Clones share the counters. Thread-safe; allocations and frees on different threads proceed in
/// parallel.
///
/// ```
/// use rmm_core::{cuda::Stream, mr::{StatisticsResourceAdaptor, SystemMemoryResource}, MemoryResource};
/// let mr = StatisticsResourceAdaptor::new(SystemMemoryResource::new());
/// let a = mr.allocate(Stream::DEFAULT, 100, 256)?;
/// let (bytes, allocations) = mr.push_counters();
/// assert_eq!((bytes.value, allocations.value), (100, 1));
/// let b = mr.allocate(Stream::DEFAULT, 50, 256)?;
/// // SAFETY: both came from `mr` with these arguments.
/// unsafe {
///     mr.deallocate(Stream::DEFAULT, b, 50, 256)?;
///     mr.deallocate(Stream::DEFAULT, a, 100, 256)?;
/// }
/// let (frame, _) = mr.pop_counters()?;
/// assert_eq!((frame.value, frame.peak, frame.total), (-100, 50, 50));
/// assert_eq!(mr.bytes_counter().peak, 150);
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct StatisticsResourceAdaptor {
    inner: Arc<Inner>,
}

impl StatisticsResourceAdaptor {
    /// Counts what passes to `upstream`, starting from zero in one frame.
    pub fn new<R: MemoryResource>(upstream: R) -> Self {
        let inner = Inner {
            upstream: AnyResource::new(upstream),
            frames: RwLock::new(vec![Frame::default()]),
            live: LiveSet::new(Sizes::Granular),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The bytes counter of the current frame (RMM's `get_bytes_counter`).
    pub fn bytes_counter(&self) -> Counter {
        self.counters().0
    }

    /// The allocations counter of the current frame (RMM's `get_allocations_counter`).
    pub fn allocations_counter(&self) -> Counter {
        self.counters().1
    }

    /// Both counters of the current frame, `(bytes, allocations)`, read together.
    pub fn counters(&self) -> (Counter, Counter) {
        self.inner
            .read()
            .last()
            .map(Frame::load)
            .unwrap_or_default()
    }

    /// Starts a new frame with zero counters and returns the counters as they were before
    /// (RMM's `push_counters`).
    pub fn push_counters(&self) -> (Counter, Counter) {
        let mut frames = self.inner.write();
        let before = frames.last().map(Frame::load).unwrap_or_default();
        frames.push(Frame::default());
        before
    }

    /// Ends the current frame, folds it into its parent (see [`Counter::add_sub_block`]) and
    /// returns it (RMM's `pop_counters`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] `"cannot pop the last counter pair"` when no frame was pushed
    /// (RMM throws `std::out_of_range`, which Python sees as `IndexError`).
    pub fn pop_counters(&self) -> Result<(Counter, Counter)> {
        let mut frames = self.inner.write();
        if frames.len() < 2 {
            return Err(Error::invalid("cannot pop the last counter pair"));
        }
        let popped = frames.pop().map(|frame| frame.load()).unwrap_or_default();
        if let Some(parent) = frames.last() {
            let (mut bytes, mut allocations) = parent.load();
            bytes.add_sub_block(&popped.0);
            allocations.add_sub_block(&popped.1);
            parent.bytes.store(bytes);
            parent.allocations.store(allocations);
        }
        Ok(popped)
    }

    /// The number of frames (1 until [`push_counters`] is called).
    ///
    /// [`push_counters`]: StatisticsResourceAdaptor::push_counters
    pub fn frames(&self) -> usize {
        self.inner.read().len()
    }

    /// The resource the calls are forwarded to (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }
}

impl MemoryResource for StatisticsResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner
            .counted_allocation(upstream.allocate(stream, bytes, alignment), bytes, |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate(stream, ptr, bytes, alignment) };
            })
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when `ptr` is neither a live allocation of this adaptor whose
    /// size rounds up to the same multiple of 256 as `bytes`, nor one its upstream knows (nothing
    /// is forwarded or counted then); otherwise the upstream's errors.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract; the memory came from the upstream.
        self.inner.counted_free(ptr, bytes, alignment, || unsafe {
            self.inner
                .upstream
                .deallocate(stream, ptr, bytes, alignment)
        })
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner
            .counted_allocation(upstream.allocate_sync(bytes, alignment), bytes, |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate_sync(ptr, bytes, alignment) };
            })
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // SAFETY: forwarded caller contract.
        self.inner.counted_free(ptr, bytes, alignment, || unsafe {
            self.inner.upstream.deallocate_sync(ptr, bytes, alignment)
        })
    }

    /// From the adaptor's own record of what it handed out.
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        Some(self.inner.live.contains(ptr as usize, bytes))
    }

    forward_to_upstream! {
        name: "statistics_resource_adaptor",
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

    const fn counter(value: i64, peak: i64, total: i64) -> Counter {
        Counter { value, peak, total }
    }

    fn alloc(mr: &StatisticsResourceAdaptor, bytes: usize) -> *mut u8 {
        mr.allocate(Stream::DEFAULT, bytes, 256).unwrap()
    }

    fn free(mr: &StatisticsResourceAdaptor, p: *mut u8, bytes: usize) {
        // SAFETY: every caller frees what `alloc` gave it, with the same size.
        unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() }
    }

    #[test]
    fn counts_bytes_and_allocations_over_host_memory() {
        let mr = StatisticsResourceAdaptor::new(Probe::new(Access::HOST));
        assert_eq!(mr.counters(), (Counter::default(), Counter::default()));
        let a = alloc(&mr, 100);
        let b = alloc(&mr, 300);
        free(&mr, a, 100);
        let c = mr.allocate_sync(50, 64).unwrap();
        assert_eq!(mr.bytes_counter(), counter(350, 400, 450));
        assert_eq!(mr.allocations_counter(), counter(2, 2, 3));
        free(&mr, b, 300);
        // SAFETY: from allocate_sync above.
        unsafe { mr.deallocate_sync(c, 50, 64).unwrap() };
        assert_eq!(mr.counters(), (counter(0, 400, 450), counter(0, 2, 3)));
        assert_eq!(
            mr.upstream()
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
        assert_eq!(mr.access(), Access::HOST);
    }

    /// The worked example of RMM's frame semantics, every number by hand.
    ///
    /// | step                        | parent bytes (v,p,t) | child bytes (v,p,t) | child allocs (v,p,t) |
    /// |-----------------------------|----------------------|---------------------|----------------------|
    /// | allocate a=100              | 100,100,100          |                     |                      |
    /// | push → returns parent       | 100,100,100          | 0,0,0               | 0,0,0                |
    /// | allocate b=50               |                      | 50,50,50            | 1,1,1                |
    /// | allocate c=30               |                      | 80,80,80            | 2,2,2                |
    /// | free b                      |                      | 30,80,80            | 1,2,2                |
    /// | free a (from the parent)    |                      | -70,80,80           | 0,2,2                |
    /// | pop → returns the child     | 30,180,180           |                     |                      |
    ///
    /// Pop: peak = max(100 + 80, 100) = 180, value = 100 - 70 = 30, total = 100 + 80 = 180;
    /// allocations: peak = max(1 + 2, 1) = 3, value = 1 + 0 = 1, total = 1 + 2 = 3.
    #[test]
    fn frames_follow_rmm_semantics() {
        let mr = StatisticsResourceAdaptor::new(SimulatedMemoryResource::new(1 << 20).unwrap());
        let a = alloc(&mr, 100);
        assert_eq!(
            mr.push_counters(),
            (counter(100, 100, 100), counter(1, 1, 1))
        );
        assert_eq!(mr.frames(), 2);
        assert_eq!(
            mr.counters(),
            (Counter::default(), Counter::default()),
            "a new frame starts at zero"
        );
        let b = alloc(&mr, 50);
        let c = alloc(&mr, 30);
        assert_eq!(mr.bytes_counter(), counter(80, 80, 80));
        free(&mr, b, 50);
        free(&mr, a, 100);
        assert_eq!(
            mr.counters(),
            (counter(-70, 80, 80), counter(0, 2, 2)),
            "values can go negative"
        );
        assert_eq!(
            mr.pop_counters().unwrap(),
            (counter(-70, 80, 80), counter(0, 2, 2))
        );
        assert_eq!(mr.counters(), (counter(30, 180, 180), counter(1, 3, 3)));
        let err = mr.pop_counters().unwrap_err();
        assert_eq!(err, Error::invalid("cannot pop the last counter pair"));
        assert_eq!(mr.frames(), 1);
        assert_eq!(
            mr.counters(),
            (counter(30, 180, 180), counter(1, 3, 3)),
            "a failed pop changes nothing"
        );
        free(&mr, c, 30);
    }

    /// Two nested frames: the grandchild folds into the child, the child into the parent.
    #[test]
    fn nested_frames_fold_level_by_level() {
        let mr = StatisticsResourceAdaptor::new(SimulatedMemoryResource::new(1 << 20).unwrap());
        let a = alloc(&mr, 1000); // parent: 1000,1000,1000
        mr.push_counters();
        let b = alloc(&mr, 200); // child: 200,200,200
        assert_eq!(mr.push_counters().0, counter(200, 200, 200));
        let c = alloc(&mr, 500); // grandchild: 500,500,500
        free(&mr, c, 500); // grandchild: 0,500,500
        let d = alloc(&mr, 10); // grandchild: 10,500,510
        assert_eq!(mr.pop_counters().unwrap().0, counter(10, 500, 510));
        // child: peak = max(200 + 500, 200) = 700, value = 210, total = 710
        assert_eq!(mr.bytes_counter(), counter(210, 700, 710));
        free(&mr, b, 200); // child: 10,700,710
        assert_eq!(mr.pop_counters().unwrap().0, counter(10, 700, 710));
        // parent: peak = max(1000 + 700, 1000) = 1700, value = 1010, total = 1710
        assert_eq!(mr.bytes_counter(), counter(1010, 1700, 1710));
        free(&mr, a, 1000);
        free(&mr, d, 10);
        assert_eq!(mr.bytes_counter(), counter(0, 1700, 1710));
        assert_eq!(mr.allocations_counter(), counter(0, 3, 4));
    }

    #[test]
    fn failures_are_not_counted() {
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let mr = StatisticsResourceAdaptor::new(gpu.clone());
        assert!(mr
            .allocate(Stream::DEFAULT, 2 << 20, 256)
            .unwrap_err()
            .is_out_of_memory());
        assert!(mr.allocate_sync(2 << 20, 256).is_err());
        assert_eq!(mr.counters(), (Counter::default(), Counter::default()));
        let p = alloc(&mr, 512);
        // SAFETY: a wrong size; the simulated device rejects the free without touching memory.
        let bad = unsafe { mr.deallocate(Stream::DEFAULT, p, 256, 256) };
        assert!(matches!(bad, Err(Error::InvalidArgument(_))));
        assert_eq!(
            mr.counters(),
            (counter(512, 512, 512), counter(1, 1, 1)),
            "a failed free is not counted"
        );
        free(&mr, p, 512);
        assert_eq!(gpu.usage().live_allocations, 0);
    }

    /// 16 threads each hold 50 allocations at once (a barrier between allocating and freeing),
    /// so every count, the peaks included, is exact.
    #[test]
    fn sixteen_threads_count_exactly() {
        const THREADS: usize = 16;
        const PER_THREAD: usize = 50;
        let mr = StatisticsResourceAdaptor::new(SystemMemoryResource::new());
        let barrier = std::sync::Barrier::new(THREADS);
        let size = |t: usize, k: usize| 1 + t * 1000 + k;
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (mr, barrier) = (&mr, &barrier);
                scope.spawn(move || {
                    let held: Vec<(usize, usize)> = (0..PER_THREAD)
                        .map(|k| (alloc(mr, size(t, k)) as usize, size(t, k)))
                        .collect();
                    barrier.wait();
                    for (p, bytes) in held {
                        free(mr, p as *mut u8, bytes);
                    }
                });
            }
        });
        let all: i64 = (0..THREADS)
            .flat_map(|t| (0..PER_THREAD).map(move |k| size(t, k) as i64))
            .sum();
        let n = (THREADS * PER_THREAD) as i64;
        assert_eq!(mr.counters(), (counter(0, all, all), counter(0, n, n)));
    }

    #[test]
    fn clones_share_counters() {
        let a = StatisticsResourceAdaptor::new(SystemMemoryResource::new());
        let b = a.clone();
        let p = alloc(&b, 64);
        assert_eq!(a.bytes_counter().value, 64);
        b.push_counters();
        assert_eq!(a.frames(), 2);
        assert!(
            a.is_equal(&b)
                && !a.is_equal(&StatisticsResourceAdaptor::new(SystemMemoryResource::new()))
        );
        assert_eq!(a.name(), "statistics_resource_adaptor");
        free(&a, p, 64);
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(StatisticsResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(StatisticsResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
        )))
    });

    /// 16 threads, each on its own stream, allocate and free on a stream-ordered pool; the counters
    /// come back to zero and the totals are exact.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_threads_on_their_own_streams_return_to_zero() {
        use crate::cuda::{OwnedStream, StreamFlags};
        crate::testing::require_gpu();
        const THREADS: usize = 16;
        const ROUNDS: usize = 100;
        let mr = StatisticsResourceAdaptor::new(crate::mr::CudaAsyncMemoryResource::new().unwrap());
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let mr = &mr;
                scope.spawn(move || {
                    let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
                    for k in 0..ROUNDS {
                        let bytes = 256 * (1 + (t + k) % 64);
                        let p = mr.allocate(stream.stream(), bytes, 256).unwrap();
                        // SAFETY: `p` is valid for `bytes`; the free is ordered after the fill.
                        unsafe {
                            crate::cuda::set_async(p, t as u8, bytes, stream.stream()).unwrap();
                            mr.deallocate(stream.stream(), p, bytes, 256).unwrap();
                        }
                    }
                    stream.synchronize().unwrap();
                });
            }
        });
        let all: i64 = (0..THREADS)
            .flat_map(|t| (0..ROUNDS).map(move |k| 256 * (1 + (t + k) % 64) as i64))
            .sum();
        let (bytes, allocations) = mr.counters();
        assert_eq!((bytes.value, bytes.total), (0, all));
        assert_eq!(
            (allocations.value, allocations.total),
            (0, (THREADS * ROUNDS) as i64)
        );
        assert!(
            bytes.peak > 0 && bytes.peak <= (THREADS * 256 * 64) as i64,
            "{bytes:?}"
        );
        assert!(
            allocations.peak >= 1 && allocations.peak <= THREADS as i64,
            "{allocations:?}"
        );
    }
}
