//! Stream-ordering behaviour of [`Core`], checked against the recording model (no CUDA).

use super::batches::MAX_OPEN;
use super::model::{fake_foreign_stream, fake_stream, naming, ModelUpstream, RecordingSyncer};
use super::*;
use crate::aligned::align_up;
use crate::error::Error;
use crate::mr::detail::free_list::BlockTag;
use crate::mr::SimulatedMemoryResource;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

struct Rig {
    core: Arc<Core>,
    syncer: RecordingSyncer,
    device: SimulatedMemoryResource,
}

fn rig(initial: usize, growth: Growth, cache: CacheLimits) -> Rig {
    rig_on(64 << 20, initial, growth, cache)
}

/// [`rig`] over a simulated device of `device_bytes`.
fn rig_on(device_bytes: usize, initial: usize, growth: Growth, cache: CacheLimits) -> Rig {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(device_bytes).unwrap();
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    ));
    let core = Core::new(
        "test_core",
        upstream,
        Arc::new(syncer.clone()),
        growth,
        cache,
        initial,
    )
    .unwrap();
    Rig {
        core,
        syncer,
        device,
    }
}

impl Rig {
    fn alloc(&self, stream: Stream, size: usize) -> usize {
        let addr = naming(stream, || self.core.allocate(stream, size, 256)).unwrap();
        let key = self.syncer.key(stream);
        self.syncer.model().allocated(key, addr, size).unwrap();
        addr
    }

    fn free(&self, stream: Stream, addr: usize, size: usize) {
        let key = self.syncer.key(stream);
        self.syncer.model().freed(key, addr, size);
        naming(stream, || self.core.deallocate(stream, addr, size, false)).unwrap();
    }

    /// A free checked against the live allocations by the caller (as the resources do with checked
    /// frees): it goes to the calling thread's front.
    fn free_checked(&self, stream: Stream, addr: usize, size: usize) {
        let key = self.syncer.key(stream);
        self.syncer.model().freed(key, addr, size);
        naming(stream, || self.core.deallocate(stream, addr, size, true)).unwrap();
    }

    /// Open batches in the shards and orphans.
    fn open_batches(&self) -> usize {
        self.core
            .shards
            .iter()
            .map(|s| lock(&s.0).open.len())
            .sum::<usize>()
            + lock(&self.core.orphans).len()
    }
}

const POOL: Growth = Growth::Pool { maximum: None };

#[test]
fn same_stream_reuse_needs_no_wait() {
    for cache in [CacheLimits::DEFAULT, CacheLimits::OFF] {
        let r = rig(4 * KIB, POOL, cache);
        let a = fake_stream(1);
        for _ in 0..10 {
            let p = r.alloc(a, KIB);
            let q = r.alloc(a, 3 * KIB);
            r.free(a, p, KIB);
            r.free(a, q, 3 * KIB);
        }
        assert_eq!(r.syncer.counts().stream_waits, 0);
        assert_eq!(
            r.syncer.counts().markers,
            0,
            "no event is recorded on a free"
        );
        assert_eq!(r.core.stats().pool_size, 4 * KIB, "no growth");
    }
}

#[test]
fn cross_stream_reuse_waits_once_then_the_rest_belongs_to_the_new_stream() {
    for cache in [CacheLimits::DEFAULT, CacheLimits::OFF] {
        let r = rig(4 * KIB, POOL, cache);
        let (a, b) = (fake_stream(1), fake_stream(2));
        let p = r.alloc(a, 4 * KIB);
        r.free(a, p, 4 * KIB);
        // The only memory was freed on A: B must wait for A, exactly once.
        let q = r.alloc(b, KIB);
        let (ka, kb) = (r.syncer.key(a), r.syncer.key(b));
        assert_eq!(r.syncer.model().waits, vec![(kb, ka)]);
        // The rest of the block is now B's: B takes it without waiting, A has to wait for B.
        let q2 = r.alloc(b, KIB);
        assert_eq!(r.syncer.counts().stream_waits, 1);
        let p2 = r.alloc(a, KIB);
        assert_eq!(r.syncer.model().waits, vec![(kb, ka), (ka, kb)]);
        r.free(b, q, KIB);
        r.free(b, q2, KIB);
        r.free(a, p2, KIB);
        assert_eq!(
            r.core.stats().pool_size,
            4 * KIB,
            "reuse across streams, no growth"
        );
    }
}

#[test]
fn coalesced_blocks_remember_every_stream() {
    let r = rig(2 * KIB, POOL, CacheLimits::OFF);
    let (a, b, c) = (fake_stream(1), fake_stream(2), fake_stream(3));
    let p = r.alloc(a, KIB);
    let q = r.alloc(b, KIB);
    r.free(a, p, KIB);
    r.free(b, q, KIB);
    let x = r.alloc(c, 2 * KIB);
    assert_eq!(
        r.syncer.counts().stream_waits,
        2,
        "C waits for both A and B"
    );
    r.free(c, x, 2 * KIB);
}

#[test]
fn a_block_without_waits_is_preferred() {
    let r = rig(8 * KIB, POOL, CacheLimits::OFF);
    let (a, b) = (fake_stream(1), fake_stream(2));
    let pa = r.alloc(a, KIB);
    let _gap = r.alloc(a, KIB);
    let pb = r.alloc(b, 2 * KIB);
    let _gap2 = r.alloc(a, KIB);
    r.free(a, pa, KIB);
    r.free(b, pb, 2 * KIB);
    // A 1 KiB request on B: A's 1 KiB block fits best, B's 2 KiB block needs no wait.
    let x = r.alloc(b, KIB);
    assert_eq!(x, pb);
    assert_eq!(r.syncer.counts().stream_waits, 0);
}

#[test]
fn a_block_of_the_own_stream_is_preferred_whatever_its_size_rank() {
    let r = rig(64 * KIB, POOL, CacheLimits::OFF);
    let (a, b) = (fake_stream(1), fake_stream(2));
    // 20 separate 1 KiB holes freed on A (more than the 16 best fits looked at before), then a
    // 4 KiB block freed on B: B's 1 KiB request takes its own block and waits for nobody.
    let holes: Vec<usize> = (0..20)
        .map(|_| (r.alloc(a, KIB), r.alloc(a, KIB)).0)
        .collect();
    let pb = r.alloc(b, 4 * KIB);
    let _fence = r.alloc(a, KIB);
    let _tail = r.alloc(a, 64 * KIB - 45 * KIB);
    for &h in &holes {
        r.free(a, h, KIB);
    }
    r.free(b, pb, 4 * KIB);
    assert_eq!(r.alloc(b, KIB), pb);
    assert_eq!(r.syncer.counts().stream_waits, 0);
    // A still gets its own holes (each a best fit).
    assert!(holes.contains(&r.alloc(a, KIB)));
    assert_eq!(r.syncer.counts().stream_waits, 0);
    r.core.check_invariants();
}

#[test]
fn when_no_block_is_free_of_waits_the_fewest_waits_win_then_the_best_fit() {
    let r = rig(16 * KIB, POOL, CacheLimits::OFF);
    let (a, b, c, d) = (
        fake_stream(1),
        fake_stream(2),
        fake_stream(3),
        fake_stream(4),
    );
    // A 2 KiB block pending on A and B (coalesced), a 3 KiB block pending on C alone.
    let pa = r.alloc(a, KIB);
    let pb = r.alloc(b, KIB);
    let _fence = r.alloc(d, KIB);
    let pc = r.alloc(c, 3 * KIB);
    let _rest = r.alloc(d, 10 * KIB);
    r.free(a, pa, KIB);
    r.free(b, pb, KIB);
    r.free(c, pc, 3 * KIB);
    // D has nothing of its own: one wait (on C) beats two (A and B) although 2 KiB fits better.
    assert_eq!(r.alloc(d, 2 * KIB), pc);
    let (kd, kc) = (r.syncer.key(d), r.syncer.key(c));
    assert_eq!(r.syncer.model().waits, vec![(kd, kc)]);
    // The rest of C's block is D's now: no wait for it.
    assert_eq!(r.alloc(d, KIB), pc + 2 * KIB);
    assert_eq!(r.syncer.counts().stream_waits, 1);
    // Nothing else left but the mixed block: D waits for both A and B, and no growth.
    assert_eq!(r.alloc(d, 2 * KIB), pa);
    assert_eq!(r.syncer.counts().stream_waits, 3);
    assert_eq!(r.core.stats().pool_size, 16 * KIB);
    r.core.check_invariants();
}

#[test]
fn the_default_handles_are_one_stream() {
    let r = rig(KIB, POOL, CacheLimits::OFF);
    let p = r.alloc(Stream::DEFAULT, KIB);
    r.free(Stream::DEFAULT, p, KIB);
    let q = r.alloc(Stream::LEGACY, KIB);
    assert_eq!(q, p);
    assert_eq!(
        r.syncer.counts().stream_waits,
        0,
        "0 and cudaStreamLegacy are the same stream"
    );
    r.free(Stream::LEGACY, q, KIB);
}

#[test]
fn per_thread_default_streams_are_per_thread() {
    let r = rig(KIB, POOL, CacheLimits::OFF);
    // Every free closes its batch here: a marker per free.
    r.core.set_close_frees(1);
    let p = r.alloc(Stream::PER_THREAD, KIB);
    r.free(Stream::PER_THREAD, p, KIB);
    assert_eq!(r.syncer.counts().markers, 1, "a PTDS free records a marker");
    // The same thread's PTDS reuses it freely.
    let p = r.alloc(Stream::PER_THREAD, KIB);
    assert_eq!(r.syncer.counts().marker_waits, 0);
    r.free(Stream::PER_THREAD, p, KIB);
    // Another thread's PTDS is another stream: it waits for the marker.
    std::thread::scope(|s| {
        s.spawn(|| {
            let q = r.alloc(Stream::PER_THREAD, KIB);
            assert_eq!(q, p);
            r.free(Stream::PER_THREAD, q, KIB);
        });
    });
    let c = r.syncer.counts();
    assert_eq!((c.marker_waits, c.stream_waits), (1, 0));
    let _ = r.alloc(fake_stream(1), KIB);
    assert_eq!(
        r.syncer.counts().marker_waits,
        2,
        "an ordinary stream waits for the other thread's marker"
    );
}

#[test]
fn a_retired_stream_is_never_recorded_on_again() {
    let r = rig(KIB, POOL, CacheLimits::DEFAULT);
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = r.alloc(a, KIB);
    r.free(a, p, KIB);
    r.core.retire(a);
    assert_eq!(
        r.syncer.counts().markers,
        1,
        "one marker replaces the stream in the tags"
    );
    let q = r.alloc(b, KIB);
    let c = r.syncer.counts();
    assert_eq!((c.stream_waits, c.marker_waits), (0, 1));
    r.free(b, q, KIB);
    r.core.retire(fake_stream(9));
    assert_eq!(
        r.syncer.counts().markers,
        1,
        "retiring an unknown stream records nothing"
    );
}

