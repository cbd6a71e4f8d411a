//! Checked frees in the pool, fixed-size, binning and arena resources (issue 12): a free whose
//! pointer and size do not match a live allocation is refused with `InvalidArgument`, and the
//! resource stays intact: nothing leaks, nothing live is handed out again, the counters are
//! unchanged. Over host memory, so live blocks are filled and checked too.

use crate::cuda::Stream;
use crate::error::Error;
use crate::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, FixedSizeMemoryResource, FreeChecks,
    LimitingResourceAdaptor, LoggingResourceAdaptor, PoolMemoryResource, StatisticsResourceAdaptor,
    SystemMemoryResource, TrackingResourceAdaptor,
};
use crate::{AnyResource, MemoryResource};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const S: Stream = Stream::DEFAULT;

fn system() -> AnyResource {
    AnyResource::new(SystemMemoryResource::new())
}

/// Each checked sub-allocator, named, over host memory; each can hold at least 1 MiB live.
fn resources() -> Vec<(&'static str, AnyResource)> {
    vec![
        (
            "pool",
            AnyResource::new(PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap()),
        ),
        (
            "fixed_size",
            AnyResource::new(FixedSizeMemoryResource::new(system(), 4 * KIB, 256).unwrap()),
        ),
        (
            "binning",
            AnyResource::new(BinningMemoryResource::with_exponents(system(), 8, 12).unwrap()),
        ),
        (
            "binning without bins",
            AnyResource::new(BinningMemoryResource::new(system())),
        ),
        (
            "arena",
            AnyResource::new(
                ArenaMemoryResource::with_options(
                    system(),
                    ArenaOptions::default().arena_size(4 * MIB),
                )
                .unwrap(),
            ),
        ),
    ]
}

