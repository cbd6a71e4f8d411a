//! Property models with adversaries (issue 12): random operation sequences on the pool,
//! fixed-size, binning and arena resources and on adaptor stacks over a pool, in which the caller
//! misbehaves and the upstream fails:
//!
//! - invalid frees: a pointer into a live allocation, a live pointer with a wrong size, a double
//!   free, pointers the resource never handed out. Each must be refused with `InvalidArgument` and
//!   change nothing (the accounting is checked after every step, live blocks never overlap);
//! - valid frees on other streams than the allocation's and on another thread;
//! - an upstream that fails its next allocations, with out-of-memory or with a CUDA error: the
//!   resource reports it and keeps working.
//!
//! The stream-ordered engines run under the recording model of stream order
//! (`stream_ordered/model.rs`), which fails the test if a block is handed to a stream before the
//! work of the stream that freed it. At the end everything is freed and given back, and the
//! simulated device is empty.
//!
//! `PROPTEST_CASES` sets the number of cases (each [`OPS`] operations): the default is a quick run;
//! `PROPTEST_CASES=256` runs about 10^6 operations per resource and per stack.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use proptest::prelude::*;

use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::stream_ordered::model::{
    alignment_from, size_from, test_streams, ModelUpstream, RecordingSyncer, Subject,
};
use crate::mr::detail::stream_ordered::CacheLimits;
use crate::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, FixedSizeMemoryResource,
    LimitingResourceAdaptor, LoggingResourceAdaptor, PoolMemoryResource, SimulatedMemoryResource,
    StatisticsResourceAdaptor, TrackingResourceAdaptor,
};
use crate::testing::proptest_cases;
use crate::{Access, AnyResource, MemoryResource};

const MIB: usize = 1 << 20;
/// Operations per case.
const OPS: usize = 4096;
/// Cases per property test unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 4;

/// An upstream that fails its next `armed` allocations: with out-of-memory, or (every other time)
/// with a CUDA error, as a driver might.
#[derive(Clone, Debug)]
struct Flaky {
    inner: AnyResource,
    armed: Arc<AtomicUsize>,
    fired: Arc<AtomicU64>,
    host_only: bool,
}

impl Flaky {
    fn new(inner: AnyResource) -> Self {
        Self {
            inner,
            armed: Arc::default(),
            fired: Arc::default(),
            host_only: false,
        }
    }

    /// One that says its memory is host memory: an arena over it then never synchronizes, so the
    /// made-up stream handles of the adversaries never reach a driver (with a GPU present, an arena
    /// synchronizes the streams of device memory it does not know to be simulated).
    fn host_only(inner: AnyResource) -> Self {
        Self {
            host_only: true,
            ..Self::new(inner)
        }
    }
}

impl MemoryResource for Flaky {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        if self
            .armed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
        {
            let n = self.fired.fetch_add(1, Ordering::AcqRel);
            return Err(if n % 2 == 0 {
                Error::out_of_memory(bytes, "flaky")
            } else {
                Error::Cuda {
                    code: 999,
                    name: "CUDA_ERROR_UNKNOWN".into(),
                    message: "injected".into(),
                    call: "flaky",
                }
            });
        }
        self.inner.allocate(stream, bytes, alignment)
    }
    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.inner.allocate_sync(bytes, alignment)
    }
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate(stream, ptr, bytes, alignment) }
    }
    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate_sync(ptr, bytes, alignment) }
    }
    fn access(&self) -> Access {
        if self.host_only {
            Access::HOST
        } else {
            self.inner.access()
        }
    }
    fn name(&self) -> &str {
        "flaky"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.armed, &o.armed))
    }
}

/// The arena as a subject of the driver (it is not stream-ordered by the model: it synchronizes
/// instead, which over a simulated device is nothing).
impl Subject for ArenaMemoryResource {
    fn footprint(&self, ptr: usize, bytes: usize, _alignment: usize) -> (usize, usize) {
        (ptr, align_up(bytes, DEFAULT_ALIGNMENT).unwrap())
    }
    fn must_fail(&self, _bytes: usize, alignment: usize) -> Option<fn(&Error) -> bool> {
        (alignment > DEFAULT_ALIGNMENT).then_some(|e| matches!(e, Error::InvalidArgument(_)))
    }
    fn check_accounting(&self, held: usize) {
        let s = self.stats();
        assert_eq!(s.used_bytes, held, "bytes used vs the live blocks");
        assert_eq!(s.used_bytes + s.free_bytes, s.arena_size);
    }
    fn release(&self) -> Result<usize> {
        self.defragment().map(|()| 0)
    }
    fn check_books(&self) {
        self.check_invariants();
    }
}

