//! Resources with no upstream: over the CUDA driver (`CudaMemoryResource`, `ManagedMemoryResource`,
//! `PinnedHostMemoryResource`, `CudaAsync*`), over the host (`SystemMemoryResource`,
//! `SamHeadroomMemoryResource`), over Python functions (`CallbackMemoryResource`), or over nothing
//! (`SimulatedMemoryResource`). Each is made by librmm (`native.rs`).

use std::ffi::{c_int, c_void};

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rmm_core::resource::rmm_error;
use rmm_core::resource::status::RMM_OK;
use rmm_core::Error;

use super::{handle_of, leaf, optional_size, PyDeviceMemoryResource};
use crate::error::{park, to_py_err, IntoPyResult};
use crate::native::{self, adopt};
use crate::stream::PyStream;

/// Device memory from cudaMalloc (RMM's `CudaMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CudaMemoryResource")]
pub(crate) struct PyCudaMemoryResource;

#[pymethods]
impl PyCudaMemoryResource {
    #[new]
    fn py_new() -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid out-pointers.
        let mr = adopt("rmm_cuda_memory_resource_new", |out, err| unsafe {
            native::rmm_cuda_memory_resource_new(out, err)
        });
        Ok(leaf(mr.into_py_result()?, Self))
    }
}

/// Unified (managed) memory from cudaMallocManaged (RMM's `ManagedMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "ManagedMemoryResource")]
pub(crate) struct PyManagedMemoryResource;

#[pymethods]
impl PyManagedMemoryResource {
    #[new]
    fn py_new() -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid out-pointers.
        let mr = adopt("rmm_managed_memory_resource_new", |out, err| unsafe {
            native::rmm_managed_memory_resource_new(out, err)
        });
        Ok(leaf(mr.into_py_result()?, Self))
    }
}

/// Host memory from the system allocator (RMM's `SystemMemoryResource`).
/// In host mode (no GPU) it is the one resource that works.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "SystemMemoryResource")]
pub(crate) struct PySystemMemoryResource;

#[pymethods]
impl PySystemMemoryResource {
    #[new]
    fn py_new() -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid out-pointers.
        let mr = adopt("rmm_system_memory_resource_new", |out, err| unsafe {
            native::rmm_system_memory_resource_new(out, err)
        });
        Ok(leaf(mr.into_py_result()?, Self))
    }
}

/// Page-locked host memory from cudaHostAlloc (RMM's `PinnedHostMemoryResource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "PinnedHostMemoryResource")]
pub(crate) struct PyPinnedHostMemoryResource;

#[pymethods]
impl PyPinnedHostMemoryResource {
    #[new]
    fn py_new() -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid out-pointers.
        let mr = adopt("rmm_pinned_host_memory_resource_new", |out, err| unsafe {
            native::rmm_pinned_host_memory_resource_new(out, err)
        });
        Ok(leaf(mr.into_py_result()?, Self))
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
        let mr = py.detach(|| {
            // SAFETY: valid out-pointers.
            adopt("rmm_sam_headroom_memory_resource_new", |out, err| unsafe {
                native::rmm_sam_headroom_memory_resource_new(headroom as u64, out, err)
            })
        });
        Ok(leaf(mr.into_py_result()?, Self))
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
        // RMM_ALLOCATION_HANDLE_TYPE_*: none, POSIX file descriptor, fabric.
        let handle_type: i32 = match (enable_ipc, enable_fabric) {
            (false, false) => 0,
            (true, false) => 1,
            (false, true) => 8,
            (true, true) => {
                return Err(PyValueError::new_err(
                    "enable_ipc and enable_fabric together are not supported by rmm-rs (one export handle type per pool)",
                ))
            }
        };
        let initial = native::optional(optional_size(initial_pool_size)?);
        let threshold = release_threshold.unwrap_or(native::SIZE_NONE);
        let made = py.detach(|| {
            // SAFETY: valid out-pointers.
            adopt("rmm_cuda_async_memory_resource_new", |out, err| unsafe {
                native::rmm_cuda_async_memory_resource_new(
                    initial,
                    threshold,
                    handle_type,
                    out,
                    err,
                )
            })
        });
        let mr = made.map_err(|e| match e {
            // RMM's message ends with this phrase, which callers (RMM's tests) check with endswith.
            Error::Unsupported(m)
                if m.starts_with(HANDLE_TYPE_UNSUPPORTED) && m != HANDLE_TYPE_UNSUPPORTED =>
            {
                PyRuntimeError::new_err(format!(
                    "{}: {HANDLE_TYPE_UNSUPPORTED}",
                    m[HANDLE_TYPE_UNSUPPORTED.len()..].trim()
                ))
            }
            other => to_py_err(other),
        })?;
        Ok(leaf(mr, Self))
    }
}

