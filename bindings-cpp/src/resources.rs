//! C constructors and accessors of the sub-allocators and adaptors (`rmm_<rmm name>_new`,
//! `rmm_<rmm name>_<accessor>` in `rmm_c.h`).
//!
//! Conventions shared by every function here:
//! - an `upstream` (or bin) handle is BORROWED: the new resource retains its own reference;
//! - the new resource is written OWNING to `*out` (`{NULL, NULL}` on failure);
//! - an optional size is a `uint64_t` where [`RMM_SIZE_NONE`] (`UINT64_MAX`) means "none";
//! - an accessor checks that its handle is a resource of this copy of rmm-core of the named type
//!   (our owner tag, then a downcast), else fails with `RMM_ERROR_INVALID_ARGUMENT`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use rmm_core::error::{Error, Result};
use rmm_core::mr::statistics::Counter;
use rmm_core::mr::{
    AlignedResourceAdaptor, ArenaMemoryResource, BinningMemoryResource, CallbackMemoryResource,
    CudaAsyncManagedMemoryResource, CudaAsyncMemoryResource, CudaAsyncOptions,
    CudaAsyncViewMemoryResource, ExportHandleType, FailureCallbackResourceAdaptor,
    FixedSizeMemoryResource, LimitingResourceAdaptor, LoggingResourceAdaptor,
    ManagedMemoryResource, PinnedHostMemoryResource, PoolMemoryResource, PrefetchResourceAdaptor,
    RecordingResourceAdaptor, SamHeadroomMemoryResource, SimulatedMemoryResource,
    StatisticsResourceAdaptor, ThreadSafeResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::registry::owner::rmm_counter;
use rmm_core::resource::foreign::with_borrowed;
use rmm_core::resource::guard::{guarded, hand_out, null_out, put};
use rmm_core::resource::status::{error_from_c, RMM_OK};
use rmm_core::resource::{downcast, AnyResource, MemoryResource};
use rmm_core::resource::{rmm_error, rmm_resource};

/// An optional size given as "none" (`UINT64_MAX`, `RMM_SIZE_NONE` in C).
pub const RMM_SIZE_NONE: u64 = u64::MAX;

pub(crate) fn size(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value)
        .map_err(|_| Error::invalid(format!("{what} {value} does not fit in size_t")))
}

pub(crate) fn optional_size(value: u64, what: &str) -> Result<Option<usize>> {
    if value == RMM_SIZE_NONE {
        Ok(None)
    } else {
        size(value, what).map(Some)
    }
}

/// A new owner of the BORROWED `upstream` handle.
///
/// # Safety
/// `upstream` is live or fails the check.
unsafe fn upstream_of(upstream: rmm_resource) -> Result<AnyResource> {
    if upstream.is_null() {
        return Err(Error::invalid("upstream must not be the empty handle"));
    }
    // SAFETY: caller contract.
    unsafe { AnyResource::from_borrowed_handle(upstream) }
}

/// Hands out (OWNING, in `*out`) the resource `make` builds over a new owner of the BORROWED
/// `upstream`: what every adaptor's and sub-allocator's constructor does.
///
/// # Safety
/// `upstream` is live or fails the check; `out` and `err` are NULL or valid for writes.
unsafe fn over<R: MemoryResource>(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
    make: impl FnOnce(AnyResource) -> Result<R>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(make(upstream_of(upstream)?)?))
        })
    }
}

/// Runs `f` on the `R` behind the BORROWED `resource`, or fails with InvalidArgument when it is
/// not an `R` of this copy of rmm-core.
///
/// # Safety
/// `resource` is live or fails the check.
pub(crate) unsafe fn with_resource<R: MemoryResource, T>(
    resource: rmm_resource,
    type_name: &str,
    f: impl FnOnce(&R) -> Result<T>,
) -> Result<T> {
    // SAFETY: caller contract.
    unsafe {
        with_borrowed(resource, |r| match downcast::<R>(r) {
            Some(r) => f(r),
            None => Err(Error::invalid(format!(
                "resource is a {}, not a {type_name}",
                r.name()
            ))),
        })?
    }
}

/// An accessor: `f`'s value on the `R` behind `resource`, written to `*out`.
///
/// # Safety
/// `resource` is live or fails the check; `out` and `err` are NULL or valid for writes.
pub(crate) unsafe fn accessor<R: MemoryResource, T>(
    resource: rmm_resource,
    type_name: &str,
    out: *mut T,
    err: *mut rmm_error,
    f: impl FnOnce(&R) -> Result<T>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            let value = with_resource::<R, T>(resource, type_name, f)?;
            put(out, value, "out")
        })
    }
}

