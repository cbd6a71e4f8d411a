//! `binning_memory_resource`: requests routed by size to bins, larger ones to the upstream.
//!
//! Frees are checked by default: the binning resource records every allocation it routes (to a
//! bin or to the upstream) and refuses a free whose pointer, size or alignment class does not
//! match a live one, before routing it, so a wrong size can never reach the wrong bin or the
//! upstream. Owned bins therefore do not check again; a bin used directly through
//! [`BinningMemoryResource::bin_resources`] is unchecked.
//!
//! Each bin serves requests up to its size; a request goes to the smallest bin that can hold it,
//! or to the upstream when none can. A bin is any resource, by default a
//! [`FixedSizeMemoryResource`] of the bin's size over the upstream. Deallocation routes the same
//! way, so the bins must not change while memory is allocated: unlike RMM (where adding a bin then
//! misroutes later frees), [`BinningMemoryResource::add_bin`] refuses once anything was allocated.
//!
//! Stream semantics are those of the resource a request is routed to.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::detail::live_blocks::{Claim, LiveBlocks};
use crate::mr::detail::live_set::{granule, wrong_size, FreeCheck, FreeChecks, Sizes};
use crate::mr::detail::stream_ordered::{default_syncer, CacheLimits, Syncer};
use crate::mr::FixedSizeMemoryResource;
use crate::resource::{Access, AnyResource, MemoryResource};

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    bins: RwLock<BTreeMap<usize, AnyResource>>,
    /// The bins as of the first allocation; from then on they are fixed, and every call routes
    /// through this copy without a lock or a reference count.
    frozen: OnceLock<Frozen>,
    syncer: Arc<dyn Syncer>,
    /// Every live allocation, when frees are checked.
    live: FreeCheck,
}

/// The bins, fixed at the first allocation.
#[derive(Debug)]
struct Frozen {
    /// The largest request each bin serves, ascending (searched apart from the resources: a
    /// compact array).
    sizes: Box<[usize]>,
    bins: Box<[Bin]>,
    /// When the sizes are consecutive powers of two (bins made from exponents), the smallest one's
    /// exponent: a request's bin is then the difference of exponents, without a search.
    first_exponent: Option<u32>,
}

impl Frozen {
    /// `checked`: the binning resource checks frees (its fixed-size bins then get records by
    /// position).
    fn new(bins: &BTreeMap<usize, AnyResource>, checked: bool) -> Self {
        let sizes: Box<[usize]> = bins.keys().copied().collect();
        let first_exponent = sizes.first().and_then(|&first| {
            let consecutive = sizes.iter().enumerate().all(|(i, &size)| {
                u32::try_from(i).ok().and_then(|i| first.checked_shl(i)) == Some(size)
            });
            (first.is_power_of_two() && consecutive).then(|| first.trailing_zeros())
        });
        Self {
            first_exponent,
            sizes,
            bins: bins
                .values()
                .map(|r| match r.downcast_ref::<FixedSizeMemoryResource>() {
                    Some(fixed) => Bin::Fixed(
                        fixed.clone(),
                        checked
                            .then(|| LiveBlocks::new(fixed.block_size()))
                            .flatten(),
                    ),
                    None => Bin::Any(r.clone()),
                })
                .collect(),
        }
    }

    /// The index of the smallest bin that serves `needed` bytes (the number of bins: none does).
    #[inline]
    fn bin_for(&self, needed: usize) -> usize {
        match self.first_exponent {
            Some(first) => {
                // The exponent of the smallest power of two at or above `needed`.
                let exponent = usize::BITS - needed.saturating_sub(1).leading_zeros();
                (exponent.saturating_sub(first) as usize).min(self.sizes.len())
            }
            None => self.sizes.partition_point(|&size| size < needed),
        }
    }
}

/// A bin as calls reach it: the owned fixed-size bins (and any explicit one of that type) without
/// the dynamic call of an [`AnyResource`], with this resource's record of what it allocated there
/// by position when frees are checked (see [`LiveBlocks`]; the other allocations are in the hash
/// map of `Inner::live`).
#[derive(Debug)]
enum Bin {
    Fixed(FixedSizeMemoryResource, Option<LiveBlocks>),
    Any(AnyResource),
}

/// Where a request goes: a bin or the upstream.
#[derive(Clone, Copy)]
enum Target<'a> {
    Fixed(&'a FixedSizeMemoryResource, Option<&'a LiveBlocks>),
    Any(&'a AnyResource),
}