fn is_invalid(r: crate::Result<()>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

/// Fills `[p, p + n)` with `tag`.
fn fill(p: *mut u8, n: usize, tag: u8) {
    // SAFETY: `p` is a live host allocation of at least `n` bytes.
    unsafe { std::ptr::write_bytes(p, tag, n) };
}

fn holds(p: *mut u8, n: usize, tag: u8) -> bool {
    // SAFETY: as in `fill`.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .all(|&b| b == tag)
}

#[test]
fn an_interior_free_is_refused_and_nothing_live_is_handed_out_again() {
    for (name, mr) in resources() {
        let p = mr.allocate(S, 4 * KIB, 256).unwrap();
        fill(p, 4 * KIB, 0xAB);
        // SAFETY: deliberately wrong; a checked resource refuses it before touching anything.
        let r = unsafe { mr.deallocate(S, p.wrapping_add(256), 256, 256) };
        assert!(
            is_invalid(r.clone()),
            "{name}: an interior free must be refused: {r:?}"
        );
        let others: Vec<*mut u8> = (0..64).map(|_| mr.allocate(S, 256, 256).unwrap()).collect();
        for &q in &others {
            let inside = (p as usize..p as usize + 4 * KIB).contains(&(q as usize));
            assert!(!inside, "{name}: {q:p} is inside the live block at {p:p}");
            fill(q, 256, 0xCD);
        }
        assert!(
            holds(p, 4 * KIB, 0xAB),
            "{name}: the live block was overwritten"
        );
        for q in others {
            // SAFETY: allocated above with these arguments.
            unsafe { mr.deallocate(S, q, 256, 256).unwrap() };
        }
        // SAFETY: allocated above with these arguments.
        unsafe { mr.deallocate(S, p, 4 * KIB, 256).unwrap() };
    }
}

#[test]
fn a_free_with_a_wrong_size_is_refused_and_nothing_leaks() {
    for (name, mr) in resources() {
        // 255 rounds of RMM's leak (allocate 4 KiB, free 256 B) would use up a 1 MiB pool.
        for round in 0..1024 {
            let p = mr
                .allocate(S, 4 * KIB, 256)
                .unwrap_or_else(|e| panic!("{name}: round {round}: {e}"));
            assert!(
                // SAFETY: deliberately wrong sizes, refused.
                is_invalid(unsafe { mr.deallocate(S, p, 256, 256) }),
                "{name}: too small a size"
            );
            assert!(
                // SAFETY: as above.
                is_invalid(unsafe { mr.deallocate(S, p, 8 * KIB, 256) }),
                "{name}: too large a size"
            );
            // SAFETY: the right arguments.
            unsafe { mr.deallocate(S, p, 4 * KIB, 256).unwrap() };
        }
    }
}

#[test]
fn double_and_foreign_frees_are_refused() {
    let other = PoolMemoryResource::new(system(), Some(MIB), None).unwrap();
    let foreign = other.allocate(S, 256, 256).unwrap();
    for (name, mr) in resources() {
        let p = mr.allocate(S, 1000, 256).unwrap();
        // SAFETY: the right arguments (1000 and 1024 are one 256-byte granule).
        unsafe { mr.deallocate(S, p, 1024, 256).unwrap() };
        assert!(
            // SAFETY: deliberately wrong: freed already.
            is_invalid(unsafe { mr.deallocate(S, p, 1000, 256) }),
            "{name}: a double free"
        );
        assert!(
            // SAFETY: deliberately wrong: another resource's pointer.
            is_invalid(unsafe { mr.deallocate(S, foreign, 256, 256) }),
            "{name}: a foreign pointer"
        );
        let mut local = [0u8; 512];
        assert!(
            // SAFETY: deliberately wrong: not heap memory at all.
            is_invalid(unsafe { mr.deallocate(S, local.as_mut_ptr(), 256, 256) }),
            "{name}: a stack pointer"
        );
    }
    // SAFETY: allocated above with these arguments.
    unsafe { other.deallocate(S, foreign, 256, 256).unwrap() };
}

#[test]
fn frees_from_other_threads_are_checked_too() {
    for (name, mr) in resources() {
        let ptrs: Vec<usize> = (0..256)
            .map(|_| mr.allocate(S, 512, 256).unwrap() as usize)
            .collect();
        let mr2 = mr.clone();
        std::thread::spawn(move || {
            for &p in &ptrs {
                // SAFETY: deliberately wrong, refused; then the right arguments.
                unsafe {
                    assert!(
                        is_invalid(mr2.deallocate(S, (p + 256) as *mut u8, 256, 256)),
                        "{name}"
                    );
                    assert!(
                        is_invalid(mr2.deallocate(S, p as *mut u8, 4 * KIB, 256)),
                        "{name}"
                    );
                    mr2.deallocate(S, p as *mut u8, 512, 256).unwrap();
                    assert!(
                        is_invalid(mr2.deallocate(S, p as *mut u8, 512, 256)),
                        "{name}: double free on a thread"
                    );
                }
            }
        })
        .join()
        .unwrap();
    }
}

#[test]
fn the_books_stay_exact_after_refusals() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap();
    let p = pool.allocate(S, 4 * KIB, 256).unwrap();
    let before = pool.statistics();
    // SAFETY: deliberately wrong, refused.
    unsafe {
        assert!(is_invalid(pool.deallocate(
            S,
            p.wrapping_add(256),
            256,
            256
        )));
        assert!(is_invalid(pool.deallocate(S, p, 256, 256)));
    }
    assert_eq!(pool.statistics(), before);
    let arena = ArenaMemoryResource::new(system(), Some(4 * MIB), false).unwrap();
    let q = arena.allocate(S, 4 * KIB, 256).unwrap();
    // SAFETY: deliberately wrong, refused.
    assert!(is_invalid(unsafe {
        arena.deallocate(S, q.wrapping_add(512), 512, 256)
    }));
    assert_eq!(arena.used_bytes(), 4 * KIB);
    arena.check_invariants();
    // SAFETY: allocated above with these arguments.
    unsafe {
        pool.deallocate(S, p, 4 * KIB, 256).unwrap();
        arena.deallocate(S, q, 4 * KIB, 256).unwrap();
    }
    assert_eq!(pool.statistics().bytes_used, 0);
    assert_eq!(arena.used_bytes(), 0);
}

#[test]
fn an_alignment_that_would_route_elsewhere_is_refused() {
    let fixed = FixedSizeMemoryResource::new(system(), 64 * KIB, 4).unwrap();
    let p = fixed.allocate(S, 1000, 4096).unwrap();
    // SAFETY: deliberately wrong: the alignment class differs, refused.
    assert!(is_invalid(unsafe { fixed.deallocate(S, p, 1000, 256) }));
    // SAFETY: the right arguments.
    unsafe { fixed.deallocate(S, p, 1000, 4096).unwrap() };
    let binning = BinningMemoryResource::with_exponents(system(), 8, 14).unwrap();
    let q = binning.allocate(S, 300, 256).unwrap();
    // SAFETY: deliberately wrong: with this alignment the free would go to the 4 KiB bin.
    assert!(is_invalid(unsafe { binning.deallocate(S, q, 300, 4096) }));
    // SAFETY: the right arguments.
    unsafe { binning.deallocate(S, q, 300, 256).unwrap() };
}

