//! What the statistics adaptor costs over a pool when several threads allocate at once: each of T
//! threads runs 256-byte allocate + free pairs on its own stream-less default stream, through the
//! pool and through a statistics adaptor over it; the report is the wall time per pair of the
//! whole run (all threads together), best of several rounds, and what the adaptor adds. On a
//! machine with fewer cores than T, the threads share cores and the times say how the adaptor's
//! lock behaves when its holder is descheduled, not how it scales.
//!
//! `cargo run --release -p rmm-core --example statistics_threads [ROUNDS] [PAIRS PER THREAD] [THREADS...]`

use std::time::Instant;

use rmm_core::cuda::Stream;
use rmm_core::mr::{PoolMemoryResource, SimulatedMemoryResource, StatisticsResourceAdaptor};
use rmm_core::{AnyResource, MemoryResource, Result};

/// Wall ns per pair over all `threads` threads, each running `pairs` pairs on `mr`.
fn run(mr: &AnyResource, threads: usize, pairs: u64) -> f64 {
    let barrier = std::sync::Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..pairs {
                    let p = mr.allocate(Stream::DEFAULT, 256, 256).unwrap();
                    // SAFETY: just allocated with these arguments, freed once.
                    unsafe { mr.deallocate(Stream::DEFAULT, p, 256, 256).unwrap() };
                }
                barrier.wait();
            });
        }
        // Started before the threads are let go: this thread may not run again until they end.
        let start = Instant::now();
        barrier.wait();
        barrier.wait();
        start.elapsed().as_nanos() as f64 / (threads as u64 * pairs) as f64
    })
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let pairs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let mut threads: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if threads.is_empty() {
        threads = vec![1, 2, 4, 16];
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("wall ns per 256 B pair, all threads together, best of {rounds} ({cores} cores)");
    println!("| threads | pool | statistics over the pool | added |");
    println!("| ---: | ---: | ---: | ---: |");
    for t in threads {
        let pool = PoolMemoryResource::new(
            AnyResource::new(SimulatedMemoryResource::new(64 << 30)?),
            Some(1 << 30),
            None,
        )?;
        let plain = AnyResource::new(pool.clone());
        let statistics = AnyResource::new(StatisticsResourceAdaptor::new(pool));
        let (mut a, mut b) = (f64::MAX, f64::MAX);
        for _ in 0..rounds {
            a = a.min(run(&plain, t, pairs));
            b = b.min(run(&statistics, t, pairs));
        }
        println!("| {t} | {a:.1} | {b:.1} | {:+.1} |", b - a);
    }
    Ok(())
}
