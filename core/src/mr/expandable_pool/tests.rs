use super::*;
use crate::mr::detail::stream_ordered::model::{
    drive, fake_stream, stress_threads, Op, RecordingSyncer, Subject,
};
use crate::mr::StatisticsResourceAdaptor;
use crate::AnyResource;
use proptest::prelude::*;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Host memory standing in for a device of `capacity` bytes in granules of `granularity`.
fn host(capacity: usize, granularity: usize) -> Backend {
    Backend::Host(HostBackend {
        capacity: Some(capacity),
        granularity,
    })
}

/// A pool over `backend` watched by the stream-order model: every span is checked to be idle
/// before its granules are given back.
fn watched(
    backend: Backend,
    options: ExpandablePoolOptions,
    cache: CacheLimits,
) -> (ExpandablePoolMemoryResource, RecordingSyncer) {
    watched_with(
        RecordingSyncer::new(30, 0x9e37_79b9),
        backend,
        options,
        cache,
    )
}

/// [`watched`] with `syncer` (how often it finds streams idle).
fn watched_with(
    syncer: RecordingSyncer,
    backend: Backend,
    options: ExpandablePoolOptions,
    cache: CacheLimits,
) -> (ExpandablePoolMemoryResource, RecordingSyncer) {
    let mut range = options.range.clone();
    range.reserve = Some(range.reserve.unwrap_or(2 * backend.capacity().unwrap()));
    let range = VirtualRange::with_backend(backend, range).unwrap();
    let model = syncer.clone();
    let mapped =
        Mapped::new(range, options.release_threshold).with_release_check(move |addr, len| {
            if let Err(e) = model.model().check_idle(addr, addr + len) {
                panic!("model: {e}");
            }
        });
    let pool = ExpandablePoolMemoryResource::over(
        mapped,
        Access::HOST_DEVICE,
        options.free_checks,
        Arc::new(syncer.clone()),
        cache,
    );
    (pool, syncer)
}

/// A pool on host memory of `capacity` bytes in `granule`-byte granules, default caches.
fn pool(capacity: usize, granule: usize) -> ExpandablePoolMemoryResource {
    watched(
        host(capacity, granule),
        ExpandablePoolOptions::default(),
        CacheLimits::DEFAULT,
    )
    .0
}

fn alloc(mr: &ExpandablePoolMemoryResource, bytes: usize) -> *mut u8 {
    mr.allocate(Stream::DEFAULT, bytes, DEFAULT_ALIGNMENT)
        .unwrap()
}

fn free(mr: &ExpandablePoolMemoryResource, p: *mut u8, bytes: usize) {
    // SAFETY: the tests pass pointers from `alloc` with their sizes, once.
    unsafe {
        mr.deallocate(Stream::DEFAULT, p, bytes, DEFAULT_ALIGNMENT)
            .unwrap()
    };
}

fn fill(p: *mut u8, bytes: usize, value: u8) {
    // SAFETY: host memory handed out by the pool, `bytes` long.
    unsafe { p.write_bytes(value, bytes) };
}

fn holds(p: *mut u8, bytes: usize, value: u8) -> bool {
    // SAFETY: as for `fill`.
    unsafe { std::slice::from_raw_parts(p, bytes) }
        .iter()
        .all(|&b| b == value)
}

/// The granules `[ptr, ptr + bytes)` touches, as indices from the pool's base.
fn touched(mr: &ExpandablePoolMemoryResource, ptr: *mut u8, bytes: usize) -> Vec<usize> {
    let g = mr.granularity();
    let offset = ptr as usize - mr.base() as usize;
    (offset / g..(offset + align_up(bytes, DEFAULT_ALIGNMENT).unwrap()).div_ceil(g)).collect()
}

#[test]
fn grows_in_place_and_free_space_coalesces_across_growth_steps() {
    let mr = pool(64 * MIB, 64 * KIB);
    assert_eq!((mr.mapped_bytes(), mr.statistics().books_bytes), (0, 0));
    // Ten growth steps of 100 KiB each: the books grow at their end, by whole granules.
    let blocks: Vec<*mut u8> = (0..10).map(|_| alloc(&mr, 100 * KIB)).collect();
    for pair in blocks.windows(2) {
        assert_eq!(
            pair[1] as usize - pair[0] as usize,
            100 * KIB,
            "in place, in order"
        );
    }
    assert_eq!(blocks[0], mr.base());
    let s = mr.statistics();
    assert_eq!(s.books_bytes, align_up(1000 * KIB, 64 * KIB).unwrap());
    assert_eq!(s.mapped_bytes, s.books_bytes);
    for (i, &p) in blocks.iter().enumerate() {
        fill(p, 100 * KIB, i as u8);
    }
    for &p in &blocks {
        free(&mr, p, 100 * KIB);
    }
    // One block as large as all of them fits where they were, without growing: the free space of
    // ten growth steps is one block.
    let steps = mr.statistics().growth_steps;
    let big = alloc(&mr, 1000 * KIB);
    assert_eq!(big, mr.base());
    assert_eq!(mr.statistics().growth_steps, steps);
    fill(big, 1000 * KIB, 0xee);
    free(&mr, big, 1000 * KIB);
}

