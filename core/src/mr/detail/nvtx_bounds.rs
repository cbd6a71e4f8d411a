//! Bounds checking inside pools (beyond RMM): sub-allocations announced to tools through NVTX3's
//! memory API, so that `compute-sanitizer --tool memcheck` reports an access outside a live
//! allocation of a pool or arena (an overrun into the next block, a use after free), which it
//! cannot see otherwise: to it, the whole upstream region is one valid allocation.
//!
//! A *heap* (`nvtxMemHeapRegister`, usage sub-allocator) per upstream region, a *region*
//! (`nvtxMemRegionsRegister`) per allocation, of the bytes asked for (not rounded up: an overrun
//! into the rounding is caught too), unregistered on free. NVTX3 is header-only; the calls go
//! through a small C shim (`nvtx_shim.c`, built by `build.rs` against `third_party/nvtx3`) and are
//! no-ops unless a tool has injected itself.
//!
//! Off by default. On with a constructor option ([`crate::mr::PoolMemoryResource::with_nvtx_bounds`],
//! [`crate::mr::ArenaOptions::nvtx_bounds`]) or the environment variable `RMM_NVTX_BOUNDS=1` (read
//! once). Off costs one branch per call (`Option::None`); on, every allocation and free takes one
//! mutex (the registrations and the free are ordered under it: a block freed by one thread and
//! handed to another is never unregistered after the other registered it).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::error::Result;

extern "C" {
    fn rmm_nvtx_domain_create(name: *const c_char) -> *mut c_void;
    fn rmm_nvtx_heap_register(domain: *mut c_void, ptr: *mut c_void, size: usize) -> *mut c_void;
    fn rmm_nvtx_heap_unregister(domain: *mut c_void, heap: *mut c_void);
    fn rmm_nvtx_region_register(
        domain: *mut c_void,
        heap: *mut c_void,
        ptr: *mut c_void,
        size: usize,
    );
    fn rmm_nvtx_region_unregister(domain: *mut c_void, ptr: *mut c_void);
}

/// True when `RMM_NVTX_BOUNDS` is `1`, `true`, `yes` or `on` (case-insensitive; read once).
pub(crate) fn enabled_by_env() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("RMM_NVTX_BOUNDS")
            .map(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
            .unwrap_or(false)
    })
}

/// The process's NVTX domain for rmm-rs's heaps ("rmm-rs"), created on first use.
fn domain() -> usize {
    static DOMAIN: OnceLock<usize> = OnceLock::new();
    // SAFETY: a NUL-terminated name; NVTX copies it.
    *DOMAIN.get_or_init(|| unsafe { rmm_nvtx_domain_create(c"rmm-rs".as_ptr()) } as usize)
}

#[derive(Debug, Default)]
struct State {
    /// Registered heaps by start: (size, NVTX handle).
    heaps: BTreeMap<usize, (usize, usize)>,
    /// Registered regions (live allocations): start → bytes.
    regions: HashMap<usize, usize>,
    /// The owner's region generation last reconciled with (`u64::MAX`: never).
    seen: u64,
}

/// The NVTX registrations of one pool or arena (shared by its clones).
#[derive(Debug)]
pub(crate) struct NvtxBounds {
    state: Mutex<State>,
}

impl NvtxBounds {
    /// Nothing registered yet.
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                seen: u64::MAX,
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the heaps match the owner's upstream regions when their generation `gen` changed
    /// since the last call: heaps of regions given back are unregistered (with their regions),
    /// new regions become heaps.
    pub(crate) fn sync_heaps(&self, gen: u64, regions: impl FnOnce() -> Vec<(usize, usize)>) {
        let mut s = self.lock();
        if s.seen == gen {
            return;
        }
        s.seen = gen;
        let now: BTreeMap<usize, usize> = regions().into_iter().collect();
        let gone: Vec<usize> = s
            .heaps
            .iter()
            .filter(|(a, (size, _))| now.get(a) != Some(size))
            .map(|(a, _)| *a)
            .collect();
        for addr in gone {
            if let Some((size, heap)) = s.heaps.remove(&addr) {
                s.regions.retain(|&r, _| !(addr <= r && r < addr + size));
                // SAFETY: a heap handle this object registered and has not unregistered.
                unsafe { rmm_nvtx_heap_unregister(domain() as *mut c_void, heap as *mut c_void) };
            }
        }
        for (addr, size) in now {
            s.heaps.entry(addr).or_insert_with(|| {
                // SAFETY: plain values; NVTX only records the range.
                let heap = unsafe {
                    rmm_nvtx_heap_register(domain() as *mut c_void, addr as *mut c_void, size)
                };
                // A null handle is NVTX_MEM_HEAP_HANDLE_NO_TOOL: no tool took the registration.
                tracing::debug!("NVTX bounds: heap {addr:#x} + {size} registered as {heap:p}");
                #[cfg(test)]
                if std::env::var_os("RMM_NVTX_PROBE").is_some() {
                    println!("nvtx: heap {addr:#x} + {size} -> handle {heap:p}");
                }
                (size, heap as usize)
            });
        }
    }

