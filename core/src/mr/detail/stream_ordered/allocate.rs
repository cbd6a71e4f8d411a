//! Allocation: the thread's front and shard, the shared list, then the recovery steps that make
//! room (reclaiming the caches, covering open batches, growing, giving back), each its own method.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use crate::aligned::is_aligned;
use crate::cuda::Stream;
use crate::error::{Error, Result};

use super::blocks::{Blocks, Global};
use super::growth::Grown;
use super::key::{Pending, PendingOn, StreamKey, TagClass};
use super::shard::{best_unordered, Cached};
use super::{front, lock, Core, Memory};
use crate::mr::detail::free_list::BlockId;

/// How many best-fit candidates an allocation looks at for one it can use without ordering.
const SCAN: usize = 16;

/// Memory frozen in other streams' open batches in the shards is worth a device-wide
/// synchronization, rather than growth, once it holds `1 / FROZEN_SHARE` of the pool.
const FROZEN_SHARE: usize = 8;

/// Stranded blocks passed over (see `Passed::stranded`) worth one device-wide
/// synchronization: each costs the scan a hash lookup and a cache miss or two, so a few thousand
/// cost more than a synchronization of an idle device (docs/design/pool.md, "Measurements behind the code").
const COVER_AFTER_STRANDED_SKIPS: usize = 2048;

/// One allocation request, as the recovery steps pass it on.
struct Request {
    stream: Stream,
    key: StreamKey,
    size: usize,
    alignment: usize,
}

/// What reclaiming the caches found for a request.
enum Reclaimed {
    /// A block, at this address.
    Took(usize),
    /// Nothing; the caches hold this many bytes of other streams' open batches (see
    /// [`Core::flush_caches_for`]).
    Frozen(usize),
}

/// How growth ended for a request that reached it (any error but out-of-memory ends the request
/// at once).
enum Growing {
    Took(usize),
    OutOfMemory(Error),
}

impl Growing {
    /// `Ok` to go on to the next step when `e` is out-of-memory, else `e`.
    pub(super) fn failed<G>(g: G, e: Error) -> Result<(G, Growing)> {
        if e.is_out_of_memory() {
            Ok((g, Growing::OutOfMemory(e)))
        } else {
            Err(e)
        }
    }
}

impl Core {
    /// Hands out `size` bytes (a multiple of 256) at an `alignment`-aligned address (a power of
    /// two, at least 256), usable on `stream` in stream order.
    ///
    /// Each step runs only when the ones before it found nothing: the thread's caches, the shared
    /// list, the shared list after reclaiming every cache, after covering open batches that block
    /// a fit, growth (giving wholly free regions back first when the upstream is out of memory),
    /// covering every open batch, and last the blocks of ending threads' fronts. A mapped core
    /// then maps the block when its books hold unmapped granules ([`Core::map_taken`]), with no
    /// lock held.
    #[inline(always)]
    pub(crate) fn allocate(&self, stream: Stream, size: usize, alignment: usize) -> Result<usize> {
        let addr = self.take_block(stream, size, alignment)?;
        if let Memory::Mapped(m) = &self.memory {
            if m.may_be_unmapped() {
                return self.map_taken(m, stream, addr, size, alignment);
            }
        }
        Ok(addr)
    }

    /// [`Core::allocate`] in the books: a block out of them, not yet mapped on a mapped core.
    #[inline]
    pub(super) fn take_block(
        &self,
        stream: Stream,
        size: usize,
        alignment: usize,
    ) -> Result<usize> {
        let key = self.key(stream);
        let cacheable = size <= self.cache.max_block;
        if cacheable {
            if let Some(addr) = self.take_cached(key, size, alignment) {
                return Ok(addr);
            }
        }
        let req = Request {
            stream,
            key,
            size,
            alignment,
        };
        let mut g = self.lock_shared();
        let left = self.left.load(Ordering::Acquire);
        if let Some(addr) = self.take_shared(&mut g, &req, cacheable)? {
            return Ok(addr);
        }
        let frozen = match self.take_after_reclaiming_caches(&mut g, &req)? {
            Reclaimed::Took(addr) => return Ok(addr),
            Reclaimed::Frozen(bytes) => bytes,
        };
        if let Some(addr) = self.take_after_covering_blockers(&mut g, &req, frozen)? {
            return Ok(addr);
        }
        let (mut g, out_of_memory) = match self.take_by_growing(g, &req)? {
            (_, Growing::Took(addr)) => return Ok(addr),
            (g, Growing::OutOfMemory(e)) => (g, e),
        };
        if let Some(addr) = self.take_after_covering_batches(&mut g, &req)? {
            return Ok(addr);
        }
        if self.fronts_left_since(left) {
            drop(g);
            if let Some(addr) = self.take_after_fronts_settle(&req)? {
                return Ok(addr);
            }
        }
        Err(out_of_memory)
    }

