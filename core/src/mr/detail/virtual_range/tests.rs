//! CPU tests of the virtual range on host memory (the host backend, and a recording backend over
//! it that claims a device and fails on request).

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::backing::{Backing, MemoryKind, Physical, SharedHandle};
use super::host::{page_size, HostBacking};
use super::*;
use crate::testing::proptest_cases;

const KIB: usize = 1 << 10;

fn host_range(capacity: usize, granularity: usize) -> VirtualRange {
    VirtualRange::with_backend(
        Backend::Host(HostBackend {
            capacity: Some(capacity),
            granularity,
        }),
        VirtualRangeOptions::default(),
    )
    .unwrap()
}

/// Resident pages of `[addr, addr + len)` (`mincore`); `Err` when part of it is not mapped at all.
fn resident_pages(addr: *const u8, len: usize) -> std::io::Result<usize> {
    let page = page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `vec` has one byte per page of the range; mincore only reads the page tables.
    let status = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    if status != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
}

/// The process's resident set in bytes (`/proc/self/statm`, second field).
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * page_size()
}

/// Fills `[offset, offset + len)` of `range` with `value`.
fn fill(range: &VirtualRange, offset: usize, len: usize, value: u8) {
    assert!(range.is_mapped(offset, len));
    // SAFETY: the span is mapped and accessible (checked), and only this test uses it.
    unsafe { range.base().add(offset).write_bytes(value, len) };
}

/// True when every byte of `[offset, offset + len)` of `range` is `value`.
fn holds(range: &VirtualRange, offset: usize, len: usize, value: u8) -> bool {
    assert!(range.is_mapped(offset, len));
    // SAFETY: the span is mapped and accessible (checked).
    let bytes = unsafe { std::slice::from_raw_parts(range.base().add(offset), len) };
    bytes.iter().all(|&b| b == value)
}

#[test]
fn a_new_range_reserves_addresses_without_memory() {
    let range = host_range(64 * MIB, MIB);
    assert_eq!(range.reserved(), 64 * MIB);
    assert_eq!(range.granularity(), MIB);
    assert_eq!(range.base() as usize % page_size(), 0);
    assert_eq!(range.memory(), MemoryKind::Host);
    assert_eq!(range.device(), None);
    assert_eq!(
        range.stats(),
        VirtualRangeStats {
            reserved: 64 * MIB,
            granularity: MIB,
            ..Default::default()
        }
    );
    assert_eq!(resident_pages(range.base(), range.reserved()).unwrap(), 0);
    assert!(!range.is_mapped(0, 1));
}

#[test]
fn the_reservation_rounds_up_to_the_granularity_and_checks_it() {
    let host = |granularity| {
        Backend::Host(HostBackend {
            capacity: Some(16 * MIB),
            granularity,
        })
    };
    let range = VirtualRange::with_backend(
        host(MIB),
        VirtualRangeOptions::default().reserve(5 * MIB + 1),
    )
    .unwrap();
    assert_eq!(range.reserved(), 6 * MIB);
    let odd = VirtualRange::with_backend(host(MIB + 1), VirtualRangeOptions::default());
    assert!(matches!(odd, Err(Error::InvalidArgument(m)) if m.contains("page size")));
    let odd = VirtualRange::with_backend(
        host(MIB),
        VirtualRangeOptions::default().granularity(page_size() + 1),
    );
    assert!(matches!(odd, Err(Error::InvalidArgument(m)) if m.contains("multiple")));
    // A granule other than the backend's default is taken when it is a multiple of the page.
    let range = VirtualRange::with_backend(
        host(MIB),
        VirtualRangeOptions::default().granularity(3 * page_size()),
    )
    .unwrap();
    assert_eq!(range.granularity(), 3 * page_size());
    assert_eq!(range.reserved() % range.granularity(), 0);
}

