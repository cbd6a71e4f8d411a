//! Round trips through the C constructors and accessors.

use std::ffi::c_void;
use std::ptr::null_mut;

use super::*;
use crate::abi::{
    rmm_resource_allocate_sync, rmm_resource_deallocate_sync, rmm_resource_release,
    rmm_system_memory_resource_new, RMM_ERROR_INVALID_ARGUMENT, RMM_ERROR_OUT_OF_MEMORY, RMM_OK,
};

/// An owning handle released on drop.
struct Owned(rmm_resource);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: we own this reference.
        unsafe { rmm_resource_release(self.0) }
    }
}

fn made(f: impl FnOnce(*mut rmm_resource, *mut rmm_error) -> c_int) -> Owned {
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    let status = f(&mut out, &mut err);
    assert_eq!(status, RMM_OK, "{err:?}");
    assert!(!out.is_null());
    Owned(out)
}

fn system() -> Owned {
    // SAFETY: valid out-pointers.
    made(|o, e| unsafe { rmm_system_memory_resource_new(o, e) })
}

fn alloc(r: &Owned, bytes: usize) -> *mut c_void {
    let mut p = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live handle, valid out-pointers.
    let status = unsafe { rmm_resource_allocate_sync(r.0, bytes, 256, &mut p, &mut err) };
    assert_eq!(status, RMM_OK, "{err:?}");
    p
}

fn free(r: &Owned, p: *mut c_void, bytes: usize) {
    let mut err = rmm_error::new();
    // SAFETY: `p` came from `r` with these arguments.
    let status = unsafe { rmm_resource_deallocate_sync(r.0, p, bytes, 256, &mut err) };
    assert_eq!(status, RMM_OK, "{err:?}");
}

fn get_u64(f: impl FnOnce(*mut u64, *mut rmm_error) -> c_int) -> u64 {
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
    crate::abi::rmm_is_host_mode() != 0
}

/// Without a GPU, the status is NO_DRIVER or NO_DEVICE and `out` stays empty.
fn assert_no_gpu(status: c_int, out: rmm_resource, err: &rmm_error) {
    assert!(
        status == crate::abi::RMM_ERROR_NO_DRIVER || status == crate::abi::RMM_ERROR_NO_DEVICE,
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
        let access = unsafe { crate::abi::rmm_resource_access(r.0) };
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
    assert_eq!(status, crate::abi::RMM_ERROR_UNSUPPORTED);
    assert!(err.message().contains("Requested IPC memory handle type not supported"));
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
        rmm_logging_resource_adaptor_get_file_name(r.0, buf.as_mut_ptr(), buf.len(), &mut len2, &mut err)
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    assert_eq!(len2, len);
    // SAFETY: NUL-terminated by the call.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned()
}

#[test]
fn logging_round_trip() {
    let path = std::env::temp_dir().join(format!("rmm_abi_logging_{}.csv", std::process::id()));
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let up = system();
    // SAFETY: live upstream, NUL-terminated name, valid out-pointers.
    let log = made(|o, e| unsafe {
        rmm_logging_resource_adaptor_new(up.0, c_path.as_ptr(), 0, o, e)
    });
    assert_eq!(file_name_of(&log), path.to_str().unwrap());
    let p = alloc(&log, 100);
    free(&log, p, 100);
    let mut err = rmm_error::new();
    // SAFETY: live handle.
    assert_eq!(unsafe { rmm_logging_resource_adaptor_flush(log.0, &mut err) }, RMM_OK);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Thread,Time,Action,Pointer,Size,Stream");
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].contains(",allocate,") && lines[2].contains(",free,"), "{text}");
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
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned()
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
