//! What a [`Core`] tells about itself: exact counters, its regions, and (tests) its invariants.

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::blocks::Global;
use super::front::Hot;
use super::shard::Shard;
use super::{lock, Core};

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

impl Core {
    /// Exact counters (takes every lock).
    pub(crate) fn stats(&self) -> CoreStats {
        let (g, shards, hot) = self.lock_all();
        let hot_bytes: usize = hot.iter().map(|h| h.size).sum();
        let cached_bytes = shards.iter().map(|s| s.bytes()).sum::<usize>() + hot_bytes;
        let cached_blocks = shards.iter().map(|s| s.blocks()).sum::<usize>() + hot.len();
        CoreStats {
            pool_size: g.pool_size,
            used: shards
                .iter()
                .fold(g.used, |u, s| u.wrapping_add(s.used))
                .wrapping_sub(hot_bytes),
            free: g.free.free_bytes() + g.detached + cached_bytes,
            cached_bytes,
            cached_blocks,
            free_blocks: g.free.len() + cached_blocks,
            largest_free: g.free.largest(),
            upstream_blocks: g.regions.len(),
            upstream_allocations: g.upstream_allocations,
            upstream_releases: g.upstream_releases,
        }
    }

    /// Every free block, cached ones included, as `(addr, size)` (taken under every lock, as
    /// [`Core::stats`]).
    pub(super) fn free_spans(&self) -> Vec<(usize, usize)> {
        let (g, shards, hot) = self.lock_all();
        let mut spans: Vec<(usize, usize)> = g.free.iter().map(|b| (b.addr, b.size)).collect();
        for s in &shards {
            spans.extend(s.recent.iter().map(|b| (b.addr, b.size)));
            spans.extend(s.free.iter().map(|b| (b.addr, b.size)));
        }
        spans.extend(hot.iter().map(|h| (h.addr, h.size)));
        spans
    }

    /// Every lock at once (global first, as everywhere), at a moment when no block is leaving an
    /// ending thread's front (no block is between two places), and the blocks in fronts then.
    fn lock_all(&self) -> (MutexGuard<'_, Global>, Vec<MutexGuard<'_, Shard>>, Vec<Hot>) {
        loop {
            let g = lock(&self.global);
            let shards: Vec<MutexGuard<'_, Shard>> =
                self.shards.iter().map(|s| lock(&s.0)).collect();
            if let Some(hot) = self.settled_front_blocks() {
                return (g, shards, hot);
            }
            // The ending thread needs these locks to finish.
            drop((shards, g));
            std::thread::yield_now();
        }
    }

    /// The blocks in fronts, left there (the caller holds `global`: drainers are serialized).
    #[cfg(test)]
    pub(super) fn front_blocks(&self) -> Vec<Hot> {
        lock(&self.fronts).iter().filter_map(|f| f.peek()).collect()
    }

    /// The blocks in fronts, left there, or `None` while a block is leaving an ending thread's front.
    fn settled_front_blocks(&self) -> Option<Vec<Hot>> {
        let fronts = lock(&self.fronts);
        (self.leaving.load(Ordering::Acquire) == 0)
            .then(|| fronts.iter().filter_map(|f| f.peek()).collect())
    }

    /// The pool's size.
    pub(crate) fn pool_size(&self) -> usize {
        lock(&self.global).pool_size
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

    /// [`Core::regions`], or `None` when the host has no memory for the list.
    pub(crate) fn try_regions(&self) -> Option<Vec<(usize, usize)>> {
        let g = lock(&self.global);
        let mut regions = Vec::new();
        regions.try_reserve_exact(g.regions.len()).ok()?;
        regions.extend(g.regions.iter().map(|(&a, &s)| (a, s)));
        Some(regions)
    }

    /// The start and size of the upstream block holding `addr`.
    pub(crate) fn region_containing(&self, addr: usize) -> Option<(usize, usize)> {
        let g = lock(&self.global);
        let (&start, &size) = g.regions.range(..=addr).next_back()?;
        (addr < start + size).then_some((start, size))
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

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        // As `stats`: not while an ending thread's front block is between two places (checked
        // once here: the callers' threads are done but for their thread-local destructors).
        self.wait_while_blocks_leave_fronts();
        let g = lock(&self.global);
        g.free.check_invariants();
        let mut stats_free = g.free.free_bytes() + g.detached;
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
        match &self.memory {
            super::Memory::Upstream(_) => assert_eq!(
                g.regions.values().sum::<usize>(),
                g.pool_size,
                "regions and pool size disagree"
            ),
            super::Memory::Mapped(m) => m.check_invariants(&g),
        }
        assert_eq!(stats_free + used, g.pool_size, "free + used != pool size");
    }
}
