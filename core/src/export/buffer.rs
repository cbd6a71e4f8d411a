//! [`rmm_buffer_export`]: an owning device buffer as a C struct with its own deleter.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::aligned::check_alignment;
use crate::buffer::{DeviceBuffer, RawParts};
use crate::cuda::Stream;
use crate::error::{Error, Result};
use crate::resource::foreign::check_handle;
use crate::resource::{rmm_resource, AnyResource, MemoryResource};

/// The version of [`rmm_buffer_export`] this library writes and reads.
pub const RMM_BUFFER_EXPORT_VERSION: u32 = 1;

/// An owning device buffer handed between binaries (`rmm_buffer_export` in `rmm_c.h`).
///
/// The producer fills every field and `deleter`. The consumer either adopts the buffer (reads the
/// fields, sets `data` to NULL, `capacity` to 0 and `resource` to the empty handle, then calls
/// `deleter`, which then frees only the struct) or calls `deleter` as it is, which frees the memory
/// on `stream` and `device` through `resource`, releases the resource and frees the struct.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)] // the C name
pub struct rmm_buffer_export {
    /// [`RMM_BUFFER_EXPORT_VERSION`].
    pub version: u32,
    /// The device the memory was made on and is freed on; -1 for host mode.
    pub device: i32,
    /// The memory (NULL exactly when `capacity` is 0).
    pub data: *mut c_void,
    /// The bytes in use.
    pub size: usize,
    /// The bytes allocated from `resource`, what the free gives back.
    pub capacity: usize,
    /// The alignment the memory was allocated with (a power of two).
    pub alignment: usize,
    /// The stream (`cudaStream_t`) the memory is used and freed on; NULL is the default stream.
    pub stream: *mut c_void,
    /// OWNING: the resource the memory came from.
    pub resource: rmm_resource,
    /// Frees what the struct still owns, and the struct; set by the producer.
    pub deleter: Option<unsafe extern "C" fn(*mut rmm_buffer_export)>,
    /// The producer's own data; consumers leave it alone.
    pub manager_ctx: *mut c_void,
}

/// Turns `buf` into an OWNING export made by this binary (its deleter is this binary's).
///
/// ```
/// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
/// use rmm_core::export::{export_buffer, import_buffer};
/// let buf = DeviceBuffer::from_host(b"moved", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
/// let ptr = buf.as_ptr();
/// let export = export_buffer(buf);
/// // SAFETY: a live export, adopted once.
/// let back = unsafe { import_buffer(export)? };
/// assert_eq!(back.as_ptr(), ptr, "no copy");
/// assert_eq!(back.to_vec()?, b"moved");
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub fn export_buffer(buf: DeviceBuffer) -> *mut rmm_buffer_export {
    let RawParts {
        ptr,
        size,
        capacity,
        alignment,
        stream,
        mr,
        device,
    } = buf.into_raw_parts();
    Box::into_raw(Box::new(rmm_buffer_export {
        version: RMM_BUFFER_EXPORT_VERSION,
        device: device.unwrap_or(-1),
        data: ptr.cast(),
        size,
        capacity,
        alignment,
        stream: stream.as_raw() as *mut c_void,
        resource: mr.into_handle(),
        deleter: Some(delete_buffer_export),
        manager_ctx: std::ptr::null_mut(),
    }))
}

/// The deleter of [`export_buffer`]'s exports: frees the memory (if still owned) through the
/// resource, on its stream and device, releases the resource and frees the struct.
unsafe extern "C" fn delete_buffer_export(export: *mut rmm_buffer_export) {
    if export.is_null() {
        return;
    }
    let freed = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: made by `export_buffer` (Box::into_raw), handed to its deleter once.
        let export = unsafe { Box::from_raw(export) };
        if export.resource.is_null() {
            return;
        }
        // SAFETY: the export's own reference, valid until now.
        let mr = unsafe { AnyResource::from_handle(export.resource) };
        if export.capacity == 0 {
            return;
        }
        // SAFETY: the parts came from a DeviceBuffer (export_buffer) and were not adopted.
        drop(unsafe { DeviceBuffer::from_raw_parts(parts_of(&export, mr)) });
    }));
    if freed.is_err() {
        tracing::error!("rmm_buffer_export deleter panicked; the buffer may have leaked");
    }
}

/// The parts described by `export`, with `mr` as their resource.
fn parts_of(export: &rmm_buffer_export, mr: AnyResource) -> RawParts {
    RawParts {
        ptr: export.data.cast(),
        size: export.size,
        capacity: export.capacity,
        alignment: export.alignment,
        // SAFETY: the producer's stream, usable for the memory (the export's contract).
        stream: unsafe { Stream::from_raw(export.stream as usize) },
        mr,
        device: (export.device >= 0).then_some(export.device),
    }
}

