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
//! Over a pool that checks frees, the record is the pool's own: the pool records the allocation
//! with the adaptor's number and the bytes asked for, checks the free and tells the adaptor
//! whether the allocation was its own, so one record serves both layers. An allocation the adaptor
//! made and that was freed without it (directly through the pool, or through another adaptor)
//! stops counting when it is freed. Over anything else the adaptor keeps its own record.
//!
//! Like RMM, which takes a write lock on every allocation and free, the frames are updated under
//! one lock, so every count, the peaks included, is exact in the order the updates took it: a spin
//! lock held for a few additions (docs/design/statistics-cost.md).
//!
//! [`push_counters`]: StatisticsResourceAdaptor::push_counters
//! [`pop_counters`]: StatisticsResourceAdaptor::pop_counters

use std::sync::{Arc, Weak};

use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{no_room, Freed, LiveSet, NoRoom, Owned, RecordOwner, Sizes};
use crate::mr::detail::spin_lock::SpinLock;
use crate::mr::PoolMemoryResource;
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

    #[inline]
    fn add(&mut self, n: i64) {
        self.value += n;
        self.peak = self.peak.max(self.value);
        self.total += n;
    }

    #[inline]
    fn sub(&mut self, n: i64) {
        self.value -= n;
    }

    /// Undoes [`Counter::sub`] after a free that failed (the total is unchanged).
    fn restore(&mut self, n: i64) {
        self.value += n;
        self.peak = self.peak.max(self.value);
    }
}

/// Bytes and allocations of one frame.
#[derive(Clone, Copy, Debug, Default)]
struct Frame {
    bytes: Counter,
    allocations: Counter,
}

impl Frame {
    fn counters(&self) -> (Counter, Counter) {
        (self.bytes, self.allocations)
    }
}

/// The stack of frames: the top one, which the calls count into, and the ones below it.
#[derive(Debug, Default)]
struct Frames {
    top: Frame,
    below: Vec<Frame>,
}

/// Where the adaptor records what it handed out and has not seen freed, with the bytes asked for.
#[derive(Debug)]
enum Record {
    /// In its own index.
    Own(Arc<LiveSet>),
    /// In the records of the checked pool it is over, tagged with its number there: one record
    /// serves both layers (docs/design/statistics-cost.md).
    Pool {
        pool: PoolMemoryResource,
        owner: u16,
    },
}

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    frames: SpinLock<Frames>,
    record: Record,
}

impl RecordOwner for Inner {
    fn freed_elsewhere(&self, ptr: *mut u8, bytes: usize) {
        tracing::warn!(
            "{NAME}: {ptr:p} [{bytes}B], handed out through this adaptor, was freed without it: it stops counting it"
        );
        self.with_top(|top| {
            top.bytes.sub(as_i64(bytes));
            top.allocations.sub(1);
        });
    }
}

impl Inner {
    /// Applies `f` to the top frame, under the lock.
    #[inline]
    fn with_top(&self, f: impl FnOnce(&mut Frame)) {
        self.frames.with(|frames| f(&mut frames.top));
    }

    /// Counts an allocation of `bytes`.
    #[inline]
    fn count_allocation(&self, bytes: usize) {
        self.with_top(|top| {
            top.bytes.add(as_i64(bytes));
            top.allocations.add(1);
        });
    }

    /// Counts a free of an allocation of `bytes`.
    #[inline]
    fn count_free(&self, bytes: usize) {
        self.with_top(|top| {
            top.bytes.sub(as_i64(bytes));
            top.allocations.sub(1);
        });
    }

    /// Counts a free the pool checked, if this adaptor made the allocation.
    #[inline]
    fn count_owned(&self, owned: Owned) {
        if let Owned::Mine(bytes) = owned {
            self.count_free(bytes);
        }
    }

    /// Undoes [`Inner::count_owned`] after the free failed.
    #[cold]
    fn uncount_owned(&self, owned: Owned) {
        if let Owned::Mine(bytes) = owned {
            self.uncount_free(bytes);
        }
    }

    /// Undoes [`Inner::count_free`] after the free failed.
    #[cold]
    fn uncount_free(&self, bytes: usize) {
        self.with_top(|top| {
            top.bytes.restore(as_i64(bytes));
            top.allocations.restore(1);
        });
    }

    /// Allocates through the pool's records when the adaptor keeps none of its own.
    #[inline]
    fn allocate_in_pool(
        &self,
        allocate: impl FnOnce(&AnyResource) -> Result<*mut u8>,
        in_pool: impl FnOnce(&PoolMemoryResource, u16) -> Result<*mut u8>,
        bytes: usize,
        give_back: impl FnOnce(*mut u8),
    ) -> Result<*mut u8> {
        match &self.record {
            Record::Pool { pool, owner } => {
                let ptr = in_pool(pool, *owner)?;
                self.count_allocation(bytes);
                Ok(ptr)
            }
            Record::Own(live) => {
                self.counted_allocation(live, allocate(&self.upstream), bytes, give_back)
            }
        }
    }

