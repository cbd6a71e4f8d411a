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
//!   cut into [`SUB_BINS`] equal steps, so a bin's sizes differ by at most 1/16 of its lower bound.
//!   Each class keeps, per bin, a doubly linked list of its blocks (the latest first), and two
//!   levels of bitmaps of the bins that are not empty.
//!
//! Where each operation looks:
//! - a fit is found by size: the bitmaps name the first non-empty bin at or above the request's
//!   own bin without a search, and the tightest of a few blocks there is taken
//!   ([`FreeList::good_fit_in`]); taking it, or splitting it, only relinks lists;
//! - blocks are found by address only where address order matters: coalescing a freed range with
//!   its neighbours, the overlap check of a free that was not verified, and iteration.
//!   That index is keyed by each block's *end* address, which stays put when a block is cut from
//!   its start (every take) or grows downwards (a free just before a free block), so most takes and
//!   frees leave it alone.
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
//! - every block is in the address index under its end, and in exactly one bin list: the bin of
//!   its size in the index of its tag's class; a bin's bit is set exactly when its list is not
//!   empty, and no empty class is kept;
//! - `free_bytes` is the sum of the block sizes.

use std::collections::BTreeMap;

use crate::aligned::align_up;

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

/// Steps per power of two, as a power of two: a bin's sizes differ by at most 1/16 of its lower
/// bound.
const STEP_BITS: u32 = 4;
/// Steps per power of two.
const SUB_BINS: usize = 1 << STEP_BITS;
/// Levels (powers of two): every `usize` size has one.
const LEVELS: usize = 64;
/// Blocks of the request's own bin looked at before the larger bins (see the module docs).
const OWN_BIN_SCAN: usize = 8;
/// Blocks of a larger bin looked at for the tightest fit, after the first that fits.
const BIN_SCAN: usize = 8;
/// No block.
const NIL: u32 = u32::MAX;

/// The bin of `size` (at least 1): sizes below [`SUB_BINS`] have a bin each; above, the power of
/// two picks the level and the next [`STEP_BITS`] bits the step.
#[inline]
fn bin_of(size: usize) -> usize {
    if size < SUB_BINS {
        return size;
    }
    let log2 = usize::BITS - 1 - size.leading_zeros();
    let level = (log2 - STEP_BITS + 1) as usize;
    let step = (size >> (log2 - STEP_BITS)) & (SUB_BINS - 1);
    level * SUB_BINS + step
}

/// One class's size index: a list of blocks per bin and the bitmaps of the non-empty bins.
#[derive(Clone, Debug)]
struct SizeBins {
    /// Bit `l`: some bin of level `l` is not empty.
    levels: u64,
    /// Per level, bit `s`: bin `l * SUB_BINS + s` is not empty.
    steps: [u16; LEVELS],
    /// Per bin, its first block (meaningful only while its bit is set).
    heads: [u32; LEVELS * SUB_BINS],
}

impl SizeBins {
    fn new() -> Self {
        Self {
            levels: 0,
            steps: [0; LEVELS],
            heads: [NIL; LEVELS * SUB_BINS],
        }
    }

    fn is_empty(&self) -> bool {
        self.levels == 0
    }

    fn has(&self, bin: usize) -> bool {
        self.steps[bin / SUB_BINS] & (1 << (bin % SUB_BINS)) != 0
    }

    /// The first block of `bin`.
    fn head(&self, bin: usize) -> u32 {
        if self.has(bin) {
            self.heads[bin]
        } else {
            NIL
        }
    }

    /// The first non-empty bin at or above `bin`.
    #[inline]
    fn first_from(&self, bin: usize) -> Option<usize> {
        let level = bin / SUB_BINS;
        if level >= LEVELS {
            return None;
        }
        let here = self.steps[level] & (u16::MAX << (bin % SUB_BINS));
        if here != 0 {
            return Some(level * SUB_BINS + here.trailing_zeros() as usize);
        }
        let above = match level + 1 {
            LEVELS => 0,
            next => self.levels & (u64::MAX << next),
        };
        if above == 0 {
            return None;
        }
        let level = above.trailing_zeros() as usize;
        Some(level * SUB_BINS + self.steps[level].trailing_zeros() as usize)
    }

    /// The highest non-empty bin.
    fn last(&self) -> Option<usize> {
        if self.levels == 0 {
            return None;
        }
        let level = (u64::BITS - 1 - self.levels.leading_zeros()) as usize;
        let step = (u16::BITS - 1 - self.steps[level].leading_zeros()) as usize;
        Some(level * SUB_BINS + step)
    }

