//! [`DeviceScalar<T>`]: one element of stream-ordered device memory (RMM's `device_scalar<T>`).

use std::fmt;

use bytemuck::Pod;

use super::{DeviceBuffer, DeviceVector};
use crate::cuda::{DeviceId, Stream};
use crate::error::Result;
use crate::resource::AnyResource;

/// A single `T` in memory from a resource (RMM's `device_scalar<T>`), for example a counter or a
/// result that device code writes and the host reads back.
///
/// `T` is [`bytemuck::Pod`] for the reasons given on [`DeviceVector`]. Reads synchronize the
/// scalar's stream; writes named `_async` are ordered on it.
///
/// ```
/// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
/// let mr = AnyResource::new(SystemMemoryResource::new());
/// let mut s = DeviceScalar::from_value(&41u64, Stream::DEFAULT, mr)?;
/// s.set_value(&(s.value()? + 1))?;
/// assert_eq!(s.value()?, 42);
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub struct DeviceScalar<T: Pod> {
    inner: DeviceVector<T>,
}

impl<T: Pod> DeviceScalar<T> {
    /// An uninitialized scalar from `mr`, allocated on `stream`.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let s = DeviceScalar::<i32>::new(Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert!(!s.as_ptr().is_null());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The resource's error.
    pub fn new(stream: Stream, mr: AnyResource) -> Result<Self> {
        Ok(Self {
            inner: DeviceVector::new(1, stream, mr)?,
        })
    }

    /// An uninitialized scalar from the current device's resource (RMM's default `mr`).
    ///
    /// # Errors
    /// As [`DeviceScalar::new`], and the registry's error for an invalid current device.
    pub fn with_current_resource(stream: Stream) -> Result<Self> {
        Self::new(stream, crate::registry::current_resource()?)
    }

    /// A scalar holding `value` (the stream is synchronized before returning).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let s = DeviceScalar::from_value(&2.5f32, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(s.value()?, 2.5);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn from_value(value: &T, stream: Stream, mr: AnyResource) -> Result<Self> {
        Ok(Self {
            inner: DeviceVector::from_slice(std::slice::from_ref(value), stream, mr)?,
        })
    }

    /// A deep copy into memory from `mr`, asynchronous on `stream` (RMM's copy constructor).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let a = DeviceScalar::from_value(&7u8, Stream::DEFAULT, mr.clone())?;
    /// assert_eq!(a.try_clone_on(Stream::DEFAULT, mr)?.value()?, 7);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn try_clone_on(&self, stream: Stream, mr: AnyResource) -> Result<Self> {
        Ok(Self {
            inner: self.inner.try_clone_on(stream, mr)?,
        })
    }

    /// A deep copy on this scalar's stream, sharing its resource.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let a = DeviceScalar::from_value(&7u8, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(a.try_clone()?.value()?, 7);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            inner: self.inner.try_clone()?,
        })
    }

    /// Reads the value (copies it to the host and synchronizes the scalar's stream).
    ///
    /// # Errors
    /// The copy's error.
    pub fn value(&self) -> Result<T> {
        self.inner.element(0)
    }

    /// Writes `value` and synchronizes the scalar's stream.
    ///
    /// # Errors
    /// The copy's error.
    pub fn set_value(&mut self, value: &T) -> Result<()> {
        self.inner.set_element(0, value)
    }

    /// Writes `value`, ordered on the scalar's stream; `value` may be dropped as soon as this returns
    /// (see [`DeviceVector::set_element_async`]).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let mut s = DeviceScalar::<u32>::new(Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// s.set_value_async(&9)?;
    /// assert_eq!(s.value()?, 9);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The driver's error.
    pub fn set_value_async(&mut self, value: &T) -> Result<()> {
        self.inner.set_element_async(0, value)
    }

    /// Sets the value to all-zero bytes, asynchronously on the scalar's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let mut s = DeviceScalar::from_value(&-3i16, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// s.set_value_to_zero_async()?;
    /// assert_eq!(s.value()?, 0);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The driver's error.
    pub fn set_value_to_zero_async(&mut self) -> Result<()> {
        self.inner.set_element_to_zero_async(0)
    }

    /// The raw (device) address of the value.
    pub fn as_ptr(&self) -> *const T {
        self.inner.as_ptr()
    }

    /// The raw (device) address of the value, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.inner.as_mut_ptr()
    }

    /// The stream the scalar's work and its final free are ordered on.
    pub fn stream(&self) -> Stream {
        self.inner.stream()
    }

    /// Orders future work and the final free on `stream` (see [`DeviceBuffer::set_stream`]).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceScalar, cuda::Stream, mr::SystemMemoryResource};
    /// let mut s = DeviceScalar::<u8>::new(Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// s.set_stream(Stream::PER_THREAD);
    /// assert_eq!(s.stream(), Stream::PER_THREAD);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    pub fn set_stream(&mut self, stream: Stream) {
        self.inner.set_stream(stream);
    }

    /// The resource the memory came from.
    pub fn memory_resource(&self) -> &AnyResource {
        self.inner.memory_resource()
    }

    /// The device the scalar was made on; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.inner.device()
    }

    /// Gives up the typed view and returns the storage.
    pub fn into_buffer(self) -> DeviceBuffer {
        self.inner.into_buffer()
    }
}

