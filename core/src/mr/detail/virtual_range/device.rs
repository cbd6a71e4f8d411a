//! Granules of CUDA device memory (`cuMemCreate` + `cuMemMap` + `cuMemSetAccess`), through
//! [`crate::cuda::vmm`].
//!
//! Shareable handles: a new backing asks for every kind the device supports (POSIX file
//! descriptors, fabric handles) and steps down a ladder (both, POSIX fd alone, fabric alone, none)
//! while `cuMemCreate` refuses the kinds (fabric handles need an IMEX channel, which no attribute
//! reveals). A probe granule at construction settles the rung, so
//! [`shareable`](Backing::shareable) reports what every granule will carry.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::backing::{Backing, MemoryKind, Physical, SharedHandle};
use crate::cuda::vmm::{self, CreateError, Granularity, ShareableHandles};
use crate::cuda::{self, DeviceGuard, DeviceId};
use crate::error::{Error, Result};
use crate::mr::ExportHandleType;

/// The name in out-of-memory errors.
const NAME: &str = "virtual_range";

/// Device memory of one device.
#[derive(Debug)]
pub(crate) struct DeviceBacking {
    device: DeviceId,
    minimum: usize,
    recommended: usize,
    /// The handle kinds asked for (and supported): the top of the ladder.
    wanted: ShareableHandles,
    /// The `ShareableHandles` bits new granules are created with (a rung of the ladder).
    handles: AtomicU32,
    /// True once a `cuMemCreate` succeeded with `handles`: the ladder is not stepped down any more.
    settled: AtomicBool,
}

/// The ladder of handle kinds to try, most capable first, within `wanted`.
fn ladder(wanted: ShareableHandles) -> Vec<ShareableHandles> {
    let mut rungs = vec![wanted];
    for rung in [
        ShareableHandles::POSIX_FD,
        ShareableHandles::FABRIC,
        ShareableHandles::NONE,
    ] {
        let rung = rung.and(wanted);
        if !rungs.contains(&rung) {
            rungs.push(rung);
        }
    }
    rungs
}

impl DeviceBacking {
    /// A backing of `device`'s memory whose granules carry `wanted` handle kinds where the device
    /// and the system allow (`None`: every kind the device supports), probed with one granule.
    ///
    /// # Errors
    /// Host-mode errors, an invalid device, [`Error::Unsupported`] when the device has no virtual
    /// memory management.
    pub(crate) fn new(device: DeviceId, wanted: Option<ShareableHandles>) -> Result<Self> {
        let supported = vmm::supported_handles(device);
        let backing = Self::with_handles(device, wanted.map_or(supported, |w| w.and(supported)))?;
        // The probe settles the ladder's rung; out of memory leaves it to the first real granule.
        match backing.create(backing.minimum) {
            // SAFETY: the probe granule was just made here and is mapped nowhere.
            Ok(probe) => unsafe { backing.release(probe)? },
            Err(e) if e.is_out_of_memory() => {}
            Err(e) => return Err(e),
        }
        Ok(backing)
    }

    /// A backing that only maps what other processes export (it never creates granules).
    pub(crate) fn for_import(device: DeviceId) -> Result<Self> {
        Self::with_handles(device, ShareableHandles::NONE)
    }

    fn with_handles(device: DeviceId, wanted: ShareableHandles) -> Result<Self> {
        let _guard = DeviceGuard::new(device)?;
        if !vmm::is_supported(device)? {
            return Err(Error::Unsupported(format!(
                "device {device} does not support virtual memory management (cuMemCreate)"
            )));
        }
        // Exportable memory may need a coarser unit; a refused combination is found by the probe.
        let unit = |which| -> Result<usize> {
            let plain = vmm::granularity(device, ShareableHandles::NONE, which)?;
            Ok(vmm::granularity(device, wanted, which).map_or(plain, |g| g.max(plain)))
        };
        let minimum = unit(Granularity::Minimum)?;
        let recommended = unit(Granularity::Recommended)?;
        Ok(Self {
            device,
            minimum,
            recommended: recommended.max(minimum),
            wanted,
            handles: AtomicU32::new(wanted.bits()),
            settled: AtomicBool::new(false),
        })
    }

    fn current_handles(&self) -> ShareableHandles {
        ShareableHandles::from_bits(self.handles.load(Ordering::Relaxed))
    }
}

impl Backing for DeviceBacking {
    fn memory(&self) -> MemoryKind {
        MemoryKind::Device
    }

    fn device(&self) -> Option<DeviceId> {
        Some(self.device)
    }

    fn minimum_granularity(&self) -> usize {
        self.minimum
    }

    fn default_granularity(&self) -> usize {
        self.recommended
    }

