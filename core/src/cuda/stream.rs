//! Streams: a `Copy` handle, the special default streams, an owning stream and a stream pool.
//!
//! [`Stream`] is the raw `CUstream` value, which is the same handle as the runtime's
//! `cudaStream_t`: a stream from CuPy, PyTorch or Numba can be wrapped without conversion.

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
        // created is answered from a table read without a lock (see `known_ids`), any other with
        // one driver call.
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
    #[inline]
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
        self.is_capturing_in_context()
    }

    /// [`Stream::is_capturing`] where the caller has made a context current (as a
    /// [`DeviceGuard`](super::DeviceGuard) does, which host mode refuses): no `cuCtxGetCurrent`
    /// of its own.
    pub(crate) fn is_capturing_in_context(self) -> Result<bool> {
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
/// A process-wide table maps each live owned handle to its id (under a lock, written only when an
/// owned stream is created or destroyed). In front of it, a fixed array of slots, read without a
/// lock and without thread-locals: each handle has one slot (a hash of the handle), which holds
/// the first live owned stream to land there; `overflow` counts the live owned streams that hash
/// there but are only in the table. A lookup reads its slot: the handle there is the answer, and a
/// slot without overflow answers "not ours" (a stream made elsewhere: CuPy, PyTorch, the CUDA
/// runtime), so only collisions reach the table. A stream destroyed elsewhere was never in the
/// table: always the driver.
///
/// Why not a per-thread cache (until 2026-11-26): in librmm_rs.so each thread-local costs a call to
/// `__tls_get_addr`, one per allocation and one per free on our own streams, and its entries had
/// to be voided by an epoch that every creation anywhere bumped.
///
/// Correctness needs no more than this: a call names a live stream, created before the call, so
/// the call sees its creation (the slot's release store, or the table); while it lives, no other
/// stream has its handle, and its slot (or table entry) stays.
mod known_ids {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn table() -> &'static Mutex<HashMap<usize, u64>> {
        static TABLE: OnceLock<Mutex<HashMap<usize, u64>>> = OnceLock::new();
        TABLE.get_or_init(Mutex::default)
    }

    /// Slots: a few hundred live owned streams rarely collide in 1024 (16 KiB).
    const SLOT_BITS: u32 = 10;

    struct Slot {
        /// The handle of the live owned stream held here; 0 for none (never a real stream's handle:
        /// 0 is the legacy default stream, which is never asked about).
        handle: AtomicUsize,
        /// Its id, written before `handle` (release) and read after it (acquire).
        id: AtomicU64,
        /// Live owned streams hashing here that only the table holds.
        overflow: AtomicU32,
    }

    static SLOTS: [Slot; 1 << SLOT_BITS] = [const {
        Slot {
            handle: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            overflow: AtomicU32::new(0),
        }
    }; 1 << SLOT_BITS];

    fn slot_index(raw: usize) -> usize {
        // Fibonacci hashing: the handles are heap addresses, alike in their low and high bits.
        ((raw as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOT_BITS)) as usize
    }

    /// The id of `raw` if it is a live stream created by [`OwnedStream`].
    #[inline]
    pub(super) fn get(raw: usize) -> Option<u64> {
        let slot = &SLOTS[slot_index(raw)];
        if slot.handle.load(Ordering::Acquire) == raw {
            return Some(slot.id.load(Ordering::Relaxed));
        }
        get_slow(raw, slot)
    }

    #[cold]
    fn get_slow(raw: usize, slot: &Slot) -> Option<u64> {
        if slot.overflow.load(Ordering::Acquire) == 0 {
            // Read again after the acquire above: a stream moved from the table into the slot
            // (`destroyed`) stored its handle before lowering `overflow`.
            if slot.handle.load(Ordering::Acquire) == raw {
                return Some(slot.id.load(Ordering::Relaxed));
            }
            return None;
        }
        table()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&raw)
            .copied()
    }

    pub(super) fn created(raw: usize, id: u64) {
        let mut table = table().lock().unwrap_or_else(PoisonError::into_inner);
        table.insert(raw, id);
        let slot = &SLOTS[slot_index(raw)];
        // Slots change only under the table's lock.
        if slot.handle.load(Ordering::Relaxed) == 0 {
            slot.id.store(id, Ordering::Relaxed);
            slot.handle.store(raw, Ordering::Release);
        } else {
            slot.overflow.fetch_add(1, Ordering::Release);
        }
    }

    pub(super) fn destroyed(raw: usize) {
        let mut table = table().lock().unwrap_or_else(PoisonError::into_inner);
        if table.remove(&raw).is_none() {
            return;
        }
        let index = slot_index(raw);
        let slot = &SLOTS[index];
        if slot.handle.load(Ordering::Relaxed) != raw {
            slot.overflow.fetch_sub(1, Ordering::Release);
            return;
        }
        // Another live stream of this slot (only in the table) takes its place, so that the slot
        // keeps answering without the lock.
        let next = (slot.overflow.load(Ordering::Relaxed) > 0)
            .then(|| table.iter().find(|(&h, _)| slot_index(h) == index))
            .flatten();
        match next {
            Some((&handle, &id)) => {
                slot.id.store(id, Ordering::Relaxed);
                slot.handle.store(handle, Ordering::Release);
                slot.overflow.fetch_sub(1, Ordering::Release);
            }
            None => slot.handle.store(0, Ordering::Release),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        // Fake handles: only the table and the caches see them, never the driver.
        #[test]
        fn a_known_id_never_outlives_its_stream() {
            let (h, other) = (0xdead_0000_usize, 0xdead_1000_usize);
            assert_eq!(get(h), None, "unknown handles go to the driver");
            created(h, 7);
            assert_eq!(get(h), Some(7));
            std::thread::spawn(move || assert_eq!(get(h), Some(7), "other threads find it too"))
                .join()
                .unwrap();
            destroyed(h);
            assert_eq!(get(h), None, "the id died with the stream");
            created(h, 9);
            assert_eq!(
                get(h),
                Some(9),
                "a new stream reusing the handle has its own id"
            );
            for i in 0..8 {
                created(other + i, i as u64);
                assert_eq!(get(other + i), Some(i as u64));
            }
            assert_eq!(get(h), Some(9), "others do not displace it");
            destroyed(h);
            for i in 0..8 {
                destroyed(other + i);
                assert_eq!(get(other + i), None);
            }
        }

        /// Many more live streams than slots: each still has its id, through the table, and
        /// keeps it while the streams sharing its slot come and go.
        #[test]
        fn streams_sharing_a_slot_keep_their_ids() {
            let handle = |i: usize| 0xbeef_0000_0000_usize + i * 0x240;
            let n = 4 << SLOT_BITS;
            for i in 0..n {
                created(handle(i), 1000 + i as u64);
            }
            assert!((0..n).all(|i| get(handle(i)) == Some(1000 + i as u64)));
            for i in (0..n).step_by(2) {
                destroyed(handle(i));
            }
            for i in 0..n {
                let expected = (i % 2 == 1).then_some(1000 + i as u64);
                assert_eq!(get(handle(i)), expected, "stream {i}");
            }
            for i in (1..n).step_by(2) {
                destroyed(handle(i));
            }
            // A reader never misses a live stream while others of its slot come and go: the
            // slot's holder destroyed, and the reader's stream moved from the table into the slot.
            let slot = slot_index(handle(0));
            let mut same_slot = (n..).map(handle).filter(|&h| slot_index(h) == slot);
            for round in 0..100u64 {
                let holder = same_slot.next().unwrap();
                let live = same_slot.next().unwrap();
                let others: Vec<usize> = same_slot.by_ref().take(3).collect();
                created(holder, 1);
                created(live, round);
                for &h in &others {
                    created(h, 2);
                }
                let stop = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|scope| {
                    let reader = scope.spawn(|| {
                        let mut reads = 0u64;
                        while !stop.load(Ordering::Relaxed) || reads < 100 {
                            assert_eq!(get(live), Some(round));
                            reads += 1;
                        }
                    });
                    destroyed(holder);
                    for &h in &others {
                        destroyed(h);
                    }
                    stop.store(true, Ordering::Relaxed);
                    reader.join().unwrap();
                });
                assert_eq!(get(live), Some(round));
                destroyed(live);
                assert_eq!(get(live), None);
            }
            assert!((0..n).all(|i| get(handle(i)).is_none()));
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