    /// The calling thread's latest free, if it was this size on this stream (no lock, no
    /// ordering), else a block of its shard that needs no ordering.
    #[inline(always)]
    fn take_cached(&self, key: StreamKey, size: usize, alignment: usize) -> Option<usize> {
        if let Some(addr) = front::take(self, key, size, alignment) {
            return Some(addr);
        }
        let mut shard = lock(self.shard());
        let addr = shard.take(key, size, alignment, self.cache.recent.max(1))?;
        shard.used = shard.used.wrapping_add(size);
        Some(addr)
    }

    /// The shared list (refilling the thread's shard when `refill`), after covering the open
    /// batches once requests have passed over enough stranded blocks.
    fn take_shared(&self, g: &mut Global, req: &Request, refill: bool) -> Result<Option<usize>> {
        g.passed.blocked = false;
        if g.passed.stranded >= COVER_AFTER_STRANDED_SKIPS {
            // Counted afresh even when nothing was left to cover.
            g.passed.stranded = 0;
            self.cover_open_batches(g)?;
        }
        self.take(g, req.key, req.size, req.alignment, refill)
    }

    /// Every shard's and front's blocks back in the shared list (but those of other streams' open
    /// batches whose threads live), then the shared list again.
    fn take_after_reclaiming_caches(&self, g: &mut Global, req: &Request) -> Result<Reclaimed> {
        let (moved, frozen) = self.flush_caches_for(g, Some(req.key));
        if moved > 0 {
            if let Some(addr) = self.take(g, req.key, req.size, req.alignment, false)? {
                return Ok(Reclaimed::Took(addr));
            }
        }
        Ok(Reclaimed::Frozen(frozen))
    }

    /// One device-wide synchronization rather than growth when blocks that fit wait for batches no
    /// event closed (their streams may be gone: a thread that ended, a destroyed stream), so that
    /// such memory is never stranded: when the scans passed over such a block in the shared list,
    /// or when the batches left in the shards (`frozen` bytes) hold an eighth of the pool. A few
    /// blocks of other threads' open batches are not worth stalling every thread for: their
    /// threads take them back, or a later synchronization does.
    fn take_after_covering_blockers(
        &self,
        g: &mut Global,
        req: &Request,
        frozen: usize,
    ) -> Result<Option<usize>> {
        let frozen_enough = frozen > 0 && frozen >= g.pool_size / FROZEN_SHARE;
        if (std::mem::take(&mut g.passed.blocked) || frozen_enough) && self.cover_open_batches(g)? {
            return self.take(g, req.key, req.size, req.alignment, false);
        }
        Ok(None)
    }

