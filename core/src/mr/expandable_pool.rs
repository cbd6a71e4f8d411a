//! `expandable_pool_memory_resource` (experimental; not an RMM type): a stream-ordered pool on one
//! reserved range of virtual addresses that grows in place and gives memory back granule by
//! granule, even between live blocks (issue 28).
//!
//! It is the pool's engine (one free list for all streams, no event per free, per-thread caches,
//! checked frees) over a [`VirtualRange`] instead of an upstream resource:
//! - **grows in place**: the range is reserved once (by default as large as the device) and its
//!   books extend at their end by the whole granules a request needs, merging with the free block
//!   there, so free space coalesces across growth steps and one large request never fails for lack
//!   of a contiguous block while the device could back it;
//! - **maps what it hands out**: granules are created and mapped when a block that touches them is
//!   handed out (CUDA's `cuMemCreate` + `cuMemMap` + `cuMemSetAccess`), with no lock of the pool
//!   held;
//! - **gives memory back from anywhere**: [`trim`](ExpandablePoolMemoryResource::trim) unmaps and
//!   releases every whole granule that lies in free memory, between live blocks too, once the
//!   streams that used it are done; with a release threshold (as `cuda_async`'s) frees give idle
//!   granules back while more than the threshold is mapped;
//! - **shares**: a live allocation exports as shareable handles (POSIX file descriptors, fabric
//!   handles where the system has them) that another process maps with no copy
//!   ([`ExpandablePoolMemoryResource::export`]);
//! - **peers**: devices named in the options (`VirtualRangeOptions::peers`, or granted later) can
//!   access every granule.
//!
//! Design: `docs/design/expandable-pool.md`. Stream semantics are the pool's: memory from
//! `allocate(stream, ..)` is usable on `stream` at once; `deallocate(stream, ..)` lets it be reused
//! after the work queued on `stream` so far.

use std::sync::Arc;

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::vmm::ShareableHandles;
use crate::cuda::{self, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::detail::core_calls;
use crate::mr::detail::live_set::{FreeCheck, FreeChecks};
use crate::mr::detail::nvtx_bounds::{self, NvtxBounds};
use crate::mr::detail::stream_ordered::{default_syncer, CacheLimits, Core, Mapped, Syncer};
use crate::mr::detail::virtual_range::{
    Backend, ExportedSpan, HostBackend, VirtualRange, VirtualRangeOptions,
};
use crate::resource::{Access, MemoryResource};

/// The resource's name (as RMM would spell it).
const NAME: &str = "expandable_pool_memory_resource";

/// The default reservation, in device sizes (see [`ExpandablePoolOptions::range`]).
const DEFAULT_RESERVE_FACTOR: usize = 2;

/// How to build an [`ExpandablePoolMemoryResource`]; `Default` is the current device (host memory
/// in host mode), a reservation twice as large as the device, the driver's granule, every
/// shareable handle kind the device offers, no peers, no release threshold, checked frees, nothing
/// mapped at first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpandablePoolOptions {
    /// What backs the granules. `None`: the current device, or in host mode host memory
    /// ([`HostBackend::default`]).
    pub backend: Option<Backend>,
    /// The range: its reservation (the books of free and live blocks never extend beyond it;
    /// `None` here: twice the device's total memory, as addresses cost nothing but the driver's
    /// page tables, and room beyond the end of the books lets a request grow in place while live
    /// blocks pin granules spread below), its granule (the unit of mapping and of giving back),
    /// the shareable handle kinds of its granules, and the peer devices that may access them.
    pub range: VirtualRangeOptions,
    /// Mapped bytes to keep when frees reach the pool's shared list: above it, free granules whose
    /// streams are idle are given back (as `cuda_async`'s release threshold). `None`: everything
    /// stays mapped until [`ExpandablePoolMemoryResource::trim`].
    pub release_threshold: Option<usize>,
    /// Whether frees are checked against the live allocations (default: checked).
    pub free_checks: FreeChecks,
    /// Bytes to map at construction (an allocation of that size freed at once, as `cuda_async`
    /// primes its pool), so that the first requests find memory mapped; 0: none. A release
    /// threshold below it gives the excess back at that free.
    pub initial_size: usize,
}

impl ExpandablePoolOptions {
    /// Sets [`ExpandablePoolOptions::backend`].
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Sets [`ExpandablePoolOptions::range`].
    pub fn range(mut self, range: VirtualRangeOptions) -> Self {
        self.range = range;
        self
    }

    /// Sets [`ExpandablePoolOptions::release_threshold`].
    pub fn release_threshold(mut self, bytes: usize) -> Self {
        self.release_threshold = Some(bytes);
        self
    }

