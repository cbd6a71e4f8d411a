//! The native library, librmm (crate `rmm-cpp`): the C entry points of `rmm_c.h` that this module
//! calls, as the C++ headers call them.
//!
//! Every resource Python makes is made by librmm's engine (`rmm_<name>_new`) and read through its
//! accessors, the current device resource is librmm's registry, and streams that Python creates
//! are librmm's, so the process holds one engine whatever mix of Python, C++ and Rust loads it.
//! A resource reaches this module's rmm-core as a handle, which it holds as a `ForeignResource`
//! (allocation goes through the handle's vtable, into librmm).
//!
//! The module links librmm (`build.rs`: `DT_NEEDED` on its SONAME, RUNPATH `$ORIGIN/lib`), so the
//! loader brings it in before the first call. Built with the `bundled-native` feature (the source
//! distribution, which carries no librmm), the same entry points are linked into the module
//! itself from `rmm-c-abi`, and the module is the process's native library.

use std::ffi::{c_char, c_int, c_void, CStr};

use rmm_core::mr::kind::ResourceKind;
use rmm_core::registry::owner::rmm_counter;
use rmm_core::resource::handle::RMM_ABI_VERSION;
use rmm_core::resource::status::{error_from_c, RMM_OK};
use rmm_core::resource::{rmm_error, rmm_resource};
use rmm_core::{AnyResource, Error, Result};

/// `RMM_SIZE_NONE`: "no value" for an optional size.
pub(crate) const SIZE_NONE: u64 = u64::MAX;

/// `RMM_ACCESS_DEVICE`.
pub(crate) const ACCESS_DEVICE: u32 = 1;

/// `rmm_expandable_pool_statistics` (the fields in `rmm_c.h`'s order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub(crate) struct rmm_expandable_pool_statistics {
    pub(crate) reserved_bytes: u64,
    pub(crate) granularity: u64,
    pub(crate) mapped_bytes: u64,
    pub(crate) peak_mapped_bytes: u64,
    pub(crate) used_bytes: u64,
    pub(crate) free_mapped_bytes: u64,
    pub(crate) releasable_bytes: u64,
    pub(crate) books_bytes: u64,
    pub(crate) free_blocks: u64,
    pub(crate) largest_free_block: u64,
    pub(crate) cached_bytes: u64,
    pub(crate) growth_steps: u64,
    pub(crate) granules_mapped: u64,
    pub(crate) granules_released: u64,
}

/// `rmm_allocate_callback`.
pub(crate) type AllocateCallback = unsafe extern "C" fn(
    usize,
    *mut c_void,
    *mut c_void,
    *mut *mut c_void,
    *mut rmm_error,
) -> c_int;
/// `rmm_deallocate_callback`.
pub(crate) type DeallocateCallback =
    unsafe extern "C" fn(*mut c_void, usize, *mut c_void, *mut c_void, *mut rmm_error) -> c_int;
/// `rmm_failure_callback`.
pub(crate) type FailureCallback = unsafe extern "C" fn(usize, *mut c_void) -> c_int;
/// `rmm_callback_release` / `rmm_failure_callback_release`.
pub(crate) type ReleaseContext = unsafe extern "C" fn(*mut c_void);
/// `rmm_timeline_frame_sink`: takes one frame of a caller's stack.
pub(crate) type TimelineFrameSink =
    unsafe extern "C" fn(*mut c_void, *const c_char, u32, *const c_char);
/// `rmm_timeline_stack_fn`: gives the calling thread's stack to the sink.
pub(crate) type TimelineStackFn =
    unsafe extern "C" fn(*mut c_void, Option<TimelineFrameSink>, *mut c_void) -> c_int;