/// Statistics over limiting over tracking over logging over a pool: the counters of every layer
/// must agree with each other and with the pool after every step, refusals included.
#[derive(Debug)]
struct Stack {
    top: StatisticsResourceAdaptor,
    limiting: LimitingResourceAdaptor,
    tracking: TrackingResourceAdaptor,
    pool: PoolMemoryResource,
}

impl MemoryResource for Stack {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.top.allocate(stream, bytes, alignment)
    }
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.top.deallocate(stream, ptr, bytes, alignment) }
    }
    fn access(&self) -> Access {
        self.top.access()
    }
    fn name(&self) -> &str {
        "stack"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| std::ptr::eq(self, o))
    }
}

impl Subject for Stack {
    fn footprint(&self, ptr: usize, bytes: usize, alignment: usize) -> (usize, usize) {
        self.pool.footprint(ptr, bytes, alignment)
    }
    fn must_fail(&self, _bytes: usize, _alignment: usize) -> Option<fn(&Error) -> bool> {
        None
    }
    fn check_accounting(&self, held: usize) {
        let (bytes, allocations) = self.top.counters();
        assert_eq!(
            bytes.value,
            self.tracking.allocated_bytes() as i64,
            "statistics vs tracking"
        );
        assert_eq!(
            allocations.value,
            self.tracking.outstanding_allocations().len() as i64,
            "allocations"
        );
        assert_eq!(
            self.limiting.allocated_bytes(),
            held,
            "limiting vs the live blocks"
        );
        self.pool.check_accounting(held);
    }
    fn release(&self) -> Result<usize> {
        self.pool.release_unused()
    }
    fn check_books(&self) {
        self.pool.check_books();
    }
}

/// One operation: `(kind, stream index, seed, alignment seed)`.
type AdvOp = (u8, u8, u32, u8);

struct Live {
    ptr: usize,
    bytes: usize,
    alignment: usize,
    start: usize,
    len: usize,
}

/// A thread that frees what it is sent and answers with the result.
struct Remote {
    jobs: mpsc::Sender<(usize, usize, usize, Stream)>,
    results: mpsc::Receiver<Result<()>>,
}

/// What an invalid free looks like.
#[derive(Clone, Copy, Debug)]
enum Bad {
    Interior,
    WrongSize,
    DoubleFree,
    Foreign,
}

/// Runs `ops` against `mr` with an adversarial caller and a flaky upstream; `syncer` is the stream
/// order model (`None` for a resource it does not apply to). Returns the numbers of refused
/// invalid frees and of injected upstream failures.
fn drive_adversary<R: Subject + Sync>(
    mr: &R,
    syncer: Option<&RecordingSyncer>,
    flaky: &Flaky,
    ops: &[AdvOp],
) -> std::result::Result<(usize, u64), String> {
    std::thread::scope(|scope| {
        let (jobs, job_rx) = mpsc::channel::<(usize, usize, usize, Stream)>();
        let (result_tx, results) = mpsc::channel();
        scope.spawn(move || {
            for (ptr, bytes, alignment, stream) in job_rx {
                // SAFETY: the driver sends only live allocations of `mr` with their arguments.
                let r = unsafe { mr.deallocate(stream, ptr as *mut u8, bytes, alignment) };
                if result_tx.send(r).is_err() {
                    break;
                }
            }
        });
        let remote = Remote { jobs, results };
        drive_with(mr, syncer, flaky, ops, &remote)
    })
}

