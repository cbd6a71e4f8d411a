//! An address-ordered, coalescing free list with good-fit lookup in O(1).
//!
//! Glossary:
//! - *block*: a free range `[addr, addr + size)`;
//! - *region*: the upstream allocation a block lies in (identified by its start address). Blocks
//!   coalesce only within one region, so a region that is wholly free can be handed back;
//! - *tag*: what the owner needs to remember about a free block (for a pool: the streams whose
//!   queued work may still use it). Coalescing merges tags with [`BlockTag::merge`];
//! - *class*: a coarse summary of a tag ([`BlockTag::class`]; for a pool: no stream, one stream,
//!   several). Each class has its own size index, so an owner finds a fit among the blocks of the
//!   classes it prefers without looking at the others (a pool's stream looks at the blocks it can
//!   use without waiting first);
//! - *size bin*: a range of sizes, as in TLSF (two-level segregated fit): the powers of two, each
//!   cut into [`SUB_BINS`](bins::SUB_BINS) equal steps, so a bin's sizes differ by at most 1/16 of
//!   its lower bound. Each class keeps, per bin, a doubly linked list of its blocks (the latest
//!   first), and two levels of bitmaps of the bins that are not empty.
//!
//! Where each operation looks:
//! - a fit is found by size: the bitmaps name the first non-empty bin at or above the request's
//!   own bin without a search, and the tightest of a few blocks there is taken
//!   ([`FreeList::good_fit_in`]); taking it, or splitting it, only relinks lists;
//! - coalescing finds a freed range's neighbours by exact address: the block that ends where the
//!   range starts and the one that starts where it ends, two hash-map lookups
//!   (`free_list/index.rs`). Ordered questions (the overlap check of a free that was not verified,
//!   the block holding an address, iteration) use a B-tree of block ends once
//!   [`FreeList::keep_address_order`] asked for it, else a scan.
//!
//! A *good* fit, not always the best: the tightest of the first [`OWN_BIN_SCAN`] blocks of the
//! request's own bin (not every one of them holds the request), else of the first [`BIN_SCAN`]
//! fits of the lowest larger bin that has one, else of the rest of the own bin. Every block that
//! fits is still found: a request fails only when none does. The few extra blocks looked at are
//! not for speed: under random churn, taking the first fit of a bin instead of the tightest of a
//! few left enough slivers that the pool's untagged memory got tagged by coalescing, and many more
//! requests needed the shared lock (docs/design/pool.md, "The free list").
//!
//! Invariants (checked by `FreeList::check_invariants` in tests):
//! - no two blocks overlap, and no two adjacent blocks of one region stay separate;
//! - every block is in the address index under its start and its end, and in exactly one bin
//!   list: the bin of its size in the index of its tag's class; a bin's bit is set exactly when
//!   its list is not empty, and no empty class is kept;
//! - `free_bytes` is the sum of the block sizes.

use crate::aligned::align_up;

use bins::{bin_of, SizeBins, BIN_SCAN, NIL, OWN_BIN_SCAN};
#[cfg(test)]
use bins::{LEVELS, SUB_BINS};
use index::AddressIndex;

mod bins;
mod fits;
mod index;

/// What a free block carries besides its range.
pub(crate) trait BlockTag: Clone + Default + std::fmt::Debug {
    /// Which size index a block with this tag is in.
    type Class: Copy + Ord + std::fmt::Debug;
    /// The class of this tag; it must depend on the tag alone.
    fn class(&self) -> Self::Class;
    /// Folds `other` into `self` when two blocks coalesce.
    fn merge(&mut self, other: &Self);
}

impl BlockTag for () {
    type Class = ();
    fn class(&self) {}
    fn merge(&mut self, _other: &Self) {}
}

/// A free block as handed out by [`FreeList::take_best_fit`] and friends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FreeBlock<T> {
    /// Start address.
    pub addr: usize,
    /// Length in bytes.
    pub size: usize,
    /// Start address of the region (upstream allocation) the block lies in.
    pub region: usize,
    /// The owner's tag.
    pub tag: T,
}

/// A free block of a [`FreeList`], as [`FreeList::fits_in`] names it; valid until the list
/// changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockId(u32);

