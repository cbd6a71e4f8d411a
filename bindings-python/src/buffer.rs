//! Bindings for `rmm_core::buffer::DeviceBuffer`: RMM's `rmm.pylibrmm.device_buffer` (`DeviceBuffer`,
//! `to_device`, `copy_ptr_to_host`, `copy_host_to_ptr`, `copy_device_to_ptr`).
//!
//! A `DeviceBuffer` keeps the `Stream` and the memory resource object it was made with (as RMM
//! does), so neither goes away while the buffer lives. Copies to or from host memory on the default
//! stream synchronize it (RMM's rule); on another stream they are asynchronous. Allocation, copies
//! and the final free run without the GIL; the free is ordered on the buffer's stream.
//!
//! Host arrays are read and written through the buffer protocol (`hostbuf.rs`); `copy_to_host()`
//! without an array returns a NumPy `uint8` array as RMM does, or a `bytearray` when NumPy is not
//! installed (an rmm-rs fallback for host-only environments).
//!
//! The class is frozen: its memory sits behind a read-write lock, so any number of threads may use
//! one buffer at once (readers share it; `resize`, `reserve`, `_to_capsule` and the copies into it
//! take it alone), where PyO3's borrow flag would raise "Already mutably borrowed". A thread that
//! waits for the lock lets go of the GIL meanwhile. Zero-copy exports (DLPack capsules, views) are
//! counted; while one lives, `resize`, `reserve` and `_to_capsule` raise `BufferError`, as
//! `bytearray` does, so no consumer is left reading freed memory.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, PyOnceLock, RwLockExt};
use pyo3::types::{PyBytes, PyDict, PyTuple};
use pyo3::{PyTraverseError, PyVisit};
use rmm_core::cuda::{self, Stream};
use rmm_core::{registry, DeviceBuffer, Result};

use crate::error::{clear_parked, IntoPyResult};
use crate::hostbuf::HostBuffer;
use crate::mr::PyDeviceMemoryResource;
use crate::registry::current_resource_object;
use crate::stream::{PyStream, StreamArg};

/// Copies `bytes` bytes from `src` to `dst` on `stream` without the GIL, then synchronizes the
/// stream when it is the default one (RMM's rule for host copies) or when `sync` is set.
fn copy(
    py: Python<'_>,
    dst: usize,
    src: usize,
    bytes: usize,
    stream: Stream,
    sync: bool,
) -> PyResult<()> {
    py.detach(|| -> Result<()> {
        // SAFETY: the callers pass ranges that stay valid until the copy completes: a live buffer's
        // memory or a host buffer exported for the duration of this call (synchronized below), or
        // raw device pointers whose validity is the Python caller's contract, as in RMM.
        unsafe { cuda::copy_async(dst as *mut u8, src as *const u8, bytes, stream)? };
        if sync || stream.is_default() {
            stream.synchronize()?;
        }
        Ok(())
    })
    .into_py_result()
}

/// RMM's TypeError for a missing host buffer.
fn none_buffer(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if obj.is_none() {
        return Err(PyTypeError::new_err(format!(
            "Argument `{name}` has incorrect type (expected bytes-like, got NoneType)"
        )));
    }
    Ok(())
}

/// Device memory owned by Python (RMM's `rmm.DeviceBuffer`).
///
/// `DeviceBuffer(*, ptr=0, size=0, stream=DEFAULT_STREAM, mr=None)`: `size` bytes from `mr` (default:
/// the current device resource), filled with a copy of `size` bytes at `ptr` (host or device) when
/// `ptr` is not 0.
#[pyclass(
    module = "rmm.pylibrmm.device_buffer",
    name = "DeviceBuffer",
    subclass,
    weakref,
    frozen
)]
pub(crate) struct PyDeviceBuffer {
    /// `None` only while being dropped.
    buf: RwLock<Option<DeviceBuffer>>,
    /// Replaced by `resize` and `reserve`; locked only briefly, never across a GIL release.
    stream: Mutex<Py<PyStream>>,
    mr: Py<PyAny>,
    /// Live zero-copy exports of the memory ([`BufferExport`]).
    exports: AtomicUsize,
}