fn drive_with<R: Subject>(
    mr: &R,
    syncer: Option<&RecordingSyncer>,
    flaky: &Flaky,
    ops: &[AdvOp],
    remote: &Remote,
) -> std::result::Result<(usize, u64), String> {
    let streams = test_streams();
    // Streams another thread may name (a PTDS is per thread: not that one).
    let shared_streams = &streams[..6];
    let mut live: Vec<Live> = Vec::new();
    let mut by_addr: BTreeMap<usize, usize> = BTreeMap::new();
    let mut live_ptrs: HashSet<usize> = HashSet::new();
    let mut freed: Vec<(usize, usize, usize)> = Vec::new();
    let mut held = 0usize;
    let mut refused = 0usize;
    let fired_before = flaky.fired.load(Ordering::Acquire);
    let key = |s: Stream| syncer.map(|y| y.key(s));
    for &(kind, s, seed, align_seed) in ops {
        let stream = streams[s as usize % streams.len()];
        let kind = kind % 100;
        if kind < 45 && live.len() < 256 {
            let (bytes, alignment) = (size_from(seed), alignment_from(align_seed));
            let expected = mr.must_fail(bytes, alignment);
            let fired = flaky.fired.load(Ordering::Acquire);
            match mr.allocate(stream, bytes, alignment) {
                Ok(p) => {
                    if expected.is_some() {
                        return Err(format!(
                            "{bytes} bytes aligned to {alignment} should have failed"
                        ));
                    }
                    let ptr = p as usize;
                    if ptr % alignment != 0 {
                        return Err(format!("{ptr:#x} is not aligned to {alignment}"));
                    }
                    let (start, len) = mr.footprint(ptr, bytes, alignment);
                    if let Some((&a, &e)) = by_addr.range(..start + len).next_back() {
                        if e > start {
                            return Err(format!(
                                "[{start:#x}, +{len}) overlaps live [{a:#x}, {e:#x})"
                            ));
                        }
                    }
                    if let (Some(y), Some(k)) = (syncer, key(stream)) {
                        y.model().allocated(k, start, len)?;
                    }
                    by_addr.insert(start, start + len);
                    live_ptrs.insert(ptr);
                    held += len;
                    live.push(Live {
                        ptr,
                        bytes,
                        alignment,
                        start,
                        len,
                    });
                }
                Err(e) => match expected {
                    Some(ok) if ok(&e) => {}
                    Some(_) => {
                        return Err(format!(
                            "{bytes} bytes aligned to {alignment}: wrong error {e}"
                        ))
                    }
                    None if e.is_out_of_memory() => {}
                    // A CUDA error from the upstream is passed on, but only if one was injected.
                    None if matches!(e, Error::Cuda { .. })
                        && flaky.fired.load(Ordering::Acquire) > fired => {}
                    None => return Err(format!("{bytes} bytes aligned to {alignment}: {e}")),
                },
            }
        } else if kind < 80 && !live.is_empty() {
            // A valid free: on any stream, now and then on another thread.
            let b = live.swap_remove(seed as usize % live.len());
            let on_remote = kind >= 70;
            let stream = if on_remote {
                shared_streams[s as usize % shared_streams.len()]
            } else {
                stream
            };
            if let (Some(y), Some(k)) = (syncer, key(stream)) {
                y.model().freed(k, b.start, b.len);
            }
            by_addr.remove(&b.start);
            live_ptrs.remove(&b.ptr);
            held -= b.len;
            let result = if on_remote {
                remote
                    .jobs
                    .send((b.ptr, b.bytes, b.alignment, stream))
                    .map_err(|e| e.to_string())?;
                remote.results.recv().map_err(|e| e.to_string())?
            } else {
                // SAFETY: `b.ptr` came from `mr.allocate` with these arguments; the fake streams
                // have no work queued, and the model tracks the order of its reuse.
                unsafe { mr.deallocate(stream, b.ptr as *mut u8, b.bytes, b.alignment) }
            };
            result.map_err(|e| format!("a valid free of {:#x}+{}: {e}", b.ptr, b.bytes))?;
            freed.push((b.ptr, b.bytes, b.alignment));
            if freed.len() > 64 {
                freed.remove(0);
            }
        } else if kind < 94 {
            let bad =
                [Bad::Interior, Bad::WrongSize, Bad::DoubleFree, Bad::Foreign][seed as usize % 4];
            let target = match bad {
                Bad::Interior => live
                    .iter()
                    .filter(|b| {
                        b.bytes > DEFAULT_ALIGNMENT
                            && !live_ptrs.contains(&(b.ptr + DEFAULT_ALIGNMENT))
                    })
                    .map(|b| (b.ptr + DEFAULT_ALIGNMENT, DEFAULT_ALIGNMENT, b.alignment))
                    .next(),
                Bad::WrongSize => live.get(seed as usize % live.len().max(1)).map(|b| {
                    let wrong = if b.bytes > DEFAULT_ALIGNMENT {
                        1
                    } else {
                        b.bytes + DEFAULT_ALIGNMENT
                    };
                    (b.ptr, wrong, b.alignment)
                }),
                Bad::DoubleFree => freed
                    .iter()
                    .rev()
                    .copied()
                    .find(|(p, _, _)| !live_ptrs.contains(p)),
                Bad::Foreign => {
                    let p = 0x10 + (seed as usize % 7) * 0x1_0000_0000;
                    (!live_ptrs.contains(&p)).then_some((p, 256, 256))
                }
            };
            let Some((ptr, bytes, alignment)) = target else {
                continue;
            };
            // SAFETY: deliberately invalid; a checked resource refuses it before touching memory
            // (and simulated memory is never dereferenced).
            let r = unsafe { mr.deallocate(stream, ptr as *mut u8, bytes, alignment) };
            if !matches!(r, Err(Error::InvalidArgument(_))) {
                return Err(format!(
                    "{bad:?} free of {ptr:#x}+{bytes} (align {alignment}) was not refused: {r:?}"
                ));
            }
            refused += 1;
        } else if kind < 98 {
            flaky.armed.store(1 + seed as usize % 4, Ordering::Release);
        } else {
            mr.release().map_err(|e| format!("release: {e}"))?;
        }
        mr.check_accounting(held);
    }
    flaky.armed.store(0, Ordering::Release);
    for b in live.drain(..) {
        if let (Some(y), Some(k)) = (syncer, key(Stream::DEFAULT)) {
            y.model().freed(k, b.start, b.len);
        }
        // SAFETY: as above.
        unsafe { mr.deallocate(Stream::DEFAULT, b.ptr as *mut u8, b.bytes, b.alignment) }
            .map_err(|e| e.to_string())?;
    }
    mr.check_accounting(0);
    mr.release().map_err(|e| format!("release: {e}"))?;
    Ok((refused, flaky.fired.load(Ordering::Acquire) - fired_before))
}

