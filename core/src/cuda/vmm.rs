//! The CUDA virtual memory management API (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`, ...)
//! as `Result`s: the driver half of the expandable pool's [`VirtualRange`].
//!
//! Glossary:
//! - *reservation*: a range of virtual addresses (`cuMemAddressReserve`) with nothing behind it;
//! - *physical allocation* ([`AllocationHandle`]): device memory made by `cuMemCreate`, reachable
//!   only once mapped into a reservation (`cuMemMap`) and made accessible (`cuMemSetAccess`);
//!   its memory goes back to the device when it is unmapped everywhere and every handle to it,
//!   in every process, is released;
//! - *granularity*: the unit of sizes and offsets of all of these calls
//!   (`cuMemGetAllocationGranularity`);
//! - *shareable handle*: an allocation exported for another process
//!   (`cuMemExportToShareableHandle`): a POSIX file descriptor (same node) or a fabric handle
//!   (64 bytes, also across nodes of an NVLink fabric, where the system has IMEX channels).
//!
//! Every call here checks that the driver is present first (cudarc panics otherwise) and makes the
//! device's primary context current for its duration.
//!
//! [`VirtualRange`]: crate::mr::experimental::VirtualRange

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::device::{self, DeviceGuard, DeviceId};
use super::{check, check_alloc, counted, cuda_error, driver, sys};
use crate::error::{Error, Result};

/// A physical allocation (`CUmemGenericAllocationHandle`).
pub(crate) type AllocationHandle = u64;

/// The kinds of shareable handle a physical allocation can be exported as.
///
/// ```
/// use rmm_core::cuda::vmm::ShareableHandles;
/// let both = ShareableHandles { posix_fd: true, fabric: true };
/// assert_eq!(both.bits(), 1 | 8);
/// assert_eq!(ShareableHandles::from_bits(1), ShareableHandles { posix_fd: true, fabric: false });
/// assert!(ShareableHandles::NONE.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ShareableHandles {
    /// A POSIX file descriptor (`CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`): processes of one node,
    /// passed over a Unix socket (`SCM_RIGHTS`).
    pub posix_fd: bool,
    /// A fabric handle (`CU_MEM_HANDLE_TYPE_FABRIC`): 64 bytes, valid across the nodes of an NVLink
    /// fabric; needs an IMEX channel.
    pub fabric: bool,
}

impl ShareableHandles {
    /// No shareable handle: the memory stays in this process.
    pub const NONE: ShareableHandles = ShareableHandles {
        posix_fd: false,
        fabric: false,
    };

    /// POSIX file descriptors only.
    pub const POSIX_FD: ShareableHandles = ShareableHandles {
        posix_fd: true,
        fabric: false,
    };

    /// Fabric handles only.
    pub const FABRIC: ShareableHandles = ShareableHandles {
        posix_fd: false,
        fabric: true,
    };

    /// The driver's `CUmemAllocationHandleType` bits (1 and 8).
    pub const fn bits(self) -> u32 {
        (self.posix_fd as u32) | ((self.fabric as u32) << 3)
    }

    /// The kinds named by the driver's bits (others ignored).
    pub const fn from_bits(bits: u32) -> Self {
        ShareableHandles {
            posix_fd: bits & 1 != 0,
            fabric: bits & 8 != 0,
        }
    }

    /// True when neither kind is set.
    pub const fn is_none(self) -> bool {
        !self.posix_fd && !self.fabric
    }

    /// The kinds set in both.
    pub const fn and(self, other: ShareableHandles) -> Self {
        ShareableHandles {
            posix_fd: self.posix_fd && other.posix_fd,
            fabric: self.fabric && other.fabric,
        }
    }
}

/// Which granularity [`granularity`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granularity {
    /// The smallest unit the driver accepts (`CU_MEM_ALLOC_GRANULARITY_MINIMUM`).
    Minimum,
    /// The unit the driver recommends for performance (`CU_MEM_ALLOC_GRANULARITY_RECOMMENDED`).
    Recommended,
}

fn location(device: DeviceId) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    }
}

/// The properties of pinned device memory on `device` exportable as `handles`.
fn properties(device: DeviceId, handles: ShareableHandles) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: sys::CUmemAllocationHandleType(handles.bits()),
        location: location(device),
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

/// True when `device` supports the virtual memory management API
/// (`CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`).
///
/// # Errors
/// Host-mode errors ([`Error::NoDriver`] / [`Error::NoDevice`]), an invalid device.
pub(crate) fn is_supported(device: DeviceId) -> Result<bool> {
    Ok(device::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
    )? != 0)
}