#[test]
fn a_large_request_succeeds_whenever_the_device_can_back_it() {
    // A device of 10 granules: a block of 4 granules, one granule live after it, 4 more granules.
    let g = 64 * KIB;
    let mr = pool(10 * g, g);
    let a = alloc(&mr, 4 * g);
    let b = alloc(&mr, g);
    let c = alloc(&mr, 4 * g);
    fill(b, g, 0xb);
    free(&mr, a, 4 * g);
    free(&mr, c, 4 * g);
    assert_eq!(mr.mapped_bytes(), 9 * g);
    // 8 granules: no free block holds them and the device has 1 granule left, but giving back the
    // 4 granules before `b` makes room; the request joins the 4 free granules at the end.
    let big = alloc(&mr, 8 * g);
    assert_eq!(
        big, c,
        "the request starts at the free block at the end of the books"
    );
    fill(big, 8 * g, 0xe);
    assert!(holds(b, g, 0xb));
    assert_eq!(mr.mapped_bytes(), 9 * g);
    let s = mr.statistics();
    assert!(s.granules_released >= 4, "{s:?}");
    free(&mr, big, 8 * g);
    free(&mr, b, g);
}

#[test]
fn trim_gives_back_every_free_granule_between_live_blocks() {
    let g = 64 * KIB;
    let mr = pool(64 * MIB, g);
    // 64 blocks of 100 KiB; every eighth stays live, spread over the range.
    let blocks: Vec<*mut u8> = (0..64).map(|_| alloc(&mr, 100 * KIB)).collect();
    for (i, &p) in blocks.iter().enumerate() {
        fill(p, 100 * KIB, i as u8);
    }
    let mut live = Vec::new();
    for (i, &p) in blocks.iter().enumerate() {
        if i % 8 == 3 {
            live.push((i, p));
        } else {
            free(&mr, p, 100 * KIB);
        }
    }
    let before = mr.statistics();
    let released = mr.trim().unwrap();
    let after = mr.statistics();
    // What stays mapped is exactly the granules the live blocks touch.
    let mut pinned: Vec<usize> = live
        .iter()
        .flat_map(|&(_, p)| touched(&mr, p, 100 * KIB))
        .collect();
    pinned.dedup();
    assert_eq!(after.mapped_bytes, pinned.len() * g, "{after:?}");
    assert_eq!(released, before.mapped_bytes - after.mapped_bytes);
    assert_eq!(released, before.releasable_bytes);
    assert_eq!(after.releasable_bytes, 0);
    // The live blocks keep their bytes; the books end after the last live block.
    for &(i, p) in &live {
        assert!(holds(p, 100 * KIB, i as u8), "block {i}");
    }
    let last = live.last().unwrap().1 as usize + 100 * KIB - mr.base() as usize;
    assert_eq!(
        after.books_bytes,
        last.next_multiple_of(g),
        "the frontier came down to the last live block"
    );
    // The holes map again when used.
    let again = alloc(&mr, 600 * KIB);
    fill(again, 600 * KIB, 0x77);
    assert!(mr.mapped_bytes() > after.mapped_bytes);
    free(&mr, again, 600 * KIB);
    for (_, p) in live {
        free(&mr, p, 100 * KIB);
    }
    mr.trim().unwrap();
    let s = mr.statistics();
    assert_eq!(
        (s.mapped_bytes, s.books_bytes, s.used_bytes),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn trim_after_the_peak_returns_nearly_all_unused_memory_with_2_mib_granules() {
    // Realistic granules (2 MiB, a simulated device that only counts): a peak of mixed sizes,
    // then a tenth stays live, spread over the range.
    let mr = watched(
        Backend::Simulated(HostBackend {
            capacity: Some(64 << 30),
            granularity: 2 * MIB,
        }),
        ExpandablePoolOptions::default(),
        CacheLimits::DEFAULT,
    )
    .0;
    let mut x = 0x1234_5678_9abc_def0_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut blocks = Vec::new();
    for _ in 0..4000 {
        let size = match next() % 10 {
            0 => 8 * MIB + (next() % (24 * MIB as u64)) as usize,
            1..=3 => MIB + (next() % (4 * MIB as u64)) as usize,
            _ => 256 + (next() % (256 * KIB as u64)) as usize,
        };
        blocks.push((alloc(&mr, size), size));
    }
    let mut kept = Vec::new();
    for (p, size) in blocks {
        if next() % 10 == 0 {
            kept.push((p, size));
        } else {
            free(&mr, p, size);
        }
    }
    let before = mr.statistics();
    let unused = before.mapped_bytes - before.used_bytes;
    let released = mr.trim().unwrap();
    let share = released as f64 / unused as f64;
    eprintln!(
        "peak mapped {} MiB, {} MiB live after the peak, trim returned {} of {} MiB unused ({:.1} %)",
        before.peak_mapped_bytes / MIB,
        before.used_bytes / MIB,
        released / MIB,
        unused / MIB,
        100.0 * share
    );
    assert!(
        share >= 0.90,
        "trim returned {:.1} % of the unused memory",
        100.0 * share
    );
    for (p, size) in kept {
        free(&mr, p, size);
    }
}

/// A pool on 64 MiB of host memory in `granule`-byte granules, default caches, whose streams are
/// always found idle.
fn idle_pool(granule: usize, options: ExpandablePoolOptions) -> ExpandablePoolMemoryResource {
    watched_with(
        RecordingSyncer::new(100, 1),
        host(64 * MIB, granule),
        options,
        CacheLimits::DEFAULT,
    )
    .0
}

/// Replays a loop of large short-lived blocks of varying sizes (an activation, a temporary)
/// beside small long-lived ones (a parameter, a cached result) on a pool in 64 KiB granules with
/// no release threshold; returns the peak live bytes and the peak mapped bytes.
fn pinning_loop(mr: &ExpandablePoolMemoryResource) -> (usize, usize) {
    let g = mr.granularity();
    let (mut live, mut peak_live) = (0, 0);
    let mut small = Vec::new();
    for i in 0..48 {
        let large = (2 + (i * 7) % 9) * g + 3 * KIB;
        let l = alloc(mr, large);
        let s = alloc(mr, 4 * KIB);
        small.push(s);
        live += large + 4 * KIB;
        peak_live = usize::max(peak_live, live);
        free(mr, l, large);
        live -= large;
    }
    let peak_mapped = mr.peak_mapped_bytes();
    for s in small {
        free(mr, s, 4 * KIB);
    }
    (peak_live, peak_mapped)
}

#[test]
fn small_long_lived_blocks_beside_large_short_lived_ones_pin_few_granules() {
    let g = 64 * KIB;
    // Streams found idle: the granules a free leaves can be given back at once.
    let mr = idle_pool(g, ExpandablePoolOptions::default());
    let (peak_live, peak_mapped) = pinning_loop(&mr);
    // The small blocks (48 × 4 KiB = 3 granules) fill the unused ends of granules the large
    // ones touch, and the granules a freed large block leaves are mapped again where the next,
    // larger one goes instead of new ones: the peak is the largest block and the small ones,
    // each rounded up to granules, and one granule more.
    let bound = peak_live.div_ceil(g) * g + 2 * g;
    assert!(
        peak_mapped <= bound,
        "peak mapped {peak_mapped} for a peak live of {peak_live} (at most {bound})"
    );
}

#[test]
fn under_a_threshold_every_free_that_leaves_a_whole_granule_free_gives_it_back() {
    let g = 64 * KIB;
    let mr = idle_pool(g, ExpandablePoolOptions::default().release_threshold(0));
    // Above the caches' largest block: frees reach the shared list. `b` shares a granule with
    // `a`, so the range stays above the threshold.
    let size = 5 * MIB + g / 2;
    let a = alloc(&mr, size);
    let b = alloc(&mr, size);
    let held_by_b = touched(&mr, b, size).len() * g;
    free(&mr, a, size);
    assert_eq!(mr.mapped_bytes(), held_by_b);
    // The same bytes again, and freed again: given back again, though the free list holds no
    // more free bytes than after the first free.
    for _ in 0..3 {
        let c = alloc(&mr, size);
        assert!(mr.mapped_bytes() > held_by_b);
        free(&mr, c, size);
        assert_eq!(
            mr.mapped_bytes(),
            held_by_b,
            "the free gave its granules back"
        );
    }
    free(&mr, b, size);
    assert_eq!(mr.mapped_bytes(), 0);
}

#[test]
fn a_release_threshold_keeps_that_much_mapped_and_gives_the_rest_back() {
    let g = 64 * KIB;
    // Every stream is found idle: the threshold gives back everything above it at once.
    let (mr, _) = watched_with(
        RecordingSyncer::new(100, 1),
        host(64 * MIB, g),
        ExpandablePoolOptions::default().release_threshold(MIB),
        CacheLimits::DEFAULT,
    );
    assert_eq!(mr.release_threshold(), Some(MIB));
    // Blocks above the caches' largest go straight to the shared list when freed.
    let blocks: Vec<*mut u8> = (0..4).map(|_| alloc(&mr, 5 * MIB)).collect();
    assert_eq!(mr.mapped_bytes(), 20 * MIB);
    for p in blocks {
        free(&mr, p, 5 * MIB);
    }
    let s = mr.statistics();
    assert!(
        s.mapped_bytes <= MIB,
        "frees above the threshold gave memory back: {s:?}"
    );
    mr.set_release_threshold(None);
    let p = alloc(&mr, 8 * MIB);
    free(&mr, p, 8 * MIB);
    assert_eq!(mr.mapped_bytes(), 8 * MIB, "no threshold: everything stays");
    assert_eq!(mr.trim().unwrap(), 8 * MIB);
}

#[test]
fn out_of_memory_says_how_much_is_mapped_and_free_and_the_largest_free_block() {
    let g = 64 * KIB;
    let mr = pool(16 * g, g);
    let live = alloc(&mr, 10 * g);
    let hole = alloc(&mr, 2 * g);
    let pin = alloc(&mr, 1000);
    free(&mr, hole, 2 * g);
    let err = mr
        .allocate(Stream::DEFAULT, 8 * g, DEFAULT_ALIGNMENT)
        .unwrap_err();
    let text = err.to_string();
    assert!(err.is_out_of_memory(), "{text}");
    assert!(text.contains(NAME), "{text}");
    // After giving back the hole: 10 granules for `live` and one for `pin` stay mapped.
    assert!(text.contains(&format!("{} bytes mapped", 11 * g)), "{text}");
    assert!(
        text.contains(&format!("{} in use", 10 * g + 1024)),
        "{text}"
    );
    assert!(text.contains("largest free block"), "{text}");
    assert!(
        text.contains("bytes free"),
        "the device's free memory: {text}"
    );
    // Nothing of the failed request stays mapped, and the pool goes on.
    assert_eq!(mr.mapped_bytes(), 11 * g);
    let small = alloc(&mr, 3 * g);
    fill(small, 3 * g, 1);
    for (p, n) in [(small, 3 * g), (pin, 1000), (live, 10 * g)] {
        free(&mr, p, n);
    }
}

#[test]
fn a_request_beyond_the_reservation_is_out_of_memory_naming_it() {
    let (mr, _) = watched(
        host(64 * MIB, 64 * KIB),
        ExpandablePoolOptions::default().range(VirtualRangeOptions::default().reserve(MIB)),
        CacheLimits::DEFAULT,
    );
    assert_eq!(mr.reserved_bytes(), MIB);
    let err = mr
        .allocate(Stream::DEFAULT, 2 * MIB, DEFAULT_ALIGNMENT)
        .unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert!(
        err.to_string().contains("reservation of 1048576 bytes"),
        "{err}"
    );
    assert_eq!(mr.mapped_bytes(), 0);
    let p = alloc(&mr, MIB);
    free(&mr, p, MIB);
}

#[test]
fn an_initial_size_is_mapped_at_construction_and_kept_free() {
    let options = ExpandablePoolOptions::default()
        .backend(host(16 * MIB, MIB))
        .initial_size(5 * MIB + 1);
    let mr = ExpandablePoolMemoryResource::new(options).unwrap();
    let s = mr.statistics();
    assert_eq!((s.mapped_bytes, s.used_bytes), (6 * MIB, 0), "{s:?}");
    let p = alloc(&mr, 6 * MIB);
    assert_eq!(
        mr.statistics().growth_steps,
        s.growth_steps,
        "served from the primed memory"
    );
    free(&mr, p, 6 * MIB);
    let too_large = ExpandablePoolOptions::default()
        .backend(host(4 * MIB, MIB))
        .initial_size(8 * MIB);
    assert!(matches!(
        ExpandablePoolMemoryResource::new(too_large),
        Err(Error::OutOfMemory { .. })
    ));
}

#[test]
fn alignments_above_256_are_honoured() {
    let mr = pool(64 * MIB, 64 * KIB);
    let small = alloc(&mr, 300);
    for shift in [9, 12, 16, 20] {
        let alignment = 1 << shift;
        let p = mr.allocate(Stream::DEFAULT, 5000, alignment).unwrap();
        assert_eq!(p as usize % alignment, 0);
        fill(p, 5000, shift as u8);
        // SAFETY: from allocate above with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 5000, alignment).unwrap() };
    }
    free(&mr, small, 300);
}

#[test]
fn frees_are_checked() {
    let mr = pool(64 * MIB, 64 * KIB);
    let p = alloc(&mr, 1000);
    // SAFETY: refused before anything is freed.
    let wrong = unsafe { mr.deallocate(Stream::DEFAULT, p, 5000, DEFAULT_ALIGNMENT) };
    assert!(matches!(wrong, Err(Error::InvalidArgument(_))), "{wrong:?}");
    free(&mr, p, 1000);
    // SAFETY: refused: a double free.
    let twice = unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, DEFAULT_ALIGNMENT) };
    assert!(matches!(twice, Err(Error::InvalidArgument(_))), "{twice:?}");
    assert_eq!(mr.used_bytes(), 0);
}

