//! A model of CUDA stream order for the CPU tests: a [`Syncer`] that records every wait instead of
//! calling CUDA, and checks that no block is handed to a stream, or given back upstream, while work
//! that may still use it is not ordered before.
//!
//! Model: each stream has a clock, advanced by the test at every free on it (the free's *point*).
//! Each stream also has a vector clock of what it is ordered after: a wait on a stream or a marker
//! merges that stream's vector (plus its own clock at the record). A free leaves an *obligation*
//! `(stream T, point c)` on its bytes; handing the bytes to stream S is safe when S == T, S is
//! ordered after T's point c, or T's work up to c is known complete (found idle or synchronized).
//! Fake stream handles never reach CUDA: the syncer is the only thing that would use them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{Marker, MarkerToken, StreamKey, Syncer};
use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::cuda::{DeviceId, Stream};
use crate::error::{Error, Result};
use crate::resource::{Access, AnyResource, MemoryResource};

type Vector = HashMap<StreamKey, u64>;

fn merge(into: &mut Vector, from: &Vector) {
    for (k, &c) in from {
        let e = into.entry(*k).or_insert(0);
        *e = (*e).max(c);
    }
}

/// Counts of what the syncer was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// `wait_stream` calls (an event recorded on another stream and waited on).
    pub stream_waits: u64,
    /// `wait_marker` calls.
    pub marker_waits: u64,
    /// Markers recorded.
    pub markers: u64,
    /// Streams or markers synchronized from the host.
    pub syncs: u64,
    /// Idle queries.
    pub idle_queries: u64,
    /// Device-wide synchronizations (covering open batches).
    pub device_syncs: u64,
    /// Ids asked of streams made elsewhere (`cuStreamGetId` on a GPU; our own streams and the
    /// special handles are answered without the driver).
    pub stream_ids: u64,
    /// Capture queries (`cuStreamIsCapturing`).
    pub capture_queries: u64,
}

impl Counts {
    /// Every driver call these stand for, one each (a wait is a record and a wait on a GPU:
    /// counted once here, as the tests compare kinds of streams, not exact driver traffic).
    pub(crate) fn driver_calls(&self) -> u64 {
        self.stream_waits
            + self.marker_waits
            + self.markers
            + self.syncs
            + self.idle_queries
            + self.device_syncs
            + self.stream_ids
            + self.capture_queries
    }
}

/// The model's state.
#[derive(Debug, Default)]
pub(crate) struct Model {
    clock: Vector,
    know: HashMap<StreamKey, Vector>,
    done: Vector,
    markers: HashMap<u64, Vector>,
    next_marker: u64,
    /// Obligations, by start: (end, stream, point); never overlapping.
    pending: BTreeMap<usize, (usize, StreamKey, u64)>,
    /// Percentage of idle queries answered "idle".
    idle_percent: u64,
    rng: u64,
    /// What was done.
    pub counts: Counts,
    /// Every wait, as (waiter, the stream waited on).
    pub waits: Vec<(StreamKey, StreamKey)>,
    /// Streams being captured into a graph (the test says so).
    pub capturing: Vec<StreamKey>,
}

impl Model {
    fn snapshot(&self, key: StreamKey) -> Vector {
        let mut v = self.know.get(&key).cloned().unwrap_or_default();
        let own = self.clock.get(&key).copied().unwrap_or(0);
        merge(&mut v, &HashMap::from([(key, own)]));
        v
    }

    fn tick(&mut self, key: StreamKey) -> u64 {
        let c = self.clock.entry(key).or_insert(0);
        *c += 1;
        *c
    }

    fn add_obligation(
        &mut self,
        key: StreamKey,
        addr: usize,
        len: usize,
    ) -> std::result::Result<(), String> {
        let point = self.tick(key);
        if len == 0 {
            return Ok(());
        }
        let end = addr + len;
        if let Some((&a, &(e, _, _))) = self.pending.range(..end).next_back() {
            if e > addr {
                return Err(format!(
                    "[{addr:#x}, {end:#x}) is freed while [{a:#x}, {e:#x}) is already free"
                ));
            }
        }
        self.pending.insert(addr, (end, key, point));
        Ok(())
    }

