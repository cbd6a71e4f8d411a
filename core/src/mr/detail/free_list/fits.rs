//! [`FreeList::fits_in`]'s walk over the blocks of one class that hold a request.

use crate::aligned::align_up;

#[cfg(doc)]
use super::bins::SUB_BINS;
use super::bins::{bin_of, SizeBins, NIL, OWN_BIN_SCAN};
use super::{BlockId, BlockTag, Fit, FreeList};

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
}
