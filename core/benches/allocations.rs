//! The allocation workloads of docs/benchmarks.md, beside RMM 26.10's
//! (benchmarks/peer/rmm_peer_bench.cpp runs the same ones through RMM's C++ library):
//!
//! - `pair256/<resource>.<kind>/<threads>`: allocate + free 256 bytes on the thread's stream;
//! - `random/<resource>.<kind>/<threads>`: RMM's random-allocations workload (73% chance to allocate
//!   a size uniform in [1, 1 MiB] while under the allocation count and the usage cap, else free a
//!   random live allocation), 10 000 allocations per thread, the same splitmix64 sequence as the
//!   C++ side;
//! - `rmmrandom/<resource>.<kind>/<threads>`: the shape of RMM's own `random_allocations -n 1000
//!   -m 4`: rounds of 2000 steps (1000 allocations of [1 B, 4 MiB], 73% chance to allocate, all freed
//!   by the end of the round), four rounds per thread (`rmmrandom` of the C++ side);
//! - `multistream/<resource>.<kind>/<threads>`: RMM's MULTI_STREAM_ALLOCATIONS shape reduced to the
//!   allocator: allocate 256 bytes on one of the thread's two streams, free it on the other;
//! - `pair256/empty.<kind>/<threads>`: the pair loop through a resource that does nothing (the
//!   floor);
//! - `stream_id/cuStreamGetId.foreign/<threads>` (GPU only): the driver call that names a stream
//!   made elsewhere, which the pool and binning make on each allocate and deallocate there.
//!
//! `<kind>` is the kind of stream every thread uses, as users pass them:
//! - `own`: streams we created (`OwnedStream`, RMM's `rmm::cuda_stream`), made before the threads;
//! - `foreign`: streams made elsewhere (`cuStreamCreate(NON_BLOCKING)` straight from the driver, as
//!   CuPy, PyTorch or `cudaStreamCreateWithFlags` make them), one per thread (two for
//!   `multistream`), created when the thread starts and destroyed when it ends;
//! - `legacy`: the legacy default stream (handle 0; `multistream` frees on `cudaStreamLegacy`, the
//!   other handle of the same stream);
//! - `ptds`: the per-thread default stream (`cudaStreamPerThread`).
//!
//! Each benchmark's throughput is set to the number of operations (pairs or random steps, over all
//! threads) of one iteration, so time ÷ elements is the aggregate ns per operation, the C++ column.
//! Run on the GPU machine by scripts/bench-gpu-run.sh. Without a GPU (host mode) the same workloads
//! run over host-mode variants, marked as such in `resources`: the pool, binning and arena over a
//! simulated device, each also with unchecked frees (the `-unchecked` lines: what the
//! live-allocation index costs), system memory and the simulated device itself; `own` streams
//! cannot exist there, and `foreign` ones are made-up handles that never reach a driver (the pools
//! see streams they did not create, which is what matters for their cost).
//! `RMM_BENCH_KINDS` (a comma list, default all) picks the kinds, `RMM_BENCH_RESOURCES` the resources,
//! `RMM_BENCH_WORKLOADS` (`pair256`, `multistream`, `random`, `rmmrandom`, `stream_id`; default all) the workloads: criterion's
//! filter skips measurements but not the warm-ups around them, which would fill a profile of one
//! workload with another's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use rmm_core::cuda::{self, OwnedStream, Stream, StreamFlags};
use rmm_core::mr::experimental::{
    Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend,
};
use rmm_core::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, CudaAsyncMemoryResource,
    CudaMemoryResource, FreeChecks, PoolMemoryResource, SimulatedMemoryResource,
    SystemMemoryResource,
};
use rmm_core::{Access, AnyResource, MemoryResource, Result, DEFAULT_ALIGNMENT};