    /// Removes the obligations on `[addr, end)`, checking each with `ok`.
    fn clear(
        &mut self,
        addr: usize,
        end: usize,
        ok: impl Fn(&Self, StreamKey, u64) -> bool,
    ) -> std::result::Result<(), String> {
        let overlapping: Vec<(usize, (usize, StreamKey, u64))> = self
            .pending
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _, _))| e > addr)
            .map(|(&a, &v)| (a, v))
            .collect();
        for (a, (e, key, point)) in overlapping {
            if e <= addr {
                continue;
            }
            if !ok(self, key, point) {
                return Err(format!(
                    "[{addr:#x}, {end:#x}) reused while {key:?} (point {point}) may still use [{a:#x}, {e:#x})"
                ));
            }
            self.pending.remove(&a);
            if a < addr {
                self.pending.insert(a, (addr, key, point));
            }
            if e > end {
                self.pending.insert(end, (e, key, point));
            }
        }
        Ok(())
    }

    /// Checks that no work that may use `[addr, end)` is pending: memory given back to the device
    /// (unmapped) while a stream may still use it is an error. The obligations stay (the memory
    /// stays free).
    pub(crate) fn check_idle(&self, addr: usize, end: usize) -> std::result::Result<(), String> {
        for (&a, &(e, key, point)) in self.pending.range(..end).rev() {
            if e <= addr {
                break;
            }
            if !self.completed(key, point) {
                return Err(format!(
                    "[{addr:#x}, {end:#x}) given back while {key:?} (point {point}) may still use [{a:#x}, {e:#x})"
                ));
            }
        }
        Ok(())
    }

    fn completed(&self, key: StreamKey, point: u64) -> bool {
        self.done.get(&key).is_some_and(|&d| d >= point)
    }

    /// The test frees `[addr, addr + len)` on `key`: call *before* the resource's deallocate.
    pub(crate) fn freed(&mut self, key: StreamKey, addr: usize, len: usize) {
        if let Err(e) = self.add_obligation(key, addr, len) {
            panic!("model: {e}");
        }
    }

    /// The resource handed `[addr, addr + len)` to `key`: checks it was safe.
    pub(crate) fn allocated(
        &mut self,
        key: StreamKey,
        addr: usize,
        len: usize,
    ) -> std::result::Result<(), String> {
        self.clear(addr, addr + len, |m, t, point| {
            t == key
                || m.know
                    .get(&key)
                    .and_then(|v| v.get(&t))
                    .is_some_and(|&c| c >= point)
                || m.completed(t, point)
        })
    }

    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic answers for idle queries.
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A [`Syncer`] over a shared [`Model`].
#[derive(Clone, Debug, Default)]
pub(crate) struct RecordingSyncer {
    model: Arc<Mutex<Model>>,
}

impl RecordingSyncer {
    /// A syncer that answers `idle_percent`% of idle queries with "idle" (seeded by `seed`).
    pub(crate) fn new(idle_percent: u64, seed: u64) -> Self {
        let model = Model {
            idle_percent,
            rng: seed,
            ..Default::default()
        };
        Self {
            model: Arc::new(Mutex::new(model)),
        }
    }

