//! The live-allocation index behind checked frees: which pointers a sub-allocator has handed out,
//! and with what size.
//!
//! RMM's sub-allocators trust every free: a pointer into the middle of a live block, a size other
//! than the allocation's, a double free or a pointer of another resource is taken as given and
//! silently corrupts the free lists (the next allocation can overlap live memory) or leaks. The
//! pool, fixed-size, binning and arena resources instead record each allocation here when they
//! hand it out and take it out at the entry of `deallocate`; a free that does not name a live
//! allocation with its size is refused with [`Error::InvalidArgument`] before the engine sees it,
//! so the resource stays intact. (A binning resource keeps what it allocates in its fixed-size bins
//! by position instead, [`live_blocks`](super::live_blocks), and the rest here.)
//!
//! Cost: one short critical section per allocate and per deallocate, on one of 64 shards chosen
//! by address (so threads freeing each other's memory rarely meet), each an open-addressing table
//! keyed by a multiplicative hash of the address. The lock is a test-and-set spin lock released by a plain
//! store (one atomic read-modify-write per call instead of a mutex's two); it is held only for a
//! hash-map insert or remove, and a waiter yields its time slice after a few spins, so a holder
//! that was descheduled is not starved.
//!
//! Host memory: the index grows with the live allocations (16 bytes each, at most half full), and a
//! growth that the host cannot provide is an error, never an abort: [`FreeCheck::allocated`] then
//! gives the block back and fails with [`Error::OutOfMemory`]. The adaptors that account what they
//! hand out (statistics, limiting) keep the same index with [`Sizes::Granular`]
//! (docs/design/checked-frees.md); the statistics adaptor over a checked pool keeps none and tags
//! the pool's records instead ([`tagged`], [`FreeCheck::register`]).

use std::collections::TryReserveError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::error::{Error, Result};
use crate::resource::MemoryResource;

use super::live_slot::{self, Scanned, Slot};
use super::spin_lock::SpinLock;

/// What the live index compares for a request of `bytes`: the size rounded up to 256 (saturating:
/// a size that large was never allocated, so it never matches) and, where the resource's free
/// depends on it, the alignment (at least 256) as its base-2 logarithm in the low bits, which a
/// multiple of 256 leaves free.
pub(crate) fn granule(bytes: usize, alignment: Option<usize>) -> usize {
    let size = align_up(bytes, DEFAULT_ALIGNMENT).unwrap_or(usize::MAX & !(DEFAULT_ALIGNMENT - 1));
    size | alignment.map_or(0, |a| a.max(DEFAULT_ALIGNMENT).trailing_zeros() as usize)
}

/// How a free's size is compared with the size a live allocation was recorded with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sizes {
    /// The recorded value is a [`granule`] and the free's must equal it (the sub-allocators).
    Exact,
    /// The recorded value is a [`granule`] without alignment, or one with an owner's tag (see
    /// [`tagged`]): the free's must equal it untagged (the pool).
    Tagged,
    /// The recorded value is the allocation's size in bytes; a free's size matches when both round
    /// up to the same multiple of 256 (the adaptors, which count the recorded size).
    Granular,
}

impl Sizes {
    /// True when a free of `given` matches an allocation recorded as `live`.
    #[inline]
    pub(super) fn matches(self, live: usize, given: usize) -> bool {
        live == given
            || match self {
                Sizes::Exact => false,
                Sizes::Tagged => live & GRANULE_BITS == given,
                Sizes::Granular => granule(live, None) == granule(given, None),
            }
    }

    /// A recorded value in words.
    fn describe(self, value: usize) -> String {
        match self {
            Sizes::Exact => describe(value),
            Sizes::Tagged if owner_of(value) != 0 => format!("{} bytes", tagged_bytes(value)),
            Sizes::Tagged => describe(value & GRANULE_BITS),
            Sizes::Granular => format!("{value} bytes"),
        }
    }
}

/// Where an owner's number sits in a tagged record (see [`tagged`]).
const OWNER_SHIFT: u32 = 48;

/// Sizes from here up are never recorded with a tag (nor handed out by the pool): the owner's
/// number takes those bits.
pub(crate) const UNTAGGABLE: usize = 1 << OWNER_SHIFT;

/// The bits of a tagged record that hold the granule.
const GRANULE_BITS: usize = (UNTAGGABLE - 1) & !(DEFAULT_ALIGNMENT - 1);

/// The record of an allocation of `bytes` (granule `granule`, below [`UNTAGGABLE`], no alignment
/// bits) that an adaptor numbered `owner` (from 1) made through a checked pool: the owner's number in
/// the top 16 bits, the granule, and the granule minus the bytes asked for (0 to 255) in the low 8
/// bits. One record then serves both layers (docs/design/statistics-cost.md).
#[inline]
pub(crate) fn tagged(granule: usize, bytes: usize, owner: u16) -> usize {
    debug_assert!(granule < UNTAGGABLE && granule - bytes < DEFAULT_ALIGNMENT && owner != 0);
    ((owner as usize) << OWNER_SHIFT) | granule | (granule - bytes)
}

/// The owner's number of a record (0: made by no owner).
#[inline]
fn owner_of(record: usize) -> u16 {
    (record >> OWNER_SHIFT) as u16
}

/// The bytes asked for of a tagged record.
#[inline]
fn tagged_bytes(record: usize) -> usize {
    (record & GRANULE_BITS) - (record & (DEFAULT_ALIGNMENT - 1))
}

/// An adaptor that counts what it hands out from a checked pool's records instead of its own (see
/// [`FreeCheck::register`]).
pub(crate) trait RecordOwner: Send + Sync {
    /// An allocation of `bytes` that the owner handed out was freed without it (directly through
    /// the pool, or through another adaptor over it): it stops counting it.
    fn freed_elsewhere(&self, ptr: *mut u8, bytes: usize);
}

