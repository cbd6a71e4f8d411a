//! The owning device buffer handle of the C ABI (`rmm_device_buffer` in `rmm_c.h`): RMM's
//! `device_buffer` as an opaque pointer to a [`DeviceBuffer`].
//!
//! Ownership rules:
//! - a constructor writes an OWNING `rmm_device_buffer*` to `*out` (NULL on failure); the owner gives
//!   it back with [`rmm_device_buffer_free`], which frees the memory on the buffer's stream and
//!   device and releases the buffer's reference to its resource;
//! - a resource handle passed in is BORROWED: the buffer retains its own reference, so the resource
//!   lives at least as long as the memory. The empty handle `{NULL, NULL}` means the current
//!   device's resource (RMM's default argument `get_current_device_resource_ref()`), which the
//!   buffer then shares;
//! - every other function BORROWS the buffer; one buffer must not be used from two threads at once
//!   when one of them changes it (resize, reserve, shrink_to_fit, set_stream, free).

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::streams::stream_from_c;
use rmm_core::buffer::DeviceBuffer;
use rmm_core::cuda::Stream;
use rmm_core::error::{Error, Result};
use rmm_core::registry;
use rmm_core::resource::guard::{guarded, hand_out, hand_out_ptr, null_out, put};
use rmm_core::resource::AnyResource;
use rmm_core::resource::{rmm_error, rmm_resource};

/// An owning device buffer (opaque in C): allocation, size, capacity, alignment, stream, resource
/// and device of one [`DeviceBuffer`], behind a validity word.
///
/// Freeing poisons the word and drops the buffer, but keeps the box itself in a quarantine of the
/// last [`QUARANTINE`] freed buffers, so a buffer freed twice, or used after its free, is
/// `RMM_ERROR_INVALID_ARGUMENT` (or the documented neutral value of a getter) while it is there.
pub struct rmm_device_buffer {
    word: AtomicU64,
    buffer: ManuallyDrop<DeviceBuffer>,
}

/// The word of a live buffer ("rmmDevBf").
const LIVE: u64 = u64::from_be_bytes(*b"rmmDevBf");
/// The word of a freed buffer.
const FREED: u64 = u64::from_be_bytes(*b"rmmFreed");
/// How many freed buffer boxes are kept before the oldest is given back to the allocator.
pub const QUARANTINE: usize = 4096;

/// Freed buffers, oldest first (their addresses).
static FREED_BOXES: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());

/// A new owner of the BORROWED `resource`, or the current device's resource for the empty handle.
///
/// # Safety
/// `resource` is live, empty, or fails the check.
unsafe fn resource_or_current(resource: rmm_resource) -> Result<AnyResource> {
    if resource.is_null() {
        registry::current_resource()
    } else {
        // SAFETY: caller contract.
        unsafe { AnyResource::from_borrowed_handle(resource) }
    }
}

/// Boxes the buffer `f` makes into `*out` (OWNING), catching errors and panics; `*out` is NULL on
/// failure. `stream` and `resource` are the constructor's (the resource BORROWED; empty: current).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes; `resource` is live, empty, or fails the check.
unsafe fn new_buffer(
    out: *mut *mut rmm_device_buffer,
    err: *mut rmm_error,
    stream: *mut c_void,
    resource: rmm_resource,
    f: impl FnOnce(Stream, AnyResource) -> Result<DeviceBuffer>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            let buffer =
                ManuallyDrop::new(f(stream_from_c(stream), resource_or_current(resource)?)?);
            Ok(Box::into_raw(Box::new(rmm_device_buffer {
                word: AtomicU64::new(LIVE),
                buffer,
            })))
        })
    }
}

