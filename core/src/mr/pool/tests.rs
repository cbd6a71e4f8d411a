use super::*;
use crate::mr::detail::stream_ordered::model::{
    drive, fake_stream, stress_threads, ModelUpstream, Op, RecordingSyncer, Subject,
};
use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
use crate::resource::Access;
use proptest::prelude::*;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// A pool over a simulated device watched by the stream-order model.
fn simulated_pool(
    capacity: usize,
    initial: usize,
    maximum: Option<usize>,
    cache: CacheLimits,
) -> (PoolMemoryResource, RecordingSyncer, SimulatedMemoryResource) {
    let syncer = RecordingSyncer::new(30, 0x9e37_79b9);
    let device = SimulatedMemoryResource::new(capacity).unwrap();
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    ));
    let pool = PoolMemoryResource::build(
        upstream,
        Some(initial),
        maximum,
        Arc::new(syncer.clone()),
        cache,
    )
    .unwrap();
    (pool, syncer, device)
}

/// A pool that never touches CUDA, over a simulated device.
fn plain_pool(initial: usize, maximum: Option<usize>) -> PoolMemoryResource {
    simulated_pool(256 * MIB, initial, maximum, CacheLimits::DEFAULT).0
}

#[test]
fn sizes_are_checked_like_rmm() {
    let up = || AnyResource::new(SimulatedMemoryResource::new(MIB).unwrap());
    let syncer = || -> Arc<dyn Syncer> { Arc::new(RecordingSyncer::default()) };
    let build = |i, m| PoolMemoryResource::build(up(), i, m, syncer(), CacheLimits::DEFAULT);
    let err = build(Some(1000), None).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("multiple of 256")),
        "{err}"
    );
    assert!(matches!(
        build(Some(0), Some(1000)),
        Err(Error::InvalidArgument(_))
    ));
    let err = build(Some(2 * KIB), Some(KIB)).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidArgument("Initial pool size exceeds the maximum pool size!".into())
    );
    let pool = build(Some(KIB), Some(KIB)).unwrap();
    assert_eq!(
        (pool.pool_size(), pool.maximum_pool_size()),
        (KIB, Some(KIB))
    );
    assert!(
        build(Some(2 * MIB), None).unwrap_err().is_out_of_memory(),
        "the upstream's error"
    );
}

#[test]
fn host_mode_default_grows_on_demand() {
    if !cuda::is_host_mode() {
        return; // with a GPU the default is half the free device memory (GPU tests cover it)
    }
    let pool =
        PoolMemoryResource::new(AnyResource::new(SystemMemoryResource::new()), None, None).unwrap();
    assert_eq!(pool.pool_size(), 0);
    let p = pool.allocate(Stream::DEFAULT, 100, 8).unwrap();
    assert_eq!(pool.pool_size(), 256);
    // SAFETY: from allocate above with these arguments.
    unsafe { pool.deallocate(Stream::DEFAULT, p, 100, 8).unwrap() };
}

#[test]
fn requests_are_rounded_and_checked() {
    let pool = plain_pool(64 * KIB, None);
    assert!(pool.allocate(fake_stream(1), 0, 256).unwrap().is_null());
    for align in [0, 3, 48] {
        assert!(matches!(
            pool.allocate(fake_stream(1), 8, align),
            Err(Error::InvalidArgument(_))
        ));
    }
    let p = pool.allocate(fake_stream(1), 1, 1).unwrap();
    assert_eq!(p as usize % 256, 0);
    assert_eq!(pool.statistics().bytes_used, 256);
    // SAFETY: from allocate above; null is a no-op.
    unsafe {
        pool.deallocate(fake_stream(1), p, 1, 1).unwrap();
        pool.deallocate(fake_stream(1), std::ptr::null_mut(), 0, 256)
            .unwrap();
    }
    assert_eq!(pool.statistics().bytes_used, 0);
}

#[test]
fn large_alignments_are_honoured() {
    let pool = plain_pool(0, None);
    let s = fake_stream(1);
    let _skew = pool.allocate(s, 256, 256).unwrap();
    for shift in 9..=20 {
        let align = 1usize << shift;
        let p = pool.allocate(s, 3000, align).unwrap();
        assert_eq!(p as usize % align, 0, "alignment {align}");
        // SAFETY: from allocate above with these arguments.
        unsafe { pool.deallocate(s, p, 3000, align).unwrap() };
    }
    assert_eq!(
        pool.statistics().bytes_used,
        256,
        "padding went back to the free list"
    );
}