/// What a free through an owner found (see [`FreeCheck::free_owned`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owned {
    /// The owner handed it out, with this many bytes asked for.
    Mine(usize),
    /// The pool handed it out beside the owner: the owner counts nothing.
    Beside,
}

/// A [`granule`] in words.
fn describe(granule: usize) -> String {
    let size = granule & !(DEFAULT_ALIGNMENT - 1);
    match granule & (DEFAULT_ALIGNMENT - 1) {
        0 => format!("{size} bytes"),
        log2 if log2 < usize::BITS as usize => {
            format!("{size} bytes aligned to {}", 1usize << log2)
        }
        _ => format!("{granule} bytes"),
    }
}

/// Whether a sub-allocator checks each free against its live allocations.
///
/// `Checked` is the default everywhere; `Unchecked` is RMM's behaviour (a free is trusted as
/// given, and a wrong one corrupts the resource), for callers who measured the check's cost
/// (about one hash-map insert and one remove per allocation) and accept that risk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FreeChecks {
    /// A free whose pointer and size do not match a live allocation is refused with
    /// [`Error::InvalidArgument`] and the resource is unchanged.
    #[default]
    Checked,
    /// Frees are trusted (RMM's behaviour): a wrong pointer or size is undefined behaviour.
    Unchecked,
}

/// The hash of an address: pointers are multiples of 256, so the low bits carry nothing. The top
/// 6 bits pick the shard, bits 32 and up the slot.
#[inline]
fn hash(addr: usize) -> u64 {
    ((addr as u64) >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Address → granule, by open addressing with linear probing and backward-shift deletion (no
/// tombstones, so insert/remove churn never degrades it; std's `HashMap` cost 30 ns per insert +
/// remove pair here against 6 for this). Address 0 marks an empty slot (null is never recorded).
/// At most half full: it doubles before that.
#[derive(Debug)]
struct Map {
    slots: Vec<(usize, usize)>,
    len: usize,
}

impl Default for Map {
    fn default() -> Self {
        Self {
            slots: vec![(0, 0); 16],
            len: 0,
        }
    }
}

impl Map {
    #[inline]
    fn home(&self, addr: usize) -> usize {
        (hash(addr) >> 32) as usize & (self.slots.len() - 1)
    }

    /// Inserts or replaces; returns the value replaced. Fails, changing nothing, when the table
    /// must grow and the host has no memory for it.
    #[inline]
    fn insert(&mut self, addr: usize, value: usize) -> Result<Option<usize>, TryReserveError> {
        debug_assert_ne!(addr, 0);
        self.reserve_one()?;
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            let (k, v) = self.slots[i];
            if k == 0 {
                self.slots[i] = (addr, value);
                self.len += 1;
                return Ok(None);
            }
            if k == addr {
                self.slots[i].1 = value;
                return Ok(Some(v));
            }
            i = (i + 1) & mask;
        }
    }

    /// Makes room for one more entry (doubling the table if needed), or fails changing nothing.
    #[inline]
    fn reserve_one(&mut self) -> Result<(), TryReserveError> {
        #[cfg(test)]
        if tests::NO_ROOM.with(std::cell::Cell::get) {
            return Err(Vec::<u8>::new().try_reserve(usize::MAX).unwrap_err());
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow()?;
        }
        Ok(())
    }

    /// The slot of `addr`.
    #[inline]
    fn find(&self, addr: usize) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            match self.slots[i].0 {
                k if k == addr => return Some(i),
                0 => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Removes `addr` if its value matches `given` (see [`Sizes`]) and returns that value;
    /// otherwise returns what it maps to (`None`: nothing).
    #[inline]
    fn remove_if(
        &mut self,
        addr: usize,
        given: usize,
        sizes: Sizes,
    ) -> Result<usize, Option<usize>> {
        if addr == 0 {
            return Err(None);
        }
        let Some(mut hole) = self.find(addr) else {
            return Err(None);
        };
        let live = self.slots[hole].1;
        if !sizes.matches(live, given) {
            return Err(Some(live));
        }
        // Backward shift: move later entries of the run into the hole unless their home lies
        // cyclically in (hole, j], where they must stay to remain reachable.
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].0;
            if k == 0 {
                break;
            }
            let h = self.home(k);
            let stays = if hole < j {
                hole < h && h <= j
            } else {
                h > hole || h <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = (0, 0);
        self.len -= 1;
        Ok(live)
    }

    /// Doubles the table. The new table is reserved fallibly: a host out of memory is an error
    /// here, not an abort.
    #[cold]
    fn grow(&mut self) -> Result<(), TryReserveError> {
        let mut doubled = Vec::new();
        doubled.try_reserve_exact(self.slots.len() * 2)?;
        doubled.resize(self.slots.len() * 2, (0, 0));
        let old = std::mem::replace(&mut self.slots, doubled);
        self.len = 0;
        for (k, v) in old {
            if k != 0 {
                self.place(k, v);
            }
        }
        Ok(())
    }

    /// Puts an entry of a table being rebuilt into its first empty slot (there is room).
    fn place(&mut self, addr: usize, value: usize) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        while self.slots[i].0 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (addr, value);
        self.len += 1;
    }
}

/// One shard: a spin lock and its map, alone on a cache line pair.
#[repr(align(128))]
#[derive(Default)]
struct Shard(SpinLock<Map>);

impl Shard {
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut Map) -> R) -> R {
        self.0.with(f)
    }
}

const SHARDS: usize = 64;

/// Live allocations of one resource: address → size as the resource counts it (its rounding, or
/// the bytes asked for, see [`Sizes`]). Each thread's latest allocation may sit in the thread's
/// slot instead of the map (see [`live_slot`](super::live_slot)): every method below looks in both.
pub(crate) struct LiveSet {
    /// Process-unique (threads find their slot by it).
    id: u64,
    me: Weak<LiveSet>,
    sizes: Sizes,
    shards: Box<[Shard]>,
    /// Every thread's slot in this set, for frees from other threads; the lock also orders scans
    /// against the moves of ending threads (see `live_slot`).
    slots: Mutex<Vec<Arc<Slot>>>,
}

