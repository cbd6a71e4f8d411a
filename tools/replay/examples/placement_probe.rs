//! Where an expandable pool's mapped bytes go on a recorded log: replays the log in its global
//! order (one OS thread per logged thread, as `rmm-replay`) on a simulated device in 2 MiB
//! granules and, after every event, splits the mapped bytes into the granules live blocks touch,
//! the rest of the granules touched by cached free blocks, and free granules nobody touches.
//!
//! `cargo run --release -p rmm-replay --example placement_probe -- LOG [THRESHOLD_BYTES]`
//!
//! Prints peak live, the lower bound `ceil(live / granule)` granules at the live peak, the peak of
//! the granules that live blocks touch (what an allocator that gives every free granule back at
//! once would map with the same placement), and peak mapped with the state at that moment.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::thread;

use rmm_core::cuda::Stream;
use rmm_core::mr::experimental::{
    Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend,
};
use rmm_core::MemoryResource;
use rmm_replay::log::{self, Action};

const GRANULE: usize = 2 << 20;

/// Bytes of the granules that the blocks of `live` touch.
fn touched(live: &BTreeMap<usize, usize>, base: usize) -> usize {
    let mut granules = 0;
    let mut last: Option<usize> = None;
    for (&addr, &size) in live {
        if size == 0 {
            continue;
        }
        let first = (addr - base) / GRANULE;
        let end = (addr - base + size - 1) / GRANULE;
        let from = match last {
            Some(l) if l >= first => l + 1,
            _ => first,
        };
        if end >= from {
            granules += end - from + 1;
        }
        last = Some(last.map_or(end, |l| l.max(end)));
    }
    granules * GRANULE
}

enum Job {
    Alloc(usize, mpsc::Sender<usize>),
    Free(usize, usize, mpsc::Sender<usize>),
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: placement_probe LOG [THRESHOLD]")?;
    let threshold: Option<usize> = args.next().map(|t| t.parse()).transpose()?;
    let events = log::read_log(std::path::Path::new(&path))?;
    let device = Backend::Simulated(HostBackend {
        capacity: Some(8 << 30),
        granularity: GRANULE,
    });
    let mut options = ExpandablePoolOptions::default().backend(device);
    options.release_threshold = threshold;
    let pool = ExpandablePoolMemoryResource::new(options)?;
    let base = pool.base() as usize;

    let mut workers: HashMap<u64, mpsc::Sender<Job>> = HashMap::new();
    let mut handles = Vec::new();
    let mut live: BTreeMap<usize, usize> = BTreeMap::new();
    let mut by_logged: HashMap<u64, (usize, usize)> = HashMap::new();
    let (mut live_bytes, mut peak_live, mut bound) = (0usize, 0usize, 0usize);
    let (mut peak_touched, mut peak_mapped) = (0usize, 0usize);
    let mut at_peak = String::new();
    for e in &events {
        if !matches!(e.action, Action::Allocate | Action::Free) {
            continue;
        }
        let tx = workers.entry(e.thread).or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let pool = pool.clone();
            handles.push(thread::spawn(move || {
                for job in rx {
                    match job {
                        Job::Alloc(size, back) => {
                            let p = pool.allocate(Stream::DEFAULT, size, 256).expect("allocate");
                            back.send(p as usize).unwrap();
                        }
                        Job::Free(addr, size, back) => {
                            // SAFETY: `addr` came from this pool with this size.
                            unsafe { pool.deallocate(Stream::DEFAULT, addr as *mut u8, size, 256) }
                                .expect("free");
                            back.send(0).unwrap();
                        }
                    }
                }
            }));
            tx
        });
        let (back, done) = mpsc::channel();
        match e.action {
            Action::Allocate => {
                tx.send(Job::Alloc(e.size, back))?;
                let addr = done.recv()?;
                live.insert(addr, e.size);
                by_logged.insert(e.pointer, (addr, e.size));
                live_bytes += e.size;
            }
            _ => {
                let Some((addr, size)) = by_logged.remove(&e.pointer) else {
                    continue;
                };
                tx.send(Job::Free(addr, size, back))?;
                done.recv()?;
                live.remove(&addr);
                live_bytes -= size;
            }
        }
        if live_bytes > peak_live {
            peak_live = live_bytes;
            bound = live_bytes.div_ceil(GRANULE) * GRANULE;
        }
        let t = touched(&live, base);
        peak_touched = peak_touched.max(t);
        let s = pool.statistics();
        if s.mapped_bytes > peak_mapped {
            peak_mapped = s.mapped_bytes;
            at_peak = format!(
                "line {}: live {:.1} MiB, granules live blocks touch {:.1} MiB, cached {:.1} MiB, \
                 releasable {:.1} MiB, books {:.1} MiB",
                e.line,
                live_bytes as f64 / 1048576.0,
                t as f64 / 1048576.0,
                s.cached_bytes as f64 / 1048576.0,
                s.releasable_bytes as f64 / 1048576.0,
                s.books_bytes as f64 / 1048576.0,
            );
        }
    }
    let end = pool.statistics();
    drop(workers);
    for h in handles {
        h.join().expect("worker");
    }
    let mib = |b: usize| b as f64 / 1048576.0;
    println!(
        "{path}: peak live {:.1} MiB; granule bound {:.1} MiB; peak touched by live {:.1} MiB \
         (x{:.3}); peak mapped {:.1} MiB (x{:.3}); granules mapped {}, released {}\n  at peak \
         mapped: {at_peak}",
        mib(peak_live),
        mib(bound),
        mib(peak_touched),
        peak_touched as f64 / peak_live as f64,
        mib(peak_mapped),
        peak_mapped as f64 / peak_live as f64,
        end.granules_mapped,
        end.granules_released,
    );
    Ok(())
}