#[test]
fn a_statistics_adaptor_counts_on_top() {
    let mr = pool(64 * MIB, 64 * KIB);
    let stats = StatisticsResourceAdaptor::new(AnyResource::new(mr.clone()));
    let p = stats.allocate(Stream::DEFAULT, 3 * MIB, 256).unwrap();
    assert_eq!(stats.bytes_counter().value, 3 * MIB as i64);
    assert_eq!(mr.used_bytes(), 3 * MIB);
    // SAFETY: from allocate above.
    unsafe { stats.deallocate(Stream::DEFAULT, p, 3 * MIB, 256).unwrap() };
    assert_eq!(stats.bytes_counter().peak, 3 * MIB as i64);
    assert!(mr.is_equal(&mr.clone()));
    assert!(!mr.is_equal(&pool(MIB, 64 * KIB)));
}

#[test]
fn nvtx_bounds_register_the_reservation_as_one_heap() {
    let mr = pool(64 * MIB, 64 * KIB).with_nvtx_bounds(true);
    assert!(mr.nvtx_bounds());
    let p = alloc(&mr, 1000);
    let q = alloc(&mr, 3 * MIB);
    assert_eq!(mr.nvtx.as_ref().unwrap().counts(), (1, 2));
    free(&mr, p, 1000);
    free(&mr, q, 3 * MIB);
    assert_eq!(mr.nvtx.as_ref().unwrap().counts(), (1, 0));
}

