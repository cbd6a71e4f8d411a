//! An address-ordered, coalescing free list with best-fit and first-fit lookup.
//!
//! Glossary:
//! - *block*: a free range `[addr, addr + size)`;
//! - *region*: the upstream allocation a block lies in (identified by its start address). Blocks
//!   coalesce only within one region, so a region that is wholly free can be handed back upstream;
//! - *tag*: what the owner needs to remember about a free block (for a pool: the streams whose
//!   queued work may still use it). Coalescing merges tags with [`BlockTag::merge`];
//! - *class*: a coarse summary of a tag ([`BlockTag::class`]; for a pool: no stream, one stream,
//!   several). Each class has its own size index, so an owner finds the best fit among the blocks
//!   of the classes it prefers without looking at the others (a pool's stream looks at the blocks
//!   it can use without waiting first).
//!
//! Invariants (checked by [`FreeList::check_invariants`] in tests):
//! - no two blocks overlap, and no two adjacent blocks of one region stay separate;
//! - `by_size` indexes exactly the blocks of `by_addr`, each under the class of its tag, and holds
//!   no empty class;
//! - `free_bytes` is the sum of the block sizes.
//!
//! Every operation is O(log n), except the few that look at every class (O(classes × log n)).

use std::collections::{BTreeMap, BTreeSet};

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

#[derive(Clone, Debug)]
struct Entry<T> {
    size: usize,
    region: usize,
    tag: T,
}

/// `(size, addr)` of the blocks of one class.
type SizeIndex = BTreeSet<(usize, usize)>;

/// A free block that can serve a request, as listed by [`FreeList::fits`].
#[derive(Debug)]
pub(crate) struct Fit<'a, T> {
    /// Start address of the free block.
    pub block: usize,
    /// Where the request would start inside it (the block start rounded up to the alignment).
    pub start: usize,
    /// The free block's length (from `block`).
    pub len: usize,
    /// The block's tag.
    pub tag: &'a T,
}

/// Free blocks, ordered by address and indexed by size.
#[derive(Debug)]
pub(crate) struct FreeList<T: BlockTag = ()> {
    by_addr: BTreeMap<usize, Entry<T>>,
    /// Per class of tag, its blocks by size; a class without blocks is removed (so the classes of
    /// streams long gone do not pile up).
    by_size: BTreeMap<T::Class, SizeIndex>,
    free_bytes: usize,
}

impl<T: BlockTag> Default for FreeList<T> {
    fn default() -> Self {
        Self {
            by_addr: BTreeMap::new(),
            by_size: BTreeMap::new(),
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
        self.by_addr.len()
    }

    /// True when nothing is free.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// The size of the largest free block (0 when empty).
    pub(crate) fn largest(&self) -> usize {
        self.by_size
            .values()
            .filter_map(|index| index.last())
            .map(|&(size, _)| size)
            .max()
            .unwrap_or(0)
    }

    /// The classes that have free blocks, in order.
    pub(crate) fn classes(&self) -> impl Iterator<Item = T::Class> + '_ {
        self.by_size.keys().copied()
    }

    /// The smallest `(size, addr)` of all classes at or after `from` (the lowest address among
    /// equal sizes).
    fn smallest_from(&self, from: (usize, usize)) -> Option<(usize, usize)> {
        self.by_size
            .values()
            .filter_map(|index| index.range(from..).next().copied())
            .min()
    }

    fn unlink(&mut self, addr: usize) -> Entry<T> {
        let entry = self
            .by_addr
            .remove(&addr)
            .expect("unlink of a block that is not free");
        let class = entry.tag.class();
        let index = self
            .by_size
            .get_mut(&class)
            .expect("a free block's class is indexed");
        index.remove(&(entry.size, addr));
        if index.is_empty() {
            self.by_size.remove(&class);
        }
        self.free_bytes -= entry.size;
        entry
    }