/// The buffer, shared with other readers while held.
pub(crate) struct Reading<'a>(RwLockReadGuard<'a, Option<DeviceBuffer>>);

impl Deref for Reading<'_> {
    type Target = DeviceBuffer;
    fn deref(&self) -> &DeviceBuffer {
        self.0
            .as_ref()
            .expect("a DeviceBuffer is only emptied by its drop")
    }
}

/// The buffer, held alone.
struct Writing<'a>(RwLockWriteGuard<'a, Option<DeviceBuffer>>);

impl Deref for Writing<'_> {
    type Target = DeviceBuffer;
    fn deref(&self) -> &DeviceBuffer {
        self.0
            .as_ref()
            .expect("a DeviceBuffer is only emptied by its drop")
    }
}

impl DerefMut for Writing<'_> {
    fn deref_mut(&mut self) -> &mut DeviceBuffer {
        self.0
            .as_mut()
            .expect("a DeviceBuffer is only emptied by its drop")
    }
}

/// A live zero-copy export of a buffer's memory (a DLPack capsule's tensor, a view): keeps the
/// buffer alive and counted, so it cannot be resized or moved until this is dropped.
pub(crate) struct BufferExport(Py<PyDeviceBuffer>);

impl BufferExport {
    /// Counts an export of `buffer`, whose memory the caller reads under `_held` (so no `resize`
    /// can slip in between the read and the count).
    pub(crate) fn new(buffer: &Bound<'_, PyDeviceBuffer>, _held: &Reading<'_>) -> Self {
        buffer.get().exports.fetch_add(1, Ordering::AcqRel);
        Self(buffer.clone().unbind())
    }

    /// The exported buffer (for a view's `__traverse__`).
    pub(crate) fn buffer(&self) -> &Py<PyDeviceBuffer> {
        &self.0
    }
}

impl Drop for BufferExport {
    fn drop(&mut self) {
        self.0.get().exports.fetch_sub(1, Ordering::AcqRel);
    }
}

impl PyDeviceBuffer {
    fn from_parts(buf: DeviceBuffer, stream: Py<PyStream>, mr: Py<PyAny>) -> Self {
        Self {
            buf: RwLock::new(Some(buf)),
            stream: Mutex::new(stream),
            mr,
            exports: AtomicUsize::new(0),
        }
    }