    /// The model (lock it briefly; the syncer locks it too).
    pub(crate) fn model(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// As `CudaSyncer`: a stream made elsewhere is keyed by an id the driver gives (one call,
    /// counted by `stream_id`); here its handle stands for it (the tests never reuse a fake handle).
    fn id_of(stream: Stream) -> (u64, bool) {
        (stream.as_raw() as u64, stream.as_raw() < FOREIGN_BASE)
    }

    /// The key of `stream` on this thread, as a core with this syncer computes it (not counted).
    pub(crate) fn key(&self, stream: Stream) -> StreamKey {
        StreamKey::of(stream, || self.current_device(), || Self::id_of(stream))
    }

    /// What was done so far.
    pub(crate) fn counts(&self) -> Counts {
        self.model().counts
    }

    fn marker_id(marker: &Marker) -> u64 {
        match marker.token() {
            Some(MarkerToken::Id(id)) => *id,
            Some(MarkerToken::Event(_)) => panic!("the recording syncer never makes events"),
            None => panic!("model: waited on or synchronized an open batch of {:?} (nothing captured its work)", marker.owner),
        }
    }
}

thread_local! {
    /// The stream handle the test's current call names (0: none), see [`naming`].
    static NAMED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `f` (one call of the resource under test) as a call that names `stream`: during it, the
/// recording syncer fails a record on any other stream that nobody may name later (a PTDS, a
/// stream made elsewhere, which may be destroyed right after the call). Calls not marked so are
/// not checked.
pub(crate) fn naming<T>(stream: Stream, f: impl FnOnce() -> T) -> T {
    let before = NAMED.replace(stream.as_raw());
    let out = f();
    NAMED.set(before);
    out
}

impl Syncer for RecordingSyncer {
    fn current_device(&self) -> DeviceId {
        0
    }
    fn single_device(&self) -> Option<DeviceId> {
        Some(0)
    }
    fn stream_id(&self, stream: Stream) -> (u64, bool) {
        if stream.as_raw() >= FOREIGN_BASE {
            self.model().counts.stream_ids += 1;
        }
        Self::id_of(stream)
    }
    fn wait_stream(&self, waiter: StreamKey, on: StreamKey) -> Result<()> {
        assert!(
            !on.needs_marker(),
            "{on:?} cannot be recorded on by name later (a PTDS, or a stream that may be gone)"
        );
        let mut m = self.model();
        m.counts.stream_waits += 1;
        m.waits.push((waiter, on));
        let snap = m.snapshot(on);
        merge(m.know.entry(waiter).or_default(), &snap);
        Ok(())
    }
    fn record_marker(&self, key: StreamKey) -> Result<MarkerToken> {
        if key.needs_marker() {
            // Tests that mark their calls (`naming`) get the check; others (0) are not known.
            let named = NAMED.get();
            assert!(
                named == key.stream().as_raw() || named == 0,
                "{key:?} recorded on outside a call that names it (the call named {named:#x})"
            );
            if key.is_per_thread() {
                assert_eq!(
                    key.thread(),
                    super::key::thread_number(),
                    "another thread's PTDS recorded on"
                );
            }
        }
        let mut m = self.model();
        assert!(
            !m.capturing.contains(&key),
            "{key:?} recorded on while captured into a graph"
        );
        m.counts.markers += 1;
        m.next_marker += 1;
        let id = m.next_marker;
        let snap = m.snapshot(key);
        m.markers.insert(id, snap);
        Ok(MarkerToken::Id(id))
    }
    fn wait_marker(&self, waiter: StreamKey, marker: &Marker) -> Result<()> {
        let id = Self::marker_id(marker);
        let mut m = self.model();
        m.counts.marker_waits += 1;
        m.waits.push((waiter, marker.owner));
        let snap = m.markers.get(&id).cloned().unwrap_or_default();
        merge(m.know.entry(waiter).or_default(), &snap);
        Ok(())
    }
    fn is_idle(&self, key: StreamKey) -> Result<bool> {
        assert!(
            !key.needs_marker(),
            "{key:?} cannot be queried by name later"
        );
        let mut m = self.model();
        m.counts.idle_queries += 1;
        let idle = m.next() % 100 < m.idle_percent;
        if idle {
            let snap = m.snapshot(key);
            merge(&mut m.done, &snap);
        }
        Ok(idle)
    }
    fn sync_stream(&self, key: StreamKey) -> Result<()> {
        assert!(
            !key.needs_marker(),
            "{key:?} cannot be synchronized by name later"
        );
        let mut m = self.model();
        m.counts.syncs += 1;
        let snap = m.snapshot(key);
        merge(&mut m.done, &snap);
        Ok(())
    }
    fn sync_marker(&self, marker: &Marker) -> Result<()> {
        let id = Self::marker_id(marker);
        let mut m = self.model();
        m.counts.syncs += 1;
        let snap = m.markers.get(&id).cloned().unwrap_or_default();
        merge(&mut m.done, &snap);
        Ok(())
    }
    fn marker_done(&self, marker: &Marker) -> Result<bool> {
        let id = Self::marker_id(marker);
        let mut m = self.model();
        m.counts.idle_queries += 1;
        let done = m.next() % 100 < m.idle_percent;
        if done {
            let snap = m.markers.get(&id).cloned().unwrap_or_default();
            merge(&mut m.done, &snap);
        }
        Ok(done)
    }
    fn sync_device(&self) -> Result<()> {
        let mut m = self.model();
        m.counts.device_syncs += 1;
        let all = m.clock.clone();
        merge(&mut m.done, &all);
        Ok(())
    }
    fn is_capturing(&self, key: StreamKey) -> bool {
        let mut m = self.model();
        m.counts.capture_queries += 1;
        m.capturing.contains(&key)
    }
}

/// An upstream that tells the model about its memory: a stream-ordered allocation is an obligation
/// on its stream, and giving memory back while an obligation on it is open is an error.
#[derive(Clone, Debug)]
pub(crate) struct ModelUpstream {
    inner: AnyResource,
    syncer: RecordingSyncer,
}

impl ModelUpstream {
    /// `inner` (for example a simulated device) watched by `syncer`'s model.
    pub(crate) fn new(inner: AnyResource, syncer: &RecordingSyncer) -> Self {
        Self {
            inner,
            syncer: syncer.clone(),
        }
    }

    /// Memory comes back: on `stream` (stream-ordered: that stream's pending work is fine), or
    /// synchronously (`None`: all work on it must be complete).
    fn released(&self, stream: Option<Stream>, ptr: *mut u8, bytes: usize) -> Result<()> {
        let len = align_up(bytes, DEFAULT_ALIGNMENT).unwrap_or(bytes);
        let on = stream.map(|s| self.syncer.key(s));
        let mut m = self.syncer.model();
        m.clear(ptr as usize, ptr as usize + len, |m, t, point| {
            Some(t) == on || m.completed(t, point)
        })
        .map_err(Error::invalid)
    }
}

impl MemoryResource for ModelUpstream {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        // The model tracks the (fake) stream; the real upstream only ever sees the default stream,
        // because fake handles must never reach CUDA (these tests also run on the GPU machine).
        let p = self.inner.allocate(Stream::DEFAULT, bytes, alignment)?;
        let len = align_up(bytes, DEFAULT_ALIGNMENT).unwrap_or(bytes);
        let key = self.syncer.key(stream);
        self.syncer
            .model()
            .add_obligation(key, p as usize, len)
            .map_err(Error::invalid)?;
        Ok(p)
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
        self.released(Some(stream), ptr, bytes)?;
        // SAFETY: forwarded caller contract; the model checked the stream order above, so the real
        // upstream frees in default-stream order (a fake handle must never reach CUDA).
        unsafe {
            self.inner
                .deallocate(Stream::DEFAULT, ptr, bytes, alignment)
        }
    }
    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        self.released(None, ptr, bytes)?;
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate_sync(ptr, bytes, alignment) }
    }
    fn access(&self) -> Access {
        self.inner.access()
    }
    fn name(&self) -> &str {
        "model_upstream"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| std::ptr::eq(self, o))
    }
}

