//! Stream keys and the tags of free blocks: which stream a free or an allocation was ordered on
//! ([`StreamKey`]), the markers recorded for streams nobody may name later ([`Marker`]), and the
//! pending work a free block carries ([`Pending`]) with its class in the free lists ([`TagClass`]).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::cuda::{DeviceId, Stream};
use crate::mr::detail::free_list::BlockTag;

use super::syncer::PooledEvent;

pub(super) const UNKNOWN_DEVICE: DeviceId = -1;
/// Special stream handles (CUDA's `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`).
pub(super) const LEGACY: usize = 1;
pub(super) const PER_THREAD: usize = 2;

/// A small, process-unique number for the calling thread (never 0).
pub(crate) fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static NUMBER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

/// The identity of a stream for stream ordering.
///
/// Two words, so that a key travels in registers: it is made, compared and stored on every
/// allocation and free, and a larger key built field by field on the stack and then copied whole
/// stalls the CPU's store forwarding (docs/design/pool.md, "Measurements behind the code").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StreamKey {
    raw: usize,
    /// The special handles: the device in the low [`DEVICE_BITS`] bits and, for a PTDS, the
    /// thread's number above them. Any other stream: its id above bit 0 and, in bit 0, whether we
    /// hear of its destruction before it happens (see [`StreamKey::tracked`]).
    word: u64,
}

/// Bits of a special handle's key that hold its device (devices are numbered from 0, far below
/// 2^15; `UNKNOWN_DEVICE` survives the round trip).
const DEVICE_BITS: u32 = 16;

impl StreamKey {
    /// The key of `stream` on the calling thread; `device` is asked only for the special handles,
    /// `id` (the stream's id, and whether its lifetime is tracked) only for the others.
    #[inline]
    pub(crate) fn of(
        stream: Stream,
        device: impl FnOnce() -> DeviceId,
        id: impl FnOnce() -> (u64, bool),
    ) -> Self {
        // Sign-extended back in `device`.
        let device_bits = |d: DeviceId| u64::from(d as u16);
        match stream.as_raw() {
            // Handle 0 is the legacy default stream in the driver API.
            0 | LEGACY => Self {
                raw: LEGACY,
                word: device_bits(device()),
            },
            PER_THREAD => Self {
                raw: PER_THREAD,
                // Thread numbers stay far below 2^48: one new thread every microsecond would take
                // nine years to reach it.
                word: device_bits(device()) | (thread_number() << DEVICE_BITS),
            },
            raw => {
                let (id, tracked) = id();
                debug_assert!(id < 1 << 63, "stream ids count up from 1");
                Self {
                    raw,
                    word: (id << 1) | u64::from(tracked),
                }
            }
        }
    }

    fn is_special(self) -> bool {
        matches!(self.raw, LEGACY | PER_THREAD)
    }

    /// The handle; for the special handles it means this key's stream only on the key's device (and,
    /// for PTDS, on the key's thread).
    pub(crate) fn stream(self) -> Stream {
        // SAFETY: `raw` came from a `Stream`, whose constructor contract covers it.
        unsafe { Stream::from_raw(self.raw) }
    }

    /// The device of a special handle, or `None` for an ordinary stream (ask the stream).
    pub(crate) fn device(self) -> Option<DeviceId> {
        self.is_special()
            .then_some(DeviceId::from(self.word as u16 as i16))
    }

    /// The number of the thread whose PTDS this is ([`thread_number`]); 0 for other streams.
    pub(crate) fn thread(self) -> u64 {
        if self.is_per_thread() {
            self.word >> DEVICE_BITS
        } else {
            0
        }
    }

    /// The driver's id of an ordinary stream (0 when unknown); 0 for the special handles.
    pub(crate) fn id(self) -> u64 {
        if self.is_special() {
            0
        } else {
            self.word >> 1
        }
    }

    /// We hear of this stream's destruction before it happens (the special handles, which never
    /// die, and streams we created): only then may the handle be used after the call that named it.
    pub(crate) fn tracked(self) -> bool {
        self.is_special() || self.word & 1 == 1
    }