    /// The buffer for reading (view.rs: DLPack export); waits without the GIL for a writer.
    pub(crate) fn read(&self, py: Python<'_>) -> Reading<'_> {
        Reading(
            self.buf
                .read_py_attached(py)
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn write(&self, py: Python<'_>) -> Writing<'_> {
        Writing(
            self.buf
                .write_py_attached(py)
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The buffer held alone, for an operation that replaces or moves its memory: `BufferError`
    /// while an export lives (as `bytearray.resize` raises).
    fn write_unexported(&self, py: Python<'_>) -> PyResult<Writing<'_>> {
        let held = self.write(py);
        // Exports are counted under the read lock, so none can start while this is held.
        if self.exports.load(Ordering::Acquire) != 0 {
            return Err(PyBufferError::new_err(
                "Existing exports of data: object cannot be re-sized",
            ));
        }
        Ok(held)
    }

    fn stream_object(&self, py: Python<'_>) -> Py<PyStream> {
        self.stream
            .lock_py_attached(py)
            .unwrap_or_else(PoisonError::into_inner)
            .clone_ref(py)
    }

    fn set_stream(&self, py: Python<'_>, stream: Py<PyStream>) {
        let old = std::mem::replace(
            &mut *self
                .stream
                .lock_py_attached(py)
                .unwrap_or_else(PoisonError::into_inner),
            stream,
        );
        drop(old);
    }

    /// The buffer's stream handle.
    fn own_stream(&self, py: Python<'_>) -> Stream {
        self.stream_object(py).bind(py).get().stream()
    }

    /// A deep copy (`copy()`), for view.rs (DLPack export with `copy=True`).
    pub(crate) fn copy_for_export(&self, py: Python<'_>) -> PyResult<Self> {
        self.copy(py)
    }

    /// A buffer of `size` bytes, with a copy of `size` bytes at `ptr` unless `ptr` is 0.
    fn create(
        py: Python<'_>,
        ptr: usize,
        size: usize,
        stream: &StreamArg,
        mr: Option<Bound<'_, PyDeviceMemoryResource>>,
    ) -> PyResult<Self> {
        let mr = match mr {
            Some(mr) => mr.into_any().unbind(),
            None => current_resource_object(py)?,
        };
        let resource = mr
            .bind(py)
            .cast::<PyDeviceMemoryResource>()?
            .get()
            .inner
            .clone();
        let handle = stream.stream(py);
        if size == 0 {
            // Nothing is allocated or copied, so nothing can block or call back: no GIL round trip.
            let buf = DeviceBuffer::new(0, handle, resource).into_py_alloc_result()?;
            return Ok(Self::from_parts(buf, stream.object(py)?, mr));
        }
        clear_parked();
        let _frames = crate::timeline::frames_for_detach(py);
        let buf = py
            .detach(|| -> Result<DeviceBuffer> {
                if ptr == 0 {
                    return DeviceBuffer::new(size, handle, resource);
                }
                // SAFETY: RMM's contract for `ptr`: `size` readable bytes (host or device) that stay
                // valid until the copy completes (the default stream is synchronized below).
                let buf = unsafe {
                    DeviceBuffer::from_raw_copy(ptr as *const u8, size, handle, resource)?
                };
                if handle.is_default() {
                    handle.synchronize()?;
                }
                Ok(buf)
            })
            .into_py_alloc_result()?;
        Ok(Self::from_parts(buf, stream.object(py)?, mr))
    }

    /// A Python buffer that owns `buf` (capsule.rs), with its stream and its resource's object.
    pub(crate) fn adopt(py: Python<'_>, buf: DeviceBuffer) -> PyResult<Self> {
        let stream = if buf.stream().is_default() {
            crate::stream::default_stream(py)?
        } else {
            Py::new(py, PyStream::from_raw(buf.stream().as_raw(), None))?
        };
        let mr = crate::mr::wrap(py, buf.memory_resource().clone())?;
        Ok(Self::from_parts(buf, stream, mr))
    }

    fn copy_to_host_impl<'py>(
        &self,
        py: Python<'py>,
        ary: Option<Bound<'py, PyAny>>,
        stream: &StreamArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ary = match ary.filter(|a| !a.is_none()) {
            Some(ary) => ary,
            // Made before the buffer is held: NumPy may run any Python code (a collection, say).
            None => {
                let size = self.read(py).size();
                match py.import("numpy") {
                    Ok(np) => np.call_method1("empty", ((size,), "u1"))?,
                    Err(_) => pyo3::types::PyByteArray::new(py, &vec![0; size]).into_any(),
                }
            }
        };
        let host = HostBuffer::get(&ary, true)?;
        let buf = self.read(py);
        let size = buf.size();
        if host.len() < size {
            return Err(PyValueError::new_err(format!(
                "Argument `ary` is too small. Need space for {size} bytes."
            )));
        }
        copy(
            py,
            host.addr(),
            buf.as_ptr() as usize,
            size,
            stream.stream(py),
            false,
        )?;
        drop(buf);
        drop(host);
        Ok(ary)
    }

    /// Visits the Python objects the buffer holds, for the cycle collector (RMM's DeviceBuffer is
    /// traversed too, and, as RMM's `no_gc_clear` class, never cleared: its resource must outlive
    /// the memory). A stream being replaced at this moment is skipped, which only delays a collection.
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.mr)?;
        if let Ok(stream) = self.stream.try_lock() {
            visit.call(&*stream)?;
        }
        Ok(())
    }
}

impl Drop for PyDeviceBuffer {
    fn drop(&mut self) {
        match self
            .buf
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            // Nothing to free (empty, or moved out): no GIL round trip.
            Some(buf) if buf.capacity() == 0 => drop(buf),
            // The free may block (a pool, a synchronizing driver call) or call back into Python (a
            // callback resource): without the GIL, as RMM's `__dealloc__`. (PyO3 runs this drop
            // with the GIL held, so `attach` only counts it.)
            Some(buf) => Python::attach(|py| py.detach(move || drop(buf))),
            None => {}
        }
    }
}

#[pymethods]
impl PyDeviceBuffer {
    #[new]
    #[pyo3(signature = (*, ptr = 0, size = 0, stream = StreamArg::Default, mr = None))]
    fn py_new(
        py: Python<'_>,
        ptr: usize,
        size: usize,
        stream: StreamArg,
        mr: Option<Bound<'_, PyDeviceMemoryResource>>,
    ) -> PyResult<Self> {
        Self::create(py, ptr, size, &stream, mr)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.traverse(&visit)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.read(py).size()
    }

    fn __sizeof__(&self, py: Python<'_>) -> usize {
        self.read(py).size()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.tobytes(py, StreamArg::Default)
    }

    /// The size in bytes.
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> usize {
        self.read(py).size()
    }

    /// The device address as an int (0 when nothing is allocated).
    #[getter]
    fn ptr(&self, py: Python<'_>) -> usize {
        self.read(py).as_ptr() as usize
    }

    /// The size in bytes.
    #[getter]
    fn size(&self, py: Python<'_>) -> usize {
        self.read(py).size()
    }

    /// The CUDA array interface as RMM exports it: one-dimensional bytes, version 0.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (ptr, size) = {
            let buf = self.read(py);
            (buf.as_ptr() as usize, buf.size())
        };
        let intf = PyDict::new(py);
        intf.set_item("data", (ptr, false))?;
        intf.set_item("shape", (size,))?;
        intf.set_item("strides", py.None())?;
        intf.set_item("typestr", "|u1")?;
        intf.set_item("version", 0)?;
        Ok(intf)
    }

    /// DLPack export: a uint8 1-D tensor of `nbytes`, zero-copy; the capsule keeps the buffer (and
    /// its resource) alive, and the buffer cannot be resized until the consumer lets it go. See
    /// `view.rs` (`buffer_dlpack`).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::view::buffer_dlpack(slf, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)` of DLPack: `(1, 0)` (kDLCPU) in host mode, `(2, device)` for
    /// device memory, `(13, device)` for managed and `(3, 0)` for pinned host memory.
    fn __dlpack_device__(&self, py: Python<'_>) -> (i32, i32) {
        crate::view::buffer_dlpack_device(&self.read(py))
    }

    /// Pickling as RMM pickles: `rmm.pylibrmm.device_buffer.to_device(self.copy_to_host())`
    /// (out-of-band with protocol 5 through the array), so RMM and rmm-rs load each other's pickles.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let host = slf.get().copy_to_host_impl(py, None, &StreamArg::Default)?;
        let to_device = TO_DEVICE
            .get(py)
            .ok_or_else(|| PyValueError::new_err("rmm._rmm is not initialized"))?;
        PyTuple::new(
            py,
            [
                to_device.clone_ref(py).into_bound(py),
                PyTuple::new(py, [host])?.into_any(),
            ],
        )
    }

