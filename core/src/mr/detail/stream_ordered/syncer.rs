//! The [`Syncer`] port: all the driver work stream ordering needs, with its CUDA implementation
//! (events from a per-device pool) and the host-mode one that does nothing.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::cuda::{self, DeviceGuard, DeviceId, Event, EventFlags, Stream};
use crate::error::{Error, Result};

use super::key::{Marker, MarkerToken, StreamKey};
use super::lock;

/// The driver work stream ordering needs, behind one small interface so that host mode makes no
/// CUDA call at all and the tests can count (and check) every wait.
pub(crate) trait Syncer: Send + Sync + fmt::Debug {
    /// The calling thread's current device (keys of the special stream handles carry it).
    fn current_device(&self) -> DeviceId;
    /// The device every call is on, when the process has only one (then the keys of the special
    /// handles need no call to [`Syncer::current_device`]).
    fn single_device(&self) -> Option<DeviceId> {
        None
    }
    /// The process-unique id of an ordinary stream (0 where there is none to ask), and whether we
    /// hear of its destruction before it happens (see [`StreamKey::needs_marker`]).
    fn stream_id(&self, _stream: Stream) -> (u64, bool) {
        (0, true)
    }
    /// The key of `stream` on the calling thread.
    fn key(&self, stream: Stream) -> StreamKey {
        StreamKey::of(stream, || self.current_device(), || self.stream_id(stream))
    }
    /// Records an event on `on` now and makes `waiter` wait for it.
    fn wait_stream(&self, waiter: StreamKey, on: StreamKey) -> Result<()>;
    /// Records an event on `key` now (called on `key`'s own thread for a PTDS).
    fn record_marker(&self, key: StreamKey) -> Result<MarkerToken>;
    /// Makes `waiter` wait for a recorded marker.
    fn wait_marker(&self, waiter: StreamKey, marker: &Marker) -> Result<()>;
    /// True when all the work queued on `key` so far has finished.
    fn is_idle(&self, key: StreamKey) -> Result<bool>;
    /// Blocks until the work queued on `key` so far has finished.
    fn sync_stream(&self, key: StreamKey) -> Result<()>;
    /// Blocks until the work captured by `marker` has finished.
    fn sync_marker(&self, marker: &Marker) -> Result<()>;
    /// True when the work captured by a closed `marker` has finished (a query, no blocking).
    fn marker_done(&self, marker: &Marker) -> Result<bool>;
    /// Blocks until all the work queued so far on every stream of every device has finished: the
    /// one way to wait for streams that may not be named any more (open batches).
    fn sync_device(&self) -> Result<()>;
    /// True when `key` (named by the current call) is being captured into a CUDA graph: an event
    /// recorded there would be a graph node, not a point of the stream's work.
    fn is_capturing(&self, _key: StreamKey) -> bool {
        false
    }
    /// Closes a batch of `key`, which the current call names: a marker recorded now, or `None`
    /// while `key` is being captured into a graph (the batch then stays open).
    fn close_marker(&self, key: StreamKey) -> Option<Result<MarkerToken>> {
        if self.is_capturing(key) {
            None
        } else {
            Some(self.record_marker(key))
        }
    }
    /// True when streams can be destroyed under us (GPU mode): the core then listens for
    /// [`OwnedStream`](crate::cuda::OwnedStream) destruction.
    fn tracks_stream_lifetimes(&self) -> bool {
        false
    }
}

/// Host mode: nothing is ever queued, so every stream is always idle and nothing is recorded.
#[derive(Debug, Default)]
pub(crate) struct HostSyncer;

impl Syncer for HostSyncer {
    fn current_device(&self) -> DeviceId {
        0
    }
    fn single_device(&self) -> Option<DeviceId> {
        Some(0)
    }
    fn stream_id(&self, stream: Stream) -> (u64, bool) {
        // As with a GPU: a handle we did not create is a stream made elsewhere (host mode has no
        // streams of ours; made-up handles stand for streams of CuPy or PyTorch).
        match stream.owned_id() {
            Some(id) => (id, true),
            None => (0, false),
        }
    }
    fn wait_stream(&self, _waiter: StreamKey, _on: StreamKey) -> Result<()> {
        Ok(())
    }
    fn record_marker(&self, _key: StreamKey) -> Result<MarkerToken> {
        Ok(MarkerToken::Id(0))
    }
    fn wait_marker(&self, _waiter: StreamKey, _marker: &Marker) -> Result<()> {
        Ok(())
    }
    fn is_idle(&self, _key: StreamKey) -> Result<bool> {
        Ok(true)
    }
    fn sync_stream(&self, _key: StreamKey) -> Result<()> {
        Ok(())
    }
    fn sync_marker(&self, _marker: &Marker) -> Result<()> {
        Ok(())
    }
    fn marker_done(&self, _marker: &Marker) -> Result<bool> {
        Ok(true)
    }
    fn sync_device(&self) -> Result<()> {
        Ok(())
    }
}