/// The live buffer behind a BORROWED pointer, or InvalidArgument for NULL or a freed buffer.
///
/// # Safety
/// `buf` is NULL, a buffer from a constructor here (maybe freed, while in quarantine), and not
/// changed by another thread during the borrow.
unsafe fn checked<'a>(buf: *const rmm_device_buffer) -> Result<&'a rmm_device_buffer> {
    // SAFETY: caller contract.
    let b = unsafe { buf.as_ref() }.ok_or_else(|| Error::invalid("the buffer must not be NULL"))?;
    match b.word.load(Ordering::Acquire) {
        LIVE => Ok(b),
        FREED => Err(Error::invalid(
            "the buffer was already freed (rmm_device_buffer_free)",
        )),
        _ => Err(Error::invalid("the pointer is not an rmm_device_buffer")),
    }
}

/// The buffer behind a BORROWED pointer.
///
/// # Safety
/// As for [`checked`].
unsafe fn borrow<'a>(buf: *const rmm_device_buffer) -> Result<&'a DeviceBuffer> {
    // SAFETY: caller contract.
    unsafe { checked(buf) }.map(|b| &*b.buffer)
}

/// The buffer behind a BORROWED pointer, for changing it.
///
/// # Safety
/// As for [`checked`]; no other thread uses the buffer during the borrow.
unsafe fn borrow_mut<'a>(buf: *mut rmm_device_buffer) -> Result<&'a mut DeviceBuffer> {
    // SAFETY: caller contract: checked live, and exclusively ours for the borrow.
    unsafe {
        checked(buf)?;
        Ok(&mut *(*buf).buffer)
    }
}

/// Frees an OWNING buffer (see [`rmm_device_buffer_free_checked`]).
///
/// # Safety
/// As for [`rmm_device_buffer_free_checked`].
unsafe fn free(buf: *mut rmm_device_buffer) -> Result<()> {
    if buf.is_null() {
        return Ok(());
    }
    // SAFETY: caller contract.
    let b = unsafe { checked(buf)? };
    b.word
        .compare_exchange(LIVE, FREED, Ordering::AcqRel, Ordering::Acquire)
        .map_err(|_| Error::invalid("the buffer was already freed (rmm_device_buffer_free)"))?;
    // SAFETY: the word went LIVE -> FREED here, once: this call owns the buffer and drops it once.
    let dropped = catch_unwind(AssertUnwindSafe(|| unsafe {
        ManuallyDrop::drop(&mut (*buf).buffer)
    }));
    quarantine(buf);
    dropped.map_err(|_| Error::invalid("a panic was caught while freeing the buffer"))
}

/// Puts a freed box (its word FREED, its buffer dropped or moved out) into the quarantine, giving
/// the oldest one back to the allocator when it is full.
fn quarantine(buf: *mut rmm_device_buffer) {
    let oldest = {
        let mut freed = FREED_BOXES.lock().unwrap_or_else(PoisonError::into_inner);
        freed.push_back(buf as usize);
        (freed.len() > QUARANTINE)
            .then(|| freed.pop_front())
            .flatten()
    };
    if let Some(oldest) = oldest {
        // SAFETY: a box from `new_buffer`/`into_raw` whose buffer was dropped or moved out
        // (ManuallyDrop: not again).
        drop(unsafe { Box::from_raw(oldest as *mut rmm_device_buffer) });
    }
}

/// A new OWNING handle of `buffer` (capsules.rs: a buffer adopted from an export).
pub(crate) fn into_raw(buffer: DeviceBuffer) -> *mut rmm_device_buffer {
    Box::into_raw(Box::new(rmm_device_buffer {
        word: AtomicU64::new(LIVE),
        buffer: ManuallyDrop::new(buffer),
    }))
}

/// Moves the buffer out of an OWNING handle, which is then freed as by `rmm_device_buffer_free`
/// (quarantined) without freeing the memory (capsules.rs: a buffer exported).
///
/// # Errors
/// InvalidArgument for NULL, a freed buffer or a pointer that is not a buffer; nothing is taken.
///
/// # Safety
/// As for [`checked`]; the caller owns `buf` and does not use it afterwards on success.
pub(crate) unsafe fn take(buf: *mut rmm_device_buffer) -> Result<DeviceBuffer> {
    // SAFETY: caller contract.
    let b = unsafe { checked(buf)? };
    b.word
        .compare_exchange(LIVE, FREED, Ordering::AcqRel, Ordering::Acquire)
        .map_err(|_| Error::invalid("the buffer was already freed (rmm_device_buffer_free)"))?;
    // SAFETY: the word went LIVE -> FREED here, once: the buffer is moved out once.
    let buffer = unsafe { ManuallyDrop::take(&mut (*buf).buffer) };
    quarantine(buf);
    Ok(buffer)
}