    /// Prefetches managed memory to `device` (default: the current device; `cudaCpuDeviceId`, -1,
    /// for host memory) on `stream` (default: the buffer's stream); a no-op for memory that is not
    /// managed and where the device lacks concurrent managed access, as in RMM.
    #[pyo3(signature = (device = None, stream = None))]
    fn prefetch(
        &self,
        py: Python<'_>,
        device: Option<i32>,
        stream: Option<StreamArg>,
    ) -> PyResult<()> {
        let stream = match stream {
            Some(s) => s.stream(py),
            None => self.own_stream(py),
        };
        let device = device
            .map_or_else(registry::current_device_or_host, Ok)
            .into_py_result()?;
        let buf = self.read(py);
        let buf = &*buf;
        py.detach(|| buf.prefetch(device, stream)).into_py_result()
    }

    /// A deep copy on the buffer's stream, from the same memory resource.
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        let stream_object = self.stream_object(py);
        let stream = stream_object.bind(py).get().stream();
        let buf = self.read(py);
        let source = &*buf;
        let resource = source.memory_resource().clone();
        let copied = py
            .detach(|| -> Result<DeviceBuffer> {
                let copied = source.try_clone_on(stream, resource)?;
                if stream.is_default() {
                    stream.synchronize()?;
                }
                Ok(copied)
            })
            .into_py_result()?;
        drop(buf);
        Ok(Self::from_parts(
            copied,
            stream_object,
            self.mr.clone_ref(py),
        ))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Self> {
        self.copy(py)
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<Self> {
        self.copy(py)
    }

    /// A new buffer (current device resource) with a copy of the bytes of `b`, a C-contiguous
    /// one-dimensional buffer of unsigned bytes.
    #[staticmethod]
    #[pyo3(signature = (b, stream = StreamArg::Default))]
    fn to_device(py: Python<'_>, b: &Bound<'_, PyAny>, stream: StreamArg) -> PyResult<Self> {
        to_device_impl(py, b, &stream)
    }

    /// Copies the buffer into `ary` (a writable bytes-like object at least as large) or, without
    /// `ary`, into a new NumPy `uint8` array; returns it.
    #[pyo3(signature = (ary = None, stream = StreamArg::Default))]
    fn copy_to_host<'py>(
        &self,
        py: Python<'py>,
        ary: Option<Bound<'py, PyAny>>,
        stream: StreamArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.copy_to_host_impl(py, ary, &stream)
    }

