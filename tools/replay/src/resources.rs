//! What to replay on: the table of resources and the device under them.
//!
//! Every resource is one [`ResourceEntry`] in [`RESOURCES`]; the command line, the help text and
//! the errors are all made from that table. There are three kinds of entries ([`Make`]):
//!
//! - a *base* resource is device memory itself (`cuda`, `managed`, `cuda_async`, `system`); it runs
//!   on the real GPU (or host memory, for `system`) and is counted directly;
//! - `simulated` is a simulated device of `--simulate-gib` GiB: no CUDA is called at all;
//! - a *sub-allocator* (`pool`, `arena`, `binning`) is stacked on an [`Upstream`]: the GPU's
//!   `cuda` resource, or the simulated device with `--simulate-gib`. The upstream is counted, so
//!   the report shows what the sub-allocator really took from it;
//! - a resource *on a virtual range* (`expandable_pool`) maps granules of the device itself: the
//!   GPU's (CUDA's virtual memory management), or with `--simulate-gib` a simulated device that
//!   only counts granules. Its reserved bytes are the bytes it has mapped.
//!
//! Adding a sub-allocator is one line: an entry whose `make` is `Make::OnUpstream` (or replace a `Make::Unavailable` with
//! `Make::OnUpstream(|up| Ok(AnyResource::new(PoolMemoryResource::new(up.resource, ..)?)))`.

use rmm_core::cuda::{self, device};
use rmm_core::mr::experimental::{
    Backend, ExpandablePoolMemoryResource, ExpandablePoolOptions, HostBackend,
};
use rmm_core::mr::{
    ArenaMemoryResource, BinningMemoryResource, CudaAsyncMemoryResource, CudaMemoryResource,
    ManagedMemoryResource, PoolMemoryResource, SimulatedMemoryResource, SystemMemoryResource,
};
use rmm_core::AnyResource;

use crate::counting::CountingResource;

/// The memory a sub-allocator is stacked on.
pub struct Upstream {
    /// The (counted) upstream resource: give it to the sub-allocator.
    pub resource: AnyResource,
    /// Bytes the device has for it: the simulated capacity, or the GPU's free memory at start.
    pub capacity: usize,
}

/// How an entry makes its resource.
#[derive(Clone, Copy)]
pub enum Make {
    /// A base resource, made on its own. `needs_gpu` resources refuse to start without one.
    Base {
        /// Makes the resource.
        make: fn() -> rmm_core::Result<AnyResource>,
        /// True when the resource cannot work without a CUDA GPU.
        needs_gpu: bool,
    },
    /// The simulated device itself (needs `--simulate-gib`).
    Simulated,
    /// A sub-allocator stacked on an upstream.
    OnUpstream(fn(Upstream) -> rmm_core::Result<AnyResource>),
    /// A resource that maps granules of the device itself ([`Backend::Device`], or
    /// [`Backend::Simulated`] with `--simulate-gib`).
    OnRange(fn(Backend) -> rmm_core::Result<ExpandablePoolMemoryResource>),
    /// Known (RMM's replay offers it) but not built into this binary yet.
    Unavailable,
}

/// One resource the replay can run on.
#[derive(Clone, Copy)]
pub struct ResourceEntry {
    /// Its `--resource` name (RMM's replay names where they exist).
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// How to make it.
    pub make: Make,
}

fn cuda() -> rmm_core::Result<AnyResource> {
    Ok(AnyResource::new(CudaMemoryResource::new()))
}

fn managed() -> rmm_core::Result<AnyResource> {
    Ok(AnyResource::new(ManagedMemoryResource::new()))
}

fn cuda_async() -> rmm_core::Result<AnyResource> {
    Ok(AnyResource::new(CudaAsyncMemoryResource::new()?))
}

fn system() -> rmm_core::Result<AnyResource> {
    Ok(AnyResource::new(SystemMemoryResource::new()))
}

