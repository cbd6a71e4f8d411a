//! Stream-ordered sub-allocation shared by the pool and fixed-size resources (RMM's
//! `stream_ordered_memory_resource`), with one free list for all streams and no event per free.
//!
//! Glossary:
//! - *upstream block* (*region*): memory the [`Core`] got from its upstream; free blocks coalesce
//!   only inside one region, so a wholly free region can be given back;
//! - *stream key* ([`StreamKey`]): which stream a free or an allocation was ordered on. The legacy
//!   default stream (handles 0 and 1) and the per-thread default stream (PTDS) are per device, and
//!   PTDS is per thread too, so their keys carry the device and (for PTDS) the thread; an ordinary
//!   stream's key carries CUDA's process-unique stream id, so a handle reused by a new stream after
//!   the old one was destroyed is never taken for the old one;
//! - *pending work* ([`Pending`], the tag of a free block): the streams whose queued work may still
//!   use the block, each either *live* (an ordinary or legacy stream: anyone can record an event on
//!   it later) or a *marker* (work captured by an event: used for PTDS, whose queue only its own
//!   thread can name, for streams we did not create, which may be destroyed without our knowing
//!   and so may only be named during the call that passed them, and for our own streams destroyed
//!   while blocks freed on them were still tagged);
//! - *batch* (an *open* marker): the frees on one such stream since its last marker, in one shard.
//!   A free joins its stream's batch without any driver call; the batch is *closed* by one event
//!   recorded during a later free that names the stream (every [`CLOSE_FREES`] frees or
//!   [`CLOSE_BYTES`] bytes), which covers every free in it. Until then its blocks are reused by
//!   their own stream only; when nothing else fits, one device-wide synchronization covers every
//!   open batch at once ([`Core::cover_open_batches`]);
//! - *ordering* a stream S after a block: for each live stream T in the tag, record an event on T
//!   *now* (it captures everything queued on T so far, a superset of the work before the free) and
//!   make S wait on it; for each marker, make S wait on the marker's event;
//! - *shard*: a small per-thread cache of recently freed blocks in front of the shared free list;
//! - *front*: one block per thread and core in front of the shard, freed on a stream and taken back
//!   by the same thread's next allocation of that size on that stream with one atomic instruction
//!   ([`front`]); drained into the shared list by whoever needs every free block.
//!
//! Invariants:
//! - every byte of every region is in exactly one place: the free list, one shard, one front, or
//!   handed out; `pool_size` is the sum of the regions, `used` (the shared list's counter plus every
//!   shard's, less the blocks in fronts) the bytes handed out;
//! - a block in a front goes back out only to its own thread on the stream it was freed on (no
//!   ordering needed), or through the usual free path (tagged then: a live stream, or an open
//!   batch that only a call naming the stream closes);
//! - a block is handed out on stream S only after S was ordered after every other stream in its tag
//!   (a block whose tag names only S, or nothing, needs no ordering);
//! - a region goes back upstream only when it is wholly free and every stream in its tag has been
//!   synchronized;
//! - lock order: the shared list (`global`) before any shard, then the list of fronts; a shard is
//!   never held while `global` is taken;
//! - regions are given back upstream (a synchronization and a free: blocking driver calls) only
//!   with `global` released: they are taken out of the books under it first (issue 12's hang).
//!
//! All driver work goes through the [`Syncer`] trait: CUDA in GPU mode, nothing at all in host mode,
//! and a recording model of stream order in the CPU tests.
//!
//! The rooms: [`key`] (stream keys, markers and the tags of free blocks), [`syncer`] (the port and
//! its CUDA and host implementations), [`shard`] (per-thread caches and their limits), [`front`]
//! (the one-block per-thread fronts), and the
//! engine, [`Core`], here; `model.rs` (the recording syncer and upstream) and `tests.rs` serve the
//! CPU tests.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::aligned::{align_down, align_up, is_aligned, DEFAULT_ALIGNMENT};
use crate::cuda::{self, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::fixed_list::FixedList;
use crate::mr::detail::free_list::{FreeBlock, FreeList};
use crate::resource::{AnyResource, MemoryResource};

mod front;
mod key;
mod shard;
mod syncer;

pub(crate) use key::MarkerToken;
pub(crate) use key::{Marker, Pending, PendingOn, StreamKey, TagClass};
use key::{LEGACY, PER_THREAD};
pub(crate) use shard::CacheLimits;
use front::{Front, Hot, Put};
use shard::{best_unordered, region_in, Batch, Cached, Padded, Regions, Shard};
pub(crate) use syncer::{default_syncer, Syncer};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a [`Core`] grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Growth {
    /// RMM's pool policy: without a maximum, by at least the pool's size (it doubles); with one, by
    /// half of what remains (at least the request); on upstream out-of-memory, halve down to the
    /// request.
    Pool {
        /// The most the pool may hold (a multiple of 256).
        maximum: Option<usize>,
    },
    /// Fixed-size blocks: `chunk` bytes at a time, halved (in whole `unit`s) down to the request on
    /// upstream out-of-memory.
    Chunks {
        /// Bytes per upstream request.
        chunk: usize,
        /// The block size; chunks are multiples of it.
        unit: usize,
    },
}

/// What [`Core::grow`] did.
enum Grown {
    /// Grew and handed out the request at this address.
    Addr(usize),
    /// The upstream is out of memory: these wholly free regions, out of the books now, are to be
    /// synchronized and given back with the shared lock released ([`Core::give_back`]).
    GiveBack(Vec<(usize, usize, Pending)>),
}

/// Exact counters of a [`Core`], taken under all its locks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CoreStats {
    pub pool_size: usize,
    pub used: usize,
    pub free: usize,
    pub cached_bytes: usize,
    pub cached_blocks: usize,
    pub free_blocks: usize,
    pub largest_free: usize,
    pub upstream_blocks: usize,
    pub upstream_allocations: u64,
    pub upstream_releases: u64,
}

/// The shared free list: coalescing (pools), or equal blocks in LIFOs per tag class (fixed-size
/// cores, where coalescing and size indexing would be wasted work: see `fixed_list.rs`).
#[derive(Debug)]
enum Blocks {
    Coalescing(FreeList<Pending>),
    Fixed(FixedList<Pending>),
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks::Coalescing(FreeList::default())
    }
}

impl Blocks {
    fn free_bytes(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.free_bytes(),
            Blocks::Fixed(l) => l.free_bytes(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.len(),
            Blocks::Fixed(l) => l.len(),
        }
    }

    fn largest(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.largest(),
            Blocks::Fixed(l) => l.largest(),
        }
    }

    fn overlaps(&self, addr: usize, size: usize) -> bool {
        match self {
            Blocks::Coalescing(l) => l.overlaps(addr, size),
            Blocks::Fixed(l) => l.overlaps(addr, size),
        }
    }

    fn insert(&mut self, addr: usize, size: usize, region: usize, tag: Pending) {
        match self {
            Blocks::Coalescing(l) => l.insert(addr, size, region, tag),
            Blocks::Fixed(l) => l.insert(addr, size, region, tag),
        }
    }

    fn remove_whole_region(&mut self, region: usize, size: usize) -> Option<Pending> {
        match self {
            Blocks::Coalescing(l) => l.remove_whole_region(region, size),
            Blocks::Fixed(l) => l.remove_whole_region(region, size),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = FreeBlock<Pending>> + '_> {
        match self {
            Blocks::Coalescing(l) => Box::new(l.iter()),
            Blocks::Fixed(l) => Box::new(l.iter()),
        }
    }

    fn retag(&mut self, f: impl FnMut(&mut Pending)) {
        match self {
            Blocks::Coalescing(l) => l.retag(f),
            Blocks::Fixed(l) => l.retag(f),
        }
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        match self {
            Blocks::Coalescing(l) => l.check_invariants(),
            Blocks::Fixed(l) => l.check_invariants(),
        }
    }
}

#[derive(Debug, Default)]
struct Global {
    free: Blocks,
    /// Upstream blocks: start → size.
    regions: BTreeMap<usize, usize>,
    pool_size: usize,
    upstream_allocations: u64,
    upstream_releases: u64,
    /// `regions` as shards see it, rebuilt when it changes.
    snapshot: Regions,
    /// Bytes handed out through this list less bytes freed into it (wrapping: blocks move between
    /// shards and the list). With the shards' counters it sums to the bytes in use.
    used: usize,
    /// What requests passed over in their scans of this list.
    passed: Passed,
}

