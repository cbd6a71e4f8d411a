//! Bindings for `rmm_core::mr`: RMM's `rmm.pylibrmm.memory_resource` (re-exported as `rmm.mr`).
//!
//! Every resource class derives from `DeviceMemoryResource`, which holds the core `AnyResource`
//! (shared ownership) and implements `allocate` / `deallocate` once; resources with an upstream
//! derive from `UpstreamResourceAdaptor`, which keeps the upstream's Python object. A new resource
//! is a subclass with a constructor that builds its core value, in the file of its kind:
//! `base.rs` (resources over the driver or the host), `suballoc.rs` (pool, arena, fixed-size,
//! binning), `adaptors.rs` (limiting, logging, statistics, tracking, failure callback, prefetch).
//!
//! The GIL is released around every call into a resource: allocation may block (a pool growing, a
//! driver call synchronizing) and other Python threads keep running meanwhile.

use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::PyClass;
use rmm_core::mr::{
    ArenaMemoryResource, BinningMemoryResource, CudaAsyncMemoryResource, FixedSizeMemoryResource,
    LimitingResourceAdaptor, LoggingResourceAdaptor, PoolMemoryResource,
    PrefetchResourceAdaptor, StatisticsResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::mr::kind::ResourceKind;
use rmm_core::{AnyResource, MemoryResource, DEFAULT_ALIGNMENT};

use crate::error::{clear_parked, IntoPyResult};
use crate::owner::OwnerResource;
use crate::stream::StreamArg;

mod adaptors;
mod base;
mod suballoc;

pub(crate) use adaptors::PyLoggingResourceAdaptor;
use adaptors::{
    PyFailureCallbackResourceAdaptor, PyLimitingResourceAdaptor, PyPrefetchResourceAdaptor, PyStatisticsResourceAdaptor,
    PyTrackingResourceAdaptor,
};
use base::{
    PyCallbackMemoryResource, PyCudaAsyncManagedMemoryResource, PyCudaAsyncMemoryResource, PyCudaAsyncViewMemoryResource,
    PyCudaMemoryResource, PyManagedMemoryResource, PyPinnedHostMemoryResource, PySamHeadroomMemoryResource,
    PySystemMemoryResource,
};
use suballoc::{PyArenaMemoryResource, PyBinningMemoryResource, PyFixedSizeMemoryResource, PyPoolMemoryResource};

/// Base class of all memory resources (RMM's `DeviceMemoryResource`).
#[pyclass(subclass, frozen, module = "rmm.pylibrmm.memory_resource", name = "DeviceMemoryResource")]
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
    /// Allocates `nbytes` bytes (256-byte aligned) ordered on `stream` (a `Stream`, default
    /// `DEFAULT_STREAM`; `None` is a TypeError) and returns the pointer as an int (0 for 0 bytes).
    /// Raises MemoryError when the resource is out of memory.
    #[pyo3(signature = (nbytes, stream = StreamArg::Default))]
    fn allocate(&self, py: Python<'_>, nbytes: usize, stream: StreamArg) -> PyResult<usize> {
        let stream = stream.stream(py);
        let mr = &self.inner;
        clear_parked();
        py.detach(|| mr.allocate(stream, nbytes, DEFAULT_ALIGNMENT).map(|p| p as usize)).into_py_alloc_result()
    }

    /// Returns memory from `allocate(nbytes, stream)`. As in RMM, the pointer must come from this
    /// resource (or an equal one) with the same size, and must not be used afterwards.
    #[pyo3(signature = (ptr, nbytes, stream = StreamArg::Default))]
    fn deallocate(&self, py: Python<'_>, ptr: usize, nbytes: usize, stream: StreamArg) -> PyResult<()> {
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

    /// The resource of a `"rmm.memory_resource.v1"` capsule as the most specific resource class
    /// known here (the capsule stays valid). TypeError for anything else, ValueError for an
    /// invalid capsule.
    #[staticmethod]
    fn _from_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        wrap(py, rmm::python::resource_from_capsule(capsule)?)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let inner = &slf.get().inner;
        Ok(format!("<{} {} ({}-accessible)>", slf.get_type().qualname()?, inner.name(), inner.access()))
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
    resource: impl MemoryResource,
    class: T,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(PyDeviceMemoryResource::new(resource)).add_subclass(class)
}

/// The initializer of an adaptor: the base holding `resource`, the upstream's Python object, then `class`.
pub(crate) fn adaptor<T: PyClass<BaseType = PyUpstreamResourceAdaptor>>(
    resource: impl MemoryResource,
    upstream: &Bound<'_, PyDeviceMemoryResource>,
    class: T,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(PyDeviceMemoryResource::new(resource))
        .add_subclass(PyUpstreamResourceAdaptor { upstream: Some(upstream.clone().unbind()) })
        .add_subclass(class)
}

/// Base class of the adaptors and sub-allocators that own an upstream resource (RMM's
/// `UpstreamResourceAdaptor`). The Python upstream object is kept here, as RMM keeps it, so
/// `upstream_mr` is the very object the constructor got; the core resource owns its upstream too, so
/// nothing is freed early even without this reference.
#[pyclass(extends = PyDeviceMemoryResource, subclass, frozen, module = "rmm.pylibrmm.memory_resource", name = "UpstreamResourceAdaptor")]
pub(crate) struct PyUpstreamResourceAdaptor {
    /// `None` only for an adaptor that another language made (C++ through librmm): its upstream is
    /// not visible from here.
    upstream: Option<Py<PyDeviceMemoryResource>>,
}

#[pymethods]
impl PyUpstreamResourceAdaptor {
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

/// The two ways to reach a pool's or statistics adaptor's own state: the core value of this module's
/// rmm-core, or librmm's accessors for one that librmm made (see `owner.rs`).
#[derive(Clone)]
pub(crate) enum Backend<T> {
    Local(T),
    Owner(OwnerResource),
}

/// The Python object for a core resource that Python did not make (the registry's current
/// resource, set by C++, Rust or a reset): the most specific class this module knows for it, so
/// that e.g. a statistics adaptor set from C++ has readable counters here. Resources of this
/// module's rmm-core are recognised by downcast, librmm's by asking librmm what they are
/// (`rmm_core::registry::owner`); anything else is a `DeviceMemoryResource`. Upstreams are
/// wrapped the same way when they are visible (this module's own adaptors).
pub(crate) fn wrap(py: Python<'_>, resource: AnyResource) -> PyResult<Py<PyAny>> {
    let upstream = |inner: &AnyResource| -> PyResult<Option<Py<PyDeviceMemoryResource>>> {
        Ok(Some(wrap(py, inner.clone())?.bind(py).cast::<PyDeviceMemoryResource>()?.clone().unbind()))
    };
    let base = PyClassInitializer::from(PyDeviceMemoryResource { inner: resource.clone() });
    macro_rules! adapted {
        ($upstream:expr, $class:expr) => {{
            let adaptor = PyUpstreamResourceAdaptor { upstream: $upstream };
            return Ok(Py::new(py, base.add_subclass(adaptor).add_subclass($class))?.into_any());
        }};
    }
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        adapted!(upstream(stats.upstream())?, PyStatisticsResourceAdaptor::local(stats.clone()));
    }
    if let Some(pool) = resource.downcast_ref::<PoolMemoryResource>() {
        adapted!(upstream(pool.upstream_resource())?, PyPoolMemoryResource::local(pool.clone()));
    }
    if let Some(tracking) = resource.downcast_ref::<TrackingResourceAdaptor>() {
        adapted!(upstream(tracking.upstream())?, PyTrackingResourceAdaptor { tracking: tracking.clone() });
    }
    if let Some(limiting) = resource.downcast_ref::<LimitingResourceAdaptor>() {
        adapted!(upstream(limiting.upstream())?, PyLimitingResourceAdaptor { limiting: limiting.clone() });
    }
    if let Some(logging) = resource.downcast_ref::<LoggingResourceAdaptor>() {
        adapted!(upstream(logging.upstream())?, PyLoggingResourceAdaptor::wrapped(logging.clone()));
    }
    if let Some(prefetch) = resource.downcast_ref::<PrefetchResourceAdaptor>() {
        adapted!(upstream(prefetch.upstream())?, PyPrefetchResourceAdaptor);
    }
    if let Some(arena) = resource.downcast_ref::<ArenaMemoryResource>() {
        adapted!(upstream(arena.upstream())?, PyArenaMemoryResource);
    }
    if let Some(fixed) = resource.downcast_ref::<FixedSizeMemoryResource>() {
        adapted!(upstream(fixed.upstream_resource())?, PyFixedSizeMemoryResource);
    }
    if let Some(binning) = resource.downcast_ref::<BinningMemoryResource>() {
        adapted!(upstream(binning.upstream_resource())?, PyBinningMemoryResource::wrapped(py, binning.clone())?);
    }
    // librmm's own adaptors: librmm says what they are (`rmm_core::registry::owner`).
    if let Some(owner) = OwnerResource::statistics(&resource) {
        adapted!(None, PyStatisticsResourceAdaptor::owner(owner));
    }
    if let Some(owner) = OwnerResource::pool(&resource) {
        adapted!(None, PyPoolMemoryResource::owner(owner));
    }
    // Stateless resources behave the same whichever copy of rmm-core made them (the owner says
    // what its own are).
    let kind = rmm_core::registry::owner::resource_kind(&resource);
    if kind == Some(ResourceKind::Cuda) {
        return Ok(Py::new(py, base.add_subclass(PyCudaMemoryResource))?.into_any());
    }
    if kind == Some(ResourceKind::System) {
        return Ok(Py::new(py, base.add_subclass(PySystemMemoryResource))?.into_any());
    }
    if kind == Some(ResourceKind::Managed) {
        return Ok(Py::new(py, base.add_subclass(PyManagedMemoryResource))?.into_any());
    }
    if kind == Some(ResourceKind::PinnedHost) {
        return Ok(Py::new(py, base.add_subclass(PyPinnedHostMemoryResource))?.into_any());
    }
    if resource.downcast_ref::<CudaAsyncMemoryResource>().is_some() {
        return Ok(Py::new(py, base.add_subclass(PyCudaAsyncMemoryResource))?.into_any());
    }
    Ok(Py::new(py, base)?.into_any())
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
    m.add_class::<PyPoolMemoryResource>()?;
    m.add_class::<PyArenaMemoryResource>()?;
    m.add_class::<PyFixedSizeMemoryResource>()?;
    m.add_class::<PyBinningMemoryResource>()?;
    m.add_class::<PyLimitingResourceAdaptor>()?;
    m.add_class::<PyLoggingResourceAdaptor>()?;
    m.add_class::<PyStatisticsResourceAdaptor>()?;
    m.add_class::<PyTrackingResourceAdaptor>()?;
    m.add_class::<PyFailureCallbackResourceAdaptor>()?;
    m.add_class::<PyPrefetchResourceAdaptor>()?;
    Ok(())
}
