//! The port between a [`VirtualRange`](super::VirtualRange) and what backs its granules: CUDA
//! device memory ([`DeviceBacking`](super::device::DeviceBacking)), or host memory standing in for a
//! device ([`HostBacking`](super::host::HostBacking)), so that every algorithm above runs on CPU.
//!
//! Shared preconditions (every `unsafe fn`): addresses and sizes are multiples of the granule in
//! use and lie inside a reservation of the same backing; a [`Physical`] is released exactly once,
//! by the backing that made or imported it.

use std::fmt;
use std::os::fd::OwnedFd;

use crate::cuda::vmm::ShareableHandles;
use crate::cuda::DeviceId;
use crate::error::Result;
use crate::mr::ExportHandleType;

/// Where the granules of a range or of an exported span live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// CUDA device memory (`cuMemCreate`).
    Device,
    /// Host memory standing in for a device (host mode): `memfd` pages.
    Host,
}

/// One granule of physical memory as its backing knows it (a driver allocation handle, or a
/// `memfd` descriptor), and its size. Not `Clone`: it is released once, by
/// [`Backing::release`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Physical {
    pub(crate) raw: u64,
    pub(crate) bytes: usize,
}

/// A granule's handle as another process receives it.
#[derive(Debug)]
pub enum SharedHandle {
    /// A POSIX file descriptor (a CUDA allocation's, or a host-mode `memfd`): pass it over a Unix
    /// socket with `SCM_RIGHTS` ([`ExportedSpan::send`](super::ExportedSpan::send)).
    PosixFd(OwnedFd),
    /// A CUDA fabric handle: 64 bytes, valid on every node of the NVLink fabric.
    Fabric([u8; 64]),
}

/// What backs the granules of a virtual range. All calls may block (driver or kernel calls); the
/// range calls them under its table lock or from its `Drop`.
pub(crate) trait Backing: Send + Sync + fmt::Debug {
    /// Where the granules live.
    fn memory(&self) -> MemoryKind;
    /// The device whose memory this is; `None` in host mode.
    fn device(&self) -> Option<DeviceId>;
    /// The smallest granule: sizes and offsets are multiples of it.
    fn minimum_granularity(&self) -> usize;
    /// The granule used when the caller names none (the driver's recommended granularity).
    fn default_granularity(&self) -> usize;
    /// The reservation made when the caller names no size: the device's total memory, or the host
    /// backend's capacity.
    fn default_reserve(&self) -> Result<usize>;
    /// The shareable handle kinds new granules carry.
    fn shareable(&self) -> ShareableHandles;
    /// Bytes the backing could still provide, for out-of-memory messages (`None`: unknown).
    fn free_bytes(&self) -> Option<usize>;
    /// `Ok` when `peer` can be given access to this backing's memory.
    fn check_peer(&self, peer: DeviceId) -> Result<()>;

    /// Reserves `bytes` of address space aligned to `alignment`, with nothing mapped.
    fn reserve(&self, bytes: usize, alignment: usize) -> Result<usize>;
    /// Frees a reservation of [`Backing::reserve`].
    ///
    /// # Safety
    /// Nothing is mapped in it any more and nothing uses it; it is freed once.
    unsafe fn free_reservation(&self, base: usize, bytes: usize) -> Result<()>;
    /// Creates one granule of `bytes`; out of memory is [`Error::OutOfMemory`](crate::Error).
    fn create(&self, bytes: usize) -> Result<Physical>;
    /// Gives a granule up; its memory goes back once it is unmapped everywhere and no other
    /// process holds it.
    ///
    /// # Safety
    /// `physical` came from this backing's `create` or `import` and is unmapped here.
    unsafe fn release(&self, physical: Physical) -> Result<()>;
    /// Maps `physical` at `addr`, inaccessible until [`Backing::set_access`].
    ///
    /// # Safety
    /// Nothing is mapped at `[addr, addr + physical.bytes)`, which lies in a reservation.
    unsafe fn map(&self, addr: usize, physical: &Physical) -> Result<()>;
    /// Makes `[addr, addr + bytes)` (whole mappings) readable and writable by `devices` (the owner
    /// first; ignored in host mode, where the CPU is the only user).
    ///
    /// # Safety
    /// The range is wholly mapped.
    unsafe fn set_access(&self, addr: usize, bytes: usize, devices: &[DeviceId]) -> Result<()>;
    /// Unmaps `[addr, addr + bytes)`, one mapping of [`Backing::map`]; the addresses stay reserved.
    ///
    /// # Safety
    /// Nothing (no thread, no queued work) uses the range any more.
    unsafe fn unmap(&self, addr: usize, bytes: usize) -> Result<()>;
    /// A shareable handle of `physical` as `kind`.
    fn export(&self, physical: &Physical, kind: ExportHandleType) -> Result<SharedHandle>;
    /// A granule of `bytes` from another process's [`SharedHandle`] (which stays the caller's).
    fn import(&self, handle: &SharedHandle, bytes: usize) -> Result<Physical>;
}

/// Unmaps `physical` from `addr` and releases it on a path that has no caller to tell (teardown,
/// rollback): failures are logged, naming the granule with `what`.
///
/// # Safety
/// As [`Backing::unmap`] and [`Backing::release`]: `physical` is mapped at `addr`, by `backing`,
/// and nothing uses it any more.
pub(crate) unsafe fn discard(
    backing: &dyn Backing,
    addr: usize,
    physical: Physical,
    what: impl Fn() -> String,
) {
    let bytes = physical.bytes;
    // SAFETY: caller contract.
    if let Err(e) = unsafe { backing.unmap(addr, bytes) } {
        tracing::error!("unmapping {}: {e}", what());
    }
    // SAFETY: caller contract; unmapped above (or the unmap failed, and the handle goes anyway).
    if let Err(e) = unsafe { backing.release(physical) } {
        tracing::error!("releasing {}: {e}", what());
    }
}