    /// True for a per-thread default stream: only its own thread can record on it.
    pub(crate) fn is_per_thread(self) -> bool {
        self.raw == PER_THREAD
    }

    /// True when the work queued on this stream must be captured by a marker during the call that
    /// names it, because nobody may name the stream later: a PTDS (only its own thread can), and a
    /// stream whose lifetime we do not track (made by CuPy, PyTorch or the CUDA runtime: it may be
    /// destroyed right after the call, and the driver does not guard against dead handles).
    pub(crate) fn needs_marker(self) -> bool {
        self.is_per_thread() || !self.tracked()
    }

    /// True when no other stream can ever have this key: the special handles (one legacy stream
    /// per device; a PTDS per device and thread, and thread numbers are never reused) and streams
    /// keyed by their driver id. Not a stream without an id (a driver before CUDA 12.0), whose
    /// handle a new stream may reuse.
    pub(crate) fn is_unique(self) -> bool {
        self.is_special() || self.id() != 0
    }
}

impl fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = self.device().unwrap_or(UNKNOWN_DEVICE);
        match self.raw {
            LEGACY => write!(f, "legacy@{device}"),
            PER_THREAD => write!(f, "ptds@{device}/t{}", self.thread()),
            raw if self.tracked() => write!(f, "{raw:#x}#{}", self.id()),
            raw => write!(f, "{raw:#x}#{}(untracked)", self.id()),
        }
    }
}

/// What a [`Syncer`](super::Syncer) recorded for a marker.
pub(crate) enum MarkerToken {
    /// A CUDA event, returned to its pool when the marker is dropped.
    Event(PooledEvent),
    /// An identifier (host mode and tests).
    Id(u64),
}

impl fmt::Debug for MarkerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkerToken::Event(e) => write!(f, "{e:?}"),
            MarkerToken::Id(id) => write!(f, "marker#{id}"),
        }
    }
}

/// The work queued on `owner` up to some point, captured by a recorded event; or, while *open* (a
/// batch, see the glossary), the frees on `owner` that a later event will capture.
#[derive(Debug)]
pub(crate) struct Marker {
    pub(super) owner: StreamKey,
    /// Order of recording (set when closed): of two closed markers of one stream, the later one
    /// captures more.
    pub(super) seq: AtomicU64,
    /// What the syncer recorded; empty while the marker is open.
    pub(super) token: OnceLock<MarkerToken>,
    /// The last few streams made to wait for this (closed) marker: work queued on a stream later
    /// stays ordered after the wait, so waiting again adds nothing. A stream taking block after
    /// block of another stream's batch (allocations on one stream, frees on another: RMM's
    /// multi-stream benchmark) then waits once per batch instead of once per allocation.
    waiters: Mutex<[Option<StreamKey>; WAITERS]>,
    /// Set on an open batch that no call is expected to close: the thread whose shard held it
    /// ended (see [`Marker::abandon`]).
    abandoned: AtomicBool,
}

/// Streams a [`Marker`] remembers as ordered after it.
const WAITERS: usize = 4;

impl Marker {
    fn next_seq() -> u64 {
        static SEQ: AtomicU64 = AtomicU64::new(1);
        SEQ.fetch_add(1, Ordering::Relaxed)
    }

    /// A marker recorded now.
    pub(super) fn new(owner: StreamKey, token: MarkerToken) -> Arc<Self> {
        Arc::new(Self {
            owner,
            seq: AtomicU64::new(Self::next_seq()),
            token: OnceLock::from(token),
            waiters: Mutex::default(),
            abandoned: AtomicBool::new(false),
        })
    }

    /// An open marker: a batch of frees not yet captured by an event.
    pub(crate) fn open(owner: StreamKey) -> Arc<Self> {
        Arc::new(Self {
            owner,
            seq: AtomicU64::new(0),
            token: OnceLock::new(),
            waiters: Mutex::default(),
            abandoned: AtomicBool::new(false),
        })
    }

