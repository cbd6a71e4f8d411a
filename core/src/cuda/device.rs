//! Devices: count, current device, primary contexts, memory info, attributes.
//!
//! "Current device" follows the runtime API: the device of the calling thread's current context,
//! or device 0 when the thread has none. Setting a device makes its primary context current, exactly
//! like `cudaSetDevice`, so CuPy, PyTorch and Numba see the same device and share our pointers.

use std::sync::OnceLock;

use super::{check, driver, sys};
use crate::error::{Error, Result};

/// A CUDA device ordinal (RMM's `cuda_device_id`).
pub type DeviceId = i32;

/// Number of CUDA devices.
///
/// # Errors
/// [`Error::NoDriver`] / [`Error::NoDevice`] in host mode.
///
/// Asked once: the devices a process sees are fixed when the driver is initialised
/// (`CUDA_VISIBLE_DEVICES` is read then), and this is on hot paths (every host-mode check, as a
/// batch's closing makes, and every device check), where a driver call each time cost tens of
/// nanoseconds.
pub fn device_count() -> Result<i32> {
    static COUNT: OnceLock<Result<i32>> = OnceLock::new();
    COUNT
        .get_or_init(|| {
            driver()?;
            let mut count = 0;
            check(
                // SAFETY: the driver is initialised; `count` is a valid out-pointer.
                unsafe { sys::cuDeviceGetCount(&mut count) },
                "cuDeviceGetCount",
            )?;
            Ok(count)
        })
        .clone()
}

fn check_device(device: DeviceId) -> Result<sys::CUdevice> {
    let count = device_count()?;
    if device < 0 || device >= count {
        return Err(Error::invalid(format!(
            "device {device} does not exist ({count} device(s) present)"
        )));
    }
    let mut handle: sys::CUdevice = 0;
    check(
        // SAFETY: the ordinal is in range; `handle` is a valid out-pointer.
        unsafe { sys::cuDeviceGet(&mut handle, device) },
        "cuDeviceGet",
    )?;
    Ok(handle)
}

/// The primary context of `device`, retained once for the life of the process (as the runtime does).
pub(crate) fn primary_context(device: DeviceId) -> Result<sys::CUcontext> {
    static CONTEXTS: OnceLock<Vec<OnceLock<usize>>> = OnceLock::new();
    let handle = check_device(device)?;
    let slots = CONTEXTS.get_or_init(|| {
        let n = device_count().unwrap_or(0).max(0) as usize;
        (0..n).map(|_| OnceLock::new()).collect()
    });
    let slot = slots
        .get(device as usize)
        .ok_or_else(|| Error::invalid(format!("device {device} appeared after start-up")))?;
    if let Some(ctx) = slot.get() {
        return Ok(*ctx as sys::CUcontext);
    }
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    check(
        // SAFETY: `handle` is a valid device; `ctx` is a valid out-pointer. A lost race retains twice,
        // which only keeps the context alive (it is never released).
        unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, handle) },
        "cuDevicePrimaryCtxRetain",
    )?;
    Ok(*slot.get_or_init(|| ctx as usize) as sys::CUcontext)
}