const THREADS: [usize; 3] = [1, 4, 16];
const RANDOM_ALLOCATIONS: usize = 10_000;
const RANDOM_MAX_SIZE: usize = 1 << 20;
const RANDOM_MAX_USAGE: usize = 16_000 << 20;
/// `rmmrandom`: allocations per round, their largest size, rounds per thread and run.
const RMM_RANDOM_ALLOCATIONS: u64 = 1000;
const RMM_RANDOM_MAX_SIZE: u64 = 4 << 20;
const RMM_RANDOM_ROUNDS: u64 = 4;

/// A resource that hands out one static address and frees nothing: dispatch cost alone.
struct EmptyResource;

static EMPTY_SLOT: [u8; 256] = [0; 256];

impl MemoryResource for EmptyResource {
    fn allocate(&self, _stream: Stream, _bytes: usize, _alignment: usize) -> Result<*mut u8> {
        Ok(EMPTY_SLOT.as_ptr().cast_mut())
    }
    unsafe fn deallocate(
        &self,
        _stream: Stream,
        _ptr: *mut u8,
        _bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn access(&self) -> Access {
        Access::HOST_DEVICE
    }
    fn name(&self) -> &str {
        "empty"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        rmm_core::downcast::<Self>(other).is_some()
    }
}

type Factory = fn() -> Result<AnyResource>;

/// The resources compared, as in RMM's benchmarks, less those `RMM_BENCH_RESOURCES` (a comma or space
/// list) leaves out: criterion's filter would still run each one's warm-up.
fn resources() -> Vec<(&'static str, Factory)> {
    let wanted = std::env::var("RMM_BENCH_RESOURCES").unwrap_or_default();
    let mut all = all_resources();
    all.retain(|(name, _)| {
        wanted.trim().is_empty() || wanted.split([',', ' ']).any(|w| w == *name)
    });
    all
}

/// Every resource this machine can run.
fn all_resources() -> Vec<(&'static str, Factory)> {
    if cuda::is_host_mode() {
        return vec![
            ("pool", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(PoolMemoryResource::new(
                    upstream,
                    Some(1 << 30),
                    None,
                )?))
            }),
            // Host-mode variant of the GPU line below: fixed-size bins of 2^18..2^22 bytes over a pool.
            ("binning", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let pool = PoolMemoryResource::new(upstream, Some(1 << 30), None)?;
                Ok(AnyResource::new(BinningMemoryResource::with_exponents(
                    AnyResource::new(pool),
                    18,
                    22,
                )?))
            }),
            // The same two with RMM's unchecked frees: the price of the live-allocation index.
            ("pool-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(PoolMemoryResource::with_free_checks(
                    upstream,
                    Some(1 << 30),
                    None,
                    FreeChecks::Unchecked,
                )?))
            }),
            ("binning-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let pool = PoolMemoryResource::with_free_checks(
                    upstream,
                    Some(1 << 30),
                    None,
                    FreeChecks::Unchecked,
                )?;
                let binning = BinningMemoryResource::with_free_checks(
                    AnyResource::new(pool),
                    FreeChecks::Unchecked,
                );
                for exponent in 18..=22 {
                    binning.add_bin(1 << exponent, None)?;
                }
                Ok(AnyResource::new(binning))
            }),
            ("arena", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(ArenaMemoryResource::new(
                    upstream,
                    Some(32 << 30),
                    false,
                )?))
            }),
            ("arena-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let options = ArenaOptions::default()
                    .arena_size(32 << 30)
                    .free_checks(FreeChecks::Unchecked);
                Ok(AnyResource::new(ArenaMemoryResource::with_options(
                    upstream, options,
                )?))
            }),
            // Issue 28's pool over a simulated device of 2 MiB granules, 1 GiB mapped at first as
            // the pool line holds 1 GiB.
            ("expandable_pool", || {
                let device = Backend::Simulated(HostBackend {
                    capacity: Some(64 << 30),
                    granularity: 2 << 20,
                });
                let options = ExpandablePoolOptions::default()
                    .backend(device)
                    .initial_size(1 << 30);
                Ok(AnyResource::new(ExpandablePoolMemoryResource::new(
                    options,
                )?))
            }),
            ("system", || {
                Ok(AnyResource::new(SystemMemoryResource::new()))
            }),
            ("simulated", || {
                Ok(AnyResource::new(SimulatedMemoryResource::new(64 << 30)?))
            }),
        ];
    }
    vec![
        // As RMM's benchmark: the arena takes all free memory but 64 MiB.
        ("arena", || {
            let (free, _) = cuda::mem_info(cuda::current_device()?)?;
            let size = free.checked_sub(64 << 20).ok_or_else(|| {
                rmm_core::Error::invalid(format!("{free} bytes free, not 64 MiB"))
            })? & !(DEFAULT_ALIGNMENT - 1);
            Ok(AnyResource::new(ArenaMemoryResource::new(
                AnyResource::new(CudaMemoryResource::new()),
                Some(size),
                false,
            )?))
        }),
        ("binning", || {
            // As RMM's benchmark: fixed-size bins of 2^18..2^22 bytes over a pool.
            let pool =
                PoolMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, None)?;
            Ok(AnyResource::new(BinningMemoryResource::with_exponents(
                AnyResource::new(pool),
                18,
                22,
            )?))
        }),
        ("cuda", || Ok(AnyResource::new(CudaMemoryResource::new()))),
        ("cuda_async", || {
            Ok(AnyResource::new(CudaAsyncMemoryResource::new()?))
        }),
        // Issue 28's pool, half the free memory mapped at first as the pool line below holds.
        ("expandable_pool", || {
            let (free, _) = cuda::mem_info(cuda::current_device()?)?;
            let options = ExpandablePoolOptions::default()
                .initial_size((free / 2) & !(DEFAULT_ALIGNMENT - 1));
            Ok(AnyResource::new(ExpandablePoolMemoryResource::new(
                options,
            )?))
        }),
        // As RMM's benchmark: a pool over cuda starting at half the free memory (the default).
        ("pool", || {
            Ok(AnyResource::new(PoolMemoryResource::new(
                AnyResource::new(CudaMemoryResource::new()),
                None,
                None,
            )?))
        }),
    ]
}

