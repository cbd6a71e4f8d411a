use super::*;
use crate::mr::detail::stream_ordered::model::{
    drive, fake_stream, stress_threads, ModelUpstream, Op, RecordingSyncer, Subject,
};
use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
use proptest::prelude::*;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn simulated(
    capacity: usize,
    block_size: usize,
    blocks: usize,
    cache: CacheLimits,
) -> (
    FixedSizeMemoryResource,
    RecordingSyncer,
    SimulatedMemoryResource,
) {
    let syncer = RecordingSyncer::new(30, 0x51ed);
    let device = SimulatedMemoryResource::new(capacity).unwrap();
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(device.clone()),
        &syncer,
    ));
    let mr = FixedSizeMemoryResource::build(
        upstream,
        block_size,
        blocks,
        Arc::new(syncer.clone()),
        cache,
    )
    .unwrap();
    (mr, syncer, device)
}

#[test]
fn arguments_are_checked_and_the_block_size_rounded() {
    let up = || AnyResource::new(SimulatedMemoryResource::new(64 * MIB).unwrap());
    let syncer = || -> Arc<dyn Syncer> { Arc::new(RecordingSyncer::default()) };
    let build = |bs, n| FixedSizeMemoryResource::build(up(), bs, n, syncer(), CacheLimits::DEFAULT);
    assert!(matches!(build(0, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(build(KIB, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        build(usize::MAX / 2, 4),
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        build(MIB, 128).unwrap_err().is_out_of_memory(),
        "128 MiB from a 64 MiB device"
    );
    let mr = build(1000, 8).unwrap();
    assert_eq!(mr.block_size(), 1024);
    assert_eq!(mr.blocks_to_preallocate(), 8);
    assert_eq!(
        mr.statistics().pool_size,
        8 * 1024,
        "the first chunk is preallocated"
    );
    assert_eq!(FixedSizeMemoryResource::DEFAULT_BLOCK_SIZE, MIB);
    assert_eq!(FixedSizeMemoryResource::DEFAULT_BLOCKS_TO_PREALLOCATE, 128);
}

#[test]
fn every_request_takes_one_block_and_chunks_follow() {
    let (mr, _syncer, device) = simulated(MIB, 4 * KIB, 4, CacheLimits::DEFAULT);
    let s = fake_stream(1);
    let blocks: Vec<*mut u8> = (0..4)
        .map(|i| mr.allocate(s, 1 + i * 1000, 256).unwrap())
        .collect();
    let st = mr.statistics();
    assert_eq!(
        (st.pool_size, st.bytes_used, st.upstream_blocks),
        (16 * KIB, 16 * KIB, 1)
    );
    let fifth = mr.allocate(s, 10, 8).unwrap();
    assert_eq!(
        mr.statistics().pool_size,
        32 * KIB,
        "one more chunk of 4 blocks"
    );
    assert_eq!(device.usage().allocated_bytes, 32 * KIB);
    for (i, &p) in blocks.iter().enumerate() {
        assert_eq!(
            p as usize % (4 * KIB),
            0,
            "blocks of one chunk are a block apart"
        );
        // SAFETY: from allocate above with these arguments.
        unsafe { mr.deallocate(s, p, 1 + i * 1000, 256).unwrap() };
    }
    // SAFETY: as above.
    unsafe { mr.deallocate(s, fifth, 10, 8).unwrap() };
    assert_eq!(mr.release_unused().unwrap(), 32 * KIB);
    assert_eq!(device.usage().allocated_bytes, 0);
}

#[test]
fn larger_requests_fail_clearly_and_the_resource_survives() {
    let (mr, ..) = simulated(MIB, 4 * KIB, 4, CacheLimits::DEFAULT);
    let s = fake_stream(1);
    let err = mr.allocate(s, 4 * KIB + 1, 256).unwrap_err();
    assert!(err.is_out_of_memory());
    assert!(err.to_string().contains("block size, 4096 bytes"), "{err}");
    assert!(mr.allocate(s, 0, 256).unwrap().is_null());
    assert!(matches!(
        mr.allocate(s, 16, 3),
        Err(Error::InvalidArgument(_))
    ));
    let p = mr.allocate(s, 4 * KIB, 256).unwrap();
    // SAFETY: from allocate above with these arguments.
    unsafe { mr.deallocate(s, p, 4 * KIB, 256).unwrap() };
}

#[test]
fn large_alignments_are_honoured_when_the_block_has_room() {
    let (mr, ..) = simulated(4 * MIB, 64 * KIB, 8, CacheLimits::DEFAULT);
    let s = fake_stream(1);
    let _skew = mr.allocate(s, 10, 256).unwrap();
    for shift in 9..=15 {
        let align = 1usize << shift;
        let bytes = 64 * KIB - (align - 256);
        let p = mr.allocate(s, bytes, align).unwrap();
        assert_eq!(p as usize % align, 0);
        // SAFETY: from allocate above with these arguments.
        unsafe { mr.deallocate(s, p, bytes, align).unwrap() };
    }
    let err = mr.allocate(s, 64 * KIB - 256, 1024).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("do not fit")),
        "{err}"
    );
    assert!(matches!(
        mr.allocate(s, 16, 128 * KIB),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        mr.statistics().bytes_used,
        64 * KIB,
        "only the skew is left"
    );
}

#[test]
fn blocks_move_between_streams_with_one_wait() {
    let (mr, syncer, _device) = simulated(MIB, 4 * KIB, 1, CacheLimits::DEFAULT);
    let (a, b) = (fake_stream(1), fake_stream(2));
    let p = mr.allocate(a, 100, 256).unwrap();
    // SAFETY: from allocate above with these arguments.
    unsafe { mr.deallocate(a, p, 100, 256).unwrap() };
    let again = mr.allocate(a, 100, 256).unwrap();
    assert_eq!(
        (again, syncer.counts().stream_waits),
        (p, 0),
        "same stream: no wait"
    );
    // SAFETY: as above.
    unsafe { mr.deallocate(a, again, 100, 256).unwrap() };
    let q = mr.allocate(b, 100, 256).unwrap();
    assert_eq!(q, p, "the one block moves to B");
    assert_eq!(syncer.model().waits, vec![(syncer.key(b), syncer.key(a))]);
    assert_eq!(mr.statistics().pool_size, 4 * KIB);
}

#[test]
fn clones_share_and_drop_returns_everything() {
    let (mr, _syncer, device) = simulated(MIB, 4 * KIB, 4, CacheLimits::DEFAULT);
    let twin = mr.clone();
    assert!(
        mr.is_equal(&twin) && !mr.is_equal(&simulated(MIB, 4 * KIB, 4, CacheLimits::DEFAULT).0)
    );
    let p = twin.allocate(fake_stream(1), 64, 256).unwrap();
    assert_eq!(mr.statistics().bytes_used, 4 * KIB);
    assert_eq!(mr.name(), "fixed_size_memory_resource");
    assert_eq!(mr.upstream_resource().name(), "model_upstream");
    // SAFETY: from the shared resource with these arguments.
    unsafe { mr.deallocate(fake_stream(1), p, 64, 256).unwrap() };
    drop(mr);
    assert_eq!(
        device.usage().allocated_bytes,
        16 * KIB,
        "the twin still holds the chunk"
    );
    drop(twin);
    assert_eq!(device.usage().allocated_bytes, 0);
}

impl Subject for FixedSizeMemoryResource {
    fn footprint(&self, ptr: usize, _bytes: usize, _alignment: usize) -> (usize, usize) {
        (self.block_of(ptr).unwrap(), self.block_size)
    }
    fn must_fail(&self, bytes: usize, alignment: usize) -> Option<fn(&Error) -> bool> {
        if bytes > self.block_size {
            Some(Error::is_out_of_memory)
        } else if bytes + alignment.saturating_sub(DEFAULT_ALIGNMENT) > self.block_size {
            Some(|e| matches!(e, Error::InvalidArgument(_)))
        } else {
            None
        }
    }
    fn check_accounting(&self, held: usize) {
        let s = self.statistics();
        assert_eq!(s.bytes_used, held, "bytes used vs the live blocks");
        assert_eq!(s.bytes_free, s.pool_size - s.bytes_used);
        assert_eq!(s.pool_size % self.block_size, 0, "whole blocks only");
    }
    fn check_books(&self) {
        let s = self.statistics();
        assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
    }
    fn release(&self) -> Result<usize> {
        self.release_unused()
    }
}

/// Cases × operations of the property test: 256 × 4096 ≈ 10^6 random operations.
const CASES: u32 = 256;
const OPS: usize = 4096;

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(CASES), ..ProptestConfig::default() })]

    /// Random allocate/free/release on six streams over a simulated device, block sizes from 4 KiB
    /// to 256 KiB (requests above the block size must fail with out-of-memory, alignments that do
    /// not fit with invalid-argument): no overlap, alignment honoured, stream order kept, exact
    /// accounting, everything back upstream after a release and after drop.
    #[test]
    fn random_operations_keep_every_promise(
        ops in proptest::collection::vec(any::<Op>(), OPS),
        block_kib in prop_oneof![Just(4usize), Just(16), Just(64), Just(256)],
        blocks in 1usize..32,
        cache in 0usize..3,
        release_at_end in any::<bool>(),
    ) {
        let cache = CacheLimits::ALL[cache];
        let (mr, syncer, device) = simulated(64 * MIB, block_kib * KIB, blocks, cache);
        drive(&mr, &syncer, &ops).map_err(TestCaseError::fail)?;
        mr.core.check_invariants();
        if release_at_end {
            mr.release_unused().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(mr.statistics().pool_size, 0);
            prop_assert_eq!(device.usage().allocated_bytes, 0);
        }
        drop(mr);
        prop_assert_eq!(device.usage().allocated_bytes, 0, "drop returns every chunk");
    }
}

