//! The data of the arena allocator (RMM's `mr/detail/arena.hpp`): superblocks, arenas and the
//! global arena. The algorithm that drives them lives in [`super::arena_impl`].
//!
//! Glossary:
//! - *upstream block*: the one allocation of `arena_size` bytes the resource takes from its
//!   upstream at construction; everything below is a range of it. It is the hard cap.
//! - *superblock*: a range of the upstream block, normally [`SUPERBLOCK_SIZE`] (1 MiB) and a
//!   multiple of 256 bytes, that one arena carves small allocations from. It keeps its free space
//!   as a bitmap of 256-byte units ([`Superblock`]), with first fit and implicit coalescing.
//! - *arena*: the superblocks of one stream (or of one thread, for the per-thread default stream),
//!   behind its own mutex.
//! - *global arena*: what no arena holds: free space ([`FreeList`] with one region, the upstream
//!   block, so neighbours always coalesce), *orphan* superblocks (left with live blocks by an exited
//!   thread, or stolen during a defragmentation) and the live *large* allocations (more than 1 MiB),
//!   which it serves directly.
//!
//! Invariants:
//! - every byte of the upstream block is in exactly one place: a global free block, a large
//!   allocation, or one superblock (of an arena or of the orphans);
//! - inside a superblock, a byte is either free (its unit's bit is set) or handed out;
//! - an orphan superblock always has live blocks (it joins the global free space when its last
//!   block is freed); arenas may hold empty superblocks until a defragmentation or their thread's
//!   exit;
//! - free memory anywhere is *clean*: no queued GPU work of another stream can still use it,
//!   except inside the arena of the stream that freed it (stream order makes reuse there safe).
//!   Moving memory between arenas or into the global arena is done only after the right
//!   synchronization (see [`super::arena_impl`]).

use foldhash::{HashMap, HashMapExt};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::cuda::Event;
use crate::error::{Error, Result};
use crate::mr::detail::free_list::FreeList;

pub(crate) use super::arena_superblock::Superblock;

/// The size of a superblock, and the threshold above which requests go to the global arena.
pub(crate) const SUPERBLOCK_SIZE: usize = 1 << 20;

/// Superblocks sorted by start address.
#[derive(Debug, Default)]
pub(crate) struct Superblocks {
    list: Vec<Superblock>,
    /// How many times the arena took superblocks from the global arena.
    acquisitions: u32,
}

/// What [`Superblocks::free`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freed {
    /// The block was returned; `true` when its superblock is now empty.
    Done { now_empty: bool, superblock: usize },
    /// No superblock here contains the address.
    NotHere,
}

