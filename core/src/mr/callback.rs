//! `callback_memory_resource`: a resource made of two user functions, the extension point for
//! allocators written elsewhere (Python's `CallbackMemoryResource`, a C++ lambda, a Rust closure).
//!
//! The functions are foreign code as far as the resource is concerned: their panics are caught and
//! their answers checked (null for a non-empty request, misaligned pointers), so a bug in a callback
//! becomes an error value instead of unwinding into C or Python or handing out bad memory.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::aligned::check_alignment;
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::resource::{Access, MemoryResource};

/// The allocate function of a [`CallbackMemoryResource`]: `(bytes, stream) -> pointer` (RMM's
/// `allocate_callback_t`, without the `void*` argument: capture what you need).
pub type AllocateCallback = Arc<dyn Fn(usize, Stream) -> Result<*mut u8> + Send + Sync>;

/// The deallocate function of a [`CallbackMemoryResource`]: `(pointer, bytes, stream)` (RMM's
/// `deallocate_callback_t`). It returns a `Result` so that a foreign deallocator's failure can be
/// reported.
pub type DeallocateCallback = Arc<dyn Fn(*mut u8, usize, Stream) -> Result<()> + Send + Sync>;

/// The text of a caught panic's payload.
pub(crate) use crate::resource::guard::panic_text as panic_message;

struct Inner {
    allocate: AllocateCallback,
    deallocate: DeallocateCallback,
    access: Access,
}

/// A resource whose allocation and deallocation are user functions (RMM's
/// `callback_memory_resource`).
///
/// # Contract of the functions
/// - `allocate(bytes, stream)` returns memory of at least `bytes` bytes, usable on `stream`, aligned
///   to the alignment of the request (256 bytes unless the caller asks for another); an error it
///   returns is passed on unchanged, so return [`Error::OutOfMemory`] when memory runs out (Python's
///   `MemoryError` arrives as one).
/// - `deallocate(ptr, bytes, stream)` gets back exactly what `allocate` returned, with its size.
/// - Both may be called from several threads at once; wrap the resource in a
///   [`crate::mr::ThreadSafeResourceAdaptor`] if they must not be.
///
/// # What the resource checks
/// - A request of 0 bytes returns null without calling `allocate`; freeing null calls nothing.
/// - The alignment must be a power of two ([`Error::InvalidArgument`]).
/// - A null pointer from `allocate` for a non-empty request is an [`Error::OutOfMemory`].
/// - A pointer not aligned to the request's alignment is handed back to `deallocate` and reported as
///   an [`Error::InvalidArgument`] (RMM passes it on unchecked). For alignments your allocator does
///   not provide, wrap the resource in a [`crate::mr::AlignedResourceAdaptor`].
/// - A panic in either function is caught and becomes an [`Error::Unsupported`] naming the function
///   and the panic message. `Unsupported` is the variant the bindings turn into Python's
///   `RuntimeError` (what RMM raises for any non-`MemoryError` exception of a callback); no error
///   variant was added for it.
///
/// Access is what the user declares: [`Access::DEVICE`] by default, see
/// [`CallbackMemoryResource::with_access`]. Clones share the functions and compare equal only to
/// each other.
///
/// ```
/// use std::sync::Arc;
/// use rmm_core::{mr::{CallbackMemoryResource, SystemMemoryResource}, Access, MemoryResource, cuda::Stream};
/// let host = SystemMemoryResource::new();
/// let mr = CallbackMemoryResource::with_access(
///     Arc::new(move |bytes, stream| host.allocate(stream, bytes, 256)),
///     Arc::new(|ptr, bytes, stream| {
///         // SAFETY: the resource only returns what `allocate` gave it, with its size.
///         unsafe { SystemMemoryResource::new().deallocate(stream, ptr, bytes, 256) }
///     }),
///     Access::HOST,
/// );
/// let p = mr.allocate(Stream::DEFAULT, 1000, 256)?;
/// // SAFETY: `p` came from `mr` with these arguments.
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone)]
pub struct CallbackMemoryResource {
    inner: Arc<Inner>,
}

impl CallbackMemoryResource {
    /// A device-accessible resource made of `allocate` and `deallocate`.
    pub fn new(allocate: AllocateCallback, deallocate: DeallocateCallback) -> Self {
        Self::with_access(allocate, deallocate, Access::DEVICE)
    }

