//! Growth from the upstream and giving memory back: new regions, wholly free regions returned
//! (on out-of-memory, `release_unused`, and at drop), each after its streams were synchronized.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::aligned::{align_down, align_up, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::fragmentation::free_space;
use crate::resource::MemoryResource;
use crate::timeline::{self, Action};

use super::blocks::{Blocks, Global};
use super::key::{Marker, Pending, PendingOn, StreamKey};
use super::mapped::Wait;
use super::{lock, Core, Growth, Memory};

/// What [`Core::grow`] did.
pub(super) enum Grown {
    /// Grew and handed out the request at this address.
    Addr(usize),
    /// The upstream is out of memory: these wholly free regions, out of the books now, are to be
    /// synchronized and given back with the shared lock released ([`Core::give_back`]).
    GiveBack(Vec<(usize, usize, Pending)>),
}

impl Core {
    pub(super) fn add_region(&self, g: &mut Global, addr: usize, size: usize, tag: Pending) {
        g.free.insert(addr, size, addr, tag);
        g.regions.insert(addr, size);
        g.pool_size += size;
        g.upstream_allocations += 1;
        self.regions_changed(g);
    }

    /// Call after every change of `g.regions` (with `global` held).
    pub(super) fn regions_changed(&self, g: &mut Global) {
        let mut snapshot = Vec::new();
        // Without host memory for the copy, the shards get an empty one: their frees then take
        // the shared list, which finds every region.
        if snapshot.try_reserve_exact(g.regions.len()).is_ok() {
            snapshot.extend(g.regions.iter().map(|(&a, &s)| (a, s)));
        }
        g.snapshot = Arc::new(snapshot);
        self.regions_gen.fetch_add(1, Ordering::Release);
        self.pool_size_changed(g);
    }

    /// Call after every change of `g.pool_size` (with `global` held): the shards' budget follows it.
    pub(super) fn pool_size_changed(&self, g: &Global) {
        self.shard_budget.store(
            self.cache.budget(g.pool_size, self.shards.len()),
            Ordering::Relaxed,
        );
    }

    /// Grows from upstream (RMM's `expand_pool`) and hands out `size` bytes of the new region.
    ///
    /// When the upstream is out of memory even for the request alone and `may_give_back` is set,
    /// the wholly free regions are taken out of the books and returned as [`Grown::GiveBack`]: the
    /// caller gives them back after releasing `global` (never a blocking driver call under the
    /// shared lock) and calls again without `may_give_back`.
    pub(super) fn grow(
        &self,
        g: &mut Global,
        stream: Stream,
        key: StreamKey,
        size: usize,
        alignment: usize,
        may_give_back: bool,
    ) -> Result<Grown> {
        let upstream = match &self.memory {
            Memory::Upstream(upstream) => upstream,
            Memory::Mapped(mapped) => {
                return self
                    .grow_mapped(g, mapped, key, size, alignment)
                    .map(Grown::Addr)
            }
        };
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
                        "Maximum pool size exceeded: the pool holds {} of at most {max} bytes; {}",
                        g.pool_size,
                        free_space(g.free.free_bytes(), g.free.largest())
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
            Growth::Mapped => unreachable!("a mapped core grows in place (above)"),
        };
        let mut try_size = first;
        let cause = loop {
            match upstream.allocate(stream, try_size, DEFAULT_ALIGNMENT) {
                Ok(ptr) => {
                    // The new memory is ordered on `stream` (stream-ordered upstreams allocate there).
                    let tag = if key.needs_marker() {
                        // Lock order: `global` (held), then the shard.
                        self.join_batch(&mut lock(self.shard()), key, try_size, true)
                    } else {
                        Pending::one(PendingOn::Stream(key))
                    };
                    self.add_region(g, ptr as usize, try_size, tag);
                    if timeline::is_recording() {
                        timeline::record_segment_of(
                            Action::SegmentAlloc,
                            self.name,
                            ptr as usize,
                            try_size,
                            stream,
                        );
                    }
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
                            Growth::Pool { .. } | Growth::Mapped => {
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
            "Maximum pool size exceeded (the upstream failed: {cause}); the pool holds {} bytes, {}",
            g.pool_size,
            free_space(g.free.free_bytes(), g.free.largest())
        )))
    }

    /// Takes every wholly free region out of the pool's books (the caller holds `global` and has
    /// flushed the caches); they still have to be synchronized and given back ([`Core::give_back`]).
    fn detach_free_regions(&self, g: &mut Global) -> Vec<(usize, usize, Pending)> {
        if matches!(self.memory, Memory::Mapped(_)) {
            // The one region is the reservation: its granules go back, not the region.
            return Vec::new();
        }
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
    pub(super) fn give_back(
        &self,
        regions: Vec<(usize, usize, Pending)>,
    ) -> (usize, Vec<(usize, usize, Pending)>, Option<Error>) {
        let Memory::Upstream(upstream) = &self.memory else {
            return (0, regions, None);
        };
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
            match unsafe { upstream.deallocate_sync(addr as *mut u8, size, DEFAULT_ALIGNMENT) } {
                Ok(()) => {
                    released += size;
                    if timeline::is_recording() {
                        timeline::record_segment_of(
                            Action::SegmentFree,
                            self.name,
                            addr,
                            size,
                            Stream::DEFAULT,
                        );
                    }
                }
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

    pub(super) fn readmit(&self, g: &mut Global, regions: Vec<(usize, usize, Pending)>) {
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

    /// Gives every wholly free upstream block back, after synchronizing the streams that may still
    /// use it; drops idle streams from the tags of the blocks that stay. Returns the bytes released.
    pub(crate) fn release_unused(&self) -> Result<usize> {
        if matches!(self.memory, Memory::Mapped(_)) {
            return self.release_mapped(Wait::Block);
        }
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

    /// Blocks until no queued work in `tag` can still use its block (an open batch: the whole
    /// device, once).
    pub(super) fn synchronize(&self, tag: &Pending) -> Result<()> {
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
        let fronts = std::mem::take(
            self.fronts
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
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
        let regions = std::mem::take(&mut g.regions);
        // A mapped core's range unmaps everything when it drops, after this.
        let Memory::Upstream(upstream) = &self.memory else {
            return;
        };
        for (addr, size) in regions {
            // SAFETY: every region came from `upstream.allocate` with this size and alignment; its
            // free blocks' streams were synchronized above, and allocations still live at drop are
            // the caller's breach of contract (RMM frees them too).
            let returned =
                unsafe { upstream.deallocate_sync(addr as *mut u8, size, DEFAULT_ALIGNMENT) };
            if let Err(e) = returned {
                tracing::error!(
                    "{}: returning [{addr:#x}, +{size}) upstream: {e}",
                    self.name
                );
            }
        }
    }
}
