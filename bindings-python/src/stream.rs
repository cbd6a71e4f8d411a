//! Bindings for `rmm_core::cuda` streams: RMM's `rmm.pylibrmm.stream` (`Stream`, `CudaStreamFlags`,
//! `DEFAULT_STREAM`, `LEGACY_DEFAULT_STREAM`, `PER_THREAD_DEFAULT_STREAM`) and
//! `rmm.pylibrmm.cuda_stream_pool.CudaStreamPool`.
//!
//! A `Stream` is a raw `cudaStream_t` plus the Python object that keeps it alive (an owning
//! `_OwningStream`, a `CudaStreamPool`, or the foreign stream object it was made from), as in RMM.
//! The streams Python creates are librmm's (`rmm_stream_create`), so the engine knows them as its
//! own (their ids without a driver call, their end before their handle is reused).
//! Every `stream=` argument of this module is a [`StreamArg`]: a `Stream`, or nothing (the default
//! stream); `None` is a `TypeError`, as in RMM.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyList, PyTuple};
use pyo3::Borrowed;
use rmm_core::cuda::Stream;
use rmm_core::Result;

use crate::error::IntoPyResult;
use crate::native;

const STREAM_MODULE: &str = "rmm.pylibrmm.stream";

/// RMM's message for `stream=None`.
const STREAM_NONE: &str = "stream argument cannot be None. Please provide a valid Stream instance.";

/// A stream created by librmm (`rmm_stream_create`), destroyed on drop.
struct NativeStream(usize);

impl NativeStream {
    fn new(flags: c_int) -> Result<Self> {
        // SAFETY: a valid out-pointer.
        let raw = native::read(
            "rmm_stream_create",
            std::ptr::null_mut(),
            |out, err| unsafe { native::rmm_stream_create(flags, out, err) },
        )?;
        Ok(Self(raw as usize))
    }
}

impl Drop for NativeStream {
    fn drop(&mut self) {
        let raw = self.0 as *mut c_void;
        // SAFETY: a stream rmm_stream_create made, destroyed once; queued work still completes.
        let destroyed = native::call("rmm_stream_destroy", |err| unsafe {
            native::rmm_stream_destroy(raw, err)
        });
        if let Err(e) = destroyed {
            // Nobody to raise to while a stream is collected: reported as Python reports such errors.
            Python::attach(|py| PyRuntimeError::new_err(e.to_string()).write_unraisable(py, None));
        }
    }
}

/// An owning CUDA stream, destroyed when the last `Stream` that refers to it is collected
/// (RMM's private `rmm.pylibrmm.stream._OwningStream`).
#[pyclass(frozen, module = "rmm.pylibrmm.stream", name = "_OwningStream")]
pub(crate) struct PyOwningStream {
    stream: NativeStream,
}

#[pymethods]
impl PyOwningStream {
    #[new]
    #[pyo3(signature = (flags = None))]
    fn py_new(py: Python<'_>, flags: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let flags = stream_flags(flags)?;
        let stream = py.detach(|| NativeStream::new(flags)).into_py_result()?;
        Ok(Self { stream })
    }
}

/// `CudaStreamFlags` (or its int value) as `RMM_STREAM_*` flags; `None` is `SYNC_DEFAULT`.
fn stream_flags(flags: Option<&Bound<'_, PyAny>>) -> PyResult<c_int> {
    let Some(flags) = flags.filter(|f| !f.is_none()) else {
        return Ok(0);
    };
    match flags.extract::<i64>()? {
        value @ (0 | 1) => Ok(value as c_int),
        other => Err(PyValueError::new_err(format!(
            "{other} is not a valid CudaStreamFlags"
        ))),
    }
}

/// A CUDA stream (RMM's `rmm.pylibrmm.stream.Stream`).
///
/// `Stream()` creates a new owning stream (`flags` picks its `CudaStreamFlags`); `Stream(obj)` wraps
/// an existing one: another `Stream`, any object with `__cuda_stream__` (protocol version 0), a Numba
/// stream or a CuPy stream, keeping `obj` alive. `flags` together with `obj` is a ValueError.
#[pyclass(frozen, subclass, module = "rmm.pylibrmm.stream", name = "Stream")]
pub(crate) struct PyStream {
    raw: usize,
    /// What keeps the stream alive (None for the default streams).
    owner: Option<Py<PyAny>>,
}