/// A fake stream handle for the model (never handed to CUDA).
pub(crate) fn fake_stream(i: usize) -> Stream {
    // SAFETY: only the recording syncer and the simulated/host upstreams see this handle; none of
    // them passes it to the driver.
    unsafe { Stream::from_raw(0x5000 + 0x10 * i) }
}

/// Fake handles from here up stand for streams whose lifetime we do not track (made by CuPy,
/// PyTorch or the CUDA runtime): the recording syncer reports them untracked.
const FOREIGN_BASE: usize = 0x9000_0000;

/// A fake stream made elsewhere: it may be destroyed right after any call that names it, so the
/// recording syncer fails any later use of it by name.
pub(crate) fn fake_foreign_stream(i: usize) -> Stream {
    // SAFETY: as for `fake_stream`.
    unsafe { Stream::from_raw(FOREIGN_BASE + 0x10 * i) }
}

/// What the random-operation driver needs from a resource under test.
pub(crate) trait Subject: MemoryResource {
    /// The range the resource reserved for a live allocation (what the model tracks).
    fn footprint(&self, ptr: usize, bytes: usize, alignment: usize) -> (usize, usize);
    /// True when this request must fail (and how: out-of-memory or invalid), `None` when it may
    /// succeed.
    fn must_fail(&self, bytes: usize, alignment: usize) -> Option<fn(&Error) -> bool>;
    /// Checks the resource's counters against the bytes the driver holds (the sum of footprints).
    fn check_accounting(&self, held: usize);
    /// Gives wholly free upstream blocks back.
    fn release(&self) -> Result<usize>;
    /// Checks `free + used == pool size` (must hold exactly at any moment, even mid-flight).
    fn check_books(&self);
}

