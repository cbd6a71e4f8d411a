//! The memory timeline: a process-wide recorder of allocations, frees, pool segments and
//! out-of-memory failures, and snapshots of it in PyTorch's memory_viz format.
//!
//! Glossary:
//! - the *recorder* is process-wide and off by default; [`start`] turns it on, [`stop`] off (what
//!   it holds stays until [`clear`] or the next [`start`] with [`Options::clear`]);
//! - an *event* ([`Event`]) is one allocation, free, segment growth or trim, or out-of-memory
//!   failure; the last [`Options::max_entries`] are kept in a ring (older ones are dropped and
//!   counted);
//! - the *live set* is every allocation recorded and not yet freed, with its caller's stack; a
//!   *segment* is memory a pool or arena took from its upstream;
//! - a [`Snapshot`] is the live set placed into segments (blocks, with the gaps between them as
//!   free blocks) plus the ring as per-device traces: the data of PyTorch's
//!   `torch.cuda.memory._snapshot()`, written as pickle (what memory_viz reads), JSON, or RMM's
//!   CSV log for the replay tool.
//!
//! Who records: allocations and frees pass through a
//! [`RecordingResourceAdaptor`](crate::mr::RecordingResourceAdaptor), which checks [`is_recording`]
//! (one relaxed load and a predictable branch) and otherwise only forwards; pools and arenas
//! report segment growth and trim (their slow path) the same way. The registry's
//! `registry::recording` installs the adaptor over each device's current resource.
//!
//! Caller stacks: a binding may install a [`set_stack_provider`] (Python gives its frames from
//! there); with [`Options::native_stacks`] the native stack is captured and symbolized (each
//! distinct return address once) and put before the provider's frames.

mod event;
mod native;
pub mod pickle;
mod snapshot;
#[cfg(test)]
mod tests;
mod value;

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

pub use event::{Action, Event, Frame, Stack};
pub use pickle::PickleError;
pub use snapshot::{
    Block, BlockState, Format, Segment, Snapshot, SnapshotError, TraceAction, TraceEntry,
};
pub use value::{ShapeError, Value};

use crate::error::{Error, Result};

/// How the recorder records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// How many events the ring keeps (PyTorch's `max_entries`); at least 1.
    pub max_entries: usize,
    /// Capture the native stack of each allocation, before the frames a stack provider gives
    /// (costly: microseconds per event).
    pub native_stacks: bool,
    /// Write a snapshot here when an allocation fails for lack of memory (the format from the
    /// extension, see [`Format::from_path`]); once per [`start`].
    pub dump_on_oom: Option<PathBuf>,
    /// Forget what was recorded before (the ring and the live set) when starting.
    pub clear: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_entries: 100_000,
            native_stacks: false,
            dump_on_oom: None,
            clear: false,
        }
    }
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<State> = Mutex::new(State::new());

/// Gives the calling thread's stack (innermost first), or `None` when it has none to give.
pub type StackProvider = Arc<dyn Fn() -> Option<Stack> + Send + Sync>;
static STACK_PROVIDER: RwLock<Option<StackProvider>> = RwLock::new(None);

struct State {
    options: Option<Options>,
    ring: VecDeque<Event>,
    dropped: u64,
    /// Live allocations by (device, address).
    live: BTreeMap<(i32, u64), Event>,
    /// Segments by (device, address): the growth event (or a segment noted at start).
    segments: BTreeMap<(i32, u64), Event>,
    /// Set once an out-of-memory snapshot was written (one per start).
    dumped: bool,
}

impl State {
    const fn new() -> Self {
        Self {
            options: None,
            ring: VecDeque::new(),
            dropped: 0,
            live: BTreeMap::new(),
            segments: BTreeMap::new(),
            dumped: false,
        }
    }

    fn push(&mut self, event: Event) {
        let max = self.options.as_ref().map_or(1, |o| o.max_entries.max(1));
        while self.ring.len() >= max {
            self.ring.pop_front();
            self.dropped += 1;
        }
        self.ring.push_back(event);
    }
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// True while the recorder is on: the one check on the allocation path.
#[inline(always)]
pub fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Turns the recorder on (or changes its options while on).
///
/// # Errors
/// [`Error::InvalidArgument`] for `max_entries` of 0.
pub fn start(options: Options) -> Result<()> {
    if options.max_entries == 0 {
        return Err(Error::invalid("timeline: max_entries must be at least 1"));
    }
    let mut s = state();
    if options.clear {
        s.ring.clear();
        s.live.clear();
        s.dropped = 0;
    }
    while s.ring.len() > options.max_entries {
        s.ring.pop_front();
        s.dropped += 1;
    }
    s.dumped = false;
    s.options = Some(options);
    RECORDING.store(true, Ordering::Relaxed);
    Ok(())
}

/// Turns the recorder off; what it holds stays for [`snapshot`].
pub fn stop() {
    RECORDING.store(false, Ordering::Relaxed);
}

/// Forgets every recorded event, live allocation and segment.
pub fn clear() {
    let mut s = state();
    s.ring.clear();
    s.live.clear();
    s.segments.clear();
    s.dropped = 0;
}

/// The options of the last [`start`] (`None` before the first).
pub fn options() -> Option<Options> {
    state().options.clone()
}

/// Installs (or with `None` removes) the function that gives a caller's stack for each event.
pub fn set_stack_provider(provider: Option<StackProvider>) {
    *STACK_PROVIDER
        .write()
        .unwrap_or_else(PoisonError::into_inner) = provider;
}

/// The caller's stack for an event being recorded now: the provider's (a binding's frames), and
/// with `native` the native frames before them, innermost first (as PyTorch's `stacks="all"`: a
/// C++ function called from Python shows both its own frames and its Python callers).
fn caller_stack(native: bool) -> Option<Stack> {
    let provider = STACK_PROVIDER
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let given = provider.and_then(|p| p());
    if !native {
        return given;
    }
    let native = native::capture();
    Some(match given {
        None => native,
        Some(given) => native.iter().chain(given.iter()).cloned().collect(),
    })
}

/// What a recording site knows about an allocation or free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site<'a> {
    pub(crate) addr: usize,
    pub(crate) size: usize,
    pub(crate) stream: usize,
    pub(crate) device: i32,
    pub(crate) resource: &'a Arc<str>,
}

