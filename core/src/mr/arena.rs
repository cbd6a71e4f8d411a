//! `arena_memory_resource`: a sub-allocator of one fixed upstream block, with an arena per stream
//! and per thread so that threads on different streams do not contend.
//!
//! Glossary (details in `mr/detail/arena.rs`):
//! - the *arena size* is the total cap: it is allocated from the upstream once, at construction,
//!   and the resource never grows;
//! - a *superblock* is a 1 MiB piece of it that one arena carves small blocks from (first fit,
//!   coalescing on free);
//! - each stream has an *arena*; the default streams give each thread its own: one for its
//!   per-thread default stream, returned to the global arena when the thread exits, and one for
//!   the legacy default stream (handle 0 and `cudaStreamLegacy`), whose superblocks join a shared
//!   legacy arena when the thread exits. RMM shares one arena among all threads on the legacy
//!   stream, so they contend on its lock; here a block freed on the legacy stream by another
//!   thread goes back to its owner's arena without waiting, since it is the same stream;
//! - the *global arena* holds what no arena holds, and serves requests above 1 MiB directly.
//!
//! Sizes are rounded up to 256 bytes. Alignments up to 256 are honoured; larger ones are rejected
//! (wrap the resource in an aligned adaptor), where RMM silently ignores them.
//!
//! When a request finds no room, the resource *defragments* (synchronizes the device, returns every
//! arena's empty superblocks to the global arena, where neighbours coalesce) and retries once, then
//! fails with [`Error::OutOfMemory`] ("... No room in arena.") and, if asked to, writes its state
//! to a dump file.
//!
//! Stream semantics: memory freed on a stream is reused by that stream's arena in stream order;
//! memory crosses to other streams only after a synchronization (of the freeing stream, or of the
//! device), so a free on any stream or thread is safe. In host mode, over host-only memory, and
//! over a [`crate::mr::SimulatedMemoryResource`], nothing synchronizes and no CUDA call is made.

use std::path::PathBuf;
use std::sync::Arc;

use crate::aligned::{align_down, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::arena::SUPERBLOCK_SIZE;
use crate::mr::detail::arena_impl::Shared;
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{granule, FreeCheck, FreeChecks};
use crate::mr::detail::nvtx_bounds::{self, NvtxBounds};
use crate::mr::SimulatedMemoryResource;
use crate::resource::MemoryResource;
use crate::AnyResource;

/// The file the state is written to on failure unless another is configured (as RMM's).
pub const DEFAULT_DUMP_FILE: &str = "rmm_arena_memory_dump.log";

/// The default arena size in host mode (no GPU), when none is given: 256 MiB, or half the host's
/// memory if that is less.
pub const HOST_MODE_DEFAULT_SIZE: usize = 256 << 20;

/// Options of an [`ArenaMemoryResource`] (RMM's constructor arguments, plus the dump file).
///
/// ```
/// use rmm_core::mr::ArenaOptions;
/// let options = ArenaOptions::default().arena_size(64 << 20).dump_log_on_failure(true);
/// assert_eq!(options.arena_size, Some(64 << 20));
/// assert_eq!(options.dump_path.to_str(), Some("rmm_arena_memory_dump.log"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaOptions {
    /// The total cap in bytes, allocated from the upstream at construction (rounded down to 256;
    /// at least 1 MiB). `None`: half the current device's free memory (at least 1 MiB); half the
    /// capacity of a simulated upstream; [`HOST_MODE_DEFAULT_SIZE`] for host memory without a GPU.
    pub arena_size: Option<usize>,
    /// Write the arena's state to [`ArenaOptions::dump_path`] when an allocation fails.
    pub dump_log_on_failure: bool,
    /// Where the state is written ([`DEFAULT_DUMP_FILE`] in the working directory by default). The
    /// first dump of a resource truncates the file; later ones append.
    pub dump_path: PathBuf,
    /// Whether frees are checked against the live allocations ([`FreeChecks::Checked`] by
    /// default; [`FreeChecks::Unchecked`] is RMM's behaviour, where a wrong free corrupts the arena).
    pub free_checks: FreeChecks,
    /// Bounds checking inside the arena (beyond RMM; off by default, or on for every arena with
    /// the environment variable `RMM_NVTX_BOUNDS=1`): the arena's upstream block is announced to
    /// tools as an NVTX heap and each allocation as a region of it, of the bytes asked for, so that
    /// `compute-sanitizer --tool memcheck` reports an access past the end of an allocation or to a
    /// freed block. Free when off (one branch); on, every allocation and free takes one more lock.
    pub nvtx_bounds: bool,
}

