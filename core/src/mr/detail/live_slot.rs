//! One slot per (live set, thread) in front of the [`LiveSet`](super::live_set::LiveSet): the
//! thread's latest allocation, recorded and taken back without a lock or a hash.
//!
//! Why: a checked free costs a hash-map insert at the allocation and a remove at the free, each
//! under a spin lock (two atomic exchanges per allocation). Most programs free much of what a thread
//! allocates on that same thread soon after (temporaries, the 256-byte pair of the benchmarks),
//! so the thread's latest allocation, if its slot is empty, goes into its slot instead: one plain
//! store to record, one compare-and-swap to take back. Callgrind, host mode, the pool's 256-byte
//! pair: 670 instructions per pair with the map alone.
//!
//! Every live allocation is findable from any thread: each slot is also listed in its set, and a
//! free that finds its pointer neither in its own slot nor in the map *scans* the listed slots under
//! the set's list lock. The state word says who may read a slot:
//! - `EMPTY`: no allocation; only the owner moves it to `LENT` (after writing the allocation with
//!   plain stores, then a release store of the state);
//! - `LENT`: one live allocation; the owner takes it back with one compare-and-swap to `EMPTY`, a
//!   scanner claims it with one to `BUSY`;
//! - `BUSY`: a scanner reads it, under the set's list lock; it then stores `EMPTY` (the free is
//!   its) or `LENT` again (not the allocation it looked for);
//! - `UNLISTED`: a new slot until its set lists it (where scanners find it); one the host had no
//!   memory to list stays so, and, not being `EMPTY`, is never lent to.
//!
//! A long-lived allocation would keep its slot from every later one (a thread that first allocates
//! its working buffer, then churns temporaries): after [`EVICT_AFTER`] allocations in a row found
//! the slot taken, the owner moves the lent allocation into the map and lends the new one.
//!
//! Scanners, evictions and a thread's end (the last two move a lent allocation into the map) hold
//! the list lock, and a scanner first looks in the map again under it, so an allocation in the
//! middle of such a move is never missed. Only one of two racing frees of one allocation (a double free) gets it:
//! the loser finds it nowhere and is refused.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::LocalKey;

use super::live_set::{LiveSet, Sizes};
use super::per_thread::{self, Items, Owner, Refusals, Remembered, WAYS};

const EMPTY: u8 = 0;
const LENT: u8 = 1;
const BUSY: u8 = 2;
const UNLISTED: u8 = 3;

/// Allocations in a row that find the slot taken before its allocation moves into the map: rare
/// enough that a churn with many live allocations (which rarely frees the slot's) pays the list
/// lock once per this many allocations, soon enough that a long-lived allocation frees the slot
/// for the temporaries after it.
pub(super) const EVICT_AFTER: u32 = 64;

/// What [`Slot::lend`] did.
#[derive(Debug, PartialEq, Eq)]
enum Lend {
    Lent,
    /// The slot holds another allocation.
    Taken,
    /// The slot has held its allocation through [`EVICT_AFTER`] refusals: move it out.
    Stale,
}
/// One thread's slot in one live set (see the module docs).
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Slot {
    /// The set's process-unique number: a set dropped and another made at the same address never
    /// sees this slot.
    set: u64,
    state: AtomicU8,
    // Atomics only so that scanners may read them without `unsafe`: relaxed accesses, ordered by
    // `state` (written while `EMPTY` by the owner, read by others only in `BUSY`).
    addr: AtomicUsize,
    size: AtomicUsize,
    /// Owner only: allocations since the slot last lent one that found it taken.
    refused: Refusals,
}

/// What a scan found for a pointer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Scanned {
    /// The allocation was lent to a slot with this size (returned): the slot is now empty.
    Taken(usize),
    /// A slot holds the pointer with another size (returned): left as it was.
    OtherSize(usize),
    /// No slot holds it.
    Absent,
}

impl Slot {
    fn new(set: u64) -> Self {
        Self {
            set,
            state: AtomicU8::new(UNLISTED),
            addr: AtomicUsize::new(0),
            size: AtomicUsize::new(0),
            refused: Refusals::new(),
        }
    }

    /// Its set listed it: it may be lent to from now on (its owner thread calls this).
    pub(super) fn listed(&self) {
        self.state.store(EMPTY, Ordering::Relaxed);
    }

    /// Owner only: records an allocation if the slot is empty; otherwise the map records it, and
    /// after [`EVICT_AFTER`] such refusals in a row the caller evicts the slot's allocation.
    #[inline]
    fn lend(&self, addr: usize, size: usize) -> Lend {
        if self.state.load(Ordering::Relaxed) != EMPTY {
            if self.refused.one_more(EVICT_AFTER) {
                self.refused.reset();
                return Lend::Stale;
            }
            return Lend::Taken;
        }
        self.refused.reset();
        // Only the owner leaves `EMPTY`, and nobody reads the fields in it.
        self.addr.store(addr, Ordering::Relaxed);
        self.size.store(size, Ordering::Relaxed);
        self.state.store(LENT, Ordering::Release);
        Lend::Lent
    }