    /// Copies the bytes of `ary` (no larger than the buffer) to the start of the buffer.
    #[pyo3(signature = (ary, stream = StreamArg::Default))]
    fn copy_from_host(
        &self,
        py: Python<'_>,
        ary: &Bound<'_, PyAny>,
        stream: StreamArg,
    ) -> PyResult<()> {
        let host = HostBuffer::get(ary, false)?;
        let mut buf = self.write(py);
        let size = buf.size();
        if host.len() > size {
            return Err(PyValueError::new_err(format!(
                "Argument `ary` is too large. Need space for {size} bytes."
            )));
        }
        let dst = buf.as_mut_ptr() as usize;
        copy(py, dst, host.addr(), host.len(), stream.stream(py), false)
    }

    /// Copies the contents of `cuda_ary` (an object with `__cuda_array_interface__`, one-dimensional
    /// and contiguous, no larger than the buffer) to the start of the buffer. The item size comes
    /// from NumPy's reading of `typestr`, as in RMM (datetimes, timedeltas and strings included).
    #[pyo3(signature = (cuda_ary, stream = StreamArg::Default))]
    fn copy_from_device(
        &self,
        py: Python<'_>,
        cuda_ary: &Bound<'_, PyAny>,
        stream: StreamArg,
    ) -> PyResult<()> {
        let stream = stream.stream(py);
        if !cuda_ary.hasattr("__cuda_array_interface__")? {
            return Err(PyValueError::new_err(
                "Expected object to support `__cuda_array_interface__` protocol",
            ));
        }
        let intf = cuda_ary.getattr("__cuda_array_interface__")?;
        let shape: Vec<usize> = intf.get_item("shape")?.extract()?;
        let itemsize = typestr_itemsize(&intf.get_item("typestr")?)?;
        if shape.len() > 1 {
            return Err(PyValueError::new_err(format!(
                "Only 1-D contiguous arrays are supported, got {}-D array",
                shape.len()
            )));
        }
        let strides = intf.call_method1("get", ("strides",))?;
        if !strides.is_none() {
            let strides: Vec<isize> = strides.extract()?;
            if strides.first().is_some_and(|&s| s != itemsize as isize) {
                return Err(PyValueError::new_err(
                    "Only 1-D contiguous arrays are supported, got a non-contiguous array",
                ));
            }
        }
        let src: usize = intf.get_item("data")?.get_item(0)?.extract()?;
        let bytes = shape
            .first()
            .copied()
            .unwrap_or(1)
            .checked_mul(itemsize)
            .ok_or_else(|| PyValueError::new_err("the array's size in bytes overflows"))?;
        let mut buf = self.write(py);
        if bytes > buf.size() {
            return Err(PyValueError::new_err(format!(
                "Argument `hb` is too large. Need space for {bytes} bytes."
            )));
        }
        let dst = buf.as_mut_ptr() as usize;
        py.detach(|| {
            // SAFETY: `src` is the exporter's device memory of `bytes` bytes (its interface, the
            // caller's contract as in RMM); the destination is this live buffer's memory, held.
            unsafe { cuda::copy_async(dst as *mut u8, src as *const u8, bytes, stream) }
        })
        .into_py_result()
    }

