//! The expandable pool's memory ([`Memory::Mapped`]): one reserved [`VirtualRange`] whose books
//! grow in place, mapped as blocks are handed out and given back granule by granule wherever it is
//! free (issue 28; docs/design/expandable-pool.md).
//!
//! The core's one region is the whole reservation; its books (free, cached and handed-out blocks)
//! cover `[base, frontier)`, and its `pool_size` is `frontier - base`, a whole number of granules.
//! - **Growth** ([`Core::grow_mapped`]), the step after the shared list and the caches found
//!   nothing, as a pool's growth: the frontier moves up by the whole granules the request needs
//!   beyond the free block at the end of the books, and the new span merges with that block. It
//!   enters the books unmapped: growth makes no driver call. So free space coalesces across growth
//!   steps, and a request fails only when the device cannot back it or the reservation is full.
//! - **Free blocks may hold unmapped granules**: the span growth just entered, and granules given
//!   back. Every block is mapped when it is handed out ([`Core::map_taken`]: `ensure_mapped` with
//!   the shared lock released, since creating and mapping a granule are driver calls of tens of
//!   µs). `unmapped` counts the bytes of the books in granules that are not mapped, never fewer
//!   than there are; while it is 0 (no give-back since the last growth was mapped) an allocation
//!   checks nothing at all, and otherwise reads the range's bitmap (a few ns).
//! - **Placement** ([`Mapped::place_unordered`]): among a few fits, at either end of the block,
//!   the one pinning the fewest granules no block touches yet, then mapping the fewest bytes, so
//!   small blocks fill the unused ends of granules live blocks hold and free memory gathers in
//!   whole granules.
//! - **Recycling** ([`Core::map_taken`]): before a block maps new granules, as many bytes of idle
//!   free granules go back first (caches flushed, streams found idle), so the range never maps
//!   more while idle memory lies in holes too small for the request that grew the books.
//! - **Giving back** ([`Core::release_mapped`]): the free blocks of the shared list that cover
//!   mapped granules leave the books, their streams are synchronized (trim, out of memory) or found
//!   idle (the release threshold), the granules they cover are released, and they come back
//!   untagged (no work is pending on them any more); then the frontier comes down over the
//!   unmapped granules at the end of the books. Granules that a live or cached block touches stay.
//! - **The release threshold** (as `cuda_async`'s): when a free reaches the shared list and more
//!   than the threshold is mapped, idle free granules go back, those covering most first, until the
//!   mapped bytes are down to the threshold or nothing idle is left; tried at once when the free
//!   left a mapped granule wholly free.
//! - **Out of memory** (the device cannot back a block): the block goes back to the books,
//!   everything releasable is given back (waiting for its streams), and the request is tried once
//!   more; then the error says how much is mapped, in use and free, the largest free block, and what
//!   the device has free.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::aligned::{align_down, align_up};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::virtual_range::{VirtualRange, VirtualRangeStats};

use super::blocks::{Blocks, Global};
use super::inspect::CoreStats;
use super::key::{Pending, PendingOn, StreamKey, TagClass};
#[cfg(doc)]
use super::shard::best_unordered;
use super::{lock, Core, Memory};
use crate::mr::detail::free_list::{BlockId, FreeList};

/// No release threshold.
const NO_THRESHOLD: usize = usize::MAX;

/// Fits of each class a mapped core's placement weighs ([`Mapped::place_unordered`]).
const PLACE_SCAN: usize = 8;

/// The range of a mapped core and what the core keeps about it.
pub(crate) struct Mapped {
    range: VirtualRange,
    base: usize,
    /// Bytes of the books in granules that are not mapped (see the module docs): raised before such
    /// bytes enter the books (growth, a give-back), lowered after they are mapped or leave them.
    unmapped: AtomicUsize,
    /// Mapped bytes kept before frees give idle granules back ([`NO_THRESHOLD`]: none).
    threshold: AtomicUsize,
    /// Set while a thread gives back for the threshold: one at a time.
    releasing: AtomicBool,
    /// The shared list's free bytes above which the next free may try the threshold again, after a
    /// try that left the range over it (nothing more was idle): without it every free would scan.
    retry_above: AtomicUsize,
    /// Tests: called with every span before its granules are released.
    #[cfg(test)]
    release_check: Option<Box<dyn Fn(usize, usize) + Send + Sync>>,
}