impl Superblocks {
    /// The number of superblocks.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The superblocks in address order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Superblock> {
        self.list.iter()
    }

    /// Bytes handed out from these superblocks.
    pub(crate) fn used(&self) -> usize {
        self.list.iter().map(Superblock::used).sum()
    }

    /// Bytes free in these superblocks.
    pub(crate) fn free_bytes(&self) -> usize {
        self.list.iter().map(Superblock::free_bytes).sum()
    }

    /// The largest free block of any superblock (0 when none).
    pub(crate) fn largest(&self) -> usize {
        self.list.iter().map(Superblock::largest).max().unwrap_or(0)
    }

    fn index_of(&self, addr: usize) -> Option<usize> {
        let i = self
            .list
            .partition_point(|sb| sb.start() <= addr)
            .checked_sub(1)?;
        self.list[i].contains(addr).then_some(i)
    }

    /// Adds a superblock (which must not overlap the others).
    pub(crate) fn insert(&mut self, sb: Superblock) {
        let i = self.list.partition_point(|s| s.start() < sb.start());
        debug_assert!(i == self.list.len() || self.list[i].start() >= sb.start() + sb.size());
        self.list.insert(i, sb);
    }

    /// Counts one more trip to the global arena for superblocks; returns the count.
    pub(crate) fn note_acquisition(&mut self) -> u32 {
        self.acquisitions = self.acquisitions.saturating_add(1);
        self.acquisitions
    }

    /// Removes and returns the superblock starting at `start`.
    pub(crate) fn remove(&mut self, start: usize) -> Option<Superblock> {
        let i = self.index_of(start)?;
        (self.list[i].start() == start).then(|| self.list.remove(i))
    }

    /// First fit over the superblocks in address order, then inside the first that can hold it.
    pub(crate) fn first_fit(&mut self, size: usize) -> Option<usize> {
        self.list
            .iter_mut()
            .find(|sb| sb.largest() >= size)?
            .first_fit(size)
    }

    /// The lowest-addressed superblock whose largest free block holds `size` bytes, removed.
    pub(crate) fn take_first_that_fits(&mut self, size: usize) -> Option<Superblock> {
        let i = self.list.iter().position(|sb| sb.largest() >= size)?;
        Some(self.list.remove(i))
    }

    /// Returns `[addr, addr + size)` to the superblock that contains `addr`, if one here does.
    ///
    /// # Errors
    /// As [`Superblock::free`].
    pub(crate) fn free(&mut self, addr: usize, size: usize) -> Result<Freed> {
        let Some(i) = self.index_of(addr) else {
            return Ok(Freed::NotHere);
        };
        let sb = &mut self.list[i];
        sb.free(addr, size)?;
        Ok(Freed::Done {
            now_empty: sb.is_empty(),
            superblock: sb.start(),
        })
    }

    /// Removes and returns every empty superblock.
    pub(crate) fn take_empty(&mut self) -> Vec<Superblock> {
        self.take_where(true)
    }

    /// Removes and returns every superblock that holds live blocks (the empty ones stay).
    pub(crate) fn take_in_use(&mut self) -> Vec<Superblock> {
        self.take_where(false)
    }

    /// Removes and returns the superblocks whose emptiness is `empty`; the others stay in order.
    fn take_where(&mut self, empty: bool) -> Vec<Superblock> {
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.list)
            .into_iter()
            .partition(|sb| sb.is_empty() == empty);
        self.list = kept;
        taken
    }

    /// Removes and returns every superblock.
    pub(crate) fn take_all(&mut self) -> Vec<Superblock> {
        std::mem::take(&mut self.list)
    }

    fn describe(&self, out: &mut String, indent: &str) {
        for sb in &self.list {
            sb.describe(out, indent);
        }
    }

    /// Panics when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        for w in self.list.windows(2) {
            assert!(
                w[0].start() + w[0].size() <= w[1].start(),
                "superblocks {:#x} and {:#x} overlap",
                w[0].start(),
                w[1].start()
            );
        }
        for sb in &self.list {
            sb.check_invariants();
            assert!(
                sb.start() % crate::DEFAULT_ALIGNMENT == 0
                    && sb.size() % crate::DEFAULT_ALIGNMENT == 0
            );
        }
    }
}

/// Who an arena belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArenaKind {
    /// A stream (its raw handle; 0 is the legacy default stream's shared arena, which threads that
    /// are exiting, and the arenas of threads that exited, hand their legacy blocks to).
    Stream(usize),
    /// A thread, for one of the default streams (numbered in creation order: the thread's handle
    /// may be gone while thread-local destructors run).
    Thread { number: u64, stream: ThreadStream },
}

/// The default stream a thread's own arena serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadStream {
    /// The thread's per-thread default stream: only this thread can name it.
    PerThread,
    /// The legacy default stream (handle 0 or `cudaStreamLegacy`): one stream that every thread
    /// names, given an arena per thread so that threads do not contend on one lock; a block freed
    /// on it by another thread joins the owner's arena without waiting (same stream).
    Legacy,
}

/// The superblocks of one stream or thread, behind their own lock.
#[derive(Debug)]
pub(crate) struct Arena {
    kind: ArenaKind,
    superblocks: Mutex<Superblocks>,
}

impl Arena {
    /// An empty arena.
    pub(crate) fn new(kind: ArenaKind) -> Self {
        Self {
            kind,
            superblocks: Mutex::new(Superblocks::default()),
        }
    }

