//! The cxx bridge: Rust resources reach C++ code that takes `rmm::device_async_resource_ref`, and
//! what C++ allocates shows up in the Rust resource's statistics (host memory here, CUDA memory on a
//! GPU).

use rmm::mr::{CudaMemoryResource, StatisticsResourceAdaptor, SystemMemoryResource};
use rmm::prelude::*;
use rmm::{cxx::ResourceHandle, ResourceStack};

fn bridge_or_reason() -> bool {
    if let Some(reason) = rmm_example_cxx::CCCL_MISSING {
        // Reported, not passed silently: the CPU runner shows this line.
        eprintln!("rmm-example-cxx: the bridge is not built: {reason}");
        return false;
    }
    true
}

#[cfg(not(rmm_no_cccl))]
fn check(base: AnyResource, host_accessible: bool) {
    use rmm_example_cxx::ffi;
    let mr = ResourceStack::over(base).statistics().build();
    let stats = mr
        .downcast_ref::<StatisticsResourceAdaptor>()
        .expect("the top is the statistics adaptor");
    let n = ffi::churn_through(ResourceHandle::new(&mr), 10, 1000, host_accessible)
        .expect("C++ allocated");
    assert_eq!(n, 10);
    let (bytes, allocations) = (stats.bytes_counter(), stats.allocations_counter());
    assert_eq!(
        (allocations.total, allocations.value),
        (10, 0),
        "C++ allocated and freed through Rust"
    );
    assert_eq!((bytes.total, bytes.peak, bytes.value), (10_000, 10_000, 0));
    assert_eq!(
        ffi::resource_name(ResourceHandle::new(&mr)),
        "statistics_resource_adaptor"
    );
    let other = mr.clone();
    assert!(ffi::same_resource(
        ResourceHandle::new(&mr),
        ResourceHandle::new(&other)
    ));
}

#[test]
fn cpp_allocates_through_a_rust_resource_in_host_memory() {
    if !bridge_or_reason() {
        return;
    }
    #[cfg(not(rmm_no_cccl))]
    check(AnyResource::new(SystemMemoryResource::new()), true);
}

#[test]
fn a_rust_error_is_a_cpp_exception_and_comes_back_as_err() {
    if !bridge_or_reason() {
        return;
    }
    #[cfg(not(rmm_no_cccl))]
    {
        let mr = ResourceStack::new(SystemMemoryResource::new())
            .limit(4096)
            .build();
        let err = rmm_example_cxx::ffi::churn_through(ResourceHandle::new(&mr), 10, 1000, true)
            .expect_err("the limit refuses the fifth block");
        assert!(err.what().contains("out_of_memory"), "{}", err.what());
        let limit = mr
            .downcast_ref::<rmm::mr::LimitingResourceAdaptor>()
            .unwrap();
        assert_eq!(
            limit.allocated_bytes(),
            0,
            "C++ freed what it had before rethrowing"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cpp_allocates_through_a_rust_resource_in_device_memory() {
    assert!(!rmm::cuda::is_host_mode(), "needs a CUDA GPU");
    assert!(
        bridge_or_reason(),
        "the bridge must be built for the GPU run"
    );
    #[cfg(not(rmm_no_cccl))]
    check(AnyResource::new(CudaMemoryResource::new()), false);
}

/// A C++-made `std::unique_ptr<rmm::device_buffer>` becomes a Rust `DeviceBuffer` and goes back to
/// C++, with no copy (same pointer, one allocation in the statistics), freed once by C++ through the
/// Rust resource it came from.
#[cfg(not(rmm_no_cccl))]
fn check_buffers(base: AnyResource, host_accessible: bool) {
    use rmm::cxx::{buffer_from_cxx, buffer_into_cxx};
    use rmm_example_cxx::ffi;
    let mr = ResourceStack::over(base).statistics().build();
    let stats = mr
        .downcast_ref::<StatisticsResourceAdaptor>()
        .expect("the top is the statistics adaptor");
    let live = || {
        let (b, a) = (stats.bytes_counter(), stats.allocations_counter());
        (a.total, a.value, b.value)
    };
    let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let expected_sum: u64 = bytes.iter().map(|&b| u64::from(b)).sum();

    let cpp = ffi::make_buffer(ResourceHandle::new(&mr), &bytes).expect("C++ made a buffer");
    let address = ffi::buffer_address(&cpp);
    assert_eq!(ffi::buffer_size(&cpp), 1000);
    assert_eq!(
        live(),
        (1, 1, 1000),
        "C++ allocated once through the Rust statistics adaptor"
    );

    let rust = buffer_from_cxx(cpp).expect("C++ -> Rust");
    assert_eq!(
        (rust.as_ptr() as usize, rust.size()),
        (address, 1000),
        "no copy"
    );
    assert!(
        rust.memory_resource().ptr_eq(&mr),
        "the Rust buffer's resource is the one that made it"
    );
    assert_eq!(rust.to_vec().expect("read back"), bytes);
    assert_eq!(live(), (1, 1, 1000), "still the one allocation");

    let back = buffer_into_cxx(rust).expect("Rust -> C++");
    assert_eq!(
        (ffi::buffer_address(&back), ffi::buffer_size(&back)),
        (address, 1000),
        "no copy"
    );
    let answer = ffi::consume_buffer(back, host_accessible).expect("C++ took the buffer");
    assert_eq!(answer, if host_accessible { expected_sum } else { 1000 });
    assert_eq!(
        live(),
        (1, 0, 0),
        "freed once, by C++, through the Rust resource"
    );

    // Dropping a UniquePtr in Rust deletes the C++ buffer (and frees its memory) once.
    drop(ffi::make_buffer(ResourceHandle::new(&mr), &bytes).expect("C++ made a buffer"));
    assert_eq!(live(), (2, 0, 0));
    // A moved-through Rust buffer dropped in Rust is freed there.
    drop(
        buffer_from_cxx(ffi::make_buffer(ResourceHandle::new(&mr), &[]).expect("an empty buffer"))
            .unwrap(),
    );
    assert_eq!(live().1, 0);
}

#[test]
fn buffers_move_between_cpp_unique_ptr_and_rust_in_host_memory() {
    if !bridge_or_reason() {
        return;
    }
    #[cfg(not(rmm_no_cccl))]
    check_buffers(AnyResource::new(SystemMemoryResource::new()), true);
}

#[test]
fn a_null_unique_ptr_is_an_error_not_a_crash() {
    if !bridge_or_reason() {
        return;
    }
    #[cfg(not(rmm_no_cccl))]
    {
        let err = rmm::cxx::buffer_from_cxx(cxx::UniquePtr::null()).expect_err("nothing to move");
        assert!(matches!(err, rmm::Error::InvalidArgument(_)), "{err}");
        let err = rmm_example_cxx::ffi::consume_buffer(cxx::UniquePtr::null(), true)
            .expect_err("C++ refuses it");
        assert!(err.what().contains("no buffer"), "{}", err.what());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_move_between_cpp_unique_ptr_and_rust_in_device_memory() {
    assert!(!rmm::cuda::is_host_mode(), "needs a CUDA GPU");
    assert!(
        bridge_or_reason(),
        "the bridge must be built for the GPU run"
    );
    #[cfg(not(rmm_no_cccl))]
    check_buffers(AnyResource::new(CudaMemoryResource::new()), false);
}