/// What [`Core::take`]'s scans for a block to order after passed over.
#[derive(Debug, Default)]
struct Passed {
    /// A block that fits only because the block waits for an open batch of another stream (see
    /// [`Core::cover_open_batches`]): set by the current request's scans.
    blocked: bool,
    /// Blocks that fit which requests passed over since the last [`Core::cover_open_batches`]
    /// because they wait only for batches nobody will close (of threads that ended): only that
    /// synchronization frees them, and until it runs every request scans past them again.
    stranded: usize,
    /// Requests that looked past the unordered blocks, and the stranded blocks they passed over
    /// (tests measure the scans).
    #[cfg(test)]
    scans: (u64, u64),
}

impl Passed {
    /// Notes one scan: whether it passed over a blocked block, and how many stranded ones.
    fn scanned(&mut self, blocked: bool, stranded: usize) {
        self.blocked |= blocked;
        self.stranded += stranded;
        #[cfg(test)]
        {
            self.scans.0 += 1;
            self.scans.1 += stranded as u64;
        }
    }
}

impl Global {
    /// The region that holds `[addr, addr + size)`.
    fn region_of(&self, addr: usize, size: usize) -> Option<usize> {
        let (&start, &len) = self.regions.range(..=addr).next_back()?;
        (addr.checked_add(size)? <= start + len).then_some(start)
    }
}

/// Frees a shard over budget lets wait in its LIFO before they go back to the shared list at once.
const SPILL_BATCH: usize = 32;

/// LIFO depth of a fixed-size core's shards (see [`Core::new`]).
const FIXED_RECENT: usize = 64;

/// How many best-fit candidates an allocation looks at for one it can use without ordering.
const SCAN: usize = 16;

/// Frees on a stream that only its own calls may name (a PTDS, a stream made elsewhere) that one
/// batch collects before a free closes it with one event: the event costs about a microsecond, so
/// this keeps it to a few nanoseconds per free.
pub(crate) const CLOSE_FREES: u32 = 256;

/// Bytes freed into one batch that make the next free close it, so that memory reaches other
/// streams soon under churn of large blocks.
pub(crate) const CLOSE_BYTES: usize = 64 << 20;

/// Open batches one shard keeps (one per stream its threads free on); an older one becomes an
/// orphan: its stream may be gone (a destroyed stream, an exited thread's PTDS).
const MAX_OPEN: usize = 8;

/// Memory frozen in other streams' open batches in the shards is worth a device-wide
/// synchronization, rather than growth, once it holds `1 / FROZEN_SHARE` of the pool.
const FROZEN_SHARE: usize = 8;

/// Stranded blocks passed over (see `Passed::stranded`) worth one device-wide
/// synchronization: each costs the scan a hash lookup and a cache miss or two (about 50 ns in host
/// mode), so a few thousand cost more than a synchronization of an idle device. Binning's random
/// churn from threads that come and go (a new thread per task) otherwise scanned 50-70 such
/// blocks per cross-stream request, 2-3x slower than when every flush synchronized.
const COVER_AFTER_STRANDED_SKIPS: usize = 2048;

/// The stream-ordered sub-allocator the pool and fixed-size resources are made of.
pub(crate) struct Core {
    name: &'static str,
    upstream: AnyResource,
    syncer: Arc<dyn Syncer>,
    /// [`Syncer::single_device`], asked once.
    single_device: Option<DeviceId>,
    growth: Growth,
    cache: CacheLimits,
    global: Mutex<Global>,
    shards: Box<[Padded]>,
    /// Bumped (under `global`) whenever the regions change; a shard uses its copy of the regions
    /// only while its generation is this one.
    regions_gen: AtomicU64,
    /// Bytes each shard may hold (see [`CacheLimits::budget`]), updated when the pool's size changes.
    shard_budget: AtomicUsize,
    /// Open batches pushed out of their shard (see [`MAX_OPEN`]): they take no more frees and wait
    /// for [`Core::cover_open_batches`].
    orphans: Mutex<Vec<Arc<Marker>>>,
    /// Blocks taken out of an ending thread's front and not yet freed (see [`Core::front_gone`]):
    /// while there are any, the counters are between two states and [`Core::stats`] waits.
    leaving: AtomicUsize,
    /// Blocks of ending threads' fronts freed so far: an allocation about to fail checks that none
    /// arrived since it flushed the caches (see [`Core::allocate`]).
    left: AtomicU64,
    /// Frees that close a batch ([`CLOSE_FREES`]; smaller in some tests).
    close_frees: std::sync::atomic::AtomicU32,
    /// How often allocate, deallocate and spills took `global` (tests measure lock traffic).
    #[cfg(test)]
    shared_locks: AtomicU64,
    /// This core's process-unique number (fronts are looked up by it).
    id: u64,
    /// This core, for the threads' fronts (which give their blocks back at thread exit).
    me: Weak<Core>,
    /// Every thread's front in this core (see [`front`]).
    fronts: Mutex<Vec<Arc<Front>>>,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("name", &self.name)
            .field("upstream", &self.upstream)
            .field("growth", &self.growth)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Core {
    /// A core over `upstream` that starts with `initial` bytes (a multiple of 256, allocated with
    /// `allocate_sync`, so usable on every stream).
    pub(crate) fn new(
        name: &'static str,
        upstream: AnyResource,
        syncer: Arc<dyn Syncer>,
        growth: Growth,
        cache: CacheLimits,
        initial: usize,
    ) -> Result<Arc<Self>> {
        let threads = std::thread::available_parallelism().map_or(8, |n| n.get());
        let mut cache = cache;
        if let Growth::Chunks { unit, .. } = growth {
            // One block size: the LIFO serves every request (refills go there too), so it holds
            // more.
            cache.recent = cache
                .recent
                .max(FIXED_RECENT.min(cache.max_bytes / unit.max(1)));
        }
        let shards = if cache.enabled() {
            threads.clamp(8, 64).next_power_of_two()
        } else {
            1
        };
        let core = Arc::new_cyclic(|me| Self {
            id: front::next_core_id(),
            me: me.clone(),
            fronts: Mutex::new(Vec::new()),
            name,
            upstream,
            single_device: syncer.single_device(),
            syncer,
            growth,
            cache,
            global: Mutex::new(Global {
                free: match growth {
                    Growth::Chunks { unit, .. } => Blocks::Fixed(FixedList::new(unit)),
                    Growth::Pool { .. } => Blocks::default(),
                },
                ..Global::default()
            }),
            shards: (0..shards).map(|_| Padded::default()).collect(),
            regions_gen: AtomicU64::new(0),
            shard_budget: AtomicUsize::new(cache.budget(0, shards)),
            orphans: Mutex::new(Vec::new()),
            leaving: AtomicUsize::new(0),
            left: AtomicU64::new(0),
            // The CPU tests close batches often, so that every path around closing runs.
            close_frees: std::sync::atomic::AtomicU32::new(if cfg!(test) {
                3
            } else {
                CLOSE_FREES
            }),
            #[cfg(test)]
            shared_locks: AtomicU64::new(0),
        });
        if initial > 0 {
            let ptr = core.upstream.allocate_sync(initial, DEFAULT_ALIGNMENT)?;
            core.add_region(
                &mut lock(&core.global),
                ptr as usize,
                initial,
                Pending::default(),
            );
        }
        if core.syncer.tracks_stream_lifetimes() {
            registry::register(&core);
        }
        Ok(core)
    }

    /// The upstream resource.
    pub(crate) fn upstream(&self) -> &AnyResource {
        &self.upstream
    }

    /// The key of `stream` on the calling thread. With one device, the special handles' keys are
    /// made here, without the syncer's two dynamic calls (most of a 256-byte pair's key cost).
    #[inline]
    fn key(&self, stream: Stream) -> StreamKey {
        if let Some(device) = self.single_device {
            if matches!(stream.as_raw(), 0 | LEGACY | PER_THREAD) {
                return StreamKey::of(stream, || device, || (0, true));
            }
        }
        self.syncer.key(stream)
    }

    /// `global`, for the per-operation paths (counted in tests).
    fn lock_shared(&self) -> MutexGuard<'_, Global> {
        #[cfg(test)]
        self.shared_locks.fetch_add(1, Ordering::Relaxed);
        lock(&self.global)
    }

    /// Requests that scanned for a block to order after, and the stranded blocks they passed over.
    #[cfg(test)]
    pub(crate) fn scans(&self) -> (u64, u64) {
        lock(&self.global).passed.scans
    }

