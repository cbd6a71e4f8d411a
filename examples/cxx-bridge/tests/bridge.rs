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
    let stats = mr.downcast_ref::<StatisticsResourceAdaptor>().expect("the top is the statistics adaptor");
    let n = ffi::churn_through(ResourceHandle::new(&mr), 10, 1000, host_accessible).expect("C++ allocated");
    assert_eq!(n, 10);
    let (bytes, allocations) = (stats.bytes_counter(), stats.allocations_counter());
    assert_eq!((allocations.total, allocations.value), (10, 0), "C++ allocated and freed through Rust");
    assert_eq!((bytes.total, bytes.peak, bytes.value), (10_000, 10_000, 0));
    assert_eq!(ffi::resource_name(ResourceHandle::new(&mr)), "statistics_resource_adaptor");
    let other = mr.clone();
    assert!(ffi::same_resource(ResourceHandle::new(&mr), ResourceHandle::new(&other)));
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
        let mr = ResourceStack::new(SystemMemoryResource::new()).limit(4096).build();
        let err = rmm_example_cxx::ffi::churn_through(ResourceHandle::new(&mr), 10, 1000, true)
            .expect_err("the limit refuses the fifth block");
        assert!(err.what().contains("out_of_memory"), "{}", err.what());
        let limit = mr.downcast_ref::<rmm::mr::LimitingResourceAdaptor>().unwrap();
        assert_eq!(limit.allocated_bytes(), 0, "C++ freed what it had before rethrowing");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cpp_allocates_through_a_rust_resource_in_device_memory() {
    assert!(!rmm::cuda::is_host_mode(), "needs a CUDA GPU");
    assert!(bridge_or_reason(), "the bridge must be built for the GPU run");
    #[cfg(not(rmm_no_cccl))]
    check(AnyResource::new(CudaMemoryResource::new()), false);
}
