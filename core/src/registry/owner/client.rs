//! The owner client: what a resource is, its upstream, and the state of the types a binding shows
//! (statistics counters, pool size), for a Rust binary with its own copy of rmm-core that routes to
//! a loaded librmm. A resource of this copy is answered here; one the owner made (a
//! [`ForeignResource`] whose handle carries the owner's tag) by the owner's exported functions.

use std::ffi::{c_int, CStr};

use super::counter::rmm_counter;
use super::OwnerTable;
use crate::error::{Error, Result};
use crate::mr::kind::{upstream_of, ResourceKind};
use crate::mr::statistics::Counter;
use crate::mr::{PoolMemoryResource, StatisticsResourceAdaptor};
use crate::resource::handle::rmm_resource;
use crate::resource::status::{error_from_c, rmm_error, RMM_OK};
use crate::resource::{AnyResource, ForeignResource, MemoryResource};

/// `int rmm_resource_kind(rmm_resource, int*, rmm_resource*, rmm_error*)`.
type KindFn =
    unsafe extern "C" fn(rmm_resource, *mut c_int, *mut rmm_resource, *mut rmm_error) -> c_int;
/// `int (rmm_resource, rmm_counter*, rmm_error*)`: a statistics counter getter.
type CounterFn = unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_error) -> c_int;
/// `int (rmm_resource, rmm_counter*, rmm_counter*, rmm_error*)`: push or pop of the counters.
type CounterPairFn =
    unsafe extern "C" fn(rmm_resource, *mut rmm_counter, *mut rmm_counter, *mut rmm_error) -> c_int;
/// `int (rmm_resource, uint64_t*, rmm_error*)`: a size getter.
type SizeFn = unsafe extern "C" fn(rmm_resource, *mut u64, *mut rmm_error) -> c_int;

/// The loaded owner's table and the handle of `resource`, when the owner made it.
fn owned_by_loaded_owner(resource: &AnyResource) -> Option<(&'static OwnerTable, rmm_resource)> {
    let foreign = resource.downcast_ref::<ForeignResource>()?;
    let table = crate::registry::owner_table()?;
    let handle = foreign.handle();
    // SAFETY: a ForeignResource holds a checked, live handle, whose vtable is readable.
    (unsafe { (*handle.vtable).owner } == table.owner).then_some((table, handle))
}

/// Calls the owner's accessor `name` on `handle` through `call`, turning its status into a result.
///
/// # Safety
/// `F` is the type `rmm_c.h` declares for `name`.
unsafe fn ask<F: Copy>(
    table: &OwnerTable,
    name: &'static CStr,
    call: impl FnOnce(F, *mut rmm_error) -> c_int,
) -> Result<()> {
    let what = name.to_str().unwrap_or("rmm_?");
    // SAFETY: caller contract.
    let f: F = unsafe { table.symbol(name) }.ok_or_else(|| {
        Error::Unsupported(format!(
            "{what}: this resource belongs to librmm, but librmm does not export {what}"
        ))
    })?;
    let mut err = rmm_error::new();
    let status = call(f, &mut err);
    if status == RMM_OK {
        Ok(())
    } else {
        Err(error_from_c(status, &err, "librmm", what))
    }
}

/// What `resource` is: for a resource of this copy of rmm-core, its type; for one the loaded owner
/// (librmm) made, the owner's answer (`rmm_resource_kind`). `None` for any other foreign resource
/// (C, C++ or another binary), and for an owner that cannot answer (an older librmm).
pub fn resource_kind(resource: &AnyResource) -> Option<ResourceKind> {
    kind_and_upstream(resource).map(|(kind, _)| kind)
}

/// The upstream of an adaptor or sub-allocator, asked the same way as [`resource_kind`]; `None`
/// when it has none or nobody can tell.
pub fn resource_upstream(resource: &AnyResource) -> Option<AnyResource> {
    kind_and_upstream(resource).and_then(|(_, upstream)| upstream)
}

fn kind_and_upstream(resource: &AnyResource) -> Option<(ResourceKind, Option<AnyResource>)> {
    let Some((table, handle)) = owned_by_loaded_owner(resource) else {
        if resource.downcast_ref::<ForeignResource>().is_some() {
            return None;
        }
        return Some((ResourceKind::of(resource), upstream_of(resource)));
    };
    let (mut code, mut upstream) = (0 as c_int, rmm_resource::NULL);
    // SAFETY: the declared type of rmm_resource_kind; a live borrowed handle; valid out-pointers.
    unsafe {
        ask::<KindFn>(table, c"rmm_resource_kind", |f, err| {
            f(handle, &mut code, &mut upstream, err)
        })
    }
    .ok()?;
    // SAFETY: on success the owner wrote an owning handle or {NULL, NULL} (rmm_c.h).
    let upstream = (!upstream.is_null())
        .then(|| unsafe { AnyResource::try_from_handle(upstream) }.ok())
        .flatten();
    Some((
        ResourceKind::from_code(code).unwrap_or(ResourceKind::Other),
        upstream,
    ))
}

