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

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use rmm_core::cuda::{self, Stream};
use rmm_core::{registry, DeviceBuffer, Result};

use crate::error::{clear_parked, IntoPyResult};
use crate::hostbuf::HostBuffer;
use crate::mr::PyDeviceMemoryResource;
use crate::registry::current_resource_object;
use crate::stream::{PyStream, StreamArg};

/// Copies `bytes` bytes from `src` to `dst` on `stream` without the GIL, then synchronizes the
/// stream when it is the default one (RMM's rule for host copies) or when `sync` is set.
fn copy(py: Python<'_>, dst: usize, src: usize, bytes: usize, stream: Stream, sync: bool) -> PyResult<()> {
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
#[pyclass(module = "rmm.pylibrmm.device_buffer", name = "DeviceBuffer", subclass, weakref)]
pub(crate) struct PyDeviceBuffer {
    /// `None` only while being dropped.
    buf: Option<DeviceBuffer>,
    stream: Py<PyStream>,
    mr: Py<PyAny>,
}

impl PyDeviceBuffer {
    /// The buffer, for view.rs (DLPack export).
    pub(crate) fn inner(&self) -> &DeviceBuffer {
        self.buf()
    }

    /// A deep copy (`copy()`), for view.rs (DLPack export with `copy=True`).
    pub(crate) fn copy_for_export(&self, py: Python<'_>) -> PyResult<Self> {
        self.copy(py)
    }

    fn buf(&self) -> &DeviceBuffer {
        self.buf.as_ref().expect("a DeviceBuffer is only emptied by its drop")
    }

    fn buf_mut(&mut self) -> &mut DeviceBuffer {
        self.buf.as_mut().expect("a DeviceBuffer is only emptied by its drop")
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
        let resource = mr.bind(py).cast::<PyDeviceMemoryResource>()?.get().inner.clone();
        let handle = stream.stream(py);
        if size == 0 {
            // Nothing is allocated or copied, so nothing can block or call back: no GIL round trip.
            let buf = DeviceBuffer::new(0, handle, resource).into_py_alloc_result()?;
            return Ok(Self { buf: Some(buf), stream: stream.object(py)?, mr });
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
                let buf = unsafe { DeviceBuffer::from_raw_copy(ptr as *const u8, size, handle, resource)? };
                if handle.is_default() {
                    handle.synchronize()?;
                }
                Ok(buf)
            })
            .into_py_alloc_result()?;
        Ok(Self { buf: Some(buf), stream: stream.object(py)?, mr })
    }

    /// A Python buffer that owns `buf` (capsule.rs), with its stream and its resource's object.
    pub(crate) fn adopt(py: Python<'_>, buf: DeviceBuffer) -> PyResult<Self> {
        let stream = if buf.stream().is_default() {
            crate::stream::default_stream(py)?
        } else {
            Py::new(py, PyStream::from_raw(buf.stream().as_raw(), None))?
        };
        let mr = crate::mr::wrap(py, buf.memory_resource().clone())?;
        Ok(Self { buf: Some(buf), stream, mr })
    }

    fn copy_to_host_impl<'py>(
        &self,
        py: Python<'py>,
        ary: Option<Bound<'py, PyAny>>,
        stream: &StreamArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = self.buf().size();
        let ary = match ary.filter(|a| !a.is_none()) {
            Some(ary) => ary,
            None => match py.import("numpy") {
                Ok(np) => np.call_method1("empty", ((size,), "u1"))?,
                Err(_) => pyo3::types::PyByteArray::new(py, &vec![0; size]).into_any(),
            },
        };
        let host = HostBuffer::get(&ary, true)?;
        if host.len() < size {
            return Err(PyValueError::new_err(format!(
                "Argument `ary` is too small. Need space for {size} bytes."
            )));
        }
        copy(py, host.addr(), self.buf().as_ptr() as usize, size, stream.stream(py), false)?;
        drop(host);
        Ok(ary)
    }
}

impl Drop for PyDeviceBuffer {
    fn drop(&mut self) {
        match self.buf.take() {
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

    fn __len__(&self) -> usize {
        self.buf().size()
    }

    fn __sizeof__(&self) -> usize {
        self.buf().size()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.tobytes(py, StreamArg::Default)
    }

    /// The size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buf().size()
    }

    /// The device address as an int (0 when nothing is allocated).
    #[getter]
    fn ptr(&self) -> usize {
        self.buf().as_ptr() as usize
    }

    /// The size in bytes.
    #[getter]
    fn size(&self) -> usize {
        self.buf().size()
    }

    /// The CUDA array interface as RMM exports it: one-dimensional bytes, version 0.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let intf = PyDict::new(py);
        intf.set_item("data", (self.ptr(), false))?;
        intf.set_item("shape", (self.size(),))?;
        intf.set_item("strides", py.None())?;
        intf.set_item("typestr", "|u1")?;
        intf.set_item("version", 0)?;
        Ok(intf)
    }