impl Default for ArenaOptions {
    fn default() -> Self {
        Self {
            arena_size: None,
            dump_log_on_failure: false,
            dump_path: PathBuf::from(DEFAULT_DUMP_FILE),
            free_checks: FreeChecks::Checked,
            nvtx_bounds: false,
        }
    }
}

impl ArenaOptions {
    /// Sets [`ArenaOptions::arena_size`].
    pub fn arena_size(mut self, bytes: usize) -> Self {
        self.arena_size = Some(bytes);
        self
    }

    /// Sets [`ArenaOptions::dump_log_on_failure`].
    pub fn dump_log_on_failure(mut self, dump: bool) -> Self {
        self.dump_log_on_failure = dump;
        self
    }

    /// Sets [`ArenaOptions::free_checks`].
    pub fn free_checks(mut self, checks: FreeChecks) -> Self {
        self.free_checks = checks;
        self
    }

    /// Sets [`ArenaOptions::nvtx_bounds`].
    pub fn nvtx_bounds(mut self, enabled: bool) -> Self {
        self.nvtx_bounds = enabled;
        self
    }

    /// Sets [`ArenaOptions::dump_path`] (and nothing else: dumping still needs
    /// [`ArenaOptions::dump_log_on_failure`]).
    pub fn dump_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.dump_path = path.into();
        self
    }
}

/// The accounting of an [`ArenaMemoryResource`] at one moment.
///
/// `used_bytes + free_bytes == arena_size` always; `free_bytes` is the global arena's free space
/// plus the free blocks inside superblocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// The bytes the arena manages (its cap).
    pub arena_size: usize,
    /// Bytes handed out (each request rounded up to 256).
    pub used_bytes: usize,
    /// Bytes not handed out.
    pub free_bytes: usize,
    /// Free bytes of the global arena (outside every superblock).
    pub global_free_bytes: usize,
    /// The largest contiguous free range of the global arena: the largest request above 1 MiB that
    /// can succeed without a defragmentation.
    pub largest_global_free_block: usize,
    /// Free bytes inside superblocks.
    pub superblock_free_bytes: usize,
    /// The largest free block inside any superblock.
    pub largest_superblock_free_block: usize,
    /// Superblocks held by arenas, or orphaned in the global arena.
    pub superblocks: usize,
    /// Superblocks with live blocks that no arena holds (their thread exited).
    pub orphan_superblocks: usize,
    /// Stream and thread arenas.
    pub arenas: usize,
    /// Live allocations above 1 MiB (served by the global arena).
    pub large_allocations: usize,
}

/// A fixed-size sub-allocator with per-stream and per-thread arenas (RMM's
/// `arena_memory_resource`).
///
/// Stateful: clones share the arena and compare equal only to each other; the upstream block goes
/// back to the upstream when the last clone drops. See the [module documentation](self) for the
/// design and the stream semantics.
///
/// ```
/// use rmm_core::{mr::{ArenaMemoryResource, SystemMemoryResource}, AnyResource, MemoryResource, cuda::Stream};
/// let arena = ArenaMemoryResource::new(AnyResource::new(SystemMemoryResource::new()), Some(8 << 20), false)?;
/// let p = arena.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(arena.used_bytes(), 1024);
/// // SAFETY: `p` came from `arena` with these arguments.
/// unsafe { arena.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// let err = arena.allocate(Stream::DEFAULT, 9 << 20, 256).unwrap_err();
/// assert!(err.is_out_of_memory() && err.to_string().contains("No room in arena."));
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ArenaMemoryResource {
    shared: Arc<Shared>,
    /// The live allocations, when frees are checked (shared by clones).
    live: Arc<FreeCheck>,
    /// NVTX bounds checking (off: `None`, one branch per call).
    nvtx: Option<Arc<NvtxBounds>>,
}