/// Half of the device (real or simulated), a multiple of 256: RMM's default pool and arena size.
fn half_of(up: &Upstream) -> usize {
    rmm_core::aligned::align_down(up.capacity / 2, rmm_core::DEFAULT_ALIGNMENT)
}

fn pool(up: Upstream) -> rmm_core::Result<AnyResource> {
    let initial = half_of(&up);
    Ok(AnyResource::new(PoolMemoryResource::new(
        up.resource,
        Some(initial),
        None,
    )?))
}

fn pool_on_demand(up: Upstream) -> rmm_core::Result<AnyResource> {
    Ok(AnyResource::new(PoolMemoryResource::new(
        up.resource,
        Some(0),
        None,
    )?))
}

fn arena(up: Upstream) -> rmm_core::Result<AnyResource> {
    let size = half_of(&up);
    Ok(AnyResource::new(ArenaMemoryResource::new(
        up.resource,
        Some(size),
        false,
    )?))
}

fn binning(up: Upstream) -> rmm_core::Result<AnyResource> {
    let pool = pool(up)?;
    Ok(AnyResource::new(BinningMemoryResource::with_exponents(
        pool, 18, 22,
    )?))
}

/// The granule of the simulated device's virtual memory: the driver's recommended granularity on
/// current GPUs.
const SIMULATED_GRANULE: usize = 2 << 20;

fn expandable_pool(backend: Backend) -> rmm_core::Result<ExpandablePoolMemoryResource> {
    ExpandablePoolMemoryResource::new(ExpandablePoolOptions::default().backend(backend))
}

/// Every resource, in `--help` order.
pub const RESOURCES: &[ResourceEntry] = &[
    ResourceEntry { name: "cuda", about: "cudaMalloc/cudaFree on the GPU", make: Make::Base { make: cuda, needs_gpu: true } },
    ResourceEntry { name: "managed", about: "managed (unified) memory", make: Make::Base { make: managed, needs_gpu: true } },
    ResourceEntry {
        name: "cuda_async",
        about: "the driver's stream-ordered pool (cudaMallocAsync); reserved = the pool's reserved memory",
        make: Make::Base { make: cuda_async, needs_gpu: true },
    },
    ResourceEntry { name: "system", about: "malloc/free host memory (works without a GPU)", make: Make::Base { make: system, needs_gpu: false } },
    ResourceEntry { name: "simulated", about: "a simulated device of --simulate-gib GiB; no CUDA calls", make: Make::Simulated },
    ResourceEntry { name: "pool", about: "coalescing pool starting at half the device (sub-allocator)", make: Make::OnUpstream(pool) },
    ResourceEntry {
        name: "pool_on_demand",
        about: "the coalescing pool starting empty, growing by what it needs (sub-allocator)",
        make: Make::OnUpstream(pool_on_demand),
    },
    ResourceEntry { name: "arena", about: "arena of half the device (sub-allocator)", make: Make::OnUpstream(arena) },
    ResourceEntry {
        name: "binning",
        about: "bins of 256 KiB..4 MiB over a pool, as RMM's benchmark (sub-allocator)",
        make: Make::OnUpstream(binning),
    },
    ResourceEntry {
        name: "expandable_pool",
        about: "experimental pool on one virtual range that grows in place; reserved = mapped granules",
        make: Make::OnRange(expandable_pool),
    },
];

/// The resource used when `--resource` is not given and `--simulate-gib` is.
pub const DEFAULT_SIMULATED: &str = "simulated";
/// The resource used when neither `--resource` nor `--simulate-gib` is given.
pub const DEFAULT_GPU: &str = "cuda";

/// The entry called `name`.
pub fn lookup(name: &str) -> Option<&'static ResourceEntry> {
    RESOURCES.iter().find(|e| e.name == name)
}

/// The names of the entries this build can run.
pub fn available() -> Vec<&'static str> {
    RESOURCES
        .iter()
        .filter(|e| !matches!(e.make, Make::Unavailable))
        .map(|e| e.name)
        .collect()
}

