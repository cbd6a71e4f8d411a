//! Streams: a `Copy` handle, the special default streams, an owning stream and a stream pool.
//!
//! [`Stream`] is the raw `CUstream` value, which is the same handle as the runtime's
//! `cudaStream_t`: a stream from CuPy, PyTorch or Numba can be wrapped without conversion.

use std::cell::Cell;
use foldhash::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::device::{current_device, ensure_context, DeviceGuard, DeviceId};
use super::{check, driver, sys, Event};
use crate::error::{Error, Result};

/// A CUDA stream handle (`CUstream` / `cudaStream_t`). Copying it does not copy the stream.
///
/// ```
/// use rmm_core::cuda::Stream;
/// assert!(Stream::DEFAULT.is_default());
/// assert!(Stream::PER_THREAD.is_per_thread_default());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct Stream(usize);

// The special handles CUDA defines (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
const LEGACY_HANDLE: usize = 0x1;
const PER_THREAD_HANDLE: usize = 0x2;

impl Stream {
    /// Stream 0, RMM's `cuda_stream_default` (the legacy default stream unless built for PTDS).
    pub const DEFAULT: Stream = Stream(0);
    /// `cudaStreamLegacy`, RMM's `cuda_stream_legacy`.
    pub const LEGACY: Stream = Stream(LEGACY_HANDLE);
    /// `cudaStreamPerThread`, RMM's `cuda_stream_per_thread`.
    pub const PER_THREAD: Stream = Stream(PER_THREAD_HANDLE);

    /// Wraps a raw `CUstream` / `cudaStream_t` value.
    ///
    /// # Safety
    /// `raw` must be 0, one of the special handles, or a stream that stays alive for as long as this
    /// handle (or any copy) is used.
    pub const unsafe fn from_raw(raw: usize) -> Self {
        Stream(raw)
    }

    /// The raw handle value, as `cudaStream_t` would carry it.
    pub const fn as_raw(self) -> usize {
        self.0
    }

    pub(crate) fn as_cu(self) -> sys::CUstream {
        self.0 as sys::CUstream
    }

    /// True for stream 0 and the legacy default stream.
    pub const fn is_default(self) -> bool {
        self.0 == 0 || self.0 == LEGACY_HANDLE
    }

    /// True for the per-thread default stream.
    pub const fn is_per_thread_default(self) -> bool {
        self.0 == PER_THREAD_HANDLE
    }

    /// Blocks until all work queued on this stream has finished.
    ///
    /// In host mode nothing is ever queued, so the default streams synchronize trivially; a
    /// non-default stream cannot exist there and gives [`Error::NoDriver`]/[`Error::NoDevice`].
    pub fn synchronize(self) -> Result<()> {
        if let Err(e) = driver() {
            return if self.is_default() || self.is_per_thread_default() {
                Ok(())
            } else {
                Err(e)
            };
        }
        if super::device_count()? == 0 {
            return Ok(());
        }
        ensure_context()?;
        // SAFETY: a context is current and the handle is valid (constructor contract).
        check(
            unsafe { sys::cuStreamSynchronize(self.as_cu()) },
            "cuStreamSynchronize",
        )
    }

    /// True when all work queued on this stream has finished.
    ///
    /// In host mode (no driver, or a driver without devices) the default streams are always idle,
    /// as [`Stream::synchronize`] treats them; a non-default stream cannot exist there and errs.
    pub fn is_idle(self) -> Result<bool> {
        if (self.is_default() || self.is_per_thread_default()) && super::is_host_mode() {
            return Ok(true);
        }
        ensure_context()?;
        // SAFETY: a context is current and the handle is valid (constructor contract).
        let status = super::counted(unsafe { sys::cuStreamQuery(self.as_cu()) }, "cuStreamQuery");
        match status {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(super::cuda_error(other, "cuStreamQuery")),
        }
    }

