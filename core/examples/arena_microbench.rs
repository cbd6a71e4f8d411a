//! A quick timing loop for the arena resource (host only; the criterion benchmarks are elsewhere).
//!
//! Each thread keeps 32 live blocks and replaces a random one per step (one free + one allocate,
//! sizes 1 B .. 64 KiB, with a 1-in-64 chance of 1-3 MiB), on its own stream or on the shared
//! default stream. The upstream is a simulated device, so nothing here touches memory or CUDA.
//!
//! For comparison, the same arena is also driven through an emulation of RMM's locking: two
//! process-wide reader-writer locks taken for reading on every call (RMM's `arena_memory_resource`
//! takes a `shared_mutex` for its arena maps and one for the allocate/defragment phases). It is an
//! emulation of the locking only, not RMM itself.
//!
//! Run: `cargo run --release -p rmm-core --example arena_microbench [steps per thread]`.

use std::collections::HashMap;
use std::sync::{Barrier, RwLock};
use std::time::Instant;

use rmm_core::cuda::Stream;
use rmm_core::mr::{ArenaMemoryResource, SimulatedMemoryResource};
use rmm_core::{AnyResource, MemoryResource, Result};

const LIVE: usize = 32;

/// RMM's two shared locks around the same arena.
struct RmmStyleLocking {
    arena: ArenaMemoryResource,
    arena_maps: RwLock<HashMap<usize, usize>>,
    phase: RwLock<()>,
}

trait Alloc: Sync {
    fn alloc(&self, stream: Stream, bytes: usize) -> Result<*mut u8>;
    fn free(&self, stream: Stream, ptr: *mut u8, bytes: usize);
}

impl Alloc for ArenaMemoryResource {
    fn alloc(&self, stream: Stream, bytes: usize) -> Result<*mut u8> {
        self.allocate(stream, bytes, 256)
    }
    fn free(&self, stream: Stream, ptr: *mut u8, bytes: usize) {
        // SAFETY: the loop frees only what it allocated, with the same size.
        unsafe { self.deallocate(stream, ptr, bytes, 256) }.expect("free");
    }
}

impl Alloc for RmmStyleLocking {
    fn alloc(&self, stream: Stream, bytes: usize) -> Result<*mut u8> {
        let _found = self
            .arena_maps
            .read()
            .expect("lock")
            .get(&stream.as_raw())
            .copied();
        let _phase = self.phase.read().expect("lock");
        self.arena.allocate(stream, bytes, 256)
    }
    fn free(&self, stream: Stream, ptr: *mut u8, bytes: usize) {
        let _found = self
            .arena_maps
            .read()
            .expect("lock")
            .get(&stream.as_raw())
            .copied();
        let _phase = self.phase.read().expect("lock");
        // SAFETY: the loop frees only what it allocated, with the same size.
        unsafe { self.arena.deallocate(stream, ptr, bytes, 256) }.expect("free");
    }
}

/// Made-up stream handles: the simulated upstream means the arena never passes them to CUDA.
fn stream_for(thread: usize, shared: bool) -> Stream {
    if shared {
        Stream::DEFAULT
    } else if thread == 0 {
        Stream::PER_THREAD
    } else {
        // SAFETY: never reaches CUDA (see above).
        unsafe { Stream::from_raw(0x1000 * thread) }
    }
}

/// Steps per second over all threads.
fn run(mr: &dyn Alloc, threads: usize, steps: usize, shared_stream: bool) -> f64 {
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let barrier = &barrier;
            s.spawn(move || {
                let stream = stream_for(t, shared_stream);
                let mut rng = 0x2545_f491_4f6c_dd1du64 ^ ((t as u64 + 1) * 0x9e37_79b9);
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut live: Vec<(*mut u8, usize)> = vec![(std::ptr::null_mut(), 0); LIVE];
                barrier.wait();
                for _ in 0..steps {
                    let r = next();
                    let slot = (r % LIVE as u64) as usize;
                    let (p, bytes) = live[slot];
                    if !p.is_null() {
                        mr.free(stream, p, bytes);
                    }
                    let bytes = if (r >> 8) % 64 == 0 {
                        (1 << 20) + (r >> 20) as usize % (2 << 20)
                    } else {
                        1 + (r >> 20) as usize % (64 << 10)
                    };
                    live[slot] = (mr.alloc(stream, bytes).expect("allocate"), bytes);
                }
                for (p, bytes) in live {
                    if !p.is_null() {
                        mr.free(stream, p, bytes);
                    }
                }
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed();
    (threads * steps) as f64 / elapsed.as_secs_f64()
}

fn main() -> Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("arena microbenchmark: {steps} steps (free + allocate) per thread, {cores} cores");
    println!(
        "{:>8} {:>8} {:>16} {:>22} {:>7}",
        "threads", "streams", "arena Msteps/s", "RMM-style locks Msteps/s", "ratio"
    );
    for shared_stream in [false, true] {
        for threads in [1, 2, 4, 8, 16] {
            let fresh = || -> Result<ArenaMemoryResource> {
                let device = SimulatedMemoryResource::new(8 << 30)?;
                ArenaMemoryResource::new(AnyResource::new(device), Some(4 << 30), false)
            };
            let ours = run(&fresh()?, threads, steps, shared_stream);
            let emulated = RmmStyleLocking {
                arena: fresh()?,
                arena_maps: RwLock::new(HashMap::new()),
                phase: RwLock::new(()),
            };
            let theirs = run(&emulated, threads, steps, shared_stream);
            println!(
                "{threads:>8} {:>8} {:>16.2} {:>22.2} {:>7.2}",
                if shared_stream { "shared" } else { "own" },
                ours / 1e6,
                theirs / 1e6,
                ours / theirs
            );
        }
    }
    Ok(())
}