impl std::fmt::Debug for LiveSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSet")
            .field("live", &self.len())
            .finish()
    }
}

/// The host had no memory to record an allocation (the index could not grow).
#[derive(Debug)]
pub(crate) struct NoRoom;

impl From<TryReserveError> for NoRoom {
    fn from(_: TryReserveError) -> Self {
        NoRoom
    }
}

impl NoRoom {
    /// The allocation error of `name` for a request of `size` bytes whose record found no room.
    #[cold]
    #[inline(never)]
    pub(crate) fn error(self, name: &str, size: usize) -> Error {
        no_room(name, size)
    }
}

impl LiveSet {
    /// An empty index comparing sizes as `sizes` says.
    pub(crate) fn new(sizes: Sizes) -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let shards = (0..SHARDS).map(|_| Shard::default()).collect();
        Arc::new_cyclic(|me| Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            me: me.clone(),
            sizes,
            shards,
            slots: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// This set, weakly (for the threads' lists of slots).
    pub(super) fn me(&self) -> Weak<Self> {
        self.me.clone()
    }

    /// How this set compares sizes.
    pub(super) fn sizes(&self) -> Sizes {
        self.sizes
    }

    fn shard(&self, addr: usize) -> &Shard {
        &self.shards[(hash(addr) >> 58) as usize % SHARDS]
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `[addr, addr + size)` was handed out: in the calling thread's slot if it is
    /// empty, else in the map. Returns the record this one replaced, if the pointer was already
    /// live in the map (the memory was handed out again: freed behind the set's back). Fails,
    /// recording nothing, when the map must grow and the host has no memory for it.
    #[inline]
    pub(crate) fn insert(&self, addr: usize, size: usize) -> Result<Option<usize>, NoRoom> {
        if live_slot::lend(self, addr, size) {
            return Ok(None);
        }
        Ok(self.shard(addr).with(|m| m.insert(addr, size))?)
    }

    /// Takes `addr` out of the index if it is a live allocation whose size matches `size` and
    /// returns the size it was recorded with; otherwise refuses with [`Error::InvalidArgument`]
    /// and leaves the index unchanged.
    #[inline]
    pub(crate) fn remove(&self, name: &str, addr: usize, size: usize) -> Result<usize> {
        if let Some(live) = live_slot::take_back(self, addr, size) {
            return Ok(live);
        }
        self.remove_unlent(name, addr, size)
    }

    /// [`LiveSet::remove`] of what the calling thread's slot does not hold.
    fn remove_unlent(&self, name: &str, addr: usize, size: usize) -> Result<usize> {
        match self
            .shard(addr)
            .with(|m| m.remove_if(addr, size, self.sizes))
        {
            Ok(live) => Ok(live),
            Err(Some(live)) => Err(self.refusal(name, addr, size, Some(live))),
            Err(None) => self
                .take_lent(name, addr, size)?
                .ok_or_else(|| self.refusal(name, addr, size, None)),
        }
    }

    /// [`LiveSet::remove`], with `Ok(None)` for a pointer that is not live at all (only a live
    /// pointer with a size that does not match is an error).
    #[inline]
    pub(crate) fn take(&self, name: &str, addr: usize, size: usize) -> Result<Option<usize>> {
        if let Some(live) = live_slot::take_back(self, addr, size) {
            return Ok(Some(live));
        }
        self.take_unlent(name, addr, size)
    }

    /// [`LiveSet::take`] of what the calling thread's slot does not hold.
    fn take_unlent(&self, name: &str, addr: usize, size: usize) -> Result<Option<usize>> {
        match self
            .shard(addr)
            .with(|m| m.remove_if(addr, size, self.sizes))
        {
            Ok(live) => Ok(Some(live)),
            Err(None) => self.take_lent(name, addr, size),
            Err(Some(live)) => Err(self.refusal(name, addr, size, Some(live))),
        }
    }

    /// For an adaptor over `upstream` (docs/design/checked-frees.md): a free of `ptr` with `size`
    /// is [`Freed::Recorded`] (taken out of the record) when the adaptor handed it out with a
    /// matching size, and [`Freed::Upstream`] when it did not but `upstream` knows it as a live
    /// allocation of that size (the caller forwards it and counts nothing); anything else is
    /// refused with [`Error::InvalidArgument`].
    pub(crate) fn take_for_adaptor(
        &self,
        name: &str,
        upstream: &dyn MemoryResource,
        ptr: *mut u8,
        size: usize,
        alignment: usize,
    ) -> Result<Freed> {
        match self.take(name, ptr as usize, size)? {
            Some(recorded) => Ok(Freed::Recorded(recorded)),
            None if upstream.is_live_allocation(ptr, size, alignment) == Some(true) => {
                Ok(Freed::Upstream)
            }
            None => Err(not_handed_out(name, ptr as usize)),
        }
    }

    /// [`LiveSet::take`] for a pointer in no map: another thread's slot (or its own, freed with
    /// another size), or nowhere (`Ok(None)`).
    #[cold]
    fn take_lent(&self, name: &str, addr: usize, size: usize) -> Result<Option<usize>> {
        let slots = self.slots();
        // Again under the lock: an ending thread may have moved it from its slot into the map.
        match self
            .shard(addr)
            .with(|m| m.remove_if(addr, size, self.sizes))
        {
            Ok(live) => return Ok(Some(live)),
            Err(Some(live)) => return Err(self.refusal(name, addr, size, Some(live))),
            Err(None) => {}
        }
        for slot in slots.iter() {
            match slot.scan(addr, size, self.sizes) {
                Scanned::Taken(live) => return Ok(Some(live)),
                Scanned::OtherSize(live) => return Err(self.refusal(name, addr, size, Some(live))),
                Scanned::Absent => {}
            }
        }
        Ok(None)
    }

    /// True when `addr` is a live allocation whose size matches `size`: a free of it with `size`
    /// would be accepted. Changes nothing.
    pub(crate) fn contains(&self, addr: usize, size: usize) -> bool {
        self.recorded(addr)
            .is_some_and(|live| self.sizes.matches(live, size))
    }

    /// What live allocation `addr` was recorded with, if it is one. Changes nothing.
    fn recorded(&self, addr: usize) -> Option<usize> {
        if addr == 0 {
            return None;
        }
        if let Some(live) = self
            .shard(addr)
            .with(|m| m.find(addr).map(|i| m.slots[i].1))
        {
            return Some(live);
        }
        let slots = self.slots();
        // Again under the lock, as `take_lent` does.
        if let Some(live) = self
            .shard(addr)
            .with(|m| m.find(addr).map(|i| m.slots[i].1))
        {
            return Some(live);
        }
        slots.iter().find_map(|slot| slot.peek(addr))
    }

    /// Puts back an allocation that [`LiveSet::remove`] took out when the free failed after all.
    /// If the host has no memory to record it again, the allocation is no longer known to the
    /// set: that is reported, and a later free of it is refused (a leak, not a corruption).
    pub(crate) fn restore(&self, name: &str, addr: usize, size: usize) {
        if self.shard(addr).with(|m| m.insert(addr, size)).is_err() {
            tracing::error!(
                "{name}: {addr:#x} (+{size}) stays allocated, but the host has no memory to record it again: \
                 its free will be refused"
            );
        }
    }

    /// The number of live allocations.
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots();
        let lent = slots.iter().filter(|s| s.is_lent()).count();
        lent + self.shards.iter().map(|s| s.with(|m| m.len)).sum::<usize>()
    }

    /// Lists a thread's new slot (on the thread's first allocation through this set). A slot the
    /// host has no memory to list is never lent to (its thread records in the map).
    pub(super) fn slot_made(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots();
        if slots.try_reserve(1).is_ok() {
            slots.push(slot.clone());
            slot.listed();
        }
    }

    /// The owner of `slot` moves its lent allocation, if any, into the map (it stayed there too
    /// long, see `live_slot`); under the list lock, so that scanners never miss it. False (the
    /// allocation stays in the slot) when the map has no room for it.
    #[cold]
    pub(super) fn slot_evicted(&self, slot: &Slot) -> bool {
        let _slots = self.slots();
        self.unlend(slot)
    }

    /// A thread ends: its slot leaves the list and its allocation, if any, moves into the map. If
    /// the map has no room for it, the slot stays listed, so that frees from other threads still
    /// find the allocation there.
    pub(super) fn slot_gone(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots();
        if self.unlend(slot) {
            slots.retain(|s| !Arc::ptr_eq(s, slot));
        }
    }

    /// Moves `slot`'s lent allocation, if any, into the map (the caller holds the list lock and
    /// is the slot's owner thread, so the allocation cannot change meanwhile); false, leaving it in
    /// the slot, when the map cannot grow for it.
    fn unlend(&self, slot: &Slot) -> bool {
        let Some(addr) = slot.lent_addr() else {
            return true;
        };
        self.shard(addr).with(|m| {
            if m.reserve_one().is_err() {
                return false;
            }
            if let Some((evicted, size)) = slot.evict() {
                debug_assert_eq!(evicted, addr);
                // Room was made above under this lock: the insert cannot need to grow.
                let _ = m.insert(evicted, size);
            }
            true
        })
    }

    /// Why a free was refused: `live` is the size `addr` was recorded with, if it is live.
    #[cold]
    #[inline(never)]
    fn refusal(&self, name: &str, addr: usize, size: usize, live: Option<usize>) -> Error {
        match live {
            Some(live) => wrong_size(name, addr, live, size, self.sizes),
            None => Error::invalid(format!(
                "{name}: {addr:#x} is not a live allocation of this resource (a double free, a pointer into an \
                 allocation, or another resource's pointer); nothing was freed"
            )),
        }
    }
}

/// The refusal of a free of the live allocation at `addr`, recorded with `live`, with another
/// size `given` (both compared as `sizes` says).
#[cold]
#[inline(never)]
pub(crate) fn wrong_size(
    name: &str,
    addr: usize,
    live: usize,
    given: usize,
    sizes: Sizes,
) -> Error {
    Error::invalid(format!(
        "{name}: {addr:#x} was allocated with {} but freed with {} (sizes rounded up to 256); nothing was freed",
        sizes.describe(live),
        sizes.describe(given)
    ))
}

/// What a free through an adaptor is (see [`LiveSet::take_for_adaptor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freed {
    /// The adaptor handed it out, with this many bytes: count them back.
    Recorded(usize),
    /// The adaptor did not hand it out, but its upstream knows it: forward it, count nothing.
    Upstream,
}

