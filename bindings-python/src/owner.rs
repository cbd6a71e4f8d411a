//! librmm's own accessors, for resources that librmm made.
//!
//! When `librmm_rs.so` is loaded before `rmm` (C++ or ctypes in the same process), the registry of
//! this module's rmm-core routes to librmm (`rmm_core::registry`), and a resource that C++ made (a
//! `statistics_resource_adaptor`, a `pool_memory_resource`) reaches Python as a foreign handle:
//! allocation works through its vtable, but its type lives in librmm's copy of rmm-core, so
//! `downcast` here cannot see it. rmm-core's owner client (`rmm_core::registry::owner`) asks librmm
//! what it is (`rmm_resource_kind`) and reads its state through librmm's accessors.

use rmm_core::mr::kind::ResourceKind;
use rmm_core::mr::statistics::Counter;
use rmm_core::registry::owner;
use rmm_core::{AnyResource, Result};

/// A statistics adaptor or pool that librmm made, read through librmm's accessors.
#[derive(Clone, Debug)]
pub(crate) struct OwnerResource {
    resource: AnyResource,
}

impl OwnerResource {
    /// `resource` when librmm says it is a `statistics_resource_adaptor`.
    pub(crate) fn statistics(resource: &AnyResource) -> Option<Self> {
        Self::of_kind(resource, ResourceKind::Statistics)
    }

    /// `resource` when librmm says it is a `pool_memory_resource`.
    pub(crate) fn pool(resource: &AnyResource) -> Option<Self> {
        Self::of_kind(resource, ResourceKind::Pool)
    }

    fn of_kind(resource: &AnyResource, kind: ResourceKind) -> Option<Self> {
        (owner::resource_kind(resource) == Some(kind)).then(|| Self { resource: resource.clone() })
    }

    /// `(bytes, allocations)` of the current frame.
    pub(crate) fn counters(&self) -> Result<(Counter, Counter)> {
        owner::statistics_counters(&self.resource)
    }

    /// RMM's `push_counters`: the counters from before the push.
    pub(crate) fn push_counters(&self) -> Result<(Counter, Counter)> {
        owner::push_counters(&self.resource)
    }

    /// RMM's `pop_counters`: the popped frame; `InvalidArgument` when only one frame is left.
    pub(crate) fn pop_counters(&self) -> Result<(Counter, Counter)> {
        owner::pop_counters(&self.resource)
    }

    /// The bytes a pool holds from its upstream.
    pub(crate) fn pool_size(&self) -> Result<usize> {
        owner::pool_size(&self.resource)
    }
}