/// Stream-ordered allocation from an existing CUDA memory pool, which the caller keeps alive (RMM's
/// `CudaAsyncViewMemoryResource`). `pool_handle` is a cuda-python `cudaMemPool_t` or `CUmemoryPool`.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CudaAsyncViewMemoryResource")]
pub(crate) struct PyCudaAsyncViewMemoryResource;

/// True when `obj` is one of cuda-python's pool handle types.
fn is_pool_handle(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    for (module, class) in [
        ("cuda.bindings.runtime", "cudaMemPool_t"),
        ("cuda.bindings.driver", "CUmemoryPool"),
    ] {
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
    fn py_new(
        py: Python<'_>,
        pool_handle: &Bound<'_, PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        if !is_pool_handle(py, pool_handle)? {
            return Err(PyValueError::new_err(
                "pool_handle must be a cudaMemPool_t or CUmemoryPool",
            ));
        }
        let handle: usize = pool_handle.call_method0("__int__")?.extract()?;
        // SAFETY: the handle names a live memory pool (cuda-python object); RMM's contract, repeated
        // in the class doc: the caller keeps the pool alive while the resource is used. Valid
        // out-pointers.
        let mr = adopt(
            "rmm_cuda_async_view_memory_resource_new",
            |out, err| unsafe {
                native::rmm_cuda_async_view_memory_resource_new(handle as *mut c_void, out, err)
            },
        );
        Ok(leaf(mr.into_py_result()?, Self))
    }

    /// The pool's handle as an int.
    fn pool_handle(slf: &Bound<'_, Self>) -> PyResult<usize> {
        pool_handle_of(
            slf,
            "rmm_cuda_async_view_memory_resource_pool_handle",
            native::rmm_cuda_async_view_memory_resource_pool_handle,
        )
    }
}

/// The CUDA memory pool that the accessor `name` (`read`) of the resource `object` names, as an int.
fn pool_handle_of(
    object: &Bound<'_, impl pyo3::PyClass>,
    name: &'static str,
    read: unsafe extern "C" fn(
        rmm_core::resource::rmm_resource,
        *mut *mut c_void,
        *mut rmm_error,
    ) -> c_int,
) -> PyResult<usize> {
    let h = handle_of(object)?;
    // SAFETY: `read` is the accessor `name` of rmm_c.h; a live borrowed handle; a valid out-pointer.
    let pool = native::read(name, std::ptr::null_mut(), |out, err| unsafe {
        read(h, out, err)
    });
    pool.map(|p| p as usize).into_py_result()
}

/// Stream-ordered managed memory from the device's default managed memory pool (RMM's
/// `rmm.mr.experimental.CudaAsyncManagedMemoryResource`; CUDA 13+).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource.experimental", name = "CudaAsyncManagedMemoryResource")]
pub(crate) struct PyCudaAsyncManagedMemoryResource;

#[pymethods]
impl PyCudaAsyncManagedMemoryResource {
    #[new]
    fn py_new(py: Python<'_>) -> PyResult<PyClassInitializer<Self>> {
        let mr = py.detach(|| {
            adopt(
                "rmm_cuda_async_managed_memory_resource_new",
                // SAFETY: valid out-pointers.
                |out, err| unsafe { native::rmm_cuda_async_managed_memory_resource_new(out, err) },
            )
        });
        Ok(leaf(mr.into_py_result()?, Self))
    }