/// splitmix64, as in the C++ peer, so both run the same sequence.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

fn pair_loop(mr: &AnyResource, stream: Stream, iters: u64) -> u64 {
    for _ in 0..iters {
        let p = mr
            .allocate(stream, 256, DEFAULT_ALIGNMENT)
            .expect("256 B allocation");
        // SAFETY: `p` came from `mr` with these arguments.
        unsafe {
            mr.deallocate(stream, p, 256, DEFAULT_ALIGNMENT)
                .expect("free")
        };
    }
    iters
}

/// Allocates on `alloc`, frees on `free` (the caller orders `free` after `alloc`'s work; with no
/// work queued, nothing to order).
fn multistream_loop(mr: &AnyResource, alloc: Stream, free: Stream, iters: u64) -> u64 {
    for _ in 0..iters {
        let p = mr
            .allocate(alloc, 256, DEFAULT_ALIGNMENT)
            .expect("256 B allocation");
        // SAFETY: `p` came from `mr` with these arguments.
        unsafe {
            mr.deallocate(free, p, 256, DEFAULT_ALIGNMENT)
                .expect("free")
        };
    }
    iters
}

fn random_loop(mr: &AnyResource, stream: Stream, seed: u64, usage_cap: usize) -> u64 {
    let mut gen = SplitMix64(seed);
    let mut live: Vec<(*mut u8, usize)> = Vec::with_capacity(RANDOM_ALLOCATIONS);
    let (mut usage, mut allocations, mut ops) = (0usize, 0usize, 0u64);
    for _ in 0..2 * RANDOM_ALLOCATIONS {
        let size = 1 + (gen.next() % RANDOM_MAX_SIZE as u64) as usize;
        let can_allocate = allocations < RANDOM_ALLOCATIONS && usage + size <= usage_cap;
        let heads = gen.unit() < 0.73;
        if can_allocate && (live.is_empty() || heads) {
            live.push((
                mr.allocate(stream, size, DEFAULT_ALIGNMENT)
                    .expect("random allocation"),
                size,
            ));
            usage += size;
            allocations += 1;
        } else if !live.is_empty() {
            let i = (gen.next() % live.len() as u64) as usize;
            let (p, s) = live.swap_remove(i);
            // SAFETY: `p` came from `mr` with size `s`.
            unsafe {
                mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT)
                    .expect("free")
            };
            usage -= s;
        }
        ops += 1;
    }
    let leftover = live.len() as u64;
    for (p, s) in live {
        // SAFETY: `p` came from `mr` with size `s`.
        unsafe {
            mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT)
                .expect("free")
        };
    }
    ops + leftover
}