    /// Closes an open marker with what the syncer recorded (after the last free of its batch).
    pub(super) fn close(&self, token: MarkerToken) {
        // The order before the token: whoever sees the token sees the order.
        self.seq.store(Self::next_seq(), Ordering::Release);
        if self.token.set(token).is_err() {
            debug_assert!(false, "a marker was closed twice");
        }
    }

    /// Marks an open batch as one that no call is expected to close (the thread whose shard held
    /// it ended): only a device-wide synchronization frees its blocks for other streams.
    pub(super) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }

    /// True for an open batch whose thread ended (see [`Marker::abandon`]).
    pub(super) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// True once an event captures the work (always, but for a batch not yet closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.token.get().is_some()
    }

    /// The order of recording, `None` while open.
    fn closed_seq(&self) -> Option<u64> {
        self.token.get().map(|_| self.seq.load(Ordering::Acquire))
    }

    /// True when `waiter` was made to wait for this marker already (see [`Marker::waited_by`]).
    pub(crate) fn has_waited(&self, waiter: StreamKey) -> bool {
        waiter.is_unique()
            && self
                .waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&Some(waiter))
    }

    /// Remembers that `waiter` now waits for this marker (forgetting the oldest of [`WAITERS`]).
    pub(crate) fn waited_by(&self, waiter: StreamKey) {
        if !waiter.is_unique() {
            return;
        }
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if !waiters.contains(&Some(waiter)) {
            waiters.rotate_right(1);
            waiters[0] = Some(waiter);
        }
    }

    /// What the syncer recorded (`None` while open).
    pub(crate) fn token(&self) -> Option<&MarkerToken> {
        self.token.get()
    }
}

/// One stream whose queued work may still use a free block.
#[derive(Clone, Debug)]
pub(crate) enum PendingOn {
    /// Everything queued on this stream until someone records on it.
    Stream(StreamKey),
    /// Everything queued on the marker's stream before the marker.
    Marker(Arc<Marker>),
}

impl PendingOn {
    fn owner(&self) -> StreamKey {
        match self {
            PendingOn::Stream(key) => *key,
            PendingOn::Marker(m) => m.owner,
        }
    }

    /// True when every use of the block this entry stands for is also covered by `self`.
    fn covers(&self, other: &PendingOn) -> bool {
        match (self, other) {
            (PendingOn::Stream(a), PendingOn::Stream(b)) => a == b,
            // Recording on a live stream later captures more than any marker of it.
            (PendingOn::Stream(a), PendingOn::Marker(m)) => *a == m.owner,
            (PendingOn::Marker(_), PendingOn::Stream(_)) => false,
            // An open batch covers only itself; of two closed markers, the later one.
            (PendingOn::Marker(h), PendingOn::Marker(m)) => {
                Arc::ptr_eq(h, m)
                    || (h.owner == m.owner
                        && matches!((h.closed_seq(), m.closed_seq()), (Some(a), Some(b)) if a >= b))
            }
        }
    }

    /// True when a stream other than the owner can be ordered after this entry now (a batch that
    /// is still open cannot: nothing captured its work yet).
    fn orderable(&self) -> bool {
        match self {
            PendingOn::Stream(_) => true,
            PendingOn::Marker(m) => m.is_closed(),
        }
    }
}

/// The tag of a free block: the streams whose queued work may still use it (usually none or one).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pending(Repr);

#[derive(Clone, Debug, Default)]
pub(super) enum Repr {
    #[default]
    Empty,
    One(PendingOn),
    Many(Vec<PendingOn>),
}

impl Pending {
    /// A tag naming one stream.
    pub(crate) fn one(on: PendingOn) -> Self {
        Pending(Repr::One(on))
    }

    /// The streams named.
    pub(crate) fn entries(&self) -> &[PendingOn] {
        match &self.0 {
            Repr::Empty => &[],
            Repr::One(on) => std::slice::from_ref(on),
            Repr::Many(v) => v,
        }
    }

    /// True when a block with this tag may be used on `key` without any ordering.
    pub(crate) fn only(&self, key: StreamKey) -> bool {
        self.entries().iter().all(|e| e.owner() == key)
    }