/// Reusable events, one list per device (an event belongs to the device it was created on).
#[derive(Debug, Default)]
pub(super) struct EventPool {
    pub(super) free: Mutex<BTreeMap<DeviceId, Vec<Event>>>,
}

impl EventPool {
    /// An event of `device`; the caller has made `device` current.
    pub(super) fn get(&self, device: DeviceId) -> Result<Event> {
        if let Some(e) = lock(&self.free).get_mut(&device).and_then(Vec::pop) {
            return Ok(e);
        }
        Event::new(EventFlags::DisableTiming)
    }

    pub(super) fn put(&self, event: Event) {
        lock(&self.free)
            .entry(event.device())
            .or_default()
            .push(event);
    }
}

/// An event on loan from an [`EventPool`]; it goes back when dropped.
pub(crate) struct PooledEvent {
    pub(super) event: Option<Event>,
    pub(super) pool: Arc<EventPool>,
}

impl PooledEvent {
    pub(super) fn event(&self) -> &Event {
        self.event
            .as_ref()
            .expect("a pooled event is present until dropped")
    }
}

impl fmt::Debug for PooledEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.event)
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        if let Some(e) = self.event.take() {
            self.pool.put(e);
        }
    }
}

/// What [`CudaSyncer::record_on`] did.
enum Recorded {
    Event(PooledEvent),
    /// The stream is gone (see [`CudaSyncer::record`]).
    Gone,
    /// The stream is being captured: nothing was recorded.
    Capturing,
}

/// GPU mode: events from a per-device pool, recorded only when a block changes streams.
#[derive(Debug, Default)]
pub(crate) struct CudaSyncer {
    pub(super) events: Arc<EventPool>,
}

impl CudaSyncer {
    pub(super) fn device_of(&self, key: StreamKey) -> Result<DeviceId> {
        match key.device() {
            Some(d) => Ok(d),
            // With one device every stream is its: no `cuStreamGetDevice` for each batch closed
            // on a stream made elsewhere.
            None => match cuda::device::only_device() {
                Some(d) => Ok(d),
                None => key.stream().device(),
            },
        }
    }

    /// Records a pooled event on `key` (with its device current, as the special handles and the
    /// event's context require); `None` when the stream is gone (destroyed, its handle perhaps
    /// reused by another stream): it can no longer be recorded on.
    pub(super) fn record(&self, key: StreamKey) -> Result<Option<PooledEvent>> {
        match self.record_on(key, false)? {
            Recorded::Event(event) => Ok(Some(event)),
            Recorded::Gone => Ok(None),
            Recorded::Capturing => Err(Error::invalid(
                "internal: a capture found where none was asked about",
            )),
        }
    }

    /// [`CudaSyncer::record`], and when `unless_capturing`, first asks (in the same context
    /// switch) whether the stream is being captured, recording nothing then.
    fn record_on(&self, key: StreamKey, unless_capturing: bool) -> Result<Recorded> {
        // An untracked stream is only ever recorded on during the call that named it (alive). A
        // tracked one is looked up without the driver: asking the driver about a destroyed handle
        // can crash it.
        if key.device().is_none() && key.tracked() && key.stream().owned_id() != Some(key.id()) {
            return Ok(Recorded::Gone);
        }
        let device = self.device_of(key)?;
        let _guard = DeviceGuard::new(device)?;
        // An error (an old driver) counts as capturing: the batch then stays open, which is safe.
        if unless_capturing && key.stream().is_capturing_in_context().unwrap_or(true) {
            return Ok(Recorded::Capturing);
        }
        let event = PooledEvent {
            event: Some(self.events.get(device)?),
            pool: self.events.clone(),
        };
        event.event().record(key.stream())?;
        Ok(Recorded::Event(event))
    }

    /// For a stream that is gone: its remaining work still runs, and only a device-wide
    /// synchronization (of every device: we no longer know its own) waits for it.
    pub(super) fn synchronize_everything(key: StreamKey) -> Result<()> {
        tracing::debug!(
            "{key:?} was destroyed with blocks still tagged: synchronizing every device"
        );
        for device in 0..cuda::device_count()? {
            let _guard = DeviceGuard::new(device)?;
            cuda::memory::device_synchronize()?;
        }
        Ok(())
    }

    pub(super) fn wait(&self, waiter: StreamKey, event: &Event) -> Result<()> {
        // A special handle names the stream of the current device; an ordinary one its own.
        let _guard = waiter.device().map(DeviceGuard::new).transpose()?;
        waiter.stream().wait_event(event)
    }
}

