//! The allocation workloads of docs/benchmarks.md, beside RMM 26.10's
//! (benchmarks/peer/rmm_peer_bench.cpp runs the same ones through RMM's C++ library):
//!
//! - `pair256/<resource>/<threads>`: allocate + free 256 bytes, each thread on its own stream;
//! - `random/<resource>/<threads>`: RMM's random-allocations workload (73% chance to allocate a size
//!   uniform in [1, 1 MiB] while under the allocation count and the usage cap, else free a random live
//!   allocation), 10 000 allocations per thread, the same splitmix64 sequence as the C++ side;
//! - `pair256/empty/<threads>`: the same loop through a resource that does nothing (the floor).
//!
//! Each benchmark's throughput is set to the number of operations (pairs or random steps, over all
//! threads) of one iteration, so time ÷ elements is the aggregate ns per operation, the C++ column.
//! Run on the GPU machine by scripts/bench-gpu-run.sh. Without a GPU (host mode) the same workloads
//! run over host-mode variants, marked as such in `resources`: the pool, binning and arena over a
//! simulated device (the default stream for every thread), each also with unchecked frees (the
//! `-unchecked` lines: what the live-allocation index costs), system memory and the simulated
//! device itself.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use rmm_core::cuda::{self, OwnedStream, Stream, StreamFlags};
use rmm_core::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, CudaAsyncMemoryResource, CudaMemoryResource, FreeChecks,
    PoolMemoryResource, SimulatedMemoryResource, SystemMemoryResource,
};
use rmm_core::{Access, AnyResource, MemoryResource, Result, DEFAULT_ALIGNMENT};

const THREADS: [usize; 3] = [1, 4, 16];
const RANDOM_ALLOCATIONS: usize = 10_000;
const RANDOM_MAX_SIZE: usize = 1 << 20;
const RANDOM_MAX_USAGE: usize = 16_000 << 20;

/// A resource that hands out one static address and frees nothing: dispatch cost alone.
struct EmptyResource;

static EMPTY_SLOT: [u8; 256] = [0; 256];

impl MemoryResource for EmptyResource {
    fn allocate(&self, _stream: Stream, _bytes: usize, _alignment: usize) -> Result<*mut u8> {
        Ok(EMPTY_SLOT.as_ptr().cast_mut())
    }
    unsafe fn deallocate(&self, _stream: Stream, _ptr: *mut u8, _bytes: usize, _alignment: usize) -> Result<()> {
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

/// The resources compared, as in RMM's benchmarks; each entry is one line.
fn resources() -> Vec<(&'static str, Factory)> {
    if cuda::is_host_mode() {
        return vec![
            ("pool", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(PoolMemoryResource::new(upstream, Some(1 << 30), None)?))
            }),
            // Host-mode variant of the GPU line below: fixed-size bins of 2^18..2^22 bytes over a pool.
            ("binning", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let pool = PoolMemoryResource::new(upstream, Some(1 << 30), None)?;
                Ok(AnyResource::new(BinningMemoryResource::with_exponents(AnyResource::new(pool), 18, 22)?))
            }),
            // The same two with RMM's unchecked frees: the price of the live-allocation index.
            ("pool-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(PoolMemoryResource::with_free_checks(upstream, Some(1 << 30), None, FreeChecks::Unchecked)?))
            }),
            ("binning-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let pool = PoolMemoryResource::with_free_checks(upstream, Some(1 << 30), None, FreeChecks::Unchecked)?;
                let binning = BinningMemoryResource::with_free_checks(AnyResource::new(pool), FreeChecks::Unchecked);
                for exponent in 18..=22 {
                    binning.add_bin(1 << exponent, None)?;
                }
                Ok(AnyResource::new(binning))
            }),
            ("arena", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                Ok(AnyResource::new(ArenaMemoryResource::new(upstream, Some(32 << 30), false)?))
            }),
            ("arena-unchecked", || {
                let upstream = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
                let options = ArenaOptions::default().arena_size(32 << 30).free_checks(FreeChecks::Unchecked);
                Ok(AnyResource::new(ArenaMemoryResource::with_options(upstream, options)?))
            }),
            ("system", || Ok(AnyResource::new(SystemMemoryResource::new()))),
            ("simulated", || Ok(AnyResource::new(SimulatedMemoryResource::new(64 << 30)?))),
        ];
    }
    vec![
        // As RMM's benchmark: the arena takes all free memory but 64 MiB.
        ("arena", || {
            let (free, _) = cuda::mem_info(cuda::current_device()?)?;
            let size = (free - (64 << 20)) & !(DEFAULT_ALIGNMENT - 1);
            Ok(AnyResource::new(ArenaMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), Some(size), false)?))
        }),
        ("binning", || {
            // As RMM's benchmark: fixed-size bins of 2^18..2^22 bytes over a pool.
            let pool = PoolMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, None)?;
            Ok(AnyResource::new(BinningMemoryResource::with_exponents(AnyResource::new(pool), 18, 22)?))
        }),
        ("cuda", || Ok(AnyResource::new(CudaMemoryResource::new()))),
        ("cuda_async", || Ok(AnyResource::new(CudaAsyncMemoryResource::new()?))),
        // As RMM's benchmark: a pool over cuda starting at half the free memory (the default).
        ("pool", || Ok(AnyResource::new(PoolMemoryResource::new(AnyResource::new(CudaMemoryResource::new()), None, None)?))),
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
        let p = mr.allocate(stream, 256, DEFAULT_ALIGNMENT).expect("256 B allocation");
        // SAFETY: `p` came from `mr` with these arguments.
        unsafe { mr.deallocate(stream, p, 256, DEFAULT_ALIGNMENT).expect("free") };
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
            live.push((mr.allocate(stream, size, DEFAULT_ALIGNMENT).expect("random allocation"), size));
            usage += size;
            allocations += 1;
        } else if !live.is_empty() {
            let i = (gen.next() % live.len() as u64) as usize;
            let (p, s) = live.swap_remove(i);
            // SAFETY: `p` came from `mr` with size `s`.
            unsafe { mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT).expect("free") };
            usage -= s;
        }
        ops += 1;
    }
    let leftover = live.len() as u64;
    for (p, s) in live {
        // SAFETY: `p` came from `mr` with size `s`.
        unsafe { mr.deallocate(stream, p, s, DEFAULT_ALIGNMENT).expect("free") };
    }
    ops + leftover
}