/// Writes a `(bytes, allocations)` pair to two out-pointers (both required).
///
/// # Safety
/// `resource` is live or fails the check; pointers NULL or valid for writes.
unsafe fn counter_pair(
    resource: rmm_resource,
    bytes_out: *mut rmm_counter,
    allocations_out: *mut rmm_counter,
    err: *mut rmm_error,
    f: impl FnOnce(&StatisticsResourceAdaptor) -> Result<(Counter, Counter)>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if bytes_out.is_null() {
                return Err(null_out("bytes_out"));
            }
            if allocations_out.is_null() {
                return Err(null_out("allocations_out"));
            }
            let (bytes, allocations) = with_resource(resource, "statistics_resource_adaptor", f)?;
            put(bytes_out, bytes.into(), "bytes_out")?;
            put(allocations_out, allocations.into(), "allocations_out")
        })
    }
}

// --- pool ------------------------------------------------------------------------------------

/// A new `pool_memory_resource` over `upstream` (BORROWED); sizes may be [`RMM_SIZE_NONE`].
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_new(
    upstream: rmm_resource,
    initial_pool_size: u64,
    maximum_pool_size: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let initial = optional_size(initial_pool_size, "initial_pool_size")?;
            let maximum = optional_size(maximum_pool_size, "maximum_pool_size")?;
            PoolMemoryResource::new(u, initial, maximum)
        })
    }
}

/// The bytes the pool holds from its upstream.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_pool_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "pool_memory_resource",
            out,
            err,
            |p: &PoolMemoryResource| Ok(p.pool_size() as u64),
        )
    }
}

/// The maximum size of a `pool_memory_resource`, or [`RMM_SIZE_NONE`] when it is unbounded.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_pool_memory_resource_maximum_pool_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "pool_memory_resource",
            out,
            err,
            |p: &PoolMemoryResource| Ok(p.maximum_pool_size().map_or(RMM_SIZE_NONE, |m| m as u64)),
        )
    }
}

// --- statistics ------------------------------------------------------------------------------

/// A new `statistics_resource_adaptor` over `upstream` (BORROWED).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            Ok(StatisticsResourceAdaptor::new(u))
        })
    }
}

/// The bytes counter of the current frame.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_get_bytes_counter(
    resource: rmm_resource,
    out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "statistics_resource_adaptor",
            out,
            err,
            |s: &StatisticsResourceAdaptor| Ok(s.bytes_counter().into()),
        )
    }
}

/// The allocations counter of the current frame.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_get_allocations_counter(
    resource: rmm_resource,
    out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "statistics_resource_adaptor",
            out,
            err,
            |s: &StatisticsResourceAdaptor| Ok(s.allocations_counter().into()),
        )
    }
}

/// Starts a new frame; the counters from before go to the out-pointers.
///
/// # Safety
/// `resource` is live; out-pointers and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_push_counters(
    resource: rmm_resource,
    bytes_out: *mut rmm_counter,
    allocations_out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        counter_pair(resource, bytes_out, allocations_out, err, |s| {
            Ok(s.push_counters())
        })
    }
}

/// Ends the current frame (folded into its parent) and returns its counters; popping the last
/// frame fails with `RMM_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `resource` is live; out-pointers and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_statistics_resource_adaptor_pop_counters(
    resource: rmm_resource,
    bytes_out: *mut rmm_counter,
    allocations_out: *mut rmm_counter,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        counter_pair(resource, bytes_out, allocations_out, err, |s| {
            s.pop_counters()
        })
    }
}

// --- limiting --------------------------------------------------------------------------------

/// A new `limiting_resource_adaptor` over `upstream` (BORROWED): at most `allocation_limit` bytes,
/// sizes counted rounded up to `alignment` (a power of two; RMM's default is 256).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_new(
    upstream: rmm_resource,
    allocation_limit: u64,
    alignment: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let limit = size(allocation_limit, "allocation_limit")?;
            let alignment = size(alignment, "alignment")?;
            LimitingResourceAdaptor::with_alignment(u, limit, alignment)
        })
    }
}

/// The bytes allocated through the adaptor and not yet freed (rounded as it counts them).
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_get_allocated_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "limiting_resource_adaptor",
            out,
            err,
            |l: &LimitingResourceAdaptor| Ok(l.allocated_bytes() as u64),
        )
    }
}

