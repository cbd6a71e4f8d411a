//! Bindings for the memory resources: RMM's `rmm.pylibrmm.memory_resource` (re-exported as `rmm.mr`).
//!
//! Every resource class derives from `DeviceMemoryResource`, which holds the resource as a core
//! `AnyResource` (shared ownership of a librmm handle, see `native.rs`) and implements `allocate` /
//! `deallocate` once; resources with an upstream derive from `UpstreamResourceAdaptor`, which keeps
//! the upstream's Python object. A new resource is a subclass whose constructor calls librmm's
//! `rmm_<name>_new`, in the file of its kind: `base.rs` (resources over the driver or the host),
//! `suballoc.rs` (pool, arena, fixed-size, binning), `adaptors.rs` (aligned, limiting, logging,
//! statistics, tracking, thread-safe, failure callback, prefetch); and an arm in [`wrap`].
//!
//! The GIL is released around every call into a resource: allocation may block (a pool growing, a
//! driver call synchronizing) and other Python threads keep running meanwhile.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};
use pyo3::PyClass;
use rmm_core::mr::kind::ResourceKind;
use rmm_core::resource::rmm_resource;
use rmm_core::{AnyResource, MemoryResource, DEFAULT_ALIGNMENT};

use crate::error::{clear_parked, IntoPyResult};
use crate::stream::StreamArg;

mod adaptors;
mod base;
mod expandable_pool;
mod suballoc;

pub(crate) use adaptors::PyLoggingResourceAdaptor;
use adaptors::{
    PyAlignedResourceAdaptor, PyFailureCallbackResourceAdaptor, PyLimitingResourceAdaptor,
    PyPrefetchResourceAdaptor, PyRecordingResourceAdaptor, PyStatisticsResourceAdaptor,
    PyThreadSafeResourceAdaptor, PyTrackingResourceAdaptor,
};
use base::{
    PyCallbackMemoryResource, PyCudaAsyncManagedMemoryResource, PyCudaAsyncMemoryResource,
    PyCudaAsyncViewMemoryResource, PyCudaMemoryResource, PyManagedMemoryResource,
    PyPinnedHostMemoryResource, PySamHeadroomMemoryResource, PySimulatedMemoryResource,
    PySystemMemoryResource,
};
use expandable_pool::{PyExpandablePoolMemoryResource, PyImportedAllocation};
use suballoc::{
    PyArenaMemoryResource, PyBinningMemoryResource, PyFixedSizeMemoryResource, PyPoolMemoryResource,
};

/// Python callables that librmm's callback context and the resource's Python object share. The
/// object reports them to the cycle collector (`__traverse__`) and drops them when the collector
/// clears a cycle through them (`__clear__`); a callback whose callable is gone reports an error
/// (or, for a failure callback, gives up) instead of calling it.
pub(crate) struct SharedCallables<T>(std::sync::Arc<std::sync::Mutex<Option<T>>>);

impl<T> SharedCallables<T> {
    pub(crate) fn new(callables: T) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(Some(callables))))
    }

    pub(crate) fn share(&self) -> Self {
        Self(self.0.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<T>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What `get` picks out of the callables, while they are there. Never held across a call into
    /// Python, so the lock cannot be waited for with the GIL held by its holder.
    pub(crate) fn with<R>(&self, get: impl FnOnce(&T) -> R) -> Option<R> {
        self.lock().as_ref().map(get)
    }

    /// Visits the callables (skipped while another thread reads them: that only delays a collection).
    pub(crate) fn traverse(
        &self,
        visit: &pyo3::PyVisit<'_>,
        each: impl Fn(&T) -> Vec<&Py<PyAny>>,
    ) -> Result<(), pyo3::PyTraverseError> {
        if let Ok(held) = self.0.try_lock() {
            if let Some(callables) = held.as_ref() {
                for callable in each(callables) {
                    visit.call(callable)?;
                }
            }
        }
        Ok(())
    }

    /// Drops the callables (the collector breaking a cycle).
    pub(crate) fn clear(&self) {
        let taken = self.lock().take();
        drop(taken);
    }
}

/// Base class of all memory resources (RMM's `DeviceMemoryResource`).
#[pyclass(
    subclass,
    frozen,
    weakref,
    module = "rmm.pylibrmm.memory_resource",
    name = "DeviceMemoryResource"
)]
pub(crate) struct PyDeviceMemoryResource {
    pub(crate) inner: AnyResource,
}