    /// The pool's handle as an int.
    fn pool_handle(slf: &Bound<'_, Self>) -> PyResult<usize> {
        pool_handle_of(
            slf,
            "rmm_cuda_async_managed_memory_resource_pool_handle",
            native::rmm_cuda_async_managed_memory_resource_pool_handle,
        )
    }
}

/// The core error for an exception a Python callback raised (parked for the binding to raise).
fn callback_error(py: Python<'_>, error: PyErr, bytes: usize, which: &str) -> Error {
    let oom = error.is_instance_of::<PyMemoryError>(py);
    let message = error.value(py).to_string();
    park(error);
    if oom {
        Error::OutOfMemory {
            bytes,
            resource: "callback_memory_resource".into(),
            detail: message,
        }
    } else {
        Error::Unsupported(format!("the {which} callback raised: {message}"))
    }
}

/// The Python functions of a `CallbackMemoryResource`: the context librmm passes to the C
/// callbacks below, released by [`release_callbacks`] when librmm drops the resource.
struct Callbacks {
    allocate: Py<PyAny>,
    deallocate: Py<PyAny>,
}

type SharedCallbacks = super::SharedCallables<Callbacks>;

/// The callable `pick` chooses, or the error of a resource whose callables the cycle collector took.
fn callable(
    py: Python<'_>,
    callbacks: &SharedCallbacks,
    pick: fn(&Callbacks) -> &Py<PyAny>,
) -> Result<Py<PyAny>, Error> {
    callbacks.with(|c| pick(c).clone_ref(py)).ok_or_else(|| {
        Error::Unsupported(
            "the callback memory resource was cleared by the garbage collector".into(),
        )
    })
}

/// `rmm_allocate_callback`: calls `allocate_func(nbytes, stream)`; an exception is parked for the
/// binding call that started the allocation and reported to librmm as an error.
unsafe extern "C" fn allocate_callback(
    bytes: usize,
    stream: *mut c_void,
    context: *mut c_void,
    out: *mut *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: librmm passes the context made in `py_new` (alive until released) and valid
    // out-pointers (the error may be NULL).
    let callbacks = unsafe { &*(context as *const SharedCallbacks) };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Python::attach(|py| {
            let allocate = callable(py, callbacks, |c| &c.allocate)?;
            let stream = PyStream::from_raw(stream as usize, None);
            let result = allocate
                .call1(py, (bytes, stream))
                .and_then(|p| p.extract::<usize>(py));
            result.map_err(|e| callback_error(py, e, bytes, "allocate"))
        })
    }))
    .unwrap_or_else(|_| Err(Error::Unsupported("the allocate callback panicked".into())));
    match result {
        Ok(ptr) => {
            // SAFETY: valid out-pointer (librmm's contract).
            unsafe { *out = ptr as *mut c_void };
            RMM_OK
        }
        // SAFETY: NULL or valid (librmm's contract).
        Err(e) => unsafe { report(err, &e) },
    }
}

/// `rmm_deallocate_callback`: calls `deallocate_func(ptr, nbytes, stream)`; an exception is
/// reported as Python reports one nobody can catch (a free may run when a buffer is collected).
unsafe extern "C" fn deallocate_callback(
    ptr: *mut c_void,
    bytes: usize,
    stream: *mut c_void,
    context: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: as in `allocate_callback`.
    let callbacks = unsafe { &*(context as *const SharedCallbacks) };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Python::attach(|py| {
            let deallocate = callable(py, callbacks, |c| &c.deallocate)?;
            let stream = PyStream::from_raw(stream as usize, None);
            deallocate
                .call1(py, (ptr as usize, bytes, stream))
                .map(drop)
                .map_err(|e| {
                    let message = e.value(py).to_string();
                    e.write_unraisable(py, None);
                    Error::Unsupported(format!("the deallocate callback raised: {message}"))
                })
        })
    }))
    .unwrap_or_else(|_| {
        Err(Error::Unsupported(
            "the deallocate callback panicked".into(),
        ))
    });
    match result {
        Ok(()) => RMM_OK,
        // SAFETY: NULL or valid (librmm's contract).
        Err(e) => unsafe { report(err, &e) },
    }
}

