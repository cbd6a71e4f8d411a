//! A guided tour of rmm-rs: `cargo run --release -p rmm --example tour` (or `bash scripts/tour.sh`).
//!
//! It looks at the machine, then walks through a list of *stops*. Each stop is a function that gets
//! the [`Tour`] (which keeps the statistics) and shows one feature. To extend the tour, write another
//! `fn(&mut Tour) -> rmm::Result<()>` and add it to `stops()`; nothing else changes.

use rmm::mr::{
    CudaAsyncMemoryResource, CudaMemoryResource, PoolMemoryResource, StatisticsResourceAdaptor,
    SystemMemoryResource,
};
use rmm::prelude::*;

/// Sizes every resource stop allocates: tiny, odd, page-sized and large.
const SIZES: [usize; 4] = [1, 1000, 64 << 10, 16 << 20];

/// Running statistics, computed by the tour itself (not by an rmm adaptor).
#[derive(Default)]
struct Stats {
    allocations: usize,
    bytes: usize,
    live: usize,
    peak: usize,
}

impl Stats {
    fn allocated(&mut self, bytes: usize) {
        self.allocations += 1;
        self.bytes += bytes;
        self.live += bytes;
        self.peak = self.peak.max(self.live);
    }

    fn freed(&mut self, bytes: usize) {
        self.live -= bytes;
    }
}

/// What every stop may use: whether a GPU is there, and the statistics.
struct Tour {
    gpu: bool,
    stats: Stats,
}

type Stop = fn(&mut Tour) -> Result<()>;

/// The stops, in order. Later issues add pools, adaptors, containers, Python and C++ here.
fn stops() -> Vec<(&'static str, Stop)> {
    vec![
        ("system memory (host, works everywhere)", system_stop),
        ("CUDA device memory", cuda_stop),
        (
            "CUDA async memory pool (cuda_async_memory_resource)",
            cuda_async_stop,
        ),
        (
            "a pool with statistics, made the current device resource",
            pool_stop,
        ),
        (
            "the current device resource and a DeviceBuffer",
            registry_stop,
        ),
        (
            "one resource, shared through the C ABI without a copy",
            c_abi_stop,
        ),
        ("what the pool's statistics saw", pool_statistics_stop),
    ]
}

fn main() {
    println!("rmm-rs tour (rmm {})", env!("CARGO_PKG_VERSION"));
    let gpu = !rmm::cuda::is_host_mode();
    if gpu {
        describe_gpus();
    } else {
        println!("No CUDA GPU found: running on host memory.");
    }

    let mut tour = Tour {
        gpu,
        stats: Stats::default(),
    };
    let mut failures = 0;
    for (number, (title, stop)) in stops().into_iter().enumerate() {
        println!("\n[{}] {title}", number + 1);
        if let Err(e) = stop(&mut tour) {
            println!("    error: {e}");
            failures += 1;
        }
    }

    let s = &tour.stats;
    println!(
        "\nstatistics: {} allocations, {} allocated in total, peak {} live, {} still live",
        s.allocations,
        human(s.bytes),
        human(s.peak),
        human(s.live)
    );
    if failures > 0 {
        eprintln!("{failures} stop(s) failed");
        std::process::exit(1);
    }
}

/// Device count, and each device's name and memory.
fn describe_gpus() {
    let count = rmm::cuda::device_count().unwrap_or(0);
    println!("CUDA: {count} device(s)");
    for device in 0..count {
        let name =
            rmm::cuda::device::name(device).unwrap_or_else(|e| format!("<name unavailable: {e}>"));
        match rmm::cuda::mem_info(device) {
            Ok((free, total)) => {
                println!(
                    "  device {device}: {name}, {} free of {}",
                    human(free),
                    human(total)
                )
            }
            Err(e) => println!("  device {device}: {name}, memory info unavailable: {e}"),
        }
    }
}

fn system_stop(tour: &mut Tour) -> Result<()> {
    show_allocations(tour, &AnyResource::new(SystemMemoryResource::new()))
}

fn cuda_stop(tour: &mut Tour) -> Result<()> {
    if !tour.gpu {
        println!("    skipped: needs a CUDA GPU");
        return Ok(());
    }
    show_allocations(tour, &AnyResource::new(CudaMemoryResource::new()))
}

fn cuda_async_stop(tour: &mut Tour) -> Result<()> {
    if !tour.gpu {
        println!("    skipped: needs a CUDA GPU");
        return Ok(());
    }
    let pool = CudaAsyncMemoryResource::new()?;
    show_allocations(tour, &AnyResource::new(pool.clone()))?;
    println!(
        "    pool {:#x}: {} reserved, {} in use after the frees",
        pool.pool_handle(),
        human(pool.reserved_bytes()? as usize),
        human(pool.used_bytes()? as usize)
    );
    Ok(())
}

/// A pool (over CUDA memory, or host memory without a GPU) behind a statistics adaptor becomes the
/// current device resource: the stops after this one allocate through it.
fn pool_stop(tour: &mut Tour) -> Result<()> {
    let base = if tour.gpu {
        AnyResource::new(CudaMemoryResource::new())
    } else {
        AnyResource::new(SystemMemoryResource::new())
    };
    let pool = PoolMemoryResource::new(base, Some(64 << 20), None)?;
    let stats = StatisticsResourceAdaptor::new(pool.clone());
    show_allocations(tour, &AnyResource::new(stats.clone()))?;
    rmm::registry::set_current_resource(AnyResource::new(stats))?;
    println!(
        "    pool of {} over {}; now the current device resource",
        human(pool.pool_size()),
        pool.upstream_resource().name()
    );
    Ok(())
}

