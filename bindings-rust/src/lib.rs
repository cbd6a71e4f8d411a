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

pub mod view;

/// The object model ([`MemoryResource`], [`Access`], [`AnyResource`], [`ResourceRef`]) and the
/// handle through which a resource crosses into C, C++ and other binaries ([`AnyResource`]'s
/// `*_handle` methods; [`resource::rmm_resource`]). The C entry points themselves are librmm's.
pub mod resource {
    pub use rmm_core::resource::{
        downcast, rmm_error, rmm_resource, rmm_resource_vtable, Access, AnyResource, ForeignResource, MemoryResource,
        ResourceRef, DEFAULT_ALIGNMENT,
    };
}

/// The names most programs need.
pub mod prelude {
    pub use rmm_core::cuda::{OwnedStream, Stream, StreamFlags, StreamPool};
    pub use rmm_core::{
        Access, AnyResource, DeviceBuffer, DeviceScalar, DeviceVector, Error, MemoryResource, ResourceRef, Result,
        DEFAULT_ALIGNMENT,
    };
}