#[test]
fn release_unused_synchronizes_then_returns_whole_regions() {
    let r = rig(0, POOL, CacheLimits::DEFAULT);
    let a = fake_stream(1);
    let p = r.alloc(a, 4 * KIB);
    let q = r.alloc(a, 4 * KIB); // second region (the pool doubles)
    assert_eq!(r.core.stats().upstream_blocks, 2);
    r.free(a, p, 4 * KIB);
    // The model fails the release if A was not synchronized first.
    assert_eq!(r.core.release_unused().unwrap(), 4 * KIB);
    assert!(r.syncer.counts().syncs >= 1);
    let s = r.core.stats();
    assert_eq!(
        (s.pool_size, s.used, s.upstream_blocks),
        (4 * KIB, 4 * KIB, 1)
    );
    r.free(a, q, 4 * KIB);
    assert_eq!(r.core.release_unused().unwrap(), 4 * KIB);
    assert_eq!(r.device.usage().allocated_bytes, 0);
    assert_eq!(
        r.core.stats(),
        CoreStats {
            upstream_allocations: 2,
            upstream_releases: 2,
            ..Default::default()
        }
    );
}

#[test]
fn idle_streams_are_dropped_from_tags_on_release() {
    let syncer = RecordingSyncer::new(100, 7);
    let device = SimulatedMemoryResource::new(1 << 20).unwrap();
    let core = Core::new(
        "t",
        AnyResource::new(device),
        Arc::new(syncer.clone()),
        POOL,
        CacheLimits::OFF,
        2 * KIB,
    )
    .unwrap();
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = core.allocate(a, KIB, 256).unwrap();
    let _keep = core.allocate(a, KIB, 256).unwrap();
    core.deallocate(a, p, KIB, false).unwrap();
    core.release_unused().unwrap();
    assert_eq!(syncer.counts().idle_queries, 1);
    let _ = core.allocate(b, KIB, 256).unwrap();
    assert_eq!(
        syncer.counts().stream_waits,
        0,
        "A was idle: B needs no wait"
    );
}

#[test]
fn growth_follows_rmm_and_halves_on_upstream_exhaustion() {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(10 * KIB).unwrap();
    let core = Core::new(
        "t",
        AnyResource::new(device.clone()),
        Arc::new(syncer),
        POOL,
        CacheLimits::OFF,
        0,
    )
    .unwrap();
    let s = fake_stream(1);
    let _a = core.allocate(s, KIB, 256).unwrap();
    assert_eq!(core.pool_size(), KIB, "from empty: the request");
    let _b = core.allocate(s, KIB, 256).unwrap();
    assert_eq!(core.pool_size(), 2 * KIB, "then by the pool's size");
    let _c = core.allocate(s, 3 * KIB, 256).unwrap();
    assert_eq!(core.pool_size(), 5 * KIB, "or the request when larger");
    // 5 KiB more would double the pool, but only 5 KiB is left: 5 KiB fits.
    let _d = core.allocate(s, 3 * KIB, 256).unwrap();
    assert_eq!(core.pool_size(), 10 * KIB);
    // 2 KiB of that region is left and the device is full.
    let err = core.allocate(s, 3 * KIB, 256).unwrap_err();
    assert!(err.is_out_of_memory());
    assert!(
        err.to_string().contains("Maximum pool size exceeded"),
        "{err}"
    );
    assert!(core.allocate(s, 2 * KIB, 256).is_ok());
    assert_eq!(device.usage().allocated_bytes, 10 * KIB);
}

#[test]
fn a_maximum_grows_by_half_the_remainder() {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(1 << 20).unwrap();
    let growth = Growth::Pool {
        maximum: Some(64 * KIB),
    };
    let core = Core::new(
        "t",
        AnyResource::new(device),
        Arc::new(syncer),
        growth,
        CacheLimits::OFF,
        0,
    )
    .unwrap();
    let s = fake_stream(1);
    let _a = core.allocate(s, KIB, 256).unwrap();
    assert_eq!(core.pool_size(), 32 * KIB);
    let _b = core.allocate(s, 32 * KIB, 256).unwrap();
    assert_eq!(
        core.pool_size(),
        64 * KIB,
        "the request is more than half the remainder"
    );
    let err = core.allocate(s, 31 * KIB + 512, 256).unwrap_err();
    assert!(
        err.to_string().contains("Maximum pool size exceeded"),
        "{err}"
    );
    assert!(
        core.allocate(s, 31 * KIB, 256).is_ok(),
        "still usable after the failure"
    );
}

#[test]
fn out_of_memory_gives_back_free_regions_and_retries() {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(8 * KIB).unwrap();
    let core = Core::new(
        "t",
        AnyResource::new(device.clone()),
        Arc::new(syncer),
        POOL,
        CacheLimits::DEFAULT,
        0,
    )
    .unwrap();
    let s = fake_stream(1);
    let a = core.allocate(s, 2 * KIB, 256).unwrap();
    let b = core.allocate(s, 2 * KIB, 256).unwrap();
    core.deallocate(s, a, 2 * KIB, false).unwrap();
    core.deallocate(s, b, 2 * KIB, false).unwrap();
    // Two free 2 KiB regions cannot hold 6 KiB, and the device has only 4 KiB left.
    let big = core.allocate(s, 6 * KIB, 256).unwrap();
    assert_eq!(core.pool_size(), 6 * KIB);
    assert_eq!(core.stats().upstream_releases, 2);
    core.deallocate(s, big, 6 * KIB, false).unwrap();
}

#[test]
fn fixed_chunks_are_carved_in_whole_blocks() {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(10 * KIB).unwrap();
    let growth = Growth::Chunks {
        chunk: 8 * KIB,
        unit: KIB,
    };
    let core = Core::new(
        "t",
        AnyResource::new(device.clone()),
        Arc::new(syncer),
        growth,
        CacheLimits::OFF,
        0,
    )
    .unwrap();
    let s = fake_stream(1);
    let blocks: Vec<usize> = (0..10)
        .map(|_| core.allocate(s, KIB, 256).unwrap())
        .collect();
    assert_eq!(
        core.pool_size(),
        10 * KIB,
        "8 KiB, then halved to the 2 KiB that was left"
    );
    assert!(core.allocate(s, KIB, 256).unwrap_err().is_out_of_memory());
    for b in blocks {
        core.deallocate(s, b, KIB, false).unwrap();
    }
}

/// A fixed-size core's list holds whole blocks only: a free that is not one (inside a block, or
/// of another size) or a second free of a block is refused on both the shard and the shared path,
/// and a wholly free chunk still goes back upstream.
#[test]
fn fixed_lists_refuse_what_is_not_a_free_block() {
    for cache in [CacheLimits::OFF, CacheLimits::DEFAULT] {
        let syncer = RecordingSyncer::new(0, 1);
        let device = SimulatedMemoryResource::new(64 * KIB).unwrap();
        let growth = Growth::Chunks {
            chunk: 4 * KIB,
            unit: KIB,
        };
        let core = Core::new(
            "t",
            AnyResource::new(device.clone()),
            Arc::new(syncer),
            growth,
            cache,
            4 * KIB,
        )
        .unwrap();
        let s = fake_stream(1);
        let a = core.allocate(s, KIB, 256).unwrap();
        let b = core.allocate(s, KIB, 256).unwrap();
        assert!(
            matches!(
                core.deallocate(s, a + 256, KIB, false),
                Err(Error::InvalidArgument(_))
            ),
            "inside a block"
        );
        assert!(
            matches!(
                core.deallocate(s, a, 2 * KIB, false),
                Err(Error::InvalidArgument(_))
            ),
            "two blocks at once"
        );
        assert!(
            matches!(core.allocate(s, 512, 256), Err(Error::InvalidArgument(_))),
            "not the block size"
        );
        core.deallocate(s, a, KIB, false).unwrap();
        assert!(core.deallocate(s, a, KIB, false).is_err(), "double free");
        core.deallocate(s, b, KIB, false).unwrap();
        core.check_invariants();
        assert_eq!(
            core.release_unused().unwrap(),
            4 * KIB,
            "the chunk is wholly free again"
        );
        assert_eq!(device.usage().allocated_bytes, 0);
    }
}

#[test]
fn bad_frees_are_errors() {
    let r = rig(4 * KIB, POOL, CacheLimits::OFF);
    let s = fake_stream(1);
    let p = r.core.allocate(s, KIB, 256).unwrap();
    r.core.deallocate(s, p, KIB, false).unwrap();
    assert!(
        matches!(
            r.core.deallocate(s, p, KIB, false),
            Err(Error::InvalidArgument(_))
        ),
        "double free"
    );
    assert!(
        matches!(
            r.core.deallocate(s, 0x100, KIB, false),
            Err(Error::InvalidArgument(_))
        ),
        "foreign pointer"
    );
    let cached = rig(4 * KIB, POOL, CacheLimits::DEFAULT);
    let p = cached.core.allocate(s, KIB, 256).unwrap();
    cached.core.deallocate(s, p, KIB, false).unwrap();
    assert!(
        cached.core.deallocate(s, p, KIB, false).is_err(),
        "double free into the cache"
    );
}

#[test]
fn drop_synchronizes_and_returns_everything() {
    let r = rig(4 * KIB, POOL, CacheLimits::DEFAULT);
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = r.alloc(a, 2 * KIB);
    let q = r.alloc(b, 8 * KIB);
    r.free(a, p, 2 * KIB);
    r.free(b, q, 8 * KIB);
    let Rig {
        core,
        syncer,
        device,
    } = r;
    drop(core);
    assert_eq!(device.usage().allocated_bytes, 0);
    assert!(
        syncer.counts().syncs >= 2,
        "A and B were synchronized before release"
    );
}

#[test]
fn caches_are_reclaimed_before_growing() {
    let r = rig(4 * KIB, POOL, CacheLimits::DEFAULT);
    let s = fake_stream(1);
    let blocks: Vec<usize> = (0..4).map(|_| r.alloc(s, KIB)).collect();
    for b in blocks {
        r.free(s, b, KIB);
    }
    assert_eq!(r.core.stats().cached_blocks, 4);
    // The four cached blocks coalesce into the 4 KiB this needs: no growth.
    let big = r.alloc(s, 4 * KIB);
    assert_eq!(r.core.stats().pool_size, 4 * KIB);
    r.free(s, big, 4 * KIB);
    r.core.check_invariants();
}