    /// A resource made of `allocate` and `deallocate` whose memory has the declared `access`.
    pub fn with_access(
        allocate: AllocateCallback,
        deallocate: DeallocateCallback,
        access: Access,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                allocate,
                deallocate,
                access,
            }),
        }
    }

    fn call_deallocate(&self, ptr: *mut u8, bytes: usize, stream: Stream) -> Result<()> {
        match catch_unwind(AssertUnwindSafe(|| {
            (self.inner.deallocate)(ptr, bytes, stream)
        })) {
            Ok(result) => result,
            Err(payload) => Err(self.panicked("deallocate", payload.as_ref())),
        }
    }

    fn panicked(&self, which: &str, payload: &(dyn Any + Send)) -> Error {
        let message = panic_message(payload);
        tracing::error!("{}: the {which} callback panicked: {message}", self.name());
        Error::Unsupported(format!(
            "{}: the {which} callback panicked ({message}); the panic was caught at the resource",
            self.name()
        ))
    }
}

impl fmt::Debug for CallbackMemoryResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackMemoryResource")
            .field("access", &self.inner.access)
            .finish_non_exhaustive()
    }
}

impl MemoryResource for CallbackMemoryResource {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        check_alignment(alignment)?;
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        let ptr = match catch_unwind(AssertUnwindSafe(|| (self.inner.allocate)(bytes, stream))) {
            Ok(result) => result?,
            Err(payload) => return Err(self.panicked("allocate", payload.as_ref())),
        };
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                bytes,
                resource: self.name().to_owned(),
                detail: "the allocate callback returned null".into(),
            });
        }
        if ptr as usize % alignment != 0 {
            let _ = self.call_deallocate(ptr, bytes, stream);
            return Err(Error::invalid(format!(
                "{}: the allocate callback returned {ptr:p}, which is not {alignment}-byte aligned",
                self.name()
            )));
        }
        Ok(ptr)
    }

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
        self.call_deallocate(ptr, bytes, stream)
    }

    fn access(&self) -> Access {
        self.inner.access
    }

    fn name(&self) -> &str {
        "callback_memory_resource"
    }

    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        crate::resource::downcast::<Self>(other).is_some_and(|o| Arc::ptr_eq(&self.inner, &o.inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::{SimulatedMemoryResource, SystemMemoryResource};
    use crate::AnyResource;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Callbacks forwarding to `upstream`, counting the calls of each.
    fn forwarding(
        upstream: AnyResource,
        calls: Arc<[AtomicUsize; 2]>,
    ) -> (AllocateCallback, DeallocateCallback) {
        let (up, c) = (upstream.clone(), calls.clone());
        let allocate: AllocateCallback = Arc::new(move |bytes, stream| {
            c[0].fetch_add(1, Ordering::SeqCst);
            up.allocate(stream, bytes, 256)
        });
        let deallocate: DeallocateCallback = Arc::new(move |ptr, bytes, stream| {
            calls[1].fetch_add(1, Ordering::SeqCst);
            // SAFETY: the resource only returns what the allocate callback gave it, with its size.
            unsafe { upstream.deallocate(stream, ptr, bytes, 256) }
        });
        (allocate, deallocate)
    }

    #[test]
    fn forwards_to_the_user_functions() {
        let host = AnyResource::new(SystemMemoryResource::new());
        let calls = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let (a, d) = forwarding(host, calls.clone());
        let mr = CallbackMemoryResource::with_access(a, d, Access::HOST);
        let p = mr.allocate(Stream::DEFAULT, 3000, 256).unwrap();
        // SAFETY: host memory valid for 3000 bytes.
        unsafe { p.write_bytes(0xee, 3000) };
        // SAFETY: from allocate above.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 3000, 256).unwrap() };
        assert!(mr.allocate(Stream::DEFAULT, 0, 256).unwrap().is_null());
        // SAFETY: freeing null is a no-op.
        unsafe {
            mr.deallocate(Stream::DEFAULT, std::ptr::null_mut(), 0, 256)
                .unwrap()
        };
        assert_eq!(
            (
                calls[0].load(Ordering::SeqCst),
                calls[1].load(Ordering::SeqCst)
            ),
            (1, 1)
        );
        assert_eq!(mr.access(), Access::HOST);
        assert!(matches!(
            mr.allocate(Stream::DEFAULT, 8, 6),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn errors_from_the_functions_pass_through() {
        let gpu = SimulatedMemoryResource::new(1 << 20).unwrap();
        let calls = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let (a, d) = forwarding(AnyResource::new(gpu.clone()), calls);
        let mr = CallbackMemoryResource::new(a, d);
        assert_eq!(mr.access(), Access::DEVICE, "the default declaration");
        let e = mr.allocate(Stream::DEFAULT, 2 << 20, 256).unwrap_err();
        assert!(
            matches!(&e, Error::OutOfMemory { resource, .. } if resource == "simulated_memory_resource"),
            "{e}"
        );
        let p = mr.allocate(Stream::DEFAULT, 100, 256).unwrap();
        // SAFETY: simulated memory is never dereferenced; the wrong size is rejected by the upstream.
        unsafe {
            assert!(matches!(
                mr.deallocate(Stream::DEFAULT, p, 99, 256),
                Err(Error::InvalidArgument(_))
            ));
            mr.deallocate(Stream::DEFAULT, p, 100, 256).unwrap();
        }
        assert_eq!(gpu.usage().allocated_bytes, 0);
    }

    #[test]
    fn panics_are_caught_and_become_errors() {
        let mr = CallbackMemoryResource::new(
            Arc::new(|bytes, _| panic!("no memory for {bytes} bytes today")),
            Arc::new(|_, _, _| panic!("cannot free")),
        );
        let e = mr.allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e}");
        assert!(
            e.to_string()
                .contains("allocate callback panicked (no memory for 64 bytes today)"),
            "{e}"
        );
        // SAFETY: the pointer is never dereferenced; the callback panics before using it.
        let e = unsafe { mr.deallocate(Stream::DEFAULT, 0x1000 as *mut u8, 64, 256) }.unwrap_err();
        assert!(
            matches!(e, Error::Unsupported(_))
                && e.to_string().contains("deallocate callback panicked"),
            "{e}"
        );
        let s = CallbackMemoryResource::new(
            Arc::new(|_, _| std::panic::panic_any(17u32)),
            Arc::new(|_, _, _| Ok(())),
        );
        assert!(s
            .allocate(Stream::DEFAULT, 1, 1)
            .unwrap_err()
            .to_string()
            .contains("non-string panic payload"));
    }

    #[test]
    fn null_and_misaligned_answers_are_caught() {
        let null = CallbackMemoryResource::new(
            Arc::new(|_, _| Ok(std::ptr::null_mut())),
            Arc::new(|_, _, _| Ok(())),
        );
        let e = null.allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(
            e.is_out_of_memory() && e.to_string().contains("returned null"),
            "{e}"
        );

        let freed = Arc::new(AtomicUsize::new(0));
        let seen = freed.clone();
        let skewed = CallbackMemoryResource::new(
            Arc::new(|_, _| Ok(0x1_0010 as *mut u8)),
            Arc::new(move |ptr, _, _| {
                seen.store(ptr as usize, Ordering::SeqCst);
                Ok(())
            }),
        );
        let e = skewed.allocate(Stream::DEFAULT, 64, 256).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_))
                && e.to_string().contains("not 256-byte aligned"),
            "{e}"
        );
        assert_eq!(
            freed.load(Ordering::SeqCst),
            0x1_0010,
            "the misaligned pointer was handed back"
        );
        assert_eq!(
            skewed.allocate(Stream::DEFAULT, 64, 16).unwrap() as usize,
            0x1_0010,
            "16-byte alignment is met"
        );
    }

    #[test]
    fn clones_share_the_functions_and_only_they_are_equal() {
        let make = || {
            CallbackMemoryResource::new(
                Arc::new(|_, _| Ok(std::ptr::null_mut())),
                Arc::new(|_, _, _| Ok(())),
            )
        };
        let a = make();
        assert!(a.is_equal(&a.clone()) && a.is_equal(&AnyResource::new(a.clone())));
        assert!(!a.is_equal(&make()));
        assert_eq!(a.name(), "callback_memory_resource");
        assert!(format!("{a:?}").contains("device"));
    }

    /// A device-accessible callback resource forwarding to `upstream` (GPU tests).
    fn over(upstream: AnyResource) -> AnyResource {
        let access = upstream.access();
        let (a, d) = forwarding(
            upstream,
            Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]),
        );
        AnyResource::new(CallbackMemoryResource::with_access(a, d, access))
    }

    crate::mr::test_harness::resource_tests!(over_cuda, || Ok(over(AnyResource::new(
        crate::mr::CudaMemoryResource::new()
    ))));
    crate::mr::test_harness::resource_tests!(over_managed, || Ok(over(AnyResource::new(
        crate::mr::ManagedMemoryResource::new()
    ))));
    crate::mr::test_harness::resource_tests!(over_cuda_async, || Ok(over(AnyResource::new(
        crate::mr::CudaAsyncMemoryResource::new()?
    ))));
}
