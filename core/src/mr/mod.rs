//! Memory resources, one file each, named after RMM's.
//!
//! Base resources (talk to CUDA or the OS): [`SystemMemoryResource`] ...

pub mod system;

pub use system::SystemMemoryResource;