/// The adaptor's limit in bytes.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_limiting_resource_adaptor_get_allocation_limit(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "limiting_resource_adaptor",
            out,
            err,
            |l: &LimitingResourceAdaptor| Ok(l.allocation_limit() as u64),
        )
    }
}

// --- tracking --------------------------------------------------------------------------------

/// A new `tracking_resource_adaptor` over `upstream` (BORROWED); non-zero `capture_stacks` records
/// a stack trace per allocation.
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_new(
    upstream: rmm_resource,
    capture_stacks: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            Ok(TrackingResourceAdaptor::new(u, capture_stacks != 0))
        })
    }
}

/// The bytes outstanding through the adaptor.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_allocated_bytes(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "tracking_resource_adaptor",
            out,
            err,
            |t: &TrackingResourceAdaptor| Ok(t.allocated_bytes() as u64),
        )
    }
}

/// The outstanding allocations of a `tracking_resource_adaptor` as text (one line each, with
/// stack traces when captured), copied into `buf` as by [`string_out`]; `*length_out` gets the
/// full length.
///
/// # Safety
/// `resource` is live; `buf` is valid for `capacity` bytes (or NULL with `capacity` 0);
/// `length_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
    resource: rmm_resource,
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let text = with_resource(
                resource,
                "tracking_resource_adaptor",
                |t: &TrackingResourceAdaptor| Ok(t.outstanding_allocations_str()),
            )?;
            string_out(text.as_bytes(), buf, capacity, length_out)
        })
    }
}

// --- aligned ---------------------------------------------------------------------------------

/// A new `aligned_resource_adaptor` over `upstream` (BORROWED): allocations of at least
/// `alignment_threshold` bytes ([`RMM_SIZE_NONE`]: RMM's default, 0) are aligned to `alignment`.
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_aligned_resource_adaptor_new(
    upstream: rmm_resource,
    alignment: u64,
    alignment_threshold: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let alignment = size(alignment, "alignment")?;
            let threshold = optional_size(alignment_threshold, "alignment_threshold")?
                .unwrap_or(AlignedResourceAdaptor::DEFAULT_ALIGNMENT_THRESHOLD);
            AlignedResourceAdaptor::with_threshold(u, alignment, threshold)
        })
    }
}

// --- arena -----------------------------------------------------------------------------------

/// A new `arena_memory_resource` over `upstream` (BORROWED); `arena_size` may be [`RMM_SIZE_NONE`].
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_arena_memory_resource_new(
    upstream: rmm_resource,
    arena_size: u64,
    dump_log_on_failure: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let arena_size = optional_size(arena_size, "arena_size")?;
            ArenaMemoryResource::new(u, arena_size, dump_log_on_failure != 0)
        })
    }
}

// --- fixed size ------------------------------------------------------------------------------

/// A new `fixed_size_memory_resource` over `upstream` (BORROWED).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_fixed_size_memory_resource_new(
    upstream: rmm_resource,
    block_size: u64,
    blocks_to_preallocate: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let block_size = size(block_size, "block_size")?;
            let blocks = size(blocks_to_preallocate, "blocks_to_preallocate")?;
            FixedSizeMemoryResource::new(u, block_size, blocks)
        })
    }
}

/// The block size of a `fixed_size_memory_resource`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_fixed_size_memory_resource_get_block_size(
    resource: rmm_resource,
    out: *mut u64,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "fixed_size_memory_resource",
            out,
            err,
            |f: &FixedSizeMemoryResource| Ok(f.block_size() as u64),
        )
    }
}

// --- binning ---------------------------------------------------------------------------------

/// A new `binning_memory_resource` over `upstream` (BORROWED) without bins (everything goes to
/// the upstream until [`rmm_binning_memory_resource_add_bin`]).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { over(upstream, out, err, |u| Ok(BinningMemoryResource::new(u))) }
}

/// A new `binning_memory_resource` with fixed-size bins of 2^min ... 2^max bytes.
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_new_with_exponents(
    upstream: rmm_resource,
    min_size_exponent: c_int,
    max_size_exponent: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            let exponent = |e: c_int, what: &str| {
                u32::try_from(e)
                    .map_err(|_| Error::invalid(format!("{what} {e} must not be negative")))
            };
            let min = exponent(min_size_exponent, "min_size_exponent")?;
            let max = exponent(max_size_exponent, "max_size_exponent")?;
            BinningMemoryResource::with_exponents(u, min, max)
        })
    }
}

