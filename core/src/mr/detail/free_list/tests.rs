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
        ops in proptest::collection::vec((0u8..6, 1usize..48, 0usize..1024, 0u32..3), 1..400),
        ordered in any::<bool>(),
    ) {
        // Both ways of answering ordered questions: the B-tree and the scan.
        let mut fl = FreeList::<Streams>::new();
        if ordered {
            fl.keep_address_order();
        } else {
            fl = fl.without_address_order();
        }
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
