//! One item per (owner, thread), found without a lock: a live set's thread slots
//! ([`live_slot`](super::live_slot)) and a core's fronts
//! ([`front`](super::stream_ordered::front)) are both kept this way.
//!
//! Each thread keeps its items in a list (with a weak reference to their owners) and remembers the
//! last item used per `number % WAYS`, so that the item of an owner it used last is one comparison
//! away. The list and the remembered items are two thread-locals, declared by each owner type:
//! the remembered ones have no destructor, so reading them costs no check of the thread's state.
//! At the thread's end every owner still alive hears of its item ([`Owner::item_gone`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::thread::LocalKey;

/// Remembered items per thread (and owner type).
pub(super) const WAYS: usize = 8;

/// An owner's number and its item, per `number % WAYS` (0: none; numbers start at 1).
pub(super) type Remembered<T> = [Cell<(u64, *const T)>; WAYS];

/// A thread's items of one owner type, one per owner it used.
pub(super) struct Items<O: Owner>(Vec<(Weak<O>, Arc<O::Item>)>);

impl<O: Owner> Items<O> {
    /// No items (the `const` initializer of the thread-local).
    pub(super) const fn new() -> Self {
        Self(Vec::new())
    }
}

/// An item's count of its owner thread's calls in a row that it turned away (a front full, a slot
/// taken), after which the caller moves its content out for the new one: the owner alone counts,
/// so an atomic only for `Sync`, with relaxed loads and stores and no read-modify-write.
#[derive(Debug)]
pub(super) struct Refusals(AtomicU32);

impl Refusals {
    pub(super) const fn new() -> Self {
        Self(AtomicU32::new(0))
    }

    /// Owner only: counts one more refusal; true once `limit` are reached in a row.
    #[inline]
    pub(super) fn one_more(&self, limit: u32) -> bool {
        let refused = self.0.load(Ordering::Relaxed).saturating_add(1);
        self.0.store(refused, Ordering::Relaxed);
        refused >= limit
    }

    /// Owner only: the item took one in; the count starts again.
    #[inline]
    pub(super) fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// What owns one item per thread.
pub(super) trait Owner: Sized + 'static {
    type Item: 'static;
    /// The thread's items of this owner type.
    const ITEMS: &'static LocalKey<RefCell<Items<Self>>>;
    /// The thread's remembered items of this owner type (a thread-local without a destructor).
    const REMEMBERED: &'static LocalKey<Remembered<Self::Item>>;
    /// The owner's process-unique number (from 1, never reused).
    fn number(&self) -> u64;
    /// The number of the owner `item` was made for.
    fn owner_of(item: &Self::Item) -> u64;
    /// The owner, weakly (the thread's list must not keep it alive).
    fn weak(&self) -> Weak<Self>;
    /// A new item, listed in the owner by the caller ([`Owner::item_made`]).
    fn new_item(&self) -> Self::Item;
    /// A thread made its item (on its first use of this owner).
    fn item_made(&self, item: &Arc<Self::Item>);
    /// A thread that made an item ends.
    fn item_gone(&self, item: &Arc<Self::Item>);
}

impl<O: Owner> Drop for Items<O> {
    fn drop(&mut self) {
        // First: the remembered items must not point at items this drops (they outlive this: no
        // destructor).
        let _ = O::REMEMBERED.try_with(|r| r.iter().for_each(|e| e.set((0, std::ptr::null()))));
        for (owner, item) in self.0.drain(..) {
            if let Some(owner) = owner.upgrade() {
                owner.item_gone(&item);
            }
        }
    }
}

/// Runs `f` on the calling thread's item of `owner`, made and listed in the owner on first use when
/// `make` (else `None` for a thread without one); `None` while the thread is ending (its items are
/// gone).
#[inline]
pub(super) fn with<O: Owner, R>(owner: &O, make: bool, f: impl FnOnce(&O::Item) -> R) -> Option<R> {
    let number = owner.number();
    let (remembered, item) = O::REMEMBERED.with(|r| r[number as usize % WAYS].get());
    if remembered == number {
        // SAFETY: `REMEMBERED` names an item of `ITEMS` (set below from an entry's `Arc`). Entries
        // leave `ITEMS` only when their owner is gone (`retain` below) or with `ITEMS` itself, whose
        // drop first clears `REMEMBERED`; `owner` is alive (borrowed), and numbers are never
        // reused, so the entry of owner `number` is still in `ITEMS` and its `Arc` keeps the item
        // alive.
        return Some(f(unsafe { &*item }));
    }
    with_slow(owner, make, f)
}

#[cold]
fn with_slow<O: Owner, R>(owner: &O, make: bool, f: impl FnOnce(&O::Item) -> R) -> Option<R> {
    let number = owner.number();
    let remember = |item: &Arc<O::Item>| {
        O::REMEMBERED.with(|r| r[number as usize % WAYS].set((number, Arc::as_ptr(item))));
    };
    O::ITEMS
        .try_with(|items| {
            let mut items = items.try_borrow_mut().ok()?;
            if let Some((_, item)) = items.0.iter().find(|(_, i)| O::owner_of(i) == number) {
                remember(item);
                return Some(f(item));
            }
            if !make {
                return None;
            }
            // Owners of this thread's past that are gone: their items go too.
            items.0.retain(|(o, _)| o.strong_count() > 0);
            let item = Arc::new(owner.new_item());
            owner.item_made(&item);
            items.0.push((owner.weak(), item.clone()));
            remember(&item);
            Some(f(&item))
        })
        .ok()
        .flatten()
}