/// A free block that can serve a request, as listed by [`FreeList::fits_in`].
#[derive(Debug)]
pub(crate) struct Fit<'a, T> {
    /// The block, for [`FreeList::take_range`].
    pub id: BlockId,
    /// Start address of the free block.
    pub block: usize,
    /// Where the request would start inside it (the block start rounded up to the alignment).
    pub start: usize,
    /// The free block's length (from `block`).
    pub len: usize,
    /// The block's tag.
    pub tag: &'a T,
}

/// A free block's record.
#[derive(Clone, Debug)]
struct Node<T> {
    addr: usize,
    size: usize,
    region: usize,
    tag: T,
    /// The slot of its class's [`SizeBins`] in `FreeList::bins`.
    slot: u32,
    /// Neighbours in its bin's list.
    prev: u32,
    next: u32,
}

impl<T> Node<T> {
    fn end(&self) -> usize {
        self.addr + self.size
    }
}

/// Free blocks, ordered by address and indexed by size per class of tag.
#[derive(Debug)]
pub(crate) struct FreeList<T: BlockTag = ()> {
    /// Every block's record; `vacant` lists the unused ones.
    nodes: Vec<Node<T>>,
    vacant: Vec<u32>,
    /// Blocks by start and end address.
    index: AddressIndex,
    /// Per class with blocks, in order, the slot of its size index in `bins`.
    classes: Vec<(T::Class, u32)>,
    /// Size indexes; those of no class (`idle`) are empty, kept for the next new class.
    bins: Vec<SizeBins>,
    idle: Vec<u32>,
    free_bytes: usize,
}

impl<T: BlockTag> Default for FreeList<T> {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            vacant: Vec::new(),
            index: AddressIndex::default(),
            classes: Vec::new(),
            bins: Vec::new(),
            idle: Vec::new(),
            free_bytes: 0,
        }
    }
}