#[test]
fn ensure_mapped_maps_exactly_the_granules_a_span_touches() {
    let range = host_range(16 * MIB, MIB);
    // [1000, 1000 + 1 MiB) touches granules 0 and 1.
    assert_eq!(range.ensure_mapped(1000, MIB).unwrap(), 2 * MIB);
    assert!(range.is_mapped(0, 2 * MIB));
    assert!(!range.is_mapped(2 * MIB, 1));
    assert!(!range.is_mapped(0, 2 * MIB + 1));
    // Mapped already: nothing to do.
    assert_eq!(range.ensure_mapped(0, 2 * MIB).unwrap(), 0);
    // Only the missing third granule is mapped.
    assert_eq!(range.ensure_mapped(MIB, 2 * MIB).unwrap(), MIB);
    fill(&range, 0, 3 * MIB, 0xab);
    assert!(holds(&range, 0, 3 * MIB, 0xab));
    let stats = range.stats();
    assert_eq!(stats.mapped, 3 * MIB);
    assert_eq!(stats.peak_mapped, 3 * MIB);
    assert_eq!(stats.granules_mapped, 3);
    assert_eq!(stats.granules_released, 0);
    assert_eq!(
        resident_pages(range.base(), 3 * MIB).unwrap(),
        3 * MIB / page_size()
    );
}