impl PyDeviceMemoryResource {
    /// The C handle of the resource, borrowed: valid while this object lives.
    pub(crate) fn handle(&self) -> rmm_resource {
        self.inner.borrow_handle()
    }
}

/// The borrowed C handle of a resource object (any class deriving from `DeviceMemoryResource`).
pub(crate) fn handle_of<T: PyClass>(object: &Bound<'_, T>) -> PyResult<rmm_resource> {
    Ok(object
        .as_any()
        .cast::<PyDeviceMemoryResource>()?
        .get()
        .handle())
}

#[pymethods]
impl PyDeviceMemoryResource {
    /// Holds no Python object. Defined so that this base's traverse function differs from the
    /// default one PyO3 gives its field-less subclasses: PyO3 finds a class's base traverse by
    /// comparing function addresses, and identical defaults folded into one address at the top
    /// and at the bottom of a hierarchy with `UpstreamResourceAdaptor`'s in between made that
    /// search loop back into itself (a stack overflow in `gc.collect()`).
    fn __traverse__(&self, _visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        std::hint::black_box(&self.inner);
        Ok(())
    }

    /// Allocates `nbytes` bytes (256-byte aligned) ordered on `stream` (a `Stream`, default
    /// `DEFAULT_STREAM`; `None` is a TypeError) and returns the pointer as an int (0 for 0 bytes).
    /// Raises MemoryError when the resource is out of memory.
    #[pyo3(signature = (nbytes, stream = StreamArg::Default))]
    fn allocate(&self, py: Python<'_>, nbytes: usize, stream: StreamArg) -> PyResult<usize> {
        let stream = stream.stream(py);
        let mr = &self.inner;
        clear_parked();
        let _frames = crate::timeline::frames_for_detach(py);
        py.detach(|| {
            mr.allocate(stream, nbytes, DEFAULT_ALIGNMENT)
                .map(|p| p as usize)
        })
        .into_py_alloc_result()
    }

    /// Returns memory from `allocate(nbytes, stream)`. As in RMM, the pointer must come from this
    /// resource (or an equal one) with the same size, and must not be used afterwards.
    #[pyo3(signature = (ptr, nbytes, stream = StreamArg::Default))]
    fn deallocate(
        &self,
        py: Python<'_>,
        ptr: usize,
        nbytes: usize,
        stream: StreamArg,
    ) -> PyResult<()> {
        let stream = stream.stream(py);
        let mr = &self.inner;
        py.detach(|| {
            // SAFETY: the caller's contract, documented above and in RMM: `ptr` came from this
            // resource with these arguments and is freed once.
            unsafe { mr.deallocate(stream, ptr as *mut u8, nbytes, DEFAULT_ALIGNMENT) }
        })
        .into_py_result()
    }

    /// RMM's name of the resource, e.g. "cuda_memory_resource" (an rmm-rs extra).
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// A `"rmm.memory_resource.v1"` capsule holding a reference to this resource (no copy), for
    /// C++ (`rmm::resource_from_python`), Rust or another module.
    fn _to_capsule(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        rmm::python::resource_to_capsule(py, self.inner.clone())
    }

