//! Sharing a span of a [`VirtualRange`](super::VirtualRange) with another process: the exported
//! form ([`ExportedSpan`]: one shareable handle per granule, and where the bytes lie in them) and
//! its mapping in the importing process ([`ImportedSpan`]: a reservation of its own with the same
//! granules mapped in it, so both processes reach the same memory with no copy).

use std::fmt;

use super::backing::{discard, Backing, MemoryKind, Physical, SharedHandle};
use super::device::{self, DeviceBacking};
use super::host::HostBacking;
use crate::cuda::{self, DeviceId};
use crate::error::{Error, Result};

/// A span exported by [`VirtualRange::export`](super::VirtualRange::export): the handles of the
/// granules it touches, in order, and the span's place in them. Its descriptors are owned: they
/// close when it drops (a receiving process keeps the memory alive only once it has imported it).
#[derive(Debug)]
pub struct ExportedSpan {
    /// Where the granules live.
    pub memory: MemoryKind,
    /// Bytes per granule (every handle is one granule).
    pub granularity: usize,
    /// Where the span starts in the first granule.
    pub offset: usize,
    /// The span's length in bytes.
    pub size: usize,
    /// One handle per granule the span touches, in address order.
    pub handles: Vec<SharedHandle>,
}

impl ExportedSpan {
    /// Checks the fields against each other (a span received from another process is checked
    /// before anything is mapped).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first inconsistency.
    pub fn validate(&self) -> Result<()> {
        if self.granularity == 0 || self.size == 0 || self.offset >= self.granularity {
            return Err(Error::invalid(format!(
                "an exported span needs a granularity, a size and an offset inside the first \
                 granule (granularity {}, offset {}, size {})",
                self.granularity, self.offset, self.size
            )));
        }
        let touched = self
            .offset
            .checked_add(self.size)
            .map(|end| end.div_ceil(self.granularity))
            .ok_or_else(|| Error::invalid("an exported span's size overflows"))?;
        if touched != self.handles.len() {
            return Err(Error::invalid(format!(
                "an exported span of {} bytes at offset {} touches {touched} granules of {} but \
                 carries {} handles",
                self.size,
                self.offset,
                self.granularity,
                self.handles.len()
            )));
        }
        let fabric = matches!(self.handles.first(), Some(SharedHandle::Fabric(_)));
        if self
            .handles
            .iter()
            .any(|h| matches!(h, SharedHandle::Fabric(_)) != fabric)
        {
            return Err(Error::invalid(
                "an exported span mixes file descriptors and fabric handles",
            ));
        }
        if fabric && self.memory == MemoryKind::Host {
            return Err(Error::invalid("host memory has no fabric handles"));
        }
        Ok(())
    }
}

/// An [`ExportedSpan`] mapped into this process: the exporter's granules in a reservation of this
/// process, accessible to the device they live on. Reads and writes reach the exporter's memory
/// (no copy). Dropping it unmaps and releases this process's references.
pub struct ImportedSpan {
    backing: Box<dyn Backing>,
    base: usize,
    reserved: usize,
    granularity: usize,
    /// The imported granules, mapped at `base + i × granularity`.
    physical: Vec<Physical>,
    offset: usize,
    size: usize,
    device: Option<DeviceId>,
}

impl fmt::Debug for ImportedSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportedSpan")
            .field("ptr", &self.as_ptr())
            .field("size", &self.size)
            .field("granules", &self.physical.len())
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl ImportedSpan {
    /// Maps `span`'s granules into a new reservation of this process. Device memory is imported
    /// with the calling thread's current device's context and made accessible to the device it
    /// lives on (the driver tells which). `span`'s descriptors stay its own.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an inconsistent span ([`ExportedSpan::validate`]) or a
    /// granularity this process cannot map; host-mode errors for device memory without a GPU; the
    /// driver's (or the kernel's) errors. Nothing stays mapped on error.
    pub fn new(span: &ExportedSpan) -> Result<Self> {
        span.validate()?;
        let backing: Box<dyn Backing> = match span.memory {
            MemoryKind::Host => Box::new(HostBacking::for_import()),
            MemoryKind::Device => {
                Box::new(DeviceBacking::for_import(cuda::device::current_device()?)?)
            }
        };
        let minimum = backing.minimum_granularity();
        if span.granularity % minimum != 0 {
            return Err(Error::invalid(format!(
                "an exported granule of {} bytes is not a multiple of this process's minimum \
                 granularity ({minimum})",
                span.granularity
            )));
        }
        let reserved = span
            .granularity
            .checked_mul(span.handles.len())
            .ok_or_else(|| Error::invalid("an exported span's size overflows"))?;
        let base = backing.reserve(reserved, minimum)?;
        let mut imported = ImportedSpan {
            backing,
            base,
            reserved,
            granularity: span.granularity,
            physical: Vec::with_capacity(span.handles.len()),
            offset: span.offset,
            size: span.size,
            device: None,
        };
        // From here on, an error drops `imported`, which unmaps what is mapped.
        for handle in &span.handles {
            let physical = imported.backing.import(handle, span.granularity)?;
            let addr = imported.base + imported.physical.len() * imported.granularity;
            // SAFETY: `addr` is the next unmapped granule of the reservation just made.
            if let Err(e) = unsafe { imported.backing.map(addr, &physical) } {
                // SAFETY: imported just now, mapped nowhere.
                if let Err(r) = unsafe { imported.backing.release(physical) } {
                    tracing::error!(
                        "imported span: releasing a granule that could not be mapped: {r}"
                    );
                }
                return Err(e);
            }
            imported.physical.push(physical);
        }
        let devices = match span.memory {
            MemoryKind::Device => vec![device::imported_device(&imported.physical[0])?],
            MemoryKind::Host => Vec::new(),
        };
        // SAFETY: every granule of the reservation was mapped above.
        unsafe {
            imported
                .backing
                .set_access(imported.base, imported.reserved, &devices)?;
        }
        imported.device = devices.first().copied();
        Ok(imported)
    }

    /// The first byte of the span.
    pub fn as_ptr(&self) -> *mut u8 {
        (self.base + self.offset) as *mut u8
    }

    /// The span's length in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// True for an empty span (never: exports are not empty).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The device the memory lives on; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.device
    }
}

impl Drop for ImportedSpan {
    fn drop(&mut self) {
        for (i, physical) in std::mem::take(&mut self.physical).into_iter().enumerate() {
            let addr = self.base + i * self.granularity;
            // SAFETY: dropping: nothing uses the mapping any more; each granule is released once.
            unsafe {
                discard(&*self.backing, addr, physical, || {
                    format!("imported span granule {i}")
                });
            }
        }
        // SAFETY: everything was unmapped above; the reservation is freed once.
        if let Err(e) = unsafe { self.backing.free_reservation(self.base, self.reserved) } {
            tracing::error!("imported span: freeing the reservation: {e}");
        }
    }
}
