use super::*;
use crate::mr::detail::stream_ordered::model::{
    drive, fake_stream, stress_threads, Counts, ModelUpstream, Op, RecordingSyncer, Subject,
};
use crate::mr::{
    PoolMemoryResource, PoolStatistics, SimulatedMemoryResource, SystemMemoryResource,
};
use proptest::prelude::*;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn simulated(
    min: u32,
    max: u32,
) -> (
    BinningMemoryResource,
    RecordingSyncer,
    SimulatedMemoryResource,
) {
    let syncer = RecordingSyncer::new(20, 0xb1b1);
    let device = SimulatedMemoryResource::new(96 * MIB).unwrap();
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    ));
    let mr =
        BinningMemoryResource::build_with_exponents(upstream, min, max, Arc::new(syncer.clone()))
            .unwrap();
    (mr, syncer, device)
}

fn fixed(r: &AnyResource) -> &FixedSizeMemoryResource {
    r.downcast_ref::<FixedSizeMemoryResource>()
        .expect("an owned bin is fixed-size")
}

/// Bytes used in each bin, smallest first.
fn used_per_bin(mr: &BinningMemoryResource) -> Vec<usize> {
    mr.bin_resources()
        .iter()
        .map(|(_, r)| fixed(r).statistics().bytes_used)
        .collect()
}

