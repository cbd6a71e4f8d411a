//! The device C functions: host mode here, the GPU (ignored on CPU) on the GPU machine.

use std::ffi::c_int;
use std::ptr::null_mut;

use super::*;
use crate::tests::prelude::{
    RMM_ERROR_INVALID_ARGUMENT, RMM_ERROR_NO_DEVICE, RMM_ERROR_NO_DRIVER, RMM_OK,
};
use rmm_core::testing::require_gpu;

#[test]
fn host_mode_has_device_zero_current_and_no_device_memory() {
    if !cuda::is_host_mode() {
        return; // the GPU test below covers a real device
    }
    let mut err = rmm_error::new();
    let mut device: c_int = -1;
    assert_eq!(
        // SAFETY: valid out-pointers.
        unsafe { rmm_device_get_current(&mut device, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert_eq!(
        device, 0,
        "host memory lives in the registry's device-0 slot"
    );

    let mut count: c_int = -1;
    // SAFETY: valid out-pointers.
    let status = unsafe { rmm_device_count(&mut count, &mut err) };
    assert!(
        status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
        "{err:?}"
    );
    assert!(!err.message().is_empty());

    let (mut free, mut total) = (7usize, 7usize);
    // SAFETY: valid out-pointers.
    let status = unsafe { rmm_available_device_memory(&mut free, &mut total, &mut err) };
    assert!(
        status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
        "{err:?}"
    );
    // SAFETY: `err` is valid.
    let status = unsafe { rmm_device_set_current(0, &mut err) };
    assert!(
        status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
        "{err:?}"
    );
}

#[test]
fn null_out_pointers_are_invalid_arguments() {
    let mut err = rmm_error::new();
    let mut value = 0usize;
    // SAFETY: NULL out-pointers are checked, not written.
    unsafe {
        assert_eq!(
            rmm_device_get_current(null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("out"), "{err:?}");
        assert_eq!(
            rmm_available_device_memory(null_mut(), &mut value, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("free_out"), "{err:?}");
        assert_eq!(
            rmm_available_device_memory(&mut value, null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("total_out"), "{err:?}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_devices_are_counted_made_current_and_measured() {
    require_gpu();
    let mut err = rmm_error::new();
    let mut count: c_int = 0;
    assert_eq!(
        // SAFETY: valid out-pointers.
        unsafe { rmm_device_count(&mut count, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    assert!(count >= 1);
    for device in 0..count {
        assert_eq!(
            // SAFETY: `err` is valid.
            unsafe { rmm_device_set_current(device, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        let mut current: c_int = -1;
        assert_eq!(
            // SAFETY: valid out-pointers.
            unsafe { rmm_device_get_current(&mut current, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        assert_eq!(current, device);
        let (mut free, mut total) = (0usize, 0usize);
        assert_eq!(
            // SAFETY: valid out-pointers.
            unsafe { rmm_available_device_memory(&mut free, &mut total, &mut err) },
            RMM_OK,
            "{err:?}"
        );
        assert!(free > 0 && free <= total, "free {free} of {total}");
    }
    assert_eq!(
        // SAFETY: `err` is valid.
        unsafe { rmm_device_set_current(count, &mut err) },
        RMM_ERROR_INVALID_ARGUMENT
    );
    assert!(err.message().contains("does not exist"), "{err:?}");
    assert_eq!(
        // SAFETY: `err` is valid.
        unsafe { rmm_device_set_current(0, &mut err) },
        RMM_OK,
        "{err:?}"
    );
}
