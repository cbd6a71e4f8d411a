//! A reserved range of virtual addresses mapped granule by granule: the foundation of the
//! expandable pool (issue 28; design in `docs/design/expandable-pool.md`).
//!
//! Glossary:
//! - *reservation*: `reserved` bytes of addresses at `base`, taken once, with nothing behind them;
//! - *granule*: the unit of mapping (`granularity` bytes; granule `i` covers
//!   `[i × granularity, (i + 1) × granularity)` of the range), one physical allocation each, so any
//!   granule can be given back on its own, even between live blocks;
//! - *span*: `[offset, offset + len)` of the range, in bytes; it *touches* every granule it
//!   overlaps and *covers* every granule wholly inside it;
//! - *backing*: what gives granules memory ([`backing::Backing`]): CUDA device memory, or host
//!   memory standing in for a device in host mode (`host.rs`), with the same behaviour.
//!
//! Invariants:
//! - a granule is mapped (and accessible to the owner and every granted peer) exactly when its
//!   table slot holds its [`Physical`] and its bit in `mapped_bits` is set; `mapped` is the number
//!   of such granules × `granularity`;
//! - [`VirtualRange::ensure_mapped`] maps every granule its span touches or, on failure, none that
//!   were not mapped before the call;
//! - [`VirtualRange::release`] unmaps and releases only granules its span covers.
//!
//! Locking: one mutex over the granule table, held for the whole of an `ensure_mapped`, `release`,
//! `grant_access` or `export`, driver calls included (they are rare: once per granule mapped or
//! given back, never per allocation). The fast path of `ensure_mapped`, a span whose granules are
//! all mapped already, takes no lock: it reads the bitmap (`Acquire`; bits are set with `Release`
//! after the granule is mapped and accessible, and cleared before it is unmapped, always under the
//! lock). That is sound because of the caller's contract: a span passed to `release` holds no live
//! bytes, so no span being mapped or used can cover a granule being released; two spans that
//! share a boundary granule only ever touch it, so at most one of them maps it (under the lock)
//! and neither releases it. Statistics are atomics, read without the lock.

mod backing;
mod device;
mod host;
mod share;
mod wire;

#[cfg(test)]
mod device_tests;
#[cfg(test)]
pub(crate) mod ipc_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub use backing::{MemoryKind, SharedHandle};
pub use share::{ExportedSpan, ImportedSpan};

use backing::{discard, Backing, Physical};
use device::DeviceBacking;
use host::HostBacking;

use crate::cuda::vmm::ShareableHandles;
use crate::cuda::{self, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::mr::ExportHandleType;

/// The name in errors.
const NAME: &str = "virtual_range";

const MIB: usize = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Host memory standing in for a device (host mode): granules are `memfd`s mapped over an
/// `mmap(PROT_NONE)` reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBackend {
    /// The simulated device's size: granules beyond it are out of memory. `None`: the machine's
    /// physical memory.
    pub capacity: Option<usize>,
    /// The simulated granularity, a multiple of the page size (default 2 MiB, the granularity of
    /// current NVIDIA GPUs).
    pub granularity: usize,
}

impl Default for HostBackend {
    fn default() -> Self {
        Self {
            capacity: None,
            granularity: 2 * MIB,
        }
    }
}

/// What backs a [`VirtualRange`]'s granules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Memory of this CUDA device (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`).
    Device(DeviceId),
    /// Host memory standing in for a device (host mode; tests and simulations on CPU).
    Host(HostBackend),
    /// A simulated device that only counts granules against [`HostBackend::capacity`] and maps
    /// nothing: its memory must never be touched (simulations of the bookkeeping alone, such as the
    /// replay tool's simulated device). No file descriptor or host memory per granule, so it takes
    /// traces of any size; nothing can be exported.
    Simulated(HostBackend),
}

impl Backend {
    /// The memory behind this backend: the device's total memory, or the host backend's capacity
    /// (the machine's physical memory when it names none).
    ///
    /// # Errors
    /// The driver's, for a device.
    pub fn capacity(&self) -> Result<usize> {
        match self {
            Backend::Device(device) => Ok(cuda::mem_info(*device)?.1),
            Backend::Host(host) | Backend::Simulated(host) => {
                Ok(host.capacity.unwrap_or_else(host::physical_memory))
            }
        }
    }
}

