//! `rmm`: GPU memory management for Rust, the public face of rmm-core.
//!
//! ```
//! use rmm::prelude::*;
//! let mr = rmm::mr::SystemMemoryResource::new();
//! let p = mr.allocate(Stream::DEFAULT, 256, DEFAULT_ALIGNMENT).unwrap();
//! // SAFETY: `p` came from `mr` with these arguments.
//! unsafe { mr.deallocate(Stream::DEFAULT, p, 256, DEFAULT_ALIGNMENT).unwrap() };
//! ```

pub use rmm_core::{aligned, cuda, error, mr, resource};
pub use rmm_core::{downcast, Access, AnyResource, Error, MemoryResource, ResourceRef, Result, DEFAULT_ALIGNMENT};

/// The names most programs need.
pub mod prelude {
    pub use rmm_core::cuda::{OwnedStream, Stream, StreamFlags, StreamPool};
    pub use rmm_core::{Access, AnyResource, Error, MemoryResource, ResourceRef, Result, DEFAULT_ALIGNMENT};
}