/// Why an adaptor refused a free of a pointer it did not hand out.
#[cold]
#[inline(never)]
pub(crate) fn not_handed_out(name: &str, addr: usize) -> Error {
    Error::invalid(format!(
        "{name}: {addr:#x} is not a live allocation of this adaptor, and its upstream does not know it as one \
         (a double free, a pointer into an allocation, or another resource's pointer); nothing was freed"
    ))
}

/// Reports an engine bug: live memory handed out again.
#[cold]
#[inline(never)]
fn handed_out_twice(name: &str, addr: usize, size: usize, old: usize) {
    tracing::error!(
        "{name}: {addr:#x} (+{size}) was handed out while still live (+{old}): this is a bug"
    );
}

/// The error of an allocation the index had no room to record.
#[cold]
#[inline(never)]
pub(crate) fn no_room(name: &str, size: usize) -> Error {
    Error::OutOfMemory {
        bytes: size & !(DEFAULT_ALIGNMENT - 1),
        resource: name.into(),
        detail: "the host has no memory left to record the allocation; it was given back".into(),
    }
}

/// The index a resource carries: present when it checks frees.
#[derive(Debug, Default)]
pub(crate) struct FreeCheck(Option<Arc<LiveSet>>, Owners);

/// The adaptors registered with a pool's index (see [`FreeCheck::register`]), by number − 1.
#[derive(Default)]
struct Owners(Mutex<Vec<Weak<dyn RecordOwner>>>);