/// One stream per thread: owned non-blocking streams with a GPU, the default stream in host mode.
fn thread_streams(threads: usize) -> (Vec<OwnedStream>, Vec<Stream>) {
    if cuda::is_host_mode() {
        return (Vec::new(), vec![Stream::DEFAULT; threads]);
    }
    let owned: Vec<OwnedStream> =
        (0..threads).map(|_| OwnedStream::new(StreamFlags::NonBlocking).expect("stream")).collect();
    let streams = owned.iter().map(|s| s.stream()).collect();
    (owned, streams)
}

/// Runs `work(thread, stream)` on every thread at once; returns the wall time of the slowest.
fn run_threads(streams: &[Stream], work: &(dyn Fn(usize, Stream) + Sync)) -> Duration {
    let start = Barrier::new(streams.len() + 1);
    std::thread::scope(|scope| {
        for (t, &stream) in streams.iter().enumerate() {
            let start = &start;
            scope.spawn(move || {
                start.wait();
                work(t, stream);
            });
        }
        start.wait();
        Instant::now()
    })
    // `scope` returns once every worker has joined.
    .elapsed()
}

/// The resource, or `None` (and a note on stderr) when it cannot be made here.
fn make(name: &str, factory: Factory) -> Option<AnyResource> {
    factory().map_err(|e| eprintln!("skipping {name}: {e}")).ok()
}

fn bench(c: &mut Criterion) {
    let mut pairs = c.benchmark_group("pair256");
    for (name, factory) in resources().into_iter().chain([("empty", (|| Ok(AnyResource::new(EmptyResource))) as Factory)]) {
        let Some(mr) = make(name, factory) else { continue };
        for threads in THREADS {
            let (_owned, streams) = thread_streams(threads);
            pair_loop(&mr, streams[0], 1000);
            pairs.throughput(Throughput::Elements(threads as u64));
            pairs.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, _| {
                b.iter_custom(|iters| run_threads(&streams, &|_, stream| {
                    pair_loop(&mr, stream, iters);
                }));
            });
        }
    }
    pairs.finish();

    let mut random = c.benchmark_group("random");
    // One workload run takes milliseconds to seconds (cuda): ten flat samples, not a linear ramp.
    random.sample_size(10);
    random.sampling_mode(SamplingMode::Flat);
    for (name, factory) in resources() {
        let Some(mr) = make(name, factory) else { continue };
        for threads in THREADS {
            let (_owned, streams) = thread_streams(threads);
            let cap = RANDOM_MAX_USAGE / threads;
            let ops: u64 = (0..threads).map(|t| random_loop(&mr, streams[t], 1234 + t as u64, cap)).sum();
            random.throughput(Throughput::Elements(ops));
            random.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, _| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| run_threads(&streams, &|t, stream| {
                            random_loop(&mr, stream, 1234 + t as u64, cap);
                        }))
                        .sum()
                });
            });
        }
    }
    random.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