impl PyStream {
    /// The core handle.
    pub(crate) fn stream(&self) -> Stream {
        // SAFETY: the handle came from a stream that `owner` keeps alive (or a default stream); it is
        // only passed to the driver, never dereferenced here.
        unsafe { Stream::from_raw(self.raw) }
    }

    /// A `Stream` for a raw handle kept alive by `owner`.
    pub(crate) fn from_raw(raw: usize, owner: Option<Py<PyAny>>) -> Self {
        Self { raw, owner }
    }

    fn from_object(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(other) = obj.cast::<PyStream>() {
            let other = other.get();
            return Ok(Self {
                raw: other.raw,
                owner: other.owner.as_ref().map(|o| o.clone_ref(py)),
            });
        }
        if obj.hasattr("__cuda_stream__")? {
            let (version, ptr): (i64, usize) = obj.call_method0("__cuda_stream__")?.extract()?;
            if version != 0 {
                return Err(PyNotImplementedError::new_err(format!(
                    "RMM does not currently support the CUDA Stream Protocol version: '{version}'."
                )));
            }
            return Ok(Self {
                raw: ptr,
                owner: Some(obj.clone().unbind()),
            });
        }
        if let Some(raw) = numba_stream(py, obj)? {
            return Ok(Self {
                raw,
                owner: Some(obj.clone().unbind()),
            });
        }
        if let Some(raw) = cupy_stream(py, obj)? {
            return Ok(Self {
                raw,
                owner: Some(obj.clone().unbind()),
            });
        }
        Err(PyTypeError::new_err(format!(
            "Cannot create stream from {}",
            obj.get_type().repr()?
        )))
    }
}

/// `int(obj)` when `obj` is a Numba stream (and Numba is importable).
fn numba_stream(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let Ok(driver) = py.import("numba.cuda.cudadrv.driver") else {
        return Ok(None);
    };
    let class = driver.getattr("Stream")?;
    if obj.is_instance(&class)? {
        return Ok(Some(obj.call_method0("__int__")?.extract()?));
    }
    Ok(None)
}

/// `obj.ptr` when `obj` is a CuPy `Stream` or `ExternalStream` (and CuPy is importable).
fn cupy_stream(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let Ok(module) = py.import("cupy.cuda.stream") else {
        return Ok(None);
    };
    let classes = PyTuple::new(
        py,
        [module.getattr("Stream")?, module.getattr("ExternalStream")?],
    )?;
    if obj.is_instance(&classes)? {
        return Ok(Some(obj.getattr("ptr")?.extract()?));
    }
    Ok(None)
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (obj = None, flags = None))]
    fn py_new(
        py: Python<'_>,
        obj: Option<&Bound<'_, PyAny>>,
        flags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        match obj.filter(|o| !o.is_none()) {
            None => {
                let owning = Bound::new(py, PyOwningStream::py_new(py, flags)?)?;
                let raw = owning.get().stream.0;
                Ok(Self { raw, owner: Some(owning.into_any().unbind()) })
            }
            Some(_) if flags.is_some_and(|f| !f.is_none()) => Err(PyValueError::new_err(
                "flags may only be specified when obj is None; flags cannot be applied to an existing stream.",
            )),
            Some(obj) => Self::from_object(py, obj),
        }
    }

    /// The CUDA stream protocol: `(0, handle)`.
    fn __cuda_stream__(&self) -> (u32, usize) {
        (0, self.raw)
    }

    /// Blocks until all work queued on the stream has finished (the GIL is released meanwhile).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let stream = self.stream();
        py.detach(|| stream.synchronize()).into_py_result()
    }

    /// True for the default (legacy) stream, as RMM's `cuda_stream_view::is_default`.
    fn is_default(&self) -> bool {
        self.stream().is_default()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyStream>()
            .is_ok_and(|o| o.get().raw == self.raw)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        // The hash of the handle as a Python int, as RMM's `hash(int(handle))`.
        PyInt::new(py, self.raw).hash()
    }

    fn __repr__(&self) -> String {
        format!("<rmm.pylibrmm.stream.Stream {:#x}>", self.raw)
    }
}

/// A `stream=` argument: RMM's `Stream stream=DEFAULT_STREAM` (`None` is a TypeError, anything that
/// is not a `Stream` too).
pub(crate) enum StreamArg {
    /// Not given: the default stream.
    Default,
    /// A `Stream` object (kept, so a buffer can hold on to it as RMM's does).
    Given(Py<PyStream>),
}

