//! `rmm`: GPU memory management for Rust, the public face of rmm-core (RAPIDS RMM's model:
//! stream-ordered memory resources, pools, adaptors and containers), sharing one process-wide
//! registry and its objects with `import rmm` in Python and `<rmm/...>` in C++.
//!
//! - **Resources** ([`mr`]): [`mr::CudaMemoryResource`], [`mr::CudaAsyncMemoryResource`], pools,
//!   arenas, adaptors. [`AnyResource`] is the owning, cheap-to-clone handle; builders compose them
//!   ([`PoolBuilder`], [`ResourceStack`]).
//! - **Containers**: [`DeviceBuffer`], [`DeviceVector`], [`DeviceScalar`], freed on their own stream
//!   and device through the resource that made them.
//! - **The current resource** per device ([`registry`]), shared with C++ and Python when
//!   `librmm_rs.so` is loaded.
//! - **Errors** are typed values ([`Error`]: `OutOfMemory`, `Cuda`, `InvalidArgument`, `NoDriver`,
//!   `NoDevice`, `Unsupported`), never panics.
//! - **Other languages** ([`interop`], docs/cross-language.md): buffers move and resources are
//!   shared with C++ and Python with no copy. Features: `pyo3` (`rmm::python`: to and from
//!   `rmm.DeviceBuffer` and Python resources), `cxx` (`rmm::cxx`: our resources in a crate's own
//!   `#[cxx::bridge]` as `rmm::device_async_resource_ref`), `cudarc` (`rmm::cudarc`: our memory as
//!   cudarc device pointers and kernel arguments, cudarc streams as ours).
//!
//! - **The memory timeline** ([`timeline`]): the process's allocations over time, from every
//!   language, with native stacks, written as PyTorch memory snapshots (memory_viz).
//!
//! Without a GPU everything runs on host memory ([`cuda::is_host_mode`]).
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
//!
//! // A pool under a statistics adaptor, built outside in.
//! let base: AnyResource = if rmm::cuda::is_host_mode() {
//!     AnyResource::new(rmm::mr::SystemMemoryResource::new())
//! } else {
//!     AnyResource::new(rmm::mr::CudaMemoryResource::new())
//! };
//! let mr = rmm::ResourceStack::over(base).pool(Some(1 << 20), None)?.statistics().build();
//! let v = DeviceVector::<f32>::new(1000, Stream::DEFAULT, mr.clone())?;
//! assert_eq!(v.len(), 1000);
//! # Ok::<(), rmm::Error>(())
//! ```

pub use rmm_core::{aligned, buffer, cuda, error, mr, registry};
pub use rmm_core::{
    downcast, Access, AnyResource, DeviceBuffer, DeviceScalar, DeviceVector, Error, MemoryResource,
    ResourceRef, Result, DEFAULT_ALIGNMENT,
};

pub mod timeline;
pub mod view;

/// The object model: [`MemoryResource`], [`Access`], [`AnyResource`], [`ResourceRef`]. (The C handle
/// through which a resource crosses into C and C++ is librmm's business: see [`interop`].)
pub mod resource {
    pub use rmm_core::resource::{
        downcast, Access, AnyResource, MemoryResource, ResourceRef, DEFAULT_ALIGNMENT,
    };
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
        Access, AnyResource, DeviceBuffer, DeviceScalar, DeviceVector, Error, MemoryResource,
        ResourceRef, Result, DEFAULT_ALIGNMENT,
    };
}