    /// Counts an allocation and records it; when the host has no memory to record it,
    /// `give_back` frees it and the allocation fails with [`Error::OutOfMemory`].
    fn counted_allocation(
        &self,
        live: &LiveSet,
        result: Result<*mut u8>,
        bytes: usize,
        give_back: impl FnOnce(*mut u8),
    ) -> Result<*mut u8> {
        let ptr = result?;
        if !ptr.is_null() {
            match live.insert(ptr as usize, bytes) {
                Ok(None) => {}
                Ok(Some(stale)) => self.forget_freed_behind_our_back(ptr, stale),
                Err(NoRoom) => {
                    give_back(ptr);
                    return Err(no_room(NAME, bytes));
                }
            }
        }
        self.count_allocation(bytes);
        Ok(ptr)
    }

    /// The upstream handed out `ptr` again while it was recorded here: it was freed without this
    /// adaptor (directly through the upstream), so its old record stops counting.
    #[cold]
    fn forget_freed_behind_our_back(&self, ptr: *mut u8, stale: usize) {
        tracing::warn!(
            "{NAME}: {ptr:p} was handed out again while recorded as live [{stale}B]: it was freed without this adaptor"
        );
        self.count_free(stale);
    }

    /// Checks a free against what this adaptor handed out, counts it at the recorded size and
    /// runs `free`; a failed `free` is counted back. A pointer it did not hand out is forwarded
    /// uncounted when the upstream knows it, refused otherwise (docs/design/checked-frees.md). A
    /// null pointer is no allocation unless it came from a zero-byte request: it is forwarded,
    /// counted only then.
    ///
    /// Over a pool that keeps the record, `in_pool` frees a non-null pointer with
    /// [`PoolMemoryResource::deallocate_for`], passing it the pool, this adaptor's number there and
    /// [`Inner::count_owned`] / [`Inner::uncount_owned`] (the pool checks the free and says whether
    /// this adaptor made the allocation before the memory goes back).
    #[inline(always)]
    fn counted_free(
        &self,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
        free: impl FnOnce() -> Result<()>,
        in_pool: impl FnOnce(&PoolMemoryResource, u16) -> Result<()>,
    ) -> Result<()> {
        let (live, recorded) = match &self.record {
            _ if ptr.is_null() => {
                if bytes != 0 {
                    return free();
                }
                (None, 0)
            }
            Record::Pool { pool, owner } => return in_pool(pool, *owner),
            Record::Own(live) => {
                match live.take_for_adaptor(NAME, &self.upstream, ptr, bytes, alignment)? {
                    Freed::Recorded(recorded) => (Some(live), recorded),
                    Freed::Upstream => return free(),
                }
            }
        };
        self.count_free(recorded);
        let result = free();
        if result.is_err() {
            if let Some(live) = live {
                live.restore(NAME, ptr as usize, recorded);
            }
            self.uncount_free(recorded);
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
/// parallel, except for the few additions to the counters, which take turns.
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
        let upstream = AnyResource::new(upstream);
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let me: Weak<dyn RecordOwner> = me.clone();
            let record = upstream
                .downcast_ref::<PoolMemoryResource>()
                .and_then(|pool| {
                    let owner = pool.register_owner(me)?;
                    Some(Record::Pool {
                        pool: pool.clone(),
                        owner,
                    })
                })
                .unwrap_or_else(|| Record::Own(LiveSet::new(Sizes::Granular)));
            Inner {
                upstream,
                frames: SpinLock::default(),
                record,
            }
        });
        Self { inner }
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
        self.inner.frames.with(|frames| frames.top.counters())
    }

    /// Starts a new frame with zero counters and returns the counters as they were before
    /// (RMM's `push_counters`).
    pub fn push_counters(&self) -> (Counter, Counter) {
        self.inner.frames.with(|frames| {
            let before = std::mem::take(&mut frames.top);
            frames.below.push(before);
            before.counters()
        })
    }

    /// Ends the current frame, folds it into its parent (see [`Counter::add_sub_block`]) and
    /// returns it (RMM's `pop_counters`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] `"cannot pop the last counter pair"` when no frame was pushed
    /// (RMM throws `std::out_of_range`, which Python sees as `IndexError`).
    pub fn pop_counters(&self) -> Result<(Counter, Counter)> {
        self.inner.frames.with(|frames| {
            let parent = frames
                .below
                .pop()
                .ok_or_else(|| Error::invalid("cannot pop the last counter pair"))?;
            let popped = std::mem::replace(&mut frames.top, parent);
            frames.top.bytes.add_sub_block(&popped.bytes);
            frames.top.allocations.add_sub_block(&popped.allocations);
            Ok(popped.counters())
        })
    }

    /// The number of frames (1 until [`push_counters`] is called).
    ///
    /// [`push_counters`]: StatisticsResourceAdaptor::push_counters
    pub fn frames(&self) -> usize {
        self.inner.frames.with(|frames| frames.below.len() + 1)
    }

    /// The resource the calls are forwarded to (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }
}

