//! C entry points of the experimental resources (not RMM types): `expandable_pool_memory_resource`
//! (issue 28) and the allocations it shares with other processes (`rmm_imported_span`).
//!
//! Conventions as in `resources.rs`: a new resource is written OWNING to `*out`; an optional size is
//! [`RMM_SIZE_NONE`](crate::resources::RMM_SIZE_NONE); an accessor checks that its handle is an expandable pool of this copy of
//! rmm-core.

use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

use rmm_core::error::{Error, Result};
use rmm_core::mr::experimental::{
    ExpandablePoolMemoryResource, ExpandablePoolOptions, ExpandablePoolStatistics, ExportedSpan,
    ImportedSpan, VirtualRangeOptions,
};
use rmm_core::resource::guard::{guarded, hand_out, hand_out_ptr, put};
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};

use crate::resources::{accessor, optional_size, with_resource, RMM_SIZE_NONE};
use crate::streams::stream_from_c;

const NAME: &str = "expandable_pool_memory_resource";

/// Counters of an `expandable_pool_memory_resource` (`rmm_expandable_pool_statistics` in C; see
/// `ExpandablePoolStatistics` for each field).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct rmm_expandable_pool_statistics {
    pub reserved_bytes: u64,
    pub granularity: u64,
    pub mapped_bytes: u64,
    pub peak_mapped_bytes: u64,
    pub used_bytes: u64,
    pub free_mapped_bytes: u64,
    pub releasable_bytes: u64,
    pub books_bytes: u64,
    pub free_blocks: u64,
    pub largest_free_block: u64,
    pub cached_bytes: u64,
    pub growth_steps: u64,
    pub granules_mapped: u64,
    pub granules_released: u64,
}

impl From<ExpandablePoolStatistics> for rmm_expandable_pool_statistics {
    fn from(s: ExpandablePoolStatistics) -> Self {
        Self {
            reserved_bytes: s.reserved_bytes as u64,
            granularity: s.granularity as u64,
            mapped_bytes: s.mapped_bytes as u64,
            peak_mapped_bytes: s.peak_mapped_bytes as u64,
            used_bytes: s.used_bytes as u64,
            free_mapped_bytes: s.free_mapped_bytes as u64,
            releasable_bytes: s.releasable_bytes as u64,
            books_bytes: s.books_bytes as u64,
            free_blocks: s.free_blocks as u64,
            largest_free_block: s.largest_free_block as u64,
            cached_bytes: s.cached_bytes as u64,
            growth_steps: s.growth_steps,
            granules_mapped: s.granules_mapped,
            granules_released: s.granules_released,
        }
    }
}

/// An allocation of another process mapped into this one (`rmm_imported_span` in C).
pub struct rmm_imported_span {
    /// Unmapped when the handle is freed.
    _mapping: ImportedSpan,
}

/// A connected Unix socket that stays the caller's.
///
/// # Safety
/// `fd` is an open socket descriptor for as long as the result lives.
unsafe fn borrowed_socket(fd: c_int) -> Result<ManuallyDrop<UnixStream>> {
    if fd < 0 {
        return Err(Error::invalid(format!("{fd} is not a socket descriptor")));
    }
    // SAFETY: caller contract; ManuallyDrop never closes it.
    Ok(ManuallyDrop::new(unsafe { UnixStream::from_raw_fd(fd) }))
}

/// A new `expandable_pool_memory_resource` on the current device (host memory in host mode):
/// `initial_size` bytes mapped at once (0 or [`RMM_SIZE_NONE`](crate::resources::RMM_SIZE_NONE):
/// none), at most `maximum_size` bytes ever (the reservation, rounded up to the granule;
/// `RMM_SIZE_NONE`: twice the device's memory), `release_threshold` mapped bytes kept when frees
/// give idle granules back (`RMM_SIZE_NONE`: none, everything stays mapped until a trim); `peers`
/// holds `peer_count` device ordinals that get access to the pool's memory (NULL when 0).
///
/// # Safety
/// `peers` is NULL or valid for `peer_count` reads; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_new(
    initial_size: u64,
    maximum_size: u64,
    release_threshold: u64,
    peers: *const i32,
    peer_count: usize,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            let peers = match (peers.is_null(), peer_count) {
                (_, 0) => Vec::new(),
                (true, n) => {
                    return Err(Error::invalid(format!(
                        "peers is NULL but peer_count is {n}"
                    )))
                }
                // SAFETY: caller contract: `peer_count` readable ordinals.
                (false, n) => std::slice::from_raw_parts(peers, n).to_vec(),
            };
            let options = ExpandablePoolOptions {
                range: VirtualRangeOptions {
                    reserve: optional_size(maximum_size, "maximum_size")?,
                    peers,
                    ..VirtualRangeOptions::default()
                },
                release_threshold: optional_size(release_threshold, "release_threshold")?,
                initial_size: optional_size(initial_size, "initial_size")?.unwrap_or(0),
                ..ExpandablePoolOptions::default()
            };
            Ok(AnyResource::new(ExpandablePoolMemoryResource::new(
                options,
            )?))
        })
    }
}

