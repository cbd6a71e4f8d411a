//! [`ViewOwner`]: a type-erased, reference-counted owner that keeps the producer of a view alive.
//!
//! Whatever keeps the memory valid (a [`DeviceBuffer`](crate::DeviceBuffer), a consumed DLPack
//! tensor whose deleter must run, a Python object, an exported `Py_buffer`) is moved into one; the
//! producer is released (its value dropped) when the last clone goes, i.e. when the last view or
//! export made from it is released.

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use super::dlpack::{DLManagedTensor, DLManagedTensorVersioned};

/// A shared, type-erased owner of a view's producer. Cloning shares it; the producer is dropped
/// with the last clone.
#[derive(Clone)]
pub struct ViewOwner(Arc<dyn Any + Send + Sync>);

impl ViewOwner {
    /// An owner of `producer`, dropped when the last clone of the owner is.
    pub fn new<T: Any + Send + Sync>(producer: T) -> Self {
        ViewOwner(Arc::new(producer))
    }

    /// The producer, if it has type `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.as_ref().downcast_ref::<T>()
    }

    /// An address that identifies the producer (the same for every clone), for C's `owner` field.
    pub fn id(&self) -> *const c_void {
        Arc::as_ptr(&self.0) as *const () as *const c_void
    }

    /// The number of live clones (views and exports that keep the producer alive).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl fmt::Debug for ViewOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ViewOwner({:p}, {} holders)", self.id(), self.holders())
    }
}

/// A consumed DLPack 1.x tensor: its deleter runs (once) when this is dropped.
#[derive(Debug)]
pub struct ManagedTensorVersioned(*mut DLManagedTensorVersioned);

// SAFETY: DLPack lets the consumer call the deleter from any thread; the pointer is only read
// through `&self` (immutable fields) and freed once, in drop.
unsafe impl Send for ManagedTensorVersioned {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for ManagedTensorVersioned {}

impl ManagedTensorVersioned {
    /// Takes over `tensor`: its deleter runs when the result is dropped.
    ///
    /// # Safety
    /// `tensor` is a live managed tensor that nobody else will delete.
    pub unsafe fn new(tensor: *mut DLManagedTensorVersioned) -> Self {
        ManagedTensorVersioned(tensor)
    }

    /// The tensor.
    pub fn get(&self) -> &DLManagedTensorVersioned {
        // SAFETY: live until drop (constructor contract).
        unsafe { &*self.0 }
    }
}

impl Drop for ManagedTensorVersioned {
    fn drop(&mut self) {
        // SAFETY: the constructor's contract: we are the one consumer; the deleter runs once.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

/// A consumed legacy (unversioned) DLPack tensor: its deleter runs (once) when this is dropped.
#[derive(Debug)]
pub struct ManagedTensor(*mut DLManagedTensor);

// SAFETY: see ManagedTensorVersioned.
unsafe impl Send for ManagedTensor {}
// SAFETY: see ManagedTensorVersioned.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// Takes over `tensor`: its deleter runs when the result is dropped.
    ///
    /// # Safety
    /// `tensor` is a live managed tensor that nobody else will delete.
    pub unsafe fn new(tensor: *mut DLManagedTensor) -> Self {
        ManagedTensor(tensor)
    }

    /// The tensor.
    pub fn get(&self) -> &DLManagedTensor {
        // SAFETY: live until drop (constructor contract).
        unsafe { &*self.0 }
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        // SAFETY: the constructor's contract: we are the one consumer; the deleter runs once.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_producer_is_released_with_the_last_clone() {
        let released = Arc::new(AtomicUsize::new(0));
        let a = ViewOwner::new(Counted(released.clone()));
        let b = a.clone();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.holders(), 2);
        drop(a);
        assert_eq!(released.load(Ordering::SeqCst), 0);
        assert!(b.downcast_ref::<Counted>().is_some());
        drop(b);
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }
}
