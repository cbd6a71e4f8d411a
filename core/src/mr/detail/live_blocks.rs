//! The live allocations of one fixed-size bin, kept by position: one word per block of each
//! upstream chunk, found by the chunk that holds the pointer, instead of a hash-map entry per
//! allocation (docs/design/checked-frees.md, "Records by position").
//!
//! A binning resource with checked frees keeps one of these per fixed-size bin. An allocation
//! stores its [`granule`](super::live_set::granule) in its block's word; a free claims the word
//! back with one compare-and-swap, which succeeds only for a live allocation at exactly that
//! pointer with that granule: a double free, an interior pointer, a wrong size or alignment class,
//! or another resource's pointer finds no such word and changes nothing. Two threads freeing the
//! same pointer race on the one word, and one of them loses.
//!
//! The chunks are the bin's upstream regions. They change rarely (growth, out-of-memory give-back,
//! `release_unused`), so the directory from address to chunk is rebuilt whole under a mutex when
//! the engine's regions generation moved, and read without any lock behind a sequence counter (a
//! seqlock: a reader that overlapped a rebuild retries under the mutex). Directories and chunk
//! records are kept until the bin's record drops (a replaced directory stays readable for a reader
//! that started before; a record of a region given back is reused for a later one), so a pointer
//! read without the lock is always valid. Each reuse of a chunk record gets a new incarnation
//! number, stored in every word with the granule: a free that found the chunk before it was
//! reused cannot claim a word written after.
//!
//! A region that the host has no memory to record (its words, or a larger directory) is left out:
//! its allocations are recorded by the caller's hash map instead, and their frees, found in no
//! chunk here, go there too ([`Claim::Absent`]).

use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::aligned::{align_up, DEFAULT_ALIGNMENT};

/// Bits of a word that hold the chunk record's incarnation (the low ones; the granule is above).
const INCARNATION_BITS: u32 = 24;

/// Granules of blocks from here up do not fit a word beside the incarnation.
const MAX_BLOCK: usize = 1 << (u64::BITS - INCARNATION_BITS - 1);

/// The word of a live allocation of `granule` in a chunk record of `incarnation` (never 0: a
/// recorded granule is at least 256).
#[inline]
fn pack(granule: usize, incarnation: u32) -> u64 {
    ((granule as u64) << INCARNATION_BITS) | u64::from(incarnation)
}

/// The granule of a word.
#[inline]
fn unpack(word: u64) -> usize {
    (word >> INCARNATION_BITS) as usize
}

/// The incarnation of a word.
#[inline]
fn incarnation_of(word: u64) -> u32 {
    (word & ((1 << INCARNATION_BITS) - 1)) as u32
}

/// The pointer an allocation of `granule` made from the block at `block` has (blocks are 256-aligned;
/// a larger alignment class moves the pointer up within the block).
#[inline]
fn pointer_of(block: usize, granule: usize) -> usize {
    let alignment = 1usize << (granule & 63).max(DEFAULT_ALIGNMENT.trailing_zeros() as usize);
    align_up(block, alignment).unwrap_or(usize::MAX)
}

/// One word per block of a region (0: not live).
struct Chunk {
    words: Box<[AtomicU64]>,
}

/// A region as readers see it. Written only by a rebuild, inside the sequence counter's odd phase.
#[derive(Default)]
struct Entry {
    start: AtomicUsize,
    end: AtomicUsize,
    chunk: AtomicPtr<Chunk>,
    incarnation: AtomicU32,
}

/// The regions, sorted by start.
struct Directory {
    entries: Box<[Entry]>,
    len: AtomicUsize,
}

impl Directory {
    fn with_capacity(capacity: usize) -> Option<Box<Self>> {
        let mut entries = Vec::new();
        entries.try_reserve_exact(capacity).ok()?;
        entries.resize_with(capacity, Entry::default);
        Some(Box::new(Self {
            entries: entries.into_boxed_slice(),
            len: AtomicUsize::new(0),
        }))
    }
}

/// A region found for a pointer.
struct Found<'a> {
    start: usize,
    chunk: &'a Chunk,
    incarnation: u32,
}

/// A region a chunk record serves: start, end, incarnation.
type Region = (usize, usize, u32);

/// What the rebuilds own (under the mutex).
struct Books {
    /// Every directory made; the last is the current one. Boxed: readers hold pointers to them
    /// across the vector's growth.
    #[allow(clippy::vec_box)]
    directories: Vec<Box<Directory>>,
    /// Every chunk record made (boxed, as the directories), and the region it records now
    /// (`None`: free for reuse).
    chunks: Vec<(Box<Chunk>, Option<Region>)>,
    next_incarnation: u32,
}