/// `rmmrandom` (see the module comment): [`RMM_RANDOM_ROUNDS`] rounds; returns the steps.
fn rmm_random_loop(mr: &AnyResource, stream: Stream, seed: u64) -> u64 {
    let mut gen = SplitMix64(seed);
    let mut live: Vec<(*mut u8, usize)> = Vec::with_capacity(RMM_RANDOM_ALLOCATIONS as usize);
    for _ in 0..RMM_RANDOM_ROUNDS {
        let mut made = 0;
        for _ in 0..2 * RMM_RANDOM_ALLOCATIONS {
            let size = 1 + (gen.next() % RMM_RANDOM_MAX_SIZE) as usize;
            if live.is_empty() || (gen.next() % 100 < 73 && made < RMM_RANDOM_ALLOCATIONS) {
                let p = mr
                    .allocate(stream, size, DEFAULT_ALIGNMENT)
                    .expect("random allocation");
                live.push((p, size));
                made += 1;
            } else {
                let (p, s) = live.swap_remove((gen.next() % live.len() as u64) as usize);
                // SAFETY: `p` came from `mr` with size `s`.
                unsafe {
                    mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT)
                        .expect("free")
                };
            }
        }
        for (p, s) in live.drain(..) {
            // SAFETY: as above.
            unsafe {
                mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT)
                    .expect("free")
            };
        }
    }
    RMM_RANDOM_ROUNDS * 2 * RMM_RANDOM_ALLOCATIONS
}

/// The kinds of stream a benchmark thread can use (see the module comment).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Own,
    Foreign,
    Legacy,
    PerThread,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Own, Kind::Foreign, Kind::Legacy, Kind::PerThread];

    fn name(self) -> &'static str {
        match self {
            Kind::Own => "own",
            Kind::Foreign => "foreign",
            Kind::Legacy => "legacy",
            Kind::PerThread => "ptds",
        }
    }

    /// The kinds to run: `RMM_BENCH_KINDS` or all; `own` only with a GPU.
    fn selected() -> Vec<Kind> {
        let wanted = std::env::var("RMM_BENCH_KINDS").unwrap_or_default();
        Kind::ALL
            .into_iter()
            .filter(|k| wanted.is_empty() || wanted.split(',').any(|w| w.trim() == k.name()))
            .filter(|k| *k != Kind::Own || !cuda::is_host_mode())
            .collect()
    }
}

/// A stream made the way CuPy, PyTorch or `cudaStreamCreateWithFlags` make them: straight from the
/// driver, unknown to rmm; destroyed on drop. In host mode a made-up handle (no driver to ask).
struct ForeignStream(usize);

/// Made-up handles of host mode, unique per stream.
static NEXT_FAKE: AtomicUsize = AtomicUsize::new(0x7000_0000);

impl ForeignStream {
    fn new() -> Self {
        if cuda::is_host_mode() {
            return Self(NEXT_FAKE.fetch_add(0x100, Ordering::Relaxed));
        }
        cuda::set_current_device(cuda::current_device().expect("device")).expect("context");
        let mut raw: cudarc::driver::sys::CUstream = std::ptr::null_mut();
        let flags = cudarc::driver::sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: a context is current (set above); `raw` is a valid out-pointer.
        let status = unsafe { cudarc::driver::sys::cuStreamCreate(&mut raw, flags) };
        assert_eq!(
            status,
            cudarc::driver::sys::CUresult::CUDA_SUCCESS,
            "cuStreamCreate"
        );
        Self(raw as usize)
    }

