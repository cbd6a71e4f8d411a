//! `pool_memory_resource`: a coalescing, growing, shrinkable pool over any upstream.
//!
//! Like RMM's pool, it rounds requests to 256 bytes, serves them best fit from address-ordered
//! free blocks that coalesce within each upstream block, and grows with RMM's policy. Unlike it:
//! - **one free list for all streams** (RMM keeps one per stream and merges them only as a last
//!   resort, issue #2039): a block freed on one stream is usable by every other, so memory is never
//!   stranded on a stream. Each free block remembers the streams that freed into it; a stream
//!   taking a block freed elsewhere is ordered after that stream's queued work with one event
//!   recorded *then* (preferring blocks that need none);
//! - **no event per free** (RMM records one on every deallocation, issue #1995): a free costs no
//!   driver call, except on a per-thread default stream, which only its own thread can name;
//! - **no global lock on the common path** (issue #1887): each thread has a small cache of recently
//!   freed blocks in front of the shared list; caches are reclaimed before the pool grows or fails;
//! - **it shrinks** (issue #724): [`PoolMemoryResource::release_unused`] gives wholly free upstream
//!   blocks back; and on upstream out-of-memory it does so before failing;
//! - **alignments above 256 are honoured** (RMM ignores them).
//!
//! See `docs/design/pool.md` for the design and its trade-offs. Stream semantics: memory from
//! `allocate(stream, ..)` is usable on `stream` at once; `deallocate(stream, ..)` lets the memory be
//! reused after the work queued on `stream` so far.

use std::sync::Arc;

use crate::aligned::{align_down, align_up, check_alignment, is_aligned, DEFAULT_ALIGNMENT};
use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{tagged, FreeCheck, FreeChecks, Owned, RecordOwner, UNTAGGABLE};
use crate::mr::detail::nvtx_bounds::{self, NvtxBounds};
use crate::mr::detail::stream_ordered::{
    default_syncer, CacheLimits, Core, CoreStats, Growth, Syncer,
};
use crate::resource::{AnyResource, MemoryResource};

/// Counters of a [`PoolMemoryResource`], exact at the moment they are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStatistics {
    /// Bytes held from the upstream.
    pub pool_size: usize,
    /// Bytes handed out (requests rounded up to 256).
    pub bytes_used: usize,
    /// Bytes free in the pool (`pool_size - bytes_used`), cached ones included.
    pub bytes_free: usize,
    /// Free blocks, cached ones included.
    pub free_blocks: usize,
    /// The largest free block in the shared list (cached blocks are small and not counted).
    pub largest_free_block: usize,
    /// Free bytes sitting in the per-thread caches.
    pub cached_bytes: usize,
    /// Upstream blocks held now.
    pub upstream_blocks: usize,
    /// Upstream allocations made so far.
    pub upstream_allocations: u64,
    /// Upstream blocks given back so far (by [`PoolMemoryResource::release_unused`] or on
    /// out-of-memory).
    pub upstream_releases: u64,
}

impl From<CoreStats> for PoolStatistics {
    fn from(s: CoreStats) -> Self {
        PoolStatistics {
            pool_size: s.pool_size,
            bytes_used: s.used,
            bytes_free: s.free,
            free_blocks: s.free_blocks,
            largest_free_block: s.largest_free,
            cached_bytes: s.cached_bytes,
            upstream_blocks: s.upstream_blocks,
            upstream_allocations: s.upstream_allocations,
            upstream_releases: s.upstream_releases,
        }
    }
}

/// A coalescing pool of memory from an upstream resource (RMM's `pool_memory_resource`).
///
/// Stateful: clones share the pool and compare equal only to each other; the last clone to drop
/// gives every upstream block back.
///
/// ```
/// use rmm_core::{mr::{PoolMemoryResource, SystemMemoryResource}, AnyResource, MemoryResource, cuda::Stream};
/// let upstream = AnyResource::new(SystemMemoryResource::new());
/// let pool = PoolMemoryResource::new(upstream, Some(1 << 20), Some(16 << 20))?;
/// let p = pool.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(pool.statistics().bytes_used, 1024);
/// // SAFETY: `p` came from `pool` with these arguments.
/// unsafe { pool.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// assert_eq!(pool.pool_size(), 1 << 20);
/// assert_eq!(pool.release_unused()?, 1 << 20);
/// assert_eq!(pool.pool_size(), 0);
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PoolMemoryResource {
    core: Arc<Core>,
    maximum: Option<usize>,
    /// The live allocations, when frees are checked (shared by clones).
    live: Arc<FreeCheck>,
    /// NVTX bounds checking (off: `None`, one branch per call).
    nvtx: Option<Arc<NvtxBounds>>,
}