    /// The contents as `bytes` (the copy is complete when this returns, whatever the stream).
    #[pyo3(signature = (stream = StreamArg::Default))]
    fn tobytes<'py>(&self, py: Python<'py>, stream: StreamArg) -> PyResult<Bound<'py, PyBytes>> {
        let stream = stream.stream(py);
        let buf = self.read(py);
        let src = buf.as_ptr() as usize;
        PyBytes::new_with(py, buf.size(), |out| {
            let (dst, bytes) = (out.as_mut_ptr() as usize, out.len());
            copy(py, dst, src, bytes, stream, true)
        })
    }

    /// Makes room for `new_capacity` bytes (the size and contents stay); `stream` becomes the
    /// buffer's stream. `BufferError` while an export of the memory lives.
    #[pyo3(signature = (new_capacity, stream = StreamArg::Default))]
    fn reserve(&self, py: Python<'_>, new_capacity: usize, stream: StreamArg) -> PyResult<()> {
        let handle = stream.stream(py);
        let mut held = self.write_unexported(py)?;
        let buf = &mut *held;
        py.detach(|| buf.reserve(new_capacity, handle))
            .into_py_result()?;
        drop(held);
        self.set_stream(py, stream.object(py)?);
        Ok(())
    }

    /// Sets the size to `new_size` bytes (reallocating beyond the capacity; new bytes are
    /// uninitialized); `stream` becomes the buffer's stream. `BufferError` while an export of the
    /// memory lives.
    #[pyo3(signature = (new_size, stream = StreamArg::Default))]
    fn resize(&self, py: Python<'_>, new_size: usize, stream: StreamArg) -> PyResult<()> {
        let handle = stream.stream(py);
        let mut held = self.write_unexported(py)?;
        let buf = &mut *held;
        py.detach(|| buf.resize(new_size, handle))
            .into_py_result()?;
        drop(held);
        self.set_stream(py, stream.object(py)?);
        Ok(())
    }

    /// The bytes allocated (at least the size).
    fn capacity(&self, py: Python<'_>) -> usize {
        self.read(py).capacity()
    }

    /// A `DeviceBuffer` that adopts the memory of a `"rmm.device_buffer.v1"` capsule made by C++,
    /// Rust or another module, with no copy (RMM's `c_from_unique_ptr`); the capsule is used up.
    /// Raises TypeError for anything else, ValueError for a used or invalid capsule.
    #[staticmethod]
    fn _from_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Self> {
        let buf = rmm::python::buffer_from_capsule(capsule)?;
        Self::adopt(py, buf)
    }

    /// Moves the memory into a new `"rmm.device_buffer.v1"` capsule (no copy) and leaves this
    /// buffer empty, as RMM's `c_release`. `BufferError` while an export of the memory lives.
    fn _to_capsule(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut held = self.write_unexported(py)?;
        let buf = &mut *held;
        let empty =
            DeviceBuffer::new(0, buf.stream(), buf.memory_resource().clone()).into_py_result()?;
        let moved = std::mem::replace(buf, empty);
        drop(held);
        rmm::python::buffer_to_capsule(py, moved)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let buf = self.read(py);
        format!(
            "<rmm.DeviceBuffer size={} ptr={:#x}>",
            buf.size(),
            buf.as_ptr() as usize
        )
    }
}