#[test]
fn spans_outside_the_reservation_are_invalid_and_empty_ones_do_nothing() {
    let range = host_range(4 * MIB, MIB);
    assert_eq!(range.ensure_mapped(0, 0).unwrap(), 0);
    assert_eq!(range.ensure_mapped(4 * MIB, 0).unwrap(), 0);
    assert!(matches!(
        range.ensure_mapped(4 * MIB - 1, 2),
        Err(Error::InvalidArgument(m)) if m.contains("does not fit")
    ));
    assert!(range.ensure_mapped(usize::MAX, 2).is_err());
    assert!(range.ensure_mapped(4 * MIB + 1, 0).is_err());
    // SAFETY: nothing is mapped, so nothing is in use.
    unsafe {
        assert_eq!(range.release(0, 0).unwrap(), 0);
        assert!(range.release(MIB, 4 * MIB).is_err());
    }
    assert!(!range.is_mapped(0, 0));
    assert!(!range.is_mapped(usize::MAX, 1));
    assert!(matches!(
        range.export(0, 0, Stream::DEFAULT, ExportHandleType::PosixFileDescriptor),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(range.stats().mapped, 0);
}

#[test]
fn release_gives_back_the_covered_granules_between_live_neighbours() {
    let range = host_range(16 * MIB, MIB);
    range.ensure_mapped(0, 8 * MIB).unwrap();
    for i in 0..8 {
        fill(&range, i * MIB, MIB, i as u8 + 1);
    }
    // [0.5 MiB, 7.5 MiB) covers granules 1..=6; granules 0 and 7 hold live bytes and stay, even
    // their halves inside the span.
    assert_eq!(range.covered_mapped(MIB / 2, 7 * MIB), 6 * MIB);
    assert_eq!(range.covered_mapped(0, 8 * MIB), 8 * MIB);
    assert_eq!(range.covered_mapped(1, MIB), 0);
    assert_eq!(range.covered_mapped(0, 17 * MIB), 0);
    // SAFETY: nothing uses granules 1..=6 (the live bytes are in granules 0 and 7).
    let released = unsafe { range.release(MIB / 2, 7 * MIB) }.unwrap();
    assert_eq!(released, 6 * MIB);
    // What a span would need mapped again: every granule it touches that is not mapped.
    assert_eq!(range.touched_unmapped(MIB / 2, 7 * MIB), 6 * MIB);
    assert_eq!(range.touched_unmapped(MIB + 1, 1), MIB);
    assert_eq!(range.touched_unmapped(0, MIB), 0);
    assert_eq!(range.touched_unmapped(7 * MIB, 2 * MIB), MIB);
    assert_eq!(
        range.touched_unmapped(0, 17 * MIB),
        0,
        "outside the reservation"
    );
    assert!(holds(&range, 0, MIB, 1));
    assert!(holds(&range, 7 * MIB, MIB, 8));
    for i in 1..7 {
        assert!(!range.is_mapped(i * MIB, 1), "granule {i} is still mapped");
    }
    let stats = range.stats();
    assert_eq!(stats.mapped, 2 * MIB);
    assert_eq!(stats.peak_mapped, 8 * MIB);
    assert_eq!(stats.granules_released, 6);
    assert_eq!(
        resident_pages(range.base().wrapping_add(MIB), 6 * MIB).unwrap(),
        0
    );
    // The freed room maps again, and the neighbours are untouched.
    assert_eq!(range.ensure_mapped(2 * MIB, 3 * MIB).unwrap(), 3 * MIB);
    fill(&range, 2 * MIB, 3 * MIB, 0x5a);
    assert!(holds(&range, 0, MIB, 1));
    assert!(holds(&range, 7 * MIB, MIB, 8));
    // A span that covers no whole granule gives nothing back.
    // SAFETY: nothing uses [2 MiB + 1, 3 MiB - 1) ... (it covers no granule anyway).
    assert_eq!(unsafe { range.release(2 * MIB + 1, MIB) }.unwrap(), 0);
    assert!(range.is_mapped(2 * MIB, 3 * MIB));
}

#[test]
fn released_granules_leave_the_resident_set() {
    const SPAN: usize = 96 * MIB;
    let range = host_range(128 * MIB, 2 * MIB);
    range.ensure_mapped(0, SPAN).unwrap();
    fill(&range, 0, SPAN, 0x11);
    assert_eq!(
        resident_pages(range.base(), SPAN).unwrap(),
        SPAN / page_size()
    );
    let before = resident_bytes();
    // SAFETY: nothing uses the span any more.
    assert_eq!(unsafe { range.release(0, SPAN) }.unwrap(), SPAN);
    let after = resident_bytes();
    assert_eq!(resident_pages(range.base(), SPAN).unwrap(), 0);
    // The memfds are closed: the simulated device has all its memory free again.
    assert_eq!(range.backing.free_bytes(), Some(128 * MIB));
    // Other tests run in this process meanwhile: allow them 32 MiB of growth.
    assert!(
        before.saturating_sub(after) >= SPAN - 32 * MIB,
        "the resident set fell by {} bytes only (from {before} to {after})",
        before.saturating_sub(after)
    );
}

#[test]
fn out_of_memory_maps_nothing_and_says_how_much_is_mapped_and_free() {
    // The reservation (16 MiB) is larger than the simulated device (4 MiB), as on a GPU.
    let range = VirtualRange::with_backend(
        Backend::Host(HostBackend {
            capacity: Some(4 * MIB),
            granularity: MIB,
        }),
        VirtualRangeOptions::default().reserve(16 * MIB),
    )
    .unwrap();
    range.ensure_mapped(0, 3 * MIB).unwrap();
    // [2 MiB, 5 MiB) needs granules 3 and 4; only one more fits.
    let err = range.ensure_mapped(2 * MIB, 3 * MIB).unwrap_err();
    let Error::OutOfMemory { bytes, detail, .. } = &err else {
        panic!("not out of memory: {err}");
    };
    assert_eq!(*bytes, 2 * MIB);
    let text = err.to_string();
    assert!(
        text.contains(&format!("{} bytes mapped", 3 * MIB)),
        "{text}"
    );
    assert!(text.contains(&format!("{} bytes free", MIB)), "{text}");
    assert!(detail.contains("simulated device"), "{text}");
    eprintln!("{text}");
    // Nothing half-mapped: granule 3 (which fitted) was given back.
    assert!(!range.is_mapped(3 * MIB, 1));
    assert_eq!(range.stats().mapped, 3 * MIB);
    assert_eq!(range.stats().granules_mapped, 3);
    // Room made elsewhere lets the same span map.
    // SAFETY: nothing uses granule 0.
    unsafe { range.release(0, MIB) }.unwrap();
    assert_eq!(range.ensure_mapped(2 * MIB, 3 * MIB).unwrap(), 2 * MIB);
    assert_eq!(range.stats().mapped, 4 * MIB);
}

#[test]
fn drop_unmaps_everything_and_frees_the_reservation() {
    let range = host_range(8 * MIB, MIB);
    range.ensure_mapped(MIB, 4 * MIB).unwrap();
    fill(&range, MIB, 4 * MIB, 3);
    let (base, reserved) = (range.base(), range.reserved());
    drop(range);
    // mincore fails with ENOMEM on addresses that are not mapped at all.
    let err = resident_pages(base, reserved).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOMEM), "{err}");
}

