//! The stream and memory-operation C functions: host mode (this machine) and, ignored on CPU, a GPU.

use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};

use super::*;
use crate::tests::prelude::{
    rmm_cuda_memory_resource_new, rmm_resource, rmm_resource_allocate_sync,
    rmm_resource_deallocate_sync, rmm_resource_release, RMM_ERROR_INVALID_ARGUMENT,
    RMM_ERROR_NO_DEVICE, RMM_ERROR_NO_DRIVER, RMM_OK,
};
use rmm_core::testing::require_gpu;

/// The default streams' raw handles: 0, cudaStreamLegacy, cudaStreamPerThread.
const SPECIAL: [usize; 3] = [0, 1, 2];

fn sync(stream: *mut c_void) {
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: `stream` is a special handle or a live stream of the test.
        unsafe { rmm_stream_synchronize(stream, &mut err) },
        RMM_OK,
        "{err:?}"
    );
}

#[test]
fn create_fails_cleanly_in_host_mode() {
    if !cuda::is_host_mode() {
        return; // the GPU test below creates real streams
    }
    for flags in [RMM_STREAM_SYNC_DEFAULT, RMM_STREAM_NON_BLOCKING] {
        let mut out = std::ptr::dangling_mut::<c_void>(); // must be cleared on failure
        let mut err = rmm_error::new();
        // SAFETY: valid out-pointers.
        let status = unsafe { rmm_stream_create(flags, &mut out, &mut err) };
        assert!(
            status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
            "{err:?}"
        );
        assert_eq!(err.kind, status);
        assert!(!err.message().is_empty());
        assert!(out.is_null(), "the out-pointer is cleared on failure");
    }
}