/// One random operation: `(kind, stream index, size seed, alignment seed)`.
pub(crate) type Op = (u8, u8, u32, u8);

/// The streams the random operations use: three ordinary fake streams we track, one made
/// elsewhere, the two handles of the legacy default stream and this thread's PTDS (none of them
/// reaches CUDA).
pub(crate) fn test_streams() -> [Stream; 7] {
    [
        fake_stream(1),
        fake_stream(2),
        fake_stream(3),
        fake_foreign_stream(1),
        Stream::DEFAULT,
        Stream::LEGACY,
        Stream::PER_THREAD,
    ]
}

/// A request size from a seed: mostly small, some medium, a few large.
pub(crate) fn size_from(seed: u32) -> usize {
    let s = seed as usize;
    match s % 20 {
        0 => 1 + (s >> 5) % (4 << 20),
        1..=5 => 1 + (s >> 5) % (256 << 10),
        _ => 1 + (s >> 5) % 4096,
    }
}

/// An alignment from a seed: mostly at most 256, sometimes up to 64 KiB.
pub(crate) fn alignment_from(seed: u8) -> usize {
    match seed % 10 {
        0 | 1 => 1 << (9 + (seed as usize / 10) % 8),
        _ => 1 << ((seed as usize / 10) % 9),
    }
}

struct Live {
    ptr: usize,
    bytes: usize,
    alignment: usize,
    start: usize,
    len: usize,
}

/// Runs `ops` against `mr`, checking after every step that live blocks never overlap, are aligned
/// as asked, are handed out in stream order (the model), and that the accounting is exact. Frees
/// everything at the end and gives it back. Returns the number of operations run.
pub(crate) fn drive<R: Subject>(
    mr: &R,
    syncer: &RecordingSyncer,
    ops: &[Op],
) -> std::result::Result<usize, String> {
    let streams = test_streams();
    let mut live: Vec<Live> = Vec::new();
    let mut by_addr: BTreeMap<usize, usize> = BTreeMap::new();
    let mut held = 0usize;
    for &(kind, s, size_seed, align_seed) in ops {
        let stream = streams[s as usize % streams.len()];
        let key = syncer.key(stream);
        let kind = kind % 100;
        if kind < 55 && live.len() < 256 {
            let (bytes, alignment) = (size_from(size_seed), alignment_from(align_seed));
            let expected = mr.must_fail(bytes, alignment);
            match naming(stream, || mr.allocate(stream, bytes, alignment)) {
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
                    if ptr < start || ptr + bytes > start + len {
                        return Err(format!(
                            "{ptr:#x}+{bytes} outside its footprint {start:#x}+{len}"
                        ));
                    }
                    if let Some((&a, &e)) = by_addr.range(..start + len).next_back() {
                        if e > start {
                            return Err(format!(
                                "[{start:#x}, +{len}) overlaps live [{a:#x}, {e:#x})"
                            ));
                        }
                    }
                    syncer.model().allocated(key, start, len)?;
                    by_addr.insert(start, start + len);
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
                    None => return Err(format!("{bytes} bytes aligned to {alignment}: {e}")),
                },
            }
        } else if kind < 98 && !live.is_empty() {
            let b = live.swap_remove(size_seed as usize % live.len());
            syncer.model().freed(key, b.start, b.len);
            by_addr.remove(&b.start);
            held -= b.len;
            // SAFETY: `b.ptr` came from `mr.allocate` with these arguments; the fake streams have
            // no work queued, and the model tracks the order of its reuse.
            naming(stream, || unsafe {
                mr.deallocate(stream, b.ptr as *mut u8, b.bytes, b.alignment)
            })
            .map_err(|e| e.to_string())?;
        } else if kind >= 98 {
            mr.release().map_err(|e| format!("release: {e}"))?;
        }
        mr.check_accounting(held);
    }
    for b in live.drain(..) {
        syncer
            .model()
            .freed(syncer.key(Stream::DEFAULT), b.start, b.len);
        // SAFETY: as above.
        unsafe { mr.deallocate(Stream::DEFAULT, b.ptr as *mut u8, b.bytes, b.alignment) }
            .map_err(|e| e.to_string())?;
    }
    mr.check_accounting(0);
    Ok(ops.len())
}

