//! One set of GPU tests for every resource, instantiated per resource by [`resource_tests!`]
//! (RMM's `mr_ref_test.hpp` with one instantiation per resource).
//!
//! Each generated test is `#[ignore = "needs a CUDA GPU"]`, fails loudly without a GPU, and records
//! a skip (with its reason) when the resource cannot work on this machine.
//!
//! To cover a new resource, add one line, here or beside the resource:
//! `crate::mr::test_harness::resource_tests!(name, || Ok(AnyResource::new(MyResource::new())));`
//! or, with a run-time skip condition returning the reason,
//! `resource_tests!(name, || ..., || Some("why".to_string()));`.

use std::sync::{RwLock, RwLockReadGuard};

use crate::cuda::{self as cu, DeviceGuard, OwnedStream, Stream, StreamFlags};
use crate::mr::{
    CudaAsyncManagedMemoryResource, CudaAsyncMemoryResource, CudaAsyncOptions,
    CudaAsyncViewMemoryResource, CudaMemoryResource, ManagedMemoryResource,
    PinnedHostMemoryResource, SamHeadroomMemoryResource, SystemMemoryResource,
};
use crate::{AnyResource, MemoryResource, DEFAULT_ALIGNMENT};

/// Tests that measure the device's free memory take this for writing; tests that allocate a lot
/// take it for reading, so the measurements are not disturbed.
pub(crate) static DEVICE_MEMORY: RwLock<()> = RwLock::new(());

fn shared_memory() -> RwLockReadGuard<'static, ()> {
    DEVICE_MEMORY.read().unwrap_or_else(|e| e.into_inner())
}

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// Proves `bytes` bytes at `ptr` are usable: the device fills both ends on `stream`, the bytes are
/// copied back and compared; host-accessible memory is also read and written from the host.
pub(crate) fn check_usable(
    mr: &AnyResource,
    ptr: *mut u8,
    bytes: usize,
    value: u8,
    stream: Stream,
) {
    let n = bytes.min(16);
    // SAFETY: `ptr` is valid for `bytes` bytes, so `last` is too for `n` bytes.
    let last = unsafe { ptr.add(bytes - n) };
    let mut first_back = [0u8; 16];
    let mut last_back = [0u8; 16];
    // SAFETY: both ranges lie in the allocation; the host arrays are valid for `n` bytes; the copies
    // are synchronized before the arrays are read.
    unsafe {
        cu::set_async(ptr, value, n, stream).unwrap();
        cu::set_async(last, value, n, stream).unwrap();
        cu::copy_async(first_back.as_mut_ptr(), ptr, n, stream).unwrap();
        cu::copy_async(last_back.as_mut_ptr(), last, n, stream).unwrap();
    }
    stream.synchronize().unwrap();
    assert!(
        first_back[..n].iter().all(|&b| b == value),
        "{}: first bytes {first_back:?}",
        mr.name()
    );
    assert!(
        last_back[..n].iter().all(|&b| b == value),
        "{}: last bytes {last_back:?}",
        mr.name()
    );
    if mr.access().host() {
        // SAFETY: host-accessible memory, valid for `bytes` bytes; the device work above finished.
        unsafe {
            assert_eq!(
                (*ptr, *last.add(n - 1)),
                (value, value),
                "{}: host read",
                mr.name()
            );
            *ptr = !value;
            *ptr.add(bytes - 1) = !value;
            assert_eq!(
                (*ptr, *ptr.add(bytes - 1)),
                (!value, !value),
                "{}: host write",
                mr.name()
            );
        }
    }
}

/// 0 B, 4 B, 1 KiB, 1 MiB and 1 GiB: null for 0, 256-aligned and usable otherwise.
pub(crate) fn size_ladder(mr: &AnyResource) {
    let _shared = shared_memory();
    assert!(
        mr.access().device(),
        "{} must be device-accessible here",
        mr.name()
    );
    for (i, bytes) in [0, 4, KIB, MIB, GIB].into_iter().enumerate() {
        let p = mr
            .allocate(Stream::DEFAULT, bytes, DEFAULT_ALIGNMENT)
            .unwrap_or_else(|e| panic!("{}: allocating {bytes} bytes: {e}", mr.name()));
        if bytes == 0 {
            assert!(p.is_null(), "{}: 0 bytes must give null", mr.name());
        } else {
            assert!(!p.is_null());
            assert_eq!(
                p as usize % DEFAULT_ALIGNMENT,
                0,
                "{}: {bytes} bytes at {p:?}",
                mr.name()
            );
            check_usable(mr, p, bytes, 0xa0 + i as u8, Stream::DEFAULT);
        }
        // SAFETY: `p` came from `mr` with these arguments and nothing uses it any more.
        unsafe { mr.deallocate(Stream::DEFAULT, p, bytes, DEFAULT_ALIGNMENT) }
            .unwrap_or_else(|e| panic!("{}: freeing {bytes} bytes: {e}", mr.name()));
    }
    Stream::DEFAULT.synchronize().unwrap();
}