#[test]
fn bad_flags_and_null_out_pointers_are_invalid_arguments() {
    let mut out = null_mut();
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: valid out-pointers.
        unsafe { rmm_stream_create(7, &mut out, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(err.message().contains("flags 7"), "{err:?}");
    assert!(out.is_null());
    assert_eq!(
        // SAFETY: a NULL `out` is checked, not written.
        unsafe { rmm_stream_create(RMM_STREAM_SYNC_DEFAULT, null_mut(), &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        // SAFETY: as above.
        unsafe { rmm_stream_query(null_mut(), null_mut(), &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(err.message().contains("idle_out"), "{err:?}");
}

#[test]
fn special_handles_synchronize_and_query() {
    for raw in SPECIAL {
        let stream = raw as *mut c_void;
        sync(stream);
        let mut idle: c_int = -1;
        let mut err = rmm_error::new();
        assert_eq!(
            // SAFETY: a special handle; valid out-pointers.
            unsafe { rmm_stream_query(stream, &mut idle, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        if cuda::is_host_mode() {
            assert_eq!(idle, 1, "nothing is ever queued in host mode");
        } else {
            assert!(idle == 0 || idle == 1);
        }
    }
    // A NULL error pointer is fine too.
    assert_eq!(
        // SAFETY: the default stream; NULL err is allowed.
        unsafe { rmm_stream_synchronize(null_mut(), null_mut()) },
        RMM_OK
    );
}

#[test]
fn only_streams_made_here_can_be_destroyed() {
    for raw in [0usize, 1, 2, 0x1234_5600] {
        let mut err = rmm_error::new();
        // SAFETY: the handle is only looked up in the table of created streams, never used.
        let status = unsafe { rmm_stream_destroy(raw as *mut c_void, &mut err) };
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{raw:#x}");
        assert!(
            err.message().contains("not created by rmm_stream_create"),
            "{err:?}"
        );
    }
}

#[test]
fn memcpy_and_memset_on_host_memory() {
    let src: Vec<u8> = (0..100u8).collect();
    let mut dst = vec![0u8; 100];
    let mut err = rmm_error::new();
    // SAFETY: both vectors are valid for 100 bytes and live past the synchronization.
    let status = unsafe {
        rmm_memcpy_async(
            dst.as_mut_ptr().cast(),
            src.as_ptr().cast(),
            100,
            null_mut(),
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    // SAFETY: `dst` is valid for 10 bytes at offset 5; the value is truncated like memset's.
    let status = unsafe {
        rmm_memset_async(
            dst.as_mut_ptr().add(5).cast(),
            0x1ff,
            10,
            2 as *mut c_void,
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    sync(null_mut());
    sync(2 as *mut c_void);
    assert_eq!(&dst[..5], &src[..5]);
    assert!(dst[5..15].iter().all(|&b| b == 0xff));
    assert_eq!(&dst[15..], &src[15..]);
}

#[test]
fn null_pointers_are_rejected_and_zero_bytes_do_nothing() {
    let mut byte = 7u8;
    let mut err = rmm_error::new();
    // SAFETY: the NULL source is rejected before any access.
    let status = unsafe {
        rmm_memcpy_async(
            (&mut byte as *mut u8).cast(),
            null(),
            1,
            null_mut(),
            &mut err,
        )
    };
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
    assert_eq!(
        // SAFETY: the NULL destination is rejected before any access.
        unsafe { rmm_memset_async(null_mut(), 0, 1, null_mut(), &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    // SAFETY: zero-length operations touch nothing.
    unsafe {
        assert_eq!(
            rmm_memcpy_async(null_mut(), null(), 0, null_mut(), &mut err),
            RMM_OK
        );
        assert_eq!(
            rmm_memset_async(null_mut(), 1, 0, null_mut(), &mut err),
            RMM_OK
        );
    }
    assert_eq!(byte, 7);
}

#[test]
fn prefetch_of_memory_that_is_not_managed_is_a_no_op() {
    let data = [1u8; 64];
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: host memory of 64 bytes; not managed, so nothing is queued.
        unsafe { rmm_prefetch(data.as_ptr().cast(), 64, 0, null_mut(), &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert_eq!(
        // SAFETY: zero bytes and NULL touch nothing.
        unsafe { rmm_prefetch(null(), 0, 0, null_mut(), &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert_eq!(
        // SAFETY: rejected before use.
        unsafe { rmm_prefetch(data.as_ptr().cast(), 64, -1, null_mut(), &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn created_streams_order_device_copies_and_are_destroyed_once() {
    require_gpu();
    let mut cuda_mr = rmm_resource::NULL;
    let mut err = rmm_error::new();
    assert_eq!(
        // SAFETY: valid out-pointers.
        unsafe { rmm_cuda_memory_resource_new(&mut cuda_mr, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    for flags in [RMM_STREAM_SYNC_DEFAULT, RMM_STREAM_NON_BLOCKING] {
        let mut stream = null_mut();
        assert_eq!(
            // SAFETY: valid out-pointers.
            unsafe { rmm_stream_create(flags, &mut stream, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        assert!(stream as usize > 2, "a real stream, not a special handle");
        let src: Vec<u8> = (0..4096).map(|i| (i % 251) as u8).collect();
        let mut back = vec![0u8; 4096];
        let mut dev = null_mut();
        // SAFETY: live resource, valid out-pointers; the device memory is freed below after the sync.
        unsafe {
            assert_eq!(
                rmm_resource_allocate_sync(cuda_mr, 4096, 256, &mut dev, &mut err),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(
                rmm_memcpy_async(dev, src.as_ptr().cast(), 4096, stream, &mut err),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(
                rmm_memset_async(dev, 0xab, 16, stream, &mut err),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(
                rmm_memcpy_async(back.as_mut_ptr().cast(), dev, 4096, stream, &mut err),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(
                rmm_prefetch(dev, 4096, 0, stream, &mut err),
                RMM_OK,
                "device memory: a no-op"
            );
        }
        sync(stream);
        let mut idle = 0;
        assert_eq!(
            // SAFETY: live stream; valid out-pointers.
            unsafe { rmm_stream_query(stream, &mut idle, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(idle, 1, "synchronized");
        assert!(back[..16].iter().all(|&b| b == 0xab));
        assert_eq!(&back[16..], &src[16..]);
        // SAFETY: `dev` came from this resource with these arguments; no work uses it any more.
        unsafe {
            assert_eq!(
                rmm_resource_deallocate_sync(cuda_mr, dev, 4096, 256, &mut err),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(rmm_stream_destroy(stream, &mut err), RMM_OK, "{err:?}");
            assert_eq!(
                rmm_stream_destroy(stream, &mut err),
                RMM_ERROR_INVALID_ARGUMENT,
                "destroyed once"
            );
        }
    }
    // SAFETY: we own this reference.
    unsafe { rmm_resource_release(cuda_mr) };
}
