//! Bindings for `rmm_core::mr`: memory resources.
//!
//! Every resource class derives from `DeviceMemoryResource`, which holds the core `AnyResource`
//! (shared ownership) and implements `allocate` / `deallocate` once. A new resource is a subclass
//! with a constructor that builds its core value; nothing else.
//!
//! The GIL is released around every call into a resource: allocation may block (a pool growing, a
//! driver call synchronizing) and other Python threads keep running meanwhile.

use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use rmm_core::cuda::Stream;
use rmm_core::mr::kind::ResourceKind;
use rmm_core::mr::statistics::Counter;
use rmm_core::mr::{CudaMemoryResource, PoolMemoryResource, StatisticsResourceAdaptor, SystemMemoryResource};
use rmm_core::{AnyResource, Error, MemoryResource, DEFAULT_ALIGNMENT};

use crate::error::{to_py_err, IntoPyResult};
use crate::owner::OwnerResource;

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

/// A size argument as RMM's Python API takes it: an int, or a string such as `"1 GiB"` or
/// `"512MB"` (RMM's `parse_bytes`: units b, kb..pb in powers of 1000, kib..pib in powers of 1024,
/// case-insensitive; a number without a unit is bytes). Anything else is a ValueError.
fn parse_bytes(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let Ok(text) = value.cast::<PyString>() else {
        return value.extract::<usize>();
    };
    let text = text.to_cow()?;
    let cannot = || PyValueError::new_err(format!("Could not parse {text:?} as a size in bytes"));
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
    let split = compact.trim_end_matches(|c: char| c.is_ascii_alphabetic()).len();
    let (number, unit) = compact.split_at(split);
    let multiplier: f64 = match unit {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "kib" => 1024f64,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        "pib" => 1024f64.powi(5),
        _ => return Err(cannot()),
    };
    let number: f64 = if number.is_empty() { 1.0 } else { number.parse().map_err(|_| cannot())? };
    let bytes = number * multiplier;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= usize::MAX as f64 {
        return Err(cannot());
    }
    Ok(bytes as usize)
}

fn optional_size(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    value.filter(|v| !v.is_none()).map(parse_bytes).transpose()
}

/// Base class of the adaptors and sub-allocators that own an upstream resource (RMM's
/// `rmm.mr.UpstreamResourceAdaptor`). The Python upstream object is kept here, as RMM keeps it, so
/// `upstream_mr` is the very object the constructor got; the core resource owns its upstream too, so
/// nothing is freed early even without this reference.
#[pyclass(extends = PyDeviceMemoryResource, subclass, frozen, module = "rmm.mr", name = "UpstreamResourceAdaptor")]
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
enum Backend<T> {
    Local(T),
    Owner(OwnerResource),
}

/// A coalescing best-fit pool over an upstream resource (RMM's `rmm.mr.PoolMemoryResource`).
///
/// `initial_pool_size=None` takes half of the current device's free memory (0 in host mode or over
/// a host-only upstream, where the pool grows on demand); `maximum_pool_size=None` means no limit.
/// Sizes are ints or strings such as "1 GiB", multiples of 256.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.mr", name = "PoolMemoryResource")]
pub(crate) struct PyPoolMemoryResource {
    pool: Backend<PoolMemoryResource>,
}

#[pymethods]
impl PyPoolMemoryResource {
    #[new]
    #[pyo3(signature = (upstream_mr, initial_pool_size = None, maximum_pool_size = None))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        initial_pool_size: Option<Bound<'_, PyAny>>,
        maximum_pool_size: Option<Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let initial = optional_size(initial_pool_size.as_ref())?;
        let maximum = optional_size(maximum_pool_size.as_ref())?;
        let upstream = upstream_mr.get().inner.clone();
        // The initial allocation may take a while (a large cudaMalloc): other threads keep running.
        let pool = py.detach(|| PoolMemoryResource::new(upstream, initial, maximum)).map_err(|e| match e {
            // RMM checks its sizes with RMM_EXPECTS (rmm::logic_error), which Python sees as RuntimeError.
            Error::InvalidArgument(message) => PyRuntimeError::new_err(message),
            other => to_py_err(other),
        })?;
        let base = PyDeviceMemoryResource::new(pool.clone());
        let adaptor = PyUpstreamResourceAdaptor { upstream: Some(upstream_mr.unbind()) };
        Ok(PyClassInitializer::from(base).add_subclass(adaptor).add_subclass(Self { pool: Backend::Local(pool) }))
    }

    /// Bytes the pool currently holds from its upstream.
    fn pool_size(&self) -> PyResult<usize> {
        match &self.pool {
            Backend::Local(pool) => Ok(pool.pool_size()),
            Backend::Owner(owner) => owner.pool_size().into_py_result(),
        }
    }
}

/// Counts the bytes and allocations that pass through it, in nestable frames (RMM's
/// `rmm.mr.StatisticsResourceAdaptor`).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.mr", name = "StatisticsResourceAdaptor")]
pub(crate) struct PyStatisticsResourceAdaptor {
    stats: Backend<StatisticsResourceAdaptor>,
}