// The declarations of rmm_c.h that this module calls (bindings-cpp/include/rmm_rs/rmm_c.h documents
// each; bindings-cpp/src/header_check.rs checks the header against librmm's definitions).
extern "C" {
    pub(crate) fn rmm_abi_version() -> u32;

    pub(crate) fn rmm_get_per_device_resource(
        device: c_int,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_set_per_device_resource(
        device: c_int,
        resource: rmm_resource,
        previous_out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_registry_generation() -> u64;
    pub(crate) fn rmm_resource_kind(
        resource: rmm_resource,
        kind_out: *mut c_int,
        upstream_out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;

    pub(crate) fn rmm_cuda_memory_resource_new(
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_system_memory_resource_new(
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_managed_memory_resource_new(
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_pinned_host_memory_resource_new(
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_sam_headroom_memory_resource_new(
        headroom: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_simulated_memory_resource_new(
        capacity: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_cuda_async_memory_resource_new(
        initial_pool_size: u64,
        release_threshold: u64,
        export_handle_type: i32,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_cuda_async_view_memory_resource_new(
        pool_handle: *mut c_void,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_cuda_async_view_memory_resource_pool_handle(
        resource: rmm_resource,
        out: *mut *mut c_void,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_cuda_async_managed_memory_resource_new(
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_cuda_async_managed_memory_resource_pool_handle(
        resource: rmm_resource,
        out: *mut *mut c_void,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_new(
        initial_size: u64,
        maximum_size: u64,
        release_threshold: u64,
        peers: *const i32,
        peer_count: usize,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_statistics(
        resource: rmm_resource,
        out: *mut rmm_expandable_pool_statistics,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_mapped_bytes(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_used_bytes(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_trim(
        resource: rmm_resource,
        released_out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_release_threshold(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_set_release_threshold(
        resource: rmm_resource,
        bytes: u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_expandable_pool_memory_resource_export(
        resource: rmm_resource,
        ptr: *mut c_void,
        bytes: usize,
        stream: *mut c_void,
        socket_fd: c_int,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_imported_span_receive(
        socket_fd: c_int,
        out: *mut *mut c_void,
        ptr_out: *mut *mut c_void,
        size_out: *mut usize,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_imported_span_free(span: *mut c_void);
    pub(crate) fn rmm_callback_memory_resource_new(
        allocate: Option<AllocateCallback>,
        deallocate: Option<DeallocateCallback>,
        context: *mut c_void,
        release_context: Option<ReleaseContext>,
        access: u32,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;

    pub(crate) fn rmm_pool_memory_resource_new(
        upstream: rmm_resource,
        initial_pool_size: u64,
        maximum_pool_size: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_pool_memory_resource_pool_size(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_arena_memory_resource_new(
        upstream: rmm_resource,
        arena_size: u64,
        dump_log_on_failure: c_int,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_fixed_size_memory_resource_new(
        upstream: rmm_resource,
        block_size: u64,
        blocks_to_preallocate: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_binning_memory_resource_new(
        upstream: rmm_resource,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_binning_memory_resource_new_with_exponents(
        upstream: rmm_resource,
        min_size_exponent: c_int,
        max_size_exponent: c_int,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_binning_memory_resource_add_bin(
        resource: rmm_resource,
        allocation_size: u64,
        bin_resource: rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;

    pub(crate) fn rmm_aligned_resource_adaptor_new(
        upstream: rmm_resource,
        alignment: u64,
        alignment_threshold: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_limiting_resource_adaptor_new(
        upstream: rmm_resource,
        allocation_limit: u64,
        alignment: u64,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_limiting_resource_adaptor_get_allocated_bytes(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_limiting_resource_adaptor_get_allocation_limit(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_logging_resource_adaptor_new(
        upstream: rmm_resource,
        filename: *const c_char,
        auto_flush: c_int,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_logging_resource_adaptor_flush(
        resource: rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_logging_resource_adaptor_get_file_name(
        resource: rmm_resource,
        buf: *mut c_char,
        capacity: usize,
        length_out: *mut usize,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_statistics_resource_adaptor_new(
        upstream: rmm_resource,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_statistics_resource_adaptor_get_bytes_counter(
        resource: rmm_resource,
        out: *mut rmm_counter,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_statistics_resource_adaptor_get_allocations_counter(
        resource: rmm_resource,
        out: *mut rmm_counter,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_statistics_resource_adaptor_push_counters(
        resource: rmm_resource,
        bytes_out: *mut rmm_counter,
        allocations_out: *mut rmm_counter,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_statistics_resource_adaptor_pop_counters(
        resource: rmm_resource,
        bytes_out: *mut rmm_counter,
        allocations_out: *mut rmm_counter,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_tracking_resource_adaptor_new(
        upstream: rmm_resource,
        capture_stacks: c_int,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_tracking_resource_adaptor_get_allocated_bytes(
        resource: rmm_resource,
        out: *mut u64,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
        resource: rmm_resource,
        buf: *mut c_char,
        capacity: usize,
        length_out: *mut usize,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_tracking_resource_adaptor_log_outstanding_allocations(
        resource: rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_failure_callback_resource_adaptor_new(
        upstream: rmm_resource,
        callback: Option<FailureCallback>,
        context: *mut c_void,
        release_context: Option<ReleaseContext>,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_prefetch_resource_adaptor_new(
        upstream: rmm_resource,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_recording_resource_adaptor_new(
        upstream: rmm_resource,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_thread_safe_resource_adaptor_new(
        upstream: rmm_resource,
        out: *mut rmm_resource,
        err: *mut rmm_error,
    ) -> c_int;

    pub(crate) fn rmm_timeline_start(
        max_entries: u64,
        flags: u32,
        dump_on_oom: *const c_char,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_timeline_stop(err: *mut rmm_error) -> c_int;
    pub(crate) fn rmm_timeline_is_recording() -> c_int;
    pub(crate) fn rmm_timeline_clear();
    pub(crate) fn rmm_timeline_snapshot(
        format: c_int,
        data: *mut *mut c_void,
        length: *mut usize,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_timeline_bytes_free(data: *mut c_void, length: usize);
    pub(crate) fn rmm_timeline_set_stack_provider(
        provide: Option<TimelineStackFn>,
        context: *mut c_void,
        err: *mut rmm_error,
    ) -> c_int;

    pub(crate) fn rmm_stream_create(
        flags: c_int,
        out: *mut *mut c_void,
        err: *mut rmm_error,
    ) -> c_int;
    pub(crate) fn rmm_stream_destroy(stream: *mut c_void, err: *mut rmm_error) -> c_int;

    pub(crate) fn rmm_debug_log_set_level(level: c_int, err: *mut rmm_error) -> c_int;
    pub(crate) fn rmm_debug_log_level() -> c_int;
    pub(crate) fn rmm_debug_log_should_log(level: c_int) -> c_int;
    pub(crate) fn rmm_debug_log_set_flush_level(level: c_int, err: *mut rmm_error) -> c_int;
    pub(crate) fn rmm_debug_log_flush_level() -> c_int;
    pub(crate) fn rmm_debug_log_flush();
}

/// The source distribution's module carries the entry points itself (see the module docs).
#[cfg(feature = "bundled-native")]
use rmm_c_abi as _;

/// Runs the entry point `name` through `call` (given the error out-pointer) and turns its status
/// into a core result, with the error as librmm reported it.
pub(crate) fn call(name: &'static str, call: impl FnOnce(*mut rmm_error) -> c_int) -> Result<()> {
    let mut err = rmm_error::new();
    match call(&mut err) {
        RMM_OK => Ok(()),
        status => Err(error_from_c(status, &err, "librmm", name)),
    }
}

/// Runs the constructor `name` through `call` (given the out- and error pointers) and adopts the
/// owning handle it writes: the new resource, held as a `ForeignResource` of librmm's.
pub(crate) fn adopt(
    name: &'static str,
    call: impl FnOnce(*mut rmm_resource, *mut rmm_error) -> c_int,
) -> Result<AnyResource> {
    let mut out = rmm_resource::NULL;
    self::call(name, |err| call(&mut out, err))?;
    // SAFETY: on success the constructor wrote an owning, live handle (rmm_c.h).
    unsafe { AnyResource::try_from_handle(out) }
}

/// The value an accessor writes through one out-pointer (which starts as `out`).
pub(crate) fn read<T>(
    name: &'static str,
    mut out: T,
    call: impl FnOnce(*mut T, *mut rmm_error) -> c_int,
) -> Result<T> {
    self::call(name, |err| call(&mut out, err))?;
    Ok(out)
}

/// The text an accessor copies into a caller's buffer (`buf, capacity, length_out`): asked for its
/// length first, then read whole.
pub(crate) fn read_text(
    name: &'static str,
    mut call: impl FnMut(*mut c_char, usize, *mut usize, *mut rmm_error) -> c_int,
) -> Result<String> {
    let mut length = 0usize;
    self::call(name, |err| call(std::ptr::null_mut(), 0, &mut length, err))?;
    loop {
        let mut buf = vec![0u8; length + 1];
        let mut now = 0usize;
        self::call(name, |err| {
            call(buf.as_mut_ptr().cast(), buf.len(), &mut now, err)
        })?;
        // The text may grow between the two calls (other threads allocating): ask again.
        if now <= length {
            buf.truncate(now);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
        length = now;
    }
}

/// A `(bytes, allocations)` pair of counters from an accessor that writes both.
pub(crate) fn read_counter_pair(
    name: &'static str,
    call: impl FnOnce(*mut rmm_counter, *mut rmm_counter, *mut rmm_error) -> c_int,
) -> Result<(rmm_counter, rmm_counter)> {
    let (mut bytes, mut allocations) = (rmm_counter::default(), rmm_counter::default());
    self::call(name, |err| call(&mut bytes, &mut allocations, err))?;
    Ok((bytes, allocations))
}

/// An optional size as the C ABI spells it.
pub(crate) fn optional(size: Option<usize>) -> u64 {
    size.map_or(SIZE_NONE, |s| s as u64)
}

/// What `resource` is and its upstream, asked of librmm once (`rmm_resource_kind`). A resource that
/// librmm did not make (another binary's, a C++ user's own) is [`ResourceKind::Other`] without an
/// upstream: nobody here can tell more.
pub(crate) fn kind(resource: &AnyResource) -> (ResourceKind, Option<AnyResource>) {
    let handle = resource.borrow_handle();
    let (mut code, mut upstream) = (0 as c_int, rmm_resource::NULL);
    // SAFETY: a live borrowed handle (`resource` holds it); valid out-pointers.
    let asked = call("rmm_resource_kind", |err| unsafe {
        rmm_resource_kind(handle, &mut code, &mut upstream, err)
    });
    if asked.is_err() {
        return (ResourceKind::Other, None);
    }
    // SAFETY: on success librmm wrote an owning handle or {NULL, NULL} (rmm_c.h).
    let upstream = (!upstream.is_null())
        .then(|| unsafe { AnyResource::try_from_handle(upstream) }.ok())
        .flatten();
    (
        ResourceKind::from_code(code).unwrap_or(ResourceKind::Other),
        upstream,
    )
}

/// The resource of `device` in the process's registry.
pub(crate) fn per_device_resource(device: c_int) -> Result<AnyResource> {
    // SAFETY: valid out-pointers.
    adopt("rmm_get_per_device_resource", |out, err| unsafe {
        rmm_get_per_device_resource(device, out, err)
    })
}

/// Makes `resource` the resource of `device`; returns the previous one.
pub(crate) fn set_per_device_resource(
    device: c_int,
    resource: &AnyResource,
) -> Result<AnyResource> {
    let handle = resource.borrow_handle();
    // SAFETY: librmm retains the borrowed handle, which `resource` keeps alive during the call;
    // valid out-pointers.
    adopt("rmm_set_per_device_resource", |out, err| unsafe {
        rmm_set_per_device_resource(device, handle, out, err)
    })
}

/// The registry's generation (0: it cannot tell).
pub(crate) fn registry_generation() -> u64 {
    // SAFETY: no arguments; an atomic load in librmm.
    unsafe { rmm_registry_generation() }
}

/// Fails unless the native library this module runs with speaks its ABI version.
pub(crate) fn check_abi() -> Result<()> {
    // SAFETY: no arguments.
    let theirs = unsafe { rmm_abi_version() };
    if theirs == RMM_ABI_VERSION {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "librmm speaks ABI version {theirs}, rmm._rmm version {RMM_ABI_VERSION}: {} is from another rmm-rs release",
        library_path().unwrap_or_else(|| "the loaded librmm".into())
    )))
}

/// The path of the object that defines the native entry points (librmm_rs.so; the module itself when
/// it carries them), as the loader names it.
pub(crate) fn library_path() -> Option<String> {
    // SAFETY: `info` is a valid out-parameter; dladdr only reads the loader's tables.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let symbol = rmm_abi_version as unsafe extern "C" fn() -> u32 as *const c_void;
    // SAFETY: the address of a function of a loaded object.
    let found = unsafe { libc::dladdr(symbol, &mut info) } != 0 && !info.dli_fname.is_null();
    found.then(|| {
        // SAFETY: dli_fname is the loader's NUL-terminated path of a loaded object.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    })
}
