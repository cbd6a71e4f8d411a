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
//!   [`CLOSE_BYTES`](batches::CLOSE_BYTES) bytes), which covers every free in it. Until then its
//!   blocks are reused by their own stream only; when nothing else fits, one device-wide
//!   synchronization covers every open batch at once ([`Core::cover_open_batches`]);
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
//! (the one-block per-thread fronts), and the engine, [`Core`], opened by concern: here its state
//! and construction; [`blocks`] (the shared free list and its books), [`allocate`] (the fast paths,
//! the shared list and the named recovery steps), [`free`] (deallocation and its checks),
//! [`batches`] (open batches, closing, covering), [`caches`] (reclaiming shards and fronts),
//! [`growth`] (growing from an upstream, giving back, drop), [`mapped`] (the other source of
//! memory: one virtual range whose books grow in place, mapped on take and given back granule by
//! granule), [`retire`] (streams of ours destroyed under us) and [`inspect`] (counters, regions,
//! invariants). `model.rs` (the recording syncer and upstream) and `tests.rs` serve the CPU tests.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::aligned::DEFAULT_ALIGNMENT;
use crate::cuda::{DeviceId, Stream};
use crate::error::Result;
use crate::mr::detail::fixed_list::FixedList;
use crate::resource::{AnyResource, MemoryResource};

mod allocate;
mod batches;
mod blocks;
mod caches;
mod free;
mod front;
mod growth;
mod inspect;
mod key;
mod mapped;
mod retire;
mod shard;
mod syncer;

pub(crate) use batches::CLOSE_FREES;
pub(crate) use inspect::CoreStats;
pub(crate) use key::{Marker, Pending, StreamKey};
#[cfg(test)]
use key::{MarkerToken, PendingOn};
pub(crate) use mapped::Mapped;
pub(crate) use shard::CacheLimits;
pub(crate) use syncer::{default_syncer, Syncer};

use blocks::{Blocks, Global};
use front::Front;
use key::{LEGACY, PER_THREAD};
use shard::{Padded, Shard};

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
    /// In place ([`Memory::Mapped`]): the books of the one range extend at their end by the whole
    /// granules a request needs beyond the free block there (see [`mapped`]).
    Mapped,
}

/// Where a [`Core`]'s memory comes from.
#[derive(Debug)]
pub(crate) enum Memory {
    /// Regions allocated from an upstream resource, given back when wholly free (pool,
    /// fixed-size).
    Upstream(AnyResource),
    /// One reserved virtual range: the only region, mapped granule by granule as blocks are handed
    /// out and given back granule by granule where free (the expandable pool).
    Mapped(Mapped),
}

/// LIFO depth of a fixed-size core's shards (see [`Core::new`]).
const FIXED_RECENT: usize = 64;

/// The stream-ordered sub-allocator the pool and fixed-size resources are made of.
pub(crate) struct Core {
    name: &'static str,
    memory: Memory,
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
    /// Open batches pushed out of their shard (see [`MAX_OPEN`](batches::MAX_OPEN)): they take no
    /// more frees and wait for [`Core::cover_open_batches`].
    orphans: Mutex<Vec<Arc<Marker>>>,
    /// Blocks taken out of an ending thread's front and not yet freed (see [`Core::front_gone`]):
    /// while there are any, the counters are between two states and [`Core::stats`] waits.
    leaving: AtomicUsize,
    /// Blocks of ending threads' fronts freed so far: an allocation about to fail checks that none
    /// arrived since it flushed the caches (see [`Core::allocate`]).
    left: AtomicU64,
    /// Set once a free not verified against the live allocations went to a shard: from then on a
    /// block coming back from a shard is checked against the shared list ([`Core::insert_free`]).
    unverified_in_shards: AtomicBool,
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
            .field("memory", &self.memory)
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
        let first = if initial > 0 {
            Some(upstream.allocate_sync(initial, DEFAULT_ALIGNMENT)?)
        } else {
            None
        };
        let core = Self::build(name, Memory::Upstream(upstream), syncer, growth, cache);
        if let Some(ptr) = first {
            core.add_region(
                &mut lock(&core.global),
                ptr as usize,
                initial,
                Pending::default(),
            );
        }
        Ok(core)
    }

    /// A core whose memory is `mapped`'s range ([`Memory::Mapped`]): its one region is the whole
    /// reservation, and its books start empty at the range's base.
    pub(crate) fn over_range(
        name: &'static str,
        mapped: Mapped,
        syncer: Arc<dyn Syncer>,
        cache: CacheLimits,
    ) -> Arc<Self> {
        let (base, reserved) = (mapped.base(), mapped.range().reserved());
        let core = Self::build(name, Memory::Mapped(mapped), syncer, Growth::Mapped, cache);
        {
            let mut g = lock(&core.global);
            g.regions.insert(base, reserved);
            core.regions_changed(&mut g);
        }
        core
    }

    fn build(
        name: &'static str,
        memory: Memory,
        syncer: Arc<dyn Syncer>,
        growth: Growth,
        cache: CacheLimits,
    ) -> Arc<Self> {
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
            memory,
            single_device: syncer.single_device(),
            syncer,
            growth,
            cache,
            global: Mutex::new(Global {
                free: match growth {
                    Growth::Chunks { unit, .. } => Blocks::Fixed(FixedList::new(unit)),
                    Growth::Pool { .. } => Blocks::default(),
                    // Its release asks which free block holds an address.
                    Growth::Mapped => {
                        let mut blocks = Blocks::default();
                        blocks.keep_address_order();
                        blocks
                    }
                },
                ..Global::default()
            }),
            shards: (0..shards).map(|_| Padded::default()).collect(),
            regions_gen: AtomicU64::new(0),
            shard_budget: AtomicUsize::new(cache.budget(0, shards)),
            orphans: Mutex::new(Vec::new()),
            leaving: AtomicUsize::new(0),
            left: AtomicU64::new(0),
            unverified_in_shards: AtomicBool::new(false),
            // The CPU tests close batches often, so that every path around closing runs.
            close_frees: std::sync::atomic::AtomicU32::new(if cfg!(test) {
                3
            } else {
                CLOSE_FREES
            }),
            #[cfg(test)]
            shared_locks: AtomicU64::new(0),
        });
        if core.syncer.tracks_stream_lifetimes() {
            retire::listen(&core);
        }
        core
    }

    /// The upstream the regions come from ([`Memory::Upstream`]).
    pub(crate) fn upstream(&self) -> Option<&AnyResource> {
        match &self.memory {
            Memory::Upstream(upstream) => Some(upstream),
            Memory::Mapped(_) => None,
        }
    }

    /// The range and its books ([`Memory::Mapped`]).
    pub(crate) fn mapped(&self) -> Option<&Mapped> {
        match &self.memory {
            Memory::Mapped(mapped) => Some(mapped),
            Memory::Upstream(_) => None,
        }
    }

    /// The key of `stream` on the calling thread. With one device, the special handles' keys are
    /// made here, without the syncer's two dynamic calls.
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
}

#[cfg(test)]
pub(crate) mod model;

#[cfg(test)]
mod tests;