#[test]
fn an_export_of_a_live_allocation_maps_the_same_bytes_elsewhere() {
    use crate::mr::detail::virtual_range::ImportedSpan;
    let g = 64 * KIB;
    let mr = pool(16 * MIB, g);
    let pad = alloc(&mr, 1000);
    let p = alloc(&mr, 3 * g);
    fill(p, 3 * g, 0x5c);
    let span = mr.export(p, 3 * g, Stream::DEFAULT).unwrap();
    assert_eq!(span.size, 3 * g);
    assert_eq!(
        span.handles.len(),
        4,
        "the allocation touches four granules"
    );
    let imported = ImportedSpan::new(&span).unwrap();
    assert_ne!(imported.as_ptr(), p);
    assert!(holds(imported.as_ptr(), 3 * g, 0x5c));
    fill(imported.as_ptr(), g, 0x11);
    assert!(holds(p, g, 0x11), "the same bytes, no copy");
    // Only live allocations of the pool, with their size.
    assert!(matches!(
        mr.export(p, 1000, Stream::DEFAULT),
        Err(Error::InvalidArgument(_))
    ));
    let mut outside = 0u8;
    assert!(mr.export(&mut outside, 1, Stream::DEFAULT).is_err());
    drop(imported);
    free(&mr, p, 3 * g);
    free(&mr, pad, 1000);
}