// ---- a recording backend: claims a device, counts, and fails on request ----

#[derive(Debug, Default)]
struct Record {
    creates: AtomicUsize,
    maps: AtomicUsize,
    /// Physical granules alive (created or imported, not released).
    live: AtomicIsize,
    /// `(first byte, bytes, devices)` of every access call.
    access: Mutex<Vec<(usize, usize, Vec<DeviceId>)>>,
    /// Fail the create with this number (counting from 1), once.
    fail_create: Mutex<Option<usize>>,
    /// Fail the map with this number (counting from 1), once.
    fail_map: Mutex<Option<usize>>,
    /// Fail the next access call.
    fail_access: Mutex<bool>,
    reservation_freed: Mutex<bool>,
}

#[derive(Debug)]
struct Recording {
    host: HostBacking,
    device: Option<DeviceId>,
    record: Arc<Record>,
    base: Mutex<usize>,
}

fn injected(what: &str) -> Error {
    Error::Cuda {
        code: 999,
        name: "INJECTED".into(),
        message: what.into(),
        call: "test",
    }
}

impl Backing for Recording {
    fn memory(&self) -> MemoryKind {
        self.host.memory()
    }
    fn device(&self) -> Option<DeviceId> {
        self.device
    }
    fn minimum_granularity(&self) -> usize {
        self.host.minimum_granularity()
    }
    fn default_granularity(&self) -> usize {
        self.host.default_granularity()
    }
    fn default_reserve(&self) -> Result<usize> {
        self.host.default_reserve()
    }
    fn shareable(&self) -> ShareableHandles {
        self.host.shareable()
    }
    fn free_bytes(&self) -> Option<usize> {
        self.host.free_bytes()
    }
    fn check_peer(&self, peer: DeviceId) -> Result<()> {
        if peer < 0 {
            return Err(Error::Unsupported(format!("no device {peer}")));
        }
        Ok(())
    }
    fn reserve(&self, bytes: usize, alignment: usize) -> Result<usize> {
        let base = self.host.reserve(bytes, alignment)?;
        *self.base.lock().unwrap() = base;
        Ok(base)
    }
    unsafe fn free_reservation(&self, base: usize, bytes: usize) -> Result<()> {
        *self.record.reservation_freed.lock().unwrap() = true;
        // SAFETY: forwarded.
        unsafe { self.host.free_reservation(base, bytes) }
    }
    fn create(&self, bytes: usize) -> Result<Physical> {
        let n = self.record.creates.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fail = self.record.fail_create.lock().unwrap();
        if *fail == Some(n) {
            *fail = None;
            return Err(injected("create"));
        }
        let physical = self.host.create(bytes)?;
        self.record.live.fetch_add(1, Ordering::Relaxed);
        Ok(physical)
    }
    unsafe fn release(&self, physical: Physical) -> Result<()> {
        self.record.live.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: forwarded.
        unsafe { self.host.release(physical) }
    }
    unsafe fn map(&self, addr: usize, physical: &Physical) -> Result<()> {
        let n = self.record.maps.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fail = self.record.fail_map.lock().unwrap();
        if *fail == Some(n) {
            *fail = None;
            return Err(injected("map"));
        }
        // SAFETY: forwarded.
        unsafe { self.host.map(addr, physical) }
    }
    unsafe fn set_access(&self, addr: usize, bytes: usize, devices: &[DeviceId]) -> Result<()> {
        if std::mem::take(&mut *self.record.fail_access.lock().unwrap()) {
            return Err(injected("access"));
        }
        let base = *self.base.lock().unwrap();
        self.record
            .access
            .lock()
            .unwrap()
            .push((addr - base, bytes, devices.to_vec()));
        // SAFETY: forwarded.
        unsafe { self.host.set_access(addr, bytes, devices) }
    }
    unsafe fn unmap(&self, addr: usize, bytes: usize) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { self.host.unmap(addr, bytes) }
    }
    fn export(&self, physical: &Physical, kind: ExportHandleType) -> Result<SharedHandle> {
        self.host.export(physical, kind)
    }
    fn import(&self, handle: &SharedHandle, bytes: usize) -> Result<Physical> {
        self.host.import(handle, bytes)
    }
}

