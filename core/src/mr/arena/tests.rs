//! Tests of the arena resource.
//!
//! CPU tests run over a [`SimulatedMemoryResource`] (the arena then never calls CUDA, so made-up
//! stream handles are safe even on a GPU machine) or over host memory with the real default
//! streams. GPU tests are ignored without a GPU.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

use super::*;
use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
use crate::resource::Access;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// A made-up stream handle, for arenas over a simulated device only (they never call CUDA).
fn fake_stream(n: usize) -> Stream {
    // SAFETY: the handle is only given to arenas over a simulated device, which never pass a
    // stream to CUDA.
    unsafe { Stream::from_raw(0x1000 * (n + 1)) }
}

fn simulated(capacity: usize) -> SimulatedMemoryResource {
    SimulatedMemoryResource::new(capacity).unwrap()
}

fn arena_over(gpu: &SimulatedMemoryResource, size: usize) -> ArenaMemoryResource {
    ArenaMemoryResource::new(AnyResource::new(gpu.clone()), Some(size), false).unwrap()
}

fn alloc(mr: &ArenaMemoryResource, stream: Stream, bytes: usize) -> usize {
    mr.allocate(stream, bytes, DEFAULT_ALIGNMENT)
        .unwrap_or_else(|e| panic!("allocating {bytes} bytes on {stream:?}: {e}")) as usize
}

fn free(mr: &ArenaMemoryResource, stream: Stream, ptr: usize, bytes: usize) {
    // SAFETY: tests only free what they allocated from `mr` with these sizes.
    unsafe { mr.deallocate(stream, ptr as *mut u8, bytes, DEFAULT_ALIGNMENT) }
        .unwrap_or_else(|e| panic!("freeing {ptr:#x} (+{bytes}) on {stream:?}: {e}"));
}

fn rounded(bytes: usize) -> usize {
    bytes.div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT
}

/// A fresh path in the temporary directory (not created).
fn temp_path(name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("rmm-arena-{}-{n}-{name}", std::process::id()))
}

/// Everything is back in the global arena as one free range.
fn assert_all_returned(mr: &ArenaMemoryResource) {
    mr.defragment().unwrap();
    let s = mr.stats();
    assert_eq!(s.used_bytes, 0, "{s:?}");
    assert_eq!(s.superblocks, 0, "{s:?}");
    assert_eq!(s.global_free_bytes, s.arena_size, "{s:?}");
    assert_eq!(
        s.largest_global_free_block, s.arena_size,
        "free space coalesced into one range: {s:?}"
    );
    mr.check_invariants();
}

#[test]
fn requests_are_rounded_to_256_and_accounted_exactly() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 16 * MIB);
    assert_eq!(
        gpu.usage().allocated_bytes,
        16 * MIB,
        "the whole arena is taken from upstream at once"
    );
    let (base, size) = mr.range();
    assert_eq!(size, 16 * MIB);
    let sizes = [1, 255, 256, 257, 4 * KIB, MIB, MIB + 1, 3 * MIB];
    let ptrs: Vec<usize> = sizes
        .iter()
        .map(|&b| alloc(&mr, Stream::DEFAULT, b))
        .collect();
    for (&p, &b) in ptrs.iter().zip(&sizes) {
        assert_eq!(p % DEFAULT_ALIGNMENT, 0);
        assert!(p >= base && p + b <= base + size);
    }
    let expected: usize = sizes.iter().map(|&b| rounded(b)).sum();
    let s = mr.stats();
    assert_eq!(
        (s.used_bytes, s.free_bytes),
        (expected, 16 * MIB - expected)
    );
    assert_eq!(
        s.large_allocations, 2,
        "only requests above 1 MiB go to the global arena"
    );
    assert_eq!(mr.used_bytes(), expected);
    assert_eq!(mr.free_bytes(), 16 * MIB - expected);
    for (&p, &b) in ptrs.iter().zip(&sizes) {
        free(&mr, Stream::DEFAULT, p, b);
    }
    assert_eq!(
        gpu.usage().allocated_bytes,
        16 * MIB,
        "frees stay in the arena"
    );
    assert_all_returned(&mr);
}

#[test]
fn arguments_are_checked() {
    let gpu = simulated(8 * MIB);
    let mr = arena_over(&gpu, 4 * MIB);
    for align in [0usize, 3, 48, 512] {
        let err = mr.allocate(Stream::DEFAULT, 64, align).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "alignment {align}: {err}"
        );
    }
    for align in [1usize, 8, 256] {
        let p = alloc(&mr, Stream::DEFAULT, 64);
        assert_eq!(p % align, 0);
        free(&mr, Stream::DEFAULT, p, 64);
    }
    assert!(mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
    assert_eq!(mr.used_bytes(), 0);
    // SAFETY: freeing null is a no-op.
    unsafe {
        mr.deallocate(Stream::DEFAULT, std::ptr::null_mut(), 0, 256)
            .unwrap()
    };
    let tiny = ArenaMemoryResource::new(AnyResource::new(gpu.clone()), Some(MIB - 256), false)
        .unwrap_err();
    assert!(matches!(tiny, Error::InvalidArgument(_)), "{tiny}");
    let too_big =
        ArenaMemoryResource::new(AnyResource::new(gpu.clone()), Some(16 * MIB), false).unwrap_err();
    assert!(
        too_big.is_out_of_memory(),
        "the upstream cannot hold the arena: {too_big}"
    );
}

#[test]
fn default_size_is_half_of_a_simulated_device() {
    let gpu = simulated(64 * MIB);
    let mr = ArenaMemoryResource::new(AnyResource::new(gpu.clone()), None, false).unwrap();
    assert_eq!(mr.arena_size(), 32 * MIB);
    let odd = ArenaMemoryResource::new(AnyResource::new(gpu.clone()), Some(2 * MIB + 100), false)
        .unwrap();
    assert_eq!(odd.arena_size(), 2 * MIB, "sizes are rounded down to 256");
}

#[test]
fn host_mode_default_size_is_modest() {
    if !cuda::is_host_mode() {
        return; // With a GPU the default is half the device's free memory (GPU tests).
    }
    let mr = ArenaMemoryResource::new(AnyResource::new(SystemMemoryResource::new()), None, false)
        .unwrap();
    let host = crate::mr::detail::size_guard::host_physical_memory();
    let expected = if host == 0 {
        HOST_MODE_DEFAULT_SIZE
    } else {
        HOST_MODE_DEFAULT_SIZE.min(host / 2)
    };
    assert_eq!(mr.arena_size(), align_down(expected.max(MIB), 256));
}

