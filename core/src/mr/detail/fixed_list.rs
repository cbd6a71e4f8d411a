//! The free list of a fixed-size core: equal blocks in a LIFO per tag class.
//!
//! Every block has the same size (`unit`) and sits on a block boundary of its region, so the
//! coalescing list's work is wasted there: neighbours never need merging to serve a request, and
//! any block fits any request. This list keeps, per class of tag (for a pool: no stream, one
//! stream, several), a stack of block records (the latest free on top, as RMM's per-stream
//! lists), a map from address to the block's record (tag and place), and a count of free blocks
//! per region, so a region that is wholly free can still be found and given back. Every operation
//! but [`FixedList::retag`] and [`FixedList::remove_whole_region`] (trim and stream retirement,
//! rare) is O(1) expected.
//!
//! Invariants (checked by [`FixedList::check_invariants`] in tests):
//! - every block in `blocks` is in the stack of its tag's class at its recorded position, and the
//!   stacks hold nothing else; no stack is empty;
//! - `region_free` counts, per region, the blocks of `blocks` in it (no zero counts).

use crate::aligned::is_aligned;
use crate::mr::detail::addr_map::AddrMap;
use crate::mr::detail::free_list::{BlockTag, FreeBlock};

#[derive(Debug)]
struct Slot<T: BlockTag> {
    addr: usize,
    region: usize,
    tag: T,
    /// Its tag's class: the stack it is in.
    class: T::Class,
    /// Index in the stack of `class`.
    pos: usize,
}

/// Equal free blocks of `unit` bytes; see the module documentation.
#[derive(Debug)]
pub(crate) struct FixedList<T: BlockTag> {
    unit: usize,
    /// Every free block's record; `vacant` lists the unused ones.
    slots: Vec<Slot<T>>,
    vacant: Vec<u32>,
    /// Address → record.
    blocks: AddrMap<u32>,
    /// Per class with blocks, in order, its stack of records (the latest free on top).
    stacks: Vec<(T::Class, Vec<u32>)>,
    /// Emptied stacks, kept for the next new class (no allocation per class change).
    spare: Vec<Vec<u32>>,
    /// Region → free blocks in it.
    region_free: AddrMap<usize>,
}

impl<T: BlockTag> FixedList<T> {
    /// An empty list of `unit`-byte blocks (`unit` > 0).
    pub(crate) fn new(unit: usize) -> Self {
        Self {
            unit: unit.max(1),
            slots: Vec::new(),
            vacant: Vec::new(),
            blocks: AddrMap::default(),
            stacks: Vec::new(),
            spare: Vec::new(),
            region_free: AddrMap::default(),
        }
    }

    /// The block size.
    pub(crate) fn unit(&self) -> usize {
        self.unit
    }

    pub(crate) fn free_bytes(&self) -> usize {
        self.blocks.len() * self.unit
    }

    pub(crate) fn len(&self) -> usize {
        self.blocks.len()
    }

    pub(crate) fn largest(&self) -> usize {
        if self.blocks.len() == 0 {
            0
        } else {
            self.unit
        }
    }