#[test]
fn unchecked_is_an_explicit_choice() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), None).unwrap();
    assert_eq!(
        pool.free_checks(),
        FreeChecks::Checked,
        "checked by default"
    );
    let unchecked =
        PoolMemoryResource::with_free_checks(system(), Some(MIB), None, FreeChecks::Unchecked)
            .unwrap();
    assert_eq!(unchecked.free_checks(), FreeChecks::Unchecked);
    let fixed =
        FixedSizeMemoryResource::with_free_checks(system(), 4 * KIB, 4, FreeChecks::Unchecked)
            .unwrap();
    let binning = BinningMemoryResource::with_free_checks(system(), FreeChecks::Unchecked);
    let arena = ArenaMemoryResource::with_options(
        system(),
        ArenaOptions::default()
            .arena_size(2 * MIB)
            .free_checks(FreeChecks::Unchecked),
    )
    .unwrap();
    assert_eq!(
        FixedSizeMemoryResource::new(system(), 4 * KIB, 4)
            .unwrap()
            .free_checks(),
        FreeChecks::Checked
    );
    assert_eq!(
        BinningMemoryResource::new(system()).free_checks(),
        FreeChecks::Checked
    );
    assert_eq!(
        ArenaMemoryResource::new(system(), Some(2 * MIB), false)
            .unwrap()
            .free_checks(),
        FreeChecks::Checked
    );
    let all: [(&str, AnyResource); 4] = [
        ("pool", AnyResource::new(unchecked)),
        ("fixed_size", AnyResource::new(fixed.clone())),
        ("binning", AnyResource::new(binning.clone())),
        ("arena", AnyResource::new(arena.clone())),
    ];
    for (name, mr) in all {
        assert_ne!(name, "");
        let p = mr.allocate(S, 1000, 256).unwrap();
        // SAFETY: the right arguments: unchecked resources work as usual.
        unsafe { mr.deallocate(S, p, 1000, 256).unwrap() };
    }
    assert_eq!(fixed.free_checks(), FreeChecks::Unchecked);
    assert_eq!(binning.free_checks(), FreeChecks::Unchecked);
    assert_eq!(arena.free_checks(), FreeChecks::Unchecked);
}

/// Adaptors pass a refusal on and their counters do not move.
#[test]
fn adaptors_pass_refusals_on_without_drift() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap();
    let log = crate::testing::SharedBuffer::default();
    let logging = LoggingResourceAdaptor::with_writer(pool.clone(), log.clone()).unwrap();
    let limiting = LimitingResourceAdaptor::new(logging.clone(), MIB);
    let stats = StatisticsResourceAdaptor::new(limiting.clone());
    let tracking = TrackingResourceAdaptor::new(stats.clone(), false);
    let p = tracking.allocate(S, 4 * KIB, 256).unwrap();
    let snapshot = || {
        (
            stats.counters(),
            limiting.allocated_bytes(),
            tracking.allocated_bytes(),
            pool.statistics(),
        )
    };
    let before = snapshot();
    // SAFETY: deliberately wrong sizes and pointers, refused somewhere in the stack.
    unsafe {
        assert!(
            is_invalid(tracking.deallocate(S, p, 256, 256)),
            "wrong size"
        );
        assert!(
            is_invalid(tracking.deallocate(S, p.wrapping_add(256), 256, 256)),
            "interior pointer"
        );
        assert!(
            is_invalid(stats.deallocate(S, p, 256, 256)),
            "wrong size below the tracking adaptor"
        );
        assert!(
            is_invalid(stats.deallocate(S, p.wrapping_add(256), 4 * KIB, 256)),
            "interior, below tracking"
        );
        assert!(
            is_invalid(limiting.deallocate(S, p, 8 * KIB, 256)),
            "wrong size below statistics"
        );
    }
    assert_eq!(snapshot(), before, "no counter moved");
    // SAFETY: the right arguments.
    unsafe { tracking.deallocate(S, p, 4 * KIB, 256).unwrap() };
    let (bytes, allocations) = stats.counters();
    assert_eq!((bytes.value, allocations.value, bytes.peak), (0, 0, 4096));
    assert_eq!(
        (
            limiting.allocated_bytes(),
            tracking.allocated_bytes(),
            pool.statistics().bytes_used
        ),
        (0, 0, 0)
    );
    logging.flush().unwrap();
    let text = log.text();
    assert_eq!(
        text.lines().filter(|l| l.contains(",free,")).count(),
        1,
        "refused frees are not logged as frees:\n{text}"
    );
}