    /// Owner only: takes the allocation back if it is `addr` with a size that `sizes` matches
    /// with `size`, and returns the size it was lent with; `None` otherwise (or when a scanner
    /// holds it: the caller then scans, under the lock that scanner holds).
    #[inline]
    fn take_back(&self, addr: usize, size: usize, sizes: Sizes) -> Option<usize> {
        // The fields are the owner's own writes (or unchanged since): no ordering needed to read.
        if self.state.load(Ordering::Relaxed) != LENT || self.addr.load(Ordering::Relaxed) != addr {
            return None;
        }
        let live = self.size.load(Ordering::Relaxed);
        (sizes.matches(live, size)
            && self
                .state
                .compare_exchange(LENT, EMPTY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok())
        .then_some(live)
    }

    /// Any thread, under the set's list lock: takes the allocation at `addr` if its size matches
    /// `size`.
    pub(super) fn scan(&self, addr: usize, size: usize, sizes: Sizes) -> Scanned {
        match self.claim(addr) {
            None => Scanned::Absent,
            Some(live) if sizes.matches(live, size) => {
                self.state.store(EMPTY, Ordering::Release);
                Scanned::Taken(live)
            }
            Some(live) => {
                self.state.store(LENT, Ordering::Release);
                Scanned::OtherSize(live)
            }
        }
    }

    /// Any thread, under the set's list lock: the size of the allocation at `addr` if the slot
    /// holds it (left as it was).
    pub(super) fn peek(&self, addr: usize) -> Option<usize> {
        let live = self.claim(addr)?;
        self.state.store(LENT, Ordering::Release);
        Some(live)
    }

    /// Moves the slot to `BUSY` if it holds `addr` and returns its size; the caller then stores
    /// `EMPTY` or `LENT`. `None` (state unchanged) when it does not hold `addr`.
    fn claim(&self, addr: usize) -> Option<usize> {
        if self.state.load(Ordering::Acquire) != LENT || self.addr.load(Ordering::Relaxed) != addr {
            return None;
        }
        // A failed claim means its owner took it back meanwhile: freed by that call.
        self.state
            .compare_exchange(LENT, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // Read again in `BUSY`: between the check and the claim the owner may have taken it back
        // and lent another allocation.
        if self.addr.load(Ordering::Relaxed) != addr {
            self.state.store(LENT, Ordering::Release);
            return None;
        }
        Some(self.size.load(Ordering::Relaxed))
    }

    /// Owner only: the address of the lent allocation, if any.
    pub(super) fn lent_addr(&self) -> Option<usize> {
        (self.state.load(Ordering::Acquire) == LENT).then(|| self.addr.load(Ordering::Relaxed))
    }

    /// Any thread, under the set's list lock: the lent allocation, taken out (the slot is empty
    /// after).
    pub(super) fn evict(&self) -> Option<(usize, usize)> {
        self.state
            .compare_exchange(LENT, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let lent = (
            self.addr.load(Ordering::Relaxed),
            self.size.load(Ordering::Relaxed),
        );
        self.state.store(EMPTY, Ordering::Release);
        Some(lent)
    }

    /// True while an allocation is lent to it.
    pub(super) fn is_lent(&self) -> bool {
        matches!(self.state.load(Ordering::Acquire), LENT | BUSY)
    }
}

thread_local! {
    /// The calling thread's slots, one per set it allocated through; at the thread's end their
    /// allocations move into their sets' maps.
    static SLOTS: RefCell<Items<LiveSet>> = const { RefCell::new(Items::new()) };
    /// The last slot used per set number (see [`per_thread`]): a binning resource's set and its
    /// upstream pool's keep their own entries.
    static LAST: Remembered<Slot> = const { [const { Cell::new((0, std::ptr::null())) }; WAYS] };
}

impl Owner for LiveSet {
    type Item = Slot;
    const ITEMS: &'static LocalKey<RefCell<Items<Self>>> = &SLOTS;
    const REMEMBERED: &'static LocalKey<Remembered<Slot>> = &LAST;
    fn number(&self) -> u64 {
        self.id()
    }
    fn owner_of(slot: &Slot) -> u64 {
        slot.set
    }
    fn weak(&self) -> Weak<Self> {
        self.me()
    }
    fn new_item(&self) -> Slot {
        Slot::new(self.id())
    }
    fn item_made(&self, slot: &Arc<Slot>) {
        self.slot_made(slot);
    }
    fn item_gone(&self, slot: &Arc<Slot>) {
        self.slot_gone(slot);
    }
}

/// Records `addr` (`size`) in the calling thread's slot of `set` if it is empty, or if its
/// allocation has gone stale there (it moves into the map); false when the map must record it.
#[inline]
pub(super) fn lend(set: &LiveSet, addr: usize, size: usize) -> bool {
    per_thread::with(set, true, |slot| match slot.lend(addr, size) {
        Lend::Lent => true,
        Lend::Taken => false,
        Lend::Stale => set.slot_evicted(slot) && slot.lend(addr, size) == Lend::Lent,
    })
    .unwrap_or(false)
}

/// Takes `addr` back from the calling thread's slot of `set` if it is there with a matching size,
/// and returns the size it was recorded with. A thread that never allocated through `set` has
/// nothing lent: no slot is made for it.
#[inline]
pub(super) fn take_back(set: &LiveSet, addr: usize, size: usize) -> Option<usize> {
    per_thread::with(set, false, |slot| slot.take_back(addr, size, set.sizes())).flatten()
}
