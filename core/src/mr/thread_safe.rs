//! `thread_safe_resource_adaptor`: one mutex around every call into the upstream.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cuda::Stream;
use crate::error::Result;
use crate::mr::detail::forward::forward_to_upstream;
use crate::resource::{AnyResource, MemoryResource};

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    lock: Mutex<()>,
}

/// Serializes every allocation and deallocation of its upstream behind one mutex (RMM's
/// `thread_safe_resource_adaptor`).
///
/// Every [`MemoryResource`] in this crate is already `Send + Sync` and safe to call from many
/// threads at once, so none of them needs this adaptor. It exists for resources that are *not*
/// safe to re-enter — typically a [`crate::mr::CallbackMemoryResource`] around a foreign allocator
/// that assumes one caller at a time — and for RMM compatibility.
///
/// The lock is held only for the upstream call: `allocate_sync` synchronizes the stream after the
/// lock is released. A poisoned lock (an upstream that panicked) is recovered, not propagated.
/// An upstream that calls back into the same adaptor deadlocks, as with RMM's mutex.
///
/// Clones share the mutex and compare equal only to each other. Access is the upstream's.
///
/// ```
/// use rmm_core::{mr::{ThreadSafeResourceAdaptor, SystemMemoryResource}, MemoryResource, cuda::Stream};
/// let mr = ThreadSafeResourceAdaptor::new(SystemMemoryResource::new());
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| {
///             let p = mr.allocate(Stream::DEFAULT, 1024, 256).unwrap();
///             // SAFETY: `p` came from `mr` with these arguments.
///             unsafe { mr.deallocate(Stream::DEFAULT, p, 1024, 256).unwrap() };
///         });
///     }
/// });
/// ```
#[derive(Clone, Debug)]
pub struct ThreadSafeResourceAdaptor {
    inner: Arc<Inner>,
}

impl ThreadSafeResourceAdaptor {
    /// Serializes the calls into `upstream`.
    pub fn new<R: MemoryResource>(upstream: R) -> Self {
        Self {
            inner: Arc::new(Inner {
                upstream: AnyResource::new(upstream),
                lock: Mutex::new(()),
            }),
        }
    }

    /// The upstream resource (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.inner
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryResource for ThreadSafeResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let _guard = self.lock();
        self.inner.upstream.allocate(stream, bytes, alignment)
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        let _guard = self.lock();
        // SAFETY: forwarded caller contract; the memory came from the upstream with these arguments.
        unsafe {
            self.inner
                .upstream
                .deallocate(stream, ptr, bytes, alignment)
        }
    }

    forward_to_upstream! {
        name: "thread_safe_resource_adaptor",
        upstream: upstream,
        identity: inner,
        forward: access
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::mr::SimulatedMemoryResource;
    use crate::resource::Access;
    use crate::testing::Probe;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// A deliberately non-reentrant resource: each call stays inside for up to `window`, watching
    /// for a second caller, and records whether two calls ever overlapped.
    struct NonReentrant {
        gpu: SimulatedMemoryResource,
        inside: AtomicUsize,
        overlapped: AtomicBool,
        window: Duration,
    }

    impl NonReentrant {
        fn new(window: Duration) -> Self {
            Self {
                gpu: SimulatedMemoryResource::new(1 << 24).unwrap(),
                inside: AtomicUsize::new(0),
                overlapped: AtomicBool::new(false),
                window,
            }
        }

        fn enter(&self) {
            if self.inside.fetch_add(1, Ordering::SeqCst) > 0 {
                self.overlapped.store(true, Ordering::SeqCst);
            }
            let until = Instant::now() + self.window;
            while Instant::now() < until && !self.overlapped.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            self.inside.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl MemoryResource for NonReentrant {
        fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
            self.enter();
            self.gpu.allocate(stream, bytes, alignment)
        }
        unsafe fn deallocate(
            &self,
            stream: Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            self.enter();
            // SAFETY: forwarded.
            unsafe { self.gpu.deallocate(stream, ptr, bytes, alignment) }
        }
        fn access(&self) -> Access {
            Access::DEVICE
        }
        fn name(&self) -> &str {
            "non_reentrant"
        }
        fn is_equal(&self, _other: &dyn MemoryResource) -> bool {
            false
        }
    }

    /// `threads` threads each allocate and free `rounds` times through `mr`, starting together.
    fn hammer(mr: &dyn MemoryResource, threads: usize, rounds: usize) {
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|scope| {
            for t in 0..threads {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    for k in 0..rounds {
                        let bytes = 256 * (1 + (t + k) % 5);
                        let p = mr.allocate(Stream::DEFAULT, bytes, 256).unwrap();
                        // SAFETY: from allocate above with these arguments.
                        unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, 256).unwrap() };
                    }
                });
            }
        });
    }

    #[test]
    fn the_adaptor_serializes_a_non_reentrant_upstream() {
        let upstream = AnyResource::new(NonReentrant::new(Duration::from_micros(200)));
        let mr = ThreadSafeResourceAdaptor::new(upstream.clone());
        hammer(&mr, 8, 50);
        let inner = upstream.downcast_ref::<NonReentrant>().unwrap();
        assert!(
            !inner.overlapped.load(Ordering::SeqCst),
            "two calls were inside the upstream at once"
        );
        assert_eq!(inner.gpu.usage().allocated_bytes, 0);
    }

    #[test]
    fn without_the_adaptor_the_test_upstream_does_see_overlap() {
        // The control: the detector works. The first caller waits up to 10 s for a second one,
        // which arrives at once when nothing serializes them.
        let upstream = NonReentrant::new(Duration::from_secs(10));
        let started = Instant::now();
        hammer(&upstream, 2, 1);
        assert!(upstream.overlapped.load(Ordering::SeqCst));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn forwards_and_recovers_from_a_poisoned_lock() {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = ThreadSafeResourceAdaptor::new(probe.clone());
        let poisoner = mr.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock();
            panic!("poison the adaptor's lock");
        })
        .join();
        assert!(mr.inner.lock.is_poisoned());
        let p = mr.allocate(Stream::DEFAULT, 512, 256).unwrap();
        // SAFETY: host memory valid for 512 bytes.
        unsafe { p.write_bytes(1, 512) };
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 512, 256).unwrap() };
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
        assert!(matches!(
            mr.allocate(Stream::DEFAULT, 1, 3),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn clones_share_the_lock() {
        let a = ThreadSafeResourceAdaptor::new(Probe::new(Access::HOST_DEVICE));
        let b = a.clone();
        assert!(a.is_equal(&b) && a.is_equal(&AnyResource::new(b.clone())));
        assert!(!a.is_equal(&ThreadSafeResourceAdaptor::new(a.upstream().clone())));
        assert_eq!(a.access(), Access::HOST_DEVICE);
        assert_eq!(a.name(), "thread_safe_resource_adaptor");
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(ThreadSafeResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_managed, || {
        Ok(AnyResource::new(ThreadSafeResourceAdaptor::new(
            crate::mr::ManagedMemoryResource::new(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(ThreadSafeResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
        )))
    });
}