/// The item size of a CUDA Array Interface `typestr`, as NumPy reads it (RMM calls
/// `numpy.dtype(typestr).itemsize`); without NumPy, the digits after the kind (times 4 for `U`,
/// whose digits count characters), which covers `<M8[ns]` and `<m8[s]` too.
fn typestr_itemsize(typestr: &Bound<'_, PyAny>) -> PyResult<usize> {
    let py = typestr.py();
    if let Ok(np) = py.import("numpy") {
        return np
            .getattr("dtype")?
            .call1((typestr,))?
            .getattr("itemsize")?
            .extract();
    }
    let text: String = typestr.extract()?;
    let unreadable =
        || PyValueError::new_err(format!("cannot read the item size of typestr {text:?}"));
    let mut chars = text.chars();
    let (_, kind) = (
        chars.next().ok_or_else(unreadable)?,
        chars.next().ok_or_else(unreadable)?,
    );
    let digits: String = chars.take_while(char::is_ascii_digit).collect();
    let count: usize = digits.parse().map_err(|_| unreadable())?;
    Ok(if kind == 'U' { count * 4 } else { count })
}

/// `rmm._rmm.to_device`, whose `__module__` is `rmm.pylibrmm.device_buffer` (RMM's), for pickles.
static TO_DEVICE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn to_device_impl(
    py: Python<'_>,
    b: &Bound<'_, PyAny>,
    stream: &StreamArg,
) -> PyResult<PyDeviceBuffer> {
    none_buffer("b", b)?;
    let host = HostBuffer::get(b, false)?;
    let buffer = PyDeviceBuffer::create(py, host.addr(), host.len(), stream, None)?;
    drop(host);
    Ok(buffer)
}

/// A new `DeviceBuffer` with a copy of the bytes of `b` (RMM's `rmm.pylibrmm.device_buffer.to_device`).
#[pyfunction]
#[pyo3(signature = (b, stream = StreamArg::Default))]
fn to_device(py: Python<'_>, b: &Bound<'_, PyAny>, stream: StreamArg) -> PyResult<PyDeviceBuffer> {
    to_device_impl(py, b, &stream)
}

/// Copies `len(hb)` bytes from device address `db` into the writable bytes-like `hb`.
#[pyfunction]
#[pyo3(signature = (db, hb, stream = StreamArg::Default))]
fn copy_ptr_to_host(
    py: Python<'_>,
    db: usize,
    hb: &Bound<'_, PyAny>,
    stream: StreamArg,
) -> PyResult<()> {
    none_buffer("hb", hb)?;
    let host = HostBuffer::get(hb, true)?;
    copy(py, host.addr(), db, host.len(), stream.stream(py), false)
}

/// Copies the bytes of `hb` to device address `db`.
#[pyfunction]
#[pyo3(signature = (hb, db, stream = StreamArg::Default))]
fn copy_host_to_ptr(
    py: Python<'_>,
    hb: &Bound<'_, PyAny>,
    db: usize,
    stream: StreamArg,
) -> PyResult<()> {
    none_buffer("hb", hb)?;
    let host = HostBuffer::get(hb, false)?;
    copy(py, db, host.addr(), host.len(), stream.stream(py), false)
}

/// Copies `count` bytes from device address `d_src` to `d_dst`, ordered on `stream`.
#[pyfunction]
#[pyo3(signature = (d_src, d_dst, count, stream = StreamArg::Default))]
fn copy_device_to_ptr(
    py: Python<'_>,
    d_src: usize,
    d_dst: usize,
    count: usize,
    stream: StreamArg,
) -> PyResult<()> {
    let stream = stream.stream(py);
    py.detach(|| {
        // SAFETY: RMM's contract: both are device ranges of `count` bytes valid on `stream`.
        unsafe { cuda::copy_async(d_dst as *mut u8, d_src as *const u8, count, stream) }
    })
    .into_py_result()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceBuffer>()?;
    // Pickles name functions by `__module__` and `__qualname__`: RMM's pickles name
    // `rmm.pylibrmm.device_buffer.to_device`, so this one does too (that module re-exports it).
    let to_device = wrap_pyfunction!(to_device, m)?;
    to_device.setattr("__module__", "rmm.pylibrmm.device_buffer")?;
    let _ = TO_DEVICE.set(m.py(), to_device.clone().into_any().unbind());
    m.add_function(to_device)?;
    m.add_function(wrap_pyfunction!(copy_ptr_to_host, m)?)?;
    m.add_function(wrap_pyfunction!(copy_host_to_ptr, m)?)?;
    m.add_function(wrap_pyfunction!(copy_device_to_ptr, m)?)?;
    Ok(())
}