    /// How many entries a stream `key` would have to be ordered after.
    pub(super) fn foreign(&self, key: StreamKey) -> usize {
        self.entries().iter().filter(|e| e.owner() != key).count()
    }

    /// True when `key` can be ordered after every other stream's entry now (no open batch of
    /// another stream).
    pub(crate) fn orderable(&self, key: StreamKey) -> bool {
        self.entries()
            .iter()
            .all(|e| e.owner() == key || e.orderable())
    }

    /// True when some entry is another stream's batch that is neither closed nor abandoned: its
    /// own thread will close it, and until then `key` cannot be ordered after it.
    pub(super) fn waits_on_live_batch(&self, key: StreamKey) -> bool {
        self.entries().iter().any(|e| match e {
            PendingOn::Marker(m) => m.owner != key && !m.is_closed() && !m.is_abandoned(),
            PendingOn::Stream(_) => false,
        })
    }

    /// True when some entry is a batch not yet closed.
    pub(super) fn has_open(&self) -> bool {
        self.entries().iter().any(|e| !e.orderable())
    }

    /// Adds `on`, dropping what it subsumes (a live stream subsumes its markers; of two closed
    /// markers of one stream the later one subsumes the earlier; an open batch only itself).
    fn add(&mut self, on: PendingOn) {
        if self.entries().iter().any(|have| have.covers(&on)) {
            return;
        }
        let mut v = match std::mem::take(&mut self.0) {
            Repr::Empty => {
                self.0 = Repr::One(on);
                return;
            }
            // `e` does not cover `on` (checked above): `on` alone if it covers `e`, else both.
            Repr::One(e) if on.covers(&e) => {
                self.0 = Repr::One(on);
                return;
            }
            Repr::One(e) => {
                self.0 = Repr::Many(vec![e, on]);
                return;
            }
            Repr::Many(v) => v,
        };
        v.retain(|have| !on.covers(have));
        v.push(on);
        // Batches were open when they joined the tag and covered only themselves; those closed
        // since are now covered by a later closed marker of their stream. Without this a block that
        // keeps absorbing frees of one stream (RMM's multi-stream shape: spilled frees coalesce)
        // would grow one entry per batch without end, and every look at its tag with it.
        let mut i = 0;
        while i < v.len() {
            if (0..v.len()).any(|j| j != i && v[j].covers(&v[i])) {
                v.remove(i);
            } else {
                i += 1;
            }
        }
        self.0 = match v.len() {
            1 => Repr::One(v.pop().expect("one entry")),
            _ => Repr::Many(v),
        };
    }

    /// Rewrites the entries: `f` gives `None` to keep an entry, `Some(Some(other))` to replace it and
    /// `Some(None)` to drop it.
    pub(super) fn rewrite(&mut self, mut f: impl FnMut(&PendingOn) -> Option<Option<PendingOn>>) {
        let entries = self.entries().to_vec();
        let mut out = Pending::default();
        for e in entries {
            match f(&e) {
                None => out.add(e),
                Some(Some(replacement)) => out.add(replacement),
                Some(None) => {}
            }
        }
        *self = out;
    }
}

/// The class of a [`Pending`] tag in the free lists: blocks are indexed by size per class, so an
/// allocation on stream S finds the best fit among the blocks it can use without any ordering
/// (`Empty` and `Owner(S)`) before it looks at any block that needs a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TagClass {
    /// No pending work: usable on every stream as it is.
    Empty,
    /// Pending work of this one stream only (live or markers): usable on it without ordering.
    Owner(StreamKey),
    /// Pending work of several streams: every stream needs at least one wait.
    Mixed,
}

impl BlockTag for Pending {
    type Class = TagClass;

    fn class(&self) -> TagClass {
        let mut owners = self.entries().iter().map(PendingOn::owner);
        match owners.next() {
            None => TagClass::Empty,
            Some(first) if owners.all(|o| o == first) => TagClass::Owner(first),
            Some(_) => TagClass::Mixed,
        }
    }

    fn merge(&mut self, other: &Self) {
        for e in other.entries() {
            self.add(e.clone());
        }
    }
}