#[test]
fn host_mode_refuses_peers_and_a_simulated_device_refuses_export() {
    let err = ExpandablePoolMemoryResource::new(
        ExpandablePoolOptions::default()
            .backend(host(16 * MIB, 64 * KIB))
            .range(VirtualRangeOptions::default().peers(&[1])),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
    let sim = ExpandablePoolMemoryResource::new(ExpandablePoolOptions::default().backend(
        Backend::Simulated(HostBackend {
            capacity: Some(1 << 30),
            granularity: 2 * MIB,
        }),
    ))
    .unwrap();
    assert_eq!(sim.access(), Access::DEVICE);
    let p = sim.allocate(Stream::DEFAULT, 5 * MIB, 256).unwrap();
    assert_eq!(sim.mapped_bytes(), 6 * MIB);
    assert!(matches!(
        sim.export(p, 5 * MIB, Stream::DEFAULT),
        Err(Error::Unsupported(_))
    ));
    // SAFETY: from allocate above.
    unsafe { sim.deallocate(Stream::DEFAULT, p, 5 * MIB, 256).unwrap() };
}

#[test]
fn the_default_pool_in_host_mode_lives_on_host_memory() {
    if !cuda::is_host_mode() {
        return; // GPU tests cover the device
    }
    let mr = ExpandablePoolMemoryResource::new(ExpandablePoolOptions::default()).unwrap();
    assert_eq!(mr.access(), Access::HOST_DEVICE);
    assert_eq!(mr.device(), None);
    assert_eq!(mr.granularity(), 2 * MIB);
    let p = alloc(&mr, 10_000);
    fill(p, 10_000, 3);
    free(&mr, p, 10_000);
}

#[test]
fn streams_reuse_each_others_memory_before_the_books_grow() {
    let (mr, syncer) = watched(
        host(64 * MIB, 64 * KIB),
        ExpandablePoolOptions::default(),
        CacheLimits::OFF,
    );
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = mr.allocate(a, MIB, 256).unwrap();
    // SAFETY: from allocate above.
    unsafe { mr.deallocate(a, p, MIB, 256).unwrap() };
    let steps = mr.statistics().growth_steps;
    // Another stream takes the block, after one wait, rather than growing the books.
    let q = mr.allocate(b, MIB, 256).unwrap();
    assert_eq!(q, p);
    assert_eq!(mr.statistics().growth_steps, steps);
    assert_eq!(syncer.counts().stream_waits, 1);
    // SAFETY: from allocate above.
    unsafe { mr.deallocate(b, q, MIB, 256).unwrap() };
}

impl Subject for ExpandablePoolMemoryResource {
    fn footprint(&self, ptr: usize, bytes: usize, _alignment: usize) -> (usize, usize) {
        (ptr, align_up(bytes, DEFAULT_ALIGNMENT).unwrap())
    }
    fn must_fail(&self, _bytes: usize, _alignment: usize) -> Option<fn(&Error) -> bool> {
        None
    }
    fn check_accounting(&self, held: usize) {
        let s = self.statistics();
        assert_eq!(s.used_bytes, held, "bytes used vs the live blocks");
        assert!(s.used_bytes <= s.books_bytes && s.books_bytes <= s.reserved_bytes);
        assert!(s.mapped_bytes <= s.books_bytes, "{s:?}");
    }
    fn check_books(&self) {
        let s = self.core.stats();
        assert_eq!(s.free + s.used, s.pool_size, "{s:?}");
    }
    fn release(&self) -> Result<usize> {
        let before = self.mapped_bytes();
        let released = self.trim()?;
        assert_eq!(self.mapped_bytes(), before - released);
        assert_eq!(
            self.statistics().releasable_bytes,
            0,
            "trim left free granules"
        );
        Ok(released)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(64), ..ProptestConfig::default() })]

    /// Random allocate/free/trim on seven streams over a small device, with and without caches
    /// and a release threshold: no overlap, alignment honoured, stream order kept (the model,
    /// which also fails any give-back of memory a stream may still use), exact accounting, and
    /// nothing mapped once everything is freed and trimmed.
    #[test]
    fn random_operations_keep_every_promise(
        ops in proptest::collection::vec(any::<Op>(), 2048),
        cache in 0usize..3,
        threshold in proptest::option::of(0usize..8),
        granule_shift in 14u32..18,
    ) {
        let options = ExpandablePoolOptions {
            release_threshold: threshold.map(|t| t * MIB),
            ..ExpandablePoolOptions::default()
        };
        let (mr, syncer) = watched(host(48 * MIB, 1 << granule_shift), options, CacheLimits::ALL[cache]);
        drive(&mr, &syncer, &ops).map_err(TestCaseError::fail)?;
        mr.core.check_invariants();
        mr.trim().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let s = mr.statistics();
        prop_assert_eq!((s.mapped_bytes, s.books_bytes), (0, 0), "{:?}", s);
        mr.core.check_invariants();
    }
}

