//! A small counting adaptor: how many bytes a resource holds from its base, now and at the peak.
//!
//! The replay wraps the *base* (the GPU's or the simulated device's memory) in it, so a
//! sub-allocator stacked on top is measured by what it really took, not by what it handed out:
//! `1 − peak live / peak reserved` is then its fragmentation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rmm_core::cuda::Stream;
use rmm_core::{Access, AnyResource, MemoryResource, Result};

#[derive(Debug)]
struct Counters {
    current: AtomicUsize,
    peak: AtomicUsize,
    allocations: AtomicUsize,
}

/// Forwards everything to its upstream and counts the bytes outstanding.
///
/// Clones share their counters (and compare equal); a null result (0 bytes) is not counted.
///
/// ```
/// use rmm_core::{cuda::Stream, mr::SimulatedMemoryResource, AnyResource, MemoryResource};
/// use rmm_replay::counting::CountingResource;
/// let counted = CountingResource::new(AnyResource::new(SimulatedMemoryResource::new(1 << 20)?));
/// let p = counted.allocate(Stream::DEFAULT, 1000, 256)?;
/// assert_eq!((counted.current_bytes(), counted.peak_bytes()), (1000, 1000));
/// // SAFETY: `p` came from `counted` with these arguments.
/// unsafe { counted.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// assert_eq!((counted.current_bytes(), counted.peak_bytes()), (0, 1000));
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone)]
pub struct CountingResource {
    upstream: AnyResource,
    counters: Arc<Counters>,
}

impl CountingResource {
    /// Counts what goes through to `upstream`.
    pub fn new(upstream: AnyResource) -> Self {
        let counters = Counters {
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            allocations: AtomicUsize::new(0),
        };
        Self {
            upstream,
            counters: Arc::new(counters),
        }
    }

    /// The resource it forwards to.
    pub fn upstream(&self) -> &AnyResource {
        &self.upstream
    }

    /// Bytes allocated and not yet deallocated.
    pub fn current_bytes(&self) -> usize {
        self.counters.current.load(Ordering::Acquire)
    }

    /// The most bytes outstanding at once.
    pub fn peak_bytes(&self) -> usize {
        self.counters.peak.load(Ordering::Acquire)
    }

    /// Successful non-empty allocations so far.
    pub fn allocations(&self) -> usize {
        self.counters.allocations.load(Ordering::Acquire)
    }
}

impl MemoryResource for CountingResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let ptr = self.upstream.allocate(stream, bytes, alignment)?;
        if !ptr.is_null() {
            let now = self.counters.current.fetch_add(bytes, Ordering::AcqRel) + bytes;
            self.counters.peak.fetch_max(now, Ordering::AcqRel);
            self.counters.allocations.fetch_add(1, Ordering::AcqRel);
        }
        Ok(ptr)
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded caller contract: `ptr` came from `allocate` above, i.e. from upstream.
        unsafe { self.upstream.deallocate(stream, ptr, bytes, alignment)? };
        if !ptr.is_null() {
            self.counters.current.fetch_sub(bytes, Ordering::AcqRel);
        }
        Ok(())
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let ptr = self.upstream.allocate_sync(bytes, alignment)?;
        if !ptr.is_null() {
            let now = self.counters.current.fetch_add(bytes, Ordering::AcqRel) + bytes;
            self.counters.peak.fetch_max(now, Ordering::AcqRel);
            self.counters.allocations.fetch_add(1, Ordering::AcqRel);
        }
        Ok(ptr)
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        // SAFETY: forwarded caller contract, as in `deallocate`.
        unsafe { self.upstream.deallocate_sync(ptr, bytes, alignment)? };
        if !ptr.is_null() {
            self.counters.current.fetch_sub(bytes, Ordering::AcqRel);
        }
        Ok(())
    }

    fn access(&self) -> Access {
        self.upstream.access()
    }

    fn name(&self) -> &str {
        "counting_resource_adaptor"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        rmm_core::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.counters, &o.counters))
    }

    fn upstream(&self) -> Option<&AnyResource> {
        Some(&self.upstream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::mr::SimulatedMemoryResource;

    #[test]
    fn failed_and_empty_requests_are_not_counted() {
        let counted = CountingResource::new(AnyResource::new(
            SimulatedMemoryResource::new(4096).unwrap(),
        ));
        assert!(counted.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
        let p = counted.allocate(Stream::DEFAULT, 3000, 256).unwrap();
        assert!(counted
            .allocate(Stream::DEFAULT, 3000, 256)
            .unwrap_err()
            .is_out_of_memory());
        assert_eq!((counted.current_bytes(), counted.allocations()), (3000, 1));
        // SAFETY: the simulated device never dereferences; a bad free is an error value.
        unsafe {
            assert!(counted.deallocate(Stream::DEFAULT, p, 2999, 256).is_err());
            assert_eq!(
                counted.current_bytes(),
                3000,
                "a rejected free frees nothing"
            );
            counted.deallocate_sync(p, 3000, 256).unwrap();
        }
        assert_eq!((counted.current_bytes(), counted.peak_bytes()), (0, 3000));
    }

    #[test]
    fn clones_share_counters() {
        let a = CountingResource::new(AnyResource::new(
            SimulatedMemoryResource::new(4096).unwrap(),
        ));
        let b = a.clone();
        let p = b.allocate_sync(256, 256).unwrap();
        assert_eq!(a.current_bytes(), 256);
        assert!(a.is_equal(&b));
        assert!(!a.is_equal(&CountingResource::new(a.upstream().clone())));
        assert_eq!(a.access(), Access::DEVICE);
        // SAFETY: from allocate_sync above.
        unsafe { a.deallocate(Stream::DEFAULT, p, 256, 256).unwrap() };
    }
}