impl PoolMemoryResource {
    /// A pool over `upstream` (RMM's constructor).
    ///
    /// - `initial_pool_size`: bytes to take from the upstream now (with `allocate_sync`, so they are
    ///   usable on every stream). `None`: half of the current device's free memory, rounded down to
    ///   256 and capped at the maximum, as RMM's Python default; 0 in host mode or over a
    ///   host-only upstream (the pool then grows on demand).
    /// - `maximum_pool_size`: the most the pool may hold; `None`: no limit but the upstream's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a size that is not a multiple of 256, or an initial size
    /// above the maximum (`"Initial pool size exceeds the maximum pool size!"`); the upstream's
    /// error when the initial allocation fails.
    ///
    /// Frees are checked: one whose pointer and size do not match a live allocation of this pool
    /// is refused (see [`FreeChecks`]).
    pub fn new(
        upstream: AnyResource,
        initial_pool_size: Option<usize>,
        maximum_pool_size: Option<usize>,
    ) -> Result<Self> {
        Self::with_free_checks(
            upstream,
            initial_pool_size,
            maximum_pool_size,
            FreeChecks::Checked,
        )
    }

    /// As [`PoolMemoryResource::new`], choosing whether frees are checked:
    /// [`FreeChecks::Unchecked`] is RMM's behaviour (a wrong free corrupts the pool).
    ///
    /// # Errors
    /// As [`PoolMemoryResource::new`].
    pub fn with_free_checks(
        upstream: AnyResource,
        initial_pool_size: Option<usize>,
        maximum_pool_size: Option<usize>,
        checks: FreeChecks,
    ) -> Result<Self> {
        let mut pool = Self::build(
            upstream,
            initial_pool_size,
            maximum_pool_size,
            default_syncer(),
            CacheLimits::DEFAULT,
        )?;
        pool.live = Arc::new(FreeCheck::tagged(checks));
        Ok(pool)
    }

    pub(crate) fn build(
        upstream: AnyResource,
        initial_pool_size: Option<usize>,
        maximum_pool_size: Option<usize>,
        syncer: Arc<dyn Syncer>,
        cache: CacheLimits,
    ) -> Result<Self> {
        if initial_pool_size.is_some_and(|n| !is_aligned(n, DEFAULT_ALIGNMENT)) {
            return Err(Error::invalid(
                "Error, Initial pool size required to be a multiple of 256 bytes",
            ));
        }
        if maximum_pool_size.is_some_and(|n| !is_aligned(n, DEFAULT_ALIGNMENT)) {
            return Err(Error::invalid(
                "Error, Maximum pool size required to be a multiple of 256 bytes",
            ));
        }
        let initial = match initial_pool_size {
            Some(n) => n,
            None => default_initial_size(&upstream)?.min(maximum_pool_size.unwrap_or(usize::MAX)),
        };
        if maximum_pool_size.is_some_and(|max| initial > max) {
            return Err(Error::invalid(
                "Initial pool size exceeds the maximum pool size!",
            ));
        }
        let growth = Growth::Pool {
            maximum: maximum_pool_size,
        };
        let core = Core::new(
            "pool_memory_resource",
            upstream,
            syncer,
            growth,
            cache,
            initial,
        )?;
        let nvtx = nvtx_bounds::enabled_by_env().then(|| Arc::new(NvtxBounds::new()));
        Ok(Self {
            core,
            maximum: maximum_pool_size,
            live: Arc::new(FreeCheck::tagged(FreeChecks::Checked)),
            nvtx,
        })
    }