impl Syncer for CudaSyncer {
    fn current_device(&self) -> DeviceId {
        cuda::device::stream_device().unwrap_or(0)
    }
    fn single_device(&self) -> Option<DeviceId> {
        // As `stream_device` answers: with one device, every context is device 0's.
        cuda::device_count().is_ok_and(|n| n == 1).then_some(0)
    }
    fn stream_id(&self, stream: Stream) -> (u64, bool) {
        // A live stream of ours is answered from a table read without a lock (`known_ids`), with
        // no driver call. Any other handle is a stream made elsewhere, keyed by its driver id
        // (`cuStreamGetId`, one call): its handle alone would not do, since the driver hands a
        // destroyed stream's handle to a new stream while the old one's work is still queued (seen
        // on driver 580 by the GPU test `a_foreign_stream_destroyed_after_a_free_and_its_handle_reused`,
        // which failed when the key was the handle alone), and blocks of the old stream's open
        // batch must not go to the new one unordered. The id is asked only while the call that
        // names the stream runs.
        match stream.owned_id() {
            Some(id) => (id, true),
            None => (stream.id().unwrap_or(0), false),
        }
    }
    fn wait_stream(&self, waiter: StreamKey, on: StreamKey) -> Result<()> {
        // The event may go straight back to the pool: a wait captures the record it follows.
        match self.record(on)? {
            Some(event) => self.wait(waiter, event.event()),
            None => Self::synchronize_everything(on),
        }
    }
    fn record_marker(&self, key: StreamKey) -> Result<MarkerToken> {
        match self.record(key)? {
            Some(event) => Ok(MarkerToken::Event(event)),
            None => Self::synchronize_everything(key).map(|()| MarkerToken::Id(0)),
        }
    }
    fn wait_marker(&self, waiter: StreamKey, marker: &Marker) -> Result<()> {
        match marker.token() {
            Some(MarkerToken::Event(e)) => self.wait(waiter, e.event()),
            Some(MarkerToken::Id(_)) => Ok(()),
            None => Err(Error::invalid("internal: waiting on an open batch")),
        }
    }
    fn is_idle(&self, key: StreamKey) -> Result<bool> {
        // Tags name only tracked streams (see `needs_marker`); a destroyed one cannot be queried.
        if key.device().is_none() && (!key.tracked() || key.stream().owned_id() != Some(key.id())) {
            return Ok(false);
        }
        let _guard = key.device().map(DeviceGuard::new).transpose()?;
        key.stream().is_idle()
    }
    fn sync_stream(&self, key: StreamKey) -> Result<()> {
        // An event bounds the wait to the work queued so far (a stream may keep getting more).
        match self.record(key)? {
            Some(event) => event.event().synchronize(),
            None => Self::synchronize_everything(key),
        }
    }
    fn sync_marker(&self, marker: &Marker) -> Result<()> {
        match marker.token() {
            Some(MarkerToken::Event(e)) => e.event().synchronize(),
            Some(MarkerToken::Id(_)) => Ok(()),
            None => Self::synchronize_everything(marker.owner),
        }
    }
    fn marker_done(&self, marker: &Marker) -> Result<bool> {
        match marker.token() {
            Some(MarkerToken::Event(e)) => e.event().is_complete(),
            Some(MarkerToken::Id(_)) => Ok(true),
            None => Ok(false),
        }
    }
    fn sync_device(&self) -> Result<()> {
        for device in 0..cuda::device_count()? {
            let _guard = DeviceGuard::new(device)?;
            cuda::memory::device_synchronize()?;
        }
        Ok(())
    }
    fn close_marker(&self, key: StreamKey) -> Option<Result<MarkerToken>> {
        // One context switch for the capture query and the record, not one each.
        match self.record_on(key, true) {
            Ok(Recorded::Event(event)) => Some(Ok(MarkerToken::Event(event))),
            Ok(Recorded::Gone) => {
                Some(Self::synchronize_everything(key).map(|()| MarkerToken::Id(0)))
            }
            Ok(Recorded::Capturing) => None,
            Err(e) => Some(Err(e)),
        }
    }
    fn is_capturing(&self, key: StreamKey) -> bool {
        let _guard = key.device().map(DeviceGuard::new).transpose();
        // An error (an old driver) counts as capturing: the batch then stays open, which is safe.
        key.stream().is_capturing().unwrap_or(true)
    }
    fn tracks_stream_lifetimes(&self) -> bool {
        true
    }
}

/// The syncer for a new resource: CUDA with a GPU, none in host mode.
pub(crate) fn default_syncer() -> Arc<dyn Syncer> {
    if cuda::is_host_mode() {
        Arc::new(HostSyncer)
    } else {
        Arc::new(CudaSyncer::default())
    }
}
