//! The address index of a [`FreeList`](super::FreeList): its blocks by start and by end address.
//!
//! Coalescing asks only exact questions (the block that ends where a freed range starts, the one
//! that starts where it ends), which two hash maps answer in O(1). Ordered questions (the block
//! holding an address, overlap, iteration in address order) are asked by frees that the live set
//! did not verify, by a mapped core's release and by inspection: a B-tree keyed by block ends
//! answers them once [`AddressIndex::keep_order`] was called (and always in debug builds, whose
//! assertions ask them on every insert); without it they scan the blocks.

use std::collections::BTreeMap;

#[derive(Debug)]
pub(super) struct AddressIndex {
    by_start: AddrMap,
    by_end: AddrMap,
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

/// No block: an empty slot of an [`AddrMap`].
const VACANT: u32 = u32::MAX;

/// Address → block, open addressing with linear probing (at most half full) and deletion by
/// backward shift: a lookup is one multiplication and, mostly, one or two slots.
#[derive(Debug, Default)]
struct AddrMap {
    /// `(address, block)`; `VACANT` blocks mark empty slots.
    slots: Vec<(usize, u32)>,
    len: usize,
    /// `slots.len() - 1`.
    mask: usize,
    /// 64 less the bits of a slot number.
    shift: u32,
}

impl AddrMap {
    fn len(&self) -> usize {
        self.len
    }

    /// The home slot of `key`: Fibonacci hashing, whose top bits mix every bit of the address
    /// (aligned addresses have none in their low bits).
    #[inline]
    fn home(&self, key: usize) -> usize {
        ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn find(&self, key: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask;
        let mut i = self.home(key);
        loop {
            let (k, id) = self.slots[i];
            if id == VACANT {
                return None;
            }
            if k == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn get(&self, key: usize) -> Option<u32> {
        self.find(key).map(|i| self.slots[i].1)
    }

    /// Maps `key` to `id` (`id` is not [`VACANT`]).
    #[inline]
    fn insert(&mut self, key: usize, id: u32) {
        debug_assert_ne!(id, VACANT);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask;
        let mut i = self.home(key);
        loop {
            let (k, old) = self.slots[i];
            if old == VACANT {
                self.slots[i] = (key, id);
                self.len += 1;
                return;
            }
            if k == key {
                self.slots[i].1 = id;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn remove(&mut self, key: usize) {
        let Some(mut i) = self.find(key) else {
            return;
        };
        let mask = self.mask;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let (k, id) = self.slots[j];
            if id == VACANT {
                break;
            }
            // An entry may fill the hole at `i` unless its home lies after `i` (cyclically) up to
            // `j`: it would then be found no longer.
            let home = self.home(k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = (k, id);
                i = j;
            }
        }
        self.slots[i].1 = VACANT;
        self.len -= 1;
    }

    #[cold]
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![(0, VACANT); size]);
        self.len = 0;
        self.mask = size - 1;
        self.shift = u64::BITS - size.trailing_zeros();
        for (k, id) in old {
            if id != VACANT {
                self.insert(k, id);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.slots.iter().copied().filter(|&(_, id)| id != VACANT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, replacements and removals with colliding keys against a model.
    #[test]
    fn addr_map_matches_a_model() {
        let mut map = AddrMap::default();
        let mut model = std::collections::HashMap::new();
        let mut x: u64 = 7;
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Few distinct keys, multiples of 256 and a few odd ones, so that probes collide.
            let key = ((x >> 40) % 600) as usize * 256 + usize::from(x & 1 == 0) * 3;
            if (x >> 20) % 3 == 0 {
                map.remove(key);
                model.remove(&key);
            } else {
                map.insert(key, step);
                model.insert(key, step);
            }
            assert_eq!(map.len(), model.len());
            assert_eq!(map.get(key), model.get(&key).copied());
        }
        for (&k, &v) in &model {
            assert_eq!(map.get(k), Some(v));
        }
        assert_eq!(map.iter().count(), model.len());
        assert_eq!(map.get(usize::MAX), None);
    }
}