/// 16 threads on host memory, every block filled and checked (so every block handed out is
/// mapped and nobody else's), while another thread trims over and over.
#[test]
fn sixteen_threads_churn_while_another_trims() {
    for cache in [CacheLimits::DEFAULT, CacheLimits::TIGHT] {
        let (mr, syncer) = watched(
            host(256 * MIB, 64 * KIB),
            ExpandablePoolOptions::default(),
            cache,
        );
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    mr.trim().unwrap();
                    // A pause between trims: in a loop without one, the trimmer holds the shared
                    // lock nearly all the time and, on 16 CPUs, the churning threads waited for
                    // it for minutes (the standard mutex is not fair).
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            });
            // Stops the trimmer also when a churning thread panics: the scope would otherwise
            // wait for it forever, and the panic would show as a hang.
            struct StopTrimming<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for StopTrimming<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            let _stop = StopTrimming(&done);
            stress_threads(&mr, &syncer, 16, 2000, 256 * KIB);
        });
        mr.core.check_invariants();
        let s = mr.statistics();
        assert_eq!(s.used_bytes, 0);
        mr.trim().unwrap();
        assert_eq!(mr.mapped_bytes(), 0);
        assert!(s.granules_released > 0);
    }
}

mod gpu {
    use super::*;
    use crate::cuda::{self as cu, DriverMemory};
    use crate::mr::test_harness::{resource_tests, DEVICE_MEMORY};
    use crate::testing::{require_gpu, skip};