#[test]
fn a_shard_miss_refills_and_the_next_requests_stay_in_the_shard() {
    // 4 MiB: a budget of at least 32 KiB per shard with up to 64 shards.
    let r = rig(4 << 20, POOL, CacheLimits::TIGHT);
    let s = fake_stream(1);
    let p = r.alloc(s, KIB);
    // 32 KiB taken at once: the request, and 31 KiB for this thread's shard.
    let st = r.core.stats();
    assert_eq!((st.used, st.cached_bytes), (KIB, 31 * KIB));
    // Mixed sizes are cut from the shard's list; the shared list is not touched.
    let q = r.alloc(s, 3 * KIB);
    let t = r.alloc(s, 5 * KIB);
    let st = r.core.stats();
    assert_eq!(
        (st.used, st.cached_bytes, st.free - st.cached_bytes),
        (9 * KIB, 23 * KIB, (4 << 20) - 32 * KIB)
    );
    r.free(s, t, 5 * KIB);
    r.free(s, q, 3 * KIB);
    r.free(s, p, KIB);
    // The frees wait in the LIFO (the list holds only what the refill left).
    let st = r.core.stats();
    assert_eq!((st.cached_bytes, st.cached_blocks), (32 * KIB, 4));
    // The latest free of a size is reused first.
    assert_eq!(r.alloc(s, KIB), p);
    let q2 = r.alloc(s, 3 * KIB);
    assert_eq!(q2, q);
    r.free(s, q2, 3 * KIB);
    r.free(s, p, KIB);
    assert_eq!(r.syncer.counts().stream_waits, 0);
    r.core.check_invariants();
}

#[test]
fn a_shard_over_budget_gives_half_back_in_one_batch() {
    let r = rig(0, POOL, CacheLimits::TIGHT);
    let s = fake_stream(1);
    // A pool of about 1 MiB: a budget of 16 to 64 KiB per shard, depending on the shard count.
    let blocks: Vec<usize> = (0..64).map(|_| r.alloc(s, 16 * KIB)).collect();
    let budget = r.core.shard_budget.load(Ordering::Relaxed);
    assert!((16 * KIB..=64 * KIB).contains(&budget), "{budget}");
    for b in blocks {
        r.free(s, b, 16 * KIB);
        let st = r.core.stats();
        assert!(
            st.cached_bytes <= budget,
            "{} bytes cached",
            st.cached_bytes
        );
        r.core.check_invariants();
    }
    // Nothing was lost on the way: it all coalesced back into whole regions.
    let size = r.core.pool_size();
    assert_eq!(r.core.release_unused().unwrap(), size);
    assert_eq!(r.device.usage().allocated_bytes, 0);
}

#[test]
fn the_shard_budget_follows_the_pool_size() {
    let shards = 8;
    let tight = CacheLimits::TIGHT;
    assert_eq!(tight.budget(0, shards), tight.min_bytes);
    assert_eq!(tight.budget(1 << 20, shards), 64 * KIB);
    assert_eq!(tight.budget(1 << 30, shards), tight.max_bytes);
    assert_eq!(CacheLimits::DEFAULT.budget(1 << 30, 8), 64 << 20);
    assert_eq!(CacheLimits::DEFAULT.budget(64 << 20, 8), 8 << 20);
}

#[test]
fn frees_after_the_regions_changed_find_their_new_region() {
    let r = rig(0, POOL, CacheLimits::TIGHT);
    let s = fake_stream(1);
    for round in 0..4 {
        // Each round releases every region and grows new ones, maybe at the same addresses: the
        // shard's copy of the regions must be refreshed, never used stale.
        let blocks: Vec<(usize, usize)> = (1..8).map(|i| (r.alloc(s, i * KIB), i * KIB)).collect();
        for (b, n) in blocks {
            r.free(s, b, n);
        }
        r.core.check_invariants();
        let size = r.core.pool_size();
        assert_eq!(r.core.release_unused().unwrap(), size, "round {round}");
        assert_eq!(
            r.core.stats().cached_bytes,
            0,
            "release_unused flushes the shards"
        );
    }
    assert!(
        matches!(
            r.core.deallocate(s, 0x100, KIB, false),
            Err(Error::InvalidArgument(_))
        ),
        "foreign pointer"
    );
}

#[test]
fn stream_keys_keep_what_tells_streams_apart() {
    use crate::cuda::Stream;
    let legacy = |d| {
        StreamKey::of(
            Stream::DEFAULT,
            || d,
            || unreachable!("no id for a special handle"),
        )
    };
    let ptds = |d| StreamKey::of(Stream::PER_THREAD, || d, || unreachable!());
    let ordinary =
        |i, id, tracked| StreamKey::of(fake_stream(i), || unreachable!(), || (id, tracked));
    for d in [0, 1, 7, 31_000, super::key::UNKNOWN_DEVICE] {
        assert_eq!(
            (legacy(d).device(), legacy(d).id(), legacy(d).thread()),
            (Some(d), 0, 0)
        );
        assert!(legacy(d).tracked() && legacy(d).is_unique() && !legacy(d).needs_marker());
        assert_eq!(ptds(d).device(), Some(d));
        assert_eq!(ptds(d).thread(), super::key::thread_number());
        assert!(ptds(d).needs_marker());
    }
    assert_eq!(
        legacy(0),
        StreamKey::of(Stream::LEGACY, || 0, || unreachable!()),
        "0 is the legacy stream"
    );
    assert_ne!(legacy(0), legacy(1));
    assert_ne!(legacy(0), ptds(0));
    let other_thread = std::thread::spawn(move || ptds(0)).join().unwrap();
    assert_ne!(
        other_thread,
        ptds(0),
        "each thread's PTDS is its own stream"
    );
    assert_eq!(other_thread.device(), Some(0));
    let big_id = (1 << 62) + 5;
    for (id, tracked) in [(0, false), (1, true), (42, false), (big_id, true)] {
        let k = ordinary(3, id, tracked);
        assert_eq!(
            (k.device(), k.id(), k.tracked(), k.thread()),
            (None, id, tracked, 0)
        );
        assert_eq!(k.is_unique(), id != 0);
        assert_eq!(k.needs_marker(), !tracked);
        assert_eq!(k.stream().as_raw(), fake_stream(3).as_raw());
    }
    assert_ne!(
        ordinary(3, 42, true),
        ordinary(3, 43, true),
        "a reused handle, another stream"
    );
    assert_ne!(ordinary(3, 42, true), ordinary(3, 42, false));
    assert_ne!(ordinary(3, 42, true), ordinary(4, 42, true));
}

#[test]
fn pending_tags_merge_and_subsume() {
    let k = |i| StreamKey::of(fake_stream(i), || 0, || (0, true));
    let mut t = Pending::one(PendingOn::Stream(k(1)));
    t.merge(&Pending::one(PendingOn::Stream(k(1))));
    assert_eq!(t.entries().len(), 1);
    t.merge(&Pending::one(PendingOn::Stream(k(2))));
    assert_eq!(t.entries().len(), 2);
    assert!(!t.only(k(1)) && t.foreign(k(1)) == 1);
    let m1 = Marker::new(k(3), MarkerToken::Id(1));
    let m2 = Marker::new(k(3), MarkerToken::Id(2));
    t.merge(&Pending::one(PendingOn::Marker(m1)));
    t.merge(&Pending::one(PendingOn::Marker(m2.clone())));
    assert_eq!(
        t.entries().len(),
        3,
        "the later marker of a stream replaces the earlier"
    );
    assert!(matches!(&t.entries()[2], PendingOn::Marker(m) if Arc::ptr_eq(m, &m2)));
    t.merge(&Pending::one(PendingOn::Stream(k(3))));
    assert_eq!(t.entries().len(), 3, "the live stream subsumes its markers");
    assert!(t
        .entries()
        .iter()
        .all(|e| matches!(e, PendingOn::Stream(_))));
    assert!(Pending::default().only(k(1)));

    // Open batches: only themselves cover themselves, and nobody else can be ordered after them.
    let f = StreamKey::of(fake_foreign_stream(1), || 0, || (0, false));
    let (open1, open2) = (Marker::open(f), Marker::open(f));
    let mut u = Pending::one(PendingOn::Marker(open1.clone()));
    u.merge(&Pending::one(PendingOn::Marker(open1.clone())));
    assert_eq!(u.entries().len(), 1, "the same batch once");
    u.merge(&Pending::one(PendingOn::Marker(open2.clone())));
    u.merge(&Pending::one(PendingOn::Marker(Marker::new(
        f,
        MarkerToken::Id(9),
    ))));
    assert_eq!(
        u.entries().len(),
        3,
        "a closed marker covers no open batch, an open batch no other"
    );
    assert!(
        u.orderable(f) && u.only(f),
        "its own stream needs no ordering"
    );
    assert!(!u.orderable(k(1)) && u.has_open());
    open1.close(MarkerToken::Id(10));
    open2.close(MarkerToken::Id(11));
    assert!(
        u.orderable(k(1)) && !u.has_open(),
        "closed batches are ordinary markers"
    );
    let mut w = Pending::default();
    w.merge(&u);
    assert_eq!(
        w.entries().len(),
        1,
        "of closed markers of one stream, the last closed is kept"
    );
    assert!(matches!(&w.entries()[0], PendingOn::Marker(m) if Arc::ptr_eq(m, &open2)));
}

/// The streams that only their own calls may name: a stream made elsewhere and this thread's PTDS.
fn unnamed_streams() -> [Stream; 2] {
    [fake_foreign_stream(7), Stream::PER_THREAD]
}

#[test]
fn frees_on_streams_nobody_may_name_later_record_one_marker_per_batch() {
    for cache in CacheLimits::ALL {
        for stream in unnamed_streams() {
            let r = rig(1 << 20, POOL, cache);
            r.core.set_close_frees(8);
            for _ in 0..100 {
                let p = r.alloc(stream, 256);
                r.free(stream, p, 256);
            }
            let c = r.syncer.counts();
            assert_eq!(
                c.markers,
                100 / 8,
                "{stream:?}, {cache:?}: one event per 8 frees"
            );
            assert_eq!(
                c.stream_waits + c.marker_waits + c.device_syncs,
                0,
                "{stream:?}: reuse on the same stream waits for nothing"
            );
            r.core.check_invariants();
        }
    }
}