#[test]
fn clones_share_the_arena_and_the_last_one_returns_the_upstream_block() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let other = arena_over(&gpu, 8 * MIB);
    let clone = mr.clone();
    assert!(mr.is_equal(&clone) && mr.is_equal(&AnyResource::new(clone.clone())));
    assert!(!mr.is_equal(&other) && !mr.is_equal(&gpu));
    assert_eq!(mr.name(), "arena_memory_resource");
    assert_eq!(mr.access(), Access::DEVICE, "the upstream's access");
    let p = alloc(&clone, fake_stream(0), 1000);
    free(&mr, fake_stream(0), p, 1000);
    let _leaked = alloc(&mr, fake_stream(1), 5 * MIB);
    let _leaked_small = alloc(&mr, fake_stream(1), 100);
    assert_eq!(gpu.usage().allocated_bytes, 16 * MIB);
    drop(mr);
    assert_eq!(
        gpu.usage().allocated_bytes,
        16 * MIB,
        "a clone keeps the arena alive"
    );
    drop(clone);
    drop(other);
    let usage = gpu.usage();
    assert_eq!(
        (usage.allocated_bytes, usage.live_allocations),
        (0, 0),
        "dropping returns the block, live blocks or not"
    );
}

#[test]
fn frees_on_another_stream_work() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let a = alloc(&mr, fake_stream(0), 10 * KIB);
    let b = alloc(&mr, fake_stream(1), 10 * KIB);
    assert_eq!(
        mr.stats().superblocks,
        2,
        "each stream has its own arena and superblock"
    );
    free(&mr, fake_stream(1), a, 10 * KIB);
    free(&mr, Stream::DEFAULT, b, 10 * KIB);
    let s = mr.stats();
    assert_eq!((s.used_bytes, s.arenas), (0, 3));
    // The freed block went back to its own superblock: stream 0's next request reuses it.
    assert_eq!(alloc(&mr, fake_stream(0), 10 * KIB), a);
    free(&mr, fake_stream(0), a, 10 * KIB);
    // Stream 0 and the legacy default stream share one arena.
    let c = alloc(&mr, Stream::DEFAULT, 256);
    free(&mr, Stream::LEGACY, c, 256);
    assert_eq!(mr.stats().arenas, 3);
    assert_all_returned(&mr);
}

#[test]
fn frees_on_another_thread_work() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let p = alloc(&mr, Stream::PER_THREAD, 64 * KIB);
    let q = alloc(&mr, Stream::PER_THREAD, 3 * MIB);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            free(&mr, Stream::PER_THREAD, p, 64 * KIB);
            free(&mr, fake_stream(3), q, 3 * MIB);
            tx.send(alloc(&mr, Stream::PER_THREAD, 64 * KIB)).unwrap();
        })
        .join()
        .unwrap();
    });
    let r = rx.recv().unwrap();
    assert_eq!(mr.stats().used_bytes, 64 * KIB);
    free(&mr, Stream::PER_THREAD, r, 64 * KIB);
    assert_all_returned(&mr);
}

#[test]
fn a_thread_arena_returns_to_the_global_arena_when_the_thread_exits() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    // Joined explicitly: a scope alone does not wait for the thread-local destructors.
    std::thread::scope(|s| {
        s.spawn(|| {
            let p = alloc(&mr, Stream::PER_THREAD, 300 * KIB);
            assert_eq!(mr.stats().arenas, 1);
            free(&mr, Stream::PER_THREAD, p, 300 * KIB);
        })
        .join()
        .unwrap();
    });
    let s = mr.stats();
    assert_eq!(
        (s.arenas, s.superblocks, s.global_free_bytes),
        (0, 0, 8 * MIB),
        "{s:?}"
    );

    // With a block still live, the superblock waits as an orphan for its last free.
    let live = std::thread::scope(|s| {
        s.spawn(|| alloc(&mr, Stream::PER_THREAD, 300 * KIB))
            .join()
            .unwrap()
    });
    let s = mr.stats();
    assert_eq!(
        (s.arenas, s.superblocks, s.orphan_superblocks, s.used_bytes),
        (0, 1, 1, 300 * KIB)
    );
    mr.check_invariants();
    // An orphan's free space serves the next arena that needs a superblock.
    let again = alloc(&mr, fake_stream(0), 100 * KIB);
    assert_eq!(mr.stats().orphan_superblocks, 0);
    free(&mr, Stream::DEFAULT, live, 300 * KIB);
    free(&mr, fake_stream(0), again, 100 * KIB);
    assert_all_returned(&mr);

    let live = std::thread::scope(|s| {
        s.spawn(|| alloc(&mr, Stream::PER_THREAD, 300 * KIB))
            .join()
            .unwrap()
    });
    free(&mr, fake_stream(2), live, 300 * KIB);
    let s = mr.stats();
    assert_eq!(
        (s.orphan_superblocks, s.global_free_bytes),
        (0, 8 * MIB),
        "an emptied orphan rejoins the free space"
    );
}

/// The legacy default stream is one stream that every thread names: each thread gets its own arena
/// for it (no shared lock, unlike RMM), and a block freed on it by another thread goes back to its
/// owner's arena, ready for the owner's next request.
#[test]
fn each_thread_has_its_own_legacy_arena_and_others_free_into_it() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let p = alloc(&mr, Stream::DEFAULT, 40 * KIB);
    std::thread::scope(|s| {
        s.spawn(|| {
            let q = alloc(&mr, Stream::DEFAULT, 40 * KIB);
            assert_ne!(p, q);
            let st = mr.stats();
            assert_eq!((st.arenas, st.superblocks), (2, 2), "{st:?}");
            free(&mr, Stream::LEGACY, p, 40 * KIB);
            free(&mr, Stream::DEFAULT, q, 40 * KIB);
        })
        .join()
        .unwrap();
    });
    let st = mr.stats();
    assert_eq!(
        (st.arenas, st.superblocks, st.used_bytes),
        (1, 1, 0),
        "the exited thread's empty superblock went back: {st:?}"
    );
    assert_eq!(
        alloc(&mr, Stream::DEFAULT, 40 * KIB),
        p,
        "the other thread's free went back to this thread's arena"
    );
    free(&mr, Stream::DEFAULT, p, 40 * KIB);
    assert_all_returned(&mr);
}

