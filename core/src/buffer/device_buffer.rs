//! [`DeviceBuffer`]: untyped, stream-ordered, owning device memory (RMM's `device_buffer`).

use std::fmt;

use super::ensure_copyable;
use crate::aligned::{align_up, check_alignment, DEFAULT_ALIGNMENT};
use crate::cuda::{self, memory, DeviceGuard, DeviceId, Stream};
use crate::error::{Error, Result};
use crate::resource::{AnyResource, MemoryResource};

/// Untyped, uninitialized memory from a resource, freed on drop (RMM's `device_buffer`).
///
/// The buffer owns its allocation, a clone of its [`AnyResource`] (which therefore stays alive),
/// its [`Stream`], its size, capacity and alignment, and the device that was current when it was
/// made (`None` in host mode). It is freed on that device and stream. Size 0 is legal and holds a
/// null pointer without touching the resource.
///
/// `resize` works in place while the new size fits the capacity and otherwise reallocates and copies
/// on the given stream; `shrink_to_fit` gives the spare capacity back.
///
/// ```
/// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
/// let mr = AnyResource::new(SystemMemoryResource::new());
/// let mut buf = DeviceBuffer::from_host(b"hello", Stream::DEFAULT, mr)?;
/// assert_eq!(buf.size(), 5);
/// buf.resize(3, Stream::DEFAULT)?; // in place: the capacity stays
/// assert_eq!((buf.size(), buf.capacity()), (3, 5));
/// assert_eq!(buf.to_vec()?, b"hel");
/// # Ok::<(), rmm_core::Error>(())
/// ```
pub struct DeviceBuffer {
    ptr: *mut u8,
    size: usize,
    capacity: usize,
    alignment: usize,
    stream: Stream,
    mr: AnyResource,
    device: Option<DeviceId>,
}

// SAFETY: the buffer exclusively owns its allocation (no other handle frees or aliases it), the
// resource handle is Send + Sync, and freeing from another thread is what resources are for
// (`MemoryResource: Send + Sync`). The raw pointer is only an address here.
unsafe impl Send for DeviceBuffer {}
// SAFETY: `&self` methods only read the buffer's fields and its memory (copies out of it); every
// mutation of the memory or of the fields takes `&mut self`.
unsafe impl Sync for DeviceBuffer {}

/// The device a new container belongs to: the current one, or `None` in host mode.
fn creation_device() -> Result<Option<DeviceId>> {
    if cuda::is_host_mode() {
        Ok(None)
    } else {
        cuda::current_device().map(Some)
    }
}

impl DeviceBuffer {
    /// An uninitialized buffer of `size` bytes with the default 256-byte alignment, allocated from
    /// `mr` on `stream`.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::new(1000, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!((buf.size(), buf.capacity(), buf.alignment()), (1000, 1000, 256));
    /// assert_eq!(buf.as_ptr() as usize % 256, 0);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `size` overflows once rounded up to the alignment; the
    /// resource's error ([`Error::OutOfMemory`], ...) otherwise.
    pub fn new(size: usize, stream: Stream, mr: AnyResource) -> Result<Self> {
        Self::with_alignment(size, DEFAULT_ALIGNMENT, stream, mr)
    }

    /// A buffer of `size` bytes from the current device's resource (RMM's default argument
    /// `mr = get_current_device_resource_ref()`); the buffer shares ownership of that resource.
    ///
    /// ```
    /// use rmm_core::{DeviceBuffer, cuda::Stream};
    /// let buf = DeviceBuffer::with_current_resource(64, Stream::DEFAULT)?;
    /// assert_eq!(buf.size(), 64);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`], and the registry's error for an invalid current device.
    pub fn with_current_resource(size: usize, stream: Stream) -> Result<Self> {
        Self::new(size, stream, crate::registry::current_resource()?)
    }

    /// Like [`DeviceBuffer::new`] with an explicit `alignment`, which must be a power of two.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, Error, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let buf = DeviceBuffer::with_alignment(64, 4096, Stream::DEFAULT, mr.clone())?;
    /// assert_eq!(buf.as_ptr() as usize % 4096, 0);
    /// let bad = DeviceBuffer::with_alignment(64, 100, Stream::DEFAULT, mr);
    /// assert!(matches!(bad, Err(Error::InvalidArgument(_))));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an alignment that is not a power of two or a size that overflows
    /// once rounded up to it; the resource's error otherwise.
    pub fn with_alignment(
        size: usize,
        alignment: usize,
        stream: Stream,
        mr: AnyResource,
    ) -> Result<Self> {
        check_alignment(alignment)?;
        if align_up(size, alignment).is_none() {
            return Err(Error::invalid(format!(
                "a buffer of {size} bytes overflows when rounded up to its {alignment}-byte alignment"
            )));
        }
        let device = creation_device()?;
        let ptr = if size == 0 {
            std::ptr::null_mut()
        } else {
            mr.allocate(stream, size, alignment)?
        };
        Ok(Self {
            ptr,
            size,
            capacity: size,
            alignment,
            stream,
            mr,
            device,
        })
    }

    /// A buffer holding a copy of `src` (the stream is synchronized before returning).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let buf = DeviceBuffer::from_host(&[1, 2, 3], Stream::DEFAULT, mr)?;
    /// assert_eq!(buf.to_vec()?, [1, 2, 3]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`], or the copy's error.
    pub fn from_host(src: &[u8], stream: Stream, mr: AnyResource) -> Result<Self> {
        let mut buf = Self::new(src.len(), stream, mr)?;
        buf.copy_from_host(src)?;
        Ok(buf)
    }