/// A free that [`LiveBlocks::take`] found live: the word it cleared and what it held.
pub(crate) struct Taken<'a> {
    word: &'a AtomicU64,
    value: u64,
}

/// What [`LiveBlocks::take`] found.
pub(crate) enum Claim<'a> {
    /// A live allocation with the free's pointer and granule, now taken out of the record.
    Taken(Taken<'a>),
    /// A live allocation at that pointer, recorded with this other granule: nothing changed.
    Other(usize),
    /// Nothing here at that pointer (the caller's hash map may know it).
    Absent,
}

/// The live allocations of one fixed-size bin, by position (see the module docs).
pub(crate) struct LiveBlocks {
    block_size: usize,
    /// The block size's base-2 logarithm, when it is a power of two (a shift, not a division).
    shift: Option<u32>,
    /// Odd while a rebuild writes the current directory.
    seq: AtomicU64,
    /// The current directory (owned by `books`).
    current: AtomicPtr<Directory>,
    /// The engine's regions generation the directory was built from (`u64::MAX`: none yet).
    synced: AtomicU64,
    books: Mutex<Books>,
}

impl std::fmt::Debug for LiveBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveBlocks")
            .field("block_size", &self.block_size)
            .finish_non_exhaustive()
    }
}

impl LiveBlocks {
    /// A record for blocks of `block_size` bytes, or `None` when their granules do not fit a word
    /// (blocks of 2^39 bytes and more) or the host has no memory for an empty directory.
    pub(crate) fn new(block_size: usize) -> Option<Self> {
        if block_size == 0 || block_size >= MAX_BLOCK {
            return None;
        }
        let mut first = Directory::with_capacity(0)?;
        let current = AtomicPtr::new(&mut *first);
        Some(Self {
            block_size,
            shift: block_size
                .is_power_of_two()
                .then(|| block_size.trailing_zeros()),
            seq: AtomicU64::new(0),
            current,
            synced: AtomicU64::new(u64::MAX),
            books: Mutex::new(Books {
                directories: vec![first],
                chunks: Vec::new(),
                next_incarnation: 0,
            }),
        })
    }

    /// Records an allocation of `granule` at `ptr`, from a block of the bin whose regions
    /// `generation` numbers (the engine's regions generation, read after the block was taken) and
    /// `regions` lists (`None`: the host has no memory for the list). False when its region has no record here (the host had no memory for it):
    /// the caller records it itself.
    #[inline]
    pub(crate) fn record(
        &self,
        ptr: *mut u8,
        granule: usize,
        generation: impl Fn() -> u64,
        regions: impl FnOnce() -> Option<Vec<(usize, usize)>>,
    ) -> bool {
        if self.synced.load(Ordering::Acquire) != generation() {
            self.rebuild(generation, regions);
        }
        let addr = ptr as usize;
        let Some(found) = self.find(addr) else {
            return false;
        };
        let index = self.index(addr - found.start);
        let Some(word) = found.chunk.words.get(index) else {
            return false;
        };
        let value = pack(granule, found.incarnation);
        let old = word.load(Ordering::Relaxed);
        if old != 0 && incarnation_of(old) == found.incarnation {
            handed_out_twice(addr, unpack(old));
        }
        word.store(value, Ordering::Release);
        true
    }