/// Adds a bin for allocations up to `allocation_size` bytes: `bin_resource` (BORROWED, retained),
/// or a new fixed-size resource over the upstream when it is the empty handle.
///
/// # Safety
/// `resource` and a non-empty `bin_resource` are live; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_binning_memory_resource_add_bin(
    resource: rmm_resource,
    allocation_size: u64,
    bin_resource: rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let bytes = size(allocation_size, "allocation_size")?;
            let bin = if bin_resource.is_null() {
                None
            } else {
                Some(AnyResource::from_borrowed_handle(bin_resource)?)
            };
            with_resource(
                resource,
                "binning_memory_resource",
                |b: &BinningMemoryResource| b.add_bin(bytes, bin),
            )
        })
    }
}

// --- simulated -------------------------------------------------------------------------------

/// A new simulated device of `capacity` bytes (fake addresses, never dereferenceable: for tests of
/// sub-allocators that need lots of address space).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_simulated_memory_resource_new(
    capacity: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(SimulatedMemoryResource::new(size(
                capacity, "capacity",
            )?)?))
        })
    }
}

// --- CUDA base resources ---------------------------------------------------------------------

/// A new `managed_memory_resource` (`cuMemAllocManaged`). Succeeds in host mode too; allocating
/// from it there fails with `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_managed_memory_resource_new(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(ManagedMemoryResource::new()))
        })
    }
}

/// A new `pinned_host_memory_resource` (`cuMemHostAlloc`; host and device accessible). Succeeds in
/// host mode too; allocating from it there fails with `RMM_ERROR_NO_DRIVER` / `RMM_ERROR_NO_DEVICE`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_pinned_host_memory_resource_new(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(PinnedHostMemoryResource::new()))
        })
    }
}

/// RMM's `allocation_handle_type::none`.
pub const RMM_ALLOCATION_HANDLE_TYPE_NONE: i32 = 0;
/// RMM's `allocation_handle_type::posix_file_descriptor`.
pub const RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: i32 = 1;
/// RMM's `allocation_handle_type::win32`.
pub const RMM_ALLOCATION_HANDLE_TYPE_WIN32: i32 = 2;
/// RMM's `allocation_handle_type::win32_kmt`.
pub const RMM_ALLOCATION_HANDLE_TYPE_WIN32_KMT: i32 = 4;
/// RMM's `allocation_handle_type::fabric`.
pub const RMM_ALLOCATION_HANDLE_TYPE_FABRIC: i32 = 8;

/// The export handle type of an `allocation_handle_type` value: `Ok(None)` for none; the Windows
/// kinds are unsupported (as on RMM's Linux builds); any other value is an invalid argument.
fn export_handle_type(value: i32) -> Result<Option<ExportHandleType>> {
    match value {
        RMM_ALLOCATION_HANDLE_TYPE_NONE => Ok(None),
        RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR => {
            Ok(Some(ExportHandleType::PosixFileDescriptor))
        }
        RMM_ALLOCATION_HANDLE_TYPE_FABRIC => Ok(Some(ExportHandleType::Fabric)),
        RMM_ALLOCATION_HANDLE_TYPE_WIN32 | RMM_ALLOCATION_HANDLE_TYPE_WIN32_KMT => Err(
            Error::Unsupported(rmm_core::mr::cuda_async::HANDLE_TYPE_UNSUPPORTED.into()),
        ),
        other => Err(Error::invalid(format!(
            "export_handle_type {other} is not an allocation_handle_type"
        ))),
    }
}

/// A new `cuda_async_memory_resource` with its own CUDA memory pool on the current device.
/// `initial_pool_size` and `release_threshold` may be [`RMM_SIZE_NONE`]; `export_handle_type` is an
/// `allocation_handle_type` value (`RMM_ALLOCATION_HANDLE_TYPE_*`).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_memory_resource_new(
    initial_pool_size: u64,
    release_threshold: u64,
    export_handle_type: i32,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            let options = CudaAsyncOptions {
                initial_pool_size: optional_size(initial_pool_size, "initial_pool_size")?,
                release_threshold: (release_threshold != RMM_SIZE_NONE)
                    .then_some(release_threshold),
                export_handle_type: self::export_handle_type(export_handle_type)?,
            };
            Ok(AnyResource::new(CudaAsyncMemoryResource::with_options(
                options,
            )?))
        })
    }
}

/// The CUDA memory pool (`cudaMemPool_t`) of a `cuda_async_memory_resource`, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "cuda_async_memory_resource",
            out,
            err,
            |a: &CudaAsyncMemoryResource| Ok(a.pool_handle() as *mut c_void),
        )
    }
}

