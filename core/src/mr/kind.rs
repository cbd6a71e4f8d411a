//! What a resource is: [`ResourceKind`], one value per resource and adaptor type of this module.
//!
//! The table at the end of this file is the one list of kinds. It defines the enum, the C code of
//! each kind (`RMM_RESOURCE_KIND_*` in `rmm_c.h`, compared with this list by
//! `bindings-cpp/src/header_check.rs`), its type, RMM's name for it, and whether it is built over an
//! upstream. A new resource or adaptor is one row here.
//!
//! Used where a resource made in another binary must be recognised: librmm answers
//! `rmm_resource_kind` from here, and `registry::owner` asks it (never by comparing names).

use super::experimental::ExpandablePoolMemoryResource;
use super::*;
use crate::resource::{downcast, AnyResource, MemoryResource};

/// Writes [`ResourceKind`] and its tables from one row per kind:
/// `Variant = code: Type, "rmm_name", C_NAME, upstreams;` (`upstreams` is 0 or 1).
macro_rules! resource_kinds {
    ($($kind:ident = $code:literal: $ty:ident, $name:literal, $c_name:ident, $upstreams:literal;)*) => {
        /// The type of a resource, as it crosses the C ABI (`RMM_RESOURCE_KIND_*` in `rmm_c.h`; the
        /// values never change).
        #[repr(i32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ResourceKind {
            /// A resource of a type this list does not name (a user's own resource type).
            Other = 0,
            $(
                #[doc = concat!("[`", stringify!($ty), "`] (`", $name, "`).")]
                $kind = $code,
            )*
        }

        impl ResourceKind {
            /// Every kind, in code order: `ALL[i].code() == i`.
            pub const ALL: &'static [ResourceKind] = &[ResourceKind::Other, $(ResourceKind::$kind),*];

            /// The kind of `resource` when it is one of this copy of rmm-core's types
            /// ([`ResourceKind::Other`] for any other type, including a
            /// [`ForeignResource`](crate::resource::ForeignResource)).
            pub fn of(resource: &dyn MemoryResource) -> ResourceKind {
                $(if downcast::<$ty>(resource).is_some() {
                    return ResourceKind::$kind;
                })*
                ResourceKind::Other
            }

            /// The name of its C constant, e.g. `"RMM_RESOURCE_KIND_POOL"`.
            pub const fn c_name(self) -> &'static str {
                match self {
                    ResourceKind::Other => "RMM_RESOURCE_KIND_OTHER",
                    $(ResourceKind::$kind => stringify!($c_name),)*
                }
            }

            /// The Rust type of this kind (also the Python class's name), e.g.
            /// `"PoolMemoryResource"`; `None` for [`ResourceKind::Other`].
            pub const fn type_name(self) -> Option<&'static str> {
                match self {
                    ResourceKind::Other => None,
                    $(ResourceKind::$kind => Some(stringify!($ty)),)*
                }
            }

            /// RMM's name of this kind (its C++ class, and what [`MemoryResource::name`] returns),
            /// e.g. `"pool_memory_resource"`; `None` for [`ResourceKind::Other`].
            pub const fn rmm_name(self) -> Option<&'static str> {
                match self {
                    ResourceKind::Other => None,
                    $(ResourceKind::$kind => Some($name),)*
                }
            }

            /// True when resources of this kind are built over an upstream, which
            /// [`MemoryResource::upstream`] then returns.
            pub const fn has_upstream(self) -> bool {
                match self {
                    ResourceKind::Other => false,
                    $(ResourceKind::$kind => $upstreams > 0,)*
                }
            }
        }
    };
}

impl ResourceKind {
    /// The C code of this kind.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind of a C code; `None` for a code this version does not know.
    pub fn from_code(code: i32) -> Option<ResourceKind> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i))
            .copied()
    }
}

/// The upstream of `resource` as an owner (`None` for a resource without one): what the resource
/// itself says ([`MemoryResource::upstream`]).
pub fn upstream_of(resource: &dyn MemoryResource) -> Option<AnyResource> {
    resource.upstream().cloned()
}