// One rule for what a valid free is (docs/design/checked-frees.md): a layer accepts a free of a
// pointer it handed out and has not seen freed, with a size that rounds up to the same multiple of
// 256 as the allocation's; it counts the allocation's size; it refuses anything else with
// `InvalidArgument`, forwards nothing and moves no counter.

/// A layer's count of live bytes.
type LiveBytes = Box<dyn Fn() -> i64>;

/// The pool and each adaptor over it, named, with a reading of the adaptor's count of live bytes.
fn layers() -> Vec<(&'static str, AnyResource, LiveBytes)> {
    let pool = || PoolMemoryResource::new(system(), Some(MIB), Some(4 * MIB)).unwrap();
    let p = pool();
    let s = StatisticsResourceAdaptor::new(pool());
    let l = LimitingResourceAdaptor::new(pool(), MIB);
    let t = TrackingResourceAdaptor::new(pool(), false);
    vec![
        (
            "pool",
            AnyResource::new(p.clone()),
            Box::new(move || p.statistics().bytes_used as i64),
        ),
        (
            "statistics",
            AnyResource::new(s.clone()),
            Box::new(move || s.bytes_counter().value),
        ),
        (
            "limiting",
            AnyResource::new(l.clone()),
            Box::new(move || l.allocated_bytes() as i64),
        ),
        (
            "tracking",
            AnyResource::new(t.clone()),
            Box::new(move || t.allocated_bytes() as i64),
        ),
    ]
}

#[test]
fn every_layer_accepts_the_same_sizes_and_gives_back_what_it_counted() {
    for (name, mr, live_bytes) in layers() {
        let p = mr.allocate(S, 1000, 256).unwrap();
        let counted = live_bytes();
        assert!(counted == 1000 || counted == 1024, "{name}: {counted}");
        for wrong in [0, 768, 1025, 1300, 4096] {
            // SAFETY: deliberately wrong sizes, refused before anything is freed.
            let r = unsafe { mr.deallocate(S, p, wrong, 256) };
            assert!(
                is_invalid(r),
                "{name}: a free with {wrong} bytes must be refused"
            );
            assert_eq!(live_bytes(), counted, "{name}: a refusal moves no counter");
        }
        assert_eq!(mr.is_live_allocation(p, 1001, 256), Some(true), "{name}");
        assert_eq!(mr.is_live_allocation(p, 1300, 256), Some(false), "{name}");
        // SAFETY: the allocation, with a size of the same multiple of 256.
        unsafe { mr.deallocate(S, p, 1001, 256) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            live_bytes(),
            0,
            "{name}: the allocation's size went back, not the free's"
        );
        assert_eq!(mr.is_live_allocation(p, 1000, 256), Some(false), "{name}");
        assert!(
            // SAFETY: a double free, refused.
            is_invalid(unsafe { mr.deallocate(S, p, 1000, 256) }),
            "{name}"
        );
    }
}

/// Issue 30: statistics over a pool, `allocate(1000)`, `deallocate(p, 1001)` left
/// `current_bytes == -1`.
#[test]
fn statistics_over_a_pool_count_a_free_at_the_allocated_size() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap();
    let stats = StatisticsResourceAdaptor::new(pool.clone());
    let p = stats.allocate(S, 1000, 256).unwrap();
    // SAFETY: the pool rounds both sizes up to 1024: a valid free.
    unsafe { stats.deallocate(S, p, 1001, 256).unwrap() };
    let (bytes, allocations) = stats.counters();
    assert_eq!((bytes.value, bytes.peak, bytes.total), (0, 1000, 1000));
    assert_eq!(allocations.value, 0);
    assert_eq!(pool.statistics().bytes_used, 0);
}

