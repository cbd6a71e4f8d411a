//! GPU tests of the virtual range on device memory (ignored on CPU; the two-process test is in
//! ipc_tests.rs). Bytes are written and read with copies, as the CPU cannot touch device memory.

use super::*;
use crate::cuda::vmm;
use crate::cuda::DriverMemory;
use crate::mr::test_harness::DEVICE_MEMORY;
use crate::testing::{require_gpu, skip};

fn device_range(options: VirtualRangeOptions) -> VirtualRange {
    require_gpu();
    let device = cuda::current_device().unwrap();
    let range = VirtualRange::with_backend(Backend::Device(device), options).unwrap();
    eprintln!(
        "device {device}: granularity {}, reserved {}, shareable handles {:?} (device supports {:?})",
        range.granularity(),
        range.reserved(),
        range.shareable(),
        vmm::supported_handles(device)
    );
    range
}

/// Writes `value` over `[ptr, ptr + len)` of device memory (a copy, finished on return).
fn put(ptr: *mut u8, len: usize, value: u8) {
    let bytes = vec![value; len];
    // SAFETY: the callers' spans are mapped and accessible to the current device.
    unsafe { cuda::copy_sync(ptr, bytes.as_ptr(), len, Stream::DEFAULT).unwrap() };
}

/// Reads `[ptr, ptr + len)` of device memory.
fn get(ptr: *const u8, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: the callers' spans are mapped and accessible to the current device.
    unsafe { cuda::copy_sync(out.as_mut_ptr(), ptr, len, Stream::DEFAULT).unwrap() };
    out
}