/// The shareable handle kinds `device` supports for `cuMemCreate`
/// (`CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED`,
/// `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED`). A kind the driver cannot answer for counts as
/// unsupported. Fabric support here does not promise that creation succeeds: that also needs an
/// IMEX channel, which only `cuMemCreate` finds out.
pub(crate) fn supported_handles(device: DeviceId) -> ShareableHandles {
    let yes = |attribute| device::attribute(device, attribute).is_ok_and(|v| v != 0);
    ShareableHandles {
        posix_fd: yes(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
        ),
        fabric: yes(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED),
    }
}

/// `cuMemGetAllocationGranularity` of pinned memory on `device` exportable as `handles`.
///
/// # Errors
/// Host-mode errors, an invalid device, the driver's error.
pub(crate) fn granularity(
    device: DeviceId,
    handles: ShareableHandles,
    which: Granularity,
) -> Result<usize> {
    let _guard = DeviceGuard::new(device)?;
    let prop = properties(device, handles);
    let option = match which {
        Granularity::Minimum => {
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM
        }
        Granularity::Recommended => {
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
        }
    };
    let mut bytes = 0usize;
    // SAFETY: the driver is loaded (the guard checked); `bytes` and `prop` are valid pointers.
    let status = unsafe { sys::cuMemGetAllocationGranularity(&mut bytes, &prop, option) };
    check(status, "cuMemGetAllocationGranularity")?;
    Ok(bytes)
}

/// `cuMemAddressReserve` of `bytes` (a multiple of the granularity) aligned to `alignment`, anywhere.
///
/// # Errors
/// Host-mode errors; [`Error::OutOfMemory`] when the address space has no such range left.
pub(crate) fn reserve(bytes: usize, alignment: usize, resource: &str) -> Result<usize> {
    driver()?;
    let mut base: sys::CUdeviceptr = 0;
    // SAFETY: the driver is loaded; `base` is a valid out-pointer; address 0 and flags 0 let the
    // driver choose.
    let status = unsafe { sys::cuMemAddressReserve(&mut base, bytes, alignment, 0, 0) };
    check_alloc(status, "cuMemAddressReserve", bytes, resource)?;
    Ok(base as usize)
}

/// `cuMemAddressFree` of a whole reservation.
///
/// # Safety
/// `[base, base + bytes)` is a reservation of [`reserve`] with nothing mapped in it any more; it is
/// freed once.
pub(crate) unsafe fn free_reservation(base: usize, bytes: usize) -> Result<()> {
    driver()?;
    // SAFETY: caller contract.
    let status = unsafe { sys::cuMemAddressFree(base as sys::CUdeviceptr, bytes) };
    check(status, "cuMemAddressFree")
}

/// Why [`create`] failed.
#[derive(Debug)]
pub(crate) enum CreateError {
    /// The call failed, other than out of memory, with shareable handle kinds requested: the
    /// driver may refuse the kinds (`CUDA_ERROR_NOT_SUPPORTED` or `CUDA_ERROR_NOT_PERMITTED`
    /// without an IMEX channel for fabric handles, `CUDA_ERROR_INVALID_VALUE` for a combination it
    /// does not take, and drivers differ in which): try fewer kinds, and the error stands if it
    /// comes back with none.
    HandleKinds(Error),
    /// Any other failure, out-of-memory ([`Error::OutOfMemory`]) included.
    Other(Error),
}

/// `cuMemCreate` of `bytes` (a multiple of the granularity) of pinned memory on `device`, exportable
/// as `handles`. Release it with [`release`].
pub(crate) fn create(
    device: DeviceId,
    bytes: usize,
    handles: ShareableHandles,
    resource: &str,
) -> std::result::Result<AllocationHandle, CreateError> {
    let _guard = DeviceGuard::new(device).map_err(CreateError::Other)?;
    let prop = properties(device, handles);
    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: the device's context is current; `handle` is a valid out-pointer; `prop` is fully
    // initialised (reserved bytes zero); flags must be 0.
    let status = counted(
        unsafe { sys::cuMemCreate(&mut handle, bytes, &prop, 0) },
        "cuMemCreate",
    );
    match status {
        sys::CUresult::CUDA_SUCCESS => Ok(handle),
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(CreateError::Other(Error::OutOfMemory {
            bytes,
            resource: resource.to_owned(),
            detail: "cuMemCreate".to_owned(),
        })),
        other if !handles.is_none() => {
            Err(CreateError::HandleKinds(cuda_error(other, "cuMemCreate")))
        }
        other => Err(CreateError::Other(cuda_error(other, "cuMemCreate"))),
    }
}