    fn mark(&mut self, bin: usize, head: u32) {
        self.heads[bin] = head;
        self.steps[bin / SUB_BINS] |= 1 << (bin % SUB_BINS);
        self.levels |= 1 << (bin / SUB_BINS);
    }

    fn unmark(&mut self, bin: usize) {
        let level = bin / SUB_BINS;
        self.steps[level] &= !(1 << (bin % SUB_BINS));
        if self.steps[level] == 0 {
            self.levels &= !(1 << level);
        }
    }
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
    /// End address → block.
    by_end: BTreeMap<usize, u32>,
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
            by_end: BTreeMap::new(),
            classes: Vec::new(),
            bins: Vec::new(),
            idle: Vec::new(),
            free_bytes: 0,
        }
    }
}

/// The blocks of one class that hold a request, as [`FreeList::fits_in`] lists them.
pub(crate) struct Fits<'a, T: BlockTag> {
    list: &'a FreeList<T>,
    bins: Option<&'a SizeBins>,
    size: usize,
    alignment: usize,
    /// The request's own bin.
    own: usize,
    /// Where the walk is: the request's own bin (first [`OWN_BIN_SCAN`] blocks), the larger bins,
    /// then the rest of the own bin.
    stage: Stage,
    /// The bin being walked (in [`Stage::Larger`]).
    bin: usize,
    node: u32,
    seen: usize,
    /// The own bin's blocks beyond the first scan.
    rest: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Own,
    Larger,
    OwnRest,
    Done,
}

impl<'a, T: BlockTag> Iterator for Fits<'a, T> {
    type Item = Fit<'a, T>;

    fn next(&mut self) -> Option<Fit<'a, T>> {
        let bins = self.bins?;
        loop {
            if self.node == NIL {
                match self.stage {
                    Stage::Own | Stage::Larger => {
                        if self.stage == Stage::Own {
                            self.stage = Stage::Larger;
                            self.bin = self.own;
                        }
                        match bins.first_from(self.bin + 1) {
                            Some(bin) => {
                                self.bin = bin;
                                self.node = bins.heads[bin];
                            }
                            None => {
                                self.stage = Stage::OwnRest;
                                self.node = self.rest;
                            }
                        }
                    }
                    Stage::OwnRest | Stage::Done => {
                        self.stage = Stage::Done;
                        return None;
                    }
                }
                continue;
            }
            let id = self.node;
            let node = &self.list.nodes[id as usize];
            if self.stage == Stage::Own {
                if self.seen == OWN_BIN_SCAN {
                    self.rest = id;
                    self.node = NIL;
                    continue;
                }
                self.seen += 1;
            }
            self.node = node.next;
            let Some(start) = align_up(node.addr, self.alignment) else {
                continue;
            };
            if start
                .checked_add(self.size)
                .is_some_and(|e| e <= node.end())
            {
                return Some(Fit {
                    id: BlockId(id),
                    block: node.addr,
                    start,
                    len: node.size,
                    tag: &node.tag,
                });
            }
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
        self.by_end.len()
    }

    /// True when nothing is free.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_end.is_empty()
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
    fn link(&mut self, id: u32) {
        let class = self.nodes[id as usize].tag.class();
        let slot = self.slot_of(class);
        self.link_to(id, slot);
    }

    /// Puts block `id` at the head of its bin in the size index in `slot` (its class's).
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
    fn unlink(&mut self, id: u32) {
        self.unlink_from_bin(id, true);
    }

