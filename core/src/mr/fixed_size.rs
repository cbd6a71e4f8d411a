//! `fixed_size_memory_resource`: blocks of one size, carved from large upstream chunks.
//!
//! Every allocation takes one block of `block_size` bytes, so requests of at most that size are
//! served in O(log n) without fragmentation; larger ones fail. Chunks of
//! `blocks_to_preallocate × block_size` bytes come from the upstream, the first at construction
//! (as in RMM). Stream ordering is the pool's (see [`crate::mr::PoolMemoryResource`] and
//! `docs/design/pool.md`): one free list for all streams, no event per free, a per-thread cache in
//! front. Unlike RMM's, it honours alignments above 256 (when the block has room for them) and can
//! give wholly free chunks back ([`FixedSizeMemoryResource::release_unused`]).

use std::sync::Arc;

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_set::{granule, FreeCheck, FreeChecks};
use crate::mr::detail::stream_ordered::{default_syncer, CacheLimits, Core, Growth, Syncer};
use crate::mr::PoolStatistics;
use crate::resource::{AnyResource, MemoryResource};

/// A resource of equal-sized blocks (RMM's `fixed_size_memory_resource`).
///
/// Stateful: clones share the blocks and compare equal only to each other; the last clone to drop
/// gives every chunk back.
///
/// ```
/// use rmm_core::{mr::{FixedSizeMemoryResource, SystemMemoryResource}, AnyResource, MemoryResource, cuda::Stream};
/// let upstream = AnyResource::new(SystemMemoryResource::new());
/// let blocks = FixedSizeMemoryResource::new(upstream, 4096, 16)?;
/// assert_eq!(blocks.statistics().pool_size, 16 * 4096, "preallocated");
/// let p = blocks.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(blocks.statistics().bytes_used, 4096, "a whole block");
/// assert!(blocks.allocate(Stream::DEFAULT, 5000, 256).unwrap_err().is_out_of_memory());
/// // SAFETY: `p` came from `blocks` with these arguments.
/// unsafe { blocks.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FixedSizeMemoryResource {
    core: Arc<Core>,
    block_size: usize,
    blocks_to_preallocate: usize,
    /// The live allocations, when frees are checked (shared by clones).
    live: Arc<FreeCheck>,
    /// Every free was checked against the live allocations before it got here: by `live`, or by
    /// the binning resource that owns this bin (see [`FixedSizeMemoryResource::frees_verified_by_owner`]).
    verified: bool,
}

impl FixedSizeMemoryResource {
    /// RMM's default block size: 1 MiB.
    pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;
    /// RMM's default number of blocks per upstream chunk: 128.
    pub const DEFAULT_BLOCKS_TO_PREALLOCATE: usize = 128;

    /// A resource of `block_size`-byte blocks (rounded up to 256) over `upstream`, taking
    /// `blocks_to_preallocate` blocks at a time from it, the first chunk now (with `allocate_sync`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero block size or count, or a chunk size that overflows;
    /// the upstream's error when the first chunk cannot be allocated.
    ///
    /// Frees are checked: one whose pointer and size do not match a live allocation is refused
    /// (see [`FreeChecks`]).
    pub fn new(
        upstream: AnyResource,
        block_size: usize,
        blocks_to_preallocate: usize,
    ) -> Result<Self> {
        Self::with_free_checks(
            upstream,
            block_size,
            blocks_to_preallocate,
            FreeChecks::Checked,
        )
    }

    /// As [`FixedSizeMemoryResource::new`], choosing whether frees are checked:
    /// [`FreeChecks::Unchecked`] is RMM's behaviour (a wrong free corrupts the resource).
    ///
    /// # Errors
    /// As [`FixedSizeMemoryResource::new`].
    pub fn with_free_checks(
        upstream: AnyResource,
        block_size: usize,
        blocks_to_preallocate: usize,
        checks: FreeChecks,
    ) -> Result<Self> {
        Self::build_checked(
            upstream,
            block_size,
            blocks_to_preallocate,
            default_syncer(),
            CacheLimits::FIXED,
            checks,
        )
    }

    #[cfg(test)]
    pub(crate) fn build(
        upstream: AnyResource,
        block_size: usize,
        blocks_to_preallocate: usize,
        syncer: Arc<dyn Syncer>,
        cache: CacheLimits,
    ) -> Result<Self> {
        Self::build_checked(
            upstream,
            block_size,
            blocks_to_preallocate,
            syncer,
            cache,
            FreeChecks::Checked,
        )
    }

    pub(crate) fn build_checked(
        upstream: AnyResource,
        block_size: usize,
        blocks_to_preallocate: usize,
        syncer: Arc<dyn Syncer>,
        cache: CacheLimits,
        checks: FreeChecks,
    ) -> Result<Self> {
        if block_size == 0 || blocks_to_preallocate == 0 {
            return Err(Error::invalid(format!(
                "fixed_size_memory_resource needs a block size and a block count above 0 (got {block_size} and \
                 {blocks_to_preallocate})"
            )));
        }
        let block_size = align_up(block_size, DEFAULT_ALIGNMENT)
            .ok_or_else(|| Error::invalid(format!("block size {block_size} is too large")))?;
        let chunk = block_size.checked_mul(blocks_to_preallocate).ok_or_else(|| {
            Error::invalid(format!("{blocks_to_preallocate} blocks of {block_size} bytes overflow the address space"))
        })?;
        let growth = Growth::Chunks {
            chunk,
            unit: block_size,
        };
        let core = Core::new(
            "fixed_size_memory_resource",
            upstream,
            syncer,
            growth,
            cache,
            chunk,
        )?;
        let verified = checks == FreeChecks::Checked;
        Ok(Self {
            core,
            block_size,
            blocks_to_preallocate,
            live: Arc::new(FreeCheck::new(checks)),
            verified,
        })
    }