fn at(range: &VirtualRange, offset: usize) -> *mut u8 {
    range.base().wrapping_add(offset)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_the_range_grows_in_place_granule_by_granule() {
    let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let range = device_range(VirtualRangeOptions::default().reserve(1 << 30));
    let g = range.granularity();
    assert!(g > 0 && range.reserved() >= 8 * g);
    let device = range.device().unwrap();
    assert!(range.shareable().bits() & !vmm::supported_handles(device).bits() == 0);
    for step in 0..8 {
        assert_eq!(range.ensure_mapped(0, (step + 1) * g).unwrap(), g);
        put(at(&range, step * g), g, step as u8 + 1);
    }
    // Growing never moved anything: every granule keeps its bytes at its address, and a span
    // across two separately created granules reads as one contiguous block.
    for step in 0..8 {
        assert!(get(at(&range, step * g), g)
            .iter()
            .all(|&b| b == step as u8 + 1));
        assert!(vmm::can_read_write(at(&range, step * g) as usize, device).unwrap());
    }
    let across = get(at(&range, 3 * g + g / 2), g);
    assert!(across[..g / 2].iter().all(|&b| b == 4));
    assert!(across[g / 2..].iter().all(|&b| b == 5));
    let stats = range.stats();
    assert_eq!((stats.mapped, stats.granules_mapped), (8 * g, 8));
    assert!(range.is_mapped(0, 8 * g) && !range.is_mapped(8 * g, 1));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_release_between_live_neighbours_gives_memory_back() {
    let _exclusive = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
    let range = device_range(VirtualRangeOptions::default().reserve(2 << 30));
    let device = range.device().unwrap();
    let g = range.granularity();
    const N: usize = 64;
    range.ensure_mapped(0, N * g).unwrap();
    put(at(&range, 0), g, 0xa0);
    put(at(&range, (N - 1) * g), g, 0xa1);
    let (free_before, _) = cuda::mem_info(device).unwrap();
    // [g/2, (N - 1/2) g) covers granules 1..N-1; the live neighbours 0 and N-1 stay.
    // SAFETY: nothing uses granules 1..N-1 (no work was queued on them; the copies above finished).
    let released = unsafe { range.release(g / 2, (N - 1) * g) }.unwrap();
    assert_eq!(released, (N - 2) * g);
    let (free_after, _) = cuda::mem_info(device).unwrap();
    assert!(
        free_after >= free_before + (N - 4) * g,
        "the device's free memory rose by {} bytes only, {} released",
        free_after.saturating_sub(free_before),
        released
    );
    assert!(get(at(&range, 0), g).iter().all(|&b| b == 0xa0));
    assert!(get(at(&range, (N - 1) * g), g).iter().all(|&b| b == 0xa1));
    assert_eq!(range.stats().mapped, 2 * g);
    // The hole maps again, and the neighbours are untouched.
    assert_eq!(range.ensure_mapped(g, 2 * g).unwrap(), 2 * g);
    put(at(&range, g), 2 * g, 0x5a);
    assert!(get(at(&range, g), 2 * g).iter().all(|&b| b == 0x5a));
    assert!(get(at(&range, 0), g).iter().all(|&b| b == 0xa0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_out_of_memory_says_how_much_is_mapped_and_free_and_maps_nothing() {
    let _exclusive = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
    require_gpu();
    let device = cuda::current_device().unwrap();
    let (free, total) = cuda::mem_info(device).unwrap();
    // Twice the device's memory in addresses: a span beyond what the device can back fits.
    let range = device_range(VirtualRangeOptions::default().reserve(2 * total));
    let g = range.granularity();
    let half = (free / 2) / g * g;
    range.ensure_mapped(0, half).unwrap();
    let (free_mid, _) = cuda::mem_info(device).unwrap();
    let err = range.ensure_mapped(half, free + g).unwrap_err();
    let text = err.to_string();
    eprintln!("{text}");
    assert!(err.is_out_of_memory(), "{text}");
    assert!(text.contains(&format!("{half} bytes mapped")), "{text}");
    assert!(text.contains("bytes free"), "{text}");
    assert!(text.contains(&format!("device {device}")), "{text}");
    // Nothing half-mapped: the granules the failed call made were given back.
    assert_eq!(range.stats().mapped, half);
    assert!(!range.is_mapped(half, 1));
    let (free_after, _) = cuda::mem_info(device).unwrap();
    assert!(
        free_after + 4 * g >= free_mid,
        "the failed call kept {} bytes",
        free_mid - free_after
    );
    drop(range);
    let (free_end, _) = cuda::mem_info(device).unwrap();
    assert!(
        free_end + 4 * g >= free,
        "drop left {} bytes",
        free - free_end
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_two_gpus_a_peer_reads_memory_it_was_granted() {
    const NAME: &str = "on_two_gpus_a_peer_reads_memory_it_was_granted";
    if !crate::testing::two_devices(NAME) {
        return;
    }
    if !cuda::device::can_access_peer(1, 0).unwrap() {
        skip(
            NAME,
            "device 1 cannot access device 0's memory (no peer access)",
        );
        return;
    }
    let _shared = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
    cuda::set_current_device(0).unwrap();
    let range = device_range(VirtualRangeOptions::default().reserve(1 << 30));
    let g = range.granularity();
    range.ensure_mapped(0, g).unwrap();
    put(at(&range, 0), g, 0x31);
    let peer_may = |offset: usize| vmm::can_read_write(at(&range, offset) as usize, 1).unwrap();
    assert!(!peer_may(0), "device 1 had access before the grant");
    range.grant_access(&[1]).unwrap();
    assert_eq!(range.peers(), vec![1]);
    assert!(peer_may(0));
    // A granule mapped after the grant is accessible to the peer too.
    range.ensure_mapped(g, g).unwrap();
    assert!(peer_may(g));
    put(at(&range, g), g, 0x32);

    // Device 1 copies both granules into its own memory with its own copy engine.
    cuda::set_current_device(1).unwrap();
    let theirs = DriverMemory::Device.allocate(2 * g, "test").unwrap();
    // SAFETY: `theirs` holds 2 granules on device 1; the range's are accessible to device 1.
    unsafe { cuda::copy_sync(theirs, range.base(), 2 * g, Stream::DEFAULT).unwrap() };
    let seen = get(theirs, 2 * g);
    // SAFETY: allocated above, freed once.
    unsafe { DriverMemory::Device.free(theirs).unwrap() };
    cuda::set_current_device(0).unwrap();
    assert!(seen[..g].iter().all(|&b| b == 0x31));
    assert!(seen[g..].iter().all(|&b| b == 0x32));

    // The options' peers do the same at construction.
    let granted = device_range(VirtualRangeOptions::default().reserve(1 << 30).peers(&[1]));
    assert_eq!(granted.peers(), vec![1]);
    granted.ensure_mapped(0, 1).unwrap();
    assert!(vmm::can_read_write(granted.base() as usize, 1).unwrap());
}
