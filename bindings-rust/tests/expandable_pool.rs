//! `rmm::mr::experimental::ExpandablePoolMemoryResource` as a user of the `rmm` crate sees it: a
//! resource in stacks and containers, grown in place, trimmed between live blocks. Host mode runs on
//! host memory standing in for the device; the GPU test is ignored on CPU.

use rmm::mr::experimental::{
    Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend,
};
use rmm::prelude::*;

const MIB: usize = 1 << 20;

/// A pool of the current device; in host mode over 64 MiB of host memory in 1 MiB granules.
fn pool(options: ExpandablePoolOptions) -> ExpandablePoolMemoryResource {
    let options = if rmm::cuda::is_host_mode() {
        options.backend(Backend::Host(HostBackend {
            capacity: Some(64 * MIB),
            granularity: MIB,
        }))
    } else {
        options
    };
    ExpandablePoolMemoryResource::new(options).unwrap()
}

#[test]
fn containers_on_the_pool_and_trim_between_live_blocks() {
    let mr = pool(ExpandablePoolOptions::default());
    let g = mr.granularity();
    let any = AnyResource::new(mr.clone());
    let stack = rmm::ResourceStack::over(any.clone()).statistics().build();
    let buffers: Vec<DeviceBuffer> = (0..6u8)
        .map(|i| DeviceBuffer::from_host(&vec![i; g], Stream::DEFAULT, stack.clone()).unwrap())
        .collect();
    assert_eq!(mr.mapped_bytes(), 6 * g);
    assert_eq!(
        buffers[1].as_ptr() as usize,
        buffers[0].as_ptr() as usize + g,
        "grown in place"
    );
    let (odd, even): (Vec<_>, Vec<_>) = buffers
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 1);
    drop(odd);
    Stream::DEFAULT.synchronize().unwrap();
    assert_eq!(
        mr.trim().unwrap(),
        3 * g,
        "the freed granules go back though live blocks lie between"
    );
    assert_eq!(mr.mapped_bytes(), 3 * g);
    for (i, buf) in &even {
        assert_eq!(
            buf.to_vec().unwrap(),
            vec![*i as u8; g],
            "live blocks keep their bytes"
        );
    }
    drop(even);
    assert_eq!(mr.trim().unwrap(), 3 * g);
    assert_eq!(mr.statistics().used_bytes, 0);
}

#[test]
fn out_of_memory_is_a_typed_error_naming_mapped_and_free_bytes() {
    let mr = pool(
        ExpandablePoolOptions::default()
            .range(rmm::mr::experimental::VirtualRangeOptions::default().reserve(8 * MIB)),
    );
    let live = mr
        .allocate(Stream::DEFAULT, 4 * MIB, DEFAULT_ALIGNMENT)
        .unwrap();
    match mr.allocate(Stream::DEFAULT, 16 * MIB, DEFAULT_ALIGNMENT) {
        Err(rmm::Error::OutOfMemory { detail, .. }) => {
            assert!(
                detail.contains("mapped") && detail.contains("free"),
                "{detail}"
            )
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // SAFETY: `live` came from `mr` with these arguments.
    unsafe {
        mr.deallocate(Stream::DEFAULT, live, 4 * MIB, DEFAULT_ALIGNMENT)
            .unwrap()
    };
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_a_gpu_the_pool_maps_device_memory_and_gives_it_back() {
    assert!(rmm::cuda::is_available(), "this test needs a CUDA GPU");
    let mr =
        ExpandablePoolMemoryResource::new(ExpandablePoolOptions::default().initial_size(64 * MIB))
            .unwrap();
    assert!(mr.mapped_bytes() >= 64 * MIB);
    assert!(mr.device().is_some());
    let bytes = vec![7u8; 100 * MIB];
    let buf =
        DeviceBuffer::from_host(&bytes, Stream::DEFAULT, AnyResource::new(mr.clone())).unwrap();
    assert!(mr.mapped_bytes() >= 100 * MIB);
    assert!(buf.to_vec().unwrap() == bytes);
    drop(buf);
    Stream::DEFAULT.synchronize().unwrap();
    let mapped = mr.mapped_bytes();
    assert_eq!(
        mr.trim().unwrap(),
        mapped,
        "nothing live: every granule goes back"
    );
    assert_eq!(mr.mapped_bytes(), 0);
}
