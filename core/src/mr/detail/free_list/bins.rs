//! The size index of one tag class: TLSF size bins, a list of blocks per bin and two levels of
//! bitmaps of the non-empty bins.

/// Steps per power of two, as a power of two: a bin's sizes differ by at most 1/16 of its lower
/// bound.
pub(super) const STEP_BITS: u32 = 4;
/// Steps per power of two.
pub(super) const SUB_BINS: usize = 1 << STEP_BITS;
/// Levels (powers of two): every `usize` size has one.
pub(super) const LEVELS: usize = 64;
/// Blocks of the request's own bin looked at before the larger bins (see the module docs).
pub(super) const OWN_BIN_SCAN: usize = 8;
/// Blocks of a larger bin looked at for the tightest fit, after the first that fits.
pub(super) const BIN_SCAN: usize = 8;
/// No block.
pub(super) const NIL: u32 = u32::MAX;

/// The bin of `size` (at least 1): sizes below [`SUB_BINS`] have a bin each; above, the power of
/// two picks the level and the next [`STEP_BITS`] bits the step.
#[inline]
pub(super) fn bin_of(size: usize) -> usize {
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
pub(super) struct SizeBins {
    /// Bit `l`: some bin of level `l` is not empty.
    pub(super) levels: u64,
    /// Per level, bit `s`: bin `l * SUB_BINS + s` is not empty.
    pub(super) steps: [u16; LEVELS],
    /// Per bin, its first block (meaningful only while its bit is set).
    pub(super) heads: [u32; LEVELS * SUB_BINS],
}

impl SizeBins {
    pub(super) fn new() -> Self {
        Self {
            levels: 0,
            steps: [0; LEVELS],
            heads: [NIL; LEVELS * SUB_BINS],
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.levels == 0
    }

    pub(super) fn has(&self, bin: usize) -> bool {
        self.steps[bin / SUB_BINS] & (1 << (bin % SUB_BINS)) != 0
    }

    /// The first block of `bin`.
    pub(super) fn head(&self, bin: usize) -> u32 {
        if self.has(bin) {
            self.heads[bin]
        } else {
            NIL
        }
    }

    /// The first non-empty bin at or above `bin`.
    #[inline]
    pub(super) fn first_from(&self, bin: usize) -> Option<usize> {
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
    pub(super) fn last(&self) -> Option<usize> {
        if self.levels == 0 {
            return None;
        }
        let level = (u64::BITS - 1 - self.levels.leading_zeros()) as usize;
        let step = (u16::BITS - 1 - self.steps[level].leading_zeros()) as usize;
        Some(level * SUB_BINS + step)
    }

    pub(super) fn mark(&mut self, bin: usize, head: u32) {
        self.heads[bin] = head;
        self.steps[bin / SUB_BINS] |= 1 << (bin % SUB_BINS);
        self.levels |= 1 << (bin / SUB_BINS);
    }

    pub(super) fn unmark(&mut self, bin: usize) {
        let level = bin / SUB_BINS;
        self.steps[level] &= !(1 << (bin % SUB_BINS));
        if self.steps[level] == 0 {
            self.levels &= !(1 << level);
        }
    }
}