fn event(action: Action, site: Site<'_>, frames: Option<Stack>) -> Event {
    Event {
        action,
        addr: site.addr as u64,
        size: site.size as u64,
        stream: site.stream as u64,
        device: site.device,
        time_us: event::now_us(),
        thread: crate::debug_log::os_thread_id(),
        resource: Arc::clone(site.resource),
        frames,
        device_free: 0,
        message: None,
    }
}

fn native_stacks_wanted() -> bool {
    state().options.as_ref().is_some_and(|o| o.native_stacks)
}

/// Records an allocation handed out.
#[cold]
pub(crate) fn record_alloc(site: Site<'_>) {
    let frames = caller_stack(native_stacks_wanted());
    let e = event(Action::Alloc, site, frames);
    let mut s = state();
    s.live.insert((e.device, e.addr), e.clone());
    s.push(e);
}

/// Records a free (before it is forwarded, so that a reuse of the address comes after it).
#[cold]
pub(crate) fn record_free(site: Site<'_>) {
    let mut s = state();
    let frames = s
        .live
        .remove(&(site.device, site.addr as u64))
        .and_then(|a| a.frames);
    s.push(event(Action::Free, site, frames));
}

/// Records a segment taken from (`SegmentAlloc`) or given back to (`SegmentFree`) an upstream.
#[cold]
pub(crate) fn record_segment(action: Action, site: Site<'_>) {
    let e = event(action, site, None);
    let mut s = state();
    match action {
        Action::SegmentAlloc => {
            s.segments.insert((e.device, e.addr), e.clone());
        }
        _ => {
            s.segments.remove(&(e.device, e.addr));
        }
    }
    s.push(e);
}

/// Records a segment event of the resource `name` on the current device.
#[cold]
pub(crate) fn record_segment_of(
    action: Action,
    name: &str,
    addr: usize,
    size: usize,
    stream: crate::cuda::Stream,
) {
    let device = if crate::cuda::is_host_mode() {
        0
    } else {
        crate::cuda::current_device().unwrap_or(0)
    };
    let resource: Arc<str> = Arc::from(name);
    record_segment(
        action,
        Site {
            addr,
            size,
            stream: stream.as_raw(),
            device,
            resource: &resource,
        },
    );
}

/// Notes segments that existed before recording started (a pool's regions), without an event.
pub(crate) fn note_segments(site: Site<'_>, regions: &[(usize, usize)]) {
    let mut s = state();
    for &(addr, size) in regions {
        let e = event(Action::SegmentAlloc, Site { addr, size, ..site }, None);
        s.segments.entry((e.device, e.addr)).or_insert(e);
    }
}

/// Records an allocation that failed for lack of memory, and writes the out-of-memory snapshot
/// if one was asked for.
#[cold]
pub(crate) fn record_oom(site: Site<'_>, device_free: usize, message: &str) {
    let frames = caller_stack(native_stacks_wanted());
    let mut e = event(Action::Oom, site, frames);
    e.addr = 0;
    e.device_free = device_free as u64;
    e.message = Some(Arc::from(message));
    let dump = {
        let mut s = state();
        s.push(e);
        let path = s.options.as_ref().and_then(|o| o.dump_on_oom.clone());
        match path {
            Some(path) if !s.dumped => {
                s.dumped = true;
                Some(path)
            }
            _ => None,
        }
    };
    if let Some(path) = dump {
        match snapshot().write(&path) {
            Ok(()) => tracing::warn!(
                "timeline: out of memory; snapshot written to {}",
                path.display()
            ),
            Err(e) => tracing::error!("timeline: out of memory; writing the snapshot failed: {e}"),
        }
    }
}

/// The recorder's contents now: live allocations in their segments, and the ring as traces.
pub fn snapshot() -> Snapshot {
    let s = state();
    snapshot::build(
        s.live.values(),
        s.segments.values(),
        s.ring.iter(),
        s.dropped,
    )
}

/// Writes [`snapshot`] to `path` in the format its extension names ([`Format::from_path`]).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the path when it cannot be written or has no known extension.
pub fn dump_snapshot(path: impl AsRef<std::path::Path>) -> Result<()> {
    snapshot()
        .write(path.as_ref())
        .map_err(|e| Error::invalid(e.to_string()))
}

/// Serializes tests that turn the process-wide recorder on and off.
#[cfg(any(test, feature = "testing"))]
pub fn test_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}
