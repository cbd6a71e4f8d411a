//! One arena superblock: a range of the arena's upstream block owned by one arena, its free space
//! kept as a bitmap of 256-byte units (RMM keeps a `std::set` of free blocks per superblock).
//!
//! A superblock holds at most a few thousand units (it is about 1 MiB: see
//! [`SUPERBLOCK_SIZE`](super::arena::SUPERBLOCK_SIZE)), so first fit is a scan for the lowest run
//! of free bits (word by word), a free sets bits, and coalescing is implicit: two free neighbours
//! are one run. A free checks that every unit of its range is handed out, so a double free, or one
//! that overlaps free space, is refused exactly.

use std::fmt::Write as _;

use crate::aligned::DEFAULT_ALIGNMENT;
use crate::error::{Error, Result};

/// Bytes per bit.
const UNIT: usize = DEFAULT_ALIGNMENT;

/// A range of the upstream block owned by one arena, with its free units.
#[derive(Debug)]
pub(crate) struct Superblock {
    start: usize,
    size: usize,
    bits: Bits,
    free_units: usize,
    /// The longest free run, in units (kept exact: arenas pick superblocks by it).
    longest: usize,
}

impl Superblock {
    /// A wholly free superblock `[start, start + size)` (`start` and `size` multiples of 256).
    pub(crate) fn new(start: usize, size: usize) -> Self {
        debug_assert!(start % UNIT == 0 && size % UNIT == 0 && size > 0);
        let units = size / UNIT;
        let mut bits = Bits::new(units);
        bits.set(0, units);
        Self {
            start,
            size,
            bits,
            free_units: units,
            longest: units,
        }
    }

    /// Start address.
    pub(crate) fn start(&self) -> usize {
        self.start
    }

    /// Length in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// True when nothing in it is handed out.
    pub(crate) fn is_empty(&self) -> bool {
        self.free_units * UNIT == self.size
    }

    /// Bytes handed out.
    pub(crate) fn used(&self) -> usize {
        self.size - self.free_bytes()
    }

    /// Bytes free.
    pub(crate) fn free_bytes(&self) -> usize {
        self.free_units * UNIT
    }

    /// The largest free block.
    pub(crate) fn largest(&self) -> usize {
        self.longest * UNIT
    }

    /// True when `addr` lies in this superblock.
    pub(crate) fn contains(&self, addr: usize) -> bool {
        addr >= self.start && addr - self.start < self.size
    }

    /// First fit: `size` bytes (a multiple of 256) from the start of the lowest free run that holds
    /// them.
    pub(crate) fn first_fit(&mut self, size: usize) -> Option<usize> {
        let units = size / UNIT;
        if units == 0 || units > self.longest {
            return None;
        }
        let mut from = 0;
        while let Some(run) = self.bits.next_set(from) {
            let end = self.bits.next_clear(run);
            if end - run >= units {
                self.bits.clear(run, units);
                self.free_units -= units;
                if end - run == self.longest {
                    // It may have been the only run that long: the rest of it is the longest now
                    // when the other runs together are no longer (the common case of an arena
                    // that hands out and takes back near its start), else look at them all.
                    let rest = end - run - units;
                    self.longest = if self.free_units - rest <= rest {
                        rest
                    } else {
                        self.runs().map(|(_, len)| len).max().unwrap_or(0)
                    };
                }
                return Some(self.start + run * UNIT);
            }
            from = end;
        }
        debug_assert!(
            false,
            "no run of {units} units although the longest has {}",
            self.longest
        );
        None
    }

    /// Returns `[addr, addr + size)` (`size` a multiple of 256), coalescing it with its free
    /// neighbours.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range runs past the superblock, does not start on a
    /// unit, or is (partly) free already (a double free); nothing changes then.
    pub(crate) fn free(&mut self, addr: usize, size: usize) -> Result<()> {
        let offset = addr - self.start;
        if size > self.size - offset {
            return Err(Error::invalid(format!(
                "{addr:#x} (+{size}) runs past the end of its arena superblock [{:#x}, +{})",
                self.start, self.size
            )));
        }
        let (unit, units) = (offset / UNIT, size / UNIT);
        if offset % UNIT != 0 || self.bits.any(unit, units) {
            return Err(Error::invalid(format!(
                "{addr:#x} (+{size}) is not allocated (double free?)"
            )));
        }
        self.bits.set(unit, units);
        self.free_units += units;
        let run = self.bits.next_clear(unit + units) - self.bits.run_start(unit);
        self.longest = self.longest.max(run);
        Ok(())
    }

