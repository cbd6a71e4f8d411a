//! Builders: a pool (or arena) and a stack of adaptors over an upstream, in the order they are
//! written, ending in one [`AnyResource`].

use rmm_core::mr::{
    AlignedResourceAdaptor, ArenaMemoryResource, FreeChecks, LimitingResourceAdaptor,
    PoolMemoryResource, PrefetchResourceAdaptor, StatisticsResourceAdaptor,
    ThreadSafeResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::{AnyResource, MemoryResource, Result};

/// A [`PoolMemoryResource`] with its options set by name (RMM's `pool_memory_resource(upstream,
/// initial_pool_size, maximum_pool_size)`).
///
/// ```
/// use rmm::{mr::SystemMemoryResource, PoolBuilder};
/// let pool = PoolBuilder::new(SystemMemoryResource::new())
///     .initial_size(1 << 20)
///     .maximum_size(16 << 20)
///     .build()?;
/// assert_eq!(pool.pool_size(), 1 << 20);
/// # Ok::<(), rmm::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build()"]
pub struct PoolBuilder {
    upstream: AnyResource,
    initial: Option<usize>,
    maximum: Option<usize>,
    checks: FreeChecks,
}

impl PoolBuilder {
    /// A pool over `upstream`, by default sized as RMM's Python default (half the free device
    /// memory; on demand in host mode), unbounded, with checked frees.
    pub fn new(upstream: impl MemoryResource) -> Self {
        Self {
            upstream: AnyResource::new(upstream),
            initial: None,
            maximum: None,
            checks: FreeChecks::Checked,
        }
    }

    /// A pool over an upstream that is already an [`AnyResource`] (shared, not wrapped again).
    pub fn over(upstream: AnyResource) -> Self {
        Self {
            upstream,
            initial: None,
            maximum: None,
            checks: FreeChecks::Checked,
        }
    }

    /// Bytes taken from the upstream at once (a multiple of 256).
    pub fn initial_size(mut self, bytes: usize) -> Self {
        self.initial = Some(bytes);
        self
    }

    /// The most the pool may hold (a multiple of 256).
    pub fn maximum_size(mut self, bytes: usize) -> Self {
        self.maximum = Some(bytes);
        self
    }

    /// Whether a free that matches no live allocation is refused ([`FreeChecks::Checked`], the
    /// default) or trusted as in RMM ([`FreeChecks::Unchecked`]).
    pub fn free_checks(mut self, checks: FreeChecks) -> Self {
        self.checks = checks;
        self
    }

    /// The pool.
    ///
    /// # Errors
    /// [`rmm_core::Error::InvalidArgument`] for a size that is not a multiple of 256 or an initial
    /// size above the maximum; the upstream's error when the initial allocation fails.
    pub fn build(self) -> Result<PoolMemoryResource> {
        PoolMemoryResource::with_free_checks(self.upstream, self.initial, self.maximum, self.checks)
    }
}

/// A resource built up from a base, each call wrapping what is there so far (RMM's adaptor stacks,
/// written outside in: the last call is the outermost adaptor).
///
/// ```
/// use rmm::prelude::*;
/// use rmm::{mr::{StatisticsResourceAdaptor, SystemMemoryResource}, ResourceStack};
/// let mr = ResourceStack::new(SystemMemoryResource::new())
///     .pool(Some(1 << 20), None)?
///     .limit(8 << 20)
///     .statistics()
///     .build();
/// let buf = DeviceBuffer::new(1000, Stream::DEFAULT, mr.clone())?;
/// let stats = mr.downcast_ref::<StatisticsResourceAdaptor>().unwrap();
/// assert_eq!(stats.bytes_counter().value, 1000);
/// drop(buf);
/// assert_eq!(stats.bytes_counter().value, 0);
/// # Ok::<(), rmm::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build()"]
pub struct ResourceStack {
    top: AnyResource,
}

impl ResourceStack {
    /// A stack whose base is `base`.
    pub fn new(base: impl MemoryResource) -> Self {
        Self {
            top: AnyResource::new(base),
        }
    }

    /// A stack over a resource that is already shared (the registry's current one, say).
    pub fn over(base: AnyResource) -> Self {
        Self { top: base }
    }

    /// A pool over the stack ([`PoolBuilder`] for more options).
    ///
    /// # Errors
    /// As [`PoolBuilder::build`].
    pub fn pool(self, initial_size: Option<usize>, maximum_size: Option<usize>) -> Result<Self> {
        let pool = PoolMemoryResource::new(self.top, initial_size, maximum_size)?;
        Ok(Self {
            top: AnyResource::new(pool),
        })
    }

    /// An arena over the stack (`size`: `None` for RMM's default).
    ///
    /// # Errors
    /// The arena's error (a size it cannot take, the upstream's failure).
    pub fn arena(self, size: Option<usize>) -> Result<Self> {
        let arena = ArenaMemoryResource::new(self.top, size, false)?;
        Ok(Self {
            top: AnyResource::new(arena),
        })
    }

    /// Counts bytes and allocations ([`StatisticsResourceAdaptor`]).
    pub fn statistics(self) -> Self {
        Self {
            top: AnyResource::new(StatisticsResourceAdaptor::new(self.top)),
        }
    }

    /// Records every live allocation ([`TrackingResourceAdaptor`]), with stacks if asked.
    pub fn tracking(self, capture_stacks: bool) -> Self {
        Self {
            top: AnyResource::new(TrackingResourceAdaptor::new(self.top, capture_stacks)),
        }
    }

    /// Refuses allocations beyond `bytes` in total ([`LimitingResourceAdaptor`]).
    pub fn limit(self, bytes: usize) -> Self {
        Self {
            top: AnyResource::new(LimitingResourceAdaptor::new(self.top, bytes)),
        }
    }

    /// Aligns every allocation to `alignment` ([`AlignedResourceAdaptor`]).
    ///
    /// # Errors
    /// [`rmm_core::Error::InvalidArgument`] when `alignment` is not a power of two.
    pub fn aligned(self, alignment: usize) -> Result<Self> {
        Ok(Self {
            top: AnyResource::new(AlignedResourceAdaptor::new(self.top, alignment)?),
        })
    }

    /// Prefetches managed memory to the device on allocation ([`PrefetchResourceAdaptor`]).
    pub fn prefetch(self) -> Self {
        Self {
            top: AnyResource::new(PrefetchResourceAdaptor::new(self.top)),
        }
    }

    /// Serialises every call with a lock ([`ThreadSafeResourceAdaptor`]).
    pub fn thread_safe(self) -> Self {
        Self {
            top: AnyResource::new(ThreadSafeResourceAdaptor::new(self.top)),
        }
    }

    /// The outermost resource.
    pub fn build(self) -> AnyResource {
        self.top
    }
}
