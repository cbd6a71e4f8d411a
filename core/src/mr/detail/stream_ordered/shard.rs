//! The per-thread caches (shards) in front of the shared free list, and their limits.

use std::sync::{Arc, Mutex};

use crate::aligned::is_aligned;
use crate::mr::detail::free_list::{BlockId, FreeList};

use super::key::{Marker, Pending, StreamKey, TagClass};

/// Limits of the per-thread caches (shards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheLimits {
    /// Requests and frees above this size never touch a shard.
    pub max_block: usize,
    /// Blocks a shard's LIFO of recent frees keeps (exact-size reuse); beyond that, the oldest go
    /// back to the shared list in batches of [`SPILL_BATCH`](super::free::SPILL_BATCH).
    pub recent: usize,
    /// Bytes a shard may always hold.
    pub min_bytes: usize,
    /// Bytes a shard may hold at most; between the two, a shard may hold
    /// `pool size / (2 × shards)`, so at most half of a large pool sits in shards.
    pub max_bytes: usize,
    /// Bytes a shard miss takes from the shared list at once (whole multiples of the request), so
    /// the next requests of the thread are served from its shard; only from a free block of at
    /// least twice this size, so that refills cut large blocks and best fit keeps filling holes.
    pub refill: usize,
}

impl CacheLimits {
    /// What the pool uses: blocks up to 4 MiB (the largest default bin), 16 recent blocks, 8 to
    /// 256 MiB per shard, 64 MiB refills. The upper values are for random churn from many threads
    /// in a large pool (RMM's random workload: sizes up to 1 MiB, hundreds live per thread), where
    /// smaller shards send many more operations to the shared lock (docs/design/pool.md,
    /// "Measurements behind the code"). Small pools are unaffected: the budget is at most
    /// `pool / (2 × shards)`, a refill at most the room left.
    pub(crate) const DEFAULT: CacheLimits = CacheLimits {
        max_block: 4 << 20,
        recent: 16,
        min_bytes: 8 << 20,
        max_bytes: 256 << 20,
        refill: 64 << 20,
    };
    /// What fixed-size resources and binning's bins use: 8 to 64 MiB per shard, 16 MiB refills
    /// (bins are many, and each holds one size: larger shards only hold memory back).
    pub(crate) const FIXED: CacheLimits = CacheLimits {
        max_bytes: 64 << 20,
        refill: 16 << 20,
        ..Self::DEFAULT
    };
    /// No caching: every call goes to the shared list (for comparisons and some tests).
    #[cfg(test)]
    pub(crate) const OFF: CacheLimits = CacheLimits {
        max_block: 0,
        recent: 0,
        min_bytes: 0,
        max_bytes: 0,
        refill: 0,
    };
    /// Small limits, so the tests' small pools exercise every shard path (refills, the list,
    /// evictions to the shared list, budgets that follow the pool's size).
    #[cfg(test)]
    pub(crate) const TIGHT: CacheLimits = CacheLimits {
        max_block: 64 << 10,
        recent: 2,
        min_bytes: 16 << 10,
        max_bytes: 256 << 10,
        refill: 32 << 10,
    };
    /// The three configurations the property tests pick from.
    #[cfg(test)]
    pub(crate) const ALL: [CacheLimits; 3] =
        [CacheLimits::OFF, CacheLimits::DEFAULT, CacheLimits::TIGHT];

    pub(super) fn enabled(&self) -> bool {
        self.max_block > 0
    }

    /// A shard's byte budget in a pool of `pool_size` bytes with `shards` shards.
    pub(super) fn budget(&self, pool_size: usize, shards: usize) -> usize {
        (pool_size / (2 * shards)).clamp(self.min_bytes, self.max_bytes.max(self.min_bytes))
    }
}

#[derive(Debug)]
pub(super) struct Cached {
    pub(super) addr: usize,
    pub(super) size: usize,
    pub(super) region: usize,
    pub(super) tag: Pending,
}

/// Upstream blocks as `(start, size)`, sorted by start.
/// (A vector, so that the copy is made with a fallible reservation: see `Core::regions_changed`.)
pub(super) type Regions = Arc<Vec<(usize, usize)>>;

/// The start of the region of `regions` that holds `[addr, addr + size)`.
pub(super) fn region_in(regions: &[(usize, usize)], addr: usize, size: usize) -> Option<usize> {
    let i = regions
        .partition_point(|&(start, _)| start <= addr)
        .checked_sub(1)?;
    let (start, len) = regions[i];
    (addr.checked_add(size)? <= start + len).then_some(start)
}

/// A per-thread cache: a LIFO of recent frees (exact-size reuse at the cost of a short scan) and a
/// small coalescing free list holding what refills left (best fit for mixed sizes). Frees never go
/// through the list: that would cost list work on every free, and most frees of a churning
/// workload go back to the shared list anyway.
#[derive(Debug, Default)]
pub(super) struct Shard {
    /// Push with [`Shard::push_recent`], which keeps `recent_sizes` a superset.
    pub(super) recent: Vec<Cached>,
    pub(super) recent_bytes: usize,
    /// A bit per size class ([`size_bit`]) of every block in `recent`, and perhaps of some that
    /// left it: a request whose bit is clear skips the LIFO's scan.
    pub(super) recent_sizes: u64,
    pub(super) free: FreeList<Pending>,
    /// The pool's regions as of generation `regions_gen` (see
    /// [`Core::regions_gen`](super::Core::regions_gen)): a free finds its region here without
    /// taking the shared lock.
    pub(super) regions: Regions,
    pub(super) regions_gen: u64,
    /// Bytes handed out by this shard less bytes freed into it (wrapping; see
    /// [`Global::used`](super::Global::used)). Per shard, under its lock: no counter shared by all
    /// threads is written per operation.
    pub(super) used: usize,
    /// The open batches of the streams this shard's threads free on that only a call may name,
    /// oldest first (see the glossary).
    pub(super) open: Vec<Batch>,
    /// Room for what [`Shard::evict`] takes out, kept between spills (empty between them).
    pub(super) evicted: Vec<Cached>,
}