fn recording_range(device: Option<DeviceId>, peers: &[DeviceId]) -> (VirtualRange, Arc<Record>) {
    let record = Arc::new(Record::default());
    let backing = Recording {
        host: HostBacking::new(64 * MIB, 64 * KIB).unwrap(),
        device,
        record: record.clone(),
        base: Mutex::new(0),
    };
    let range = VirtualRange::over(
        Box::new(backing),
        VirtualRangeOptions::default().reserve(MIB).peers(peers),
    )
    .unwrap();
    (range, record)
}

const G: usize = 64 * KIB;

#[test]
fn a_failure_midway_unmaps_what_the_call_mapped() {
    let (range, record) = recording_range(Some(0), &[]);
    range.ensure_mapped(0, G).unwrap();
    let live = record.live.load(Ordering::Relaxed);
    assert_eq!(live, 1);

    // The third map of this call fails: the two granules it mapped are given back.
    *record.fail_map.lock().unwrap() = Some(record.maps.load(Ordering::Relaxed) + 3);
    let err = range.ensure_mapped(0, 5 * G).unwrap_err();
    assert!(
        matches!(&err, Error::Cuda { message, .. } if message == "map"),
        "{err}"
    );
    assert_eq!(record.live.load(Ordering::Relaxed), live);
    assert_eq!(range.stats().mapped, G);
    assert!(range.is_mapped(0, G));
    assert!(!range.is_mapped(G, 1));

    // A create fails.
    *record.fail_create.lock().unwrap() = Some(record.creates.load(Ordering::Relaxed) + 2);
    assert!(range.ensure_mapped(0, 5 * G).is_err());
    assert_eq!(record.live.load(Ordering::Relaxed), live);

    // Setting the access fails after every granule was mapped.
    *record.fail_access.lock().unwrap() = true;
    assert!(range.ensure_mapped(0, 5 * G).is_err());
    assert_eq!(record.live.load(Ordering::Relaxed), live);
    assert_eq!(range.stats().mapped, G);
    assert_eq!(range.stats().granules_mapped, 1);

    // And then it works, with the neighbour's bytes intact.
    fill(&range, 0, G, 9);
    assert_eq!(range.ensure_mapped(0, 5 * G).unwrap(), 4 * G);
    assert!(holds(&range, 0, G, 9));
    assert_eq!(record.live.load(Ordering::Relaxed), 5);
    drop(range);
    assert_eq!(record.live.load(Ordering::Relaxed), 0);
    assert!(*record.reservation_freed.lock().unwrap());
}

#[test]
fn access_is_set_once_per_run_of_new_granules_for_the_owner_and_every_peer() {
    let (range, record) = recording_range(Some(0), &[2]);
    assert_eq!(range.peers(), vec![2]);
    range.ensure_mapped(G, G).unwrap();
    range.ensure_mapped(3 * G, G).unwrap();
    record.access.lock().unwrap().clear();
    // Granules 0, 2 and 4..=5 are new: three runs, one call each.
    range.ensure_mapped(0, 6 * G).unwrap();
    assert_eq!(
        *record.access.lock().unwrap(),
        vec![
            (0, G, vec![0, 2]),
            (2 * G, G, vec![0, 2]),
            (4 * G, 2 * G, vec![0, 2])
        ]
    );
    record.access.lock().unwrap().clear();
    // SAFETY: nothing uses granule 2.
    unsafe { range.release(2 * G, G) }.unwrap();

    // A grant reaches every mapped run (0..=1 and 3..=5), and later mappings.
    range.grant_access(&[1, 0, 2, 1]).unwrap();
    assert_eq!(range.peers(), vec![2, 1]);
    assert_eq!(
        *record.access.lock().unwrap(),
        vec![(0, 2 * G, vec![0, 2, 1]), (3 * G, 3 * G, vec![0, 2, 1])]
    );
    record.access.lock().unwrap().clear();
    range.ensure_mapped(2 * G, 1).unwrap();
    assert_eq!(
        *record.access.lock().unwrap(),
        vec![(2 * G, G, vec![0, 2, 1])]
    );
    // Nothing new to grant: no call; a peer the backend refuses: an error, nothing changed.
    record.access.lock().unwrap().clear();
    range.grant_access(&[0, 1]).unwrap();
    assert!(record.access.lock().unwrap().is_empty());
    assert!(matches!(
        range.grant_access(&[-1]),
        Err(Error::Unsupported(_))
    ));
    assert_eq!(range.peers(), vec![2, 1]);
}

