//! Typed strided views and DLPack 1.x.
//!
//! - [`dlpack`]: the C types of DLPack 1.1;
//! - [`format`]: DLPack dtypes ↔ `"<f4"`-style format strings and buffer-protocol codes;
//! - [`owner`]: [`ViewOwner`], the type-erased, reference-counted producer a view keeps alive;
//! - [`strided`]: [`StridedMemoryView`] and its C struct [`rmm_strided_view`];
//! - [`buffers`]: views of [`DeviceBuffer`](crate::DeviceBuffer) and
//!   [`DeviceVector`](crate::DeviceVector) that own them, and the DLPack device of rmm memory;
//! - [`device`]: [`StridedMemoryView::to_device`], the view's metadata in device memory;
//! - [`domain`]: which copy of rmm-core in the process acquired a view, so that its checks are
//!   asked of that copy;
//! - [`live`]: acquire/release of C structs (`PyObject_GetBuffer`/`PyBuffer_Release` semantics)
//!   with a validity word, so that double release and use after release are errors, not crashes.

pub mod buffers;
pub mod device;
pub mod dlpack;
pub mod domain;
pub mod format;
pub mod live;
pub mod owner;
pub mod strided;

pub use buffers::{memory_device, DlPackType};
pub use dlpack::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor};
pub use format::{dtype_of_format, format_of, itemsize_of};
pub use owner::ViewOwner;
pub use strided::{
    c_strides, item_strides, rmm_strided_view, MetaStore, StridedMemoryView, ViewParts,
};
