//! cudarc interop (feature `cudarc`): our memory as cudarc device pointers and kernel arguments,
//! and cudarc streams as the streams of our calls.
//!
//! cudarc's device-pointer traits ([`DevicePtr`], [`DevicePtrMut`], [`DeviceSlice`]) carry a
//! `CudaStream`, which our containers (ordered on a plain [`Stream`]) do not own; a view pairs one
//! with a cudarc stream for the time it is used:
//!
//! ```no_run
//! use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig, PushKernelArg};
//! use rmm::prelude::*;
//! use rmm::cudarc::{stream_of, AsCudarc};
//!
//! /// Runs `add_one(unsigned* data, unsigned n)` on 1024 values in our memory.
//! fn add_one(ctx: &std::sync::Arc<CudaContext>, func: &CudaFunction) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
//!     let cu = ctx.new_stream()?;
//!     let stream = stream_of(&cu); // our calls ordered on cudarc's stream
//!     let mut v = DeviceVector::<u32>::new(1024, stream, rmm::registry::current_resource()?)?;
//!     cu.memcpy_htod(&[1u32; 1024], &mut v.cudarc_view_mut(&cu))?; // a copy endpoint
//!     let n = 1024u32;
//!     let view = v.cudarc_view_mut(&cu);
//!     let mut launch = cu.launch_builder(func);
//!     launch.arg(&view).arg(&n); // a kernel argument: the device pointer
//!     // SAFETY: the kernel's parameters are (unsigned*, unsigned) and it stays within n.
//!     unsafe { launch.launch(LaunchConfig::for_num_elems(n)) }?;
//!     Ok(v.to_vec()?) // synchronizes the stream
//! }
//! ```
//!
//! Ordering: a view does no synchronization of its own (its `SyncOnDrop` is a no-op). Use the
//! container's stream for cudarc's work ([`stream_of`]), or order the two streams yourself, as
//! RMM requires for any work on another stream.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{
    sys, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop,
};
use rmm_core::cuda::Stream;
use rmm_core::{DeviceBuffer, DeviceVector};

/// Our [`Stream`] for a cudarc stream: the same `CUstream`, so our allocations, copies and frees
/// are ordered on it. `stream` must outlive every use of the result.
pub fn stream_of(stream: &CudaStream) -> Stream {
    // SAFETY: a live CUstream of the caller's context; the caller keeps it alive while it is used.
    unsafe { Stream::from_raw(stream.cu_stream() as usize) }
}

/// A read-only cudarc view of device memory of ours, for one cudarc stream.
///
/// `#[repr(C)]` with the device pointer first: as a kernel argument it is that pointer.
#[repr(C)]
#[derive(Debug)]
pub struct CudarcView<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: &'a Arc<CudaStream>,
    _memory: PhantomData<&'a [T]>,
}

/// A writable cudarc view of device memory of ours, for one cudarc stream (as [`CudarcView`]).
#[repr(C)]
#[derive(Debug)]
pub struct CudarcViewMut<'a, T> {
    ptr: sys::CUdeviceptr,
    len: usize,
    stream: &'a Arc<CudaStream>,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: `#[repr(C)]` with the device pointer as the first field: a kernel parameter of pointer
// type reads exactly that pointer from the argument's address.
unsafe impl<T> DeviceRepr for CudarcView<'_, T> {}
// SAFETY: as above.
unsafe impl<T> DeviceRepr for CudarcViewMut<'_, T> {}

impl<T> DeviceSlice<T> for CudarcView<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

impl<T> DeviceSlice<T> for CudarcViewMut<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

impl<T> DevicePtr<T> for CudarcView<'_, T> {
    fn device_ptr<'b>(&'b self, _stream: &'b CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

impl<T> DevicePtr<T> for CudarcViewMut<'_, T> {
    fn device_ptr<'b>(&'b self, _stream: &'b CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

impl<T> DevicePtrMut<T> for CudarcViewMut<'_, T> {
    fn device_ptr_mut<'b>(
        &'b mut self,
        _stream: &'b CudaStream,
    ) -> (sys::CUdeviceptr, SyncOnDrop<'b>) {
        (self.ptr, SyncOnDrop::Sync(None))
    }
}

/// Views of our containers as cudarc device memory.
pub trait AsCudarc<T> {
    /// A read-only view for `stream`, borrowing the container.
    fn cudarc_view<'a>(&'a self, stream: &'a Arc<CudaStream>) -> CudarcView<'a, T>;
    /// A writable view for `stream`, borrowing the container mutably.
    fn cudarc_view_mut<'a>(&'a mut self, stream: &'a Arc<CudaStream>) -> CudarcViewMut<'a, T>;
}

impl<T: Pod> AsCudarc<T> for DeviceVector<T> {
    fn cudarc_view<'a>(&'a self, stream: &'a Arc<CudaStream>) -> CudarcView<'a, T> {
        CudarcView {
            ptr: self.as_ptr() as sys::CUdeviceptr,
            len: self.len(),
            stream,
            _memory: PhantomData,
        }
    }
    fn cudarc_view_mut<'a>(&'a mut self, stream: &'a Arc<CudaStream>) -> CudarcViewMut<'a, T> {
        let len = self.len();
        CudarcViewMut {
            ptr: self.as_mut_ptr() as sys::CUdeviceptr,
            len,
            stream,
            _memory: PhantomData,
        }
    }
}

impl AsCudarc<u8> for DeviceBuffer {
    fn cudarc_view<'a>(&'a self, stream: &'a Arc<CudaStream>) -> CudarcView<'a, u8> {
        CudarcView {
            ptr: self.as_ptr() as sys::CUdeviceptr,
            len: self.size(),
            stream,
            _memory: PhantomData,
        }
    }
    fn cudarc_view_mut<'a>(&'a mut self, stream: &'a Arc<CudaStream>) -> CudarcViewMut<'a, u8> {
        let len = self.size();
        CudarcViewMut {
            ptr: self.as_mut_ptr() as sys::CUdeviceptr,
            len,
            stream,
            _memory: PhantomData,
        }
    }
}