/// A block allocated on the legacy stream by a thread that then exits stays in a legacy arena (the
/// shared one), not an orphan: its later free on the legacy stream needs no wait, and its
/// superblock serves the legacy stream again.
#[test]
fn legacy_blocks_of_an_exited_thread_move_to_the_shared_legacy_arena() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let live = std::thread::scope(|s| {
        s.spawn(|| alloc(&mr, Stream::DEFAULT, 300 * KIB))
            .join()
            .unwrap()
    });
    let st = mr.stats();
    assert_eq!(
        (
            st.arenas,
            st.superblocks,
            st.orphan_superblocks,
            st.used_bytes
        ),
        (1, 1, 0, 300 * KIB),
        "{st:?}"
    );
    mr.check_invariants();
    free(&mr, Stream::LEGACY, live, 300 * KIB);
    let st = mr.stats();
    assert_eq!(st.used_bytes, 0, "{st:?}");
    // Another exiting thread's requests on the legacy stream are served by the shared arena.
    let again = std::thread::scope(|s| {
        s.spawn(|| alloc(&mr, Stream::DEFAULT, 300 * KIB))
            .join()
            .unwrap()
    });
    free(&mr, Stream::DEFAULT, again, 300 * KIB);
    assert_all_returned(&mr);
}

/// An arena that keeps needing superblocks (blocks near the superblock size, as in RMM's random
/// workload) takes spare ones on each trip to the global arena after its 16th, and the spares
/// serve its next requests; the arena still fills to the last superblock.
#[test]
fn an_arena_that_keeps_needing_superblocks_takes_spares() {
    let gpu = simulated(256 * MIB);
    let mr = arena_over(&gpu, 64 * MIB);
    let s = fake_stream(1);
    let mut live: Vec<usize> = (0..16).map(|_| alloc(&mr, s, 900 * KIB)).collect();
    assert_eq!(
        mr.stats().superblocks,
        16,
        "one superblock per block so far"
    );
    live.push(alloc(&mr, s, 900 * KIB));
    assert_eq!(
        mr.stats().superblocks,
        20,
        "the 17th trip took three spares"
    );
    live.extend((0..3).map(|_| alloc(&mr, s, 900 * KIB)));
    assert_eq!(
        mr.stats().superblocks,
        20,
        "the spares served the next three"
    );
    while let Ok(p) = mr.allocate(s, 900 * KIB, DEFAULT_ALIGNMENT) {
        live.push(p as usize);
    }
    assert_eq!(
        live.len(),
        64,
        "every superblock of the 64 MiB arena holds a block"
    );
    for p in live {
        free(&mr, s, p, 900 * KIB);
    }
    assert_all_returned(&mr);
}

#[test]
fn bad_frees_are_errors_not_corruption() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    let small = alloc(&mr, fake_stream(0), 1000);
    let large = alloc(&mr, fake_stream(0), 2 * MIB);
    // SAFETY: the arena checks these frees against its state and rejects them; nothing is touched.
    unsafe {
        let outside = mr
            .deallocate(fake_stream(0), 0x1000 as *mut u8, 256, 256)
            .unwrap_err();
        assert!(matches!(outside, Error::InvalidArgument(_)), "{outside}");
        let wrong_size = mr
            .deallocate(fake_stream(0), large as *mut u8, 3 * MIB, 256)
            .unwrap_err();
        assert!(
            matches!(wrong_size, Error::InvalidArgument(_)),
            "{wrong_size}"
        );
        mr.deallocate(fake_stream(0), small as *mut u8, 1000, 256)
            .unwrap();
        let double = mr
            .deallocate(fake_stream(0), small as *mut u8, 1000, 256)
            .unwrap_err();
        assert!(matches!(double, Error::InvalidArgument(_)), "{double}");
        let double_elsewhere = mr
            .deallocate(fake_stream(5), small as *mut u8, 1000, 256)
            .unwrap_err();
        assert!(
            matches!(double_elsewhere, Error::InvalidArgument(_)),
            "{double_elsewhere}"
        );
        mr.deallocate(fake_stream(0), large as *mut u8, 2 * MIB, 256)
            .unwrap();
        let double_large = mr
            .deallocate(fake_stream(0), large as *mut u8, 2 * MIB, 256)
            .unwrap_err();
        assert!(
            matches!(double_large, Error::InvalidArgument(_)),
            "{double_large}"
        );
    }
    assert_all_returned(&mr);
}

#[test]
fn defragment_and_retry_gathers_memory_stranded_in_other_arenas() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 8 * MIB);
    // Stream 0 takes every superblock, then frees everything: its arena keeps them, empty.
    let blocks: Vec<usize> = (0..8).map(|_| alloc(&mr, fake_stream(0), MIB)).collect();
    for &p in &blocks {
        free(&mr, fake_stream(0), p, MIB);
    }
    let s = mr.stats();
    assert_eq!(
        (s.superblocks, s.global_free_bytes, s.used_bytes),
        (8, 0, 0)
    );
    // Another stream finds no free space in the global arena: defragmentation gathers it.
    let small = alloc(&mr, fake_stream(1), 4 * KIB);
    let s = mr.stats();
    assert_eq!(
        s.superblocks, 1,
        "stream 0's empty superblocks went back: {s:?}"
    );
    assert_eq!(s.global_free_bytes, 7 * MIB);
    // The returned superblocks coalesced: a large request fits.
    let large = alloc(&mr, fake_stream(2), 6 * MIB);
    free(&mr, fake_stream(2), large, 6 * MIB);
    free(&mr, fake_stream(1), small, 4 * KIB);

    // Partly used superblocks: stream 0 holds all of them, each with room for 512 bytes.
    let almost: Vec<usize> = (0..8)
        .map(|_| alloc(&mr, fake_stream(0), MIB - 512))
        .collect();
    assert_eq!(mr.stats().superblocks, 8);
    let stolen = alloc(&mr, fake_stream(3), 512);
    assert!(
        mr.allocate(fake_stream(3), 1024, 256)
            .unwrap_err()
            .is_out_of_memory(),
        "nothing holds 1 KiB"
    );
    free(&mr, fake_stream(3), stolen, 512);
    for &p in &almost {
        free(&mr, fake_stream(0), p, MIB - 512);
    }
    assert_all_returned(&mr);
}