/// Checks the fields of a live export without taking anything.
fn check(export: &rmm_buffer_export) -> Result<()> {
    if export.version != RMM_BUFFER_EXPORT_VERSION {
        return Err(Error::invalid(format!(
            "rmm_buffer_export version {} is not supported (this library reads version {RMM_BUFFER_EXPORT_VERSION})",
            export.version
        )));
    }
    if export.deleter.is_none() {
        return Err(Error::invalid("rmm_buffer_export has no deleter"));
    }
    if export.resource.is_null() {
        return Err(Error::invalid(
            "rmm_buffer_export has no resource (already adopted?)",
        ));
    }
    // SAFETY: a live export's resource is live or fails the check.
    unsafe { check_handle(&export.resource)? };
    check_alignment(export.alignment)?;
    if export.size > export.capacity {
        return Err(Error::invalid(format!(
            "rmm_buffer_export size {} exceeds its capacity {}",
            export.size, export.capacity
        )));
    }
    if export.data.is_null() != (export.capacity == 0) {
        return Err(Error::invalid(
            "rmm_buffer_export: data must be NULL exactly when capacity is 0",
        ));
    }
    if export.device < -1 {
        return Err(Error::invalid(format!(
            "rmm_buffer_export device {} is not a device",
            export.device
        )));
    }
    if export.capacity > 0 {
        // SAFETY: checked above; the reference taken here is released at the end of the block.
        let mr = unsafe { AnyResource::from_borrowed_handle(export.resource)? };
        if mr.is_live_allocation(export.data.cast(), export.capacity, export.alignment)
            == Some(false)
        {
            return Err(Error::invalid(format!(
                "rmm_buffer_export: {:p} with a capacity of {} bytes (aligned to {}) is not a live allocation of its \
                 resource {} (a capacity larger than the allocation, a pointer into one, or memory already freed)",
                export.data,
                export.capacity,
                export.alignment,
                mr.name()
            )));
        }
    }
    Ok(())
}

/// Adopts an export: the memory now belongs to the returned buffer (no copy), which frees it once
/// through the export's resource, on the export's stream and device. The export itself is given
/// back through its deleter.
///
/// # Errors
/// [`Error::InvalidArgument`] for a NULL export, another version, a missing deleter or resource, an
/// invalid resource handle, a bad alignment, `size > capacity`, `data` NULL with a capacity (or
/// the reverse), or `(data, capacity, alignment)` that the resource knows is not a live allocation
/// of its own (see [`MemoryResource::is_live_allocation`](crate::MemoryResource::is_live_allocation):
/// a capacity larger than the allocation, a pointer into one); the export is then NOT consumed
/// (its owner still frees it).
///
/// # Safety
/// `export` is NULL or a live export that nothing else uses during the call; on success it must not
/// be used again.
pub unsafe fn import_buffer(export: *mut rmm_buffer_export) -> Result<DeviceBuffer> {
    // SAFETY: caller contract.
    let e = unsafe { export.as_mut() }
        .ok_or_else(|| Error::invalid("the rmm_buffer_export must not be NULL"))?;
    check(e)?;
    // SAFETY: checked; the export's reference moves to the buffer.
    let mr = unsafe { AnyResource::from_handle(e.resource) };
    let parts = parts_of(e, mr);
    e.data = std::ptr::null_mut();
    e.capacity = 0;
    e.size = 0;
    e.resource = rmm_resource::NULL;
    let deleter = e.deleter.expect("checked above");
    // SAFETY: the producer's deleter, called once; it frees only the struct now.
    unsafe { deleter(export) };
    // SAFETY: checked parts of a live buffer, now owned by nobody else.
    Ok(unsafe { DeviceBuffer::from_raw_parts(parts) })
}