    /// The device this stream belongs to; for the default and per-thread default streams, the
    /// calling thread's current device (whose stream the handle then means).
    ///
    /// # Errors
    /// Host mode, or the driver's error (for example a destroyed stream).
    pub fn device(self) -> Result<DeviceId> {
        if self.is_default() || self.is_per_thread_default() {
            return current_device();
        }
        ensure_context()?;
        // Asked once: the lookup formats the name and asks the loader each time.
        static HAS_GET_DEVICE: OnceLock<bool> = OnceLock::new();
        if *HAS_GET_DEVICE.get_or_init(|| super::has_entry_point("cuStreamGetDevice")) {
            let mut device: sys::CUdevice = 0;
            check(
                // SAFETY: a context is current, the handle is valid (constructor contract) and `device`
                // is a valid out-pointer.
                unsafe { sys::cuStreamGetDevice(self.as_cu(), &mut device) },
                "cuStreamGetDevice",
            )?;
            return Ok(device);
        }
        // Drivers before CUDA 12.8: the device of the stream's context.
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        check(
            // SAFETY: as above; `ctx` is a valid out-pointer.
            unsafe { sys::cuStreamGetCtx(self.as_cu(), &mut ctx) },
            "cuStreamGetCtx",
        )?;
        // SAFETY: `ctx` is the stream's live context; it is pushed and popped around one query.
        check(unsafe { sys::cuCtxPushCurrent_v2(ctx) }, "cuCtxPushCurrent")?;
        let mut device: sys::CUdevice = 0;
        // SAFETY: a context (the stream's) is current; `device` is a valid out-pointer.
        let got = check(
            unsafe { sys::cuCtxGetDevice(&mut device) },
            "cuCtxGetDevice",
        );
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        check(
            // SAFETY: undoes the push above.
            unsafe { sys::cuCtxPopCurrent_v2(&mut popped) },
            "cuCtxPopCurrent",
        )?;
        got.map(|()| device)
    }

    /// The stream's id (`cuStreamGetId`): unique for the life of the process, so unlike the handle
    /// it is never reused by a stream created after this one is destroyed. The special handles give
    /// the id of the current device's stream they name.
    ///
    /// # Errors
    /// Host mode, a driver older than CUDA 12.0, or the driver's error (for example for a
    /// destroyed stream).
    pub fn id(self) -> Result<u64> {
        static SUPPORTED: OnceLock<bool> = OnceLock::new();
        if !*SUPPORTED.get_or_init(|| super::has_entry_point("cuStreamGetId")) {
            return Err(Error::Unsupported(
                "cuStreamGetId needs CUDA 12.0 or newer".into(),
            ));
        }
        // Only the special handles name "the current device's" stream and need a current context;
        // an ordinary handle carries its own. The pools ask on every operation: a live stream we
        // created is answered from a per-thread cache (see `known_ids`), any other with one
        // driver call.
        if self.is_default() || self.is_per_thread_default() {
            ensure_context()?;
        } else if let Some(id) = known_ids::get(self.0) {
            return Ok(id);
        }
        let mut id: std::ffi::c_ulonglong = 0;
        check(
            // SAFETY: the driver is loaded (has_entry_point checked it); a special handle has a current
            // context; `id` is a valid out-pointer; an invalid handle is reported as an error.
            unsafe { sys::cuStreamGetId(self.as_cu(), &mut id) },
            "cuStreamGetId",
        )?;
        Ok(id as u64)
    }

    /// The id of a live stream created by [`OwnedStream`] (whose destruction we hear about first),
    /// without a driver call; `None` for any other handle: the special handles, streams made
    /// elsewhere (CuPy, PyTorch, the CUDA runtime), and owned streams already destroyed.
    ///
    /// Only for such a stream may a handle be kept and used after the call that named it: the
    /// driver does not guard against destroyed handles (`cuStreamGetId` on one can crash).
    pub(crate) fn owned_id(self) -> Option<u64> {
        if self.is_default() || self.is_per_thread_default() {
            return None;
        }
        known_ids::get(self.0)
    }

