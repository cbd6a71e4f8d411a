//! Memory resources, one file each, named after RMM's.
//!
//! Base resources talk to CUDA or the OS; sub-allocators and adaptors own an upstream [`crate::AnyResource`].

pub mod aligned;
pub mod arena;
pub mod binning;
pub mod callback;
pub mod cuda;
pub mod cuda_async;
pub mod cuda_async_managed;
pub mod cuda_async_view;
pub(crate) mod detail;
mod expandable_pool;
pub mod experimental;
pub mod failure_callback;
pub mod fixed_size;
pub mod kind;
pub mod limiting;
pub mod logging;
pub mod managed;
pub mod pinned_host;
pub mod pool;
pub mod prefetch;
pub mod recording;
pub mod sam_headroom;
pub mod simulated;
pub mod statistics;
pub mod system;
pub mod thread_safe;
pub mod tracking;

#[cfg(test)]
mod adversary_tests;
#[cfg(test)]
mod checked_frees_tests;
#[cfg(test)]
mod composition_tests;
#[cfg(test)]
mod host_exhaustion_tests;
#[cfg(test)]
pub(crate) mod test_harness;
#[cfg(test)]
mod two_devices_tests;

pub use aligned::AlignedResourceAdaptor;
pub use arena::{ArenaMemoryResource, ArenaOptions, ArenaStats};
pub use binning::BinningMemoryResource;
pub use callback::{AllocateCallback, CallbackMemoryResource, DeallocateCallback};
pub use cuda::CudaMemoryResource;
pub use cuda_async::{CudaAsyncMemoryResource, CudaAsyncOptions, ExportHandleType};
pub use cuda_async_managed::CudaAsyncManagedMemoryResource;
pub use cuda_async_view::CudaAsyncViewMemoryResource;
pub use detail::live_set::FreeChecks;
pub use failure_callback::{FailureCallback, FailureCallbackResourceAdaptor};
pub use fixed_size::FixedSizeMemoryResource;
pub use limiting::LimitingResourceAdaptor;
pub use logging::LoggingResourceAdaptor;
pub use managed::ManagedMemoryResource;
pub use pinned_host::PinnedHostMemoryResource;
pub use pool::{PoolMemoryResource, PoolStatistics};
pub use prefetch::PrefetchResourceAdaptor;
pub use recording::RecordingResourceAdaptor;
pub use sam_headroom::SamHeadroomMemoryResource;
pub use simulated::{SimulatedMemoryResource, SimulatedUsage};
pub use statistics::StatisticsResourceAdaptor;
pub use system::SystemMemoryResource;
pub use thread_safe::ThreadSafeResourceAdaptor;
pub use tracking::TrackingResourceAdaptor;