    /// Takes the allocation at `ptr` out of the record when it is live with `granule`.
    #[inline]
    pub(crate) fn take(&self, ptr: *mut u8, granule: usize) -> Claim<'_> {
        let addr = ptr as usize;
        let Some(found) = self.find(addr) else {
            return Claim::Absent;
        };
        let index = self.index(addr - found.start);
        let Some(word) = found.chunk.words.get(index) else {
            return Claim::Absent;
        };
        let block = found.start + index * self.block_size;
        let value = pack(granule, found.incarnation);
        if pointer_of(block, granule) == addr {
            match word.compare_exchange(value, 0, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Claim::Taken(Taken { word, value }),
                Err(now) => return self.other(now, found.incarnation, block, addr),
            }
        }
        self.other(word.load(Ordering::Acquire), found.incarnation, block, addr)
    }

    /// The block at `offset` bytes into a chunk.
    #[inline]
    fn index(&self, offset: usize) -> usize {
        match self.shift {
            Some(shift) => offset >> shift,
            None => offset / self.block_size,
        }
    }

    /// What a word that does not hold the free's record says about `addr`.
    #[cold]
    fn other(&self, word: u64, incarnation: u32, block: usize, addr: usize) -> Claim<'_> {
        if word == 0
            || incarnation_of(word) != incarnation
            || pointer_of(block, unpack(word)) != addr
        {
            return Claim::Absent;
        }
        Claim::Other(unpack(word))
    }

    /// Puts back an allocation that [`LiveBlocks::take`] took out, when its free failed after all.
    pub(crate) fn restore(&self, taken: Taken<'_>) {
        taken.word.store(taken.value, Ordering::Release);
    }

    /// The granule of the live allocation at `ptr`, if this record holds one. Changes nothing.
    pub(crate) fn peek(&self, ptr: *mut u8) -> Option<usize> {
        let addr = ptr as usize;
        let found = self.find(addr)?;
        let index = self.index(addr - found.start);
        let word = found.chunk.words.get(index)?.load(Ordering::Acquire);
        let block = found.start + index * self.block_size;
        match self.other(word, found.incarnation, block, addr) {
            Claim::Other(granule) => Some(granule),
            _ => None,
        }
    }

    /// The region holding `addr`, read without the lock when no rebuild overlaps the read.
    #[inline]
    fn find(&self, addr: usize) -> Option<Found<'_>> {
        let before = self.seq.load(Ordering::Acquire);
        // SAFETY: `current` always points at a directory that `books` owns until `self` drops;
        // every field read through it is atomic.
        let directory = unsafe { &*self.current.load(Ordering::Acquire) };
        let found = Self::search(directory, addr);
        fence(Ordering::Acquire);
        if before & 1 == 0 && self.seq.load(Ordering::Relaxed) == before {
            return found;
        }
        self.find_locked(addr)
    }

    /// [`LiveBlocks::find`] under the mutex (no rebuild runs meanwhile).
    #[cold]
    fn find_locked(&self, addr: usize) -> Option<Found<'_>> {
        let _books = self.books.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: as in `find`; no rebuild writes while the mutex is held.
        let directory = unsafe { &*self.current.load(Ordering::Acquire) };
        Self::search(directory, addr)
    }

    /// The entry of `directory` holding `addr`.
    #[inline]
    fn search(directory: &Directory, addr: usize) -> Option<Found<'_>> {
        let len = directory
            .len
            .load(Ordering::Relaxed)
            .min(directory.entries.len());
        let entries = &directory.entries[..len];
        // A bin has few chunks at a time: a scan from the last, else a binary search.
        let entry = if len <= 8 {
            entries
                .iter()
                .rev()
                .find(|e| e.start.load(Ordering::Relaxed) <= addr)?
        } else {
            let after = entries.partition_point(|e| e.start.load(Ordering::Relaxed) <= addr);
            entries.get(after.checked_sub(1)?)?
        };
        let start = entry.start.load(Ordering::Relaxed);
        if addr >= entry.end.load(Ordering::Relaxed) {
            return None;
        }
        let chunk = entry.chunk.load(Ordering::Relaxed);
        // SAFETY: a non-null chunk pointer names a record that `books` owns until `self` drops.
        let chunk = unsafe { chunk.as_ref()? };
        Some(Found {
            start,
            chunk,
            incarnation: entry.incarnation.load(Ordering::Relaxed),
        })
    }

    /// Rebuilds the directory from the engine's regions. Both are read under the mutex, the
    /// generation first: rebuilds follow one another, each from regions at least as new as the
    /// last, so a region with live blocks never leaves the directory.
    #[cold]
    #[inline(never)]
    fn rebuild(
        &self,
        generation: impl Fn() -> u64,
        regions: impl FnOnce() -> Option<Vec<(usize, usize)>>,
    ) {
        let mut books = self.books.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = generation();
        if self.synced.load(Ordering::Acquire) == generation {
            return;
        }
        let Some(mut regions) = regions() else {
            // No memory for the list: keep the old directory, try again at the next allocation.
            return;
        };
        regions.sort_unstable();
        let books = &mut *books;
        // Records of regions that are gone become free for reuse; those that stay, by start.
        let mut kept: Vec<(usize, usize, usize, u32)> = Vec::new();
        if kept.try_reserve_exact(books.chunks.len()).is_err() {
            // No memory to rebuild: keep the old directory, try again at the next allocation.
            return;
        }
        for (i, (_, region)) in books.chunks.iter_mut().enumerate() {
            if let Some((start, end, incarnation)) = *region {
                if regions.binary_search(&(start, end - start)).is_ok() {
                    kept.push((start, end, i, incarnation));
                } else {
                    *region = None;
                }
            }
        }
        kept.sort_unstable();
        let mut rows: Vec<(usize, usize, *mut Chunk, u32)> = Vec::new();
        if rows.try_reserve_exact(regions.len()).is_err() {
            return;
        }
        for &(start, size) in &regions {
            let end = start + size;
            let row = match kept.binary_search_by_key(&start, |k| k.0) {
                Ok(k) if kept[k].1 == end => {
                    let (_, _, i, incarnation) = kept[k];
                    Some((
                        start,
                        end,
                        &mut *books.chunks[i].0 as *mut Chunk,
                        incarnation,
                    ))
                }
                _ => {
                    let incarnation = books.next_incarnation;
                    books.next_incarnation =
                        (books.next_incarnation + 1) & ((1 << INCARNATION_BITS) - 1);
                    let blocks = size / self.block_size;
                    Self::claim_chunk(books, blocks, (start, end, incarnation))
                        .map(|chunk| (start, end, chunk, incarnation))
                }
            };
            // A region without a record is left out (its allocations go to the caller's map).
            rows.extend(row);
        }
        // SAFETY: `current` points at the last directory of `books`.
        let directory = unsafe { &*self.current.load(Ordering::Acquire) };
        if rows.len() > directory.entries.len() {
            let grown = Directory::with_capacity(rows.len().next_power_of_two())
                .filter(|_| books.directories.try_reserve(1).is_ok());
            match grown {
                Some(mut grown) => {
                    // Filled before readers can see it.
                    Self::fill(&grown, &rows);
                    self.current.store(&mut *grown, Ordering::Release);
                    books.directories.push(grown);
                }
                None => {
                    // No memory for a larger directory: the regions that do not fit are left out.
                    rows.truncate(directory.entries.len());
                    self.write_in_place(directory, &rows);
                }
            }
        } else {
            self.write_in_place(directory, &rows);
        }
        self.synced.store(generation, Ordering::Release);
    }

    /// Rewrites the current directory, readers held off by the sequence counter.
    fn write_in_place(&self, directory: &Directory, rows: &[(usize, usize, *mut Chunk, u32)]) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        Self::fill(directory, rows);
        self.seq.store(seq + 2, Ordering::Release);
    }

    fn fill(directory: &Directory, rows: &[(usize, usize, *mut Chunk, u32)]) {
        for (entry, &(start, end, chunk, incarnation)) in directory.entries.iter().zip(rows) {
            entry.start.store(start, Ordering::Relaxed);
            entry.end.store(end, Ordering::Relaxed);
            entry.chunk.store(chunk, Ordering::Relaxed);
            entry.incarnation.store(incarnation, Ordering::Relaxed);
        }
        directory.len.store(rows.len(), Ordering::Release);
    }

    /// A chunk record of at least `blocks` words, all clear, now recording `region`: a free one
    /// reused, or a new one; `None` when the host has no memory for a new one.
    fn claim_chunk(books: &mut Books, blocks: usize, region: Region) -> Option<*mut Chunk> {
        if let Some((chunk, slot)) = books
            .chunks
            .iter_mut()
            .find(|(c, r)| r.is_none() && c.words.len() >= blocks)
        {
            for word in chunk.words.iter() {
                word.store(0, Ordering::Relaxed);
            }
            *slot = Some(region);
            return Some(&mut **chunk);
        }
        let mut words = Vec::new();
        words.try_reserve_exact(blocks).ok()?;
        words.resize_with(blocks, || AtomicU64::new(0));
        books.chunks.try_reserve(1).ok()?;
        let mut chunk = Box::new(Chunk {
            words: words.into_boxed_slice(),
        });
        let ptr: *mut Chunk = &mut *chunk;
        books.chunks.push((chunk, Some(region)));
        Some(ptr)
    }
}

// SAFETY: the raw pointers name directories and chunk records owned by `books` (behind its mutex)
// for as long as `self` lives; everything read or written through them is atomic.
unsafe impl Send for LiveBlocks {}
// SAFETY: as above.
unsafe impl Sync for LiveBlocks {}

/// Reports an engine bug: a live block handed out again.
#[cold]
#[inline(never)]
fn handed_out_twice(addr: usize, old: usize) {
    tracing::error!(
        "binning_memory_resource: {addr:#x} was handed out while still live ({old:#x}): this is a bug"
    );
}

#[cfg(test)]
mod tests;