impl MemoryResource for StatisticsResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner.allocate_in_pool(
            |upstream| upstream.allocate(stream, bytes, alignment),
            |pool, owner| pool.allocate_for(stream, bytes, alignment, owner),
            bytes,
            |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate(stream, ptr, bytes, alignment) };
            },
        )
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
        self.inner.counted_free(
            ptr,
            bytes,
            alignment,
            // SAFETY: forwarded caller contract; the memory came from the upstream.
            || unsafe {
                self.inner
                    .upstream
                    .deallocate(stream, ptr, bytes, alignment)
            },
            // SAFETY: as above; the pool is the upstream.
            |pool, owner| unsafe {
                pool.deallocate_for(
                    stream,
                    ptr,
                    bytes,
                    owner,
                    NAME,
                    |owned| self.inner.count_owned(owned),
                    |owned| self.inner.uncount_owned(owned),
                )
            },
        )
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let upstream = &self.inner.upstream;
        self.inner.allocate_in_pool(
            |upstream| upstream.allocate_sync(bytes, alignment),
            // The pool's `allocate_sync` is the default one: an allocation on the default stream,
            // then a synchronization of it.
            |pool, owner| {
                let ptr = pool.allocate_for(Stream::DEFAULT, bytes, alignment, owner)?;
                if let Err(e) = Stream::DEFAULT.synchronize() {
                    // SAFETY: just allocated with these arguments, never handed out.
                    let _ = unsafe { pool.deallocate(Stream::DEFAULT, ptr, bytes, alignment) };
                    return Err(e);
                }
                Ok(ptr)
            },
            bytes,
            |ptr| {
                // SAFETY: just allocated with these arguments, never handed out.
                let _ = unsafe { upstream.deallocate_sync(ptr, bytes, alignment) };
            },
        )
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        self.inner.counted_free(
            ptr,
            bytes,
            alignment,
            // SAFETY: forwarded caller contract.
            || unsafe { self.inner.upstream.deallocate_sync(ptr, bytes, alignment) },
            // SAFETY: as above; the pool's `deallocate_sync` is a free on the default stream.
            |pool, owner| unsafe {
                pool.deallocate_for(
                    Stream::DEFAULT,
                    ptr,
                    bytes,
                    owner,
                    NAME,
                    |owned| self.inner.count_owned(owned),
                    |owned| self.inner.uncount_owned(owned),
                )
            },
        )
    }

    /// From the record of what the adaptor handed out (its own, or the pool's).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        Some(match &self.inner.record {
            Record::Own(live) => live.contains(ptr as usize, bytes),
            Record::Pool { pool, owner } => pool.is_owned(ptr, bytes, *owner),
        })
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
                .load(std::sync::atomic::Ordering::SeqCst),
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
    /// so every count, the peaks included, is exact, with the adaptor's own record (over system
    /// memory) and with the pool's.
    #[test]
    fn sixteen_threads_count_exactly() {
        sixteen_threads_count_exactly_over(StatisticsResourceAdaptor::new(
            SystemMemoryResource::new(),
        ));
        sixteen_threads_count_exactly_over(StatisticsResourceAdaptor::new(pool()));
    }

    fn sixteen_threads_count_exactly_over(mr: StatisticsResourceAdaptor) {
        const THREADS: usize = 16;
        const PER_THREAD: usize = 50;
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

    fn pool() -> PoolMemoryResource {
        PoolMemoryResource::new(
            AnyResource::new(SystemMemoryResource::new()),
            Some(64 << 20),
            None,
        )
        .unwrap()
    }

    /// Over a checked pool the adaptor keeps no record of its own: the pool's records say which
    /// allocations it made, so two adaptors over one pool count only their own, and one hears of
    /// its allocations freed without it.
    #[test]
    fn adaptors_over_one_pool_count_only_what_they_made() {
        let pool = pool();
        let (a, b) = (
            StatisticsResourceAdaptor::new(pool.clone()),
            StatisticsResourceAdaptor::new(pool.clone()),
        );
        assert!(matches!(a.inner.record, Record::Pool { .. }));
        let p = alloc(&a, 1000);
        assert_eq!(a.is_live_allocation(p, 1001, 256), Some(true));
        assert_eq!(a.is_live_allocation(p, 1300, 256), Some(false));
        assert_eq!(b.is_live_allocation(p, 1000, 256), Some(false), "not b's");
        assert!(matches!(
            // SAFETY: a wrong size (another multiple of 256): refused, nothing moves.
            unsafe { a.deallocate(Stream::DEFAULT, p, 1300, 256) },
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(a.counters(), (counter(1000, 1000, 1000), counter(1, 1, 1)));
        // Through b: the pool frees it, b counts nothing, a stops counting it.
        free(&b, p, 1000);
        assert_eq!(b.counters(), (Counter::default(), Counter::default()));
        assert_eq!(a.counters(), (counter(0, 1000, 1000), counter(0, 1, 1)));
        assert_eq!(pool.statistics().bytes_used, 0);
        // Directly through the pool: the same.
        let q = alloc(&a, 300);
        // SAFETY: the pool's live allocation, with its size.
        unsafe { pool.deallocate(Stream::DEFAULT, q, 300, 256).unwrap() };
        assert_eq!(a.counters(), (counter(0, 1000, 1300), counter(0, 1, 2)));
        // SAFETY: a double free: refused, nothing moves.
        match unsafe { a.deallocate(Stream::DEFAULT, q, 300, 256) } {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("upstream does not know it"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(a.bytes_counter().value, 0);
        // Zero bytes: a null pointer, counted as an allocation and freed with zero bytes.
        let z = alloc(&a, 0);
        assert!(z.is_null());
        assert_eq!(a.allocations_counter().value, 1);
        free(&a, z, 0);
        assert_eq!(a.counters().1, counter(0, 1, 3));
        // What a made with `allocate_sync` comes back the same way.
        let s = a.allocate_sync(700, 256).unwrap();
        // SAFETY: from `allocate_sync` above, with its size.
        unsafe { a.deallocate_sync(s, 700, 256).unwrap() };
        assert_eq!(a.bytes_counter(), counter(0, 1000, 2000));
    }

    /// An adaptor dropped while its allocations live: the pool still frees them, and no other
    /// adaptor counts them.
    #[test]
    fn an_adaptor_dropped_leaves_its_allocations_to_the_pool() {
        let pool = pool();
        let a = StatisticsResourceAdaptor::new(pool.clone());
        let p = alloc(&a, 512);
        drop(a);
        let b = StatisticsResourceAdaptor::new(pool.clone());
        assert_eq!(b.is_live_allocation(p, 512, 256), Some(false));
        free(&b, p, 512);
        assert_eq!(b.counters(), (Counter::default(), Counter::default()));
        assert_eq!(pool.statistics().bytes_used, 0);
    }

    /// Where the pool cannot keep the record (frees unchecked, or all its owner numbers given
    /// out), the adaptor keeps its own, with the same rules.
    #[test]
    fn without_the_pool_s_records_it_keeps_its_own() {
        let unchecked = PoolMemoryResource::with_free_checks(
            AnyResource::new(SystemMemoryResource::new()),
            Some(1 << 20),
            None,
            crate::mr::FreeChecks::Unchecked,
        )
        .unwrap();
        let numbered = pool();
        for _ in 0..u16::MAX {
            drop(StatisticsResourceAdaptor::new(numbered.clone()));
        }
        for upstream in [unchecked, numbered] {
            let mr = StatisticsResourceAdaptor::new(upstream.clone());
            assert!(matches!(mr.inner.record, Record::Own(_)));
            let p = alloc(&mr, 1000);
            // SAFETY: a wrong size: refused by the adaptor's record.
            assert!(unsafe { mr.deallocate(Stream::DEFAULT, p, 1300, 256) }.is_err());
            free(&mr, p, 1001);
            assert_eq!(mr.counters(), (counter(0, 1000, 1000), counter(0, 1, 1)));
            let beside = upstream.allocate(Stream::DEFAULT, 256, 256).unwrap();
            // SAFETY: the pool's allocation: forwarded uncounted when the pool knows it (checked),
            // refused when it cannot tell (unchecked), then freed where it was made.
            unsafe {
                if mr.deallocate(Stream::DEFAULT, beside, 256, 256).is_err() {
                    upstream
                        .deallocate(Stream::DEFAULT, beside, 256, 256)
                        .unwrap();
                }
            }
            assert_eq!(mr.bytes_counter().value, 0);
            assert_eq!(upstream.statistics().bytes_used, 0);
        }
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