    /// The free runs as `(first unit, units)`, in address order.
    fn runs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut from = 0;
        std::iter::from_fn(move || {
            let run = self.bits.next_set(from)?;
            let end = self.bits.next_clear(run);
            from = end;
            Some((run, end - run))
        })
    }

    /// Writes the superblock and its free blocks (the arena's dump).
    pub(crate) fn describe(&self, out: &mut String, indent: &str) {
        let _ = writeln!(
            out,
            "{indent}superblock [{:#x}, +{}): used {}, free {} in {} blocks, largest {}",
            self.start,
            self.size,
            self.used(),
            self.free_bytes(),
            self.runs().count(),
            self.largest()
        );
        for (run, units) in self.runs() {
            let _ = writeln!(
                out,
                "{indent}  free [{:#x}, +{})",
                self.start + run * UNIT,
                units * UNIT
            );
        }
    }

    /// Panics when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.bits.check_invariants();
        assert_eq!(
            self.bits.count(),
            self.free_units,
            "free unit count drifted in {:#x}",
            self.start
        );
        assert_eq!(
            self.longest,
            self.runs().map(|(_, len)| len).max().unwrap_or(0),
            "stale longest run in superblock {:#x}",
            self.start
        );
    }
}

/// A bitmap of units with two summaries, so that a search skips whole words of free units, or of
/// handed-out ones, at a time: bit `w` of `any` says word `w` has a set bit, of `full` that all its
/// bits are set. Bits past `len` units stay clear.
#[derive(Debug)]
struct Bits {
    words: Box<[u64]>,
    any: Box<[u64]>,
    full: Box<[u64]>,
}

impl Bits {
    fn new(units: usize) -> Self {
        let words = units.div_ceil(64);
        Self {
            words: vec![0; words].into_boxed_slice(),
            any: vec![0; words.div_ceil(64)].into_boxed_slice(),
            full: vec![0; words.div_ceil(64)].into_boxed_slice(),
        }
    }

    /// Refreshes the summary bits of word `w`.
    #[inline(always)]
    fn summarize(&mut self, w: usize) {
        let (sw, bit) = (w / 64, 1u64 << (w % 64));
        let word = self.words[w];
        if word != 0 {
            self.any[sw] |= bit;
        } else {
            self.any[sw] &= !bit;
        }
        if word == u64::MAX {
            self.full[sw] |= bit;
        } else {
            self.full[sw] &= !bit;
        }
    }

    /// Sets (`free`) or clears the units `[unit, unit + units)`: the words at either end one by
    /// one, the whole words between at once, with their summary bits.
    #[inline]
    fn write(&mut self, unit: usize, units: usize, free: bool) {
        let end = unit + units;
        let (first, last) = (unit / 64, (end - 1) / 64);
        if first == last {
            // One word (every small block): no loop, no closure.
            let mask = (u64::MAX << (unit % 64)) & (u64::MAX >> (63 - (end - 1) % 64));
            if free {
                self.words[first] |= mask;
            } else {
                self.words[first] &= !mask;
            }
            self.summarize(first);
            return;
        }
        let edge = |bits: &mut Self, w: usize, mask: u64| {
            if free {
                bits.words[w] |= mask;
            } else {
                bits.words[w] &= !mask;
            }
            bits.summarize(w);
        };
        let low = u64::MAX << (unit % 64);
        let high = u64::MAX >> (63 - (end - 1) % 64);
        edge(self, first, low);
        edge(self, last, high);
        if last > first + 1 {
            let fill = if free { u64::MAX } else { 0 };
            self.words[first + 1..last].fill(fill);
            for (sw, mask) in words_of(first + 1, last - first - 1) {
                if free {
                    self.any[sw] |= mask;
                    self.full[sw] |= mask;
                } else {
                    self.any[sw] &= !mask;
                    self.full[sw] &= !mask;
                }
            }
        }
    }

    fn set(&mut self, unit: usize, units: usize) {
        self.write(unit, units, true);
    }

    fn clear(&mut self, unit: usize, units: usize) {
        self.write(unit, units, false);
    }

