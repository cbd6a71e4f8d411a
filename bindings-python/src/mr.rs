//! Bindings for `rmm_core::mr`: memory resources.
//!
//! Every resource class derives from `DeviceMemoryResource`, which holds the core `AnyResource`
//! (shared ownership) and implements `allocate` / `deallocate` once. A new resource is a subclass
//! with a constructor that builds its core value; nothing else.
//!
//! The GIL is released around every call into a resource: allocation may block (a pool growing, a
//! driver call synchronizing) and other Python threads keep running meanwhile.

use pyo3::prelude::*;
use rmm_core::cuda::Stream;
use rmm_core::mr::{CudaMemoryResource, SystemMemoryResource};
use rmm_core::{AnyResource, MemoryResource, DEFAULT_ALIGNMENT};

use crate::error::IntoPyResult;

/// The stream argument: `None` for the default stream, or a raw `cudaStream_t` as an int.
fn stream_from_py(stream: Option<usize>) -> Stream {
    match stream {
        None => Stream::DEFAULT,
        // SAFETY: as in RMM, the caller keeps the stream alive for as long as it uses the memory;
        // the handle is only passed to the driver, never dereferenced here.
        Some(raw) => unsafe { Stream::from_raw(raw) },
    }
}

/// Base class of all memory resources (RMM's `rmm.mr.DeviceMemoryResource`).
#[pyclass(subclass, frozen, module = "rmm.mr", name = "DeviceMemoryResource")]
pub(crate) struct PyDeviceMemoryResource {
    pub(crate) inner: AnyResource,
}

impl PyDeviceMemoryResource {
    pub(crate) fn new(resource: impl MemoryResource) -> Self {
        Self { inner: AnyResource::new(resource) }
    }
}

#[pymethods]
impl PyDeviceMemoryResource {
    /// Allocates `nbytes` bytes (256-byte aligned) ordered on `stream` and returns the pointer as
    /// an int (0 for 0 bytes). Raises MemoryError when the resource is out of memory.
    #[pyo3(signature = (nbytes, stream = None))]
    fn allocate(&self, py: Python<'_>, nbytes: usize, stream: Option<usize>) -> PyResult<usize> {
        let stream = stream_from_py(stream);
        let mr = &self.inner;
        py.detach(|| mr.allocate(stream, nbytes, DEFAULT_ALIGNMENT).map(|p| p as usize)).into_py_result()
    }

    /// Returns memory from `allocate(nbytes, stream)`. As in RMM, the pointer must come from this
    /// resource (or an equal one) with the same size, and must not be used afterwards.
    #[pyo3(signature = (ptr, nbytes, stream = None))]
    fn deallocate(&self, py: Python<'_>, ptr: usize, nbytes: usize, stream: Option<usize>) -> PyResult<()> {
        let stream = stream_from_py(stream);
        let mr = &self.inner;
        py.detach(|| {
            // SAFETY: the caller's contract, documented above and in RMM: `ptr` came from this
            // resource with these arguments and is freed once.
            unsafe { mr.deallocate(stream, ptr as *mut u8, nbytes, DEFAULT_ALIGNMENT) }
        })
        .into_py_result()
    }

    /// RMM's name of the resource, e.g. "cuda_memory_resource".
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    fn __repr__(&self) -> String {
        format!("<rmm.mr resource {} ({}-accessible)>", self.inner.name(), self.inner.access())
    }
}

/// Device memory from cudaMalloc (RMM's `rmm.mr.CudaMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.mr", name = "CudaMemoryResource")]
pub(crate) struct PyCudaMemoryResource;

#[pymethods]
impl PyCudaMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyDeviceMemoryResource::new(CudaMemoryResource::new())).add_subclass(Self)
    }
}

/// Host memory from the system allocator (RMM's `rmm.mr.SystemMemoryResource`).
/// In host mode (no GPU) it is the one resource that works.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.mr", name = "SystemMemoryResource")]
pub(crate) struct PySystemMemoryResource;

#[pymethods]
impl PySystemMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyDeviceMemoryResource::new(SystemMemoryResource::new())).add_subclass(Self)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceMemoryResource>()?;
    m.add_class::<PyCudaMemoryResource>()?;
    m.add_class::<PySystemMemoryResource>()?;
    Ok(())
}