#[test]
fn the_maximum_is_enforced_and_the_pool_survives() {
    let pool = plain_pool(0, Some(MIB));
    let s = fake_stream(1);
    let err = pool.allocate(s, 2 * MIB, 256).unwrap_err();
    assert!(
        err.is_out_of_memory() && err.to_string().contains("Maximum pool size exceeded"),
        "{err}"
    );
    let a = pool.allocate(s, 768 * KIB, 256).unwrap();
    let err = pool.allocate(s, 512 * KIB, 256).unwrap_err();
    assert!(
        err.to_string().contains("Maximum pool size exceeded"),
        "{err}"
    );
    let b = pool.allocate(s, 256 * KIB, 256).unwrap();
    assert_eq!(pool.pool_size(), MIB);
    // SAFETY: from allocate above with these arguments.
    unsafe {
        pool.deallocate(s, a, 768 * KIB, 256).unwrap();
        pool.deallocate(s, b, 256 * KIB, 256).unwrap();
    }
}

#[test]
fn clones_share_one_pool() {
    let pool = plain_pool(64 * KIB, None);
    let twin = pool.clone();
    let p = twin.allocate(fake_stream(1), KIB, 256).unwrap();
    assert_eq!(pool.statistics().bytes_used, KIB);
    assert!(pool.is_equal(&twin));
    assert!(!pool.is_equal(&plain_pool(64 * KIB, None)));
    assert_eq!(
        AnyResource::new(pool.clone()),
        AnyResource::new(twin.clone())
    );
    // SAFETY: from the shared pool with these arguments.
    unsafe { pool.deallocate(fake_stream(1), p, KIB, 256).unwrap() };
    assert_eq!(pool.name(), "pool_memory_resource");
    assert_eq!(pool.access(), Access::DEVICE, "the upstream's access");
    assert_eq!(pool.upstream_resource().name(), "model_upstream");
}

/// Threads of `std::thread::scope` may still run their thread-local destructors (where their
/// front blocks go back) after the scope returns: statistics read then must count those blocks as
/// free, not as used. Failed (one block "used") on the H100 when the live set's thread slots made
/// those destructors longer.
#[test]
fn statistics_right_after_a_scope_count_the_threads_front_blocks_as_free() {
    for round in 0..200 {
        let pool = plain_pool(4 * MIB, None);
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let pool = &pool;
                scope.spawn(move || {
                    let bytes = 256 * (1 + t + round % 7);
                    let p = pool.allocate(Stream::PER_THREAD, bytes, 256).unwrap();
                    // SAFETY: from allocate above with these arguments; it goes to the front.
                    unsafe { pool.deallocate(Stream::PER_THREAD, p, bytes, 256).unwrap() };
                });
            }
        });
        let st = pool.statistics();
        assert_eq!(st.bytes_used, 0, "round {round}");
        assert_eq!(st.bytes_free, st.pool_size, "round {round}");
    }
}

#[test]
fn statistics_are_exact_and_drop_returns_everything() {
    let (pool, syncer, device) = simulated_pool(64 * MIB, MIB, None, CacheLimits::DEFAULT);
    let s = fake_stream(1);
    let a = pool.allocate(s, 1000, 256).unwrap();
    let b = pool.allocate(s, 2 * MIB, 256).unwrap();
    let st = pool.statistics();
    assert_eq!(
        st.pool_size,
        3 * MIB,
        "grew by the larger of the request and the pool"
    );
    assert_eq!(st.bytes_used, 1024 + 2 * MIB);
    assert_eq!(st.bytes_free, st.pool_size - st.bytes_used);
    assert_eq!((st.upstream_blocks, st.upstream_allocations), (2, 2));
    // SAFETY: from allocate above with these arguments.
    unsafe {
        pool.deallocate(s, a, 1000, 256).unwrap();
        pool.deallocate(s, b, 2 * MIB, 256).unwrap();
    }
    assert_eq!(
        pool.statistics().cached_bytes,
        1024 + 2 * MIB,
        "blocks up to 4 MiB sit in this thread's cache"
    );
    assert_eq!(device.usage().allocated_bytes, 3 * MIB);
    drop(pool);
    assert_eq!(device.usage().allocated_bytes, 0);
    assert!(syncer.counts().syncs >= 1);
}