    /// Registers `[ptr, ptr + bytes)`, just handed out, in the heap that holds it.
    pub(crate) fn allocated(&self, ptr: *mut u8, bytes: usize) {
        let addr = ptr as usize;
        let mut s = self.lock();
        let Some((_, &(_, heap))) = s
            .heaps
            .range(..=addr)
            .next_back()
            .filter(|(&a, &(size, _))| addr < a + size)
        else {
            tracing::warn!("NVTX bounds: {ptr:p} is in no registered heap; not registered");
            return;
        };
        // SAFETY: plain values; NVTX only records the range.
        unsafe {
            rmm_nvtx_region_register(
                domain() as *mut c_void,
                heap as *mut c_void,
                ptr.cast(),
                bytes,
            )
        };
        #[cfg(test)]
        if std::env::var_os("RMM_NVTX_PROBE").is_some() {
            println!("nvtx: region {addr:#x} + {bytes} in heap {heap:#x}");
        }
        s.regions.insert(addr, bytes);
    }

    /// Runs `free` (the resource's own free of `ptr`) and, when it succeeds, unregisters the region,
    /// both under the lock: the memory cannot be handed out and registered by another thread before
    /// it is unregistered here.
    pub(crate) fn free(&self, ptr: *mut u8, free: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut s = self.lock();
        free()?;
        if s.regions.remove(&(ptr as usize)).is_some() {
            // SAFETY: plain values; NVTX forgets the region starting at `ptr`.
            unsafe { rmm_nvtx_region_unregister(domain() as *mut c_void, ptr.cast()) };
        }
        Ok(())
    }

    /// (heaps, regions) registered now.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let s = self.lock();
        (s.heaps.len(), s.regions.len())
    }
}

