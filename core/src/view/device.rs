//! Making a view device-accessible: a copy of its C struct, with shape, strides, byte strides and
//! format, in memory from a given resource (device memory on a GPU, host memory in host mode), so
//! that a kernel can take `const rmm_strided_view*` as an argument and read the metadata itself.

use std::mem::size_of;

use super::strided::{rmm_strided_view, MetaStore, StridedMemoryView};
use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::resource::{AnyResource, MemoryResource};

/// Alignment of the device copy (the struct needs 8; 256 is every resource's default).
const ALIGN: usize = 256;

/// The device allocation holding a view's struct and metadata; returned to its resource on drop,
/// ordered on the stream it was made on.
struct DeviceMeta {
    resource: AnyResource,
    ptr: usize,
    bytes: usize,
    stream: Stream,
}

impl Drop for DeviceMeta {
    fn drop(&mut self) {
        // SAFETY: allocated from `resource` with these arguments in `to_device`, freed once here.
        let freed = unsafe {
            self.resource
                .deallocate(self.stream, self.ptr as *mut u8, self.bytes, ALIGN)
        };
        if let Err(e) = freed {
            tracing::error!("rmm: freeing the device copy of a strided view failed: {e}");
        }
    }
}

impl StridedMemoryView {
    /// A view of the same memory (sharing the owner) whose C struct also exists in memory from
    /// `resource`, with its shape, strides, byte strides and format there too:
    /// [`as_raw`](Self::as_raw)`().device_copy` is that struct's address (a kernel argument); the
    /// host-side fields stay readable on the host. The copy is complete when this returns (the
    /// upload is ordered on `stream`, which is then synchronized); the memory goes back to
    /// `resource` on `stream` when the returned view is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `resource` is not device-accessible (outside host mode); the
    /// allocation's or the copy's error.
    pub fn to_device(&self, resource: AnyResource, stream: Stream) -> Result<StridedMemoryView> {
        self.to_device_with_store(resource, stream, Box::new(vec![0; 3 * self.ndim()]))
    }