impl fmt::Debug for Mapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapped")
            .field("range", &self.range)
            .field("unmapped", &self.unmapped.load(Ordering::Relaxed))
            .field("release_threshold", &self.release_threshold())
            .finish_non_exhaustive()
    }
}

impl Mapped {
    /// The books of a core over `range`, keeping at most `release_threshold` mapped bytes when frees
    /// reach the shared list (`None`: everything stays mapped until a trim).
    pub(crate) fn new(range: VirtualRange, release_threshold: Option<usize>) -> Self {
        Self {
            base: range.base() as usize,
            range,
            unmapped: AtomicUsize::new(0),
            threshold: AtomicUsize::new(release_threshold.unwrap_or(NO_THRESHOLD)),
            releasing: AtomicBool::new(false),
            retry_above: AtomicUsize::new(0),
            #[cfg(test)]
            release_check: None,
        }
    }

    /// Tests: `check` sees every span `(addr, len)` just before its granules are released.
    #[cfg(test)]
    pub(crate) fn with_release_check(
        mut self,
        check: impl Fn(usize, usize) + Send + Sync + 'static,
    ) -> Self {
        self.release_check = Some(Box::new(check));
        self
    }

    /// The range.
    pub(crate) fn range(&self) -> &VirtualRange {
        &self.range
    }

    /// The first address of the range.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    /// The release threshold, if any.
    pub(crate) fn release_threshold(&self) -> Option<usize> {
        let t = self.threshold.load(Ordering::Relaxed);
        (t != NO_THRESHOLD).then_some(t)
    }

    /// Sets the release threshold (`None`: none).
    pub(crate) fn set_release_threshold(&self, bytes: Option<usize>) {
        self.threshold
            .store(bytes.unwrap_or(NO_THRESHOLD), Ordering::Relaxed);
        self.retry_above.store(0, Ordering::Relaxed);
    }

    /// True when the books may hold unmapped granules: a block handed out must then be checked.
    #[inline]
    pub(super) fn may_be_unmapped(&self) -> bool {
        self.unmapped.load(Ordering::Acquire) > 0
    }

    /// The span of whole granules at the top of the free block `[addr, addr + size)` that covers
    /// at least `want` mapped bytes (or as many as the block covers), as `(start, len, mapped
    /// bytes it covers)`.
    fn top_granules(&self, addr: usize, size: usize, want: usize) -> (usize, usize, usize) {
        let granularity = self.range.granularity();
        let end = self.base + align_down(addr + size - self.base, granularity);
        let first = align_up(addr - self.base, granularity).map_or(end, |o| self.base + o);
        let mut start = end;
        let mut covered = 0;
        while start > first && covered < want {
            start -= granularity;
            covered += self.range.covered_mapped(start - self.base, granularity);
        }
        (start, end - start, covered)
    }

    /// What placing `[start, start + size)` in the free block `[block, end)` costs: the granules
    /// it touches that lie wholly in the block (no other block touches them yet: the placement
    /// pins them), then the bytes of them that are not mapped (the placement maps them).
    fn placement_cost(
        &self,
        block: usize,
        end: usize,
        start: usize,
        size: usize,
    ) -> (usize, usize) {
        let g = self.range.granularity();
        let (b, e, s) = (block - self.base, end - self.base, start - self.base);
        let touched = (s / g, (s + size).div_ceil(g));
        let free = (b.div_ceil(g), e / g);
        let pins = touched.1.min(free.1).saturating_sub(touched.0.max(free.0));
        let maps = if pins > 0 && self.may_be_unmapped() {
            self.range.touched_unmapped(s, size)
        } else {
            0
        };
        (pins, maps)
    }