impl Target<'_> {
    #[inline]
    fn allocate(self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        match self {
            Target::Fixed(r, _) => r.allocate(stream, bytes, alignment),
            Target::Any(r) => r.allocate(stream, bytes, alignment),
        }
    }

    /// # Safety
    /// As for [`MemoryResource::deallocate`] of the target.
    #[inline]
    unsafe fn deallocate(
        self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            match self {
                Target::Fixed(r, _) => r.deallocate(stream, ptr, bytes, alignment),
                Target::Any(r) => r.deallocate(stream, ptr, bytes, alignment),
            }
        }
    }
}

/// Size-routed sub-allocation (RMM's `binning_memory_resource`).
///
/// Stateful: clones share the bins and compare equal only to each other.
///
/// ```
/// use rmm_core::{mr::{BinningMemoryResource, SystemMemoryResource}, AnyResource, MemoryResource, cuda::Stream};
/// let upstream = AnyResource::new(SystemMemoryResource::new());
/// // Bins of 1 KiB, 2 KiB and 4 KiB blocks; larger requests go to the upstream.
/// let mr = BinningMemoryResource::with_exponents(upstream, 10, 12)?;
/// assert_eq!(mr.bin_resources().iter().map(|(size, _)| *size).collect::<Vec<_>>(), [1024, 2048, 4096]);
/// let small = mr.allocate(Stream::DEFAULT, 1500, 256)?; // from the 2 KiB bin
/// let large = mr.allocate(Stream::DEFAULT, 1 << 20, 256)?; // from the upstream
/// // SAFETY: both came from `mr` with these arguments.
/// unsafe {
///     mr.deallocate(Stream::DEFAULT, small, 1500, 256)?;
///     mr.deallocate(Stream::DEFAULT, large, 1 << 20, 256)?;
/// }
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BinningMemoryResource {
    inner: Arc<Inner>,
}

impl BinningMemoryResource {
    /// A resource with no bins yet: everything goes to `upstream` until bins are added.
    ///
    /// Frees are checked (see the [module documentation](self)).
    pub fn new(upstream: AnyResource) -> Self {
        Self::with_free_checks(upstream, FreeChecks::Checked)
    }

    /// As [`BinningMemoryResource::new`], choosing whether frees are checked:
    /// [`FreeChecks::Unchecked`] is RMM's behaviour (a free is routed by the size it gives, and a
    /// wrong one reaches the wrong bin or the upstream).
    pub fn with_free_checks(upstream: AnyResource, checks: FreeChecks) -> Self {
        Self::build_checked(upstream, default_syncer(), checks)
    }

    pub(crate) fn build(upstream: AnyResource, syncer: Arc<dyn Syncer>) -> Self {
        Self::build_checked(upstream, syncer, FreeChecks::Checked)
    }

    fn build_checked(upstream: AnyResource, syncer: Arc<dyn Syncer>, checks: FreeChecks) -> Self {
        let live = FreeCheck::new(checks);
        let inner = Inner {
            upstream,
            bins: RwLock::default(),
            frozen: OnceLock::new(),
            syncer,
            live,
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Whether frees are checked against the live allocations.
    pub fn free_checks(&self) -> FreeChecks {
        self.inner.live.mode()
    }

    /// A resource with fixed-size bins of 2^`min_size_exponent` ... 2^`max_size_exponent` bytes
    /// (RMM's constructor with exponents; bins below 256 bytes become one 256-byte bin).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `min_size_exponent > max_size_exponent` or the largest bin
    /// does not fit in `usize`; the errors of [`FixedSizeMemoryResource::new`] (each bin
    /// preallocates its first chunk from the upstream).
    pub fn with_exponents(
        upstream: AnyResource,
        min_size_exponent: u32,
        max_size_exponent: u32,
    ) -> Result<Self> {
        Self::build_with_exponents(
            upstream,
            min_size_exponent,
            max_size_exponent,
            default_syncer(),
        )
    }

    pub(crate) fn build_with_exponents(
        upstream: AnyResource,
        min_size_exponent: u32,
        max_size_exponent: u32,
        syncer: Arc<dyn Syncer>,
    ) -> Result<Self> {
        if min_size_exponent > max_size_exponent || max_size_exponent >= usize::BITS - 1 {
            return Err(Error::invalid(format!(
                "bin size exponents {min_size_exponent}..={max_size_exponent} are not a valid range"
            )));
        }
        let mr = Self::build(upstream, syncer);
        for exponent in min_size_exponent..=max_size_exponent {
            mr.add_bin(1 << exponent, None)?;
        }
        Ok(mr)
    }

    /// Adds a bin for requests of up to `allocation_size` bytes (rounded up to 256), served by
    /// `bin_resource`, or by a new [`FixedSizeMemoryResource`] of that block size over the
    /// upstream (with RMM's 128 blocks per chunk) when `None`. Adding a bin of a size that already
    /// has one, owned or explicit, keeps the bin there and does nothing else, as RMM does (its
    /// `std::map::insert` keeps the first); the refusal is written to the debug log.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] once anything has been allocated (frees would be misrouted) or
    /// for a size of 0; the errors of [`FixedSizeMemoryResource::new`].
    pub fn add_bin(&self, allocation_size: usize, bin_resource: Option<AnyResource>) -> Result<()> {
        let size = align_up(allocation_size, DEFAULT_ALIGNMENT)
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                Error::invalid(format!("a bin of {allocation_size} bytes cannot be made"))
            })?;
        let mut bins = self
            .inner
            .bins
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Checked under the lock the first allocation also takes to set it.
        if self.inner.frozen.get().is_some() {
            return Err(Error::invalid(
                "bins can only be added before the first allocation (later frees would be routed to the new bin)",
            ));
        }
        if bins.contains_key(&size) {
            if bin_resource.is_some() {
                tracing::warn!("binning_memory_resource: a bin for {size} bytes exists already; the new resource is not used");
            }
            return Ok(());
        }
        let resource = match bin_resource {
            Some(r) => r,
            // This resource checks every free before routing it (when it checks at all).
            None => AnyResource::new(
                FixedSizeMemoryResource::build_checked(
                    self.inner.upstream.clone(),
                    size,
                    FixedSizeMemoryResource::DEFAULT_BLOCKS_TO_PREALLOCATE,
                    self.inner.syncer.clone(),
                    CacheLimits::FIXED,
                    FreeChecks::Unchecked,
                )?
                .frees_verified_by_owner(self.inner.live.mode() == FreeChecks::Checked),
            ),
        };
        bins.insert(size, resource);
        Ok(())
    }

