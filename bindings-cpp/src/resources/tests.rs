//! Round trips through the C constructors and accessors.

use std::ffi::c_void;
use std::ptr::null_mut;

use super::*;
use crate::tests::prelude::{
    rmm_resource_allocate_sync, rmm_resource_deallocate_sync, rmm_resource_kind,
    rmm_resource_release, rmm_system_memory_resource_new, RMM_ERROR_INVALID_ARGUMENT,
    RMM_ERROR_OUT_OF_MEMORY, RMM_OK,
};
use rmm_core::mr::kind::ResourceKind;
use rmm_core::mr::SystemMemoryResource;

/// An owning handle released on drop.
pub(crate) struct Owned(pub(crate) rmm_resource);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: we own this reference.
        unsafe { rmm_resource_release(self.0) }
    }
}

pub(crate) fn made(f: impl FnOnce(*mut rmm_resource, *mut rmm_error) -> c_int) -> Owned {
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    let status = f(&mut out, &mut err);
    assert_eq!(status, RMM_OK, "{err:?}");
    assert!(!out.is_null());
    Owned(out)
}

pub(crate) fn system() -> Owned {
    // SAFETY: valid out-pointers.
    made(|o, e| unsafe { rmm_system_memory_resource_new(o, e) })
}

pub(crate) fn alloc(r: &Owned, bytes: usize) -> *mut c_void {
    let mut p = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe { rmm_resource_allocate_sync(r.0, bytes, 256, &mut p, &mut err) };
    assert_eq!(status, RMM_OK, "{err:?}");
    p
}

pub(crate) fn free(r: &Owned, p: *mut c_void, bytes: usize) {
    let mut err = rmm_error::new();
    // SAFETY: `p` came from `r` with these arguments.
    let status = unsafe { rmm_resource_deallocate_sync(r.0, p, bytes, 256, &mut err) };
    assert_eq!(status, RMM_OK, "{err:?}");
}

pub(crate) fn get_u64(f: impl FnOnce(*mut u64, *mut rmm_error) -> c_int) -> u64 {
    let mut v = 0u64;
    let mut err = rmm_error::new();
    assert_eq!(f(&mut v, &mut err), RMM_OK, "{err:?}");
    v
}

fn owners(r: &Owned) -> usize {
    // SAFETY: live handle; the new owner is dropped at once.
    unsafe { AnyResource::from_borrowed_handle(r.0) }
        .unwrap()
        .owner_count()
        - 1
}

#[test]
fn pool_round_trip() {
    let up = system();
    // SAFETY: live upstream, valid out-pointers.
    let pool =
        made(|o, e| unsafe { rmm_pool_memory_resource_new(up.0, 1 << 20, RMM_SIZE_NONE, o, e) });
    assert_eq!(owners(&up), 2, "the pool retains its upstream");
    // SAFETY: live handle.
    let size = || get_u64(|o, e| unsafe { rmm_pool_memory_resource_pool_size(pool.0, o, e) });
    assert_eq!(size(), 1 << 20);
    let p = alloc(&pool, 1000);
    assert!(!p.is_null());
    free(&pool, p, 1000);
    assert_eq!(size(), 1 << 20);
    drop(pool);
    assert_eq!(owners(&up), 1, "the pool released its upstream");
}

#[test]
fn pool_bounded_by_maximum() {
    let up = system();
    // SAFETY: as above.
    let pool =
        made(|o, e| unsafe { rmm_pool_memory_resource_new(up.0, RMM_SIZE_NONE, 1 << 20, o, e) });
    let mut p = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe { rmm_resource_allocate_sync(pool.0, 2 << 20, 256, &mut p, &mut err) };
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY);
    assert_eq!(err.bytes, 2 << 20);
}