/// Frees on one stream not yet captured by an event (see the glossary).
#[derive(Debug)]
pub(super) struct Batch {
    pub(super) marker: Arc<Marker>,
    pub(super) frees: u32,
    pub(super) bytes: usize,
}

/// The bit of `size` in [`Shard::recent_sizes`].
#[inline]
fn size_bit(size: usize) -> u64 {
    1 << ((size as u64 >> 8).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

impl Shard {
    /// Puts `b` on top of the LIFO of recent frees.
    #[inline]
    pub(super) fn push_recent(&mut self, b: Cached) {
        self.recent_sizes |= size_bit(b.size);
        self.recent_bytes += b.size;
        self.recent.push(b);
    }

    /// Recomputes `recent_sizes` from the blocks in `recent` (after blocks left it). With one bit
    /// set (a fixed-size core's LIFO: one size), only an empty LIFO clears it.
    pub(super) fn resize_filter(&mut self) {
        self.recent_sizes = if self.recent.is_empty() {
            0
        } else if self.recent_sizes & self.recent_sizes.wrapping_sub(1) == 0 {
            self.recent_sizes
        } else {
            self.recent.iter().fold(0, |f, b| f | size_bit(b.size))
        };
    }

    pub(super) fn bytes(&self) -> usize {
        self.recent_bytes + self.free.free_bytes()
    }

    pub(super) fn blocks(&self) -> usize {
        self.recent.len() + self.free.len()
    }

    /// Takes a block of exactly `size` bytes at an `alignment`-aligned address that `key` may use
    /// without ordering: the latest such free, else the best fit of the list among such blocks.
    ///
    /// Only the `depth` latest frees are looked at: the LIFO holds up to `depth` plus a spill batch,
    /// and when a thread allocates on one stream and frees on another (RMM's multi-stream shape)
    /// none of them is usable, so a scan of all of them would cost every allocation for nothing.
    pub(super) fn take(
        &mut self,
        key: StreamKey,
        size: usize,
        alignment: usize,
        depth: usize,
    ) -> Option<usize> {
        let from = if self.recent_sizes & size_bit(size) == 0 {
            self.recent.len()
        } else {
            self.recent.len().saturating_sub(depth)
        };
        let latest = self.recent[from..]
            .iter()
            .rposition(|b| b.size == size && is_aligned(b.addr, alignment) && b.tag.only(key));
        if let Some(i) = latest.map(|i| from + i) {
            let b = self.recent.remove(i);
            self.recent_bytes -= size;
            return Some(b.addr);
        }
        let (block, start, _) = best_unordered(&self.free, key, size, alignment)?;
        self.free.take_range_untagged(block, start, size, None);
        Some(start)
    }

    /// Moves to `out` the oldest recent frees beyond `depth`, then what the shard holds above
    /// `target` bytes: the smallest blocks of the list first (least useful to the thread, most
    /// likely to coalesce in the shared list), then more of the oldest recent frees.
    pub(super) fn evict(&mut self, depth: usize, target: usize, out: &mut Vec<Cached>) {
        let mut k = self.recent.len().saturating_sub(depth);
        let from = out.len();
        out.extend(self.recent.drain(..k));
        self.recent_bytes -= out[from..].iter().map(|b| b.size).sum::<usize>();
        while self.bytes() > target {
            let Some(b) = self.free.pop_smallest() else {
                break;
            };
            out.push(Cached {
                addr: b.addr,
                size: b.size,
                region: b.region,
                tag: b.tag,
            });
        }
        k = 0;
        while self.bytes() > target && k < self.recent.len() {
            self.recent_bytes -= self.recent[k].size;
            k += 1;
        }
        out.extend(self.recent.drain(..k));
        self.resize_filter();
    }
}

/// The best fit in `list` for `size` bytes at an `alignment`-aligned address among the blocks
/// `key` may use without any ordering (untagged, or pending on `key` alone), as `(block, start, end
/// of the block)`: a good fit in each of the two classes (see `free_list.rs`), the smaller one.
pub(super) fn best_unordered(
    list: &FreeList<Pending>,
    key: StreamKey,
    size: usize,
    alignment: usize,
) -> Option<(BlockId, usize, usize)> {
    let untagged = list.good_fit_in(TagClass::Empty, size, alignment);
    let own = list.good_fit_in(TagClass::Owner(key), size, alignment);
    // The smaller block, the untagged one on a tie.
    let best = match (untagged, own) {
        (Some(u), Some(o)) if (o.len, o.block) < (u.len, u.block) => o,
        (Some(u), _) => u,
        (None, o) => o?,
    };
    Some((best.id, best.start, best.block + best.len))
}

/// One shard per cache line pair, so threads on different shards do not share lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Padded(pub(super) Mutex<Shard>);
