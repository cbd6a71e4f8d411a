//! Memory resources, one file each, named after RMM's.
//!
//! Base resources talk to CUDA or the OS; sub-allocators and adaptors own an upstream [`crate::AnyResource`].

pub mod binning;
pub mod cuda;
pub mod cuda_async;
pub mod cuda_async_managed;
pub mod cuda_async_view;
pub(crate) mod detail;
pub mod fixed_size;
pub mod managed;
pub mod pinned_host;
pub mod pool;
pub mod sam_headroom;
pub mod simulated;
pub mod system;

#[cfg(test)]
pub(crate) mod test_harness;

pub use binning::BinningMemoryResource;
pub use cuda::CudaMemoryResource;
pub use cuda_async::{CudaAsyncMemoryResource, CudaAsyncOptions, ExportHandleType};
pub use cuda_async_managed::CudaAsyncManagedMemoryResource;
pub use cuda_async_view::CudaAsyncViewMemoryResource;
pub use fixed_size::FixedSizeMemoryResource;
pub use managed::ManagedMemoryResource;
pub use pinned_host::PinnedHostMemoryResource;
pub use pool::{PoolMemoryResource, PoolStatistics};
pub use sam_headroom::SamHeadroomMemoryResource;
pub use simulated::{SimulatedMemoryResource, SimulatedUsage};
pub use system::SystemMemoryResource;
