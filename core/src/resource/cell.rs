//! Handle cells: what `self` of a Rust resource's [`rmm_resource`](super::rmm_resource) handle
//! points to, so that a released handle is a clear error instead of a read of freed memory.
//!
//! A cell belongs to one live `Arc` (found by its data pointer, so every handle of one resource has
//! the same `self`) and holds:
//! - a validity word: a magic number and a generation, changed when the cell is retired;
//! - the number of handle references (each also one strong reference of the `Arc`);
//! - the `Arc`'s data pointer.
//!
//! `self` is the cell's address with the generation in its top 16 bits ([`token`]). Cells live in
//! chunks that are never freed, and a retired cell goes to the back of a FIFO free list, so a stale
//! `self` always reads a cell (never freed memory) whose word no longer matches: releasing a handle
//! twice, or using it after its last release, is `Error::InvalidArgument`.
//!
//! A cell is retired when the last handle reference is released and it was the `Arc`'s last strong
//! reference. When the last reference is instead dropped on the Rust side (a resource that was
//! handed out, released, and later dropped by its Rust owner) the cell is not retired; a handle of
//! it used after that is undefined, as is a pointer that was never a handle, or a release that
//! races with another use of the same handle (see docs/testing.md, "C ABI handles").

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Result};

/// The high half of a live cell's word ("rmmH"); the low 16 bits are the generation.
const MAGIC: u64 = 0x726d_6d48 << 32;
/// Bits of a token that hold the generation.
const GEN_SHIFT: u32 = 48;
/// The address bits of a token.
const ADDR_MASK: usize = (1 << GEN_SHIFT) - 1;
/// Cells per chunk.
const CHUNK: usize = 256;

/// One handle cell (see the module docs). 64-byte aligned so that reference counting on one
/// resource does not share a cache line with another.
#[repr(C, align(64))]
pub(crate) struct Cell {
    word: AtomicU64,
    refs: AtomicUsize,
    data: AtomicUsize,
}

impl Cell {
    const fn new() -> Self {
        Cell {
            word: AtomicU64::new(0),
            refs: AtomicUsize::new(0),
            data: AtomicUsize::new(0),
        }
    }

    fn generation(&self) -> u16 {
        self.word.load(Ordering::Relaxed) as u16
    }

    /// The `Arc` data pointer of the resource behind this cell.
    pub(crate) fn data(&self) -> *mut c_void {
        self.data.load(Ordering::Acquire) as *mut c_void
    }