#[test]
fn an_open_batch_goes_to_its_own_stream_only_then_one_device_sync_covers_it() {
    for cache in CacheLimits::ALL {
        for stream in unnamed_streams() {
            let r = rig(
                64 * KIB,
                Growth::Pool {
                    maximum: Some(64 * KIB),
                },
                cache,
            );
            // With the tight limits the free overflows the shard and spills to the shared list,
            // closing its batch on the way (the call names the stream): then another stream waits
            // on that event instead of a device-wide synchronization.
            let spills = cache == CacheLimits::TIGHT;
            let p = r.alloc(stream, 64 * KIB);
            r.free(stream, p, 64 * KIB);
            assert_eq!(
                r.syncer.counts().markers,
                u64::from(spills),
                "the batch is open unless it spilled"
            );
            // Its own stream takes it back without any wait.
            let p = r.alloc(stream, 64 * KIB);
            r.free(stream, p, 64 * KIB);
            assert_eq!(r.syncer.counts().device_syncs, 0);
            assert_eq!(r.syncer.counts().marker_waits, 0);
            // Another stream cannot be ordered after an open batch: the pool cannot grow, so one
            // device-wide synchronization covers the batch (the model checks the hand-out).
            let ours = fake_stream(1);
            let q = r.alloc(ours, 64 * KIB);
            assert_eq!(q, p);
            let c = r.syncer.counts();
            let expected = if spills { (0, 2, 1) } else { (1, 0, 0) };
            assert_eq!(
                (c.device_syncs, c.markers, c.marker_waits),
                expected,
                "{stream:?}, {cache:?}"
            );
            assert_eq!(
                r.open_batches(),
                0,
                "every open batch was covered and closed"
            );
            r.free(ours, q, 64 * KIB);
            r.core.check_invariants();
        }
    }
}

#[test]
fn a_closed_batch_is_waited_on_by_another_stream() {
    for stream in unnamed_streams() {
        let r = rig(
            64 * KIB,
            Growth::Pool {
                maximum: Some(64 * KIB),
            },
            CacheLimits::DEFAULT,
        );
        r.core.set_close_frees(2);
        let a = r.alloc(stream, 32 * KIB);
        let b = r.alloc(stream, 32 * KIB);
        r.free(stream, a, 32 * KIB);
        r.free(stream, b, 32 * KIB);
        assert_eq!(
            r.syncer.counts().markers,
            1,
            "the second free closed the batch of both"
        );
        let ours = fake_stream(2);
        let q = r.alloc(ours, 64 * KIB);
        let c = r.syncer.counts();
        assert_eq!(
            (c.marker_waits, c.device_syncs),
            (1, 0),
            "{stream:?}: one wait on the closing event"
        );
        r.free(ours, q, 64 * KIB);
    }
}

#[test]
fn no_event_is_recorded_into_a_graph_capture() {
    let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
    r.core.set_close_frees(2);
    let f = fake_foreign_stream(3);
    let key = r.syncer.key(f);
    r.syncer.model().capturing.push(key);
    for _ in 0..10 {
        let p = r.alloc(f, 4 * KIB);
        r.free(f, p, 4 * KIB);
    }
    // The recording syncer fails any record on a capturing stream; the batch stayed open.
    assert_eq!(r.syncer.counts().markers, 0);
    r.syncer.model().capturing.clear();
    for _ in 0..2 {
        let p = r.alloc(f, 4 * KIB);
        r.free(f, p, 4 * KIB);
    }
    assert_eq!(
        r.syncer.counts().markers,
        1,
        "closed once the capture ended"
    );
    assert_eq!(r.open_batches(), 0);
}

#[test]
fn batches_of_streams_gone_quiet_become_orphans_and_are_covered_together() {
    let r = rig(
        64 * KIB,
        Growth::Pool {
            maximum: Some(64 * KIB),
        },
        CacheLimits::DEFAULT,
    );
    // More streams made elsewhere than a shard keeps batches of, each freeing one block and then
    // never seen again (destroyed).
    let n = MAX_OPEN + 3;
    let size = 64 * KIB / n / 256 * 256;
    let blocks: Vec<(Stream, usize)> = (0..n)
        .map(|i| {
            (
                fake_foreign_stream(20 + i),
                r.alloc(fake_foreign_stream(20 + i), size),
            )
        })
        .collect();
    for &(s, p) in &blocks {
        r.free(s, p, size);
    }
    assert_eq!(
        lock(&r.core.orphans).len(),
        n - MAX_OPEN,
        "the oldest batches became orphans"
    );
    let ours = fake_stream(4);
    let q = r.alloc(ours, 64 * KIB);
    assert_eq!(
        r.syncer.counts().device_syncs,
        1,
        "one synchronization for all of them"
    );
    assert_eq!(r.open_batches(), 0);
    r.free(ours, q, 64 * KIB);
    r.core.check_invariants();
}

#[test]
fn trimming_and_dropping_cover_open_batches() {
    for stream in unnamed_streams() {
        let r = rig(0, POOL, CacheLimits::DEFAULT);
        let p = r.alloc(stream, 256 * KIB);
        r.free(stream, p, 256 * KIB);
        // The model's upstream fails a release while the batch's work may still run.
        assert_eq!(r.core.release_unused().unwrap(), 256 * KIB);
        assert!(r.syncer.counts().device_syncs >= 1);
        let p = r.alloc(stream, 256 * KIB);
        r.free(stream, p, 256 * KIB);
        let syncs = r.syncer.counts().device_syncs;
        let Rig {
            core,
            syncer,
            device,
        } = r;
        drop(core);
        assert_eq!(
            syncer.counts().device_syncs,
            syncs + 1,
            "drop synchronized the device once"
        );
        assert_eq!(device.usage().allocated_bytes, 0);
    }
}

#[test]
fn a_stream_made_elsewhere_is_captured_at_the_free_and_never_named_again() {
    // The recording syncer fails any wait, query or synchronization naming the foreign stream
    // after its own call: CuPy or the CUDA runtime may destroy it at any time, and the driver does
    // not guard against dead handles.
    for cache in [CacheLimits::DEFAULT, CacheLimits::OFF] {
        let r = rig(4 * KIB, POOL, cache);
        // Every free closes its batch here (one event per free: the old scheme).
        r.core.set_close_frees(1);
        let (foreign, ours) = (fake_foreign_stream(1), fake_stream(1));
        let p = r.alloc(foreign, KIB);
        r.free(foreign, p, KIB);
        assert_eq!(
            r.syncer.counts().markers,
            1,
            "the free recorded a marker on the foreign stream"
        );
        let q = r.alloc(foreign, KIB);
        assert_eq!(
            r.syncer.counts().marker_waits,
            0,
            "its own marker: no wait to reuse on the same stream"
        );
        r.free(foreign, q, KIB);
        let q = r.alloc(ours, 4 * KIB);
        assert!(
            r.syncer.counts().marker_waits >= 1,
            "another stream waits on the marker, not on the stream"
        );
        r.free(ours, q, 4 * KIB);
        r.core.check_invariants();
        assert_eq!(r.core.release_unused().unwrap(), 4 * KIB);
    }
}

