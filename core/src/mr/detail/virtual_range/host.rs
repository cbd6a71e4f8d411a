//! Host memory standing in for a device (host mode), with the driver's behaviour:
//!
//! | driver | here |
//! | --- | --- |
//! | `cuMemAddressReserve` | `mmap(PROT_NONE, MAP_NORESERVE)` of the range (aligned by trimming) |
//! | `cuMemCreate` | a `memfd` of one granule (`memfd_create` + `ftruncate`), counted against a capacity: the simulated device's size |
//! | `cuMemMap` | `mmap(MAP_FIXED \| MAP_SHARED, PROT_NONE)` of the memfd over the reservation |
//! | `cuMemSetAccess` | `mprotect(PROT_READ \| PROT_WRITE)`: before it, a touch faults, as on the device |
//! | `cuMemUnmap` | `mmap(MAP_FIXED, PROT_NONE)` of anonymous memory over the granule: the pages leave the process at once and the addresses stay reserved |
//! | `cuMemRelease` | `close` of the memfd: the pages go back to the kernel once no process maps or holds it |
//! | `cuMemExportToShareableHandle` (POSIX fd) | a duplicate of the memfd |
//! | `cuMemImportFromShareableHandle` | a duplicate of the received descriptor |
//! | `cuMemAddressFree` | `munmap` |
//!
//! One memfd per granule keeps the driver's reference counting exactly: a granule another process
//! imported keeps its bytes after the exporter released it. It costs one file descriptor per
//! mapped granule; running out of descriptors (`EMFILE`) is reported as out of memory, naming the
//! limit.
//!
//! A *counting* backing ([`HostBacking::counting`], `Backend::Simulated`) keeps the capacity and
//! the reservation but makes no memfd and maps nothing: a simulated device for simulations that
//! never touch the memory (the replay tool, benchmarks of the bookkeeping), with no descriptor or
//! host memory per granule, so traces of any size replay. Touching its memory faults.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::backing::{Backing, MemoryKind, Physical, SharedHandle};
use crate::cuda::vmm::ShareableHandles;
use crate::cuda::DeviceId;
use crate::error::{Error, Result};
use crate::mr::ExportHandleType;

/// The name in out-of-memory errors.
const NAME: &str = "virtual_range (host mode)";
/// The name in out-of-memory errors of a counting backing.
const COUNTING_NAME: &str = "virtual_range (simulated device)";

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        page as usize
    } else {
        4096
    }
}

/// The machine's physical memory, in bytes (the host backend's default capacity).
pub(crate) fn physical_memory() -> usize {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    (pages.max(0) as usize).saturating_mul(page_size())
}

/// The error of a failed OS call: resource exhaustion is out of memory, the rest invalid.
fn os_error(call: &str, bytes: usize) -> Error {
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOMEM | libc::ENOSPC) => Error::OutOfMemory {
            bytes,
            resource: NAME.into(),
            detail: format!("{call}: {err}"),
        },
        Some(libc::EMFILE | libc::ENFILE) => Error::OutOfMemory {
            bytes,
            resource: NAME.into(),
            detail: format!(
                "{call}: {err} (host mode holds one memfd per mapped granule: raise the open-file \
                 limit, RLIMIT_NOFILE, or use a larger granularity)"
            ),
        },
        _ => Error::invalid(format!("{call} failed: {err}")),
    }
}

/// Host memory of at most `capacity` bytes in granules, standing in for a device.
#[derive(Debug)]
pub(crate) struct HostBacking {
    capacity: usize,
    granularity: usize,
    /// Bytes of granules created or imported and not released.
    used: AtomicUsize,
    /// Granules are numbers, not memory (see the module docs): the next one's.
    counting: Option<AtomicU64>,
}

impl HostBacking {
    /// A simulated device of `capacity` bytes whose granule is `granularity` (a multiple of the
    /// page size).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a granularity that is not a positive multiple of the page size.
    pub(crate) fn new(capacity: usize, granularity: usize) -> Result<Self> {
        let page = page_size();
        if granularity == 0 || granularity % page != 0 {
            return Err(Error::invalid(format!(
                "a host-mode granularity must be a positive multiple of the page size ({page}), \
                 not {granularity}"
            )));
        }
        Ok(Self {
            capacity,
            granularity,
            used: AtomicUsize::new(0),
            counting: None,
        })
    }

