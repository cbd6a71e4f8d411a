//! C functions for streams and stream-ordered memory operations (`rmm_stream_*`, `rmm_memcpy_async`,
//! `rmm_memset_async`, `rmm_prefetch` in `rmm_c.h`).
//!
//! A stream crosses as its raw handle (`void*`): the `CUstream`, which is also the runtime's
//! `cudaStream_t`, so a handle from CuPy, PyTorch or the CUDA runtime works as is. `NULL` (0),
//! `cudaStreamLegacy` (1) and `cudaStreamPerThread` (2) are the special default streams.
//!
//! Streams made by [`rmm_stream_create`] are owned by this library until [`rmm_stream_destroy`]: the
//! [`OwnedStream`]s are kept in a table keyed by handle, so destroying a handle this library did not
//! make (or destroying one twice) is an error instead of undefined behaviour.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock, PoisonError};

use rmm_core::cuda::{self, memory, DeviceId, OwnedStream, Stream, StreamFlags};
use rmm_core::error::{Error, Result};
use rmm_core::resource::guard::{guarded, hand_out_ptr, null_out, put};
use rmm_core::resource::rmm_error;

/// `rmm_stream_create` flag: the stream synchronizes with the legacy default stream (`cudaStreamDefault`).
pub const RMM_STREAM_SYNC_DEFAULT: c_int = 0;
/// `rmm_stream_create` flag: the stream does not synchronize with the legacy default stream
/// (`cudaStreamNonBlocking`).
pub const RMM_STREAM_NON_BLOCKING: c_int = 1;

/// The streams [`rmm_stream_create`] made and [`rmm_stream_destroy`] has not destroyed yet.
fn created_streams() -> &'static Mutex<HashMap<usize, OwnedStream>> {
    static STREAMS: OnceLock<Mutex<HashMap<usize, OwnedStream>>> = OnceLock::new();
    STREAMS.get_or_init(Default::default)
}

/// The [`Stream`] of a raw handle from C.
///
/// # Safety
/// `stream` is 0, a special handle, or a live stream (the C caller's contract).
pub(crate) unsafe fn stream_from_c(stream: *mut c_void) -> Stream {
    // SAFETY: caller contract.
    unsafe { Stream::from_raw(stream as usize) }
}

fn flags_from_c(flags: c_int) -> Result<StreamFlags> {
    match flags {
        RMM_STREAM_SYNC_DEFAULT => Ok(StreamFlags::SyncDefault),
        RMM_STREAM_NON_BLOCKING => Ok(StreamFlags::NonBlocking),
        other => Err(Error::invalid(format!(
            "stream flags {other} are neither RMM_STREAM_SYNC_DEFAULT (0) nor RMM_STREAM_NON_BLOCKING (1)"
        ))),
    }
}

/// Creates a stream on the current device with `flags` (an `RMM_STREAM_*` value) and writes its
/// handle to `*out` (NULL on failure). The caller destroys it with [`rmm_stream_destroy`].
///
/// # Errors
/// `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE` in host mode, `RMM_ERROR_INVALID_ARGUMENT` for
/// unknown flags or a NULL `out`, the driver's error otherwise.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_create(
    flags: c_int,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract on both pointers.
    unsafe {
        hand_out_ptr(out, err, || {
            let owned = OwnedStream::new(flags_from_c(flags)?)?;
            let handle = owned.stream().as_raw();
            created_streams()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(handle, owned);
            Ok(handle as *mut c_void)
        })
    }
}

/// Destroys a stream made by [`rmm_stream_create`]. Work already queued on it still completes.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a handle [`rmm_stream_create`] did not return, or one already
/// destroyed (the special handles included): nothing is destroyed then.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_destroy(stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let owned = created_streams()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&(stream as usize));
            match owned {
                // Dropped outside the lock: destruction calls into the driver and the pool hooks.
                Some(owned) => {
                    drop(owned);
                    Ok(())
                }
                None => Err(Error::invalid(format!(
                    "stream {stream:p} was not created by rmm_stream_create or is already destroyed"
                ))),
            }
        })
    }
}

/// Blocks until all work queued on `stream` has finished. In host mode the special handles 0, 1 and
/// 2 have nothing to wait for and succeed.
///
/// # Safety
/// `stream` is 0, a special handle or a live stream; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_synchronize(stream: *mut c_void, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || stream_from_c(stream).synchronize()) }
}

/// Writes 1 to `*idle_out` when all work queued on `stream` has finished, else 0. In host mode the
/// special handles 0, 1 and 2 are always idle.
///
/// # Safety
/// `stream` is 0, a special handle or a live stream; `idle_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_stream_query(
    stream: *mut c_void,
    idle_out: *mut c_int,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if idle_out.is_null() {
                return Err(null_out("idle_out"));
            }
            let idle = stream_from_c(stream).is_idle()?;
            put(idle_out, c_int::from(idle), "idle_out")
        })
    }
}

/// Copies `bytes` bytes from `src` to `dst`, ordered on `stream`: device, managed, pinned and
/// pageable host memory alike (the direction comes from the addresses); in host mode a `memmove`.
/// 0 bytes does nothing.
///
/// # Safety
/// `src` is readable and `dst` writable for `bytes` bytes until the copy has completed on `stream`;
/// `stream` is 0, a special handle or a live stream; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract, forwarded.
    unsafe {
        guarded(err, || {
            cuda::copy_async(dst.cast(), src.cast(), bytes, stream_from_c(stream))
        })
    }
}

/// Sets `bytes` bytes at `ptr` to `value` (converted to `unsigned char`), ordered on `stream`: device,
/// managed and pinned memory by the driver; pageable host memory from the host once the work queued
/// before on `stream` is done; in host mode a `memset`. 0 bytes does nothing.
///
/// # Safety
/// `ptr` is writable for `bytes` bytes until the fill has completed on `stream`; `stream` is 0, a
/// special handle or a live stream; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_memset_async(
    ptr: *mut c_void,
    value: c_int,
    bytes: usize,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // `memset` semantics: the value is converted to unsigned char.
    let byte = value as u8;
    // SAFETY: caller contract, forwarded.
    unsafe {
        guarded(err, || {
            cuda::set_async(ptr.cast(), byte, bytes, stream_from_c(stream))
        })
    }
}

/// Migrates `bytes` bytes of managed memory at `ptr` to `device`, ordered on `stream` (RMM's
/// `prefetch`). A no-op for memory that is not managed, and so always in host mode.
///
/// # Safety
/// `ptr` points to at least `bytes` bytes (or is not managed memory); `stream` is 0, a special handle
/// or a live stream; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_prefetch(
    ptr: *const c_void,
    bytes: usize,
    device: c_int,
    stream: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if device < 0 {
                return Err(Error::invalid(format!(
                    "device {device} is not a device id"
                )));
            }
            memory::prefetch(ptr.cast(), bytes, device as DeviceId, stream_from_c(stream))
        })
    }
}

#[cfg(test)]
mod tests;