    resource_tests!(on_device, || {
        Ok(AnyResource::new(ExpandablePoolMemoryResource::new(
            ExpandablePoolOptions::default(),
        )?))
    });

    fn device_pool(options: ExpandablePoolOptions) -> ExpandablePoolMemoryResource {
        require_gpu();
        let mr = ExpandablePoolMemoryResource::new(options).unwrap();
        eprintln!(
            "device {:?}: granularity {}, reserved {}, shareable {:?}",
            mr.device(),
            mr.granularity(),
            mr.reserved_bytes(),
            mr.shareable()
        );
        mr
    }

    fn put(p: *mut u8, len: usize, value: u8, stream: Stream) {
        // SAFETY: the callers' allocations are `len` bytes of device memory.
        unsafe { cu::set_async(p, value, len, stream).unwrap() };
    }

    fn get(p: *const u8, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        // SAFETY: as above.
        unsafe { cu::copy_sync(out.as_mut_ptr(), p, len, Stream::DEFAULT).unwrap() };
        out
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_a_gpu_the_pool_grows_in_place_and_trim_gives_back_between_live_blocks() {
        let _exclusive = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
        let mr = device_pool(
            ExpandablePoolOptions::default().range(VirtualRangeOptions::default().reserve(8 << 30)),
        );
        let g = mr.granularity();
        let device = mr.device().unwrap();
        let stream = cu::OwnedStream::new(cu::StreamFlags::NonBlocking).unwrap();
        let blocks: Vec<*mut u8> = (0..64)
            .map(|_| mr.allocate(stream.stream(), 3 * g / 2, 256).unwrap())
            .collect();
        for (i, &p) in blocks.iter().enumerate() {
            put(p, 3 * g / 2, i as u8, stream.stream());
        }
        assert_eq!(
            blocks[1] as usize - blocks[0] as usize,
            3 * g / 2,
            "in place"
        );
        let (free_peak, _) = cu::mem_info(device).unwrap();
        let mut live = Vec::new();
        for (i, &p) in blocks.iter().enumerate() {
            if i % 8 == 0 {
                live.push((i, p));
            } else {
                // SAFETY: from allocate above; the kernels queued on `stream` are ordered before reuse.
                unsafe { mr.deallocate(stream.stream(), p, 3 * g / 2, 256).unwrap() };
            }
        }
        let released = mr.trim().unwrap();
        let (free_after, _) = cu::mem_info(device).unwrap();
        eprintln!(
            "trim released {released} bytes; the device's free memory rose by {}",
            free_after as i64 - free_peak as i64
        );
        assert!(released >= 40 * g, "released {released}");
        assert!(
            free_after + 4 * g >= free_peak + released,
            "the device got the memory back"
        );
        for &(i, p) in &live {
            assert!(
                get(p, 3 * g / 2).iter().all(|&b| b == i as u8),
                "live block {i} kept its bytes"
            );
        }
        // Reuse maps again.
        let again = mr.allocate(stream.stream(), 20 * g, 256).unwrap();
        put(again, 20 * g, 0x42, stream.stream());
        assert!(get(again, 20 * g).iter().all(|&b| b == 0x42));
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(stream.stream(), again, 20 * g, 256).unwrap() };
        for (_, p) in live {
            // SAFETY: from allocate above.
            unsafe { mr.deallocate(stream.stream(), p, 3 * g / 2, 256).unwrap() };
        }
        mr.trim().unwrap();
        assert_eq!(mr.mapped_bytes(), 0);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_a_gpu_out_of_memory_says_how_much_is_mapped_and_free() {
        let _exclusive = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
        require_gpu();
        let device = cu::current_device().unwrap();
        let (free, total) = cu::mem_info(device).unwrap();
        let mr = device_pool(
            ExpandablePoolOptions::default()
                .range(VirtualRangeOptions::default().reserve(2 * total)),
        );
        let half = free / 2;
        let p = mr.allocate(Stream::DEFAULT, half, 256).unwrap();
        let err = mr.allocate(Stream::DEFAULT, free, 256).unwrap_err();
        let text = err.to_string();
        eprintln!("{text}");
        assert!(err.is_out_of_memory(), "{text}");
        assert!(
            text.contains("bytes mapped") && text.contains("in use"),
            "{text}"
        );
        assert!(text.contains("largest free block"), "{text}");
        assert!(text.contains(&format!("device {device}")), "{text}");
        assert!(
            mr.mapped_bytes() < half + 2 * mr.granularity(),
            "nothing half-mapped"
        );
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, half, 256).unwrap() };
        drop(mr);
        let (free_end, _) = cu::mem_info(device).unwrap();
        assert!(free_end + (64 << 20) >= free, "drop gave everything back");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_a_gpu_trim_waits_for_the_streams_that_used_the_memory() {
        let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
        let mr = device_pool(
            ExpandablePoolOptions::default().range(VirtualRangeOptions::default().reserve(4 << 30)),
        );
        let g = mr.granularity();
        let stream = cu::OwnedStream::new(cu::StreamFlags::NonBlocking).unwrap();
        // Much work queued on the stream, then the block freed on it and trimmed at once: trim must
        // wait for the work before unmapping (else the kernels fault).
        let p = mr.allocate(stream.stream(), 64 * g, 256).unwrap();
        for round in 0..50 {
            put(p, 64 * g, round, stream.stream());
        }
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(stream.stream(), p, 64 * g, 256).unwrap() };
        assert_eq!(mr.trim().unwrap(), 64 * g);
        stream.stream().synchronize().unwrap();
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_two_gpus_a_peer_reads_the_pools_memory() {
        const NAME: &str = "on_two_gpus_a_peer_reads_the_pools_memory";
        if !crate::testing::two_devices(NAME) {
            return;
        }
        if !cu::device::can_access_peer(1, 0).unwrap() {
            skip(
                NAME,
                "device 1 cannot access device 0's memory (no peer access)",
            );
            return;
        }
        let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
        cu::set_current_device(0).unwrap();
        let mr = device_pool(
            ExpandablePoolOptions::default()
                .range(VirtualRangeOptions::default().reserve(1 << 30).peers(&[1])),
        );
        assert_eq!(mr.peers(), vec![1]);
        let g = mr.granularity();
        let p = mr.allocate(Stream::DEFAULT, 2 * g, 256).unwrap();
        put(p, 2 * g, 0x61, Stream::DEFAULT);
        Stream::DEFAULT.synchronize().unwrap();
        cu::set_current_device(1).unwrap();
        let theirs = DriverMemory::Device.allocate(2 * g, "test").unwrap();
        // SAFETY: `theirs` holds 2 granules on device 1; the pool's are accessible to device 1.
        unsafe { cu::copy_sync(theirs, p, 2 * g, Stream::DEFAULT).unwrap() };
        let seen = get(theirs, 2 * g);
        // SAFETY: allocated above, freed once.
        unsafe { DriverMemory::Device.free(theirs).unwrap() };
        cu::set_current_device(0).unwrap();
        assert!(seen.iter().all(|&b| b == 0x61));
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 2 * g, 256).unwrap() };
        // One pool per device: device 1's own.
        cu::set_current_device(1).unwrap();
        let theirs = device_pool(
            ExpandablePoolOptions::default().range(VirtualRangeOptions::default().reserve(1 << 30)),
        );
        assert_eq!(theirs.device(), Some(1));
        let q = theirs.allocate(Stream::DEFAULT, g, 256).unwrap();
        // SAFETY: from allocate above.
        unsafe { theirs.deallocate(Stream::DEFAULT, q, g, 256).unwrap() };
        cu::set_current_device(0).unwrap();
    }

    /// One expandable pool per device in the process registry: each device's buffers come from its
    /// own pool and stay on that device whichever device is current when they are freed.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_two_gpus_the_registry_keeps_one_pool_per_device() {
        if !crate::testing::two_devices("on_two_gpus_the_registry_keeps_one_pool_per_device") {
            return;
        }
        let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
        let _registry = crate::registry::process_registry_test_lock();
        let pools: Vec<ExpandablePoolMemoryResource> = (0..2)
            .map(|device| {
                cu::set_current_device(device).unwrap();
                device_pool(
                    ExpandablePoolOptions::default()
                        .range(VirtualRangeOptions::default().reserve(1 << 30)),
                )
            })
            .collect();
        let previous: Vec<AnyResource> = (0..2)
            .map(|device| {
                crate::registry::set_per_device_resource(
                    device,
                    AnyResource::new(pools[device as usize].clone()),
                )
                .unwrap()
            })
            .collect();
        let mut buffers = Vec::new();
        for device in [0, 1] {
            cu::set_current_device(device).unwrap();
            let buf = crate::DeviceBuffer::with_current_resource(3 << 20, Stream::DEFAULT).unwrap();
            assert_eq!(buf.device(), Some(device));
            let pool = &pools[device as usize];
            assert_eq!(
                pool.used_bytes(),
                3 << 20,
                "device {device}'s pool served it"
            );
            let offset = buf.as_ptr() as usize - pool.base() as usize;
            assert!(
                offset < pool.reserved_bytes(),
                "inside device {device}'s range"
            );
            buffers.push(buf);
        }
        cu::set_current_device(0).unwrap();
        drop(buffers);
        assert_eq!((pools[0].used_bytes(), pools[1].used_bytes()), (0, 0));
        for (device, old) in previous.into_iter().enumerate() {
            crate::registry::set_per_device_resource(device as i32, old).unwrap();
        }
    }
}

mod ipc;
