//! `rmm`: GPU memory management for Rust, the public face of rmm-core.
//!
//! Stream-ordered memory resources ([`mr`]), the owning handle [`AnyResource`], containers
//! ([`DeviceBuffer`], [`DeviceVector`], [`DeviceScalar`]) and the per-device current resource
//! ([`registry`]). Without a GPU everything runs on host memory ([`cuda::is_host_mode`]).
//!
//! ```
//! use rmm::prelude::*;
//! let mr = rmm::mr::SystemMemoryResource::new();
//! let p = mr.allocate(Stream::DEFAULT, 256, DEFAULT_ALIGNMENT).unwrap();
//! // SAFETY: `p` came from `mr` with these arguments.
//! unsafe { mr.deallocate(Stream::DEFAULT, p, 256, DEFAULT_ALIGNMENT).unwrap() };
//!
//! // Containers use the current device's resource unless given one.
//! let buf = DeviceBuffer::from_host(b"hello", Stream::DEFAULT, rmm::registry::current_resource()?)?;
//! assert_eq!(buf.to_vec()?, b"hello");
//! # Ok::<(), rmm::Error>(())
//! ```

pub use rmm_core::{aligned, buffer, cuda, error, mr, registry};
pub use rmm_core::{
    downcast, Access, AnyResource, DeviceBuffer, DeviceScalar, DeviceVector, Error, MemoryResource,
    ResourceRef, Result, DEFAULT_ALIGNMENT,
};

/// The object model: [`MemoryResource`], [`Access`], [`AnyResource`], [`ResourceRef`]. (The C handle
/// through which a resource crosses into C and C++ is librmm's business: see [`interop`].)
pub mod resource {
    pub use rmm_core::resource::{downcast, Access, AnyResource, MemoryResource, ResourceRef, DEFAULT_ALIGNMENT};
}

mod builder;
pub mod interop;

#[cfg(feature = "cudarc")]
pub mod cudarc;
#[cfg(feature = "cxx")]
pub mod cxx;
#[cfg(feature = "pyo3")]
pub mod python;

pub use builder::{PoolBuilder, ResourceStack};

/// The names most programs need.
pub mod prelude {
    pub use rmm_core::cuda::{OwnedStream, Stream, StreamFlags, StreamPool};
    pub use rmm_core::{
        Access, AnyResource, DeviceBuffer, DeviceScalar, DeviceVector, Error, MemoryResource, ResourceRef, Result,
        DEFAULT_ALIGNMENT,
    };
}