/// RMM's RANDOM_ALLOCATIONS workload (as in `benches/allocations.rs`: 73% allocate a size uniform in
/// [1 B, 1 MiB] under the per-thread usage cap, else free a random live allocation), `threads`
/// threads each on its own fake stream, over a pool that starts large enough never to grow (as the
/// GPU benchmark's pool of half the device). The model checks every hand-out; returns the
/// operations run and what the syncer was asked to do. Cross-stream waits are the GPU cost this
/// proxies: each is an event recorded on another stream and a `cuStreamWaitEvent`.
fn random_churn(
    threads: usize,
    allocations: usize,
    cache: CacheLimits,
    verified: bool,
) -> (u64, super::model::Counts, u64) {
    const MAX_SIZE: u64 = 1 << 20;
    const MAX_USAGE: usize = 16_000 << 20;
    let r = rig_on(64 << 30, 32 << 30, POOL, cache);
    let (core, syncer) = (&r.core, &r.syncer);
    let cap = MAX_USAGE / threads;
    let ops = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let ops = &ops;
            scope.spawn(move || {
                let stream = fake_stream(200 + t);
                let key = syncer.key(stream);
                let mut gen = crate::testing::SplitMix64(1234 + t as u64);
                let mut live: Vec<(usize, usize)> = Vec::new();
                let (mut usage, mut made, mut n) = (0usize, 0usize, 0u64);
                let free = |(addr, len): (usize, usize)| {
                    syncer.model().freed(key, addr, len);
                    core.deallocate(stream, addr, len, verified).unwrap();
                };
                for _ in 0..2 * allocations {
                    let size =
                        align_up(1 + (gen.next_u64() % MAX_SIZE) as usize, DEFAULT_ALIGNMENT)
                            .unwrap();
                    let heads = gen.unit() < 0.73;
                    if made < allocations && usage + size <= cap && (live.is_empty() || heads) {
                        let addr = core.allocate(stream, size, DEFAULT_ALIGNMENT).unwrap();
                        syncer.model().allocated(key, addr, size).unwrap();
                        live.push((addr, size));
                        usage += size;
                        made += 1;
                    } else if !live.is_empty() {
                        let b = live.swap_remove((gen.next_u64() % live.len() as u64) as usize);
                        usage -= b.1;
                        free(b);
                    }
                    n += 1;
                }
                n += live.len() as u64;
                live.drain(..).for_each(free);
                ops.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    core.check_invariants();
    assert_eq!(core.stats().used, 0);
    (ops.into_inner(), syncer.counts(), core.shared_locks())
}

#[test]
fn random_churn_on_own_streams_rarely_crosses_streams() {
    for (cache, verified) in [
        (CacheLimits::DEFAULT, false),
        (CacheLimits::DEFAULT, true),
        (CacheLimits::OFF, false),
    ] {
        for threads in [1, 4, 16] {
            let (ops, c, locks) = random_churn(threads, 10_000, cache, verified);
            let per_k = |n: u64| n as f64 * 1000.0 / ops as f64;
            eprintln!(
                "random churn, {threads} threads, shards {}: {ops} ops, per 1000: {:.2} stream waits, {:.2} marker waits, {:.2} markers, {:.0} shared-lock takes",
                cache.enabled(),
                per_k(c.stream_waits),
                per_k(c.marker_waits),
                per_k(c.markers),
                per_k(locks)
            );
            // Before blocks needing no wait were preferred over better fits: 42 and 223 waits per
            // 1000 operations at 4 and 16 threads with shards, 59 and 158 without; now 0 with
            // shards and about 20 without. The threads interleave differently from run to run: with
            // 16 threads sharing this 2-core machine's shards, 9 to 14 under parallel test load,
            // hence the slack (still a quarter of the old 223).
            // Without shards (not the default) frees coalesce straight into neighbours of other
            // streams, and how often depends on how many threads truly run at once: 16 and 5 waits
            // per 1000 at 16 and 4 threads on 2 cores, 91 and 162 on the 16-core GPU machine. Only
            // reported, not bounded.
            let bound = match (cache.enabled(), threads) {
                (true, 16) => 60.0,
                (true, _) => 10.0,
                (false, _) => f64::INFINITY,
            };
            assert!(
                per_k(c.stream_waits) <= bound,
                "{threads} threads, shards {}: {:.1} waits per 1000",
                cache.enabled(),
                per_k(c.stream_waits)
            );
            assert_eq!(
                c.markers + c.marker_waits,
                0,
                "tracked streams record no marker"
            );
        }
    }
}

#[test]
fn memory_freed_on_streams_that_are_gone_is_reused_not_stranded() {
    // Each round a new stream made elsewhere (a new handle: the old one was destroyed) frees what
    // it used into a batch that no event closes; the next round's stream cannot be ordered after
    // it, and rather than growing, one device-wide synchronization makes all of it reusable.
    for cache in CacheLimits::ALL {
        let r = rig(MIB, POOL, cache);
        r.core.set_close_frees(1000);
        for round in 0..20 {
            let s = fake_foreign_stream(100 + round);
            let blocks: Vec<usize> = (0..4).map(|_| r.alloc(s, 256 * KIB)).collect();
            blocks.into_iter().for_each(|p| r.free(s, p, 256 * KIB));
        }
        assert_eq!(r.core.pool_size(), MIB, "{cache:?}: the pool never grew");
        let c = r.syncer.counts();
        assert_eq!(
            c.device_syncs, 19,
            "{cache:?}: one synchronization per new stream"
        );
        assert_eq!(c.markers, 0);
        r.core.check_invariants();
    }
}

/// The driver calls (as the recording syncer counts them) of the 256-byte pair after warm-up, per
/// kind of stream: none on our own streams and the legacy default stream; on a PTDS, one event
/// and one capture query per batch; on a stream made elsewhere, one id per call (the stream may
/// have been destroyed and its handle reused since the last call) and the batch's event.
#[test]
fn driver_calls_of_the_pair_per_kind_of_stream() {
    const PAIRS: u64 = 1024;
    const CLOSE: u32 = 256;
    /// (kind, stream, driver calls expected for a number of pairs)
    type Kind = (&'static str, Stream, fn(u64) -> u64);
    let kinds: [Kind; 4] = [
        ("own", fake_stream(1), |_| 0),
        ("legacy", Stream::DEFAULT, |_| 0),
        ("ptds", Stream::PER_THREAD, |pairs| {
            2 * pairs / u64::from(CLOSE)
        }),
        ("foreign", fake_foreign_stream(1), |pairs| {
            2 * pairs + 2 * pairs / u64::from(CLOSE)
        }),
    ];
    for (name, stream, expected) in kinds {
        let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
        r.core.set_close_frees(CLOSE);
        let pair = || {
            let p = r.alloc(stream, 256);
            r.free(stream, p, 256);
        };
        // Warm-up: the first allocation fills the shard from the shared list.
        (0..CLOSE).for_each(|_| pair());
        let before = r.syncer.counts();
        (0..PAIRS).for_each(|_| pair());
        let after = r.syncer.counts();
        let calls = after.driver_calls() - before.driver_calls();
        assert_eq!(calls, expected(PAIRS), "{name}: {before:?} then {after:?}");
        assert_eq!(
            after.stream_waits + after.marker_waits + after.syncs + after.device_syncs,
            0,
            "{name}: no wait"
        );
        assert_eq!(
            r.core.shared_locks(),
            1,
            "{name}: only the first allocation took the shared lock"
        );
    }
}

/// RMM's multi-stream shape on streams that only their own calls may name: allocations on A, frees
/// on B. A takes blocks of B's closed batches, each batch's event waited for once per stream (not
/// once per allocation), and the model checks every hand-out.
#[test]
fn a_stream_waits_once_per_batch_of_another_stream() {
    let waiters = [
        fake_stream(1),
        fake_foreign_stream(1),
        Stream::PER_THREAD,
        Stream::DEFAULT,
    ];
    for a in waiters {
        for b in [fake_foreign_stream(2), Stream::PER_THREAD] {
            if a == b {
                continue;
            }
            let r = rig(
                64 * KIB,
                Growth::Pool {
                    maximum: Some(64 * KIB),
                },
                CacheLimits::TIGHT,
            );
            r.core.set_close_frees(16);
            for _ in 0..2000 {
                let p = r.alloc(a, KIB);
                r.free(b, p, KIB);
            }
            let c = r.syncer.counts();
            assert!(
                c.marker_waits <= c.markers,
                "{a:?} → {b:?}: {c:?}: at most one wait per batch"
            );
            assert!(
                c.markers + c.device_syncs >= 2000 / 16 / 2,
                "{a:?} → {b:?}: {c:?}: batches were closed"
            );
            r.core.check_invariants();
        }
    }
}

/// A wait made while the waiting stream is captured into a graph orders the graph, not the
/// stream: after the capture the stream waits again.
#[test]
fn a_wait_inside_a_capture_is_not_remembered() {
    let r = rig(
        64 * KIB,
        Growth::Pool {
            maximum: Some(64 * KIB),
        },
        CacheLimits::OFF,
    );
    r.core.set_close_frees(2);
    // A stream made elsewhere: the rest of a block it takes keeps the block's tag (see `take`),
    // so each of its allocations below meets the same marker.
    let (a, b) = (fake_foreign_stream(1), fake_foreign_stream(2));
    let x = r.alloc(b, 32 * KIB);
    let y = r.alloc(b, 32 * KIB);
    r.free(b, x, 32 * KIB);
    r.free(b, y, 32 * KIB);
    assert_eq!(r.syncer.counts().markers, 1, "the batch is closed");
    let ka = r.syncer.key(a);
    r.syncer.model().capturing.push(ka);
    let p = r.alloc(a, KIB);
    assert_eq!(r.syncer.counts().marker_waits, 1);
    r.syncer.model().capturing.clear();
    let q = r.alloc(a, KIB);
    assert_eq!(
        r.syncer.counts().marker_waits,
        2,
        "the capture's wait did not order the stream"
    );
    let s = r.alloc(a, KIB);
    assert_eq!(
        r.syncer.counts().marker_waits,
        2,
        "the stream's own wait is remembered"
    );
    for z in [p, q, s] {
        r.free(a, z, KIB);
    }
}

/// Allocations on one stream made elsewhere, frees on another: the frees spill to the shared list
/// in B's open batches and coalesce into one block, whose tag then held every batch of B (each
/// open when it joined) and grew by one entry per batch without end. Batches closed since are
/// covered by B's latest closed marker: the tag stays at most that and the open batch.
#[test]
fn a_block_absorbing_one_streams_frees_keeps_a_small_tag() {
    let r = rig(32 * MIB, POOL, CacheLimits::DEFAULT);
    r.core.set_close_frees(256);
    let (a, b) = (fake_foreign_stream(1), fake_foreign_stream(2));
    let mut largest_tag = 0;
    for i in 0..20_000 {
        let p = r.alloc(a, 256);
        r.free(b, p, 256);
        if i % 1000 == 999 {
            let g = lock(&r.core.global);
            largest_tag = largest_tag.max(
                g.free
                    .iter()
                    .map(|b| b.tag.entries().len())
                    .max()
                    .unwrap_or(0),
            );
        }
    }
    assert!(
        r.syncer.counts().markers >= 20_000 / 256 - 1,
        "{:?}",
        r.syncer.counts()
    );
    assert!(
        largest_tag <= 2,
        "a free block's tag grew to {largest_tag} entries"
    );
    r.core.check_invariants();
}

/// Random churn (sizes up to 1 MiB) from 16 threads, each on its own stream made elsewhere, run
/// `together` (truly parallel where the machine has the cores) or one thread after another; the
/// model checks every hand-out. Returns the shared-lock takes and the operations.
/// (shared-lock takes, operations, shards of the core).
fn random_churn_from_sixteen_threads(together: bool) -> (u64, u64, usize) {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(8 << 30).unwrap();
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    ));
    let growth = Growth::Pool {
        maximum: Some(4 << 30),
    };
    let core = Core::new(
        "churn",
        upstream,
        Arc::new(syncer.clone()),
        growth,
        CacheLimits::DEFAULT,
        1 << 30,
    )
    .unwrap();
    core.set_close_frees(256);
    const OPS: usize = 3000;
    let work = |t: usize| {
        let s = fake_foreign_stream(t + 1);
        let key = syncer.key(s);
        let mut live: Vec<(usize, usize)> = Vec::new();
        let mut x = 0x9e37_79b9_u64 + t as u64;
        for _ in 0..OPS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (x % 100 < 73 && live.len() < 100) || live.is_empty() {
                let size = crate::aligned::align_up(1 + (x >> 12) as usize % MIB, 256).unwrap();
                let a = naming(s, || core.allocate(s, size, 256)).unwrap();
                syncer.model().allocated(key, a, size).unwrap();
                live.push((a, size));
            } else {
                let (a, size) = live.swap_remove((x >> 5) as usize % live.len());
                syncer.model().freed(key, a, size);
                naming(s, || core.deallocate(s, a, size, true)).unwrap();
            }
        }
        for (a, size) in live {
            syncer.model().freed(key, a, size);
            naming(s, || core.deallocate(s, a, size, true)).unwrap();
        }
    };
    if together {
        std::thread::scope(|scope| {
            for t in 0..16 {
                let work = &work;
                scope.spawn(move || work(t));
            }
        });
    } else {
        for t in 0..16 {
            std::thread::scope(|scope| {
                scope.spawn(|| work(t));
            });
        }
    }
    assert_eq!(core.stats().pool_size, 1 << 30, "no growth");
    assert_eq!(core.stats().used, 0);
    core.check_invariants();
    (core.shared_locks(), (16 * OPS) as u64, core.shards.len())
}

/// One thread after another, frees stay in each thread's shard (its own list, within budget)
/// instead of going back to the shared list: most operations take no shared lock (before the
/// shard kept them: about half did).
#[test]
fn random_churn_from_sixteen_threads_in_turn_mostly_stays_in_the_shards() {
    let (locks, ops, shards) = random_churn_from_sixteen_threads(false);
    // A shard's budget is pool / (2 x shards), and there is a shard per core (8 at least): on 8
    // cores or fewer each shard may hold 64 MiB, which holds a thread's churn here (up to 100 live
    // blocks of up to 1 MiB); on the 16- and 32-core GPU machines 32 and 16 MiB, so frees spill
    // to the shared list (25,628 of 48,000 on 32 cores). The bound is asserted where it applies.
    if shards == 8 {
        assert!(
            locks < ops / 4,
            "{locks} of {ops} operations took the shared lock"
        );
    } else {
        eprintln!("{shards} shards: {locks} of {ops} operations took the shared lock");
    }
}

/// The same 16 threads at once: correct hand-outs and no growth. How often they take the shared
/// lock then depends on how many run in parallel (on the 16-core GPU machine 22,623 of 48,000, on
/// 2 cores under a quarter), so the share is printed, not asserted: the benchmark measures it.
#[test]
fn random_churn_from_sixteen_threads_at_once_is_correct() {
    let (locks, ops, _) = random_churn_from_sixteen_threads(true);
    eprintln!("{locks} of {ops} operations took the shared lock");
}