    /// Sets [`ExpandablePoolOptions::initial_size`].
    pub fn initial_size(mut self, bytes: usize) -> Self {
        self.initial_size = bytes;
        self
    }

    /// Sets [`ExpandablePoolOptions::free_checks`].
    pub fn free_checks(mut self, checks: FreeChecks) -> Self {
        self.free_checks = checks;
        self
    }
}

/// Counters of an [`ExpandablePoolMemoryResource`], taken at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpandablePoolStatistics {
    /// Bytes of addresses reserved: the most the pool can hold.
    pub reserved_bytes: usize,
    /// The granule.
    pub granularity: usize,
    /// Bytes mapped now (device memory the pool holds).
    pub mapped_bytes: usize,
    /// The most bytes mapped at once so far.
    pub peak_mapped_bytes: usize,
    /// Bytes handed out (requests rounded up to 256).
    pub used_bytes: usize,
    /// Mapped bytes not handed out (`mapped - used`): free memory, and the unused part of granules
    /// that live blocks touch.
    pub free_mapped_bytes: usize,
    /// Mapped bytes a [`trim`](ExpandablePoolMemoryResource::trim) would give back now: the
    /// granules that lie wholly in free memory.
    pub releasable_bytes: usize,
    /// Bytes the pool's books span, from the range's start to their end (free blocks there may hold
    /// unmapped granules).
    pub books_bytes: usize,
    /// Free blocks, cached ones included.
    pub free_blocks: usize,
    /// The largest free block in the shared list (mapped or not).
    pub largest_free_block: usize,
    /// Free bytes in the per-thread caches.
    pub cached_bytes: usize,
    /// Times the books grew.
    pub growth_steps: u64,
    /// Granules mapped so far.
    pub granules_mapped: u64,
    /// Granules given back so far.
    pub granules_released: u64,
}

/// A stream-ordered pool that grows in place on one reserved range of virtual addresses and gives
/// memory back granule by granule (experimental: see the [module docs](self)).
///
/// Stateful: clones share the pool and compare equal only to each other; the last clone to drop
/// unmaps everything and frees the reservation (after synchronizing the streams its free blocks
/// wait for).
///
/// ```
/// use rmm_core::mr::experimental::{
///     Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend,
/// };
/// use rmm_core::{cuda::Stream, MemoryResource};
/// // Host memory standing in for a device of 64 MiB, in granules of 1 MiB.
/// let device = Backend::Host(HostBackend { capacity: Some(64 << 20), granularity: 1 << 20 });
/// let pool = ExpandablePoolMemoryResource::new(ExpandablePoolOptions::default().backend(device))?;
/// let a = pool.allocate(Stream::DEFAULT, 3 << 20, 256)?;
/// let b = pool.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(pool.mapped_bytes(), 4 << 20);
/// // SAFETY: `a` came from `pool` with these arguments.
/// unsafe { pool.deallocate(Stream::DEFAULT, a, 3 << 20, 256)? };
/// // The three granules under the freed block go back; the one `b` touches stays.
/// assert_eq!(pool.trim()?, 3 << 20);
/// assert_eq!(pool.mapped_bytes(), 1 << 20);
/// // SAFETY: `b` came from `pool` with these arguments.
/// unsafe { pool.deallocate(Stream::DEFAULT, b, 1000, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ExpandablePoolMemoryResource {
    core: Arc<Core>,
    /// The live allocations, when frees are checked (shared by clones).
    live: Arc<FreeCheck>,
    /// NVTX bounds checking (off: `None`, one branch per call).
    nvtx: Option<Arc<NvtxBounds>>,
    access: Access,
}

impl ExpandablePoolMemoryResource {
    /// A pool as `options` say.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a device without virtual memory management or a peer that cannot
    /// access it; [`Error::InvalidArgument`] for a granularity the backend does not take; the
    /// driver's errors (out of memory when the address space cannot hold the reservation, or the
    /// device the initial size).
    pub fn new(options: ExpandablePoolOptions) -> Result<Self> {
        let backend = match options.backend {
            Some(backend) => backend,
            None if cuda::is_host_mode() => Backend::Host(HostBackend::default()),
            None => Backend::Device(cuda::current_device()?),
        };
        let mut range = options.range;
        if range.reserve.is_none() {
            range.reserve = Some(backend.capacity()?.saturating_mul(DEFAULT_RESERVE_FACTOR));
        }
        let range = VirtualRange::with_backend(backend, range)?;
        let access = match backend {
            Backend::Device(_) => Access::DEVICE,
            // Host memory standing in for device memory.
            Backend::Host(_) => Access::HOST_DEVICE,
            // Nothing behind the addresses: as the simulated device resource.
            Backend::Simulated(_) => Access::DEVICE,
        };
        let pool = Self::over(
            Mapped::new(range, options.release_threshold),
            access,
            options.free_checks,
            default_syncer(),
            CacheLimits::DEFAULT,
        );
        if options.initial_size > 0 {
            let primed = pool.allocate(Stream::DEFAULT, options.initial_size, DEFAULT_ALIGNMENT)?;
            // SAFETY: `primed` came from `pool` with these arguments just now.
            unsafe {
                pool.deallocate(
                    Stream::DEFAULT,
                    primed,
                    options.initial_size,
                    DEFAULT_ALIGNMENT,
                )?
            };
        }
        Ok(pool)
    }