/// The calling thread's current device (0 when no context is current).
///
/// On the path of every buffer (its device at creation, the guard at its free) and of every
/// current-resource lookup: one `cuCtxGetCurrent`, the context's device cached per thread as in
/// [`ensure_context`].
///
/// # Errors
/// [`Error::NoDriver`] / [`Error::NoDevice`] in host mode.
pub fn current_device() -> Result<DeviceId> {
    driver()?;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is initialised; `ctx` is a valid out-pointer.
    check(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent")?;
    if ctx.is_null() {
        return Ok(0);
    }
    context_device(ctx)
}

thread_local! {
    /// The last context asked about on this thread and its device.
    static LAST_CONTEXT: std::cell::Cell<(usize, DeviceId)> = const { std::cell::Cell::new((0, 0)) };
}

/// The device of `ctx`, the calling thread's current context (not null), cached per thread by the
/// context handle (see [`ensure_context`] for why a handle never names another device).
fn context_device(ctx: sys::CUcontext) -> Result<DeviceId> {
    let (cached_ctx, cached_device) = LAST_CONTEXT.with(|c| c.get());
    if cached_ctx == ctx as usize {
        return Ok(cached_device);
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: `ctx` is current; `dev` is a valid out-pointer.
    check(unsafe { sys::cuCtxGetDevice(&mut dev) }, "cuCtxGetDevice")?;
    LAST_CONTEXT.with(|c| c.set((ctx as usize, dev)));
    Ok(dev)
}

/// Makes `device`'s primary context current on the calling thread (`cudaSetDevice`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a device that does not exist; host-mode errors.
pub fn set_current_device(device: DeviceId) -> Result<()> {
    let ctx = primary_context(device)?;
    // SAFETY: `ctx` is a retained primary context, valid for the life of the process.
    check(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")
}

/// Makes sure the calling thread has a current context (device 0's primary one if it had none) and
/// returns the current device. Every call that needs a context goes through here, so it is on every
/// allocation's path: one `cuCtxGetCurrent`, with the context's device cached per thread.
///
/// The cache is keyed by the context handle; contexts we use are primary contexts, which live as
/// long as the process, so a handle never comes back for another device.
pub(crate) fn ensure_context() -> Result<DeviceId> {
    driver()?;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is initialised; `ctx` is a valid out-pointer.
    check(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent")?;
    if ctx.is_null() {
        set_current_device(0)?;
        return Ok(0);
    }
    context_device(ctx)
}

/// The calling thread's current device for naming its default streams, as cheaply as possible:
/// with one device in the process, 0 without any driver call (every context is device 0's); with
/// several, [`ensure_context`] (one `cuCtxGetCurrent`). The stream-ordered pools ask on every
/// operation on the legacy or per-thread default stream.
pub(crate) fn stream_device() -> Result<DeviceId> {
    match only_device() {
        Some(d) => Ok(d),
        None => ensure_context(),
    }
}

/// Device 0 when the process sees exactly one device (every stream and context is then its),
/// asked of the driver once.
pub(crate) fn only_device() -> Option<DeviceId> {
    static SINGLE: OnceLock<bool> = OnceLock::new();
    SINGLE
        .get_or_init(|| device_count().is_ok_and(|n| n == 1))
        .then_some(0)
}

/// Free and total memory of `device`, in bytes.
///
/// # Errors
/// Invalid device or host mode.
pub fn mem_info(device: DeviceId) -> Result<(usize, usize)> {
    let _guard = DeviceGuard::new(device)?;
    let (mut free, mut total) = (0usize, 0usize);
    check(
        // SAFETY: the device's primary context is current; both are valid out-pointers.
        unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
        "cuMemGetInfo",
    )?;
    Ok((free, total))
}

/// A device attribute (`cuDeviceGetAttribute`).
pub fn attribute(device: DeviceId, attribute: sys::CUdevice_attribute) -> Result<i32> {
    let handle = check_device(device)?;
    let mut value = 0;
    // SAFETY: `handle` is a valid device; `value` is a valid out-pointer.
    let status = unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, handle) };
    check(status, "cuDeviceGetAttribute")?;
    Ok(value)
}

/// The device's name, e.g. `"NVIDIA H200"`.
///
/// # Errors
/// Invalid device or host mode.
pub fn name(device: DeviceId) -> Result<String> {
    let handle = check_device(device)?;
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: `buf` is writable for its full length, which is what we pass; `handle` is valid.
    let status = unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, handle) };
    check(status, "cuDeviceGetName")?;
    // SAFETY: the driver wrote a NUL-terminated string into `buf`.
    Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// True when `device` can access pageable host memory (HMM or ATS): the condition for system memory
/// to be device-accessible.
pub fn supports_pageable_memory_access(device: DeviceId) -> bool {
    attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
    )
    .map(|v| v != 0)
    .unwrap_or(false)
}

/// True when `device` can access memory of `peer` (`cuDeviceCanAccessPeer`); a device can always
/// access its own memory.
///
/// # Errors
/// Invalid devices or host mode.
pub fn can_access_peer(device: DeviceId, peer: DeviceId) -> Result<bool> {
    let handle = check_device(device)?;
    let peer_handle = check_device(peer)?;
    if device == peer {
        return Ok(true);
    }
    let mut can = 0;
    // SAFETY: both handles are valid devices; `can` is a valid out-pointer.
    let status = unsafe { sys::cuDeviceCanAccessPeer(&mut can, handle, peer_handle) };
    check(status, "cuDeviceCanAccessPeer")?;
    Ok(can != 0)
}

/// True when `device` supports concurrent managed access (needed by managed memory pools).
pub fn supports_concurrent_managed_access(device: DeviceId) -> bool {
    attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
    )
    .map(|v| v != 0)
    .unwrap_or(false)
}

/// Makes a device current for its lifetime and restores the previous one on drop
/// (RMM's `cuda_set_device_raii`). Does nothing when the device is already current.
#[must_use = "the previous device is restored when the guard drops"]
pub struct DeviceGuard {
    previous: Option<DeviceId>,
}

impl DeviceGuard {
    /// Switches to `device`.
    ///
    /// # Errors
    /// Invalid device or host mode.
    pub fn new(device: DeviceId) -> Result<Self> {
        driver()?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialised; `ctx` is a valid out-pointer.
        check(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent")?;
        // As `current_device`, with the one `cuCtxGetCurrent` (every buffer's free comes here).
        let previous = if ctx.is_null() {
            0
        } else {
            context_device(ctx)?
        };
        if previous == device && !ctx.is_null() {
            return Ok(Self { previous: None });
        }
        set_current_device(device)?;
        Ok(Self {
            previous: Some(previous),
        })
    }
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            if let Err(e) = set_current_device(previous) {
                tracing::error!("could not restore device {previous}: {e}");
            }
        }
    }
}