/// Options of a [`VirtualRange`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VirtualRangeOptions {
    /// Bytes of addresses to reserve (rounded up to the granularity): the most the range can ever
    /// map. `None`: the device's total memory (host mode: the host backend's capacity).
    pub reserve: Option<usize>,
    /// The granule, a multiple of the backend's minimum granularity. `None`: the driver's
    /// recommended granularity (host mode: [`HostBackend::granularity`]).
    pub granularity: Option<usize>,
    /// The shareable handle kinds to create granules with, where the device and the system allow
    /// ([`VirtualRange::shareable`] reports what they got). `None`: every kind the device supports.
    /// Host mode always has POSIX file descriptors and no fabric handles.
    pub shareable: Option<ShareableHandles>,
    /// Devices besides the owner that get read and write access to every granule
    /// ([`VirtualRange::grant_access`]).
    pub peers: Vec<DeviceId>,
}

impl VirtualRangeOptions {
    /// Sets [`VirtualRangeOptions::reserve`].
    pub fn reserve(mut self, bytes: usize) -> Self {
        self.reserve = Some(bytes);
        self
    }

    /// Sets [`VirtualRangeOptions::granularity`].
    pub fn granularity(mut self, bytes: usize) -> Self {
        self.granularity = Some(bytes);
        self
    }

    /// Sets [`VirtualRangeOptions::shareable`].
    pub fn shareable(mut self, handles: ShareableHandles) -> Self {
        self.shareable = Some(handles);
        self
    }

    /// Sets [`VirtualRangeOptions::peers`].
    pub fn peers(mut self, peers: &[DeviceId]) -> Self {
        self.peers = peers.to_vec();
        self
    }
}

/// Counters of a [`VirtualRange`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VirtualRangeStats {
    /// Bytes of addresses reserved.
    pub reserved: usize,
    /// The granule.
    pub granularity: usize,
    /// Bytes mapped now.
    pub mapped: usize,
    /// The most bytes ever mapped at once.
    pub peak_mapped: usize,
    /// Granules mapped since the range was made.
    pub granules_mapped: u64,
    /// Granules unmapped and released since the range was made (by `release`; not by `Drop`).
    pub granules_released: u64,
}

/// The granule table: the physical allocation behind each mapped granule, and who may access them.
#[derive(Debug, Default)]
struct Table {
    /// Slot `i` holds granule `i`'s allocation while it is mapped; grown on demand up to the
    /// highest granule ever mapped.
    physical: Vec<Option<Physical>>,
    /// The devices every mapped granule is accessible to: the owner first, then the granted peers
    /// (empty in host mode).
    access: Vec<DeviceId>,
}

impl Table {
    fn is_mapped(&self, granule: usize) -> bool {
        self.physical.get(granule).is_some_and(Option::is_some)
    }

    fn put(&mut self, granule: usize, physical: Physical) {
        if self.physical.len() <= granule {
            self.physical.resize_with(granule + 1, || None);
        }
        self.physical[granule] = Some(physical);
    }

    fn take(&mut self, granule: usize) -> Option<Physical> {
        self.physical.get_mut(granule).and_then(Option::take)
    }

    /// The runs `(first granule, count)` of consecutive mapped granules.
    fn mapped_runs(&self) -> Vec<(usize, usize)> {
        runs(
            self.physical
                .iter()
                .enumerate()
                .filter_map(|(i, slot)| slot.as_ref().map(|_| i)),
        )
    }
}

/// The runs `(first, count)` of consecutive numbers in an increasing sequence.
fn runs(sorted: impl IntoIterator<Item = usize>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for i in sorted {
        match out.last_mut() {
            Some((first, count)) if *first + *count == i => *count += 1,
            _ => out.push((i, 1)),
        }
    }
    out
}