/// An upstream (over the model's) that notes, at every synchronous give-back, whether the core's
/// shared lock was free: a give-back is a blocking driver call (cuMemFree after a synchronization)
/// and must not keep every other thread of the pool waiting.
#[derive(Debug, Clone)]
struct LockProbe {
    inner: AnyResource,
    core: Arc<std::sync::OnceLock<Weak<Core>>>,
    under_lock: Arc<AtomicUsize>,
    given_back: Arc<AtomicUsize>,
}

impl MemoryResource for LockProbe {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.inner.allocate(stream, bytes, alignment)
    }
    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.inner.allocate_sync(bytes, alignment)
    }
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate(stream, ptr, bytes, alignment) }
    }
    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        if let Some(core) = self.core.get().and_then(Weak::upgrade) {
            if core.global.try_lock().is_err() {
                self.under_lock.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.given_back.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.deallocate_sync(ptr, bytes, alignment) }
    }
    fn access(&self) -> crate::resource::Access {
        self.inner.access()
    }
    fn name(&self) -> &str {
        "lock_probe"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| std::ptr::eq(self, o))
    }
}

/// The hang fix: when growth finds the upstream out of memory, the wholly free regions it gives
/// back are synchronized and freed after the shared lock is released (the model still checks that
/// their streams' work was complete first), and the request is then served.
#[test]
fn out_of_memory_give_back_runs_outside_the_shared_lock() {
    for cache in [CacheLimits::OFF, CacheLimits::DEFAULT] {
        let syncer = RecordingSyncer::new(0, 1);
        let device = SimulatedMemoryResource::new(8 * KIB).unwrap();
        let probe = LockProbe {
            inner: AnyResource::new(ModelUpstream::new(
                AnyResource::new(device.clone()),
                &syncer,
            )),
            core: Arc::new(std::sync::OnceLock::new()),
            under_lock: Arc::new(AtomicUsize::new(0)),
            given_back: Arc::new(AtomicUsize::new(0)),
        };
        let core = Core::new(
            "t",
            AnyResource::new(probe.clone()),
            Arc::new(syncer.clone()),
            POOL,
            cache,
            0,
        )
        .unwrap();
        probe.core.set(Arc::downgrade(&core)).unwrap();
        let (a, b) = (fake_stream(1), fake_stream(2));
        let model_alloc = |s: Stream, size: usize| {
            let addr = naming(s, || core.allocate(s, size, 256)).unwrap();
            syncer.model().allocated(syncer.key(s), addr, size).unwrap();
            addr
        };
        let model_free = |s: Stream, addr: usize, size: usize| {
            syncer.model().freed(syncer.key(s), addr, size);
            naming(s, || core.deallocate(s, addr, size, false)).unwrap();
        };
        let p = model_alloc(a, 2 * KIB);
        let q = model_alloc(b, 2 * KIB);
        model_free(a, p, 2 * KIB);
        model_free(b, q, 2 * KIB);
        // Two free 2 KiB regions (pending on A and on B) cannot hold 6 KiB; the device has 4 KiB left.
        let big = model_alloc(a, 6 * KIB);
        let s = core.stats();
        assert_eq!((s.pool_size, s.upstream_releases), (6 * KIB, 2), "{s:?}");
        assert_eq!(probe.given_back.load(Ordering::Relaxed), 2);
        assert_eq!(
            probe.under_lock.load(Ordering::Relaxed),
            0,
            "a region was given back under the shared lock"
        );
        assert!(
            syncer.counts().syncs >= 1,
            "the regions' streams were synchronized before the give-back"
        );
        model_free(a, big, 6 * KIB);
        assert_eq!(core.release_unused().unwrap(), 6 * KIB);
        assert_eq!(probe.under_lock.load(Ordering::Relaxed), 0);
        assert_eq!(device.usage().allocated_bytes, 0);
    }
}

/// While one thread gives regions back (its upstream call blocks), another thread keeps allocating
/// and freeing from the pool: the pool is not frozen behind a driver call.
#[test]
fn other_threads_use_the_pool_during_a_give_back() {
    use std::sync::mpsc;
    #[derive(Debug)]
    struct Gate {
        inner: AnyResource,
        entered: Mutex<Option<mpsc::Sender<()>>>,
        release: Mutex<Option<mpsc::Receiver<()>>>,
    }
    impl MemoryResource for Gate {
        fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
            self.inner.allocate(stream, bytes, alignment)
        }
        fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
            self.inner.allocate_sync(bytes, alignment)
        }
        unsafe fn deallocate(
            &self,
            stream: Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            // SAFETY: forwarded caller contract.
            unsafe { self.inner.deallocate(stream, ptr, bytes, alignment) }
        }
        unsafe fn deallocate_sync(
            &self,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            // The first give-back waits (like a long cuEventSynchronize) until the test lets it go.
            if let Some(tx) = lock(&self.entered).take() {
                tx.send(()).unwrap();
                let rx = lock(&self.release).take().unwrap();
                rx.recv_timeout(std::time::Duration::from_secs(20))
                    .expect("the other thread finished");
            }
            // SAFETY: forwarded caller contract.
            unsafe { self.inner.deallocate_sync(ptr, bytes, alignment) }
        }
        fn access(&self) -> crate::resource::Access {
            self.inner.access()
        }
        fn name(&self) -> &str {
            "gate"
        }
        fn is_equal(&self, other: &dyn MemoryResource) -> bool {
            crate::resource::downcast::<Self>(other).is_some_and(|o| std::ptr::eq(self, o))
        }
    }
    let device = SimulatedMemoryResource::new(10 * KIB).unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Gate {
        inner: AnyResource::new(device.clone()),
        entered: Mutex::new(Some(entered_tx)),
        release: Mutex::new(Some(release_rx)),
    };
    let syncer = RecordingSyncer::new(0, 1);
    let core = Core::new(
        "t",
        AnyResource::new(gate),
        Arc::new(syncer),
        POOL,
        CacheLimits::OFF,
        0,
    )
    .unwrap();
    let s = fake_stream(1);
    let keep = core.allocate(s, 2 * KIB, 256).unwrap();
    let a = core.allocate(s, 2 * KIB, 256).unwrap();
    let b = core.allocate(s, 4 * KIB, 256).unwrap();
    core.deallocate(s, a, 2 * KIB, false).unwrap();
    core.deallocate(s, b, 4 * KIB, false).unwrap();
    // Live: 2 KiB of the first region (its other 2 KiB? none: regions of 2, 2, 4 KiB). The device
    // has 2 KiB left; 6 KiB needs the two free regions (2 + 4 KiB) given back first.
    std::thread::scope(|scope| {
        let big = scope.spawn(|| core.allocate(s, 6 * KIB, 256));
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a give-back started");
        // The give-back is in progress: this thread still frees and allocates (the live block).
        core.deallocate(s, keep, 2 * KIB, false).unwrap();
        let again = core.allocate(s, 2 * KIB, 256).unwrap();
        assert_eq!(again, keep, "the freed block is reused");
        release_tx.send(()).unwrap();
        let big = big.join().unwrap().unwrap();
        core.deallocate(s, big, 6 * KIB, false).unwrap();
        core.deallocate(s, again, 2 * KIB, false).unwrap();
    });
    assert_eq!(core.stats().used, 0);
}