/// A statistics adaptor's counters (bytes, allocations) of the current frame, wherever it was made.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor.
pub fn statistics_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return Ok(stats.counters());
    }
    let (table, handle) = owned_by_loaded_owner(resource)
        .ok_or_else(|| not_a(resource, "statistics_resource_adaptor"))?;
    let counter = |name: &'static CStr| -> Result<Counter> {
        let mut out = rmm_counter::default();
        // SAFETY: the getters are declared `int (rmm_resource, rmm_counter*, rmm_error*)`; a live
        // borrowed handle; valid out-pointers.
        unsafe { ask::<CounterFn>(table, name, |f, err| f(handle, &mut out, err))? };
        Ok(out.into())
    };
    Ok((
        counter(c"rmm_statistics_resource_adaptor_get_bytes_counter")?,
        counter(c"rmm_statistics_resource_adaptor_get_allocations_counter")?,
    ))
}

/// RMM's `push_counters` on a statistics adaptor, wherever it was made: the counters from before
/// the push.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor.
pub fn push_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return Ok(stats.push_counters());
    }
    counter_pair(resource, c"rmm_statistics_resource_adaptor_push_counters")
}

/// RMM's `pop_counters` on a statistics adaptor, wherever it was made: the popped frame.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a statistics adaptor or only one frame is left.
pub fn pop_counters(resource: &AnyResource) -> Result<(Counter, Counter)> {
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        return stats.pop_counters();
    }
    counter_pair(resource, c"rmm_statistics_resource_adaptor_pop_counters")
}

fn counter_pair(resource: &AnyResource, name: &'static CStr) -> Result<(Counter, Counter)> {
    let (table, handle) = owned_by_loaded_owner(resource)
        .ok_or_else(|| not_a(resource, "statistics_resource_adaptor"))?;
    let (mut bytes, mut count) = (rmm_counter::default(), rmm_counter::default());
    // SAFETY: push and pop are declared `int (rmm_resource, rmm_counter*, rmm_counter*, rmm_error*)`;
    // a live borrowed handle; valid out-pointers.
    unsafe { ask::<CounterPairFn>(table, name, |f, err| f(handle, &mut bytes, &mut count, err))? };
    Ok((bytes.into(), count.into()))
}

/// The bytes a pool holds from its upstream, wherever it was made.
///
/// # Errors
/// [`Error::InvalidArgument`] when `resource` is not a pool.
pub fn pool_size(resource: &AnyResource) -> Result<usize> {
    if let Some(pool) = resource.downcast_ref::<PoolMemoryResource>() {
        return Ok(pool.pool_size());
    }
    let (table, handle) =
        owned_by_loaded_owner(resource).ok_or_else(|| not_a(resource, "pool_memory_resource"))?;
    let mut out = 0u64;
    // SAFETY: declared `int (rmm_resource, uint64_t*, rmm_error*)`; a live borrowed handle; a valid
    // out-pointer.
    unsafe {
        ask::<SizeFn>(table, c"rmm_pool_memory_resource_pool_size", |f, err| {
            f(handle, &mut out, err)
        })?
    };
    usize::try_from(out)
        .map_err(|_| Error::invalid(format!("pool size {out} does not fit in size_t")))
}

fn not_a(resource: &AnyResource, what: &str) -> Error {
    Error::invalid(format!(
        "{} is not a {what} (of this binary or of the loaded librmm)",
        resource.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::SystemMemoryResource;

    #[test]
    fn local_resources_are_answered_here() {
        let system = AnyResource::new(SystemMemoryResource::new());
        let stats = AnyResource::new(StatisticsResourceAdaptor::new(system.clone()));
        assert_eq!(resource_kind(&system), Some(ResourceKind::System));
        assert_eq!(resource_kind(&stats), Some(ResourceKind::Statistics));
        assert_eq!(
            resource_upstream(&stats).map(|u| resource_kind(&u)),
            Some(Some(ResourceKind::System))
        );
        assert!(resource_upstream(&system).is_none());
        let (bytes, allocations) = statistics_counters(&stats).unwrap();
        assert_eq!((bytes.value, allocations.value), (0, 0));
        assert_eq!(push_counters(&stats).unwrap().0.value, 0);
        assert!(pop_counters(&stats).is_ok());
        assert!(matches!(
            pop_counters(&stats),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            statistics_counters(&system),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(pool_size(&stats), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn a_foreign_resource_of_no_owner_is_not_recognised() {
        let (handle, _seen) = crate::testing::c_resource::c_resource(RMM_OK);
        // SAFETY: an owning, valid handle of the fake C resource.
        let foreign = unsafe { AnyResource::try_from_handle(handle) }.unwrap();
        assert_eq!(resource_kind(&foreign), None);
        assert!(resource_upstream(&foreign).is_none());
        assert!(matches!(
            statistics_counters(&foreign),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            pool_size(&foreign),
            Err(Error::InvalidArgument(_))
        ));
    }
}