/// `cuMemRelease`: gives the handle up; the memory goes back once it is also unmapped everywhere
/// (and released by every process that imported it).
///
/// # Safety
/// `handle` came from [`create`] or an import and is released once.
pub(crate) unsafe fn release(handle: AllocationHandle) -> Result<()> {
    driver()?;
    // SAFETY: caller contract.
    check(unsafe { sys::cuMemRelease(handle) }, "cuMemRelease")
}

/// `cuMemMap` of the whole of `handle` (`bytes` long) at `addr`.
///
/// # Safety
/// `[addr, addr + bytes)` lies inside a live reservation, is granularity-aligned and nothing is
/// mapped there; `handle` is a live allocation of exactly `bytes`.
pub(crate) unsafe fn map(addr: usize, bytes: usize, handle: AllocationHandle) -> Result<()> {
    driver()?;
    // SAFETY: caller contract; offset and flags must be 0.
    let status = unsafe { sys::cuMemMap(addr as sys::CUdeviceptr, bytes, 0, handle, 0) };
    check(status, "cuMemMap")
}

/// `cuMemUnmap` of `[addr, addr + bytes)`, which is exactly one mapping of [`map`].
///
/// # Safety
/// No work queued on any stream still uses the range, and nothing will use it after this call.
pub(crate) unsafe fn unmap(addr: usize, bytes: usize) -> Result<()> {
    driver()?;
    // SAFETY: caller contract.
    check(
        unsafe { sys::cuMemUnmap(addr as sys::CUdeviceptr, bytes) },
        "cuMemUnmap",
    )
}

/// `cuMemSetAccess` of `[addr, addr + bytes)` (one or several whole mappings): read and write for
/// every device of `devices`.
///
/// # Safety
/// The range is wholly mapped.
pub(crate) unsafe fn set_access(addr: usize, bytes: usize, devices: &[DeviceId]) -> Result<()> {
    driver()?;
    let descriptors: Vec<sys::CUmemAccessDesc> = devices
        .iter()
        .map(|&device| sys::CUmemAccessDesc {
            location: location(device),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        })
        .collect();
    // SAFETY: caller contract (a mapped range); `descriptors` holds `len` valid entries.
    let status = unsafe {
        sys::cuMemSetAccess(
            addr as sys::CUdeviceptr,
            bytes,
            descriptors.as_ptr(),
            descriptors.len(),
        )
    };
    check(status, "cuMemSetAccess")
}

/// `cuMemExportToShareableHandle` as a POSIX file descriptor (owned by the caller).
///
/// # Errors
/// The driver's error, e.g. `CUDA_ERROR_INVALID_VALUE` when the allocation was not created
/// exportable as a file descriptor.
pub(crate) fn export_posix_fd(handle: AllocationHandle) -> Result<OwnedFd> {
    driver()?;
    let mut fd: std::ffi::c_int = -1;
    // SAFETY: for POSIX file descriptors the shareable handle is an `int` the driver writes.
    let status = unsafe {
        sys::cuMemExportToShareableHandle(
            (&mut fd as *mut std::ffi::c_int).cast(),
            handle,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
        )
    };
    check(status, "cuMemExportToShareableHandle")?;
    if fd < 0 {
        return Err(Error::invalid(
            "cuMemExportToShareableHandle returned no file descriptor",
        ));
    }
    // SAFETY: the driver made a new descriptor for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `cuMemExportToShareableHandle` as a fabric handle (64 opaque bytes).
///
/// # Errors
/// The driver's error, e.g. when the allocation was not created exportable as a fabric handle.
pub(crate) fn export_fabric(handle: AllocationHandle) -> Result<[u8; 64]> {
    driver()?;
    let mut fabric = sys::CUmemFabricHandle { data: [0; 64] };
    // SAFETY: for fabric handles the shareable handle is a `CUmemFabricHandle` the driver fills.
    let status = unsafe {
        sys::cuMemExportToShareableHandle(
            (&mut fabric as *mut sys::CUmemFabricHandle).cast(),
            handle,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
            0,
        )
    };
    check(status, "cuMemExportToShareableHandle")?;
    Ok(fabric.data)
}

/// `cuMemImportFromShareableHandle` of a POSIX file descriptor (which stays the caller's: close it
/// after the import). `device` is made current for the call.
pub(crate) fn import_posix_fd(device: DeviceId, fd: BorrowedFd<'_>) -> Result<AllocationHandle> {
    let _guard = DeviceGuard::new(device)?;
    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: for POSIX file descriptors the driver takes the descriptor's value in the pointer
    // argument itself (not a pointer to it); `handle` is a valid out-pointer.
    let status = unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut handle,
            fd.as_raw_fd() as usize as *mut std::ffi::c_void,
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        )
    };
    check(status, "cuMemImportFromShareableHandle")?;
    Ok(handle)
}