#[test]
fn requests_go_to_the_smallest_bin_that_holds_them() {
    let (mr, _syncer, device) = simulated(10, 12);
    let sizes: Vec<usize> = mr.bin_resources().iter().map(|(s, _)| *s).collect();
    assert_eq!(sizes, [KIB, 2 * KIB, 4 * KIB]);
    let s = fake_stream(1);
    let before = device.usage().allocated_bytes;
    assert_eq!(
        before,
        128 * (KIB + 2 * KIB + 4 * KIB),
        "each bin preallocates 128 blocks"
    );
    let cases = [(1, 0), (KIB, 0), (KIB + 1, 1), (4 * KIB, 2)];
    for (bytes, bin) in cases {
        let p = mr.allocate(s, bytes, 256).unwrap();
        let mut expected = vec![0; 3];
        expected[bin] = sizes[bin];
        assert_eq!(used_per_bin(&mr), expected, "{bytes} bytes");
        // SAFETY: from allocate above with these arguments.
        unsafe { mr.deallocate(s, p, bytes, 256).unwrap() };
    }
    let big = mr.allocate(s, 4 * KIB + 1, 256).unwrap();
    assert_eq!(used_per_bin(&mr), [0, 0, 0]);
    assert_eq!(
        device.usage().allocated_bytes,
        before + 4 * KIB + 256,
        "the upstream served it"
    );
    // SAFETY: from allocate above with these arguments.
    unsafe { mr.deallocate(s, big, 4 * KIB + 1, 256).unwrap() };
    assert_eq!(device.usage().allocated_bytes, before);
    assert!(mr.allocate(s, 0, 256).unwrap().is_null());
    assert!(matches!(
        mr.allocate(s, 1, 3),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn alignment_padding_picks_a_bin_with_room() {
    let (mr, ..) = simulated(10, 12);
    let s = fake_stream(1);
    // 1000 bytes at 2 KiB alignment need up to 1000 + 1792 bytes of a block: the 4 KiB bin.
    let p = mr.allocate(s, 1000, 2 * KIB).unwrap();
    assert_eq!(p as usize % (2 * KIB), 0);
    assert_eq!(used_per_bin(&mr), [0, 0, 4 * KIB]);
    // SAFETY: from allocate above with these arguments.
    unsafe { mr.deallocate(s, p, 1000, 2 * KIB).unwrap() };
    assert_eq!(used_per_bin(&mr), [0, 0, 0]);
}

#[test]
fn bins_are_added_before_use_only() {
    let syncer = RecordingSyncer::default();
    let device = SimulatedMemoryResource::new(64 * MIB).unwrap();
    let mr =
        BinningMemoryResource::build(AnyResource::new(device.clone()), Arc::new(syncer.clone()));
    assert!(mr.bin_resources().is_empty());
    mr.add_bin(100, None).unwrap();
    mr.add_bin(256, None).unwrap();
    assert_eq!(mr.bin_resources().len(), 1, "100 rounds to 256: one bin");
    let pool = PoolMemoryResource::build(
        AnyResource::new(device),
        Some(MIB),
        None,
        Arc::new(syncer),
        CacheLimits::OFF,
    )
    .unwrap();
    mr.add_bin(256, Some(AnyResource::new(pool.clone())))
        .unwrap();
    assert!(
        !mr.bin_resources()[0]
            .1
            .is_equal(&AnyResource::new(pool.clone())),
        "as in RMM, the first bin of a size stays"
    );
    mr.add_bin(64 * KIB, Some(AnyResource::new(pool.clone())))
        .unwrap();
    assert!(matches!(
        mr.add_bin(0, None),
        Err(Error::InvalidArgument(_))
    ));
    let p = mr.allocate(fake_stream(1), 10 * KIB, 256).unwrap();
    assert_eq!(
        pool.statistics().bytes_used,
        10 * KIB,
        "the explicit bin served it"
    );
    let err = mr.add_bin(8 * KIB, None).unwrap_err();
    assert!(
        err.to_string().contains("before the first allocation"),
        "{err}"
    );
    // SAFETY: from allocate above with these arguments.
    unsafe { mr.deallocate(fake_stream(1), p, 10 * KIB, 256).unwrap() };
    assert_eq!(
        pool.statistics(),
        PoolStatistics {
            bytes_used: 0,
            ..pool.statistics()
        }
    );
    assert!(BinningMemoryResource::build_with_exponents(
        mr.upstream_resource().clone(),
        12,
        10,
        Arc::new(RecordingSyncer::default())
    )
    .is_err());
    assert!(BinningMemoryResource::build_with_exponents(
        mr.upstream_resource().clone(),
        1,
        70,
        Arc::new(RecordingSyncer::default())
    )
    .is_err());
}

#[test]
fn clones_share_and_compare() {
    let (mr, ..) = simulated(10, 11);
    let twin = mr.clone();
    assert!(mr.is_equal(&twin));
    assert!(!mr.is_equal(&simulated(10, 11).0));
    assert_eq!(mr.name(), "binning_memory_resource");
    assert_eq!(mr.access(), Access::DEVICE);
    let p = twin.allocate(fake_stream(2), 5, 256).unwrap();
    assert_eq!(used_per_bin(&mr), [KIB, 0]);
    // SAFETY: from the shared resource with these arguments.
    unsafe { mr.deallocate(fake_stream(2), p, 5, 256).unwrap() };
}

impl Subject for BinningMemoryResource {
    fn footprint(&self, ptr: usize, bytes: usize, alignment: usize) -> (usize, usize) {
        self.route(bytes, alignment, |r| match r {
            Target::Fixed(bin, _) => (bin.block_of(ptr).unwrap(), bin.block_size()),
            Target::Any(r) => match r.downcast_ref::<FixedSizeMemoryResource>() {
                Some(bin) => (bin.block_of(ptr).unwrap(), bin.block_size()),
                None => (ptr, align_up(bytes, DEFAULT_ALIGNMENT).unwrap()),
            },
        })
    }
    fn must_fail(&self, _bytes: usize, _alignment: usize) -> Option<fn(&Error) -> bool> {
        None
    }
    fn check_accounting(&self, held: usize) {
        let mut in_bins = 0;
        for (_, r) in self.bin_resources() {
            let s = fixed(&r).statistics();
            assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
            in_bins += s.bytes_used;
        }
        assert!(in_bins <= held, "bins hold {in_bins} of {held} bytes");
    }
    fn release(&self) -> Result<usize> {
        self.bin_resources()
            .iter()
            .map(|(_, r)| fixed(r).release_unused())
            .sum()
    }
    fn check_books(&self) {
        for (_, r) in self.bin_resources() {
            let s = fixed(&r).statistics();
            assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
        }
    }
}

/// Cases × operations of the property test: 256 × 4096 ≈ 10^6 random operations.
const CASES: u32 = 256;
const OPS: usize = 4096;

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(CASES), ..ProptestConfig::default() })]

    /// Random allocate/free/release on six streams, bins 2^min..2^max over a simulated device and
    /// larger requests to the device: no overlap, alignment honoured, stream order kept, everything
    /// back upstream once the resource is dropped.
    #[test]
    fn random_operations_keep_every_promise(
        ops in proptest::collection::vec(any::<Op>(), OPS),
        min in 8u32..12,
        span in 0u32..5,
    ) {
        let (mr, syncer, device) = simulated(min, min + span);
        drive(&mr, &syncer, &ops).map_err(TestCaseError::fail)?;
        for (_, bin) in mr.bin_resources() {
            fixed(&bin).check_invariants();
        }
        drop(mr);
        prop_assert_eq!(device.usage().allocated_bytes, 0, "every bin gave its chunks back");
    }
}