impl Subject for PoolMemoryResource {
    fn footprint(&self, ptr: usize, bytes: usize, _alignment: usize) -> (usize, usize) {
        (ptr, align_up(bytes, DEFAULT_ALIGNMENT).unwrap())
    }
    fn must_fail(&self, bytes: usize, _alignment: usize) -> Option<fn(&Error) -> bool> {
        let size = align_up(bytes, DEFAULT_ALIGNMENT).unwrap();
        self.maximum
            .is_some_and(|m| size > m)
            .then_some(Error::is_out_of_memory as fn(&Error) -> bool)
    }
    fn check_accounting(&self, held: usize) {
        let s = self.statistics();
        assert_eq!(s.bytes_used, held, "bytes used vs the live blocks");
        assert_eq!(s.bytes_free, s.pool_size - s.bytes_used);
        if let Some(max) = self.maximum {
            assert!(s.pool_size <= max);
        }
    }
    fn check_books(&self) {
        let s = self.statistics();
        assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
    }
    fn release(&self) -> Result<usize> {
        let before = self.pool_size();
        let released = self.release_unused()?;
        assert_eq!(self.pool_size(), before - released);
        Ok(released)
    }
}

/// Cases × operations of the property test: 256 × 4096 ≈ 10^6 random operations.
const CASES: u32 = 256;
const OPS: usize = 4096;

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(CASES), ..ProptestConfig::default() })]

    /// Random allocate/free/release on six streams (three ordinary, the legacy stream under both
    /// handles, this thread's PTDS) over a simulated device, with and without caches and a maximum:
    /// no overlap, alignment honoured, stream order kept (the model), exact accounting, and
    /// everything back upstream after a release and after drop.
    #[test]
    fn random_operations_keep_every_promise(
        ops in proptest::collection::vec(any::<Op>(), OPS),
        initial_kib in 0usize..1024,
        maximum in proptest::option::of(16usize..64),
        cache in 0usize..3,
        release_at_end in any::<bool>(),
    ) {
        let cache = CacheLimits::ALL[cache];
        let maximum = maximum.map(|m| m * MIB);
        let (pool, syncer, device) = simulated_pool(48 * MIB, initial_kib * KIB, maximum, cache);
        drive(&pool, &syncer, &ops).map_err(TestCaseError::fail)?;
        pool.core.check_invariants();
        if release_at_end {
            pool.release_unused().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(pool.pool_size(), 0);
            prop_assert_eq!(device.usage().allocated_bytes, 0);
        }
        drop(pool);
        prop_assert_eq!(device.usage().allocated_bytes, 0, "drop returns every upstream block");
    }

    /// On one stream, reuse never needs a wait.
    #[test]
    fn one_stream_never_waits(ops in proptest::collection::vec(any::<Op>(), 512)) {
        let (pool, syncer, _device) = simulated_pool(48 * MIB, 0, None, CacheLimits::DEFAULT);
        let one: Vec<Op> = ops.into_iter().map(|(k, _, s, a)| (k, 0, s, a)).collect();
        drive(&pool, &syncer, &one).map_err(TestCaseError::fail)?;
        let c = syncer.counts();
        prop_assert_eq!((c.stream_waits, c.marker_waits, c.markers), (0, 0, 0));
    }
}

/// 16 threads on host memory (see [`stress_threads`]); then the pool gives everything back.
#[test]
fn sixteen_threads_on_host_memory() {
    sixteen_threads_with(CacheLimits::DEFAULT);
}

/// The same with small shards: refills, evictions and shard-list reuse race with the observer.
#[test]
fn sixteen_threads_on_host_memory_with_tight_shards() {
    sixteen_threads_with(CacheLimits::TIGHT);
}