#[test]
fn full_arena_fails_with_no_room_and_still_works_after() {
    let gpu = simulated(64 * MIB);
    let mr = arena_over(&gpu, 4 * MIB);
    let err = mr.allocate(Stream::DEFAULT, 5 * MIB, 256).unwrap_err();
    assert!(
        err.is_out_of_memory() && err.to_string().contains("No room in arena."),
        "{err}"
    );
    let err = mr.allocate(Stream::DEFAULT, 1 << 50, 256).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    let blocks: Vec<usize> = (0..4)
        .map(|_| alloc(&mr, fake_stream(0), 1000 * KIB))
        .collect();
    let err = mr.allocate(fake_stream(1), 100 * KIB, 256).unwrap_err();
    assert!(
        err.is_out_of_memory() && err.to_string().contains("No room in arena."),
        "{err}"
    );
    let err = mr.allocate(fake_stream(1), 2 * MIB, 256).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    free(&mr, fake_stream(0), blocks[1], 1000 * KIB);
    let p = alloc(&mr, fake_stream(1), 100 * KIB);
    free(&mr, fake_stream(1), p, 100 * KIB);
    for &b in [blocks[0], blocks[2], blocks[3]].iter() {
        free(&mr, fake_stream(0), b, 1000 * KIB);
    }
    assert_all_returned(&mr);
}

#[test]
fn the_state_is_dumped_on_failure_only_when_asked() {
    let gpu = simulated(64 * MIB);
    let fill = |mr: &ArenaMemoryResource| -> Vec<usize> {
        (0..4)
            .map(|_| alloc(mr, fake_stream(0), 900 * KIB))
            .collect()
    };

    let quiet_path = temp_path("quiet.log");
    let quiet = ArenaMemoryResource::with_options(
        AnyResource::new(gpu.clone()),
        ArenaOptions::default()
            .arena_size(4 * MIB)
            .dump_path(&quiet_path),
    )
    .unwrap();
    let _held = fill(&quiet);
    assert!(quiet
        .allocate(fake_stream(1), 200 * KIB, 256)
        .unwrap_err()
        .is_out_of_memory());
    assert!(!quiet_path.exists(), "no dump without dump_log_on_failure");

    let path = temp_path("dump.log");
    let loud = ArenaMemoryResource::with_options(
        AnyResource::new(gpu.clone()),
        ArenaOptions::default()
            .arena_size(4 * MIB)
            .dump_log_on_failure(true)
            .dump_path(&path),
    )
    .unwrap();
    let _ok = alloc(&loud, Stream::DEFAULT, 1000);
    assert!(!path.exists(), "nothing is written before a failure");
    let _held = fill(&loud);
    assert!(loud
        .allocate(fake_stream(1), 200 * KIB, 256)
        .unwrap_err()
        .is_out_of_memory());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("Ran out of memory trying to allocate 204800 bytes"),
        "{text}"
    );
    assert!(
        text.contains("Global arena")
            && text.contains("Stream arena 0x1000")
            && text.contains("superblock ["),
        "{text}"
    );
    assert!(text.contains("free ["), "free blocks are listed: {text}");
    assert!(loud
        .allocate(fake_stream(1), 300 * KIB, 256)
        .unwrap_err()
        .is_out_of_memory());
    let again = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        again.matches("Ran out of memory").count(),
        2,
        "later failures append"
    );
    assert_eq!(
        loud.dump_state(),
        again[again.rfind("Global arena").unwrap()..]
    );
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        ArenaOptions::default().dump_path,
        PathBuf::from(DEFAULT_DUMP_FILE)
    );
}

/// 16 threads on host memory (the per-thread default stream and the shared default stream),
/// writing every block they own and checking it before they free it, trading blocks between
/// threads so that a third of the frees happen on another thread than the allocation.
#[test]
fn sixteen_threads_on_host_memory() {
    const THREADS: usize = 16;
    const OPS: usize = 2_000;
    let mr = ArenaMemoryResource::new(
        AnyResource::new(SystemMemoryResource::new()),
        Some(64 * MIB),
        false,
    )
    .unwrap();
    let exchange = std::sync::Mutex::new(Vec::<(usize, usize, u8)>::new());
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (mr, exchange) = (&mr, &exchange);
                s.spawn(move || {
                    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                    let mut next = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng
                    };
                    let mut live: Vec<(usize, usize, u8)> = Vec::new();
                    let check_and_free = |(p, bytes, tag): (usize, usize, u8), stream: Stream| {
                        // SAFETY: host memory of `bytes` bytes this thread owns now.
                        let block = unsafe { std::slice::from_raw_parts(p as *const u8, bytes) };
                        // Blocks start 256-aligned and span multiples of 256, so any overlapping block
                        // starts at (and writes) one of these offsets.
                        let intact =
                            block.iter().step_by(256).all(|&b| b == tag) && block[bytes - 1] == tag;
                        assert!(intact, "block {p:#x} (+{bytes}) was overwritten");
                        free(mr, stream, p, bytes);
                    };
                    for k in 0..OPS {
                        let r = next();
                        let stream = if r & 1 == 0 {
                            Stream::PER_THREAD
                        } else {
                            Stream::DEFAULT
                        };
                        if live.len() < 32 && r % 3 != 0 {
                            let bytes = match (r >> 8) % 16 {
                                0 => MIB + (r >> 20) as usize % (2 * MIB),
                                1..=3 => 64 * KIB + (r >> 20) as usize % (900 * KIB),
                                _ => 1 + (r >> 20) as usize % (16 * KIB),
                            };
                            let p = match mr.allocate(stream, bytes, 256) {
                                Ok(p) => p as usize,
                                Err(e) if e.is_out_of_memory() => continue,
                                Err(e) => panic!("{e}"),
                            };
                            assert_eq!(p % 256, 0);
                            let tag = (t * 16 + k) as u8;
                            // SAFETY: fresh host memory of `bytes` bytes.
                            unsafe { std::ptr::write_bytes(p as *mut u8, tag, bytes) };
                            live.push((p, bytes, tag));
                        } else if !live.is_empty() {
                            let block = live.swap_remove((r >> 32) as usize % live.len());
                            if r % 5 == 0 {
                                exchange.lock().unwrap().push(block);
                            } else {
                                check_and_free(block, stream);
                            }
                        }
                        if r % 7 == 0 {
                            let theirs = exchange.lock().unwrap().pop();
                            if let Some(block) = theirs {
                                check_and_free(block, stream);
                            }
                        }
                    }
                    for block in live {
                        check_and_free(block, Stream::PER_THREAD);
                    }
                })
            })
            .collect();
        // Joined explicitly: a scope alone does not wait for the thread-local destructors.
        for thread in threads {
            thread.join().unwrap();
        }
    });
    for (p, bytes, _) in exchange.into_inner().unwrap() {
        free(&mr, Stream::DEFAULT, p, bytes);
    }
    let s = mr.stats();
    // Left at most: this thread's legacy arena (if it freed exchanged blocks above) and the
    // shared legacy arena (if exited threads' legacy superblocks still had exchanged blocks live).
    assert_eq!(s.used_bytes, 0, "{s:?}");
    assert!(s.arenas <= 2, "every thread arena went back: {s:?}");
    assert_all_returned(&mr);
}

