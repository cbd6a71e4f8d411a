//! The live-allocation index behind checked frees: which pointers a sub-allocator has handed out,
//! and with what size.
//!
//! RMM's sub-allocators trust every free: a pointer into the middle of a live block, a size other
//! than the allocation's, a double free or a pointer of another resource is taken as given and
//! silently corrupts the free lists (the next allocation can overlap live memory) or leaks. The
//! pool, fixed-size, binning and arena resources instead record each allocation here when they
//! hand it out and take it out at the entry of `deallocate`; a free that does not name a live
//! allocation with its size is refused with [`Error::InvalidArgument`] before the engine sees it,
//! so the resource stays intact.
//!
//! Cost: one short critical section per allocate and per deallocate, on one of 64 shards chosen
//! by address (so threads freeing each other's memory rarely meet), each an open-addressing table
//! keyed by a multiplicative hash of the address. The lock is a test-and-set spin lock released by a plain
//! store (one atomic read-modify-write per call instead of a mutex's two); it is held only for a
//! hash-map insert or remove, and a waiter yields its time slice after a few spins, so a holder
//! that was descheduled is not starved.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::aligned::{align_up, DEFAULT_ALIGNMENT};
use crate::error::{Error, Result};

use super::live_slot::{self, Scanned, Slot};

/// What the live index compares for a request of `bytes`: the size rounded up to 256 (saturating:
/// a size that large was never allocated, so it never matches) and, where the resource's free
/// depends on it, the alignment (at least 256) as its base-2 logarithm in the low bits, which a
/// multiple of 256 leaves free.
pub(crate) fn granule(bytes: usize, alignment: Option<usize>) -> usize {
    let size = align_up(bytes, DEFAULT_ALIGNMENT).unwrap_or(usize::MAX & !(DEFAULT_ALIGNMENT - 1));
    size | alignment.map_or(0, |a| a.max(DEFAULT_ALIGNMENT).trailing_zeros() as usize)
}

