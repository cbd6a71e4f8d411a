//! CUDA events: record on a stream, wait on them from another stream or the host.

use super::device::{ensure_context, DeviceGuard, DeviceId};
use super::{check, sys, Stream};
use crate::error::Result;

/// Event creation flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EventFlags {
    /// Cheapest: no timing data (`CU_EVENT_DISABLE_TIMING`), what stream ordering needs.
    #[default]
    DisableTiming,
    /// Records timestamps, for [`Event::elapsed_ms`].
    Timing,
}

/// An owning CUDA event, destroyed on drop.
pub struct Event {
    raw: sys::CUevent,
    device: DeviceId,
}

// SAFETY: a CUevent handle may be used from any thread; the driver synchronizes internally.
unsafe impl Send for Event {}
// SAFETY: as above; all methods take &self and only pass the handle to thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event on the current device.
    pub fn new(flags: EventFlags) -> Result<Self> {
        let device = ensure_context()?;
        let raw_flags = match flags {
            EventFlags::DisableTiming => sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            EventFlags::Timing => sys::CUevent_flags::CU_EVENT_DEFAULT as u32,
        };
        let mut raw: sys::CUevent = std::ptr::null_mut();
        check(
            // SAFETY: a context is current; `raw` is a valid out-pointer.
            unsafe { sys::cuEventCreate(&mut raw, raw_flags) },
            "cuEventCreate",
        )?;
        Ok(Self { raw, device })
    }

    pub(crate) fn as_cu(&self) -> sys::CUevent {
        self.raw
    }

    /// The device the event belongs to.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Captures the work queued on `stream` so far.
    pub fn record(&self, stream: Stream) -> Result<()> {
        // SAFETY: both handles are valid.
        check(
            unsafe { sys::cuEventRecord(self.raw, stream.as_cu()) },
            "cuEventRecord",
        )
    }

    /// Blocks the host until the captured work has finished.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the handle is valid.
        check(
            unsafe { sys::cuEventSynchronize(self.raw) },
            "cuEventSynchronize",
        )
    }

    /// True when the captured work has finished.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: the handle is valid.
        match super::counted(unsafe { sys::cuEventQuery(self.raw) }, "cuEventQuery") {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(super::cuda_error(other, "cuEventQuery")),
        }
    }

    /// Milliseconds between `start` and this event (both created with [`EventFlags::Timing`]).
    pub fn elapsed_ms(&self, start: &Event) -> Result<f32> {
        let mut ms = 0.0f32;
        check(
            // SAFETY: both handles are valid; `ms` is a valid out-pointer.
            unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.raw, self.raw) },
            "cuEventElapsedTime",
        )?;
        Ok(ms)
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event({:p} on device {})", self.raw, self.device)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _guard = DeviceGuard::new(self.device);
        if let Err(e) = check(
            // SAFETY: created by us, destroyed exactly once.
            unsafe { sys::cuEventDestroy_v2(self.raw) },
            "cuEventDestroy",
        ) {
            tracing::error!("destroying event: {e}");
        }
    }
}