    /// How often the per-operation paths took the shared lock.
    #[cfg(test)]
    pub(crate) fn shared_locks(&self) -> u64 {
        self.shared_locks.load(Ordering::Relaxed)
    }

    /// Call after every change of `g.regions` or `g.pool_size` (with `global` held).
    fn regions_changed(&self, g: &mut Global) {
        g.snapshot = g.regions.iter().map(|(&a, &s)| (a, s)).collect();
        self.regions_gen.fetch_add(1, Ordering::Release);
        self.shard_budget.store(
            self.cache.budget(g.pool_size, self.shards.len()),
            Ordering::Relaxed,
        );
    }

    fn shard(&self) -> &Mutex<Shard> {
        self.shard_of_thread()
            .expect("a thread's seed is readable until it ends")
    }

    /// The calling thread's shard; `None` only while the thread's locals are being torn down.
    fn shard_of_thread(&self) -> Option<&Mutex<Shard>> {
        thread_local! {
            static SEED: usize = {
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed)
            };
        }
        let seed = SEED.try_with(|s| *s).ok()?;
        Some(&self.shards[seed & (self.shards.len() - 1)].0)
    }

    fn add_region(&self, g: &mut Global, addr: usize, size: usize, tag: Pending) {
        g.free.insert(addr, size, addr, tag);
        g.regions.insert(addr, size);
        g.pool_size += size;
        g.upstream_allocations += 1;
        self.regions_changed(g);
    }

    /// Hands out `size` bytes (a multiple of 256) at an `alignment`-aligned address (a power of
    /// two, at least 256), usable on `stream` in stream order.
    pub(crate) fn allocate(&self, stream: Stream, size: usize, alignment: usize) -> Result<usize> {
        let key = self.key(stream);
        let cacheable = size <= self.cache.max_block;
        if cacheable {
            // The thread's latest free, if it was this size on this stream: no lock, no ordering.
            if let Some(addr) = front::take(self, key, size, alignment) {
                return Ok(addr);
            }
            let mut shard = lock(self.shard());
            if let Some(addr) = shard.take(key, size, alignment, self.cache.recent.max(1)) {
                shard.used = shard.used.wrapping_add(size);
                return Ok(addr);
            }
        }
        let mut g = self.lock_shared();
        let left = self.left.load(Ordering::Acquire);
        g.passed.blocked = false;
        if g.passed.stranded >= COVER_AFTER_STRANDED_SKIPS {
            // Counted afresh even when nothing was left to cover.
            g.passed.stranded = 0;
            self.cover_open_batches(&mut g)?;
        }
        if let Some(addr) = self.take(&mut g, key, size, alignment, cacheable)? {
            return Ok(addr);
        }
        // Nothing in the shared list: reclaim every cache before growing.
        let (moved, frozen) = self.flush_caches_for(&mut g, Some(key));
        if moved > 0 {
            if let Some(addr) = self.take(&mut g, key, size, alignment, false)? {
                return Ok(addr);
            }
        }
        // Blocks that fit wait for batches no event closed (their streams may be gone: a thread
        // that ended, a destroyed stream): one device-wide synchronization rather than growth, so
        // that such memory is never stranded, when they are in the shared list or when those
        // left in the shards hold an eighth of the pool. A few blocks of other threads' open
        // batches are not worth stalling every thread for (random churn from 16 threads on
        // their per-thread streams synchronized the device every few thousand steps, for a block
        // or two each time): their threads take them back, or a later synchronization does.
        let frozen_enough = frozen > 0 && frozen >= g.pool_size / FROZEN_SHARE;
        if (std::mem::take(&mut g.passed.blocked) || frozen_enough) && self.cover_open_batches(&mut g)? {
            if let Some(addr) = self.take(&mut g, key, size, alignment, false)? {
                return Ok(addr);
            }
        }
        let grown = match self.grow(&mut g, stream, key, size, alignment, true) {
            Ok(Grown::Addr(addr)) => Ok(addr),
            Ok(Grown::GiveBack(detached)) => {
                // Wholly free regions too small for the request: give them back with the shared
                // lock released (synchronizing their streams and freeing them are blocking driver
                // calls; other threads keep allocating and freeing meanwhile), then try again.
                drop(g);
                let count = detached.len() as u64;
                let (_, kept, error) = self.give_back(detached);
                g = self.lock_shared();
                g.upstream_releases += count - kept.len() as u64;
                self.readmit(&mut g, kept);
                if let Some(e) = error {
                    return Err(e);
                }
                // Others may have freed while the lock was released.
                if let Some(addr) = self.take(&mut g, key, size, alignment, false)? {
                    return Ok(addr);
                }
                match self.grow(&mut g, stream, key, size, alignment, false) {
                    Ok(Grown::Addr(addr)) => Ok(addr),
                    Ok(Grown::GiveBack(_)) => {
                        unreachable!("grow without give-back detaches nothing")
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        let result = match grown {
            // Blocks of batches that no event closed yet (their streams may only be named by their
            // own calls): before failing, one device-wide synchronization covers them all.
            Err(e) if e.is_out_of_memory() && self.cover_open_batches(&mut g)? => {
                self.take(&mut g, key, size, alignment, false)?.ok_or(e)
            }
            result => result,
        };
        match result {
            // A block leaving an ending thread's front (see `front_gone`), or one that arrived in
            // a shard after the flush above: its free returned long ago, so it must not be missed.
            Err(e)
                if e.is_out_of_memory()
                    && (self.leaving.load(Ordering::Acquire) > 0
                        || self.left.load(Ordering::Acquire) != left) =>
            {
                drop(g);
                self.wait_while_blocks_leave_fronts();
                let mut g = self.lock_shared();
                self.flush_caches_for(&mut g, Some(key));
                if let Some(addr) = self.take(&mut g, key, size, alignment, false)? {
                    return Ok(addr);
                }
                // Its stream's batch may be open (a PTDS, a stream made elsewhere).
                if self.cover_open_batches(&mut g)? {
                    if let Some(addr) = self.take(&mut g, key, size, alignment, false)? {
                        return Ok(addr);
                    }
                }
                Err(e)
            }
            result => result,
        }
    }

    /// Waits while a block is between an ending thread's front and the free lists.
    #[cold]
    fn wait_while_blocks_leave_fronts(&self) {
        while self.leaving.load(Ordering::Acquire) > 0 {
            std::thread::yield_now();
        }
    }

    /// Covers every open batch by one device-wide synchronization and closes them; false when
    /// there was none. The synchronization also completes everything the blocks of the shared list
    /// wait for (the caches are flushed into it first), so they all lose their tags: no stream needs
    /// ordering after them any more (PyTorch's "synchronize, then every cached block is free").
    /// The caller holds `global` (lock order: then each shard, then the orphans).
    fn cover_open_batches(&self, g: &mut Global) -> Result<bool> {
        let mut batches: Vec<Arc<Marker>> = Vec::new();
        for shard in self.shards.iter() {
            batches.extend(lock(&shard.0).open.drain(..).map(|b| b.marker));
        }
        batches.append(&mut lock(&self.orphans));
        // A block in another thread's front, of a stream that only that thread's calls may name
        // (its PTDS, a stream made elsewhere): requests leave it there (see `flush_caches_for`),
        // so a thread that freed and then went idle would hold it until its end; the
        // synchronization covers it too (its free returned before the drain below).
        let held_in_fronts = || {
            lock(&self.fronts)
                .iter()
                .any(|f| f.peek().is_some_and(|h| h.key.needs_marker()))
        };
        if batches.is_empty() && !held_in_fronts() {
            return Ok(false);
        }
        self.flush_caches(g);
        // Every free of these batches, and of every block now in the shared list, returned before
        // this point, so the work their blocks wait for was queued before the synchronization.
        if let Err(e) = self.syncer.sync_device() {
            lock(&self.orphans).append(&mut batches);
            return Err(e);
        }
        for m in batches {
            m.close(MarkerToken::Id(0));
        }
        g.free.retag(|t| *t = Pending::default());
        g.passed.stranded = 0;
        Ok(true)
    }

    /// Keeps `batches` for [`Core::cover_open_batches`], dropping the orphans no block carries any
    /// more (their blocks were all handed out again): a thread per request would otherwise grow
    /// the list by a few markers per thread until the next device-wide synchronization.
    fn orphan(&self, batches: impl IntoIterator<Item = Arc<Marker>>) {
        let mut orphans = lock(&self.orphans);
        orphans.retain(|m| Arc::strong_count(m) > 1);
        orphans.extend(batches);
    }

    /// Adds a free of `size` bytes on `key` (a stream that only its own calls may name) to the
    /// shard's open batch of that stream and returns the block's tag. Every [`CLOSE_FREES`] frees or
    /// [`CLOSE_BYTES`] bytes, one event recorded on the stream now closes the batch, this free
    /// included, but only when `named`: the current call names the stream (a block leaving a front
    /// may be of a stream the call does not name, which may be gone: its batch stays open).
    fn join_batch(&self, s: &mut Shard, key: StreamKey, size: usize, named: bool) -> Pending {
        let i = match s.open.iter().position(|b| b.marker.owner == key) {
            Some(i) => i,
            None => {
                // The thread's end abandons the batch (`front_gone`), however its frees got here.
                front::ensure(self);
                if s.open.len() >= MAX_OPEN {
                    self.orphan(std::iter::once(s.open.remove(0).marker));
                }
                s.open.push(Batch {
                    marker: Marker::open(key),
                    frees: 0,
                    bytes: 0,
                });
                s.open.len() - 1
            }
        };
        let b = &mut s.open[i];
        b.frees += 1;
        b.bytes = b.bytes.saturating_add(size);
        let tag = Pending::one(PendingOn::Marker(b.marker.clone()));
        if named
            && (b.frees >= self.close_frees.load(Ordering::Relaxed) || b.bytes >= CLOSE_BYTES)
        {
            self.close_batch(s, i);
        }
        tag
    }

    /// Closes the shard's open batch `i` with one event recorded on its stream now, which the
    /// current call names. Not into a graph being captured: the event would be a node of the
    /// graph, not a point of the stream's work; the batch then stays open and tries again later.
    fn close_batch(&self, s: &mut Shard, i: usize) {
        let key = s.open[i].marker.owner;
        // Recording and numbering under one lock: of two closed markers of one stream (batches
        // of two shards), the higher number is then the later event, which covers the other.
        static RECORD_ORDER: Mutex<()> = Mutex::new(());
        let order = lock(&RECORD_ORDER);
        let recorded = if self.syncer.is_capturing(key) {
            None
        } else {
            Some(self.syncer.record_marker(key))
        };
        match recorded {
            Some(Ok(token)) => {
                s.open.remove(i).marker.close(token);
                drop(order);
            }
            other => {
                if let Some(Err(e)) = other {
                    tracing::warn!(
                        "{}: recording a marker on {key:?}: {e}; the batch stays open",
                        self.name
                    );
                }
                let b = &mut s.open[i];
                (b.frees, b.bytes) = (0, 0);
            }
        }
    }

    /// Test hook: frees per batch.
    #[cfg(test)]
    pub(crate) fn set_close_frees(&self, frees: u32) {
        self.close_frees.store(frees, Ordering::Relaxed);
    }

    /// Takes the best block for `key` from the shared list: the best fit among the blocks that need
    /// no ordering (untagged or pending on `key` alone, whatever their size rank among the others:
    /// as RMM's per-stream lists, a stream mostly gets back what it freed), else, among the [`SCAN`]
    /// best fits of every other class, the one that needs the fewest waits, then the smallest.
    /// Orders `key` after what it needs; the rest of the block is then tagged with `key` alone
    /// (whose queue is now ordered after it).
    ///
    /// With `refill`, when the block needs no ordering, up to [`CacheLimits::refill`] bytes (whole
    /// multiples of `size`, within the shard's budget) are taken at once and the part after the
    /// request goes to the calling thread's shard: its next requests need no shared lock.
    fn take(
        &self,
        g: &mut Global,
        key: StreamKey,
        size: usize,
        alignment: usize,
        refill: bool,
    ) -> Result<Option<usize>> {
        let list = match &mut g.free {
            Blocks::Fixed(_) => return self.take_fixed(g, key, size, alignment, refill),
            Blocks::Coalescing(list) => list,
        };
        // (block, start, end of the block, the block's tag when it needs ordering)
        let (block, start, end, tag) = match best_unordered(list, key, size, alignment) {
            Some((block, start, end)) => (block, start, end, None),
            None => {
                // (streams to order after, block size, block, start, tag)
                let mut best: Option<(usize, usize, usize, usize, &Pending)> = None;
                let mut blocked = false;
                let mut stranded = 0;
                for class in list.classes() {
                    // Blocks of another stream's open batch cannot be ordered after yet.
                    for fit in list.fits_in(class, size, alignment).take(SCAN) {
                        if !fit.tag.orderable(key) {
                            blocked = true;
                            stranded += usize::from(!fit.tag.waits_on_live_batch(key));
                            continue;
                        }
                        let rank = (fit.tag.foreign(key), fit.len);
                        if best.as_ref().is_none_or(|b| rank < (b.0, b.1)) {
                            best = Some((rank.0, rank.1, fit.block, fit.start, fit.tag));
                        }
                        if !matches!(class, TagClass::Mixed) {
                            // One stream to wait for in every orderable block of the class: the
                            // first fits best.
                            break;
                        }
                    }
                }
                g.passed.scanned(blocked, stranded);
                let Some((_, len, block, start, tag)) = best else {
                    return Ok(None);
                };
                (block, start, block + len, Some(tag.clone()))
            }
        };
        // Only from a large block: refilling from the best fit of a small hole would leave the
        // hole's rest as a fragment (measured: the shared list grew to thousands of blocks).
        if refill && tag.is_none() && end - start >= 2 * self.cache.refill {
            // Lock order: `global` (held), then the shard.
            let mut shard = lock(self.shard());
            let room = self
                .shard_budget
                .load(Ordering::Relaxed)
                .saturating_sub(shard.bytes());
            // Whole multiples of `size`: fixed-size blocks stay on their block boundaries.
            let extra = (self
                .cache
                .refill
                .saturating_sub(size)
                .min(room)
                .min(end - start - size))
                / size
                * size;
            if extra > 0 {
                let taken = list.take_range(block, start, size + extra, None);
                shard
                    .free
                    .insert(start + size, extra, taken.region, taken.tag);
                g.used = g.used.wrapping_add(size);
                return Ok(Some(start));
            }
        }
        let rest = match tag {
            None => None,
            Some(tag) => {
                self.order_after(key, &tag)?;
                // `key`'s queue is now ordered after the whole tag, so others can be ordered after
                // the rest of the block by recording on `key` alone; not on a PTDS, which only this
                // thread can name: there the rest keeps its tag.
                (!key.needs_marker()).then(|| Pending::one(PendingOn::Stream(key)))
            }
        };
        let taken = list.take_range(block, start, size, rest);
        g.used = g.used.wrapping_add(size);
        Ok(Some(taken.addr))
    }

    /// [`Core::take`] for a fixed-size core (`size` is the block size): the latest free block that
    /// needs no ordering (pending on `key` alone, else untagged), else, among the [`SCAN`] latest
    /// of every other class, the one that needs the fewest waits. With `refill`, up to
    /// [`CacheLimits::refill`] bytes of further blocks that need no ordering go to the calling
    /// thread's shard (within its budget), wherever they lie: equal blocks need no contiguity.
    fn take_fixed(
        &self,
        g: &mut Global,
        key: StreamKey,
        size: usize,
        alignment: usize,
        refill: bool,
    ) -> Result<Option<usize>> {
        let Blocks::Fixed(list) = &mut g.free else {
            return Ok(None);
        };
        if size != list.unit() {
            return Err(Error::invalid(format!(
                "{}: {size} bytes are not its block size {}",
                self.name,
                list.unit()
            )));
        }
        let unordered = [TagClass::Owner(key), TagClass::Empty];
        let found = unordered
            .into_iter()
            .find_map(|class| list.aligned_in(class, alignment))
            .map(|(a, _)| a);
        let (addr, tag) = match found {
            Some(addr) => (addr, None),
            None => {
                // (streams to order after, block, tag)
                let mut best: Option<(usize, usize, &Pending)> = None;
                let mut blocked = false;
                let mut stranded = 0;
                for class in list.classes() {
                    let fits = list.top(class, SCAN).filter(|(a, tag)| {
                        let fits = is_aligned(*a, alignment);
                        let orderable = tag.orderable(key);
                        if fits && !orderable {
                            blocked = true;
                            stranded += usize::from(!tag.waits_on_live_batch(key));
                        }
                        fits && orderable
                    });
                    for (a, tag) in fits {
                        let waits = tag.foreign(key);
                        if best.as_ref().is_none_or(|b| waits < b.0) {
                            best = Some((waits, a, tag));
                        }
                        if !matches!(class, TagClass::Mixed) {
                            // One stream to wait for in every block of the class.
                            break;
                        }
                    }
                }
                if best.is_none() {
                    // Aligned blocks may lie below the top of their stacks (alignments above 256).
                    best = list
                        .classes()
                        .find_map(|c| list.aligned_in(c, alignment))
                        .filter(|(_, tag)| {
                            blocked |= !tag.orderable(key);
                            tag.orderable(key)
                        })
                        .map(|(a, tag)| (0, a, tag));
                }
                g.passed.scanned(blocked, stranded);
                let Some((_, a, tag)) = best else {
                    return Ok(None);
                };
                (a, Some(tag.clone()))
            }
        };
        let taken = list.remove(addr).expect("a listed block");
        if let Some(tag) = &tag {
            self.order_after(key, tag)?;
        } else if refill {
            // Lock order: `global` (held), then the shard.
            let mut shard = lock(self.shard());
            let room = self
                .shard_budget
                .load(Ordering::Relaxed)
                .saturating_sub(shard.bytes());
            let want = self.cache.refill.saturating_sub(size).min(room) / size;
            let mut moved = Vec::new();
            for class in unordered {
                while moved.len() < want {
                    let Some((a, _)) = list.top(class, 1).next() else {
                        break;
                    };
                    moved.push(list.remove(a).expect("on top of its stack"));
                }
            }
            // The latest free ends on top of the shard's LIFO too.
            for b in moved.into_iter().rev() {
                shard.recent_bytes += b.size;
                shard.recent.push(Cached {
                    addr: b.addr,
                    size: b.size,
                    region: b.region,
                    tag: b.tag,
                });
            }
        }
        drop(taken);
        g.used = g.used.wrapping_add(size);
        Ok(Some(addr))
    }

    /// Makes `key` wait for every other stream's work in `tag`.
    fn order_after(&self, key: StreamKey, tag: &Pending) -> Result<()> {
        for on in tag.entries() {
            match on {
                PendingOn::Stream(other) if *other != key => {
                    self.syncer.wait_stream(key, *other)?
                }
                // Once per stream and marker: `key` stays ordered after a wait it made. Not a wait
                // made while `key` is captured into a graph: that orders the graph, not the
                // stream's later work.
                PendingOn::Marker(m) if m.owner != key && !m.has_waited(key) => {
                    self.syncer.wait_marker(key, m)?;
                    if !self.syncer.is_capturing(key) {
                        m.waited_by(key);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Blocks until no queued work in `tag` can still use its block (an open batch: the whole
    /// device, once).
    fn synchronize(&self, tag: &Pending) -> Result<()> {
        if tag.has_open() {
            return self.syncer.sync_device();
        }
        for on in tag.entries() {
            match on {
                PendingOn::Stream(key) => self.syncer.sync_stream(*key)?,
                PendingOn::Marker(m) => self.syncer.sync_marker(m)?,
            }
        }
        Ok(())
    }

    /// Moves every cached block to the shared list; returns how many there were.
    fn flush_caches(&self, g: &mut Global) -> usize {
        self.flush_caches_for(g, None).0
    }

    /// [`Core::flush_caches`] for a request on `for_key`: blocks that wait for another stream's
    /// open batch stay in their shards while that batch's thread lives (it closes the batch, or
    /// takes the blocks back), since `for_key` could not take them from the shared list either
    /// (only a device-wide synchronization would free them) and there they would block every
    /// stream. Returns the blocks moved and the bytes left behind so.
    fn flush_caches_for(&self, g: &mut Global, for_key: Option<StreamKey>) -> (usize, usize) {
        let keep = |tag: &Pending| for_key.is_some_and(|key| tag.waits_on_live_batch(key));
        let (mut moved, mut kept) = (0, 0);
        for shard in self.shards.iter() {
            // The shard stays locked until its blocks are in the shared list: `stats`, which
            // takes every lock, always finds them in one place or the other.
            let mut s = lock(&shard.0);
            let recent = std::mem::take(&mut s.recent);
            s.recent_bytes = 0;
            let free = std::mem::take(&mut s.free);
            for b in recent {
                if keep(&b.tag) {
                    s.recent_bytes += b.size;
                    kept += b.size;
                    s.recent.push(b);
                } else {
                    moved += 1;
                    self.insert_free(g, b.addr, b.size, b.region, b.tag);
                }
            }
            for b in free.into_blocks() {
                if keep(&b.tag) {
                    kept += b.size;
                    s.free.insert(b.addr, b.size, b.region, b.tag);
                } else {
                    moved += 1;
                    self.insert_free(g, b.addr, b.size, b.region, b.tag);
                }
            }
        }
        // Likewise a front's block of another stream that only its own calls may name: drained,
        // it would join an open batch that nobody can close.
        let keep_hot = |h: &Hot| for_key.is_some_and(|key| h.key.needs_marker() && h.key != key);
        let hot: Vec<Hot> = lock(&self.fronts)
            .iter()
            .filter_map(|f| {
                f.drain_if(|h| {
                    let take = !keep_hot(h);
                    if !take {
                        kept += h.size;
                    }
                    take
                })
            })
            .collect();
        moved += hot.len();
        for h in hot {
            // Counted as handed out while in the front.
            g.used = g.used.wrapping_sub(h.size);
            let tag = self.tag_of_free(h.key, h.size, false);
            match g.region_of(h.addr, h.size) {
                Some(region) => self.insert_free(g, h.addr, h.size, region, tag),
                None => tracing::error!(
                    "{}: dropping a bad front block [{:#x}, +{})",
                    self.name,
                    h.addr,
                    h.size
                ),
            }
        }
        (moved, kept)
    }

    /// The tag of a block freed on `key`, outside any shard: a live stream, or the stream's open
    /// batch in the calling thread's shard (closed only when `named`, see [`Core::join_batch`]).
    /// The caller holds no shard lock.
    fn tag_of_free(&self, key: StreamKey, size: usize, named: bool) -> Pending {
        if key.needs_marker() {
            self.join_batch(&mut lock(self.shard()), key, size, named)
        } else {
            Pending::one(PendingOn::Stream(key))
        }
    }

    /// Lists a thread's new front (called by [`front`] on the thread's first use of this core).
    fn front_made(&self, front: &Arc<Front>) {
        lock(&self.fronts).push(front.clone());
    }

    /// A thread ends: its front leaves the list and its block goes the usual free path (its stream
    /// is not named now: a batch of it stays open).
    fn front_gone(&self, front: &Arc<Front>) {
        let hot = {
            let mut fronts = lock(&self.fronts);
            fronts.retain(|f| !Arc::ptr_eq(f, front));
            // Counted under the list's lock, with the drain: `stats` sees the block in the front
            // or counts it leaving, never neither (it read `bytes_used` one block high when the
            // thread's end raced it: threads of `std::thread::scope` may still be running their
            // thread-local destructors after the scope returns).
            front
                .drain()
                .inspect(|_| _ = self.leaving.fetch_add(1, Ordering::AcqRel))
        };
        if let Some(h) = hot {
            self.free_front_block(h, false);
            // Before `leaving` drops: whoever sees it drop sees this too.
            self.left.fetch_add(1, Ordering::AcqRel);
            self.leaving.fetch_sub(1, Ordering::AcqRel);
        }
        // Its shard's open batches will not be closed by their thread: abandoned, their blocks
        // go to the shared list at the next flush, where one device-wide synchronization covers
        // them when another stream needs them (see `flush_caches_for`).
        if let Some(shard) = self.shard_of_thread() {
            let abandoned: Vec<Arc<Marker>> =
                lock(shard).open.drain(..).map(|b| b.marker).collect();
            for m in &abandoned {
                m.abandon();
            }
            self.orphan(abandoned);
        }
    }

    /// Moves blocks from an over-budget shard to the shared list, in one batch under one lock: the
    /// LIFO's oldest frees beyond its depth, then the list's smallest blocks until the shard holds
    /// half its budget.
    fn spill(&self, shard: &Mutex<Shard>) {
        let mut g = self.lock_shared();
        let mut s = lock(shard);
        let target = self.shard_budget.load(Ordering::Relaxed) / 2;
        for b in s.evict(self.cache.recent, target) {
            self.insert_free(&mut g, b.addr, b.size, b.region, b.tag);
        }
    }

    /// Puts a freed block in the calling thread's shard; gives it back, with its tag, when the shard
    /// cannot take it (its copy of the regions is out of date, or the block is in none of them).
    /// `tag` is `None` for a stream that only its own calls may name: the block joins the shard's
    /// batch of that stream.
    fn cache_free(
        &self,
        key: StreamKey,
        addr: usize,
        size: usize,
        tag: Option<Pending>,
        verified: bool,
        named: bool,
    ) -> Result<Option<Pending>> {
        let shard = self.shard();
        let mut s = lock(shard);
        if s.regions_gen != self.regions_gen.load(Ordering::Acquire) {
            // Rare (the regions changed): refresh outside the shard lock (lock order).
            drop(s);
            let (regions, gen) = {
                let g = lock(&self.global);
                (g.snapshot.clone(), self.regions_gen.load(Ordering::Acquire))
            };
            s = lock(shard);
            if gen > s.regions_gen {
                s.regions = regions;
                s.regions_gen = gen;
            }
        }
        let tag = match tag {
            Some(tag) => tag,
            None => self.join_batch(&mut s, key, size, named),
        };
        // Only a copy that is current while the shard is locked may be used: regions are removed
        // only after every shard was flushed, and never while a block of theirs is in a shard or
        // still allocated, so the region found stays valid.
        if s.regions_gen != self.regions_gen.load(Ordering::Acquire) {
            return Ok(Some(tag));
        }
        let Some(region) = region_in(&s.regions, addr, size) else {
            return Ok(Some(tag));
        };
        if !self.on_boundary(addr, size, region) {
            return Err(self.not_a_block(addr, size));
        }
        // A verified free cannot be a double free: the scan of the LIFO and the list's range query
        // were most of a free's work in the 256-byte pair (see docs/benchmarks.md).
        let overlaps = |s: &Shard| {
            s.recent
                .iter()
                .any(|b| b.addr < addr + size && addr < b.addr + b.size)
                || s.free.overlaps(addr, size)
        };
        if !verified && overlaps(&s) {
            return Err(Error::invalid(format!(
                "{}: [{addr:#x}, +{size}) is already free",
                self.name
            )));
        }
        debug_assert!(
            !overlaps(&s),
            "{}: a verified free of a free range",
            self.name
        );
        s.recent.push(Cached {
            addr,
            size,
            region,
            tag,
        });
        s.recent_bytes += size;
        s.used = s.used.wrapping_sub(size);
        let budget = self.shard_budget.load(Ordering::Relaxed);
        if s.recent.len() > self.cache.recent + SPILL_BATCH || s.bytes() > budget {
            if matches!(self.growth, Growth::Pool { .. }) && s.bytes() <= budget {
                // The LIFO is long but the shard has room: its oldest frees join the shard's own
                // list (coalescing, tags kept), where this thread's later requests of other sizes
                // find them without the shared lock. Under random churn from 16 threads about half
                // of all operations took the shared lock when they all went back there.
                let k = s.recent.len() - self.cache.recent;
                let moved: Vec<Cached> = s.recent.drain(..k).collect();
                for b in moved {
                    s.recent_bytes -= b.size;
                    s.free.insert(b.addr, b.size, b.region, b.tag);
                }
                return Ok(None);
            }
            // Over budget: the oldest go back to the shared list together, under one lock. First
            // the stream's open batch is closed while this call names it: in the shared list its
            // blocks are then orderable by other streams (one wait on the event), where an open
            // batch would block them until one device-wide synchronization covered it (measured on
            // the H100, random churn from 16 threads on their per-thread streams: a third of a
            // synchronization per 1000 steps, each flushing every shard).
            if named && key.needs_marker() {
                if let Some(i) = s.open.iter().position(|b| b.marker.owner == key) {
                    self.close_batch(&mut s, i);
                }
            }
            drop(s);
            self.spill(shard);
        }
        Ok(None)
    }

    /// False for a range a fixed-size core cannot have handed out (not one whole block on a block
    /// boundary of `region`): its list holds equal blocks only, so such a free must not reach it.
    fn on_boundary(&self, addr: usize, size: usize, region: usize) -> bool {
        match self.growth {
            Growth::Chunks { unit, .. } => {
                size == unit && addr >= region && (addr - region) % unit == 0
            }
            Growth::Pool { .. } => true,
        }
    }

    fn not_a_block(&self, addr: usize, size: usize) -> Error {
        Error::invalid(format!(
            "{}: [{addr:#x}, +{size}) is not one of its blocks",
            self.name
        ))
    }

    /// Returns a block from a shard to the shared list. A block freed twice into two shards is
    /// found here at the latest (dropped, with an error logged, rather than handed out twice).
    fn insert_free(&self, g: &mut Global, addr: usize, size: usize, region: usize, tag: Pending) {
        let in_region = g
            .regions
            .get(&region)
            .is_some_and(|&len| region <= addr && addr + size <= region + len)
            && self.on_boundary(addr, size, region);
        if in_region && !g.free.overlaps(addr, size) {
            g.free.insert(addr, size, region, tag);
        } else {
            tracing::error!(
                "{}: dropping a bad cached block [{addr:#x}, +{size})",
                self.name
            );
        }
    }

    /// Grows from upstream (RMM's `expand_pool`) and hands out `size` bytes of the new region.
    ///
    /// When the upstream is out of memory even for the request alone and `may_give_back` is set,
    /// the wholly free regions are taken out of the books and returned as [`Grown::GiveBack`]: the
    /// caller gives them back after releasing `global` (never a blocking driver call under the
    /// shared lock) and calls again without `may_give_back`.
    fn grow(
        &self,
        g: &mut Global,
        stream: Stream,
        key: StreamKey,
        size: usize,
        alignment: usize,
        may_give_back: bool,
    ) -> Result<Grown> {
        let exceeded = |detail: String| Error::OutOfMemory {
            bytes: size,
            resource: self.name.into(),
            detail,
        };
        // Regions start 256-aligned: this much always holds an aligned `size`.
        let need = size
            .checked_add(alignment - DEFAULT_ALIGNMENT)
            .ok_or_else(|| exceeded("Maximum pool size exceeded".into()))?;
        let (first, min) = match self.growth {
            Growth::Pool { maximum: Some(max) } => {
                let remaining = max.saturating_sub(g.pool_size);
                if need > remaining {
                    return Err(exceeded(format!(
                        "Maximum pool size exceeded: the pool holds {} of at most {max} bytes",
                        g.pool_size
                    )));
                }
                (
                    need.max(align_up(remaining / 2, DEFAULT_ALIGNMENT).unwrap_or(remaining))
                        .min(remaining),
                    need,
                )
            }
            Growth::Pool { maximum: None } => (need.max(g.pool_size), need),
            Growth::Chunks { chunk, unit } => {
                let need =
                    align_up(need, unit).ok_or_else(|| exceeded("request too large".into()))?;
                (chunk.max(need), need)
            }
        };
        let mut try_size = first;
        let cause = loop {
            match self.upstream.allocate(stream, try_size, DEFAULT_ALIGNMENT) {
                Ok(ptr) => {
                    // The new memory is ordered on `stream` (stream-ordered upstreams allocate there).
                    let tag = if key.needs_marker() {
                        // Lock order: `global` (held), then the shard.
                        self.join_batch(&mut lock(self.shard()), key, try_size, true)
                    } else {
                        Pending::one(PendingOn::Stream(key))
                    };
                    self.add_region(g, ptr as usize, try_size, tag);
                    return self
                        .take(g, key, size, alignment, size <= self.cache.max_block)?
                        .map(Grown::Addr)
                        .ok_or_else(|| {
                            exceeded("a new upstream block did not fit the request".into())
                        });
                }
                Err(e) if e.is_out_of_memory() => {
                    if try_size > min {
                        try_size = match self.growth {
                            Growth::Chunks { unit, .. } => align_down(try_size / 2, unit),
                            Growth::Pool { .. } => {
                                align_up(try_size / 2, DEFAULT_ALIGNMENT).unwrap_or(min)
                            }
                        }
                        .max(min);
                    } else if may_give_back {
                        // Wholly free upstream blocks too small for the request: the caller gives
                        // them back (outside the lock) and tries once more.
                        self.flush_caches(g);
                        let detached = self.detach_free_regions(g);
                        if !detached.is_empty() {
                            return Ok(Grown::GiveBack(detached));
                        }
                        break e;
                    } else {
                        break e;
                    }
                }
                Err(e) => return Err(e),
            }
        };
        Err(exceeded(format!(
            "Maximum pool size exceeded (the upstream failed: {cause})"
        )))
    }

    /// Takes every wholly free region out of the pool's books (the caller holds `global` and has
    /// flushed the caches); they still have to be synchronized and given back ([`Core::give_back`]).
    fn detach_free_regions(&self, g: &mut Global) -> Vec<(usize, usize, Pending)> {
        let regions: Vec<(usize, usize)> = g.regions.iter().map(|(&a, &s)| (a, s)).collect();
        let mut detached = Vec::new();
        for (addr, size) in regions {
            if let Some(tag) = g.free.remove_whole_region(addr, size) {
                g.regions.remove(&addr);
                g.pool_size -= size;
                detached.push((addr, size, tag));
            }
        }
        if !detached.is_empty() {
            self.regions_changed(g);
        }
        detached
    }

    /// Synchronizes each detached region's streams and returns it upstream; returns the bytes
    /// released and the regions that could not be synchronized (still the pool's memory), with the
    /// first error.
    fn give_back(
        &self,
        regions: Vec<(usize, usize, Pending)>,
    ) -> (usize, Vec<(usize, usize, Pending)>, Option<Error>) {
        let mut released = 0;
        let mut kept = Vec::new();
        let mut error = None;
        for (addr, size, tag) in regions {
            if let Err(e) = self.synchronize(&tag) {
                error.get_or_insert(e);
                kept.push((addr, size, tag));
                continue;
            }
            // SAFETY: the region came from `upstream.allocate` with this size and alignment, is
            // wholly free and out of the books, and the work that might still use it has finished.
            match unsafe {
                self.upstream
                    .deallocate_sync(addr as *mut u8, size, DEFAULT_ALIGNMENT)
            } {
                Ok(()) => released += size,
                Err(e) => {
                    tracing::error!(
                        "{}: returning [{addr:#x}, +{size}) upstream: {e}",
                        self.name
                    );
                    error.get_or_insert(e);
                }
            }
        }
        (released, kept, error)
    }

    fn readmit(&self, g: &mut Global, regions: Vec<(usize, usize, Pending)>) {
        if regions.is_empty() {
            return;
        }
        for (addr, size, tag) in regions {
            g.free.insert(addr, size, addr, tag);
            g.regions.insert(addr, size);
            g.pool_size += size;
        }
        self.regions_changed(g);
    }

    /// Returns `[addr, addr + size)`, handed out by [`Core::allocate`] with this `size`, in
    /// `stream` order.
    ///
    /// `verified`: the caller checked this free against its live allocations (checked frees: the
    /// range was handed out with this size and not freed since), so it cannot overlap a free block
    /// and the scans for a double free are skipped (in release builds; debug builds still assert).
    ///
    /// A verified free goes to the calling thread's front when it is empty (see [`front`]).
    pub(crate) fn deallocate(
        &self,
        stream: Stream,
        addr: usize,
        size: usize,
        verified: bool,
    ) -> Result<()> {
        // Only verified frees: an unverified one must first be checked against the free blocks.
        let cacheable = verified && size <= self.cache.max_block;
        // The pair on a stream made elsewhere: the block the thread just took from its front goes
        // back without asking the driver for the stream's id a second time.
        if cacheable
            && !stream.is_default()
            && !stream.is_per_thread_default()
            && front::put_taken(self, stream.as_raw(), addr, size)
        {
            return Ok(());
        }
        let key = self.key(stream);
        if cacheable {
            match front::put(self, Hot { key, addr, size }) {
                Put::Kept => return Ok(()),
                Put::Displaced(old) => {
                    self.free_front_block(old, old.key == key);
                    return Ok(());
                }
                Put::Refused => {}
            }
        }
        self.free_slow(key, addr, size, verified, true)
    }

    /// The usual free path for a block out of a front (displaced by a free, or its thread ended);
    /// `named`: the current call names the block's stream. Verified when it entered the front, and
    /// accepted then: an error is logged, never returned to a caller (whose own free, if any,
    /// succeeded).
    #[cold]
    fn free_front_block(&self, block: Hot, named: bool) {
        if let Err(e) = self.free_slow(block.key, block.addr, block.size, true, named) {
            tracing::error!(
                "{}: a block leaving a front [{:#x}, +{}): {e}",
                self.name,
                block.addr,
                block.size
            );
        }
    }

    /// [`Core::deallocate`] past the front, for a free on `key`; `named`: the current call names
    /// `key`'s stream (see [`Core::join_batch`]).
    fn free_slow(
        &self,
        key: StreamKey,
        addr: usize,
        size: usize,
        verified: bool,
        named: bool,
    ) -> Result<()> {
        // A stream nobody may name later (a PTDS, a stream made elsewhere): the block joins the
        // stream's open batch, which a later free closes with one event (no driver call here).
        let mut tag = (!key.needs_marker()).then(|| Pending::one(PendingOn::Stream(key)));
        if size <= self.cache.max_block {
            match self.cache_free(key, addr, size, tag, verified, named)? {
                None => return Ok(()),
                Some(t) => tag = Some(t),
            }
        }
        let tag = match tag {
            Some(tag) => tag,
            None => self.join_batch(&mut lock(self.shard()), key, size, named),
        };
        let mut g = self.lock_shared();
        let region = g.region_of(addr, size).ok_or_else(|| {
            Error::invalid(format!(
                "{}: [{addr:#x}, +{size}) was not allocated from this resource",
                self.name
            ))
        })?;
        if !self.on_boundary(addr, size, region) {
            return Err(self.not_a_block(addr, size));
        }
        if !verified && g.free.overlaps(addr, size) {
            return Err(Error::invalid(format!(
                "{}: [{addr:#x}, +{size}) is already free",
                self.name
            )));
        }
        debug_assert!(
            !g.free.overlaps(addr, size),
            "{}: a verified free of a free range",
            self.name
        );
        g.free.insert(addr, size, region, tag);
        g.used = g.used.wrapping_sub(size);
        Ok(())
    }

    /// A number that changes whenever upstream regions are added or given back.
    pub(crate) fn regions_generation(&self) -> u64 {
        self.regions_gen.load(Ordering::Acquire)
    }

    /// Every upstream region: (start, size).
    pub(crate) fn regions(&self) -> Vec<(usize, usize)> {
        lock(&self.global)
            .regions
            .iter()
            .map(|(&a, &s)| (a, s))
            .collect()
    }

    /// The start and size of the upstream block holding `addr`.
    pub(crate) fn region_containing(&self, addr: usize) -> Option<(usize, usize)> {
        let g = lock(&self.global);
        let (&start, &size) = g.regions.range(..=addr).next_back()?;
        (addr < start + size).then_some((start, size))
    }

    /// Gives every wholly free upstream block back, after synchronizing the streams that may still
    /// use it; drops idle streams from the tags of the blocks that stay. Returns the bytes released.
    pub(crate) fn release_unused(&self) -> Result<usize> {
        let detached = {
            let mut g = lock(&self.global);
            self.flush_caches(&mut g);
            self.detach_free_regions(&mut g)
        };
        // Synchronize outside the lock: other threads keep allocating meanwhile.
        let count = detached.len() as u64;
        let (released, kept, error) = self.give_back(detached);
        let mut g = lock(&self.global);
        g.upstream_releases += count - kept.len() as u64;
        self.readmit(&mut g, kept);
        if let Some(e) = error {
            return Err(e);
        }
        // Streams found idle no longer hold back the blocks that stay.
        let mut keys: Vec<StreamKey> = Vec::new();
        for block in g.free.iter() {
            for on in block.tag.entries() {
                if let PendingOn::Stream(k) = on {
                    if !keys.contains(k) {
                        keys.push(*k);
                    }
                }
            }
        }
        let idle: Vec<StreamKey> = keys
            .into_iter()
            .filter(|k| self.syncer.is_idle(*k).unwrap_or(false))
            .collect();
        if !idle.is_empty() {
            g.free.retag(|t| {
                t.rewrite(|on| {
                    matches!(on, PendingOn::Stream(k) if idle.contains(k)).then_some(None)
                })
            });
        }
        Ok(released)
    }

    /// Called before `stream` is destroyed: blocks still waiting on it get a marker recorded now
    /// (or, if that fails, the stream is synchronized), so nobody records on a dead handle.
    pub(crate) fn retire(&self, stream: Stream) {
        if matches!(stream.as_raw(), 0 | LEGACY | PER_THREAD) {
            return;
        }
        let key = self.key(stream);
        let mut g = lock(&self.global);
        self.flush_caches(&mut g);
        let names = |t: &Pending| {
            t.entries()
                .iter()
                .any(|on| matches!(on, PendingOn::Stream(k) if *k == key))
        };
        if !g.free.iter().any(|b| names(&b.tag)) {
            return;
        }
        let replacement = match self.syncer.record_marker(key) {
            Ok(token) => Some(PendingOn::Marker(Marker::new(key, token))),
            Err(e) => {
                tracing::warn!(
                    "{}: recording on {key:?} before it is destroyed: {e}; synchronizing it",
                    self.name
                );
                if let Err(e) = self.syncer.sync_stream(key) {
                    tracing::error!("{}: synchronizing {key:?}: {e}", self.name);
                }
                None
            }
        };
        g.free.retag(|t| {
            if names(t) {
                t.rewrite(|on| {
                    matches!(on, PendingOn::Stream(k) if *k == key).then(|| replacement.clone())
                });
            }
        });
    }

    /// Exact counters (takes every lock).
    pub(crate) fn stats(&self) -> CoreStats {
        // All locks at once (global first, as everywhere), at a moment when no block is leaving
        // an ending thread's front: no block is between two places.
        let (g, shards, hot) = loop {
            let g = lock(&self.global);
            let shards: Vec<MutexGuard<'_, Shard>> =
                self.shards.iter().map(|s| lock(&s.0)).collect();
            if let Some(hot) = self.settled_front_blocks() {
                break (g, shards, hot);
            }
            // The ending thread needs these locks to finish.
            drop((shards, g));
            std::thread::yield_now();
        };
        let hot_bytes: usize = hot.iter().map(|h| h.size).sum();
        let cached_bytes = shards.iter().map(|s| s.bytes()).sum::<usize>() + hot_bytes;
        let cached_blocks = shards.iter().map(|s| s.blocks()).sum::<usize>() + hot.len();
        CoreStats {
            pool_size: g.pool_size,
            used: shards
                .iter()
                .fold(g.used, |u, s| u.wrapping_add(s.used))
                .wrapping_sub(hot_bytes),
            free: g.free.free_bytes() + cached_bytes,
            cached_bytes,
            cached_blocks,
            free_blocks: g.free.len() + cached_blocks,
            largest_free: g.free.largest(),
            upstream_blocks: g.regions.len(),
            upstream_allocations: g.upstream_allocations,
            upstream_releases: g.upstream_releases,
        }
    }

    /// The blocks in fronts, left there (the caller holds `global`: drainers are serialized).
    #[cfg(test)]
    fn front_blocks(&self) -> Vec<Hot> {
        lock(&self.fronts).iter().filter_map(|f| f.peek()).collect()
    }

    /// [`Core::front_blocks`], or `None` while a block is leaving an ending thread's front.
    fn settled_front_blocks(&self) -> Option<Vec<Hot>> {
        let fronts = lock(&self.fronts);
        (self.leaving.load(Ordering::Acquire) == 0)
            .then(|| fronts.iter().filter_map(|f| f.peek()).collect())
    }

    /// The pool's size.
    pub(crate) fn pool_size(&self) -> usize {
        lock(&self.global).pool_size
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        // As `stats`: not while an ending thread's front block is between two places (checked
        // once here: the callers' threads are done but for their thread-local destructors).
        self.wait_while_blocks_leave_fronts();
        let g = lock(&self.global);
        g.free.check_invariants();
        let mut stats_free = g.free.free_bytes();
        let mut used = g.used;
        for shard in self.shards.iter() {
            let s = lock(&shard.0);
            used = used.wrapping_add(s.used);
            s.free.check_invariants();
            assert_eq!(
                s.recent.iter().map(|b| b.size).sum::<usize>(),
                s.recent_bytes,
                "recent bytes drifted"
            );
            for b in s
                .recent
                .iter()
                .map(|b| (b.addr, b.size, b.region))
                .chain(s.free.iter().map(|b| (b.addr, b.size, b.region)))
            {
                assert_eq!(
                    g.region_of(b.0, b.1),
                    Some(b.2),
                    "cached block {:#x}+{} is not in its region",
                    b.0,
                    b.1
                );
                assert!(
                    !g.free.overlaps(b.0, b.1),
                    "cached block {:#x}+{} is also in the shared list",
                    b.0,
                    b.1
                );
            }
            stats_free += s.bytes();
        }
        for h in self.front_blocks() {
            used = used.wrapping_sub(h.size);
            stats_free += h.size;
            assert!(
                g.region_of(h.addr, h.size).is_some(),
                "front block {:#x}+{} is in no region",
                h.addr,
                h.size
            );
            assert!(
                !g.free.overlaps(h.addr, h.size),
                "front block {:#x}+{} is also in the shared list",
                h.addr,
                h.size
            );
        }
        assert_eq!(
            g.regions.values().sum::<usize>(),
            g.pool_size,
            "regions and pool size disagree"
        );
        assert_eq!(stats_free + used, g.pool_size, "free + used != pool size");
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        let g = self
            .global
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let mut tags: Vec<Pending> = g.free.iter().map(|b| b.tag).collect();
        let mut used = g.used;
        for shard in self.shards.iter_mut() {
            let s = shard.0.get_mut().unwrap_or_else(PoisonError::into_inner);
            used = used.wrapping_add(s.used);
            tags.extend(s.recent.drain(..).map(|b| b.tag));
            tags.extend(std::mem::take(&mut s.free).into_blocks().map(|b| b.tag));
        }
        let fronts = std::mem::take(self.fronts.get_mut().unwrap_or_else(PoisonError::into_inner));
        for h in fronts.iter().filter_map(|f| f.drain()) {
            used = used.wrapping_sub(h.size);
            // A stream only its calls may name: an open batch (a device-wide synchronization).
            tags.push(Pending::one(if h.key.needs_marker() {
                PendingOn::Marker(Marker::open(h.key))
            } else {
                PendingOn::Stream(h.key)
            }));
        }
        if used > 0 {
            tracing::warn!(
                "{} dropped with {used} bytes still allocated; they are freed too",
                self.name
            );
        }
        // Open batches: their streams may be gone; one device-wide synchronization covers them.
        let open = tags.iter().any(Pending::has_open);
        if open {
            if let Err(e) = self.syncer.sync_device() {
                tracing::error!(
                    "{}: synchronizing the device before release: {e}",
                    self.name
                );
            }
        }
        // Each stream once: everything queued on it so far.
        let mut done: Vec<StreamKey> = Vec::new();
        for tag in &tags {
            for on in tag.entries() {
                let result = match on {
                    PendingOn::Marker(m) if !m.is_closed() => Ok(()),
                    PendingOn::Stream(k) if !done.contains(k) => {
                        done.push(*k);
                        self.syncer.sync_stream(*k)
                    }
                    PendingOn::Marker(m) => self.syncer.sync_marker(m),
                    PendingOn::Stream(_) => Ok(()),
                };
                if let Err(e) = result {
                    tracing::error!("{}: synchronizing before release: {e}", self.name);
                }
            }
        }
        drop(tags);
        let g = self
            .global
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        g.free = Blocks::default();
        for (addr, size) in std::mem::take(&mut g.regions) {
            // SAFETY: every region came from `upstream.allocate` with this size and alignment; its
            // free blocks' streams were synchronized above, and allocations still live at drop are
            // the caller's breach of contract (RMM frees them too).
            if let Err(e) = unsafe {
                self.upstream
                    .deallocate_sync(addr as *mut u8, size, DEFAULT_ALIGNMENT)
            } {
                tracing::error!(
                    "{}: returning [{addr:#x}, +{size}) upstream: {e}",
                    self.name
                );
            }
        }
    }
}

/// The cores that listen for stream destruction (GPU mode only).
mod registry {
    use super::*;

    static LIVE: Mutex<Vec<Weak<Core>>> = Mutex::new(Vec::new());

    pub(super) fn register(core: &Arc<Core>) {
        cuda::stream::set_destroy_hook(stream_destroyed);
        let mut live = lock(&LIVE);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(core));
    }

    /// Every live core forgets `stream` (see [`Core::retire`]).
    pub(crate) fn stream_destroyed(stream: Stream) {
        let cores: Vec<Arc<Core>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
        for core in cores {
            core.retire(stream);
        }
    }
}

#[cfg(test)]
pub(crate) mod model;

#[cfg(test)]
mod tests;
