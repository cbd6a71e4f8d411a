//! Several threads at once on one pool, arena or binning resource over a simulated device, checked
//! against a shared model: live allocations never overlap across threads, every valid free (also of
//! another thread's allocation, handed over) succeeds, every invalid one (a wrong size, an interior
//! pointer of the caller's own live block, an address never handed out) is refused, and at the end
//! the resource's books are empty and the device gets everything back.
//!
//! Input: byte 0 picks the resource, byte 1 the thread count (2 to 4); then 4-byte operations are
//! dealt to the threads in turn, which run them at the same time.
#![no_main]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use libfuzzer_sys::fuzz_target;
use rmm_core::cuda::{self, Stream};
use rmm_core::mr::{ArenaMemoryResource, ArenaOptions, BinningMemoryResource, PoolMemoryResource, SimulatedMemoryResource};
use rmm_core::{AnyResource, Error, MemoryResource};
use rmm_fuzz::Live;

/// What every thread sees: the live allocations of all threads (address → bytes), and the ones
/// handed over for another thread to free.
#[derive(Default)]
struct Model {
    live: BTreeMap<usize, usize>,
    handed_over: Vec<Live>,
}

impl Model {
    /// Records an allocation; panics when it overlaps one that is live.
    fn allocated(&mut self, b: Live) {
        let end = b.ptr + b.bytes.max(1);
        if let Some((&p, &n)) = self.live.range(..end).next_back() {
            assert!(p + n.max(1) <= b.ptr, "{:#x}+{} overlaps the live {p:#x}+{n}", b.ptr, b.bytes);
        }
        self.live.insert(b.ptr, b.bytes);
    }
}

fn run_thread(mr: &dyn MemoryResource, model: &Mutex<Model>, ops: &[[u8; 4]], stream: Stream, refuses_large_alignment: bool) {
    let lock = || model.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut mine: Vec<Live> = Vec::new();
    let free = |b: Live| {
        // Out of the model first: once freed, another thread may get the memory.
        assert!(lock().live.remove(&b.ptr).is_some());
        // SAFETY: a live allocation of `mr` with its arguments; host mode queues no work.
        unsafe { mr.deallocate(stream, b.ptr as *mut u8, b.bytes, b.alignment) }
            .unwrap_or_else(|e| panic!("a valid free of {:#x}+{}: {e}", b.ptr, b.bytes));
    };
    for &[kind, a, b, c] in ops {
        match kind % 8 {
            0..=2 => {
                let bytes = 1 + ((c as usize) << (b % 21)) % (2 << 20);
                let alignment = 1usize << (a % 10);
                match mr.allocate(stream, bytes, alignment) {
                    Ok(p) => {
                        let live = Live { ptr: p as usize, bytes, alignment };
                        assert_eq!(live.ptr % alignment, 0);
                        lock().allocated(live);
                        mine.push(live);
                    }
                    Err(Error::InvalidArgument(_)) if refuses_large_alignment && alignment > 256 => {}
                    Err(e) => assert!(e.is_out_of_memory(), "{bytes} bytes aligned to {alignment}: {e}"),
                }
            }
            3 if !mine.is_empty() => {
                let i = (a as usize) % mine.len();
                free(mine.swap_remove(i));
            }
            4 if !mine.is_empty() => {
                // Hand one over: another thread frees it.
                let i = (a as usize) % mine.len();
                lock().handed_over.push(mine.swap_remove(i));
            }
            5 => {
                let taken = lock().handed_over.pop();
                if let Some(b) = taken {
                    free(b);
                }
            }
            6 if !mine.is_empty() => {
                // Invalid frees that no other thread can make valid meanwhile: this thread holds
                // the block, so its interior and its other sizes stay invalid.
                let v = mine[(a as usize) % mine.len()];
                let (ptr, bytes) = match b % 3 {
                    0 if v.bytes > 256 => (v.ptr + 256, 256),
                    1 => (v.ptr, v.bytes.div_ceil(256) * 256 + 256),
                    _ => (0x10 + ((c as usize) << 40), 256),
                };
                // SAFETY: deliberately invalid: refused before anything is touched.
                let r = unsafe { mr.deallocate(stream, ptr as *mut u8, bytes, v.alignment) };
                assert!(matches!(r, Err(Error::InvalidArgument(_))), "an invalid free of {ptr:#x}+{bytes}: {r:?}");
            }
            _ => {}
        }
    }
    for b in mine {
        free(b);
    }
}

fuzz_target!(|data: &[u8]| {
    assert!(cuda::is_host_mode(), "the fuzz targets use fake stream handles: run them without a GPU");
    let [which, threads, rest @ ..] = data else { return };
    let threads = 2 + *threads as usize % 3;
    let device = SimulatedMemoryResource::new(1 << 30).unwrap();
    let upstream = AnyResource::new(device.clone());
    let (mr, books): (AnyResource, Box<dyn Fn() -> usize>) = match which % 3 {
        0 => {
            let pool = PoolMemoryResource::new(upstream, Some(1 << 20), None).unwrap();
            (AnyResource::new(pool.clone()), Box::new(move || pool.statistics().bytes_used))
        }
        1 => {
            let options = ArenaOptions::default().arena_size(64 << 20);
            let arena = ArenaMemoryResource::with_options(upstream, options).unwrap();
            (AnyResource::new(arena.clone()), Box::new(move || arena.used_bytes()))
        }
        _ => {
            let pool = PoolMemoryResource::new(upstream, Some(1 << 20), None).unwrap();
            let binning = BinningMemoryResource::with_exponents(AnyResource::new(pool.clone()), 8, 16).unwrap();
            (AnyResource::new(binning), Box::new(move || pool.statistics().bytes_used))
        }
    };
    let refuses_large_alignment = which % 3 == 1;
    let ops: Vec<[u8; 4]> = rest.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect();
    let model = Arc::new(Mutex::new(Model::default()));
    // SAFETY: host mode (asserted above): the handles are only compared, never used as streams.
    let streams = unsafe { [Stream::DEFAULT, Stream::PER_THREAD, Stream::from_raw(0x5010), Stream::from_raw(0x5020)] };
    // Spawned and joined (not scoped): a join returns after the thread's thread-local destructors,
    // which hand its per-thread caches back, so the checks below see the thread wholly gone.
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let mine: Vec<[u8; 4]> = ops.iter().skip(t).step_by(threads).copied().collect();
            let (mr, model, stream) = (mr.clone(), model.clone(), streams[t % streams.len()]);
            std::thread::spawn(move || run_thread(&mr, &model, &mine, stream, refuses_large_alignment))
        })
        .collect();
    let panicked = workers.into_iter().map(|w| w.join()).filter(Result::is_err).count();
    assert_eq!(panicked, 0, "a thread's check failed (its message is above)");
    // What was handed over and never taken is freed here.
    let left = std::mem::take(&mut model.lock().unwrap().handed_over);
    for b in left {
        // SAFETY: live allocations of `mr` with their arguments.
        unsafe { mr.deallocate(Stream::DEFAULT, b.ptr as *mut u8, b.bytes, b.alignment) }.unwrap();
        model.lock().unwrap().live.remove(&b.ptr);
    }
    assert!(model.lock().unwrap().live.is_empty());
    if which % 3 != 2 {
        assert_eq!(books(), 0, "the resource's books are empty");
    }
    drop((mr, books));
    assert_eq!(device.usage().allocated_bytes, 0, "the device got everything back");
});