    fn stream(&self) -> Stream {
        // SAFETY: a live stream of ours until drop (or a made-up handle in host mode, which only the
        // host-mode resources see).
        unsafe { Stream::from_raw(self.0) }
    }
}

impl Drop for ForeignStream {
    fn drop(&mut self) {
        if !cuda::is_host_mode() {
            // SAFETY: created by `new`, destroyed once.
            let _ = unsafe {
                cudarc::driver::sys::cuStreamDestroy_v2(self.0 as cudarc::driver::sys::CUstream)
            };
        }
    }
}

/// The streams of one benchmark configuration: `own` streams are made before the threads start
/// (two per thread, for `multistream`); the other kinds are found in the thread.
struct Streams {
    kind: Kind,
    own: Vec<OwnedStream>,
}

impl Streams {
    fn new(kind: Kind, threads: usize) -> Self {
        let own = match kind {
            Kind::Own => (0..2 * threads)
                .map(|_| OwnedStream::new(StreamFlags::NonBlocking).expect("stream"))
                .collect(),
            _ => Vec::new(),
        };
        Self { kind, own }
    }

    /// Runs `work(thread, first stream, second stream)` on every thread at once, after each made its
    /// streams; returns the wall time from the start until every thread's work is done (foreign
    /// streams are destroyed after that, when their threads end).
    fn run(&self, threads: usize, work: &(dyn Fn(usize, Stream, Stream) + Sync)) -> Duration {
        let start = Barrier::new(threads + 1);
        let end = Barrier::new(threads + 1);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let (start, end) = (&start, &end);
                scope.spawn(move || {
                    let foreign = (self.kind == Kind::Foreign)
                        .then(|| [ForeignStream::new(), ForeignStream::new()]);
                    let (a, b) = match self.kind {
                        Kind::Own => (self.own[2 * t].stream(), self.own[2 * t + 1].stream()),
                        Kind::Foreign => {
                            let f = foreign.as_ref().expect("made above");
                            (f[0].stream(), f[1].stream())
                        }
                        Kind::Legacy => (Stream::DEFAULT, Stream::LEGACY),
                        Kind::PerThread => (Stream::PER_THREAD, Stream::PER_THREAD),
                    };
                    start.wait();
                    work(t, a, b);
                    end.wait();
                    drop(foreign);
                });
            }
            start.wait();
            let began = Instant::now();
            end.wait();
            began.elapsed()
        })
    }
}

/// The resource, or `None` (and a note on stderr) when it cannot be made here.
fn make(name: &str, factory: Factory) -> Option<AnyResource> {
    factory()
        .map_err(|e| eprintln!("skipping {name}: {e}"))
        .ok()
}

/// True when `RMM_BENCH_WORKLOADS` (a comma or space list, default all) names `workload`.
fn workload_wanted(workload: &str) -> bool {
    let wanted = std::env::var("RMM_BENCH_WORKLOADS").unwrap_or_default();
    wanted.trim().is_empty() || wanted.split([',', ' ']).any(|w| w == workload)
}

