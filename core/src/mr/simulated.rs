//! `simulated_memory_resource`: a make-believe device of a given size, for tests and replays
//! without a GPU.
//!
//! It hands out addresses in a fake address space and never touches memory there: nothing may
//! dereference them. Unlike RMM's bump allocator (whose free is a no-op), freed memory is reused, so
//! long replays fit, and every free is checked against the live allocations, so a sub-allocator that
//! frees a pointer twice or with the wrong size is caught in its property tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::detail::free_list::FreeList;
use crate::resource::{Access, MemoryResource};

/// Where the fake address space starts: far from null and from any real heap.
const BASE: usize = 1 << 44;

/// Usage of a [`SimulatedMemoryResource`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimulatedUsage {
    /// Bytes currently handed out (after rounding to 256 and alignment padding).
    pub allocated_bytes: usize,
    /// The most bytes ever handed out at once.
    pub peak_bytes: usize,
    /// Allocations currently live.
    pub live_allocations: usize,
    /// Allocations ever made.
    pub total_allocations: u64,
    /// The largest request that could be served right now.
    pub largest_free_block: usize,
}

#[derive(Debug)]
struct State {
    free: FreeList<()>,
    /// Returned address → (start of the reserved range, reserved bytes, requested bytes).
    live: HashMap<usize, (usize, usize, usize)>,
    usage: SimulatedUsage,
}

/// A simulated device of `capacity` bytes (RMM's `simulated_memory_resource`, with reuse).
///
/// ```
/// use rmm_core::{mr::SimulatedMemoryResource, MemoryResource, cuda::Stream};
/// let gpu = SimulatedMemoryResource::new(1 << 30)?;
/// let p = gpu.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!(gpu.usage().allocated_bytes, 1024);
/// // SAFETY: `p` came from `gpu` with these arguments.
/// unsafe { gpu.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// assert_eq!(gpu.usage().allocated_bytes, 0);
/// assert!(gpu.allocate(Stream::DEFAULT, 2 << 30, 256).unwrap_err().is_out_of_memory());
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SimulatedMemoryResource {
    state: Arc<Mutex<State>>,
    capacity: usize,
}

impl SimulatedMemoryResource {
    /// A simulated device of `capacity` bytes (rounded down to a multiple of 256).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the capacity is below 256 bytes or does not fit the fake
    /// address space.
    pub fn new(capacity: usize) -> Result<Self> {
        let capacity = capacity & !(DEFAULT_ALIGNMENT - 1);
        if capacity == 0 || capacity > usize::MAX / 2 - BASE {
            return Err(Error::invalid(format!(
                "a simulated device of {capacity} bytes cannot be made"
            )));
        }
        let mut free = FreeList::new();
        free.insert(BASE, capacity, BASE, ());
        let usage = SimulatedUsage {
            largest_free_block: capacity,
            ..Default::default()
        };
        Ok(Self {
            state: Arc::new(Mutex::new(State {
                free,
                live: HashMap::new(),
                usage,
            })),
            capacity,
        })
    }