/// `cuMemImportFromShareableHandle` of a fabric handle. `device` is made current for the call.
pub(crate) fn import_fabric(device: DeviceId, fabric: &[u8; 64]) -> Result<AllocationHandle> {
    let _guard = DeviceGuard::new(device)?;
    let mut data = sys::CUmemFabricHandle { data: *fabric };
    let mut handle: sys::CUmemGenericAllocationHandle = 0;
    // SAFETY: for fabric handles the driver reads a `CUmemFabricHandle` through the pointer;
    // `handle` is a valid out-pointer.
    let status = unsafe {
        sys::cuMemImportFromShareableHandle(
            &mut handle,
            (&mut data as *mut sys::CUmemFabricHandle).cast(),
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
        )
    };
    check(status, "cuMemImportFromShareableHandle")?;
    Ok(handle)
}

/// True when `device` may read and write `addr` (`cuMemGetAccess`): what `cuMemSetAccess`
/// really granted, for the GPU tests to check against the range's books.
#[cfg(test)]
pub(crate) fn can_read_write(addr: usize, device: DeviceId) -> Result<bool> {
    driver()?;
    let mut flags: std::ffi::c_ulonglong = 0;
    let at = location(device);
    // SAFETY: both pointers are valid for the call; the driver only reads `at`.
    let status = unsafe { sys::cuMemGetAccess(&mut flags, &at, addr as sys::CUdeviceptr) };
    check(status, "cuMemGetAccess")?;
    Ok(flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE as u64)
}

/// The device (in this process's numbering) whose memory `handle` is
/// (`cuMemGetAllocationPropertiesFromHandle`): how an importer learns where the memory lives.
pub(crate) fn allocation_device(handle: AllocationHandle) -> Result<DeviceId> {
    driver()?;
    let mut prop = properties(0, ShareableHandles::NONE);
    // SAFETY: `handle` is a live allocation (caller's); `prop` is a valid out-pointer.
    let status = unsafe { sys::cuMemGetAllocationPropertiesFromHandle(&mut prop, handle) };
    check(status, "cuMemGetAllocationPropertiesFromHandle")?;
    if prop.location.type_ != sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE {
        return Err(Error::Unsupported(format!(
            "the imported allocation is not device memory ({:?})",
            prop.location.type_
        )));
    }
    Ok(prop.location.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shareable_handle_bits_are_the_drivers() {
        assert_eq!(
            ShareableHandles::POSIX_FD.bits(),
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0
        );
        assert_eq!(
            ShareableHandles::FABRIC.bits(),
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC.0
        );
        for bits in 0..16 {
            assert_eq!(ShareableHandles::from_bits(bits).bits(), bits & 9);
        }
    }

    #[test]
    fn without_a_driver_every_call_fails_cleanly() {
        if driver().is_ok() {
            return; // covered by the GPU tests of the virtual range
        }
        let host = |e: &Error| matches!(e, Error::NoDriver(_) | Error::NoDevice(_));
        assert!(is_supported(0).is_err_and(|e| host(&e)));
        assert_eq!(supported_handles(0), ShareableHandles::NONE);
        assert!(
            granularity(0, ShareableHandles::NONE, Granularity::Minimum).is_err_and(|e| host(&e))
        );
        assert!(reserve(1 << 21, 1 << 21, "test").is_err_and(|e| host(&e)));
        assert!(matches!(
            create(0, 1 << 21, ShareableHandles::NONE, "test"),
            Err(CreateError::Other(e)) if host(&e)
        ));
        assert!(export_fabric(1).is_err_and(|e| host(&e)));
        assert!(allocation_device(1).is_err_and(|e| host(&e)));
        // SAFETY: without a driver these return before any call.
        unsafe {
            assert!(free_reservation(1 << 40, 1 << 21).is_err_and(|e| host(&e)));
            assert!(release(1).is_err_and(|e| host(&e)));
            assert!(map(1 << 40, 1 << 21, 1).is_err_and(|e| host(&e)));
            assert!(unmap(1 << 40, 1 << 21).is_err_and(|e| host(&e)));
            assert!(set_access(1 << 40, 1 << 21, &[0]).is_err_and(|e| host(&e)));
        }
        let fd = std::fs::File::open("/dev/null").unwrap();
        assert!(import_posix_fd(0, fd.as_fd()).is_err_and(|e| host(&e)));
        assert!(import_fabric(0, &[0; 64]).is_err_and(|e| host(&e)));
    }

    use std::os::fd::AsFd;
}