    /// Whether the arena serves the legacy default stream (a thread's or the shared one).
    pub(crate) fn on_legacy_stream(&self) -> bool {
        matches!(
            self.kind,
            ArenaKind::Stream(0)
                | ArenaKind::Thread {
                    stream: ThreadStream::Legacy,
                    ..
                }
        )
    }

    /// Locks the arena (a poisoned lock is recovered: every operation leaves the data consistent
    /// before it can fail).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Superblocks> {
        self.superblocks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn describe(&self, superblocks: &Superblocks, out: &mut String) {
        let _ = match self.kind {
            ArenaKind::Stream(s) => write!(out, "Stream arena {s:#x}"),
            ArenaKind::Thread {
                number,
                stream: ThreadStream::PerThread,
            } => write!(out, "Thread arena #{number}"),
            ArenaKind::Thread {
                number,
                stream: ThreadStream::Legacy,
            } => write!(out, "Thread arena #{number} (legacy default stream)"),
        };
        let _ = writeln!(
            out,
            ": {} superblocks, used {}, free {}",
            superblocks.len(),
            superblocks.used(),
            superblocks.free_bytes()
        );
        superblocks.describe(out, "  ");
    }
}

/// What no arena holds: free space, orphan superblocks, large allocations, and the registry of
/// arenas. Behind the resource's one global lock.
#[derive(Debug)]
pub(crate) struct Global {
    base: usize,
    size: usize,
    /// Free space (no superblock), one region: the upstream block.
    free: FreeList<()>,
    /// Superblocks with live blocks that no arena holds.
    pub(crate) orphans: Superblocks,
    /// Live large allocations: address → bytes (rounded to 256).
    large: HashMap<usize, usize>,
    large_bytes: usize,
    /// Arenas of streams, by normalized raw handle.
    pub(crate) streams: HashMap<usize, Arc<Arena>>,
    /// Arenas of live threads (for the per-thread and the legacy default streams).
    pub(crate) threads: Vec<Arc<Arena>>,
    /// Arenas of exited threads whose per-thread default stream may still run work on their free
    /// blocks: each waits for its event (recorded on that stream as the thread exited; `None` when
    /// recording failed: then for the next device synchronization) before its superblocks return.
    pub(crate) retired: Vec<(Arc<Arena>, Option<Event>)>,
}

impl Global {
    /// The global arena over `[base, base + size)`, all free.
    pub(crate) fn new(base: usize, size: usize) -> Self {
        let mut free = FreeList::new();
        free.insert(base, size, base, ());
        Self {
            base,
            size,
            free,
            orphans: Superblocks::default(),
            large: HashMap::new(),
            large_bytes: 0,
            streams: HashMap::new(),
            threads: Vec::new(),
            retired: Vec::new(),
        }
    }

    /// Free bytes outside every superblock.
    pub(crate) fn free_bytes(&self) -> usize {
        self.free.free_bytes()
    }

    /// The largest free range outside every superblock.
    pub(crate) fn largest_free(&self) -> usize {
        self.free.largest()
    }

    /// Bytes of live large allocations, and how many there are.
    pub(crate) fn large(&self) -> (usize, usize) {
        (self.large_bytes, self.large.len())
    }

    /// Every arena: streams, then live threads, then exited threads' arenas still waiting.
    pub(crate) fn arenas(&self) -> Vec<Arc<Arena>> {
        self.streams
            .values()
            .chain(self.threads.iter())
            .chain(self.retired.iter().map(|(a, _)| a))
            .cloned()
            .collect()
    }

    /// A large allocation of `size` bytes (a multiple of 256, above [`SUPERBLOCK_SIZE`]): best fit
    /// in the free space.
    pub(crate) fn allocate_large(&mut self, size: usize) -> Option<usize> {
        let block = self.free.take_best_fit(size)?;
        self.large.insert(block.addr, size);
        self.large_bytes += size;
        Some(block.addr)
    }