    /// The resource of a `"rmm.memory_resource.v1"` capsule as the object of its class (the one
    /// already alive for it, if any; the capsule stays valid). TypeError for anything else,
    /// ValueError for an invalid capsule.
    #[staticmethod]
    fn _from_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, rmm::python::resource_from_capsule(capsule)?)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let inner = &slf.get().inner;
        Ok(format!(
            "<{} {} ({}-accessible)>",
            slf.get_type().qualname()?,
            inner.name(),
            inner.access()
        ))
    }
}

/// A size argument as RMM's Python API takes it: an int, or a string such as `"1 GiB"` or
/// `"512MB"` (`rmm_core::size::parse_bytes`, RMM's pattern). Anything else is a ValueError.
pub(crate) fn parse_bytes(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let Ok(text) = value.cast::<PyString>() else {
        return value.extract::<usize>();
    };
    rmm_core::size::parse_bytes(&text.to_cow()?).into_py_result()
}

/// An optional size (`None` stays `None`).
pub(crate) fn optional_size(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    value.filter(|v| !v.is_none()).map(parse_bytes).transpose()
}

/// The initializer of a resource with no upstream: the base class holding `resource`, then `class`.
pub(crate) fn leaf<T: PyClass<BaseType = PyDeviceMemoryResource>>(
    resource: AnyResource,
    class: T,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(PyDeviceMemoryResource { inner: resource }).add_subclass(class)
}

/// The initializer of an adaptor: the base holding `resource`, the upstream's Python object (`None`
/// when it is not known), then `class`.
pub(crate) fn adaptor<T: PyClass<BaseType = PyUpstreamResourceAdaptor>>(
    resource: AnyResource,
    upstream: Option<&Bound<'_, PyDeviceMemoryResource>>,
    class: T,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(PyDeviceMemoryResource { inner: resource })
        .add_subclass(PyUpstreamResourceAdaptor {
            upstream: upstream.map(|u| u.clone().unbind()),
        })
        .add_subclass(class)
}

/// Base class of the adaptors and sub-allocators that own an upstream resource (RMM's
/// `UpstreamResourceAdaptor`). The Python upstream object is kept here, as RMM keeps it, so
/// `upstream_mr` is the very object the constructor got; the resource owns its upstream too, so
/// nothing is freed early even without this reference.
#[pyclass(extends = PyDeviceMemoryResource, subclass, frozen, module = "rmm.pylibrmm.memory_resource", name = "UpstreamResourceAdaptor")]
pub(crate) struct PyUpstreamResourceAdaptor {
    /// `None` only for an adaptor made outside Python whose upstream librmm cannot name.
    upstream: Option<Py<PyDeviceMemoryResource>>,
}

#[pymethods]
impl PyUpstreamResourceAdaptor {
    /// The upstream object, for the cycle collector; never cleared (RMM's `no_gc_clear`): the
    /// resource itself holds its upstream for as long as it lives.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        if let Some(upstream) = &self.upstream {
            visit.call(upstream)?;
        }
        Ok(())
    }

    /// The upstream resource (None for an adaptor made outside Python whose upstream is unknown).
    #[getter]
    fn upstream_mr(&self, py: Python<'_>) -> Option<Py<PyDeviceMemoryResource>> {
        self.upstream.as_ref().map(|u| u.clone_ref(py))
    }

    /// The upstream resource (RMM's `get_upstream()`).
    fn get_upstream(&self, py: Python<'_>) -> Option<Py<PyDeviceMemoryResource>> {
        self.upstream_mr(py)
    }
}

/// The Python objects alive for resources, by handle: a `weakref.WeakValueDictionary` keyed by
/// `(self, vtable)` of the handle. While an object lives it holds its resource, so no other resource
/// can have that handle meanwhile; a dead entry leaves by itself.
static OBJECTS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn objects(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    OBJECTS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("weakref")?
                    .getattr("WeakValueDictionary")?
                    .call0()?
                    .unbind(),
            )
        })
        .map(|o| o.bind(py))
}