    /// The simulated device's size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Current usage.
    pub fn usage(&self) -> SimulatedUsage {
        self.lock().usage
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryResource for SimulatedMemoryResource {
    fn allocate(&self, _stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let oom = || Error::out_of_memory(bytes, self.name());
        let rounded = align_up(bytes, DEFAULT_ALIGNMENT).ok_or_else(oom)?;
        // Alignments above 256 reserve enough to place an aligned start inside the range.
        let padding = alignment.saturating_sub(DEFAULT_ALIGNMENT);
        let reserved = rounded.checked_add(padding).ok_or_else(oom)?;
        let mut state = self.lock();
        let block = state.free.take_best_fit(reserved).ok_or_else(oom)?;
        let addr = align_up(block.addr, alignment).ok_or_else(oom)?;
        state.live.insert(addr, (block.addr, reserved, bytes));
        let largest = state.free.largest();
        let usage = &mut state.usage;
        usage.allocated_bytes += reserved;
        usage.peak_bytes = usage.peak_bytes.max(usage.allocated_bytes);
        usage.live_allocations += 1;
        usage.total_allocations += 1;
        usage.largest_free_block = largest;
        Ok(addr as *mut u8)
    }

    unsafe fn deallocate(
        &self,
        _stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        _alignment: usize,
    ) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let mut state = self.lock();
        let Some(&(start, reserved, requested)) = state.live.get(&(ptr as usize)) else {
            return Err(Error::invalid(format!(
                "{ptr:p} is not a live allocation of this simulated device"
            )));
        };
        if requested != bytes {
            return Err(Error::invalid(format!(
                "{ptr:p} was allocated with {requested} bytes but freed with {bytes}"
            )));
        }
        state.live.remove(&(ptr as usize));
        state.free.insert(start, reserved, BASE, ());
        let largest = state.free.largest();
        let usage = &mut state.usage;
        usage.allocated_bytes -= reserved;
        usage.live_allocations -= 1;
        usage.largest_free_block = largest;
        Ok(())
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.allocate(Stream::DEFAULT, bytes, alignment)
    }

    /// Simulated device memory: device-accessible by claim, never dereferenceable.
    fn access(&self) -> Access {
        Access::DEVICE
    }

    fn name(&self) -> &str {
        "simulated_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.state, &o.state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn memory_is_reused_and_accounted() {
        let gpu = SimulatedMemoryResource::new(4096).unwrap();
        let a = gpu.allocate(Stream::DEFAULT, 1, 256).unwrap();
        let b = gpu.allocate(Stream::DEFAULT, 3000, 256).unwrap();
        assert_eq!(a as usize % 256, 0);
        assert_eq!(gpu.usage().allocated_bytes, 256 + 3072);
        assert!(gpu
            .allocate(Stream::DEFAULT, 1024, 256)
            .unwrap_err()
            .is_out_of_memory());
        // SAFETY: from allocate above.
        unsafe { gpu.deallocate(Stream::DEFAULT, b, 3000, 256).unwrap() };
        let c = gpu.allocate(Stream::DEFAULT, 3500, 256).unwrap();
        assert!(!c.is_null(), "freed memory is reused");
        let usage = gpu.usage();
        assert_eq!(usage.peak_bytes, 256 + 3584);
        assert_eq!((usage.live_allocations, usage.total_allocations), (2, 3));
    }

    #[test]
    fn bad_frees_are_reported_not_absorbed() {
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let p = gpu.allocate(Stream::DEFAULT, 100, 256).unwrap();
        // SAFETY: the simulated device never dereferences pointers; bad frees are errors.
        unsafe {
            assert!(matches!(
                gpu.deallocate(Stream::DEFAULT, p, 99, 256),
                Err(Error::InvalidArgument(_))
            ));
            gpu.deallocate(Stream::DEFAULT, p, 100, 256).unwrap();
            assert!(matches!(
                gpu.deallocate(Stream::DEFAULT, p, 100, 256),
                Err(Error::InvalidArgument(_))
            ));
            assert!(gpu
                .deallocate(Stream::DEFAULT, 0x1234 as *mut u8, 1, 256)
                .is_err());
        }
    }

    #[test]
    fn large_alignments_are_honoured() {
        let gpu = SimulatedMemoryResource::new(1 << 24).unwrap();
        let _skew = gpu.allocate(Stream::DEFAULT, 256, 256).unwrap();
        let p = gpu.allocate(Stream::DEFAULT, 100, 1 << 20).unwrap();
        assert_eq!(p as usize % (1 << 20), 0);
        // SAFETY: from allocate above.
        unsafe { gpu.deallocate(Stream::DEFAULT, p, 100, 1 << 20).unwrap() };
        assert!(matches!(
            gpu.allocate(Stream::DEFAULT, 1, 3),
            Err(Error::InvalidArgument(_))
        ));
        assert!(SimulatedMemoryResource::new(0).is_err());
        assert!(SimulatedMemoryResource::new(usize::MAX).is_err());
    }

    #[test]
    fn clones_share_one_device() {
        let a = SimulatedMemoryResource::new(1 << 20).unwrap();
        let b = a.clone();
        let p = b.allocate(Stream::DEFAULT, 512, 256).unwrap();
        assert_eq!(a.usage().allocated_bytes, 512);
        assert!(a.is_equal(&b));
        assert!(!a.is_equal(&SimulatedMemoryResource::new(1 << 20).unwrap()));
        // SAFETY: from allocate above.
        unsafe { a.deallocate(Stream::DEFAULT, p, 512, 256).unwrap() };
    }

    proptest! {
        #[test]
        fn live_blocks_never_overlap_and_everything_returns(sizes in proptest::collection::vec((1usize..5000, 0u32..12, any::<bool>()), 1..200)) {
            let gpu = SimulatedMemoryResource::new(1 << 22).unwrap();
            let mut live: Vec<(usize, usize, usize)> = Vec::new();
            for (bytes, shift, free_one) in sizes {
                if free_one && !live.is_empty() {
                    let (p, b, a) = live.swap_remove(bytes % live.len());
                    // SAFETY: from allocate below with these arguments.
                    unsafe { gpu.deallocate(Stream::DEFAULT, p as *mut u8, b, a).unwrap() };
                } else if let Ok(p) = gpu.allocate(Stream::DEFAULT, bytes, 1 << shift) {
                    let p = p as usize;
                    prop_assert_eq!(p % (1usize << shift), 0);
                    for &(q, b, _) in &live {
                        prop_assert!(p + bytes <= q || q + b <= p, "overlap");
                    }
                    live.push((p, bytes, 1 << shift));
                }
            }
            for (p, b, a) in live {
                // SAFETY: from allocate above with these arguments.
                unsafe { gpu.deallocate(Stream::DEFAULT, p as *mut u8, b, a).unwrap() };
            }
            let usage = gpu.usage();
            prop_assert_eq!(usage.allocated_bytes, 0);
            prop_assert_eq!(usage.largest_free_block, 1 << 22);
        }
    }
}