impl ArenaMemoryResource {
    /// An arena of `arena_size` bytes (see [`ArenaOptions::arena_size`] for the default) taken from
    /// `upstream`, writing its state to [`DEFAULT_DUMP_FILE`] on failure when
    /// `dump_log_on_failure` is set.
    ///
    /// # Errors
    /// As [`ArenaMemoryResource::with_options`].
    pub fn new(
        upstream: AnyResource,
        arena_size: Option<usize>,
        dump_log_on_failure: bool,
    ) -> Result<Self> {
        Self::with_options(
            upstream,
            ArenaOptions {
                arena_size,
                dump_log_on_failure,
                ..ArenaOptions::default()
            },
        )
    }

    /// An arena configured by `options`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an arena size below 1 MiB; the upstream's error (usually
    /// [`Error::OutOfMemory`]) when it cannot provide the arena; driver errors while measuring the
    /// device's free memory.
    pub fn with_options(upstream: AnyResource, options: ArenaOptions) -> Result<Self> {
        let simulated = upstream
            .downcast_ref::<SimulatedMemoryResource>()
            .map(SimulatedMemoryResource::capacity);
        // Synchronize only for memory a GPU can use, never for a simulated device.
        let gpu = if simulated.is_none() && upstream.access().device() && cuda::is_available() {
            Some(cuda::current_device()?)
        } else {
            None
        };
        let size = match options.arena_size {
            Some(size) => size,
            None => match (simulated, gpu) {
                (Some(capacity), _) => capacity / 2,
                (None, Some(device)) => cuda::mem_info(device)?.0 / 2,
                (None, None) => {
                    let host = crate::mr::detail::size_guard::host_physical_memory();
                    if host == 0 {
                        HOST_MODE_DEFAULT_SIZE
                    } else {
                        HOST_MODE_DEFAULT_SIZE.min(host / 2)
                    }
                }
            }
            .max(SUPERBLOCK_SIZE),
        };
        let size = align_down(size, DEFAULT_ALIGNMENT);
        if size < SUPERBLOCK_SIZE {
            return Err(Error::invalid(format!(
                "an arena of {size} bytes is too small: it must hold at least one {SUPERBLOCK_SIZE}-byte superblock"
            )));
        }
        let dump = options.dump_log_on_failure.then_some(options.dump_path);
        let live = Arc::new(FreeCheck::new(options.free_checks));
        let shared = Shared::new(upstream, size, gpu, dump)?;
        let nvtx = (options.nvtx_bounds || nvtx_bounds::enabled_by_env()).then(|| {
            let bounds = NvtxBounds::new();
            bounds.sync_heaps(0, || vec![shared.range()]);
            Arc::new(bounds)
        });
        Ok(Self { shared, live, nvtx })
    }

    /// The upstream resource.
    pub fn upstream(&self) -> &AnyResource {
        self.shared.upstream()
    }

    /// Whether frees are checked against the live allocations.
    pub fn free_checks(&self) -> FreeChecks {
        self.live.mode()
    }

    /// Whether bounds checking inside the arena is on ([`ArenaOptions::nvtx_bounds`]).
    pub fn nvtx_bounds(&self) -> bool {
        self.nvtx.is_some()
    }

    /// (heaps, regions) registered with NVTX now (tests).
    #[cfg(test)]
    pub(crate) fn nvtx_counts(&self) -> Option<(usize, usize)> {
        self.nvtx.as_ref().map(|n| n.counts())
    }

    /// The bytes the arena manages (its cap).
    pub fn arena_size(&self) -> usize {
        self.shared.size()
    }