fn sixteen_threads_with(cache: CacheLimits) {
    let syncer = RecordingSyncer::new(10, 42);
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(SystemMemoryResource::new()),
        &syncer,
    ));
    let pool = PoolMemoryResource::build(
        upstream,
        Some(4 * MIB),
        None,
        Arc::new(syncer.clone()),
        cache,
    )
    .unwrap();
    stress_threads(&pool, &syncer, 16, 2000, 256 * KIB);
    let s = pool.statistics();
    assert_eq!(s.bytes_free, s.pool_size);
    pool.core.check_invariants();
    let size = pool.pool_size();
    assert_eq!(pool.release_unused().unwrap(), size);
    assert_eq!(
        pool.statistics(),
        PoolStatistics {
            upstream_allocations: s.upstream_allocations,
            upstream_releases: s.upstream_allocations,
            ..Default::default()
        }
    );
}

mod gpu {
    use super::*;
    use crate::cuda::{self as cu, OwnedStream, StreamFlags};
    use crate::mr::test_harness::{resource_tests, DEVICE_MEMORY};
    use crate::mr::{CudaAsyncMemoryResource, CudaMemoryResource, ManagedMemoryResource};

    resource_tests!(over_cuda, || {
        PoolMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, None)
            .map(AnyResource::new)
    });
    resource_tests!(over_managed, || {
        PoolMemoryResource::new(
            AnyResource::new(ManagedMemoryResource::new()),
            Some(1 << 30),
            None,
        )
        .map(AnyResource::new)
    });
    resource_tests!(over_cuda_async, || {
        let upstream = AnyResource::new(CudaAsyncMemoryResource::new()?);
        PoolMemoryResource::new(upstream, Some(0), None).map(AnyResource::new)
    });

    fn cuda_pool(initial: usize, maximum: Option<usize>) -> PoolMemoryResource {
        PoolMemoryResource::new(
            AnyResource::new(CudaMemoryResource::new()),
            Some(initial),
            maximum,
        )
        .unwrap()
    }

    /// Fill on A, free on A, allocate the same memory on B: B sees A's last write, in order.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn cross_stream_reuse_is_ordered_on_real_streams() {
        crate::testing::require_gpu();
        const SIZE: usize = 64 * MIB;
        let pool = cuda_pool(SIZE, Some(SIZE));
        let a = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let b = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        for round in 0..3u8 {
            let p = pool.allocate(a.stream(), SIZE, 256).unwrap();
            // SAFETY: `p` holds SIZE bytes; the free is ordered after the fills on A.
            unsafe {
                for i in 0..40u8 {
                    cu::set_async(p, i, SIZE, a.stream()).unwrap();
                }
                cu::set_async(p, 0x5a ^ round, SIZE, a.stream()).unwrap();
                pool.deallocate(a.stream(), p, SIZE, 256).unwrap();
            }
            let q = pool.allocate(b.stream(), SIZE, 256).unwrap();
            assert_eq!(q, p, "the pool holds only this block");
            let mut back = [0u8; 64];
            // SAFETY: `q` holds SIZE bytes; `back` lives until B is synchronized.
            unsafe {
                cu::copy_async(back.as_mut_ptr(), q.add(SIZE - 64), 64, b.stream()).unwrap();
                cu::copy_async(back.as_mut_ptr(), q, 32, b.stream()).unwrap();
            }
            b.synchronize().unwrap();
            assert!(
                back.iter().all(|&x| x == 0x5a ^ round),
                "round {round}: B read {back:?}"
            );
            // SAFETY: from allocate above; B's work on it is finished.
            unsafe { pool.deallocate(b.stream(), q, SIZE, 256).unwrap() };
        }
    }

    /// Blocks freed on a stream that is then destroyed stay safe to reuse.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_destroyed_stream_leaves_no_dangling_handle() {
        crate::testing::require_gpu();
        let pool = cuda_pool(MIB, Some(MIB));
        let p = {
            let a = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
            let p = pool.allocate(a.stream(), MIB, 256).unwrap();
            // SAFETY: `p` holds 1 MiB; the free is ordered after the fill.
            unsafe {
                cu::set_async(p, 0x77, MIB, a.stream()).unwrap();
                pool.deallocate(a.stream(), p, MIB, 256).unwrap();
            }
            p
        };
        let b = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let q = pool.allocate(b.stream(), MIB, 256).unwrap();
        assert_eq!(q, p);
        let mut back = [0u8; 16];
        // SAFETY: `q` holds 1 MiB; `back` lives until B is synchronized.
        unsafe { cu::copy_async(back.as_mut_ptr(), q, 16, b.stream()).unwrap() };
        b.synchronize().unwrap();
        assert_eq!(back, [0x77; 16]);
        // SAFETY: from allocate above; B's work on it is finished.
        unsafe { pool.deallocate(b.stream(), q, MIB, 256).unwrap() };
    }

    /// A stream made outside rmm (here with the driver directly, as CuPy, PyTorch or the CUDA
    /// runtime do) and destroyed while blocks freed on it are still in the pool: reusing them on
    /// another stream, trimming and dropping the pool must not touch the dead handle (found on the
    /// H200: the pool's drop asked the driver about it and crashed inside libcuda).
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_stream_made_elsewhere_may_be_destroyed_before_the_pool() {
        crate::testing::require_gpu();
        let pool = cuda_pool(2 * MIB, Some(2 * MIB));
        let other = OwnedStream::new(StreamFlags::NonBlocking).unwrap(); // sets up the context
        let (p, q) = {
            let made = crate::cuda::stream::ForeignStream::new().unwrap();
            let foreign = made.stream();
            let p = pool.allocate(foreign, MIB, 256).unwrap();
            let q = pool.allocate(foreign, MIB, 256).unwrap();
            // SAFETY: both hold 1 MiB; the frees are ordered after the fills.
            unsafe {
                cu::set_async(p, 0x3c, MIB, foreign).unwrap();
                cu::set_async(q, 0x3d, MIB, foreign).unwrap();
                pool.deallocate(foreign, p, MIB, 256).unwrap();
                pool.deallocate(foreign, q, MIB, 256).unwrap();
            }
            // Its queued fills still complete.
            made.destroy().unwrap();
            (p, q)
        };
        let r = pool.allocate(other.stream(), MIB, 256).unwrap();
        assert!(r == p || r == q);
        let mut back = [0u8; 16];
        // SAFETY: `r` holds 1 MiB; `back` lives until the stream is synchronized.
        unsafe { cu::copy_async(back.as_mut_ptr(), r, 16, other.stream()).unwrap() };
        other.synchronize().unwrap();
        assert!(
            back == [0x3c; 16] || back == [0x3d; 16],
            "the fills on the dead stream came first: {back:?}"
        );
        // SAFETY: from allocate above; the stream's work on it is finished.
        unsafe { pool.deallocate(other.stream(), r, MIB, 256).unwrap() };
        assert_eq!(
            pool.release_unused().unwrap(),
            2 * MIB,
            "trim waits on markers, not on the dead stream"
        );
        drop(pool);
    }

    /// Growth past the maximum fails with out-of-memory and leaves the pool usable.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn growth_stops_at_the_maximum() {
        crate::testing::require_gpu();
        let pool = cuda_pool(0, Some(64 * MIB));
        let a = pool.allocate(Stream::DEFAULT, 48 * MIB, 256).unwrap();
        let err = pool.allocate(Stream::DEFAULT, 32 * MIB, 256).unwrap_err();
        assert!(
            err.is_out_of_memory() && err.to_string().contains("Maximum pool size exceeded"),
            "{err}"
        );
        let b = pool.allocate(Stream::DEFAULT, 8 * MIB, 256).unwrap();
        // SAFETY: both from allocate above with these arguments; nothing uses them.
        unsafe {
            cu::set_async(b, 1, 8 * MIB, Stream::DEFAULT).unwrap();
            pool.deallocate(Stream::DEFAULT, a, 48 * MIB, 256).unwrap();
            pool.deallocate(Stream::DEFAULT, b, 8 * MIB, 256).unwrap();
        }
        Stream::DEFAULT.synchronize().unwrap();
        assert!(pool.pool_size() <= 64 * MIB);
        assert_eq!(pool.statistics().bytes_used, 0);
    }

    /// 16 threads, each on its own stream (some blocks freed on another thread's stream): the
    /// accounting is back to zero at the end.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_threads_with_their_own_streams() {
        crate::testing::require_gpu();
        let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
        let pool = cuda_pool(256 * MIB, None);
        let streams: Vec<OwnedStream> = (0..16)
            .map(|_| OwnedStream::new(StreamFlags::NonBlocking).unwrap())
            .collect();
        std::thread::scope(|scope| {
            for t in 0..16usize {
                let (pool, streams) = (&pool, &streams);
                scope.spawn(move || {
                    let mine = streams[t].stream();
                    let mut x = 0x9e37_79b9_u64 + t as u64;
                    let mut live: Vec<(*mut u8, usize)> = Vec::new();
                    for _ in 0..400 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if x % 3 != 0 || live.is_empty() {
                            let bytes = 1 + (x >> 16) as usize % (2 * MIB);
                            let p = pool.allocate(mine, bytes, 256).unwrap();
                            // SAFETY: `p` holds `bytes` bytes, used on `mine` only.
                            unsafe { cu::set_async(p, t as u8, bytes.min(4096), mine).unwrap() };
                            live.push((p, bytes));
                        } else {
                            let (p, bytes) = live.swap_remove((x >> 5) as usize % live.len());
                            // SAFETY: from allocate above; the free is ordered after the fill.
                            unsafe { pool.deallocate(mine, p, bytes, 256).unwrap() };
                        }
                    }
                    for (p, bytes) in live {
                        // SAFETY: as above.
                        unsafe { pool.deallocate(mine, p, bytes, 256).unwrap() };
                    }
                    mine.synchronize().unwrap();
                });
            }
        });
        let s = pool.statistics();
        assert_eq!(s.bytes_used, 0);
        assert_eq!(s.bytes_free, s.pool_size);
        pool.core.check_invariants();
    }

    /// `release_unused` gives the memory back to the device: its free memory rises.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn release_unused_returns_memory_to_the_device() {
        crate::testing::require_gpu();
        let _exclusive = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
        const GIB: usize = 1 << 30;
        let pool = cuda_pool(0, None);
        let p = pool.allocate(Stream::DEFAULT, GIB, 256).unwrap();
        // SAFETY: `p` holds 1 GiB; freed in stream order after the fill.
        unsafe {
            cu::set_async(p, 3, GIB, Stream::DEFAULT).unwrap();
            pool.deallocate(Stream::DEFAULT, p, GIB, 256).unwrap();
        }
        let device = cu::current_device().unwrap();
        let (before, _) = cu::mem_info(device).unwrap();
        assert_eq!(pool.release_unused().unwrap(), GIB);
        let (after, _) = cu::mem_info(device).unwrap();
        assert!(
            after >= before + GIB - 64 * MIB,
            "free memory {before} -> {after}"
        );
        assert_eq!(pool.pool_size(), 0);
        // Still usable: it grows again.
        let q = pool.allocate(Stream::DEFAULT, MIB, 256).unwrap();
        // SAFETY: from allocate above; nothing uses it.
        unsafe { pool.deallocate(Stream::DEFAULT, q, MIB, 256).unwrap() };
    }

    /// A block freed on another thread's per-thread default stream is reused in order.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn per_thread_default_streams_of_two_threads() {
        crate::testing::require_gpu();
        let pool = cuda_pool(MIB, Some(MIB));
        let p = std::thread::scope(|s| {
            s.spawn(|| {
                let p = pool.allocate(Stream::PER_THREAD, MIB, 256).unwrap();
                // SAFETY: `p` holds 1 MiB; the free is ordered after the fills on this PTDS.
                unsafe {
                    for i in 0..20u8 {
                        cu::set_async(p, i, MIB, Stream::PER_THREAD).unwrap();
                    }
                    cu::set_async(p, 0xc3, MIB, Stream::PER_THREAD).unwrap();
                    pool.deallocate(Stream::PER_THREAD, p, MIB, 256).unwrap();
                }
                p as usize
            })
            .join()
            .unwrap()
        });
        let q = pool.allocate(Stream::PER_THREAD, MIB, 256).unwrap();
        assert_eq!(q as usize, p);
        let mut back = [0u8; 16];
        // SAFETY: `q` holds 1 MiB; `back` lives until the stream is synchronized.
        unsafe { cu::copy_async(back.as_mut_ptr(), q, 16, Stream::PER_THREAD).unwrap() };
        Stream::PER_THREAD.synchronize().unwrap();
        assert_eq!(back, [0xc3; 16]);
        // SAFETY: from allocate above; the work on it is finished.
        unsafe { pool.deallocate(Stream::PER_THREAD, q, MIB, 256).unwrap() };
    }
}
