//! What a resource is: [`ResourceKind`], one value per resource and adaptor type of this module,
//! and the upstream of each adaptor ([`upstream_of`]).
//!
//! Used where a resource made in another binary must be recognised: librmm answers
//! `rmm_resource_kind` from here, and `registry::owner` asks it (never by comparing names).

use super::*;
use crate::resource::{downcast, AnyResource, MemoryResource};

/// The type of a resource, as it crosses the C ABI (`RMM_RESOURCE_KIND_*` in `rmm_c.h`; the values
/// never change).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// A resource of a type this list does not name (a user's own resource type).
    Other = 0,
    /// [`CudaMemoryResource`].
    Cuda = 1,
    /// [`ManagedMemoryResource`].
    Managed = 2,
    /// [`PinnedHostMemoryResource`].
    PinnedHost = 3,
    /// [`SystemMemoryResource`].
    System = 4,
    /// [`SamHeadroomMemoryResource`].
    SamHeadroom = 5,
    /// [`CudaAsyncMemoryResource`].
    CudaAsync = 6,
    /// [`CudaAsyncViewMemoryResource`].
    CudaAsyncView = 7,
    /// [`CudaAsyncManagedMemoryResource`].
    CudaAsyncManaged = 8,
    /// [`PoolMemoryResource`].
    Pool = 9,
    /// [`FixedSizeMemoryResource`].
    FixedSize = 10,
    /// [`BinningMemoryResource`].
    Binning = 11,
    /// [`ArenaMemoryResource`].
    Arena = 12,
    /// [`CallbackMemoryResource`].
    Callback = 13,
    /// [`SimulatedMemoryResource`].
    Simulated = 14,
    /// [`AlignedResourceAdaptor`].
    Aligned = 15,
    /// [`LimitingResourceAdaptor`].
    Limiting = 16,
    /// [`LoggingResourceAdaptor`].
    Logging = 17,
    /// [`StatisticsResourceAdaptor`].
    Statistics = 18,
    /// [`TrackingResourceAdaptor`].
    Tracking = 19,
    /// [`ThreadSafeResourceAdaptor`].
    ThreadSafe = 20,
    /// [`PrefetchResourceAdaptor`].
    Prefetch = 21,
    /// [`FailureCallbackResourceAdaptor`].
    FailureCallback = 22,
    /// [`experimental::ExpandablePoolMemoryResource`].
    ExpandablePool = 23,
}

/// Every kind, in code order.
const ALL: [ResourceKind; 24] = [
    ResourceKind::Other,
    ResourceKind::Cuda,
    ResourceKind::Managed,
    ResourceKind::PinnedHost,
    ResourceKind::System,
    ResourceKind::SamHeadroom,
    ResourceKind::CudaAsync,
    ResourceKind::CudaAsyncView,
    ResourceKind::CudaAsyncManaged,
    ResourceKind::Pool,
    ResourceKind::FixedSize,
    ResourceKind::Binning,
    ResourceKind::Arena,
    ResourceKind::Callback,
    ResourceKind::Simulated,
    ResourceKind::Aligned,
    ResourceKind::Limiting,
    ResourceKind::Logging,
    ResourceKind::Statistics,
    ResourceKind::Tracking,
    ResourceKind::ThreadSafe,
    ResourceKind::Prefetch,
    ResourceKind::FailureCallback,
    ResourceKind::ExpandablePool,
];

