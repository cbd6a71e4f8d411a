//! Experimental resources and building blocks that are not RMM types (issue 28: the expandable
//! pool). Their API may change between releases.
//!
//! - [`ExpandablePoolMemoryResource`]: a stream-ordered pool on one reserved range of virtual
//!   addresses that grows in place, gives memory back granule by granule (even between live
//!   blocks) and exports its allocations to other processes;
//! - [`VirtualRange`]: a range of virtual addresses reserved once and backed granule by granule
//!   (CUDA's virtual memory management, or host memory standing in for a device in host mode);
//!   grows in place and gives any whole granule back, even between live blocks;
//! - [`ExportedSpan`] / [`ImportedSpan`]: a span of a range shared with another process through
//!   shareable handles (POSIX file descriptors over a Unix socket, or fabric handles), mapped there
//!   with no copy.
//!
//! Design: `docs/design/expandable-pool.md`.

pub use super::detail::virtual_range::{
    Backend, ExportedSpan, HostBackend, ImportedSpan, MemoryKind, SharedHandle, VirtualRange,
    VirtualRangeOptions, VirtualRangeStats,
};
pub use super::expandable_pool::{
    ExpandablePoolMemoryResource, ExpandablePoolOptions, ExpandablePoolStatistics,
};
pub use crate::cuda::vmm::ShareableHandles;
