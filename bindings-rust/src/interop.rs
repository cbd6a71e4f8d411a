//! Buffers and resources handed to C, C++ and Python with no copy, and taken back.
//!
//! A [`BufferExport`] carries a [`DeviceBuffer`]'s memory, stream, device and an owning reference
//! to its resource, with this library's own deleter: C++ adopts it with `rmm_device_buffer_import`
//! (`rmm_c.h`), Python with `rmm.DeviceBuffer._from_capsule` once it is wrapped in a capsule named
//! [`BUFFER_CAPSULE_NAME`]. The memory is freed once, by its last owner, on its stream and device,
//! through the resource that made it. A [`ResourceExport`] shares a resource the same way.
//! The model and one example per direction: docs/cross-language.md.
//!
//! ```
//! use rmm::prelude::*;
//! use rmm::interop::BufferExport;
//! let mr = AnyResource::new(rmm::mr::SystemMemoryResource::new());
//! let buf = DeviceBuffer::from_host(b"to C++ and back", Stream::DEFAULT, mr)?;
//! let ptr = buf.as_ptr();
//! let raw = BufferExport::new(buf).into_raw(); // an owning `rmm_buffer_export*` for C or a capsule
//! // SAFETY: `raw` came from into_raw and is taken back once.
//! let back = unsafe { BufferExport::from_raw(raw) }.unwrap().into_buffer()?;
//! assert_eq!(back.as_ptr(), ptr, "no copy");
//! # Ok::<(), rmm::Error>(())
//! ```

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use rmm_core::export::{self, rmm_buffer_export, rmm_resource_export};
use rmm_core::{AnyResource, DeviceBuffer, Result};

/// The name of a capsule holding an unconsumed buffer export (`RMM_DEVICE_BUFFER_CAPSULE`).
pub const BUFFER_CAPSULE_NAME: &CStr = c"rmm.device_buffer.v1";
/// The name a consumer gives a buffer capsule it adopted (`RMM_USED_DEVICE_BUFFER_CAPSULE`).
pub const USED_BUFFER_CAPSULE_NAME: &CStr = c"used_rmm.device_buffer.v1";
/// The name of a capsule holding a resource export (`RMM_MEMORY_RESOURCE_CAPSULE`).
pub const RESOURCE_CAPSULE_NAME: &CStr = c"rmm.memory_resource.v1";

/// An owning buffer export (`rmm_buffer_export` in `rmm_c.h`); dropping it frees the memory.
#[derive(Debug)]
pub struct BufferExport(NonNull<rmm_buffer_export>);

// SAFETY: the export exclusively owns a DeviceBuffer's parts (Send) and is only touched through
// `self`.
unsafe impl Send for BufferExport {}

impl BufferExport {
    /// Moves `buf` into an export (no copy).
    pub fn new(buf: DeviceBuffer) -> Self {
        Self(NonNull::new(export::export_buffer(buf)).expect("Box::into_raw is never null"))
    }

    /// The owning `rmm_buffer_export*`, for C (`rmm_device_buffer_import`) or a capsule named
    /// [`BUFFER_CAPSULE_NAME`].
    pub fn into_raw(self) -> *mut c_void {
        let ptr = self.0.as_ptr();
        std::mem::forget(self);
        ptr.cast()
    }

    /// Takes ownership of an export made by any binary (`None` for NULL).
    ///
    /// # Safety
    /// `ptr` is NULL or an owning `rmm_buffer_export*` nobody else uses afterwards.
    pub unsafe fn from_raw(ptr: *mut c_void) -> Option<Self> {
        NonNull::new(ptr.cast()).map(Self)
    }

    /// Adopts the memory as a [`DeviceBuffer`] (no copy).
    ///
    /// # Errors
    /// [`rmm_core::Error::InvalidArgument`] when the export's fields do not hold together (another
    /// version, an invalid resource handle, ...); the export is then freed through its deleter.
    pub fn into_buffer(self) -> Result<DeviceBuffer> {
        let ptr = self.0.as_ptr();
        // SAFETY: an owning, live export; on success it is consumed, so `self` must not drop it.
        let adopted = unsafe { export::import_buffer(ptr) };
        if adopted.is_ok() {
            std::mem::forget(self);
        }
        adopted
    }
}