/// A new `sam_headroom_memory_resource` keeping `headroom` bytes of the current device free.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_sam_headroom_memory_resource_new(
    headroom: u64,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(SamHeadroomMemoryResource::new(size(
                headroom, "headroom",
            )?)?))
        })
    }
}

// --- logging ---------------------------------------------------------------------------------

/// Copies `text` into the caller's buffer: at most `capacity - 1` bytes and a NUL (nothing when
/// `capacity` is 0, where `buf` may be NULL); `*length_out` (required) gets the full length.
///
/// # Safety
/// `buf` is valid for `capacity` bytes of writes (or NULL with `capacity` 0); `length_out` is NULL
/// or valid for writes.
pub(crate) unsafe fn string_out(
    text: &[u8],
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
) -> Result<()> {
    if length_out.is_null() {
        return Err(null_out("length_out"));
    }
    if capacity > 0 {
        if buf.is_null() {
            return Err(null_out("buf"));
        }
        let n = text.len().min(capacity - 1);
        // SAFETY: `buf` holds `capacity` > `n` bytes (caller contract); `text` holds `n`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    // SAFETY: checked non-NULL; caller contract.
    unsafe { put(length_out, text.len(), "length_out") }
}

/// A new `logging_resource_adaptor` over `upstream` (BORROWED) writing CSV lines to the file
/// `filename` (created or truncated), or to the file named by `RMM_LOG_FILE` when `filename` is
/// NULL; non-zero `auto_flush` flushes every line.
///
/// # Safety
/// `upstream` is live; `filename` is NULL or a NUL-terminated string; `out` and `err` are NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_new(
    upstream: rmm_resource,
    filename: *const c_char,
    auto_flush: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            let upstream = upstream_of(upstream)?;
            let adaptor = if filename.is_null() {
                LoggingResourceAdaptor::from_env(upstream)?
            } else {
                let bytes = CStr::from_ptr(filename).to_bytes();
                let path = std::path::Path::new(std::ffi::OsStr::from_bytes(bytes));
                LoggingResourceAdaptor::new(upstream, path)?
            };
            Ok(AnyResource::new(adaptor.with_auto_flush(auto_flush != 0)?))
        })
    }
}

/// Writes out the buffered lines of a `logging_resource_adaptor`.
///
/// # Safety
/// `resource` is live; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_flush(
    resource: rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            with_resource(
                resource,
                "logging_resource_adaptor",
                |l: &LoggingResourceAdaptor| l.flush(),
            )
        })
    }
}

/// The log file's name of a `logging_resource_adaptor`, copied into `buf` (see [`string_out`]:
/// at most `capacity - 1` bytes and a NUL); `*length_out` gets its full length.
///
/// # Safety
/// `resource` is live; `buf` is valid for `capacity` bytes (or NULL with `capacity` 0);
/// `length_out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_get_file_name(
    resource: rmm_resource,
    buf: *mut c_char,
    capacity: usize,
    length_out: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let name = with_resource(
                resource,
                "logging_resource_adaptor",
                |l: &LoggingResourceAdaptor| {
                    Ok(l.file_name()
                        .map(|p| p.as_os_str().as_bytes().to_vec())
                        .unwrap_or_default())
                },
            )?;
            string_out(&name, buf, capacity, length_out)
        })
    }
}

// --- prefetch, thread safe -------------------------------------------------------------------

/// A new `prefetch_resource_adaptor` over `upstream` (BORROWED).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_prefetch_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { over(upstream, out, err, |u| Ok(PrefetchResourceAdaptor::new(u))) }
}

/// A new `recording_resource_adaptor` over `upstream` (BORROWED): reports what passes through it to
/// the memory timeline while it records (`rmm_timeline_start`).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_recording_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { over(upstream, out, err, |u| Ok(RecordingResourceAdaptor::new(u))) }
}

/// A new `thread_safe_resource_adaptor` over `upstream` (BORROWED).
///
/// # Safety
/// `upstream` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_thread_safe_resource_adaptor_new(
    upstream: rmm_resource,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        over(upstream, out, err, |u| {
            Ok(ThreadSafeResourceAdaptor::new(u))
        })
    }
}

// --- failure callback ------------------------------------------------------------------------

/// A C failure callback (`rmm_failure_callback` in C): gets the size of the failed request and
/// the context; returns non-zero to retry, 0 to give up. It must not unwind.
pub type rmm_failure_callback =
    Option<unsafe extern "C" fn(bytes: usize, context: *mut c_void) -> c_int>;

/// Releases a failure callback's context (`rmm_failure_callback_release` in C).
pub type rmm_failure_callback_release = Option<unsafe extern "C" fn(context: *mut c_void)>;