/// Writes `error` to the optional `err` and returns its status.
///
/// # Safety
/// `err` is NULL or valid for writes.
unsafe fn report(err: *mut rmm_error, error: &Error) -> c_int {
    // SAFETY: caller contract.
    if let Some(err) = unsafe { err.as_mut() } {
        err.set(error);
    }
    rmm_core::resource::status::error_kind(error)
}

/// `rmm_callback_release`: drops the Python functions (with the GIL).
unsafe extern "C" fn release_callbacks(context: *mut c_void) {
    // SAFETY: the box made in `py_new`, released once by librmm.
    let callbacks = unsafe { Box::from_raw(context as *mut SharedCallbacks) };
    Python::attach(move |_| drop(callbacks));
}

/// A resource made of two Python functions (RMM's `CallbackMemoryResource`):
/// `allocate_func(nbytes, stream) -> int` and `deallocate_func(ptr, nbytes, stream)`, where `stream`
/// is a `Stream`. A `MemoryError` from `allocate_func` is raised as `MemoryError`, any other
/// exception as `RuntimeError`, as in RMM. The functions take part in cycle collection (a cycle
/// through them, a function that refers to the resource, is collected), but the resource never
/// drops them itself: buffers of the same cycle still free through `deallocate_func`.
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "CallbackMemoryResource")]
pub(crate) struct PyCallbackMemoryResource {
    /// The functions, shared with librmm's context (None for a resource made outside Python).
    callables: Option<SharedCallbacks>,
}

impl PyCallbackMemoryResource {
    /// The object for a callback resource made outside Python (its functions are not Python's).
    pub(super) fn wrapped() -> Self {
        Self { callables: None }
    }
}

#[pymethods]
impl PyCallbackMemoryResource {
    #[new]
    fn py_new(
        allocate_func: Py<PyAny>,
        deallocate_func: Py<PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let callables = SharedCallbacks::new(Callbacks {
            allocate: allocate_func,
            deallocate: deallocate_func,
        });
        let context = Box::into_raw(Box::new(callables.share()));
        // SAFETY: functions of this module that never unwind and accept `context` until librmm
        // releases it with `release_callbacks` (also on failure); valid out-pointers.
        let mr = adopt("rmm_callback_memory_resource_new", |out, err| unsafe {
            native::rmm_callback_memory_resource_new(
                Some(allocate_callback),
                Some(deallocate_callback),
                context.cast(),
                Some(release_callbacks),
                native::ACCESS_DEVICE,
                out,
                err,
            )
        });
        Ok(leaf(
            mr.into_py_result()?,
            Self {
                callables: Some(callables),
            },
        ))
    }

    fn __traverse__(
        &self,
        visit: pyo3::PyVisit<'_>,
    ) -> std::result::Result<(), pyo3::PyTraverseError> {
        match &self.callables {
            Some(callables) => callables.traverse(&visit, |c| vec![&c.allocate, &c.deallocate]),
            None => Ok(()),
        }
    }
}

/// A simulated device of `capacity` bytes: addresses that are never dereferenced, for exercising
/// sub-allocators without a GPU (an rmm-rs extra; librmm's `simulated_memory_resource`).
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource", name = "SimulatedMemoryResource")]
pub(crate) struct PySimulatedMemoryResource;

#[pymethods]
impl PySimulatedMemoryResource {
    #[new]
    fn py_new(capacity: usize) -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid out-pointers.
        let mr = adopt("rmm_simulated_memory_resource_new", |out, err| unsafe {
            native::rmm_simulated_memory_resource_new(capacity as u64, out, err)
        });
        Ok(leaf(mr.into_py_result()?, Self))
    }
}