/// Issue 30: freeing through an adaptor what the pool handed out beside it left the statistics
/// at −256 / −1 (and gave the limiting adaptor room it never lent). Each adaptor now forwards such
/// a free, because its checked upstream knows the pointer, and counts nothing; a pointer nobody
/// below knows is refused and forwarded nowhere.
#[test]
fn adaptors_forward_what_their_upstream_knows_without_counting_it() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap();
    let stats = StatisticsResourceAdaptor::new(pool.clone());
    let limiting = LimitingResourceAdaptor::new(pool.clone(), MIB);
    let tracking = TrackingResourceAdaptor::new(pool.clone(), false);
    let adaptors: [(&str, &dyn MemoryResource); 3] = [
        ("statistics", &stats),
        ("limiting", &limiting),
        ("tracking", &tracking),
    ];
    for (name, mr) in adaptors {
        let beside = pool.allocate(S, 256, 256).unwrap();
        assert_eq!(
            mr.is_live_allocation(beside, 256, 256),
            Some(false),
            "{name}: not its own"
        );
        assert!(
            // SAFETY: deliberately the wrong size of the pool's allocation: refused below.
            is_invalid(unsafe { mr.deallocate(S, beside, 1024, 256) }),
            "{name}"
        );
        // SAFETY: the pool's live allocation, with its size: forwarded to the pool.
        unsafe { mr.deallocate(S, beside, 256, 256) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(pool.statistics().bytes_used, 0, "{name}: the pool freed it");
        // SAFETY: a double free: nobody knows it now, refused.
        match unsafe { mr.deallocate(S, beside, 256, 256) } {
            Err(Error::InvalidArgument(m)) => {
                assert!(
                    m.contains("upstream does not know it") && m.contains("nothing was freed"),
                    "{name}: {m}"
                )
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let (bytes, allocations) = stats.counters();
    assert_eq!(
        (bytes.value, bytes.total, allocations.value),
        (0, 0, 0),
        "statistics did not move"
    );
    assert_eq!(
        (limiting.allocated_bytes(), tracking.allocated_bytes()),
        (0, 0)
    );
    // Over an upstream that keeps no record, a pointer the adaptor did not hand out is refused.
    let unchecked = StatisticsResourceAdaptor::new(SystemMemoryResource::new());
    let elsewhere = SystemMemoryResource::new().allocate(S, 256, 256).unwrap();
    // SAFETY: not the adaptor's: refused before anything is forwarded.
    assert!(is_invalid(unsafe {
        unchecked.deallocate(S, elsewhere, 256, 256)
    }));
    // SAFETY: freed where it was made.
    unsafe {
        SystemMemoryResource::new()
            .deallocate(S, elsewhere, 256, 256)
            .unwrap()
    };
}

/// Issue 30: a limiting adaptor (1 MiB) over a pool let 1.5 MiB live through it once a pool
/// allocation made outside it was freed through it.
#[test]
fn a_limit_holds_when_foreign_frees_come_through() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(4 * MIB)).unwrap();
    let limiting = LimitingResourceAdaptor::new(pool.clone(), MIB);
    let mine = limiting.allocate(S, MIB, 256).unwrap();
    let beside = pool.allocate(S, MIB / 2, 256).unwrap();
    // SAFETY: the pool's allocation: forwarded to the pool, no room given back.
    unsafe { limiting.deallocate(S, beside, MIB / 2, 256).unwrap() };
    assert_eq!(limiting.allocated_bytes(), MIB);
    let more = limiting.allocate(S, MIB / 2, 256).unwrap_err();
    assert!(more.is_out_of_memory(), "{more}");
    // SAFETY: the adaptor's allocation, with its size.
    unsafe { limiting.deallocate(S, mine, MIB, 256).unwrap() };
    assert_eq!(
        (limiting.allocated_bytes(), pool.statistics().bytes_used),
        (0, 0)
    );
}

/// Zero-byte requests: statistics counts them (as RMM does), and the null pointer a pool gives for
/// them is freed with zero bytes; a null free with a size is no allocation of the adaptor.
#[test]
fn statistics_count_zero_byte_allocations_and_ignore_sized_null_frees() {
    let pool = PoolMemoryResource::new(system(), Some(MIB), Some(MIB)).unwrap();
    let stats = StatisticsResourceAdaptor::new(pool);
    let p = stats.allocate(S, 0, 256).unwrap();
    assert!(p.is_null());
    assert_eq!(stats.allocations_counter().value, 1);
    // SAFETY: null frees touch nothing.
    unsafe {
        stats.deallocate(S, std::ptr::null_mut(), 100, 256).unwrap();
        assert_eq!(
            stats.allocations_counter().value,
            1,
            "not a free of the zero-byte allocation"
        );
        stats.deallocate(S, p, 0, 256).unwrap();
    }
    assert_eq!(stats.counters().0.value, 0);
    assert_eq!(stats.allocations_counter().value, 0);
}
