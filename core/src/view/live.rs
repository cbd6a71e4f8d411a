//! Acquire and release of C view structs, with `PyObject_GetBuffer`/`PyBuffer_Release` semantics.
//!
//! [`acquire`] fills a caller-owned [`rmm_strided_view`] from a [`StridedMemoryView`], which it keeps
//! in a process-wide table under the view's generation (the struct's validity word). [`release`]
//! takes it out again (freeing the shape and stride storage and letting go of the producer) and
//! clears the struct. A struct that was already released, was never acquired, or is a copy of one
//! released through another copy is refused with [`Error::InvalidArgument`], never dereferenced.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use super::strided::{check_alive, rmm_strided_view, StridedMemoryView};
use crate::error::{Error, Result};

fn table() -> &'static Mutex<HashMap<u64, StridedMemoryView>> {
    static LIVE: OnceLock<Mutex<HashMap<u64, StridedMemoryView>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Hands `view` to C: `*out` gets its struct; the view lives until [`release`].
///
/// # Errors
/// [`Error::InvalidArgument`] for a NULL `out` (the view is dropped then).
///
/// # Safety
/// `out` is NULL or valid for writes.
pub unsafe fn acquire(view: StridedMemoryView, out: *mut rmm_strided_view) -> Result<()> {
    if out.is_null() {
        return Err(Error::invalid("the view out-pointer must not be NULL"));
    }
    let raw = *view.as_raw();
    table()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(raw.generation, view);
    // SAFETY: caller contract.
    unsafe { out.write(raw) };
    Ok(())
}

/// Why `raw` is not a live view acquired through this table, or `None` when it is.
fn invalid(raw: &rmm_strided_view, live: &HashMap<u64, StridedMemoryView>) -> Option<Error> {
    if let Err(e) = check_alive(raw) {
        return Some(e);
    }
    (!live.contains_key(&raw.generation)).then(|| {
        Error::invalid(format!(
            "the strided view (generation {}) was not acquired here: release it where it was acquired",
            raw.generation
        ))
    })
}

/// Runs `f` on the live view behind `raw`.
///
/// # Errors
/// [`Error::InvalidArgument`] for NULL or a view that is not live (see the module doc).
///
/// # Safety
/// `raw` is NULL or valid for reads.
pub unsafe fn with_view<R>(
    raw: *const rmm_strided_view,
    f: impl FnOnce(&StridedMemoryView) -> R,
) -> Result<R> {
    // SAFETY: caller contract.
    let raw = unsafe { raw.as_ref() }.ok_or_else(|| Error::invalid("the view must not be NULL"))?;
    let live = table().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = invalid(raw, &live) {
        return Err(e);
    }
    Ok(f(&live[&raw.generation]))
}

/// Releases the view behind `raw` and clears `*raw` (generation 0, NULL pointers).
///
/// # Errors
/// [`Error::InvalidArgument`] for NULL, a double release or a view that is not live; `*raw` is
/// left as it was then.
///
/// # Safety
/// `raw` is NULL or valid for reads and writes.
pub unsafe fn release(raw: *mut rmm_strided_view) -> Result<()> {
    // SAFETY: caller contract.
    let slot =
        unsafe { raw.as_mut() }.ok_or_else(|| Error::invalid("the view must not be NULL"))?;
    let view = {
        let mut live = table().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = invalid(slot, &live) {
            return Err(e);
        }
        live.remove(&slot.generation)
    };
    *slot = rmm_strided_view::EMPTY;
    // The producer's release (a DLPack deleter, a Python object) runs outside the lock.
    drop(view);
    Ok(())
}

/// The number of views acquired and not yet released (for leak checks in tests).
pub fn live_count() -> usize {
    table().lock().unwrap_or_else(PoisonError::into_inner).len()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::view::dlpack::{device_type, type_code, DLDataType, DLDevice};
    use crate::view::strided::ViewParts;
    use crate::view::ViewOwner;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Flag(Arc<AtomicUsize>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A 2-byte host view whose owner counts its release in `released`.
    pub(crate) fn view(released: &Arc<AtomicUsize>) -> StridedMemoryView {
        let parts = ViewParts {
            ptr: 0x40,
            shape: vec![2],
            strides: None,
            dtype: DLDataType::new(type_code::UINT, 8),
            device: DLDevice {
                device_type: device_type::CPU,
                device_id: 0,
            },
            readonly: false,
            subbyte_padded: false,
        };
        StridedMemoryView::new(parts, Some(ViewOwner::new(Flag(released.clone())))).unwrap()
    }

    #[test]
    fn release_frees_once_and_a_second_release_is_an_error() {
        let released = Arc::new(AtomicUsize::new(0));
        let mut raw = rmm_strided_view::EMPTY;
        // SAFETY: `raw` is a valid struct on the stack.
        unsafe { acquire(view(&released), &mut raw).unwrap() };
        let copy = raw;
        assert_eq!(
            // SAFETY: as above.
            unsafe { with_view(&raw, |v| v.shape().to_vec()) }.unwrap(),
            vec![2]
        );
        // SAFETY: as above.
        unsafe { release(&mut raw).unwrap() };
        assert_eq!(released.load(Ordering::SeqCst), 1);
        assert_eq!(raw.generation, 0);
        assert!(raw.shape.is_null());
        // SAFETY: as above.
        let again = unsafe { release(&mut raw) }.unwrap_err();
        assert!(again.to_string().contains("released"), "{again}");
        let mut stale = copy;
        // SAFETY: `stale` is a valid struct whose pointers are never read.
        let e = unsafe { release(&mut stale) }.unwrap_err();
        assert!(e.to_string().contains("not live"), "{e}");
        // SAFETY: as above.
        assert!(unsafe { with_view(&copy, |_| ()) }.is_err());
        // SAFETY: NULL is refused.
        assert!(unsafe { release(std::ptr::null_mut()) }.is_err());
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_never_acquired_or_forged_struct_is_refused() {
        let mut zero = rmm_strided_view::EMPTY;
        // SAFETY: a valid struct.
        assert!(unsafe { release(&mut zero) }.is_err());
        let mut forged = rmm_strided_view {
            generation: u64::MAX - 7,
            ..rmm_strided_view::EMPTY
        };
        // SAFETY: a valid struct whose pointers are never read.
        assert!(unsafe { release(&mut forged) }.is_err());
    }
}