#[test]
fn sixteen_threads_on_host_memory() {
    let syncer = RecordingSyncer::new(10, 44);
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(SystemMemoryResource::new()),
        &syncer,
    ));
    let mr = BinningMemoryResource::build_with_exponents(upstream, 8, 12, Arc::new(syncer.clone()))
        .unwrap();
    stress_threads(&mr, &syncer, 16, 2000, 16 * KIB);
    assert!(used_per_bin(&mr).iter().all(|&u| u == 0));
}

mod gpu {
    use super::*;
    use crate::mr::test_harness::resource_tests;
    use crate::mr::{CudaAsyncMemoryResource, CudaMemoryResource};

    // RMM's benchmark configuration: bins of 256 KiB to 4 MiB, larger requests to the upstream.
    resource_tests!(over_cuda, || {
        BinningMemoryResource::with_exponents(AnyResource::new(CudaMemoryResource::new()), 18, 22)
            .map(AnyResource::new)
    });
    resource_tests!(over_cuda_async, || {
        let upstream = AnyResource::new(CudaAsyncMemoryResource::new()?);
        BinningMemoryResource::with_exponents(upstream, 18, 22).map(AnyResource::new)
    });
    resource_tests!(over_pool, || {
        let pool =
            PoolMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, None)?;
        BinningMemoryResource::with_exponents(AnyResource::new(pool), 18, 22).map(AnyResource::new)
    });
}

/// RMM's `BinningTest.ZeroByteAllocationsUseBinResource`: zero bytes go to the smallest bin, and so
/// does their free, though the null they give is no allocation.
#[test]
fn zero_byte_allocations_and_their_frees_reach_the_smallest_bin() {
    let probe = Arc::new(crate::testing::Probe::new(crate::Access::HOST));
    let mr = BinningMemoryResource::new(AnyResource::new(SystemMemoryResource::new()));
    mr.add_bin(1024, Some(AnyResource::from_arc(probe.clone())))
        .unwrap();
    let p = mr.allocate(Stream::DEFAULT, 0, 256).unwrap();
    assert!(p.is_null());
    assert_eq!(probe.allocations(), 1, "the bin was asked");
    // SAFETY: the null of a zero-byte allocation.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 0, 256).unwrap() };
    assert_eq!(
        probe.live.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the bin got the free"
    );
    // A real allocation is still checked at its free.
    let q = mr.allocate(Stream::DEFAULT, 512, 256).unwrap();
    // SAFETY: the wrong size is refused before anything is freed.
    assert!(unsafe { mr.deallocate(Stream::DEFAULT, q, 0, 256) }.is_err());
    // SAFETY: from allocate above.
    unsafe { mr.deallocate(Stream::DEFAULT, q, 512, 256).unwrap() };
}