/// The statistics adaptor counted every allocation made through the current resource.
fn pool_statistics_stop(_tour: &mut Tour) -> Result<()> {
    let current = rmm::registry::current_resource()?;
    let Some(stats) = current.downcast_ref::<StatisticsResourceAdaptor>() else {
        println!(
            "    the current resource is {}, not the tour's statistics adaptor",
            current.name()
        );
        return Ok(());
    };
    let (bytes, count) = (stats.bytes_counter(), stats.allocations_counter());
    println!(
        "    bytes: {} live, {} peak, {} in total; allocations: {} live, {} peak, {} in total",
        human(bytes.value.max(0) as usize),
        human(bytes.peak.max(0) as usize),
        human(bytes.total.max(0) as usize),
        count.value,
        count.peak,
        count.total
    );
    if let Some(pool) = stats.upstream().downcast_ref::<PoolMemoryResource>() {
        let p = pool.statistics();
        println!(
            "    pool: {} reserved from {}, {} in use",
            human(p.pool_size),
            pool.upstream_resource().name(),
            human(p.bytes_used)
        );
    }
    Ok(())
}

/// Containers default to the per-device current resource, which any language may set.
fn registry_stop(tour: &mut Tour) -> Result<()> {
    let current = rmm::registry::current_resource()?;
    println!(
        "    current resource: {} ({}-accessible)",
        current.name(),
        current.access()
    );
    let text = b"allocated through the registry, copied in and out";
    let mut buf = DeviceBuffer::with_current_resource(text.len(), Stream::DEFAULT)?;
    tour.stats.allocated(buf.size());
    buf.copy_from_host(text)?;
    let back = buf.to_vec()?;
    println!(
        "    DeviceBuffer of {} at {:#x}: {:?}",
        human(buf.size()),
        buf.as_ptr() as usize,
        String::from_utf8_lossy(&back)
    );
    tour.stats.freed(buf.size());
    drop(buf);
    if back != text {
        return Err(Error::invalid(
            "DeviceBuffer did not read back what was written",
        ));
    }
    Ok(())
}

/// A resource crosses the C ABI as `{self, vtable}` whose refcount is the Rust `Arc`'s own.
fn c_abi_stop(tour: &mut Tour) -> Result<()> {
    let mr = rmm::registry::current_resource()?;
    let before = mr.owner_count();
    let handle = mr.to_handle();
    println!(
        "    handed to C as rmm_resource {{ self: {:p} }}: owners {before} -> {}",
        handle.self_,
        mr.owner_count()
    );
    // SAFETY: `handle` holds one reference, taken over here.
    let back = unsafe { AnyResource::from_handle(handle) };
    println!("    back in Rust: the same object? {}", back.ptr_eq(&mr));
    let p = back.allocate(Stream::DEFAULT, 4096, DEFAULT_ALIGNMENT)?;
    tour.stats.allocated(4096);
    // SAFETY: `p` came from `back` (the same resource) with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 4096, DEFAULT_ALIGNMENT)? };
    tour.stats.freed(4096);
    drop(back);
    println!("    owners after release: {}", mr.owner_count());
    Ok(())
}

/// Allocates [`SIZES`] from `mr`, shows pointer and alignment, checks the memory round-trips bytes,
/// frees everything, and records it all in the statistics.
fn show_allocations(tour: &mut Tour, mr: &AnyResource) -> Result<()> {
    println!("    resource: {} ({}-accessible)", mr.name(), mr.access());
    let mut live = Vec::new();
    for bytes in SIZES {
        let ptr = mr.allocate(Stream::DEFAULT, bytes, DEFAULT_ALIGNMENT)?;
        tour.stats.allocated(bytes);
        live.push((ptr, bytes));
        println!(
            "    allocate {:>9} -> {:#014x}  aligned to {} (asked {DEFAULT_ALIGNMENT})",
            human(bytes),
            ptr as usize,
            address_alignment(ptr)
        );
    }

    // Write a pattern into the last (largest) block and read it back through the driver's copy
    // (a plain memmove in host mode).
    let (ptr, bytes) = *live.last().expect("SIZES is not empty");
    let pattern: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; bytes];
    // SAFETY: `ptr` is a live allocation of `bytes` bytes from `mr`; both host buffers hold `bytes`.
    unsafe {
        rmm::cuda::copy_sync(ptr, pattern.as_ptr(), bytes, Stream::DEFAULT)?;
        rmm::cuda::copy_sync(back.as_mut_ptr(), ptr, bytes, Stream::DEFAULT)?;
    }
    let same = back == pattern;
    println!(
        "    wrote {} and read it back: {}",
        human(bytes),
        if same { "identical" } else { "DIFFERENT" }
    );

    for (ptr, bytes) in live.drain(..) {
        // SAFETY: each pointer came from `mr.allocate` with these arguments and is freed once.
        unsafe { mr.deallocate(Stream::DEFAULT, ptr, bytes, DEFAULT_ALIGNMENT)? };
        tour.stats.freed(bytes);
    }
    println!("    freed {} allocations", SIZES.len());
    if same {
        Ok(())
    } else {
        Err(Error::invalid("memory did not read back what was written"))
    }
}

/// The largest power of two (up to 1 MiB) that divides the address.
fn address_alignment(ptr: *mut u8) -> String {
    let addr = ptr as usize;
    if addr == 0 {
        return "-".into();
    }
    human(1usize << addr.trailing_zeros().min(20))
}

/// Bytes in B, KiB, MiB or GiB.
fn human(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}
