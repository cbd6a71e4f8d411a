//! [`DeviceVector<T>`]: uninitialized, typed, stream-ordered device memory (RMM's `device_uvector<T>`).

use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

use bytemuck::Pod;

use super::{ensure_copyable, store_async, DeviceBuffer};
use crate::aligned::DEFAULT_ALIGNMENT;
use crate::cuda::{self, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::resource::AnyResource;

/// A vector of `T` in memory from a resource, whose elements are **not** initialized on creation
/// (RMM's `device_uvector<T>`).
///
/// `T` must be [`bytemuck::Pod`], Rust's counterpart of the trivially copyable types RMM requires:
/// elements are created, copied and read back as raw bytes (by `memcpy` or the DMA engine), and
/// `Pod` guarantees that every byte pattern is a valid `T` — so reading back an element that device
/// code wrote, or one never written at all, cannot produce an invalid value — and that `T` has no
/// drop glue, padding or pointers that a byte copy would break. Zero-sized types are refused at
/// compile time.
///
/// Element access (`element`, `set_element`, `to_vec`, ...) copies between host and device and should
/// be used sparingly; reads synchronize the vector's stream.
///
/// ```
/// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
/// let mr = AnyResource::new(SystemMemoryResource::new());
/// let mut v = DeviceVector::from_slice(&[1u32, 2, 3], Stream::DEFAULT, mr)?;
/// v.set_element(1, &20)?;
/// assert_eq!(v.element(1)?, 20);
/// assert_eq!(v.to_vec()?, [1, 20, 3]);
/// assert!(v.element(3).is_err());
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub struct DeviceVector<T: Pod> {
    buf: DeviceBuffer,
    _elements: PhantomData<T>,
}

impl<T: Pod> DeviceVector<T> {
    /// `size_of::<T>()`, refusing zero-sized types when the vector is instantiated.
    const ELEMENT_SIZE: usize = {
        assert!(
            size_of::<T>() > 0,
            "DeviceVector does not support zero-sized element types"
        );
        size_of::<T>()
    };

    /// The alignment a vector of `T` allocates with: 256 bytes, or more for more demanding `T`.
    const ALIGNMENT: usize = if align_of::<T>() > DEFAULT_ALIGNMENT {
        align_of::<T>()
    } else {
        DEFAULT_ALIGNMENT
    };

    fn bytes_for(len: usize) -> Result<usize> {
        len.checked_mul(Self::ELEMENT_SIZE).ok_or_else(|| {
            Error::invalid(format!(
                "{len} elements of {} bytes overflow the size of an allocation",
                Self::ELEMENT_SIZE
            ))
        })
    }

    fn check_index(&self, index: usize) -> Result<()> {
        let len = self.len();
        if index < len {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "index {index} is out of range for a vector of length {len}"
            )))
        }
    }

    /// A vector of `len` uninitialized elements from `mr`, allocated on `stream`.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, Error, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let v = DeviceVector::<f64>::new(100, Stream::DEFAULT, mr.clone())?;
    /// assert_eq!((v.len(), v.capacity()), (100, 100));
    /// let too_big = DeviceVector::<u64>::new(usize::MAX / 4, Stream::DEFAULT, mr);
    /// assert!(matches!(too_big, Err(Error::InvalidArgument(_))));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `len * size_of::<T>()` overflows; the resource's error.
    pub fn new(len: usize, stream: Stream, mr: AnyResource) -> Result<Self> {
        let bytes = Self::bytes_for(len)?;
        let buf = DeviceBuffer::with_alignment(bytes, Self::ALIGNMENT, stream, mr)?;
        Ok(Self {
            buf,
            _elements: PhantomData,
        })
    }

    /// `len` uninitialized elements from the current device's resource (RMM's default `mr`).
    ///
    /// # Errors
    /// As [`DeviceVector::new`], and the registry's error for an invalid current device.
    pub fn with_current_resource(len: usize, stream: Stream) -> Result<Self> {
        Self::new(len, stream, crate::registry::current_resource()?)
    }

    /// A vector holding a copy of `src` (the stream is synchronized before returning).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[1.5f32, 2.5], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(v.to_vec()?, [1.5, 2.5]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn from_slice(src: &[T], stream: Stream, mr: AnyResource) -> Result<Self> {
        let mut v = Self::new(src.len(), stream, mr)?;
        v.copy_from_slice(src)?;
        Ok(v)
    }

    /// A deep copy into memory from `mr`, asynchronous on `stream` (RMM's copy constructor; see
    /// [`DeviceBuffer::try_clone_on`] for the ordering rules).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let a = DeviceVector::from_slice(&[7u16, 8], Stream::DEFAULT, mr.clone())?;
    /// let b = a.try_clone_on(Stream::DEFAULT, mr)?;
    /// assert_eq!(b.to_vec()?, [7, 8]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn try_clone_on(&self, stream: Stream, mr: AnyResource) -> Result<Self> {
        Ok(Self {
            buf: self.buf.try_clone_on(stream, mr)?,
            _elements: PhantomData,
        })
    }

    /// A deep copy on this vector's stream, sharing its resource.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let a = DeviceVector::from_slice(&[1i8, -1], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(a.try_clone()?.to_vec()?, [1, -1]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            buf: self.buf.try_clone()?,
            _elements: PhantomData,
        })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.buf.size() / Self::ELEMENT_SIZE
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The number of elements the current allocation can hold.
    pub fn capacity(&self) -> usize {
        self.buf.capacity() / Self::ELEMENT_SIZE
    }

    /// The raw (device) address of the first element; null when nothing is allocated.
    pub fn as_ptr(&self) -> *const T {
        self.buf.as_ptr().cast()
    }

    /// The raw (device) address of the first element, for writing; null when nothing is allocated.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.buf.as_mut_ptr().cast()
    }

    /// The raw (device) address of element `index`.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::<u32>::new(4, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(v.element_ptr(2)?, v.as_ptr().wrapping_add(2));
    /// assert!(v.element_ptr(4).is_err());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `index >= len()`.
    pub fn element_ptr(&self, index: usize) -> Result<*const T> {
        self.check_index(index)?;
        // `wrapping_add` only computes an address inside the allocation (index < len); it is never
        // dereferenced here.
        Ok(self.as_ptr().wrapping_add(index))
    }

    /// Reads element `index` (copies it to the host and synchronizes the vector's stream).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[10u64, 20], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(v.element(1)?, 20);
    /// let e = v.element(2).unwrap_err();
    /// assert!(e.to_string().contains("index 2") && e.to_string().contains("length 2"));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `index >= len()`, naming both; the copy's error.
    pub fn element(&self, index: usize) -> Result<T> {
        self.check_index(index)?;
        ensure_copyable(self.buf.memory_resource())?;
        let mut value = T::zeroed();
        let src = self.as_ptr().wrapping_add(index).cast::<u8>();
        // SAFETY: `src` is element `index` (< len) of the live allocation; `value` is a local of
        // exactly ELEMENT_SIZE bytes that copy_sync fills before returning. Any bytes are a valid T (Pod).
        unsafe {
            cuda::copy_sync(
                bytemuck::bytes_of_mut(&mut value).as_mut_ptr(),
                src,
                Self::ELEMENT_SIZE,
                self.stream(),
            )?
        };
        Ok(value)
    }

    /// Reads the first element (synchronizes the vector's stream).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[3i32, 4, 5], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!((v.front_element()?, v.back_element()?), (3, 5));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the vector is empty; the copy's error.
    pub fn front_element(&self) -> Result<T> {
        self.element(0)
    }

    /// Reads the last element (synchronizes the vector's stream).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::<u8>::new(0, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert!(v.back_element().is_err());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the vector is empty; the copy's error.
    pub fn back_element(&self) -> Result<T> {
        match self.len().checked_sub(1) {
            Some(last) => self.element(last),
            None => Err(Error::invalid(
                "back_element of an empty vector (index out of range for length 0)",
            )),
        }
    }

    /// Writes `value` to element `index` and synchronizes the vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<f64>::new(2, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.set_element(0, &2.5)?;
    /// assert_eq!(v.element(0)?, 2.5);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `index >= len()`; the copy's error.
    pub fn set_element(&mut self, index: usize, value: &T) -> Result<()> {
        self.check_index(index)?;
        ensure_copyable(self.buf.memory_resource())?;
        let dst = self.as_mut_ptr().wrapping_add(index).cast::<u8>();
        // SAFETY: `dst` is element `index` (< len) of the live allocation; `value` is borrowed until
        // copy_sync has waited for the copy.
        unsafe {
            cuda::copy_sync(
                dst,
                bytemuck::bytes_of(value).as_ptr(),
                Self::ELEMENT_SIZE,
                self.stream(),
            )
        }
    }

    /// Writes `value` to element `index`, ordered on the vector's stream.
    ///
    /// Unlike RMM's, the caller may drop or change `value` as soon as this returns: the value is
    /// written as a few byte fills that carry its bytes by value (asynchronous), or — for values with
    /// more than 8 runs of equal bytes — copied with a stream synchronization. It never reads `value`
    /// after returning.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<u32>::new(3, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.set_element_async(2, &0xdead_beef)?;
    /// assert_eq!(v.element(2)?, 0xdead_beef); // element() synchronizes
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `index >= len()`; the driver's error.
    pub fn set_element_async(&mut self, index: usize, value: &T) -> Result<()> {
        self.check_index(index)?;
        ensure_copyable(self.buf.memory_resource())?;
        let dst = self.as_mut_ptr().wrapping_add(index).cast::<u8>();
        // SAFETY: `dst` is element `index` (< len) of the live allocation, ELEMENT_SIZE bytes, which is
        // freed only after work already queued on the stream.
        unsafe { store_async(dst, bytemuck::bytes_of(value), self.stream()) }
    }

    /// Sets element `index` to all-zero bytes, asynchronously on the vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::from_slice(&[5u16, 6], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.set_element_to_zero_async(1)?;
    /// assert_eq!(v.to_vec()?, [5, 0]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `index >= len()`; the driver's error.
    pub fn set_element_to_zero_async(&mut self, index: usize) -> Result<()> {
        self.check_index(index)?;
        ensure_copyable(self.buf.memory_resource())?;
        let dst = self.as_mut_ptr().wrapping_add(index).cast::<u8>();
        // SAFETY: as in set_element_async.
        unsafe { cuda::set_async(dst, 0, Self::ELEMENT_SIZE, self.stream()) }
    }

    /// Sets the length to `new_len`: in place within the capacity, else reallocated with the contents
    /// copied on `stream`. New elements are uninitialized. Makes `stream` the vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::from_slice(&[1u32, 2, 3], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.resize(1, Stream::DEFAULT)?;
    /// assert_eq!((v.len(), v.capacity()), (1, 3));
    /// v.resize(10, Stream::DEFAULT)?;
    /// assert_eq!((v.len(), v.capacity(), v.front_element()?), (10, 10, 1));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on size overflow; the allocation's or the copy's error.
    pub fn resize(&mut self, new_len: usize, stream: Stream) -> Result<()> {
        self.buf.resize(Self::bytes_for(new_len)?, stream)
    }

    /// Grows the capacity to at least `new_capacity` elements, keeping the contents. Makes `stream`
    /// the vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<u8>::new(0, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.reserve(64, Stream::DEFAULT)?;
    /// assert_eq!((v.len(), v.capacity()), (0, 64));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on size overflow; the allocation's or the copy's error.
    pub fn reserve(&mut self, new_capacity: usize, stream: Stream) -> Result<()> {
        self.buf.reserve(Self::bytes_for(new_capacity)?, stream)
    }

    /// Reallocates to exactly `len()` elements when the capacity is larger. Makes `stream` the
    /// vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<u8>::new(64, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.resize(8, Stream::DEFAULT)?;
    /// v.shrink_to_fit(Stream::DEFAULT)?;
    /// assert_eq!(v.capacity(), 8);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn shrink_to_fit(&mut self, stream: Stream) -> Result<()> {
        self.buf.shrink_to_fit(stream)
    }

    /// Copies the elements into `dst`, which must have exactly `len()` elements, and synchronizes the
    /// vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[1u8, 2], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let mut out = [0u8; 2];
    /// v.copy_to_slice(&mut out)?;
    /// assert_eq!(out, [1, 2]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; the copy's error.
    pub fn copy_to_slice(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.len() {
            return Err(Error::invalid(format!(
                "cannot copy a vector of length {} into a slice of length {}",
                self.len(),
                dst.len()
            )));
        }
        self.buf.copy_to_host(bytemuck::cast_slice_mut(dst))
    }

    /// The elements as a new `Vec` (synchronizes the vector's stream).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[1i64, -2], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(v.to_vec()?, [1, -2]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The copy's error.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len()];
        self.copy_to_slice(&mut out)?;
        Ok(out)
    }

    /// Copies `src`, which must have exactly `len()` elements, into the vector and synchronizes the
    /// vector's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<u32>::new(2, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.copy_from_slice(&[4, 5])?;
    /// assert_eq!(v.to_vec()?, [4, 5]);
    /// assert!(v.copy_from_slice(&[1]).is_err());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; the copy's error.
    pub fn copy_from_slice(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len() {
            return Err(Error::invalid(format!(
                "cannot copy a slice of length {} into a vector of length {}",
                src.len(),
                self.len()
            )));
        }
        self.buf.copy_from_host(bytemuck::cast_slice(src))
    }

    /// The stream the vector's work and its final free are ordered on.
    pub fn stream(&self) -> Stream {
        self.buf.stream()
    }

    /// Orders future work and the final free on `stream` (see [`DeviceBuffer::set_stream`]).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let mut v = DeviceVector::<u8>::new(1, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// v.set_stream(Stream::PER_THREAD);
    /// assert_eq!(v.stream(), Stream::PER_THREAD);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    pub fn set_stream(&mut self, stream: Stream) {
        self.buf.set_stream(stream);
    }

    /// The resource the memory came from.
    pub fn memory_resource(&self) -> &AnyResource {
        self.buf.memory_resource()
    }

    /// The device the vector was made on; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.buf.device()
    }

    /// The underlying buffer.
    pub fn as_buffer(&self) -> &DeviceBuffer {
        &self.buf
    }

    /// Gives up the typed view and returns the storage (RMM's `release()`).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceVector, cuda::Stream, mr::SystemMemoryResource};
    /// let v = DeviceVector::from_slice(&[1u32, 2], Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let buf = v.into_buffer();
    /// assert_eq!(buf.size(), 8);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    pub fn into_buffer(self) -> DeviceBuffer {
        self.buf
    }
}