/// A range of virtual addresses reserved once and backed granule by granule.
///
/// The caller (the expandable pool's engine) decides which bytes are live; the range only maps and
/// unmaps memory under them:
/// - [`ensure_mapped`](Self::ensure_mapped) before handing out a span (a no-op without a lock when
///   it is mapped already);
/// - [`release`](Self::release) of a span that holds no live bytes and no queued work, which gives
///   back every granule the span covers, wherever it is, even between live blocks;
/// - `Drop` unmaps and releases everything and frees the reservation.
///
/// When the reservation is exhausted the range cannot grow in place: a span beyond it is an
/// [`Error::InvalidArgument`] (the caller holds the reservation's size in its books and reports
/// out of memory before asking), and a larger reservation means a new range.
///
/// ```
/// use rmm_core::mr::experimental::{Backend, HostBackend, VirtualRange, VirtualRangeOptions};
/// let host = Backend::Host(HostBackend { capacity: Some(8 << 20), granularity: 1 << 20 });
/// let range = VirtualRange::with_backend(host, VirtualRangeOptions::default())?;
/// assert_eq!(range.reserved(), 8 << 20);
/// // Maps the two granules the span touches.
/// assert_eq!(range.ensure_mapped(1000, 1 << 20)?, 2 << 20);
/// // SAFETY: the span was just mapped by this range.
/// unsafe { range.base().add(1000).write_bytes(7, 1 << 20) };
/// // Gives back the second granule (the only one wholly inside the span).
/// // SAFETY: nothing uses [1 MiB, 3 MiB) any more.
/// assert_eq!(unsafe { range.release(1 << 20, 2 << 20)? }, 1 << 20);
/// assert_eq!(range.stats().mapped, 1 << 20);
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub struct VirtualRange {
    backing: Box<dyn Backing>,
    base: usize,
    reserved: usize,
    granularity: usize,
    /// `log2(granularity)` when it is a power of two (as the driver's are): granule indices by
    /// shifting, not dividing, on the fast path.
    shift: Option<u32>,
    /// Bit `i` is set while granule `i` is mapped and accessible (see the module's locking).
    mapped_bits: Box<[AtomicU64]>,
    table: Mutex<Table>,
    mapped: AtomicUsize,
    peak_mapped: AtomicUsize,
    granules_mapped: AtomicU64,
    granules_released: AtomicU64,
}