    /// A buffer holding a copy of `size` bytes at `src`, host or device memory alike (RMM's
    /// `device_buffer(void const* src, size, stream, mr)`). The copy is asynchronous on `stream`.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let data = [9u8; 16];
    /// // SAFETY: `data` is readable for 16 bytes and outlives the synchronization below.
    /// let buf = unsafe { DeviceBuffer::from_raw_copy(data.as_ptr(), 16, Stream::DEFAULT, mr)? };
    /// Stream::DEFAULT.synchronize()?;
    /// assert_eq!(buf.to_vec()?, data);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Safety
    /// `src` must be readable for `size` bytes (host memory, or device memory the current device can
    /// address) until the copy has completed on `stream`.
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`]; [`Error::InvalidArgument`] for a null `src` with `size > 0`.
    pub unsafe fn from_raw_copy(
        src: *const u8,
        size: usize,
        stream: Stream,
        mr: AnyResource,
    ) -> Result<Self> {
        // SAFETY: forwarded caller contract.
        unsafe { Self::from_raw_copy_with_alignment(src, size, DEFAULT_ALIGNMENT, stream, mr) }
    }

    /// [`DeviceBuffer::from_raw_copy`] with an explicit alignment.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let data = [1u8, 2];
    /// // SAFETY: `data` is readable for 2 bytes and outlives the synchronization below.
    /// let buf = unsafe { DeviceBuffer::from_raw_copy_with_alignment(data.as_ptr(), 2, 64, Stream::DEFAULT, mr)? };
    /// Stream::DEFAULT.synchronize()?;
    /// assert_eq!((buf.alignment(), buf.to_vec()?), (64, vec![1, 2]));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Safety
    /// As for [`DeviceBuffer::from_raw_copy`].
    ///
    /// # Errors
    /// As [`DeviceBuffer::with_alignment`]; [`Error::InvalidArgument`] for a null `src` with `size > 0`.
    pub unsafe fn from_raw_copy_with_alignment(
        src: *const u8,
        size: usize,
        alignment: usize,
        stream: Stream,
        mr: AnyResource,
    ) -> Result<Self> {
        if size > 0 && src.is_null() {
            return Err(Error::invalid("copy of a buffer from a null pointer"));
        }
        let buf = Self::with_alignment(size, alignment, stream, mr)?;
        if size > 0 {
            ensure_copyable(&buf.mr)?;
            // SAFETY: `buf` owns `size` writable bytes; the caller vouches for `src`.
            unsafe { cuda::copy_async(buf.ptr, src, size, stream)? };
        }
        Ok(buf)
    }

    /// A deep copy of the first `size()` bytes into a new buffer from `mr` on `stream`, with the same
    /// alignment and a capacity equal to the size (RMM's copy constructor). The copy is asynchronous
    /// on `stream`: work still writing `self` on another stream must be synchronized first, and `self`
    /// must not be freed on its own stream before the copy has run.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let a = DeviceBuffer::from_host(b"abc", Stream::DEFAULT, mr.clone())?;
    /// let b = a.try_clone_on(Stream::DEFAULT, mr)?;
    /// Stream::DEFAULT.synchronize()?;
    /// assert_eq!(b.to_vec()?, b"abc");
    /// assert_ne!(a.as_ptr(), b.as_ptr());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// The copy belongs to the current device, as RMM's `device_buffer` does: with several
    /// devices, make the device of `mr` current first (the copy between devices is a peer copy).
    ///
    /// # Errors
    /// The allocation's or the copy's error.
    pub fn try_clone_on(&self, stream: Stream, mr: AnyResource) -> Result<Self> {
        let copy = Self::with_alignment(self.size, self.alignment, stream, mr)?;
        if self.size > 0 {
            ensure_copyable(&self.mr)?;
            ensure_copyable(&copy.mr)?;
            // SAFETY: both allocations are live and `size` bytes long; `copy` is fresh, so they are
            // distinct. The stream-ordering caveat above is part of this method's contract.
            unsafe { cuda::copy_async(copy.ptr, self.ptr, self.size, stream)? };
        }
        Ok(copy)
    }

    /// A deep copy on this buffer's stream, sharing its resource (Python's `DeviceBuffer.copy()`).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let a = DeviceBuffer::from_host(b"xy", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let b = a.try_clone()?;
    /// assert!(b.memory_resource().ptr_eq(a.memory_resource()));
    /// assert_eq!(b.to_vec()?, b"xy");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`DeviceBuffer::try_clone_on`].
    pub fn try_clone(&self) -> Result<Self> {
        // The copy comes from this buffer's resource, which belongs to this buffer's device: made
        // with that device current, the copy is labelled (and later freed) there, whichever device
        // the caller has current.
        let _guard = self.device_guard()?;
        self.try_clone_on(self.stream, self.mr.clone())
    }

    /// The number of bytes in use.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The number of bytes allocated (at least `size()`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The alignment the memory was allocated with.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// True when `size() == 0`.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The raw (device) address of the memory; null when nothing is allocated. Only device code or the
    /// copy routines may dereference it unless the resource is host-accessible.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The raw (device) address of the memory, for writing; null when nothing is allocated.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The stream the buffer's work and its final free are ordered on.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// Orders future work and the final free on `stream`. The caller synchronizes `stream` with the
    /// old one if work is still queued there.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::new(8, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.set_stream(Stream::PER_THREAD);
    /// assert_eq!(buf.stream(), Stream::PER_THREAD);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    pub fn set_stream(&mut self, stream: Stream) {
        self.stream = stream;
    }

    /// The resource the memory came from (and is returned to).
    pub fn memory_resource(&self) -> &AnyResource {
        &self.mr
    }

    /// Makes the buffer's device current until the guard drops (nothing in host mode).
    fn device_guard(&self) -> Result<Option<DeviceGuard>> {
        self.device.map(DeviceGuard::new).transpose()
    }

    /// The device the buffer was made on; `None` in host mode.
    pub fn device(&self) -> Option<DeviceId> {
        self.device
    }

    /// Grows the capacity to at least `new_capacity` bytes, keeping the size and contents; a no-op
    /// when it is already large enough. Makes `stream` the buffer's stream first (as RMM).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::from_host(b"ab", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.reserve(100, Stream::DEFAULT)?;
    /// assert_eq!((buf.size(), buf.capacity()), (2, 100));
    /// assert_eq!(buf.to_vec()?, b"ab");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error; the buffer is unchanged then (except for its stream).
    pub fn reserve(&mut self, new_capacity: usize, stream: Stream) -> Result<()> {
        self.stream = stream;
        if new_capacity > self.capacity {
            let size = self.size;
            self.reallocate(new_capacity, stream)?;
            self.size = size;
        }
        Ok(())
    }

    /// Sets the size to `new_size` bytes. Within the capacity only the size changes (no allocation);
    /// beyond it the memory is reallocated to exactly `new_size` bytes and the contents copied on
    /// `stream`. New bytes are uninitialized. Makes `stream` the buffer's stream first (as RMM).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::from_host(b"abcd", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.resize(2, Stream::DEFAULT)?;
    /// assert_eq!((buf.size(), buf.capacity()), (2, 4));
    /// buf.resize(8, Stream::DEFAULT)?;
    /// assert_eq!((buf.size(), buf.capacity()), (8, 8));
    /// assert_eq!(&buf.to_vec()?[..2], b"ab");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error; the buffer is unchanged then (except for its stream).
    pub fn resize(&mut self, new_size: usize, stream: Stream) -> Result<()> {
        self.stream = stream;
        if new_size > self.capacity {
            self.reallocate(new_size, stream)?;
        }
        self.size = new_size;
        Ok(())
    }

    /// Reallocates to exactly `size()` bytes when the capacity is larger, copying the contents on
    /// `stream`. Makes `stream` the buffer's stream first (as RMM).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::new(100, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.resize(10, Stream::DEFAULT)?;
    /// buf.shrink_to_fit(Stream::DEFAULT)?;
    /// assert_eq!(buf.capacity(), 10);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The allocation's or the copy's error; the buffer is unchanged then (except for its stream).
    pub fn shrink_to_fit(&mut self, stream: Stream) -> Result<()> {
        self.stream = stream;
        if self.size != self.capacity {
            self.reallocate(self.size, stream)?;
        }
        Ok(())
    }

    /// Moves the first `min(size, new_capacity)` bytes into a fresh allocation of `new_capacity` bytes
    /// on the buffer's device, ordered on `stream`, and frees the old one on `stream` (which the caller
    /// has made the buffer's stream). Leaves `size` to the caller.
    fn reallocate(&mut self, new_capacity: usize, stream: Stream) -> Result<()> {
        let _guard = self.device_guard()?;
        let mut fresh =
            Self::with_alignment(new_capacity, self.alignment, stream, self.mr.clone())?;
        let keep = self.size.min(new_capacity);
        if keep > 0 {
            ensure_copyable(&self.mr)?;
            // SAFETY: both allocations are live and at least `keep` bytes long, and distinct.
            unsafe { cuda::copy_async(fresh.ptr, self.ptr, keep, stream)? };
        }
        fresh.size = keep;
        std::mem::swap(self, &mut fresh);
        // The old allocation is freed on `stream`, after the copy, while the guard still holds the device.
        drop(fresh);
        Ok(())
    }

    /// Copies the buffer into the start of `dst` and synchronizes the buffer's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::from_host(b"abc", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let mut out = [0u8; 5];
    /// buf.copy_to_host(&mut out)?;
    /// assert_eq!(&out, b"abc\0\0");
    /// assert!(buf.copy_to_host(&mut [0u8; 2]).is_err());
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dst` is shorter than `size()`; the copy's error.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<()> {
        self.copy_to_host_on(dst, self.stream)
    }

    /// [`DeviceBuffer::copy_to_host`] ordered on `stream`, which is synchronized.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::from_host(b"ab", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let mut out = [0u8; 2];
    /// buf.copy_to_host_on(&mut out, Stream::PER_THREAD)?;
    /// assert_eq!(&out, b"ab");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`DeviceBuffer::copy_to_host`].
    pub fn copy_to_host_on(&self, dst: &mut [u8], stream: Stream) -> Result<()> {
        if dst.len() < self.size {
            return Err(Error::invalid(format!(
                "the host array ({} bytes) is too small for the buffer ({} bytes)",
                dst.len(),
                self.size
            )));
        }
        if self.size == 0 {
            return Ok(());
        }
        ensure_copyable(&self.mr)?;
        // SAFETY: `dst` is writable for at least `size` bytes and borrowed until copy_sync has waited
        // for the copy; the buffer owns `size` readable bytes.
        unsafe { cuda::copy_sync(dst.as_mut_ptr(), self.ptr, self.size, stream) }
    }

    /// The contents as a new `Vec` (synchronizes the buffer's stream).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::from_host(b"hi", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// assert_eq!(buf.to_vec()?, b"hi");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The copy's error.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.size];
        self.copy_to_host(&mut out)?;
        Ok(out)
    }

    /// Copies `src` into the start of the buffer and synchronizes the buffer's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, Error, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::from_host(b"....", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.copy_from_host(b"ab")?;
    /// assert_eq!(buf.to_vec()?, b"ab..");
    /// assert!(matches!(buf.copy_from_host(b"too long"), Err(Error::InvalidArgument(_))));
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `src` is longer than `size()`; the copy's error.
    pub fn copy_from_host(&mut self, src: &[u8]) -> Result<()> {
        self.copy_from_host_on(src, self.stream)
    }

    /// [`DeviceBuffer::copy_from_host`] ordered on `stream`, which is synchronized.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::new(2, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.copy_from_host_on(b"ok", Stream::PER_THREAD)?;
    /// assert_eq!(buf.to_vec()?, b"ok");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`DeviceBuffer::copy_from_host`].
    pub fn copy_from_host_on(&mut self, src: &[u8], stream: Stream) -> Result<()> {
        if src.len() > self.size {
            return Err(Error::invalid(format!(
                "the host data ({} bytes) is too large for the buffer ({} bytes)",
                src.len(),
                self.size
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        ensure_copyable(&self.mr)?;
        // SAFETY: the buffer owns at least `src.len()` writable bytes; `src` is borrowed until
        // copy_sync has waited for the copy.
        unsafe { cuda::copy_sync(self.ptr, src.as_ptr(), src.len(), stream) }
    }

    /// Copies `bytes` bytes from `src` (device or host memory) into the start of the buffer,
    /// asynchronously on the buffer's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mr = AnyResource::new(SystemMemoryResource::new());
    /// let a = DeviceBuffer::from_host(b"xyz", Stream::DEFAULT, mr.clone())?;
    /// let mut b = DeviceBuffer::new(3, Stream::DEFAULT, mr)?;
    /// // SAFETY: `a` holds 3 bytes and outlives the synchronization below.
    /// unsafe { b.copy_from_device(a.as_ptr(), 3)? };
    /// b.stream().synchronize()?;
    /// assert_eq!(b.to_vec()?, b"xyz");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Safety
    /// `src` must be readable for `bytes` bytes until the copy has completed on the buffer's stream,
    /// and must not overlap the buffer.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `bytes > size()` or `src` is null; the copy's error.
    pub unsafe fn copy_from_device(&mut self, src: *const u8, bytes: usize) -> Result<()> {
        if bytes > self.size {
            return Err(Error::invalid(format!(
                "the source ({bytes} bytes) is too large for the buffer ({} bytes)",
                self.size
            )));
        }
        if bytes == 0 {
            return Ok(());
        }
        ensure_copyable(&self.mr)?;
        // SAFETY: the buffer owns at least `bytes` writable bytes; the caller vouches for `src`.
        unsafe { cuda::copy_async(self.ptr, src, bytes, self.stream) }
    }

    /// Sets every byte to `value`, asynchronously on the buffer's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::new(3, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.fill(7)?;
    /// assert_eq!(buf.to_vec()?, [7, 7, 7]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The driver's error.
    pub fn fill(&mut self, value: u8) -> Result<()> {
        if self.size == 0 {
            return Ok(());
        }
        ensure_copyable(&self.mr)?;
        // SAFETY: the buffer owns `size` writable bytes until it is freed, which is ordered after
        // this fill on the same stream (or the caller changed streams and synchronizes, see set_stream).
        unsafe { cuda::set_async(self.ptr, value, self.size, self.stream) }
    }

    /// Sets every byte to zero, asynchronously on the buffer's stream.
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let mut buf = DeviceBuffer::from_host(b"ab", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.set_to_zero()?;
    /// assert_eq!(buf.to_vec()?, [0, 0]);
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The driver's error.
    pub fn set_to_zero(&mut self) -> Result<()> {
        self.fill(0)
    }

    /// Migrates the memory to `device` ahead of use, ordered on `stream`
    /// ([`memory::CPU_DEVICE_ID`] for host memory); a no-op unless the memory is managed and the
    /// device supports concurrent managed access (as RMM's `prefetch`).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::new(64, Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// buf.prefetch(0, Stream::DEFAULT)?; // system memory is not managed: nothing to do
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// The driver's error.
    pub fn prefetch(&self, device: DeviceId, stream: Stream) -> Result<()> {
        memory::prefetch(self.ptr, self.size, device, stream)
    }
}

/// A [`DeviceBuffer`] taken apart ([`DeviceBuffer::into_raw_parts`]): the allocation and
/// everything needed to free it, which whoever holds the parts now owes.
#[derive(Debug)]
pub struct RawParts {
    /// The memory (null when `capacity` is 0).
    pub ptr: *mut u8,
    /// The bytes in use.
    pub size: usize,
    /// The bytes allocated from `mr` (what a free gives back).
    pub capacity: usize,
    /// The alignment the memory was allocated with.
    pub alignment: usize,
    /// The stream the memory is freed on.
    pub stream: Stream,
    /// The resource the memory came from and goes back to.
    pub mr: AnyResource,
    /// The device the memory was made on (`None` in host mode).
    pub device: Option<DeviceId>,
}

impl DeviceBuffer {
    /// Takes the buffer apart without freeing anything; the caller owns the allocation and must
    /// give it back (for example with [`DeviceBuffer::from_raw_parts`]).
    ///
    /// ```
    /// use rmm_core::{AnyResource, DeviceBuffer, cuda::Stream, mr::SystemMemoryResource};
    /// let buf = DeviceBuffer::from_host(b"abc", Stream::DEFAULT, AnyResource::new(SystemMemoryResource::new()))?;
    /// let parts = buf.into_raw_parts();
    /// assert_eq!((parts.size, parts.capacity), (3, 3));
    /// // SAFETY: the parts of a buffer, put back once.
    /// let buf = unsafe { DeviceBuffer::from_raw_parts(parts) };
    /// assert_eq!(buf.to_vec()?, b"abc");
    /// # Ok::<(), rmm_core::Error>(())
    /// ```
    pub fn into_raw_parts(self) -> RawParts {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the resource is moved out exactly once.
        let mr = unsafe { std::ptr::read(&this.mr) };
        RawParts {
            ptr: this.ptr,
            size: this.size,
            capacity: this.capacity,
            alignment: this.alignment,
            stream: this.stream,
            mr,
            device: this.device,
        }
    }

    /// A buffer that owns `parts` and frees them on drop (through `parts.mr`, on `parts.stream`
    /// and `parts.device`).
    ///
    /// # Safety
    /// `parts.ptr` is null with `capacity` 0, or was allocated from `parts.mr` with exactly
    /// `capacity` bytes and `alignment`, on `device`, and nothing else frees it; `size <= capacity`;
    /// the memory is usable on `stream`.
    pub unsafe fn from_raw_parts(parts: RawParts) -> Self {
        let RawParts {
            ptr,
            size,
            capacity,
            alignment,
            stream,
            mr,
            device,
        } = parts;
        Self {
            ptr,
            size,
            capacity,
            alignment,
            stream,
            mr,
            device,
        }
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .field("capacity", &self.capacity)
            .field("alignment", &self.alignment)
            .field("stream", &self.stream)
            .field("resource", &self.mr.name())
            .field("device", &self.device)
            .finish()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.capacity == 0 {
            return;
        }
        let _guard = match self.device.map(DeviceGuard::new) {
            Some(Ok(guard)) => Some(guard),
            Some(Err(e)) => {
                tracing::error!("freeing {:?}: could not switch to its device: {e}", self);
                None
            }
            None => None,
        };
        // SAFETY: `ptr` came from `mr` with exactly `capacity` bytes and `alignment`, is owned by this
        // buffer alone, and is freed once; queued work using it is ordered before this on `stream`.
        let freed = unsafe {
            self.mr
                .deallocate(self.stream, self.ptr, self.capacity, self.alignment)
        };
        if let Err(e) = freed {
            tracing::error!("freeing {:?}: {e}", self);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::testutil::Counting;
    use crate::mr::SystemMemoryResource;
    use crate::resource::Access;
    use proptest::prelude::*;

    fn sys() -> AnyResource {
        AnyResource::new(SystemMemoryResource::new())
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn buffers_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<DeviceBuffer>();
    }

    #[test]
    fn construction_sets_size_capacity_alignment_and_stream() {
        let mr = sys();
        let buf = DeviceBuffer::new(1000, Stream::PER_THREAD, mr.clone()).unwrap();
        assert_eq!(buf.size(), 1000);
        assert_eq!(buf.capacity(), 1000);
        assert_eq!(buf.alignment(), DEFAULT_ALIGNMENT);
        assert!(!buf.is_empty());
        assert!(!buf.as_ptr().is_null());
        assert_eq!(buf.as_ptr() as usize % DEFAULT_ALIGNMENT, 0);
        assert_eq!(buf.stream(), Stream::PER_THREAD);
        assert!(buf.memory_resource().ptr_eq(&mr));
        if cuda::is_host_mode() {
            assert_eq!(buf.device(), None);
        }
        let text = format!("{buf:?}");
        assert!(
            text.contains("system_memory_resource") && text.contains("1000"),
            "{text}"
        );
    }

    #[test]
    fn explicit_alignment_is_honoured_and_must_be_a_power_of_two() {
        for align in [1usize, 8, 512, 4096, 1 << 16] {
            let buf = DeviceBuffer::with_alignment(100, align, Stream::DEFAULT, sys()).unwrap();
            assert_eq!(buf.alignment(), align);
            assert_eq!(buf.as_ptr() as usize % align, 0);
        }
        for bad in [0usize, 3, 100, 257] {
            let e = DeviceBuffer::with_alignment(100, bad, Stream::DEFAULT, sys()).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            // SAFETY: the alignment is rejected before `src` is read.
            let e = unsafe {
                DeviceBuffer::from_raw_copy_with_alignment(
                    [0u8; 4].as_ptr(),
                    4,
                    bad,
                    Stream::DEFAULT,
                    sys(),
                )
            }
            .unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }

    #[test]
    fn zero_size_buffers_hold_null_and_never_touch_the_resource() {
        let (counter, mr) = Counting::new();
        let mut buf = DeviceBuffer::new(0, Stream::DEFAULT, mr.clone()).unwrap();
        assert!(buf.is_empty());
        assert!(buf.as_ptr().is_null());
        assert_eq!(buf.capacity(), 0);
        assert_eq!(buf.to_vec().unwrap(), Vec::<u8>::new());
        buf.copy_to_host(&mut []).unwrap();
        buf.copy_from_host(&[]).unwrap();
        buf.fill(1).unwrap();
        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
        let copy = buf.try_clone().unwrap();
        assert!(copy.as_ptr().is_null());
        let from_empty = DeviceBuffer::from_host(&[], Stream::DEFAULT, mr.clone()).unwrap();
        // SAFETY: zero bytes are read, so even a null source is fine.
        let raw = unsafe {
            DeviceBuffer::from_raw_copy(std::ptr::null(), 0, Stream::DEFAULT, mr.clone())
        }
        .unwrap();
        drop((copy, from_empty, raw));
        assert_eq!(counter.ledger.lock().unwrap().allocations, 0);
        // Growing from zero allocates; dropping frees.
        buf.resize(10, Stream::DEFAULT).unwrap();
        assert_eq!(counter.live(), 1);
        drop(buf);
        counter.assert_balanced();
    }

    #[test]
    fn size_overflow_is_a_clean_error() {
        let e = DeviceBuffer::new(usize::MAX, Stream::DEFAULT, sys()).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}");
        let e = DeviceBuffer::new(usize::MAX - 100, Stream::DEFAULT, sys()).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // Representable but impossible: the resource says out of memory.
        let e = DeviceBuffer::new(1 << 50, Stream::DEFAULT, sys()).unwrap_err();
        assert!(e.is_out_of_memory(), "{e}");
        let mut buf = DeviceBuffer::new(4, Stream::DEFAULT, sys()).unwrap();
        assert!(buf.resize(usize::MAX, Stream::DEFAULT).is_err());
        assert!(buf.reserve(usize::MAX, Stream::DEFAULT).is_err());
        assert_eq!(
            (buf.size(), buf.capacity()),
            (4, 4),
            "a failed growth leaves the buffer as it was"
        );
        // SAFETY: the null source is rejected before any copy.
        let e = unsafe { DeviceBuffer::from_raw_copy(std::ptr::null(), 4, Stream::DEFAULT, sys()) }
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn host_round_trips_of_many_sizes() {
        for n in [1usize, 2, 255, 256, 257, 4096, 1 << 20] {
            let data = pattern(n);
            let buf = DeviceBuffer::from_host(&data, Stream::DEFAULT, sys()).unwrap();
            assert_eq!(buf.size(), n);
            assert_eq!(buf.to_vec().unwrap(), data, "size {n}");
        }
    }

    #[test]
    fn copy_to_and_from_host_check_lengths() {
        let mut buf = DeviceBuffer::from_host(b"abcdef", Stream::DEFAULT, sys()).unwrap();
        let mut small = [0u8; 5];
        let e = buf.copy_to_host(&mut small).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("too small"),
            "{e}"
        );
        let mut big = [b'-'; 8];
        buf.copy_to_host(&mut big).unwrap();
        assert_eq!(&big, b"abcdef--");
        let e = buf.copy_from_host(b"1234567").unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("too large"),
            "{e}"
        );
        buf.copy_from_host(b"XY").unwrap();
        assert_eq!(buf.to_vec().unwrap(), b"XYcdef");
        buf.copy_from_host_on(b"123456", Stream::PER_THREAD)
            .unwrap();
        assert_eq!(buf.to_vec().unwrap(), b"123456");
    }

    #[test]
    fn raw_and_device_copies() {
        let src = pattern(300);
        // SAFETY: `src` is readable for 300 bytes and outlives the synchronization.
        let a = unsafe { DeviceBuffer::from_raw_copy(src.as_ptr(), 300, Stream::DEFAULT, sys()) }
            .unwrap();
        Stream::DEFAULT.synchronize().unwrap();
        assert_eq!(a.to_vec().unwrap(), src);
        let mut b = DeviceBuffer::new(400, Stream::DEFAULT, sys()).unwrap();
        b.fill(0).unwrap();
        // SAFETY: `a` holds 300 bytes, does not overlap `b`, and outlives the synchronization.
        unsafe { b.copy_from_device(a.as_ptr(), 300) }.unwrap();
        b.stream().synchronize().unwrap();
        let got = b.to_vec().unwrap();
        assert_eq!(&got[..300], &src[..]);
        assert!(got[300..].iter().all(|&x| x == 0));
        // SAFETY: rejected before reading.
        let e = unsafe { b.copy_from_device(a.as_ptr(), 401) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn deep_copies_are_independent() {
        let (counter, other_mr) = Counting::new();
        let mut a = DeviceBuffer::with_alignment(64, 1024, Stream::DEFAULT, sys()).unwrap();
        a.copy_from_host(&pattern(64)).unwrap();
        a.resize(40, Stream::DEFAULT).unwrap();
        let b = a.try_clone().unwrap();
        assert_eq!(
            (b.size(), b.capacity(), b.alignment()),
            (40, 40, 1024),
            "copies size, not capacity"
        );
        assert!(b.memory_resource().ptr_eq(a.memory_resource()));
        assert_eq!(b.stream(), a.stream());
        let c = a.try_clone_on(Stream::PER_THREAD, other_mr).unwrap();
        assert_eq!(c.stream(), Stream::PER_THREAD);
        assert_eq!(counter.live(), 1);
        assert_eq!(
            counter.ledger.lock().unwrap().live.values().next(),
            Some(&(40, 1024))
        );
        a.fill(0xff).unwrap();
        assert_eq!(b.to_vec().unwrap(), pattern(40));
        assert_eq!(c.to_vec().unwrap(), pattern(40));
        drop(c);
        counter.assert_balanced();
    }

    #[test]
    fn resize_within_capacity_is_in_place() {
        let (counter, mr) = Counting::new();
        let mut buf = DeviceBuffer::from_host(&pattern(100), Stream::DEFAULT, mr).unwrap();
        let ptr = buf.as_ptr();
        buf.resize(10, Stream::DEFAULT).unwrap();
        assert_eq!((buf.size(), buf.capacity(), buf.as_ptr()), (10, 100, ptr));
        buf.resize(100, Stream::DEFAULT).unwrap();
        assert_eq!((buf.size(), buf.capacity(), buf.as_ptr()), (100, 100, ptr));
        assert_eq!(
            buf.to_vec().unwrap(),
            pattern(100),
            "bytes beyond the size survive in place"
        );
        assert_eq!(counter.ledger.lock().unwrap().allocations, 1);
    }

    #[test]
    fn resize_beyond_capacity_reallocates_and_keeps_contents() {
        let (counter, mr) = Counting::new();
        let mut buf = DeviceBuffer::with_alignment(0, 512, Stream::DEFAULT, mr).unwrap();
        buf.resize(50, Stream::DEFAULT).unwrap();
        buf.copy_from_host(&pattern(50)).unwrap();
        buf.resize(20, Stream::DEFAULT).unwrap();
        buf.resize(200, Stream::PER_THREAD).unwrap();
        assert_eq!(
            (buf.size(), buf.capacity(), buf.alignment()),
            (200, 200, 512)
        );
        assert_eq!(buf.as_ptr() as usize % 512, 0);
        assert_eq!(buf.stream(), Stream::PER_THREAD, "resize adopts its stream");
        // Only the first `size` (20) bytes are carried over.
        assert_eq!(&buf.to_vec().unwrap()[..20], &pattern(20)[..]);
        {
            let l = counter.ledger.lock().unwrap();
            assert_eq!((l.allocations, l.deallocations), (2, 1));
            assert_eq!(
                l.last_free_stream,
                Some(Stream::PER_THREAD),
                "old memory freed on the new stream"
            );
        }
        drop(buf);
        counter.assert_balanced();
    }

    #[test]
    fn reserve_grows_capacity_only() {
        let mut buf = DeviceBuffer::from_host(b"abc", Stream::DEFAULT, sys()).unwrap();
        let ptr = buf.as_ptr();
        buf.reserve(2, Stream::DEFAULT).unwrap();
        assert_eq!(
            (buf.size(), buf.capacity(), buf.as_ptr()),
            (3, 3, ptr),
            "no-op when large enough"
        );
        buf.reserve(1000, Stream::LEGACY).unwrap();
        assert_eq!((buf.size(), buf.capacity()), (3, 1000));
        assert_eq!(buf.stream(), Stream::LEGACY);
        assert_eq!(buf.to_vec().unwrap(), b"abc");
        let ptr = buf.as_ptr();
        buf.resize(1000, Stream::DEFAULT).unwrap();
        assert_eq!(
            buf.as_ptr(),
            ptr,
            "growing into reserved capacity does not reallocate"
        );
    }

    #[test]
    fn shrink_to_fit_drops_spare_capacity() {
        let (counter, mr) = Counting::new();
        let mut buf = DeviceBuffer::from_host(&pattern(100), Stream::DEFAULT, mr).unwrap();
        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
        assert_eq!(
            counter.ledger.lock().unwrap().allocations,
            1,
            "no-op when size == capacity"
        );
        buf.resize(30, Stream::DEFAULT).unwrap();
        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
        assert_eq!((buf.size(), buf.capacity()), (30, 30));
        assert_eq!(buf.to_vec().unwrap(), pattern(30));
        buf.resize(0, Stream::DEFAULT).unwrap();
        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
        assert_eq!(buf.capacity(), 0);
        assert!(buf.as_ptr().is_null());
        assert_eq!(counter.live(), 0, "shrinking to nothing frees everything");
        drop(buf);
        counter.assert_balanced();
    }

    #[test]
    fn set_stream_is_used_for_the_final_free() {
        let (counter, mr) = Counting::new();
        let mut buf = DeviceBuffer::new(10, Stream::DEFAULT, mr).unwrap();
        assert_eq!(buf.stream(), Stream::DEFAULT);
        // SAFETY: the handle is only passed to the counting resource, which ignores it.
        let fake = unsafe { Stream::from_raw(0x5000) };
        buf.set_stream(fake);
        assert_eq!(buf.stream(), fake);
        drop(buf);
        assert_eq!(counter.ledger.lock().unwrap().last_free_stream, Some(fake));
        counter.assert_balanced();
    }

    #[test]
    fn fill_and_zero() {
        let mut buf = DeviceBuffer::new(1000, Stream::DEFAULT, sys()).unwrap();
        buf.fill(0xab).unwrap();
        assert!(buf.to_vec().unwrap().iter().all(|&b| b == 0xab));
        buf.resize(10, Stream::DEFAULT).unwrap();
        buf.set_to_zero().unwrap();
        buf.resize(1000, Stream::DEFAULT).unwrap();
        let v = buf.to_vec().unwrap();
        assert!(v[..10].iter().all(|&b| b == 0), "zeroes the size");
        assert!(v[10..].iter().all(|&b| b == 0xab), "not the spare capacity");
    }

    #[test]
    fn prefetch_of_unmanaged_memory_is_a_no_op() {
        let buf = DeviceBuffer::new(64, Stream::DEFAULT, sys()).unwrap();
        buf.prefetch(0, Stream::DEFAULT).unwrap();
    }

    #[test]
    fn buffer_keeps_its_resource_alive() {
        let mr = sys();
        assert_eq!(mr.owner_count(), 1);
        let a = DeviceBuffer::new(16, Stream::DEFAULT, mr.clone()).unwrap();
        let b = a.try_clone().unwrap();
        assert_eq!(mr.owner_count(), 3);
        drop(a);
        assert_eq!(mr.owner_count(), 2);
        drop(b);
        assert_eq!(mr.owner_count(), 1);
        // The buffer alone can keep the resource alive.
        let (counter, mr) = Counting::new();
        let buf = DeviceBuffer::new(16, Stream::DEFAULT, mr).unwrap();
        assert_eq!(std::sync::Arc::strong_count(&counter), 2);
        drop(buf);
        assert_eq!(std::sync::Arc::strong_count(&counter), 1);
        counter.assert_balanced();
    }

    #[test]
    fn drop_returns_every_allocation_with_its_size_and_alignment() {
        let (counter, mr) = Counting::new();
        {
            let mut bufs = Vec::new();
            for (i, align) in [1usize, 16, 256, 4096].into_iter().enumerate() {
                let mut b =
                    DeviceBuffer::with_alignment(100 * (i + 1), align, Stream::DEFAULT, mr.clone())
                        .unwrap();
                b.resize(7, Stream::DEFAULT).unwrap();
                b.reserve(5000, Stream::DEFAULT).unwrap();
                b.shrink_to_fit(Stream::DEFAULT).unwrap();
                bufs.push(b.try_clone().unwrap());
                bufs.push(b);
            }
            assert_eq!(counter.live(), 8);
        }
        counter.assert_balanced();
    }

    #[test]
    fn sixteen_threads_create_and_drop_concurrently() {
        let (counter, mr) = Counting::new();
        let owners = mr.owner_count();
        std::thread::scope(|s| {
            for t in 0..16usize {
                let mr = mr.clone();
                s.spawn(move || {
                    for i in 0..200usize {
                        let n = 1 + (t * 131 + i * 17) % 5000;
                        let data = vec![t as u8; n];
                        let mut buf =
                            DeviceBuffer::from_host(&data, Stream::DEFAULT, mr.clone()).unwrap();
                        buf.resize(n * 2, Stream::DEFAULT).unwrap();
                        let copy = buf.try_clone().unwrap();
                        assert_eq!(&copy.to_vec().unwrap()[..n], &data[..]);
                    }
                });
            }
        });
        assert_eq!(
            mr.owner_count(),
            owners,
            "every buffer released its resource handle"
        );
        counter.assert_balanced();
        assert_eq!(counter.ledger.lock().unwrap().allocations, 16 * 200 * 3);
    }

    #[test]
    fn buffers_move_between_threads() {
        let buf = DeviceBuffer::from_host(b"moved", Stream::DEFAULT, sys()).unwrap();
        let shared = &buf;
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(shared.to_vec().unwrap(), b"moved"));
        });
        let back = std::thread::spawn(move || buf).join().unwrap();
        assert_eq!(back.to_vec().unwrap(), b"moved");
    }

    #[test]
    fn memory_that_is_not_host_accessible_cannot_be_copied_in_host_mode() {
        if !cuda::is_host_mode() {
            return;
        }
        // Claims device-only access (its memory is really host memory, so nothing unsafe happens).
        let (counter, mr) = Counting::with_access(Access::DEVICE);
        let mut buf = DeviceBuffer::new(8, Stream::DEFAULT, mr).unwrap();
        for e in [
            buf.to_vec().unwrap_err(),
            buf.copy_from_host(b"x").unwrap_err(),
            buf.fill(0).unwrap_err(),
            buf.try_clone().unwrap_err(),
        ] {
            assert!(matches!(e, Error::NoDriver(_) | Error::NoDevice(_)), "{e}");
            assert!(e.to_string().contains("not host-accessible"), "{e}");
        }
        drop(buf);
        counter.assert_balanced();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Resize(usize),
        Reserve(usize),
        Shrink,
        Write(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..600).prop_map(Op::Resize),
            (0usize..600).prop_map(Op::Reserve),
            Just(Op::Shrink),
            any::<u8>().prop_map(Op::Write),
        ]
    }

    proptest! {
        /// The buffer behaves like a `Vec<u8>` whose new bytes are unspecified: the first
        /// `min(old, new)` bytes always survive, and capacity follows RMM's rules.
        #[test]
        fn behaves_like_a_vec(ops in proptest::collection::vec(op(), 1..40)) {
            let (counter, mr) = Counting::new();
            let mut buf = DeviceBuffer::new(0, Stream::DEFAULT, mr).unwrap();
            let mut model: Vec<u8> = Vec::new();
            for op in ops {
                let old_cap = buf.capacity();
                match op {
                    Op::Resize(n) => {
                        buf.resize(n, Stream::DEFAULT).unwrap();
                        prop_assert_eq!(buf.capacity(), if n <= old_cap { old_cap } else { n });
                        if n > model.len() {
                            let valid = model.len();
                            model.resize(n, 0);
                            // Define the new bytes so the model can compare them.
                            let mut bytes = buf.to_vec().unwrap();
                            bytes[valid..].iter_mut().for_each(|b| *b = 0);
                            buf.copy_from_host(&bytes).unwrap();
                        } else {
                            model.truncate(n);
                        }
                    }
                    Op::Reserve(n) => {
                        buf.reserve(n, Stream::DEFAULT).unwrap();
                        prop_assert_eq!(buf.capacity(), old_cap.max(n));
                    }
                    Op::Shrink => {
                        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
                        prop_assert_eq!(buf.capacity(), model.len());
                    }
                    Op::Write(v) => {
                        buf.fill(v).unwrap();
                        model.iter_mut().for_each(|b| *b = v);
                    }
                }
                prop_assert_eq!(buf.size(), model.len());
                prop_assert!(buf.capacity() >= buf.size());
                prop_assert_eq!(buf.to_vec().unwrap(), model.clone());
                prop_assert_eq!(counter.live(), usize::from(buf.capacity() > 0));
            }
            drop(buf);
            counter.assert_balanced();
        }
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

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn host_device_round_trips_from_1_byte_to_64_mib() {
        require_gpu();
        let mut n = 1usize;
        while n <= 64 << 20 {
            for size in [n, n + 1, n.saturating_sub(1).max(1)] {
                let data = pattern(size, size as u8);
                let buf = DeviceBuffer::from_host(&data, Stream::DEFAULT, device_mr()).unwrap();
                assert_eq!(buf.device(), Some(cuda::current_device().unwrap()));
                assert_eq!(buf.as_ptr() as usize % DEFAULT_ALIGNMENT, 0);
                assert_eq!(buf.to_vec().unwrap(), data, "size {size}");
            }
            n *= 4;
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn managed_memory_is_prefetched_to_the_cpu_and_back() {
        require_gpu();
        let data = pattern(1 << 20, 9);
        let managed = AnyResource::new(crate::mr::ManagedMemoryResource::new());
        let buf = DeviceBuffer::from_host(&data, Stream::DEFAULT, managed).unwrap();
        let device = cuda::current_device().unwrap();
        buf.prefetch(memory::CPU_DEVICE_ID, Stream::DEFAULT)
            .unwrap();
        buf.prefetch(device, Stream::DEFAULT).unwrap();
        Stream::DEFAULT.synchronize().unwrap();
        assert_eq!(buf.to_vec().unwrap(), data);
        let count = cuda::device_count().unwrap();
        if cuda::device::supports_concurrent_managed_access(device) {
            assert!(
                buf.prefetch(count + 7, Stream::DEFAULT).is_err(),
                "a device that does not exist"
            );
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn device_to_device_copies() {
        require_gpu();
        let data = pattern(1 << 20, 5);
        let a = DeviceBuffer::from_host(&data, Stream::DEFAULT, device_mr()).unwrap();
        let b = a.try_clone().unwrap();
        let mut c = DeviceBuffer::new(1 << 20, Stream::DEFAULT, device_mr()).unwrap();
        // SAFETY: `a` is live device memory of that size until the synchronization below.
        unsafe { c.copy_from_device(a.as_ptr(), 1 << 20).unwrap() };
        // SAFETY: as above.
        let d = unsafe {
            DeviceBuffer::from_raw_copy(a.as_ptr(), 1 << 20, Stream::DEFAULT, device_mr())
        }
        .unwrap();
        Stream::DEFAULT.synchronize().unwrap();
        for buf in [&b, &c, &d] {
            assert_eq!(buf.to_vec().unwrap(), data);
        }
        // A host-memory source through the raw constructor too.
        // SAFETY: `data` outlives the synchronization.
        let e = unsafe {
            DeviceBuffer::from_raw_copy(data.as_ptr(), data.len(), Stream::DEFAULT, device_mr())
        }
        .unwrap();
        Stream::DEFAULT.synchronize().unwrap();
        assert_eq!(e.to_vec().unwrap(), data);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn resize_reserve_shrink_preserve_contents() {
        require_gpu();
        let data = pattern(10_000, 9);
        let mut buf = DeviceBuffer::from_host(&data, Stream::DEFAULT, device_mr()).unwrap();
        buf.resize(50_000, Stream::DEFAULT).unwrap();
        assert_eq!(&buf.to_vec().unwrap()[..10_000], &data[..]);
        buf.resize(5_000, Stream::DEFAULT).unwrap();
        buf.reserve(1 << 20, Stream::DEFAULT).unwrap();
        assert_eq!(buf.capacity(), 1 << 20);
        buf.shrink_to_fit(Stream::DEFAULT).unwrap();
        assert_eq!(buf.capacity(), 5_000);
        assert_eq!(buf.to_vec().unwrap(), &data[..5_000]);
        buf.fill(0x5a).unwrap();
        assert!(buf.to_vec().unwrap().iter().all(|&b| b == 0x5a));
        buf.set_to_zero().unwrap();
        assert!(buf.to_vec().unwrap().iter().all(|&b| b == 0));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn several_streams() {
        require_gpu();
        let streams: Vec<OwnedStream> = (0..4)
            .map(|_| OwnedStream::new(StreamFlags::NonBlocking).unwrap())
            .collect();
        let mut bufs = Vec::new();
        for (i, s) in streams.iter().enumerate() {
            let data = pattern(1 << 16, i as u8);
            let mut buf = DeviceBuffer::new(1 << 16, s.stream(), device_mr()).unwrap();
            buf.copy_from_host(&data).unwrap();
            let copy = buf.try_clone().unwrap();
            buf.fill(i as u8).unwrap();
            bufs.push((buf, copy, data));
        }
        for (i, (buf, copy, data)) in bufs.iter_mut().enumerate() {
            assert_eq!(copy.to_vec().unwrap(), *data);
            assert!(buf.to_vec().unwrap().iter().all(|&b| b == i as u8));
            // Hand the buffer to another stream: synchronize the old one first.
            buf.stream().synchronize().unwrap();
            buf.set_stream(streams[(i + 1) % streams.len()].stream());
            buf.resize(1 << 17, buf.stream()).unwrap();
            assert!(buf.to_vec().unwrap()[..1 << 16]
                .iter()
                .all(|&b| b == i as u8));
        }
        for s in &streams {
            s.synchronize().unwrap();
        }
        drop(bufs);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn buffer_made_on_device_0_is_freed_there_with_device_1_current() {
        if !crate::testing::two_devices(
            "buffer_made_on_device_0_is_freed_there_with_device_1_current",
        ) {
            return;
        }
        cuda::set_current_device(0).unwrap();
        let data = pattern(1 << 20, 1);
        let mut buf = DeviceBuffer::from_host(&data, Stream::DEFAULT, device_mr()).unwrap();
        assert_eq!(buf.device(), Some(0));
        cuda::set_current_device(1).unwrap();
        // Growth reallocates on the buffer's device, not the current one.
        buf.resize(2 << 20, Stream::DEFAULT).unwrap();
        assert_eq!(buf.device(), Some(0));
        assert_eq!(
            cuda::current_device().unwrap(),
            1,
            "the current device is restored"
        );
        assert_eq!(&buf.to_vec().unwrap()[..1 << 20], &data[..]);
        let (free_before, _) = cuda::mem_info(0).unwrap();
        drop(buf);
        assert_eq!(
            cuda::current_device().unwrap(),
            1,
            "drop restores the current device"
        );
        let (free_after, _) = cuda::mem_info(0).unwrap();
        assert!(free_after >= free_before, "device 0 memory was returned");
        cuda::set_current_device(0).unwrap();
    }
}