/// What the replay runs on.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// A CUDA GPU: logged streams become real streams.
    Gpu {
        /// The device ordinal.
        device: i32,
        /// Its name.
        name: String,
        /// Its memory in bytes.
        total: usize,
    },
    /// A simulated device of `capacity` bytes: no CUDA is called, streams stay opaque handles.
    Simulated {
        /// Its size in bytes.
        capacity: usize,
    },
    /// Host memory, no GPU: every stream is the default stream.
    Host,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Gpu {
                device,
                name,
                total,
            } => write!(
                f,
                "GPU {device}, {name}, {}",
                crate::report::human_bytes(*total)
            ),
            Target::Simulated { capacity } => {
                write!(
                    f,
                    "a simulated device of {}, no CUDA calls",
                    crate::report::human_bytes(*capacity)
                )
            }
            Target::Host => f.write_str("host memory (no GPU)"),
        }
    }
}

/// Why the resource could not be set up. The replay does not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No such entry.
    #[error("unknown resource `{0}`; known: {known}", known = RESOURCES.iter().map(|e| e.name).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    /// In the table but not in this build.
    #[error("resource `{0}` is not available in this build; available: {available}", available = available().join(", "))]
    Unavailable(&'static str),
    /// `simulated` without a size.
    #[error("resource `simulated` needs the device's size: add --simulate-gib N")]
    NeedsSize,
    /// A real-GPU resource with `--simulate-gib`.
    #[error(
        "resource `{0}` uses real device memory and cannot run on a simulated device; with --simulate-gib choose \
         `simulated` or a sub-allocator, or drop --simulate-gib"
    )]
    NotSimulable(&'static str),
    /// A GPU resource on a machine without one.
    #[error("resource `{resource}` needs a CUDA GPU and none is usable here ({why}); replay on a simulated device instead: --simulate-gib N")]
    NoGpu {
        /// The resource asked for.
        resource: &'static str,
        /// What the driver said.
        why: String,
    },
    /// Making the resource failed.
    #[error("cannot make resource `{resource}`: {source}")]
    Resource {
        /// The resource asked for.
        resource: &'static str,
        /// The core's error.
        #[source]
        source: rmm_core::Error,
    },
}

/// A resource ready to replay on.
pub struct Setup {
    /// Its entry's name.
    pub name: &'static str,
    /// The resource the events go to.
    pub resource: AnyResource,
    /// The counter around the base memory: what the resource took from the device.
    pub counter: CountingResource,
    /// Where it runs.
    pub target: Target,
    /// For resources that reserve memory the counter cannot see (`cuda_async`'s driver pool), how
    /// much they reserve right now.
    pub reserved_probe: Option<Box<dyn Fn() -> Option<usize> + Send + Sync>>,
}

impl Setup {
    /// Bytes the resource holds from the device right now.
    pub fn reserved_bytes(&self) -> usize {
        self.reserved_probe
            .as_ref()
            .and_then(|probe| probe())
            .unwrap_or_else(|| self.counter.current_bytes())
    }
}