resource_kinds! {
    Cuda = 1: CudaMemoryResource, "cuda_memory_resource", RMM_RESOURCE_KIND_CUDA, 0;
    Managed = 2: ManagedMemoryResource, "managed_memory_resource", RMM_RESOURCE_KIND_MANAGED, 0;
    PinnedHost = 3: PinnedHostMemoryResource, "pinned_host_memory_resource", RMM_RESOURCE_KIND_PINNED_HOST, 0;
    System = 4: SystemMemoryResource, "system_memory_resource", RMM_RESOURCE_KIND_SYSTEM, 0;
    SamHeadroom = 5: SamHeadroomMemoryResource, "sam_headroom_memory_resource", RMM_RESOURCE_KIND_SAM_HEADROOM, 0;
    CudaAsync = 6: CudaAsyncMemoryResource, "cuda_async_memory_resource", RMM_RESOURCE_KIND_CUDA_ASYNC, 0;
    CudaAsyncView = 7: CudaAsyncViewMemoryResource, "cuda_async_view_memory_resource", RMM_RESOURCE_KIND_CUDA_ASYNC_VIEW, 0;
    CudaAsyncManaged = 8: CudaAsyncManagedMemoryResource, "cuda_async_managed_memory_resource", RMM_RESOURCE_KIND_CUDA_ASYNC_MANAGED, 0;
    Pool = 9: PoolMemoryResource, "pool_memory_resource", RMM_RESOURCE_KIND_POOL, 1;
    FixedSize = 10: FixedSizeMemoryResource, "fixed_size_memory_resource", RMM_RESOURCE_KIND_FIXED_SIZE, 1;
    Binning = 11: BinningMemoryResource, "binning_memory_resource", RMM_RESOURCE_KIND_BINNING, 1;
    Arena = 12: ArenaMemoryResource, "arena_memory_resource", RMM_RESOURCE_KIND_ARENA, 1;
    Callback = 13: CallbackMemoryResource, "callback_memory_resource", RMM_RESOURCE_KIND_CALLBACK, 0;
    Simulated = 14: SimulatedMemoryResource, "simulated_memory_resource", RMM_RESOURCE_KIND_SIMULATED, 0;
    Aligned = 15: AlignedResourceAdaptor, "aligned_resource_adaptor", RMM_RESOURCE_KIND_ALIGNED, 1;
    Limiting = 16: LimitingResourceAdaptor, "limiting_resource_adaptor", RMM_RESOURCE_KIND_LIMITING, 1;
    Logging = 17: LoggingResourceAdaptor, "logging_resource_adaptor", RMM_RESOURCE_KIND_LOGGING, 1;
    Statistics = 18: StatisticsResourceAdaptor, "statistics_resource_adaptor", RMM_RESOURCE_KIND_STATISTICS, 1;
    Tracking = 19: TrackingResourceAdaptor, "tracking_resource_adaptor", RMM_RESOURCE_KIND_TRACKING, 1;
    ThreadSafe = 20: ThreadSafeResourceAdaptor, "thread_safe_resource_adaptor", RMM_RESOURCE_KIND_THREAD_SAFE, 1;
    Prefetch = 21: PrefetchResourceAdaptor, "prefetch_resource_adaptor", RMM_RESOURCE_KIND_PREFETCH, 1;
    FailureCallback = 22: FailureCallbackResourceAdaptor, "failure_callback_resource_adaptor", RMM_RESOURCE_KIND_FAILURE_CALLBACK, 1;
    Recording = 23: RecordingResourceAdaptor, "recording_resource_adaptor", RMM_RESOURCE_KIND_RECORDING, 1;
    ExpandablePool = 24: ExpandablePoolMemoryResource, "expandable_pool_memory_resource", RMM_RESOURCE_KIND_EXPANDABLE_POOL, 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A resource of `kind` over a system resource; `None` for [`ResourceKind::Other`] and where this
    /// machine cannot build one (the CUDA pools and SAM without a GPU). The match has no wildcard arm,
    /// so a new kind does not compile until it says how it is built.
    fn build(kind: ResourceKind) -> Option<AnyResource> {
        let up = || AnyResource::new(SystemMemoryResource::new());
        Some(match kind {
            ResourceKind::Other => return None,
            ResourceKind::Cuda => AnyResource::new(CudaMemoryResource::new()),
            ResourceKind::Managed => AnyResource::new(ManagedMemoryResource::new()),
            ResourceKind::PinnedHost => AnyResource::new(PinnedHostMemoryResource::new()),
            ResourceKind::System => up(),
            ResourceKind::SamHeadroom => AnyResource::new(SamHeadroomMemoryResource::new(0).ok()?),
            ResourceKind::CudaAsync => AnyResource::new(CudaAsyncMemoryResource::new().ok()?),
            ResourceKind::CudaAsyncView => AnyResource::new(CudaAsyncViewMemoryResource::from(
                &CudaAsyncMemoryResource::new().ok()?,
            )),
            ResourceKind::CudaAsyncManaged => {
                AnyResource::new(CudaAsyncManagedMemoryResource::new().ok()?)
            }
            ResourceKind::Pool => {
                AnyResource::new(PoolMemoryResource::new(up(), Some(1 << 20), None).unwrap())
            }
            ResourceKind::FixedSize => {
                AnyResource::new(FixedSizeMemoryResource::new(up(), 1 << 10, 4).unwrap())
            }
            ResourceKind::Binning => AnyResource::new(BinningMemoryResource::new(up())),
            ResourceKind::Arena => {
                AnyResource::new(ArenaMemoryResource::new(up(), Some(1 << 20), false).unwrap())
            }
            ResourceKind::Callback => AnyResource::new(CallbackMemoryResource::with_access(
                Arc::new(|_, _| Ok(std::ptr::null_mut())),
                Arc::new(|_, _, _| Ok(())),
                crate::Access::HOST,
            )),
            ResourceKind::Simulated => {
                AnyResource::new(SimulatedMemoryResource::new(1 << 20).unwrap())
            }
            ResourceKind::Aligned => {
                AnyResource::new(AlignedResourceAdaptor::new(up(), 4096).unwrap())
            }
            ResourceKind::Limiting => AnyResource::new(LimitingResourceAdaptor::new(up(), 1 << 20)),
            ResourceKind::Logging => AnyResource::new(
                LoggingResourceAdaptor::with_writer(up(), std::io::sink()).unwrap(),
            ),
            ResourceKind::Statistics => AnyResource::new(StatisticsResourceAdaptor::new(up())),
            ResourceKind::Tracking => AnyResource::new(TrackingResourceAdaptor::new(up(), false)),
            ResourceKind::ThreadSafe => AnyResource::new(ThreadSafeResourceAdaptor::new(up())),
            ResourceKind::Prefetch => AnyResource::new(PrefetchResourceAdaptor::new(up())),
            ResourceKind::Recording => AnyResource::new(RecordingResourceAdaptor::new(up())),
            ResourceKind::FailureCallback => AnyResource::new(FailureCallbackResourceAdaptor::new(
                up(),
                Arc::new(|_| false),
            )),
            ResourceKind::ExpandablePool => {
                use crate::mr::experimental::{Backend, ExpandablePoolOptions, HostBackend};
                let device = Backend::Host(HostBackend {
                    capacity: Some(8 << 20),
                    granularity: 1 << 20,
                });
                AnyResource::new(
                    ExpandablePoolMemoryResource::new(
                        ExpandablePoolOptions::default().backend(device),
                    )
                    .unwrap(),
                )
            }
        })
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for (i, kind) in ResourceKind::ALL.iter().enumerate() {
            assert_eq!(kind.code(), i as i32);
            assert_eq!(ResourceKind::from_code(kind.code()), Some(*kind));
        }
        assert_eq!(ResourceKind::from_code(-1), None);
        assert_eq!(
            ResourceKind::from_code(ResourceKind::ALL.len() as i32),
            None
        );
    }

    #[test]
    fn every_row_names_its_type_and_upstream_truly() {
        let mut built = 0;
        for &kind in &ResourceKind::ALL[1..] {
            let type_name = kind.type_name().unwrap();
            let c_suffix = kind.c_name().strip_prefix("RMM_RESOURCE_KIND_").unwrap();
            let rmm_name = kind.rmm_name().unwrap();
            assert!(
                rmm_name.replace('_', "").eq_ignore_ascii_case(type_name),
                "{kind:?}: {rmm_name} is not {type_name}"
            );
            assert!(
                rmm_name.starts_with(&c_suffix.to_ascii_lowercase()),
                "{kind:?}: {} does not name {rmm_name}",
                kind.c_name()
            );
            let Some(resource) = build(kind) else {
                continue;
            };
            built += 1;
            assert_eq!(ResourceKind::of(&resource), kind);
            assert_eq!(resource.name(), rmm_name, "{kind:?}");
            match upstream_of(&resource) {
                Some(up) => assert!(kind.has_upstream() && up.name() == "system_memory_resource"),
                None => assert!(!kind.has_upstream(), "{kind:?} has no upstream"),
            }
        }
        // Without a GPU only the CUDA pools and SAM cannot be built.
        assert!(built >= ResourceKind::ALL.len() - 5, "built {built}");
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
        assert_eq!(ResourceKind::Other.type_name(), None);
        assert!(!ResourceKind::Other.has_upstream());
    }
}