impl std::fmt::Debug for Owners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owners").finish_non_exhaustive()
    }
}

impl FreeCheck {
    /// An index for `checks`.
    pub(crate) fn new(checks: FreeChecks) -> Self {
        Self::with_sizes(checks, Sizes::Exact)
    }

    /// An index for `checks` whose records may carry owners' tags (the pool's).
    pub(crate) fn tagged(checks: FreeChecks) -> Self {
        Self::with_sizes(checks, Sizes::Tagged)
    }

    fn with_sizes(checks: FreeChecks, sizes: Sizes) -> Self {
        Self(
            (checks == FreeChecks::Checked).then(|| LiveSet::new(sizes)),
            Owners::default(),
        )
    }

    /// Whether frees are checked.
    pub(crate) fn mode(&self) -> FreeChecks {
        if self.0.is_some() {
            FreeChecks::Checked
        } else {
            FreeChecks::Unchecked
        }
    }

    /// Numbers an adaptor that will allocate through this index's resource with
    /// [`tagged`] records and free with [`FreeCheck::free_owned`], keeping no record of its own.
    /// `None` when this index checks nothing, keeps no tags, or has numbered 65,535 owners (the
    /// adaptor then keeps its own record).
    pub(crate) fn register(&self, owner: Weak<dyn RecordOwner>) -> Option<u16> {
        if self.0.as_ref()?.sizes != Sizes::Tagged {
            return None;
        }
        let mut owners = self.1 .0.lock().unwrap_or_else(PoisonError::into_inner);
        let number = u16::try_from(owners.len() + 1).ok()?;
        owners.try_reserve(1).ok()?;
        owners.push(owner);
        Some(number)
    }

    /// An allocation recorded with `record`'s owner was freed without it: tell the owner.
    #[cold]
    #[inline(never)]
    fn freed_elsewhere(&self, ptr: *mut u8, record: usize) {
        let owner = {
            let owners = self.1 .0.lock().unwrap_or_else(PoisonError::into_inner);
            owners
                .get(usize::from(owner_of(record)) - 1)
                .and_then(Weak::upgrade)
        };
        if let Some(owner) = owner {
            owner.freed_elsewhere(ptr, tagged_bytes(record));
        }
    }