    /// Turns bounds checking inside the pool on or off (beyond RMM; off by default, or on for every
    /// pool with the environment variable `RMM_NVTX_BOUNDS=1`): each upstream region is announced
    /// to tools as an NVTX heap and each allocation as a region of it, of the bytes asked for, so
    /// that `compute-sanitizer --tool memcheck` reports an access past the end of an allocation or
    /// to a freed block, which it cannot tell from a valid access otherwise. Free when off (one
    /// branch); on, every allocation and free takes one more lock. Call before the first
    /// allocation: allocations made before are not registered (and their frees not reported).
    pub fn with_nvtx_bounds(mut self, enabled: bool) -> Self {
        self.nvtx = enabled.then(|| Arc::new(NvtxBounds::new()));
        self
    }

    /// Whether bounds checking inside the pool is on ([`PoolMemoryResource::with_nvtx_bounds`]).
    pub fn nvtx_bounds(&self) -> bool {
        self.nvtx.is_some()
    }

    /// (heaps, regions) registered with NVTX now (tests).
    #[cfg(test)]
    pub(crate) fn nvtx_counts(&self) -> Option<(usize, usize)> {
        self.nvtx.as_ref().map(|n| n.counts())
    }

    /// Test hook: frees per batch of the engine (test builds close a batch every few frees).
    #[cfg(test)]
    pub(crate) fn set_close_frees(&self, frees: u32) {
        self.core.set_close_frees(frees);
    }

    /// Whether frees are checked against the live allocations.
    pub fn free_checks(&self) -> FreeChecks {
        self.live.mode()
    }

    /// The regions held from the upstream: `(address, bytes)` each.
    pub(crate) fn regions(&self) -> Vec<(usize, usize)> {
        self.core.regions()
    }

    /// Bytes currently held from the upstream.
    pub fn pool_size(&self) -> usize {
        self.core.pool_size()
    }

    /// The most the pool may hold, if limited.
    pub fn maximum_pool_size(&self) -> Option<usize> {
        self.maximum
    }

    /// The upstream resource.
    pub fn upstream_resource(&self) -> &AnyResource {
        self.core.upstream().expect("a core built over an upstream")
    }

    /// Exact counters (briefly takes every lock of the pool).
    pub fn statistics(&self) -> PoolStatistics {
        PoolStatistics::from(self.core.stats())
    }

    /// Gives every wholly free upstream block back to the upstream and returns the bytes released
    /// (RMM has no way to shrink a pool, issue #724).
    ///
    /// Before a block goes back, the work still queued on the streams that freed into it is waited
    /// for (only that work: an event recorded now on each such stream). The pool stays usable and
    /// grows again on demand. Streams found idle on the way stop holding back the blocks that stay.
    ///
    /// # Errors
    /// A driver error while synchronizing (the blocks concerned stay in the pool) or the
    /// upstream's error when it takes memory back.
    #[doc(alias = "trim")]
    pub fn release_unused(&self) -> Result<usize> {
        let released = self.core.release_unused();
        if let Some(nvtx) = &self.nvtx {
            nvtx.sync_heaps(self.core.regions_generation(), || self.core.regions());
        }
        released
    }
}

/// Half of the current device's free memory, rounded down to 256 (RMM's Python default); 0 in host
/// mode or for a host-only upstream.
fn default_initial_size(upstream: &AnyResource) -> Result<usize> {
    if cuda::is_host_mode() || !upstream.access().device() {
        return Ok(0);
    }
    let (free, _) = cuda::mem_info(cuda::current_device()?)?;
    Ok(align_down(free / 2, DEFAULT_ALIGNMENT))
}

impl MemoryResource for PoolMemoryResource {
    /// # Errors
    /// [`Error::InvalidArgument`] for an alignment that is not a power of two;
    /// [`Error::OutOfMemory`] ("Maximum pool size exceeded ...") when neither the pool nor the
    /// upstream can provide the memory.
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.allocate_for(stream, bytes, alignment, 0)
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when frees are checked and `ptr` is not a live allocation of this
    /// pool made with `bytes` (rounded up to 256): a double free, a pointer into an allocation, a
    /// wrong size or another resource's pointer. Nothing is freed then and the pool is unchanged.
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
        let size = self.free_size(bytes)?;
        let verified = self.live.mode() == FreeChecks::Checked;
        let free = || self.core.deallocate(stream, ptr as usize, size, verified);
        // The usual arm calls the check itself: a closure shared by both arms is inlined into
        // this one or not as unrelated code changes.
        match &self.nvtx {
            None => self.live.free(self.name(), ptr, size, free),
            Some(nvtx) => nvtx.free(ptr, || self.live.free(self.name(), ptr, size, free)),
        }
    }

    /// From the live-allocation index (`None` when frees are unchecked).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        match align_up(bytes, DEFAULT_ALIGNMENT) {
            Some(size) => self.live.is_live(ptr, size),
            None => self.live.is_live(ptr, 0).map(|_| false),
        }
    }

    forward_to_upstream! {
        name: "pool_memory_resource",
        upstream: upstream_resource,
        identity: core,
        forward: access
    }
}

