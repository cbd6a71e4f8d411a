//! `recording_resource_adaptor` (an rmm-rs extra): reports every allocation, free and
//! out-of-memory failure that passes through it to the memory timeline ([`crate::timeline`])
//! while the timeline records, and only forwards otherwise (one relaxed load and a predictable
//! branch per call).
//!
//! The adaptor knows its device (the current one when it was made: a per-device resource serves
//! one device) and its resource stack (its upstream chain's names), so a recorded event costs no
//! driver call. Frees are recorded before they are forwarded, so that another thread's reuse of
//! the address comes after the free in the trace.

use std::sync::Arc;

use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::mr::arena::ArenaMemoryResource;
use crate::mr::detail::forward::forward_to_upstream;
use crate::mr::pool::PoolMemoryResource;
use crate::resource::{downcast, AnyResource, MemoryResource};
use crate::timeline::{self, Site};

#[derive(Debug)]
struct Inner {
    upstream: AnyResource,
    device: i32,
    /// The names of the upstream chain, outermost first, joined by `" > "`.
    resource: Arc<str>,
}

/// Reports what passes through it to the memory timeline while the timeline records.
///
/// ```
/// use rmm_core::{mr::{RecordingResourceAdaptor, SystemMemoryResource}, timeline, MemoryResource, cuda::Stream};
/// let mr = RecordingResourceAdaptor::new(SystemMemoryResource::new());
/// timeline::start(timeline::Options { clear: true, ..Default::default() })?;
/// let p = mr.allocate(Stream::DEFAULT, 1000, 256)?;
/// let snap = timeline::snapshot();
/// timeline::stop();
/// assert!(snap.segments.iter().any(|s| s.address == p as u64 && s.total_size == 1000));
/// unsafe { mr.deallocate(Stream::DEFAULT, p, 1000, 256)? };
/// # Ok::<(), rmm_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct RecordingResourceAdaptor {
    inner: Arc<Inner>,
}

impl RecordingResourceAdaptor {
    /// Records what passes through to `upstream` (on the current device).
    pub fn new<R: MemoryResource>(upstream: R) -> Self {
        let upstream = AnyResource::new(upstream);
        let device = if cuda::is_host_mode() {
            0
        } else {
            cuda::current_device().unwrap_or(0)
        };
        let mut names = vec!["recording_resource_adaptor".to_owned()];
        let mut next = Some(upstream.clone());
        while let Some(r) = next {
            names.push(r.name().to_owned());
            next = MemoryResource::upstream(&r).cloned();
        }
        let inner = Inner {
            upstream,
            device,
            resource: Arc::from(names.join(" > ")),
        };
        let adaptor = Self {
            inner: Arc::new(inner),
        };
        // Only while recording: a segment noted now is shown until the recorder is cleared, and a
        // pool dropped before recording starts would otherwise linger in snapshots.
        if timeline::is_recording() {
            adaptor.note_segments();
        }
        adaptor
    }

    /// The upstream resource.
    pub fn upstream(&self) -> &AnyResource {
        &self.inner.upstream
    }

    /// The device whose allocations it records.
    pub fn device(&self) -> i32 {
        self.inner.device
    }

    /// The resource stack it records (`"recording_resource_adaptor > pool_memory_resource >
    /// cuda_memory_resource"`).
    pub fn resource_stack(&self) -> &str {
        &self.inner.resource
    }

    fn site(&self, ptr: *mut u8, bytes: usize, stream: Stream) -> Site<'_> {
        Site {
            addr: ptr as usize,
            size: bytes,
            stream: stream.as_raw(),
            device: self.inner.device,
            resource: &self.inner.resource,
        }
    }

    /// Tells the timeline the regions of the pools and arenas in the upstream chain, which they
    /// took before recording may have started.
    pub fn note_segments(&self) {
        let mut next = Some(self.inner.upstream.clone());
        while let Some(r) = next {
            let regions = if let Some(pool) = downcast::<PoolMemoryResource>(&r) {
                Some((pool.name().to_owned(), pool.regions()))
            } else {
                downcast::<ArenaMemoryResource>(&r)
                    .map(|arena| (arena.name().to_owned(), vec![arena.range()]))
            };
            if let Some((name, regions)) = regions {
                let name: Arc<str> = Arc::from(name);
                timeline::note_segments(
                    Site {
                        addr: 0,
                        size: 0,
                        stream: 0,
                        device: self.inner.device,
                        resource: &name,
                    },
                    &regions,
                );
            }
            next = MemoryResource::upstream(&r).cloned();
        }
    }

    #[cold]
    #[inline(never)]
    fn recorded(&self, result: &Result<*mut u8>, bytes: usize, stream: Stream) {
        match result {
            Ok(ptr) if !ptr.is_null() => timeline::record_alloc(self.site(*ptr, bytes, stream)),
            Ok(_) => {}
            Err(e @ Error::OutOfMemory { .. }) => {
                let free = if cuda::is_host_mode() {
                    0
                } else {
                    cuda::mem_info(self.inner.device).map_or(0, |(free, _)| free)
                };
                timeline::record_oom(
                    self.site(std::ptr::null_mut(), bytes, stream),
                    free,
                    &e.to_string(),
                );
            }
            Err(_) => {}
        }
    }

    #[cold]
    #[inline(never)]
    fn record_free(&self, ptr: *mut u8, bytes: usize, stream: Stream) {
        if !ptr.is_null() {
            timeline::record_free(self.site(ptr, bytes, stream));
        }
    }
}

impl MemoryResource for RecordingResourceAdaptor {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let result = self.inner.upstream.allocate(stream, bytes, alignment);
        if timeline::is_recording() {
            self.recorded(&result, bytes, stream);
        }
        result
    }

    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        if timeline::is_recording() {
            self.record_free(ptr, bytes, stream);
        }
        // SAFETY: forwarded caller contract; the memory came from the upstream with these arguments.
        unsafe {
            self.inner
                .upstream
                .deallocate(stream, ptr, bytes, alignment)
        }
    }

    fn allocate_sync(&self, bytes: usize, alignment: usize) -> Result<*mut u8> {
        let result = self.inner.upstream.allocate_sync(bytes, alignment);
        if timeline::is_recording() {
            self.recorded(&result, bytes, Stream::DEFAULT);
        }
        result
    }

    unsafe fn deallocate_sync(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Result<()> {
        if timeline::is_recording() {
            self.record_free(ptr, bytes, Stream::DEFAULT);
        }
        // SAFETY: forwarded caller contract.
        unsafe { self.inner.upstream.deallocate_sync(ptr, bytes, alignment) }
    }

    fn is_live_allocation(&self, ptr: *mut u8, bytes: usize, alignment: usize) -> Option<bool> {
        self.inner
            .upstream
            .is_live_allocation(ptr, bytes, alignment)
    }

    forward_to_upstream! {
        name: "recording_resource_adaptor",
        upstream: upstream,
        identity: inner,
        forward: access,
    }
}