// ---- property tests -----------------------------------------------------------------------------

/// One step of a random workload.
#[derive(Clone, Debug)]
enum Op {
    /// Allocate `bytes` on stream number `stream`.
    Alloc { bytes: usize, stream: usize },
    /// Free live block number `index % live` on stream number `stream`.
    Free { index: usize, stream: usize },
    /// Defragment.
    Defragment,
}

/// Streams: 0 = default, 1 = per-thread default, 2.. = made-up handles.
const STREAMS: usize = 5;

fn stream_of(n: usize) -> Stream {
    match n {
        0 => Stream::DEFAULT,
        1 => Stream::PER_THREAD,
        n => fake_stream(n),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let stream = 0..STREAMS;
    prop_oneof![
        30 => (1usize..=16 * KIB, stream.clone()).prop_map(|(bytes, stream)| Op::Alloc { bytes, stream }),
        8 => (16 * KIB..=MIB, stream.clone()).prop_map(|(bytes, stream)| Op::Alloc { bytes, stream }),
        3 => (MIB + 1..=3 * MIB, stream.clone()).prop_map(|(bytes, stream)| Op::Alloc { bytes, stream }),
        40 => (any::<usize>(), stream).prop_map(|(index, stream)| Op::Free { index, stream }),
        1 => Just(Op::Defragment),
    ]
}

/// The model of a run: live blocks by address, checked against every answer of the arena.
struct Model {
    base: usize,
    size: usize,
    live: BTreeMap<usize, usize>,
    used: usize,
}

impl Model {
    fn new(mr: &ArenaMemoryResource) -> Self {
        let (base, size) = mr.range();
        Self {
            base,
            size,
            live: BTreeMap::new(),
            used: 0,
        }
    }

    /// Checks a successful allocation and records it.
    fn allocated(&mut self, p: usize, bytes: usize) -> std::result::Result<(), TestCaseError> {
        let size = rounded(bytes);
        prop_assert_eq!(p % DEFAULT_ALIGNMENT, 0, "misaligned {:#x}", p);
        prop_assert!(
            p >= self.base && p + size <= self.base + self.size,
            "{:#x} (+{}) outside the arena",
            p,
            size
        );
        if let Some((&q, &qs)) = self.live.range(..=p).next_back() {
            prop_assert!(
                q + rounded(qs) <= p,
                "{:#x} (+{}) overlaps live {:#x} (+{})",
                p,
                size,
                q,
                qs
            );
        }
        if let Some((&q, _)) = self.live.range(p..).next() {
            prop_assert!(p + size <= q, "{:#x} (+{}) overlaps live {:#x}", p, size, q);
        }
        self.live.insert(p, bytes);
        self.used += size;
        Ok(())
    }

    /// Checks a failed allocation: only when nothing anywhere could hold it, even after the
    /// defragmentation.
    fn failed(
        &self,
        mr: &ArenaMemoryResource,
        bytes: usize,
        err: &Error,
    ) -> std::result::Result<(), TestCaseError> {
        prop_assert!(err.is_out_of_memory(), "{}", err);
        prop_assert!(err.to_string().contains("No room in arena."), "{}", err);
        let size = rounded(bytes);
        let s = mr.stats();
        prop_assert!(
            s.largest_global_free_block < size,
            "{} bytes failed with {:?}",
            size,
            s
        );
        if size <= MIB {
            prop_assert!(
                s.largest_superblock_free_block < size,
                "{} bytes failed with {:?}",
                size,
                s
            );
        }
        Ok(())
    }

    /// Takes live block number `index % live` out of the model.
    fn take(&mut self, index: usize) -> Option<(usize, usize)> {
        if self.live.is_empty() {
            return None;
        }
        let (&p, &bytes) = self.live.iter().nth(index % self.live.len())?;
        self.live.remove(&p);
        self.used -= rounded(bytes);
        Some((p, bytes))
    }

    fn check_accounting(&self, mr: &ArenaMemoryResource) -> std::result::Result<(), TestCaseError> {
        let s = mr.stats();
        prop_assert_eq!(s.used_bytes, self.used);
        prop_assert_eq!(s.used_bytes + s.free_bytes, s.arena_size);
        prop_assert_eq!(s.global_free_bytes + s.superblock_free_bytes, s.free_bytes);
        Ok(())
    }
}

/// Runs `ops` on `mr` from one thread, checking every answer; then frees everything and checks
/// that it all went back and that dropping returns the upstream block.
fn run_single_thread(
    gpu: &SimulatedMemoryResource,
    mr: ArenaMemoryResource,
    ops: &[Op],
) -> std::result::Result<(), TestCaseError> {
    let mut model = Model::new(&mr);
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc { bytes, stream } => {
                match mr.allocate(stream_of(stream), bytes, DEFAULT_ALIGNMENT) {
                    Ok(p) => model.allocated(p as usize, bytes)?,
                    Err(e) => model.failed(&mr, bytes, &e)?,
                }
            }
            Op::Free { index, stream } => {
                if let Some((p, bytes)) = model.take(index) {
                    // SAFETY: `p` is live, from `mr`, with these arguments.
                    let freed = unsafe {
                        mr.deallocate(stream_of(stream), p as *mut u8, bytes, DEFAULT_ALIGNMENT)
                    };
                    prop_assert!(freed.is_ok(), "{:?}", freed);
                }
            }
            Op::Defragment => {
                mr.defragment().unwrap();
                let s = mr.stats();
                prop_assert_eq!(
                    s.superblock_free_bytes + s.used_bytes,
                    s.arena_size - s.global_free_bytes
                );
            }
        }
        model.check_accounting(&mr)?;
        if i % 64 == 0 {
            mr.check_invariants();
        }
    }
    mr.check_invariants();
    while let Some((p, bytes)) = model.take(0) {
        free(&mr, stream_of(p % STREAMS), p, bytes);
    }
    assert_all_returned(&mr);
    drop(mr);
    prop_assert_eq!(
        gpu.usage().allocated_bytes,
        0,
        "the upstream block went back"
    );
    Ok(())
}