/// Counts a worker out when it ends (even by panic).
struct Done<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `threads` threads on host memory, each on its own fake stream, two shared ones and its PTDS,
/// `ops` random allocate/free each (sizes up to `max_bytes`, alignments up to 4 KiB): every block
/// is filled with its thread's byte and checked before it is freed, the model checks stream order,
/// and at the end nothing is held; meanwhile an observer checks the books stay balanced. `mr`
/// must hand out host memory.
pub(crate) fn stress_threads<R: Subject>(
    mr: &R,
    syncer: &RecordingSyncer,
    threads: usize,
    ops: usize,
    max_bytes: usize,
) {
    let running = std::sync::atomic::AtomicUsize::new(threads);
    std::thread::scope(|scope| {
        let running = &running;
        scope.spawn(move || {
            while running.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                mr.check_books();
                // A pause, not a yield: a checker that takes every lock in a loop can starve
                // the workers on a machine with many CPUs (the standard mutex is not fair).
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        let mut workers = Vec::with_capacity(threads);
        for t in 0..threads {
            workers.push(scope.spawn(move || {
                let _done = Done(running);
                let streams = [
                    fake_stream(100 + t),
                    fake_stream(1),
                    fake_stream(2),
                    fake_foreign_stream(t),
                    Stream::PER_THREAD,
                ];
                let mut live: Vec<(*mut u8, usize, usize, usize, usize)> = Vec::new();
                let mut x = 0x1234_5678_u64 + t as u64;
                for _ in 0..ops {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let stream = streams[(x >> 8) as usize % streams.len()];
                    if x % 5 < 3 || live.is_empty() {
                        let bytes = 1
                            + (x >> 20) as usize
                                % if x % 7 == 0 {
                                    max_bytes
                                } else {
                                    max_bytes.min(4096)
                                };
                        let alignment = if x % 11 == 0 { 4096 } else { 256 };
                        if mr.must_fail(bytes, alignment).is_some() {
                            continue;
                        }
                        let p = match naming(stream, || mr.allocate(stream, bytes, alignment)) {
                            Ok(p) => p,
                            Err(e) if e.is_out_of_memory() => continue,
                            Err(e) => panic!("thread {t}: {bytes} bytes: {e}"),
                        };
                        assert_eq!(p as usize % alignment, 0);
                        let (start, len) = mr.footprint(p as usize, bytes, alignment);
                        syncer
                            .model()
                            .allocated(syncer.key(stream), start, len)
                            .unwrap();
                        // SAFETY: host memory, `bytes` bytes, handed to this thread alone.
                        unsafe { std::ptr::write_bytes(p, t as u8, bytes) };
                        live.push((p, bytes, alignment, start, len));
                    } else {
                        let (p, bytes, alignment, start, len) =
                            live.swap_remove((x >> 3) as usize % live.len());
                        // SAFETY: as above; nobody else may have written to it.
                        let intact = unsafe { std::slice::from_raw_parts(p, bytes) }
                            .iter()
                            .all(|&b| b == t as u8);
                        assert!(intact, "thread {t}: a block was handed to someone else too");
                        syncer.model().freed(syncer.key(stream), start, len);
                        // SAFETY: from allocate above with these arguments.
                        naming(stream, || unsafe {
                            mr.deallocate(stream, p, bytes, alignment)
                        })
                        .unwrap();
                    }
                }
                for (p, bytes, alignment, start, len) in live {
                    syncer
                        .model()
                        .freed(syncer.key(Stream::PER_THREAD), start, len);
                    // SAFETY: as above.
                    naming(Stream::PER_THREAD, || unsafe {
                        mr.deallocate(Stream::PER_THREAD, p, bytes, alignment)
                    })
                    .unwrap();
                }
            }));
        }
        // Joined one by one: the scope's own wait ends when each closure returns, before the
        // thread's thread-local destructors run (where a thread's front gives its block back), so
        // the books could still show it handed out (found under ThreadSanitizer's slower timing).
        for worker in workers {
            worker.join().unwrap();
        }
    });
    mr.check_accounting(0);
}