    /// Test hook: frees per batch in every fixed-size bin (test builds close a batch every few
    /// frees).
    #[cfg(test)]
    pub(crate) fn set_close_frees(&self, frees: u32) {
        for (_, bin) in self.bin_resources() {
            if let Some(fixed) = bin.downcast_ref::<crate::mr::FixedSizeMemoryResource>() {
                fixed.set_close_frees(frees);
            }
        }
    }

    /// The bins, smallest first: (largest request served, resource).
    pub fn bin_resources(&self) -> Vec<(usize, AnyResource)> {
        let bins = self
            .inner
            .bins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        bins.iter().map(|(&size, r)| (size, r.clone())).collect()
    }

    /// The upstream resource (for requests larger than every bin).
    pub fn upstream_resource(&self) -> &AnyResource {
        &self.inner.upstream
    }

    /// The resource that serves (or served) `bytes` at `alignment`: the smallest bin that holds the
    /// request with its worst-case alignment padding, else the upstream.
    #[inline]
    fn route<R>(&self, bytes: usize, alignment: usize, f: impl FnOnce(Target<'_>) -> R) -> R {
        if let Some(frozen) = self.inner.frozen.get() {
            return f(self.target(frozen, bytes, alignment));
        }
        let needed = padded(bytes, alignment);
        // Nothing was allocated yet (a free now is the caller's error, which the resource reports).
        let bins = self
            .inner
            .bins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let r = bins
            .range(needed..)
            .next()
            .map_or_else(|| self.inner.upstream.clone(), |(_, r)| r.clone());
        drop(bins);
        f(Target::Any(&r))
    }
}

impl BinningMemoryResource {
    /// [`BinningMemoryResource::route`] once the bins are frozen.
    #[inline]
    fn target<'a>(&'a self, frozen: &'a Frozen, bytes: usize, alignment: usize) -> Target<'a> {
        match frozen.bins.get(frozen.bin_for(padded(bytes, alignment))) {
            Some(Bin::Fixed(r, blocks)) => Target::Fixed(r, blocks.as_ref()),
            Some(Bin::Any(r)) => Target::Any(r),
            None => Target::Any(&self.inner.upstream),
        }
    }

    /// Fixes the bins at the first allocation.
    #[cold]
    fn freeze(&self) -> &Frozen {
        // Holding the write lock orders this against a concurrent `add_bin`.
        let bins = self
            .inner
            .bins
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let checked = self.inner.live.mode() == FreeChecks::Checked;
        self.inner
            .frozen
            .get_or_init(|| Frozen::new(&bins, checked))
    }