/// Cases × operations of the single-thread property test: 300 × 3,750 on average ≈ 1.1 × 10^6
/// operations in every CI run (about 15 s in the debug profile on 2 cores).
const CASES: u32 = 300;
const MAX_OPS: usize = 5_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(CASES), rng_algorithm: RngAlgorithm::XorShift, ..ProptestConfig::default() })]

    /// Random allocations and frees on several streams (and the per-thread default stream) over a
    /// tight simulated device: blocks never overlap and are 256-aligned inside the arena, the
    /// accounting is exact, failures happen only when no free range anywhere holds the request
    /// after defragment-and-retry, everything returns to the global arena, and dropping returns
    /// the upstream block.
    #[test]
    fn random_operations_keep_the_arena_consistent(
        arena_mib in 3usize..12,
        ops in proptest::collection::vec(op(), MAX_OPS / 2..MAX_OPS),
    ) {
        let gpu = simulated(32 * MIB);
        let mr = arena_over(&gpu, arena_mib * MIB + 256 * (arena_mib % 3));
        run_single_thread(&gpu, mr, &ops)?;
    }
}

/// A command for a worker thread.
enum Command {
    Alloc {
        bytes: usize,
        stream: usize,
    },
    Free {
        ptr: usize,
        bytes: usize,
        stream: usize,
    },
}

/// A worker thread that runs commands on the arena, so that a sequence of operations spread over
/// several threads is deterministic.
struct Worker {
    commands: mpsc::Sender<Command>,
    answers: mpsc::Receiver<Result<usize>>,
    thread: std::thread::JoinHandle<()>,
}

impl Worker {
    fn spawn(mr: &ArenaMemoryResource) -> Self {
        let (commands, inbox) = mpsc::channel::<Command>();
        let (outbox, answers) = mpsc::channel();
        let mr = mr.clone();
        let thread = std::thread::spawn(move || {
            for command in inbox {
                let answer = match command {
                    Command::Alloc { bytes, stream } => mr
                        .allocate(stream_of(stream), bytes, DEFAULT_ALIGNMENT)
                        .map(|p| p as usize),
                    // SAFETY: the driver only sends live blocks of `mr` with their sizes.
                    Command::Free { ptr, bytes, stream } => unsafe {
                        mr.deallocate(stream_of(stream), ptr as *mut u8, bytes, DEFAULT_ALIGNMENT)
                            .map(|()| 0)
                    },
                };
                if outbox.send(answer).is_err() {
                    return;
                }
            }
        });
        Self {
            commands,
            answers,
            thread,
        }
    }

    fn run(&self, command: Command) -> Result<usize> {
        self.commands.send(command).unwrap();
        self.answers.recv().unwrap()
    }

    /// Ends the thread (its arena goes back to the global arena) and waits for it.
    fn exit(self) {
        drop(self.commands);
        self.thread.join().unwrap();
    }
}

/// One step of a workload spread over worker threads.
#[derive(Clone, Debug)]
enum ThreadOp {
    /// `op` on worker `worker`.
    On { worker: usize, op: Op },
    /// Worker `worker` exits and a fresh thread replaces it.
    Exit { worker: usize },
}

const WORKERS: usize = 3;

fn thread_op() -> impl Strategy<Value = ThreadOp> {
    prop_oneof![
        60 => (0..WORKERS, op()).prop_map(|(worker, op)| ThreadOp::On { worker, op }),
        1 => (0..WORKERS).prop_map(|worker| ThreadOp::Exit { worker }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(24), rng_algorithm: RngAlgorithm::XorShift, ..ProptestConfig::default() })]

    /// The same checks with the operations spread over 3 threads that allocate and free each
    /// other's blocks and exit now and then: per-thread arenas come and go, blocks outlive their
    /// thread's arena, and every free still lands where it belongs.
    #[test]
    fn random_operations_over_threads_keep_the_arena_consistent(
        ops in proptest::collection::vec(thread_op(), 500..1_500),
    ) {
        let gpu = simulated(32 * MIB);
        let mr = arena_over(&gpu, 6 * MIB);
        let mut workers: Vec<Option<Worker>> = (0..WORKERS).map(|_| Some(Worker::spawn(&mr))).collect();
        let mut model = Model::new(&mr);
        for op in &ops {
            match op {
                ThreadOp::Exit { worker } => {
                    if let Some(w) = workers[*worker].take() {
                        w.exit();
                    }
                    workers[*worker] = Some(Worker::spawn(&mr));
                    prop_assert!(mr.stats().arenas <= STREAMS + WORKERS, "exited threads' arenas are gone");
                }
                ThreadOp::On { worker, op } => {
                    let Some(w) = &workers[*worker] else { continue };
                    match *op {
                        Op::Alloc { bytes, stream } => match w.run(Command::Alloc { bytes, stream }) {
                            Ok(p) => model.allocated(p, bytes)?,
                            Err(e) => model.failed(&mr, bytes, &e)?,
                        },
                        Op::Free { index, stream } => {
                            if let Some((ptr, bytes)) = model.take(index) {
                                let freed = w.run(Command::Free { ptr, bytes, stream });
                                prop_assert!(freed.is_ok(), "{:?}", freed);
                            }
                        }
                        Op::Defragment => mr.defragment().unwrap(),
                    }
                    model.check_accounting(&mr)?;
                }
            }
        }
        mr.check_invariants();
        for w in workers.into_iter().flatten() {
            w.exit();
        }
        while let Some((p, bytes)) = model.take(0) {
            free(&mr, stream_of(p % STREAMS), p, bytes);
        }
        assert_all_returned(&mr);
        drop(mr);
        prop_assert_eq!(gpu.usage().allocated_bytes, 0);
    }
}

// ---- GPU tests ----------------------------------------------------------------------------------

