use super::*;
use crate::mr::detail::stream_ordered::model::{
    drive, fake_stream, stress_threads, ModelUpstream, Op, RecordingSyncer, Subject,
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
            Target::Fixed(bin) => (bin.block_of(ptr).unwrap(), bin.block_size()),
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
    assert_eq!(probe.live.load(std::sync::atomic::Ordering::SeqCst), 0, "the bin got the free");
    // A real allocation is still checked at its free.
    let q = mr.allocate(Stream::DEFAULT, 512, 256).unwrap();
    // SAFETY: the wrong size is refused before anything is freed.
    assert!(unsafe { mr.deallocate(Stream::DEFAULT, q, 0, 256) }.is_err());
    // SAFETY: from allocate above.
    unsafe { mr.deallocate(Stream::DEFAULT, q, 512, 256).unwrap() };
}
