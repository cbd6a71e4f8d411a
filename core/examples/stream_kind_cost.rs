//! The CPU cost of the stream-ordered engine per kind of stream (issue 10), in host mode over a
//! simulated device: 256-byte allocate + free pairs on one stream, RMM's multi-stream shape
//! (allocate on one stream, free on another), RMM's random workload (one thread; a step is an
//! allocation or a free) as the peer benchmark runs it (`random`: sizes up to 1 MiB under a
//! 256 MiB cap) and as RMM's RANDOM_ALLOCATIONS_BENCH runs it with `-n 1000 -m 4` (`rmmrandom`:
//! rounds of 1000 allocations up to 4 MiB, all freed by the end of each), on the pool, binning,
//! the arena and the statistics and tracking adaptors over the pool, on the legacy default stream, the per-thread default stream and a made-up handle that the engine sees as a stream
//! made elsewhere. Times are the thread's CPU time, best of several rounds (a loaded machine
//! deschedules the thread); run it under `valgrind --tool=callgrind` for exact instruction counts
//! (every operation count is fixed, so two builds compare exactly).
//!
//! `cargo run --release -p rmm-core --example stream_kind_cost [ROUNDS] [OPS] [FILTER]` (FILTER: run
//! only the rows whose `resource shape` contains it, e.g. `pool pair.legacy`).

