//! The cost of growing a virtual range and of giving memory back (issue 28), on the device when
//! there is one, and always on the host backend (host mode's simulation: a memfd per granule,
//! `mmap`, `mprotect`).
//!
//! - `grow/<backend>/<n>`: `ensure_mapped` of `n` fresh granules in one call (create and map each,
//!   one access call for the run);
//! - `release/<backend>/<n>`: `release` of `n` mapped granules (unmap and release each);
//! - `mapped_check/<backend>`: `ensure_mapped` of 256 bytes that are mapped already, the check the
//!   engine makes on every allocation (the lock-free bitmap, no driver call);
//! - `pool_grow/<backend>`: an `ExpandablePoolMemoryResource` allocation of one granule when nothing
//!   is mapped (the books grow by a granule, which is created and mapped), the free and trim untimed;
//! - `pool_trim/<backend>`: `trim` of an expandable pool with one free granule (an event on the
//!   freeing stream, synchronized, then unmap and release), the allocation and free untimed.
//!
//! Each timed step maps (or releases) fresh granules; the opposite step runs outside the timing.
//! The throughput is the number of granules, so time ÷ elements is the cost per granule. Host
//! granules are not touched, so their cost has no page faults in it.
//! Run: `cargo bench -p rmm-core --bench virtual_range` (on the GPU machine: the staged executable
//! with `--bench`, see scripts/gpu-vmm.sh).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rmm_core::cuda;
use rmm_core::cuda::Stream;
use rmm_core::mr::experimental::{
    Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend, VirtualRange,
    VirtualRangeOptions,
};
use rmm_core::{MemoryResource, DEFAULT_ALIGNMENT};

const MIB: usize = 1 << 20;
const RESERVE: usize = 4 << 30;

fn ranges() -> Vec<(&'static str, VirtualRange)> {
    let options = VirtualRangeOptions::default().reserve(RESERVE);
    let mut out = vec![(
        "host",
        VirtualRange::with_backend(
            Backend::Host(HostBackend {
                capacity: Some(RESERVE),
                granularity: 2 * MIB,
            }),
            options.clone(),
        )
        .expect("a host-backed range"),
    )];
    if cuda::is_available() {
        let device = cuda::current_device().expect("the current device");
        match VirtualRange::with_backend(Backend::Device(device), options) {
            Ok(range) => {
                eprintln!(
                    "device {device}: granularity {}, shareable handles {:?}",
                    range.granularity(),
                    range.shareable()
                );
                out.push(("device", range));
            }
            Err(e) => eprintln!("no device-backed range: {e}"),
        }
    }
    out
}

/// Which half of a map-release cycle is timed.
#[derive(Clone, Copy)]
enum Timed {
    Grow,
    Release,
}

/// `iters` cycles of mapping `[0, span)` of `range` and releasing it again, timing one half.
fn cycles(range: &VirtualRange, span: usize, iters: u64, timed: Timed) -> Duration {
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        range.ensure_mapped(0, span).expect("grow");
        if let Timed::Grow = timed {
            spent += start.elapsed();
        }
        let start = Instant::now();
        // SAFETY: nothing uses the span.
        unsafe { range.release(0, span) }.expect("release");
        if let Timed::Release = timed {
            spent += start.elapsed();
        }
    }
    spent
}

/// The backends of [`ranges`], as expandable pools of [`RESERVE`] bytes.
fn pools() -> Vec<(&'static str, ExpandablePoolMemoryResource)> {
    let mut backends = vec![(
        "host",
        Backend::Host(HostBackend {
            capacity: Some(RESERVE),
            granularity: 2 * MIB,
        }),
    )];
    if cuda::is_available() {
        backends.push((
            "device",
            Backend::Device(cuda::current_device().expect("the current device")),
        ));
    }
    backends
        .into_iter()
        .filter_map(|(name, backend)| {
            let options = ExpandablePoolOptions::default()
                .backend(backend)
                .range(VirtualRangeOptions::default().reserve(RESERVE));
            match ExpandablePoolMemoryResource::new(options) {
                Ok(pool) => Some((name, pool)),
                Err(e) => {
                    eprintln!("no {name} expandable pool: {e}");
                    None
                }
            }
        })
        .collect()
}

/// `iters` cycles of allocating one granule from `pool` with nothing mapped, freeing it and
/// trimming, timing the allocation (`Timed::Grow`) or the trim (`Timed::Release`).
fn pool_cycles(pool: &ExpandablePoolMemoryResource, iters: u64, timed: Timed) -> Duration {
    let g = pool.granularity();
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        let p = pool
            .allocate(Stream::DEFAULT, g, DEFAULT_ALIGNMENT)
            .expect("grow");
        if let Timed::Grow = timed {
            spent += start.elapsed();
        }
        // SAFETY: `p` came from `pool` with these arguments.
        unsafe { pool.deallocate(Stream::DEFAULT, p, g, DEFAULT_ALIGNMENT) }.expect("free");
        let start = Instant::now();
        assert_eq!(pool.trim().expect("trim"), g, "one granule goes back");
        if let Timed::Release = timed {
            spent += start.elapsed();
        }
    }
    spent
}

fn bench(c: &mut Criterion) {
    let ranges = ranges();
    for (group, timed) in [("grow", Timed::Grow), ("release", Timed::Release)] {
        let mut g = c.benchmark_group(group);
        for (name, range) in &ranges {
            for n in [1usize, 64] {
                g.throughput(Throughput::Elements(n as u64));
                g.bench_with_input(BenchmarkId::new(*name, n), &n, |b, &n| {
                    b.iter_custom(|iters| cycles(range, n * range.granularity(), iters, timed))
                });
            }
        }
        g.finish();
    }

    let mut check = c.benchmark_group("mapped_check");
    for (name, range) in &ranges {
        range.ensure_mapped(0, range.granularity()).expect("grow");
        check.throughput(Throughput::Elements(1));
        check.bench_function(*name, |b| {
            b.iter(|| {
                range
                    .ensure_mapped(std::hint::black_box(4096), 256)
                    .expect("mapped")
            })
        });
    }
    check.finish();

    let pools = pools();
    for (group, timed) in [("pool_grow", Timed::Grow), ("pool_trim", Timed::Release)] {
        let mut g = c.benchmark_group(group);
        for (name, pool) in &pools {
            g.throughput(Throughput::Elements(1));
            g.bench_function(*name, |b| {
                b.iter_custom(|iters| pool_cycles(pool, iters, timed))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