    /// A pool over `mapped` with this syncer and these cache limits (tests give their own).
    pub(crate) fn over(
        mapped: Mapped,
        access: Access,
        checks: FreeChecks,
        syncer: Arc<dyn Syncer>,
        cache: CacheLimits,
    ) -> Self {
        let core = Core::over_range(NAME, mapped, syncer, cache);
        let nvtx = nvtx_bounds::enabled_by_env().then(|| Arc::new(NvtxBounds::new()));
        Self {
            core,
            live: Arc::new(FreeCheck::new(checks)),
            nvtx,
            access,
        }
    }

    /// Turns bounds checking inside the pool on or off, as
    /// [`PoolMemoryResource::with_nvtx_bounds`](crate::mr::PoolMemoryResource::with_nvtx_bounds):
    /// the reservation is announced to tools as one NVTX heap and each allocation as a region of
    /// it. Call before the first allocation.
    pub fn with_nvtx_bounds(mut self, enabled: bool) -> Self {
        self.nvtx = enabled.then(|| Arc::new(NvtxBounds::new()));
        self
    }

    /// Whether bounds checking inside the pool is on.
    pub fn nvtx_bounds(&self) -> bool {
        self.nvtx.is_some()
    }

    /// Whether frees are checked against the live allocations.
    pub fn free_checks(&self) -> FreeChecks {
        self.live.mode()
    }

    fn mapped(&self) -> &Mapped {
        self.core
            .mapped()
            .expect("an expandable pool's core is built over a range")
    }

    fn range(&self) -> &VirtualRange {
        self.mapped().range()
    }

    /// Bytes mapped now: the memory the pool holds.
    pub fn mapped_bytes(&self) -> usize {
        self.range().stats().mapped
    }

    /// The most bytes mapped at once so far.
    pub fn peak_mapped_bytes(&self) -> usize {
        self.range().stats().peak_mapped
    }

    /// Bytes handed out now (requests rounded up to 256; briefly takes every lock of the pool).
    pub fn used_bytes(&self) -> usize {
        self.core.stats().used
    }

    /// Bytes of addresses reserved: the most the pool can hold.
    pub fn reserved_bytes(&self) -> usize {
        self.range().reserved()
    }

    /// The granule: the unit of mapping and of giving back.
    pub fn granularity(&self) -> usize {
        self.range().granularity()
    }

    /// The first address of the reservation.
    pub fn base(&self) -> *mut u8 {
        self.range().base()
    }

