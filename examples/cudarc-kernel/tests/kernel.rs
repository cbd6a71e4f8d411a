//! The cudarc bridge on a GPU: a PTX kernel launched by cudarc on our memory, with copies through
//! cudarc in both directions and our allocation ordered on cudarc's stream.

use rmm::mr::{CudaMemoryResource, StatisticsResourceAdaptor};
use rmm::AnyResource;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cudarc_kernel_runs_on_rmm_memory() {
    assert!(!rmm::cuda::is_host_mode(), "needs a CUDA GPU");
    let stats = StatisticsResourceAdaptor::new(CudaMemoryResource::new());
    let mr = AnyResource::new(stats.clone());
    let values: Vec<u32> = (0..10_000).collect();
    let (out, ptr) = rmm_example_cudarc::add_one(&values, mr).expect("the kernel ran");
    assert_eq!(out, values.iter().map(|v| v + 1).collect::<Vec<_>>());
    assert_ne!(ptr, 0);
    let counts = stats.allocations_counter();
    assert_eq!(
        (counts.total, counts.value),
        (1, 0),
        "one allocation of ours, freed"
    );
}

#[test]
fn the_ptx_names_the_kernel() {
    // Host mode has no driver to load PTX; this checks what the GPU test will load.
    assert!(rmm_example_cudarc::ADD_ONE_PTX.contains(".entry add_one("));
}