#[test]
fn host_mode_has_no_devices_to_grant_access_to() {
    let range = host_range(4 * MIB, MIB);
    assert!(range.peers().is_empty());
    assert!(
        matches!(range.grant_access(&[1]), Err(Error::Unsupported(m)) if m.contains("host mode"))
    );
    range.grant_access(&[]).unwrap();
    let refused = VirtualRange::with_backend(
        Backend::Host(HostBackend::default()),
        VirtualRangeOptions::default().reserve(4 * MIB).peers(&[1]),
    );
    assert!(matches!(refused, Err(Error::Unsupported(_))));
}

#[test]
fn threads_map_and_release_their_own_spans_around_shared_granules() {
    // Each thread owns 2.5 granules, so neighbours share a granule at every boundary: both map it,
    // neither covers it, so it is never released while the other writes there.
    const THREADS: usize = 8;
    const OWN: usize = 5 * G / 2;
    let range = Arc::new(host_range(64 * MIB, G));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let range = range.clone();
            s.spawn(move || {
                let offset = t * OWN;
                for round in 0..200u32 {
                    range.ensure_mapped(offset, OWN).unwrap();
                    let value = (t as u8) ^ (round as u8);
                    fill(&range, offset, OWN, value);
                    assert!(
                        holds(&range, offset, OWN, value),
                        "thread {t} round {round}"
                    );
                    // SAFETY: this thread owns its span and is done with it.
                    unsafe { range.release(offset, OWN) }.unwrap();
                }
            });
        }
    });
    // What stays mapped is exactly the granules no single span covers, as the table says.
    let stats = range.stats();
    let table = lock(&range.table);
    let mapped = table.physical.iter().filter(|s| s.is_some()).count();
    assert_eq!(stats.mapped, mapped * G);
    for i in 0..THREADS * OWN / G + 1 {
        assert_eq!(
            range.all_mapped(i, i + 1),
            table.is_mapped(i),
            "granule {i}"
        );
    }
    assert_eq!(
        stats.granules_mapped - stats.granules_released,
        mapped as u64
    );
}