    /// True while this stream is being captured into a CUDA graph (`cuStreamIsCapturing`); false in
    /// host mode, where nothing is captured.
    ///
    /// # Errors
    /// The driver's error (for example for a destroyed stream).
    pub fn is_capturing(self) -> Result<bool> {
        if super::is_host_mode() {
            return Ok(false);
        }
        ensure_context()?;
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        check(
            // SAFETY: a context is current, the handle is valid (constructor contract) and `status` is a
            // valid out-pointer.
            unsafe { sys::cuStreamIsCapturing(self.as_cu(), &mut status) },
            "cuStreamIsCapturing",
        )?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Makes all future work on this stream wait until `event` has completed.
    pub fn wait_event(self, event: &Event) -> Result<()> {
        ensure_context()?;
        // SAFETY: both handles are valid; flags must be 0.
        check(
            unsafe { sys::cuStreamWaitEvent(self.as_cu(), event.as_cu(), 0) },
            "cuStreamWaitEvent",
        )
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => write!(f, "Stream(default)"),
            LEGACY_HANDLE => write!(f, "Stream(legacy)"),
            PER_THREAD_HANDLE => write!(f, "Stream(per-thread)"),
            raw => write!(f, "Stream({raw:#x})"),
        }
    }
}

impl std::fmt::Display for Stream {
    /// The handle as a hex pointer, the way RMM's logs print `cudaStream_t`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Creation flags of an owning stream (RMM's `cuda_stream::flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StreamFlags {
    /// Synchronizes with the legacy default stream (`cudaStreamDefault`).
    #[default]
    SyncDefault,
    /// Does not synchronize with the legacy default stream (`cudaStreamNonBlocking`).
    NonBlocking,
}

/// An owning CUDA stream, destroyed on drop (RMM's `cuda_stream`). Move-only.
pub struct OwnedStream {
    stream: Stream,
    device: DeviceId,
    flags: StreamFlags,
}

impl OwnedStream {
    /// Creates a stream on the current device.
    ///
    /// # Errors
    /// Host mode, or the driver's error.
    pub fn new(flags: StreamFlags) -> Result<Self> {
        let device = ensure_context()?;
        let raw_flags = match flags {
            StreamFlags::SyncDefault => sys::CUstream_flags::CU_STREAM_DEFAULT as u32,
            StreamFlags::NonBlocking => sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
        };
        let mut raw: sys::CUstream = std::ptr::null_mut();
        check(
            // SAFETY: a context is current; `raw` is a valid out-pointer.
            unsafe { sys::cuStreamCreate(&mut raw, raw_flags) },
            "cuStreamCreate",
        )?;
        let owned = Self {
            stream: Stream(raw as usize),
            device,
            flags,
        };
        // Without `cuStreamGetId` (CUDA < 12.0) there is no id to remember.
        if let Ok(id) = owned.stream.id() {
            known_ids::created(owned.stream.0, id);
        }
        Ok(owned)
    }

    /// The (non-owning) handle.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// The device the stream was created on.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The flags it was created with.
    pub fn flags(&self) -> StreamFlags {
        self.flags
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize()
    }
}

impl std::ops::Deref for OwnedStream {
    type Target = Stream;
    fn deref(&self) -> &Stream {
        &self.stream
    }
}

impl From<&OwnedStream> for Stream {
    fn from(owned: &OwnedStream) -> Stream {
        owned.stream
    }
}

impl std::fmt::Debug for OwnedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedStream")
            .field("stream", &self.stream)
            .field("device", &self.device)
            .field("flags", &self.flags)
            .finish()
    }
}

/// Called with each [`OwnedStream`] just before it is destroyed (set once, by the stream-ordered
/// sub-allocators, which may still hold blocks freed on it; see `mr::detail::stream_ordered`).
static DESTROY_HOOK: OnceLock<fn(Stream)> = OnceLock::new();

/// Installs the hook [`OwnedStream`] calls before destroying its stream (only the first call counts).
pub(crate) fn set_destroy_hook(hook: fn(Stream)) {
    let _ = DESTROY_HOOK.set(hook);
}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        let _guard = DeviceGuard::new(self.device);
        if let Some(hook) = DESTROY_HOOK.get() {
            hook(self.stream);
        }
        // Before the handle can be reused by a new stream.
        known_ids::destroyed(self.stream.0);
        // SAFETY: the stream was created by us and is destroyed exactly once; pending work still
        // completes (cuStreamDestroy does not wait, nor does it cancel).
        let status = unsafe { sys::cuStreamDestroy_v2(self.stream.as_cu()) };
        if let Err(e) = check(status, "cuStreamDestroy") {
            tracing::error!("destroying {:?}: {e}", self.stream);
        }
    }
}