    /// True when a unit of `[unit, unit + units)` is set (the whole words between the ends are
    /// looked at in the summary).
    fn any(&self, unit: usize, units: usize) -> bool {
        let end = unit + units;
        let (first, last) = (unit / 64, (end - 1) / 64);
        let low = u64::MAX << (unit % 64);
        let high = u64::MAX >> (63 - (end - 1) % 64);
        if first == last {
            return self.words[first] & low & high != 0;
        }
        self.words[first] & low != 0
            || self.words[last] & high != 0
            || words_of(first + 1, last - first - 1).any(|(sw, mask)| self.any[sw] & mask != 0)
    }

    /// The first set unit at or after `from`.
    fn next_set(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let word = *self.words.get(w)? & (u64::MAX << (from % 64));
        if word != 0 {
            return Some(w * 64 + word.trailing_zeros() as usize);
        }
        let w = first_one(&self.any, w + 1, false)?;
        Some(w * 64 + self.words.get(w)?.trailing_zeros() as usize)
    }

    /// The first clear unit at or after `from` (every unit from there on set: the end).
    fn next_clear(&self, from: usize) -> usize {
        let w = from / 64;
        let Some(&word) = self.words.get(w) else {
            return from;
        };
        let clear = !word & (u64::MAX << (from % 64));
        if clear != 0 {
            return w * 64 + clear.trailing_zeros() as usize;
        }
        match first_one(&self.full, w + 1, true) {
            Some(w) if w < self.words.len() => w * 64 + (!self.words[w]).trailing_zeros() as usize,
            _ => self.words.len() * 64,
        }
    }

    /// The first unit of the run of set units that ends at `unit` (exclusive): `unit` when the unit
    /// before is clear.
    fn run_start(&self, unit: usize) -> usize {
        if unit == 0 {
            return 0;
        }
        let (w, bit) = ((unit - 1) / 64, (unit - 1) % 64);
        let below = u64::MAX >> (63 - bit);
        let clear = !self.words[w] & below;
        if clear != 0 {
            return w * 64 + (64 - clear.leading_zeros() as usize);
        }
        match last_zero_below(&self.full, w) {
            Some(w) => w * 64 + (64 - (!self.words[w]).leading_zeros() as usize),
            None => 0,
        }
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        for (w, &word) in self.words.iter().enumerate() {
            let (sw, bit) = (w / 64, 1u64 << (w % 64));
            assert_eq!(self.any[sw] & bit != 0, word != 0, "summary of word {w}");
            assert_eq!(
                self.full[sw] & bit != 0,
                word == u64::MAX,
                "summary of word {w}"
            );
        }
    }
}

/// The first bit at or after `from` that is set in `summary` (or, with `zero`, clear), as a bit
/// index; `None` when there is none in its words.
fn first_one(summary: &[u64], from: usize, zero: bool) -> Option<usize> {
    let mut sw = from / 64;
    let flip = if zero { u64::MAX } else { 0 };
    let mut word = (*summary.get(sw)? ^ flip) & (u64::MAX << (from % 64));
    while word == 0 {
        sw += 1;
        word = *summary.get(sw)? ^ flip;
    }
    Some(sw * 64 + word.trailing_zeros() as usize)
}

/// The last bit below `before` that is clear in `summary`.
fn last_zero_below(summary: &[u64], before: usize) -> Option<usize> {
    if before == 0 {
        return None;
    }
    let last = before - 1;
    let mut sw = last / 64;
    let mut word = !summary[sw] & (u64::MAX >> (63 - last % 64));
    while word == 0 {
        sw = sw.checked_sub(1)?;
        word = !summary[sw];
    }
    Some(sw * 64 + 63 - word.leading_zeros() as usize)
}

