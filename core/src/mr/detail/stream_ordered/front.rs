//! The per-thread front of a [`Core`](super::Core): one recently freed block per (core, thread), in
//! front of the shard, that the same thread's next allocation of the same size on the same stream
//! takes with one atomic instruction: no lock, no region lookup, no tag, no batch.
//!
//! Why this is safe without any stream ordering: the block was freed on stream S by this thread and
//! is handed out again on S, so S's own order covers the work that used it, as for a block pending
//! on S alone. While it sits in the front, no other stream can get it: it is in no list, and it
//! stays counted as handed out in the core's counters (stats subtract it).
//!
//! Every byte stays reachable: each front is also listed in its core, and whoever must see every
//! free block (growth, trimming, a stream's retirement, covering open batches, stats, drop) *drains*
//! fronts under the shared lock. Only the owning thread writes a front's block; the state word says
//! who may read it:
//! - `EMPTY`: no block; only the owner may move it to `FULL` (after writing the block, with a plain
//!   store);
//! - `FULL`: a block; the owner takes it back with one compare-and-swap to `EMPTY`, a drainer claims
//!   it with one to `BUSY`;
//! - `BUSY`: a drainer is reading the block; it then stores `EMPTY` (or `FULL` again: a peek). The
//!   owner neither writes nor reads through it meanwhile: it takes the usual path.
//!
//! A free finding the front full takes the usual path (displacing the block there would cost a
//! compare-and-swap and a second free's work on every free of churning workloads, where the front
//! rarely serves the next allocation), except after [`DISPLACE_AFTER`] such frees in a row: the
//! front's block then goes the usual path and the new one takes its place. Without that, a thread
//! that once left a block of one size or stream in its front and then moved on (a pair loop on
//! another stream, another size) would keep it there for good and take the usual path on every
//! later pair (docs/design/pool.md, "Measurements behind the code").
//! The block in a front leaves it for the usual free path when displaced, drained or when the
//! thread ends (tagged then as a free on its stream). Its stream may be one that only the call naming it may record on
//! (a PTDS, a stream made elsewhere): then it joins an open batch of that stream without closing it
//! (see [`Core::join_batch`](super::Core)), which a later call naming the stream closes, or one
//! device-wide synchronization covers.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::thread::LocalKey;

use crate::aligned::is_aligned;
use crate::mr::detail::per_thread::{self, Items, Owner, Refusals, Remembered, WAYS};

use super::key::StreamKey;
use super::Core;

const EMPTY: u8 = 0;
const FULL: u8 = 1;
const BUSY: u8 = 2;

/// Frees in a row that find the front full after which the next one displaces its block: rare
/// enough that churn, where the front seldom serves, pays one more compare-and-swap per 64 frees.
pub(super) const DISPLACE_AFTER: u32 = 64;

/// What [`Front::put`] did with a freed block.
#[derive(Debug)]
pub(super) enum Put {
    /// In the front.
    Kept,
    /// The front was full: the block takes the usual path.
    Refused,
    /// In the front, in place of this block, which takes the usual path.
    Displaced(Hot),
}

/// A block in a front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hot {
    /// The stream it was freed on.
    pub(super) key: StreamKey,
    pub(super) addr: usize,
    pub(super) size: usize,
}

/// One thread's front in one core (see the module docs).
#[derive(Debug)]
pub(in crate::mr::detail) struct Front {
    /// The core's number ([`Core::id`](super::Core)): a core dropped and another made at the same
    /// address never sees this front.
    pub(super) core: u64,
    state: AtomicU8,
    hot: UnsafeCell<Hot>,
    /// Owner only: frees in a row that found the front full.
    refused: Refusals,
    /// Owner only: the block this thread last took back from the front on a stream made elsewhere
    /// (size 0: none), with the key it was taken on, so that its free on the same handle can go
    /// back to the front without asking the driver for the stream's id again (see [`put_taken`]).
    taken: UnsafeCell<Hot>,
}

// SAFETY: `taken` is read and written by the owning thread only (the one whose thread-local list
// holds the front: `put`, `put_taken` and `take` are called only through it). `hot` is written
// only by the owning thread, and only while `state` is `EMPTY`, when no other thread reads it;
// other threads read it only while they hold `BUSY`, which they reach from `FULL` by a
// compare-and-swap (acquire, pairing with the owner's release store of `FULL`), and the owner
// never writes it in `FULL` or `BUSY`.
unsafe impl Sync for Front {}