    /// The accounting now (takes every lock in turn: meant for diagnostics, not hot loops).
    pub fn stats(&self) -> ArenaStats {
        let s = self.shared.snapshot();
        ArenaStats {
            arena_size: self.shared.size(),
            used_bytes: s.used,
            free_bytes: self.shared.size() - s.used,
            global_free_bytes: s.global_free,
            largest_global_free_block: s.largest_global_free,
            superblock_free_bytes: s.superblock_free,
            largest_superblock_free_block: s.largest_superblock_free,
            superblocks: s.superblocks,
            orphan_superblocks: s.orphan_superblocks,
            arenas: s.arenas,
            large_allocations: s.large_allocations,
        }
    }

    /// Bytes handed out (each request rounded up to 256).
    pub fn used_bytes(&self) -> usize {
        self.stats().used_bytes
    }

    /// Bytes not handed out.
    pub fn free_bytes(&self) -> usize {
        self.stats().free_bytes
    }

    /// Superblocks held by arenas (or orphaned).
    pub fn superblock_count(&self) -> usize {
        self.stats().superblocks
    }

    /// Returns every arena's empty superblocks to the global arena, where neighbours coalesce
    /// (what a failing allocation does before its retry). Synchronizes the device first when the
    /// arena works for a GPU.
    ///
    /// # Errors
    /// A failed device synchronization; nothing moves then.
    pub fn defragment(&self) -> Result<()> {
        self.shared.defragment()
    }

    /// The state as text: the global arena's free ranges, large allocations and orphans, then each
    /// arena's superblocks and free blocks (what the dump file holds).
    pub fn dump_state(&self) -> String {
        self.shared.describe()
    }

    /// Panics when an internal invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.shared.check_invariants();
    }

    /// The managed range `(base, size)`: the arena's one segment.
    pub(crate) fn range(&self) -> (usize, usize) {
        self.shared.range()
    }
}

impl MemoryResource for ArenaMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if alignment > DEFAULT_ALIGNMENT {
            return Err(Error::invalid(format!(
                "arena_memory_resource guarantees {DEFAULT_ALIGNMENT}-byte alignment, {alignment} was requested \
                 (wrap it in an aligned adaptor)"
            )));
        }
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let ptr = self
            .live
            .allocated(
                self.name(),
                self.shared.allocate(stream, bytes)?,
                granule(bytes, None),
                |ptr| {
                    // The block was never handed out: back to the arena at once.
                    let _ = self.shared.deallocate(stream, ptr, bytes);
                },
            )
            .map_err(|e| e.error(self.name(), bytes))?;
        if let Some(nvtx) = &self.nvtx {
            nvtx.allocated(ptr, bytes);
        }
        Ok(ptr)
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when frees are checked and `ptr` is not a live allocation of this
    /// arena made with `bytes` (rounded up to 256): a double free, a pointer into an allocation, a
    /// wrong size or another resource's pointer. Nothing is freed then and the arena is unchanged.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let free = || {
            self.live.free(self.name(), ptr, granule(bytes, None), || {
                self.shared.deallocate(stream, ptr, bytes)
            })
        };
        match &self.nvtx {
            None => free(),
            Some(nvtx) => nvtx.free(ptr, free),
        }
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let ptr = self.allocate(Stream::DEFAULT, bytes, alignment)?;
        if self.shared.works_for_gpu() {
            if let Err(e) = Stream::DEFAULT.synchronize() {
                // SAFETY: `ptr` was just allocated with these arguments and never handed out.
                let _ = unsafe { self.deallocate(Stream::DEFAULT, ptr, bytes, alignment) };
                return Err(e);
            }
        }
        Ok(ptr)
    }

    /// From the live-allocation index (`None` when frees are unchecked).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        self.live.is_live(ptr, granule(bytes, None))
    }

    forward_to_upstream! {
        name: "arena_memory_resource",
        upstream: upstream,
        identity: shared,
        forward: access
    }
}

#[cfg(test)]
mod tests;