fn bench(c: &mut Criterion) {
    let kinds = Kind::selected();
    let mut pairs = c.benchmark_group("pair256");
    let mut pair_resources = resources();
    pair_resources.push(("empty", (|| Ok(AnyResource::new(EmptyResource))) as Factory));
    if !workload_wanted("pair256") {
        pair_resources.clear();
    }
    for (name, factory) in pair_resources {
        for &kind in &kinds {
            // A fresh resource per kind of stream, as the C++ side (what one kind leaves behind
            // does not slow the next).
            let Some(mr) = make(name, factory) else {
                continue;
            };
            for threads in THREADS {
                let streams = Streams::new(kind, threads);
                streams.run(threads, &|_, a, _| {
                    pair_loop(&mr, a, 1000);
                });
                pairs.throughput(Throughput::Elements(threads as u64));
                pairs.bench_with_input(
                    BenchmarkId::new(format!("{name}.{}", kind.name()), threads),
                    &threads,
                    |b, _| {
                        b.iter_custom(|iters| {
                            streams.run(threads, &|_, a, _| {
                                pair_loop(&mr, a, iters);
                            })
                        });
                    },
                );
            }
        }
    }
    pairs.finish();

    let mut multi = c.benchmark_group("multistream");
    for (name, factory) in if workload_wanted("multistream") {
        resources()
    } else {
        Vec::new()
    } {
        for &kind in &kinds {
            // A fresh resource per kind of stream, as the C++ side (what one kind leaves behind
            // does not slow the next).
            let Some(mr) = make(name, factory) else {
                continue;
            };
            for threads in THREADS {
                let streams = Streams::new(kind, threads);
                multi.throughput(Throughput::Elements(threads as u64));
                multi.bench_with_input(
                    BenchmarkId::new(format!("{name}.{}", kind.name()), threads),
                    &threads,
                    |b, _| {
                        b.iter_custom(|iters| {
                            streams.run(threads, &|_, a, other| {
                                multistream_loop(&mr, a, other, iters);
                            })
                        });
                    },
                );
            }
        }
    }
    multi.finish();

    churn(c, &kinds, "random", &|mr, a, t, threads| {
        random_loop(mr, a, 1234 + t as u64, RANDOM_MAX_USAGE / threads)
    });
    churn(c, &kinds, "rmmrandom", &|mr, a, t, _| {
        rmm_random_loop(mr, a, 4321 + t as u64)
    });

    // What a stream made elsewhere costs per call before any allocator work: its id
    // (`cuStreamGetId`), asked on every allocate and deallocate because the driver hands a destroyed
    // stream's handle to the next stream made (docs/benchmarks.md). GPU only.
    if workload_wanted("stream_id") && !cuda::is_host_mode() {
        let mut ids = c.benchmark_group("stream_id");
        for threads in THREADS {
            let streams = Streams::new(Kind::Foreign, threads);
            ids.throughput(Throughput::Elements(threads as u64));
            ids.bench_with_input(
                BenchmarkId::new("cuStreamGetId.foreign", threads),
                &threads,
                |b, _| {
                    b.iter_custom(|iters| {
                        streams.run(threads, &|_, a, _| {
                            for _ in 0..iters {
                                std::hint::black_box(a.id().expect("cuStreamGetId"));
                            }
                        })
                    });
                },
            );
        }
        ids.finish();
    }
}

/// A churn workload (`random`, `rmmrandom`): `run(resource, stream, thread, threads)` runs one
/// thread's share and returns its steps.
fn churn(
    c: &mut Criterion,
    kinds: &[Kind],
    workload: &str,
    run: &(dyn Fn(&AnyResource, Stream, usize, usize) -> u64 + Sync),
) {
    if !workload_wanted(workload) {
        return;
    }
    let mut group = c.benchmark_group(workload);
    // One workload run takes milliseconds to seconds (cuda): ten flat samples, not a linear ramp.
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    for (name, factory) in resources() {
        for &kind in kinds {
            // A fresh resource per kind of stream, as the C++ side (what one kind leaves behind
            // does not slow the next).
            let Some(mr) = make(name, factory) else {
                continue;
            };
            for threads in THREADS {
                let streams = Streams::new(kind, threads);
                let ops = AtomicUsize::new(0);
                streams.run(threads, &|t, a, _| {
                    ops.fetch_add(run(&mr, a, t, threads) as usize, Ordering::Relaxed);
                });
                group.throughput(Throughput::Elements(ops.into_inner() as u64));
                group.bench_with_input(
                    BenchmarkId::new(format!("{name}.{}", kind.name()), threads),
                    &threads,
                    |b, _| {
                        b.iter_custom(|iters| {
                            (0..iters)
                                .map(|_| {
                                    streams.run(threads, &|t, a, _| {
                                        run(&mr, a, t, threads);
                                    })
                                })
                                .sum()
                        });
                    },
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