    pub(crate) fn classes(&self) -> impl Iterator<Item = T::Class> + '_ {
        self.stacks.iter().map(|(class, _)| *class)
    }

    /// The index in `stacks` of `class`'s stack.
    #[inline]
    fn stack(&self, class: T::Class) -> Option<usize> {
        self.stacks.binary_search_by(|(c, _)| c.cmp(&class)).ok()
    }

    /// The index in `stacks` of `class`'s stack, made (from a spare one) when it has none.
    #[inline]
    fn stack_or_new(&mut self, class: T::Class) -> usize {
        match self.stacks.binary_search_by(|(c, _)| c.cmp(&class)) {
            Ok(s) => s,
            Err(at) => {
                let stack = self.spare.pop().unwrap_or_default();
                self.stacks.insert(at, (class, stack));
                at
            }
        }
    }

    /// True when a block of the list starts in `[addr, addr + size)` on a block boundary counted
    /// from `addr` (callers pass block-aligned ranges: see `Core`'s checks).
    pub(crate) fn overlaps(&self, addr: usize, size: usize) -> bool {
        (0..size.div_ceil(self.unit)).any(|k| self.blocks.get(addr + k * self.unit).is_some())
    }

    /// Adds `[addr, addr + size)` of `region` (whole blocks: `size` a multiple of the unit, `addr`
    /// on a block boundary), each block tagged `tag`, the last one on top.
    pub(crate) fn insert(&mut self, addr: usize, size: usize, region: usize, tag: T) {
        debug_assert!(
            size % self.unit == 0,
            "{size} bytes are not whole blocks of {}",
            self.unit
        );
        let class = tag.class();
        let s = self.stack_or_new(class);
        for k in 0..size / self.unit {
            let block = addr + k * self.unit;
            debug_assert!(
                self.blocks.get(block).is_none(),
                "double free of {block:#x}"
            );
            let slot = Slot {
                addr: block,
                region,
                tag: tag.clone(),
                class,
                pos: self.stacks[s].1.len(),
            };
            let id = match self.vacant.pop() {
                Some(id) => {
                    self.slots[id as usize] = slot;
                    id
                }
                None => {
                    self.slots.push(slot);
                    (self.slots.len() - 1) as u32
                }
            };
            self.blocks.insert(block, id);
            self.stacks[s].1.push(id);
        }
        match self.region_free.get_mut(region) {
            Some(count) => *count += size / self.unit,
            None => self.region_free.insert(region, size / self.unit),
        }
    }

    /// Up to `n` blocks of `class` from the top of its stack (latest first, no removal).
    pub(crate) fn top(&self, class: T::Class, n: usize) -> impl Iterator<Item = (usize, &T)> + '_ {
        self.stack(class)
            .into_iter()
            .flat_map(move |s| self.stacks[s].1.iter().rev().take(n))
            .map(move |&id| {
                let slot = &self.slots[id as usize];
                (slot.addr, &slot.tag)
            })
    }

    /// The topmost block of `class` whose address is a multiple of `alignment` (a power of two).
    pub(crate) fn aligned_in(&self, class: T::Class, alignment: usize) -> Option<(usize, &T)> {
        let s = self.stack(class)?;
        self.stacks[s]
            .1
            .iter()
            .rev()
            .map(|&id| &self.slots[id as usize])
            .find(|slot| is_aligned(slot.addr, alignment))
            .map(|slot| (slot.addr, &slot.tag))
    }

    /// Takes the free block at `addr` out of the list.
    pub(crate) fn remove(&mut self, addr: usize) -> Option<FreeBlock<T>> {
        let id = self.blocks.get(addr)?;
        self.blocks.remove(addr);
        self.vacant.push(id);
        let (class, pos, region) = {
            let slot = &self.slots[id as usize];
            (slot.class, slot.pos, slot.region)
        };
        let s = self.stack(class).expect("a free block's class has a stack");
        let stack = &mut self.stacks[s].1;
        stack.swap_remove(pos);
        if let Some(&moved) = stack.get(pos) {
            self.slots[moved as usize].pos = pos;
        }
        if stack.is_empty() {
            let (_, stack) = self.stacks.remove(s);
            self.spare.push(stack);
        }
        let count = self
            .region_free
            .get_mut(region)
            .expect("a free block's region is counted");
        *count -= 1;
        if *count == 0 {
            self.region_free.remove(region);
        }
        Some(FreeBlock {
            addr,
            size: self.unit,
            region,
            tag: std::mem::take(&mut self.slots[id as usize].tag),
        })
    }

    /// Takes every block of `region` (of `size` bytes) when all of them are free; their tags
    /// merged.
    pub(crate) fn remove_whole_region(&mut self, region: usize, size: usize) -> Option<T> {
        if self.region_free.get(region).unwrap_or(0) * self.unit != size || size == 0 {
            return None;
        }
        let mut tag: Option<T> = None;
        for k in 0..size / self.unit {
            let b = self
                .remove(region + k * self.unit)
                .expect("every block of a wholly free region is free");
            match tag.as_mut() {
                None => tag = Some(b.tag),
                Some(t) => t.merge(&b.tag),
            }
        }
        tag
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = FreeBlock<T>> + '_ {
        self.blocks.iter().map(|(addr, id)| {
            let s = &self.slots[id as usize];
            FreeBlock {
                addr,
                size: self.unit,
                region: s.region,
                tag: s.tag.clone(),
            }
        })
    }

    /// Applies `f` to every tag and restacks the blocks by their new classes (address order: the
    /// stacks' recency is lost, which only matters for locality).
    pub(crate) fn retag(&mut self, mut f: impl FnMut(&mut T)) {
        let mut blocks: Vec<(usize, u32)> = self.blocks.iter().collect();
        blocks.sort_unstable();
        for (_, mut stack) in self.stacks.drain(..) {
            stack.clear();
            self.spare.push(stack);
        }
        for (_, id) in blocks {
            let slot = &mut self.slots[id as usize];
            f(&mut slot.tag);
            let class = slot.tag.class();
            slot.class = class;
            let s = self.stack_or_new(class);
            self.slots[id as usize].pos = self.stacks[s].1.len();
            self.stacks[s].1.push(id);
        }
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        use std::collections::HashMap;
        let stacked: usize = self.stacks.iter().map(|(_, s)| s.len()).sum();
        assert_eq!(stacked, self.blocks.len(), "stacks and blocks disagree");
        assert!(
            self.stacks.iter().all(|(_, s)| !s.is_empty()),
            "an empty stack is kept"
        );
        assert!(
            self.stacks.windows(2).all(|w| w[0].0 < w[1].0),
            "classes out of order"
        );
        assert!(
            self.spare.iter().all(Vec::is_empty),
            "a spare stack holds blocks"
        );
        let mut per_region: HashMap<usize, usize> = HashMap::new();
        for (addr, id) in self.blocks.iter() {
            let slot = &self.slots[id as usize];
            assert_eq!(
                slot.addr, addr,
                "block {addr:#x} indexed under a wrong address"
            );
            assert!(!self.vacant.contains(&id), "block {addr:#x} is also vacant");
            assert_eq!(
                slot.class,
                slot.tag.class(),
                "block {addr:#x} filed under a stale class"
            );
            let s = self.stack(slot.class).expect("its class has a stack");
            assert_eq!(
                self.stacks[s].1.get(slot.pos),
                Some(&id),
                "block {addr:#x} misplaced"
            );
            assert!(
                addr >= slot.region && (addr - slot.region) % self.unit == 0,
                "block {addr:#x} off its boundary"
            );
            *per_region.entry(slot.region).or_default() += 1;
        }
        let counted: HashMap<usize, usize> = self.region_free.iter().collect();
        assert_eq!(per_region, counted, "region counts drifted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Owner(Option<u32>);

    impl BlockTag for Owner {
        type Class = Option<u32>;
        fn class(&self) -> Option<u32> {
            self.0
        }
        fn merge(&mut self, other: &Self) {
            if self.0 != other.0 {
                self.0 = None;
            }
        }
    }

    #[test]
    fn blocks_come_back_latest_first_per_class() {
        let mut fl = FixedList::<Owner>::new(100);
        fl.insert(1000, 300, 1000, Owner(None));
        assert_eq!((fl.len(), fl.free_bytes(), fl.largest()), (3, 300, 100));
        let top: Vec<usize> = fl.top(None, 8).map(|(a, _)| a).collect();
        assert_eq!(
            top,
            vec![1200, 1100, 1000],
            "the last block of an insert is on top"
        );
        let b = fl.remove(1100).unwrap();
        assert_eq!((b.addr, b.size, b.region), (1100, 100, 1000));
        fl.insert(1100, 100, 1000, Owner(Some(7)));
        assert_eq!(
            fl.top(Some(7), 8).map(|(a, _)| a).collect::<Vec<_>>(),
            vec![1100]
        );
        assert!(fl.overlaps(1100, 100) && !fl.overlaps(1300, 100));
        assert_eq!(fl.aligned_in(None, 16).map(|(a, _)| a), Some(1200));
        assert_eq!(fl.aligned_in(None, 1 << 20), None);
        fl.check_invariants();
    }

    #[test]
    fn a_region_goes_only_when_wholly_free_with_merged_tags() {
        let mut fl = FixedList::<Owner>::new(100);
        fl.insert(0, 200, 0, Owner(Some(1)));
        fl.insert(500, 100, 500, Owner(Some(1)));
        let taken = fl.remove(100).unwrap();
        assert_eq!(
            fl.remove_whole_region(0, 200),
            None,
            "one block of it is handed out"
        );
        fl.insert(taken.addr, 100, 0, Owner(Some(2)));
        assert_eq!(
            fl.remove_whole_region(0, 200),
            Some(Owner(None)),
            "tags of two streams merge"
        );
        assert_eq!(fl.len(), 1);
        fl.check_invariants();
        fl.retag(|t| t.0 = None);
        assert_eq!(fl.classes().collect::<Vec<_>>(), vec![None]);
        fl.check_invariants();
    }
}