    /// Takes block `id` out of its bin's list; with `drop_empty_class`, drops its class when that
    /// empties it (else the caller links a block into that class again at once).
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
        self.by_end.insert(addr + size, id);
        self.free_bytes += size;
        self.link(id);
        id
    }

    /// Removes block `id` (unlinked and out of the address index), returning it.
    fn remove(&mut self, id: u32) -> FreeBlock<T> {
        self.unlink(id);
        let node = &mut self.nodes[id as usize];
        self.by_end.remove(&node.end());
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
        let old_size = self.nodes[id as usize].size;
        debug_assert_eq!(addr + size, self.nodes[id as usize].end(), "the end stays");
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
        self.by_end.remove(&old_end);
        self.by_end.insert(end, id);
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
        self.by_end.get(&end).copied()
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
        let from = addr.checked_add(1)?;
        self.by_end.range(from..).next().map(|(_, &id)| id)
    }

    /// The blocks that end at `addr` and start at `end`, if any (one descent of the index).
    fn neighbours(&self, addr: usize, end: usize) -> (Option<u32>, Option<u32>) {
        let mut after = self.by_end.range(addr..);
        let mut first = after.next();
        let prev = match first {
            Some((&e, &id)) if e == addr => {
                first = after.next();
                Some(id)
            }
            _ => None,
        };
        let next = first
            .map(|(_, &id)| id)
            .filter(|&id| self.nodes[id as usize].addr == end);
        (prev, next)
    }

    /// The block that starts at `addr`, if any.
    fn starting_at(&self, addr: usize) -> Option<u32> {
        self.first_ending_after(addr)
            .filter(|&id| self.nodes[id as usize].addr == addr)
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

    /// The free blocks of class `class` that can hold `size` bytes starting at an
    /// `alignment`-aligned address (`alignment` a power of two): those among the first
    /// [`OWN_BIN_SCAN`] blocks of the request's own bin, then the larger bins' in order of size
    /// bin, then the rest of the own bin's. Every such block is listed once.
    pub(crate) fn fits_in(&self, class: T::Class, size: usize, alignment: usize) -> Fits<'_, T> {
        let bins = self
            .classes
            .binary_search_by(|(c, _)| c.cmp(&class))
            .ok()
            .map(|i| &self.bins[self.classes[i].1 as usize]);
        let own = bin_of(size.max(1));
        Fits {
            list: self,
            bins,
            size,
            alignment,
            own,
            stage: Stage::Own,
            bin: own,
            node: bins.map_or(NIL, |b| b.head(own)),
            seen: 0,
            rest: NIL,
        }
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
        let id = id.0;
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
            let taken_tag = self.nodes[id as usize].tag.clone();
            if let Some(tag) = rest_tag {
                self.nodes[id as usize].tag = tag;
            }
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
        FreeBlock {
            addr: start,
            size,
            region,
            tag: taken_tag,
        }
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
        let ids: Vec<u32> = self.by_end.values().copied().collect();
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
        self.by_end.values().map(|&id| {
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
        let ids: Vec<u32> = self.by_end.values().copied().collect();
        for id in ids {
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
        for (&end, &id) in &self.by_end {
            let e = &self.nodes[id as usize];
            assert!(!self.vacant.contains(&id), "block {id} is also vacant");
            assert_eq!(
                e.end(),
                end,
                "block {:#x} indexed under a wrong end",
                e.addr
            );
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
                        self.by_end.get(&n.end()),
                        Some(&at),
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
            self.by_end.len(),
            "size index and address index disagree"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Streams(Vec<u32>);

    impl BlockTag for Streams {
        /// Blocks tagged with no stream apart from the others.
        type Class = bool;
        fn class(&self) -> bool {
            self.0.is_empty()
        }
        fn merge(&mut self, other: &Self) {
            for s in &other.0 {
                if !self.0.contains(s) {
                    self.0.push(*s);
                }
            }
        }
    }

    #[test]
    fn bins_cover_every_size_in_order() {
        let mut last = 0;
        for size in (1..100_000).chain([usize::MAX / 3, usize::MAX]) {
            let bin = bin_of(size);
            assert!(bin >= last, "bins grow with the size");
            assert!(bin < LEVELS * SUB_BINS);
            last = bin;
        }
        assert_eq!(
            bin_of(256),
            bin_of(256 + 15),
            "one step holds 1/16 of its power of two"
        );
        assert_ne!(bin_of(256), bin_of(256 + 16));
    }

    #[test]
    fn neighbours_coalesce_within_a_region_only() {
        let mut fl = FreeList::<()>::new();
        fl.insert(0, 100, 0, ());
        fl.insert(200, 100, 0, ());
        fl.insert(100, 100, 0, ());
        assert_eq!(
            fl.len(),
            1,
            "three contiguous blocks of one region become one"
        );
        fl.insert(300, 50, 300, ());
        assert_eq!(fl.len(), 2, "a block of the next region stays apart");
        fl.check_invariants();
        assert_eq!(fl.free_bytes(), 350);
        assert_eq!(fl.remove_whole_region(0, 300), Some(()));
        assert_eq!(
            fl.remove_whole_region(300, 100),
            None,
            "only part of that region is free"
        );
    }

    #[test]
    fn best_fit_takes_the_smallest_block_and_splits_it() {
        let mut fl = FreeList::<()>::new();
        fl.insert(0, 1000, 0, ());
        fl.insert(2000, 300, 2000, ());
        fl.insert(4000, 500, 4000, ());
        let b = fl.take_best_fit(256).unwrap();
        assert_eq!((b.addr, b.size, b.region), (2000, 256, 2000));
        assert_eq!(fl.free_bytes(), 1000 + 44 + 500);
        assert!(fl.take_best_fit(2000).is_none());
        let f = fl.take_prefix(0, 400).unwrap();
        assert_eq!(f.addr, 0, "a prefix is the start of its block");
        assert_eq!(fl.largest(), 600, "the block shrank in place");
        fl.insert(0, 400, 0, ());
        assert_eq!(fl.largest(), 1000, "and grew back in place on the free");
        fl.check_invariants();
    }

    #[test]
    fn peek_leaves_the_block_and_take_prefix_splits_it() {
        let mut fl = FreeList::<()>::new();
        fl.insert(0, 1000, 0, ());
        fl.insert(2000, 300, 2000, ());
        assert_eq!(fl.peek_best_fit(256), Some((2000, 300)));
        assert_eq!(fl.peek_best_fit(301), Some((0, 1000)));
        assert_eq!(fl.peek_best_fit(1001), None);
        assert_eq!(fl.free_bytes(), 1300, "peeking takes nothing");
        assert!(fl.take_prefix(100, 10).is_none(), "no block starts there");
        assert!(fl.take_prefix(2000, 301).is_none(), "too small");
        let b = fl.take_prefix(0, 600).unwrap();
        assert_eq!((b.addr, b.size, b.region), (0, 600, 0));
        assert_eq!(
            fl.peek_best_fit(400),
            Some((600, 400)),
            "the rest stays free"
        );
        fl.check_invariants();
    }

    #[test]
    fn a_good_fit_is_found_in_the_requests_own_bin_and_above() {
        let mut fl = FreeList::<()>::new();
        // Three blocks of the 4096-4351 bin (one too small for 4200) and one far larger.
        fl.insert(0, 4096, 0, ());
        fl.insert(0x10000, 4300, 0x10000, ());
        fl.insert(0x20000, 4200, 0x20000, ());
        fl.insert(0x30000, 1 << 20, 0x30000, ());
        let fits: Vec<usize> = fl.fits_in((), 4200, 1).map(|f| f.block).collect();
        assert_eq!(
            fits,
            [0x20000, 0x10000, 0x30000],
            "the own bin first (latest free first, those that hold the request), then larger bins"
        );
        assert_eq!(
            fl.take_best_fit(4200).map(|b| b.addr),
            Some(0x20000),
            "an exact fit"
        );
        assert_eq!(
            fl.take_best_fit(4200).map(|b| b.addr),
            Some(0x10000),
            "within 1/16"
        );
        fl.check_invariants();
    }

    #[test]
    fn every_block_that_fits_is_listed_even_beyond_the_own_bins_scan() {
        let mut fl = FreeList::<()>::new();
        // The own bin holds many blocks too small for the request, and one that fits, listed
        // last; no larger bin has a block.
        fl.insert(0, 4200, 0, ());
        for i in 1..=2 * OWN_BIN_SCAN {
            fl.insert(i * 0x10000, 4096, i * 0x10000, ());
        }
        assert_eq!(
            fl.fits_in((), 4200, 1).map(|f| f.block).collect::<Vec<_>>(),
            [0]
        );
        assert_eq!(fl.take_best_fit(4200).map(|b| b.addr), Some(0));
        assert_eq!(fl.len(), 2 * OWN_BIN_SCAN);
        fl.check_invariants();
    }

    #[test]
    fn tags_merge_when_blocks_coalesce_and_survive_splits() {
        let mut fl = FreeList::<Streams>::new();
        fl.insert(0, 256, 0, Streams(vec![1]));
        fl.insert(256, 256, 0, Streams(vec![2]));
        let b = fl.take_best_fit(128).unwrap();
        assert_eq!(b.tag, Streams(vec![1, 2]));
        assert_eq!(
            fl.iter().next().unwrap().tag,
            Streams(vec![1, 2]),
            "the remainder keeps the tag"
        );
        fl.retag(|t| t.0.clear());
        assert!(
            fl.iter().all(|blk| blk.tag.0.is_empty()),
            "retag reaches every block"
        );
        fl.check_invariants();
    }

    #[test]
    fn aligned_fits_split_into_three_pieces() {
        let mut fl = FreeList::<Streams>::new();
        fl.insert(0x1100, 0x300, 0x1000, Streams(vec![1]));
        fl.insert(0x4000, 0x2000, 0x4000, Streams(vec![2]));
        let fits: Vec<(usize, usize)> = fl
            .fits_in(false, 0x100, 0x1000)
            .map(|f| (f.block, f.start))
            .collect();
        assert_eq!(
            fits,
            [(0x4000, 0x4000)],
            "the small block holds no 4 KiB-aligned range"
        );
        let fits: Vec<(usize, usize)> = fl
            .fits_in(false, 0x100, 0x200)
            .map(|f| (f.block, f.start))
            .collect();
        assert_eq!(fits, [(0x1100, 0x1200), (0x4000, 0x4000)], "best fit first");
        let id = fl.fits_in(false, 0x100, 0x200).next().unwrap().id;
        let b = fl.take_range(id, 0x1200, 0x100, Some(Streams(vec![9])));
        assert_eq!(
            (b.addr, b.size, b.region, b.tag),
            (0x1200, 0x100, 0x1000, Streams(vec![1]))
        );
        let rest: Vec<(usize, usize, Vec<u32>)> =
            fl.iter().map(|f| (f.addr, f.size, f.tag.0)).collect();
        assert_eq!(
            rest,
            [
                (0x1100, 0x100, vec![9]),
                (0x1300, 0x100, vec![9]),
                (0x4000, 0x2000, vec![2])
            ]
        );
        fl.check_invariants();
        fl.insert(0x1200, 0x100, 0x1000, Streams(vec![3]));
        assert_eq!(
            fl.iter().next().map(|f| (f.size, f.tag.0)),
            Some((0x300, vec![9, 3])),
            "coalesced again"
        );
        fl.check_invariants();
    }

    #[test]
    fn classes_are_indexed_apart_and_follow_their_tags() {
        let mut fl = FreeList::<Streams>::new();
        fl.insert(0, 0x100, 0, Streams(vec![1]));
        fl.insert(0x1000, 0x200, 0x1000, Streams::default());
        fl.insert(0x2000, 0x400, 0x2000, Streams(vec![2]));
        let fits = |fl: &FreeList<Streams>, class| {
            fl.fits_in(class, 0x100, 1)
                .map(|f| f.block)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fits(&fl, true),
            [0x1000],
            "the untagged class holds only the untagged block"
        );
        assert_eq!(
            fits(&fl, false),
            [0, 0x2000],
            "best fit first within a class"
        );
        assert_eq!(fl.classes().collect::<Vec<_>>(), [false, true]);
        // Global queries still see every class.
        assert_eq!(fl.peek_best_fit(0x180), Some((0x1000, 0x200)));
        assert_eq!(fl.largest(), 0x400);
        assert_eq!(fl.pop_smallest().map(|b| b.addr), Some(0));
        // Coalescing moves a block to the class of the merged tag.
        fl.insert(0x1200, 0x100, 0x1000, Streams(vec![3]));
        assert_eq!(
            fits(&fl, true),
            Vec::<usize>::new(),
            "the merged block names stream 3"
        );
        assert_eq!(
            fl.classes().collect::<Vec<_>>(),
            [false],
            "an empty class is dropped"
        );
        fl.retag(|t| t.0.clear());
        assert_eq!(fits(&fl, true), [0x1000, 0x2000], "retag re-indexes");
        fl.check_invariants();
    }

    /// The model: per 16-byte unit of three regions, its stream tag when free.
    struct Model {
        units: Vec<Option<u32>>,
    }

    const UNIT: usize = 16;
    const REGION_UNITS: usize = 256;
    /// Region starts, in units (the second starts right after the first: adjacent regions).
    const REGIONS: [usize; 3] = [0, REGION_UNITS, 3 * REGION_UNITS];

    impl Model {
        fn region_of(unit: usize) -> usize {
            *REGIONS
                .iter()
                .rev()
                .find(|&&r| r <= unit)
                .expect("a region")
        }

        /// The maximal free runs `(start, len)` in units, ignoring tags, within regions.
        fn runs(&self) -> Vec<(usize, usize)> {
            let mut out: Vec<(usize, usize)> = Vec::new();
            for (u, free) in self.units.iter().enumerate() {
                if free.is_none() {
                    continue;
                }
                match out.last_mut() {
                    Some((s, l)) if *s + *l == u && Self::region_of(*s) == Self::region_of(u) => {
                        *l += 1
                    }
                    _ => out.push((u, 1)),
                }
            }
            out
        }
    }

    proptest! {
        /// Random inserts, takes and overlap queries against a model of free units: the list's
        /// blocks are the model's maximal free runs, `fits_in` lists exactly the runs that hold a
        /// request, a take finds a block whenever one fits, and the overlap check is exact.
        #[test]
        fn random_operations_match_a_model(
            ops in proptest::collection::vec((0u8..6, 1usize..48, 0usize..1024, 0u32..3), 1..400)
        ) {
            let mut fl = FreeList::<Streams>::new();
            let mut model = Model { units: vec![None; 4 * REGION_UNITS] };
            for r in REGIONS {
                fl.insert(r * UNIT, REGION_UNITS * UNIT, r * UNIT, Streams::default());
                for u in r..r + REGION_UNITS {
                    model.units[u] = Some(0);
                }
            }
            let mut taken: Vec<FreeBlock<Streams>> = Vec::new();
            for (op, units, pick, stream) in ops {
                let size = units * UNIT;
                let alignment = UNIT << (pick % 4);
                let runs = model.runs();
                let fitting: Vec<usize> = runs
                    .iter()
                    .filter(|&&(s, l)| {
                        let start = align_up(s * UNIT, alignment).unwrap();
                        start + size <= (s + l) * UNIT
                    })
                    .map(|&(s, _)| s * UNIT)
                    .collect();
                let listed: Vec<usize> = {
                    let mut v: Vec<usize> = fl
                        .classes()
                        .flat_map(|c| fl.fits_in(c, size, alignment).map(|f| f.block).collect::<Vec<_>>())
                        .collect();
                    v.sort_unstable();
                    v
                };
                prop_assert_eq!(&listed, &fitting, "fits_in lists exactly the blocks that fit");
                let got = match op {
                    0 => fl.take_best_fit(size),
                    1 => {
                        let start = runs.get(pick % runs.len().max(1)).map_or(0, |&(s, _)| s * UNIT);
                        fl.take_prefix(start, size)
                    }
                    2 => {
                        let fit = fl.classes().find_map(|c| {
                            fl.fits_in(c, size, alignment).next().map(|f| (f.id, f.start))
                        });
                        fit.map(|(id, start)| {
                            let rest = (stream > 0).then(|| Streams(vec![stream]));
                            fl.take_range(id, start, size, rest)
                        })
                    }
                    3 => {
                        let free_at = |u: usize| model.units.get(u).is_some_and(Option::is_some);
                        let addr = pick * UNIT;
                        let overlaps = (pick..pick + units).any(free_at);
                        prop_assert_eq!(fl.overlaps(addr, size), overlaps, "overlap of [{:#x}, +{})", addr, size);
                        None
                    }
                    _ => {
                        if !taken.is_empty() {
                            let b = taken.swap_remove(pick % taken.len());
                            for u in b.addr / UNIT..(b.addr + b.size) / UNIT {
                                model.units[u] = Some(stream);
                            }
                            let tag = if stream == 0 { Streams::default() } else { Streams(vec![stream]) };
                            fl.insert(b.addr, b.size, b.region, tag);
                        }
                        None
                    }
                };
                let expected = match op {
                    0 => runs.iter().any(|&(_, l)| l >= units),
                    1 => runs.get(pick % runs.len().max(1)).is_some_and(|&(_, l)| l >= units),
                    2 => !fitting.is_empty(),
                    _ => false,
                };
                prop_assert_eq!(got.is_some(), expected, "a take finds a block whenever one fits");
                if let Some(b) = got {
                    prop_assert_eq!(b.size, size);
                    prop_assert_eq!(b.region, Model::region_of(b.addr / UNIT) * UNIT);
                    for u in b.addr / UNIT..(b.addr + b.size) / UNIT {
                        prop_assert!(model.units[u].is_some(), "unit {} handed out twice", u);
                        model.units[u] = None;
                    }
                    taken.push(b);
                }
                fl.check_invariants();
                let blocks: Vec<(usize, usize)> = fl.iter().map(|b| (b.addr / UNIT, b.size / UNIT)).collect();
                prop_assert_eq!(blocks, model.runs(), "the blocks are the maximal free runs");
                let free_units = model.units.iter().filter(|u| u.is_some()).count();
                prop_assert_eq!(fl.free_bytes(), free_units * UNIT);
            }
            for b in taken.drain(..) {
                fl.insert(b.addr, b.size, b.region, Streams::default());
            }
            for r in REGIONS {
                prop_assert!(fl.remove_whole_region(r * UNIT, REGION_UNITS * UNIT).is_some());
            }
            prop_assert!(fl.is_empty());
            fl.check_invariants();
        }
    }
}