    /// The placement of `size` bytes at `alignment` among the free blocks that `key` may use
    /// without ordering (see [`best_unordered`]), as `(block, start, end of the block)`: among the
    /// first [`PLACE_SCAN`] fits of each class, at the bottom or the top of the block, the one
    /// pinning the fewest granules no block touches yet, then mapping the fewest bytes, then in
    /// the smallest block, the bottom first. So small blocks fill the unused part of granules that
    /// live blocks already hold, free memory gathers in whole granules that can be given back,
    /// and mapped memory is used before new granules are mapped.
    pub(super) fn place_unordered(
        &self,
        list: &FreeList<Pending>,
        key: StreamKey,
        size: usize,
        alignment: usize,
    ) -> Option<(BlockId, usize, usize)> {
        // (pins, maps, block length, at the top) of the best so far, and its (block, start, end)
        type Rank = (usize, usize, usize, bool);
        let mut best: Option<(Rank, (BlockId, usize, usize))> = None;
        for class in [TagClass::Empty, TagClass::Owner(key)] {
            for fit in list.fits_in(class, size, alignment).take(PLACE_SCAN) {
                let end = fit.block + fit.len;
                let top = align_down(end - size, alignment);
                for (start, at_top) in [(fit.start, false), (top, true)] {
                    if at_top && top <= fit.start {
                        continue;
                    }
                    let (pins, maps) = self.placement_cost(fit.block, end, start, size);
                    let rank = (pins, maps, fit.len, at_top);
                    if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                        best = Some((rank, (fit.id, start, end)));
                    }
                }
                if best.as_ref().is_some_and(|((pins, ..), _)| *pins == 0) {
                    return best.map(|(_, placed)| placed);
                }
            }
        }
        best.map(|(_, placed)| placed)
    }

    /// Free bytes of the shared list in mapped granules, at most (the caller holds `global`).
    fn free_mapped(&self, g: &Global) -> usize {
        g.free
            .free_bytes()
            .saturating_sub(self.unmapped.load(Ordering::Acquire))
    }

    /// Tests: the books and the range agree (the caller holds `global`, with no call in flight).
    #[cfg(test)]
    pub(super) fn check_invariants(&self, g: &Global) {
        let granularity = self.range.granularity();
        let frontier = self.base + g.pool_size;
        assert_eq!(
            g.regions.iter().map(|(&a, &s)| (a, s)).collect::<Vec<_>>(),
            vec![(self.base, self.range.reserved())],
            "a mapped core's one region is its reservation"
        );
        assert_eq!(g.pool_size % granularity, 0, "the books end on a granule");
        assert!(
            g.pool_size <= self.range.reserved(),
            "the books outgrew the reservation"
        );
        for b in g.free.iter() {
            assert!(
                b.addr >= self.base && b.addr + b.size <= frontier,
                "free block {:#x}+{} lies outside the books [{:#x}, {frontier:#x})",
                b.addr,
                b.size,
                self.base
            );
        }
        let mapped = self.range.stats().mapped;
        assert_eq!(
            self.unmapped.load(Ordering::Acquire),
            g.pool_size - mapped,
            "unmapped bytes in the books drifted (books {}, mapped {mapped})",
            g.pool_size
        );
    }
}

/// How [`Core::release_mapped`] makes sure no queued work uses what it gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Every free block: its streams are synchronized first (trim, out of memory). The caches are
    /// flushed into the shared list first.
    Block,
    /// Only blocks whose streams are found idle now (the release threshold: no blocking), until
    /// the range is down to the threshold.
    Idle,
}

/// Counters of a mapped core: the engine's, the range's, and what a trim would give back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MappedStats {
    pub core: CoreStats,
    pub range: VirtualRangeStats,
    /// Bytes of mapped granules that lie wholly in free memory (cached blocks included).
    pub releasable: usize,
}