    /// Frees a large allocation.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `addr` is not a live large allocation of `size` bytes.
    pub(crate) fn free_large(&mut self, addr: usize, size: usize) -> Result<()> {
        match self.large.get(&addr) {
            Some(&s) if s == size => {
                self.large.remove(&addr);
                self.large_bytes -= size;
                self.free.insert(addr, size, self.base, ());
                Ok(())
            }
            Some(&s) => Err(Error::invalid(format!(
                "{addr:#x} was allocated with {s} bytes (rounded) but freed with {size}"
            ))),
            None => Err(Error::invalid(format!(
                "{addr:#x} (+{size}) is not a live allocation of this arena"
            ))),
        }
    }

    /// A superblock for an arena that needs `size` (≤ [`SUPERBLOCK_SIZE`]) bytes:
    /// 1. the lowest orphan superblock with room for it;
    /// 2. else a new superblock of [`SUPERBLOCK_SIZE`] from the smallest free range that holds one
    ///    (the whole range when less than another superblock would be left over);
    /// 3. else, when free space is so fragmented that no range holds a full superblock, the
    ///    smallest range that holds `size`, whole.
    pub(crate) fn acquire(&mut self, size: usize) -> Option<Superblock> {
        if let Some(sb) = self.orphans.take_first_that_fits(size) {
            return Some(sb);
        }
        self.acquire_spare()
            .or_else(|| self.carve(self.free.peek_best_fit(size)?))
    }

    /// An empty superblock of [`SUPERBLOCK_SIZE`] from the free space (the whole free range when
    /// less than another superblock would be left of it): what [`Global::acquire`] takes when no
    /// orphan fits, and the spares of an arena that takes a few at once.
    pub(crate) fn acquire_spare(&mut self) -> Option<Superblock> {
        let (addr, block) = self.free.peek_best_fit(SUPERBLOCK_SIZE)?;
        let size = if block - SUPERBLOCK_SIZE < SUPERBLOCK_SIZE {
            block
        } else {
            SUPERBLOCK_SIZE
        };
        self.carve((addr, size))
    }

    fn carve(&mut self, (addr, size): (usize, usize)) -> Option<Superblock> {
        let taken = self.free.take_prefix(addr, size)?;
        Some(Superblock::new(taken.addr, taken.size))
    }

    /// Takes back a superblock from an arena: an empty one joins the free space (coalescing with
    /// its neighbours), one with live blocks becomes an orphan.
    pub(crate) fn release(&mut self, sb: Superblock) {
        if sb.is_empty() {
            self.free.insert(sb.start(), sb.size(), self.base, ());
        } else {
            self.orphans.insert(sb);
        }
    }

    /// Frees a small block of an orphan superblock, if an orphan holds it; an orphan that becomes
    /// empty joins the free space.
    ///
    /// # Errors
    /// As [`Superblock::free`].
    pub(crate) fn free_in_orphan(&mut self, addr: usize, size: usize) -> Result<Freed> {
        let freed = self.orphans.free(addr, size)?;
        if let Freed::Done {
            now_empty: true,
            superblock,
        } = freed
        {
            if let Some(sb) = self.orphans.remove(superblock) {
                self.release(sb);
            }
        }
        Ok(freed)
    }

