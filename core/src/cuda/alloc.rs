//! The driver's immediate allocators (`cuMemAlloc`, `cuMemAllocManaged`, `cuMemHostAlloc`) and
//! placement advice, as `Result`s: the stateless driver resources of `mr/` are built on these.

use super::device::DeviceId;
use super::{check, check_alloc, sys};
use crate::error::Result;

/// Which of the driver's immediate allocators a stateless resource uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverMemory {
    /// Device memory: `cuMemAlloc` / `cuMemFree`.
    Device,
    /// Managed (unified) memory: `cuMemAllocManaged(.., CU_MEM_ATTACH_GLOBAL)` / `cuMemFree`.
    Managed,
    /// Pinned host memory, portable and mapped: `cuMemHostAlloc` / `cuMemFreeHost`.
    PinnedHost,
}

impl DriverMemory {
    /// Allocates `bytes` (> 0) for `resource` (named in an out-of-memory error); a context must be
    /// current (see [`ensure_context`](super::device::ensure_context)).
    pub(crate) fn allocate(self, bytes: usize, resource: &str) -> Result<*mut u8> {
        match self {
            DriverMemory::Device => {
                let mut ptr: sys::CUdeviceptr = 0;
                // SAFETY: the caller made a context current; `ptr` is a valid out-pointer.
                let status = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) };
                check_alloc(status, "cuMemAlloc", bytes, resource)?;
                Ok(ptr as *mut u8)
            }
            DriverMemory::Managed => {
                let mut ptr: sys::CUdeviceptr = 0;
                let flags = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
                // SAFETY: the caller made a context current; `ptr` is a valid out-pointer.
                let status = unsafe { sys::cuMemAllocManaged(&mut ptr, bytes, flags) };
                check_alloc(status, "cuMemAllocManaged", bytes, resource)?;
                Ok(ptr as *mut u8)
            }
            DriverMemory::PinnedHost => {
                let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
                let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
                // SAFETY: the caller made a context current; `ptr` is a valid out-pointer; the
                // flags are valid.
                let status = unsafe { sys::cuMemHostAlloc(&mut ptr, bytes, flags) };
                check_alloc(status, "cuMemHostAlloc", bytes, resource)?;
                Ok(ptr.cast())
            }
        }
    }

    /// Frees `ptr` (not null); a context must be current.
    ///
    /// # Safety
    /// `ptr` came from [`DriverMemory::allocate`] of the same kind and is freed once.
    pub(crate) unsafe fn free(self, ptr: *mut u8) -> Result<()> {
        match self {
            DriverMemory::Device | DriverMemory::Managed => {
                // SAFETY: caller contract (memory of cuMemAlloc or cuMemAllocManaged).
                check(
                    unsafe { sys::cuMemFree_v2(ptr as sys::CUdeviceptr) },
                    "cuMemFree",
                )
            }
            DriverMemory::PinnedHost => {
                // SAFETY: caller contract (memory of cuMemHostAlloc).
                check(unsafe { sys::cuMemFreeHost(ptr.cast()) }, "cuMemFreeHost")
            }
        }
    }
}

/// Where [`advise_preferred_location`] asks the driver to keep memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// On this device.
    Device(DeviceId),
    /// On the host.
    Host,
}

/// `cuMemAdvise_v2(.., CU_MEM_ADVISE_SET_PREFERRED_LOCATION, location)` for `[ptr, ptr + bytes)`.
///
/// Only a placement hint: it never changes what the memory holds.
///
/// # Safety
/// `[ptr, ptr + bytes)` lies inside one live allocation, and the driver has the entry point
/// (`has_entry_point("cuMemAdvise_v2")`, checked by the caller once).
pub(crate) unsafe fn advise_preferred_location(
    ptr: *const u8,
    bytes: usize,
    location: Location,
) -> Result<()> {
    let location = match location {
        Location::Device(id) => sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id,
        },
        Location::Host => sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
            id: 0,
        },
    };
    let advice = sys::CUmem_advise::CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
    // SAFETY: caller contract (a range of a live allocation; the entry point exists); advice only
    // changes placement hints.
    let status = unsafe { sys::cuMemAdvise_v2(ptr as sys::CUdeviceptr, bytes, advice, location) };
    check(status, "cuMemAdvise")
}