impl Drop for NvtxBounds {
    fn drop(&mut self) {
        let s = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (_, (_, heap)) in std::mem::take(&mut s.heaps) {
            // SAFETY: a heap handle this object registered and has not unregistered.
            unsafe { rmm_nvtx_heap_unregister(domain() as *mut c_void, heap as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cuda::Stream;
    use crate::mr::{
        ArenaMemoryResource, ArenaOptions, PoolMemoryResource, SimulatedMemoryResource,
    };
    use crate::{AnyResource, MemoryResource};

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    fn device() -> AnyResource {
        AnyResource::new(SimulatedMemoryResource::new(64 * MIB).unwrap())
    }

    /// Off by default and when asked off: nothing is registered (and nothing costs more than a
    /// branch).
    #[test]
    fn off_by_default() {
        let pool = PoolMemoryResource::new(device(), Some(MIB), None).unwrap();
        if !super::enabled_by_env() {
            assert!(!pool.nvtx_bounds());
            assert_eq!(pool.nvtx_counts(), None);
        }
        let pool = pool.with_nvtx_bounds(false);
        assert!(!pool.nvtx_bounds());
        let arena = ArenaMemoryResource::with_options(
            device(),
            ArenaOptions::default().arena_size(4 * MIB),
        )
        .unwrap();
        assert_eq!(arena.nvtx_bounds(), super::enabled_by_env());
    }

    /// A heap per upstream region (new regions found at the next allocation, regions given back
    /// dropped at the next allocation or trim), a region per live allocation; a refused free
    /// leaves the allocation registered.
    #[test]
    fn the_pool_registers_a_heap_per_region_and_a_region_per_allocation() {
        let pool = PoolMemoryResource::new(device(), Some(MIB), None)
            .unwrap()
            .with_nvtx_bounds(true);
        assert!(pool.nvtx_bounds());
        let s = Stream::DEFAULT;
        let a = pool.allocate(s, 100, 256).unwrap();
        assert_eq!(pool.nvtx_counts(), Some((1, 1)));
        let b = pool.allocate(s, 2 * MIB, 256).unwrap();
        assert_eq!(pool.nvtx_counts(), Some((2, 2)), "growth added a heap");
        // SAFETY: a wrong size: refused, nothing freed.
        assert!(unsafe { pool.deallocate(s, a, 4 * KIB, 256) }.is_err());
        assert_eq!(
            pool.nvtx_counts(),
            Some((2, 2)),
            "a refused free stays registered"
        );
        // SAFETY: from allocate above with these arguments.
        unsafe { pool.deallocate(s, a, 100, 256).unwrap() };
        assert_eq!(pool.nvtx_counts(), Some((2, 1)));
        // SAFETY: as above.
        unsafe { pool.deallocate(s, b, 2 * MIB, 256).unwrap() };
        assert_eq!(pool.nvtx_counts(), Some((2, 0)));
        assert_eq!(pool.release_unused().unwrap(), 3 * MIB);
        assert_eq!(
            pool.nvtx_counts(),
            Some((0, 0)),
            "regions given back are no heaps any more"
        );
        let c = pool.allocate(s, KIB, 256).unwrap();
        assert_eq!(pool.nvtx_counts(), Some((1, 1)));
        let clone = pool.clone();
        // SAFETY: from allocate above, freed through a clone (the registrations are shared).
        unsafe { clone.deallocate(s, c, KIB, 256).unwrap() };
        assert_eq!(pool.nvtx_counts(), Some((1, 0)));
    }

    #[test]
    fn the_arena_registers_its_block_and_each_allocation() {
        let arena = ArenaMemoryResource::with_options(
            device(),
            ArenaOptions::default()
                .arena_size(8 * MIB)
                .nvtx_bounds(true),
        )
        .unwrap();
        assert_eq!(arena.nvtx_counts(), Some((1, 0)));
        let s = Stream::DEFAULT;
        let small = arena.allocate(s, 100, 256).unwrap();
        let large = arena.allocate(s, 2 * MIB, 256).unwrap();
        assert_eq!(arena.nvtx_counts(), Some((1, 2)));
        // SAFETY: a double free of nothing live: refused.
        assert!(unsafe { arena.deallocate(s, small.wrapping_add(256), 100, 256) }.is_err());
        // SAFETY: from allocate above with these arguments.
        unsafe {
            arena.deallocate(s, small, 100, 256).unwrap();
            arena.deallocate(s, large, 2 * MIB, 256).unwrap();
        }
        assert_eq!(arena.nvtx_counts(), Some((1, 0)));
    }

    /// Many threads allocating and freeing with bounds on: every registration is undone.
    #[test]
    fn registrations_stay_exact_under_threads() {
        let pool = PoolMemoryResource::new(device(), Some(MIB), None)
            .unwrap()
            .with_nvtx_bounds(true);
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let pool = &pool;
                scope.spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..2000usize {
                        let bytes = 1 + (i * 7919 + t * 104_729) % (64 * KIB);
                        held.push((pool.allocate(Stream::DEFAULT, bytes, 256).unwrap(), bytes));
                        if held.len() > 64 || i % 3 != 0 {
                            let (p, n) = held.swap_remove((i * 31) % held.len());
                            // SAFETY: from allocate above with these arguments.
                            unsafe { pool.deallocate(Stream::DEFAULT, p, n, 256).unwrap() };
                        }
                    }
                    for (p, n) in held {
                        // SAFETY: as above.
                        unsafe { pool.deallocate(Stream::DEFAULT, p, n, 256).unwrap() };
                    }
                });
            }
        });
        assert_eq!(pool.nvtx_counts().map(|c| c.1), Some(0));
    }

    /// The GPU half (run under `compute-sanitizer --tool memcheck` by `scripts/gpu-run.sh
    /// nvtx-bounds`): a kernel reads one byte past the end of a pool (or arena) allocation, or one
    /// byte of a freed block. With bounds checking on, memcheck reports an invalid read; off, the
    /// memory is the pool's own and it reports nothing. `RMM_NVTX_PROBE=on|off` picks the option;
    /// without it the probes skip (they make an invalid access on purpose).
    mod gpu {
        use super::*;
        use crate::cuda::raw_for_tests as sys;
        use crate::mr::CudaMemoryResource;

        /// `probe(src, dst)`: `*dst = *src` (one byte), for one thread.
        const PTX: &str = "
.version 7.0
.target sm_75
.address_size 64
.visible .entry probe(.param .u64 src, .param .u64 dst)
{
    .reg .u64 %rd<3>;
    .reg .u16 %rs<2>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.global.u8 %rs1, [%rd1];
    st.global.u8 [%rd2], %rs1;
    ret;
}
\0";

        /// `Some(on)` from RMM_NVTX_PROBE, or `None` (skip).
        fn mode(test: &str) -> Option<bool> {
            crate::testing::require_gpu();
            match std::env::var("RMM_NVTX_PROBE").as_deref() {
                Ok("on") => Some(true),
                Ok("off") => Some(false),
                _ => {
                    crate::testing::skip(test, "an invalid access on purpose: run by `gpu-run.sh nvtx-bounds` (RMM_NVTX_PROBE=on|off)");
                    None
                }
            }
        }

        /// Launches `probe(src, dst)` on the legacy default stream and waits; prints the outcome
        /// (under memcheck with bounds on, the launch fails: the sanitizer's report is the result).
        fn read_byte(src: usize, dst: usize) {
            let mut module: sys::CUmodule = std::ptr::null_mut();
            let mut function: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: a NUL-terminated PTX image; a context is current (the resource made it).
            let loaded = unsafe { sys::cuModuleLoadData(&mut module, PTX.as_ptr().cast()) };
            assert_eq!(loaded, sys::CUresult::CUDA_SUCCESS, "cuModuleLoadData");
            // SAFETY: a loaded module and a NUL-terminated name.
            let found =
                unsafe { sys::cuModuleGetFunction(&mut function, module, c"probe".as_ptr()) };
            assert_eq!(found, sys::CUresult::CUDA_SUCCESS, "cuModuleGetFunction");
            let (mut src, mut dst) = (src as u64, dst as u64);
            let mut params = [
                (&mut src as *mut u64).cast::<std::ffi::c_void>(),
                (&mut dst as *mut u64).cast(),
            ];
            // SAFETY: the kernel takes two u64 parameters, given by pointer; one block of one thread.
            let launched = unsafe {
                sys::cuLaunchKernel(
                    function,
                    1,
                    1,
                    1,
                    1,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            let synced = Stream::DEFAULT.synchronize();
            println!(
                "probe: read {src:#x}; NVTX_INJECTION64_PATH={:?}",
                std::env::var("NVTX_INJECTION64_PATH")
            );
            println!("probe: launch {launched:?}, synchronize {synced:?}");
        }

        fn pool(on: bool) -> AnyResource {
            let pool = PoolMemoryResource::new(
                AnyResource::new(CudaMemoryResource::new()),
                Some(4 * MIB),
                None,
            )
            .unwrap();
            AnyResource::new(pool.with_nvtx_bounds(on))
        }

        fn arena(on: bool) -> AnyResource {
            let upstream = AnyResource::new(CudaMemoryResource::new());
            AnyResource::new(
                ArenaMemoryResource::with_options(
                    upstream,
                    ArenaOptions::default().arena_size(8 * MIB).nvtx_bounds(on),
                )
                .unwrap(),
            )
        }

        fn overrun(test: &str, make: fn(bool) -> AnyResource) {
            let Some(on) = mode(test) else { return };
            let mr = make(on);
            let s = Stream::DEFAULT;
            let p = mr.allocate(s, 100, 256).unwrap();
            let neighbour = mr.allocate(s, 256, 256).unwrap();
            let out = mr.allocate(s, 256, 256).unwrap();
            // One byte past the 100 bytes asked for (inside the pool's own memory).
            read_byte(p as usize + 100, out as usize);
            // SAFETY: from allocate above with these arguments (errors ignored: with bounds on, the
            // sanitizer may have ended the context).
            unsafe {
                let _ = mr.deallocate(s, out, 256, 256);
                let _ = mr.deallocate(s, neighbour, 256, 256);
                let _ = mr.deallocate(s, p, 100, 256);
            }
        }

        fn use_after_free(test: &str, make: fn(bool) -> AnyResource) {
            let Some(on) = mode(test) else { return };
            let mr = make(on);
            let s = Stream::DEFAULT;
            let keep = mr.allocate(s, 256, 256).unwrap();
            let p = mr.allocate(s, 4 * KIB, 256).unwrap();
            let out = mr.allocate(s, 256, 256).unwrap();
            // SAFETY: from allocate above with these arguments.
            unsafe { mr.deallocate(s, p, 4 * KIB, 256).unwrap() };
            // A read of the freed block (still the pool's memory).
            read_byte(p as usize + 8, out as usize);
            // SAFETY: as above; errors ignored as in `overrun`.
            unsafe {
                let _ = mr.deallocate(s, out, 256, 256);
                let _ = mr.deallocate(s, keep, 256, 256);
            }
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn pool_overrun_probe() {
            overrun("pool_overrun_probe", pool);
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn pool_use_after_free_probe() {
            use_after_free("pool_use_after_free_probe", pool);
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn arena_overrun_probe() {
            overrun("arena_overrun_probe", arena);
        }

        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn arena_use_after_free_probe() {
            use_after_free("arena_use_after_free_probe", arena);
        }
    }
}