    /// Marks a bin whose owner (a binning resource with checked frees) checks every free against
    /// its live allocations before routing it here: the engine then skips its own double-free scans.
    pub(crate) fn frees_verified_by_owner(mut self, verified: bool) -> Self {
        self.verified |= verified;
        self
    }

    /// Test hook: frees per batch of the engine (test builds close a batch every few frees).
    #[cfg(test)]
    pub(crate) fn set_close_frees(&self, frees: u32) {
        self.core.set_close_frees(frees);
    }

    /// The size of every block (the largest request served), a multiple of 256.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks per upstream chunk.
    pub fn blocks_to_preallocate(&self) -> usize {
        self.blocks_to_preallocate
    }

    /// The upstream resource.
    pub fn upstream_resource(&self) -> &AnyResource {
        self.core.upstream().expect("a core built over an upstream")
    }

    /// Whether frees are checked against the live allocations.
    pub fn free_checks(&self) -> FreeChecks {
        self.live.mode()
    }

    /// Exact counters, the same as a pool's (every allocation counts a whole block).
    pub fn statistics(&self) -> PoolStatistics {
        PoolStatistics::from(self.core.stats())
    }

    /// Gives every wholly free chunk back to the upstream, after the work still queued on the
    /// streams that freed into it; returns the bytes released. The resource grows again on demand.
    ///
    /// # Errors
    /// As [`crate::mr::PoolMemoryResource::release_unused`].
    #[doc(alias = "trim")]
    pub fn release_unused(&self) -> Result<usize> {
        self.core.release_unused()
    }

    /// Panics when the engine's books or free list are inconsistent (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.core.check_invariants();
    }

    /// A number that changes whenever the upstream chunks change (see [`FixedSizeMemoryResource::chunks`]).
    #[inline]
    pub(crate) fn chunks_generation(&self) -> u64 {
        self.core.regions_generation()
    }

    /// Every upstream chunk: (start, size); `None` when the host has no memory for the list.
    pub(crate) fn chunks(&self) -> Option<Vec<(usize, usize)>> {
        self.core.try_regions()
    }

    /// The block holding `ptr` (an allocation of this resource).
    pub(crate) fn block_of(&self, ptr: usize) -> Result<usize> {
        let (start, _) = self.core.region_containing(ptr).ok_or_else(|| {
            Error::invalid(format!(
                "{ptr:#x} was not allocated from this fixed_size_memory_resource"
            ))
        })?;
        Ok(ptr - (ptr - start) % self.block_size)
    }
}

impl MemoryResource for FixedSizeMemoryResource {
    /// # Errors
    /// [`Error::OutOfMemory`] for more than [`FixedSizeMemoryResource::block_size`] bytes (as RMM)
    /// or when the upstream is exhausted; [`Error::InvalidArgument`] for an alignment that is not a
    /// power of two, or one above 256 that does not fit the block with the request
    /// (`bytes + alignment - 256 > block_size`).
    #[inline]
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        if bytes > self.block_size {
            return Err(Error::OutOfMemory {
                bytes,
                resource: self.name().into(),
                detail: format!(
                    "it serves at most its block size, {} bytes",
                    self.block_size
                ),
            });
        }
        // Blocks start 256-aligned: a larger alignment costs at most `alignment - 256` bytes.
        let padding = alignment.saturating_sub(DEFAULT_ALIGNMENT);
        if bytes
            .checked_add(padding)
            .is_none_or(|n| n > self.block_size)
        {
            return Err(Error::invalid(format!(
                "{bytes} bytes aligned to {alignment} do not fit a block of {} bytes",
                self.block_size
            )));
        }
        let block = self
            .core
            .allocate(stream, self.block_size, DEFAULT_ALIGNMENT)?;
        let ptr = align_up(block, alignment.max(DEFAULT_ALIGNMENT)).unwrap_or(block) as *mut u8;
        self.live
            .allocated(self.name(), ptr, granule(bytes, Some(alignment)), |_| {
                // The block was never handed out: back to the engine at once.
                let _ = self
                    .core
                    .deallocate(stream, block, self.block_size, self.verified);
            })
            .map_err(|e| e.error(self.name(), bytes))
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when frees are checked and `ptr` is not a live allocation of this
    /// resource made with `bytes` (rounded up to 256) and `alignment` (any up to 256 are one);
    /// nothing is freed then.
    #[inline]
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        self.live
            .free(self.name(), ptr, granule(bytes, Some(alignment)), || {
                let block = if alignment <= DEFAULT_ALIGNMENT {
                    ptr as usize
                } else {
                    self.block_of(ptr as usize)?
                };
                self.core
                    .deallocate(stream, block, self.block_size, self.verified)
            })
    }

    /// From the live-allocation index (`None` when frees are unchecked).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Option<bool> {
        self.live.is_live(ptr, granule(bytes, Some(alignment)))
    }

    forward_to_upstream! {
        name: "fixed_size_memory_resource",
        upstream: upstream_resource,
        identity: core,
        forward: access
    }
}

#[cfg(test)]
mod tests;