    fn link(&mut self, addr: usize, entry: Entry<T>) {
        self.by_size
            .entry(entry.tag.class())
            .or_default()
            .insert((entry.size, addr));
        self.free_bytes += entry.size;
        self.by_addr.insert(addr, entry);
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
        let next = match self.by_addr.get(&end) {
            Some(next) if next.region == region => Some(self.unlink(end)),
            _ => None,
        };
        if let Some((&prev_addr, prev)) = self.by_addr.range(..addr).next_back() {
            if prev.region == region && prev_addr + prev.size == addr {
                // The previous block grows where it is: its address, the key of `by_addr`, stays.
                let grown = prev.size + size + next.as_ref().map_or(0, |n| n.size);
                self.regrow(prev_addr, grown, [Some(&tag), next.as_ref().map(|n| &n.tag)]);
                return;
            }
        }
        let mut entry = Entry { size, region, tag };
        if let Some(next) = next {
            entry.tag.merge(&next.tag);
            entry.size += next.size;
        }
        self.link(addr, entry);
    }

    /// Sets the size of the free block at `addr` to `size`, folding `merge` into its tag, and
    /// re-indexes it: one `by_size` update instead of moving the block in `by_addr`.
    fn regrow(&mut self, addr: usize, size: usize, merge: [Option<&T>; 2]) {
        let entry = self
            .by_addr
            .get_mut(&addr)
            .expect("regrow of a block that is not free");
        let (old_class, old_size) = (entry.tag.class(), entry.size);
        for tag in merge.into_iter().flatten() {
            entry.tag.merge(tag);
        }
        entry.size = size;
        let class = entry.tag.class();
        let index = self
            .by_size
            .get_mut(&old_class)
            .expect("a free block's class is indexed");
        index.remove(&(old_size, addr));
        if index.is_empty() {
            self.by_size.remove(&old_class);
        }
        self.by_size.entry(class).or_default().insert((size, addr));
        self.free_bytes = self.free_bytes - old_size + size;
    }

    /// Removes and returns the smallest block that holds `size` bytes, split so that exactly `size`
    /// bytes are returned and the rest stays free (with the same tag).
    pub(crate) fn take_best_fit(&mut self, size: usize) -> Option<FreeBlock<T>> {
        let (_, addr) = self.smallest_from((size, 0))?;
        Some(self.take_at(addr, size))
    }

    /// The smallest free block of at least `size` bytes, as `(addr, block size)`, left in place.
    pub(crate) fn peek_best_fit(&self, size: usize) -> Option<(usize, usize)> {
        self.smallest_from((size, 0))
            .map(|(block_size, addr)| (addr, block_size))
    }

    /// Removes and returns `[addr, addr + size)` from the free block that starts at `addr` (the rest
    /// stays free); `None` when no free block of at least `size` bytes starts there.
    pub(crate) fn take_prefix(&mut self, addr: usize, size: usize) -> Option<FreeBlock<T>> {
        match self.by_addr.get(&addr) {
            Some(e) if e.size >= size && size > 0 => Some(self.take_at(addr, size)),
            _ => None,
        }
    }

    /// Removes and returns `size` bytes from the end of the lowest-addressed block that holds them:
    /// the block keeps its address and only shrinks, and a free of the piece grows it back in
    /// place (the arena's 256-byte pair costs two index updates instead of four block moves).
    pub(crate) fn take_first_fit(&mut self, size: usize) -> Option<FreeBlock<T>> {
        let (addr, entry) = self.by_addr.iter().find(|(_, e)| e.size >= size)?;
        let (addr, block_size) = (*addr, entry.size);
        if block_size == size || size == 0 {
            return Some(self.take_at(addr, size));
        }
        let (region, tag) = (entry.region, entry.tag.clone());
        self.regrow(addr, block_size - size, [None, None]);
        Some(FreeBlock {
            addr: addr + block_size - size,
            size,
            region,
            tag,
        })
    }