/// 1 PiB fails with out-of-memory (not a crash, not a hang), and the resource still works.
pub(crate) fn out_of_memory_then_recovers(mr: &AnyResource) {
    let _shared = shared_memory();
    let err = mr
        .allocate(Stream::DEFAULT, 1 << 50, DEFAULT_ALIGNMENT)
        .unwrap_err();
    assert!(
        err.is_out_of_memory(),
        "{}: expected out-of-memory, got {err}",
        mr.name()
    );
    let p = mr
        .allocate(Stream::DEFAULT, MIB, DEFAULT_ALIGNMENT)
        .unwrap();
    check_usable(mr, p, MIB, 0x42, Stream::DEFAULT);
    // SAFETY: from allocate above; the check synchronized its work.
    unsafe {
        mr.deallocate(Stream::DEFAULT, p, MIB, DEFAULT_ALIGNMENT)
            .unwrap()
    };
}

/// `allocate_sync` memory is usable at once; `deallocate_sync` takes it back; clones are equal.
pub(crate) fn sync_round_trip(mr: &AnyResource) {
    assert!(
        mr.is_equal(&mr.clone()),
        "{}: a clone must be equal",
        mr.name()
    );
    assert!(mr.allocate_sync(0, DEFAULT_ALIGNMENT).unwrap().is_null());
    let p = mr.allocate_sync(MIB, DEFAULT_ALIGNMENT).unwrap();
    check_usable(mr, p, MIB, 0x17, Stream::DEFAULT);
    // SAFETY: from allocate_sync above; the check synchronized its work.
    unsafe { mr.deallocate_sync(p, MIB, DEFAULT_ALIGNMENT).unwrap() };
}