    /// A simulated device of `capacity` bytes whose granules only exist as counts (see the
    /// module docs).
    ///
    /// # Errors
    /// As [`HostBacking::new`].
    pub(crate) fn counting(capacity: usize, granularity: usize) -> Result<Self> {
        Ok(Self {
            counting: Some(AtomicU64::new(1)),
            ..Self::new(capacity, granularity)?
        })
    }

    fn name(&self) -> &'static str {
        if self.counting.is_some() {
            COUNTING_NAME
        } else {
            NAME
        }
    }

    /// A backing that only maps what other processes export.
    pub(crate) fn for_import() -> Self {
        Self {
            capacity: 0,
            granularity: page_size(),
            used: AtomicUsize::new(0),
            counting: None,
        }
    }
}

/// `mmap` with `MAP_FIXED` at `addr`, checked to have landed there.
///
/// # Safety
/// `[addr, addr + bytes)` belongs to the caller (a reservation of ours), so replacing whatever is
/// mapped there harms no one else.
unsafe fn map_fixed(
    addr: usize,
    bytes: usize,
    flags: libc::c_int,
    fd: libc::c_int,
    call: &str,
) -> Result<()> {
    // SAFETY: caller contract; MAP_FIXED replaces only our own pages.
    let got = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            bytes,
            libc::PROT_NONE,
            flags | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    if got == libc::MAP_FAILED {
        return Err(os_error(call, bytes));
    }
    debug_assert_eq!(got as usize, addr);
    Ok(())
}

/// Reserves `bytes` of addresses aligned to `alignment` with nothing behind them: an
/// `mmap(PROT_NONE, MAP_NORESERVE)`, aligned by trimming (it takes no memory).
pub(crate) fn reserve_addresses(bytes: usize, alignment: usize) -> Result<usize> {
    let span = bytes
        .checked_add(alignment)
        .ok_or_else(|| Error::invalid(format!("a reservation of {bytes} bytes overflows")))?;
    // SAFETY: a fresh anonymous mapping anywhere; PROT_NONE and MAP_NORESERVE take no memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(os_error("mmap (reserve)", bytes));
    }
    let raw = raw as usize;
    let base = raw.next_multiple_of(alignment);
    let (head, tail) = (base - raw, span - (base - raw) - bytes);
    // SAFETY: both trims lie inside the mapping just made and outside `[base, base + bytes)`.
    unsafe {
        if head > 0 {
            libc::munmap(raw as *mut libc::c_void, head);
        }
        if tail > 0 {
            libc::munmap((base + bytes) as *mut libc::c_void, tail);
        }
    }
    Ok(base)
}

/// Frees a reservation of [`reserve_addresses`].
///
/// # Safety
/// `[base, base + bytes)` is such a reservation, no longer used, freed once.
pub(crate) unsafe fn free_addresses(base: usize, bytes: usize) -> Result<()> {
    // SAFETY: caller contract: a reservation of ours, no longer used.
    if unsafe { libc::munmap(base as *mut libc::c_void, bytes) } != 0 {
        return Err(os_error("munmap (free the reservation)", bytes));
    }
    Ok(())
}

impl Backing for HostBacking {
    fn memory(&self) -> MemoryKind {
        MemoryKind::Host
    }

    fn device(&self) -> Option<DeviceId> {
        None
    }

    fn minimum_granularity(&self) -> usize {
        page_size()
    }

    fn default_granularity(&self) -> usize {
        self.granularity
    }

    fn default_reserve(&self) -> Result<usize> {
        Ok(self.capacity)
    }

    fn shareable(&self) -> ShareableHandles {
        if self.counting.is_some() {
            ShareableHandles::NONE
        } else {
            ShareableHandles::POSIX_FD
        }
    }

    fn free_bytes(&self) -> Option<usize> {
        Some(
            self.capacity
                .saturating_sub(self.used.load(Ordering::Relaxed)),
        )
    }

    fn check_peer(&self, peer: DeviceId) -> Result<()> {
        Err(Error::Unsupported(format!(
            "host mode has no devices: access for device {peer} cannot be granted"
        )))
    }

    fn reserve(&self, bytes: usize, alignment: usize) -> Result<usize> {
        reserve_addresses(bytes, alignment)
    }

    unsafe fn free_reservation(&self, base: usize, bytes: usize) -> Result<()> {
        // SAFETY: caller contract.
        unsafe { free_addresses(base, bytes) }
    }

