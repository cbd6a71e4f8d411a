//! Typed strided views and DLPack 1.x.
//!
//! [`StridedMemoryView`] describes memory someone else owns (shape and strides as slices, the DLPack
//! dtype and its `"<f4"`-style format, the device, read-only) and keeps that owner alive until it is
//! dropped. Make one from a DLPack tensor ([`StridedMemoryView::from_dlpack_versioned`]), from
//! parts ([`StridedMemoryView::new`]) or from rmm's own containers, which it then owns
//! ([`StridedMemoryView::of_buffer`], [`StridedMemoryView::of_vector`]); export it as DLPack
//! ([`StridedMemoryView::to_dlpack_versioned`]) or copy its metadata into device memory for a kernel
//! ([`StridedMemoryView::to_device`]). A C struct from another language ([`rmm_strided_view`], e.g.
//! Python's `StridedMemoryView.c_view_address`) is read with its slice accessors.
//!
//! ```
//! use rmm::prelude::*;
//! use rmm::view::StridedMemoryView;
//!
//! let v = DeviceVector::<f32>::from_slice(&[1.0, 2.0, 3.0], Stream::DEFAULT, rmm::registry::current_resource()?)?;
//! let view = StridedMemoryView::of_vector(v)?; // owns the vector now
//! assert_eq!((view.shape(), view.strides(), view.format()), (&[3i64][..], &[1i64][..], "<f4"));
//! assert!(view.is_c_contiguous());
//!
//! // A DLPack 1.1 export keeps the vector alive after the view is gone.
//! let tensor = view.to_dlpack_versioned(0);
//! drop(view);
//! // SAFETY: our own export, handed over once.
//! let again = unsafe { StridedMemoryView::from_dlpack_versioned(tensor)? };
//! assert_eq!(again.len(), 3);
//! # Ok::<(), rmm::Error>(())
//! ```

pub use rmm_core::view::buffers::{memory_device, DlPackType};
pub use rmm_core::view::dlpack;
pub use rmm_core::view::format::{dtype_of_format, format_of, itemsize_of};
pub use rmm_core::view::strided::{
    c_strides, item_strides, rmm_strided_view, MetaStore, StridedMemoryView, ViewParts,
};
pub use rmm_core::view::ViewOwner;
