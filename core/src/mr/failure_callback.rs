//! `failure_callback_resource_adaptor`: a user callback gets a say when the upstream runs out of
//! memory (free a cache, spill, wait), then the request is retried or the error returned.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::mr::callback::panic_message;
use crate::mr::detail::forward::forward_to_upstream;
use crate::resource::{AnyResource, MemoryResource};

/// The callback of a [`FailureCallbackResourceAdaptor`] (RMM's `failure_callback_t`, without the
/// `void*` argument: capture what you need). It gets the size of the failed request and returns
/// true to retry it, false to give up.
pub type FailureCallback = Arc<dyn Fn(usize) -> bool + Send + Sync>;

/// Calls a callback when the upstream is out of memory, and retries while it says so (RMM's
/// `failure_callback_resource_adaptor`).
///
/// Only [`Error::OutOfMemory`] from the upstream triggers the callback; every other error passes
/// through at once. The callback may run on several threads at once.
///
/// # Retries
/// As in RMM, the callback alone decides when to stop: one that always returns true makes an
/// impossible request loop forever. That is deliberate, since "wait until another thread frees
/// memory" is a legitimate callback, but a callback should normally return false once it has
/// nothing left to free. [`FailureCallbackResourceAdaptor::with_retry_limit`] adds a hard cap for
/// callbacks you do not control: after that many retries the out-of-memory error is returned.
///
/// # Panics in the callback
/// A panicking callback is treated as one that returned false: the panic is caught (it never
/// unwinds through the resource, so not into C or Python either) and the upstream's
/// out-of-memory error is returned with the panic message appended to its detail.
///
/// Deallocation goes straight to the upstream. Two adaptors are equal when their upstreams are
/// (memory from one can be freed through the other). Access is the upstream's.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use rmm_core::{mr::{FailureCallbackResourceAdaptor, SimulatedMemoryResource}, MemoryResource, cuda::Stream};
/// let calls = Arc::new(AtomicUsize::new(0));
/// let seen = calls.clone();
/// let mr = FailureCallbackResourceAdaptor::new(
///     SimulatedMemoryResource::new(1 << 20)?,
///     Arc::new(move |_bytes| seen.fetch_add(1, Ordering::SeqCst) < 2), // retry twice, then give up
/// );
/// assert!(mr.allocate(Stream::DEFAULT, 2 << 20, 256).unwrap_err().is_out_of_memory());
/// assert_eq!(calls.load(Ordering::SeqCst), 3);
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone)]
pub struct FailureCallbackResourceAdaptor {
    upstream: AnyResource,
    callback: FailureCallback,
    retry_limit: Option<usize>,
    /// Shared by clones: as in RMM (a `shared_resource`), copies compare equal and two adaptors
    /// made separately do not, even over the same upstream.
    identity: Arc<()>,
}

impl FailureCallbackResourceAdaptor {
    /// Calls `callback(bytes)` whenever `upstream` is out of memory, retrying while it returns true.
    pub fn new<R: MemoryResource>(upstream: R, callback: FailureCallback) -> Self {
        Self {
            upstream: AnyResource::new(upstream),
            callback,
            retry_limit: None,
            identity: Arc::new(()),
        }
    }

    /// As [`FailureCallbackResourceAdaptor::new`], but gives up after `max_retries` retries of one
    /// request even if the callback keeps returning true.
    pub fn with_retry_limit<R: MemoryResource>(
        upstream: R,
        callback: FailureCallback,
        max_retries: usize,
    ) -> Self {
        Self {
            upstream: AnyResource::new(upstream),
            callback,
            retry_limit: Some(max_retries),
            identity: Arc::new(()),
        }
    }

    /// The upstream resource (RMM's `get_upstream_resource`).
    pub fn upstream(&self) -> &AnyResource {
        &self.upstream
    }

    /// The callback.
    pub fn callback(&self) -> &FailureCallback {
        &self.callback
    }

    /// The cap on retries of one request, if any (`None`: the callback decides, as in RMM).
    pub fn retry_limit(&self) -> Option<usize> {
        self.retry_limit
    }
}