/// A C callback and its context, released (once) when the last adaptor sharing it drops.
struct CFailureCallback {
    callback: rmm_failure_callback,
    context: CContext,
}

impl CFailureCallback {
    fn call(&self, bytes: usize) -> bool {
        match self.callback {
            // SAFETY: the C contract: `callback` accepts `context` while it is not released.
            Some(f) => unsafe { f(bytes, self.context.ptr) != 0 },
            None => false,
        }
    }
}

/// A context handed over by C with the function that releases it: released once, when the last
/// Rust owner drops (after the last call that uses it).
struct CContext {
    ptr: *mut c_void,
    release: Option<unsafe extern "C" fn(context: *mut c_void)>,
}

// SAFETY: the C contracts of the functions that take a context (failure callbacks, callback
// resources, log sinks): their functions may be called from any thread, and the context may be
// released from any thread.
unsafe impl Send for CContext {}
// SAFETY: as above; the context is only ever passed to the C functions, which accept concurrent calls.
unsafe impl Sync for CContext {}

impl Drop for CContext {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the C contract; this runs once, after the last call that uses the context.
            unsafe { release(self.ptr) }
        }
    }
}

/// A new `failure_callback_resource_adaptor` over `upstream` (BORROWED): when the upstream is out
/// of memory, `callback(bytes, context)` is called and the request retried while it returns
/// non-zero. The adaptor takes over `context`: `release_context` (may be NULL) is called on it
/// once, when the last reference to the adaptor is gone, or before returning if this call fails.
///
/// # Safety
/// `upstream` is live; `callback` and `release_context` are NULL or valid functions that may be
/// called from any thread and never unwind; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_failure_callback_resource_adaptor_new(
    upstream: rmm_resource,
    callback: rmm_failure_callback,
    context: *mut c_void,
    release_context: rmm_failure_callback_release,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // Made first, so that every failure below releases the context.
    let c_callback = Arc::new(CFailureCallback {
        callback,
        context: CContext {
            ptr: context,
            release: release_context,
        },
    });
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, move || {
            if callback.is_none() {
                return Err(Error::invalid("callback must not be NULL"));
            }
            let upstream = upstream_of(upstream)?;
            Ok(AnyResource::new(FailureCallbackResourceAdaptor::new(
                upstream,
                Arc::new(move |bytes| c_callback.call(bytes)),
            )))
        })
    }
}

// --- callback resource -----------------------------------------------------------------------

/// The allocate function of a C `callback_memory_resource` (`rmm_allocate_callback` in C): writes
/// memory for `bytes` bytes, usable on `stream`, to `*out` and returns `RMM_OK`, or returns an
/// `RMM_ERROR_*` kind and fills the optional `err`. It must not unwind.
pub type rmm_allocate_callback = Option<
    unsafe extern "C" fn(
        bytes: usize,
        stream: *mut c_void,
        context: *mut c_void,
        out: *mut *mut c_void,
        err: *mut rmm_error,
    ) -> c_int,
>;

/// The deallocate function of a C `callback_memory_resource` (`rmm_deallocate_callback` in C):
/// returns `ptr` (from the allocate function, with its `bytes`) ordered on `stream`.
pub type rmm_deallocate_callback = Option<
    unsafe extern "C" fn(
        ptr: *mut c_void,
        bytes: usize,
        stream: *mut c_void,
        context: *mut c_void,
        err: *mut rmm_error,
    ) -> c_int,
>;

/// Releases the context of C callbacks (`rmm_callback_release` in C).
pub type rmm_callback_release = Option<unsafe extern "C" fn(context: *mut c_void)>;

/// The C functions of a callback resource and their context, released (once) when the last clone
/// of the resource drops.
struct CCallbacks {
    allocate: rmm_allocate_callback,
    deallocate: rmm_deallocate_callback,
    context: CContext,
}

impl CCallbacks {
    fn allocate(&self, bytes: usize, stream: rmm_core::cuda::Stream) -> Result<*mut u8> {
        let Some(f) = self.allocate else {
            return Err(Error::invalid("allocate callback must not be NULL"));
        };
        let mut out = std::ptr::null_mut();
        let mut err = rmm_error::new();
        // SAFETY: the C contract: `f` accepts `context` while it is not released; valid out-pointers.
        let status = unsafe {
            f(
                bytes,
                stream.as_raw() as *mut c_void,
                self.context.ptr,
                &mut out,
                &mut err,
            )
        };
        if status == RMM_OK {
            Ok(out.cast())
        } else {
            Err(error_from_c(
                status,
                &err,
                "callback_memory_resource",
                "allocate callback",
            ))
        }
    }