#[test]
fn sixteen_threads_on_host_memory() {
    sixteen_threads_with(CacheLimits::DEFAULT);
}

/// The same with small shards: refills of whole blocks, evictions and shard-list reuse.
#[test]
fn sixteen_threads_on_host_memory_with_tight_shards() {
    sixteen_threads_with(CacheLimits::TIGHT);
}

fn sixteen_threads_with(cache: CacheLimits) {
    let syncer = RecordingSyncer::new(10, 43);
    let upstream = AnyResource::new(ModelUpstream::new(
        AnyResource::new(SystemMemoryResource::new()),
        &syncer,
    ));
    let mr =
        FixedSizeMemoryResource::build(upstream, 16 * KIB, 64, Arc::new(syncer.clone()), cache)
            .unwrap();
    stress_threads(&mr, &syncer, 16, 2000, 16 * KIB);
    mr.core.check_invariants();
    let size = mr.statistics().pool_size;
    assert_eq!(mr.release_unused().unwrap(), size);
}

mod gpu {
    use super::*;
    use crate::cuda::{self as cu, OwnedStream, StreamFlags};
    use crate::mr::test_harness::resource_tests;
    use crate::mr::{CudaAsyncMemoryResource, CudaMemoryResource, ManagedMemoryResource};

    const GIB: usize = 1 << 30;