impl Core {
    /// Growth of a mapped core (the caller holds `global`): extends the books at the frontier by
    /// the whole granules `size` bytes at `alignment` need beyond the free block at the end (when
    /// `key` may use it), and hands the request out of the merged block. Nothing is mapped here.
    ///
    /// # Errors
    /// Out of memory when the reservation cannot hold the request.
    pub(super) fn grow_mapped(
        &self,
        g: &mut Global,
        m: &Mapped,
        key: StreamKey,
        size: usize,
        alignment: usize,
    ) -> Result<usize> {
        let Blocks::Coalescing(list) = &mut g.free else {
            return Err(Error::invalid(
                "internal: a mapped core keeps a coalescing list",
            ));
        };
        let frontier = m.base + g.pool_size;
        // The free block at the end of the books, when `key` may be ordered after it: the
        // request starts there and the new span merges with it.
        let tail = list
            .block_ending_at(frontier)
            .filter(|t| t.tag.orderable(key))
            .map(|t| t.block);
        let granularity = m.range.granularity();
        let placed = align_up(tail.unwrap_or(frontier), alignment).and_then(|start| {
            let end = start.checked_add(size)?;
            let books = align_up(end - m.base, granularity)?;
            (books <= m.range.reserved()).then_some((start, m.base + books))
        });
        let Some((start, end)) = placed else {
            return Err(self.reservation_full(g, m, size));
        };
        let end = end.max(frontier);
        let grown = end - frontier;
        if grown > 0 {
            // Raised before the unmapped span enters the books (see `unmapped`).
            m.unmapped.fetch_add(grown, Ordering::AcqRel);
            list.insert(frontier, grown, m.base, Pending::default());
            g.pool_size += grown;
            g.upstream_allocations += 1;
        }
        let Some(fit) = list.block_ending_at(end) else {
            return Err(Error::invalid(
                "internal: the grown block is not in the books",
            ));
        };
        // Only bytes of the old free block carry its tag: fresh ones were never used.
        let rest = if start < frontier && !fit.tag.only(key) {
            let tag = fit.tag.clone();
            self.order_after(key, &tag)?;
            (!key.needs_marker()).then(|| Pending::one(PendingOn::Stream(key)))
        } else {
            None
        };
        let id = fit.id;
        list.take_range_untagged(id, start, size, rest);
        g.used = g.used.wrapping_add(size);
        if grown > 0 {
            self.pool_size_changed(g);
        }
        Ok(start)
    }

    /// Out of memory because the reservation is full (nothing is mapped for it).
    fn reservation_full(&self, g: &Global, m: &Mapped, size: usize) -> Error {
        Error::OutOfMemory {
            bytes: size,
            resource: self.name.into(),
            detail: format!(
                "its reservation of {} bytes cannot hold the request: the books span {} bytes, \
                 {} of them free (largest free block {}), {} mapped; a larger reservation is needed",
                m.range.reserved(),
                g.pool_size,
                g.free.free_bytes() + g.detached,
                g.free.largest(),
                m.range.stats().mapped
            ),
        }
    }

    /// Maps the block `[addr, addr + size)` an allocation on `stream` just took (the books hold
    /// unmapped granules). When the device cannot back it: the block goes back, every free granule
    /// is given back (after its streams), and one more block is taken and mapped.
    #[cold]
    #[inline(never)]
    pub(super) fn map_taken(
        &self,
        m: &Mapped,
        stream: Stream,
        addr: usize,
        size: usize,
        alignment: usize,
    ) -> Result<usize> {
        let cause = match self.map_block(m, addr, size) {
            Ok(()) => return Ok(addr),
            Err(e) => e,
        };
        let key = self.key(stream);
        self.put_back_unmapped(m, key, addr, size);
        if !cause.is_out_of_memory() {
            return Err(cause);
        }
        self.release_mapped(Wait::Block)?;
        let addr = self.take_block(stream, size, alignment)?;
        match self.map_block(m, addr, size) {
            Ok(()) => Ok(addr),
            Err(e) => {
                self.put_back_unmapped(m, key, addr, size);
                Err(if e.is_out_of_memory() {
                    self.mapped_out_of_memory(m, size, e)
                } else {
                    e
                })
            }
        }
    }

    fn map_block(&self, m: &Mapped, addr: usize, size: usize) -> Result<()> {
        if m.range.is_mapped(addr - m.base, size) {
            return Ok(());
        }
        self.recycle_idle(m, m.range.touched_unmapped(addr - m.base, size));
        let mapped = m.range.ensure_mapped(addr - m.base, size)?;
        m.unmapped.fetch_sub(mapped, Ordering::AcqRel);
        Ok(())
    }