/// Allocate, fill, copy back and free on 4 non-blocking streams, all in stream order.
pub(crate) fn several_streams(mr: &AnyResource) {
    let streams: Vec<OwnedStream> = (0..4)
        .map(|_| OwnedStream::new(StreamFlags::NonBlocking).unwrap())
        .collect();
    let mut back = vec![[0u8; 16]; streams.len()];
    for (i, (s, out)) in streams.iter().zip(back.iter_mut()).enumerate() {
        let p = mr.allocate(s.stream(), MIB, DEFAULT_ALIGNMENT).unwrap();
        assert_eq!(p as usize % DEFAULT_ALIGNMENT, 0);
        // SAFETY: `p` is valid for 1 MiB and `out` for 16 bytes until the stream is synchronized
        // below; the free is ordered after the copy on the same stream.
        unsafe {
            cu::set_async(p, i as u8 + 1, MIB, s.stream()).unwrap();
            cu::copy_async(out.as_mut_ptr(), p.add(MIB - 16), 16, s.stream()).unwrap();
            mr.deallocate(s.stream(), p, MIB, DEFAULT_ALIGNMENT)
                .unwrap();
        }
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    for (i, out) in back.iter().enumerate() {
        assert!(
            out.iter().all(|&b| b == i as u8 + 1),
            "{}: stream {i} read {out:?}",
            mr.name()
        );
    }
}

/// 8 threads, each with its own stream, 200 allocate/free pairs of varied sizes.
pub(crate) fn several_threads(mr: &AnyResource) {
    let _shared = shared_memory();
    const SIZES: [usize; 8] = [1, 256, 1000, 4 * KIB, 64 * KIB, MIB, 3 * MIB, 0];
    std::thread::scope(|scope| {
        for t in 0..8usize {
            scope.spawn(move || {
                let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
                for k in 0..200usize {
                    let bytes = SIZES[(t * 3 + k) % SIZES.len()];
                    let p = mr
                        .allocate(stream.stream(), bytes, DEFAULT_ALIGNMENT)
                        .unwrap_or_else(|e| {
                            panic!("{}: thread {t}, {bytes} bytes: {e}", mr.name())
                        });
                    assert_eq!(p as usize % DEFAULT_ALIGNMENT, 0);
                    // SAFETY: `p` is valid for `bytes` bytes; the free is ordered after the fill.
                    unsafe {
                        cu::set_async(p, k as u8, bytes.min(64), stream.stream()).unwrap();
                        mr.deallocate(stream.stream(), p, bytes, DEFAULT_ALIGNMENT)
                            .unwrap();
                    }
                }
                stream.synchronize().unwrap();
            });
        }
    });
}

/// Memory allocated with device 0 current can be freed with device 1 current; the resource keeps
/// working on device 0 afterwards. The caller makes the resource with device 0 current.
pub(crate) fn free_on_another_device(mr: &AnyResource) {
    let p = mr
        .allocate(Stream::DEFAULT, MIB, DEFAULT_ALIGNMENT)
        .unwrap();
    check_usable(mr, p, MIB, 0x66, Stream::DEFAULT);
    {
        let _device1 = DeviceGuard::new(1).unwrap();
        // SAFETY: from allocate above; the check synchronized its work.
        unsafe { mr.deallocate(Stream::DEFAULT, p, MIB, DEFAULT_ALIGNMENT) }
            .unwrap_or_else(|e| panic!("{}: freeing with device 1 current: {e}", mr.name()));
        Stream::DEFAULT.synchronize().unwrap();
    }
    assert_eq!(cu::current_device().unwrap(), 0);
    let p = mr
        .allocate(Stream::DEFAULT, MIB, DEFAULT_ALIGNMENT)
        .unwrap();
    check_usable(mr, p, MIB, 0x67, Stream::DEFAULT);
    // SAFETY: from allocate above; the check synchronized its work.
    unsafe {
        mr.deallocate(Stream::DEFAULT, p, MIB, DEFAULT_ALIGNMENT)
            .unwrap()
    };
}

/// The resource from `factory`, or `None` after recording a skip when `skip` gives a reason.
pub(crate) fn make(
    test: &str,
    factory: fn() -> crate::Result<AnyResource>,
    skip: fn() -> Option<String>,
) -> Option<AnyResource> {
    crate::testing::require_gpu();
    if let Some(reason) = skip() {
        crate::testing::skip(test, &reason);
        return None;
    }
    Some(factory().unwrap_or_else(|e| panic!("{test}: could not make the resource: {e}")))
}

/// Generates the harness's GPU tests for one resource in a module `$name`.
///
/// `$factory`: `fn() -> Result<AnyResource>` (a non-capturing closure is fine), called once per test.
/// `$skip` (optional): `fn() -> Option<String>`, a reason to skip on this machine.
macro_rules! resource_tests {
    ($name:ident, $factory:expr) => {
        $crate::mr::test_harness::resource_tests!($name, $factory, || None);
    };
    ($name:ident, $factory:expr, $skip:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn resource(test: &str) -> Option<$crate::AnyResource> {
                let factory: fn() -> $crate::Result<$crate::AnyResource> = $factory;
                let skip: fn() -> Option<String> = $skip;
                $crate::mr::test_harness::make(
                    &format!("{}::{test}", module_path!()),
                    factory,
                    skip,
                )
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn size_ladder() {
                if let Some(mr) = resource("size_ladder") {
                    $crate::mr::test_harness::size_ladder(&mr);
                }
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn out_of_memory_then_recovers() {
                if let Some(mr) = resource("out_of_memory_then_recovers") {
                    $crate::mr::test_harness::out_of_memory_then_recovers(&mr);
                }
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn sync_round_trip() {
                if let Some(mr) = resource("sync_round_trip") {
                    $crate::mr::test_harness::sync_round_trip(&mr);
                }
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn several_streams() {
                if let Some(mr) = resource("several_streams") {
                    $crate::mr::test_harness::several_streams(&mr);
                }
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn several_threads() {
                if let Some(mr) = resource("several_threads") {
                    $crate::mr::test_harness::several_threads(&mr);
                }
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn free_on_another_device() {
                let test = format!("{}::free_on_another_device", module_path!());
                if !$crate::testing::two_devices(&test) {
                    return;
                }
                let _device0 = $crate::cuda::DeviceGuard::new(0).unwrap();
                if let Some(mr) = resource("free_on_another_device") {
                    $crate::mr::test_harness::free_on_another_device(&mr);
                }
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use resource_tests;

/// "System memory not supported" when the current device cannot access pageable memory.
fn system_memory_unsupported() -> Option<String> {
    let device = cu::current_device().ok()?;
    (!SystemMemoryResource::is_supported_on(device))
        .then(|| "System memory not supported".to_string())
}

fn async_managed_unsupported() -> Option<String> {
    let device = cu::current_device().ok()?;
    (!CudaAsyncManagedMemoryResource::is_supported_on(device)).then(|| {
        "managed memory pools not supported (needs CUDA 13 and concurrent managed access)"
            .to_string()
    })
}

resource_tests!(cuda, || Ok(AnyResource::new(CudaMemoryResource::new())));
resource_tests!(managed, || Ok(AnyResource::new(
    ManagedMemoryResource::new()
)));
resource_tests!(pinned_host, || Ok(AnyResource::new(
    PinnedHostMemoryResource::new()
)));
resource_tests!(
    system,
    || Ok(AnyResource::new(SystemMemoryResource::new())),
    system_memory_unsupported
);
resource_tests!(
    sam_headroom,
    || SamHeadroomMemoryResource::new(GIB).map(AnyResource::new),
    system_memory_unsupported
);
resource_tests!(cuda_async, || CudaAsyncMemoryResource::new()
    .map(AnyResource::new));
resource_tests!(cuda_async_primed, || {
    CudaAsyncMemoryResource::with_options(CudaAsyncOptions::default().initial_pool_size(64 * MIB))
        .map(AnyResource::new)
});
resource_tests!(cuda_async_view, || {
    let owner = CudaAsyncMemoryResource::new()?;
    Ok(AnyResource::new(CudaAsyncViewMemoryResource::from(&owner)))
});
resource_tests!(
    cuda_async_managed,
    || CudaAsyncManagedMemoryResource::new().map(AnyResource::new),
    async_managed_unsupported
);
