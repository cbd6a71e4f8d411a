//! Owning exports: a [`DeviceBuffer`](crate::DeviceBuffer) or an
//! [`AnyResource`](crate::AnyResource) handed to another binary (another copy of rmm-core, C, C++)
//! as a plain C struct, with no copy of the memory.
//!
//! Each export carries its own `deleter`, a function of the binary that made it, so any consumer
//! can give it back whatever allocator or copy of rmm-core it was built with (DLPack's
//! `DLManagedTensor` pattern):
//!
//! - [`rmm_buffer_export`]: the allocation, its size, capacity, alignment, stream and device, and an
//!   OWNING reference to the resource it came from. A consumer *adopts* it with
//!   [`import_buffer`]: the memory then belongs to the consumer's buffer, which frees it once, on
//!   its own stream and device, through that resource (even when the resource is no longer the
//!   current one). An export nobody adopts is freed by its deleter.
//! - [`rmm_resource_export`]: an OWNING reference to a resource. Importing it
//!   ([`import_resource`]) adds a reference and leaves the export as it was; its deleter gives the
//!   export's own reference back.
//!
//! The structs are versioned (`version` is checked first); the C declarations are in
//! `bindings-cpp/include/rmm_rs/rmm_c.h`, and the bindings wrap them in versioned capsules
//! (docs/cross-language.md).

mod buffer;
mod resource;

pub use buffer::{
    export_buffer, free_buffer_export, import_buffer, rmm_buffer_export, RMM_BUFFER_EXPORT_VERSION,
};
pub use resource::{
    export_resource, free_resource_export, import_resource, rmm_resource_export,
    RMM_RESOURCE_EXPORT_VERSION,
};
