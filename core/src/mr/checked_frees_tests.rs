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
