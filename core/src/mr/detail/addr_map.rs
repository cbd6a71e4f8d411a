//! A map from addresses to small values for the free lists' per-operation lookups: open
//! addressing with linear probing, a multiplicative hash and no per-entry allocation, several
//! times cheaper per lookup, insert and remove than a general-purpose hash map or a B-tree
//! (docs/design/pool.md, "One-thread cost").

/// A value an [`AddrMap`] can hold: one value is never stored and marks an empty slot.
pub(crate) trait Value: Copy + Eq + std::fmt::Debug {
    /// The value that marks an empty slot.
    const VACANT: Self;
}

impl Value for u32 {
    const VACANT: u32 = u32::MAX;
}

impl Value for usize {
    const VACANT: usize = usize::MAX;
}

/// Address → value, open addressing with linear probing (at most half full) and deletion by
/// backward shift: a lookup is one multiplication and, mostly, one or two slots.
#[derive(Debug)]
pub(crate) struct AddrMap<V: Value> {
    /// `(address, value)`; [`Value::VACANT`] values mark empty slots.
    slots: Vec<(usize, V)>,
    len: usize,
    /// `slots.len() - 1`.
    mask: usize,
    /// 64 less the bits of a slot number.
    shift: u32,
}

impl<V: Value> Default for AddrMap<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
            mask: 0,
            shift: 0,
        }
    }
}

impl<V: Value> AddrMap<V> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The home slot of `key`: Fibonacci hashing, whose top bits mix every bit of the address
    /// (aligned addresses have none in their low bits).
    #[inline]
    fn home(&self, key: usize) -> usize {
        ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Slot `i & mask` of a table that has slots.
    #[inline]
    fn at(&self, i: usize) -> &(usize, V) {
        debug_assert!(self.slots.len() == self.mask + 1, "the table has slots");
        // SAFETY: a table with slots has `mask + 1` of them (`grow` sets both), and every caller
        // holds a table with slots: `find` returns early on an empty one, `insert` grows it first
        // and `remove` runs only after `find` found the key.
        unsafe { self.slots.get_unchecked(i & self.mask) }
    }

    /// Slot `i & mask` of a table that has slots, to write.
    #[inline]
    fn at_mut(&mut self, i: usize) -> &mut (usize, V) {
        debug_assert!(self.slots.len() == self.mask + 1, "the table has slots");
        // SAFETY: as in `at`.
        unsafe { self.slots.get_unchecked_mut(i & self.mask) }
    }

    #[inline]
    fn find(&self, key: usize) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask;
        let mut i = self.home(key);
        loop {
            let &(k, id) = self.at(i);
            if id == V::VACANT {
                return None;
            }
            if k == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub(crate) fn get(&self, key: usize) -> Option<V> {
        self.find(key).map(|i| self.at(i).1)
    }

    /// The value of `key`, to change in place (not to [`Value::VACANT`]).
    #[inline]
    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut V> {
        self.find(key).map(|i| &mut self.at_mut(i).1)
    }

    /// Maps `key` to `id` (`id` is not [`Value::VACANT`]).
    #[inline]
    pub(crate) fn insert(&mut self, key: usize, id: V) {
        debug_assert_ne!(id, V::VACANT);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask;
        let mut i = self.home(key);
        loop {
            let slot = self.at_mut(i);
            if slot.1 == V::VACANT {
                *slot = (key, id);
                self.len += 1;
                return;
            }
            if slot.0 == key {
                slot.1 = id;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `key` (if present).
    #[inline]
    pub(crate) fn remove(&mut self, key: usize) {
        let Some(mut i) = self.find(key) else {
            return;
        };
        let mask = self.mask;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let &(k, id) = self.at(j);
            if id == V::VACANT {
                break;
            }
            // An entry may fill the hole at `i` unless its home lies after `i` (cyclically) up to
            // `j`: it would then be found no longer.
            let home = self.home(k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                *self.at_mut(i) = (k, id);
                i = j;
            }
        }
        self.at_mut(i).1 = V::VACANT;
        self.len -= 1;
    }

    #[cold]
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![(0, V::VACANT); size]);
        self.len = 0;
        self.mask = size - 1;
        self.shift = u64::BITS - size.trailing_zeros();
        for (k, id) in old {
            if id != V::VACANT {
                self.insert(k, id);
            }
        }
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, V)> + '_ {
        self.slots
            .iter()
            .copied()
            .filter(|&(_, id)| id != V::VACANT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts, replacements and removals with colliding keys against a model.
    #[test]
    fn addr_map_matches_a_model() {
        let mut map = AddrMap::<u32>::default();
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