impl Front {
    fn new(core: u64) -> Self {
        Self {
            core,
            state: AtomicU8::new(EMPTY),
            hot: UnsafeCell::new(Hot {
                key: StreamKey::of(crate::cuda::Stream::DEFAULT, || 0, || (0, true)),
                addr: 0,
                size: 0,
            }),
            refused: Refusals::new(),
            taken: UnsafeCell::new(Hot {
                key: StreamKey::of(crate::cuda::Stream::DEFAULT, || 0, || (0, true)),
                addr: 0,
                size: 0,
            }),
        }
    }

    /// Owner only: puts a freed block in the front if it is empty, or in place of its block after
    /// [`DISPLACE_AFTER`] refusals in a row (see the module docs).
    ///
    /// # Safety
    /// Called only by the thread that owns the front (see [`with_front`]).
    #[inline]
    unsafe fn put(&self, block: Hot) -> Put {
        if self.state.load(Ordering::Acquire) != EMPTY {
            // SAFETY: the owner (the caller's contract).
            return unsafe { self.put_full(block) };
        }
        // SAFETY: the owner, `EMPTY` (the caller's contract).
        unsafe { self.fill(block) };
        Put::Kept
    }

    /// [`Front::put`] on a front that was not empty.
    ///
    /// # Safety
    /// As for [`Front::put`].
    #[cold]
    unsafe fn put_full(&self, block: Hot) -> Put {
        if !self.refused.one_more(DISPLACE_AFTER) {
            return Put::Refused;
        }
        // As in `take`: whoever moves it out of `FULL` first has the block (a drainer holding
        // `BUSY` keeps it: the new block takes the usual path, and the count runs on).
        if self
            .state
            .compare_exchange(FULL, EMPTY, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Put::Refused;
        }
        // SAFETY: only the owner (this thread) writes `hot`; it is `EMPTY` now, so no drainer reads
        // it while it is written.
        let old = unsafe { *self.hot.get() };
        // SAFETY: the owner, `EMPTY`.
        unsafe { self.fill(block) };
        Put::Displaced(old)
    }

    /// Writes the block and hands it to the front (`FULL`); the refusals start again.
    ///
    /// # Safety
    /// The owner, while the state is `EMPTY`.
    #[inline]
    unsafe fn fill(&self, block: Hot) {
        let hot = self.hot.get();
        // SAFETY: the owner writes while `EMPTY`: no other thread reads `hot` (the contract and the
        // `Sync` comment); only the owner leaves `EMPTY`. Field by field: a whole `Hot` is copied
        // with wide loads that the CPU cannot forward from the caller's narrower stores of it
        // (host mode: about a third of a free's time).
        unsafe {
            (*hot).key = block.key;
            (*hot).addr = block.addr;
            (*hot).size = block.size;
        }
        self.refused.reset();
        self.state.store(FULL, Ordering::Release);
    }

