//! The address index of a [`FreeList`](super::FreeList): its blocks by start and by end address.
//!
//! Coalescing asks only exact questions (the block that ends where a freed range starts, the one
//! that starts where it ends), which two hash maps answer in O(1). Ordered questions (the block
//! holding an address, overlap, iteration in address order) are asked by frees that the live set
//! did not verify, by a mapped core's release and by inspection: a B-tree keyed by block ends
//! answers them once [`AddressIndex::keep_order`] was called (and always in debug builds, whose
//! assertions ask them on every insert); without it they scan the blocks.

use std::collections::BTreeMap;

use crate::mr::detail::addr_map::AddrMap;

#[derive(Debug)]
pub(super) struct AddressIndex {
    by_start: AddrMap<u32>,
    by_end: AddrMap<u32>,
    /// End address → block, while order is kept.
    ordered: Option<BTreeMap<usize, u32>>,
}

impl Default for AddressIndex {
    fn default() -> Self {
        Self {
            by_start: AddrMap::default(),
            by_end: AddrMap::default(),
            ordered: cfg!(debug_assertions).then(BTreeMap::new),
        }
    }
}

impl AddressIndex {
    /// Keeps the blocks in address order from now on (built from the blocks at hand once).
    pub(super) fn keep_order(&mut self) {
        if self.ordered.is_none() {
            self.ordered = Some(self.by_end.iter().collect());
        }
    }

    /// Answers ordered questions by scanning (tests of that path).
    #[cfg(test)]
    pub(super) fn drop_order(&mut self) {
        self.ordered = None;
    }

    pub(super) fn len(&self) -> usize {
        self.by_end.len()
    }

    #[inline]
    pub(super) fn insert(&mut self, start: usize, end: usize, id: u32) {
        self.by_start.insert(start, id);
        self.by_end.insert(end, id);
        if let Some(o) = &mut self.ordered {
            o.insert(end, id);
        }
    }

    #[inline]
    pub(super) fn remove(&mut self, start: usize, end: usize) {
        self.by_start.remove(start);
        self.by_end.remove(end);
        if let Some(o) = &mut self.ordered {
            o.remove(&end);
        }
    }

    /// Block `id` now starts at `new` instead of `old` (its end stays).
    #[inline]
    pub(super) fn move_start(&mut self, old: usize, new: usize, id: u32) {
        if old != new {
            self.by_start.remove(old);
            self.by_start.insert(new, id);
        }
    }

    /// Block `id` now ends at `new` instead of `old` (its start stays).
    #[inline]
    pub(super) fn move_end(&mut self, old: usize, new: usize, id: u32) {
        self.by_end.remove(old);
        self.by_end.insert(new, id);
        if let Some(o) = &mut self.ordered {
            o.remove(&old);
            o.insert(new, id);
        }
    }

    #[inline]
    pub(super) fn ending_at(&self, end: usize) -> Option<u32> {
        self.by_end.get(end)
    }

    #[inline]
    pub(super) fn starting_at(&self, start: usize) -> Option<u32> {
        self.by_start.get(start)
    }

    /// The block with the lowest end above `addr`.
    pub(super) fn first_ending_after(&self, addr: usize) -> Option<u32> {
        match &self.ordered {
            Some(o) => o.range(addr.checked_add(1)?..).next().map(|(_, &id)| id),
            None => self
                .by_end
                .iter()
                .filter(|&(e, _)| e > addr)
                .min_by_key(|&(e, _)| e)
                .map(|(_, id)| id),
        }
    }

    /// Every block, in address order.
    pub(super) fn in_order(&self) -> Vec<u32> {
        match &self.ordered {
            Some(o) => o.values().copied().collect(),
            None => {
                let mut v: Vec<(usize, u32)> = self.by_end.iter().collect();
                v.sort_unstable_by_key(|&(e, _)| e);
                v.into_iter().map(|(_, id)| id).collect()
            }
        }
    }

    /// Panics when the maps disagree with `start_end(id)` (tests only).
    #[cfg(test)]
    pub(super) fn check(&self, start_end: impl Fn(u32) -> (usize, usize)) {
        assert_eq!(
            self.by_start.len(),
            self.by_end.len(),
            "start and end maps differ"
        );
        for (end, id) in self.by_end.iter() {
            let (s, e) = start_end(id);
            assert_eq!(e, end, "block {s:#x} indexed under a wrong end");
            assert_eq!(
                self.by_start.get(s),
                Some(id),
                "block {s:#x} not indexed by start"
            );
        }
        if let Some(o) = &self.ordered {
            assert_eq!(o.len(), self.by_end.len(), "ordered index out of step");
            assert!(o.iter().all(|(&e, &id)| self.by_end.get(e) == Some(id)));
        }
    }
}