    /// Before `need` bytes of granules are mapped: gives back as many bytes of free granules
    /// whose streams are idle, so that the range maps no more than it holds while idle free
    /// memory lies elsewhere in it (in holes too small for the requests that made the books
    /// grow). Skipped while another thread gives back.
    fn recycle_idle(&self, m: &Mapped, need: usize) {
        if need == 0 || m.releasing.swap(true, Ordering::Acquire) {
            return;
        }
        if let Err(e) = self.give_back_mapped(Wait::Idle, Some(need)) {
            tracing::warn!(
                "{}: giving idle granules back before mapping: {e}",
                self.name
            );
        }
        m.releasing.store(false, Ordering::Release);
    }

    /// A block taken on `key` that could not be mapped goes back to the shared list, as a free on
    /// `key` (no work was queued on it, and `key` is ordered after what its tag named), and the
    /// frontier comes down over it when it was the end of the books.
    fn put_back_unmapped(&self, m: &Mapped, key: StreamKey, addr: usize, size: usize) {
        // Before `global` (lock order: a shard is never held while `global` is taken).
        let tag = self.tag_of_free(key, size, true);
        let mut g = self.lock_shared();
        g.free.insert(addr, size, m.base, tag);
        g.used = g.used.wrapping_sub(size);
        self.lower_frontier(&mut g, m);
    }

    /// The out-of-memory error of a mapped core that could not map a block even after giving back
    /// everything it could: how much is mapped, in use and free, and the range's own account.
    fn mapped_out_of_memory(&self, m: &Mapped, size: usize, cause: Error) -> Error {
        let s = self.stats();
        let r = m.range.stats();
        let why = match cause {
            Error::OutOfMemory { detail, .. } => detail,
            other => other.to_string(),
        };
        Error::OutOfMemory {
            bytes: size,
            resource: self.name.into(),
            detail: format!(
                "{} bytes mapped (peak {}), {} in use, {} free in the pool's books (largest free \
                 block {}), after giving back every free granule: {why}",
                r.mapped, r.peak_mapped, s.used, s.free, s.largest_free
            ),
        }
    }

    /// Gives back the mapped granules that free blocks of the shared list cover, wherever they
    /// are, after `wait` made sure no queued work uses them; returns the bytes released. The
    /// blocks leave the books while their streams are synchronized and their granules released
    /// (with the shared lock released: other threads keep allocating), and come back untagged; the
    /// frontier then comes down over the unmapped granules at the end of the books.
    ///
    /// # Errors
    /// A driver error while synchronizing or releasing (the blocks concerned keep their tags).
    pub(crate) fn release_mapped(&self, wait: Wait) -> Result<usize> {
        self.give_back_mapped(wait, None)
    }