/// Driver calls (as the recording syncer counts them) of binning's one-thread random churn per
/// kind of stream, in the two shapes the benchmarks run: `steady`, the Rust example's (sizes up to 1 MiB under a 256 MiB cap, one
/// thread all along), and `threads`, the C++ peer benchmark's (a warm-up on this thread, then runs
/// of 10,000 allocations up to 1 MiB, each on a new thread; on streams made elsewhere a new stream
/// per thread). Returns, per kind, the counts per 1000 steps as "name value" pairs.
fn churn_driver_calls(shape: &str) -> Vec<(&'static str, Counts, f64)> {
    use crate::mr::detail::stream_ordered::model::fake_foreign_stream;
    use crate::mr::detail::stream_ordered::CLOSE_FREES;
    type StreamOf = fn(usize) -> Stream;
    let kinds: [(&'static str, StreamOf); 4] = [
        ("own", |_| fake_stream(1)),
        ("legacy", |_| Stream::DEFAULT),
        ("ptds", |_| Stream::PER_THREAD),
        ("foreign", fake_foreign_stream),
    ];
    let mut out = Vec::new();
    for (kind, stream_of) in kinds {
        let syncer = RecordingSyncer::default();
        let device = AnyResource::new(SimulatedMemoryResource::new(64 << 30).unwrap());
        let pool = PoolMemoryResource::build(
            device,
            Some(1 << 30),
            None,
            Arc::new(syncer.clone()),
            CacheLimits::DEFAULT,
        )
        .unwrap();
        pool.set_close_frees(CLOSE_FREES);
        let mr = BinningMemoryResource::build_with_exponents(
            AnyResource::new(pool),
            18,
            22,
            Arc::new(syncer.clone()),
        )
        .unwrap();
        mr.set_close_frees(CLOSE_FREES);
        let churn = |stream: Stream, seed: u64, steps: u64, allocations: u64, cap: usize| {
            let mut gen = crate::testing::SplitMix64(seed);
            let mut live: Vec<(*mut u8, usize)> = Vec::new();
            let (mut usage, mut made) = (0usize, 0u64);
            for _ in 0..steps {
                let size = 1 + (gen.next_u64() % MIB as u64) as usize;
                let heads = gen.unit() < 0.73;
                if made < allocations && usage + size <= cap && (live.is_empty() || heads) {
                    live.push((mr.allocate(stream, size, 256).unwrap(), size));
                    usage += size;
                    made += 1;
                } else if !live.is_empty() {
                    let i = (gen.next_u64() % live.len() as u64) as usize;
                    let (p, size) = live.swap_remove(i);
                    // SAFETY: `p` came from `mr` with this size and is freed once.
                    unsafe { mr.deallocate(stream, p, size, 256).unwrap() };
                    usage -= size;
                }
            }
            let n = live.len() as u64;
            for (p, size) in live {
                // SAFETY: as above.
                unsafe { mr.deallocate(stream, p, size, 256).unwrap() };
            }
            steps + n
        };
        let (before, steps) = match shape {
            "steady" => {
                let s = stream_of(0);
                churn(s, 1, 20_000, u64::MAX, 256 * MIB);
                let before = syncer.counts();
                (before, churn(s, 2, 100_000, u64::MAX, 256 * MIB))
            }
            _ => {
                churn(stream_of(0), 1, 20_000, 10_000, 16_000 * MIB);
                let before = syncer.counts();
                let steps = (1..=3)
                    .map(|run| {
                        let churn = &churn;
                        std::thread::scope(|s| {
                            s.spawn(move || {
                                churn(stream_of(run), 1 + run as u64, 20_000, 10_000, 16_000 * MIB)
                            })
                            .join()
                            .unwrap()
                        })
                    })
                    .sum();
                (before, steps)
            }
        };
        let after = syncer.counts();
        let c = Counts {
            stream_waits: after.stream_waits - before.stream_waits,
            marker_waits: after.marker_waits - before.marker_waits,
            markers: after.markers - before.markers,
            syncs: after.syncs - before.syncs,
            idle_queries: after.idle_queries - before.idle_queries,
            device_syncs: after.device_syncs - before.device_syncs,
            stream_ids: after.stream_ids - before.stream_ids,
            capture_queries: after.capture_queries - before.capture_queries,
        };
        out.push((kind, c, 1000.0 / steps as f64));
    }
    out
}

/// Issue 27: binning's one-thread random churn makes no driver call per step on its own stream and
/// the legacy stream; on PTDS and streams made elsewhere one event per hundred steps at most, and on
/// the latter one stream-id query per step (its key); a device-wide synchronization at most once in
/// 10,000 steps when the thread changes. Bounds about twice the counts measured when written.
#[test]
fn driver_calls_of_one_threads_random_churn_per_kind_of_stream() {
    for shape in ["steady", "threads"] {
        for (kind, c, per_k) in churn_driver_calls(shape) {
            let k = |n: u64| n as f64 * per_k;
            let seen = format!(
                "{shape} {kind}: per 1000 steps: {:.2} events, {:.2} marker waits, {:.2} stream waits, {:.2} capture queries, {:.3} device syncs, {:.2} ids, {:.2} host syncs, {:.2} idle queries",
                k(c.markers),
                k(c.marker_waits),
                k(c.stream_waits),
                k(c.capture_queries),
                k(c.device_syncs),
                k(c.stream_ids),
                k(c.syncs),
                k(c.idle_queries)
            );
            eprintln!("{seen}");
            let named = matches!(kind, "own" | "legacy");
            let (events, waits) = match shape {
                "steady" => (10.0, 1.0),
                _ => (20.0, 20.0),
            };
            if named {
                assert_eq!(
                    k(c.markers + c.marker_waits + c.stream_waits + c.device_syncs),
                    0.0,
                    "{seen}"
                );
            } else {
                assert!(
                    k(c.markers) <= events && k(c.marker_waits) <= waits,
                    "{seen}"
                );
                assert!(k(c.capture_queries) <= 2.0 * events, "{seen}");
                assert!(k(c.device_syncs) <= 0.1, "{seen}");
            }
            assert!(
                k(c.stream_ids) <= if kind == "foreign" { 1010.0 } else { 0.0 },
                "{seen}"
            );
            assert_eq!(k(c.syncs + c.idle_queries), 0.0, "{seen}");
        }
    }
}

/// The bin of a request is the smallest that holds it with its alignment padding, found by
/// exponents for bins made from exponents and by search for any other sizes.
#[test]
fn requests_find_their_bin_by_exponent_and_by_search() {
    let upstream = AnyResource::new(SystemMemoryResource::new());
    let by_exponents = BinningMemoryResource::with_exponents(upstream.clone(), 10, 13).unwrap();
    let uneven = BinningMemoryResource::new(upstream.clone());
    for size in [1024, 3072, 4096, 8192] {
        uneven.add_bin(size, None).unwrap();
    }
    let expect_exponents = [
        (0, 0),
        (1, 0),
        (1024, 0),
        (1025, 1),
        (2048, 1),
        (4097, 3),
        (8192, 3),
        (8193, 4),
    ];
    let expect_uneven = [
        (0, 0),
        (1024, 0),
        (1025, 1),
        (3072, 1),
        (3073, 2),
        (8192, 3),
        (8193, 4),
    ];
    for (mr, expected) in [
        (&by_exponents, &expect_exponents[..]),
        (&uneven, &expect_uneven[..]),
    ] {
        // The first allocation freezes the bins.
        let p = mr.allocate(Stream::DEFAULT, 256, 256).unwrap();
        let frozen = mr.inner.frozen.get().unwrap();
        assert_eq!(
            frozen.first_exponent.is_some(),
            std::ptr::eq(mr, &by_exponents)
        );
        for &(needed, bin) in expected {
            assert_eq!(frozen.bin_for(needed), bin, "{needed} bytes");
        }
        assert_eq!(
            frozen.bin_for(usize::MAX),
            frozen.sizes.len(),
            "the upstream"
        );
        // Aligned to 2048, 300 bytes need a bin of 300 + 1792 (4096 and 3072 bytes here).
        let q = mr.allocate(Stream::DEFAULT, 300, 2048).unwrap();
        assert_eq!(q as usize % 2048, 0);
        // SAFETY: both from `mr` with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, q, 300, 2048).unwrap();
            mr.deallocate(Stream::DEFAULT, p, 256, 256).unwrap();
        }
    }
}
