//! The shared free list of a [`Core`] and the books kept with it under the shared lock.

use std::collections::BTreeMap;

use crate::mr::detail::fixed_list::FixedList;
use crate::mr::detail::free_list::{FreeBlock, FreeList};

use super::key::Pending;
use super::shard::Regions;
#[cfg(doc)]
use super::Core;

/// The shared free list: coalescing (pools), or equal blocks in LIFOs per tag class (fixed-size
/// cores, where coalescing and size indexing would be wasted work: see `fixed_list.rs`).
#[derive(Debug)]
pub(super) enum Blocks {
    Coalescing(FreeList<Pending>),
    Fixed(FixedList<Pending>),
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks::Coalescing(FreeList::default())
    }
}

impl Blocks {
    pub(super) fn free_bytes(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.free_bytes(),
            Blocks::Fixed(l) => l.free_bytes(),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.len(),
            Blocks::Fixed(l) => l.len(),
        }
    }

    pub(super) fn largest(&self) -> usize {
        match self {
            Blocks::Coalescing(l) => l.largest(),
            Blocks::Fixed(l) => l.largest(),
        }
    }

    pub(super) fn overlaps(&self, addr: usize, size: usize) -> bool {
        match self {
            Blocks::Coalescing(l) => l.overlaps(addr, size),
            Blocks::Fixed(l) => l.overlaps(addr, size),
        }
    }

    /// Keeps a coalescing list in address order from now on, for the overlap checks of frees the
    /// live set did not verify (see [`FreeList::keep_address_order`]).
    pub(super) fn keep_address_order(&mut self) {
        if let Blocks::Coalescing(l) = self {
            l.keep_address_order();
        }
    }

    pub(super) fn insert(&mut self, addr: usize, size: usize, region: usize, tag: Pending) {
        match self {
            Blocks::Coalescing(l) => l.insert(addr, size, region, tag),
            Blocks::Fixed(l) => l.insert(addr, size, region, tag),
        }
    }

    pub(super) fn remove_whole_region(&mut self, region: usize, size: usize) -> Option<Pending> {
        match self {
            Blocks::Coalescing(l) => l.remove_whole_region(region, size),
            Blocks::Fixed(l) => l.remove_whole_region(region, size),
        }
    }

    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = FreeBlock<Pending>> + '_> {
        match self {
            Blocks::Coalescing(l) => Box::new(l.iter()),
            Blocks::Fixed(l) => Box::new(l.iter()),
        }
    }

    pub(super) fn retag(&mut self, f: impl FnMut(&mut Pending)) {
        match self {
            Blocks::Coalescing(l) => l.retag(f),
            Blocks::Fixed(l) => l.retag(f),
        }
    }

    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        match self {
            Blocks::Coalescing(l) => l.check_invariants(),
            Blocks::Fixed(l) => l.check_invariants(),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Global {
    pub(super) free: Blocks,
    /// Upstream blocks: start → size.
    pub(super) regions: BTreeMap<usize, usize>,
    pub(super) pool_size: usize,
    pub(super) upstream_allocations: u64,
    pub(super) upstream_releases: u64,
    /// `regions` as shards see it, rebuilt when it changes.
    pub(super) snapshot: Regions,
    /// Bytes handed out through this list less bytes freed into it (wrapping: blocks move between
    /// shards and the list). With the shards' counters it sums to the bytes in use.
    pub(super) used: usize,
    /// What requests passed over in their scans of this list.
    pub(super) passed: Passed,
    /// Free bytes taken out of the list for a while, to be given back granule by granule with the
    /// shared lock released (a mapped core's release): still free, counted with the free bytes.
    pub(super) detached: usize,
}

/// What [`Core::take`]'s scans for a block to order after passed over.
#[derive(Debug, Default)]
pub(super) struct Passed {
    /// A block that fits only because the block waits for an open batch of another stream (see
    /// [`Core::cover_open_batches`]): set by the current request's scans.
    pub(super) blocked: bool,
    /// Blocks that fit which requests passed over since the last [`Core::cover_open_batches`]
    /// because they wait only for batches nobody will close (of threads that ended): only that
    /// synchronization frees them, and until it runs every request scans past them again.
    pub(super) stranded: usize,
    /// Requests that looked past the unordered blocks, and the stranded blocks they passed over
    /// (tests measure the scans).
    #[cfg(test)]
    pub(super) scans: (u64, u64),
}

impl Passed {
    /// Notes one scan: whether it passed over a blocked block, and how many stranded ones.
    pub(super) fn scanned(&mut self, blocked: bool, stranded: usize) {
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
    pub(super) fn region_of(&self, addr: usize, size: usize) -> Option<usize> {
        let (&start, &len) = self.regions.range(..=addr).next_back()?;
        (addr.checked_add(size)? <= start + len).then_some(start)
    }
}