    /// Owner only: takes the block if it is `size` bytes at an `alignment`-aligned address freed on
    /// `key`.
    ///
    /// # Safety
    /// Called only by the thread that owns the front (see [`with_front`]).
    #[inline]
    unsafe fn take(&self, key: StreamKey, size: usize, alignment: usize) -> Option<usize> {
        if self.state.load(Ordering::Relaxed) != FULL {
            return None;
        }
        // SAFETY: only the owner (this thread) ever writes `hot`, so reading it here races with no
        // write; drainers only read it.
        let hot = unsafe { *self.hot.get() };
        if hot.size != size || hot.key != key || !is_aligned(hot.addr, alignment) {
            return None;
        }
        // Whoever moves it out of `FULL` first has the block.
        self.state
            .compare_exchange(FULL, EMPTY, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        if !key.tracked() {
            // SAFETY: `taken` is the owner's alone (this thread).
            unsafe { *self.taken.get() = hot };
        }
        Some(hot.addr)
    }

    /// Owner only: puts back the block last taken on a stream made elsewhere, if this frees it
    /// (`addr`, `size`) on the same handle (`raw`) and the front is empty; false otherwise (the
    /// caller then asks for the stream's key and takes the usual path).
    ///
    /// The key is the one the block was taken on, without asking the driver again: the handle may
    /// name another stream by now (the first destroyed, its handle reused), and then the key is
    /// stale. That is safe because a block with a stale key only ever sits in this front. No
    /// allocation can take it: their keys are asked fresh, and the old stream is gone. A drain
    /// or this thread's end sends it to the old stream's batch without closing it, and one
    /// device-wide synchronization covers that batch.
    ///
    /// # Safety
    /// Called only by the thread that owns the front (see [`with_front`]).
    #[inline]
    unsafe fn put_taken(&self, raw: usize, addr: usize, size: usize) -> bool {
        let taken = self.taken.get();
        // SAFETY: `taken` is the owner's alone (the caller's contract).
        let block = unsafe { *taken };
        if block.size != size
            || block.addr != addr
            || block.key.tracked()
            || block.key.stream().as_raw() != raw
            || self.state.load(Ordering::Acquire) != EMPTY
        {
            return false;
        }
        // SAFETY: as above; once only.
        unsafe { (*taken).size = 0 };
        // SAFETY: the owner, `EMPTY`.
        unsafe { self.fill(block) };
        true
    }

    /// Any thread: takes the block out, if any. Callers are serialized (the shared lock, or the
    /// owner at its exit).
    pub(super) fn drain(&self) -> Option<Hot> {
        self.drain_if(|_| true)
    }

    /// Any thread: takes the block out if `take` says so, else leaves it. Callers are serialized
    /// as for [`Front::drain`].
    pub(super) fn drain_if(&self, take: impl FnOnce(&Hot) -> bool) -> Option<Hot> {
        let hot = self.claim()?;
        let taken = take(&hot);
        self.state
            .store(if taken { EMPTY } else { FULL }, Ordering::Release);
        taken.then_some(hot)
    }

    /// Any thread: the block, left in place. Callers are serialized as for [`Front::drain`].
    pub(super) fn peek(&self) -> Option<Hot> {
        self.claim()
            .inspect(|_| self.state.store(FULL, Ordering::Release))
    }

    /// `FULL` to `BUSY` and a copy of the block; the caller stores the next state.
    fn claim(&self) -> Option<Hot> {
        self.state
            .compare_exchange(FULL, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: this thread holds `BUSY`: the owner does not write `hot` until it leaves it.
        Some(unsafe { *self.hot.get() })
    }
}

/// The process-unique number of a new core.
pub(super) fn next_core_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// The calling thread's fronts, one per core it freed into; at the thread's end their blocks
    /// go back to their cores.
    static FRONTS: RefCell<Items<Core>> = const { RefCell::new(Items::new()) };
    /// The last front used per core number (see [`per_thread`]): one comparison finds the front of
    /// the pair's core, and the cores of a binning resource (made one after another) each keep
    /// their own entry.
    static LAST: Remembered<Front> = const { [const { Cell::new((0, std::ptr::null())) }; WAYS] };
}

impl Owner for Core {
    type Item = Front;
    const ITEMS: &'static LocalKey<RefCell<Items<Self>>> = &FRONTS;
    const REMEMBERED: &'static LocalKey<Remembered<Front>> = &LAST;
    fn number(&self) -> u64 {
        self.id
    }
    fn owner_of(front: &Front) -> u64 {
        front.core
    }
    fn weak(&self) -> Weak<Self> {
        self.me.clone()
    }
    fn new_item(&self) -> Front {
        Front::new(self.id)
    }
    fn item_made(&self, front: &Arc<Front>) {
        self.front_made(front);
    }
    fn item_gone(&self, front: &Arc<Front>) {
        self.front_gone(front);
    }
}

/// Runs `f` on the calling thread's front in `core` (made and listed in the core on first use);
/// `None` while the thread is ending (its fronts are gone).
#[inline]
fn with_front<R>(core: &Core, f: impl FnOnce(&Front) -> R) -> Option<R> {
    per_thread::with(core, true, f)
}

/// Makes sure the calling thread has a front in `core`, so that the core hears of the thread's end
/// ([`Core::front_gone`](super::Core)) even if no block ever went through the front.
pub(super) fn ensure(core: &Core) {
    with_front(core, |_| ());
}

/// The calling thread's block in `core` if it fits (see [`Front::take`]).
#[inline]
pub(super) fn take(core: &Core, key: StreamKey, size: usize, alignment: usize) -> Option<usize> {
    // SAFETY: `with_front` hands out the calling thread's own front.
    with_front(core, |front| unsafe { front.take(key, size, alignment) }).flatten()
}

/// Puts back the block the calling thread last took from its front of `core` on a stream made
/// elsewhere, if this frees it on the same handle (see [`Front::put_taken`]).
#[inline]
pub(super) fn put_taken(core: &Core, raw: usize, addr: usize, size: usize) -> bool {
    // SAFETY: `with_front` hands out the calling thread's own front.
    with_front(core, |front| unsafe { front.put_taken(raw, addr, size) }).unwrap_or(false)
}

/// Puts a freed block in the calling thread's front of `core` (see [`Front::put`]).
#[inline]
pub(super) fn put(core: &Core, block: Hot) -> Put {
    // SAFETY: `with_front` hands out the calling thread's own front.
    with_front(core, |front| unsafe { front.put(block) }).unwrap_or(Put::Refused)
}