    /// The free blocks of class `class` that can hold `size` bytes starting at an
    /// `alignment`-aligned address (`alignment` a power of two), smallest block first: the best fit
    /// of the class comes first.
    pub(crate) fn fits_in(
        &self,
        class: T::Class,
        size: usize,
        alignment: usize,
    ) -> impl Iterator<Item = Fit<'_, T>> + '_ {
        self.by_size
            .get(&class)
            .into_iter()
            .flat_map(move |index| index.range((size, 0)..))
            .filter_map(move |&(block_size, block)| {
                let start = align_up(block, alignment)?;
                if start.checked_add(size)? > block + block_size {
                    return None;
                }
                Some(Fit {
                    block,
                    start,
                    len: block_size,
                    tag: &self.by_addr[&block].tag,
                })
            })
    }

    /// Takes `[start, start + size)` out of the free block that begins at `block` (as listed by
    /// [`FreeList::fits`]). The pieces before and after it stay free, tagged `rest_tag`, or with the
    /// block's own tag when that is `None`. Returns the taken range with the block's tag.
    ///
    /// The caller guarantees `block` is a free block containing the range (debug builds assert it).
    pub(crate) fn take_range(
        &mut self,
        block: usize,
        start: usize,
        size: usize,
        rest_tag: Option<T>,
    ) -> FreeBlock<T> {
        let entry = self.unlink(block);
        let end = block + entry.size;
        debug_assert!(
            start >= block && start + size <= end,
            "[{start:#x}, +{size}) is not inside the block"
        );
        let rest = rest_tag.unwrap_or_else(|| entry.tag.clone());
        // The block was maximal, so its pieces have no free neighbours to coalesce with.
        if start > block {
            self.link(
                block,
                Entry {
                    size: start - block,
                    region: entry.region,
                    tag: rest.clone(),
                },
            );
        }
        if end > start + size {
            self.link(
                start + size,
                Entry {
                    size: end - start - size,
                    region: entry.region,
                    tag: rest,
                },
            );
        }
        FreeBlock {
            addr: start,
            size,
            region: entry.region,
            tag: entry.tag,
        }
    }

    fn take_at(&mut self, addr: usize, size: usize) -> FreeBlock<T> {
        let entry = self.unlink(addr);
        debug_assert!(entry.size >= size);
        if entry.size > size {
            let rest = Entry {
                size: entry.size - size,
                region: entry.region,
                tag: entry.tag.clone(),
            };
            self.link(addr + size, rest);
        }
        FreeBlock {
            addr,
            size,
            region: entry.region,
            tag: entry.tag,
        }
    }

    /// Removes the region `[region, region + size)` if it is wholly free (one block), returning its
    /// tag; otherwise leaves the list alone and returns `None`.
    pub(crate) fn remove_whole_region(&mut self, region: usize, size: usize) -> Option<T> {
        match self.by_addr.get(&region) {
            Some(e) if e.region == region && e.size == size => Some(self.unlink(region).tag),
            _ => None,
        }
    }

    /// Removes and returns the smallest free block (the lowest-addressed of equal ones).
    pub(crate) fn pop_smallest(&mut self) -> Option<FreeBlock<T>> {
        let (size, addr) = self.smallest_from((0, 0))?;
        Some(self.take_at(addr, size))
    }

    /// Empties the list, yielding its blocks in address order.
    pub(crate) fn into_blocks(self) -> impl Iterator<Item = FreeBlock<T>> {
        self.by_addr.into_iter().map(|(addr, e)| FreeBlock {
            addr,
            size: e.size,
            region: e.region,
            tag: e.tag,
        })
    }