    /// The refusal of a free of `ptr` with `granule` when `ptr` is a live allocation of a bin that
    /// the free's size does not route to (a size in another bin's range).
    #[cold]
    #[inline(never)]
    fn in_another_bin(&self, ptr: *mut u8, granule: usize) -> Option<Error> {
        let frozen = self.inner.frozen.get()?;
        frozen.bins.iter().find_map(|bin| match bin {
            Bin::Fixed(_, Some(blocks)) => blocks
                .peek(ptr)
                .map(|live| wrong_size(self.name(), ptr as usize, live, granule, Sizes::Exact)),
            _ => None,
        })
    }
}

/// The bytes a bin must hold for `bytes` at `alignment`: the request with its worst-case
/// alignment padding (blocks are only `DEFAULT_ALIGNMENT`-aligned).
#[inline]
fn padded(bytes: usize, alignment: usize) -> usize {
    bytes.saturating_add(alignment.saturating_sub(DEFAULT_ALIGNMENT))
}

impl MemoryResource for BinningMemoryResource {
    /// # Errors
    /// [`Error::InvalidArgument`] for an alignment that is not a power of two; otherwise the
    /// errors of the bin or upstream the request is routed to.
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        let frozen = match self.inner.frozen.get() {
            Some(frozen) => frozen,
            None => self.freeze(),
        };
        // RMM routes zero bytes to the smallest bin too (BinningTest.ZeroByteAllocationsUseBinResource);
        // the null it gets back is no allocation, which `allocated` does not record.
        let granule = granule(bytes, Some(alignment));
        let target = self.target(frozen, bytes, alignment);
        let ptr = target.allocate(stream, bytes, alignment)?;
        if let Target::Fixed(bin, Some(blocks)) = target {
            if ptr.is_null()
                || blocks.record(ptr, granule, || bin.chunks_generation(), || bin.chunks())
            {
                return Ok(ptr);
            }
        }
        self.inner
            .live
            .allocated(self.name(), ptr, granule, |ptr| {
                // SAFETY: just allocated by `target` with these arguments, and never handed out.
                let _ = unsafe { target.deallocate(stream, ptr, bytes, alignment) };
            })
            .map_err(|e| e.error(self.name(), bytes))
    }

    /// # Errors
    /// [`Error::InvalidArgument`] when frees are checked and `ptr` is not a live allocation of this
    /// resource made with `bytes` (rounded up to 256) and `alignment` (any up to 256 are one), so
    /// that the free would be routed elsewhere than the allocation; nothing is freed then.
    /// Otherwise the errors of the bin or upstream it is routed to.
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            if bytes != 0 {
                return Ok(());
            }
            // The free of a zero-byte allocation goes to the bin that made it, as in RMM.
            // SAFETY: a null, zero-byte free is what that bin handed out; the caller's contract is
            // forwarded.
            return self.route(0, alignment, |r| unsafe {
                r.deallocate(stream, ptr, 0, alignment)
            });
        }
        let granule = granule(bytes, Some(alignment));
        let Some(frozen) = self.inner.frozen.get() else {
            // Nothing was allocated yet: the record, empty, refuses it.
            return self.route(bytes, alignment, |target| {
                self.inner.live.free(self.name(), ptr, granule, || {
                    // SAFETY: never reached (an empty record accepts no free).
                    unsafe { target.deallocate(stream, ptr, bytes, alignment) }
                })
            });
        };
        let target = self.target(frozen, bytes, alignment);
        if let Target::Fixed(bin, Some(blocks)) = target {
            match blocks.take(ptr, granule) {
                Claim::Taken(taken) => {
                    // SAFETY: a live allocation of this bin with these arguments, taken out of the
                    // record (so freed once); the caller's contract is forwarded.
                    return unsafe { bin.deallocate(stream, ptr, bytes, alignment) }
                        .inspect_err(|_| blocks.restore(taken));
                }
                Claim::Other(live) => {
                    return Err(wrong_size(
                        self.name(),
                        ptr as usize,
                        live,
                        granule,
                        Sizes::Exact,
                    ))
                }
                // Recorded in the map (its chunk had no record), or not live here.
                Claim::Absent => {}
            }
        }
        self.inner
            .live
            .free(self.name(), ptr, granule, || {
                // SAFETY: the bins have not changed since the allocation, so this is the resource
                // that made it (checked against the live allocations unless the caller opted out);
                // the caller's contract is forwarded.
                unsafe { target.deallocate(stream, ptr, bytes, alignment) }
            })
            .map_err(|e| self.in_another_bin(ptr, granule).unwrap_or(e))
    }

    /// What the upstream and every bin provide.
    fn access(&self) -> Access {
        let bins = self
            .inner
            .bins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        bins.values().fold(self.inner.upstream.access(), |a, r| {
            Access::from_bits(a.bits() & r.access().bits())
        })
    }

    /// From the live-allocation records (`None` when frees are unchecked).
    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Option<bool> {
        let granule = granule(bytes, Some(alignment));
        self.route(bytes, alignment, |target| match target {
            Target::Fixed(_, Some(blocks)) if blocks.peek(ptr) == Some(granule) => Some(true),
            _ => self.inner.live.is_live(ptr, granule),
        })
    }

    forward_to_upstream! {
        name: "binning_memory_resource",
        upstream: upstream_resource,
        identity: inner,
    }
}

#[cfg(test)]
mod tests;