/// A [`granule`] in words.
fn describe(granule: usize) -> String {
    let size = granule & !(DEFAULT_ALIGNMENT - 1);
    match granule & (DEFAULT_ALIGNMENT - 1) {
        0 => format!("{size} bytes"),
        log2 => format!("{size} bytes aligned to {}", 1usize << log2),
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

    /// Inserts or replaces; returns the value replaced.
    #[inline]
    fn insert(&mut self, addr: usize, value: usize) -> Option<usize> {
        debug_assert_ne!(addr, 0);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(addr);
        loop {
            let (k, v) = self.slots[i];
            if k == 0 {
                self.slots[i] = (addr, value);
                self.len += 1;
                return None;
            }
            if k == addr {
                self.slots[i].1 = value;
                return Some(v);
            }
            i = (i + 1) & mask;
        }
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

    /// Removes `addr` if it maps to `value`; otherwise returns what it maps to (`None`: nothing).
    #[inline]
    fn remove_if(&mut self, addr: usize, value: usize) -> Result<(), Option<usize>> {
        if addr == 0 {
            return Err(None);
        }
        let Some(mut hole) = self.find(addr) else {
            return Err(None);
        };
        if self.slots[hole].1 != value {
            return Err(Some(self.slots[hole].1));
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
        Ok(())
    }

    fn grow(&mut self) {
        let doubled = vec![(0, 0); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.len = 0;
        for (k, v) in old {
            if k != 0 {
                self.insert(k, v);
            }
        }
    }
}

/// One shard: a spin lock and its map, alone on a cache line pair.
#[repr(align(128))]
struct Shard {
    locked: AtomicBool,
    map: UnsafeCell<Map>,
}

// SAFETY: `map` is only touched while `locked` is held (see `Shard::with`), which makes the shard a
// mutex around a `Send` map.
unsafe impl Sync for Shard {}

impl Shard {
    fn with<R>(&self, f: impl FnOnce(&mut Map) -> R) -> R {
        let mut spins = 0u32;
        while self.locked.swap(true, Ordering::Acquire) {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        /// Releases the lock even if `f` unwinds (a hash map that failed to grow).
        struct Unlock<'a>(&'a AtomicBool);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _unlock = Unlock(&self.locked);
        // SAFETY: the lock is held until `_unlock` drops, so this is the only reference to the map.
        f(unsafe { &mut *self.map.get() })
    }
}

const SHARDS: usize = 64;

/// Live allocations of one resource: address → size as the resource counts it (its rounding).
/// Each thread's latest allocation may sit in the thread's slot instead of the map (see
/// [`live_slot`](super::live_slot)): every method below looks in both.
pub(crate) struct LiveSet {
    /// Process-unique (threads find their slot by it).
    id: u64,
    me: Weak<LiveSet>,
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

impl LiveSet {
    /// An empty index.
    pub(crate) fn new() -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let shards = (0..SHARDS)
            .map(|_| Shard {
                locked: AtomicBool::new(false),
                map: UnsafeCell::default(),
            })
            .collect();
        Arc::new_cyclic(|me| Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            me: me.clone(),
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

    fn shard(&self, addr: usize) -> &Shard {
        &self.shards[(hash(addr) >> 58) as usize % SHARDS]
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `[addr, addr + size)` was handed out: in the calling thread's slot if it is
    /// empty, else in the map. A pointer already live in the map means the engine handed out live
    /// memory twice: that is reported, and the newer record wins.
    #[inline]
    pub(crate) fn insert(&self, name: &str, addr: usize, size: usize) {
        if live_slot::lend(self, addr, size) {
            return;
        }
        if let Some(old) = self.shard(addr).with(|m| m.insert(addr, size)) {
            handed_out_twice(name, addr, size, old);
        }
    }

    /// Takes `addr` out of the index if it is a live allocation of `size` bytes; otherwise refuses
    /// with [`Error::InvalidArgument`] and leaves the index unchanged.
    #[inline]
    pub(crate) fn remove(&self, name: &str, addr: usize, size: usize) -> Result<()> {
        if live_slot::take_back(self, addr, size) {
            return Ok(());
        }
        match self.shard(addr).with(|m| m.remove_if(addr, size)) {
            Ok(()) => Ok(()),
            Err(None) => self.remove_lent(name, addr, size),
            Err(Some(live)) => Err(refusal(name, addr, size, Some(live))),
        }
    }

    /// [`LiveSet::remove`] for a pointer in no map: another thread's slot (or its own, freed with
    /// another size), or nowhere.
    #[cold]
    fn remove_lent(&self, name: &str, addr: usize, size: usize) -> Result<()> {
        let slots = self.slots();
        // Again under the lock: an ending thread may have moved it from its slot into the map.
        match self.shard(addr).with(|m| m.remove_if(addr, size)) {
            Ok(()) => return Ok(()),
            Err(Some(live)) => return Err(refusal(name, addr, size, Some(live))),
            Err(None) => {}
        }
        for slot in slots.iter() {
            match slot.scan(addr, size) {
                Scanned::Taken => return Ok(()),
                Scanned::OtherSize(live) => return Err(refusal(name, addr, size, Some(live))),
                Scanned::Absent => {}
            }
        }
        Err(refusal(name, addr, size, None))
    }

    /// Puts back an allocation that [`LiveSet::remove`] took out when the free failed after all.
    pub(crate) fn restore(&self, addr: usize, size: usize) {
        self.shard(addr).with(|m| m.insert(addr, size));
    }

    /// The number of live allocations.
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots();
        let lent = slots.iter().filter(|s| s.is_lent()).count();
        lent + self.shards.iter().map(|s| s.with(|m| m.len)).sum::<usize>()
    }

    /// Lists a thread's new slot (on the thread's first allocation through this set).
    pub(super) fn slot_made(&self, slot: &Arc<Slot>) {
        self.slots().push(slot.clone());
    }

    /// The owner of `slot` moves its lent allocation, if any, into the map (it stayed there too
    /// long, see `live_slot`); under the list lock, so that scanners never miss it.
    #[cold]
    pub(super) fn slot_evicted(&self, slot: &Slot) {
        let _slots = self.slots();
        self.unlend(slot);
    }

    /// A thread ends: its slot leaves the list and its allocation, if any, moves into the map.
    pub(super) fn slot_gone(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots();
        slots.retain(|s| !Arc::ptr_eq(s, slot));
        self.unlend(slot);
    }

    /// Moves `slot`'s lent allocation, if any, into the map (the caller holds the list lock).
    fn unlend(&self, slot: &Slot) {
        if let Some((addr, size)) = slot.evict() {
            self.restore(addr, size);
        }
    }
}

/// Reports an engine bug: live memory handed out again.
#[cold]
#[inline(never)]
fn handed_out_twice(name: &str, addr: usize, size: usize, old: usize) {
    tracing::error!(
        "{name}: {addr:#x} (+{size}) was handed out while still live (+{old}): this is a bug"
    );
}

/// Why a free was refused: `live` is the granule `addr` was allocated with, if it is live.
#[cold]
#[inline(never)]
fn refusal(name: &str, addr: usize, size: usize, live: Option<usize>) -> Error {
    match live {
        Some(live) => Error::invalid(format!(
            "{name}: {addr:#x} was allocated with {} but freed with {} (sizes rounded up to 256); nothing was freed",
            describe(live),
            describe(size)
        )),
        None => Error::invalid(format!(
            "{name}: {addr:#x} is not a live allocation of this resource (a double free, a pointer into an \
             allocation, or another resource's pointer); nothing was freed"
        )),
    }
}

/// The index a resource carries: present when it checks frees.
#[derive(Debug, Default)]
pub(crate) struct FreeCheck(Option<Arc<LiveSet>>);

impl FreeCheck {
    /// An index for `checks`.
    pub(crate) fn new(checks: FreeChecks) -> Self {
        Self((checks == FreeChecks::Checked).then(LiveSet::new))
    }

    /// Whether frees are checked.
    pub(crate) fn mode(&self) -> FreeChecks {
        if self.0.is_some() {
            FreeChecks::Checked
        } else {
            FreeChecks::Unchecked
        }
    }

    /// Records an allocation (a null pointer is not recorded) and passes it on. Takes the pointer,
    /// not the allocation's `Result`: this is on every allocation's path, and an `Error` is large.
    #[inline]
    pub(crate) fn allocated(&self, name: &str, ptr: *mut u8, size: usize) -> *mut u8 {
        if let Some(set) = &self.0 {
            if !ptr.is_null() {
                set.insert(name, ptr as usize, size);
            }
        }
        ptr
    }

    /// Checks a free of `ptr` with `size` and runs `free` when it names a live allocation; the
    /// allocation stays live when `free` fails.
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
        set.remove(name, ptr as usize, size)?;
        free().inspect_err(|_| set.restore(ptr as usize, size))
    }

    /// `Ok` when `[ptr, ptr + size)` is a live allocation of `size` bytes, or frees are unchecked
    /// (then nothing can tell); else the refusal a free of it would get.
    pub(crate) fn check_live(&self, name: &str, ptr: *mut u8, size: usize) -> Result<()> {
        let Some(set) = &self.0 else {
            return Ok(());
        };
        set.remove(name, ptr as usize, size)?;
        set.restore(ptr as usize, size);
        Ok(())
    }

    /// The number of live allocations (0 when unchecked).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.0.as_ref().map_or(0, |set| set.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_live_and_keeps_what_is() {
        let set = LiveSet::new();
        set.insert("t", 0x1000, 4096);
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
                    map.insert(addr, value),
                    reference.insert(addr, value),
                    "step {step}"
                );
            } else {
                let expected = match reference.get(&addr) {
                    Some(&v) if v == value => {
                        reference.remove(&addr);
                        Ok(())
                    }
                    other => Err(other.copied()),
                };
                assert_eq!(map.remove_if(addr, value), expected, "step {step}");
            }
            assert_eq!(map.len, reference.len());
        }
        for (&addr, &value) in &reference {
            assert_eq!(map.find(addr).map(|i| map.slots[i].1), Some(value));
        }
        assert!(map.remove_if(0, 0).is_err(), "null is never live");
    }

    #[test]
    fn a_failed_free_keeps_the_allocation_live() {
        let check = FreeCheck::new(FreeChecks::Checked);
        let p = 0x4000 as *mut u8;
        check.allocated("t", p, 256);
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
        check.allocated("t", 0x4000 as *mut u8, 256);
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
        let set = LiveSet::new();
        let threads: Vec<_> = (0..8usize)
            .map(|t| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000usize {
                        let addr = ((t * 10_000 + i) + 1) << 8;
                        set.insert("t", addr, 256);
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
        let set = LiveSet::new();
        set.insert("t", 0x1000, 256);
        set.insert("t", 0x2000, 512);
        assert_eq!(set.len(), 2, "one in the slot, one in the map");
        let wrong = set.remove("t", 0x1000, 512).unwrap_err();
        assert!(
            wrong.to_string().contains("allocated with 256 bytes but freed with 512"),
            "{wrong}"
        );
        assert!(set.remove("t", 0x1100, 256).is_err(), "an interior pointer");
        assert_eq!(set.len(), 2, "refusals change nothing");
        set.remove("t", 0x1000, 256).unwrap();
        assert!(set.remove("t", 0x1000, 256).is_err(), "a double free is refused");
        set.remove("t", 0x2000, 512).unwrap();
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn another_thread_frees_what_sits_in_a_live_thread_s_slot_once() {
        let set = LiveSet::new();
        let (lent, freed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                set.insert("t", 0x1000, 256);
                lent.wait();
                freed.wait();
                // Freed by the other thread: this thread's own free is now a double free.
                assert!(set.remove("t", 0x1000, 256).is_err());
                set.insert("t", 0x3000, 256);
                set.remove("t", 0x3000, 256).unwrap();
            });
            lent.wait();
            let wrong = set.remove("t", 0x1000, 4096).unwrap_err();
            assert!(wrong.to_string().contains("allocated with 256 bytes"), "{wrong}");
            set.remove("t", 0x1000, 256).unwrap();
            assert!(set.remove("t", 0x1000, 256).is_err());
            freed.wait();
        });
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_long_lived_allocation_leaves_the_slot_to_the_temporaries_after_it() {
        let set = LiveSet::new();
        let in_map = |addr: usize| set.shard(addr).with(|m| m.find(addr).is_some());
        set.insert("t", 0x1000, 1 << 20); // the thread's working buffer: into its slot
        let temporaries = |first: usize, n: usize| {
            for i in 0..n {
                let addr = 0x10_0000 + 0x1000 * (first + i);
                set.insert("t", addr, 256);
                set.remove("t", addr, 256).unwrap();
            }
        };
        temporaries(0, live_slot::EVICT_AFTER as usize - 1);
        assert!(!in_map(0x1000), "still in its slot");
        temporaries(1000, 1);
        assert!(in_map(0x1000), "moved into the map");
        set.insert("t", 0x9000, 256);
        assert!(!in_map(0x9000), "the next temporary takes the slot");
        set.remove("t", 0x9000, 256).unwrap();
        // Checked exactly as before the move, from this thread and from another one.
        assert_eq!(set.len(), 1);
        assert!(set.remove("t", 0x1000, 256).is_err());
        std::thread::scope(|s| {
            s.spawn(|| set.remove("t", 0x1000, 1 << 20).unwrap());
        });
        assert!(set.remove("t", 0x1000, 1 << 20).is_err(), "a double free is refused");
        assert_eq!(set.len(), 0);
    }

    #[test]
    fn a_thread_that_ends_leaves_its_latest_allocation_live() {
        let set = LiveSet::new();
        std::thread::scope(|s| {
            s.spawn(|| set.insert("t", 0x1000, 256));
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
        let set = LiveSet::new();
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
                    set.insert("t", (round + 1) << 8, 256);
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