fn key<'py>(py: Python<'py>, resource: &AnyResource) -> PyResult<Bound<'py, PyTuple>> {
    let handle = resource.borrow_handle();
    PyTuple::new(py, [handle.self_ as usize, handle.vtable as usize])
}

/// Notes `object` as the Python object of its resource, so [`wrap`] hands it out again (a resource
/// set from Python that comes back from the registry, or as another resource's upstream).
pub(crate) fn remember_object(object: &Bound<'_, PyDeviceMemoryResource>) -> PyResult<()> {
    let py = object.py();
    objects(py)?.set_item(key(py, &object.get().inner)?, object)
}

/// The Python object for a resource that reached Python without one (the registry's current
/// resource, set by C++, Rust or a reset; a capsule's; an upstream): the object alive for it if
/// there is one, else a new object of its class. librmm says once what the resource is
/// (`rmm_resource_kind`) and what its upstream is, which is wrapped the same way; a resource that
/// librmm did not make is a plain `DeviceMemoryResource`.
pub(crate) fn wrap(py: Python<'_>, resource: AnyResource) -> PyResult<Py<PyAny>> {
    let key = key(py, &resource)?;
    let known = objects(py)?.call_method1("get", (&key,))?;
    if !known.is_none() {
        return Ok(known.unbind());
    }
    let (kind, upstream) = crate::native::kind(&resource);
    let upstream = match upstream {
        Some(upstream) => Some(
            wrap(py, upstream)?
                .into_bound(py)
                .cast_into::<PyDeviceMemoryResource>()?,
        ),
        None => None,
    };
    let object = new_object(py, kind, resource, upstream.as_ref())?;
    objects(py)?.set_item(key, &object)?;
    Ok(object)
}

/// A new object of the class of `kind` for `resource`: one arm per kind of the kind list
/// (`rmm_core::mr::kind`, `RMM_RESOURCE_KIND_*`), so a kind without a class does not compile.
fn new_object(
    py: Python<'_>,
    kind: ResourceKind,
    resource: AnyResource,
    upstream: Option<&Bound<'_, PyDeviceMemoryResource>>,
) -> PyResult<Py<PyAny>> {
    fn made<T: PyClass>(py: Python<'_>, init: PyClassInitializer<T>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, init)?.into_any())
    }
    let r = resource;
    match kind {
        ResourceKind::Other => Ok(Py::new(py, PyDeviceMemoryResource { inner: r })?.into_any()),
        ResourceKind::Cuda => made(py, leaf(r, PyCudaMemoryResource)),
        ResourceKind::Managed => made(py, leaf(r, PyManagedMemoryResource)),
        ResourceKind::PinnedHost => made(py, leaf(r, PyPinnedHostMemoryResource)),
        ResourceKind::System => made(py, leaf(r, PySystemMemoryResource)),
        ResourceKind::SamHeadroom => made(py, leaf(r, PySamHeadroomMemoryResource)),
        ResourceKind::CudaAsync => made(py, leaf(r, PyCudaAsyncMemoryResource)),
        ResourceKind::CudaAsyncView => made(py, leaf(r, PyCudaAsyncViewMemoryResource)),
        ResourceKind::CudaAsyncManaged => made(py, leaf(r, PyCudaAsyncManagedMemoryResource)),
        ResourceKind::Callback => made(py, leaf(r, PyCallbackMemoryResource::wrapped())),
        ResourceKind::Simulated => made(py, leaf(r, PySimulatedMemoryResource)),
        ResourceKind::Pool => made(py, adaptor(r, upstream, PyPoolMemoryResource)),
        ResourceKind::FixedSize => made(py, adaptor(r, upstream, PyFixedSizeMemoryResource)),
        ResourceKind::Binning => made(
            py,
            adaptor(r, upstream, PyBinningMemoryResource::wrapped(py)),
        ),
        ResourceKind::Arena => made(py, adaptor(r, upstream, PyArenaMemoryResource)),
        ResourceKind::Aligned => made(py, adaptor(r, upstream, PyAlignedResourceAdaptor)),
        ResourceKind::Limiting => made(py, adaptor(r, upstream, PyLimitingResourceAdaptor)),
        ResourceKind::Logging => made(py, adaptor(r, upstream, PyLoggingResourceAdaptor)),
        ResourceKind::Statistics => made(py, adaptor(r, upstream, PyStatisticsResourceAdaptor)),
        ResourceKind::Tracking => made(py, adaptor(r, upstream, PyTrackingResourceAdaptor)),
        ResourceKind::ThreadSafe => made(py, adaptor(r, upstream, PyThreadSafeResourceAdaptor)),
        ResourceKind::Prefetch => made(py, adaptor(r, upstream, PyPrefetchResourceAdaptor)),
        ResourceKind::Recording => made(py, adaptor(r, upstream, PyRecordingResourceAdaptor)),
        ResourceKind::FailureCallback => made(
            py,
            adaptor(
                r,
                upstream,
                PyFailureCallbackResourceAdaptor { callback: None },
            ),
        ),
        ResourceKind::ExpandablePool => made(py, leaf(r, PyExpandablePoolMemoryResource)),
    }
}