    fn create(&self, bytes: usize) -> Result<Physical> {
        let fits = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes)
                    .filter(|&after| after <= self.capacity)
            });
        if let Err(used) = fits {
            return Err(Error::OutOfMemory {
                bytes,
                resource: self.name().into(),
                detail: format!(
                    "the simulated device was full: {used} of its {} bytes in use",
                    self.capacity
                ),
            });
        }
        if let Some(next) = &self.counting {
            return Ok(Physical {
                raw: next.fetch_add(1, Ordering::Relaxed),
                bytes,
            });
        }
        let made = (|| {
            // SAFETY: the name is a NUL-terminated string; the flags are valid.
            let fd = unsafe { libc::memfd_create(c"rmm-vmm-granule".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return Err(os_error("memfd_create", bytes));
            }
            // SAFETY: memfd_create returned a new descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: `fd` is a live memfd.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
                return Err(os_error("ftruncate (memfd)", bytes));
            }
            Ok(Physical {
                raw: fd.into_raw_fd() as u64,
                bytes,
            })
        })();
        if made.is_err() {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
        }
        made
    }

    unsafe fn release(&self, physical: Physical) -> Result<()> {
        if self.counting.is_none() {
            // SAFETY: caller contract: `raw` is a memfd this backing owns, released once.
            drop(unsafe { OwnedFd::from_raw_fd(physical.raw as libc::c_int) });
        }
        self.used.fetch_sub(physical.bytes, Ordering::Relaxed);
        Ok(())
    }

    unsafe fn map(&self, addr: usize, physical: &Physical) -> Result<()> {
        if self.counting.is_some() {
            return Ok(());
        }
        // SAFETY: caller contract (inside our reservation, nothing mapped there); `raw` is a live
        // memfd of `bytes`.
        unsafe {
            map_fixed(
                addr,
                physical.bytes,
                libc::MAP_SHARED,
                physical.raw as libc::c_int,
                "mmap (map a granule)",
            )
        }
    }

    unsafe fn set_access(&self, addr: usize, bytes: usize, _devices: &[DeviceId]) -> Result<()> {
        if self.counting.is_some() {
            return Ok(());
        }
        // SAFETY: caller contract: a mapped range of ours.
        let status = unsafe {
            libc::mprotect(
                addr as *mut libc::c_void,
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if status != 0 {
            return Err(os_error("mprotect (set access)", bytes));
        }
        Ok(())
    }

    unsafe fn unmap(&self, addr: usize, bytes: usize) -> Result<()> {
        if self.counting.is_some() {
            return Ok(());
        }
        // SAFETY: caller contract: a mapping of ours that nothing uses; a PROT_NONE placeholder
        // keeps the addresses reserved.
        unsafe {
            map_fixed(
                addr,
                bytes,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                "mmap (unmap a granule)",
            )
        }
    }

    fn export(&self, physical: &Physical, kind: ExportHandleType) -> Result<SharedHandle> {
        if self.counting.is_some() {
            return Err(Error::Unsupported(
                "a simulated device's granules cannot be exported (they hold no memory)".into(),
            ));
        }
        match kind {
            ExportHandleType::PosixFileDescriptor => {
                // SAFETY: `raw` is a live memfd of ours; F_DUPFD_CLOEXEC makes a new descriptor.
                let fd =
                    unsafe { libc::fcntl(physical.raw as libc::c_int, libc::F_DUPFD_CLOEXEC, 0) };
                if fd < 0 {
                    return Err(os_error("fcntl (duplicate a memfd)", physical.bytes));
                }
                // SAFETY: a new descriptor nothing else owns.
                Ok(SharedHandle::PosixFd(unsafe { OwnedFd::from_raw_fd(fd) }))
            }
            ExportHandleType::Fabric => Err(Error::Unsupported(
                "host mode has no fabric handles (POSIX file descriptors only)".into(),
            )),
        }
    }

    fn import(&self, handle: &SharedHandle, bytes: usize) -> Result<Physical> {
        let SharedHandle::PosixFd(fd) = handle else {
            return Err(Error::Unsupported(
                "host mode imports POSIX file descriptors only, not fabric handles".into(),
            ));
        };
        // SAFETY: `stat` is plain data the kernel fills; `fd` is a live descriptor.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(os_error("fstat (imported descriptor)", bytes));
        }
        if (stat.st_size as u64) < bytes as u64 {
            return Err(Error::invalid(format!(
                "the imported descriptor holds {} bytes, less than the granule of {bytes}",
                stat.st_size
            )));
        }
        let copy = fd
            .try_clone()
            .map_err(|e| Error::invalid(format!("duplicating the imported descriptor: {e}")))?;
        self.used.fetch_add(bytes, Ordering::Relaxed);
        Ok(Physical {
            raw: copy.into_raw_fd() as u64,
            bytes,
        })
    }
}