    /// DLPack export: a uint8 1-D tensor of `nbytes`, zero-copy; the capsule keeps the buffer (and
    /// its resource) alive. See `view.rs` (`buffer_dlpack`).
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
    fn __dlpack_device__(&self) -> (i32, i32) {
        crate::view::buffer_dlpack_device(self)
    }

    /// Pickling: `to_device(self.copy_to_host())` (out-of-band with protocol 5 through the array).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let host = slf.borrow().copy_to_host_impl(py, None, &StreamArg::Default)?;
        let to_device = py.import("rmm._rmm")?.getattr("to_device")?;
        PyTuple::new(py, [to_device, PyTuple::new(py, [host])?.into_any()])
    }

    /// Prefetches managed memory to `device` (default: the current device) on `stream` (default: the
    /// buffer's stream); a no-op for memory that is not managed.
    #[pyo3(signature = (device = None, stream = None))]
    fn prefetch(&self, py: Python<'_>, device: Option<i32>, stream: Option<StreamArg>) -> PyResult<()> {
        let stream = match stream {
            Some(s) => s.stream(py),
            None => self.stream.bind(py).get().stream(),
        };
        let buf = self.buf();
        py.detach(|| buf.prefetch(device.map_or_else(registry::current_device_or_host, Ok)?, stream)).into_py_result()
    }

    /// A deep copy on the buffer's stream, from the same memory resource.
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        let stream = self.stream.bind(py).get().stream();
        let buf = self.buf();
        let resource = buf.memory_resource().clone();
        let copied = py
            .detach(|| -> Result<DeviceBuffer> {
                let copied = buf.try_clone_on(stream, resource)?;
                if stream.is_default() {
                    stream.synchronize()?;
                }
                Ok(copied)
            })
            .into_py_result()?;
        Ok(Self { buf: Some(copied), stream: self.stream.clone_ref(py), mr: self.mr.clone_ref(py) })
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
    fn copy_from_host(&mut self, py: Python<'_>, ary: &Bound<'_, PyAny>, stream: StreamArg) -> PyResult<()> {
        let host = HostBuffer::get(ary, false)?;
        let size = self.buf().size();
        if host.len() > size {
            return Err(PyValueError::new_err(format!(
                "Argument `ary` is too large. Need space for {size} bytes."
            )));
        }
        let dst = self.buf_mut().as_mut_ptr() as usize;
        copy(py, dst, host.addr(), host.len(), stream.stream(py), false)
    }

    /// Copies the contents of `cuda_ary` (an object with `__cuda_array_interface__`, one-dimensional
    /// and contiguous, no larger than the buffer) to the start of the buffer.
    #[pyo3(signature = (cuda_ary, stream = StreamArg::Default))]
    fn copy_from_device(&mut self, py: Python<'_>, cuda_ary: &Bound<'_, PyAny>, stream: StreamArg) -> PyResult<()> {
        let stream = stream.stream(py);
        if !cuda_ary.hasattr("__cuda_array_interface__")? {
            return Err(PyValueError::new_err("Expected object to support `__cuda_array_interface__` protocol"));
        }
        let intf = cuda_ary.getattr("__cuda_array_interface__")?;
        let shape: Vec<usize> = intf.get_item("shape")?.extract()?;
        let typestr: String = intf.get_item("typestr")?.extract()?;
        let itemsize: usize = typestr
            .get(2..)
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| PyValueError::new_err(format!("cannot read the item size of typestr {typestr:?}")))?;
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
        let bytes = shape.first().copied().unwrap_or(1) * itemsize;
        if bytes > self.buf().size() {
            return Err(PyValueError::new_err(format!(
                "Argument `hb` is too large. Need space for {bytes} bytes."
            )));
        }
        let dst = self.buf_mut().as_mut_ptr() as usize;
        py.detach(|| {
            // SAFETY: `src` is the exporter's device memory of `bytes` bytes (its interface, the
            // caller's contract as in RMM); the destination is this live buffer's memory.
            unsafe { cuda::copy_async(dst as *mut u8, src as *const u8, bytes, stream) }
        })
        .into_py_result()
    }

    /// The contents as `bytes` (the copy is complete when this returns, whatever the stream).
    #[pyo3(signature = (stream = StreamArg::Default))]
    fn tobytes<'py>(&self, py: Python<'py>, stream: StreamArg) -> PyResult<Bound<'py, PyBytes>> {
        let stream = stream.stream(py);
        let src = self.buf().as_ptr() as usize;
        PyBytes::new_with(py, self.buf().size(), |out| {
            let (dst, bytes) = (out.as_mut_ptr() as usize, out.len());
            copy(py, dst, src, bytes, stream, true)
        })
    }

    /// Makes room for `new_capacity` bytes (the size and contents stay); `stream` becomes the
    /// buffer's stream.
    #[pyo3(signature = (new_capacity, stream = StreamArg::Default))]
    fn reserve(&mut self, py: Python<'_>, new_capacity: usize, stream: StreamArg) -> PyResult<()> {
        let handle = stream.stream(py);
        let buf = self.buf_mut();
        py.detach(|| buf.reserve(new_capacity, handle)).into_py_result()?;
        self.stream = stream.object(py)?;
        Ok(())
    }

    /// Sets the size to `new_size` bytes (reallocating beyond the capacity; new bytes are
    /// uninitialized); `stream` becomes the buffer's stream.
    #[pyo3(signature = (new_size, stream = StreamArg::Default))]
    fn resize(&mut self, py: Python<'_>, new_size: usize, stream: StreamArg) -> PyResult<()> {
        let handle = stream.stream(py);
        let buf = self.buf_mut();
        py.detach(|| buf.resize(new_size, handle)).into_py_result()?;
        self.stream = stream.object(py)?;
        Ok(())
    }

    /// The bytes allocated (at least the size).
    fn capacity(&self) -> usize {
        self.buf().capacity()
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
    /// buffer empty, as RMM's `c_release`: views of the old memory must be gone first.
    fn _to_capsule(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let buf = self.buf_mut();
        let empty = DeviceBuffer::new(0, buf.stream(), buf.memory_resource().clone()).into_py_result()?;
        let moved = std::mem::replace(buf, empty);
        rmm::python::buffer_to_capsule(py, moved)
    }

    fn __repr__(&self) -> String {
        format!("<rmm.DeviceBuffer size={} ptr={:#x}>", self.size(), self.ptr())
    }
}