/// A simulated device watched by a model, behind a flaky upstream.
fn upstream(capacity: usize, seed: u64) -> (RecordingSyncer, SimulatedMemoryResource, Flaky) {
    let syncer = RecordingSyncer::new(30, seed);
    let device = SimulatedMemoryResource::new(capacity).unwrap();
    let flaky = Flaky::new(AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    )));
    (syncer, device, flaky)
}

fn ops() -> impl Strategy<Value = Vec<AdvOp>> {
    proptest::collection::vec(any::<AdvOp>(), OPS)
}

/// Runs the driver and checks that refusals happened and the device ends empty.
fn check<R: Subject + Sync>(
    mr: R,
    syncer: Option<&RecordingSyncer>,
    flaky: &Flaky,
    device: &SimulatedMemoryResource,
    ops: &[AdvOp],
) -> std::result::Result<(), TestCaseError> {
    let (refused, fired) = drive_adversary(&mr, syncer, flaky, ops).map_err(TestCaseError::fail)?;
    prop_assert!(refused > 0, "the adversary made no invalid free");
    let _ = fired;
    drop(mr);
    prop_assert_eq!(
        device.usage().allocated_bytes,
        0,
        "everything went back to the device"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(CASES), ..ProptestConfig::default() })]

    #[test]
    fn pool_with_adversaries(ops in ops(), cache in 0usize..3) {
        let (syncer, device, flaky) = upstream(512 * MIB, 0xad01);
        let cache = CacheLimits::ALL[cache];
        let pool = PoolMemoryResource::build(AnyResource::new(flaky.clone()), Some(4 * MIB), Some(256 * MIB), Arc::new(syncer.clone()), cache).unwrap();
        check(pool, Some(&syncer), &flaky, &device, &ops)?;
    }

    #[test]
    fn fixed_size_with_adversaries(ops in ops()) {
        let (syncer, device, flaky) = upstream(512 * MIB, 0xad02);
        let mr = FixedSizeMemoryResource::build(AnyResource::new(flaky.clone()), 64 << 10, 64, Arc::new(syncer.clone()), CacheLimits::DEFAULT).unwrap();
        check(mr, Some(&syncer), &flaky, &device, &ops)?;
    }

    #[test]
    fn binning_with_adversaries(ops in ops()) {
        let (syncer, device, flaky) = upstream(1024 * MIB, 0xad03);
        let mr = BinningMemoryResource::build_with_exponents(AnyResource::new(flaky.clone()), 8, 16, Arc::new(syncer.clone())).unwrap();
        check(mr, Some(&syncer), &flaky, &device, &ops)?;
    }

    #[test]
    fn arena_with_adversaries(ops in ops()) {
        let device = SimulatedMemoryResource::new(512 * MIB).unwrap();
        let flaky = Flaky::host_only(AnyResource::new(device.clone()));
        let mr = ArenaMemoryResource::with_options(AnyResource::new(flaky.clone()), ArenaOptions::default().arena_size(256 * MIB)).unwrap();
        check(mr, None, &flaky, &device, &ops)?;
    }

    #[test]
    fn adaptor_stack_with_adversaries(ops in ops()) {
        let (syncer, device, flaky) = upstream(512 * MIB, 0xad05);
        let pool = PoolMemoryResource::build(AnyResource::new(flaky.clone()), Some(4 * MIB), Some(256 * MIB), Arc::new(syncer.clone()), CacheLimits::DEFAULT).unwrap();
        let logging = LoggingResourceAdaptor::with_writer(pool.clone(), std::io::sink()).unwrap();
        let tracking = TrackingResourceAdaptor::new(logging, false);
        let limiting = LimitingResourceAdaptor::new(tracking.clone(), 192 * MIB);
        let top = StatisticsResourceAdaptor::new(limiting.clone());
        let stack = Stack { top, limiting, tracking, pool };
        check(stack, Some(&syncer), &flaky, &device, &ops)?;
    }
}