/// Makes resource `name` (or the default: [`DEFAULT_SIMULATED`] with a simulated device,
/// [`DEFAULT_GPU`] without) on a simulated device of `simulate_bytes` bytes, or on the GPU.
///
/// With a simulated device, no CUDA function is called, not even to look for a GPU.
///
/// ```
/// use rmm_replay::resources::{setup, Target};
/// let s = setup(None, Some(1 << 30))?;
/// assert_eq!((s.name, s.target.clone()), ("simulated", Target::Simulated { capacity: 1 << 30 }));
/// # Ok::<(), rmm_replay::resources::SetupError>(())
/// ```
///
/// # Errors
/// A [`SetupError`] saying why and what to do instead.
pub fn setup(name: Option<&str>, simulate_bytes: Option<usize>) -> Result<Setup, SetupError> {
    let name = name.unwrap_or(if simulate_bytes.is_some() {
        DEFAULT_SIMULATED
    } else {
        DEFAULT_GPU
    });
    let entry = lookup(name).ok_or_else(|| SetupError::Unknown(name.to_string()))?;
    let resource = entry.name;
    let made = |r: rmm_core::Result<AnyResource>| {
        r.map_err(|source| SetupError::Resource { resource, source })
    };
    match (entry.make, simulate_bytes) {
        (Make::Unavailable, _) => Err(SetupError::Unavailable(resource)),
        (Make::Simulated, None) => Err(SetupError::NeedsSize),
        (Make::Base { .. }, Some(_)) => Err(SetupError::NotSimulable(resource)),
        (Make::Simulated, Some(bytes)) => {
            let (counter, capacity) = simulated_device(bytes)
                .map_err(|source| SetupError::Resource { resource, source })?;
            let resource = AnyResource::new(counter.clone());
            Ok(Setup {
                name: entry.name,
                resource,
                counter,
                target: Target::Simulated { capacity },
                reserved_probe: None,
            })
        }
        (Make::OnUpstream(make), Some(bytes)) => {
            let (counter, capacity) = simulated_device(bytes)
                .map_err(|source| SetupError::Resource { resource, source })?;
            let resource = made(make(Upstream {
                resource: AnyResource::new(counter.clone()),
                capacity,
            }))?;
            Ok(Setup {
                name: entry.name,
                resource,
                counter,
                target: Target::Simulated { capacity },
                reserved_probe: None,
            })
        }
        (Make::OnUpstream(make), None) => {
            let target = gpu(resource)?;
            let counter = CountingResource::new(made(cuda())?);
            let capacity = device::mem_info(
                device::current_device()
                    .map_err(|source| SetupError::Resource { resource, source })?,
            )
            .map_err(|source| SetupError::Resource { resource, source })?
            .0;
            let resource = made(make(Upstream {
                resource: AnyResource::new(counter.clone()),
                capacity,
            }))?;
            Ok(Setup {
                name: entry.name,
                resource,
                counter,
                target,
                reserved_probe: None,
            })
        }
        (Make::OnRange(make), simulated) => {
            let (backend, target) = match simulated {
                Some(bytes) => {
                    let host = HostBackend {
                        capacity: Some(bytes),
                        granularity: SIMULATED_GRANULE,
                    };
                    (
                        Backend::Simulated(host),
                        Target::Simulated { capacity: bytes },
                    )
                }
                None => {
                    let target = gpu(resource)?;
                    let device = device::current_device()
                        .map_err(|source| SetupError::Resource { resource, source })?;
                    (Backend::Device(device), target)
                }
            };
            let pool = made(make(backend).map(AnyResource::new))?;
            let mapped = rmm_core::downcast::<ExpandablePoolMemoryResource>(&pool)
                .expect("OnRange makes an expandable pool")
                .clone();
            // The counter sees what is handed out; the device's share is what the pool has mapped.
            let counter = CountingResource::new(pool);
            let reserved_probe: Box<dyn Fn() -> Option<usize> + Send + Sync> =
                Box::new(move || Some(mapped.mapped_bytes()));
            Ok(Setup {
                name: entry.name,
                resource: AnyResource::new(counter.clone()),
                counter,
                target,
                reserved_probe: Some(reserved_probe),
            })
        }
        (Make::Base { make, needs_gpu }, None) => {
            let target = if needs_gpu {
                gpu(resource)?
            } else {
                gpu(resource).unwrap_or(Target::Host)
            };
            let counter = CountingResource::new(made(make())?);
            let reserved_probe = async_pool_probe(&counter);
            let resource = AnyResource::new(counter.clone());
            Ok(Setup {
                name: entry.name,
                resource,
                counter,
                target,
                reserved_probe,
            })
        }
    }
}

fn simulated_device(bytes: usize) -> rmm_core::Result<(CountingResource, usize)> {
    let device = SimulatedMemoryResource::new(bytes)?;
    let capacity = device.capacity();
    Ok((CountingResource::new(AnyResource::new(device)), capacity))
}