/// A stream made with `cuStreamCreate` directly, as CuPy or PyTorch make theirs: rmm neither tracks
/// it nor hears of its destruction (tests of streams made elsewhere).
#[cfg(test)]
pub(crate) struct ForeignStream(Stream);

#[cfg(test)]
impl ForeignStream {
    /// A non-blocking stream on the current context (one must be current).
    pub(crate) fn new() -> Result<Self> {
        let mut raw: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        check(
            // SAFETY: the caller made a context current; `raw` is a valid out-pointer.
            unsafe { sys::cuStreamCreate(&mut raw, flags) },
            "cuStreamCreate",
        )?;
        Ok(Self(Stream(raw as usize)))
    }

    /// The handle, valid until [`ForeignStream::destroy`].
    pub(crate) fn stream(&self) -> Stream {
        self.0
    }

    /// Destroys the stream behind rmm's back; its queued work still completes.
    pub(crate) fn destroy(self) -> Result<()> {
        // SAFETY: made by `new`, destroyed once (this consumes it).
        check(
            unsafe { sys::cuStreamDestroy_v2(self.0.as_cu()) },
            "cuStreamDestroy",
        )
    }
}

/// The ids of the live streams created by [`OwnedStream`], so that [`Stream::id`] needs no driver
/// call for them: the pools ask for the id on every operation, to tell a live stream from a
/// destroyed one whose handle was reused.
///
/// A process-wide table maps each live owned handle to its id, and every creation or destruction
/// of an owned stream bumps an epoch. Each thread caches a few `(handle, id, epoch)` entries; an
/// entry is used only while the epoch has not moved, so a destroyed stream is never answered from
/// a cache (its handle then falls back to the table, where it is gone, and to the driver). A
/// stream destroyed elsewhere (CuPy, PyTorch) was never in the table: always the driver.
mod known_ids {
    use super::*;

    static EPOCH: AtomicU64 = AtomicU64::new(0);

    fn table() -> &'static Mutex<HashMap<usize, u64>> {
        static TABLE: OnceLock<Mutex<HashMap<usize, u64>>> = OnceLock::new();
        TABLE.get_or_init(Mutex::default)
    }

    /// Entries per thread: a thread works with a few streams at a time.
    const WAYS: usize = 4;

    /// `(handle, id, epoch)` entries and the next one to replace; [`NOT_OWNED`] as the id caches
    /// "not a live owned stream" (a stream made elsewhere), so that such a handle, asked about on
    /// every pool operation, costs neither the driver nor the table's lock while the epoch holds.
    /// One cell per entry: a hit reads the entries it compares, not a copy of the whole cache.
    struct Ways {
        entries: [Cell<(usize, u64, u64)>; WAYS],
        next: Cell<usize>,
    }

    /// The cached id of a handle that is not a live owned stream.
    const NOT_OWNED: u64 = u64::MAX;

    thread_local! {
        static CACHE: Ways = const {
            Ways {
                entries: [const { Cell::new((0, 0, u64::MAX)) }; WAYS],
                next: Cell::new(0),
            }
        };
    }

    /// The id of `raw` if it is a live stream created by [`OwnedStream`].
    pub(super) fn get(raw: usize) -> Option<u64> {
        // Read before the table: a creation or destruction after this read leaves a stale epoch in
        // the entry, positive or negative.
        let epoch = EPOCH.load(Ordering::Acquire);
        let lookup = || {
            table()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&raw)
                .copied()
        };
        CACHE
            .try_with(|ways| {
                for entry in &ways.entries {
                    let (handle, id, entry_epoch) = entry.get();
                    if handle == raw && entry_epoch == epoch {
                        return (id != NOT_OWNED).then_some(id);
                    }
                }
                let id = lookup();
                let next = ways.next.get();
                ways.entries[next].set((raw, id.unwrap_or(NOT_OWNED), epoch));
                ways.next.set((next + 1) % WAYS);
                id
            })
            // A thread's locals being torn down: the table answers.
            .unwrap_or_else(|_| lookup())
    }

    pub(super) fn created(raw: usize, id: u64) {
        table()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(raw, id);
        // A thread given the new handle sees this bump, so no entry of an older stream with the
        // same handle survives in its cache.
        EPOCH.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn destroyed(raw: usize) {
        table()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&raw);
        EPOCH.fetch_add(1, Ordering::AcqRel);
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        // Fake handles: only the table and the caches see them, never the driver.
        #[test]
        fn a_cached_id_never_outlives_its_stream() {
            let (h, other) = (0xdead_0000_usize, 0xdead_1000_usize);
            assert_eq!(get(h), None, "unknown handles go to the driver");
            assert_eq!(get(h), None, "and are cached as not owned");
            created(h, 7);
            assert_eq!(get(h), Some(7), "a creation voids the negative entry");
            assert_eq!(get(h), Some(7));
            assert_eq!(get(h), Some(7), "then from this thread's cache");
            std::thread::spawn(move || assert_eq!(get(h), Some(7), "other threads find it too"))
                .join()
                .unwrap();
            destroyed(h);
            assert_eq!(get(h), None, "the cache entry died with the stream");
            created(h, 9);
            assert_eq!(
                get(h),
                Some(9),
                "a new stream reusing the handle has its own id"
            );
            for i in 0..2 * WAYS {
                created(other + i, i as u64);
                assert_eq!(get(other + i), Some(i as u64));
            }
            assert_eq!(
                get(h),
                Some(9),
                "evicted from the cache, still in the table"
            );
            destroyed(h);
            for i in 0..2 * WAYS {
                destroyed(other + i);
                assert_eq!(get(other + i), None);
            }
        }
    }
}

