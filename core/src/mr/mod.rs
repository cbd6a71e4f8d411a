//! Memory resources, one file each, named after RMM's.
//!
//! Base resources talk to CUDA or the OS; sub-allocators and adaptors own an upstream [`crate::AnyResource`].

pub mod cuda;
pub mod system;

pub use cuda::CudaMemoryResource;
pub use system::SystemMemoryResource;