/// The fronts (see `front.rs`): the same thread's pair on one stream, with frees checked by the
/// caller, goes through the thread's front: the same block each time, no shared lock, no wait, and
/// on streams that only their calls may name no batch at all (the block never left the stream), so
/// no event either: a PTDS pair makes no driver call; a stream made elsewhere still costs its id
/// once per pair (at the allocation: the free of the block just taken, on the same handle, does not
/// ask again).
#[test]
fn the_same_threads_pair_goes_through_its_front_on_every_kind_of_stream() {
    const PAIRS: u64 = 1024;
    type Kind = (&'static str, Stream, fn(u64) -> u64);
    let kinds: [Kind; 4] = [
        ("own", fake_stream(1), |_| 0),
        ("legacy", Stream::DEFAULT, |_| 0),
        ("ptds", Stream::PER_THREAD, |_| 0),
        ("foreign", fake_foreign_stream(1), |pairs| pairs),
    ];
    for (name, stream, expected) in kinds {
        let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
        r.core.set_close_frees(3);
        let first = r.alloc(stream, 256);
        r.free_checked(stream, first, 256);
        let before = r.syncer.counts();
        let locks = r.core.shared_locks();
        for _ in 0..PAIRS {
            let p = r.alloc(stream, 256);
            assert_eq!(p, first, "{name}: the front's block");
            assert_eq!(r.core.stats().cached_blocks, 0, "{name}: out of the front");
            r.free_checked(stream, p, 256);
        }
        let after = r.syncer.counts();
        assert_eq!(
            after.driver_calls() - before.driver_calls(),
            expected(PAIRS),
            "{name}: {before:?} then {after:?}"
        );
        assert_eq!(r.core.shared_locks(), locks, "{name}: no shared lock");
        assert_eq!(r.open_batches(), 0, "{name}: no batch");
        let st = r.core.stats();
        assert_eq!((st.used, st.cached_blocks), (0, 1), "{name}: {st:?}");
        r.core.check_invariants();
    }
}

/// The free of the block a thread just took from its front on a stream made elsewhere asks no id
/// only when it names the same handle: freed on another stream, the block goes to the front as
/// that stream's (its id asked), and only that stream gets it back.
#[test]
fn only_the_free_on_the_taking_handle_skips_the_streams_id() {
    let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
    let (f, g) = (fake_foreign_stream(1), fake_foreign_stream(2));
    let p = r.alloc(f, 256);
    r.free_checked(f, p, 256);
    assert_eq!(r.alloc(f, 256), p, "from the front");
    let ids = r.syncer.counts().stream_ids;
    r.free_checked(f, p, 256);
    assert_eq!(
        r.syncer.counts().stream_ids,
        ids,
        "the same handle: no id asked"
    );
    assert_eq!(r.alloc(f, 256), p);
    let ids = r.syncer.counts().stream_ids;
    r.free_checked(g, p, 256);
    assert_eq!(
        r.syncer.counts().stream_ids,
        ids + 1,
        "another handle: its id"
    );
    assert_ne!(r.alloc(f, 256), p, "now a block of the other stream");
    assert_eq!(r.alloc(g, 256), p, "which gets it from the front");
    r.core.check_invariants();
}

#[test]
fn a_front_block_goes_to_no_other_stream_size_or_thread() {
    for stream in [fake_stream(1), Stream::PER_THREAD, fake_foreign_stream(1)] {
        let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
        let p = r.alloc(stream, KIB);
        r.free_checked(stream, p, KIB);
        assert_ne!(r.alloc(fake_stream(2), KIB), p, "another stream");
        assert_ne!(r.alloc(stream, 2 * KIB), p, "another size");
        let core = r.core.clone();
        let other =
            std::thread::spawn(move || naming(stream, || core.allocate(stream, KIB, 256)).unwrap())
                .join()
                .unwrap();
        assert_ne!(other, p, "another thread");
        // The model checked each hand-out; the front's block is still this thread's.
        assert_eq!(r.alloc(stream, KIB), p);
        r.core.check_invariants();
    }
}

/// A free finding the thread's front full takes the usual path; the front's block, of a stream
/// that only its own calls may name, leaves the front only when drained, and then joins its
/// stream's batch without closing it (the recording syncer fails any record on a stream the current
/// call does not name); a later call naming the stream closes the batch.
#[test]
fn a_drained_front_block_is_never_recorded_on_by_another_streams_call() {
    for gone in [Stream::PER_THREAD, fake_foreign_stream(1)] {
        let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
        r.core.set_close_frees(1);
        let p = r.alloc(gone, KIB);
        let q = r.alloc(fake_stream(1), KIB);
        // Keeps the region from being given back by the trimming below.
        let keep = r.alloc(fake_stream(1), KIB);
        r.free_checked(gone, p, KIB);
        // The front is full: this free goes to the shard.
        r.free_checked(fake_stream(1), q, KIB);
        assert_eq!(r.core.stats().cached_blocks, 2);
        assert_eq!(r.open_batches(), 0, "{gone:?}: no batch yet");
        // Draining (here by trimming, on behalf of no stream): the batch would close at once if the
        // call could name its stream.
        naming(fake_stream(1), || r.core.release_unused()).unwrap();
        assert_eq!(r.syncer.counts().markers, 0, "{gone:?}");
        assert_eq!(r.open_batches(), 1, "{gone:?}");
        // A later free that names it closes the batch.
        let a = r.alloc(gone, 2 * KIB);
        r.free(gone, a, 2 * KIB);
        assert_eq!(r.syncer.counts().markers, 1, "{gone:?}");
        assert_eq!(r.open_batches(), 0, "{gone:?}");
        r.free(fake_stream(1), keep, KIB);
        r.core.check_invariants();
    }
}

/// A thread that left a block in its front and moved on to another stream or size gets its front
/// back: after `DISPLACE_AFTER` frees in a row found it full, the next one takes its place and
/// the old block goes the usual path, as a free on its own stream (a stream that only its own calls
/// may name gets its block in an open batch, never an event from another stream's call: the
/// recording syncer fails those). From then on the new pair takes no shared lock and gets the
/// same block each time.
#[test]
fn a_thread_that_moved_on_to_another_stream_or_size_gets_its_front_back() {
    let others: [(&str, Stream, usize); 4] = [
        ("another size", fake_stream(1), 512),
        ("own", fake_stream(2), 256),
        ("ptds", Stream::PER_THREAD, 256),
        ("foreign", fake_foreign_stream(2), 256),
    ];
    for (name, next, size) in others {
        for first in [fake_stream(1), Stream::PER_THREAD, fake_foreign_stream(1)] {
            if first == next {
                continue;
            }
            let r = rig(1 << 20, POOL, CacheLimits::DEFAULT);
            r.core.set_close_frees(3);
            let old = r.alloc(first, 256);
            r.free_checked(first, old, 256);
            let mut last = 0;
            for _ in 0..front::DISPLACE_AFTER {
                last = r.alloc(next, size);
                r.free_checked(next, last, size);
            }
            // `last` displaced `old`: the front serves the new pair now.
            let in_front: Vec<usize> = r.core.front_blocks().iter().map(|h| h.addr).collect();
            assert_eq!(
                in_front,
                [last],
                "{name} after {first:?}: the front's block"
            );
            let locks = r.core.shared_locks();
            for _ in 0..16 {
                let p = r.alloc(next, size);
                assert_eq!(p, last, "{name} after {first:?}: the front's block");
                r.free_checked(next, p, size);
            }
            assert_eq!(
                r.core.shared_locks(),
                locks,
                "{name} after {first:?}: no shared lock"
            );
            // The displaced block went back as a free on its stream, which gets it again.
            assert_eq!(r.alloc(first, 256), old, "{name} after {first:?}");
            r.free_checked(first, old, 256);
            let st = r.core.stats();
            assert_eq!(st.used, 0, "{name} after {first:?}: {st:?}");
            r.core.check_invariants();
        }
    }
}

/// Whoever must see every free block drains the fronts: growth (the pool would otherwise grow
/// or fail), a stream's retirement, and a thread's end.
#[test]
fn fronts_are_drained_before_growing_at_retirement_and_at_thread_exit() {
    // Growth: the whole pool sits in another thread's front.
    let r = rig(
        MIB,
        Growth::Pool { maximum: Some(MIB) },
        CacheLimits::DEFAULT,
    );
    let (core, syncer) = (r.core.clone(), r.syncer.clone());
    let s = fake_stream(1);
    std::thread::spawn(move || {
        let p = naming(s, || core.allocate(s, MIB, 256)).unwrap();
        let key = syncer.key(s);
        syncer.model().allocated(key, p, MIB).unwrap();
        syncer.model().freed(key, p, MIB);
        // This thread keeps running while the main thread allocates: its front is still there.
        naming(s, || core.deallocate(s, p, MIB, true)).unwrap();
        assert_eq!(core.stats().cached_blocks, 1);
        core
    });
    // (The thread may or may not have ended: either its exit or the growth path drains it.)
    let q = loop {
        if r.core.stats().used == 0 {
            break r.alloc(fake_stream(2), MIB);
        }
        std::thread::yield_now();
    };
    assert_eq!(r.core.pool_size(), MIB, "no growth");
    r.free_checked(fake_stream(2), q, MIB);
    r.core.check_invariants();

    // Retirement: the block in the front is retagged with a marker like every other.
    let r = rig(KIB, POOL, CacheLimits::DEFAULT);
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = r.alloc(a, KIB);
    r.free_checked(a, p, KIB);
    r.core.retire(a);
    assert_eq!(
        r.syncer.counts().markers,
        1,
        "one marker replaces the stream"
    );
    assert_eq!(r.alloc(b, KIB), p);
    assert_eq!(r.syncer.counts().marker_waits, 1);

    // Thread exit: the front leaves the core's list and its block goes to a shard.
    let r = rig(MIB, POOL, CacheLimits::DEFAULT);
    let (core, syncer) = (r.core.clone(), r.syncer.clone());
    let fronts_before = lock(&r.core.fronts).len();
    std::thread::spawn(move || {
        let s = Stream::PER_THREAD;
        let p = naming(s, || core.allocate(s, KIB, 256)).unwrap();
        let key = syncer.key(s);
        syncer.model().allocated(key, p, KIB).unwrap();
        syncer.model().freed(key, p, KIB);
        naming(s, || core.deallocate(s, p, KIB, true)).unwrap();
        assert_eq!(lock(&core.fronts).len(), fronts_before + 1);
    })
    .join()
    .unwrap();
    assert_eq!(
        lock(&r.core.fronts).len(),
        fronts_before,
        "the front is gone"
    );
    assert!(r
        .core
        .fronts
        .lock()
        .unwrap()
        .iter()
        .all(|f| f.peek().is_none()));
    assert_eq!(r.core.stats().used, 0);
    // The exited thread's PTDS block waits in an open batch (nobody may record on it now): one
    // device-wide synchronization makes it usable by another stream.
    assert_eq!(r.syncer.counts().markers, 0);
    r.core.check_invariants();
}

/// A thread frees the whole pool (into its front) and ends; an allocation made as soon as that
/// free returned races the thread's end, which moves the block from the front to the free lists:
/// it must find the block, wherever it is then, and never fail with out-of-memory (seen under
/// ThreadSanitizer's timing in the growth case of the test above).
#[test]
fn an_allocation_racing_a_threads_end_finds_the_block_leaving_its_front() {
    for round in 0..300 {
        let r = rig(
            MIB,
            Growth::Pool { maximum: Some(MIB) },
            CacheLimits::DEFAULT,
        );
        let stream = if round % 2 == 0 {
            fake_stream(1)
        } else {
            Stream::PER_THREAD
        };
        let (core, syncer) = (r.core.clone(), r.syncer.clone());
        let (freed_tx, freed_rx) = std::sync::mpsc::channel();
        let ending = std::thread::spawn(move || {
            let p = naming(stream, || core.allocate(stream, MIB, 256)).unwrap();
            let key = syncer.key(stream);
            syncer.model().allocated(key, p, MIB).unwrap();
            syncer.model().freed(key, p, MIB);
            naming(stream, || core.deallocate(stream, p, MIB, true)).unwrap();
            freed_tx.send(()).unwrap();
        });
        freed_rx.recv().unwrap();
        let s2 = fake_stream(2);
        let q = naming(s2, || r.core.allocate(s2, MIB, 256))
            .unwrap_or_else(|e| panic!("round {round} ({stream:?}): {e}"));
        let key = r.syncer.key(s2);
        r.syncer.model().allocated(key, q, MIB).unwrap();
        ending.join().unwrap();
        assert_eq!(r.core.pool_size(), MIB, "round {round}: no growth");
        r.free_checked(fake_stream(2), q, MIB);
        r.core.check_invariants();
    }
}

/// A core dropped with blocks in fronts synchronizes their streams and returns everything; a
/// thread's front of a dropped core is never used again.
#[test]
fn a_core_dropped_with_blocks_in_fronts_returns_everything() {
    let r = rig(MIB, POOL, CacheLimits::DEFAULT);
    let p = r.alloc(Stream::PER_THREAD, KIB);
    r.free_checked(Stream::PER_THREAD, p, KIB);
    let Rig {
        core,
        syncer,
        device,
    } = r;
    drop(core);
    assert_eq!(syncer.counts().device_syncs, 1, "the open block's stream");
    assert_eq!(
        device.usage().allocated_bytes,
        0,
        "everything went back upstream"
    );
    // A new core on this thread gets a new front.
    let r = rig(MIB, POOL, CacheLimits::DEFAULT);
    let q = r.alloc(Stream::PER_THREAD, KIB);
    r.free_checked(Stream::PER_THREAD, q, KIB);
    assert_eq!(r.core.stats().cached_blocks, 1);
    r.core.check_invariants();
}

/// RMM's random workload as the benchmark runs it (sizes up to 1 MiB, a 73 % chance to allocate,
/// up to 10,000 allocations and 1,000 MiB live per thread) from 16 threads in a 40 GiB pool, as
/// on the GPU machines: in host mode with 16 threads run one after another the count of
/// shared-lock takes depends only on which shard each thread draws. Threads draw shards in the
/// order they first allocate anywhere in the test process, so beside other tests the draw varies:
/// alone it is under 1 in 40, beside the whole suite up to 1 in 29 was seen. With 64 MiB shards
/// and 16 MiB refills it was 33,910 of 320,000 (1 in 9), and 16 threads ran no faster than one.
#[test]
fn the_benchmark_random_shape_rarely_takes_the_shared_lock() {
    let syncer = RecordingSyncer::new(0, 1);
    let device = SimulatedMemoryResource::new(64 << 30).unwrap();
    let core = Core::new(
        "random",
        AnyResource::new(device),
        Arc::new(syncer.clone()),
        Growth::Pool { maximum: None },
        CacheLimits::DEFAULT,
        40 << 30,
    )
    .unwrap();
    const STEPS: usize = 20_000;
    for t in 0..16usize {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let s = fake_foreign_stream(t + 1);
                    let mut live: Vec<(usize, usize)> = Vec::new();
                    let mut x = 0x9e37_79b9_u64 + t as u64;
                    let (mut usage, mut allocations) = (0usize, 0usize);
                    for _ in 0..STEPS {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let size =
                            crate::aligned::align_up(1 + (x >> 12) as usize % MIB, 256).unwrap();
                        let room = allocations < STEPS / 2 && usage + size <= 1000 * MIB;
                        if room && (live.is_empty() || x % 100 < 73) {
                            let a = naming(s, || core.allocate(s, size, 256)).unwrap();
                            live.push((a, size));
                            usage += size;
                            allocations += 1;
                        } else if !live.is_empty() {
                            let (a, size) = live.swap_remove((x >> 5) as usize % live.len());
                            naming(s, || core.deallocate(s, a, size, true)).unwrap();
                            usage -= size;
                        }
                    }
                    for (a, size) in live {
                        naming(s, || core.deallocate(s, a, size, true)).unwrap();
                    }
                })
                .join()
                .unwrap();
        });
    }
    let ops = (16 * STEPS) as u64;
    let locks = core.shared_locks();
    assert!(
        locks < ops / 20,
        "{locks} of {ops} operations took the shared lock ({} shards)",
        core.shards.len()
    );
    assert_eq!(core.stats().used, 0);
    core.check_invariants();
}

