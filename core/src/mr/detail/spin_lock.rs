//! A test-and-set spin lock for critical sections of a few instructions (a hash-map insert, a
//! counter update): taking it is one atomic read-modify-write and releasing it a plain store,
//! where a mutex costs two read-modify-writes. A waiter spins a little, then yields its time slice
//! after each look, so a holder that was descheduled is not starved.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// `T` behind a spin lock (see the module docs). Meant for short sections that do not block.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only touched while `locked` is held (see `SpinLock::with`), which makes the
// lock a mutex around a `Send` value.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// `value`, unlocked.
    pub(crate) const fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held (released even if `f` unwinds). `f` must not take
    /// this lock again.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        if self.locked.swap(true, Ordering::Acquire) {
            self.wait();
        }
        /// Releases the lock even if `f` unwinds.
        struct Unlock<'a>(&'a AtomicBool);
        impl Drop for Unlock<'_> {
            #[inline]
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _unlock = Unlock(&self.locked);
        // SAFETY: the lock is held until `_unlock` drops, so this is the only reference to the value.
        f(unsafe { &mut *self.value.get() })
    }

    /// Takes the lock when another thread holds it.
    #[cold]
    fn wait(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if !self.locked.swap(true, Ordering::Acquire) {
                return;
            }
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with(|value| f.debug_tuple("SpinLock").field(value).finish())
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_turns() {
        let lock = SpinLock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        lock.with(|n| *n += 1);
                    }
                });
            }
        });
        assert_eq!(lock.with(|n| *n), 40_000);
    }

    #[test]
    fn a_panic_inside_releases_the_lock() {
        let lock = SpinLock::new(1);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock.with(|_| panic!("inside"));
        }));
        assert!(caught.is_err());
        assert_eq!(lock.with(|n| *n), 1);
    }
}
