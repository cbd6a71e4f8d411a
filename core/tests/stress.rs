//! GPU stress run (issue 12): 16 threads × 16 streams (8 created by rmm, 8 created with the driver
//! behind rmm's back) × `RMM_STRESS_OPS` operations per thread on a pool, an arena, binning over a
//! pool, and cuda_async, each under a statistics adaptor: random sizes (1 B – 1 MiB, log-uniform),
//! memsets on the allocating stream, frees on other streams than the allocation's and on other
//! threads. Every call must succeed and, at the end, the statistics must show 0 bytes and 0
//! allocations outstanding.
//!
//! `RMM_STRESS_OPS` (default 2,000: a quick run inside the ordinary GPU suite; `scripts/gpu-run.sh
//! stress` sets 100,000) and `RMM_STRESS_SECONDS` (default 20: a time budget per resource; a run
//! cut short by it says so and still checks the books).
//!
//! (Its own test binary: the runner can start it alone.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cudarc::driver::sys;
use rmm_core::cuda::{self, OwnedStream, Stream, StreamFlags};
use rmm_core::mr::{
    ArenaMemoryResource, BinningMemoryResource, CudaAsyncMemoryResource, CudaMemoryResource,
    PoolMemoryResource, StatisticsResourceAdaptor,
};
use rmm_core::{AnyResource, MemoryResource};

const THREADS: usize = 16;
const OWN_STREAMS: usize = 8;
const FOREIGN_STREAMS: usize = 8;
/// Live blocks a thread holds at most.
const HELD: usize = 32;
const MIB: usize = 1 << 20;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A stream created with the driver, not by rmm (destroyed on drop).
struct Foreign(Stream);

impl Foreign {
    fn new() -> Self {
        let mut raw: sys::CUstream = std::ptr::null_mut();
        // SAFETY: a context is current (rmm made it for the resources); `raw` is a valid out-pointer.
        let status = unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        };
        assert_eq!(status, sys::CUresult::CUDA_SUCCESS, "cuStreamCreate");
        // SAFETY: a live stream handle, destroyed only in `drop`.
        Foreign(unsafe { Stream::from_raw(raw as usize) })
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        // SAFETY: the handle came from cuStreamCreate and is destroyed once.
        unsafe { sys::cuStreamDestroy_v2(self.0.as_raw() as sys::CUstream) };
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Default)]
struct Tally {
    ops: AtomicU64,
    cross_stream_frees: AtomicU64,
    cross_thread_frees: AtomicU64,
    memsets: AtomicU64,
}