    // The harness asks for up to 1 GiB at once: blocks of 1 GiB, two per chunk.
    resource_tests!(over_cuda, || {
        FixedSizeMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), GIB, 2)
            .map(AnyResource::new)
    });
    resource_tests!(over_managed, || {
        FixedSizeMemoryResource::new(AnyResource::new(ManagedMemoryResource::new()), GIB, 2)
            .map(AnyResource::new)
    });
    resource_tests!(over_cuda_async, || {
        let upstream = AnyResource::new(CudaAsyncMemoryResource::new()?);
        FixedSizeMemoryResource::new(upstream, GIB, 2).map(AnyResource::new)
    });

    fn cuda_blocks(block_size: usize, blocks: usize) -> FixedSizeMemoryResource {
        FixedSizeMemoryResource::new(
            AnyResource::new(CudaMemoryResource::new()),
            block_size,
            blocks,
        )
        .unwrap()
    }

    /// Fill on A, free on A, allocate the same block on B: B sees A's last write, in order.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn cross_stream_reuse_is_ordered_on_real_streams() {
        crate::testing::require_gpu();
        const SIZE: usize = 64 * MIB;
        let mr = cuda_blocks(SIZE, 1);
        let a = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let b = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let p = mr.allocate(a.stream(), SIZE, 256).unwrap();
        // SAFETY: `p` holds SIZE bytes; the free is ordered after the fills on A.
        unsafe {
            for i in 0..40u8 {
                cu::set_async(p, i, SIZE, a.stream()).unwrap();
            }
            cu::set_async(p, 0xe1, SIZE, a.stream()).unwrap();
            mr.deallocate(a.stream(), p, SIZE, 256).unwrap();
        }
        let q = mr.allocate(b.stream(), SIZE, 256).unwrap();
        assert_eq!(q, p, "one block only");
        let mut back = [0u8; 64];
        // SAFETY: `q` holds SIZE bytes; `back` lives until B is synchronized.
        unsafe { cu::copy_async(back.as_mut_ptr(), q.add(SIZE - 64), 64, b.stream()).unwrap() };
        b.synchronize().unwrap();
        assert!(back.iter().all(|&x| x == 0xe1), "B read {back:?}");
        // SAFETY: from allocate above; B's work on it is finished.
        unsafe { mr.deallocate(b.stream(), q, SIZE, 256).unwrap() };
    }

    /// 16 threads on their own streams; the books balance and every chunk can go back.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_threads_with_their_own_streams() {
        crate::testing::require_gpu();
        let mr = cuda_blocks(MIB, 64);
        std::thread::scope(|scope| {
            for t in 0..16usize {
                let mr = &mr;
                scope.spawn(move || {
                    let s = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
                    let mut live = Vec::new();
                    for k in 0..400usize {
                        if k % 3 != 2 {
                            let p = mr
                                .allocate(s.stream(), 1 + (k * 7919 + t) % MIB, 256)
                                .unwrap();
                            // SAFETY: `p` holds at least 64 bytes, used on `s` only.
                            unsafe { cu::set_async(p, t as u8, 64, s.stream()).unwrap() };
                            live.push((p, 1 + (k * 7919 + t) % MIB));
                        } else if let Some((p, bytes)) = live.pop() {
                            // SAFETY: from allocate above; the free is ordered after the fill.
                            unsafe { mr.deallocate(s.stream(), p, bytes, 256).unwrap() };
                        }
                    }
                    for (p, bytes) in live {
                        // SAFETY: as above.
                        unsafe { mr.deallocate(s.stream(), p, bytes, 256).unwrap() };
                    }
                    s.synchronize().unwrap();
                });
            }
        });
        let st = mr.statistics();
        assert_eq!(st.bytes_used, 0);
        assert_eq!(mr.release_unused().unwrap(), st.pool_size);
    }
}