    /// Iterates over the free blocks in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = FreeBlock<T>> + '_ {
        self.by_addr.iter().map(|(&addr, e)| FreeBlock {
            addr,
            size: e.size,
            region: e.region,
            tag: e.tag.clone(),
        })
    }

    /// Replaces every tag with `f(tag)` (for example to drop streams known to be idle), and
    /// re-indexes the blocks by their new classes (rare: the whole index is rebuilt).
    pub(crate) fn retag(&mut self, mut f: impl FnMut(&mut T)) {
        self.by_size.clear();
        for (&addr, e) in self.by_addr.iter_mut() {
            f(&mut e.tag);
            self.by_size
                .entry(e.tag.class())
                .or_default()
                .insert((e.size, addr));
        }
    }

    /// True when some free block overlaps `[addr, addr + size)`.
    pub(crate) fn overlaps(&self, addr: usize, size: usize) -> bool {
        let end = addr + size;
        if let Some((&a, e)) = self.by_addr.range(..end).next_back() {
            return a + e.size > addr;
        }
        false
    }

    /// Panics with a description when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut total = 0;
        let mut prev: Option<(usize, &Entry<T>)> = None;
        for (&addr, e) in &self.by_addr {
            assert!(e.size > 0, "empty block at {addr:#x}");
            let indexed = self
                .by_size
                .get(&e.tag.class())
                .is_some_and(|index| index.contains(&(e.size, addr)));
            assert!(
                indexed,
                "block {addr:#x} missing from its class's size index"
            );
            if let Some((pa, pe)) = prev {
                assert!(
                    pa + pe.size <= addr,
                    "blocks {pa:#x}+{} and {addr:#x} overlap",
                    pe.size
                );
                assert!(
                    !(pa + pe.size == addr && pe.region == e.region),
                    "adjacent blocks {pa:#x} and {addr:#x} of one region were not coalesced"
                );
            }
            total += e.size;
            prev = Some((addr, e));
        }
        assert!(
            self.by_size.values().all(|index| !index.is_empty()),
            "an empty class is kept"
        );
        let indexed: usize = self.by_size.values().map(BTreeSet::len).sum();
        assert_eq!(indexed, self.by_addr.len(), "size index has stale entries");
        assert_eq!(total, self.free_bytes, "free byte count drifted");
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
        let f = fl.take_first_fit(400).unwrap();
        assert_eq!(
            f.addr, 600,
            "first fit takes the end of the lowest-addressed block that fits"
        );
        assert_eq!(fl.largest(), 600, "the block shrank in place");
        fl.insert(600, 400, 0, ());
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
        let b = fl.take_range(0x1100, 0x1200, 0x100, Some(Streams(vec![9])));
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

    proptest! {
        /// Random inserts and takes against a byte-map model: no overlap, exact accounting,
        /// everything coalesces back into whole regions at the end.
        #[test]
        fn random_operations_keep_the_invariants(ops in proptest::collection::vec((0u8..3, 1usize..64), 1..300)) {
            const REGION: usize = 4096;
            let regions = [0usize, REGION, 3 * REGION];
            let mut fl = FreeList::<()>::new();
            for r in regions {
                fl.insert(r, REGION, r, ());
            }
            let mut taken: Vec<FreeBlock<()>> = Vec::new();
            for (op, units) in ops {
                let size = units * 16;
                match op {
                    0 => if let Some(b) = fl.take_best_fit(size) { taken.push(b) },
                    1 => if let Some(b) = fl.take_first_fit(size) { taken.push(b) },
                    _ => if !taken.is_empty() {
                        let b = taken.swap_remove(units % taken.len());
                        fl.insert(b.addr, b.size, b.region, ());
                    },
                }
                for b in &taken {
                    prop_assert!(!fl.overlaps(b.addr, b.size), "live block {:#x} is also free", b.addr);
                    prop_assert!(b.addr >= b.region && b.addr + b.size <= b.region + REGION);
                }
                let live: usize = taken.iter().map(|b| b.size).sum();
                prop_assert_eq!(fl.free_bytes() + live, 3 * REGION);
                fl.check_invariants();
            }
            for b in taken.drain(..) {
                fl.insert(b.addr, b.size, b.region, ());
            }
            for r in regions {
                prop_assert_eq!(fl.remove_whole_region(r, REGION), Some(()));
            }
            prop_assert!(fl.is_empty());
        }
    }
}
