//! Two GPUs (issue 13): the per-device registry, buffers that stay on the device they were made on,
//! and the sub-allocators on both devices from many threads at once. Every test needs a GPU
//! (ignored on CPU) and two devices: on one GPU each records a "needs 2 devices" skip.

use std::sync::Arc;

use crate::cuda::{self, OwnedStream, Stream, StreamFlags};
use crate::mr::statistics::StatisticsResourceAdaptor;
use crate::mr::test_harness::DEVICE_MEMORY;
use crate::mr::{
    ArenaMemoryResource, BinningMemoryResource, CudaMemoryResource, PoolMemoryResource,
};
use crate::registry;
use crate::testing::two_devices;
use crate::{AnyResource, DeviceBuffer, MemoryResource};

const MIB: usize = 1 << 20;

/// Runs `f` with `device` current, then makes `back` current again.
fn on_device<T>(device: i32, back: i32, f: impl FnOnce() -> T) -> T {
    cuda::set_current_device(device).unwrap();
    let value = f();
    cuda::set_current_device(back).unwrap();
    value
}

fn pool_on(device: i32) -> AnyResource {
    on_device(device, device, || {
        AnyResource::new(
            PoolMemoryResource::new(
                AnyResource::new(CudaMemoryResource::new()),
                Some(64 * MIB),
                None,
            )
            .unwrap(),
        )
    })
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn per_device_resources_differ_and_follow_the_current_device() {
    if !two_devices("per_device_resources_differ_and_follow_the_current_device") {
        return;
    }
    let _gpu = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
    let _registry = registry::process_registry_test_lock();
    let (pool0, pool1) = (pool_on(0), pool_on(1));
    let old0 = registry::set_per_device_resource(0, pool0.clone()).unwrap();
    let old1 = registry::set_per_device_resource(1, pool1.clone()).unwrap();
    assert!(registry::per_device_resource(0).unwrap().is_equal(&pool0));
    assert!(registry::per_device_resource(1).unwrap().is_equal(&pool1));
    for (device, expected) in [(0, &pool0), (1, &pool1)] {
        cuda::set_current_device(device).unwrap();
        let current = registry::current_resource().unwrap();
        assert!(
            current.is_equal(expected),
            "the current resource follows the current device"
        );
        let buf = DeviceBuffer::with_current_resource(MIB, Stream::DEFAULT).unwrap();
        assert_eq!(buf.device(), Some(device));
    }
    cuda::set_current_device(0).unwrap();
    registry::set_per_device_resource(0, old0).unwrap();
    registry::set_per_device_resource(1, old1).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_buffer_of_device_1_grows_copies_and_frees_there_with_device_0_current() {
    if !two_devices("a_buffer_of_device_1_grows_copies_and_frees_there_with_device_0_current") {
        return;
    }
    let _gpu = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let pool1 = pool_on(1);
    let data: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let mut buf = on_device(1, 0, || {
        DeviceBuffer::from_host(&data, Stream::DEFAULT, pool1.clone()).unwrap()
    });
    assert_eq!(cuda::current_device().unwrap(), 0);
    assert_eq!(buf.device(), Some(1));
    buf.resize(2 * MIB, Stream::DEFAULT).unwrap();
    assert_eq!(
        buf.device(),
        Some(1),
        "growth reallocates on the buffer's device"
    );
    assert_eq!(
        cuda::current_device().unwrap(),
        0,
        "the current device is restored"
    );
    assert_eq!(&buf.to_vec().unwrap()[..MIB], &data[..]);
    let copy = buf.try_clone().unwrap();
    assert_eq!(
        copy.device(),
        Some(1),
        "a copy uses the buffer's resource and device"
    );
    drop((buf, copy));
    assert_eq!(
        cuda::current_device().unwrap(),
        0,
        "freeing restores the current device"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_buffer_copied_from_device_0_to_device_1_keeps_its_bytes() {
    if !two_devices("a_buffer_copied_from_device_0_to_device_1_keeps_its_bytes") {
        return;
    }
    let _gpu = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7 % 253) as u8).collect();
    let src = on_device(0, 0, || {
        DeviceBuffer::from_host(&data, Stream::DEFAULT, pool_on(0)).unwrap()
    });
    let pool1 = pool_on(1);
    // RMM's rule: a buffer belongs to the device current when it is made, so device 1 is made
    // current to copy into device 1's pool (a peer copy from device 0's memory).
    let dst = on_device(1, 0, || src.try_clone_on(Stream::DEFAULT, pool1).unwrap());
    assert_eq!((src.device(), dst.device()), (Some(0), Some(1)));
    assert_eq!(dst.to_vec().unwrap(), data);
    assert_eq!(cuda::current_device().unwrap(), 0);
    drop(dst);
    assert_eq!(
        cuda::current_device().unwrap(),
        0,
        "freeing on device 1 restores device 0"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sub_allocators_on_both_devices_from_sixteen_threads_return_to_zero() {
    if !two_devices("sub_allocators_on_both_devices_from_sixteen_threads_return_to_zero") {
        return;
    }
    let _gpu = DEVICE_MEMORY.write().unwrap_or_else(|e| e.into_inner());
    type Make = fn() -> AnyResource;
    let makers: [(&str, Make); 3] = [
        ("pool", || {
            AnyResource::new(
                PoolMemoryResource::new(
                    AnyResource::new(CudaMemoryResource::new()),
                    Some(64 * MIB),
                    None,
                )
                .unwrap(),
            )
        }),
        ("arena", || {
            AnyResource::new(
                ArenaMemoryResource::new(
                    AnyResource::new(CudaMemoryResource::new()),
                    Some(64 * MIB),
                    false,
                )
                .unwrap(),
            )
        }),
        ("binning", || {
            let upstream = PoolMemoryResource::new(
                AnyResource::new(CudaMemoryResource::new()),
                Some(64 * MIB),
                None,
            )
            .unwrap();
            AnyResource::new(
                BinningMemoryResource::with_exponents(AnyResource::new(upstream), 8, 16).unwrap(),
            )
        }),
    ];
    for (name, make) in makers {
        let stats: Vec<Arc<StatisticsResourceAdaptor>> = (0..2)
            .map(|d| on_device(d, 0, || Arc::new(StatisticsResourceAdaptor::new(make()))))
            .collect();
        std::thread::scope(|scope| {
            for t in 0..16 {
                let stats = &stats;
                scope.spawn(move || {
                    let device = t % 2;
                    cuda::set_current_device(device as i32).unwrap();
                    let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
                    let mr = AnyResource::from_arc(stats[device].clone());
                    let mut live = Vec::new();
                    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ t as u64;
                    for _ in 0..5_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if !live.is_empty() && x % 2 == 0 {
                            live.swap_remove((x as usize / 2) % live.len());
                        } else {
                            let size = 1 + (x as usize >> 8) % (64 * 1024);
                            let s = if x % 3 == 0 {
                                Stream::PER_THREAD
                            } else {
                                stream.stream()
                            };
                            live.push(DeviceBuffer::new(size, s, mr.clone()).unwrap());
                        }
                    }
                    drop(live);
                    stream.synchronize().unwrap();
                });
            }
        });
        for (device, s) in stats.iter().enumerate() {
            let (bytes, allocations) = s.counters();
            assert_eq!(
                (bytes.value, allocations.value),
                (0, 0),
                "{name} on device {device}: everything returned"
            );
            assert!(allocations.total > 0, "{name} on device {device} was used");
        }
    }
    cuda::set_current_device(0).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stream_of_device_1_with_device_0_current_allocates_from_the_resource_named() {
    if !two_devices("a_stream_of_device_1_with_device_0_current_allocates_from_the_resource_named")
    {
        return;
    }
    let _gpu = DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner());
    let pool0 = pool_on(0);
    let stream1 = on_device(1, 0, || OwnedStream::new(StreamFlags::NonBlocking).unwrap());
    // RMM does not check that a stream belongs to the resource's device: the memory comes from the
    // resource named (device 0's pool) and the buffer belongs to device 0. Work queued on the other
    // device's stream with device 0 current is refused by the driver with a typed error (as
    // cudaMemsetAsync refuses it under RMM), never a crash; the buffer stays usable and frees.
    let mut buf = DeviceBuffer::new(MIB, stream1.stream(), pool0).unwrap();
    assert_eq!(buf.device(), Some(0));
    let refused = buf.fill(3).unwrap_err();
    assert!(matches!(refused, crate::Error::Cuda { .. }), "{refused:?}");
    let mut on_current = DeviceBuffer::new(MIB, Stream::DEFAULT, pool_on(0)).unwrap();
    on_current.fill(3).unwrap();
    assert!(on_current.to_vec().unwrap().iter().all(|&b| b == 3));
    drop(buf);
    stream1.synchronize().unwrap();
}