    /// A free of `ptr` with `size` (a granule) through the adaptor numbered `owner`: when it names
    /// a live allocation, `before` hears whether the owner made it ([`Owned::Mine`] with the bytes
    /// it asked for) or not, then `free` runs; if `free` fails, the allocation stays live and
    /// `after_failure` hears the same. A pointer that is not live at all is refused as the
    /// adaptor's (`name`); one live with another size as the index's. Only for a checked index.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn free_owned(
        &self,
        name: &str,
        ptr: *mut u8,
        size: usize,
        owner: u16,
        before: impl FnOnce(Owned),
        free: impl FnOnce() -> Result<()>,
        after_failure: impl FnOnce(Owned),
    ) -> Result<()> {
        let Some(set) = &self.0 else {
            return Err(not_handed_out(name, ptr as usize));
        };
        let Some(live) = set.take(name, ptr as usize, size)? else {
            return Err(not_handed_out(name, ptr as usize));
        };
        let owned = if owner_of(live) == owner {
            Owned::Mine(tagged_bytes(live))
        } else {
            Owned::Beside
        };
        before(owned);
        if let Err(e) = free() {
            set.restore(name, ptr as usize, live);
            after_failure(owned);
            return Err(e);
        }
        if owned == Owned::Beside && owner_of(live) != 0 {
            self.freed_elsewhere(ptr, live);
        }
        Ok(())
    }

    /// True when `ptr` is a live allocation of `size` (a granule) that the adaptor numbered `owner`
    /// made.
    pub(crate) fn is_owned(&self, ptr: *mut u8, size: usize, owner: u16) -> bool {
        self.0.as_ref().is_some_and(|set| {
            set.recorded(ptr as usize)
                .is_some_and(|live| owner_of(live) == owner && set.sizes.matches(live, size))
        })
    }

    /// Records an allocation of `size` (a [`granule`]; a null pointer is not recorded) and passes
    /// it on. When the host has no memory to record it, `give_back` returns the block to the
    /// engine and the allocation fails ([`NoRoom::error`] makes its [`Error::OutOfMemory`]). Takes
    /// the pointer, not the allocation's `Result`, and fails with a unit: this is on every
    /// allocation's path, and an `Error` is large.
    #[inline]
    pub(crate) fn allocated(
        &self,
        name: &str,
        ptr: *mut u8,
        size: usize,
        give_back: impl FnOnce(*mut u8),
    ) -> Result<*mut u8, NoRoom> {
        if let Some(set) = &self.0 {
            if !ptr.is_null() {
                match set.insert(ptr as usize, size) {
                    Ok(None) => {}
                    Ok(Some(old)) => handed_out_twice(name, ptr as usize, size, old),
                    Err(NoRoom) => {
                        give_back(ptr);
                        return Err(NoRoom);
                    }
                }
            }
        }
        Ok(ptr)
    }

    /// Checks a free of `ptr` with `size` and runs `free` when it names a live allocation; the
    /// allocation stays live when `free` fails. Always inlined: it is on every checked free's path
    /// (docs/design/pool.md, "Binning's layers").
    #[inline(always)]
    pub(crate) fn free(
        &self,
        name: &str,
        ptr: *mut u8,
        size: usize,
        free: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let Some(set) = &self.0 else {
            return free();
        };
        let live = set.remove(name, ptr as usize, size)?;
        free().inspect_err(|_| set.restore(name, ptr as usize, live))?;
        // Only the pool's records carry owners (others have no owners to tell).
        if owner_of(live) != 0 {
            self.freed_elsewhere(ptr, live);
        }
        Ok(())
    }

    /// `Some(true)` when `ptr` is a live allocation of `size` (a [`granule`]), `Some(false)` when
    /// not, `None` when frees are not checked (nothing is recorded).
    pub(crate) fn is_live(&self, ptr: *mut u8, size: usize) -> Option<bool> {
        self.0.as_ref().map(|set| set.contains(ptr as usize, size))
    }

    /// `Ok` when `[ptr, ptr + size)` is a live allocation of `size` bytes, or frees are unchecked
    /// (then nothing can tell); else the refusal a free of it would get.
    pub(crate) fn check_live(&self, name: &str, ptr: *mut u8, size: usize) -> Result<()> {
        let Some(set) = &self.0 else {
            return Ok(());
        };
        if set.contains(ptr as usize, size) {
            return Ok(());
        }
        // Not live: the refusal a free would get (a free racing in between is put back).
        set.remove(name, ptr as usize, size)?;
        set.restore(name, ptr as usize, size);
        Ok(())
    }

    /// The number of live allocations (0 when unchecked).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.0.as_ref().map_or(0, |set| set.len())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    thread_local! {
        /// While set, the calling thread finds no room in any map (a host out of memory, when
        /// every table is full).
        pub(in crate::mr::detail) static NO_ROOM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Runs `f` with [`NO_ROOM`] set on this thread.
    fn without_room<R>(f: impl FnOnce() -> R) -> R {
        NO_ROOM.with(|n| n.set(true));
        let r = f();
        NO_ROOM.with(|n| n.set(false));
        r
    }

    #[test]
    fn a_record_without_room_gives_the_block_back_and_is_out_of_memory() {
        let check = FreeCheck::new(FreeChecks::Checked);
        // The thread's slot takes the first allocation without the map.
        check
            .allocated("t", 0x1000 as *mut u8, 256, |_| panic!("recorded"))
            .unwrap();
        let mut given_back = None;
        let err = without_room(|| {
            check.allocated("t", 0x2000 as *mut u8, 512, |p| {
                given_back = Some(p as usize)
            })
        })
        .unwrap_err()
        .error("t", 512);
        assert!(err.is_out_of_memory(), "{err}");
        assert!(err.to_string().contains("given back"), "{err}");
        assert_eq!(
            given_back,
            Some(0x2000),
            "the block went back to its resource"
        );
        assert_eq!(check.live(), 1, "nothing was recorded");
        assert!(
            check.free("t", 0x2000 as *mut u8, 512, || Ok(())).is_err(),
            "it is not live"
        );
        // With room again, everything works as before.
        check
            .allocated("t", 0x2000 as *mut u8, 512, |_| panic!("recorded"))
            .unwrap();
        check.free("t", 0x2000 as *mut u8, 512, || Ok(())).unwrap();
        check.free("t", 0x1000 as *mut u8, 256, || Ok(())).unwrap();
        assert_eq!(check.live(), 0);
    }

    #[test]
    fn an_ending_thread_without_room_leaves_its_allocation_findable() {
        let set = LiveSet::new(Sizes::Exact);
        std::thread::scope(|s| {
            s.spawn(|| {
                set.insert(0x1000, 256).unwrap();
                // The thread ends while no map has room: its slot stays listed.
                NO_ROOM.with(|n| n.set(true));
            });
        });
        assert_eq!(set.len(), 1);
        assert!(set.contains(0x1000, 256));
        assert!(set.remove("t", 0x1000, 512).is_err(), "checked as before");
        assert_eq!(set.remove("t", 0x1000, 256).unwrap(), 256);
        assert!(
            set.remove("t", 0x1000, 256).is_err(),
            "a double free is refused"
        );
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_slot_without_room_for_its_eviction_keeps_its_allocation() {
        let set = LiveSet::new(Sizes::Exact);
        set.insert(0x1000, 256).unwrap(); // into the slot
        without_room(|| {
            for i in 0..2 * live_slot::EVICT_AFTER as usize {
                assert!(
                    set.insert(0x10_0000 + 0x1000 * i, 256).is_err(),
                    "no room in the map"
                );
            }
        });
        assert_eq!(
            set.len(),
            1,
            "the slot kept its allocation, nothing else was recorded"
        );
        assert_eq!(set.remove("t", 0x1000, 256).unwrap(), 256);
    }

    #[test]
    fn granular_sizes_match_within_a_multiple_of_256_and_return_the_recorded_size() {
        let set = LiveSet::new(Sizes::Granular);
        set.insert(0x1000, 1000).unwrap(); // slot
        set.insert(0x2000, 1000).unwrap(); // map
        for addr in [0x1000, 0x2000] {
            assert!(
                set.contains(addr, 1024) && set.contains(addr, 769) && !set.contains(addr, 1025)
            );
            let wrong = set.remove("t", addr, 1300).unwrap_err();
            assert!(
                wrong
                    .to_string()
                    .contains("allocated with 1000 bytes but freed with 1300 bytes"),
                "{wrong}"
            );
            assert_eq!(
                set.remove("t", addr, 1001).unwrap(),
                1000,
                "the recorded size comes back"
            );
        }
        assert!(!set.contains(0x1000, 1000) && !set.contains(0, 0));
        let exact = LiveSet::new(Sizes::Exact);
        exact.insert(0x1000, 1024).unwrap();
        assert!(
            exact.remove("t", 0x1000, 1000).is_err(),
            "exact sets compare granules as given"
        );
    }

    #[test]
    fn contains_looks_everywhere_and_changes_nothing() {
        let set = LiveSet::new(Sizes::Exact);
        let (lent, done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                set.insert(0x1000, 256).unwrap(); // this thread's slot
                lent.wait();
                done.wait();
                assert_eq!(
                    set.remove("t", 0x1000, 256).unwrap(),
                    256,
                    "still in its slot"
                );
            });
            lent.wait();
            set.insert(0x2000, 512).unwrap();
            set.insert(0x3000, 768).unwrap();
            assert!(set.contains(0x1000, 256), "another live thread's slot");
            assert!(!set.contains(0x1000, 512));
            assert!(set.contains(0x2000, 512) && set.contains(0x3000, 768));
            assert!(!set.contains(0x3100, 256), "an interior pointer");
            done.wait();
        });
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn refuses_what_is_not_live_and_keeps_what_is() {
        let set = LiveSet::new(Sizes::Exact);
        set.insert(0x1000, 4096).unwrap();
        let wrong_size = set.remove("t", 0x1000, 256).unwrap_err();
        assert!(
            wrong_size
                .to_string()
                .contains("allocated with 4096 bytes but freed with 256 bytes"),
            "{wrong_size}"
        );
        let interior = set.remove("t", 0x1100, 256).unwrap_err();
        assert!(
            interior.to_string().contains("not a live allocation"),
            "{interior}"
        );
        assert_eq!(set.len(), 1, "refusals change nothing");
        set.remove("t", 0x1000, 4096).unwrap();
        assert!(
            set.remove("t", 0x1000, 4096).is_err(),
            "a double free is refused"
        );
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_tagged_record_matches_its_granule_and_keeps_owner_and_bytes() {
        let record = tagged(1024, 1000, 7);
        assert_eq!((owner_of(record), tagged_bytes(record)), (7, 1000));
        assert_eq!(
            (owner_of(1024), owner_of(tagged(1024, 1024, u16::MAX))),
            (0, u16::MAX)
        );
        assert!(Sizes::Tagged.matches(record, 1024) && !Sizes::Tagged.matches(record, 768));
        assert!(
            !Sizes::Exact.matches(record, 1024),
            "only the pool's index reads tags"
        );
        assert_eq!(Sizes::Tagged.describe(record), "1000 bytes");
        let check = FreeCheck::tagged(FreeChecks::Checked);
        let p = 0x8000 as *mut u8;
        check.allocated("t", p, record, |_| {}).unwrap();
        assert_eq!(check.is_live(p, 1024), Some(true));
        assert!(
            check.is_owned(p, 1024, 7) && !check.is_owned(p, 1024, 8) && !check.is_owned(p, 768, 7)
        );
        let heard = std::cell::Cell::new(None);
        check
            .free_owned(
                "t",
                p,
                1024,
                7,
                |o| heard.set(Some(o)),
                || Ok(()),
                |_| panic!("no failure"),
            )
            .unwrap();
        assert_eq!(heard.get(), Some(Owned::Mine(1000)));
        assert_eq!(check.live(), 0);
        let err = check
            .free_owned("t", p, 1024, 7, |_| {}, || Ok(()), |_| {})
            .unwrap_err();
        assert!(
            err.to_string().contains("upstream does not know it"),
            "{err}"
        );
    }

    #[test]
    fn a_failed_owned_free_keeps_the_tagged_record() {
        let check = FreeCheck::tagged(FreeChecks::Checked);
        let p = 0x8000 as *mut u8;
        check
            .allocated("t", p, tagged(512, 300, 2), |_| {})
            .unwrap();
        let undone = std::cell::Cell::new(None);
        assert!(check
            .free_owned(
                "t",
                p,
                512,
                2,
                |_| {},
                || Err(Error::invalid("upstream said no")),
                |o| undone.set(Some(o))
            )
            .is_err());
        assert_eq!(undone.get(), Some(Owned::Mine(300)));
        assert!(check.is_owned(p, 512, 2), "still live, still the owner's");
        check
            .free_owned("t", p, 512, 2, |_| {}, || Ok(()), |_| {})
            .unwrap();
    }

    #[test]
    fn granules_round_sizes_and_keep_alignments_apart() {
        assert_eq!(granule(1000, None), granule(1024, None));
        assert_ne!(granule(1000, None), granule(1025, None));
        assert_eq!(
            granule(1000, Some(64)),
            granule(1000, Some(256)),
            "alignments up to 256 are one class"
        );
        assert_ne!(granule(1000, Some(256)), granule(1000, Some(4096)));
        assert_eq!(
            describe(granule(1000, Some(4096))),
            "1024 bytes aligned to 4096"
        );
        assert_eq!(
            describe(granule(usize::MAX, None)),
            format!("{} bytes", usize::MAX & !255)
        );
    }

    #[test]
    fn the_table_matches_a_hash_map_under_random_churn() {
        let mut map = Map::default();
        let mut reference = std::collections::HashMap::new();
        let mut x = 0x1234_5678_9abc_def1_u64;
        for step in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct addresses, so runs collide, wrap and shift back all the time.
            let addr = (1 + (x >> 40) as usize % 600) << 8;
            let value = 256 * (1 + (x as usize >> 20) % 3);
            if x % 3 == 0 {
                assert_eq!(
                    map.insert(addr, value).unwrap(),
                    reference.insert(addr, value),
                    "step {step}"
                );
            } else {
                let expected = match reference.get(&addr) {
                    Some(&v) if v == value => {
                        reference.remove(&addr);
                        Ok(v)
                    }
                    other => Err(other.copied()),
                };
                assert_eq!(
                    map.remove_if(addr, value, Sizes::Exact),
                    expected,
                    "step {step}"
                );
            }
            assert_eq!(map.len, reference.len());
        }
        for (&addr, &value) in &reference {
            assert_eq!(map.find(addr).map(|i| map.slots[i].1), Some(value));
        }
        assert!(
            map.remove_if(0, 0, Sizes::Exact).is_err(),
            "null is never live"
        );
    }

    #[test]
    fn a_failed_free_keeps_the_allocation_live() {
        let check = FreeCheck::new(FreeChecks::Checked);
        let p = 0x4000 as *mut u8;
        check.allocated("t", p, 256, |_| {}).unwrap();
        assert!(check
            .free("t", p, 256, || Err(Error::invalid("upstream said no")))
            .is_err());
        assert_eq!(check.live(), 1);
        check.free("t", p, 256, || Ok(())).unwrap();
        assert_eq!(check.live(), 0);
    }

    #[test]
    fn unchecked_trusts_every_free() {
        let check = FreeCheck::new(FreeChecks::Unchecked);
        assert_eq!(check.mode(), FreeChecks::Unchecked);
        check
            .allocated("t", 0x4000 as *mut u8, 256, |_| {})
            .unwrap();
        let mut called = false;
        check
            .free("t", 0x4100 as *mut u8, 999, || {
                called = true;
                Ok(())
            })
            .unwrap();
        assert!(called && check.live() == 0);
    }

    #[test]
    fn many_threads_free_each_others_allocations() {
        let set = LiveSet::new(Sizes::Exact);
        let threads: Vec<_> = (0..8usize)
            .map(|t| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000usize {
                        let addr = ((t * 10_000 + i) + 1) << 8;
                        set.insert(addr, 256).unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(set.len(), 80_000);
        let threads: Vec<_> = (0..8usize)
            .map(|t| {
                let set = set.clone();
                std::thread::spawn(move || {
                    // Each thread frees another thread's allocations.
                    let owner = (t + 1) % 8;
                    for i in 0..10_000usize {
                        set.remove("t", ((owner * 10_000 + i) + 1) << 8, 256)
                            .unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(set.len(), 0);
    }

    // The thread slots (see `live_slot`): what a user sees must not change with where an
    // allocation was recorded.

    #[test]
    fn a_thread_s_latest_allocation_is_freed_from_its_slot_and_checked_as_in_the_map() {
        let set = LiveSet::new(Sizes::Exact);
        set.insert(0x1000, 256).unwrap();
        set.insert(0x2000, 512).unwrap();
        assert_eq!(set.len(), 2, "one in the slot, one in the map");
        let wrong = set.remove("t", 0x1000, 512).unwrap_err();
        assert!(
            wrong
                .to_string()
                .contains("allocated with 256 bytes but freed with 512"),
            "{wrong}"
        );
        assert!(set.remove("t", 0x1100, 256).is_err(), "an interior pointer");
        assert_eq!(set.len(), 2, "refusals change nothing");
        set.remove("t", 0x1000, 256).unwrap();
        assert!(
            set.remove("t", 0x1000, 256).is_err(),
            "a double free is refused"
        );
        set.remove("t", 0x2000, 512).unwrap();
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn another_thread_frees_what_sits_in_a_live_thread_s_slot_once() {
        let set = LiveSet::new(Sizes::Exact);
        let (lent, freed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                set.insert(0x1000, 256).unwrap();
                lent.wait();
                freed.wait();
                // Freed by the other thread: this thread's own free is now a double free.
                assert!(set.remove("t", 0x1000, 256).is_err());
                set.insert(0x3000, 256).unwrap();
                set.remove("t", 0x3000, 256).unwrap();
            });
            lent.wait();
            let wrong = set.remove("t", 0x1000, 4096).unwrap_err();
            assert!(
                wrong.to_string().contains("allocated with 256 bytes"),
                "{wrong}"
            );
            set.remove("t", 0x1000, 256).unwrap();
            assert!(set.remove("t", 0x1000, 256).is_err());
            freed.wait();
        });
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_long_lived_allocation_leaves_the_slot_to_the_temporaries_after_it() {
        let set = LiveSet::new(Sizes::Exact);
        let in_map = |addr: usize| set.shard(addr).with(|m| m.find(addr).is_some());
        set.insert(0x1000, 1 << 20).unwrap(); // the thread's working buffer: into its slot
        let temporaries = |first: usize, n: usize| {
            for i in 0..n {
                let addr = 0x10_0000 + 0x1000 * (first + i);
                set.insert(addr, 256).unwrap();
                set.remove("t", addr, 256).unwrap();
            }
        };
        temporaries(0, live_slot::EVICT_AFTER as usize - 1);
        assert!(!in_map(0x1000), "still in its slot");
        temporaries(1000, 1);
        assert!(in_map(0x1000), "moved into the map");
        set.insert(0x9000, 256).unwrap();
        assert!(!in_map(0x9000), "the next temporary takes the slot");
        set.remove("t", 0x9000, 256).unwrap();
        // Checked exactly as before the move, from this thread and from another one.
        assert_eq!(set.len(), 1);
        assert!(set.remove("t", 0x1000, 256).is_err());
        std::thread::scope(|s| {
            s.spawn(|| set.remove("t", 0x1000, 1 << 20).unwrap());
        });
        assert!(
            set.remove("t", 0x1000, 1 << 20).is_err(),
            "a double free is refused"
        );
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_thread_that_ends_leaves_its_latest_allocation_live() {
        let set = LiveSet::new(Sizes::Exact);
        std::thread::scope(|s| {
            s.spawn(|| set.insert(0x1000, 256).unwrap());
        });
        assert_eq!(set.len(), 1);
        assert!(set.remove("t", 0x1000, 512).is_err());
        set.remove("t", 0x1000, 256).unwrap();
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn racing_frees_of_one_allocation_succeed_once() {
        // A third thread holds the allocation in its slot (it stays alive); two threads free it at
        // once, over and over: exactly one may win each time.
        let set = LiveSet::new(Sizes::Exact);
        let rounds = 2_000;
        let (lent, go, done) = (
            std::sync::Barrier::new(3),
            std::sync::Barrier::new(3),
            std::sync::Barrier::new(3),
        );
        let wins = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 0..rounds {
                    set.insert((round + 1) << 8, 256).unwrap();
                    lent.wait();
                    go.wait();
                    done.wait();
                }
            });
            for _ in 0..2 {
                s.spawn(|| {
                    for round in 0..rounds {
                        lent.wait();
                        go.wait();
                        if set.remove("t", (round + 1) << 8, 256).is_ok() {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        done.wait();
                    }
                });
            }
        });
        assert_eq!(wins.load(Ordering::Relaxed), rounds as u64);
        assert_eq!(set.len(), 0);
    }
}
