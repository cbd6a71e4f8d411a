//! Views of rmm's own containers: a [`DeviceBuffer`] as a 1-D `uint8` view and a
//! [`DeviceVector<T>`] as a typed 1-D view, each keeping the container (and so its memory resource)
//! alive as the view's owner; and the DLPack device of rmm memory ([`memory_device`]).

use bytemuck::Pod;

use super::dlpack::{device_type as dt, type_code as tc, DLDataType, DLDevice};
use super::owner::ViewOwner;
use super::strided::{StridedMemoryView, ViewParts};
use crate::buffer::{DeviceBuffer, DeviceVector};
use crate::cuda::{self, DeviceId};
use crate::error::Result;
use crate::resource::{Access, MemoryResource};

/// The DLPack device of memory at `ptr` from a resource with `access`, made on `device`: the host
/// (`kDLCPU`) in host mode; else CUDA managed memory (`kDLCUDAManaged`), pinned host memory
/// (`kDLCUDAHost`: host- and device-accessible, not managed) or device memory (`kDLCUDA`).
pub fn memory_device(ptr: *const u8, access: Access, device: Option<DeviceId>) -> DLDevice {
    let id = device.unwrap_or(0);
    if cuda::is_host_mode() {
        DLDevice {
            device_type: dt::CPU,
            device_id: 0,
        }
    } else if cuda::memory::is_managed(ptr) {
        DLDevice {
            device_type: dt::CUDA_MANAGED,
            device_id: id,
        }
    } else if access.host() {
        DLDevice {
            device_type: dt::CUDA_HOST,
            device_id: 0,
        }
    } else {
        DLDevice {
            device_type: dt::CUDA,
            device_id: id,
        }
    }
}

/// Rust item types with a DLPack dtype.
pub trait DlPackType: Pod {
    /// The DLPack dtype of `Self`.
    const DTYPE: DLDataType;
}

macro_rules! dlpack_types {
    ($($t:ty => $code:expr),* $(,)?) => {
        $(impl DlPackType for $t {
            const DTYPE: DLDataType = DLDataType::new($code, (8 * std::mem::size_of::<$t>()) as u8);
        })*
    };
}

dlpack_types!(i8 => tc::INT, i16 => tc::INT, i32 => tc::INT, i64 => tc::INT,
    u8 => tc::UINT, u16 => tc::UINT, u32 => tc::UINT, u64 => tc::UINT, f32 => tc::FLOAT, f64 => tc::FLOAT);

impl ViewParts {
    /// The parts of a 1-D `uint8` view of all of `buffer`'s bytes (`size()` of them), where its
    /// memory is ([`memory_device`]); the owner is the caller's to choose.
    pub fn bytes_of(buffer: &DeviceBuffer) -> Self {
        ViewParts {
            ptr: buffer.as_ptr() as usize,
            shape: vec![buffer.size() as i64],
            strides: None,
            dtype: DLDataType::new(tc::UINT, 8),
            device: memory_device(
                buffer.as_ptr(),
                buffer.memory_resource().access(),
                buffer.device(),
            ),
            readonly: false,
            subbyte_padded: false,
        }
    }
}

impl StridedMemoryView {
    /// A 1-D `uint8` view of the whole buffer (`size()` bytes), owning it: the buffer is freed (on
    /// its stream, through its resource) when the view and every export of it are gone.
    ///
    /// # Errors
    /// None in practice (the parts are always valid); the type is that of [`StridedMemoryView::new`].
    pub fn of_buffer(buffer: DeviceBuffer) -> Result<Self> {
        StridedMemoryView::new(ViewParts::bytes_of(&buffer), Some(ViewOwner::new(buffer)))
    }

    /// A typed 1-D view of the whole vector, owning it (see [`of_buffer`](Self::of_buffer)).
    ///
    /// # Errors
    /// As [`of_buffer`](Self::of_buffer).
    pub fn of_vector<T: DlPackType + Send + Sync>(vector: DeviceVector<T>) -> Result<Self> {
        let ptr = vector.as_ptr().cast::<u8>();
        let device = memory_device(ptr, vector.memory_resource().access(), vector.device());
        let parts = ViewParts {
            ptr: ptr as usize,
            shape: vec![vector.len() as i64],
            strides: None,
            dtype: T::DTYPE,
            device,
            readonly: false,
            subbyte_padded: false,
        };
        StridedMemoryView::new(parts, Some(ViewOwner::new(vector)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::Stream;
    use crate::mr::{StatisticsResourceAdaptor, SystemMemoryResource};
    use crate::AnyResource;

    #[test]
    fn a_view_owns_its_buffer_until_the_last_export_goes() {
        let stats = StatisticsResourceAdaptor::new(AnyResource::new(SystemMemoryResource::new()));
        let mr = AnyResource::new(stats.clone());
        let v = DeviceVector::<f32>::from_slice(&[1.0, 2.0, 3.0], Stream::DEFAULT, mr).unwrap();
        let view = StridedMemoryView::of_vector(v).unwrap();
        assert_eq!(
            (view.shape(), view.format(), view.itemsize()),
            (&[3i64][..], "<f4", 4)
        );
        if cuda::is_host_mode() {
            assert_eq!(view.device().device_type, dt::CPU);
            // SAFETY: host mode: the vector's memory is host memory kept alive by the view.
            assert_eq!(unsafe { *(view.ptr() as *const f32).add(2) }, 3.0);
        }
        let export = view.to_dlpack_versioned(0);
        drop(view);
        assert_eq!(
            stats.bytes_counter().value,
            12,
            "the export keeps the vector alive"
        );
        // SAFETY: our own export, deleted once.
        unsafe { ((*export).deleter.unwrap())(export) };
        assert_eq!(stats.bytes_counter().value, 0);
    }
}