impl<T: Pod> fmt::Debug for DeviceScalar<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceScalar")
            .field("element", &std::any::type_name::<T>())
            .field("buffer", self.inner.as_buffer())
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

    #[test]
    fn value_round_trips_and_updates() {
        let mut s = DeviceScalar::from_value(&1234.5f64, Stream::DEFAULT, sys()).unwrap();
        assert_eq!(s.value().unwrap(), 1234.5);
        s.set_value(&-1.0).unwrap();
        assert_eq!(s.value().unwrap(), -1.0);
        s.set_value_async(&f64::MIN_POSITIVE).unwrap();
        assert_eq!(s.value().unwrap(), f64::MIN_POSITIVE);
        s.set_value_to_zero_async().unwrap();
        assert_eq!(s.value().unwrap(), 0.0);
        assert!(format!("{s:?}").contains("f64"));
    }

    #[test]
    fn one_element_allocation_freed_on_drop() {
        let (counter, mr) = Counting::new();
        let mut s = DeviceScalar::<u32>::new(Stream::DEFAULT, mr.clone()).unwrap();
        assert_eq!(s.as_ptr(), s.as_mut_ptr() as *const u32);
        assert_eq!(
            counter.ledger.lock().unwrap().live.values().next(),
            Some(&(4, 256))
        );
        s.set_stream(Stream::PER_THREAD);
        assert_eq!(s.stream(), Stream::PER_THREAD);
        assert!(s.memory_resource().ptr_eq(&mr));
        drop(s);
        let l = counter.ledger.lock().unwrap();
        assert_eq!(l.last_free_stream, Some(Stream::PER_THREAD));
        drop(l);
        counter.assert_balanced();
    }

    #[test]
    fn deep_copies_are_independent() {
        let mut a = DeviceScalar::from_value(&5i64, Stream::DEFAULT, sys()).unwrap();
        let b = a.try_clone().unwrap();
        let c = a.try_clone_on(Stream::PER_THREAD, sys()).unwrap();
        a.set_value(&6).unwrap();
        assert_eq!(
            (a.value().unwrap(), b.value().unwrap(), c.value().unwrap()),
            (6, 5, 5)
        );
        assert_eq!(c.stream(), Stream::PER_THREAD);
        assert_eq!(a.into_buffer().size(), 8);
    }
}

#[cfg(test)]
mod gpu_tests {
    use super::*;
    use crate::cuda::{OwnedStream, StreamFlags};
    use crate::mr::CudaMemoryResource;
    use crate::testing::require_gpu;

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn scalar_on_the_device() {
        require_gpu();
        let stream = OwnedStream::new(StreamFlags::NonBlocking).unwrap();
        let mr = AnyResource::new(CudaMemoryResource::new());
        let mut s = DeviceScalar::from_value(&7u64, stream.stream(), mr.clone()).unwrap();
        assert_eq!(s.value().unwrap(), 7);
        s.set_value_async(&0x0102_0304_0506_0708).unwrap();
        assert_eq!(s.value().unwrap(), 0x0102_0304_0506_0708);
        s.set_value_to_zero_async().unwrap();
        let copy = s.try_clone().unwrap();
        s.set_value(&99).unwrap();
        assert_eq!((s.value().unwrap(), copy.value().unwrap()), (99, 0));
        let f = DeviceScalar::from_value(&std::f32::consts::E, Stream::DEFAULT, mr).unwrap();
        assert_eq!(f.value().unwrap(), std::f32::consts::E);
        assert_eq!(f.device(), Some(crate::cuda::current_device().unwrap()));
    }
}
