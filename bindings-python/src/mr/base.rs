//! Resources with no upstream: over the CUDA driver (`CudaMemoryResource`, `ManagedMemoryResource`,
//! `PinnedHostMemoryResource`, `CudaAsync*`), over the host (`SystemMemoryResource`,
//! `SamHeadroomMemoryResource`), or over Python functions (`CallbackMemoryResource`).

use std::sync::Arc;

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rmm_core::cuda::Stream;
use rmm_core::mr::{
    CallbackMemoryResource, CudaAsyncManagedMemoryResource, CudaAsyncMemoryResource, CudaAsyncOptions,
    CudaAsyncViewMemoryResource, CudaMemoryResource, ExportHandleType, ManagedMemoryResource, PinnedHostMemoryResource,
    SamHeadroomMemoryResource, SystemMemoryResource,
};
use rmm_core::{Error, Result};

use super::{leaf, optional_size, PyDeviceMemoryResource};
use crate::error::{park, to_py_err, IntoPyResult};
use crate::stream::PyStream;

/// Device memory from cudaMalloc (RMM's `CudaMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CudaMemoryResource")]
pub(crate) struct PyCudaMemoryResource;

#[pymethods]
impl PyCudaMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        leaf(CudaMemoryResource::new(), Self)
    }
}

/// Unified (managed) memory from cudaMallocManaged (RMM's `ManagedMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "ManagedMemoryResource")]
pub(crate) struct PyManagedMemoryResource;

#[pymethods]
impl PyManagedMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        leaf(ManagedMemoryResource::new(), Self)
    }
}

/// Host memory from the system allocator (RMM's `SystemMemoryResource`).
/// In host mode (no GPU) it is the one resource that works.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "SystemMemoryResource")]
pub(crate) struct PySystemMemoryResource;

#[pymethods]
impl PySystemMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        leaf(SystemMemoryResource::new(), Self)
    }
}

/// Page-locked host memory from cudaHostAlloc (RMM's `PinnedHostMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "PinnedHostMemoryResource")]
pub(crate) struct PyPinnedHostMemoryResource;

#[pymethods]
impl PyPinnedHostMemoryResource {
    #[new]
    fn py_new() -> PyClassInitializer<Self> {
        leaf(PinnedHostMemoryResource::new(), Self)
    }
}

/// System memory that leaves `headroom` bytes of device memory free (RMM's
/// `SamHeadroomMemoryResource`; needs a GPU with pageable memory access).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "SamHeadroomMemoryResource")]
pub(crate) struct PySamHeadroomMemoryResource;

#[pymethods]
impl PySamHeadroomMemoryResource {
    #[new]
    fn py_new(py: Python<'_>, headroom: usize) -> PyResult<PyClassInitializer<Self>> {
        let mr = py.detach(|| SamHeadroomMemoryResource::new(headroom)).into_py_result()?;
        Ok(leaf(mr, Self))
    }
}

/// The message of a pool whose memory cannot be exported as asked (rmm-core's and RMM's words).
const HANDLE_TYPE_UNSUPPORTED: &str = "Requested IPC memory handle type not supported";

/// Stream-ordered allocation from a CUDA memory pool that this resource owns (RMM's
/// `CudaAsyncMemoryResource`). `initial_pool_size` (int or str) primes the pool;
/// `release_threshold` keeps that many bytes reserved at synchronization points; `enable_ipc` /
/// `enable_fabric` make its memory exportable as POSIX file descriptors / fabric handles.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CudaAsyncMemoryResource")]
pub(crate) struct PyCudaAsyncMemoryResource;

#[pymethods]
impl PyCudaAsyncMemoryResource {
    #[new]
    #[pyo3(signature = (initial_pool_size = None, release_threshold = None, enable_ipc = false, enable_fabric = false))]
    fn py_new(
        py: Python<'_>,
        initial_pool_size: Option<&Bound<'_, PyAny>>,
        release_threshold: Option<u64>,
        enable_ipc: bool,
        enable_fabric: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        let options = CudaAsyncOptions {
            initial_pool_size: optional_size(initial_pool_size)?,
            release_threshold,
            export_handle_type: match (enable_ipc, enable_fabric) {
                (false, false) => None,
                (true, false) => Some(ExportHandleType::PosixFileDescriptor),
                (false, true) => Some(ExportHandleType::Fabric),
                (true, true) => {
                    return Err(PyValueError::new_err(
                        "enable_ipc and enable_fabric together are not supported by rmm-rs (one export handle type per pool)",
                    ))
                }
            },
        };
        let mr = py.detach(|| CudaAsyncMemoryResource::with_options(options)).map_err(|e| match e {
            // RMM's message ends with this phrase, which callers (RMM's tests) check with endswith.
            Error::Unsupported(m) if m.starts_with(HANDLE_TYPE_UNSUPPORTED) && m != HANDLE_TYPE_UNSUPPORTED => {
                PyRuntimeError::new_err(format!("{}: {HANDLE_TYPE_UNSUPPORTED}", m[HANDLE_TYPE_UNSUPPORTED.len()..].trim()))
            }
            other => to_py_err(other),
        })?;
        Ok(leaf(mr, Self))
    }
}