fn to_device_impl(py: Python<'_>, b: &Bound<'_, PyAny>, stream: &StreamArg) -> PyResult<PyDeviceBuffer> {
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
fn copy_ptr_to_host(py: Python<'_>, db: usize, hb: &Bound<'_, PyAny>, stream: StreamArg) -> PyResult<()> {
    none_buffer("hb", hb)?;
    let host = HostBuffer::get(hb, true)?;
    copy(py, host.addr(), db, host.len(), stream.stream(py), false)
}

/// Copies the bytes of `hb` to device address `db`.
#[pyfunction]
#[pyo3(signature = (hb, db, stream = StreamArg::Default))]
fn copy_host_to_ptr(py: Python<'_>, hb: &Bound<'_, PyAny>, db: usize, stream: StreamArg) -> PyResult<()> {
    none_buffer("hb", hb)?;
    let host = HostBuffer::get(hb, false)?;
    copy(py, db, host.addr(), host.len(), stream.stream(py), false)
}

/// Copies `count` bytes from device address `d_src` to `d_dst`, ordered on `stream`.
#[pyfunction]
#[pyo3(signature = (d_src, d_dst, count, stream = StreamArg::Default))]
fn copy_device_to_ptr(py: Python<'_>, d_src: usize, d_dst: usize, count: usize, stream: StreamArg) -> PyResult<()> {
    let stream = stream.stream(py);
    py.detach(|| {
        // SAFETY: RMM's contract: both are device ranges of `count` bytes valid on `stream`.
        unsafe { cuda::copy_async(d_dst as *mut u8, d_src as *const u8, count, stream) }
    })
    .into_py_result()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceBuffer>()?;
    m.add_function(wrap_pyfunction!(to_device, m)?)?;
    m.add_function(wrap_pyfunction!(copy_ptr_to_host, m)?)?;
    m.add_function(wrap_pyfunction!(copy_host_to_ptr, m)?)?;
    m.add_function(wrap_pyfunction!(copy_device_to_ptr, m)?)?;
    Ok(())
}