/// An adaptor that keeps its record of what it hands out in the pool's (the statistics adaptor;
/// docs/design/statistics-cost.md): it registers once, then allocates and frees with its number.
impl PoolMemoryResource {
    /// Numbers `owner` for [`PoolMemoryResource::allocate_for`] and
    /// [`PoolMemoryResource::deallocate_for`]; `None` when frees are unchecked or the pool has
    /// numbered all it can (the owner then keeps its own record).
    pub(crate) fn register_owner(&self, owner: std::sync::Weak<dyn RecordOwner>) -> Option<u16> {
        self.live.register(owner)
    }

    /// [`MemoryResource::allocate`], recorded as made by `owner` (0: by no owner). Inlined into
    /// both callers, so the pool's own allocation keeps no trace of owners.
    #[inline(always)]
    pub(crate) fn allocate_for(
        &self,
        stream: Stream,
        bytes: usize,
        alignment: usize,
        owner: u16,
    ) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let exceeded = || Error::OutOfMemory {
            bytes,
            resource: self.name().into(),
            detail: "Maximum pool size exceeded".into(),
        };
        let size = align_up(bytes, DEFAULT_ALIGNMENT).ok_or_else(exceeded)?;
        if size >= UNTAGGABLE || self.maximum.is_some_and(|max| size > max) {
            return Err(exceeded());
        }
        let record = if owner == 0 {
            size
        } else {
            tagged(size, bytes, owner)
        };
        let block = self
            .core
            .allocate(stream, size, alignment.max(DEFAULT_ALIGNMENT))?;
        let ptr = self
            .live
            .allocated(self.name(), block as *mut u8, record, |block| {
                // The block was never handed out: back to the engine at once (checked: `allocated`
                // only fails for a checked pool).
                let _ = self.core.deallocate(stream, block as usize, size, true);
            })
            .map_err(|e| e.error(self.name(), size))?;
        if let Some(nvtx) = &self.nvtx {
            nvtx.sync_heaps(self.core.regions_generation(), || self.core.regions());
            nvtx.allocated(ptr, bytes);
        }
        Ok(ptr)
    }

    /// A free through the adaptor numbered `owner` (see `FreeCheck::free_owned`): `before` hears
    /// whether `owner` made the allocation and with how many bytes, before the memory goes back;
    /// `after_failure` hears it again if the free fails (the allocation stays live). A pointer this
    /// pool does not know is refused in `name`'s words. Only for a pool that checks frees.
    ///
    /// # Safety
    /// As for [`MemoryResource::deallocate`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn deallocate_for(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        owner: u16,
        name: &str,
        before: impl FnOnce(Owned),
        after_failure: impl FnOnce(Owned),
    ) -> Result<()> {
        let size = self.free_size(bytes)?;
        let free = || {
            self.live.free_owned(
                name,
                ptr,
                size,
                owner,
                before,
                || self.core.deallocate(stream, ptr as usize, size, true),
                after_failure,
            )
        };
        match &self.nvtx {
            None => free(),
            Some(nvtx) => nvtx.free(ptr, free),
        }
    }

    /// True when `ptr` is a live allocation of `bytes` (rounded up to 256) that `owner` made.
    pub(crate) fn is_owned(&self, ptr: *mut u8, bytes: usize, owner: u16) -> bool {
        align_up(bytes, DEFAULT_ALIGNMENT).is_some_and(|size| self.live.is_owned(ptr, size, owner))
    }

    /// The granule a free of `bytes` names.
    #[inline]
    fn free_size(&self, bytes: usize) -> Result<usize> {
        align_up(bytes, DEFAULT_ALIGNMENT)
            .ok_or_else(|| Error::invalid(format!("{bytes} bytes cannot have come from this pool")))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod stream_kind_tests;