impl StreamArg {
    /// The core handle.
    pub(crate) fn stream(&self, py: Python<'_>) -> Stream {
        match self {
            StreamArg::Default => Stream::DEFAULT,
            StreamArg::Given(s) => s.bind(py).get().stream(),
        }
    }

    /// The `Stream` object (`DEFAULT_STREAM` when none was given).
    pub(crate) fn object(&self, py: Python<'_>) -> PyResult<Py<PyStream>> {
        match self {
            StreamArg::Default => default_stream(py),
            StreamArg::Given(s) => Ok(s.clone_ref(py)),
        }
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for StreamArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Err(PyTypeError::new_err(STREAM_NONE));
        }
        match obj.cast::<PyStream>() {
            Ok(stream) => Ok(StreamArg::Given(stream.to_owned().unbind())),
            Err(_) => Err(PyTypeError::new_err(format!(
                "Argument 'stream' has incorrect type (expected rmm.pylibrmm.stream.Stream, got {})",
                obj.get_type().name()?
            ))),
        }
    }
}

static DEFAULT_STREAM: PyOnceLock<Py<PyStream>> = PyOnceLock::new();

/// `rmm.pylibrmm.stream.DEFAULT_STREAM`.
pub(crate) fn default_stream(py: Python<'_>) -> PyResult<Py<PyStream>> {
    DEFAULT_STREAM
        .get_or_try_init(py, || {
            Py::new(py, PyStream::from_raw(Stream::DEFAULT.as_raw(), None))
        })
        .map(|s| s.clone_ref(py))
}

/// A fixed set of owning streams handed out round robin (RMM's
/// `rmm.pylibrmm.cuda_stream_pool.CudaStreamPool`). Each `Stream` it hands out keeps the pool alive.
#[pyclass(
    frozen,
    module = "rmm.pylibrmm.cuda_stream_pool",
    name = "CudaStreamPool"
)]
pub(crate) struct PyCudaStreamPool {
    streams: Vec<NativeStream>,
    next: AtomicUsize,
}

#[pymethods]
impl PyCudaStreamPool {
    #[new]
    #[pyo3(signature = (pool_size = 16, flags = None))]
    fn py_new(
        py: Python<'_>,
        pool_size: usize,
        flags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let flags = stream_flags(flags)?;
        if pool_size == 0 {
            // RMM's `RMM_EXPECTS` throws `rmm::logic_error`, which Cython raises as RuntimeError.
            return Err(PyRuntimeError::new_err(
                "RMM failure at: rmm-rs: Stream pool size must be greater than zero",
            ));
        }
        let streams = py.detach(|| {
            (0..pool_size)
                .map(|_| NativeStream::new(flags))
                .collect::<Result<Vec<_>>>()
        });
        Ok(Self {
            streams: streams.into_py_result()?,
            next: AtomicUsize::new(0),
        })
    }

    /// The next stream round robin, or the one with `stream_id` (modulo the pool size).
    #[pyo3(signature = (stream_id = None))]
    fn get_stream(slf: &Bound<'_, Self>, stream_id: Option<usize>) -> PyStream {
        let pool = slf.get();
        let i = stream_id.unwrap_or_else(|| pool.next.fetch_add(1, Ordering::Relaxed));
        let raw = pool.streams[i % pool.streams.len()].0;
        PyStream::from_raw(raw, Some(slf.clone().into_any().unbind()))
    }

    /// The number of streams in the pool.
    fn get_pool_size(&self) -> usize {
        self.streams.len()
    }
}

/// `CudaStreamFlags` as an `enum.IntEnum` (as RMM defines it).
fn stream_flags_enum<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    let members = PyList::new(py, [("SYNC_DEFAULT", 0), ("NON_BLOCKING", 1)])?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("module", STREAM_MODULE)?;
    py.import("enum")?
        .getattr("IntEnum")?
        .call(("CudaStreamFlags", members), Some(&kwargs))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyOwningStream>()?;
    m.add_class::<PyStream>()?;
    m.add_class::<PyCudaStreamPool>()?;
    m.add("CudaStreamFlags", stream_flags_enum(py)?)?;
    m.add("DEFAULT_STREAM", default_stream(py)?)?;
    m.add(
        "LEGACY_DEFAULT_STREAM",
        PyStream::from_raw(Stream::LEGACY.as_raw(), None),
    )?;
    m.add(
        "PER_THREAD_DEFAULT_STREAM",
        PyStream::from_raw(Stream::PER_THREAD.as_raw(), None),
    )?;
    Ok(())
}