impl ResourceKind {
    /// The kind of `resource` when it is one of this copy of rmm-core's types ([`ResourceKind::Other`]
    /// for any other type, including a [`ForeignResource`](crate::resource::ForeignResource)).
    pub fn of(resource: &dyn MemoryResource) -> ResourceKind {
        macro_rules! first_of {
            ($($ty:ty => $kind:ident),* $(,)?) => {
                $(if downcast::<$ty>(resource).is_some() {
                    return ResourceKind::$kind;
                })*
            };
        }
        first_of! {
            CudaMemoryResource => Cuda,
            ManagedMemoryResource => Managed,
            PinnedHostMemoryResource => PinnedHost,
            SystemMemoryResource => System,
            SamHeadroomMemoryResource => SamHeadroom,
            CudaAsyncMemoryResource => CudaAsync,
            CudaAsyncViewMemoryResource => CudaAsyncView,
            CudaAsyncManagedMemoryResource => CudaAsyncManaged,
            PoolMemoryResource => Pool,
            FixedSizeMemoryResource => FixedSize,
            BinningMemoryResource => Binning,
            ArenaMemoryResource => Arena,
            CallbackMemoryResource => Callback,
            SimulatedMemoryResource => Simulated,
            AlignedResourceAdaptor => Aligned,
            LimitingResourceAdaptor => Limiting,
            LoggingResourceAdaptor => Logging,
            StatisticsResourceAdaptor => Statistics,
            TrackingResourceAdaptor => Tracking,
            ThreadSafeResourceAdaptor => ThreadSafe,
            PrefetchResourceAdaptor => Prefetch,
            FailureCallbackResourceAdaptor => FailureCallback,
            experimental::ExpandablePoolMemoryResource => ExpandablePool,
        }
        ResourceKind::Other
    }

    /// The C code of this kind.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind of a C code; `None` for a code this version does not know.
    pub fn from_code(code: i32) -> Option<ResourceKind> {
        usize::try_from(code).ok().and_then(|i| ALL.get(i)).copied()
    }
}

/// The upstream of `resource` when it is one of this copy of rmm-core's adaptors or sub-allocators
/// (`None` for the others, and for resources without an upstream).
pub fn upstream_of(resource: &dyn MemoryResource) -> Option<AnyResource> {
    macro_rules! first_of {
        ($($ty:ty => $get:ident),* $(,)?) => {
            $(if let Some(r) = downcast::<$ty>(resource) {
                return Some(r.$get().clone());
            })*
        };
    }
    first_of! {
        PoolMemoryResource => upstream_resource,
        FixedSizeMemoryResource => upstream_resource,
        BinningMemoryResource => upstream_resource,
        ArenaMemoryResource => upstream,
        AlignedResourceAdaptor => upstream,
        LimitingResourceAdaptor => upstream,
        LoggingResourceAdaptor => upstream,
        StatisticsResourceAdaptor => upstream,
        TrackingResourceAdaptor => upstream,
        ThreadSafeResourceAdaptor => upstream,
        PrefetchResourceAdaptor => upstream,
        FailureCallbackResourceAdaptor => upstream,
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for (i, kind) in ALL.iter().enumerate() {
            assert_eq!(kind.code(), i as i32);
            assert_eq!(ResourceKind::from_code(kind.code()), Some(*kind));
        }
        assert_eq!(ResourceKind::from_code(-1), None);
        assert_eq!(ResourceKind::from_code(ALL.len() as i32), None);
    }

    #[test]
    fn kinds_and_upstreams_of_local_resources() {
        let system = AnyResource::new(SystemMemoryResource::new());
        assert_eq!(ResourceKind::of(&system), ResourceKind::System);
        assert!(upstream_of(&system).is_none());
        let stats = AnyResource::new(StatisticsResourceAdaptor::new(system.clone()));
        assert_eq!(ResourceKind::of(&stats), ResourceKind::Statistics);
        assert!(upstream_of(&stats).unwrap().ptr_eq(&system));
        let tracking = TrackingResourceAdaptor::new(stats.clone(), false);
        assert_eq!(ResourceKind::of(&tracking), ResourceKind::Tracking);
        assert!(upstream_of(&tracking).unwrap().ptr_eq(&stats));
        assert_eq!(
            ResourceKind::of(&crate::testing::Probe::new(crate::Access::HOST)),
            ResourceKind::Other
        );
    }
}
