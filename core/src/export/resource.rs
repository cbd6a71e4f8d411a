//! [`rmm_resource_export`]: an owning resource reference as a C struct with its own deleter.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Result};
use crate::resource::{rmm_resource, AnyResource};

/// The version of [`rmm_resource_export`] this library writes and reads.
pub const RMM_RESOURCE_EXPORT_VERSION: u32 = 1;

/// An owning resource reference handed between binaries (`rmm_resource_export` in `rmm_c.h`).
///
/// Importing adds a reference of the consumer's own and leaves the export unchanged, so one export
/// can be imported any number of times; `deleter` gives the export's reference back and frees the
/// struct.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)] // the C name
pub struct rmm_resource_export {
    /// [`RMM_RESOURCE_EXPORT_VERSION`].
    pub version: u32,
    /// OWNING: the export's reference.
    pub resource: rmm_resource,
    /// Releases `resource` and frees the struct; set by the producer.
    pub deleter: Option<unsafe extern "C" fn(*mut rmm_resource_export)>,
}

/// An OWNING export of `mr` made by this binary (no copy: the handle is the resource's `Arc`).
///
/// ```
/// use rmm_core::{AnyResource, mr::SystemMemoryResource};
/// use rmm_core::export::{export_resource, import_resource};
/// let mr = AnyResource::new(SystemMemoryResource::new());
/// let export = export_resource(mr.clone());
/// // SAFETY: a live export; its deleter is called once, after the import.
/// let back = unsafe { import_resource(export)? };
/// assert!(back.ptr_eq(&mr));
/// // SAFETY: as above.
/// unsafe { ((*export).deleter.unwrap())(export) };
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub fn export_resource(mr: AnyResource) -> *mut rmm_resource_export {
    Box::into_raw(Box::new(rmm_resource_export {
        version: RMM_RESOURCE_EXPORT_VERSION,
        resource: mr.into_handle(),
        deleter: Some(delete_resource_export),
    }))
}

/// The deleter of [`export_resource`]'s exports.
unsafe extern "C" fn delete_resource_export(export: *mut rmm_resource_export) {
    if export.is_null() {
        return;
    }
    let released = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by `export_resource` (Box::into_raw), handed to its deleter once.
        let export = unsafe { Box::from_raw(export) };
        if !export.resource.is_null() {
            // SAFETY: the export's own reference.
            drop(unsafe { AnyResource::from_handle(export.resource) });
        }
    }));
    if released.is_err() {
        tracing::error!(
            "rmm_resource_export deleter panicked; a resource reference may have leaked"
        );
    }
}

/// A new owner of the export's resource (one more reference; the export is unchanged).
///
/// # Errors
/// [`Error::InvalidArgument`] for a NULL export, another version, a missing deleter, or an
/// invalid resource handle.
///
/// # Safety
/// `export` is NULL or a live export.
pub unsafe fn import_resource(export: *const rmm_resource_export) -> Result<AnyResource> {
    // SAFETY: caller contract.
    let e = unsafe { export.as_ref() }
        .ok_or_else(|| Error::invalid("the rmm_resource_export must not be NULL"))?;
    if e.version != RMM_RESOURCE_EXPORT_VERSION {
        return Err(Error::invalid(format!(
            "rmm_resource_export version {} is not supported (this library reads version {RMM_RESOURCE_EXPORT_VERSION})",
            e.version
        )));
    }
    if e.deleter.is_none() {
        return Err(Error::invalid("rmm_resource_export has no deleter"));
    }
    if e.resource.is_null() {
        return Err(Error::invalid("rmm_resource_export has no resource"));
    }
    // SAFETY: a live export's resource is live or fails the check.
    unsafe { AnyResource::from_borrowed_handle(e.resource) }
}

/// Gives an export's reference back through its producer's own deleter. NULL, or an export without
/// a deleter, is a no-op.
///
/// # Safety
/// `export` is NULL or a live OWNING export, not used afterwards.
pub unsafe fn free_resource_export(export: *mut rmm_resource_export) {
    // SAFETY: caller contract; the deleter is the producer's and catches its own panics.
    if let Some(deleter) = unsafe { export.as_ref() }.and_then(|e| e.deleter) {
        // SAFETY: as above.
        unsafe { deleter(export) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::testutil::Counting;
    use std::sync::Arc;

    #[test]
    fn imports_share_the_resource_and_the_deleter_releases_the_export() {
        let (counting, mr) = Counting::new();
        let export = export_resource(mr.clone());
        drop(mr);
        // SAFETY: live export.
        let a = unsafe { import_resource(export).unwrap() };
        // SAFETY: live export.
        let b = unsafe { import_resource(export).unwrap() };
        assert!(a.ptr_eq(&b));
        assert_eq!(
            Arc::strong_count(&counting),
            4,
            "ours, the export's and two imports"
        );
        // SAFETY: deleter called once.
        unsafe { ((*export).deleter.unwrap())(export) };
        drop((a, b));
        assert_eq!(Arc::strong_count(&counting), 1);
    }

    #[test]
    fn bad_exports_are_refused() {
        assert!(matches!(
            // SAFETY: NULL is refused.
            unsafe { import_resource(std::ptr::null()) },
            Err(Error::InvalidArgument(_))
        ));
        let (_counting, mr) = Counting::new();
        let export = export_resource(mr);
        // SAFETY: live export, field changed and restored.
        unsafe {
            (*export).version = 9;
            assert!(matches!(
                import_resource(export),
                Err(Error::InvalidArgument(_))
            ));
            (*export).version = RMM_RESOURCE_EXPORT_VERSION;
            let saved = (*export).resource;
            (*export).resource = rmm_resource::NULL;
            assert!(matches!(
                import_resource(export),
                Err(Error::InvalidArgument(_))
            ));
            (*export).resource = saved;
            ((*export).deleter.unwrap())(export);
        }
    }
}