/// A new uninitialized buffer of `size` bytes aligned to `alignment` (a power of two), allocated
/// from `resource` (BORROWED; empty: the current device's) on `stream`. Size 0 allocates nothing.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a bad alignment or a NULL `out`; the resource's error
/// (`RMM_ERROR_OUT_OF_MEMORY`, ...).
///
/// # Safety
/// `stream` is 0, a special handle or a live stream; `resource` is live or empty; `out` and `err`
/// are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_new(
    size: usize,
    alignment: usize,
    stream: *mut c_void,
    resource: rmm_resource,
    out: *mut *mut rmm_device_buffer,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        new_buffer(out, err, stream, resource, |s, r| {
            DeviceBuffer::with_alignment(size, alignment, s, r)
        })
    }
}

/// A new buffer as [`rmm_device_buffer_new`] holding a copy of `size` bytes at `src` (host, pinned,
/// managed or device memory), copied asynchronously on `stream`.
///
/// # Errors
/// As [`rmm_device_buffer_new`]; `RMM_ERROR_INVALID_ARGUMENT` for a NULL `src` with `size > 0`; the
/// copy's error (in host mode, memory that is not host-accessible cannot be copied).
///
/// # Safety
/// `src` is readable for `size` bytes until the copy has completed on `stream`; the rest as for
/// [`rmm_device_buffer_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_new_copy(
    src: *const c_void,
    size: usize,
    alignment: usize,
    stream: *mut c_void,
    resource: rmm_resource,
    out: *mut *mut rmm_device_buffer,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract (`src` readable for `size` bytes until the copy completes).
    unsafe {
        new_buffer(out, err, stream, resource, |s, r| {
            DeviceBuffer::from_raw_copy_with_alignment(src.cast(), size, alignment, s, r)
        })
    }
}

/// A deep copy of the `size` bytes of `other` into a new buffer with the same alignment and a
/// capacity equal to the size, allocated from `resource` (BORROWED; empty: the current device's) and
/// copied asynchronously on `stream` (RMM's `device_buffer(other, stream, mr)`).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `other` or `out`; the allocation's or the copy's error.
///
/// # Safety
/// `other` is NULL or a live buffer whose contents stay valid until the copy has completed on
/// `stream`; the rest as for [`rmm_device_buffer_new`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_copy(
    other: *const rmm_device_buffer,
    stream: *mut c_void,
    resource: rmm_resource,
    out: *mut *mut rmm_device_buffer,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        new_buffer(out, err, stream, resource, |s, r| {
            borrow(other)?.try_clone_on(s, r)
        })
    }
}

/// Frees an OWNING buffer: its memory goes back to its resource on the buffer's stream and device,
/// and its reference to the resource is released. NULL is a no-op. A failure to free, or a buffer
/// freed twice, is logged (this function cannot report it; [`rmm_device_buffer_free_checked`] does).
///
/// # Safety
/// `buf` is NULL or an owning buffer from a constructor here, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_free(buf: *mut rmm_device_buffer) {
    // SAFETY: caller contract.
    if let Err(e) = unsafe { free(buf) } {
        tracing::error!("rmm_device_buffer_free: {e}");
    }
}

/// [`rmm_device_buffer_free`] that reports: `RMM_ERROR_INVALID_ARGUMENT` for a buffer already
/// freed (detected while it is among the last 4096 freed buffers; see `rmm_c.h`).
///
/// # Safety
/// `buf` is NULL or a buffer from a constructor here; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_free_checked(
    buf: *mut rmm_device_buffer,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || free(buf)) }
}