    /// [`Core::release_mapped`] of at most about `limit` bytes (whole granules; `None`: with
    /// [`Wait::Block`] everything, with [`Wait::Idle`] what is mapped above the threshold). A
    /// block covering more than the rest of the limit gives back only the granules at its top.
    fn give_back_mapped(&self, wait: Wait, limit: Option<usize>) -> Result<usize> {
        let Memory::Mapped(m) = &self.memory else {
            return Ok(0);
        };
        let detached = {
            let mut guard = lock(&self.global);
            let g: &mut Global = &mut guard;
            let excess = match (wait, limit) {
                (Wait::Block, _) => {
                    self.flush_caches(g);
                    limit.unwrap_or(usize::MAX)
                }
                (Wait::Idle, Some(limit)) => {
                    self.flush_caches(g);
                    limit
                }
                (Wait::Idle, None) => match m.release_threshold() {
                    Some(t) => m.range.stats().mapped.saturating_sub(t),
                    None => 0,
                },
            };
            let detached = self.detach_releasable(g, m, wait, excess)?;
            if detached.is_empty() {
                self.lower_frontier(g, m);
                self.note_threshold_try(g, m, wait);
                return Ok(0);
            }
            detached
        };
        let mut released = 0;
        let mut error = None;
        let mut back = Vec::with_capacity(detached.len());
        for (addr, size, tag) in detached {
            let ready = match wait {
                Wait::Block => self.synchronize(&tag),
                // Found idle under the shared lock.
                Wait::Idle => Ok(()),
            };
            if let Err(e) = ready {
                error.get_or_insert(e);
                back.push((addr, size, tag));
                continue;
            }
            let offset = addr - m.base;
            let before = m.range.covered_mapped(offset, size);
            #[cfg(test)]
            if let Some(check) = &m.release_check {
                check(addr, size);
            }
            // SAFETY: the block is free and out of the books, so nothing is handed out in a
            // granule it covers and nobody can take it meanwhile; every stream whose queued work
            // might still use it was synchronized (or found idle) after its free.
            if let Err(e) = unsafe { m.range.release(offset, size) } {
                tracing::error!("{}: releasing [{addr:#x}, +{size}): {e}", self.name);
                error.get_or_insert(e);
            }
            // Exact: no other thread maps or releases a granule this block covers.
            released += before - m.range.covered_mapped(offset, size);
            back.push((addr, size, Pending::default()));
        }
        let mut guard = self.lock_shared();
        let g: &mut Global = &mut guard;
        // Raised before the unmapped granules enter the books again.
        m.unmapped.fetch_add(released, Ordering::AcqRel);
        for (addr, size, tag) in back {
            g.detached -= size;
            g.free.insert(addr, size, m.base, tag);
        }
        self.lower_frontier(g, m);
        self.note_threshold_try(g, m, wait);
        match error {
            Some(e) => Err(e),
            None => Ok(released),
        }
    }

    /// Takes out of the shared list the free blocks whose covered granules are mapped, those
    /// covering most first, until they cover `excess` bytes; with [`Wait::Idle`] only blocks whose
    /// streams are idle now (asked with `global` held, so no stream of theirs is retired meanwhile).
    fn detach_releasable(
        &self,
        g: &mut Global,
        m: &Mapped,
        wait: Wait,
        excess: usize,
    ) -> Result<Vec<(usize, usize, Pending)>> {
        let Blocks::Coalescing(list) = &mut g.free else {
            return Ok(Vec::new());
        };
        if excess == 0 {
            return Ok(Vec::new());
        }
        let mut candidates: Vec<(usize, usize, usize)> = list
            .iter()
            .filter_map(|b| {
                let covered = m.range.covered_mapped(b.addr - m.base, b.size);
                (covered > 0).then_some((covered, b.addr, b.size))
            })
            .collect();
        candidates.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out = Vec::new();
        let mut covered_total = 0;
        for (covered, addr, size) in candidates {
            if covered_total >= excess {
                break;
            }
            let Some(block) = list.block_ending_at(addr + size) else {
                continue;
            };
            if wait == Wait::Idle {
                let tag = block.tag.clone();
                if !self.tag_complete(&tag)? {
                    continue;
                }
            }
            let id = block.id;
            let rest = excess - covered_total;
            let (addr, size, covered) = if covered <= rest {
                (addr, size, covered)
            } else {
                m.top_granules(addr, size, rest)
            };
            let block = list.take_range(id, addr, size, None);
            g.detached += size;
            covered_total += covered;
            out.push((addr, size, block.tag));
        }
        Ok(out)
    }