#[derive(Clone, Debug)]
enum Op {
    Ensure(usize, usize),
    Release(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let span = (0usize..64 * G, 1usize..8 * G);
    prop_oneof![
        span.clone().prop_map(|(o, l)| Op::Ensure(o, l)),
        span.prop_map(|(o, l)| Op::Release(o, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases(64)))]

    /// Random mappings and releases agree with a model of which granules are mapped.
    #[test]
    fn mapping_follows_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let (range, record) = recording_range(None, &[]);
        let reserved = range.reserved();
        let mut model = std::collections::BTreeSet::new();
        for op in ops {
            let op_span = match op {
                Op::Ensure(o, l) | Op::Release(o, l) => (o, l),
            };
            match op {
                Op::Ensure(o, l) => {
                    let got = range.ensure_mapped(o, l);
                    if o + l > reserved {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let fresh = (o / G..(o + l).div_ceil(G)).filter(|&i| model.insert(i)).count();
                    prop_assert_eq!(got.unwrap(), fresh * G);
                    fill(&range, o, l, 1);
                }
                Op::Release(o, l) => {
                    // SAFETY: this test keeps no bytes it cares about.
                    let got = unsafe { range.release(o, l) };
                    if o + l > reserved {
                        prop_assert!(got.is_err());
                        continue;
                    }
                    let gone = (o.div_ceil(G)..(o + l) / G).filter(|i| model.remove(i)).count();
                    prop_assert_eq!(got.unwrap(), gone * G);
                }
            }
            prop_assert_eq!(range.stats().mapped, model.len() * G);
            prop_assert_eq!(range.covered_mapped(0, reserved), model.len() * G);
            let (o, l) = match op_span { (o, l) if o + l <= reserved => (o, l), _ => (0, 0) };
            let covered = (o.div_ceil(G)..(o + l) / G).filter(|i| model.contains(i)).count();
            prop_assert_eq!(range.covered_mapped(o, l), covered * G);
            prop_assert_eq!(record.live.load(Ordering::Relaxed), model.len() as isize);
            for i in 0..reserved / G {
                prop_assert_eq!(range.is_mapped(i * G, G), model.contains(&i));
            }
        }
        drop(range);
        prop_assert_eq!(record.live.load(Ordering::Relaxed), 0);
    }
}

// ---- sharing within one process (the two-process tests are in ipc_tests.rs) ----

#[test]
fn an_imported_span_reaches_the_same_bytes_and_outlives_the_exporters_release() {
    let range = host_range(16 * MIB, MIB);
    range.ensure_mapped(0, 4 * MIB).unwrap();
    let (offset, len) = (MIB / 2, 2 * MIB);
    fill(&range, offset, len, 0x42);
    assert_eq!(
        range.preferred_export(),
        Some(ExportHandleType::PosixFileDescriptor)
    );
    let span = range
        .export(
            offset,
            len,
            Stream::DEFAULT,
            ExportHandleType::PosixFileDescriptor,
        )
        .unwrap();
    assert_eq!(span.memory, MemoryKind::Host);
    assert_eq!(
        (span.granularity, span.offset, span.size),
        (MIB, MIB / 2, 2 * MIB)
    );
    assert_eq!(span.handles.len(), 3);
    let imported = ImportedSpan::new(&span).unwrap();
    drop(span);
    assert_eq!(imported.len(), len);
    assert_eq!(imported.device(), None);
    assert_ne!(imported.as_ptr(), range.base().wrapping_add(offset));
    // SAFETY: the import maps `len` bytes at `as_ptr`.
    let seen = unsafe { std::slice::from_raw_parts_mut(imported.as_ptr(), len) };
    assert!(seen.iter().all(|&b| b == 0x42));
    // Shared, not copied: a write through the import shows in the range.
    seen[len - 1] = 0x43;
    // SAFETY: mapped (granule 2).
    assert_eq!(unsafe { *range.base().add(offset + len - 1) }, 0x43);
    // The exporter gives its granules back; the importer's references keep the bytes.
    // SAFETY: the range no longer uses any of its granules.
    unsafe { range.release(0, 4 * MIB) }.unwrap();
    assert!(seen[..len - 1].iter().all(|&b| b == 0x42));
    drop(imported);
}

#[test]
fn only_mapped_spans_export_and_host_mode_has_no_fabric_handles() {
    let range = host_range(8 * MIB, MIB);
    range.ensure_mapped(0, MIB).unwrap();
    assert!(matches!(
        range.export(0, 2 * MIB, Stream::DEFAULT, ExportHandleType::PosixFileDescriptor),
        Err(Error::InvalidArgument(m)) if m.contains("not mapped")
    ));
    assert!(matches!(
        range.export(0, MIB, Stream::DEFAULT, ExportHandleType::Fabric),
        Err(Error::Unsupported(_))
    ));
    assert_eq!(range.shareable(), ShareableHandles::POSIX_FD);
}

#[test]
fn a_span_of_many_granules_crosses_a_socket_in_chunks_of_descriptors() {
    let granule = page_size();
    let granules = 2 * super::wire::FDS_PER_MESSAGE + 17;
    let range = host_range(granules * granule, granule);
    range.ensure_mapped(0, granules * granule).unwrap();
    for i in 0..granules {
        fill(&range, i * granule, granule, i as u8);
    }
    let span = range
        .export(
            100,
            granules * granule - 200,
            Stream::DEFAULT,
            ExportHandleType::PosixFileDescriptor,
        )
        .unwrap();
    let (a, b) = UnixStream::pair().unwrap();
    let sender = std::thread::spawn(move || span.send(&a).map(|()| span));
    let received = ExportedSpan::receive(&b).unwrap();
    let span = sender.join().unwrap().unwrap();
    assert_eq!(received.handles.len(), granules);
    assert_eq!(
        (received.granularity, received.offset, received.size),
        (span.granularity, span.offset, span.size)
    );
    let imported = ImportedSpan::new(&received).unwrap();
    // SAFETY: the import maps `len` bytes.
    let seen = unsafe { std::slice::from_raw_parts(imported.as_ptr(), imported.len()) };
    for (k, &byte) in seen.iter().enumerate() {
        assert_eq!(byte, ((100 + k) / granule) as u8, "byte {k}");
    }
}

#[test]
fn malformed_or_cut_messages_are_refused() {
    let header = |words: [u64; 8]| {
        words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect::<Vec<u8>>()
    };
    let receive_after = |bytes: Vec<u8>| {
        let (a, b) = UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut &a, &bytes).unwrap();
        drop(a);
        ExportedSpan::receive(&b)
    };
    let magic = super::wire::MAGIC;
    let refused = |bytes, what: &str| match receive_after(bytes) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(what), "{m}"),
        other => panic!("expected a refusal naming {what:?}, got {other:?}"),
    };
    refused(vec![0u8; 64], "magic");
    refused(
        header([magic, 7, 0, MIB as u64, 0, MIB as u64, 1, 0]),
        "memory kind",
    );
    refused(
        header([magic, 0, 5, MIB as u64, 0, MIB as u64, 1, 0]),
        "handle kind",
    );
    refused(
        header([magic, 1, 1, MIB as u64, 0, MIB as u64, 1 << 40, 0]),
        "limit",
    );
    // Two descriptors announced, none sent: the socket closes mid-span.
    refused(
        header([magic, 0, 0, MIB as u64, 0, 2 * MIB as u64, 2, 0]),
        "closed",
    );
    // A header cut short.
    refused(
        header([magic, 0, 0, MIB as u64, 0, MIB as u64, 1, 0])[..40].to_vec(),
        "closed",
    );
    // Fabric handles that do not match the span's size.
    let mut bytes = header([magic, 1, 1, MIB as u64, 0, 3 * MIB as u64, 1, 0]);
    bytes.extend_from_slice(&[0u8; 64]);
    refused(bytes, "touches 3 granules");
}

#[test]
fn inconsistent_spans_are_refused_before_anything_is_mapped() {
    let range = host_range(8 * MIB, MIB);
    range.ensure_mapped(0, 2 * MIB).unwrap();
    let good = || {
        range
            .export(
                10,
                MIB,
                Stream::DEFAULT,
                ExportHandleType::PosixFileDescriptor,
            )
            .unwrap()
    };
    good().validate().unwrap();
    let mut bad = good();
    bad.handles.pop();
    assert!(ImportedSpan::new(&bad).is_err());
    let mut bad = good();
    bad.offset = MIB;
    assert!(bad.validate().is_err());
    let mut bad = good();
    bad.size = 0;
    assert!(bad.validate().is_err());
    let mut bad = good();
    bad.handles[1] = SharedHandle::Fabric([0; 64]);
    assert!(matches!(bad.validate(), Err(Error::InvalidArgument(m)) if m.contains("mixes")));
    let mut bad = good();
    bad.granularity = page_size() + 1;
    bad.offset = 0;
    bad.size = 2 * bad.granularity;
    assert!(
        matches!(ImportedSpan::new(&bad), Err(Error::InvalidArgument(m)) if m.contains("multiple"))
    );
}