    /// Counts one more handle reference.
    pub(crate) fn add_ref(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one handle reference less; `Ok(true)` when it was the last one.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when no handle reference is left (released more often than
    /// retained), which is then not counted.
    pub(crate) fn drop_ref(&self, what: &str) -> Result<bool> {
        self.refs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(|previous| previous == 1)
            .map_err(|_| {
                Error::invalid(format!(
                    "{what}: the resource handle holds no reference (released twice?)"
                ))
            })
    }
}

struct Cells {
    /// Live cells by `Arc` data pointer.
    by_data: HashMap<usize, &'static Cell>,
    /// Retired cells, oldest first.
    free: VecDeque<&'static Cell>,
}

static CELLS: Mutex<Option<Cells>> = Mutex::new(None);

fn cells() -> MutexGuard<'static, Option<Cells>> {
    CELLS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `self` of a handle of `cell` at its current generation.
fn token(cell: &'static Cell) -> *mut c_void {
    let address = cell as *const Cell as usize;
    ((address & ADDR_MASK) | (usize::from(cell.generation()) << GEN_SHIFT)) as *mut c_void
}

/// The `self` of a handle of the resource whose `Arc` data pointer is `data`, counting
/// `add_refs` (0 or 1) more handle references.
pub(crate) fn handle_self(data: *const c_void, add_refs: usize) -> *mut c_void {
    let mut guard = cells();
    let cells = guard.get_or_insert_with(|| Cells {
        by_data: HashMap::new(),
        free: VecDeque::new(),
    });
    let key = data as usize;
    let cell = match cells.by_data.get(&key) {
        Some(cell) => *cell,
        None => {
            let cell = match cells.free.pop_front() {
                Some(cell) => cell,
                None => new_chunk(&mut cells.free),
            };
            cell.refs.store(0, Ordering::Relaxed);
            cell.data.store(key, Ordering::Release);
            let generation = cell.word.load(Ordering::Relaxed) as u16;
            cell.word
                .store(MAGIC | u64::from(generation), Ordering::Release);
            cells.by_data.insert(key, cell);
            cell
        }
    };
    cell.refs.fetch_add(add_refs, Ordering::Relaxed);
    token(cell)
}

/// A fresh chunk (never freed): its cells go to `free` but one, which is returned.
fn new_chunk(free: &mut VecDeque<&'static Cell>) -> &'static Cell {
    let chunk: &'static [Cell] = Box::leak((0..CHUNK).map(|_| Cell::new()).collect());
    free.extend(&chunk[1..]);
    &chunk[0]
}

/// The live cell behind a handle's `self`.
///
/// # Errors
/// [`Error::InvalidArgument`] when the handle's cell was retired (the handle was released) or
/// `self` is NULL.
///
/// # Safety
/// `this` is the `self` of a handle whose vtable is one of this copy of rmm-core's (a token made
/// here, maybe stale); anything else is undefined.
#[inline]
pub(crate) unsafe fn resolve(this: *mut c_void) -> Result<&'static Cell> {
    let bits = this as usize;
    let address = bits & ADDR_MASK;
    if address == 0 || address % std::mem::align_of::<Cell>() != 0 {
        return Err(not_a_handle());
    }
    // SAFETY: a token made here points into a chunk that is never freed (caller contract).
    let cell = unsafe { &*(address as *const Cell) };
    let expected = MAGIC | (bits >> GEN_SHIFT) as u64;
    if cell.word.load(Ordering::Acquire) != expected || cell.data.load(Ordering::Acquire) == 0 {
        return Err(released_handle());
    }
    Ok(cell)
}

// Out of line: every call of the C API resolves its handle, and builds these only on misuse.
#[cold]
#[inline(never)]
fn not_a_handle() -> Error {
    Error::invalid("resource handle: self is not a handle of this library")
}

#[cold]
#[inline(never)]
fn released_handle() -> Error {
    Error::invalid("resource handle used after its last release (the resource is gone)")
}

/// Retires `cell` (its last handle reference went with the `Arc`'s last strong reference): every
/// copy of its handles fails [`resolve`] from now on.
pub(crate) fn retire(cell: &'static Cell) {
    if let Some(cells) = cells().as_mut() {
        let data = cell.data.load(Ordering::Acquire);
        if cells
            .by_data
            .get(&data)
            .is_some_and(|c| std::ptr::eq(*c, cell))
        {
            cells.by_data.remove(&data);
        }
        retire_locked(cells, cell);
    }
}

/// Retires the cell of the `Arc` whose data pointer is `data`, if it has one (its last strong
/// reference is being dropped on the Rust side).
pub(crate) fn forget(data: *const c_void) {
    if let Some(cells) = cells().as_mut() {
        if let Some(cell) = cells.by_data.remove(&(data as usize)) {
            retire_locked(cells, cell);
        }
    }
}

fn retire_locked(cells: &mut Cells, cell: &'static Cell) {
    let generation = cell.generation().wrapping_add(1);
    cell.word.store(u64::from(generation), Ordering::Release);
    cell.data.store(0, Ordering::Release);
    cells.free.push_back(cell);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_resource_has_one_self_and_a_retired_cell_rejects_it() {
        let data = Box::into_raw(Box::new(7u64)) as *const c_void;
        let a = handle_self(data, 1);
        let b = handle_self(data, 0);
        assert_eq!(a, b, "every handle of one resource has the same self");
        // SAFETY: tokens made just above.
        let cell = unsafe { resolve(a) }.expect("live");
        assert_eq!(cell.data(), data as *mut c_void);
        assert!(cell.drop_ref("test").expect("one reference"));
        assert!(
            cell.drop_ref("test").is_err(),
            "a second release is refused"
        );
        retire(cell);
        // SAFETY: a stale token made here.
        let stale = unsafe { resolve(a) };
        assert!(stale.is_err_and(|e| e.to_string().contains("after its last release")));
        // A new resource at the same address gets a cell of a new generation (or another cell).
        let again = handle_self(data, 1);
        assert_ne!(again, a);
        // SAFETY: a stale and a live token made here.
        unsafe {
            assert!(resolve(a).is_err());
            let cell = resolve(again).expect("live");
            assert!(cell.drop_ref("test").expect("one"));
            retire(cell);
            drop(Box::from_raw(data as *mut u64));
        }
    }

    #[test]
    fn null_and_misaligned_selves_are_refused() {
        // SAFETY: rejected before any read.
        unsafe {
            assert!(resolve(std::ptr::null_mut()).is_err());
            assert!(resolve(8 as *mut c_void).is_err());
        }
    }
}