use rmm_core::cuda::Stream;
use rmm_core::mr::{
    ArenaMemoryResource, BinningMemoryResource, PoolMemoryResource, SimulatedMemoryResource,
    StatisticsResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::{AnyResource, MemoryResource, Result};

/// The calling thread's CPU time in nanoseconds.
fn cpu_ns() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

/// `arena_size`: the arena's (RMM's benchmarks give it nearly all of the device).
fn make(kind: &str, arena_size: usize) -> Result<AnyResource> {
    let device = AnyResource::new(SimulatedMemoryResource::new(64 << 30)?);
    if kind == "arena" {
        return Ok(AnyResource::new(ArenaMemoryResource::new(
            device,
            Some(arena_size),
            false,
        )?));
    }
    let pool = PoolMemoryResource::new(device, Some(1 << 30), None)?;
    Ok(match kind {
        "pool" => AnyResource::new(pool),
        "statistics" => AnyResource::new(StatisticsResourceAdaptor::new(pool)),
        "tracking" => AnyResource::new(TrackingResourceAdaptor::new(pool, false)),
        _ => AnyResource::new(BinningMemoryResource::with_exponents(
            AnyResource::new(pool),
            18,
            22,
        )?),
    })
}

/// `ops` allocations of 256 bytes on `alloc`, each freed at once on `free`.
fn pairs(mr: &AnyResource, alloc: Stream, free: Stream, ops: u64) -> Result<()> {
    for _ in 0..ops {
        let p = mr.allocate(alloc, 256, 256)?;
        // SAFETY: `p` came from `mr` with these arguments and is freed once.
        unsafe { mr.deallocate(free, p, 256, 256)? };
    }
    Ok(())
}

/// splitmix64 from `seed`: the generator of the benchmarks, so every build replays the same steps.
fn splitmix64(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// RMM's random workload on one stream, as `benches/allocations.rs` runs it (splitmix64, 73% chance
/// to allocate a size uniform in [1 B, 1 MiB] under a 256 MiB cap, else free a random live block):
/// `steps` steps, then the live blocks are freed.
fn random(mr: &AnyResource, stream: Stream, steps: u64) -> Result<()> {
    let mut next = splitmix64(1234);
    let mut live: Vec<(*mut u8, usize)> = Vec::new();
    let mut usage = 0usize;
    for _ in 0..steps {
        let size = 1 + (next() % (1 << 20)) as usize;
        let heads = ((next() >> 11) as f64 / (1u64 << 53) as f64) < 0.73;
        if usage + size <= 256 << 20 && (live.is_empty() || heads) {
            live.push((mr.allocate(stream, size, 256)?, size));
            usage += size;
        } else if !live.is_empty() {
            let (p, size) = live.swap_remove((next() % live.len() as u64) as usize);
            // SAFETY: `p` came from `mr` with this size and is freed once.
            unsafe { mr.deallocate(stream, p, size, 256)? };
            usage -= size;
        }
    }
    for (p, size) in live {
        // SAFETY: as above.
        unsafe { mr.deallocate(stream, p, size, 256)? };
    }
    Ok(())
}

/// RMM's RANDOM_ALLOCATIONS_BENCH as `random_allocations -n 1000 -m 4` runs it, one round after
/// another on one resource until `steps` steps: a round is 2000 steps, each an allocation (73 %
/// chance, while fewer than 1000 were made this round; size uniform in [1 B, 4 MiB]) or the free of
/// a random live one, so every round ends with nothing live.
fn rmm_random(mr: &AnyResource, stream: Stream, steps: u64) -> Result<()> {
    const ALLOCATIONS: u64 = 1000;
    let mut next = splitmix64(4321);
    let mut live: Vec<(*mut u8, usize)> = Vec::new();
    let mut done = 0;
    while done < steps {
        let mut made = 0;
        for _ in 0..2 * ALLOCATIONS {
            let size = 1 + (next() % (4 << 20)) as usize;
            if live.is_empty() || (next() % 100 < 73 && made < ALLOCATIONS) {
                live.push((mr.allocate(stream, size, 256)?, size));
                made += 1;
            } else {
                let (p, size) = live.swap_remove((next() % live.len() as u64) as usize);
                // SAFETY: `p` came from `mr` with this size and is freed once.
                unsafe { mr.deallocate(stream, p, size, 256)? };
            }
        }
        for (p, size) in live.drain(..) {
            // SAFETY: as above.
            unsafe { mr.deallocate(stream, p, size, 256)? };
        }
        done += 2 * ALLOCATIONS;
    }
    Ok(())
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let ops: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let filter = args.next().unwrap_or_default();
    // SAFETY: made-up handles, used below only in host mode, where no CUDA driver sees them.
    let (f1, f2) = unsafe { (Stream::from_raw(0x7000_0000), Stream::from_raw(0x7000_0100)) };
    // With a driver, the engine asks it for a foreign stream's id: a made-up handle would crash it.
    let host_mode = rmm_core::cuda::is_host_mode();
    if !host_mode {
        eprintln!("a CUDA driver is present: the rows of made-up foreign streams are left out");
    }
    let shapes: [(&str, Stream, Stream); 11] = [
        ("pair.legacy", Stream::DEFAULT, Stream::DEFAULT),
        ("pair.ptds", Stream::PER_THREAD, Stream::PER_THREAD),
        ("pair.foreign", f1, f1),
        ("multistream.legacy", Stream::DEFAULT, Stream::LEGACY),
        ("multistream.foreign", f1, f2),
        ("random.legacy", Stream::DEFAULT, Stream::DEFAULT),
        ("random.ptds", Stream::PER_THREAD, Stream::PER_THREAD),
        ("random.foreign", f1, f1),
        ("rmmrandom.legacy", Stream::DEFAULT, Stream::DEFAULT),
        ("rmmrandom.ptds", Stream::PER_THREAD, Stream::PER_THREAD),
        ("rmmrandom.foreign", f1, f1),
    ];
    println!(
        "| resource | shape | ns per pair or random step (thread CPU time, best of {rounds}) |"
    );
    println!("| --- | --- | ---: |");
    for resource in ["pool", "binning", "arena", "statistics", "tracking"] {
        for (shape, alloc, free) in shapes {
            if !format!("{resource} {shape}").contains(&filter)
                || (!host_mode && shape.ends_with("foreign"))
            {
                continue;
            }
            // Rounds of RMM's benchmark hold up to a few GiB at once.
            let arena_size = if shape.starts_with("rmmrandom") {
                16 << 30
            } else {
                1 << 30
            };
            let mr = make(resource, arena_size)?;
            let run = |n: u64| {
                if shape.starts_with("rmmrandom") {
                    rmm_random(&mr, alloc, n)
                } else if shape.starts_with("random") {
                    random(&mr, alloc, n)
                } else {
                    pairs(&mr, alloc, free, n)
                }
            };
            run(ops / 10)?;
            let mut best = f64::MAX;
            for _ in 0..rounds {
                let start = cpu_ns();
                run(ops)?;
                best = best.min((cpu_ns() - start) / ops as f64);
            }
            println!("| {resource} | {shape} | {best:.1} |");
        }
    }
    Ok(())
}