    /// True when no work queued on the streams of `tag` is left (non-blocking queries).
    fn tag_complete(&self, tag: &Pending) -> Result<bool> {
        for on in tag.entries() {
            let done = match on {
                PendingOn::Stream(key) => self.syncer.is_idle(*key)?,
                PendingOn::Marker(marker) if marker.is_closed() => {
                    self.syncer.marker_done(marker)?
                }
                PendingOn::Marker(_) => false,
            };
            if !done {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Cuts the unmapped granules at the end of the books off the free block there (the caller
    /// holds `global`): the frontier comes down to the last mapped granule or the block's first
    /// whole granule.
    fn lower_frontier(&self, g: &mut Global, m: &Mapped) {
        let Blocks::Coalescing(list) = &mut g.free else {
            return;
        };
        let frontier = m.base + g.pool_size;
        let Some(tail) = list.block_ending_at(frontier) else {
            return;
        };
        let granularity = m.range.granularity();
        // The granule holding the block's first byte may be shared with the block before it.
        let Some(first) = align_up(tail.block - m.base, granularity).map(|o| m.base + o) else {
            return;
        };
        let mut new_end = frontier;
        while new_end > first
            && !m
                .range
                .is_mapped(new_end - granularity - m.base, granularity)
        {
            new_end -= granularity;
        }
        if new_end == frontier {
            return;
        }
        let id = tail.id;
        list.take_range_untagged(id, new_end, frontier - new_end, None);
        g.pool_size -= frontier - new_end;
        // Lowered after the unmapped bytes left the books.
        m.unmapped.fetch_sub(frontier - new_end, Ordering::AcqRel);
        self.pool_size_changed(g);
    }

    /// After a give-back for the threshold that left the range above it: the next try waits until
    /// the shared list holds a granule more of free bytes (the caller holds `global`).
    fn note_threshold_try(&self, g: &Global, m: &Mapped, wait: Wait) {
        let over = m
            .release_threshold()
            .is_some_and(|t| m.range.stats().mapped > t);
        let retry_above = match (wait, over) {
            (Wait::Idle, true) => g.free.free_bytes() + m.range.granularity(),
            _ => 0,
        };
        m.retry_above.store(retry_above, Ordering::Relaxed);
    }

    /// After a free reached the shared list (the caller holds `global`): true when a mapped core
    /// is over its release threshold with free mapped bytes to give back (then call
    /// [`Core::release_over_threshold`] once `global` is released).
    ///
    /// `freed`: an address just freed into the shared list; when the free block holding it now
    /// covers a mapped granule, the try is made at once (the free made a granule releasable).
    pub(super) fn over_release_threshold(&self, g: &Global, freed: Option<usize>) -> bool {
        let Memory::Mapped(m) = &self.memory else {
            return false;
        };
        let Some(threshold) = m.release_threshold() else {
            return false;
        };
        if m.range.stats().mapped <= threshold || m.free_mapped(g) < m.range.granularity() {
            return false;
        }
        let releasable = |addr| match &g.free {
            Blocks::Coalescing(list) => list
                .block_holding(addr)
                .is_some_and(|(a, s)| m.range.covered_mapped(a - m.base, s) > 0),
            Blocks::Fixed(_) => false,
        };
        freed.is_some_and(releasable) || g.free.free_bytes() > m.retry_above.load(Ordering::Relaxed)
    }

    /// Gives idle free granules back until the range is down to its release threshold (called
    /// after a free, with no lock held; one thread at a time, the others go on).
    pub(super) fn release_over_threshold(&self) {
        let Memory::Mapped(m) = &self.memory else {
            return;
        };
        if m.releasing.swap(true, Ordering::Acquire) {
            return;
        }
        if let Err(e) = self.release_mapped(Wait::Idle) {
            tracing::warn!(
                "{}: giving memory back above the release threshold: {e}",
                self.name
            );
        }
        m.releasing.store(false, Ordering::Release);
    }

    /// The counters of a mapped core, and the bytes a trim would give back now (`None` for a core
    /// over an upstream).
    pub(crate) fn mapped_stats(&self) -> Option<MappedStats> {
        let Memory::Mapped(m) = &self.memory else {
            return None;
        };
        let core = self.stats();
        let mut spans = self.free_spans();
        spans.sort_unstable();
        // Cached blocks coalesce with their free neighbours once flushed: merge adjacent spans.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (addr, size) in spans {
            match merged.last_mut() {
                Some((a, s)) if *a + *s == addr => *s += size,
                _ => merged.push((addr, size)),
            }
        }
        let releasable = merged
            .iter()
            .map(|&(addr, size)| m.range.covered_mapped(addr - m.base, size))
            .sum();
        Some(MappedStats {
            core,
            range: m.range.stats(),
            releasable,
        })
    }
}