#[test]
fn constructors_reject_bad_arguments() {
    let up = system();
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: an empty upstream is reported, not used.
    let status = unsafe {
        rmm_pool_memory_resource_new(
            rmm_resource::NULL,
            RMM_SIZE_NONE,
            RMM_SIZE_NONE,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(out.is_null());
    // SAFETY: valid pointers; a pool size that is not a multiple of 256.
    let status =
        unsafe { rmm_pool_memory_resource_new(up.0, 1000, RMM_SIZE_NONE, &mut out, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
    // SAFETY: NULL out is reported.
    let status = unsafe { rmm_statistics_resource_adaptor_new(up.0, null_mut(), &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    // SAFETY: valid pointers.
    let status =
        unsafe { rmm_aligned_resource_adaptor_new(up.0, 1000, RMM_SIZE_NONE, &mut out, &mut err) };
    assert_eq!(
        status, RMM_ERROR_INVALID_ARGUMENT,
        "alignment must be a power of two"
    );
    // SAFETY: valid pointers.
    let status =
        unsafe { rmm_binning_memory_resource_new_with_exponents(up.0, -1, 4, &mut out, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert_eq!(owners(&up), 1, "failed constructors keep no reference");
}

#[test]
fn accessors_check_the_type() {
    let up = system();
    // SAFETY: as above.
    let stats = made(|o, e| unsafe { rmm_statistics_resource_adaptor_new(up.0, o, e) });
    let mut v = 0u64;
    let mut err = rmm_error::new();
    // SAFETY: live handles of the wrong type are reported.
    let status = unsafe { rmm_pool_memory_resource_pool_size(stats.0, &mut v, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(
        err.message().contains("not a pool_memory_resource"),
        "{}",
        err.message()
    );
    // SAFETY: as above.
    let status =
        unsafe { rmm_limiting_resource_adaptor_get_allocated_bytes(up.0, &mut v, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    // SAFETY: the empty handle is reported.
    let status = unsafe {
        rmm_tracking_resource_adaptor_get_allocated_bytes(rmm_resource::NULL, &mut v, &mut err)
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    let mut c = rmm_counter::default();
    // SAFETY: NULL out is reported.
    let status =
        unsafe { rmm_statistics_resource_adaptor_get_bytes_counter(stats.0, null_mut(), &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    // SAFETY: valid.
    let status =
        unsafe { rmm_statistics_resource_adaptor_get_bytes_counter(stats.0, &mut c, &mut err) };
    assert_eq!(status, RMM_OK);
}

fn counters(r: &Owned) -> (rmm_counter, rmm_counter) {
    let (mut b, mut a) = (rmm_counter::default(), rmm_counter::default());
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    unsafe {
        assert_eq!(
            rmm_statistics_resource_adaptor_get_bytes_counter(r.0, &mut b, &mut err),
            RMM_OK
        );
        assert_eq!(
            rmm_statistics_resource_adaptor_get_allocations_counter(r.0, &mut a, &mut err),
            RMM_OK
        );
    }
    (b, a)
}

#[test]
fn statistics_round_trip() {
    let up = system();
    // SAFETY: as above.
    let stats = made(|o, e| unsafe { rmm_statistics_resource_adaptor_new(up.0, o, e) });
    let p = alloc(&stats, 100);
    assert_eq!(
        counters(&stats),
        (
            rmm_counter {
                value: 100,
                peak: 100,
                total: 100
            },
            rmm_counter {
                value: 1,
                peak: 1,
                total: 1
            }
        )
    );
    let (mut b, mut a) = (rmm_counter::default(), rmm_counter::default());
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: valid.
        unsafe { rmm_statistics_resource_adaptor_push_counters(stats.0, &mut b, &mut a, &mut err) },
        RMM_OK
    );
    assert_eq!(
        (b.value, a.value),
        (100, 1),
        "push returns the counters from before"
    );
    let q = alloc(&stats, 50);
    assert_eq!(
        counters(&stats).0,
        rmm_counter {
            value: 50,
            peak: 50,
            total: 50
        }
    );
    free(&stats, q, 50);
    assert_eq!(
        // SAFETY: valid.
        unsafe { rmm_statistics_resource_adaptor_pop_counters(stats.0, &mut b, &mut a, &mut err) },
        RMM_OK
    );
    assert_eq!(
        b,
        rmm_counter {
            value: 0,
            peak: 50,
            total: 50
        }
    );
    assert_eq!(
        counters(&stats).0,
        rmm_counter {
            value: 100,
            peak: 150,
            total: 150
        }
    );
    // SAFETY: valid; popping the last frame fails.
    let status =
        unsafe { rmm_statistics_resource_adaptor_pop_counters(stats.0, &mut b, &mut a, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(
        err.message().contains("cannot pop the last counter pair"),
        "{}",
        err.message()
    );
    free(&stats, p, 100);
    assert_eq!(
        counters(&stats).1,
        rmm_counter {
            value: 0,
            peak: 2,
            total: 2
        }
    );
}

#[test]
fn limiting_round_trip() {
    let up = system();
    // SAFETY: as above.
    let lim = made(|o, e| unsafe { rmm_limiting_resource_adaptor_new(up.0, 1024, 256, o, e) });
    let allocated = || {
        // SAFETY: live handle.
        get_u64(|o, e| unsafe { rmm_limiting_resource_adaptor_get_allocated_bytes(lim.0, o, e) })
    };
    assert_eq!(
        // SAFETY: live handle.
        get_u64(|o, e| unsafe { rmm_limiting_resource_adaptor_get_allocation_limit(lim.0, o, e) }),
        1024
    );
    let p = alloc(&lim, 100);
    assert_eq!(allocated(), 256);
    let mut q = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: valid.
    let status = unsafe { rmm_resource_allocate_sync(lim.0, 1000, 256, &mut q, &mut err) };
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY);
    free(&lim, p, 100);
    assert_eq!(allocated(), 0);
}

#[test]
fn tracking_round_trip() {
    let up = system();
    // SAFETY: as above.
    let tr = made(|o, e| unsafe { rmm_tracking_resource_adaptor_new(up.0, 0, o, e) });
    // SAFETY: live handle.
    let allocated =
        || get_u64(|o, e| unsafe { rmm_tracking_resource_adaptor_get_allocated_bytes(tr.0, o, e) });
    let p = alloc(&tr, 300);
    assert_eq!(allocated(), 300);
    free(&tr, p, 300);
    assert_eq!(allocated(), 0);
}

#[test]
fn aligned_round_trip() {
    let up = system();
    // SAFETY: as above.
    let al =
        made(|o, e| unsafe { rmm_aligned_resource_adaptor_new(up.0, 4096, RMM_SIZE_NONE, o, e) });
    let p = alloc(&al, 100);
    assert_eq!(p as usize % 4096, 0);
    free(&al, p, 100);
}

#[test]
fn arena_fixed_size_binning_simulated_round_trip() {
    // SAFETY: valid out-pointers.
    let sim = made(|o, e| unsafe { rmm_simulated_memory_resource_new(1 << 30, o, e) });
    // SAFETY: as above.
    let arena = made(|o, e| unsafe { rmm_arena_memory_resource_new(sim.0, 64 << 20, 0, o, e) });
    let p = alloc(&arena, 5000);
    free(&arena, p, 5000);

    // SAFETY: as above.
    let fixed = made(|o, e| unsafe { rmm_fixed_size_memory_resource_new(sim.0, 4096, 16, o, e) });
    assert_eq!(
        // SAFETY: live handle.
        get_u64(|o, e| unsafe { rmm_fixed_size_memory_resource_get_block_size(fixed.0, o, e) }),
        4096
    );
    let p = alloc(&fixed, 4000);
    free(&fixed, p, 4000);

    // SAFETY: as above.
    let bin =
        made(|o, e| unsafe { rmm_binning_memory_resource_new_with_exponents(sim.0, 10, 12, o, e) });
    let p = alloc(&bin, 2000);
    free(&bin, p, 2000);

    // SAFETY: as above.
    let empty = made(|o, e| unsafe { rmm_binning_memory_resource_new(sim.0, o, e) });
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handles; the bin is retained.
        unsafe { rmm_binning_memory_resource_add_bin(empty.0, 4096, fixed.0, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert_eq!(
        // SAFETY: as above; the empty handle asks for a fixed-size bin over the upstream.
        unsafe { rmm_binning_memory_resource_add_bin(empty.0, 1024, rmm_resource::NULL, &mut err) },
        RMM_OK
    );
    assert_eq!(
        owners(&fixed),
        2,
        "the binning resource holds its explicit bin"
    );
    let p = alloc(&empty, 3000);
    free(&empty, p, 3000);
    // SAFETY: wrong type is reported.
    let status =
        unsafe { rmm_binning_memory_resource_add_bin(fixed.0, 1024, rmm_resource::NULL, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    drop(empty);
    assert_eq!(owners(&fixed), 1);
}

fn host_mode() -> bool {
    crate::tests::prelude::rmm_is_host_mode() != 0
}

/// Without a GPU, the status is NO_DRIVER or NO_DEVICE and `out` stays empty.
fn assert_no_gpu(status: c_int, out: rmm_resource, err: &rmm_error) {
    assert!(
        status == crate::tests::prelude::RMM_ERROR_NO_DRIVER
            || status == crate::tests::prelude::RMM_ERROR_NO_DEVICE,
        "{status}: {err:?}"
    );
    assert!(out.is_null());
}

#[test]
fn managed_and_pinned_round_trip() {
    // SAFETY: valid out-pointers.
    let managed = made(|o, e| unsafe { rmm_managed_memory_resource_new(o, e) });
    // SAFETY: valid out-pointers.
    let pinned = made(|o, e| unsafe { rmm_pinned_host_memory_resource_new(o, e) });
    for r in [&managed, &pinned] {
        // SAFETY: live handle.
        let access = unsafe { crate::tests::prelude::rmm_resource_access(r.0) };
        assert_eq!(access, 3, "host and device accessible");
        if host_mode() {
            let mut p = null_mut();
            let mut err = rmm_error::new();
            // SAFETY: live handle, valid out-pointers.
            let status = unsafe { rmm_resource_allocate_sync(r.0, 1024, 256, &mut p, &mut err) };
            assert_no_gpu(status, rmm_resource::NULL, &err);
        } else {
            let p = alloc(r, 1024);
            // SAFETY: managed and pinned memory are host-accessible, valid for 1024 bytes.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), 7, 1024) };
            free(r, p, 1024);
        }
    }
}

#[test]
fn cuda_async_and_sam_headroom() {
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid pointers; an unknown handle type is reported before any CUDA call.
    let status = unsafe {
        rmm_cuda_async_memory_resource_new(RMM_SIZE_NONE, RMM_SIZE_NONE, 3, &mut out, &mut err)
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
    // SAFETY: valid pointers; Windows handle types are unsupported here.
    let status = unsafe {
        rmm_cuda_async_memory_resource_new(
            RMM_SIZE_NONE,
            RMM_SIZE_NONE,
            RMM_ALLOCATION_HANDLE_TYPE_WIN32,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, crate::tests::prelude::RMM_ERROR_UNSUPPORTED);
    assert!(err
        .message()
        .contains("Requested IPC memory handle type not supported"));
    // SAFETY: valid pointers.
    let status = unsafe {
        rmm_cuda_async_memory_resource_new(
            1 << 20,
            RMM_SIZE_NONE,
            RMM_ALLOCATION_HANDLE_TYPE_NONE,
            &mut out,
            &mut err,
        )
    };
    if host_mode() {
        assert_no_gpu(status, out, &err);
        // SAFETY: valid pointers.
        let status = unsafe { rmm_sam_headroom_memory_resource_new(1 << 20, &mut out, &mut err) };
        assert_no_gpu(status, out, &err);
    } else {
        assert_eq!(status, RMM_OK, "{err:?}");
        let pool = Owned(out);
        let mut handle = null_mut();
        // SAFETY: live handle, valid out-pointers.
        let status =
            unsafe { rmm_cuda_async_memory_resource_pool_handle(pool.0, &mut handle, &mut err) };
        assert_eq!(status, RMM_OK, "{err:?}");
        assert!(!handle.is_null());
        let p = alloc(&pool, 4096);
        free(&pool, p, 4096);
    }
    // The accessor checks the type.
    let up = system();
    let mut handle = null_mut();
    // SAFETY: live handle of the wrong type is reported.
    let status = unsafe { rmm_cuda_async_memory_resource_pool_handle(up.0, &mut handle, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(err.message().contains("not a cuda_async_memory_resource"));
}

fn file_name_of(r: &Owned) -> String {
    let mut len = 0usize;
    let mut err = rmm_error::new();
    // SAFETY: live handle; capacity 0 asks for the length only.
    let status = unsafe {
        rmm_logging_resource_adaptor_get_file_name(r.0, null_mut(), 0, &mut len, &mut err)
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    let mut buf = vec![0 as c_char; len + 1];
    let mut len2 = 0usize;
    // SAFETY: `buf` holds len + 1 bytes.
    let status = unsafe {
        rmm_logging_resource_adaptor_get_file_name(
            r.0,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len2,
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    assert_eq!(len2, len);
    // SAFETY: NUL-terminated by the call.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn logging_round_trip() {
    let path = std::env::temp_dir().join(format!("rmm_abi_logging_{}.csv", std::process::id()));
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let up = system();
    // SAFETY: live upstream, NUL-terminated name, valid out-pointers.
    let log =
        made(|o, e| unsafe { rmm_logging_resource_adaptor_new(up.0, c_path.as_ptr(), 0, o, e) });
    assert_eq!(file_name_of(&log), path.to_str().unwrap());
    let p = alloc(&log, 100);
    free(&log, p, 100);
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handle.
        unsafe { rmm_logging_resource_adaptor_flush(log.0, &mut err) },
        RMM_OK
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[1].contains(",allocate,") && lines[2].contains(",free,"),
        "{text}"
    );
    // A short buffer gets a truncated, NUL-terminated name and the full length.
    let mut buf = [1 as c_char; 4];
    let mut len = 0usize;
    // SAFETY: `buf` holds 4 bytes.
    let status = unsafe {
        rmm_logging_resource_adaptor_get_file_name(log.0, buf.as_mut_ptr(), 4, &mut len, &mut err)
    };
    assert_eq!(status, RMM_OK);
    assert_eq!(len, path.to_str().unwrap().len());
    assert_eq!(buf[3], 0);
    // SAFETY: NULL length_out and the wrong type are reported.
    let status = unsafe {
        rmm_logging_resource_adaptor_get_file_name(log.0, null_mut(), 0, null_mut(), &mut err)
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status = unsafe { rmm_logging_resource_adaptor_flush(up.0, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    drop(log);
    std::fs::remove_file(&path).unwrap();
    let mut out = rmm_resource::NULL;
    let bad = c"/nonexistent-dir/rmm.csv";
    // SAFETY: valid pointers; the file cannot be created.
    let status =
        unsafe { rmm_logging_resource_adaptor_new(up.0, bad.as_ptr(), 0, &mut out, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(out.is_null());
}

#[test]
fn prefetch_and_thread_safe_round_trip() {
    let up = system();
    // SAFETY: live upstream, valid out-pointers.
    let pre = made(|o, e| unsafe { rmm_prefetch_resource_adaptor_new(up.0, o, e) });
    // SAFETY: as above.
    let ts = made(|o, e| unsafe { rmm_thread_safe_resource_adaptor_new(pre.0, o, e) });
    assert_eq!(owners(&up), 2);
    assert_eq!(owners(&pre), 2);
    let p = alloc(&ts, 1000);
    // SAFETY: system memory, valid for 1000 bytes.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 1, 1000) };
    free(&ts, p, 1000);
    drop(ts);
    assert_eq!(owners(&pre), 1);
}

/// The context of the C failure callback of the tests: frees a ballast block on the first call.
struct Ballast {
    sim: rmm_resource,
    block: *mut c_void,
    calls: std::sync::atomic::AtomicUsize,
    released: std::sync::atomic::AtomicBool,
}

unsafe extern "C" fn free_ballast(_bytes: usize, context: *mut c_void) -> c_int {
    // SAFETY: `context` is the test's live Ballast.
    let b = unsafe { &mut *context.cast::<Ballast>() };
    b.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if b.block.is_null() {
        return 0;
    }
    let mut err = rmm_error::new();
    // SAFETY: the block came from `sim` with these arguments.
    let status = unsafe { rmm_resource_deallocate_sync(b.sim, b.block, 3 << 20, 256, &mut err) };
    b.block = null_mut();
    c_int::from(status == RMM_OK)
}

unsafe extern "C" fn mark_released(context: *mut c_void) {
    // SAFETY: as above.
    let b = unsafe { &*context.cast::<Ballast>() };
    b.released.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn failure_callback_round_trip() {
    use std::sync::atomic::Ordering::SeqCst;
    // SAFETY: valid out-pointers.
    let sim = made(|o, e| unsafe { rmm_simulated_memory_resource_new(4 << 20, o, e) });
    let mut ballast = Ballast {
        sim: sim.0,
        block: alloc(&sim, 3 << 20),
        calls: 0.into(),
        released: false.into(),
    };
    let ctx = (&raw mut ballast).cast::<c_void>();
    // SAFETY: live upstream; the callbacks accept `ctx`, which outlives the adaptor.
    let fc = made(|o, e| unsafe {
        rmm_failure_callback_resource_adaptor_new(
            sim.0,
            Some(free_ballast),
            ctx,
            Some(mark_released),
            o,
            e,
        )
    });
    let p = alloc(&fc, 2 << 20); // fails once, the callback frees the ballast, the retry succeeds
                                 // SAFETY: reading the context through the pointer the callback used.
    let calls = || unsafe { (*ctx.cast::<Ballast>()).calls.load(SeqCst) };
    assert_eq!(calls(), 1);
    let mut q = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: valid; the callback has nothing left to free and returns 0.
    let status = unsafe { rmm_resource_allocate_sync(fc.0, 3 << 20, 256, &mut q, &mut err) };
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY);
    assert_eq!(calls(), 2);
    free(&fc, p, 2 << 20);
    drop(fc);
    // SAFETY: as above.
    assert!(unsafe { (*ctx.cast::<Ballast>()).released.load(SeqCst) });

    // A failed constructor releases the context too.
    ballast.released.store(false, SeqCst);
    let ctx = (&raw mut ballast).cast::<c_void>();
    let mut out = rmm_resource::NULL;
    // SAFETY: the empty upstream is reported.
    let status = unsafe {
        rmm_failure_callback_resource_adaptor_new(
            rmm_resource::NULL,
            Some(free_ballast),
            ctx,
            Some(mark_released),
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(out.is_null());
    assert!(ballast.released.load(SeqCst));
    // SAFETY: a NULL callback is reported.
    let status = unsafe {
        rmm_failure_callback_resource_adaptor_new(sim.0, None, null_mut(), None, &mut out, &mut err)
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
}

#[test]
fn pool_maximum_and_tracking_outstanding_str() {
    let up = system();
    // SAFETY: as above.
    let bounded =
        made(|o, e| unsafe { rmm_pool_memory_resource_new(up.0, 1 << 20, 4 << 20, o, e) });
    // SAFETY: as above.
    let unbounded =
        made(|o, e| unsafe { rmm_pool_memory_resource_new(up.0, 1 << 20, RMM_SIZE_NONE, o, e) });
    let maximum = |r: &Owned| {
        // SAFETY: live handle.
        get_u64(|o, e| unsafe { rmm_pool_memory_resource_maximum_pool_size(r.0, o, e) })
    };
    assert_eq!(maximum(&bounded), 4 << 20);
    assert_eq!(maximum(&unbounded), RMM_SIZE_NONE);

    // SAFETY: as above.
    let tr = made(|o, e| unsafe { rmm_tracking_resource_adaptor_new(up.0, 0, o, e) });
    let text = || {
        let mut len = 0usize;
        let mut err = rmm_error::new();
        // SAFETY: live handle; length only.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
                tr.0,
                null_mut(),
                0,
                &mut len,
                &mut err,
            )
        };
        assert_eq!(status, RMM_OK, "{err:?}");
        let mut buf = vec![0 as c_char; len + 1];
        // SAFETY: `buf` holds len + 1 bytes.
        let status = unsafe {
            rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
                tr.0,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut err,
            )
        };
        assert_eq!(status, RMM_OK, "{err:?}");
        // SAFETY: NUL-terminated by the call.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    };
    let p = alloc(&tr, 300);
    assert_eq!(text(), format!("{:#x}: 300 B\n", p as usize));
    free(&tr, p, 300);
    assert_eq!(text(), "");
    let mut len = 0usize;
    let mut err = rmm_error::new();
    // SAFETY: the wrong type is reported.
    let status = unsafe {
        rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
            up.0,
            null_mut(),
            0,
            &mut len,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
}

// --- callback resource ---------------------------------------------------------------------

/// The context of the C callbacks below: forwards to `upstream`, counts, can be told to fail.
struct Forwarder {
    upstream: rmm_resource,
    allocations: std::sync::atomic::AtomicUsize,
    frees: std::sync::atomic::AtomicUsize,
    last_stream: std::sync::atomic::AtomicUsize,
    fail_next: std::sync::atomic::AtomicBool,
    released: std::sync::atomic::AtomicBool,
}

impl Forwarder {
    fn new(upstream: rmm_resource) -> Self {
        Self {
            upstream,
            allocations: 0.into(),
            frees: 0.into(),
            last_stream: 0.into(),
            fail_next: false.into(),
            released: false.into(),
        }
    }
}

unsafe extern "C" fn forward_allocate(
    bytes: usize,
    stream: *mut c_void,
    context: *mut c_void,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    use std::sync::atomic::Ordering::SeqCst;
    // SAFETY: `context` is the test's live Forwarder.
    let f = unsafe { &*context.cast::<Forwarder>() };
    f.last_stream.store(stream as usize, SeqCst);
    if f.fail_next.swap(false, SeqCst) {
        // SAFETY: `err` is NULL or valid (the ABI).
        if let Some(e) = unsafe { err.as_mut() } {
            e.set(&Error::out_of_memory(bytes, "forwarder"));
        }
        return RMM_ERROR_OUT_OF_MEMORY;
    }
    f.allocations.fetch_add(1, SeqCst);
    // SAFETY: live upstream; valid out-pointers (the ABI). Host memory: no stream is used.
    unsafe { crate::tests::prelude::rmm_resource_allocate_sync(f.upstream, bytes, 256, out, err) }
}

unsafe extern "C" fn forward_deallocate(
    ptr: *mut c_void,
    bytes: usize,
    _stream: *mut c_void,
    context: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: as above.
    let f = unsafe { &*context.cast::<Forwarder>() };
    f.frees.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: `ptr` came from the upstream with these arguments.
    unsafe { rmm_resource_deallocate_sync(f.upstream, ptr, bytes, 256, err) }
}

unsafe extern "C" fn forwarder_released(context: *mut c_void) {
    // SAFETY: as above.
    let f = unsafe { &*context.cast::<Forwarder>() };
    f.released.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn callback_round_trip() {
    use std::sync::atomic::Ordering::SeqCst;
    let up = system();
    let forwarder = Forwarder::new(up.0);
    let ctx = (&raw const forwarder).cast_mut().cast::<c_void>();
    // SAFETY: the callbacks accept `ctx`, which outlives the resource.
    let cb = made(|o, e| unsafe {
        rmm_callback_memory_resource_new(
            Some(forward_allocate),
            Some(forward_deallocate),
            ctx,
            Some(forwarder_released),
            RMM_ACCESS_HOST_BITS,
            o,
            e,
        )
    });
    assert_eq!(
        // SAFETY: live handle.
        unsafe { crate::tests::prelude::rmm_resource_access(cb.0) },
        RMM_ACCESS_HOST_BITS
    );
    let p = alloc(&cb, 1000);
    // SAFETY: host memory of 1000 bytes from the system upstream.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 1, 1000) };
    free(&cb, p, 1000);
    assert_eq!(
        (
            forwarder.allocations.load(SeqCst),
            forwarder.frees.load(SeqCst)
        ),
        (1, 1)
    );
    // The stream reaches the callback as the caller's handle (here the special per-thread one;
    // host memory, so the callback never hands it to CUDA).
    let mut q = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe {
        crate::tests::prelude::rmm_resource_allocate(
            cb.0,
            2 as *mut c_void,
            64,
            256,
            &mut q,
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    assert_eq!(forwarder.last_stream.load(SeqCst), 2);
    // SAFETY: from the allocation above.
    let status = unsafe {
        crate::tests::prelude::rmm_resource_deallocate(cb.0, 2 as *mut c_void, q, 64, 256, &mut err)
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    // A callback's error comes back with its kind and size.
    forwarder.fail_next.store(true, SeqCst);
    q = null_mut();
    // SAFETY: as above.
    let status = unsafe { rmm_resource_allocate_sync(cb.0, 4096, 256, &mut q, &mut err) };
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY);
    assert_eq!(err.bytes, 4096);
    assert!(q.is_null());
    assert!(!forwarder.released.load(SeqCst));
    drop(cb);
    assert!(
        forwarder.released.load(SeqCst),
        "the last reference releases the context"
    );

    // Bad arguments are reported and still release the context.
    for (allocate, access) in [
        (None, RMM_ACCESS_DEVICE_BITS),
        (Some(forward_allocate as _), 0),
        (Some(forward_allocate as _), 4),
    ] {
        forwarder.released.store(false, SeqCst);
        let mut out = rmm_resource::NULL;
        // SAFETY: the bad argument is reported before any call.
        let status = unsafe {
            rmm_callback_memory_resource_new(
                allocate,
                Some(forward_deallocate),
                ctx,
                Some(forwarder_released),
                access,
                &mut out,
                &mut err,
            )
        };
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
        assert!(out.is_null());
        assert!(forwarder.released.load(SeqCst));
    }
}

// --- cuda_async_view, cuda_async_managed ---------------------------------------------------

#[test]
fn cuda_async_view_rejects_a_null_pool_and_managed_needs_a_gpu() {
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: NULL is reported before any CUDA call.
    let status = unsafe { rmm_cuda_async_view_memory_resource_new(null_mut(), &mut out, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(
        err.message().contains("Unexpected null pool handle."),
        "{err:?}"
    );
    assert!(out.is_null());
    // The accessors check the type.
    let up = system();
    let mut handle = null_mut();
    // SAFETY: a live handle of the wrong type is reported.
    let status =
        unsafe { rmm_cuda_async_view_memory_resource_pool_handle(up.0, &mut handle, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    // SAFETY: as above.
    let status =
        unsafe { rmm_cuda_async_managed_memory_resource_pool_handle(up.0, &mut handle, &mut err) };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    if host_mode() {
        // SAFETY: valid out-pointers.
        let status = unsafe { rmm_cuda_async_managed_memory_resource_new(&mut out, &mut err) };
        assert_no_gpu(status, out, &err);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_async_view_and_managed_allocate_on_a_gpu() {
    rmm_core::testing::require_gpu();
    // SAFETY: valid out-pointers.
    let owner = made(|o, e| unsafe {
        rmm_cuda_async_memory_resource_new(
            RMM_SIZE_NONE,
            RMM_SIZE_NONE,
            RMM_ALLOCATION_HANDLE_TYPE_NONE,
            o,
            e,
        )
    });
    let mut pool = null_mut();
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handle, valid out-pointers.
        unsafe { rmm_cuda_async_memory_resource_pool_handle(owner.0, &mut pool, &mut err) },
        RMM_OK
    );
    // SAFETY: `owner` keeps the pool alive until after the view is dropped.
    let view = made(|o, e| unsafe { rmm_cuda_async_view_memory_resource_new(pool, o, e) });
    let mut viewed = null_mut();
    assert_eq!(
        // SAFETY: as above.
        unsafe { rmm_cuda_async_view_memory_resource_pool_handle(view.0, &mut viewed, &mut err) },
        RMM_OK
    );
    assert_eq!(viewed, pool);
    let p = alloc(&view, 1 << 20);
    free(&view, p, 1 << 20);
    drop(view);

    let mut out = rmm_resource::NULL;
    // SAFETY: valid out-pointers.
    let status = unsafe { rmm_cuda_async_managed_memory_resource_new(&mut out, &mut err) };
    if status == crate::tests::prelude::RMM_ERROR_UNSUPPORTED {
        rmm_core::testing::skip(
            "cuda_async_view_and_managed_allocate_on_a_gpu",
            &err.message(),
        );
        return;
    }
    assert_eq!(status, RMM_OK, "{err:?}");
    let managed = Owned(out);
    assert_eq!(
        // SAFETY: live handle.
        unsafe { crate::tests::prelude::rmm_resource_access(managed.0) },
        3
    );
    let mut handle = null_mut();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe {
        rmm_cuda_async_managed_memory_resource_pool_handle(managed.0, &mut handle, &mut err)
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    assert!(!handle.is_null());
    let p = alloc(&managed, 4096);
    // SAFETY: managed memory is host-accessible; allocate_sync left nothing pending.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 3, 4096) };
    free(&managed, p, 4096);
}

// --- logging to a C sink -------------------------------------------------------------------

/// The context of the C log sink below: the lines it got, its flushes, whether it fails.
#[derive(Default)]
struct Lines {
    lines: std::sync::Mutex<Vec<String>>,
    flushes: std::sync::atomic::AtomicUsize,
    failing: std::sync::atomic::AtomicBool,
    released: std::sync::atomic::AtomicBool,
}

unsafe extern "C" fn sink_write(data: *const c_char, length: usize, context: *mut c_void) -> c_int {
    // SAFETY: `context` is the test's live Lines; `data` holds `length` bytes.
    let (l, bytes) = unsafe {
        (
            &*context.cast::<Lines>(),
            std::slice::from_raw_parts(data.cast::<u8>(), length),
        )
    };
    if l.failing.load(std::sync::atomic::Ordering::SeqCst) {
        return 1;
    }
    l.lines
        .lock()
        .unwrap()
        .push(String::from_utf8(bytes.to_vec()).unwrap());
    0
}

unsafe extern "C" fn sink_flush(context: *mut c_void) -> c_int {
    // SAFETY: as above.
    let l = unsafe { &*context.cast::<Lines>() };
    l.flushes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    c_int::from(l.failing.load(std::sync::atomic::Ordering::SeqCst))
}

unsafe extern "C" fn sink_released(context: *mut c_void) {
    // SAFETY: as above.
    let l = unsafe { &*context.cast::<Lines>() };
    l.released.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn logging_to(up: &Owned, lines: &Lines, auto_flush: c_int) -> Owned {
    let ctx = (&raw const *lines).cast_mut().cast::<c_void>();
    // SAFETY: live upstream; the sink accepts `ctx`, which outlives the adaptor.
    made(|o, e| unsafe {
        rmm_logging_resource_adaptor_new_with_sink(
            up.0,
            Some(sink_write),
            Some(sink_flush),
            ctx,
            Some(sink_released),
            auto_flush,
            o,
            e,
        )
    })
}

#[test]
fn logging_to_a_sink_gives_whole_lines() {
    use std::sync::atomic::Ordering::SeqCst;
    let up = system();
    let lines = Lines::default();
    let log = logging_to(&up, &lines, 0);
    let p = alloc(&log, 100);
    free(&log, p, 100);
    // Each line reaches the sink as it is logged (as RMM's ostream sink writes into the stream);
    // the sink's own flush waits for a flush or auto-flush.
    assert_eq!(
        lines.lines.lock().unwrap().len(),
        3,
        "lines go through at once"
    );
    assert_eq!(
        lines.flushes.load(SeqCst),
        0,
        "no flush without one being asked for"
    );
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handle.
        unsafe { rmm_logging_resource_adaptor_flush(log.0, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert!(lines.flushes.load(SeqCst) >= 1);
    {
        let got = lines.lines.lock().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], "Thread,Time,Action,Pointer,Size,Stream\n");
        assert!(
            got[1].ends_with(&format!(",allocate,{:#x},100,0x0\n", p as usize)),
            "{got:?}"
        );
        assert!(
            got[2].ends_with(&format!(",free,{:#x},100,0x0\n", p as usize)),
            "{got:?}"
        );
    }
    let mut len = 0usize;
    // SAFETY: live handle; length only.
    let status = unsafe {
        rmm_logging_resource_adaptor_get_file_name(log.0, null_mut(), 0, &mut len, &mut err)
    };
    assert_eq!((status, len), (RMM_OK, 0), "no file name");
    // Many lines at once (more than the CSV writer's buffer) still arrive whole.
    for k in 1..=400 {
        let p = alloc(&log, k);
        free(&log, p, k);
    }
    drop(log);
    assert!(
        lines.released.load(SeqCst),
        "the last reference flushes and releases"
    );
    let got = lines.lines.lock().unwrap();
    assert_eq!(got.len(), 3 + 800);
    assert!(got
        .iter()
        .all(|l| l.ends_with('\n') && l.matches('\n').count() == 1 && l.split(',').count() == 6));
}

#[test]
fn logging_sink_failures_never_fail_allocations() {
    use std::sync::atomic::Ordering::SeqCst;
    let up = system();
    let lines = Lines::default();
    let log = logging_to(&up, &lines, 1);
    assert_eq!(
        lines.lines.lock().unwrap().len(),
        1,
        "auto-flush writes the header at once"
    );
    let p = alloc(&log, 64);
    assert_eq!(lines.lines.lock().unwrap().len(), 2);
    lines.failing.store(true, SeqCst);
    free(&log, p, 64);
    let p = alloc(&log, 64);
    free(&log, p, 64);
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: live handle; the sink's failure is reported.
        unsafe { rmm_logging_resource_adaptor_flush(log.0, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    lines.failing.store(false, SeqCst);
    let p = alloc(&log, 32);
    free(&log, p, 32);
    assert_eq!(
        lines.lines.lock().unwrap().len(),
        4,
        "the failed lines are lost, later ones arrive"
    );
    drop(log);

    // A NULL write function is reported and the context released.
    lines.released.store(false, SeqCst);
    let mut out = rmm_resource::NULL;
    let ctx = (&raw const lines).cast_mut().cast::<c_void>();
    // SAFETY: reported before any call.
    let status = unsafe {
        rmm_logging_resource_adaptor_new_with_sink(
            up.0,
            None,
            None,
            ctx,
            Some(sink_released),
            0,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert!(out.is_null() && lines.released.load(SeqCst));
}

/// `RMM_ACCESS_DEVICE` and `RMM_ACCESS_HOST` of rmm_c.h.
const RMM_ACCESS_DEVICE_BITS: u32 = 1;
const RMM_ACCESS_HOST_BITS: u32 = 2;

#[test]
fn resource_kind_names_the_type_and_hands_out_the_upstream() {
    let system = AnyResource::new(SystemMemoryResource::new());
    let stats = AnyResource::new(StatisticsResourceAdaptor::new(system.clone()));
    let (mut kind, mut upstream, mut err) = (-1, rmm_resource::NULL, rmm_error::new());
    // SAFETY: live borrowed handles; valid out-pointers; the owning upstream is adopted below.
    unsafe {
        assert_eq!(
            rmm_resource_kind(stats.borrow_handle(), &mut kind, &mut upstream, &mut err),
            RMM_OK
        );
        assert_eq!(kind, ResourceKind::Statistics.code());
        let upstream = AnyResource::try_from_handle(upstream).unwrap();
        assert!(upstream.ptr_eq(&system));
        let mut none = rmm_resource::NULL;
        assert_eq!(
            rmm_resource_kind(system.borrow_handle(), &mut kind, &mut none, &mut err),
            RMM_OK
        );
        assert_eq!((kind, none.is_null()), (ResourceKind::System.code(), true));
        assert_eq!(
            rmm_resource_kind(
                system.borrow_handle(),
                &mut kind,
                std::ptr::null_mut(),
                &mut err
            ),
            RMM_OK
        );
        assert_eq!(
            rmm_resource_kind(
                system.borrow_handle(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut err
            ),
            RMM_ERROR_INVALID_ARGUMENT
        );
        // A handle made elsewhere is not this library's to describe.
        let (c, _seen) = rmm_core::testing::c_resource::c_resource(RMM_OK);
        assert_eq!(
            rmm_resource_kind(c, &mut kind, std::ptr::null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(
            err.message().contains("not a resource of this library"),
            "{}",
            err.message()
        );
        drop(AnyResource::try_from_handle(c).unwrap());
        assert_eq!(
            rmm_resource_kind(
                rmm_resource::NULL,
                &mut kind,
                std::ptr::null_mut(),
                &mut err
            ),
            RMM_ERROR_INVALID_ARGUMENT
        );
    }
}