/// Gives an export back through its producer's own deleter (the memory is freed on its stream and
/// device if nobody adopted it). NULL, or an export without a deleter, is a no-op.
///
/// # Safety
/// `export` is NULL or a live OWNING export, not used afterwards.
pub unsafe fn free_buffer_export(export: *mut rmm_buffer_export) {
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

    #[test]
    fn adopting_moves_the_memory_and_frees_it_once() {
        let (counting, mr) = Counting::new();
        let buf = DeviceBuffer::from_host(b"0123456789", Stream::DEFAULT, mr.clone()).unwrap();
        let ptr = buf.as_ptr();
        let export = export_buffer(buf);
        // SAFETY: fresh export.
        let e = unsafe { &*export };
        assert_eq!(
            (e.version, e.size, e.capacity, e.alignment),
            (1, 10, 10, 256)
        );
        assert_eq!(e.data as *const u8, ptr);
        // SAFETY: adopted once.
        let back = unsafe { import_buffer(export).unwrap() };
        assert_eq!(back.as_ptr(), ptr);
        assert!(
            back.memory_resource().ptr_eq(&mr),
            "our own handle is unwrapped to the same Arc"
        );
        assert_eq!(back.to_vec().unwrap(), b"0123456789");
        assert_eq!(counting.live(), 1);
        drop(back);
        counting.assert_balanced();
    }

    #[test]
    fn an_export_nobody_adopts_is_freed_by_its_deleter() {
        let (counting, mr) = Counting::new();
        let export = export_buffer(DeviceBuffer::new(64, Stream::DEFAULT, mr.clone()).unwrap());
        assert_eq!(counting.live(), 1);
        // SAFETY: fresh export, its deleter called once.
        unsafe { ((*export).deleter.unwrap())(export) };
        counting.assert_balanced();
        drop(mr);
        assert_eq!(
            std::sync::Arc::strong_count(&counting),
            1,
            "the export's resource reference was released"
        );
    }

    #[test]
    fn bad_exports_are_refused_and_not_consumed() {
        let (counting, mr) = Counting::new();
        assert!(matches!(
            // SAFETY: NULL is refused.
            unsafe { import_buffer(std::ptr::null_mut()) },
            Err(Error::InvalidArgument(_))
        ));
        let export = export_buffer(DeviceBuffer::new(8, Stream::DEFAULT, mr).unwrap());
        let mutations: [fn(&mut rmm_buffer_export); 4] = [
            |e| e.version = 2,
            |e| e.size = e.capacity + 1,
            |e| e.alignment = 3,
            |e| e.device = -7,
        ];
        for mutate in mutations {
            // SAFETY: live export, restored after each try.
            let saved = unsafe { std::ptr::read(export) };
            // SAFETY: as above.
            mutate(unsafe { &mut *export });
            // SAFETY: live export; refused, so not consumed.
            let err = unsafe { import_buffer(export) }.unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            // SAFETY: put the original fields back (no drop of the mutated copy: plain data).
            unsafe { std::ptr::write(export, saved) };
        }
        assert_eq!(counting.live(), 1, "nothing was freed by a refused import");
        // SAFETY: still a live export.
        let back = unsafe { import_buffer(export).unwrap() };
        assert_eq!(back.size(), 8);
        drop(back);
        counting.assert_balanced();
    }

    /// Issue 30: an export claiming more memory than its resource allocated was adopted, and a
    /// later allocation landed inside the adopted buffer.
    #[test]
    fn an_export_larger_than_its_allocation_is_refused_and_not_consumed() {
        let system = AnyResource::new(crate::mr::SystemMemoryResource::new());
        let pool =
            crate::mr::PoolMemoryResource::new(system, Some(1 << 20), Some(1 << 20)).unwrap();
        let mr = AnyResource::new(pool.clone());
        let export = export_buffer(DeviceBuffer::new(4096, Stream::DEFAULT, mr.clone()).unwrap());
        let mutations: [fn(&mut rmm_buffer_export); 3] = [
            |e| e.capacity = 1 << 16,
            |e| e.data = e.data.wrapping_byte_add(256),
            |e| (e.size, e.capacity) = (256, 256),
        ];
        for mutate in mutations {
            // SAFETY: live export, restored after each try.
            let saved = unsafe { std::ptr::read(export) };
            // SAFETY: as above.
            mutate(unsafe { &mut *export });
            // SAFETY: live export; refused, so not consumed.
            let err = unsafe { import_buffer(export) }.unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("not a live allocation of its resource")),
                "{err}"
            );
            // SAFETY: put the original fields back (plain data).
            unsafe { std::ptr::write(export, saved) };
        }
        assert_eq!(
            pool.statistics().bytes_used,
            4096,
            "nothing was freed or adopted"
        );
        // SAFETY: the untouched export, adopted once.
        let back = unsafe { import_buffer(export).unwrap() };
        assert_eq!(back.capacity(), 4096);
        drop(back);
        assert_eq!(pool.statistics().bytes_used, 0);
    }

    #[test]
    fn empty_buffers_cross_too() {
        let (counting, mr) = Counting::new();
        let export = export_buffer(DeviceBuffer::new(0, Stream::DEFAULT, mr).unwrap());
        // SAFETY: fresh export.
        let back = unsafe { import_buffer(export).unwrap() };
        assert!(back.is_empty());
        assert!(back.as_ptr().is_null());
        drop(back);
        counting.assert_balanced();
    }
}