    /// The device whose memory backs the pool; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.range().device()
    }

    /// The devices besides the owner that may access the pool's memory.
    pub fn peers(&self) -> Vec<DeviceId> {
        self.range().peers()
    }

    /// The shareable handle kinds the granules carry (what [`export`](Self::export) can give).
    pub fn shareable(&self) -> ShareableHandles {
        self.range().shareable()
    }

    /// The release threshold, if any (see [`ExpandablePoolOptions::release_threshold`]).
    pub fn release_threshold(&self) -> Option<usize> {
        self.mapped().release_threshold()
    }

    /// Sets the release threshold (`None`: none); it applies from the next free on.
    pub fn set_release_threshold(&self, bytes: Option<usize>) {
        self.mapped().set_release_threshold(bytes);
    }

    /// Counters (takes every lock of the pool briefly, and walks its free blocks).
    pub fn statistics(&self) -> ExpandablePoolStatistics {
        let Some(s) = self.core.mapped_stats() else {
            return ExpandablePoolStatistics::default();
        };
        ExpandablePoolStatistics {
            reserved_bytes: s.range.reserved,
            granularity: s.range.granularity,
            mapped_bytes: s.range.mapped,
            peak_mapped_bytes: s.range.peak_mapped,
            used_bytes: s.core.used,
            free_mapped_bytes: s.range.mapped.saturating_sub(s.core.used),
            releasable_bytes: s.releasable,
            books_bytes: s.core.pool_size,
            free_blocks: s.core.free_blocks,
            largest_free_block: s.core.largest_free,
            cached_bytes: s.core.cached_bytes,
            growth_steps: s.core.upstream_allocations,
            granules_mapped: s.range.granules_mapped,
            granules_released: s.range.granules_released,
        }
    }

    /// Gives back every mapped granule that lies wholly in free memory, wherever it is (between
    /// live blocks too), and returns the bytes released. Before a free block's granules go, the
    /// work still queued on the streams that freed into it is waited for (only that work: an event
    /// recorded now on each such stream and synchronized); other threads keep allocating meanwhile.
    /// What stays mapped is exactly the granules that live blocks touch.
    ///
    /// # Errors
    /// A driver error while synchronizing or unmapping (the memory concerned stays in the pool).
    #[doc(alias = "release_unused")]
    pub fn trim(&self) -> Result<usize> {
        self.core.release_unused()
    }

    /// Gives `peers` read and write access to the pool's memory, mapped now and later (never taken
    /// back).
    ///
    /// # Errors
    /// As [`VirtualRange::grant_access`].
    pub fn grant_access(&self, peers: &[DeviceId]) -> Result<()> {
        self.range().grant_access(peers)
    }

    /// Exports the live allocation `ptr` of `bytes` (as allocated) for another process: one
    /// shareable handle per granule it touches and where its bytes lie in them. Send it with
    /// [`ExportedSpan::send`]; the other process maps it with
    /// [`ImportedSpan::new`](crate::mr::experimental::ImportedSpan::new), with no copy.
    ///
    /// Stream order: `stream` (where the allocation's bytes were last written) is synchronized
    /// before the handles are made, so the importer sees every write queued there before this call.
    /// Keep the allocation (do not free it) until the importer says it is done with it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `ptr` is not a live allocation of `bytes` of this pool (with
    /// checked frees; unchecked, when it lies outside the pool's mapped memory);
    /// [`Error::Unsupported`] when the granules carry no shareable handle; the driver's errors.
    pub fn export(&self, ptr: *mut u8, bytes: usize, stream: Stream) -> Result<ExportedSpan> {
        let size = align_up(bytes, DEFAULT_ALIGNMENT)
            .ok_or_else(|| Error::invalid(format!("{bytes} bytes cannot be an allocation")))?;
        self.live.check_live(NAME, ptr, size)?;
        let range = self.range();
        let offset = (ptr as usize)
            .checked_sub(range.base() as usize)
            .filter(|&o| o < range.reserved())
            .ok_or_else(|| Error::invalid(format!("{ptr:p} is not memory of this {NAME}")))?;
        let kind = range.preferred_export().ok_or_else(|| {
            Error::Unsupported(format!(
                "the granules of this {NAME} carry no shareable handle ({:?})",
                range.shareable()
            ))
        })?;
        range.export(offset, bytes, stream, kind)
    }
}

impl MemoryResource for ExpandablePoolMemoryResource {
    /// # Errors
    /// [`Error::InvalidArgument`] for an alignment that is not a power of two;
    /// [`Error::OutOfMemory`] when the device cannot back the request even after the pool gave
    /// back every free granule (the message says how much is mapped, in use and free, the largest
    /// free block and what the device has free), or the reservation cannot hold it.
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let size = align_up(bytes, DEFAULT_ALIGNMENT).ok_or_else(|| Error::OutOfMemory {
            bytes,
            resource: NAME.into(),
            detail: "the size overflows".into(),
        })?;
        core_calls::allocate(
            &self.core,
            &self.live,
            self.nvtx.as_deref(),
            NAME,
            stream,
            bytes,
            size,
            alignment,
        )
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when frees are checked and `ptr` is not a live allocation of this
    /// pool made with `bytes` (rounded up to 256); nothing is freed then.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        core_calls::deallocate(
            &self.core,
            &self.live,
            self.nvtx.as_deref(),
            NAME,
            stream,
            ptr,
            bytes,
        )
    }

    /// From the live-allocation index (`None` when frees are unchecked).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, _alignment: usize) -> Option<bool> {
        match align_up(bytes, DEFAULT_ALIGNMENT) {
            Some(size) => self.live.is_live(ptr, size),
            None => self.live.is_live(ptr, 0).map(|_| false),
        }
    }

    fn access(&self) -> Access {
        self.access
    }

    fn name(&self) -> &str {
        NAME
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.core, &o.core))
    }
}

#[cfg(test)]
mod tests;