    fn deallocate(&self, ptr: *mut u8, bytes: usize, stream: rmm_core::cuda::Stream) -> Result<()> {
        let Some(f) = self.deallocate else {
            return Err(Error::invalid("deallocate callback must not be NULL"));
        };
        let mut err = rmm_error::new();
        // SAFETY: as above; `ptr` came from the allocate function (the resource's contract).
        let status = unsafe {
            f(
                ptr.cast(),
                bytes,
                stream.as_raw() as *mut c_void,
                self.context.ptr,
                &mut err,
            )
        };
        if status == RMM_OK {
            Ok(())
        } else {
            Err(error_from_c(
                status,
                &err,
                "callback_memory_resource",
                "deallocate callback",
            ))
        }
    }
}

/// A new `callback_memory_resource` whose allocations are `allocate(bytes, stream, context, ...)`
/// and whose frees are `deallocate(ptr, bytes, stream, context, ...)`; its memory has the access
/// bits `access` (`RMM_ACCESS_DEVICE` and/or `RMM_ACCESS_HOST`, at least one). The resource takes
/// over `context`: `release_context` (may be NULL) is called on it once, when the last reference
/// is gone, or before returning if this call fails (NULL functions or bad access bits are
/// `RMM_ERROR_INVALID_ARGUMENT`).
///
/// # Safety
/// `allocate`, `deallocate` and `release_context` are NULL or valid functions that may be called
/// from any thread and never unwind; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_callback_memory_resource_new(
    allocate: rmm_allocate_callback,
    deallocate: rmm_deallocate_callback,
    context: *mut c_void,
    release_context: rmm_callback_release,
    access: u32,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // Made first, so that every failure below releases the context.
    let callbacks = Arc::new(CCallbacks {
        allocate,
        deallocate,
        context: CContext {
            ptr: context,
            release: release_context,
        },
    });
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, move || {
            if allocate.is_none() || deallocate.is_none() {
                return Err(Error::invalid(
                    "allocate and deallocate callbacks must not be NULL",
                ));
            }
            if access == 0 || access > 3 {
                return Err(Error::invalid(format!(
                    "access {access} is not a non-empty set of RMM_ACCESS_DEVICE | RMM_ACCESS_HOST"
                )));
            }
            let for_free = callbacks.clone();
            Ok(AnyResource::new(CallbackMemoryResource::with_access(
                Arc::new(move |bytes, stream| callbacks.allocate(bytes, stream)),
                Arc::new(move |ptr, bytes, stream| for_free.deallocate(ptr, bytes, stream)),
                rmm_core::resource::Access::from_bits(access as u8),
            )))
        })
    }
}

// --- cuda_async_view, cuda_async_managed ---------------------------------------------------

/// A new `cuda_async_view_memory_resource` over the CUDA memory pool `pool_handle` (a
/// `cudaMemPool_t`), which the caller keeps alive while the resource or its memory is in use.
///
/// # Safety
/// `pool_handle` is NULL (reported) or a live memory pool that outlives the resource and its
/// memory; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_view_memory_resource_new(
    pool_handle: *mut c_void,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            // The pool's lifetime is the caller's contract (see above).
            let view = CudaAsyncViewMemoryResource::from_raw(pool_handle as usize)?;
            Ok(AnyResource::new(view))
        })
    }
}

/// The CUDA memory pool of a `cuda_async_view_memory_resource`, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_view_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "cuda_async_view_memory_resource",
            out,
            err,
            |v: &CudaAsyncViewMemoryResource| Ok(v.pool_handle() as *mut c_void),
        )
    }
}

/// A new `cuda_async_managed_memory_resource`: managed memory from the current device's default
/// managed memory pool, ordered on streams (host and device accessible).
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_managed_memory_resource_new(
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, || {
            Ok(AnyResource::new(CudaAsyncManagedMemoryResource::new()?))
        })
    }
}

/// The CUDA memory pool of a `cuda_async_managed_memory_resource`, into `*out`.
///
/// # Safety
/// `resource` is live; `out` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_cuda_async_managed_memory_resource_pool_handle(
    resource: rmm_resource,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        accessor(
            resource,
            "cuda_async_managed_memory_resource",
            out,
            err,
            |m: &CudaAsyncManagedMemoryResource| Ok(m.pool_handle() as *mut c_void),
        )
    }
}