/// Random churn of 1 MiB blocks in a fixed-size core (binning's largest bin in RMM's random
/// workload) from 16 threads at once, each on a stream only its own calls may name (its PTDS, or
/// a stream made elsewhere): what a shard spills to the shared list is orderable by the other
/// threads (its batch is closed as it spills, while the call names the stream), so no thread has
/// to fall back on a device-wide synchronization to use it. Before, spilled blocks stayed in open
/// batches: on the H100 a third of a synchronization per 1000 steps, each flushing every shard.
#[test]
fn blocks_spilled_on_streams_only_their_calls_name_need_no_device_sync() {
    fn foreign(t: usize) -> Stream {
        fake_foreign_stream(300 + t)
    }
    fn per_thread(_: usize) -> Stream {
        Stream::PER_THREAD
    }
    for (kind, stream_of) in [
        ("foreign", foreign as fn(usize) -> Stream),
        ("ptds", per_thread),
    ] {
        let r = rig_on(
            64 << 30,
            128 * MIB,
            Growth::Chunks {
                chunk: 128 * MIB,
                unit: MIB,
            },
            CacheLimits::FIXED,
        );
        let (core, syncer) = (&r.core, &r.syncer);
        core.set_close_frees(CLOSE_FREES);
        let start = std::sync::Barrier::new(16);
        std::thread::scope(|scope| {
            for t in 0..16 {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    mib_churn(core, syncer, stream_of(t), t as u64, 6000, 300);
                    // No thread ends (abandoning its batches) while others churn.
                    start.wait();
                });
            }
        });
        let c = syncer.counts();
        eprintln!(
            "{kind}: {} device syncs, {} markers, {} marker waits, pool {} MiB",
            c.device_syncs,
            c.markers,
            c.marker_waits,
            core.pool_size() >> 20
        );
        // 8 to 27 per run before, on 2 cores; now 0 to 2, and up to 3 while other tests load the
        // machine (threads then run more one after another, in a smaller pool, where what the
        // other shards froze is an eighth of it sooner).
        assert!(c.device_syncs <= 5, "{kind}: {c:?}");
        core.check_invariants();
        assert_eq!(core.stats().used, 0);
    }
}

/// A block frozen in a live thread's open batch (its PTDS) is left to that thread: another stream
/// needing memory grows the pool rather than synchronizing the device for it, while it is less than
/// an eighth of the pool. Once the thread has ended its batch is abandoned, and the next request
/// that needs the block covers it with one device-wide synchronization instead of growing.
#[test]
fn a_live_threads_open_batch_is_left_to_it_and_an_ended_threads_is_covered() {
    let r = rig(8 * MIB, POOL, CacheLimits::DEFAULT);
    r.core.set_close_frees(CLOSE_FREES);
    let (resume, parked) = std::sync::mpsc::channel::<()>();
    let (freed, wait_freed) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let r = &r;
        let a = scope.spawn(move || {
            let p = r.alloc(Stream::PER_THREAD, 512 * KIB);
            r.free_checked(Stream::PER_THREAD, p, 512 * KIB);
            freed.send(()).unwrap();
            parked.recv().unwrap();
        });
        wait_freed.recv().unwrap();
        let ours = fake_stream(1);
        let big = r.alloc(ours, 8 * MIB);
        assert_eq!(
            r.syncer.counts().device_syncs,
            0,
            "the live thread's block is left to it"
        );
        assert_eq!(r.core.pool_size(), 16 * MIB, "the pool grew instead");
        resume.send(()).unwrap();
        a.join().unwrap();
        let again = r.alloc(ours, 8 * MIB);
        assert_eq!(
            r.syncer.counts().device_syncs,
            1,
            "the ended thread's batch is covered"
        );
        assert_eq!(r.core.pool_size(), 16 * MIB, "without growing");
        r.free(ours, big, 8 * MIB);
        r.free(ours, again, 8 * MIB);
    });
    r.core.check_invariants();
}

/// Threads that come and go (a thread per request) abandon their open batches as orphans; an
/// orphan that no free block carries any more is dropped, so the list does not grow with every
/// thread until the next device-wide synchronization.
#[test]
fn orphans_no_block_waits_for_are_dropped() {
    let r = rig(MIB, POOL, CacheLimits::DEFAULT);
    let key = r.syncer.key(fake_foreign_stream(1));
    let carried = Marker::open(key);
    let tag = carried.clone();
    r.core.orphan([carried, Marker::open(key)]);
    r.core.orphan([]);
    assert_eq!(
        lock(&r.core.orphans).len(),
        1,
        "the batch a block still waits for stays"
    );
    drop(tag);
    r.core.orphan([]);
    assert_eq!(lock(&r.core.orphans).len(), 0);
}

/// A thread that never allocated from the pool and whose frees are not checked has no front, yet
/// it abandons the open batches of its shard when it ends like any other: the next request that
/// needs its block covers it with one device-wide synchronization instead of growing the pool.
#[test]
fn a_thread_without_a_front_abandons_its_batches_too() {
    // 512 KiB frozen in a 128 MiB pool: under the eighth that would cover a live thread's batch.
    let r = rig_on(1 << 30, 128 * MIB, POOL, CacheLimits::DEFAULT);
    r.core.set_close_frees(CLOSE_FREES);
    let ours = fake_stream(1);
    let p = r.alloc(ours, 512 * KIB);
    std::thread::scope(|scope| {
        let r = &r;
        scope
            .spawn(move || r.free(Stream::PER_THREAD, p, 512 * KIB))
            .join()
            .unwrap();
    });
    let p = r.alloc(ours, 128 * MIB);
    assert_eq!(
        r.syncer.counts().device_syncs,
        1,
        "the ended thread's batch is covered"
    );
    assert_eq!(r.core.pool_size(), 128 * MIB, "without growing");
    r.free(ours, p, 128 * MIB);
    r.core.check_invariants();
}

/// `steps` steps of 1 MiB churn on `stream` (xorshift from `seed`: 60 % allocations while fewer
/// than `max_live` are live, else a free of a random live one, checked), then the rest freed;
/// every call names `stream`, and the model checks each block handed out.
fn mib_churn(
    core: &Core,
    syncer: &RecordingSyncer,
    stream: Stream,
    seed: u64,
    steps: usize,
    max_live: usize,
) {
    let key = syncer.key(stream);
    let mut x = 0x9e37_79b9_u64 + seed;
    let mut live: Vec<usize> = Vec::new();
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if live.len() < max_live && (live.is_empty() || x % 100 < 60) {
            let a = naming(stream, || core.allocate(stream, MIB, 256)).unwrap();
            syncer.model().allocated(key, a, MIB).unwrap();
            live.push(a);
        } else {
            let a = live.swap_remove((x >> 5) as usize % live.len());
            syncer.model().freed(key, a, MIB);
            naming(stream, || core.deallocate(stream, a, MIB, true)).unwrap();
        }
    }
    for a in live {
        syncer.model().freed(key, a, MIB);
        naming(stream, || core.deallocate(stream, a, MIB, true)).unwrap();
    }
}

/// Threads that come and go on streams only their own calls may name (a thread per task, each
/// with its stream) leave their open batches abandoned; their blocks reach the shared list, where
/// only a device-wide synchronization frees them. Requests must not keep scanning past them: once
/// enough were passed over, one synchronization covers them. Before, binning's random churn in
/// host mode looked past 50-70 of them per cross-stream request and ran 2-3x slower.
#[test]
fn requests_do_not_keep_scanning_past_the_blocks_of_ended_threads() {
    let r = rig_on(
        64 << 30,
        64 * MIB,
        Growth::Chunks {
            chunk: 64 * MIB,
            unit: MIB,
        },
        CacheLimits::FIXED,
    );
    let (core, syncer) = (&r.core, &r.syncer);
    core.set_close_frees(CLOSE_FREES);
    for round in 0..12 {
        std::thread::scope(|scope| {
            for t in 0..4 {
                scope.spawn(move || {
                    let n = 4 * round + t;
                    mib_churn(
                        core,
                        syncer,
                        fake_foreign_stream(1000 + n),
                        n as u64,
                        2000,
                        40,
                    );
                });
            }
        });
    }
    let (scans, stranded) = core.scans();
    let c = syncer.counts();
    eprintln!(
        "{scans} scans passed over {stranded} stranded blocks; {} device syncs; pool {} MiB",
        c.device_syncs,
        core.pool_size() >> 20
    );
    // About 5 per scan seen with the synchronization, 22 without (2 cores).
    assert!(
        stranded <= 10 * scans,
        "{stranded} stranded blocks passed over in {scans} scans"
    );
    core.check_invariants();
    assert_eq!(core.stats().used, 0);
}
