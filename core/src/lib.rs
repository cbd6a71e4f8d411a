//! rmm-core: the engine of rmm-rs.
//!
//! Stream-ordered memory resources in the shape of CCCL's `cuda::mr`, written once in Rust and
//! offered to Python, C++ and Rust by thin bindings. This crate knows nothing about either binding.
//!
//! Map of the crate:
//! - [`cuda`]: the only module that calls the CUDA driver (loaded at run time);
//! - [`resource`]: [`MemoryResource`], [`Access`], [`AnyResource`], [`ResourceRef`], and the handle
//!   protocol of the C ABI through which resources cross into C, C++ and other binaries;
//! - [`mr`]: the resources, one file each;
//! - [`buffer`]: the containers [`DeviceBuffer`], [`DeviceVector`] and [`DeviceScalar`];
//! - [`registry`]: the per-device current resource, and the one client of a loaded registry owner
//!   (librmm, [`registry::owner`]);
//! - [`error`]: the one [`Error`] type;
//! - [`size`]: sizes written as text (RMM's `parse_bytes`);
//! - [`debug_log`]: RMM's debug log (`RMM_DEBUG_LOG_FILE`, levels) over `tracing`;
//! - [`view`]: typed strided views, DLPack 1.x, and their C struct;
//! - [`export`]: buffers and resources handed to another binary as plain C structs;
//! - [`aligned`]: alignment arithmetic.
//!
//! The top-level modules import one way, `cuda` ← `resource` ← `mr` ← `registry` ← `buffer` ←
//! `view`/`export` (`error`, `aligned`, `size` and `debug_log` below them all); `tests/layers.rs`
//! fails on a loop.

pub mod aligned;
pub mod buffer;
pub mod cuda;
pub mod debug_log;
pub mod error;
pub mod export;
pub mod mr;
pub mod registry;
pub mod resource;
pub mod size;
pub mod view;

#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

pub use aligned::DEFAULT_ALIGNMENT;
pub use buffer::{DeviceBuffer, DeviceScalar, DeviceVector};
pub use error::{Error, Result};
pub use resource::{downcast, Access, AnyResource, MemoryResource, ResourceRef};