/// One resource's run; panics on any error or on bytes left outstanding.
fn stress(name: &str, mr: &StatisticsResourceAdaptor, streams: &[Stream]) {
    let ops = env("RMM_STRESS_OPS", 2_000);
    let deadline = Instant::now() + Duration::from_secs(env("RMM_STRESS_SECONDS", 20));
    let cut = AtomicBool::new(false);
    let tally = Tally::default();
    // Blocks handed from one thread to another: (address, bytes, stream of the allocation).
    let exchange: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (tally, exchange, cut) = (&tally, &exchange, &cut);
            scope.spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) << 32));
                let mut held: Vec<(usize, usize, usize)> = Vec::new();
                let free = |p: usize, bytes: usize, s: usize, rng: &mut Rng, other_thread: bool| {
                    let on = rng.below(streams.len());
                    if on != s {
                        tally.cross_stream_frees.fetch_add(1, Ordering::Relaxed);
                    }
                    if other_thread {
                        tally.cross_thread_frees.fetch_add(1, Ordering::Relaxed);
                    }
                    // SAFETY: a live block of `mr` with this size; freeing it on another stream is
                    // the test's point (the work queued on its stream only raced with itself).
                    unsafe { mr.deallocate(streams[on], p as *mut u8, bytes, 256) }.unwrap_or_else(
                        |e| panic!("{name}: free of {bytes} bytes on stream {on}: {e}"),
                    );
                };
                for i in 0..ops {
                    if i % 256 == 0 && Instant::now() >= deadline {
                        cut.store(true, Ordering::Relaxed);
                        break;
                    }
                    let roll = rng.below(16);
                    if held.len() < HELD && (roll < 8 || held.is_empty()) {
                        let s = rng.below(streams.len());
                        let exponent = rng.below(21);
                        let bytes = (1usize << exponent) + rng.below(1 << exponent);
                        let bytes = bytes.min(MIB);
                        let p = mr.allocate(streams[s], bytes, 256).unwrap_or_else(|e| {
                            panic!("{name}: allocate {bytes} bytes on stream {s}: {e}")
                        });
                        if rng.below(8) == 0 {
                            // SAFETY: the first bytes of a live block, on its own stream.
                            unsafe { cuda::set_async(p, t as u8, bytes.min(64 << 10), streams[s]) }
                                .unwrap_or_else(|e| panic!("{name}: memset: {e}"));
                            tally.memsets.fetch_add(1, Ordering::Relaxed);
                        }
                        held.push((p as usize, bytes, s));
                    } else if roll == 15 {
                        // Hand a block to whichever thread looks next; take one if there is one.
                        let mut ex = exchange.lock().unwrap();
                        if let Some(b) = held.pop() {
                            ex.push(b);
                        }
                        if let Some((p, bytes, s)) = ex.pop() {
                            drop(ex);
                            free(p, bytes, s, &mut rng, true);
                        }
                    } else if !held.is_empty() {
                        let (p, bytes, s) = held.swap_remove(rng.below(held.len()));
                        free(p, bytes, s, &mut rng, false);
                    }
                    tally.ops.fetch_add(1, Ordering::Relaxed);
                }
                for (p, bytes, s) in held {
                    free(p, bytes, s, &mut rng, false);
                }
            });
        }
    });
    for (p, bytes, s) in exchange.into_inner().unwrap() {
        // SAFETY: a live block of `mr` with this size.
        unsafe { mr.deallocate(streams[s], p as *mut u8, bytes, 256) }.unwrap();
    }
    for s in streams {
        s.synchronize().unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (bytes, allocations) = mr.counters();
    let done = tally.ops.load(Ordering::Relaxed);
    println!(
        "stress {name}: {THREADS} threads x {} streams ({OWN_STREAMS} own, {FOREIGN_STREAMS} foreign): {done} operations \
         in {elapsed:.1} s ({:.0} ops/s){}; {} allocations, peak {} bytes; {} cross-stream and {} cross-thread frees, {} \
         memsets; outstanding: {} bytes in {} allocations",
        streams.len(),
        done as f64 / elapsed,
        if cut.load(Ordering::Relaxed) { format!(" (cut by the time budget: {ops} per thread asked)") } else { String::new() },
        allocations.total,
        bytes.peak,
        tally.cross_stream_frees.load(Ordering::Relaxed),
        tally.cross_thread_frees.load(Ordering::Relaxed),
        tally.memsets.load(Ordering::Relaxed),
        bytes.value,
        allocations.value,
    );
    assert_eq!(
        (bytes.value, allocations.value),
        (0, 0),
        "{name}: outstanding after every free"
    );
    assert!(done > 0, "{name}: nothing ran");
}

fn resources() -> Vec<(&'static str, AnyResource)> {
    let cuda = || AnyResource::new(CudaMemoryResource::new());
    let pool = || AnyResource::new(PoolMemoryResource::new(cuda(), Some(256 * MIB), None).unwrap());
    vec![
        ("pool", pool()),
        (
            "arena",
            AnyResource::new(ArenaMemoryResource::new(cuda(), Some(2048 * MIB), false).unwrap()),
        ),
        (
            "binning",
            AnyResource::new(BinningMemoryResource::with_exponents(pool(), 8, 18).unwrap()),
        ),
        (
            "cuda_async",
            AnyResource::new(CudaAsyncMemoryResource::new().unwrap()),
        ),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sixteen_threads_sixteen_streams_every_resource_balances() {
    assert!(
        cuda::is_available(),
        "this test needs a CUDA GPU (run scripts/gpu-run.sh on a GPU machine)"
    );
    let resources = resources();
    let own: Vec<OwnedStream> = (0..OWN_STREAMS)
        .map(|_| OwnedStream::new(StreamFlags::NonBlocking).unwrap())
        .collect();
    let foreign: Vec<Foreign> = (0..FOREIGN_STREAMS).map(|_| Foreign::new()).collect();
    let streams: Vec<Stream> = own
        .iter()
        .map(OwnedStream::stream)
        .chain(foreign.iter().map(|f| f.0))
        .collect();
    for (name, mr) in resources {
        let stats = StatisticsResourceAdaptor::new(mr);
        stress(name, &stats, &streams);
    }
}