/// Stream-ordered allocation from an existing CUDA memory pool, which the caller keeps alive (RMM's
/// `CudaAsyncViewMemoryResource`). `pool_handle` is a cuda-python `cudaMemPool_t` or `CUmemoryPool`.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CudaAsyncViewMemoryResource")]
pub(crate) struct PyCudaAsyncViewMemoryResource {
    handle: usize,
}

/// True when `obj` is one of cuda-python's pool handle types.
fn is_pool_handle(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    for (module, class) in [("cuda.bindings.runtime", "cudaMemPool_t"), ("cuda.bindings.driver", "CUmemoryPool")] {
        if let Ok(module) = py.import(module) {
            if obj.is_instance(&module.getattr(class)?)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[pymethods]
impl PyCudaAsyncViewMemoryResource {
    #[new]
    fn py_new(py: Python<'_>, pool_handle: &Bound<'_, PyAny>) -> PyResult<PyClassInitializer<Self>> {
        if !is_pool_handle(py, pool_handle)? {
            return Err(PyValueError::new_err("pool_handle must be a cudaMemPool_t or CUmemoryPool"));
        }
        let handle: usize = pool_handle.call_method0("__int__")?.extract()?;
        // SAFETY: the handle names a live memory pool (cuda-python object); RMM's contract, repeated
        // in the class doc: the caller keeps the pool alive while the resource is used.
        let mr = unsafe { CudaAsyncViewMemoryResource::from_raw(handle) }.into_py_result()?;
        Ok(leaf(mr, Self { handle }))
    }

    /// The pool's handle as an int.
    fn pool_handle(&self) -> usize {
        self.handle
    }
}

/// Stream-ordered managed memory from the device's default managed memory pool (RMM's
/// `rmm.mr.experimental.CudaAsyncManagedMemoryResource`; CUDA 13+).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource.experimental", name = "CudaAsyncManagedMemoryResource")]
pub(crate) struct PyCudaAsyncManagedMemoryResource {
    handle: usize,
}

#[pymethods]
impl PyCudaAsyncManagedMemoryResource {
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<PyClassInitializer<Self>> {
        let mr = py.detach(CudaAsyncManagedMemoryResource::new).into_py_result()?;
        let handle = mr.pool_handle();
        Ok(leaf(mr, Self { handle }))
    }

    /// The pool's handle as an int.
    fn pool_handle(&self) -> usize {
        self.handle
    }
}

/// The core error for an exception a Python callback raised (parked for the binding to raise).
fn callback_error(py: Python<'_>, error: PyErr, bytes: usize, which: &str) -> Error {
    let oom = error.is_instance_of::<PyMemoryError>(py);
    let message = error.value(py).to_string();
    park(error);
    if oom {
        Error::OutOfMemory { bytes, resource: "callback_memory_resource".into(), detail: message }
    } else {
        Error::Unsupported(format!("the {which} callback raised: {message}"))
    }
}

/// A resource made of two Python functions (RMM's `CallbackMemoryResource`):
/// `allocate_func(nbytes, stream) -> int` and `deallocate_func(ptr, nbytes, stream)`, where `stream`
/// is a `Stream`. A `MemoryError` from `allocate_func` is raised as `MemoryError`, any other
/// exception as `RuntimeError`, as in RMM.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CallbackMemoryResource")]
pub(crate) struct PyCallbackMemoryResource;

#[pymethods]
impl PyCallbackMemoryResource {
    #[new]
    fn py_new(allocate_func: Py<PyAny>, deallocate_func: Py<PyAny>) -> PyClassInitializer<Self> {
        let allocate = move |bytes: usize, stream: Stream| -> Result<*mut u8> {
            Python::attach(|py| {
                let stream = PyStream::from_raw(stream.as_raw(), None);
                let result = allocate_func.call1(py, (bytes, stream)).and_then(|p| p.extract::<usize>(py));
                result.map(|p| p as *mut u8).map_err(|e| callback_error(py, e, bytes, "allocate"))
            })
        };
        let deallocate = move |ptr: *mut u8, bytes: usize, stream: Stream| -> Result<()> {
            Python::attach(|py| {
                let stream = PyStream::from_raw(stream.as_raw(), None);
                deallocate_func.call1(py, (ptr as usize, bytes, stream)).map(drop).map_err(|e| {
                    let message = e.value(py).to_string();
                    // A free has nobody to raise to when a buffer is collected: report it as Python does.
                    e.write_unraisable(py, None);
                    Error::Unsupported(format!("the deallocate callback raised: {message}"))
                })
            })
        };
        leaf(CallbackMemoryResource::new(Arc::new(allocate), Arc::new(deallocate)), Self)
    }
}