// --- logging to a C sink ---------------------------------------------------------------------

/// Writes one line of a log (`rmm_log_write` in C): `length` bytes at `data`, ending with `\n`
/// (not NUL-terminated); returns 0 on success. It must not unwind.
pub type rmm_log_write =
    Option<unsafe extern "C" fn(data: *const c_char, length: usize, context: *mut c_void) -> c_int>;

/// Flushes a log sink (`rmm_log_flush` in C); returns 0 on success. It must not unwind.
pub type rmm_log_flush = Option<unsafe extern "C" fn(context: *mut c_void) -> c_int>;

/// Releases a log sink's context (`rmm_log_release` in C).
pub type rmm_log_release = Option<unsafe extern "C" fn(context: *mut c_void)>;

/// A C log sink as the logging adaptor's writer. The CSV writer hands over its buffer in chunks
/// that may cut lines; they are put back together here so that the sink sees whole lines, which
/// is what a line-based consumer (an ostream shared with other output, a logger) needs.
///
/// A line the sink fails to take is dropped and the failure returned by that `write`; the logging
/// adaptor drops the rest of the chunk too (it never hands lines over twice), counts the events
/// lost and reports the failure at once.
struct CLogSink {
    write: rmm_log_write,
    flush: rmm_log_flush,
    context: CContext,
    /// The start of a line whose end has not been written yet.
    pending: Vec<u8>,
    /// The first write failure since the last flush.
    failure: Option<std::io::Error>,
}

impl CLogSink {
    fn emit(&mut self, line: &[u8]) {
        let status = match self.write {
            // SAFETY: the C contract; `line` is valid for its length during the call.
            Some(write) => unsafe { write(line.as_ptr().cast(), line.len(), self.context.ptr) },
            None => -1,
        };
        if status != 0 && self.failure.is_none() {
            self.failure = Some(std::io::Error::other(format!(
                "the log sink's write function failed (status {status}); lines were lost"
            )));
        }
    }
}

impl std::io::Write for CLogSink {
    /// Hands each whole line to the C function; a line it fails is an error of this call (the
    /// adaptor reports it and counts the event lost), so failures are heard as they happen.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        let mut rest = buf;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(newline + 1);
            if self.pending.is_empty() {
                self.emit(line);
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                self.emit(&whole);
            }
            rest = tail;
        }
        self.pending.extend_from_slice(rest);
        match self.failure.take() {
            Some(failure) => Err(failure),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest);
        }
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        match self.flush {
            // SAFETY: the C contract.
            Some(flush) => match unsafe { flush(self.context.ptr) } {
                0 => Ok(()),
                status => Err(std::io::Error::other(format!(
                    "the log sink's flush function failed (status {status})"
                ))),
            },
            None => Ok(()),
        }
    }
}

/// A new `logging_resource_adaptor` over `upstream` (BORROWED) writing its CSV log (header first)
/// to a sink: `write(line, length, context)` gets one whole line at a time, `flush(context)` (may
/// be NULL) is called by rmm_logging_resource_adaptor_flush, with auto-flush after each line, and
/// when the last reference is gone; non-zero `auto_flush` flushes every line. The adaptor takes
/// over `context`: `release_context` (may be NULL) is called on it once, after the last write,
/// or before returning if this call fails (a NULL `write` is `RMM_ERROR_INVALID_ARGUMENT`).
///
/// # Safety
/// `upstream` is live; the functions are NULL or valid, may be called from any thread (never two
/// at once) and never unwind; `out` and `err` are NULL or valid for writes.
#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub unsafe extern "C" fn rmm_logging_resource_adaptor_new_with_sink(
    upstream: rmm_resource,
    write: rmm_log_write,
    flush: rmm_log_flush,
    context: *mut c_void,
    release_context: rmm_log_release,
    auto_flush: c_int,
    out: *mut rmm_resource,
    err: *mut rmm_error,
) -> c_int {
    // Made first, so that every failure below releases the context.
    let sink = CLogSink {
        write,
        flush,
        context: CContext {
            ptr: context,
            release: release_context,
        },
        pending: Vec::new(),
        failure: None,
    };
    // SAFETY: caller contract.
    unsafe {
        hand_out(out, err, move || {
            if write.is_none() {
                return Err(Error::invalid(
                    "the log sink's write function must not be NULL",
                ));
            }
            let upstream = upstream_of(upstream)?;
            let adaptor = LoggingResourceAdaptor::with_writer(upstream, sink)?;
            Ok(AnyResource::new(adaptor.with_auto_flush(auto_flush != 0)?))
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