    /// As [`to_device`](Self::to_device), with the host-side metadata of the result in `store`
    /// (`3 × ndim` words; see [`MetaStore`]).
    ///
    /// # Errors
    /// As [`to_device`](Self::to_device).
    pub fn to_device_with_store(
        &self,
        resource: AnyResource,
        stream: Stream,
        store: Box<dyn MetaStore>,
    ) -> Result<StridedMemoryView> {
        if !cuda::is_host_mode() && !resource.access().device() {
            return Err(Error::invalid(format!(
                "{} is not device-accessible: a kernel could not read the view",
                resource.name()
            )));
        }
        let mut view = self.share_with_store(store)?;
        let n = view.ndim();
        let head = size_of::<rmm_strided_view>().next_multiple_of(8);
        let format = view.format().as_bytes().to_vec();
        let bytes = head + 24 * n + format.len() + 1;
        let base = resource.allocate(stream, bytes, ALIGN)? as usize;
        let meta = DeviceMeta {
            resource,
            ptr: base,
            bytes,
            stream,
        };

        let mut image = vec![0u8; bytes];
        let mut dev = *view.as_raw();
        let words = base + head;
        if n > 0 {
            dev.shape = words as *const i64;
            dev.strides = (words + 8 * n) as *const i64;
            dev.byte_strides = (words + 16 * n) as *const i64;
        }
        dev.format = (words + 24 * n) as *const std::ffi::c_char;
        dev.device_copy = base as *const rmm_strided_view;
        // SAFETY: `image` has room for the struct at offset 0 (`head` ≥ its size); plain old data.
        unsafe { std::ptr::write_unaligned(image.as_mut_ptr().cast::<rmm_strided_view>(), dev) };
        for (i, w) in view
            .shape()
            .iter()
            .chain(view.strides())
            .chain(view.byte_strides())
            .enumerate()
        {
            image[head + 8 * i..head + 8 * i + 8].copy_from_slice(&w.to_ne_bytes());
        }
        image[head + 24 * n..head + 24 * n + format.len()].copy_from_slice(&format);
        // SAFETY: `base` holds `bytes` bytes from the resource; `image` is host memory of that size
        // that outlives the synchronized copy.
        unsafe { cuda::copy_sync(base as *mut u8, image.as_ptr(), bytes, stream)? };
        view.raw_mut().device_copy = base as *const rmm_strided_view;
        view.device_meta = Some(Box::new(meta));
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::SystemMemoryResource;
    use crate::view::dlpack::{device_type, type_code, DLDataType, DLDevice};
    use crate::view::strided::ViewParts;

    #[test]
    fn the_device_copy_is_a_complete_struct_in_the_resources_memory() {
        if !cuda::is_host_mode() {
            return; // the GPU variant below reads it back with a copy
        }
        let parts = ViewParts {
            ptr: 0x2000,
            shape: vec![3, 2],
            strides: Some(vec![-2, 1]),
            dtype: DLDataType::new(type_code::COMPLEX, 64),
            device: DLDevice {
                device_type: device_type::CPU,
                device_id: 0,
            },
            readonly: true,
            subbyte_padded: false,
        };
        let view = StridedMemoryView::new(parts, None).unwrap();
        let on_device = view
            .to_device(
                AnyResource::new(SystemMemoryResource::new()),
                Stream::DEFAULT,
            )
            .unwrap();
        assert_eq!(on_device.shape(), view.shape(), "host fields stay readable");
        let dev = on_device.as_raw().device_copy;
        assert!(!dev.is_null());
        // SAFETY: host mode: the "device" copy is host memory, alive while `on_device` is.
        unsafe {
            let d = &*dev;
            assert_eq!(d.device_copy, dev);
            assert_eq!(
                (d.ptr, d.ndim, d.itemsize, d.readonly),
                (0x2000, 2, 8, true)
            );
            assert_eq!(std::slice::from_raw_parts(d.shape, 2), &[3, 2]);
            assert_eq!(std::slice::from_raw_parts(d.strides, 2), &[-2, 1]);
            assert_eq!(std::slice::from_raw_parts(d.byte_strides, 2), &[-16, 8]);
            assert_eq!(std::ffi::CStr::from_ptr(d.format).to_str().unwrap(), "<c8");
            assert_eq!(d.generation, on_device.generation());
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn on_a_gpu_the_copy_is_in_device_memory_and_reads_back() {
        crate::testing::require_gpu();
        let parts = ViewParts {
            ptr: 0x2000,
            shape: vec![4, 5, 6],
            strides: Some(vec![0, -6, 1]),
            dtype: DLDataType::new(type_code::BFLOAT, 16),
            device: DLDevice {
                device_type: device_type::CUDA,
                device_id: 0,
            },
            readonly: false,
            subbyte_padded: false,
        };
        let view = StridedMemoryView::new(parts, None).unwrap();
        let mr = AnyResource::new(crate::mr::CudaMemoryResource::new());
        let on_device = view.to_device(mr, Stream::DEFAULT).unwrap();
        let dev = on_device.as_raw().device_copy;
        assert!(crate::cuda::memory::is_known_to_driver(dev.cast()));
        let mut back = rmm_strided_view::EMPTY;
        // SAFETY: `dev` is a device struct alive while `on_device` is; `back` is its size.
        unsafe {
            cuda::copy_sync(
                (&mut back as *mut rmm_strided_view).cast(),
                dev.cast(),
                size_of::<rmm_strided_view>(),
                Stream::DEFAULT,
            )
            .unwrap();
        }
        assert_eq!((back.ndim, back.itemsize, back.device_copy), (3, 2, dev));
        let mut words = [0i64; 9];
        // SAFETY: the three arrays are contiguous after the struct in the device allocation.
        unsafe {
            cuda::copy_sync(
                words.as_mut_ptr().cast(),
                back.shape.cast(),
                72,
                Stream::DEFAULT,
            )
            .unwrap()
        };
        assert_eq!(words, [4, 5, 6, 0, -6, 1, 0, -12, 2]);
    }
}