mod gpu {
    use super::*;
    use crate::cuda::{OwnedStream, StreamFlags};
    use crate::mr::test_harness::{check_usable, resource_tests};
    use crate::mr::{CudaAsyncMemoryResource, CudaMemoryResource, ManagedMemoryResource};

    const GIB: usize = 1 << 30;

    /// Room for the harness's 1 GiB request and the rest of its suite.
    const HARNESS_ARENA: usize = GIB + 512 * MIB;

    resource_tests!(over_cuda, || {
        ArenaMemoryResource::new(
            AnyResource::new(CudaMemoryResource::new()),
            Some(HARNESS_ARENA),
            false,
        )
        .map(AnyResource::new)
    });
    resource_tests!(over_managed, || {
        ArenaMemoryResource::new(
            AnyResource::new(ManagedMemoryResource::new()),
            Some(HARNESS_ARENA),
            false,
        )
        .map(AnyResource::new)
    });
    resource_tests!(over_cuda_async, || {
        let upstream = AnyResource::new(CudaAsyncMemoryResource::new()?);
        ArenaMemoryResource::new(upstream, Some(HARNESS_ARENA), false).map(AnyResource::new)
    });

    fn device_arena(size: usize) -> ArenaMemoryResource {
        ArenaMemoryResource::new(
            AnyResource::new(CudaMemoryResource::new()),
            Some(size),
            false,
        )
        .unwrap()
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn default_size_is_half_the_free_device_memory() {
        crate::testing::require_gpu();
        let _exclusive = crate::mr::test_harness::DEVICE_MEMORY
            .write()
            .unwrap_or_else(|e| e.into_inner());
        let (free_before, _) = cuda::mem_info(cuda::current_device().unwrap()).unwrap();
        let mr = ArenaMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, false)
            .unwrap();
        let expected = free_before / 2;
        // Other processes may move the free memory a little.
        assert!(
            mr.arena_size().abs_diff(expected) < 256 * MIB,
            "{} vs {expected}",
            mr.arena_size()
        );
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn frees_on_another_stream_are_ordered() {
        crate::testing::require_gpu();
        let mr = device_arena(256 * MIB);
        let any = AnyResource::new(mr.clone());
        let (a, b) = (
            OwnedStream::new(StreamFlags::NonBlocking).unwrap(),
            OwnedStream::new(StreamFlags::NonBlocking).unwrap(),
        );
        for bytes in [4 * KIB, 512 * KIB, 8 * MIB] {
            let p = mr.allocate(a.stream(), bytes, 256).unwrap();
            check_usable(&any, p, bytes, 0x5a, a.stream());
            // SAFETY: from allocate above; the check synchronized stream a.
            unsafe { mr.deallocate(b.stream(), p, bytes, 256).unwrap() };
            let q = mr.allocate(b.stream(), bytes, 256).unwrap();
            check_usable(&any, q, bytes, 0x5b, b.stream());
            // SAFETY: from allocate above; the check synchronized stream b.
            unsafe { mr.deallocate(a.stream(), q, bytes, 256).unwrap() };
        }
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        assert_all_returned(&mr);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_threads_with_their_own_streams_account_back_to_zero() {
        crate::testing::require_gpu();
        let mr = device_arena(512 * MIB);
        let any = AnyResource::new(mr.clone());
        let exchange = std::sync::Mutex::new(Vec::<(usize, usize)>::new());
        std::thread::scope(|s| {
            for t in 0..16usize {
                let (mr, any, exchange) = (&mr, &any, &exchange);
                s.spawn(move || {
                    let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
                    const SIZES: [usize; 6] = [256, 3000, 64 * KIB, 700 * KIB, MIB, 3 * MIB];
                    for k in 0..300usize {
                        let bytes = SIZES[(t + k) % SIZES.len()];
                        let p = mr.allocate(stream.stream(), bytes, 256).unwrap();
                        // SAFETY: `p` is valid for `bytes` bytes; the free is ordered after the fill.
                        unsafe {
                            crate::cuda::set_async(p, k as u8, bytes.min(4096), stream.stream())
                                .unwrap()
                        };
                        if k % 4 == 0 {
                            stream.synchronize().unwrap();
                            exchange.lock().unwrap().push((p as usize, bytes));
                        } else {
                            // SAFETY: from allocate above, freed in stream order.
                            unsafe { mr.deallocate(stream.stream(), p, bytes, 256).unwrap() };
                        }
                        if k % 5 == 0 {
                            let theirs = exchange.lock().unwrap().pop();
                            if let Some((q, qb)) = theirs {
                                check_usable(any, q as *mut u8, qb, 0x33, stream.stream());
                                // SAFETY: a live block of `mr`; its owner synchronized before sharing it.
                                unsafe {
                                    mr.deallocate(stream.stream(), q as *mut u8, qb, 256)
                                        .unwrap()
                                };
                            }
                        }
                    }
                    stream.synchronize().unwrap();
                });
            }
        });
        for (p, bytes) in exchange.into_inner().unwrap() {
            free(&mr, Stream::DEFAULT, p, bytes);
        }
        assert_all_returned(&mr);
    }

    /// Sixteen threads on the legacy default stream, each with its own arena, free each other's
    /// blocks without synchronizing (one stream orders it all): every block is intact when its
    /// new owner checks it, and everything comes back once the threads exit.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_threads_on_the_legacy_stream_free_each_others_blocks() {
        crate::testing::require_gpu();
        let mr = device_arena(512 * MIB);
        let any = AnyResource::new(mr.clone());
        let exchange = std::sync::Mutex::new(Vec::<(usize, usize)>::new());
        std::thread::scope(|s| {
            for t in 0..16usize {
                let (mr, any, exchange) = (&mr, &any, &exchange);
                s.spawn(move || {
                    const SIZES: [usize; 5] = [256, 3000, 64 * KIB, 700 * KIB, 3 * MIB];
                    for k in 0..200usize {
                        let stream = if k % 2 == 0 {
                            Stream::DEFAULT
                        } else {
                            Stream::LEGACY
                        };
                        let bytes = SIZES[(t + k) % SIZES.len()];
                        let p = mr.allocate(stream, bytes, 256).unwrap();
                        // SAFETY: `p` is valid for `bytes` bytes; its frees are on the same stream.
                        unsafe {
                            crate::cuda::set_async(p, k as u8, bytes.min(4096), stream).unwrap()
                        };
                        if k % 3 == 0 {
                            exchange.lock().unwrap().push((p as usize, bytes));
                        } else {
                            // SAFETY: from allocate above, freed in stream order.
                            unsafe { mr.deallocate(stream, p, bytes, 256).unwrap() };
                        }
                        if k % 4 == 0 {
                            let theirs = exchange.lock().unwrap().pop();
                            if let Some((q, qb)) = theirs {
                                check_usable(any, q as *mut u8, qb, 0x5a, stream);
                                // SAFETY: a live block of `mr`, used only on the legacy stream.
                                unsafe { mr.deallocate(stream, q as *mut u8, qb, 256).unwrap() };
                            }
                        }
                    }
                });
            }
        });
        for (p, bytes) in exchange.into_inner().unwrap() {
            free(&mr, Stream::DEFAULT, p, bytes);
        }
        Stream::DEFAULT.synchronize().unwrap();
        assert_all_returned(&mr);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn per_thread_default_stream_arenas_return_on_exit() {
        crate::testing::require_gpu();
        let mr = device_arena(64 * MIB);
        let any = AnyResource::new(mr.clone());
        std::thread::scope(|s| {
            s.spawn(|| {
                let p = mr.allocate(Stream::PER_THREAD, 100 * KIB, 256).unwrap();
                check_usable(&any, p, 100 * KIB, 0x71, Stream::PER_THREAD);
                // SAFETY: from allocate above, freed in stream order.
                unsafe {
                    mr.deallocate(Stream::PER_THREAD, p, 100 * KIB, 256)
                        .unwrap()
                };
            })
            .join()
            .unwrap();
        });
        let s = mr.stats();
        assert_eq!((s.arenas, s.superblocks, s.used_bytes), (0, 0, 0), "{s:?}");
    }

    /// The hang fix: a thread that exits with work still queued on its default stream does not
    /// synchronize in its thread-exit destructor; its arena waits for an event recorded there, and
    /// its memory comes back once that work is done (or at the next defragmentation).
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn an_exiting_thread_with_queued_work_does_not_synchronize_and_its_arena_returns() {
        crate::testing::require_gpu();
        let mr = device_arena(256 * MIB);
        for round in 0..20u8 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let p = mr.allocate(Stream::PER_THREAD, 512 * KIB, 256).unwrap();
                    for _ in 0..16 {
                        // SAFETY: a live 512 KiB block of `mr`; queued on this thread's stream.
                        unsafe {
                            crate::cuda::set_async(p, round, 512 * KIB, Stream::PER_THREAD).unwrap()
                        };
                    }
                    // SAFETY: from allocate above, freed in stream order (the memsets may still run).
                    unsafe {
                        mr.deallocate(Stream::PER_THREAD, p, 512 * KIB, 256)
                            .unwrap()
                    };
                })
                .join()
                .unwrap();
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let st = mr.stats();
            if st.arenas == 0 {
                assert_eq!((st.superblocks, st.used_bytes), (0, 0), "{st:?}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "exited threads' arenas never returned: {st:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_all_returned(&mr);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn the_cap_gives_out_of_memory_and_the_arena_still_works() {
        crate::testing::require_gpu();
        let mr = device_arena(64 * MIB);
        let any = AnyResource::new(mr.clone());
        let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let mut held = Vec::new();
        let err = loop {
            match mr.allocate(stream.stream(), MIB, 256) {
                Ok(p) => held.push(p),
                Err(e) => break e,
            }
            assert!(held.len() <= 64, "the arena handed out more than its cap");
        };
        assert_eq!(held.len(), 64);
        assert!(
            err.is_out_of_memory() && err.to_string().contains("No room in arena."),
            "{err}"
        );
        let big = mr.allocate(Stream::DEFAULT, 2 * MIB, 256).unwrap_err();
        assert!(big.is_out_of_memory(), "{big}");
        let p = held.pop().unwrap();
        // SAFETY: from allocate above; nothing used it.
        unsafe { mr.deallocate(stream.stream(), p, MIB, 256).unwrap() };
        let q = mr.allocate(Stream::DEFAULT, 512 * KIB, 256).unwrap();
        check_usable(&any, q, 512 * KIB, 0x29, Stream::DEFAULT);
        // SAFETY: from allocate above; the check synchronized its work.
        unsafe { mr.deallocate(Stream::DEFAULT, q, 512 * KIB, 256).unwrap() };
        for p in held {
            // SAFETY: from allocate above; nothing used them.
            unsafe { mr.deallocate(stream.stream(), p, MIB, 256).unwrap() };
        }
        assert_all_returned(&mr);
    }
}

/// The 256-byte pair on one stream, from one thread, from 4 and 16 threads at once, and from a new
/// thread per round (as the benchmark runs it) keeps one superblock per arena: freed blocks are
/// found again, never stranded in superblocks the arena keeps passing over.
#[test]
fn pair_churn_on_one_stream_keeps_one_superblock_per_arena() {
    let gpu = simulated(64 << 30);
    let mr = arena_over(&gpu, 32 << 30);
    let pairs = |stream: Stream, n: usize| {
        for _ in 0..n {
            let p = alloc(&mr, stream, 256);
            // SAFETY: allocated just above with these arguments.
            unsafe {
                mr.deallocate(stream, p as *mut u8, 256, DEFAULT_ALIGNMENT)
                    .unwrap()
            };
        }
    };
    for stream in [Stream::DEFAULT, Stream::PER_THREAD, fake_stream(3)] {
        pairs(stream, 2000);
    }
    assert_eq!(mr.stats().superblocks, 3, "{:?}", mr.stats());
    // Joined explicitly: a scope alone does not wait for the thread-local destructors that return
    // each thread's legacy arena.
    for threads in [4, 16] {
        std::thread::scope(|scope| {
            let spawned: Vec<_> = (0..threads)
                .map(|_| scope.spawn(|| pairs(Stream::DEFAULT, 1000)))
                .collect();
            spawned.into_iter().for_each(|t| t.join().unwrap());
        });
    }
    let mut n = 1;
    while n < 1 << 12 {
        std::thread::scope(|scope| {
            scope.spawn(|| pairs(Stream::DEFAULT, n)).join().unwrap();
        });
        n *= 2;
    }
    let s = mr.stats();
    assert_eq!(
        s.superblocks, 3,
        "the legacy stream's arena kept one superblock: {s:?}"
    );
    assert_eq!(s.used_bytes, 0);
}
