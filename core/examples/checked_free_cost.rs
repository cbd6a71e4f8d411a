//! What checked frees cost (issue 12): single-threaded allocate + free pairs of 256 bytes and a
//! random-size churn, on the pool, binning and arena with and without the live-allocation index,
//! in host mode over a simulated device; then what the statistics, limiting and tracking adaptors
//! add over a checked pool (since issue 30 the first two keep the same index of what they hand
//! out). Times are the thread's CPU time (not wall time: a loaded
//! machine deschedules the thread); the variants alternate, and each reports the best of several
//! rounds, so other jobs disturb the comparison as little as they can.
//!
//! `cargo run --release -p rmm-core --example checked_free_cost [ROUNDS]`

use rmm_core::cuda::Stream;
use rmm_core::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, FreeChecks, LimitingResourceAdaptor,
    PoolMemoryResource, SimulatedMemoryResource, StatisticsResourceAdaptor,
    TrackingResourceAdaptor,
};
use rmm_core::{AnyResource, MemoryResource, Result};

const PAIRS: u64 = 200_000;
const CHURN: u64 = 200_000;

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

fn device() -> Result<AnyResource> {
    Ok(AnyResource::new(SimulatedMemoryResource::new(64 << 30)?))
}

fn make(kind: &str, checks: FreeChecks) -> Result<AnyResource> {
    Ok(match kind {
        "pool" => AnyResource::new(PoolMemoryResource::with_free_checks(
            device()?,
            Some(1 << 30),
            None,
            checks,
        )?),
        "binning" => {
            let pool =
                PoolMemoryResource::with_free_checks(device()?, Some(1 << 30), None, checks)?;
            let binning = BinningMemoryResource::with_free_checks(AnyResource::new(pool), checks);
            for exponent in 18..=22 {
                binning.add_bin(1 << exponent, None)?;
            }
            AnyResource::new(binning)
        }
        _ => AnyResource::new(ArenaMemoryResource::with_options(
            device()?,
            ArenaOptions::default()
                .arena_size(16 << 30)
                .free_checks(checks),
        )?),
    })
}

/// ns per allocate + free pair of 256 bytes.
fn pairs(mr: &AnyResource) -> f64 {
    let start = cpu_ns();
    for _ in 0..PAIRS {
        let p = mr.allocate(Stream::DEFAULT, 256, 256).unwrap();
        // SAFETY: just allocated with these arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 256, 256).unwrap() };
    }
    (cpu_ns() - start) / PAIRS as f64
}

/// ns per operation of a churn: up to 1000 live allocations of 1 B..64 KiB, freed at random.
fn churn(mr: &AnyResource) -> f64 {
    let mut live: Vec<(*mut u8, usize)> = Vec::with_capacity(1024);
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let start = cpu_ns();
    for _ in 0..CHURN {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if live.len() < 1000 && (x % 2 == 0 || live.is_empty()) {
            let bytes = 1 + (x >> 16) as usize % (64 << 10);
            live.push((mr.allocate(Stream::DEFAULT, bytes, 256).unwrap(), bytes));
        } else {
            let (p, bytes) = live.swap_remove((x >> 32) as usize % live.len());
            // SAFETY: allocated above with these arguments.
            unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
        }
    }
    let elapsed = (cpu_ns() - start) / CHURN as f64;
    for (p, bytes) in live {
        // SAFETY: as above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
    }
    elapsed
}

fn main() -> Result<()> {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(15);
    println!("best of {rounds} rounds, thread CPU ns per pair (256 B) and per churn operation, one thread, host mode");
    println!("| resource | pair unchecked | pair checked | cost | churn unchecked | churn checked | cost |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for kind in ["pool", "binning", "arena"] {
        let unchecked = make(kind, FreeChecks::Unchecked)?;
        let checked = make(kind, FreeChecks::Checked)?;
        let mut best = [f64::MAX; 4];
        for _ in 0..rounds {
            best[0] = best[0].min(pairs(&unchecked));
            best[1] = best[1].min(pairs(&checked));
            best[2] = best[2].min(churn(&unchecked));
            best[3] = best[3].min(churn(&checked));
        }
        println!(
            "| {kind} | {:.1} | {:.1} | {:+.1} | {:.1} | {:.1} | {:+.1} |",
            best[0],
            best[1],
            best[1] - best[0],
            best[2],
            best[3],
            best[3] - best[2]
        );
    }
    println!();
    println!("| adaptor over a checked pool | pair | pair of the pool | cost | churn | churn of the pool | cost |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for kind in ["statistics", "limiting", "tracking"] {
        let pool = make("pool", FreeChecks::Checked)?;
        let adaptor = match kind {
            "statistics" => AnyResource::new(StatisticsResourceAdaptor::new(make(
                "pool",
                FreeChecks::Checked,
            )?)),
            "limiting" => AnyResource::new(LimitingResourceAdaptor::new(
                make("pool", FreeChecks::Checked)?,
                1 << 40,
            )),
            _ => AnyResource::new(TrackingResourceAdaptor::new(
                make("pool", FreeChecks::Checked)?,
                false,
            )),
        };
        let mut best = [f64::MAX; 4];
        for _ in 0..rounds {
            best[0] = best[0].min(pairs(&adaptor));
            best[1] = best[1].min(pairs(&pool));
            best[2] = best[2].min(churn(&adaptor));
            best[3] = best[3].min(churn(&pool));
        }
        println!(
            "| {kind} | {:.1} | {:.1} | {:+.1} | {:.1} | {:.1} | {:+.1} |",
            best[0],
            best[1],
            best[0] - best[1],
            best[2],
            best[3],
            best[2] - best[3]
        );
    }
    Ok(())
}