impl<T: Pod> fmt::Debug for DeviceVector<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceVector")
            .field("element", &std::any::type_name::<T>())
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("buffer", &self.buf)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::testutil::Counting;
    use crate::mr::SystemMemoryResource;

    fn sys() -> AnyResource {
        AnyResource::new(SystemMemoryResource::new())
    }

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Point {
        x: f32,
        y: f32,
        id: u64,
    }

    #[repr(C, align(512))]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct Wide([u8; 512]);

    #[test]
    fn vectors_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<DeviceVector<f64>>();
    }

    #[test]
    fn byte_size_overflow_is_invalid_argument() {
        let e = DeviceVector::<u64>::new(usize::MAX / 4, Stream::DEFAULT, sys()).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("overflow"), "{e}");
        let mut v = DeviceVector::<u32>::new(1, Stream::DEFAULT, sys()).unwrap();
        assert!(matches!(
            v.resize(usize::MAX / 2, Stream::DEFAULT),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            v.reserve(usize::MAX, Stream::DEFAULT),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn sizes_are_in_elements_and_bytes_are_aligned() {
        let (counter, mr) = Counting::new();
        let v = DeviceVector::<Point>::new(10, Stream::DEFAULT, mr).unwrap();
        assert_eq!((v.len(), v.capacity(), v.is_empty()), (10, 10, false));
        assert_eq!(v.as_buffer().size(), 10 * size_of::<Point>());
        assert_eq!(
            counter.ledger.lock().unwrap().live.values().next(),
            Some(&(160, DEFAULT_ALIGNMENT))
        );
        let w = DeviceVector::<Wide>::new(2, Stream::DEFAULT, sys()).unwrap();
        assert_eq!(
            w.as_buffer().alignment(),
            512,
            "over-aligned types get their alignment"
        );
        assert_eq!(w.as_ptr() as usize % 512, 0);
        let empty = DeviceVector::<u8>::new(0, Stream::DEFAULT, sys()).unwrap();
        assert!(empty.is_empty() && empty.as_ptr().is_null());
        assert_eq!(empty.to_vec().unwrap(), Vec::<u8>::new());
        drop(v);
        counter.assert_balanced();
    }

    #[test]
    fn slice_round_trips_for_several_types() {
        let ints: Vec<u32> = (0..1000).collect();
        let v = DeviceVector::from_slice(&ints, Stream::DEFAULT, sys()).unwrap();
        assert_eq!(v.to_vec().unwrap(), ints);
        let floats: Vec<f64> = (0..333).map(|i| i as f64 * 0.25 - 7.0).collect();
        let v = DeviceVector::from_slice(&floats, Stream::DEFAULT, sys()).unwrap();
        assert_eq!(v.to_vec().unwrap(), floats);
        let points: Vec<Point> = (0..17)
            .map(|i| Point {
                x: i as f32,
                y: -(i as f32),
                id: i * 1000,
            })
            .collect();
        let v = DeviceVector::from_slice(&points, Stream::DEFAULT, sys()).unwrap();
        assert_eq!(v.to_vec().unwrap(), points);
        assert_eq!(v.element(16).unwrap(), points[16]);
    }

    #[test]
    fn element_access_and_out_of_range() {
        let mut v = DeviceVector::from_slice(&[10i32, 20, 30], Stream::DEFAULT, sys()).unwrap();
        assert_eq!(v.element(0).unwrap(), 10);
        assert_eq!(v.front_element().unwrap(), 10);
        assert_eq!(v.back_element().unwrap(), 30);
        v.set_element(1, &-5).unwrap();
        assert_eq!(v.element(1).unwrap(), -5);
        for e in [
            v.element(3).unwrap_err(),
            v.set_element(3, &1).unwrap_err(),
            v.set_element_async(7, &1).unwrap_err(),
            v.set_element_to_zero_async(3).unwrap_err(),
            v.element_ptr(3).unwrap_err(),
        ] {
            let text = e.to_string();
            assert!(matches!(e, Error::InvalidArgument(_)), "{text}");
            assert!(
                text.contains("out of range") && text.contains("length 3"),
                "{text}"
            );
        }
        assert!(v
            .element(usize::MAX)
            .unwrap_err()
            .to_string()
            .contains(&usize::MAX.to_string()));
        assert_eq!(
            v.to_vec().unwrap(),
            [10, -5, 30],
            "failed writes change nothing"
        );
        let empty = DeviceVector::<u8>::new(0, Stream::DEFAULT, sys()).unwrap();
        assert!(matches!(
            empty.front_element(),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            empty.back_element(),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn async_element_writes() {
        let mut v = DeviceVector::<f64>::new(4, Stream::DEFAULT, sys()).unwrap();
        for (i, x) in [0.0, -1.0, std::f64::consts::PI, 1e300].iter().enumerate() {
            let local = *x; // dropped right after the call: set_element_async must not need it later
            v.set_element_async(i, &local).unwrap();
        }
        v.stream().synchronize().unwrap();
        assert_eq!(
            v.to_vec().unwrap(),
            [0.0, -1.0, std::f64::consts::PI, 1e300]
        );
        v.set_element_to_zero_async(2).unwrap();
        assert_eq!(v.element(2).unwrap(), 0.0);
        // A value with many distinct bytes takes the synchronous path.
        let mut w = DeviceVector::<u128>::new(2, Stream::DEFAULT, sys()).unwrap();
        let big = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128;
        w.set_element_async(1, &big).unwrap();
        w.set_element_async(0, &u128::MAX).unwrap();
        assert_eq!(w.to_vec().unwrap(), [u128::MAX, big]);
    }

    #[test]
    fn resize_reserve_shrink_in_elements() {
        let (counter, mr) = Counting::new();
        let mut v = DeviceVector::from_slice(&[1u16, 2, 3, 4], Stream::DEFAULT, mr).unwrap();
        v.resize(2, Stream::DEFAULT).unwrap();
        assert_eq!((v.len(), v.capacity()), (2, 4));
        v.reserve(100, Stream::PER_THREAD).unwrap();
        assert_eq!(
            (v.len(), v.capacity(), v.stream()),
            (2, 100, Stream::PER_THREAD)
        );
        assert_eq!(v.to_vec().unwrap(), [1, 2]);
        v.shrink_to_fit(Stream::DEFAULT).unwrap();
        assert_eq!(v.capacity(), 2);
        v.resize(5, Stream::DEFAULT).unwrap();
        assert_eq!(v.element(1).unwrap(), 2);
        drop(v);
        counter.assert_balanced();
    }

    #[test]
    fn copies_check_lengths_and_deep_copies_are_independent() {
        let mut v = DeviceVector::from_slice(&[1u8, 2, 3], Stream::DEFAULT, sys()).unwrap();
        assert!(matches!(
            v.copy_from_slice(&[1, 2]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            v.copy_to_slice(&mut [0; 4]),
            Err(Error::InvalidArgument(_))
        ));
        let copy = v.try_clone().unwrap();
        let (counter, other) = Counting::new();
        let elsewhere = v.try_clone_on(Stream::PER_THREAD, other).unwrap();
        v.copy_from_slice(&[9, 9, 9]).unwrap();
        assert_eq!(copy.to_vec().unwrap(), [1, 2, 3]);
        assert_eq!(elsewhere.to_vec().unwrap(), [1, 2, 3]);
        assert_eq!(elsewhere.stream(), Stream::PER_THREAD);
        drop(elsewhere);
        counter.assert_balanced();
    }

    #[test]
    fn into_buffer_keeps_the_storage() {
        let mr = sys();
        let v = DeviceVector::from_slice(&[0x0403_0201u32], Stream::DEFAULT, mr.clone()).unwrap();
        let ptr = v.as_ptr() as *const u8;
        let buf = v.into_buffer();
        assert_eq!(buf.as_ptr(), ptr);
        assert_eq!(buf.to_vec().unwrap(), 0x0403_0201u32.to_ne_bytes());
        assert_eq!(mr.owner_count(), 2);
        drop(buf);
        assert_eq!(mr.owner_count(), 1);
    }
}

#[cfg(test)]
mod gpu_tests {
    use super::*;
    use crate::cuda::{OwnedStream, StreamFlags};
    use crate::mr::CudaMemoryResource;
    use crate::testing::require_gpu;

    fn device_mr() -> AnyResource {
        AnyResource::new(CudaMemoryResource::new())
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn u32_elements_on_the_device() {
        require_gpu();
        let data: Vec<u32> = (0..100_000).map(|i| i * 3).collect();
        let mut v = DeviceVector::from_slice(&data, Stream::DEFAULT, device_mr()).unwrap();
        assert_eq!(v.element(99_999).unwrap(), 299_997);
        v.set_element(5, &42).unwrap();
        v.set_element_async(6, &0xdead_beef).unwrap();
        v.set_element_to_zero_async(7).unwrap();
        assert_eq!(
            (
                v.element(5).unwrap(),
                v.element(6).unwrap(),
                v.element(7).unwrap()
            ),
            (42, 0xdead_beef, 0)
        );
        assert!(v.element(100_000).is_err());
        v.resize(200_000, Stream::DEFAULT).unwrap();
        assert_eq!(v.to_vec().unwrap()[8..100_000], data[8..]);
        assert_eq!(v.front_element().unwrap(), 0);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn f64_elements_on_a_stream() {
        require_gpu();
        let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let data: Vec<f64> = (0..4096).map(|i| (i as f64).sqrt()).collect();
        let mut v = DeviceVector::from_slice(&data, stream.stream(), device_mr()).unwrap();
        for i in 0..16 {
            let x = -(i as f64) * 1.5e-3;
            v.set_element_async(i, &x).unwrap();
        }
        let copy = v.try_clone().unwrap();
        for i in 0..16 {
            assert_eq!(copy.element(i).unwrap(), -(i as f64) * 1.5e-3);
        }
        assert_eq!(copy.back_element().unwrap(), data[4095]);
        let big =
            DeviceVector::from_slice(&[u128::MAX - 12345], stream.stream(), device_mr()).unwrap();
        let mut big2 = big.try_clone().unwrap();
        big2.set_element_async(0, &0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10)
            .unwrap();
        assert_eq!(
            big2.element(0).unwrap(),
            0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10
        );
        assert_eq!(big.element(0).unwrap(), u128::MAX - 12345);
        stream.synchronize().unwrap();
    }
}