impl fmt::Debug for FailureCallbackResourceAdaptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailureCallbackResourceAdaptor")
            .field("upstream", &self.upstream)
            .field("retry_limit", &self.retry_limit)
            .finish_non_exhaustive()
    }
}

/// Appends `extra` to an out-of-memory error's detail.
fn with_detail(error: Error, extra: String) -> Error {
    match error {
        Error::OutOfMemory {
            bytes,
            resource,
            detail,
        } => {
            let detail = if detail.is_empty() {
                extra
            } else {
                format!("{detail}; {extra}")
            };
            Error::OutOfMemory {
                bytes,
                resource,
                detail,
            }
        }
        other => other,
    }
}

impl MemoryResource for FailureCallbackResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let mut retries = 0usize;
        loop {
            let error = match self.upstream.allocate(stream, bytes, alignment) {
                Err(e) if e.is_out_of_memory() => e,
                done => return done,
            };
            if self.retry_limit.is_some_and(|limit| retries >= limit) {
                return Err(with_detail(
                    error,
                    format!("gave up after {retries} retries"),
                ));
            }
            match catch_unwind(AssertUnwindSafe(|| (self.callback)(bytes))) {
                Ok(true) => retries += 1,
                Ok(false) => return Err(error),
                Err(payload) => {
                    let message = panic_message(payload.as_ref());
                    tracing::error!("{}: the failure callback panicked: {message}", self.name());
                    return Err(with_detail(
                        error,
                        format!("the failure callback panicked: {message}"),
                    ));
                }
            }
        }
    }

    forward_to_upstream! {
        name: "failure_callback_resource_adaptor",
        upstream: upstream,
        identity: identity,
        forward: access, deallocate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::SimulatedMemoryResource;
    use crate::resource::Access;
    use crate::testing::Probe;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    const KIB: usize = 1 << 10;

    #[test]
    fn retries_once_the_callback_frees_memory() {
        let gpu = SimulatedMemoryResource::new(64 * KIB).unwrap();
        // Something else holds most of the device; the callback releases it (like a spilling cache).
        let ballast = Arc::new(Mutex::new(Some(
            gpu.allocate(Stream::DEFAULT, 48 * KIB, 256).unwrap() as usize,
        )));
        let calls = Arc::new(AtomicUsize::new(0));
        let callback: FailureCallback = {
            let (gpu, ballast, calls) = (gpu.clone(), ballast.clone(), calls.clone());
            Arc::new(move |bytes| {
                calls.fetch_add(1, Ordering::SeqCst);
                assert_eq!(bytes, 32 * KIB);
                match ballast.lock().unwrap().take() {
                    Some(p) => {
                        // SAFETY: the ballast came from `gpu` with these arguments.
                        unsafe {
                            gpu.deallocate(Stream::DEFAULT, p as *mut u8, 48 * KIB, 256)
                                .unwrap()
                        };
                        true
                    }
                    None => false,
                }
            })
        };
        let mr = FailureCallbackResourceAdaptor::new(gpu.clone(), callback);
        let p = mr.allocate(Stream::DEFAULT, 32 * KIB, 256).unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "one failure, one callback, one successful retry"
        );
        // Nothing is left to free: the callback says false and the error comes back.
        let q = mr.allocate(Stream::DEFAULT, 32 * KIB, 256).unwrap();
        let e = mr.allocate(Stream::DEFAULT, 32 * KIB, 256).unwrap_err();
        assert!(e.is_out_of_memory(), "{e}");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // SAFETY: from allocate above with these arguments.
        unsafe {
            mr.deallocate(Stream::DEFAULT, p, 32 * KIB, 256).unwrap();
            mr.deallocate(Stream::DEFAULT, q, 32 * KIB, 256).unwrap();
        }
        assert_eq!(gpu.usage().allocated_bytes, 0);
    }

    #[test]
    fn false_stops_at_once_and_the_upstream_error_comes_back() {
        let gpu = SimulatedMemoryResource::new(64 * KIB).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let mr = FailureCallbackResourceAdaptor::new(
            gpu,
            Arc::new(move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
                false
            }),
        );
        let e = mr.allocate(Stream::DEFAULT, 128 * KIB, 256).unwrap_err();
        assert!(
            matches!(&e, Error::OutOfMemory { resource, .. } if resource == "simulated_memory_resource"),
            "{e}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn other_errors_pass_through_without_the_callback() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let mr = FailureCallbackResourceAdaptor::new(
            SimulatedMemoryResource::new(64 * KIB).unwrap(),
            Arc::new(move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
                true
            }),
        );
        let e = mr.allocate(Stream::DEFAULT, 64, 3).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // SAFETY: the simulated device rejects the unknown pointer; nothing is dereferenced.
        let e = unsafe { mr.deallocate(Stream::DEFAULT, 0x10 as *mut u8, 1, 256) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_retry_limit_bounds_an_always_true_callback() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let mr = FailureCallbackResourceAdaptor::with_retry_limit(
            SimulatedMemoryResource::new(64 * KIB).unwrap(),
            Arc::new(move |_| {
                seen.fetch_add(1, Ordering::SeqCst);
                true
            }),
            5,
        );
        assert_eq!(mr.retry_limit(), Some(5));
        let e = mr.allocate(Stream::DEFAULT, 128 * KIB, 256).unwrap_err();
        assert!(
            e.is_out_of_memory() && e.to_string().contains("gave up after 5 retries"),
            "{e}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 5, "5 callbacks, 6 attempts");
        let none = FailureCallbackResourceAdaptor::with_retry_limit(
            SimulatedMemoryResource::new(64 * KIB).unwrap(),
            Arc::new(|_| panic!("never called")),
            0,
        );
        assert!(none
            .allocate(Stream::DEFAULT, 128 * KIB, 256)
            .unwrap_err()
            .is_out_of_memory());
    }

    #[test]
    fn a_panicking_callback_is_caught_and_reported() {
        let mr = FailureCallbackResourceAdaptor::new(
            SimulatedMemoryResource::new(64 * KIB).unwrap(),
            Arc::new(|bytes| panic!("cannot spill {bytes} bytes")),
        );
        let e = mr.allocate(Stream::DEFAULT, 128 * KIB, 256).unwrap_err();
        assert!(e.is_out_of_memory(), "{e}");
        assert!(
            e.to_string()
                .contains("panicked: cannot spill 131072 bytes"),
            "{e}"
        );
        assert!(
            mr.allocate(Stream::DEFAULT, KIB, 256).is_ok(),
            "the resource still works"
        );
    }

    #[test]
    fn host_memory_round_trip_and_equality() {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let mr = FailureCallbackResourceAdaptor::new(probe.clone(), Arc::new(|_| false));
        let p = mr.allocate(Stream::DEFAULT, 4096, 256).unwrap();
        // SAFETY: host memory valid for 4096 bytes.
        unsafe { p.write_bytes(3, 4096) };
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 4096, 256).unwrap() };
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0
        );
        assert!(mr.is_equal(&mr.clone()), "copies share the adaptor");
        assert!(!mr.is_equal(&FailureCallbackResourceAdaptor::new(
            probe.clone(),
            Arc::new(|_| true)
        )));
        assert!(!mr.is_equal(&FailureCallbackResourceAdaptor::new(
            Probe::new(Access::HOST),
            Arc::new(|_| true)
        )));
        assert_eq!(mr.access(), Access::HOST);
        assert_eq!(mr.name(), "failure_callback_resource_adaptor");
        assert!(format!("{mr:?}").contains("probe"));
    }

    fn give_up() -> FailureCallback {
        Arc::new(|_| false)
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || {
        Ok(AnyResource::new(FailureCallbackResourceAdaptor::new(
            crate::mr::CudaMemoryResource::new(),
            give_up(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_managed, || {
        Ok(AnyResource::new(FailureCallbackResourceAdaptor::new(
            crate::mr::ManagedMemoryResource::new(),
            give_up(),
        )))
    });
    crate::mr::test_harness::resource_tests!(over_cuda_async, || {
        Ok(AnyResource::new(FailureCallbackResourceAdaptor::new(
            crate::mr::CudaAsyncMemoryResource::new()?,
            give_up(),
        )))
    });
}