    fn default_reserve(&self) -> Result<usize> {
        Ok(cuda::mem_info(self.device)?.1)
    }

    fn shareable(&self) -> ShareableHandles {
        self.current_handles()
    }

    fn free_bytes(&self) -> Option<usize> {
        cuda::mem_info(self.device).ok().map(|(free, _)| free)
    }

    fn check_peer(&self, peer: DeviceId) -> Result<()> {
        if !cuda::device::can_access_peer(peer, self.device)? {
            return Err(Error::Unsupported(format!(
                "device {peer} cannot access the memory of device {} (no peer access between them)",
                self.device
            )));
        }
        Ok(())
    }

    fn reserve(&self, bytes: usize, alignment: usize) -> Result<usize> {
        let _guard = DeviceGuard::new(self.device)?;
        vmm::reserve(bytes, alignment, NAME)
    }

    unsafe fn free_reservation(&self, base: usize, bytes: usize) -> Result<()> {
        let _guard = DeviceGuard::new(self.device)?;
        // SAFETY: forwarded contract.
        unsafe { vmm::free_reservation(base, bytes) }
    }

    fn create(&self, bytes: usize) -> Result<Physical> {
        loop {
            let handles = self.current_handles();
            match vmm::create(self.device, bytes, handles, NAME) {
                Ok(raw) => {
                    self.settled.store(true, Ordering::Relaxed);
                    return Ok(Physical { raw, bytes });
                }
                Err(CreateError::HandleKinds(e)) => {
                    let rungs = ladder(self.wanted);
                    let next = rungs
                        .iter()
                        .position(|&rung| rung == handles)
                        .and_then(|at| rungs.get(at + 1).copied());
                    match next {
                        Some(next) if !self.settled.load(Ordering::Relaxed) => {
                            tracing::info!(
                                "device {}: cuMemCreate refused shareable handles {handles:?} ({e}); \
                                 trying {next:?}",
                                self.device
                            );
                            self.handles.store(next.bits(), Ordering::Relaxed);
                        }
                        _ => return Err(e),
                    }
                }
                Err(CreateError::Other(e)) => return Err(e),
            }
        }
    }

    unsafe fn release(&self, physical: Physical) -> Result<()> {
        let _guard = DeviceGuard::new(self.device)?;
        // SAFETY: forwarded contract.
        unsafe { vmm::release(physical.raw) }
    }

    unsafe fn map(&self, addr: usize, physical: &Physical) -> Result<()> {
        let _guard = DeviceGuard::new(self.device)?;
        // SAFETY: forwarded contract.
        unsafe { vmm::map(addr, physical.bytes, physical.raw) }
    }

    unsafe fn set_access(&self, addr: usize, bytes: usize, devices: &[DeviceId]) -> Result<()> {
        let _guard = DeviceGuard::new(self.device)?;
        // SAFETY: forwarded contract.
        unsafe { vmm::set_access(addr, bytes, devices) }
    }

    unsafe fn unmap(&self, addr: usize, bytes: usize) -> Result<()> {
        let _guard = DeviceGuard::new(self.device)?;
        // SAFETY: forwarded contract.
        unsafe { vmm::unmap(addr, bytes) }
    }

    fn export(&self, physical: &Physical, kind: ExportHandleType) -> Result<SharedHandle> {
        let _guard = DeviceGuard::new(self.device)?;
        match kind {
            ExportHandleType::PosixFileDescriptor => {
                vmm::export_posix_fd(physical.raw).map(SharedHandle::PosixFd)
            }
            ExportHandleType::Fabric => vmm::export_fabric(physical.raw).map(SharedHandle::Fabric),
        }
    }

    fn import(&self, handle: &SharedHandle, bytes: usize) -> Result<Physical> {
        let raw = match handle {
            SharedHandle::PosixFd(fd) => vmm::import_posix_fd(self.device, fd.as_fd())?,
            SharedHandle::Fabric(data) => vmm::import_fabric(self.device, data)?,
        };
        Ok(Physical { raw, bytes })
    }
}

/// The device whose memory an imported granule is (in this process's numbering).
pub(crate) fn imported_device(physical: &Physical) -> Result<DeviceId> {
    vmm::allocation_device(physical.raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_steps_down_to_no_handles_within_what_was_wanted() {
        let (posix, fabric, none) = (
            ShareableHandles::POSIX_FD,
            ShareableHandles::FABRIC,
            ShareableHandles::NONE,
        );
        let both = ShareableHandles {
            posix_fd: true,
            fabric: true,
        };
        assert_eq!(ladder(both), vec![both, posix, fabric, none]);
        assert_eq!(ladder(posix), vec![posix, none]);
        assert_eq!(ladder(fabric), vec![fabric, none]);
        assert_eq!(ladder(none), vec![none]);
    }
}