    /// Growth from the upstream. When the upstream cannot hold even the request, the wholly free
    /// regions (too small for it) go back first, with the shared lock released, and growth is
    /// tried once more.
    fn take_by_growing<'a>(
        &'a self,
        mut g: MutexGuard<'a, Global>,
        req: &Request,
    ) -> Result<(MutexGuard<'a, Global>, Growing)> {
        let grown = self.grow(&mut g, req.stream, req.key, req.size, req.alignment, true);
        let detached = match grown {
            Ok(Grown::Addr(addr)) => return Ok((g, Growing::Took(addr))),
            Ok(Grown::GiveBack(detached)) => detached,
            Err(e) => return Growing::failed(g, e),
        };
        let mut g = self.give_back_unlocked(g, detached)?;
        // Others may have freed while the lock was released.
        if let Some(addr) = self.take(&mut g, req.key, req.size, req.alignment, false)? {
            return Ok((g, Growing::Took(addr)));
        }
        match self.grow(&mut g, req.stream, req.key, req.size, req.alignment, false) {
            Ok(Grown::Addr(addr)) => Ok((g, Growing::Took(addr))),
            Ok(Grown::GiveBack(_)) => unreachable!("grow without give-back detaches nothing"),
            Err(e) => Growing::failed(g, e),
        }
    }

    /// Gives `detached` regions back with the shared lock released (synchronizing their streams
    /// and freeing them are blocking driver calls; other threads keep allocating and freeing
    /// meanwhile) and takes the lock again; those that could not be given back are the pool's
    /// again.
    fn give_back_unlocked<'a>(
        &'a self,
        g: MutexGuard<'a, Global>,
        detached: Vec<(usize, usize, Pending)>,
    ) -> Result<MutexGuard<'a, Global>> {
        drop(g);
        let count = detached.len() as u64;
        let (_, kept, error) = self.give_back(detached);
        let mut g = self.lock_shared();
        g.upstream_releases += count - kept.len() as u64;
        self.readmit(&mut g, kept);
        match error {
            Some(e) => Err(e),
            None => Ok(g),
        }
    }

    /// Out of memory even so: one device-wide synchronization covers the blocks of batches that
    /// no event closed yet (their streams may only be named by their own calls).
    fn take_after_covering_batches(&self, g: &mut Global, req: &Request) -> Result<Option<usize>> {
        if self.cover_open_batches(g)? {
            return self.take(g, req.key, req.size, req.alignment, false);
        }
        Ok(None)
    }

    /// True when a block left an ending thread's front since `left` was read, or is leaving one
    /// now (see [`Core::front_gone`]).
    fn fronts_left_since(&self, left: u64) -> bool {
        self.leaving.load(Ordering::Acquire) > 0 || self.left.load(Ordering::Acquire) != left
    }

    /// The last step: a block leaving an ending thread's front, or one that arrived in a shard
    /// after the caches were reclaimed. Its free returned long ago, so it must not be missed:
    /// wait until it is in the lists, reclaim the caches again and take it, covering its
    /// stream's batch if it is open (a PTDS, a stream made elsewhere).
    #[cold]
    fn take_after_fronts_settle(&self, req: &Request) -> Result<Option<usize>> {
        self.wait_while_blocks_leave_fronts();
        let mut g = self.lock_shared();
        self.flush_caches_for(&mut g, Some(req.key));
        if let Some(addr) = self.take(&mut g, req.key, req.size, req.alignment, false)? {
            return Ok(Some(addr));
        }
        if self.cover_open_batches(&mut g)? {
            return self.take(&mut g, req.key, req.size, req.alignment, false);
        }
        Ok(None)
    }

    /// Takes the best block for `key` from the shared list: the best fit among the blocks that need
    /// no ordering (untagged or pending on `key` alone, whatever their size rank among the others:
    /// as RMM's per-stream lists, a stream mostly gets back what it freed), else, among the [`SCAN`]
    /// best fits of every other class, the one that needs the fewest waits, then the smallest.
    /// Orders `key` after what it needs; the rest of the block is then tagged with `key` alone
    /// (whose queue is now ordered after it).
    ///
    /// With `refill`, when the block needs no ordering, up to [`CacheLimits::refill`](super::CacheLimits::refill) bytes (whole
    /// multiples of `size`, within the shard's budget) are taken at once and the part after the
    /// request goes to the calling thread's shard: its next requests need no shared lock.
    pub(super) fn take(
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
        let unordered = match &self.memory {
            Memory::Mapped(m) => m.place_unordered(list, key, size, alignment),
            Memory::Upstream(_) => best_unordered(list, key, size, alignment),
        };
        let (block, start, end, tag) = match unordered {
            Some((block, start, end)) => (block, start, end, None),
            None => {
                // (streams to order after, block size, block, start, end, tag)
                let mut best: Option<(usize, usize, BlockId, usize, usize, &Pending)> = None;
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
                            let end = fit.block + fit.len;
                            best = Some((rank.0, rank.1, fit.id, fit.start, end, fit.tag));
                        }
                        if !matches!(class, TagClass::Mixed) {
                            // One stream to wait for in every orderable block of the class: the
                            // first fits best.
                            break;
                        }
                    }
                }
                g.passed.scanned(blocked, stranded);
                let Some((_, _, block, start, end, tag)) = best else {
                    return Ok(None);
                };
                (block, start, end, Some(tag.clone()))
            }
        };
        // Only from a large block: refilling from the best fit of a small hole would leave the
        // hole's rest as a fragment, and the shared list would fill with fragments.
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
        list.take_range_untagged(block, start, size, rest);
        g.used = g.used.wrapping_add(size);
        Ok(Some(start))
    }

    /// [`Core::take`] for a fixed-size core (`size` is the block size): the latest free block that
    /// needs no ordering (pending on `key` alone, else untagged), else, among the [`SCAN`] latest
    /// of every other class, the one that needs the fewest waits. With `refill`, up to
    /// [`CacheLimits::refill`](super::CacheLimits::refill) bytes of further blocks that need no ordering go to the calling
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
            let mut want = self.cache.refill.saturating_sub(size).min(room) / size;
            let mut moved = Vec::new();
            // The refill is an optimization: without host memory for it, none.
            if moved.try_reserve_exact(want).is_err() || shard.recent.try_reserve(want).is_err() {
                want = 0;
            }
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
                shard.push_recent(Cached {
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
    pub(super) fn order_after(&self, key: StreamKey, tag: &Pending) -> Result<()> {
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
}