/// The buffer's memory (NULL when nothing is allocated, and for a NULL `buf`).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_data(buf: *const rmm_device_buffer) -> *mut c_void {
    // SAFETY: caller contract.
    unsafe { borrow(buf) }.map_or(std::ptr::null_mut(), |b| b.as_ptr().cast_mut().cast())
}

/// The bytes in use (0 for a NULL `buf`).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_size(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: caller contract.
    unsafe { borrow(buf) }.map_or(0, DeviceBuffer::size)
}

/// The bytes allocated, at least the size (0 for a NULL `buf`).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_capacity(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: caller contract.
    unsafe { borrow(buf) }.map_or(0, DeviceBuffer::capacity)
}

/// The alignment the memory is allocated with (0 for a NULL `buf`).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_alignment(buf: *const rmm_device_buffer) -> usize {
    // SAFETY: caller contract.
    unsafe { borrow(buf) }.map_or(0, DeviceBuffer::alignment)
}

/// The stream the buffer's work and final free are ordered on (NULL, the default stream, for a NULL
/// `buf`).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_stream(buf: *const rmm_device_buffer) -> *mut c_void {
    // SAFETY: caller contract.
    unsafe { borrow(buf) }.map_or(std::ptr::null_mut(), |b| b.stream().as_raw() as *mut c_void)
}

/// Orders the buffer's future work and its final free on `stream`. The caller synchronizes `stream`
/// with the old one if work is still queued there.
///
/// # Safety
/// `buf` is NULL or a live buffer no other thread uses meanwhile; `stream` is 0, a special handle or
/// a stream that outlives its use by the buffer; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_set_stream(
    buf: *mut rmm_device_buffer,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            borrow_mut(buf)?.set_stream(stream_from_c(stream));
            Ok(())
        })
    }
}

/// Grows the capacity to at least `new_capacity` bytes, keeping size and contents (a reallocation
/// copies on `stream`); makes `stream` the buffer's stream first, as RMM does.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL `buf`; the allocation's or the copy's error, after which
/// the buffer is unchanged except for its stream.
///
/// # Safety
/// As for [`rmm_device_buffer_set_stream`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_reserve(
    buf: *mut rmm_device_buffer,
    new_capacity: usize,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            borrow_mut(buf)?.reserve(new_capacity, stream_from_c(stream))
        })
    }
}

/// Sets the size to `new_size` bytes: in place within the capacity, else reallocated to exactly
/// `new_size` bytes with the contents copied on `stream`. New bytes are uninitialized. Makes `stream`
/// the buffer's stream first, as RMM does.
///
/// # Errors
/// As [`rmm_device_buffer_reserve`].
///
/// # Safety
/// As for [`rmm_device_buffer_set_stream`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_resize(
    buf: *mut rmm_device_buffer,
    new_size: usize,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            borrow_mut(buf)?.resize(new_size, stream_from_c(stream))
        })
    }
}

/// Reallocates to exactly the size when the capacity is larger, copying on `stream`; makes `stream`
/// the buffer's stream first, as RMM does.
///
/// # Errors
/// As [`rmm_device_buffer_reserve`].
///
/// # Safety
/// As for [`rmm_device_buffer_set_stream`].
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_shrink_to_fit(
    buf: *mut rmm_device_buffer,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            borrow_mut(buf)?.shrink_to_fit(stream_from_c(stream))
        })
    }
}

/// The buffer's resource, as an OWNING handle in `*out` (the caller releases it).
///
/// # Safety
/// `buf` is NULL or a live buffer; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_memory_resource(
    buf: *const rmm_device_buffer,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { hand_out(out, err, || Ok(borrow(buf)?.memory_resource().clone())) }
}

/// The device the buffer was made on (and is freed on) into `*out`; -1 for a buffer made in host
/// mode, where there is no device.
///
/// # Safety
/// `buf` is NULL or a live buffer; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_device_buffer_device(
    buf: *const rmm_device_buffer,
    out: *mut c_int,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            let device = borrow(buf)?.device().map_or(-1, |d| d as c_int);
            put(out, device, "out")
        })
    }
}

#[cfg(test)]
mod tests;