    /// The state of the global arena, for the dump.
    pub(crate) fn describe(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "Global arena: [{:#x}, +{}): free {} in {} ranges (largest {}), {} large allocations ({} bytes), {} orphan superblocks",
            self.base,
            self.size,
            self.free.free_bytes(),
            self.free.len(),
            self.free.largest(),
            self.large.len(),
            self.large_bytes,
            self.orphans.len()
        );
        for b in self.free.iter() {
            let _ = writeln!(out, "  free [{:#x}, +{})", b.addr, b.size);
        }
        let mut large: Vec<_> = self.large.iter().collect();
        large.sort();
        for (addr, size) in large {
            let _ = writeln!(out, "  large [{addr:#x}, +{size})");
        }
        self.orphans.describe(out, "  orphan ");
    }

    /// Panics when an invariant is broken (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.free.check_invariants();
        self.orphans.check_invariants();
        assert!(
            self.orphans.iter().all(|sb| !sb.is_empty()),
            "an empty orphan was not returned to the free space"
        );
        assert_eq!(self.large.values().sum::<usize>(), self.large_bytes);
        for (&addr, &size) in &self.large {
            assert!(
                !self.free.overlaps(addr, size),
                "large allocation {addr:#x} is also free"
            );
            assert!(addr >= self.base && addr + size <= self.base + self.size);
        }
    }

    /// True when `[addr, addr + size)` overlaps free space (tests only).
    #[cfg(test)]
    pub(crate) fn free_overlaps(&self, addr: usize, size: usize) -> bool {
        self.free.overlaps(addr, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = SUPERBLOCK_SIZE;

    #[test]
    fn global_carves_superblocks_and_large_blocks_and_takes_them_back() {
        let base = 16 * MIB;
        let mut g = Global::new(base, 5 * MIB + MIB / 2);
        let sb = g.acquire(256).unwrap();
        assert_eq!((sb.start(), sb.size()), (base, MIB));
        let big = g.allocate_large(3 * MIB).unwrap();
        assert_eq!(big, base + MIB);
        // 1.5 MiB are left: a superblock takes all of it rather than leave a useless half.
        let sb2 = g.acquire(256).unwrap();
        assert_eq!(sb2.size(), MIB + MIB / 2);
        assert!(g.acquire(256).is_none());
        assert!(g.allocate_large(2 * MIB).is_none());
        g.release(sb);
        g.release(sb2);
        assert!(g.free_large(big, 2 * MIB).is_err(), "wrong size");
        g.free_large(big, 3 * MIB).unwrap();
        assert!(g.free_large(big, 3 * MIB).is_err(), "double free");
        assert_eq!(
            (g.free_bytes(), g.largest_free()),
            (5 * MIB + MIB / 2, 5 * MIB + MIB / 2)
        );
        g.check_invariants();
    }

    #[test]
    fn fragments_become_small_superblocks_only_as_a_last_resort() {
        let base = 16 * MIB;
        let mut g = Global::new(base, 4 * MIB);
        let a = g.allocate_large(MIB + MIB / 2).unwrap();
        let b = g.allocate_large(2 * MIB).unwrap();
        // MIB/2 left over, less than a superblock.
        let sb = g.acquire(4096).unwrap();
        assert_eq!((sb.start(), sb.size()), (base + 3 * MIB + MIB / 2, MIB / 2));
        assert!(g.acquire(4096).is_none());
        g.release(sb);
        g.free_large(a, MIB + MIB / 2).unwrap();
        g.free_large(b, 2 * MIB).unwrap();
        assert_eq!(g.largest_free(), 4 * MIB);
    }

    #[test]
    fn orphans_are_reused_first_and_rejoin_the_free_space_when_empty() {
        let base = 16 * MIB;
        let mut g = Global::new(base, 4 * MIB);
        let mut sb = g.acquire(256).unwrap();
        let p = sb.first_fit(1024).unwrap();
        g.release(sb);
        assert_eq!(
            g.orphans.len(),
            1,
            "a superblock with a live block becomes an orphan"
        );
        let mut again = g.acquire(256).unwrap();
        assert_eq!(
            again.start(),
            base,
            "the orphan is handed out before new space"
        );
        assert_eq!(again.used(), 1024);
        again.free(p, 1024).unwrap();
        g.release(again);
        assert_eq!(g.free_bytes(), 4 * MIB);

        let mut sb = g.acquire(256).unwrap();
        let p = sb.first_fit(1024).unwrap();
        g.release(sb);
        assert_eq!(
            g.free_in_orphan(p, 1024).unwrap(),
            Freed::Done {
                now_empty: true,
                superblock: base
            }
        );
        assert_eq!((g.orphans.len(), g.free_bytes()), (0, 4 * MIB));
        assert_eq!(g.free_in_orphan(p, 1024).unwrap(), Freed::NotHere);
        g.check_invariants();
    }
}