/// A fixed set of owning streams handed out round robin (RMM's `cuda_stream_pool`).
#[derive(Debug)]
pub struct StreamPool {
    streams: Vec<OwnedStream>,
    next: AtomicUsize,
}

impl StreamPool {
    /// RMM's default pool size.
    pub const DEFAULT_SIZE: usize = 16;

    /// Creates `size` streams on the current device.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `size == 0`; host mode; the driver's error.
    pub fn new(size: usize, flags: StreamFlags) -> Result<Self> {
        if size == 0 {
            return Err(Error::invalid("a stream pool needs at least one stream"));
        }
        let streams = (0..size)
            .map(|_| OwnedStream::new(flags))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            streams,
            next: AtomicUsize::new(0),
        })
    }

    /// The next stream, round robin.
    pub fn get_stream(&self) -> Stream {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.streams[i % self.streams.len()].stream
    }

    /// The stream with id `id` modulo the pool size (never fails, as in RMM).
    pub fn get_stream_by_id(&self, id: usize) -> Stream {
        self.streams[id % self.streams.len()].stream
    }

    /// Number of streams in the pool.
    pub fn pool_size(&self) -> usize {
        self.streams.len()
    }

    /// The device the streams live on.
    pub fn device(&self) -> Result<DeviceId> {
        self.streams
            .first()
            .map(|s| s.device)
            .map_or_else(current_device, Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_handles_classify() {
        assert!(Stream::DEFAULT.is_default());
        assert!(Stream::LEGACY.is_default());
        assert!(!Stream::PER_THREAD.is_default());
        assert!(Stream::PER_THREAD.is_per_thread_default());
        assert_eq!(Stream::default(), Stream::DEFAULT);
        assert_eq!(format!("{:?}", Stream::LEGACY), "Stream(legacy)");
        // SAFETY: the handle is only formatted, never used.
        let s = unsafe { Stream::from_raw(0xabc0) };
        assert_eq!(s.to_string(), "0xabc0");
        assert_eq!(s.as_raw(), 0xabc0);
        if super::super::is_host_mode() {
            assert!(s.id().is_err() && s.device().is_err(), "no driver to ask");
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn ids_are_unique_and_devices_known() {
        crate::testing::require_gpu();
        let a = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let b = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let (ida, idb) = (a.id().unwrap(), b.id().unwrap());
        assert_ne!(ida, idb);
        assert_eq!(a.id().unwrap(), ida, "stable");
        let device = current_device().unwrap();
        assert_eq!(a.stream().device().unwrap(), device);
        assert_eq!(Stream::DEFAULT.device().unwrap(), device);
        drop(a);
        let c = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        assert_ne!(c.id().unwrap(), ida, "ids are never reused");
    }
}