fn gpu(resource: &'static str) -> Result<Target, SetupError> {
    let no_gpu = |why: String| SetupError::NoGpu { resource, why };
    cuda::driver().map_err(|e| no_gpu(e.to_string()))?;
    if !cuda::is_available() {
        return Err(no_gpu("the driver reports no device".into()));
    }
    let device = device::current_device().map_err(|e| no_gpu(e.to_string()))?;
    let name = device::name(device).unwrap_or_else(|_| "unknown".into());
    let total = device::mem_info(device)
        .map(|(_, total)| total)
        .unwrap_or(0);
    Ok(Target::Gpu {
        device,
        name,
        total,
    })
}

fn async_pool_probe(
    counter: &CountingResource,
) -> Option<Box<dyn Fn() -> Option<usize> + Send + Sync>> {
    let pool = rmm_core::downcast::<CudaAsyncMemoryResource>(counter.upstream())?.clone();
    Some(Box::new(move || {
        pool.reserved_bytes()
            .ok()
            .and_then(|b| usize::try_from(b).ok())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::MemoryResource;

    #[test]
    fn names_are_unique_and_the_missing_sub_allocators_say_so() {
        let mut names: Vec<_> = RESOURCES.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RESOURCES.len());
        for e in RESOURCES
            .iter()
            .filter(|e| matches!(e.make, Make::Unavailable))
        {
            let err = setup(Some(e.name), Some(1 << 30)).err().unwrap();
            assert!(
                err.to_string().contains("not available in this build"),
                "{err}"
            );
        }
        assert!(matches!(
            setup(Some("nope"), None),
            Err(SetupError::Unknown(_))
        ));
    }

    #[test]
    fn simulated_setups_never_need_a_gpu() {
        assert!(matches!(
            setup(Some("simulated"), None),
            Err(SetupError::NeedsSize)
        ));
        for base in ["cuda", "managed", "cuda_async", "system"] {
            assert!(
                matches!(
                    setup(Some(base), Some(1 << 30)),
                    Err(SetupError::NotSimulable(_))
                ),
                "{base}"
            );
        }
        assert!(
            matches!(setup(None, Some(1)), Err(SetupError::Resource { .. })),
            "too small a device"
        );
        let s = setup(Some("simulated"), Some((1 << 20) + 100)).unwrap();
        assert_eq!(s.target, Target::Simulated { capacity: 1 << 20 });
        assert_eq!(s.reserved_bytes(), 0);
    }

    #[test]
    fn the_expandable_pool_on_a_simulated_device_reports_its_mapped_granules() {
        let s = setup(Some("expandable_pool"), Some(1 << 30)).unwrap();
        assert_eq!(s.target, Target::Simulated { capacity: 1 << 30 });
        let p = s
            .resource
            .allocate(rmm_core::cuda::Stream::DEFAULT, 3 << 20, 256)
            .unwrap();
        assert_eq!(
            s.reserved_bytes(),
            2 * SIMULATED_GRANULE,
            "two whole granules are mapped"
        );
        assert_eq!(
            s.counter.current_bytes(),
            3 << 20,
            "the counter sees what is handed out"
        );
        // SAFETY: `p` came from this resource with these arguments.
        unsafe {
            s.resource
                .deallocate(rmm_core::cuda::Stream::DEFAULT, p, 3 << 20, 256)
                .unwrap()
        };
    }

    #[test]
    fn gpu_resources_without_a_gpu_point_to_the_simulator() {
        if cuda::is_available() {
            return;
        }
        let err = setup(None, None).err().unwrap();
        assert!(matches!(
            err,
            SetupError::NoGpu {
                resource: "cuda",
                ..
            }
        ));
        assert!(err.to_string().contains("--simulate-gib"), "{err}");
        let s = setup(Some("system"), None).unwrap();
        assert_eq!(s.target, Target::Host);
    }
}
