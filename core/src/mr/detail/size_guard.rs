//! Size guards that reject requests which can never succeed *before* the driver sees them.
//!
//! The GPU machine's owners ask that nobody requests more managed memory than can exist: a huge
//! `cuMemAllocManaged` (or managed-pool) request can hang the GPU instead of failing. Managed memory
//! can live on the device or the host, so the most that can ever exist is the device's total memory
//! plus the host's physical memory; anything larger is rejected as [`Error::OutOfMemory`].
//! Pinned host memory must be resident, so a request beyond the host's physical memory is rejected
//! the same way.

use std::sync::OnceLock;

use crate::cuda::{self, DeviceId};
use crate::error::{Error, Result};

/// The host's physical memory in bytes (`sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE)`), or 0
/// when the OS does not say. Cached: it does not change while the process runs.
pub(crate) fn host_physical_memory() -> usize {
    static PHYS: OnceLock<usize> = OnceLock::new();
    *PHYS.get_or_init(|| {
        // SAFETY: sysconf only reads system configuration; it has no memory-safety preconditions.
        let (pages, page_size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGE_SIZE),
            )
        };
        if pages <= 0 || page_size <= 0 {
            0
        } else {
            (pages as usize).saturating_mul(page_size as usize)
        }
    })
}

/// The largest managed request that could ever be satisfied: device memory plus host memory.
pub(crate) const fn managed_limit(device_total: usize, host_physical: usize) -> usize {
    device_total.saturating_add(host_physical)
}

/// Rejects a managed request on `device` larger than the device's total memory plus the host's
/// physical memory, without asking the driver for the memory itself.
///
/// Requests no larger than the host's memory pass without any driver call (the common case).
pub(crate) fn check_managed_size(bytes: usize, device: DeviceId, resource: &str) -> Result<()> {
    let host = host_physical_memory();
    if host != 0 && bytes <= host {
        return Ok(());
    }
    let (_, device_total) = cuda::mem_info(device)?;
    let limit = managed_limit(device_total, host);
    if bytes > limit {
        return Err(Error::OutOfMemory {
            bytes,
            resource: resource.to_owned(),
            detail: format!(
                "refused before asking the driver: more than device {device}'s total memory \
                 ({device_total} bytes) plus the host's physical memory ({host} bytes) can never \
                 exist as managed memory"
            ),
        });
    }
    Ok(())
}

/// Rejects a pinned host request larger than the host's physical memory (pinned pages must be
/// resident, so it could never succeed).
pub(crate) fn check_pinned_size(bytes: usize, resource: &str) -> Result<()> {
    let host = host_physical_memory();
    if host != 0 && bytes > host {
        return Err(Error::OutOfMemory {
            bytes,
            resource: resource.to_owned(),
            detail: format!(
                "refused before asking the driver: pinned memory must be resident and the host has \
                 {host} bytes of physical memory"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_known_on_linux() {
        let host = host_physical_memory();
        assert!(host >= 64 << 20, "implausible physical memory {host}");
        assert_eq!(host, host_physical_memory(), "cached answer is stable");
    }

    #[test]
    fn managed_limit_adds_and_saturates() {
        assert_eq!(managed_limit(80 << 30, 128 << 30), 208 << 30);
        assert_eq!(managed_limit(usize::MAX, 1), usize::MAX);
    }

    #[test]
    fn pinned_requests_beyond_host_memory_are_refused() {
        let err = check_pinned_size(usize::MAX, "pinned_host_memory_resource").unwrap_err();
        assert!(err.is_out_of_memory());
        assert!(
            err.to_string().contains("refused before asking the driver"),
            "{err}"
        );
        assert!(check_pinned_size(4096, "pinned_host_memory_resource").is_ok());
    }

    #[test]
    fn small_managed_requests_need_no_driver() {
        // Below the host's memory the guard answers without touching CUDA, even in host mode.
        assert!(check_managed_size(1 << 20, 0, "managed_memory_resource").is_ok());
    }

    #[test]
    fn huge_managed_requests_never_pass() {
        // In host mode the device query fails first; with a GPU the guard refuses. Either way the
        // request never reaches cuMemAllocManaged.
        let err = check_managed_size(usize::MAX, 0, "managed_memory_resource").unwrap_err();
        if cuda::is_host_mode() {
            assert!(
                matches!(err, Error::NoDriver(_) | Error::NoDevice(_)),
                "{err}"
            );
        } else {
            assert!(err.is_out_of_memory(), "{err}");
        }
    }
}