/// The pool's counters, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_statistics(
    resource: rmm_resource,
    out: *mut rmm_expandable_pool_statistics,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            NAME,
            out,
            err,
            |p: &ExpandablePoolMemoryResource| Ok(p.statistics().into()),
        )
    }
}

/// The bytes the pool has mapped now, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_mapped_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            NAME,
            out,
            err,
            |p: &ExpandablePoolMemoryResource| Ok(p.mapped_bytes() as u64),
        )
    }
}

/// The bytes the pool has handed out now, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_used_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            NAME,
            out,
            err,
            |p: &ExpandablePoolMemoryResource| Ok(p.used_bytes() as u64),
        )
    }
}

/// Gives back every mapped granule in free memory (after the streams that used it), the bytes
/// released into `*released_out` (which may be NULL).
///
/// # Safety
/// `resource` is live; `released_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_trim(
    resource: rmm_resource,
    released_out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let released =
                with_resource(resource, NAME, |p: &ExpandablePoolMemoryResource| p.trim())?;
            if !released_out.is_null() {
                put(released_out, released as u64, "released_out")?;
            }
            Ok(())
        })
    }
}

/// The pool's release threshold, into `*out` ([`RMM_SIZE_NONE`](crate::resources::RMM_SIZE_NONE):
/// none).
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_release_threshold(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            NAME,
            out,
            err,
            |p: &ExpandablePoolMemoryResource| {
                Ok(p.release_threshold().map_or(RMM_SIZE_NONE, |t| t as u64))
            },
        )
    }
}

/// Sets the pool's release threshold ([`RMM_SIZE_NONE`](crate::resources::RMM_SIZE_NONE): none).
///
/// # Safety
/// `resource` is live; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_set_release_threshold(
    resource: rmm_resource,
    bytes: u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let threshold = optional_size(bytes, "release_threshold")?;
            with_resource(resource, NAME, |p: &ExpandablePoolMemoryResource| {
                p.set_release_threshold(threshold);
                Ok(())
            })
        })
    }
}

/// Exports the live allocation `ptr` of `bytes` to another process: synchronizes `stream` (where
/// its bytes were last written), then sends its shareable handles and where the bytes lie in them
/// over the connected Unix socket `socket_fd` (which stays the caller's). The other process maps
/// it with [`rmm_imported_span_receive`]. Keep the allocation until the other process is done.
///
/// # Safety
/// `resource` is live; `stream` is a live stream or a special handle; `socket_fd` is open; `err`
/// is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_expandable_pool_memory_resource_export(
    resource: rmm_resource,
    ptr: *mut c_void,
    bytes: usize,
    stream: *mut c_void,
    socket_fd: c_int,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let socket = borrowed_socket(socket_fd)?;
            let stream = stream_from_c(stream);
            let span: ExportedSpan =
                with_resource(resource, NAME, |p: &ExpandablePoolMemoryResource| {
                    p.export(ptr.cast(), bytes, stream)
                })?;
            span.send(&socket)
        })
    }
}

/// Receives an allocation another process exported ([`rmm_expandable_pool_memory_resource_export`])
/// from the connected Unix socket `socket_fd` and maps it here, with no copy: `*out` is the handle
/// to free with [`rmm_imported_span_free`], `*ptr_out` its first byte and `*size_out` its size.
///
/// # Safety
/// `socket_fd` is open; `out`, `ptr_out`, `size_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_imported_span_receive(
    socket_fd: c_int,
    out: *mut *mut rmm_imported_span,
    ptr_out: *mut *mut c_void,
    size_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            if ptr_out.is_null() || size_out.is_null() {
                return Err(Error::invalid("ptr_out and size_out must not be NULL"));
            }
            let socket = borrowed_socket(socket_fd)?;
            let span = ExportedSpan::receive(&socket)?;
            let imported = ImportedSpan::new(&span)?;
            put(ptr_out, imported.as_ptr().cast(), "ptr_out")?;
            put(size_out, imported.len(), "size_out")?;
            Ok(Box::into_raw(Box::new(rmm_imported_span {
                _mapping: imported,
            })))
        })
    }
}

/// Unmaps an imported allocation (NULL is ignored); the memory goes back to its device once every
/// process has let go of it.
///
/// # Safety
/// `span` is NULL or from [`rmm_imported_span_receive`], freed once.
#[no_mangle]
pub unsafe extern "C" fn rmm_imported_span_free(span: *mut rmm_imported_span) {
    if span.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: caller contract; dropping unmaps (errors are logged, nothing unwinds).
        drop(unsafe { Box::from_raw(span) })
    }));
}

#[cfg(test)]
mod tests;
