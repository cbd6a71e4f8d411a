//! Deallocation: the thread's front, its shard, or the shared list, with the checks of a free
//! that was not verified against the live allocations.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::cuda::Stream;
use crate::error::{Error, Result};

use super::blocks::Global;
use super::front::{self, Hot, Put};
use super::key::{Pending, PendingOn, StreamKey};
use super::shard::{region_in, Cached, Shard};
use super::{lock, Core, Growth};

/// Frees a shard over budget lets wait in its LIFO before they go back to the shared list at once.
pub(super) const SPILL_BATCH: usize = 32;

impl Core {
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
    pub(super) fn free_front_block(&self, block: Hot, named: bool) {
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
        if !verified {
            g.free.keep_address_order();
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
        let over = self.over_release_threshold(&g, Some(addr));
        drop(g);
        if over {
            self.release_over_threshold();
        }
        Ok(())
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
        // A verified free cannot be a double free: the scans are skipped for it.
        let overlaps = |s: &Shard| {
            s.recent
                .iter()
                .any(|b| b.addr < addr + size && addr < b.addr + b.size)
                || s.free.overlaps(addr, size)
        };
        if !verified {
            s.free.keep_address_order();
            if overlaps(&s) {
                return Err(Error::invalid(format!(
                    "{}: [{addr:#x}, +{size}) is already free",
                    self.name
                )));
            }
            // Another shard may hold it too: `insert_free` checks from now on.
            self.unverified_in_shards.store(true, Ordering::Relaxed);
        }
        debug_assert!(
            !overlaps(&s),
            "{}: a verified free of a free range",
            self.name
        );
        s.push_recent(Cached {
            addr,
            size,
            region,
            tag,
        });
        s.used = s.used.wrapping_sub(size);
        let budget = self.shard_budget.load(Ordering::Relaxed);
        if s.recent.len() > self.cache.recent + SPILL_BATCH || s.bytes() > budget {
            if matches!(self.growth, Growth::Pool { .. } | Growth::Mapped) && s.bytes() <= budget {
                // The LIFO is long but the shard has room: its oldest frees join the shard's own
                // list (coalescing, tags kept), where this thread's later requests of other sizes
                // find them without the shared lock.
                let k = s.recent.len() - self.cache.recent;
                let Shard {
                    recent,
                    recent_bytes,
                    free,
                    ..
                } = &mut *s;
                for b in recent.drain(..k) {
                    *recent_bytes -= b.size;
                    free.insert(b.addr, b.size, b.region, b.tag);
                }
                s.resize_filter();
                return Ok(None);
            }
            // Over budget: the oldest go back to the shared list together, under one lock. First
            // the stream's open batch is closed while this call names it: in the shared list its
            // blocks are then orderable by other streams (one wait on the event), where an open
            // batch would block them until one device-wide synchronization covered it.
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

    /// Moves blocks from an over-budget shard to the shared list, in one batch under one lock: the
    /// LIFO's oldest frees beyond its depth, then the list's smallest blocks until the shard holds
    /// half its budget.
    pub(super) fn spill(&self, shard: &Mutex<Shard>) {
        let mut g = self.lock_shared();
        let mut s = lock(shard);
        let target = self.shard_budget.load(Ordering::Relaxed) / 2;
        let mut out = std::mem::take(&mut s.evicted);
        s.evict(self.cache.recent, target, &mut out);
        for b in out.drain(..) {
            self.insert_free(&mut g, b.addr, b.size, b.region, b.tag);
        }
        s.evicted = out;
        drop(s);
        let over = self.over_release_threshold(&g, None);
        drop(g);
        if over {
            self.release_over_threshold();
        }
    }

    /// False for a range a fixed-size core cannot have handed out (not one whole block on a block
    /// boundary of `region`): its list holds equal blocks only, so such a free must not reach it.
    fn on_boundary(&self, addr: usize, size: usize, region: usize) -> bool {
        match self.growth {
            Growth::Chunks { unit, .. } => {
                size == unit && addr >= region && (addr - region) % unit == 0
            }
            Growth::Pool { .. } | Growth::Mapped => true,
        }
    }

    fn not_a_block(&self, addr: usize, size: usize) -> Error {
        Error::invalid(format!(
            "{}: [{addr:#x}, +{size}) is not one of its blocks",
            self.name
        ))
    }

    /// Returns a block from a shard to the shared list. A block freed twice into two shards (only
    /// frees not verified against the live allocations can be) is found here at the latest
    /// (dropped, with an error logged, rather than handed out twice).
    pub(super) fn insert_free(
        &self,
        g: &mut Global,
        addr: usize,
        size: usize,
        region: usize,
        tag: Pending,
    ) {
        let in_region = g
            .regions
            .get(&region)
            .is_some_and(|&len| region <= addr && addr + size <= region + len)
            && self.on_boundary(addr, size, region);
        let unverified = self.unverified_in_shards.load(Ordering::Relaxed);
        if unverified {
            g.free.keep_address_order();
        }
        if in_region && !(unverified && g.free.overlaps(addr, size)) {
            g.free.insert(addr, size, region, tag);
        } else {
            tracing::error!(
                "{}: dropping a bad cached block [{addr:#x}, +{size})",
                self.name
            );
        }
    }
}