/// The words that `[unit, unit + units)` touches, each with the mask of its bits there.
fn words_of(unit: usize, units: usize) -> impl Iterator<Item = (usize, u64)> {
    let end = unit + units;
    let mut at = unit;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (w, bit) = (at / 64, at % 64);
        let n = (64 - bit).min(end - at);
        let mask = if n == 64 {
            u64::MAX
        } else {
            ((1u64 << n) - 1) << bit
        };
        at += n;
        Some((w, mask))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn first_fit_takes_the_start_of_the_lowest_run_and_frees_coalesce() {
        let mut sb = Superblock::new(MIB, MIB);
        let a = sb.first_fit(256).unwrap();
        let b = sb.first_fit(512).unwrap();
        assert_eq!((a, b), (MIB, MIB + 256));
        assert_eq!(sb.used(), 768);
        sb.free(a, 256).unwrap();
        assert_eq!(
            sb.first_fit(512),
            Some(MIB + 768),
            "the hole at the start is too small"
        );
        assert_eq!(
            sb.first_fit(256),
            Some(a),
            "and is the lowest that fits 256 bytes"
        );
        sb.free(a, 256).unwrap();
        sb.free(b, 512).unwrap();
        assert!(
            sb.free(b, 512).is_err(),
            "a double free is an error, not a corruption"
        );
        assert!(
            sb.free(b + 256, 256).is_err(),
            "so is a free inside free space"
        );
        assert!(
            sb.free(2 * MIB - 256, 512).is_err(),
            "a range past the end is an error"
        );
        assert!(
            sb.free(MIB + 768 + 1, 256).is_err(),
            "a range off the units is an error"
        );
        sb.free(MIB + 768, 512).unwrap();
        assert!(sb.is_empty());
        assert_eq!(sb.largest(), MIB, "everything coalesced");
        sb.check_invariants();
    }

    #[test]
    fn a_superblock_of_an_odd_size_keeps_its_end() {
        let mut sb = Superblock::new(0, 65 * 256);
        assert_eq!(sb.first_fit(65 * 256), Some(0));
        assert_eq!(sb.first_fit(256), None);
        sb.free(0, 65 * 256).unwrap();
        assert_eq!(sb.first_fit(66 * 256), None, "no unit past the end");
        sb.check_invariants();
    }

    proptest! {
        /// Random first fits and frees against a model (a list of free units): first fit takes the
        /// lowest run that holds the request, frees refuse ranges that are not handed out, and
        /// the counts and the largest run agree.
        #[test]
        fn first_fit_and_free_match_a_model(
            units in 1usize..300,
            ops in proptest::collection::vec((any::<bool>(), 1usize..40, 0usize..1000), 1..300)
        ) {
            check_against_model(units, ops)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The same on superblocks of up to 2 MiB (more than one summary word), with requests of up
        /// to 1 MiB.
        #[test]
        fn first_fit_and_free_of_large_runs_match_a_model(
            units in 4000usize..8192,
            ops in proptest::collection::vec((any::<bool>(), 1usize..4096, 0usize..1000), 1..120)
        ) {
            check_against_model(units, ops)?;
        }
    }

    fn check_against_model(
        units: usize,
        ops: Vec<(bool, usize, usize)>,
    ) -> std::result::Result<(), TestCaseError> {
        {
            let mut sb = Superblock::new(UNIT * 64, units * UNIT);
            let mut free = vec![true; units];
            let mut live: Vec<(usize, usize)> = Vec::new();
            for (alloc, n, pick) in ops {
                if alloc || live.is_empty() {
                    let expected =
                        (0..units).find(|&u| u + n <= units && free[u..u + n].iter().all(|&f| f));
                    let got = sb.first_fit(n * UNIT).map(|a| (a - UNIT * 64) / UNIT);
                    prop_assert_eq!(got, expected);
                    if let Some(u) = got {
                        free[u..u + n].iter_mut().for_each(|f| *f = false);
                        live.push((u, n));
                    }
                } else {
                    let (u, n) = live.swap_remove(pick % live.len());
                    // A wrong free first: one unit more, or one unit before.
                    if u + n < units && free[u + n] {
                        prop_assert!(sb.free(UNIT * 64 + u * UNIT, (n + 1) * UNIT).is_err());
                    }
                    sb.free(UNIT * 64 + u * UNIT, n * UNIT).unwrap();
                    free[u..u + n].iter_mut().for_each(|f| *f = true);
                    prop_assert!(
                        sb.free(UNIT * 64 + u * UNIT, n * UNIT).is_err(),
                        "double free"
                    );
                }
                sb.check_invariants();
                prop_assert_eq!(sb.free_bytes(), free.iter().filter(|&&f| f).count() * UNIT);
                let mut longest = 0;
                let mut run = 0;
                for &f in &free {
                    run = if f { run + 1 } else { 0 };
                    longest = longest.max(run);
                }
                prop_assert_eq!(sb.largest(), longest * UNIT);
            }
        }
        Ok(())
    }
}