/// RMM's `rmm.statistics.Statistics` from a (bytes, allocations) pair of counters.
fn statistics(py: Python<'_>, (bytes, count): (Counter, Counter)) -> PyResult<Py<PyAny>> {
    let class = py.import("rmm.statistics")?.getattr("Statistics")?;
    let object = class.call1((bytes.value, count.value, bytes.peak, count.peak, bytes.total, count.total))?;
    Ok(object.unbind())
}

impl PyStatisticsResourceAdaptor {
    fn counters(&self, py: Python<'_>) -> PyResult<(Counter, Counter)> {
        match &self.stats {
            Backend::Local(stats) => Ok(stats.counters()),
            Backend::Owner(owner) => py.detach(|| owner.counters()).into_py_result(),
        }
    }
}

#[pymethods]
impl PyStatisticsResourceAdaptor {
    #[new]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>) -> PyClassInitializer<Self> {
        let stats = StatisticsResourceAdaptor::new(upstream_mr.get().inner.clone());
        let base = PyDeviceMemoryResource::new(stats.clone());
        let adaptor = PyUpstreamResourceAdaptor { upstream: Some(upstream_mr.unbind()) };
        PyClassInitializer::from(base).add_subclass(adaptor).add_subclass(Self { stats: Backend::Local(stats) })
    }

    /// The counters of the current frame as an `rmm.statistics.Statistics`.
    #[getter]
    fn allocation_counts(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let counters = self.counters(py)?;
        statistics(py, counters)
    }

    /// Starts a new frame of zero counters; returns the counters from before the push.
    fn push_counters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // Push and pop wait for allocations in flight on other threads: without the GIL.
        let before = match &self.stats {
            Backend::Local(stats) => py.detach(|| stats.push_counters()),
            Backend::Owner(owner) => py.detach(|| owner.push_counters()).into_py_result()?,
        };
        statistics(py, before)
    }

    /// Ends the current frame, folds it into its parent and returns it (values may be negative).
    /// Raises IndexError when no frame was pushed, as RMM does.
    fn pop_counters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let popped = match &self.stats {
            Backend::Local(stats) => py.detach(|| stats.pop_counters()),
            Backend::Owner(owner) => py.detach(|| owner.pop_counters()),
        }
        .map_err(|e| match e {
            // RMM throws std::out_of_range here, which Cython raises as IndexError.
            Error::InvalidArgument(message) => PyIndexError::new_err(message),
            other => to_py_err(other),
        })?;
        statistics(py, popped)
    }
}

/// The Python object for a core resource that Python did not make (the registry's current
/// resource, set by C++, Rust or a reset): the most specific class this module knows for it, so
/// that e.g. a statistics adaptor set from C++ has readable counters here. Resources of this
/// module's rmm-core are recognised by downcast, librmm's by asking librmm
/// (`rmm_core::registry::owner`); anything else is a `DeviceMemoryResource`. Upstreams are
/// wrapped the same way when they are visible (this module's own adaptors).
pub(crate) fn wrap(py: Python<'_>, resource: AnyResource) -> PyResult<Py<PyAny>> {
    let upstream = |inner: &AnyResource| -> PyResult<Option<Py<PyDeviceMemoryResource>>> {
        Ok(Some(wrap(py, inner.clone())?.bind(py).cast::<PyDeviceMemoryResource>()?.clone().unbind()))
    };
    let base = PyClassInitializer::from(PyDeviceMemoryResource { inner: resource.clone() });
    if let Some(stats) = resource.downcast_ref::<StatisticsResourceAdaptor>() {
        let adaptor = PyUpstreamResourceAdaptor { upstream: upstream(stats.upstream())? };
        let init = base.add_subclass(adaptor).add_subclass(PyStatisticsResourceAdaptor { stats: Backend::Local(stats.clone()) });
        return Ok(Py::new(py, init)?.into_any());
    }
    if let Some(pool) = resource.downcast_ref::<PoolMemoryResource>() {
        let adaptor = PyUpstreamResourceAdaptor { upstream: upstream(pool.upstream_resource())? };
        let init = base.add_subclass(adaptor).add_subclass(PyPoolMemoryResource { pool: Backend::Local(pool.clone()) });
        return Ok(Py::new(py, init)?.into_any());
    }
    if let Some(owner) = OwnerResource::statistics(&resource) {
        let adaptor = PyUpstreamResourceAdaptor { upstream: None };
        let init = base.add_subclass(adaptor).add_subclass(PyStatisticsResourceAdaptor { stats: Backend::Owner(owner) });
        return Ok(Py::new(py, init)?.into_any());
    }
    if let Some(owner) = OwnerResource::pool(&resource) {
        let adaptor = PyUpstreamResourceAdaptor { upstream: None };
        let init = base.add_subclass(adaptor).add_subclass(PyPoolMemoryResource { pool: Backend::Owner(owner) });
        return Ok(Py::new(py, init)?.into_any());
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
    Ok(Py::new(py, base)?.into_any())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceMemoryResource>()?;
    m.add_class::<PyUpstreamResourceAdaptor>()?;
    m.add_class::<PyCudaMemoryResource>()?;
    m.add_class::<PySystemMemoryResource>()?;
    m.add_class::<PyPoolMemoryResource>()?;
    m.add_class::<PyStatisticsResourceAdaptor>()?;
    Ok(())
}