impl Drop for BufferExport {
    fn drop(&mut self) {
        // SAFETY: an owning, live export, given back once.
        unsafe { export::free_buffer_export(self.0.as_ptr()) }
    }
}

/// An owning resource export (`rmm_resource_export` in `rmm_c.h`); dropping it gives its reference
/// back.
#[derive(Debug)]
pub struct ResourceExport(NonNull<rmm_resource_export>);

// SAFETY: it holds one reference to a resource (Send + Sync) and is only touched through `self`.
unsafe impl Send for ResourceExport {}

impl ResourceExport {
    /// An export holding a new reference to `mr` (no copy).
    pub fn new(mr: &AnyResource) -> Self {
        Self(
            NonNull::new(export::export_resource(mr.clone())).expect("Box::into_raw is never null"),
        )
    }

    /// The owning `rmm_resource_export*`, for C (`rmm_resource_import`) or a capsule named
    /// [`RESOURCE_CAPSULE_NAME`].
    pub fn into_raw(self) -> *mut c_void {
        let ptr = self.0.as_ptr();
        std::mem::forget(self);
        ptr.cast()
    }

    /// Takes ownership of an export made by any binary (`None` for NULL).
    ///
    /// # Safety
    /// `ptr` is NULL or an owning `rmm_resource_export*` nobody else uses afterwards.
    pub unsafe fn from_raw(ptr: *mut c_void) -> Option<Self> {
        NonNull::new(ptr.cast()).map(Self)
    }

    /// A new owner of the resource (the export is unchanged). A resource this library made comes
    /// back as the same object; any other calls through its C vtable.
    ///
    /// # Errors
    /// [`rmm_core::Error::InvalidArgument`] for another version or an invalid handle.
    pub fn resource(&self) -> Result<AnyResource> {
        // SAFETY: an owning, live export.
        unsafe { export::import_resource(self.0.as_ptr()) }
    }
}

impl Drop for ResourceExport {
    fn drop(&mut self) {
        // SAFETY: an owning, live export, given back once.
        unsafe { export::free_resource_export(self.0.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::cuda::Stream;
    use rmm_core::mr::{StatisticsResourceAdaptor, SystemMemoryResource};

    fn stats() -> AnyResource {
        AnyResource::new(StatisticsResourceAdaptor::new(SystemMemoryResource::new()))
    }

    fn live_bytes(mr: &AnyResource) -> i64 {
        mr.downcast_ref::<StatisticsResourceAdaptor>()
            .unwrap()
            .bytes_counter()
            .value
    }

    #[test]
    fn a_dropped_export_frees_its_memory_once() {
        let mr = stats();
        let export =
            BufferExport::new(DeviceBuffer::new(300, Stream::DEFAULT, mr.clone()).unwrap());
        assert_eq!(live_bytes(&mr), 300);
        drop(export);
        assert_eq!(live_bytes(&mr), 0);
    }

    #[test]
    fn a_raw_export_comes_back_as_the_same_memory() {
        let mr = stats();
        let buf = DeviceBuffer::from_host(&[9; 64], Stream::DEFAULT, mr.clone()).unwrap();
        let ptr = buf.as_ptr();
        let raw = BufferExport::new(buf).into_raw();
        // SAFETY: from into_raw, once.
        let back = unsafe { BufferExport::from_raw(raw) }
            .unwrap()
            .into_buffer()
            .unwrap();
        assert_eq!((back.as_ptr(), back.to_vec().unwrap()), (ptr, vec![9; 64]));
        assert!(back.memory_resource().ptr_eq(&mr));
        drop(back);
        assert_eq!(live_bytes(&mr), 0);
        // SAFETY: NULL is None.
        assert!(unsafe { BufferExport::from_raw(std::ptr::null_mut()) }.is_none());
    }

    #[test]
    fn resource_exports_share_the_resource() {
        let mr = stats();
        let export = ResourceExport::new(&mr);
        let again = export.resource().unwrap();
        assert!(again.ptr_eq(&mr));
        let raw = export.into_raw();
        // SAFETY: from into_raw, once.
        let export = unsafe { ResourceExport::from_raw(raw) }.unwrap();
        assert!(export.resource().unwrap().ptr_eq(&mr));
        drop(export);
        let _ = DeviceBuffer::new(8, Stream::DEFAULT, again).unwrap();
        assert_eq!(live_bytes(&mr), 0);
    }
}
