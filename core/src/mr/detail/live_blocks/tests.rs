use super::*;
use crate::mr::detail::live_set::granule;

const BLOCK: usize = 4096;

/// A record over regions that the test sets, as the engine's would be.
struct Regions {
    generation: u64,
    list: Vec<(usize, usize)>,
}

impl Regions {
    fn record(&self, blocks: &LiveBlocks, addr: usize, granule: usize) -> bool {
        blocks.record(
            addr as *mut u8,
            granule,
            || self.generation,
            || Some(self.list.clone()),
        )
    }

    fn set(&mut self, list: &[(usize, usize)]) {
        self.list = list.to_vec();
        self.generation += 1;
    }
}

fn taken(claim: Claim<'_>) -> bool {
    matches!(claim, Claim::Taken(_))
}

#[test]
fn a_free_is_taken_once_with_its_pointer_and_granule_only() {
    let blocks = LiveBlocks::new(BLOCK).unwrap();
    let regions = Regions {
        generation: 1,
        list: vec![(0x10_0000, 16 * BLOCK)],
    };
    let p = 0x10_0000 + 3 * BLOCK;
    let g = granule(1000, Some(256));
    assert!(regions.record(&blocks, p, g));
    assert_eq!(blocks.peek(p as *mut u8), Some(g));
    // A wrong size names the live granule and changes nothing.
    let wrong = granule(2000, Some(256));
    assert!(matches!(blocks.take(p as *mut u8, wrong), Claim::Other(live) if live == g));
    // An interior pointer, a pointer outside every region, a free block: nothing.
    assert!(matches!(
        blocks.take((p + 256) as *mut u8, g),
        Claim::Absent
    ));
    assert!(matches!(blocks.take(0x1000 as *mut u8, g), Claim::Absent));
    assert!(matches!(
        blocks.take((p + BLOCK) as *mut u8, g),
        Claim::Absent
    ));
    assert!(taken(blocks.take(p as *mut u8, g)));
    // A double free.
    assert!(matches!(blocks.take(p as *mut u8, g), Claim::Absent));
    assert_eq!(blocks.peek(p as *mut u8), None);
}

#[test]
fn a_restored_allocation_is_live_again() {
    let blocks = LiveBlocks::new(BLOCK).unwrap();
    let regions = Regions {
        generation: 7,
        list: vec![(0x20_0000, 4 * BLOCK)],
    };
    let g = granule(BLOCK, Some(256));
    assert!(regions.record(&blocks, 0x20_0000, g));
    let Claim::Taken(t) = blocks.take(0x20_0000 as *mut u8, g) else {
        panic!("live")
    };
    blocks.restore(t);
    assert!(taken(blocks.take(0x20_0000 as *mut u8, g)));
}

#[test]
fn larger_alignments_are_their_own_class_at_their_pointer() {
    let blocks = LiveBlocks::new(BLOCK).unwrap();
    // A region that starts 256-aligned only: a 1 KiB-aligned allocation sits inside its block.
    let start = 0x30_0100;
    let regions = Regions {
        generation: 1,
        list: vec![(start, 4 * BLOCK)],
    };
    let g = granule(1000, Some(1024));
    let p = align_up(start + BLOCK, 1024).unwrap();
    assert!(regions.record(&blocks, p, g));
    assert!(matches!(
        blocks.take((start + BLOCK) as *mut u8, g),
        Claim::Absent
    ));
    // Freed with alignment 256, it names the live allocation with another class.
    assert!(matches!(
        blocks.take(p as *mut u8, granule(1000, Some(256))),
        Claim::Other(live) if live == g
    ));
    assert!(taken(blocks.take(p as *mut u8, g)));
}

#[test]
fn regions_given_back_and_replaced_keep_no_old_record() {
    let blocks = LiveBlocks::new(BLOCK).unwrap();
    let mut regions = Regions {
        generation: 1,
        list: vec![(0x40_0000, 8 * BLOCK), (0x80_0000, 8 * BLOCK)],
    };
    let g = granule(256, Some(256));
    assert!(regions.record(&blocks, 0x40_0000, g));
    assert!(regions.record(&blocks, 0x80_0000 + BLOCK, g));
    // The first region goes (its block freed behind the record's back) and another comes: the
    // old word is no live allocation there.
    regions.set(&[(0x80_0000, 8 * BLOCK), (0x40_0000 + BLOCK, 4 * BLOCK)]);
    assert!(regions.record(&blocks, 0x40_0000 + 2 * BLOCK, g));
    assert!(matches!(
        blocks.take(0x40_0000 as *mut u8, g),
        Claim::Absent
    ));
    // The region that stayed keeps its live allocation.
    assert!(taken(blocks.take((0x80_0000 + BLOCK) as *mut u8, g)));
    assert!(taken(blocks.take((0x40_0000 + 2 * BLOCK) as *mut u8, g)));
}

#[test]
fn a_directory_grows_past_its_first_capacity() {
    let blocks = LiveBlocks::new(BLOCK).unwrap();
    let mut regions = Regions {
        generation: 0,
        list: Vec::new(),
    };
    let g = granule(BLOCK, Some(256));
    let mut list = Vec::new();
    for i in 0..100 {
        list.push((0x100_0000 + i * 0x10_0000, 2 * BLOCK));
        regions.set(&list);
        assert!(regions.record(&blocks, list[i].0 + BLOCK, g));
    }
    for &(start, _) in &list {
        assert!(taken(blocks.take((start + BLOCK) as *mut u8, g)));
    }
}

#[test]
fn racing_double_frees_take_each_allocation_once() {
    let blocks = LiveBlocks::new(256).unwrap();
    let start = 0x200_0000;
    let regions = Regions {
        generation: 1,
        list: vec![(start, 1024 * 256)],
    };
    let g = granule(256, Some(256));
    for i in 0..1024 {
        assert!(regions.record(&blocks, start + i * 256, g));
    }
    let wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..1024)
                        .filter(|i| taken(blocks.take((start + i * 256) as *mut u8, g)))
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1024);
}

#[test]
fn blocks_too_large_for_a_word_get_no_record() {
    assert!(LiveBlocks::new(MAX_BLOCK).is_none());
    assert!(LiveBlocks::new(MAX_BLOCK - 256).is_some());
}