/// `{kind code: class}` for every kind of librmm's kind list (`RMM_RESOURCE_KIND_*`): the class
/// of the object [`wrap`] makes for a resource of that kind (objects are made around a system
/// resource and dropped), for the tests that check that the list and the classes agree.
#[pyfunction]
fn _resource_classes(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    // SAFETY: valid out-pointers.
    let any = crate::native::adopt("rmm_system_memory_resource_new", |out, err| unsafe {
        crate::native::rmm_system_memory_resource_new(out, err)
    })
    .into_py_result()?;
    let classes = pyo3::types::PyDict::new(py);
    let mut code = 0;
    while let Some(kind) = ResourceKind::from_code(code) {
        classes.set_item(
            code,
            new_object(py, kind, any.clone(), None)?.bind(py).get_type(),
        )?;
        code += 1;
    }
    Ok(classes)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceMemoryResource>()?;
    m.add_class::<PyUpstreamResourceAdaptor>()?;
    m.add_class::<PyCudaMemoryResource>()?;
    m.add_class::<PyManagedMemoryResource>()?;
    m.add_class::<PySystemMemoryResource>()?;
    m.add_class::<PyPinnedHostMemoryResource>()?;
    m.add_class::<PySamHeadroomMemoryResource>()?;
    m.add_class::<PyCudaAsyncMemoryResource>()?;
    m.add_class::<PyCudaAsyncViewMemoryResource>()?;
    m.add_class::<PyCudaAsyncManagedMemoryResource>()?;
    m.add_class::<PyCallbackMemoryResource>()?;
    m.add_class::<PySimulatedMemoryResource>()?;
    m.add_class::<PyPoolMemoryResource>()?;
    m.add_class::<PyExpandablePoolMemoryResource>()?;
    m.add_class::<PyImportedAllocation>()?;
    m.add_class::<PyArenaMemoryResource>()?;
    m.add_class::<PyFixedSizeMemoryResource>()?;
    m.add_class::<PyBinningMemoryResource>()?;
    m.add_class::<PyAlignedResourceAdaptor>()?;
    m.add_class::<PyLimitingResourceAdaptor>()?;
    m.add_class::<PyLoggingResourceAdaptor>()?;
    m.add_class::<PyStatisticsResourceAdaptor>()?;
    m.add_class::<PyTrackingResourceAdaptor>()?;
    m.add_class::<PyThreadSafeResourceAdaptor>()?;
    m.add_class::<PyFailureCallbackResourceAdaptor>()?;
    m.add_class::<PyPrefetchResourceAdaptor>()?;
    m.add_class::<PyRecordingResourceAdaptor>()?;
    m.add_function(wrap_pyfunction!(_resource_classes, m)?)?;
    Ok(())
}