impl<T: BlockTag> FreeList<T> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Total free bytes.
    pub(crate) fn free_bytes(&self) -> usize {
        self.free_bytes
    }

    /// Number of free blocks.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// True when nothing is free.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// Keeps the blocks in address order from now on, so that [`FreeList::overlaps`] and
    /// [`FreeList::block_holding`] are O(log n) rather than a scan (see `free_list/index.rs`).
    pub(crate) fn keep_address_order(&mut self) {
        self.index.keep_order();
    }

    /// Answers ordered questions by scanning (tests of that path).
    #[cfg(test)]
    pub(crate) fn without_address_order(mut self) -> Self {
        self.index.drop_order();
        self
    }

    /// The size of the largest free block (0 when empty).
    pub(crate) fn largest(&self) -> usize {
        self.classes
            .iter()
            .filter_map(|&(_, slot)| {
                let bins = &self.bins[slot as usize];
                let bin = bins.last()?;
                self.bin_blocks(bins, bin).map(|(_, n)| n.size).max()
            })
            .max()
            .unwrap_or(0)
    }

    /// The classes that have free blocks, in order.
    pub(crate) fn classes(&self) -> impl Iterator<Item = T::Class> + '_ {
        self.classes.iter().map(|&(class, _)| class)
    }

    /// The blocks of list `at` onwards, with their ids.
    fn list_from(&self, mut at: u32) -> impl Iterator<Item = (u32, &Node<T>)> {
        std::iter::from_fn(move || {
            let id = at;
            let node = self.nodes.get(id as usize)?;
            at = node.next;
            Some((id, node))
        })
    }

    /// The blocks of `bin`, with their ids.
    fn bin_blocks<'a>(
        &'a self,
        bins: &SizeBins,
        bin: usize,
    ) -> impl Iterator<Item = (u32, &'a Node<T>)> {
        self.list_from(bins.head(bin))
    }

    /// The size index of `class`, if it has blocks.
    fn bins_of(&self, class: T::Class) -> Option<&SizeBins> {
        let i = self.classes.binary_search_by(|(c, _)| c.cmp(&class)).ok()?;
        Some(&self.bins[self.classes[i].1 as usize])
    }

    /// The tightest block of list `at` onwards that holds `size` bytes at an `alignment`-aligned
    /// start, as `(id, start)`, looking at `scan` blocks (after the first fit, with `past_fit`);
    /// and where the look stopped.
    fn tightest(
        &self,
        mut at: u32,
        scan: usize,
        past_fit: bool,
        size: usize,
        alignment: usize,
    ) -> (Option<(u32, usize)>, u32) {
        let mut best: Option<(u32, usize, usize)> = None;
        let mut seen = 0;
        while at != NIL && (seen < scan || (past_fit && best.is_none())) {
            let node = &self.nodes[at as usize];
            if let Some(start) = align_up(node.addr, alignment) {
                let fits = start.checked_add(size).is_some_and(|e| e <= node.end());
                if fits && best.is_none_or(|(_, _, len)| node.size < len) {
                    best = Some((at, start, node.size));
                }
            }
            if best.is_some() || !past_fit {
                seen += 1;
            }
            at = node.next;
        }
        (best.map(|(id, start, _)| (id, start)), at)
    }

    /// A good fit of class `class` for `size` bytes at an `alignment`-aligned start (see the
    /// module docs): the tightest of the first [`OWN_BIN_SCAN`] blocks of the request's own bin,
    /// else of the first [`BIN_SCAN`] fits of the lowest larger bin that has one, else of the rest
    /// of the own bin.
    pub(crate) fn good_fit_in(
        &self,
        class: T::Class,
        size: usize,
        alignment: usize,
    ) -> Option<Fit<'_, T>> {
        let bins = self.bins_of(class)?;
        let own = bin_of(size.max(1));
        let (found, rest) = self.tightest(bins.head(own), OWN_BIN_SCAN, false, size, alignment);
        let mut found = found;
        let mut bin = own;
        while found.is_none() {
            let Some(next) = bins.first_from(bin + 1) else {
                found = self.tightest(rest, usize::MAX, false, size, alignment).0;
                break;
            };
            bin = next;
            found = self
                .tightest(bins.heads[bin], BIN_SCAN, true, size, alignment)
                .0;
        }
        let (id, start) = found?;
        let node = &self.nodes[id as usize];
        Some(Fit {
            id: BlockId(id),
            block: node.addr,
            start,
            len: node.size,
            tag: &node.tag,
        })
    }

    /// The slot of `class`'s size index, made when the class has none yet.
    #[inline]
    fn slot_of(&mut self, class: T::Class) -> u32 {
        match self.classes.binary_search_by(|(c, _)| c.cmp(&class)) {
            Ok(i) => self.classes[i].1,
            Err(i) => {
                let slot = self.idle.pop().unwrap_or_else(|| {
                    self.bins.push(SizeBins::new());
                    (self.bins.len() - 1) as u32
                });
                self.classes.insert(i, (class, slot));
                slot
            }
        }
    }

    /// Puts block `id` at the head of its bin in the index of its tag's class.
    #[inline]
    fn link(&mut self, id: u32) {
        let class = self.nodes[id as usize].tag.class();
        let slot = self.slot_of(class);
        self.link_to(id, slot);
    }

    /// Puts block `id` at the head of its bin in the size index in `slot` (its class's).
    #[inline]
    fn link_to(&mut self, id: u32, slot: u32) {
        let bin = bin_of(self.nodes[id as usize].size);
        let bins = &mut self.bins[slot as usize];
        let head = bins.head(bin);
        bins.mark(bin, id);
        if head != NIL {
            self.nodes[head as usize].prev = id;
        }
        let node = &mut self.nodes[id as usize];
        (node.slot, node.prev, node.next) = (slot, NIL, head);
    }

    /// Takes block `id` out of its bin's list (dropping its class when that empties it).
    #[inline]
    fn unlink(&mut self, id: u32) {
        self.unlink_from_bin(id, true);
    }

    /// Takes block `id` out of its bin's list; with `drop_empty_class`, drops its class when that
    /// empties it (else the caller links a block into that class again at once).
    #[inline]
    fn unlink_from_bin(&mut self, id: u32, drop_empty_class: bool) {
        let Node {
            slot,
            prev,
            next,
            size,
            ..
        } = self.nodes[id as usize];
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        let bins = &mut self.bins[slot as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            let bin = bin_of(size);
            if next == NIL {
                bins.unmark(bin);
                if drop_empty_class && bins.is_empty() {
                    self.classes.retain(|&(_, s)| s != slot);
                    self.idle.push(slot);
                }
            } else {
                bins.heads[bin] = next;
            }
        }
    }

    /// A new block (linked and indexed).
    fn add(&mut self, addr: usize, size: usize, region: usize, tag: T) -> u32 {
        let node = Node {
            addr,
            size,
            region,
            tag,
            slot: 0,
            prev: NIL,
            next: NIL,
        };
        let id = match self.vacant.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(addr, addr + size, id);
        self.free_bytes += size;
        self.link(id);
        id
    }

    /// Removes block `id` (unlinked and out of the address index), returning it.
    fn remove(&mut self, id: u32) -> FreeBlock<T> {
        self.unlink(id);
        let node = &mut self.nodes[id as usize];
        self.index.remove(node.addr, node.end());
        self.free_bytes -= node.size;
        self.vacant.push(id);
        FreeBlock {
            addr: node.addr,
            size: node.size,
            region: node.region,
            tag: std::mem::take(&mut node.tag),
        }
    }

    /// Sets block `id` to `[addr, addr + size)` (keeping its end, so the address index stays)
    /// and relinks it, in its class's index or, when its tag's class may have changed, the new
    /// one's.
    fn resize_below_end(&mut self, id: u32, addr: usize, size: usize, class_may_change: bool) {
        let (old_addr, old_size) = (self.nodes[id as usize].addr, self.nodes[id as usize].size);
        debug_assert_eq!(addr + size, self.nodes[id as usize].end(), "the end stays");
        self.index.move_start(old_addr, addr, id);
        self.free_bytes = self.free_bytes - old_size + size;
        if class_may_change {
            self.unlink(id);
            let node = &mut self.nodes[id as usize];
            (node.addr, node.size) = (addr, size);
            self.link(id);
        } else if bin_of(old_size) != bin_of(size) {
            self.unlink_from_bin(id, false);
            let node = &mut self.nodes[id as usize];
            (node.addr, node.size) = (addr, size);
            let slot = node.slot;
            self.link_to(id, slot);
        } else {
            let node = &mut self.nodes[id as usize];
            (node.addr, node.size) = (addr, size);
        }
    }

    /// Grows block `id` upwards to end at `end` (re-keyed in the address index), folding `tag` into
    /// its tag, and relinks it.
    fn grow_up(&mut self, id: u32, end: usize, tag: &T) {
        let node = &mut self.nodes[id as usize];
        let (old_end, old_size, old_class) = (node.end(), node.size, node.tag.class());
        node.tag.merge(tag);
        let class_changed = node.tag.class() != old_class;
        let size = end - node.addr;
        self.index.move_end(old_end, end, id);
        self.free_bytes += size - old_size;
        if class_changed {
            self.unlink(id);
            self.nodes[id as usize].size = size;
            self.link(id);
        } else if bin_of(old_size) != bin_of(size) {
            self.unlink_from_bin(id, false);
            let node = &mut self.nodes[id as usize];
            node.size = size;
            let slot = node.slot;
            self.link_to(id, slot);
        } else {
            self.nodes[id as usize].size = size;
        }
    }

    /// The block that ends at `end`, if any.
    fn ending_at(&self, end: usize) -> Option<u32> {
        self.index.ending_at(end)
    }

    /// The free block that ends at `end`, if any (for [`FreeList::take_range`]).
    pub(crate) fn block_ending_at(&self, end: usize) -> Option<Fit<'_, T>> {
        let id = self.ending_at(end)?;
        let node = &self.nodes[id as usize];
        Some(Fit {
            id: BlockId(id),
            block: node.addr,
            start: node.addr,
            len: node.size,
            tag: &node.tag,
        })
    }

    /// The free block holding byte `addr`, as `(start, size)`, if any.
    pub(crate) fn block_holding(&self, addr: usize) -> Option<(usize, usize)> {
        let node = &self.nodes[self.first_ending_after(addr)? as usize];
        (node.addr <= addr).then_some((node.addr, node.size))
    }

    /// The lowest block that ends after `addr`, if any.
    fn first_ending_after(&self, addr: usize) -> Option<u32> {
        self.index.first_ending_after(addr)
    }

    /// The blocks that end at `addr` and start at `end`, if any.
    fn neighbours(&self, addr: usize, end: usize) -> (Option<u32>, Option<u32>) {
        (self.index.ending_at(addr), self.index.starting_at(end))
    }

    /// The block that starts at `addr`, if any.
    fn starting_at(&self, addr: usize) -> Option<u32> {
        self.index.starting_at(addr)
    }

    /// Returns `[addr, addr + size)` of `region` to the list, coalescing with free neighbours of the
    /// same region. `size == 0` is ignored.
    ///
    /// The caller guarantees the range is not already free (a double free would corrupt the list;
    /// debug builds assert it).
    pub(crate) fn insert(&mut self, addr: usize, size: usize, region: usize, tag: T) {
        if size == 0 {
            return;
        }
        debug_assert!(
            !self.overlaps(addr, size),
            "double free of [{addr:#x}, +{size})"
        );
        let end = addr + size;
        let (prev, next) = self.neighbours(addr, end);
        let prev = prev.filter(|&p| self.nodes[p as usize].region == region);
        let next = next.filter(|&n| self.nodes[n as usize].region == region);
        match (prev, next) {
            (None, None) => {
                self.add(addr, size, region, tag);
            }
            (None, Some(n)) => {
                // The next block grows downwards: its end, the address key, stays.
                let node = &mut self.nodes[n as usize];
                let old = node.tag.class();
                let mut merged = tag;
                merged.merge(&node.tag);
                node.tag = merged;
                let changed = node.tag.class() != old;
                let grown = node.size + size;
                self.resize_below_end(n, addr, grown, changed);
            }
            (Some(p), None) => self.grow_up(p, end, &tag),
            (Some(p), Some(n)) => {
                // The previous block, the range and the next block become one block that ends
                // where the next one ends.
                let prev_block = self.remove(p);
                let (start, mut merged) = (prev_block.addr, prev_block.tag);
                merged.merge(&tag);
                let node = &mut self.nodes[n as usize];
                let old = node.tag.class();
                merged.merge(&node.tag);
                node.tag = merged;
                let changed = node.tag.class() != old;
                let grown = node.end() - start;
                self.resize_below_end(n, start, grown, changed);
            }
        }
    }

    /// Takes `size` bytes from the start of block `id` (the rest stays free with its tag).
    fn take_start(&mut self, id: u32, size: usize) -> FreeBlock<T> {
        let node = &self.nodes[id as usize];
        debug_assert!(node.size >= size);
        if node.size == size {
            return self.remove(id);
        }
        let taken = FreeBlock {
            addr: node.addr,
            size,
            region: node.region,
            tag: node.tag.clone(),
        };
        let rest = node.size - size;
        self.resize_below_end(id, node.addr + size, rest, false);
        taken
    }

    /// The best fit for `size` bytes over every class, as `(block, size)`.
    fn best_over_classes(&self, size: usize) -> Option<(u32, usize, usize)> {
        self.classes
            .iter()
            .filter_map(|&(class, _)| self.good_fit_in(class, size.max(1), 1))
            .map(|f| (f.id.0, f.block, f.len))
            .min_by_key(|&(_, block, len)| (len, block))
    }

    /// Removes and returns a block of `size` bytes cut from the start of a good fit (see the module
    /// docs); the rest stays free (with the same tag).
    pub(crate) fn take_best_fit(&mut self, size: usize) -> Option<FreeBlock<T>> {
        let (id, _, _) = self.best_over_classes(size)?;
        Some(self.take_start(id, size))
    }

    /// A good fit for `size` bytes, as `(addr, block size)`, left in place.
    pub(crate) fn peek_best_fit(&self, size: usize) -> Option<(usize, usize)> {
        self.best_over_classes(size)
            .map(|(_, block, len)| (block, len))
    }

    /// Removes and returns `[addr, addr + size)` from the free block that starts at `addr` (the rest
    /// stays free); `None` when no free block of at least `size` bytes starts there.
    pub(crate) fn take_prefix(&mut self, addr: usize, size: usize) -> Option<FreeBlock<T>> {
        let id = self.starting_at(addr)?;
        (size > 0 && self.nodes[id as usize].size >= size).then(|| self.take_start(id, size))
    }

    /// Takes `[start, start + size)` out of free block `id` (as listed by [`FreeList::fits_in`]).
    /// The pieces before and after it stay free, tagged `rest_tag`, or with the block's own tag
    /// when that is `None`. Returns the taken range with the block's tag.
    ///
    /// The caller guarantees `id` is a free block containing the range (debug builds assert it).
    pub(crate) fn take_range(
        &mut self,
        id: BlockId,
        start: usize,
        size: usize,
        rest_tag: Option<T>,
    ) -> FreeBlock<T> {
        let (region, tag) = self.cut(id.0, start, size, rest_tag, true);
        FreeBlock {
            addr: start,
            size,
            region,
            tag,
        }
    }

    /// [`FreeList::take_range`] for a caller that needs nothing back: the block's tag is not
    /// copied for it.
    pub(crate) fn take_range_untagged(
        &mut self,
        id: BlockId,
        start: usize,
        size: usize,
        rest_tag: Option<T>,
    ) {
        self.cut(id.0, start, size, rest_tag, false);
    }

    /// [`FreeList::take_range`]'s work, returning the region and, with `want_tag`, the block's tag
    /// (else the default tag).
    #[inline]
    fn cut(
        &mut self,
        id: u32,
        start: usize,
        size: usize,
        rest_tag: Option<T>,
        want_tag: bool,
    ) -> (usize, T) {
        let node = &self.nodes[id as usize];
        let (block, end, region) = (node.addr, node.end(), node.region);
        debug_assert!(
            start >= block && start + size <= end,
            "[{start:#x}, +{size}) is not inside the block"
        );
        // The block was maximal, so its pieces have no free neighbours to coalesce with. The piece
        // after the range keeps the block's record (and its end); the piece before is a new block.
        let retag = rest_tag.is_some();
        let (taken_tag, rest) = if start + size < end {
            let node = &mut self.nodes[id as usize];
            let taken_tag = match rest_tag {
                Some(tag) => std::mem::replace(&mut node.tag, tag),
                None if want_tag => node.tag.clone(),
                None => T::default(),
            };
            self.resize_below_end(id, start + size, end - start - size, retag);
            (taken_tag, None)
        } else {
            (self.remove(id).tag, rest_tag)
        };
        if start > block {
            let tag = match rest {
                Some(tag) => tag,
                None if start + size < end => self.nodes[id as usize].tag.clone(),
                None => taken_tag.clone(),
            };
            self.add(block, start - block, region, tag);
        }
        (region, taken_tag)
    }

    /// Removes the region `[region, region + size)` if it is wholly free (one block), returning its
    /// tag; otherwise leaves the list alone and returns `None`.
    pub(crate) fn remove_whole_region(&mut self, region: usize, size: usize) -> Option<T> {
        let id = self.ending_at(region.checked_add(size)?)?;
        let node = &self.nodes[id as usize];
        (node.addr == region && node.region == region).then(|| self.remove(id).tag)
    }

    /// Removes and returns a smallest free block (the smallest of the first few of the lowest
    /// non-empty bin).
    pub(crate) fn pop_smallest(&mut self) -> Option<FreeBlock<T>> {
        let id = self
            .classes
            .iter()
            .filter_map(|&(_, slot)| {
                let bins = &self.bins[slot as usize];
                let bin = bins.first_from(0)?;
                self.bin_blocks(bins, bin)
                    .min_by_key(|&(_, n)| (n.size, n.addr))
                    .map(|(id, _)| id)
            })
            .min_by_key(|&id| {
                let node = &self.nodes[id as usize];
                (node.size, node.addr)
            })?;
        Some(self.remove(id))
    }

    /// Empties the list, yielding its blocks in address order.
    pub(crate) fn into_blocks(mut self) -> impl Iterator<Item = FreeBlock<T>> {
        let ids = self.index.in_order();
        ids.into_iter().map(move |id| {
            let node = &mut self.nodes[id as usize];
            FreeBlock {
                addr: node.addr,
                size: node.size,
                region: node.region,
                tag: std::mem::take(&mut node.tag),
            }
        })
    }

    /// Iterates over the free blocks in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = FreeBlock<T>> + '_ {
        self.index.in_order().into_iter().map(move |id| {
            let node = &self.nodes[id as usize];
            FreeBlock {
                addr: node.addr,
                size: node.size,
                region: node.region,
                tag: node.tag.clone(),
            }
        })
    }

    /// Replaces every tag with `f(tag)` (for example to drop streams known to be idle), and
    /// re-indexes the blocks by their new classes (rare: the whole index is rebuilt).
    pub(crate) fn retag(&mut self, mut f: impl FnMut(&mut T)) {
        for (_, slot) in self.classes.drain(..) {
            self.bins[slot as usize] = SizeBins::new();
            self.idle.push(slot);
        }
        for id in self.index.in_order() {
            f(&mut self.nodes[id as usize].tag);
            self.link(id);
        }
    }

    /// True when some free block overlaps `[addr, addr + size)`.
    pub(crate) fn overlaps(&self, addr: usize, size: usize) -> bool {
        self.first_ending_after(addr)
            .is_some_and(|id| self.nodes[id as usize].addr < addr.saturating_add(size))
    }

    /// Panics with a description when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut total = 0;
        let mut prev: Option<&Node<T>> = None;
        self.index.check(|id| {
            let n = &self.nodes[id as usize];
            (n.addr, n.end())
        });
        for id in self.index.in_order() {
            let e = &self.nodes[id as usize];
            assert!(!self.vacant.contains(&id), "block {id} is also vacant");
            assert!(e.size > 0, "empty block at {:#x}", e.addr);
            if let Some(p) = prev {
                assert!(
                    p.end() <= e.addr,
                    "blocks {:#x} and {:#x} overlap",
                    p.addr,
                    e.addr
                );
                assert!(
                    !(p.end() == e.addr && p.region == e.region),
                    "adjacent blocks {:#x} and {:#x} of one region were not coalesced",
                    p.addr,
                    e.addr
                );
            }
            total += e.size;
            prev = Some(e);
        }
        assert_eq!(total, self.free_bytes, "free byte count drifted");
        assert!(
            self.classes.windows(2).all(|w| w[0].0 < w[1].0),
            "classes out of order"
        );
        let mut linked = 0;
        for &(class, slot) in &self.classes {
            let bins = &self.bins[slot as usize];
            assert!(!bins.is_empty(), "an empty class is kept");
            for level in 0..LEVELS {
                assert_eq!(
                    bins.levels & (1 << level) != 0,
                    bins.steps[level] != 0,
                    "level bit {level} disagrees with its steps"
                );
            }
            for bin in 0..LEVELS * SUB_BINS {
                let mut at = bins.head(bin);
                let mut before = NIL;
                assert!(!bins.has(bin) || at != NIL, "bin {bin} marked but empty");
                while at != NIL {
                    let n = &self.nodes[at as usize];
                    assert_eq!(n.slot, slot, "block {:#x} in another class's bins", n.addr);
                    assert_eq!(n.tag.class(), class, "block {:#x} in a wrong class", n.addr);
                    assert_eq!(bin_of(n.size), bin, "block {:#x} in a wrong bin", n.addr);
                    assert_eq!(n.prev, before, "broken back link at {:#x}", n.addr);
                    assert_eq!(
                        self.index.ending_at(n.end()),
                        Some(at),
                        "a listed block is not indexed"
                    );
                    linked += 1;
                    before = at;
                    at = n.next;
                }
            }
        }
        for &slot in &self.idle {
            assert!(
                self.bins[slot as usize].is_empty(),
                "an idle size index holds blocks"
            );
        }
        assert_eq!(
            linked,
            self.index.len(),
            "size index and address index disagree"
        );
    }
}

#[cfg(test)]
mod tests;