impl fmt::Debug for VirtualRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualRange")
            .field("backing", &self.backing)
            .field("base", &format_args!("{:#x}", self.base))
            .field("reserved", &self.reserved)
            .field("granularity", &self.granularity)
            .field("mapped", &self.mapped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl VirtualRange {
    /// A range on the current device, or in host mode on host memory ([`HostBackend::default`]).
    ///
    /// # Errors
    /// As [`VirtualRange::with_backend`].
    pub fn new(options: VirtualRangeOptions) -> Result<Self> {
        let backend = if cuda::is_host_mode() {
            Backend::Host(HostBackend::default())
        } else {
            Backend::Device(cuda::current_device()?)
        };
        Self::with_backend(backend, options)
    }

    /// A range backed by `backend`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a granularity that is not a multiple of the backend's
    /// minimum, or a reservation that overflows; [`Error::Unsupported`] for a device without
    /// virtual memory management or a peer that cannot access the device; the driver's errors
    /// (out of memory when the address space cannot hold the reservation).
    pub fn with_backend(backend: Backend, options: VirtualRangeOptions) -> Result<Self> {
        let backing: Box<dyn Backing> = match backend {
            Backend::Device(device) => Box::new(DeviceBacking::new(device, options.shareable)?),
            Backend::Host(host) => Box::new(HostBacking::new(
                host.capacity.unwrap_or_else(host::physical_memory),
                host.granularity,
            )?),
            Backend::Simulated(sim) => Box::new(HostBacking::counting(
                sim.capacity.unwrap_or_else(host::physical_memory),
                sim.granularity,
            )?),
        };
        Self::over(backing, options)
    }

    /// A range over `backing` (tests give a recording one).
    fn over(backing: Box<dyn Backing>, options: VirtualRangeOptions) -> Result<Self> {
        let minimum = backing.minimum_granularity();
        let granularity = options
            .granularity
            .unwrap_or_else(|| backing.default_granularity());
        if granularity == 0 || granularity % minimum != 0 {
            return Err(Error::invalid(format!(
                "the granularity of a virtual range must be a positive multiple of {minimum} \
                 bytes, not {granularity}"
            )));
        }
        let wanted = match options.reserve {
            Some(bytes) => bytes,
            None => backing.default_reserve()?,
        };
        let reserved = wanted
            .max(granularity)
            .checked_next_multiple_of(granularity)
            .ok_or_else(|| Error::invalid(format!("a reservation of {wanted} bytes overflows")))?;
        let mut access = Vec::new();
        if let Some(owner) = backing.device() {
            access.push(owner);
        }
        for &peer in &options.peers {
            if !access.contains(&peer) {
                backing.check_peer(peer)?;
                access.push(peer);
            }
        }
        let base = backing.reserve(reserved, minimum)?;
        let granules = reserved / granularity;
        Ok(Self {
            backing,
            base,
            reserved,
            granularity,
            shift: granularity
                .is_power_of_two()
                .then(|| granularity.trailing_zeros()),
            mapped_bits: (0..granules.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            table: Mutex::new(Table {
                physical: Vec::new(),
                access,
            }),
            mapped: AtomicUsize::new(0),
            peak_mapped: AtomicUsize::new(0),
            granules_mapped: AtomicU64::new(0),
            granules_released: AtomicU64::new(0),
        })
    }

    /// The first address of the reservation.
    pub fn base(&self) -> *mut u8 {
        self.base as *mut u8
    }

    /// Bytes of addresses reserved: the most the range can map.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The granule: the unit of mapping and of giving back.
    pub fn granularity(&self) -> usize {
        self.granularity
    }

    /// The device whose memory backs the range; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.backing.device()
    }

    /// Where the granules live.
    pub fn memory(&self) -> MemoryKind {
        self.backing.memory()
    }

    /// The shareable handle kinds granules are created with (what [`VirtualRange::export`] can
    /// give): the kinds asked for, less those the device or the system refused.
    pub fn shareable(&self) -> ShareableHandles {
        self.backing.shareable()
    }

    /// The devices besides the owner that may access the range.
    pub fn peers(&self) -> Vec<DeviceId> {
        lock(&self.table).access.iter().skip(1).copied().collect()
    }

    /// The counters.
    pub fn stats(&self) -> VirtualRangeStats {
        VirtualRangeStats {
            reserved: self.reserved,
            granularity: self.granularity,
            mapped: self.mapped.load(Ordering::Relaxed),
            peak_mapped: self.peak_mapped.load(Ordering::Relaxed),
            granules_mapped: self.granules_mapped.load(Ordering::Relaxed),
            granules_released: self.granules_released.load(Ordering::Relaxed),
        }
    }

    /// The granule holding byte `offset`.
    fn index(&self, offset: usize) -> usize {
        match self.shift {
            Some(shift) => offset >> shift,
            None => offset / self.granularity,
        }
    }

    /// The first granule starting at or after byte `offset` (`offset` ≤ `reserved`).
    fn index_up(&self, offset: usize) -> usize {
        self.index(offset + self.granularity - 1)
    }

    fn addr(&self, granule: usize) -> usize {
        self.base + granule * self.granularity
    }

    /// The end of the span `[offset, offset + len)`, checked to lie in the reservation.
    fn span_end(&self, offset: usize, len: usize) -> Result<usize> {
        offset
            .checked_add(len)
            .filter(|&end| end <= self.reserved)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the span of {len} bytes at offset {offset} does not fit the {} bytes reserved",
                    self.reserved
                ))
            })
    }

    fn bit(granule: usize) -> (usize, u64) {
        (granule / 64, 1u64 << (granule % 64))
    }

    fn set_bit(&self, granule: usize) {
        let (word, mask) = Self::bit(granule);
        self.mapped_bits[word].fetch_or(mask, Ordering::Release);
    }

    fn clear_bit(&self, granule: usize) {
        let (word, mask) = Self::bit(granule);
        self.mapped_bits[word].fetch_and(!mask, Ordering::Release);
    }

    /// The bitmap words and masks of the granules `[first, last)`.
    fn words(first: usize, last: usize) -> impl Iterator<Item = (usize, u64)> {
        let (first_word, end_word) = (first / 64, last.div_ceil(64));
        (first_word..end_word).map(move |word| {
            let low = first.max(word * 64) - word * 64;
            let high = last.min((word + 1) * 64) - word * 64;
            let width = high - low;
            let mask = if width == 64 {
                u64::MAX
            } else {
                ((1u64 << width) - 1) << low
            };
            (word, mask)
        })
    }

    /// True when every granule in `[first, last)` is mapped, from the bitmap alone.
    fn all_mapped(&self, first: usize, last: usize) -> bool {
        Self::words(first, last)
            .all(|(word, mask)| self.mapped_bits[word].load(Ordering::Acquire) & mask == mask)
    }

    /// Bytes mapped in the granules that the span `[offset, offset + len)` covers: what
    /// [`release`](Self::release) of it would give back now. Read from the bitmap, without a
    /// lock (exact when no other thread maps or releases inside the span, as the caller owns it).
    pub fn covered_mapped(&self, offset: usize, len: usize) -> usize {
        let Ok(end) = self.span_end(offset, len) else {
            return 0;
        };
        let (first, last) = (self.index_up(offset), self.index(end));
        if first >= last {
            return 0;
        }
        self.mapped_granules(first, last) * self.granularity
    }

    /// Bytes of the granules that the span `[offset, offset + len)` touches and that are not
    /// mapped: what [`ensure_mapped`](Self::ensure_mapped) of it would map now. Read from the
    /// bitmap, without a lock (0 for a span outside the reservation).
    pub fn touched_unmapped(&self, offset: usize, len: usize) -> usize {
        let Ok(end) = self.span_end(offset, len) else {
            return 0;
        };
        let (first, last) = (self.index(offset), self.index_up(end));
        (last - first - self.mapped_granules(first, last)) * self.granularity
    }

    /// How many granules in `[first, last)` are mapped, from the bitmap alone (relaxed reads:
    /// the callers' figures are exact only while nobody maps or releases in the span).
    fn mapped_granules(&self, first: usize, last: usize) -> usize {
        Self::words(first, last)
            .map(|(word, mask)| {
                (self.mapped_bits[word].load(Ordering::Relaxed) & mask).count_ones() as usize
            })
            .sum()
    }

    /// True when every granule the span touches is mapped (and accessible).
    pub fn is_mapped(&self, offset: usize, len: usize) -> bool {
        match self.span_end(offset, len) {
            Ok(end) if len > 0 => self.all_mapped(self.index(offset), self.index_up(end)),
            _ => false,
        }
    }

    /// Maps every granule that the span `[offset, offset + len)` touches and is not mapped yet,
    /// and makes it accessible to the owner and every granted peer; returns the bytes newly
    /// mapped (0 when all were mapped: then no lock is taken and no driver call made).
    ///
    /// All or nothing: when a granule cannot be created, mapped or made accessible, the granules
    /// this call mapped are unmapped and released again before the error returns.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the device (or the host backend's capacity) cannot back the
    /// span; its message says how much the range has mapped and how much the device has free.
    /// [`Error::InvalidArgument`] for a span outside the reservation. The driver's other errors.
    pub fn ensure_mapped(&self, offset: usize, len: usize) -> Result<usize> {
        let end = self.span_end(offset, len)?;
        if len == 0 {
            return Ok(0);
        }
        let (first, last) = (self.index(offset), self.index_up(end));
        if self.all_mapped(first, last) {
            return Ok(0);
        }
        let mut table = lock(&self.table);
        let mut fresh = Vec::new();
        if let Err(e) = self.map_missing(&mut table, first, last, &mut fresh) {
            let missing = (first..last).filter(|&i| !table.is_mapped(i)).count() + fresh.len();
            self.unmap_fresh(&mut table, &fresh);
            return Err(self.explain(e, offset, end, missing * self.granularity));
        }
        for &i in &fresh {
            self.set_bit(i);
        }
        let bytes = fresh.len() * self.granularity;
        let mapped = self.mapped.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_mapped.fetch_max(mapped, Ordering::Relaxed);
        self.granules_mapped
            .fetch_add(fresh.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Creates and maps every unmapped granule of `[first, last)` (recording each in `fresh`), then
    /// sets the access of each run of them.
    fn map_missing(
        &self,
        table: &mut Table,
        first: usize,
        last: usize,
        fresh: &mut Vec<usize>,
    ) -> Result<()> {
        for i in first..last {
            if table.is_mapped(i) {
                continue;
            }
            let physical = self.backing.create(self.granularity)?;
            // SAFETY: granule `i` lies in our reservation, and nothing is mapped there (its slot
            // is empty, and slots change only under the table lock, which we hold).
            if let Err(e) = unsafe { self.backing.map(self.addr(i), &physical) } {
                // SAFETY: made just now by this backing, mapped nowhere.
                if let Err(r) = unsafe { self.backing.release(physical) } {
                    tracing::error!("{NAME}: releasing a granule that could not be mapped: {r}");
                }
                return Err(e);
            }
            table.put(i, physical);
            fresh.push(i);
        }
        for (start, count) in runs(fresh.iter().copied()) {
            // SAFETY: these granules were all mapped just now.
            unsafe {
                self.backing.set_access(
                    self.addr(start),
                    count * self.granularity,
                    &table.access,
                )?;
            }
        }
        Ok(())
    }

    /// Unmaps and releases the granules an `ensure_mapped` mapped before it failed.
    fn unmap_fresh(&self, table: &mut Table, fresh: &[usize]) {
        for &i in fresh {
            let Some(physical) = table.take(i) else {
                continue;
            };
            // SAFETY: mapped by the failing call, never handed out (its bit was never set).
            unsafe {
                discard(&*self.backing, self.addr(i), physical, || {
                    format!("{NAME} granule {i} after a failed mapping")
                });
            }
        }
    }

    /// `e` with how much is mapped and free when it is out of memory.
    fn explain(&self, e: Error, offset: usize, end: usize, missing: usize) -> Error {
        let Error::OutOfMemory { detail, .. } = &e else {
            return e;
        };
        let free = self
            .backing
            .free_bytes()
            .map_or_else(|| "unknown".to_owned(), |b| b.to_string());
        let place = match self.backing.device() {
            Some(device) => format!("device {device}"),
            None => "the simulated device (host mode)".to_owned(),
        };
        Error::OutOfMemory {
            bytes: missing,
            resource: NAME.into(),
            detail: format!(
                "mapping [{offset}, {end}) needs {missing} more bytes in granules of {}: the range \
                 has {} bytes mapped of {} reserved, {place} has {free} bytes free ({detail})",
                self.granularity,
                self.mapped.load(Ordering::Relaxed),
                self.reserved
            ),
        }
    }

    /// Unmaps and releases every mapped granule that the span `[offset, offset + len)` covers
    /// (wholly contains); granules it only touches stay. Returns the bytes given back.
    ///
    /// # Safety
    /// No byte of a covered granule is in use: no live block lies there, and no work queued on any
    /// stream (of any device that has access) will still read or write it. For memory freed on a
    /// stream, that means the stream was synchronized (or an event recorded after the free has
    /// completed) since.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a span outside the reservation; the driver's errors. When an
    /// unmap fails, the granules before it are released and that granule stays mapped
    /// ([`VirtualRange::stats`] tells).
    pub unsafe fn release(&self, offset: usize, len: usize) -> Result<usize> {
        let end = self.span_end(offset, len)?;
        let (first, last) = (self.index_up(offset), self.index(end));
        if first >= last {
            return Ok(0);
        }
        let mut table = lock(&self.table);
        let mut released = 0u64;
        let mut failure = None;
        for i in first..last.min(table.physical.len()) {
            let Some(physical) = table.take(i) else {
                continue;
            };
            self.clear_bit(i);
            // SAFETY: the caller's contract: nothing uses a granule the span covers.
            if let Err(e) = unsafe { self.backing.unmap(self.addr(i), self.granularity) } {
                table.put(i, physical);
                self.set_bit(i);
                failure = Some(e);
                break;
            }
            // SAFETY: made by this backing, unmapped just now.
            if let Err(e) = unsafe { self.backing.release(physical) } {
                tracing::error!("{NAME}: releasing granule {i}: {e}");
                failure.get_or_insert(e);
            }
            released += 1;
        }
        let bytes = released as usize * self.granularity;
        self.mapped.fetch_sub(bytes, Ordering::Relaxed);
        self.granules_released
            .fetch_add(released, Ordering::Relaxed);
        match failure {
            Some(e) => Err(e),
            None => Ok(bytes),
        }
    }

    /// Gives `peers` read and write access to every granule, those mapped now and those mapped
    /// later (`cuMemSetAccess` with one descriptor per device). Access is never taken back.
    ///
    /// # Errors
    /// [`Error::Unsupported`] in host mode (no devices) or for a peer that cannot access this
    /// device's memory; the driver's errors (then some mapped granules may already be accessible
    /// to the peers, and the call can be repeated).
    pub fn grant_access(&self, peers: &[DeviceId]) -> Result<()> {
        let mut table = lock(&self.table);
        let mut access = table.access.clone();
        for &peer in peers {
            if !access.contains(&peer) {
                self.backing.check_peer(peer)?;
                access.push(peer);
            }
        }
        if access.len() == table.access.len() {
            return Ok(());
        }
        for (start, count) in table.mapped_runs() {
            // SAFETY: these granules are mapped (their slots are full, under the lock).
            unsafe {
                self.backing
                    .set_access(self.addr(start), count * self.granularity, &access)?;
            }
        }
        table.access = access;
        Ok(())
    }

    /// The handle kind [`VirtualRange::export`] should ask for: a POSIX file descriptor where the
    /// granules carry one, else a fabric handle; `None` when they carry neither.
    pub fn preferred_export(&self) -> Option<ExportHandleType> {
        let handles = self.shareable();
        if handles.posix_fd {
            Some(ExportHandleType::PosixFileDescriptor)
        } else if handles.fabric {
            Some(ExportHandleType::Fabric)
        } else {
            None
        }
    }

    /// Exports the span `[offset, offset + len)` for another process: one shareable handle of
    /// `kind` per granule it touches, and where the bytes lie in them. Another process maps it with
    /// [`ImportedSpan::new`], after [`ExportedSpan::send`] / [`ExportedSpan::receive`] over a Unix
    /// socket.
    ///
    /// Stream order: `stream` (the stream the span's bytes were last written on) is synchronized
    /// before the handles are made, so the importer sees every write queued there before this
    /// call, whatever stream it reads on. The exporter must keep the span's bytes (not free or
    /// reuse the sub-allocation) until the importer says it is done; the granules themselves stay
    /// alive in the importer even if this range releases them.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty span, a span outside the reservation or one that is
    /// not wholly mapped; [`Error::Unsupported`] when the granules carry no `kind` handle
    /// ([`VirtualRange::shareable`]); the stream's and the driver's errors.
    pub fn export(
        &self,
        offset: usize,
        len: usize,
        stream: Stream,
        kind: ExportHandleType,
    ) -> Result<ExportedSpan> {
        let end = self.span_end(offset, len)?;
        if len == 0 {
            return Err(Error::invalid("an empty span cannot be exported"));
        }
        let handles = self.shareable();
        let carried = match kind {
            ExportHandleType::PosixFileDescriptor => handles.posix_fd,
            ExportHandleType::Fabric => handles.fabric,
        };
        if !carried {
            return Err(Error::Unsupported(format!(
                "the granules of this range carry no {kind:?} handle (they carry {handles:?})"
            )));
        }
        stream.synchronize()?;
        let (first, last) = (self.index(offset), self.index_up(end));
        let table = lock(&self.table);
        let mut shared = Vec::with_capacity(last - first);
        for i in first..last {
            let Some(Some(physical)) = table.physical.get(i) else {
                return Err(Error::invalid(format!(
                    "granule {i} of the span [{offset}, {end}) is not mapped: only mapped spans \
                     can be exported"
                )));
            };
            shared.push(self.backing.export(physical, kind)?);
        }
        Ok(ExportedSpan {
            memory: self.backing.memory(),
            granularity: self.granularity,
            offset: offset - first * self.granularity,
            size: len,
            handles: shared,
        })
    }
}

impl Drop for VirtualRange {
    /// Unmaps and releases every granule and frees the reservation. Work still queued on the
    /// range must have completed (the owner synchronizes first, as a pool does before it drops).
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(PoisonError::into_inner);
        let slots = std::mem::take(&mut table.physical);
        for (i, slot) in slots.into_iter().enumerate() {
            let Some(physical) = slot else {
                continue;
            };
            // SAFETY: the range is being dropped: nothing can use its granules any more.
            unsafe {
                discard(&*self.backing, self.addr(i), physical, || {
                    format!("{NAME} granule {i} at drop")
                });
            }
        }
        // SAFETY: everything in the reservation was unmapped above; it is freed once, here.
        if let Err(e) = unsafe { self.backing.free_reservation(self.base, self.reserved) } {
            tracing::error!("{NAME}: freeing the reservation at drop: {e}");
        }
    }
}
